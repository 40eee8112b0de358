//! Every stored Kind's merge schema is its published one, and reads.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_registry::Registry;
use kayra_store::mvcc::{MvccStore, Options};

use crate::ApplicationLayer;

#[tokio::test]
async fn every_stored_kind_merges_by_its_published_schema() {
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let layer = ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry);
    let mut read = 0;
    for resource in layer.stored_resources() {
        // Read at the Kind's first write; a schema that does not read would refuse every write.
        let _ = resource.strategy.merge_schema();
        read += 1;
    }
    assert!(read >= 10, "{read} stored Kinds");
}
