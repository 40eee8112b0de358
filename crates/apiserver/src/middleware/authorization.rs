//! Authorization: a request from nobody is refused (401), as is one whose impersonation was;
//! every other is translated into the application layer's [`Request`] — what it addresses and
//! with which verb, refused with 404 or 405 when no such thing is served — and decided there,
//! in the one authorization function every caller goes through. What the caller may then do (a
//! [`Permitted`]) rides on in the request to its handler, which can do nothing without it.
//!
//! A path no route serves is answered 404 only to an authenticated caller (401 otherwise); the
//! handler then asks the catalog whether it is a registered API's, so it learns whether the
//! caller may read discovery paths.

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request as HttpRequest;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use kayra_api::verb::Verb;
use kayra_application::authorization::Request;
use kayra_application::permitted::Permitted;

use super::authentication::Caller;
use super::routing::Route;
use crate::error::ApiError;
use crate::routes::{Query, QueryParameters, Target, verb};
use crate::state::ApiState;

/// What an authenticated caller may know of a path no route serves, in its extensions.
#[derive(Debug, Clone)]
pub(crate) struct Unrouted {
    /// The caller's permit to read it as a discovery path, when RBAC grants that.
    pub(crate) discovery: Option<Permitted>,
}

/// Decides the request.
pub(crate) async fn layer<F: Future<Output = Response>>(
    state: &Arc<ApiState>,
    mut request: HttpRequest,
    next: impl FnOnce(HttpRequest) -> F,
) -> Response {
    match authorize(state, &mut request) {
        Ok(()) => next(request).await,
        Err(error) => {
            super::drain(request.into_body()).await;
            error.into_response()
        }
    }
}

fn authorize(state: &ApiState, request: &mut HttpRequest) -> Result<(), ApiError> {
    let identity = match request.extensions_mut().remove::<Caller>() {
        None | Some(Caller::Anonymous) => return Err(ApiError::Unauthorized),
        Some(Caller::Refused { refusal, .. }) => return Err(ApiError::Refused(refusal)),
        Some(Caller::Known { identity, .. }) => identity,
    };
    let client = state.layer().client(identity);
    let Some(Route::Served(target)) = request.extensions().get::<Route>() else {
        let discovery = client.authorize(Request::path(request.uri().path())).ok();
        request.extensions_mut().insert(Unrouted { discovery });
        return Ok(());
    };
    let query = crate::routes::query(request.uri())?;
    let asked = asked(state, target, request.method(), request.uri().path(), &query)?;
    let permitted = client.authorize(asked)?;
    let extensions = request.extensions_mut();
    extensions.insert(permitted);
    extensions.insert(QueryParameters(query));
    Ok(())
}

/// What a routed request asks, in the application layer's terms: a Kind and each of its
/// subresources serve the verbs discovery advertises for them (namespaces are not deleted as a
/// collection, views are read-only, reviews are created, a status is read, replaced and
/// patched); any other is not allowed, and a subresource the Kind does not have is no resource
/// at all (404, before any decision, so that `namespaces/a/nodes` is not mistaken for something
/// a grant could reach).
fn asked(
    state: &ApiState,
    target: &Target,
    method: &Method,
    path: &str,
    query: &Query,
) -> Result<Request, ApiError> {
    let not_found = || ApiError::NotFound("the server could not find the requested resource".to_owned());
    match target {
        Target::Resource(resource) => {
            let kind = &resource.kind;
            let served = match resource.subresource.as_deref() {
                None => kind.verbs,
                Some(sub) => kind.subresource(sub).ok_or_else(not_found)?.verbs,
            };
            // A named object takes a POST only at a subresource that creates something there
            // (an Eviction, a Binding), as in Kubernetes.
            let verb = match (method, &resource.name, &resource.subresource) {
                (&Method::POST, Some(_), Some(_)) => Verb::Create,
                _ => verb(method, resource.name.is_some(), query)?,
            };
            if !served.contains(&verb) {
                return Err(ApiError::MethodNotAllowed);
            }
            let mut request =
                Request::kind(verb, kind.clone(), resource.namespace.as_deref(), resource.name.as_deref());
            if let Some(sub) = &resource.subresource {
                request = request.subresource(sub);
            }
            Ok(request.field_selector(query.get("fieldSelector").map(String::as_str)))
        }
        Target::Catalog(catalog) => {
            if state.catalog.is_none() {
                return Err(ApiError::NotFound("this instance serves no API catalog".to_owned()));
            }
            let group = format!("catalog.{}", state.scheme().domain());
            let kind = state
                .scheme()
                .find(&group, "v1", catalog.plural)
                .expect("the scheme serves the catalog's Kinds");
            let verb = verb(method, catalog.name.is_some(), query)?;
            let served = match catalog.subresource.as_deref() {
                None => kind.verbs,
                Some(sub) => kind.subresource(sub).map_or(&[][..], |sub| sub.verbs),
            };
            if !served.contains(&verb) {
                return Err(ApiError::MethodNotAllowed);
            }
            let mut request =
                Request::kind(verb, kind.clone(), catalog.namespace.as_deref(), catalog.name.as_deref());
            if let Some(sub) = &catalog.subresource {
                request = request.subresource(sub);
            }
            Ok(request)
        }
        Target::Check if method != Method::POST => Err(ApiError::MethodNotAllowed),
        Target::Check => Ok(Request::check()),
        Target::NodeLog { .. } if method != Method::GET => Err(ApiError::MethodNotAllowed),
        Target::NodeLog { node, .. } => Ok(Request::node_log(node)),
        Target::SessionLog { .. } if method != Method::GET => Err(ApiError::MethodNotAllowed),
        Target::SessionLog { node, .. } => Ok(Request::session_log(node)),
        Target::SessionStream { .. } if method != Method::GET && method != Method::POST => {
            Err(ApiError::MethodNotAllowed)
        }
        Target::SessionStream { node, .. } => Ok(Request::session_stream(node)),
        Target::SessionUsage { .. } if method != Method::GET => Err(ApiError::MethodNotAllowed),
        Target::SessionUsage { .. } => Ok(Request::session_usage()),
        Target::Health | Target::Issuer(_) => Err(not_found()),
        _ => Ok(Request::path(path)),
    }
}

#[cfg(test)]
mod tests;
