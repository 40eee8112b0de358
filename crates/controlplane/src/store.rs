//! The store the configuration names: sled under the data directory, an etcd cluster, or memory.

use std::sync::Arc;

use kayra_store::Store;
use kayra_store::mvcc::{MvccStore, Options};

use crate::ControlPlaneError;
use crate::config::{Config, StoreKind};

/// Opens the configured store.
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, ControlPlaneError> {
    let failed = |what: String| move |source| ControlPlaneError::Store { what, source };
    Ok(match config.store {
        StoreKind::Sled => {
            let path = config.data_dir.join("store");
            Arc::new(
                kayra_store_sled::open(&path, Options::default())
                    .map_err(failed(format!("cannot open the store at {}", path.display())))?,
            )
        }
        StoreKind::Memory => Arc::new(
            MvccStore::in_memory(Options::default())
                .map_err(failed("cannot open a store in memory".into()))?,
        ),
        StoreKind::Etcd => {
            let options =
                kayra_store_etcd::EtcdOptions::new(config.etcd.endpoints.clone(), config.etcd.prefix.clone());
            Arc::new(
                kayra_store_etcd::EtcdStore::connect(options)
                    .await
                    .map_err(failed(format!("cannot reach etcd at {}", config.etcd.endpoints.join(","))))?,
            )
        }
    })
}
