//! Creating an object: the server's stamps (uid, creationTimestamp, generation), generated
//! names, and the first write of its key (on a lease when it expires).

use kayra_api::validation::FieldError;
use kayra_store::{Compare, Op, Outcome, Txn, TxnResult};
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
        object: Object,
        options: WriteOptions,
        managed: Managed,
    ) -> Result<Object, RegistryError> {
        let admitted = self.admit_new(resource, namespace, object, &options, managed).await?;
        self.write_new(resource, namespace, admitted, &options).await
    }

    /// Creates each of `objects` (a namespace and a body) in `resource`, as one writer: each
    /// answers as its own [`Registry::create`] would, in the order given. Those admitted and
    /// valid are sent to the store together ([`Store::txn_all`](kayra_store::Store::txn_all)),
    /// each at a revision of its own, so a watcher sees each as the create it is; one whose
    /// write does not go through there (a generated name taken, its lease ended early, two
    /// of them with one name) is written again alone.
    pub async fn create_all(
        &self,
        resource: &Resource,
        objects: Vec<(Option<String>, Value)>,
        options: WriteOptions,
    ) -> Vec<Result<Object, RegistryError>> {
        let mut answers: Vec<Option<Result<Object, RegistryError>>> = objects.iter().map(|_| None).collect();
        let mut sent = Vec::new();
        let mut txns = Vec::new();
        let mut keys = std::collections::HashSet::new();
        let mut alone = Vec::new();
        for (i, (namespace, body)) in objects.into_iter().enumerate() {
            let admitted = match self.body(resource, namespace.as_deref(), body) {
                Ok(object) => {
                    self.admit_new(resource, namespace.as_deref(), object, &options, Managed::Recorded).await
                }
                Err(error) => Err(error),
            };
            let mut admitted = match admitted {
                Ok(admitted) => admitted,
                Err(error) => {
                    answers[i] = Some(Err(error));
                    continue;
                }
            };
            if options.dry_run {
                alone.push((i, namespace, admitted));
                continue;
            }
            let key = self.name_new(resource, namespace.as_deref(), &mut admitted);
            let key = match key {
                Ok(key) if keys.insert(key.clone()) => key,
                Ok(_) => {
                    alone.push((i, namespace, admitted));
                    continue;
                }
                Err(error) => {
                    answers[i] = Some(Err(error));
                    continue;
                }
            };
            let history = self.history_put(resource, &key, &admitted.object, &options);
            let lease = match resource.strategy.expires_at(&admitted.object) {
                Some(expires) => match self.lease_until(resource, &admitted.object, expires).await {
                    Ok(lease) => Some(lease),
                    Err(error) => {
                        answers[i] = Some(Err(error));
                        continue;
                    }
                },
                None => None,
            };
            let mut ops = vec![Op::Put { key: key.clone(), value: Self::encode(&admitted.object), lease }];
            ops.extend(history);
            txns.push(Txn { compares: vec![Compare::Absent(key.clone())], ops });
            sent.push((i, namespace, key, admitted, lease));
        }
        let results = self.store.txn_all(txns).await;
        for ((i, namespace, key, mut admitted, lease), result) in sent.into_iter().zip(results) {
            match result {
                Ok(TxnResult::Applied { revision, .. }) => {
                    object::metadata_mut(&mut admitted.object)
                        .insert("resourceVersion".into(), Value::String(revision.to_string()));
                    self.hand_over(resource, &key, revision, &admitted.object);
                    answers[i] = Some(Ok(admitted.object));
                }
                Ok(TxnResult::Conflict { .. }) if !admitted.generate => {
                    if let Some(lease) = lease {
                        self.give_back(resource, lease).await;
                    }
                    answers[i] = Some(Err(already_exists(resource, meta_str(&admitted.object, "name"))));
                }
                Ok(TxnResult::Conflict { .. }) | Err(_) => alone.push((i, namespace, admitted)),
            }
        }
        for (i, namespace, admitted) in alone {
            answers[i] = Some(self.write_new(resource, namespace.as_deref(), admitted, &options).await);
        }
        answers.into_iter().map(|answer| answer.expect("every object is answered")).collect()
    }

    /// Readies `object` for its first write: the server's stamps, defaults, its managers,
    /// admission, and validation.
    async fn admit_new(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        mut object: Object,
        options: &WriteOptions,
        managed: Managed,
    ) -> Result<Admitted, RegistryError> {
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
            self.record_update(resource, None, &mut object, options);
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
        Ok(Admitted { object, generate })
    }

    /// Writes an admitted object's key; a generated name that is taken is generated again.
    async fn write_new(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        mut admitted: Admitted,
        options: &WriteOptions,
    ) -> Result<Object, RegistryError> {
        for _ in 0..RETRIES {
            let key = self.name_new(resource, namespace, &mut admitted)?;
            let Admitted { object, generate } = &mut admitted;
            if options.dry_run {
                if self.store.get(&key).await?.is_some() {
                    return Err(already_exists(resource, meta_str(object, "name")));
                }
                return Ok(admitted.object);
            }
            match self.create_key(resource, object, &key, options).await? {
                Outcome::Applied(revision) => {
                    object::metadata_mut(object)
                        .insert("resourceVersion".into(), Value::String(revision.to_string()));
                    self.hand_over(resource, &key, revision, object);
                    return Ok(admitted.object);
                }
                Outcome::Conflict(_) if *generate => continue,
                Outcome::Conflict(_) => return Err(already_exists(resource, meta_str(object, "name"))),
            }
        }
        Err(RegistryError::Conflict {
            resource: resource.qualified(),
            name: meta_str(&admitted.object, "generateName").to_owned(),
            message: "no free name could be generated; try again".to_owned(),
        })
    }

    /// The key an admitted object is written under: its name, or for a generated one a fresh
    /// name from `metadata.generateName`.
    fn name_new(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        admitted: &mut Admitted,
    ) -> Result<String, RegistryError> {
        let object = &mut admitted.object;
        if admitted.generate {
            let name = format!("{}{}", meta_str(object, "generateName"), random_suffix());
            if let Some(message) = resource.strategy.validate_name(&name) {
                return Err(invalid(
                    resource,
                    object,
                    vec![FieldError::invalid("metadata.generateName", format!("\"{name}\""), &message)],
                ));
            }
            object::metadata_mut(object).insert("name".into(), Value::String(name));
        }
        Ok(self.key(resource, namespace, meta_str(object, "name")))
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

/// A new object readied for its first write.
struct Admitted {
    object: Object,
    /// Whether its name is generated from `metadata.generateName` at each attempt.
    generate: bool,
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
