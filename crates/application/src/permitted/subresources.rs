//! The subresources that are operations of their own: an Application's (or its Pod's)
//! `binding`, a Pod's `eviction`, an ApplicationSet's `scale`, and the `log` an Application's
//! node streams. The rules are in `binding`, `eviction` and `scale`; here each is reached as the
//! request authorized it.

use kayra_api::verb::Verb;
use kayra_registry::{Object, PatchKind, RegistryError};
use serde_json::Value;

use super::{Permitted, named, not_found_as};
use crate::authorization::Target;
use crate::eviction::Eviction;
use crate::options::WriteRequest;

impl Permitted {
    /// Binds the Application the request names (through its own `binding` or its Pod's) as
    /// the `v1` Binding `binding` says; answers the bound Application. A dry run writes nothing.
    pub async fn bind(&self, binding: &Value, dry_run: bool) -> Result<Object, RegistryError> {
        let target = self.target(Verb::Create, Some("binding"))?;
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        crate::binding::bind(self.layer(), self.identity(), namespace, name, binding, dry_run)
            .await
            .map_err(|error| not_found_as(target, name, error))
    }

    /// Moves the scheduler-placed Application the request names (a `patch` of it) off its
    /// node, at `resource_version`; answers the unbound Application.
    pub async fn unbind(&self, resource_version: &str) -> Result<Object, RegistryError> {
        let target = self.target(Verb::Patch, None)?;
        let layer = self.layer();
        if target.kind.plural != "applications"
            || target.kind.group != format!("fleet.{}", layer.scheme().domain())
        {
            return Err(self.misused(Verb::Patch, Some("binding")));
        }
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        crate::binding::unbind(layer, self.identity(), namespace, name, resource_version).await
    }

    /// Evicts the Pod the request names as the `policy/v1` Eviction `eviction` says (its name,
    /// when given, must be the Pod's; `deleteOptions.dryRun: [All]` is a dry run as `dry_run`
    /// is).
    pub async fn evict(&self, eviction: &Value, dry_run: bool) -> Result<Eviction, RegistryError> {
        let target = self.target(Verb::Create, Some("eviction"))?;
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        if let Some(named) = eviction.pointer("/metadata/name").and_then(Value::as_str)
            && named != name
        {
            return Err(RegistryError::BadRequest(format!(
                "name in URL does not match name in Eviction object: \"{name}\" and \"{named}\""
            )));
        }
        let dry_run = dry_run
            || eviction
                .pointer("/deleteOptions/dryRun")
                .and_then(Value::as_array)
                .is_some_and(|modes| modes.iter().any(|mode| mode == "All"));
        crate::eviction::evict(self.client().layer(), namespace, name, dry_run)
            .await
            .map_err(|error| not_found_as(target, name, error))
    }

    /// The ApplicationSet the request names, as an `autoscaling/v1` Scale.
    pub async fn scale(&self) -> Result<Value, RegistryError> {
        let target = self.target(Verb::Get, Some("scale"))?;
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        crate::scale::read(self.layer(), namespace, name)
            .await
            .map_err(|error| not_found_as(target, name, error))
    }

    /// Writes the Scale `scale` back to the ApplicationSet the request names; answers the
    /// Scale after the write.
    pub async fn update_scale(&self, scale: &Value, options: &WriteRequest) -> Result<Value, RegistryError> {
        let target = self.target(Verb::Update, Some("scale"))?;
        options.check()?;
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        crate::scale::write(self.layer(), self.identity(), namespace, name, scale, options)
            .await
            .map_err(|error| not_found_as(target, name, error))
    }

    /// Applies `patch` to the ApplicationSet's Scale and writes the result back.
    pub async fn patch_scale(
        &self,
        kind: PatchKind,
        patch: &[u8],
        options: &WriteRequest,
    ) -> Result<Value, RegistryError> {
        let target = self.target(Verb::Patch, Some("scale"))?;
        options.check_patch()?;
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        crate::scale::patch(self.layer(), self.identity(), namespace, name, kind, patch, options)
            .await
            .map_err(|error| not_found_as(target, name, error))
    }

    /// The namespace and name of the Application whose `log` the request reads (a Pod's is its
    /// Application's).
    pub fn log_source(&self) -> Result<(&str, &str), RegistryError> {
        let target = self.target(Verb::Get, Some("log"))?;
        Ok((target.namespace.as_deref().unwrap_or_default(), named(target)?))
    }

    /// The namespace and name of the Application a stream to its process (`exec`, `attach`,
    /// `portforward`, of it or its Pod) was authorized for, and which stream.
    pub fn stream_source(&self) -> Result<(&str, &str, &str), RegistryError> {
        let subresource = self.kind_target().and_then(|target| target.subresource.as_deref());
        let Some(stream) = subresource.filter(|sub| kayra_api::scheme::STREAMS.contains(sub)) else {
            return Err(self.misused(Verb::Create, Some("exec")));
        };
        let target = self.target(Verb::Create, Some(stream))?;
        Ok((target.namespace.as_deref().unwrap_or_default(), named(target)?, stream))
    }

    /// The node whose session's log a replica was authorized to read.
    pub fn session_log_source(&self) -> Result<&str, RegistryError> {
        match &self.request().target {
            Target::SessionLog(node) => Ok(node),
            _ => Err(self.misused(Verb::Get, Some("nodes/sessionlog"))),
        }
    }

    /// The node whose session a replica was authorized to open a forwarded stream through.
    pub fn session_stream_source(&self) -> Result<&str, RegistryError> {
        match &self.request().target {
            Target::SessionStream(node) => Ok(node),
            _ => Err(self.misused(Verb::Create, Some("nodes/sessionstream"))),
        }
    }

    /// The node whose agent's own log was authorized.
    pub fn node_log_source(&self) -> Result<&str, RegistryError> {
        match &self.request().target {
            Target::NodeLog(node) => Ok(node),
            _ => Err(self.misused(Verb::Get, Some("nodes/log"))),
        }
    }
}
