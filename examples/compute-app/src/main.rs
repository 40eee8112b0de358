//! `compute-app`: the API `compute.example.com` as a platform team would run it behind its
//! gateway. It serves machines in namespaces, publishes its OpenAPI document at
//! `/apis/compute.example.com/-/openapi.json` built from its own route table, asks Kayra's
//! `/apis/authorization.<domain>/v1/check` whether each caller may do what it asks (forwarding
//! the caller's bearer token), and takes the reconciler's sync notifications.
//!
//! Environment: `LISTEN` (`127.0.0.1:9090`), `KAYRA_URL` (Kayra's API, e.g. its plain-HTTP
//! listener), `KAYRA_TOKEN` (this app's own bearer token), `KAYRA_DOMAIN` (`example.com`), and
//! `COMPUTE_APP_TEST_HOOKS=1` to serve `/-/faults`, which tests use to break it on purpose.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

const API: &str = "compute.example.com";

/// One route: method, path template, and what RBAC calls the request.
struct Route {
    method: &'static str,
    path: &'static str,
    resource: &'static str,
    verb: &'static str,
}

/// The routes the document is built from, and that the router serves.
const ROUTES: &[Route] = &[
    Route {
        method: "get",
        path: "/apis/compute.example.com/v1/namespaces/{namespace}/machines",
        resource: "machines",
        verb: "list",
    },
    Route {
        method: "post",
        path: "/apis/compute.example.com/v1/namespaces/{namespace}/machines",
        resource: "machines",
        verb: "create",
    },
    Route {
        method: "get",
        path: "/apis/compute.example.com/v1/namespaces/{namespace}/machines/{name}",
        resource: "machines",
        verb: "get",
    },
    Route {
        method: "delete",
        path: "/apis/compute.example.com/v1/namespaces/{namespace}/machines/{name}",
        resource: "machines",
        verb: "delete",
    },
    Route {
        method: "post",
        path: "/apis/compute.example.com/v1/namespaces/{namespace}/machines/{name}/reboot",
        resource: "machines",
        verb: "create",
    },
];

/// The OpenAPI document of [`ROUTES`].
fn document() -> Value {
    let mut paths: BTreeMap<&str, serde_json::Map<String, Value>> = BTreeMap::new();
    for route in ROUTES {
        let operation = json!({"summary": format!("{} {}", route.verb, route.resource), "responses": {"200": {"description": "OK"}}});
        paths.entry(route.path).or_default().insert(route.method.to_owned(), operation);
    }
    json!({"openapi": "3.1.0", "info": {"title": API, "version": "1"}, "paths": paths})
}

#[derive(Default)]
struct Machines {
    by_namespace: BTreeMap<String, BTreeMap<String, Value>>,
}

/// Failure switches a test flips to break the document or the sync hook.
#[derive(Default)]
struct Faults {
    document: bool,
    sync: bool,
}

struct App {
    http: reqwest::Client,
    kayra: String,
    token: String,
    domain: String,
    machines: Mutex<Machines>,
    syncs: Mutex<Vec<String>>,
    faults: Mutex<Faults>,
}

impl App {
    /// Asks Kayra whether the bearer of `headers` may `verb` the resource; `Err` is the answer
    /// to send back when not.
    async fn check(
        &self,
        headers: &HeaderMap,
        namespace: &str,
        verb: &str,
        name: Option<&str>,
        subresource: Option<&str>,
    ) -> Result<(), Response> {
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| (StatusCode::UNAUTHORIZED, "a bearer token is required").into_response())?;
        let body = json!({"api": API, "namespace": namespace, "resource": "machines", "subresource": subresource,
                          "name": name, "verb": verb, "token": token});
        let url = format!("{}/apis/authorization.{}/v1/check", self.kayra, self.domain);
        let answer = self.http.post(url).bearer_auth(&self.token).json(&body).send().await;
        let answer: Value = match answer {
            Ok(response) if response.status().is_success() => response.json().await.unwrap_or(Value::Null),
            Ok(response) => {
                return Err((StatusCode::BAD_GATEWAY, format!("Kayra answered {}", response.status()))
                    .into_response());
            }
            Err(error) => {
                return Err(
                    (StatusCode::BAD_GATEWAY, format!("Kayra is unreachable: {error}")).into_response()
                );
            }
        };
        if answer["allowed"] == true {
            Ok(())
        } else {
            Err((StatusCode::FORBIDDEN, axum::Json(json!({"message": answer["reason"]}))).into_response())
        }
    }
}

type Shared = State<Arc<App>>;

async fn list(State(app): Shared, Path(namespace): Path<String>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.check(&headers, &namespace, "list", None, None).await {
        return refused;
    }
    let machines = app.machines.lock().expect("machines lock");
    let items: Vec<Value> =
        machines.by_namespace.get(&namespace).map(|m| m.values().cloned().collect()).unwrap_or_default();
    axum::Json(json!({"items": items})).into_response()
}

async fn create(
    State(app): Shared,
    Path(namespace): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    if let Err(refused) = app.check(&headers, &namespace, "create", None, None).await {
        return refused;
    }
    let Some(name) = body["name"].as_str().map(str::to_owned) else {
        return (StatusCode::BAD_REQUEST, "a machine needs a name").into_response();
    };
    let machine = json!({"name": name, "namespace": namespace});
    app.machines
        .lock()
        .expect("machines lock")
        .by_namespace
        .entry(namespace)
        .or_default()
        .insert(name, machine.clone());
    (StatusCode::CREATED, axum::Json(machine)).into_response()
}

async fn read(
    State(app): Shared,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = app.check(&headers, &namespace, "get", Some(&name), None).await {
        return refused;
    }
    let machines = app.machines.lock().expect("machines lock");
    match machines.by_namespace.get(&namespace).and_then(|m| m.get(&name)) {
        Some(machine) => axum::Json(machine.clone()).into_response(),
        None => (StatusCode::NOT_FOUND, "no such machine").into_response(),
    }
}

async fn remove(
    State(app): Shared,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = app.check(&headers, &namespace, "delete", Some(&name), None).await {
        return refused;
    }
    let removed = app
        .machines
        .lock()
        .expect("machines lock")
        .by_namespace
        .get_mut(&namespace)
        .and_then(|m| m.remove(&name));
    match removed {
        Some(machine) => axum::Json(machine).into_response(),
        None => (StatusCode::NOT_FOUND, "no such machine").into_response(),
    }
}

async fn reboot(
    State(app): Shared,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = app.check(&headers, &namespace, "create", Some(&name), Some("reboot")).await {
        return refused;
    }
    (StatusCode::ACCEPTED, axum::Json(json!({"rebooting": name}))).into_response()
}

async fn openapi(State(app): Shared) -> Response {
    if app.faults.lock().expect("faults lock").document {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the document is broken").into_response();
    }
    axum::Json(document()).into_response()
}

/// The reconciler's step: a namespace moved to a build.
async fn sync(State(app): Shared, Path((namespace, sync_id)): Path<(String, String)>) -> Response {
    if app.faults.lock().expect("faults lock").sync {
        return (StatusCode::SERVICE_UNAVAILABLE, "syncs are failing").into_response();
    }
    app.syncs.lock().expect("syncs lock").push(format!("{namespace} {sync_id}"));
    StatusCode::ACCEPTED.into_response()
}

async fn syncs(State(app): Shared) -> Response {
    axum::Json(json!(*app.syncs.lock().expect("syncs lock"))).into_response()
}

/// `POST .../-/faults` with `{"document": bool, "sync": bool}`: what a test breaks.
async fn faults(State(app): Shared, axum::Json(body): axum::Json<Value>) -> Response {
    let mut faults = app.faults.lock().expect("faults lock");
    faults.document = body["document"] == true;
    faults.sync = body["sync"] == true;
    StatusCode::NO_CONTENT.into_response()
}

fn router(app: Arc<App>, test_hooks: bool) -> Router {
    let machines = "/apis/compute.example.com/v1/namespaces/{namespace}/machines";
    let router = Router::new()
        .route(machines, get(list).post(create))
        .route(&format!("{machines}/{{name}}"), get(read).delete(remove))
        .route(&format!("{machines}/{{name}}/reboot"), post(reboot))
        .route("/apis/compute.example.com/-/openapi.json", get(openapi))
        .route("/apis/compute.example.com/-/sync/{namespace}/{sync_id}", post(sync))
        .route("/apis/compute.example.com/-/syncs", get(syncs));
    // Breaking the app on purpose is for tests only.
    let router =
        if test_hooks { router.route("/apis/compute.example.com/-/faults", post(faults)) } else { router };
    router.with_state(app)
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let app = Arc::new(App {
        http: reqwest::Client::new(),
        kayra: env("KAYRA_URL", "http://127.0.0.1:8080").trim_end_matches('/').to_owned(),
        token: env("KAYRA_TOKEN", ""),
        domain: env("KAYRA_DOMAIN", "example.com"),
        machines: Mutex::default(),
        syncs: Mutex::default(),
        faults: Mutex::default(),
    });
    let listen = env("LISTEN", "127.0.0.1:9090");
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .unwrap_or_else(|e| panic!("cannot listen on {listen}: {e}"));
    let test_hooks = std::env::var("COMPUTE_APP_TEST_HOOKS").is_ok_and(|v| v == "1");
    axum::serve(listener, router(app, test_hooks)).await.expect("the app serves");
}
