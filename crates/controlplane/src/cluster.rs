//! Which cluster a store belongs to. The first controller of a platform and region to serve
//! from a store records there the hash of its cluster CA's public key (the `--ca-cert-hash` a
//! node joins with); every replica of that platform and region that starts afterwards must hold
//! the same CA, or it refuses to start before it writes anything: a replica initialised for
//! another cluster, pointed at this one's etcd, would otherwise serve this cluster's objects
//! under certificates nobody here trusts. Instances of other platforms or regions may share the
//! store (their catalogs are kept apart), each with its own CA.

use kayra_store::{Compare, Op, Store, StoreError, Txn, TxnResult};

use crate::ControlPlaneError;
use crate::config::Config;

/// The key the CA hash of `platform`'s `region` is kept under, beside (not under) the registry's
/// objects.
pub fn ca_key(platform: &str, region: &str) -> String {
    format!("/kayra/cluster/{platform}/{region}/ca-cert-hash")
}

/// Records `ca_hash` as the CA of `platform`'s `region` in the store, or checks it against the
/// one recorded.
pub async fn claim(
    store: &dyn Store,
    platform: &str,
    region: &str,
    ca_hash: &str,
) -> Result<(), ControlPlaneError> {
    let key = ca_key(platform, region);
    let unreadable = |source: StoreError| ControlPlaneError::Store {
        what: "cannot read which cluster the store belongs to".to_owned(),
        source,
    };
    let record = Txn {
        compares: vec![Compare::Absent(key.clone())],
        ops: vec![Op::put(key.clone(), ca_hash.as_bytes().to_vec())],
    };
    let recorded = match store.txn(record).await.map_err(unreadable)? {
        TxnResult::Applied { .. } => return Ok(()),
        TxnResult::Conflict { current, .. } => current.into_iter().flatten().next(),
    };
    let recorded = match recorded {
        Some(kv) => String::from_utf8_lossy(&kv.value).into_owned(),
        None => store
            .get(&key)
            .await
            .map_err(unreadable)?
            .map_or_else(String::new, |kv| String::from_utf8_lossy(&kv.value).into_owned()),
    };
    if recorded == ca_hash {
        return Ok(());
    }
    Err(ControlPlaneError::Invalid(format!(
        "the store belongs to another cluster: the CA of {platform}/{region} there is {recorded}, this data \
         directory's is {ca_hash}; \
         a replica serves with a copy of the data directory `kayra-controller init` wrote for its cluster \
         (pki/ca.crt and pki/ca.key), or points at its own cluster's store"
    )))
}

/// The hash of the data directory's CA, once `init` has written one.
pub(crate) fn local_ca(config: &Config) -> Result<Option<String>, ControlPlaneError> {
    if !crate::pki::pki_dir(&config.data_dir).join("ca.crt").exists() {
        return Ok(None);
    }
    crate::token::ca_cert_hash(config).map(Some)
}

#[cfg(test)]
mod tests {
    use kayra_store::mvcc::{MvccStore, Options};

    use super::*;

    #[tokio::test]
    async fn the_first_ca_is_recorded_and_another_is_refused() {
        let store = MvccStore::in_memory(Options::default()).expect("a store");
        claim(&store, "prod", "eu", "sha256:aaaa").await.expect("the first claim records the CA");
        claim(&store, "prod", "eu", "sha256:aaaa").await.expect("the same CA starts again");
        let refused = claim(&store, "prod", "eu", "sha256:bbbb").await.expect_err("another CA is refused");
        let message = refused.to_string();
        assert!(message.contains("another cluster") && message.contains("sha256:aaaa"), "{message}");
        assert!(message.contains("sha256:bbbb"), "{message}");
        let kept = store.get(&ca_key("prod", "eu")).await.expect("readable").expect("recorded");
        assert_eq!(kept.value, b"sha256:aaaa", "the refused replica wrote nothing");
        claim(&store, "sandbox", "eu", "sha256:bbbb").await.expect("another platform has its own CA");
    }
}
