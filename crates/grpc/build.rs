//! Compiles `proto/node.proto` with protox, so no system `protoc` is needed.

fn main() {
    let proto = "../../proto/node.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["../../proto"]).expect("proto/node.proto compiles");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // Small initial buffers per stream (see src/codec.rs).
        .codec_path("crate::codec::SessionCodec")
        .compile_fds(descriptors)
        .expect("the node session's Rust code generates");
}
