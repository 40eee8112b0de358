//! Creating an object: the server's stamps (uid, creationTimestamp, generation), generated
//! names, and the first write of its key (on a lease when it expires).

use kayra_api::validation::FieldError;
use kayra_store::{Compare, Op, Outcome, Txn};
use serde_json::{Value, json};

use crate::admission::Operation;
use crate::{
    Managed, Object, RETRIES, Registry, RegistryError, Resource, WriteOptions, invalid, meta_str, object,
};

impl Registry {
    /// Creates an object in `namespace` (ignored for cluster-scoped resources).
    pub async fn create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        body: Value,
        options: WriteOptions,
    ) -> Result<Object, RegistryError> {
        let object = self.body(resource, namespace, body)?;
        self.insert(resource, namespace, object, options, Managed::Recorded).await
    }

    /// Creates `object` (its envelope checked), its managers recorded as its creator's or,
    /// for an apply that creates, as decided by the apply.
    pub(crate) async fn insert(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        mut object: Object,
        options: WriteOptions,
        managed: Managed,
    ) -> Result<Object, RegistryError> {
        let metadata = object::metadata_mut(&mut object);
        if let Some(rv) = metadata.get("resourceVersion").and_then(Value::as_str).filter(|rv| !rv.is_empty())
        {
            let cause = FieldError::invalid(
                "metadata.resourceVersion",
                format!("\"{rv}\""),
                "resourceVersion should not be set on objects to be created",
            );
            return Err(invalid(resource, &object, vec![cause]));
        }
        let (uid, created) = (Value::String(uuid::Uuid::new_v4().to_string()), Value::String(self.now()));
        let stamp = |object: &mut Object| {
            let metadata = object::metadata_mut(object);
            for field in ["uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
                metadata.remove(field);
            }
            metadata.insert("uid".into(), uid.clone());
            metadata.insert("creationTimestamp".into(), created.clone());
            metadata.insert("generation".into(), json!(1));
        };
        stamp(&mut object);
        if resource.status_subresource && !resource.strategy.create_keeps_status() {
            object.remove("status");
        }
        resource.strategy.default(&mut object);
        if managed == Managed::Recorded {
            self.record_update(resource, None, &mut object, &options);
        }
        if options.mutate(resource, Operation::Create, &mut object, None)? {
            // A mutating plugin changes only what the writer could: identity stays the server's.
            stamp(&mut object);
        }
        let generate = meta_str(&object, "name").is_empty() && !meta_str(&object, "generateName").is_empty();
        let mut causes = object::check_metadata(&object);
        if !generate {
            causes.extend(name_causes(resource, meta_str(&object, "name")));
        }
        causes.extend(resource.strategy.validate(&object, None));
        causes.extend(crate::history::door_causes(resource, &object, None, options.part));
        if !causes.is_empty() {
            return Err(invalid(resource, &object, causes));
        }
        options.validate(resource, Operation::Create, &object, None)?;
        if resource.namespaced {
            self.check_namespace_accepts(namespace.unwrap_or_default()).await?;
        }
        for _ in 0..RETRIES {
            if generate {
                let name = format!("{}{}", meta_str(&object, "generateName"), random_suffix());
                if let Some(message) = resource.strategy.validate_name(&name) {
                    return Err(invalid(
                        resource,
                        &object,
                        vec![FieldError::invalid("metadata.generateName", format!("\"{name}\""), &message)],
                    ));
                }
                object::metadata_mut(&mut object).insert("name".into(), Value::String(name));
            }
            let name = meta_str(&object, "name").to_owned();
            let key = self.key(resource, namespace, &name);
            if options.dry_run {
                if self.store.get(&key).await?.is_some() {
                    return Err(already_exists(resource, &name));
                }
                return Ok(object);
            }
            match self.create_key(resource, &object, &key, &options).await? {
                Outcome::Applied(revision) => {
                    object::metadata_mut(&mut object)
                        .insert("resourceVersion".into(), Value::String(revision.to_string()));
                    return Ok(object);
                }
                Outcome::Conflict(_) if generate => continue,
                Outcome::Conflict(_) => return Err(already_exists(resource, &name)),
            }
        }
        Err(RegistryError::Conflict {
            resource: resource.qualified(),
            name: meta_str(&object, "generateName").to_owned(),
            message: "no free name could be generated; try again".to_owned(),
        })
    }

    /// Writes a new object's key, with its first history entry when its Kind keeps history;
    /// one that expires is attached to a lease that ends then.
    async fn create_key(
        &self,
        resource: &Resource,
        object: &Object,
        key: &str,
        options: &WriteOptions,
    ) -> Result<Outcome, RegistryError> {
        let history = self.history_put(resource, key, object, options);
        let Some(expires) = resource.strategy.expires_at(object) else {
            let Some(history) = history else {
                return Ok(self.store.create(key, Self::encode(object)).await?);
            };
            let txn = Txn {
                compares: vec![Compare::Absent(key.to_owned())],
                ops: vec![Op::put(key, Self::encode(object)), history],
            };
            return Ok(Outcome::from(self.store.txn(txn).await?));
        };
        let value = Self::encode(object);
        let mut lease = self.lease_until(resource, object, expires).await?;
        let mut ended = false;
        let outcome = loop {
            let mut ops = vec![Op::Put { key: key.to_owned(), value: value.clone(), lease: Some(lease) }];
            ops.extend(history.clone());
            let txn = Txn { compares: vec![Compare::Absent(key.to_owned())], ops };
            match self.store.txn(txn).await {
                // A shared lease that ended early (revoked with everything on it): a fresh one.
                Err(kayra_store::StoreError::LeaseNotFound(_)) if !ended => {
                    ended = true;
                    self.forget_lease(resource, lease);
                    lease = self.lease_until(resource, object, expires).await?;
                }
                result => break Outcome::from(result?),
            }
        };
        if matches!(outcome, Outcome::Conflict(_)) {
            self.give_back(resource, lease).await;
        }
        Ok(outcome)
    }
}

fn name_causes(resource: &Resource, name: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required("metadata.name")];
    }
    resource
        .strategy
        .validate_name(name)
        .map(|message| FieldError::invalid("metadata.name", format!("\"{name}\""), &message))
        .into_iter()
        .collect()
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4().as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

fn already_exists(resource: &Resource, name: &str) -> RegistryError {
    RegistryError::AlreadyExists { resource: resource.qualified(), name: name.to_owned() }
}
