//! Tests of the node server over an in-memory application layer.
