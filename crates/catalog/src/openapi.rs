//! What an API serves, read from the OpenAPI document its app publishes at `/-/openapi.json`.
//!
//! Resources come from the paths `/apis/<api>/<version>/[namespaces/{namespace}/]<resource>
//! [/{name}[/<action>]]`: a path under `namespaces/{namespace}/` is a namespaced resource, an
//! action is part of the resource's name (`dashboards/refresh`), and verbs follow the method:
//! GET lists a collection and gets an item; POST, PUT, PATCH and DELETE create, update, patch
//! and delete.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest document accepted.
pub const MAX_DOCUMENT: usize = 1024 * 1024;

/// One resource an API serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiResource {
    /// The resource, with `/action` for an action on its items.
    pub name: String,
    /// The version segment of its paths.
    pub version: String,
    /// Whether it lives in namespaces.
    pub namespaced: bool,
    /// Its verbs, in a fixed order.
    pub verbs: Vec<String>,
}

/// Why a document cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// More than [`MAX_DOCUMENT`] bytes.
    #[error("the OpenAPI document is {0} bytes, more than the 1 MiB allowed")]
    TooLarge(usize),
    /// Not JSON, or not an OpenAPI document.
    #[error("not an OpenAPI document: {0}")]
    NotOpenApi(String),
}

/// The resources `api` serves according to `document`, in name order.
pub fn resources(api: &str, document: &[u8]) -> Result<Vec<ApiResource>, SpecError> {
    if document.len() > MAX_DOCUMENT {
        return Err(SpecError::TooLarge(document.len()));
    }
    let document: Value =
        serde_json::from_slice(document).map_err(|error| SpecError::NotOpenApi(error.to_string()))?;
    let versioned = ["openapi", "swagger"].iter().any(|key| document.get(key).is_some_and(Value::is_string));
    let Some(paths) = document.get("paths").and_then(Value::as_object).filter(|_| versioned) else {
        return Err(SpecError::NotOpenApi("it needs an `openapi` version and a `paths` object".to_owned()));
    };
    let prefix = format!("/apis/{api}/");
    let mut found: BTreeMap<(String, String, bool), BTreeSet<usize>> = BTreeMap::new();
    for (path, operations) in paths {
        let Some(rest) = path.strip_prefix(&prefix) else { continue };
        let Some(route) = Route::parse(rest) else { continue };
        let Some(operations) = operations.as_object() else { continue };
        let verbs = found.entry((route.resource, route.version, route.namespaced)).or_default();
        for method in operations.keys() {
            let verb = match (method.to_ascii_lowercase().as_str(), route.item) {
                ("get", false) => "list",
                ("get", true) => "get",
                ("post", _) => "create",
                ("put", _) => "update",
                ("patch", _) => "patch",
                ("delete", _) => "delete",
                _ => continue,
            };
            verbs.insert(VERBS.iter().position(|known| *known == verb).expect("a known verb"));
        }
    }
    Ok(found
        .into_iter()
        .filter(|(_, verbs)| !verbs.is_empty())
        .map(|((name, version, namespaced), verbs)| ApiResource {
            name,
            version,
            namespaced,
            verbs: verbs.into_iter().map(|at| VERBS[at].to_owned()).collect(),
        })
        .collect())
}

/// Verbs in the order they are listed.
const VERBS: [&str; 6] = ["get", "list", "create", "update", "patch", "delete"];

/// A path below `/apis/<api>/`, understood.
struct Route {
    version: String,
    namespaced: bool,
    resource: String,
    item: bool,
}

impl Route {
    fn parse(rest: &str) -> Option<Route> {
        let segments: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
        let (version, mut rest) = segments.split_first()?;
        if version.is_empty() || is_parameter(version) {
            return None;
        }
        let namespaced = rest.len() >= 3 && rest[0] == "namespaces" && is_parameter(rest[1]);
        if namespaced {
            rest = &rest[2..];
        }
        let literal = |segment: &&str| !segment.is_empty() && !is_parameter(segment);
        match rest {
            [resource] if literal(resource) => Some(Route::new(version, namespaced, resource, false)),
            [resource, name] if literal(resource) && is_parameter(name) => {
                Some(Route::new(version, namespaced, resource, true))
            }
            [resource, name, action] if literal(resource) && is_parameter(name) && literal(action) => {
                Some(Route::new(version, namespaced, &format!("{resource}/{action}"), true))
            }
            _ => None,
        }
    }

    fn new(version: &str, namespaced: bool, resource: &str, item: bool) -> Route {
        Route { version: version.to_owned(), namespaced, resource: resource.to_owned(), item }
    }
}

/// `{name}`-style path templating.
fn is_parameter(segment: &str) -> bool {
    segment.len() > 2 && segment.starts_with('{') && segment.ends_with('}')
}

#[cfg(test)]
mod tests;
