//! Turning a request path into what it addresses. Paths are parsed by hand, segment by
//! segment, because Kubernetes paths are ambiguous to a router (`/api/v1/namespaces/x/status`
//! is a subresource; `/api/v1/namespaces/x/events` a collection), and because non-canonical
//! paths must be refused before anything else looks at them.

use std::collections::HashMap;

use axum::http::{Method, Uri};
use kayra_api::scheme::{KindInfo, Scheme};
use kayra_api::verb::Verb;

use crate::error::ApiError;

/// A request's query parameters.
pub(crate) type Query = HashMap<String, String>;

/// A routed request's query parameters, in its extensions.
#[derive(Debug, Clone)]
pub(crate) struct QueryParameters(pub(crate) Query);

/// The query of `uri`; a malformed one is refused.
pub(crate) fn query(uri: &Uri) -> Result<Query, ApiError> {
    let Some(text) = uri.query() else { return Ok(Query::new()) };
    axum::extract::Query::<Query>::try_from_uri(uri)
        .map(|query| query.0)
        .map_err(|_| ApiError::BadRequest(format!("malformed query {text:?}")))
}

/// Whether a list asks to watch: `watch` takes every spelling of a Go boolean.
pub(crate) fn watching(query: &Query) -> Result<bool, ApiError> {
    match query.get("watch").map(String::as_str) {
        None | Some("" | "0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!("watch: {other:?} is not a boolean"))),
    }
}

/// The Kubernetes verb of a request on a collection, or on one object when `named`.
pub(crate) fn verb(method: &Method, named: bool, query: &Query) -> Result<Verb, ApiError> {
    Ok(match (method, named) {
        (&Method::GET, false) if watching(query)? => Verb::Watch,
        (&Method::GET, false) => Verb::List,
        (&Method::GET, true) => Verb::Get,
        (&Method::POST, false) => Verb::Create,
        (&Method::PUT, true) => Verb::Update,
        (&Method::PATCH, true) => Verb::Patch,
        (&Method::DELETE, true) => Verb::Delete,
        (&Method::DELETE, false) => Verb::DeleteCollection,
        _ => return Err(ApiError::MethodNotAllowed),
    })
}

/// What a request path addresses.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// `/version`.
    Version,
    /// `/metrics`: the process's metrics in the Prometheus text format.
    Metrics,
    /// `/healthz`, `/livez`, `/readyz` (and their sub-paths).
    Health,
    /// `/.well-known/openid-configuration` or `/openid/v1/jwks`: the service-account issuer's
    /// public documents.
    Issuer(crate::issuer::Document),
    /// `/api`.
    Api,
    /// `/apis`.
    Apis,
    /// `/api/v1` or `/apis/<group>/<version>`: one group-version's resources.
    GroupVersion(String, String),
    /// `/apis/<group>`.
    Group(String),
    /// `/openapi/v3`.
    OpenApiRoot,
    /// `/openapi/v3/<api/v1 | apis/<g>/<v>>`.
    OpenApi(String, String),
    /// A resource: a collection, an object, or an object's subresource.
    Resource(Box<ResourcePath>),
    /// The API catalog: `catalog.<domain>/v1` registrations and subscriptions.
    Catalog(CatalogPath),
    /// `POST /apis/authorization.<domain>/v1/check`: an RBAC decision for an app.
    Check,
    /// `GET /apis/fleet.<domain>/v1/nodes/<name>/sessionlog`: a log another replica forwards
    /// to the one holding the node's session (the replicas' group only).
    SessionLog {
        /// `fleet.<domain>`.
        group: String,
        /// The node.
        node: String,
    },
    /// `/apis/fleet.<domain>/v1/nodes/<name>/sessionstream`: an exec, attach or port-forward
    /// another replica forwards, as the client's own upgrade, to the one holding the node's
    /// session (the replicas' group only).
    SessionStream {
        /// `fleet.<domain>`.
        group: String,
        /// The node.
        node: String,
    },
    /// `GET /apis/fleet.<domain>/v1/sessionusage`: the usage samples of the sessions this
    /// replica holds, as another replica asks for them (the replicas' group only).
    SessionUsage {
        /// `fleet.<domain>`.
        group: String,
    },
    /// `GET /apis/fleet.<domain>/v1/nodes/<name>/log`: a node agent's own log, routed only
    /// when the `NodeLogs` gate is on.
    NodeLog {
        /// `fleet.<domain>`.
        group: String,
        /// The node.
        node: String,
    },
}

/// Routes that exist only when their feature gate is on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gates {
    /// `NodeLogs`: a node agent's own log at `/apis/fleet.<domain>/v1/nodes/<name>/log`.
    pub node_logs: bool,
}

/// A path in the API catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CatalogPath {
    /// `apiregistrations` or `subscriptions`.
    pub(crate) plural: &'static str,
    /// The namespace, for subscriptions.
    pub(crate) namespace: Option<String>,
    /// The object's name; `None` addresses the collection.
    pub(crate) name: Option<String>,
    /// `sync`, `status` or `openapi.json` of a registration.
    pub(crate) subresource: Option<String>,
}

/// A path to resources of one Kind.
#[derive(Debug, Clone)]
pub(crate) struct ResourcePath {
    /// The Kind.
    pub(crate) kind: KindInfo,
    /// The namespace, for namespaced paths.
    pub(crate) namespace: Option<String>,
    /// The object's name; `None` addresses the collection.
    pub(crate) name: Option<String>,
    /// The subresource (`status`).
    pub(crate) subresource: Option<String>,
}

/// Why a path was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PathError {
    /// Empty, `.`, `..` or percent-encoded segments: refused before routing.
    NonCanonical,
    /// Nothing is served there.
    NotFound,
}

/// Parses a path against the scheme and the routes `gates` turn on.
pub(crate) fn parse(scheme: &Scheme, gates: Gates, path: &str) -> Result<Target, PathError> {
    if path.contains('%') || !path.starts_with('/') {
        return Err(PathError::NonCanonical);
    }
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = if trimmed.is_empty() { Vec::new() } else { trimmed[1..].split('/').collect() };
    if segments.iter().any(|s| s.is_empty() || *s == "." || *s == "..") {
        return Err(PathError::NonCanonical);
    }
    match segments.as_slice() {
        ["version"] => Ok(Target::Version),
        ["metrics"] => Ok(Target::Metrics),
        ["healthz" | "livez" | "readyz", ..] => Ok(Target::Health),
        [".well-known", "openid-configuration"] => Ok(Target::Issuer(crate::issuer::Document::Discovery)),
        ["openid", "v1", "jwks"] => Ok(Target::Issuer(crate::issuer::Document::Jwks)),
        ["api"] => Ok(Target::Api),
        ["apis"] => Ok(Target::Apis),
        ["openapi", "v3"] => Ok(Target::OpenApiRoot),
        ["openapi", "v3", "api", version] => Ok(Target::OpenApi(String::new(), (*version).to_owned())),
        ["openapi", "v3", "apis", group, version] => {
            Ok(Target::OpenApi((*group).to_owned(), (*version).to_owned()))
        }
        ["api", version] => {
            served(scheme, "", version).map(|()| Target::GroupVersion(String::new(), (*version).to_owned()))
        }
        ["apis", group] => {
            if scheme.kinds().iter().any(|k| k.group == *group) {
                Ok(Target::Group((*group).to_owned()))
            } else {
                Err(PathError::NotFound)
            }
        }
        ["apis", group, version] => served(scheme, group, version)
            .map(|()| Target::GroupVersion((*group).to_owned(), (*version).to_owned())),
        ["apis", group, "v1", rest @ ..] if *group == format!("catalog.{}", scheme.domain()) => catalog(rest),
        ["apis", group, "v1", "check"] if *group == format!("authorization.{}", scheme.domain()) => {
            Ok(Target::Check)
        }
        ["apis", group, "v1", "nodes", node, "log"]
            if gates.node_logs && *group == format!("fleet.{}", scheme.domain()) =>
        {
            Ok(Target::NodeLog { group: (*group).to_owned(), node: (*node).to_owned() })
        }
        ["apis", group, "v1", "nodes", node, "sessionlog"]
            if *group == format!("fleet.{}", scheme.domain()) =>
        {
            Ok(Target::SessionLog { group: (*group).to_owned(), node: (*node).to_owned() })
        }
        ["apis", group, "v1", "nodes", node, "sessionstream"]
            if *group == format!("fleet.{}", scheme.domain()) =>
        {
            Ok(Target::SessionStream { group: (*group).to_owned(), node: (*node).to_owned() })
        }
        ["apis", group, "v1", "sessionusage"] if *group == format!("fleet.{}", scheme.domain()) => {
            Ok(Target::SessionUsage { group: (*group).to_owned() })
        }
        ["api", version, rest @ ..] => resource(scheme, "", version, rest),
        ["apis", group, version, rest @ ..] => resource(scheme, group, version, rest),
        _ => Err(PathError::NotFound),
    }
}

fn catalog(rest: &[&str]) -> Result<Target, PathError> {
    let owned = |s: &&str| Some((*s).to_owned());
    let path = |plural, namespace: Option<String>, name: Option<String>, subresource: Option<String>| {
        Ok(Target::Catalog(CatalogPath { plural, namespace, name, subresource }))
    };
    match rest {
        ["apiregistrations"] => path("apiregistrations", None, None, None),
        ["apiregistrations", name] => path("apiregistrations", None, owned(name), None),
        ["apiregistrations", name, sub @ ("sync" | "status" | "openapi.json")] => {
            path("apiregistrations", None, owned(name), owned(sub))
        }
        ["subscriptions"] => path("subscriptions", None, None, None),
        ["namespaces", namespace, "subscriptions"] => path("subscriptions", owned(namespace), None, None),
        ["namespaces", namespace, "subscriptions", name] => {
            path("subscriptions", owned(namespace), owned(name), None)
        }
        _ => Err(PathError::NotFound),
    }
}

fn served(scheme: &Scheme, group: &str, version: &str) -> Result<(), PathError> {
    if scheme.kinds().iter().any(|k| k.group == group && k.version == version) {
        Ok(())
    } else {
        Err(PathError::NotFound)
    }
}

fn resource(scheme: &Scheme, group: &str, version: &str, rest: &[&str]) -> Result<Target, PathError> {
    let find = |plural: &str| scheme.find(group, version, plural);
    let owned = |s: &&str| (*s).to_owned();
    // `namespaces/<ns>/<plural>...` when <plural> is a namespaced resource of this group-version.
    if let ["namespaces", namespace, plural, tail @ ..] = rest
        && let Some(kind) = find(plural).filter(|k| k.namespaced)
    {
        let (name, subresource) = match tail {
            [] => (None, None),
            [name] => (Some(owned(name)), None),
            [name, sub] => (Some(owned(name)), Some(owned(sub))),
            _ => return Err(PathError::NotFound),
        };
        return Ok(Target::Resource(Box::new(ResourcePath {
            kind: kind.clone(),
            namespace: Some(owned(namespace)),
            name,
            subresource,
        })));
    }
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(owned(name)), None),
        [plural, name, sub] => (*plural, Some(owned(name)), Some(owned(sub))),
        _ => return Err(PathError::NotFound),
    };
    let kind = find(plural).ok_or(PathError::NotFound)?;
    if kind.namespaced && name.is_some() {
        return Err(PathError::NotFound);
    }
    Ok(Target::Resource(Box::new(ResourcePath { kind: kind.clone(), namespace: None, name, subresource })))
}

#[cfg(test)]
mod tests;
