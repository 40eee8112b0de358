//! Namespaces as the registry keeps them: whether one takes new objects, and moving a
//! terminating one along until it is gone.

use serde_json::{Value, json};

use crate::{
    Admit, DeleteOptions, Deleted, FieldManager, ListOptions, Object, PatchKind, Registry, RegistryError,
    Resource, WriteOptions, meta_str, path,
};

/// The manager the namespace finalizer's own writes are recorded as.
const NAMESPACE_FINALIZER: &str = "kayra-namespace-finalizer";

/// Whether a namespace is being deleted (`metadata.deletionTimestamp` set, or `status.phase`
/// `Terminating`): such a namespace, like one that does not exist, takes no new objects.
pub fn namespace_terminating(namespace: &Object) -> bool {
    !meta_str(namespace, "deletionTimestamp").is_empty()
        || path(namespace, "status.phase").and_then(Value::as_str) == Some("Terminating")
}

impl Registry {
    /// A namespace that does not exist, or is being deleted ([`namespace_terminating`]), takes
    /// no new objects. The namespace is read from the store (a create must not follow a stale
    /// copy), and taken decoded from the watch cache when the cache holds the version read.
    pub(crate) async fn check_namespace_accepts(&self, namespace: &str) -> Result<(), RegistryError> {
        let base = format!("{}core/namespaces/", self.root);
        let key = format!("{base}{namespace}");
        let Some(kv) = self.store.get(&key).await? else {
            return Err(RegistryError::NotFound {
                resource: "namespaces".to_owned(),
                name: namespace.to_owned(),
            });
        };
        if namespace_terminating(&*self.stored_under(&base, &key, &kv)?) {
            return Err(RegistryError::Forbidden(format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            )));
        }
        Ok(())
    }

    /// Moves a terminating namespace along: deletes everything it holds in `contents`, and once
    /// nothing is left (objects with finalizers of their own are waited for), removes the
    /// `kubernetes` finalizer so the namespace itself goes. Answers whether it is gone.
    pub async fn finalize_namespace(
        &self,
        namespaces: &Resource,
        contents: &[Resource],
        name: &str,
    ) -> Result<bool, RegistryError> {
        let namespace = match self.get(namespaces, None, name).await {
            Ok(namespace) => namespace,
            Err(RegistryError::NotFound { .. }) => return Ok(true),
            Err(error) => return Err(error),
        };
        if meta_str(&namespace, "deletionTimestamp").is_empty() {
            return Ok(false);
        }
        // The control plane empties a terminating namespace on its own behalf: no writer's
        // policy may keep its contents alive.
        let unadmitted_delete = DeleteOptions::new(Admit::unadmitted_housekeeping());
        let mut remaining = 0;
        for resource in contents.iter().filter(|r| r.namespaced) {
            let list = self.list(resource, Some(name), &ListOptions::default()).await?;
            for item in list.items {
                remaining += 1;
                if meta_str(&item, "deletionTimestamp").is_empty() {
                    match self.delete(resource, Some(name), meta_str(&item, "name"), &unadmitted_delete).await
                    {
                        Ok(Deleted::Gone(_)) => remaining -= 1,
                        Ok(Deleted::Pending(_)) | Err(RegistryError::NotFound { .. }) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
        }
        if remaining > 0 {
            return Ok(false);
        }
        let finalizers: Vec<Value> = path(&namespace, "spec.finalizers")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter(|f| f.as_str() != Some("kubernetes")).cloned().collect())
            .unwrap_or_default();
        let patch =
            serde_json::to_vec(&json!({"spec": {"finalizers": finalizers}})).expect("JSON serialises");
        match self
            .patch(
                namespaces,
                None,
                name,
                PatchKind::Merge,
                &patch,
                WriteOptions {
                    manager: FieldManager {
                        name: NAMESPACE_FINALIZER.to_owned(),
                        subresource: String::new(),
                    },
                    ..WriteOptions::new(Admit::unadmitted_housekeeping())
                },
            )
            .await
        {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(true),
            Err(error) => Err(error),
        }
    }
}
