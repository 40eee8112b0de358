//! The shared leases of expiring objects: objects of one resource that expire at the same
//! instant live on one store lease, granted when the first of them is written.

use std::collections::HashMap;
use std::time::SystemTime;

use kayra_api::validation::FieldError;

use crate::{Object, Registry, RegistryError, Resource, invalid};

/// The lease last granted for one resource's expiring objects. Objects that expire at the same
/// instant share it, so a Kind whose objects expire on whole minutes (Events) grants one lease a
/// minute instead of one per object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SharedLease {
    expires: SystemTime,
    id: kayra_store::LeaseId,
    /// Whether a second object was put on it: then it is never given back early.
    shared: bool,
}

impl Registry {
    /// The lease an updated object lives on: the one it has while its expiry stays, a new one
    /// when its expiry moves, none when it no longer expires. Answers the lease and, when one was
    /// granted here, its id (to give back if the write loses a race).
    pub(crate) async fn lease_for_update(
        &self,
        resource: &Resource,
        old: &Object,
        object: &Object,
        current: Option<kayra_store::LeaseId>,
    ) -> Result<(Option<kayra_store::LeaseId>, Option<kayra_store::LeaseId>), RegistryError> {
        let Some(expires) = resource.strategy.expires_at(object) else { return Ok((None, None)) };
        if current.is_some() && resource.strategy.expires_at(old) == Some(expires) {
            return Ok((current, None));
        }
        let lease = self.lease_until(resource, object, expires).await?;
        Ok((Some(lease), Some(lease)))
    }

    /// A lease that ends at `expires` (at least a second from now): the one the resource's last
    /// object expiring then is on, else a new one; an object that would already have expired is
    /// invalid.
    pub(crate) async fn lease_until(
        &self,
        resource: &Resource,
        object: &Object,
        expires: SystemTime,
    ) -> Result<kayra_store::LeaseId, RegistryError> {
        let ttl = expires.duration_since(self.clock.now()).map_err(|_| {
            let cause = FieldError::invalid(
                "metadata",
                "<expiration>",
                "the object would expire before it is written",
            );
            invalid(resource, object, vec![cause])
        })?;
        let prefix = resource.store_prefix(&self.root);
        if let Some(last) = self.shared_leases().get_mut(&prefix)
            && last.expires == expires
        {
            last.shared = true;
            return Ok(last.id);
        }
        let id = self.store.grant_lease(ttl.max(std::time::Duration::from_secs(1))).await?.id;
        self.shared_leases().insert(prefix, SharedLease { expires, id, shared: false });
        Ok(id)
    }

    /// Gives back a lease granted for a write that lost its race, unless another object may be
    /// on it (then it ends when it was to, with nothing or that object on it).
    pub(crate) async fn give_back(&self, resource: &Resource, lease: kayra_store::LeaseId) {
        {
            let mut leases = self.shared_leases();
            let prefix = resource.store_prefix(&self.root);
            match leases.get(&prefix) {
                Some(last) if last.id == lease && !last.shared => {
                    leases.remove(&prefix);
                }
                _ => return,
            }
        }
        let _ = self.store.revoke_lease(lease).await;
    }

    /// Stops offering `lease` to objects that expire when it ends.
    pub(crate) fn forget_lease(&self, resource: &Resource, lease: kayra_store::LeaseId) {
        let mut leases = self.shared_leases();
        let prefix = resource.store_prefix(&self.root);
        if leases.get(&prefix).is_some_and(|last| last.id == lease) {
            leases.remove(&prefix);
        }
    }

    fn shared_leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, SharedLease>> {
        self.leases.lock().expect("the lease table's lock is never held across a panic")
    }
}
