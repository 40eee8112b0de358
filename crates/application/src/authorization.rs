//! Authorization of requests: the one place a request to this server — from the REST adapter,
//! the catalog's HTTP surface, a loop or a node's session — becomes the RBAC question it is,
//! and is answered. A [`Request`] says what is asked (a verb on a Kind's objects, the catalog's
//! `check`, or a path that names no resource); [`ApplicationLayer::authorize`] decides it over
//! the current RBAC index and answers the [`Scope`] the caller may see.
//!
//! Two rules shape the question beyond the verb and the object, as kube-apiserver asks it:
//!
//! - a list or watch whose field selector requires one `metadata.name` is about that object, for
//!   grants by resource name (`resourceNames`) and for a node's confinement to its own Node;
//! - a caller RBAC does not let read namespaces still sees those it holds a binding in (a list
//!   or get), and all of them when it may list some namespaced resource everywhere.
//!
//! Impersonation (acting as another user, `kubectl --as`) is decided here too: each user, group
//! and uid acted as needs `impersonate` on it.

use std::collections::HashSet;
use std::sync::Arc;

use kayra_api::scheme::KindInfo;
use kayra_api::verb::Verb;
use kayra_authn::Identity;
use kayra_authz::Action;
use kayra_registry::RegistryError;

use crate::{ApplicationLayer, caller};

/// What a request asks to do, as authorization decides it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The verb.
    pub verb: Verb,
    /// What it is asked of.
    pub target: Target,
}

/// What a request addresses.
#[derive(Debug, Clone)]
pub enum Target {
    /// Objects of a Kind of the scheme: a collection, one object, or one object's subresource.
    Kind(Box<KindTarget>),
    /// The RBAC decision apps ask for about requests to their own APIs
    /// (`POST /apis/authorization.<domain>/v1/check`).
    Check,
    /// A node agent's own log (`GET /apis/fleet.<domain>/v1/nodes/<name>/log`, behind the
    /// `NodeLogs` gate), decided as `get` on `nodes/log` of that group.
    NodeLog(String),
    /// A log stream another replica forwards to the one holding the node's session
    /// (`GET /apis/fleet.<domain>/v1/nodes/<name>/sessionlog`): only the replicas may ask,
    /// whatever RBAC says, since the replica that forwards has authorized its caller already.
    SessionLog(String),
    /// An exec, attach or port-forward stream another replica forwards to the one holding the
    /// node's session (`/apis/fleet.<domain>/v1/nodes/<name>/sessionstream`): only the replicas
    /// may ask, as for `SessionLog`, the forwarding replica having authorized its caller.
    SessionStream(String),
    /// The usage samples another replica asks of the one holding nodes' sessions
    /// (`GET /apis/fleet.<domain>/v1/sessionusage`): only the replicas may ask, as for
    /// `SessionLog`.
    SessionUsage,
    /// A path that names no resource: discovery, OpenAPI, `/version`, `/metrics`.
    Path(String),
}

/// Objects of one Kind a request addresses.
#[derive(Debug, Clone)]
pub struct KindTarget {
    /// The Kind.
    pub kind: KindInfo,
    /// The namespace, for a namespaced Kind (`None` addresses every namespace).
    pub namespace: Option<String>,
    /// The object's name; `None` addresses the collection.
    pub name: Option<String>,
    /// The subresource (`status`, `log`, `binding`...), of a named object.
    pub subresource: Option<String>,
    /// A list's or watch's field selector.
    pub field_selector: Option<String>,
}

impl Request {
    /// A request of `verb` on objects of `kind`.
    pub fn kind(verb: Verb, kind: KindInfo, namespace: Option<&str>, name: Option<&str>) -> Request {
        let namespace = namespace.filter(|_| kind.namespaced).map(str::to_owned);
        Request {
            verb,
            target: Target::Kind(Box::new(KindTarget {
                kind,
                namespace,
                name: name.map(str::to_owned),
                subresource: None,
                field_selector: None,
            })),
        }
    }

    /// The same request, of the object's `subresource`.
    pub fn subresource(mut self, subresource: &str) -> Request {
        if let Target::Kind(target) = &mut self.target {
            target.subresource = Some(subresource.to_owned());
        }
        self
    }

    /// The same request, a list or watch selecting fields with `selector`.
    pub fn field_selector(mut self, selector: Option<&str>) -> Request {
        if let Target::Kind(target) = &mut self.target {
            target.field_selector = selector.filter(|s| !s.is_empty()).map(str::to_owned);
        }
        self
    }

    /// A request for the RBAC decision of `/check`.
    pub fn check() -> Request {
        Request { verb: Verb::Create, target: Target::Check }
    }

    /// A read of node `name`'s agent log.
    pub fn node_log(name: &str) -> Request {
        Request { verb: Verb::Get, target: Target::NodeLog(name.to_owned()) }
    }

    /// A replica's forwarded read of a log held in node `name`'s session.
    pub fn session_log(name: &str) -> Request {
        Request { verb: Verb::Get, target: Target::SessionLog(name.to_owned()) }
    }

    /// A replica's forwarded stream to a process on node `name`.
    pub fn session_stream(name: &str) -> Request {
        Request { verb: Verb::Create, target: Target::SessionStream(name.to_owned()) }
    }

    /// A replica's read of the usage samples of the sessions another one holds.
    pub fn session_usage() -> Request {
        Request { verb: Verb::Get, target: Target::SessionUsage }
    }

    /// A read of a path that names no resource.
    pub fn path(path: &str) -> Request {
        Request { verb: Verb::Get, target: Target::Path(path.to_owned()) }
    }

    /// The request as it is decided: a stream to a running process (a subresource of
    /// [`kayra_api::scheme::STREAMS`]) is a `create`, whatever verb its method read as.
    pub(crate) fn decided(mut self) -> Request {
        if let Target::Kind(target) = &self.target
            && target.subresource.as_deref().is_some_and(|sub| kayra_api::scheme::STREAMS.contains(&sub))
        {
            self.verb = Verb::Create;
        }
        self
    }
}

/// What an authorized request may see of what it addresses.
#[derive(Debug, Clone)]
pub(crate) enum Scope {
    /// Everything it addresses.
    All,
    /// Only these namespaces: a caller RBAC does not let read namespaces, reading the namespaces
    /// it holds bindings in. Any other is refused with `denied`.
    Namespaces {
        /// The namespaces it may see.
        visible: Arc<HashSet<String>>,
        /// The refusal of a namespace it may not see.
        denied: String,
    },
}

/// The users, groups and uid a request asks to act as (`Impersonate-User`, `Impersonate-Group`,
/// `Impersonate-Uid`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impersonation {
    /// The user, or `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    /// The groups.
    pub groups: Vec<String>,
    /// The uid, if one is asked for.
    pub uid: Option<String>,
}

impl ApplicationLayer {
    /// Decides `request` for `identity`: the RBAC question it amounts to, answered over the
    /// current RBAC index, and what of it the caller may see; `Forbidden` naming what was
    /// refused, as Kubernetes words it.
    pub(crate) fn authorize(&self, identity: &Identity, request: &Request) -> Result<Scope, RegistryError> {
        let between_replicas = match &request.target {
            Target::SessionLog(node) => Some(format!("resource \"nodes/sessionlog\" of node \"{node}\"")),
            Target::SessionStream(node) => {
                Some(format!("resource \"nodes/sessionstream\" of node \"{node}\""))
            }
            Target::SessionUsage => {
                Some("resource \"sessionusage\" (the usage samples of the sessions held here)".to_owned())
            }
            _ => None,
        };
        if let Some(what) = between_replicas {
            return match identity.groups.iter().any(|group| group == kayra_authn::CONTROLLERS_GROUP) {
                true => Ok(Scope::All),
                false => Err(RegistryError::Forbidden(format!(
                    "User \"{}\" cannot get {what}: only the controller's replicas may",
                    identity.user
                ))),
            };
        }
        let action = self.action(request);
        if self.allows(identity, &action) {
            return Ok(Scope::All);
        }
        let denied = action.refusal(&identity.user);
        match self.namespace_view(identity, request) {
            NamespaceView::All => Ok(Scope::All),
            NamespaceView::Bound(visible) => Ok(Scope::Namespaces { visible: Arc::new(visible), denied }),
            NamespaceView::Denied => Err(RegistryError::Forbidden(denied)),
        }
    }

    /// The RBAC question `request` amounts to.
    fn action(&self, request: &Request) -> Action {
        match &request.target {
            Target::Kind(target) => {
                // Every door of one field is one permission: `thaw` is `create` on
                // `<resource>/freeze`, as `freeze` is.
                let resource = match target.subresource.as_deref() {
                    Some(sub) => {
                        let sub = target.kind.door(sub).map_or(sub, |door| door.permission);
                        format!("{}/{sub}", target.kind.plural)
                    }
                    None => target.kind.plural.to_owned(),
                };
                // A list or watch whose field selector requires one name is about that object,
                // where the selector is applied: the registry's Kinds and the views of them.
                let selects = matches!(request.verb, Verb::List | Verb::Watch) && !target.kind.catalog;
                let name = match selects {
                    true => target.field_selector.as_deref().and_then(selected_name),
                    false => target.name.clone(),
                };
                Action::Resource {
                    verb: request.verb.as_str().to_owned(),
                    api: target.kind.group.clone(),
                    resource,
                    namespace: target.namespace.clone().filter(|_| target.kind.namespaced),
                    name,
                }
            }
            Target::Check => Action::Resource {
                verb: Verb::Create.as_str().to_owned(),
                api: format!("authorization.{}", self.scheme().domain()),
                resource: "check".to_owned(),
                namespace: None,
                name: None,
            },
            Target::NodeLog(node) | Target::SessionLog(node) | Target::SessionStream(node) => {
                Action::Resource {
                    verb: request.verb.as_str().to_owned(),
                    api: format!("fleet.{}", self.scheme().domain()),
                    resource: match &request.target {
                        Target::SessionLog(_) => "nodes/sessionlog".to_owned(),
                        Target::SessionStream(_) => "nodes/sessionstream".to_owned(),
                        _ => "nodes/log".to_owned(),
                    },
                    namespace: None,
                    name: Some(node.clone()),
                }
            }
            Target::SessionUsage => Action::Resource {
                verb: Verb::Get.as_str().to_owned(),
                api: format!("fleet.{}", self.scheme().domain()),
                resource: "sessionusage".to_owned(),
                namespace: None,
                name: None,
            },
            // Paths that name no resource are read; RBAC grants them by `get`.
            Target::Path(path) => {
                Action::NonResource { verb: Verb::Get.as_str().to_owned(), path: path.clone() }
            }
        }
    }

    /// What a caller RBAC refused sees of the namespaces, when it asks to read them.
    fn namespace_view(&self, identity: &Identity, request: &Request) -> NamespaceView {
        let Target::Kind(target) = &request.target else { return NamespaceView::Denied };
        let namespace_read = target.kind.group.is_empty()
            && target.kind.plural == "namespaces"
            && target.subresource.is_none()
            && matches!(request.verb, Verb::List | Verb::Get | Verb::Watch);
        if !namespace_read {
            return NamespaceView::Denied;
        }
        let rbac = self.rbac();
        let caller = caller(identity);
        let sees_all =
            self.scheme().kinds().iter().filter(|other| other.namespaced && other.stored()).any(|other| {
                let everywhere = Action::Resource {
                    verb: Verb::List.as_str().to_owned(),
                    api: other.group.clone(),
                    resource: other.plural.to_owned(),
                    namespace: None,
                    name: None,
                };
                rbac.allows(&caller, &everywhere)
            });
        match (sees_all, request.verb) {
            (true, _) => NamespaceView::All,
            (false, Verb::Watch) => NamespaceView::Denied,
            (false, _) => NamespaceView::Bound(rbac.bound_namespaces(&caller)),
        }
    }

    /// The identity `caller` acts as when it asks to impersonate `wanted`: each user (or
    /// service account), group and uid needs `impersonate` on it, and the request then acts as
    /// exactly that user and those groups.
    pub fn impersonate(&self, caller: &Identity, wanted: &Impersonation) -> Result<Identity, RegistryError> {
        if wanted.groups.iter().any(|group| group == kayra_authn::CONTROLLERS_GROUP) {
            return Err(RegistryError::Forbidden(format!(
                "User \"{}\" cannot impersonate group \"{}\": it is the controller replicas' own",
                caller.user,
                kayra_authn::CONTROLLERS_GROUP
            )));
        }
        let mut needed = Vec::new();
        match wanted.user.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':')) {
            Some((namespace, name)) => {
                needed.push(("", "serviceaccounts", Some(namespace.to_owned()), name.to_owned()))
            }
            None => needed.push(("", "users", None, wanted.user.clone())),
        }
        needed.extend(wanted.groups.iter().map(|group| ("", "groups", None, group.clone())));
        needed.extend(wanted.uid.iter().map(|uid| ("authentication.k8s.io", "uids", None, uid.clone())));
        for (api, resource, namespace, name) in needed {
            let action = Action::Resource {
                verb: "impersonate".to_owned(),
                api: api.to_owned(),
                resource: resource.to_owned(),
                namespace,
                name: Some(name),
            };
            if !self.allows(caller, &action) {
                return Err(RegistryError::Forbidden(action.refusal(&caller.user)));
            }
        }
        Ok(Identity::new(wanted.user.clone(), wanted.uid.clone().unwrap_or_default(), wanted.groups.clone()))
    }
}

/// What a caller that RBAC does not let read namespaces sees of them.
enum NamespaceView {
    /// Every namespace (list, watch, get): it may list some namespaced resource everywhere.
    All,
    /// The namespaces it holds a binding in (list, get).
    Bound(HashSet<String>),
    /// Nothing: not a namespace read, or a watch without the cluster-wide grant.
    Denied,
}

/// The one name a field selector requires (`metadata.name=x` or `metadata.name==x` among its
/// terms), if any.
pub fn selected_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term.trim().strip_prefix("metadata.name")?.trim_start();
        let value = value.strip_prefix("==").or_else(|| value.strip_prefix('='))?;
        Some(value.trim().to_owned()).filter(|value| !value.is_empty())
    })
}

#[cfg(test)]
mod tests;
