//! The HTTP surface: Consul's read endpoints over the projection, each authenticated by a
//! Kayra token and authorized by Kayra's RBAC through the application layer, held open as a
//! blocking query when asked, and Consul's plain-text answers for everything else.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use kayra_api::verb::Verb;
use kayra_application::ApplicationLayer;
use kayra_application::authorization::Request;
use kayra_application::client::Client;
use kayra_authn::{Identity, TokenFile};
use serde_json::{Value, json};

use crate::model::{Health, Snapshot};
use crate::projection::Projection;
use crate::query::{Query, Refusal, parse};
use crate::shapes::{self, Place};

/// How the projection presents itself.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The one datacenter's name (`dc1` by default).
    pub datacenter: String,
    /// The namespace read when a request names none (`default` by default).
    pub default_namespace: String,
    /// The address `/v1/status/leader` and `/v1/status/peers` name: where the projection listens.
    pub leader: String,
    /// The name `/v1/agent/self` gives the agent.
    pub node_name: String,
}

/// What the handlers share.
struct Consul {
    projection: Projection,
    layer: Arc<ApplicationLayer>,
    tokens: Arc<TokenFile>,
    settings: Settings,
}

/// The projection's routes, reading `projection`, authenticating with `tokens` (and bootstrap
/// tokens) and authorizing through `layer`.
pub fn router(
    projection: Projection,
    layer: Arc<ApplicationLayer>,
    tokens: Arc<TokenFile>,
    settings: Settings,
) -> Router {
    let consul = Arc::new(Consul { projection, layer, tokens, settings });
    let missing = |what: &'static str| read(move || async move { text(StatusCode::BAD_REQUEST, what) });
    Router::new()
        .route("/v1/catalog/services", read(catalog_services))
        .route("/v1/catalog/service/{name}", read(catalog_service))
        .route("/v1/catalog/service/", missing("Missing service name"))
        .route("/v1/health/service/{name}", read(health_service))
        .route("/v1/health/service/", missing("Missing service name"))
        .route("/v1/health/connect/{name}", read(health_connect))
        .route("/v1/health/checks/{name}", read(health_checks))
        .route("/v1/health/checks/", missing("Missing service name"))
        .route("/v1/health/state/{state}", read(health_state))
        .route("/v1/health/state/", missing("Missing check state"))
        .route("/v1/catalog/nodes", read(catalog_nodes))
        .route("/v1/catalog/node/{name}", read(catalog_node))
        .route("/v1/catalog/node/", missing("Missing node name"))
        .route("/v1/catalog/datacenters", read(datacenters))
        .route("/v1/status/leader", read(leader))
        .route("/v1/status/peers", read(peers))
        .route("/v1/agent/self", read(agent_self))
        .fallback(fallback)
        .with_state(consul)
}

/// A read route: `GET` (and `HEAD`) served, any other method refused as Consul refuses writes.
fn read<H, T>(handler: H) -> MethodRouter<Arc<Consul>>
where
    H: axum::handler::Handler<T, Arc<Consul>>,
    T: 'static,
{
    get(handler).fallback(fallback)
}

async fn fallback(method: Method) -> Response {
    if method == Method::GET || method == Method::HEAD {
        text(StatusCode::NOT_FOUND, "404 page not found")
    } else {
        text(StatusCode::METHOD_NOT_ALLOWED, &format!("method {method} not allowed"))
    }
}

fn text(status: StatusCode, body: &str) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body.to_owned()).into_response()
}

fn refused(refusal: Refusal) -> Response {
    text(refusal.status, &refusal.text)
}

/// A caller, authenticated, and what of the fleet it may read.
struct Reader {
    client: Client,
}

impl Reader {
    /// Whether the caller may list `plural` of the fleet (or core, for nodes) in `namespace`.
    fn may_list(&self, group: &str, plural: &str, namespace: Option<&str>) -> bool {
        let Ok(resource) = self.client.resource(group, plural) else { return false };
        let scheme = self.client.layer().scheme();
        let Some(kind) = scheme.find(&resource.group, &resource.version, &resource.plural) else {
            return false;
        };
        self.client.authorize(Request::kind(Verb::List, kind.clone(), namespace, None)).is_ok()
    }

    /// Reading a namespace's Services in Consul's shape needs `list` on its Services and
    /// Applications.
    fn sees_namespace(&self, namespace: &str) -> bool {
        let fleet = format!("fleet.{}", self.client.layer().scheme().domain());
        self.may_list(&fleet, "services", Some(namespace))
            && self.may_list(&fleet, "applications", Some(namespace))
    }

    fn sees_nodes(&self) -> bool {
        self.may_list("", "nodes", None)
    }
}

impl Consul {
    async fn authenticate(&self, token: Option<&str>) -> Result<Reader, Response> {
        let Some(token) = token else {
            return Err(text(StatusCode::FORBIDDEN, "Permission denied: a Kayra token is required"));
        };
        let identity: Option<Identity> = match self.tokens.authenticate(token) {
            Some(identity) => Some(identity),
            None => match kayra_authn::bootstrap::Token::parse(token) {
                Some(bootstrap) => self.layer.bootstrap_token(&bootstrap).await,
                None => None,
            },
        };
        let identity = identity.ok_or_else(|| text(StatusCode::FORBIDDEN, "ACL not found"))?;
        Ok(Reader { client: self.layer.client(identity) })
    }

    /// Reads the request, authenticates it, and holds it while `index` of what it reads has
    /// not moved past the `index` it names; answers the query and caller to serve.
    async fn begin(
        &self,
        query: Option<String>,
        headers: &HeaderMap,
        index: impl Fn(&Snapshot, &Query) -> u64,
    ) -> Result<(Query, Reader), Response> {
        let settings = &self.settings;
        let query = parse(query.as_deref(), headers, &settings.datacenter, &settings.default_namespace)
            .map_err(refused)?;
        let reader = self.authenticate(query.token.as_deref()).await?;
        if !self.projection.ready() {
            return Err(text(StatusCode::INTERNAL_SERVER_ERROR, "No cluster leader"));
        }
        if let Some(wanted) = query.index {
            self.hold(wanted, query.wait, |snapshot| index(snapshot, &query)).await;
        }
        Ok((query, reader))
    }

    /// Waits until `index` differs from `wanted` (moved past it, or behind it after a restart)
    /// or `wait` and Consul's jitter of up to a sixteenth of it pass.
    async fn hold(&self, wanted: u64, wait: Duration, index: impl Fn(&Snapshot) -> u64) {
        let jitter = wait.mul_f64(fraction() / 16.0);
        let deadline = tokio::time::Instant::now() + wait + jitter;
        let mut changes = self.projection.changes();
        loop {
            if index(&self.projection.snapshot()) != wanted {
                return;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    fn place<'a>(&'a self, query: &'a Query) -> Place<'a> {
        Place { datacenter: &self.settings.datacenter, namespace: &query.namespace }
    }
}

/// A fraction in [0, 1), different for each call: enough to spread held queries' deadlines, as
/// Consul's jitter does, without a random-number crate.
fn fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A JSON answer with Consul's index headers; `filtered` when ACLs hid something.
fn answer(index: u64, filtered: bool, body: &Value) -> Response {
    let mut response = (StatusCode::OK, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    headers.insert("x-consul-index", HeaderValue::from(index.max(1)));
    headers.insert("x-consul-knownleader", HeaderValue::from_static("true"));
    headers.insert("x-consul-lastcontact", HeaderValue::from_static("0"));
    headers.insert("x-consul-effective-consistency", HeaderValue::from_static("leader"));
    headers.insert("x-consul-default-acl-policy", HeaderValue::from_static("deny"));
    if filtered {
        headers.insert("x-consul-results-filtered-by-acls", HeaderValue::from_static("true"));
    }
    response
}

fn catalog_index(snapshot: &Snapshot, query: &Query) -> u64 {
    snapshot.namespace_index(&query.namespace, |view| view.catalog_index)
}

fn health_index(snapshot: &Snapshot, query: &Query) -> u64 {
    snapshot.namespace_index(&query.namespace, |view| view.health_index)
}

async fn catalog_services(
    State(consul): State<Arc<Consul>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let (query, reader) = match consul.begin(q, &headers, catalog_index).await {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    let sees = reader.sees_namespace(&query.namespace);
    let snapshot = consul.projection.snapshot();
    let mut body = serde_json::Map::new();
    if sees && let Some(view) = snapshot.namespaces.get(&query.namespace) {
        for (name, tags) in view.catalog() {
            let mut tags = tags.to_vec();
            tags.sort();
            tags.dedup();
            body.insert(name.to_owned(), json!(tags));
        }
    }
    answer(catalog_index(&snapshot, &query), !sees, &Value::Object(body))
}

/// The instances of service `name` the query selects: its tags and `passing`.
fn selected<'a>(
    snapshot: &'a Snapshot,
    query: &Query,
    name: &str,
) -> Vec<(&'a crate::model::ServiceView, &'a crate::model::Instance)> {
    let Some(view) = snapshot.namespaces.get(&query.namespace).and_then(|ns| ns.services.get(name)) else {
        return Vec::new();
    };
    if !query.tags.iter().all(|tag| view.tags.contains(tag)) {
        return Vec::new();
    }
    view.instances
        .iter()
        .filter(|instance| !query.passing || shapes::passing(instance))
        .map(|i| (view, i))
        .collect()
}

/// One Service's read: its instances shaped by `shape`.
async fn service_read(
    consul: Arc<Consul>,
    q: Option<String>,
    headers: HeaderMap,
    name: String,
    shape: impl Fn(&Consul, &Query, &Snapshot, &str) -> Vec<Value>,
) -> Response {
    let index = |snapshot: &Snapshot, query: &Query| snapshot.service_index(&query.namespace, &name);
    let (query, reader) = match consul.begin(q, &headers, index).await {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    let sees = reader.sees_namespace(&query.namespace);
    let snapshot = consul.projection.snapshot();
    let rows = if sees { shape(&consul, &query, &snapshot, &name) } else { Vec::new() };
    answer(index(&snapshot, &query), !sees, &Value::Array(rows))
}

async fn catalog_service(
    State(consul): State<Arc<Consul>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    service_read(consul, q, headers, name, |consul, query, snapshot, name| {
        let place = consul.place(query);
        selected(snapshot, query, name)
            .into_iter()
            .map(|(view, i)| shapes::catalog_row(name, view, i, place))
            .collect()
    })
    .await
}

async fn health_service(
    State(consul): State<Arc<Consul>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    service_read(consul, q, headers, name, |consul, query, snapshot, name| {
        let place = consul.place(query);
        selected(snapshot, query, name)
            .into_iter()
            .map(|(view, i)| shapes::health_entry(name, view, i, place, snapshot.nodes_index))
            .collect()
    })
    .await
}

/// No instance is Connect-capable: the fleet has no service mesh.
async fn health_connect(
    State(consul): State<Arc<Consul>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    service_read(consul, q, headers, name, |_, _, _, _| Vec::new()).await
}

async fn health_checks(
    State(consul): State<Arc<Consul>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    service_read(consul, q, headers, name, |consul, query, snapshot, name| {
        let place = consul.place(query);
        let query = Query { passing: false, ..query.clone() };
        selected(snapshot, &query, name)
            .into_iter()
            .map(|(view, i)| shapes::service_check(name, view, i, place))
            .collect()
    })
    .await
}

async fn health_state(
    State(consul): State<Arc<Consul>>,
    Path(state): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let (query, reader) = match consul.begin(q, &headers, health_index).await {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    let sees = reader.sees_namespace(&query.namespace);
    let snapshot = consul.projection.snapshot();
    let place = consul.place(&query);
    let mut checks = Vec::new();
    if sees && let Some(view) = snapshot.namespaces.get(&query.namespace) {
        let mut nodes = std::collections::BTreeMap::new();
        for (name, service) in &view.services {
            if !query.tags.iter().all(|tag| service.tags.contains(tag)) {
                continue;
            }
            for instance in &service.instances {
                nodes.insert(instance.node.name.as_str(), &instance.node);
                checks.push((instance.health, shapes::service_check(name, service, instance, place)));
            }
        }
        let node_checks =
            nodes.values().map(|node| (node.health, shapes::node_check(node, snapshot.nodes_index)));
        checks.splice(0..0, node_checks.collect::<Vec<_>>());
    }
    let wanted = |health: Health| state == "any" || health.as_str() == state;
    let rows: Vec<Value> =
        checks.into_iter().filter(|(health, _)| wanted(*health)).map(|(_, check)| check).collect();
    answer(health_index(&snapshot, &query), !sees, &Value::Array(rows))
}

async fn catalog_nodes(
    State(consul): State<Arc<Consul>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let index = |snapshot: &Snapshot, _: &Query| snapshot.nodes_index.max(snapshot.base_index);
    let (query, reader) = match consul.begin(q, &headers, index).await {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    let sees = reader.sees_nodes();
    let snapshot = consul.projection.snapshot();
    let place = consul.place(&query);
    let rows: Vec<Value> = if sees {
        snapshot.nodes.values().map(|node| shapes::node(node, place, snapshot.nodes_index)).collect()
    } else {
        Vec::new()
    };
    answer(index(&snapshot, &query), !sees, &Value::Array(rows))
}

async fn catalog_node(
    State(consul): State<Arc<Consul>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let index = |snapshot: &Snapshot, query: &Query| snapshot.nodes_index.max(health_index(snapshot, query));
    let (query, reader) = match consul.begin(q, &headers, index).await {
        Ok(begun) => begun,
        Err(response) => return response,
    };
    let sees = reader.sees_nodes();
    let snapshot = consul.projection.snapshot();
    let place = consul.place(&query);
    let body = match snapshot.nodes.get(&name).filter(|_| sees) {
        None => Value::Null,
        Some(node) => {
            let mut services = serde_json::Map::new();
            if reader.sees_namespace(&query.namespace)
                && let Some(view) = snapshot.namespaces.get(&query.namespace)
            {
                for (service, entry) in &view.services {
                    for instance in entry.instances.iter().filter(|i| i.node.name == name) {
                        services.insert(
                            instance.id.clone(),
                            shapes::agent_service(service, entry, instance, place),
                        );
                    }
                }
            }
            json!({"Node": shapes::node(node, place, snapshot.nodes_index), "Services": services})
        }
    };
    answer(index(&snapshot, &query), !sees, &body)
}

/// Served without a token, as Consul serves it.
async fn datacenters(State(consul): State<Arc<Consul>>) -> Response {
    axum::Json(json!([consul.settings.datacenter])).into_response()
}

/// Served without a token, as Consul serves it.
async fn leader(State(consul): State<Arc<Consul>>) -> Response {
    axum::Json(json!(consul.settings.leader)).into_response()
}

/// Served without a token, as Consul serves it.
async fn peers(State(consul): State<Arc<Consul>>) -> Response {
    axum::Json(json!([consul.settings.leader])).into_response()
}

/// Served without a token, as py-consul asks for it (it never sends one here).
async fn agent_self(State(consul): State<Arc<Consul>>) -> Response {
    let settings = &consul.settings;
    axum::Json(json!({
        "Config": {
            "Datacenter": settings.datacenter, "PrimaryDatacenter": settings.datacenter,
            "NodeName": settings.node_name, "NodeID": "", "Server": true,
            "Revision": "kayra", "Version": "1.20.0", "BuildDate": "",
        },
        "DebugConfig": {},
        "Member": {"Name": settings.node_name, "Addr": settings.leader, "Tags": {"dc": settings.datacenter, "role": "consul"}, "Status": 1},
        "Meta": {"consul-network-segment": ""},
    }))
    .into_response()
}
