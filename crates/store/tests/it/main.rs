//! The conformance suite and the model test against the in-memory store.

use std::sync::Arc;

use async_trait::async_trait;
use kayra_store::Store;
use kayra_store::conformance::{Harness, model};
use kayra_store::mvcc::{MvccStore, Options};

struct Memory;

#[async_trait]
impl Harness for Memory {
    async fn open(&self) -> Arc<dyn Store> {
        let options = Options { watch_buffer: 64, ..Options::default() };
        Arc::new(MvccStore::in_memory(options).expect("a memory store opens"))
    }
}

async fn memory() -> Option<Memory> {
    Some(Memory)
}

kayra_store::conformance_tests!(memory);

#[test]
fn agrees_with_the_model() {
    model::check(&Memory, 1024);
}
