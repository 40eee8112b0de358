//! The HTTP surface of Kayra: the Kubernetes-shaped REST API that stock kubectl drives.
//!
//! [`router`] answers every request: health, `/version`, discovery, OpenAPI, and the resources
//! of the scheme through the registry. [`serve`] runs it over TLS (client certificates
//! verified against the cluster CA) or plain HTTP (bearer tokens only), with timeouts and
//! connection caps. Every error is a `metav1.Status`; authentication cannot be turned off.
//!
//! This is an adapter: the rules live in `kayra-registry` and `kayra-api`; here they meet axum,
//! hyper and rustls.

pub mod audit;
mod binding;
mod catalog;
mod check;
mod discovery;
mod error;
mod eviction;
mod handlers;
mod logs;
mod media;
mod openapi;
mod protobuf;
mod recover;
mod routes;
mod scale;
mod serve;
mod state;
mod table;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

pub use error::ApiError;
pub use serve::{ServeOptions, serve, tls_config};
pub use state::{ApiState, DEFAULT_WATCH_STALL};

use kayra_authn::Identity;
use routes::{PathError, Target};
pub use serve::PeerIdentity;

/// A router that answers every request with the same JSON at once: the ceiling the API's
/// overhead is measured against.
#[cfg(feature = "bench")]
pub fn bare_router(body: bytes::Bytes) -> Router {
    Router::new().fallback(move || {
        let body = body.clone();
        async move {
            let mut response = Response::new(Body::from(body));
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
    })
}

/// How long a client may take to send a request body.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The largest request body accepted.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The API as an axum router.
pub fn router(state: Arc<ApiState>) -> Router {
    recover::install_panic_hook();
    Router::new().fallback(dispatch).with_state(state)
}

/// `api` with gRPC requests to the service at `prefix` (`/<package>.<Service>`) routed to
/// `service`: the node session shares the API's TLS listener. The service authenticates its
/// callers itself, from the verified client certificate the listener puts in each request.
pub fn with_grpc<S>(api: Router, prefix: &str, service: S) -> Router
where
    S: tower::Service<axum::extract::Request, Error = std::convert::Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Response: axum::response::IntoResponse,
    S::Future: Send + 'static,
{
    api.route_service(&format!("{prefix}/{{*method}}"), service)
}

/// The outermost layer of every request: echoes or mints `Audit-Id`, then authenticates and
/// serves inside [`recover::catching`], so that a panic anywhere (authentication included)
/// becomes a 500 `Status`, logged with its backtrace. Every answer carries the `Audit-Id`, and
/// an audited request's line carries the same id.
async fn dispatch(State(state): State<Arc<ApiState>>, request: Request) -> Response {
    let audit_id = audit_id(request.headers());
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let audited = state.audit.as_ref().filter(|_| audit::AuditLog::audits(method.as_str(), &path)).cloned();
    let remote = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.to_string());
    let span = tracing::info_span!("request", %method, %path, %audit_id);
    // Who the request acts as, once authentication has answered (never, when it panicked).
    let mut audited_who: Option<(Option<Identity>, Option<Identity>)> = None;
    let served = recover::catching(
        async {
            let who = who(&state, request.headers(), request.extensions()).await;
            audited_who = Some(who.audited());
            handle(state.clone(), request, who).await
        }
        .instrument(span.clone()),
    )
    .await;
    let mut response = match served {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => error.into_response(),
        Err(panic) => {
            span.in_scope(|| {
                tracing::error!(
                    panic = %panic.message,
                    at = %panic.location,
                    backtrace = %panic.backtrace,
                    "the request panicked; answered 500"
                )
            });
            ApiError::Internal("the request could not be served".to_owned()).into_response()
        }
    };
    if let Ok(value) = HeaderValue::from_str(&audit_id) {
        response.headers_mut().insert(AUDIT_ID, value);
    }
    if let Some(log) = audited {
        let (user, impersonator) = audited_who.unwrap_or((None, None));
        log.record(&audit::Entry {
            audit_id: &audit_id,
            method: method.as_str(),
            path: &path,
            user: user.as_ref(),
            impersonator: impersonator.as_ref(),
            remote,
            code: response.status().as_u16(),
        });
    }
    span.in_scope(|| tracing::debug!(status = response.status().as_u16(), "served"));
    response
}

/// The header that names a request in the audit log, as Kubernetes spells it.
const AUDIT_ID: &str = "audit-id";

/// The request's `Audit-Id` when it sends a usable one (visible ASCII, at most 128
/// characters), else a fresh UUID.
fn audit_id(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

async fn handle(state: Arc<ApiState>, request: Request, who: Who) -> Result<Response, ApiError> {
    #[cfg(test)]
    tests::fault(request.headers(), "handler");
    let (parts, body) = request.into_parts();
    let (identity, target) = match admit(&state, parts.uri.path(), who) {
        Ok(Some(admitted)) => admitted,
        Ok(None) => return Ok((StatusCode::OK, "ok").into_response()),
        Err(Refusal::Error(error)) => {
            drain(body).await;
            return Err(error);
        }
        Err(Refusal::Unrouted(identity)) => {
            drain(body).await;
            let path = parts.uri.path();
            // Discovery of a registered API is a discovery path like any other.
            let discovery =
                kayra_authz::Action::NonResource { verb: "get".to_owned(), path: path.to_owned() };
            if state.allows(&identity, &discovery)
                && let Some(found) = catalog::registered_discovery(&state, path).await
            {
                return Ok(found);
            }
            if let Some(elsewhere) = catalog::served_elsewhere(&state, path).await {
                return Err(elsewhere);
            }
            return Err(ApiError::NotFound("the server could not find the requested resource".to_owned()));
        }
    };
    let body = match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(body)) => body,
        Ok(Err(error)) => {
            let error = error.into_inner();
            let too_large =
                std::iter::successors(Some(error.as_ref() as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                })
                .any(|e| e.is::<http_body_util::LengthLimitError>());
            return Err(if too_large {
                ApiError::TooLarge
            } else {
                ApiError::BadRequest(format!("the request body could not be read: {error}"))
            });
        }
        Err(_) => {
            return Err(ApiError::BadRequest(format!(
                "the request body did not arrive within {} seconds",
                BODY_TIMEOUT.as_secs()
            )));
        }
    };
    let query: HashMap<String, String> = parts
        .uri
        .query()
        .map(|q| {
            axum::extract::Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
                .map(|q| q.0)
                .map_err(|_| ApiError::BadRequest(format!("malformed query {q:?}")))
        })
        .transpose()?
        .unwrap_or_default();
    if !matches!(target, Target::Resource(_) | Target::Catalog(_) | Target::Check) {
        let action =
            kayra_authz::Action::NonResource { verb: "get".to_owned(), path: parts.uri.path().to_owned() };
        if !state.allows(&identity, &action) {
            return Err(ApiError::Forbidden(action.refusal(&identity.user)));
        }
    }
    let read_only = |response: Response| -> Result<Response, ApiError> {
        if parts.method == Method::GET || parts.method == Method::HEAD {
            Ok(response)
        } else {
            Err(ApiError::MethodNotAllowed)
        }
    };
    match target {
        Target::Health => Ok((StatusCode::OK, "ok").into_response()),
        Target::Version => read_only(json(discovery::version())),
        Target::Metrics => read_only(metrics(&state)),
        Target::Api => read_only(discovery_response(&state, &parts.headers, true, &[])?),
        Target::Apis => {
            let registered = catalog::registered_apis(&state).await;
            read_only(discovery_response(&state, &parts.headers, false, &registered)?)
        }
        Target::GroupVersion(group, version) => {
            read_only(json(discovery::resource_list(&state.scheme, &group, &version)))
        }
        Target::Group(group) => read_only(json(discovery::group(&state.scheme, &group))),
        Target::OpenApiRoot => read_only(json(state.openapi.root())),
        Target::OpenApi(group, version) => {
            let document = state.openapi.get(&group, &version).ok_or_else(|| {
                ApiError::NotFound("the server could not find the requested resource".to_owned())
            })?;
            let mut response = Response::new(Body::from(document.to_vec()));
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if parts.uri.query().is_some_and(|q| q.contains("hash=")) {
                response
                    .headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            }
            read_only(response)
        }
        Target::Resource(path) => {
            let disconnect = parts.extensions.get::<serve::Disconnect>().cloned();
            handlers::serve(
                state.clone(),
                &identity,
                &parts.method,
                path,
                &query,
                &parts.headers,
                body,
                disconnect,
            )
            .await
        }
        Target::Catalog(path) => {
            catalog::serve(&state, &identity, &parts.method, path, &query, &parts.headers, &body).await
        }
        Target::Check => check::serve(&state, &identity, &parts.method, &body).await,
    }
}

/// The metrics registry in the OpenMetrics text format Prometheus scrapes.
fn metrics(state: &ApiState) -> Response {
    let mut text = String::new();
    if let Some(registry) = &state.metrics
        && let Err(error) = prometheus_client::encoding::text::encode(&mut text, registry)
    {
        tracing::error!(%error, "the metrics could not be encoded");
        return ApiError::Internal("the metrics could not be encoded".to_owned()).into_response();
    }
    let mut response = Response::new(Body::from(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

/// What is decided before a request's body is read: a canonical path (else 400), health
/// (answered to anyone, as `None`), an identity (else 401 or the impersonation's refusal), and a
/// route (else 404).
/// A path no route serves comes back as `Unrouted` with the caller, for the catalog to claim.
fn admit<'a>(state: &'a ApiState, path: &str, who: Who) -> Result<Option<(Identity, Target<'a>)>, Refusal> {
    let target = match routes::parse(&state.scheme, path) {
        Err(PathError::NonCanonical) => {
            return Err(Refusal::Error(ApiError::BadRequest(
                "the request path is not canonical: empty, '.', '..' or percent-encoded segments are refused"
                    .to_owned(),
            )));
        }
        Ok(Target::Health) => return Ok(None),
        target => target,
    };
    let identity = match who {
        Who::Anonymous => return Err(Refusal::Error(ApiError::Unauthorized)),
        Who::Refused(_, error) => return Err(Refusal::Error(error)),
        Who::Known { identity, .. } => identity,
    };
    match target {
        Ok(target) => Ok(Some((identity, target))),
        Err(_) => Err(Refusal::Unrouted(identity)),
    }
}

/// Why a request was not admitted.
enum Refusal {
    /// It fails as this.
    Error(ApiError),
    /// No route serves its path; this is its caller.
    Unrouted(Identity),
}

/// Reads and drops what a refused request still sends (up to 256 KiB, for at most a second),
/// so that its client reads the answer instead of a reset connection.
async fn drain(body: Body) {
    let limited = http_body_util::Limited::new(body, 256 * 1024);
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(1), http_body_util::BodyExt::collect(limited))
            .await;
}

/// Who a request comes from.
enum Who {
    /// No credential, or one that does not authenticate.
    Anonymous,
    /// An authenticated caller whose request is refused before routing (impersonation it may
    /// not do).
    Refused(Identity, ApiError),
    /// The identity the request acts as, and the authenticated caller when it impersonates.
    Known { identity: Identity, impersonator: Option<Identity> },
}

impl Who {
    /// The acting user and the impersonator, as the audit log records them.
    fn audited(&self) -> (Option<Identity>, Option<Identity>) {
        match self {
            Who::Anonymous => (None, None),
            Who::Refused(identity, _) => (Some(identity.clone()), None),
            Who::Known { identity, impersonator } => (Some(identity.clone()), impersonator.clone()),
        }
    }
}

/// Authenticates the request, then applies the impersonation headers its caller may use.
async fn who(state: &ApiState, headers: &axum::http::HeaderMap, extensions: &axum::http::Extensions) -> Who {
    let Some(identity) = authenticate(state, headers, extensions).await else { return Who::Anonymous };
    match impersonate(state, &identity, headers) {
        Ok(None) => Who::Known { identity, impersonator: None },
        Ok(Some(acting)) => Who::Known { identity: acting, impersonator: Some(identity) },
        Err(error) => Who::Refused(identity, error),
    }
}

/// The identity a bearer token stands for: the token file's, else a bootstrap token's.
pub(crate) async fn bearer(state: &ApiState, token: &str) -> Option<Identity> {
    if let Some(identity) = state.tokens.authenticate(token) {
        return Some(identity);
    }
    state.bootstrap_token(&kayra_authn::bootstrap::Token::parse(token)?).await
}

/// The caller: the verified client certificate's identity, else a bearer token's (from the
/// token file, else a bootstrap token).
async fn authenticate(
    state: &ApiState,
    headers: &axum::http::HeaderMap,
    extensions: &axum::http::Extensions,
) -> Option<Identity> {
    #[cfg(test)]
    tests::fault(headers, "authentication");
    if let Some(PeerIdentity(identity)) = extensions.get::<PeerIdentity>() {
        return Some(identity.clone());
    }
    let authorization = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = authorization.split_once(' ')?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return None;
    }
    bearer(state, token).await
}

/// `Impersonate-User`, `Impersonate-Group` and `Impersonate-Uid`, as Kubernetes honours
/// them: each needs `impersonate` on `users`, `serviceaccounts`, `groups` or `uids` of that
/// name, and the request then acts as exactly that user and those groups.
fn impersonate(
    state: &ApiState,
    caller: &Identity,
    headers: &axum::http::HeaderMap,
) -> Result<Option<Identity>, ApiError> {
    let values = |name: &str| -> Result<Vec<String>, ApiError> {
        headers
            .get_all(name)
            .iter()
            .map(|value| {
                value
                    .to_str()
                    .map(str::to_owned)
                    .map_err(|_| ApiError::BadRequest(format!("the {name} header is not ASCII")))
            })
            .collect()
    };
    let users = values("impersonate-user")?;
    let groups = values("impersonate-group")?;
    let uids = values("impersonate-uid")?;
    if headers.keys().any(|name| name.as_str().starts_with("impersonate-extra-")) {
        return Err(ApiError::BadRequest("Impersonate-Extra headers are not supported".to_owned()));
    }
    let user = match users.as_slice() {
        [] if groups.is_empty() && uids.is_empty() => return Ok(None),
        [] => {
            return Err(ApiError::BadRequest(
                "Impersonate-Group and Impersonate-Uid need an Impersonate-User".to_owned(),
            ));
        }
        [user] if !user.is_empty() => user.clone(),
        _ => {
            return Err(ApiError::BadRequest("exactly one non-empty Impersonate-User is allowed".to_owned()));
        }
    };
    if uids.len() > 1 {
        return Err(ApiError::BadRequest("at most one Impersonate-Uid is allowed".to_owned()));
    }
    let mut wanted = Vec::new();
    match user.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':')) {
        Some((namespace, name)) => {
            wanted.push(("", "serviceaccounts", Some(namespace.to_owned()), name.to_owned()))
        }
        None => wanted.push(("", "users", None, user.clone())),
    }
    wanted.extend(groups.iter().map(|group| ("", "groups", None, group.clone())));
    wanted.extend(uids.iter().map(|uid| ("authentication.k8s.io", "uids", None, uid.clone())));
    for (api, resource, namespace, name) in wanted {
        let action = kayra_authz::Action::Resource {
            verb: "impersonate".to_owned(),
            api: api.to_owned(),
            resource: resource.to_owned(),
            namespace,
            name: Some(name.clone()),
        };
        if !state.allows(caller, &action) {
            return Err(ApiError::Forbidden(action.refusal(&caller.user)));
        }
    }
    Ok(Some(Identity::new(user, uids.into_iter().next().unwrap_or_default(), groups)))
}

fn json(value: serde_json::Value) -> Response {
    handlers::json_response(StatusCode::OK, &value, &[])
}

fn discovery_response(
    state: &ApiState,
    headers: &axum::http::HeaderMap,
    core: bool,
    registered: &[discovery::RegisteredApi],
) -> Result<Response, ApiError> {
    match media::discovery(headers).ok_or(ApiError::NotAcceptable)? {
        media::Discovery::Aggregated(version) => {
            let mut response = json(discovery::aggregated(&state.scheme, core, version, registered));
            let content_type =
                format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_str(&content_type).expect("a valid header"));
            Ok(response)
        }
        media::Discovery::Legacy if core => Ok(json(discovery::api_versions(&state.server_address))),
        media::Discovery::Legacy => Ok(json(discovery::api_group_list(&state.scheme, registered))),
    }
}
