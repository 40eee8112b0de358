//! Build-time only: protoc-bin-vendored is unpacked for tools/protoc.
fn main() {}
