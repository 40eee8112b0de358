//! A team's own catalog service, built on `kayra-catalog`: the catalog's rules come from the
//! crate, and this service only translates HTTP to them and back. It serves
//!
//! | request | does |
//! | --- | --- |
//! | `GET /registrations`, `POST /registrations` | list, register an API |
//! | `GET`, `PUT`, `DELETE /registrations/{name}` | read, change, unregister one |
//! | `PUT /registrations/{name}/sync` | a new build (`{"canary_namespaces": [...]}` for a canary) |
//! | `GET /registrations/{name}/status` | how far each subscriber got |
//! | `POST /namespaces/{namespace}/subscriptions` | subscribe a namespace (`{"api": ..., "active": true}`) |
//! | `GET`, `DELETE /namespaces/{namespace}/subscriptions/{api}` | read, end a subscription |
//!
//! Errors are `{"error": "..."}` with a status code chosen in one place ([`ServiceError`]).
//! [`reconciler`] runs the catalog's reconciliation passes; `main.rs` wires both to a sled store.
//! The service has no authentication of its own: put it behind whatever the team already uses.

pub mod reconciler;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use kayra_catalog::{ApiRegistration, Catalog, CatalogError, Stored, Subscription, SyncRequest};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The service's routes over `catalog`.
pub fn router(catalog: Arc<Catalog>) -> Router {
    Router::new()
        .route("/registrations", get(list_registrations).post(create_registration))
        .route(
            "/registrations/{name}",
            get(get_registration).put(update_registration).delete(delete_registration),
        )
        .route("/registrations/{name}/sync", put(sync))
        .route("/registrations/{name}/status", get(status))
        .route("/namespaces/{namespace}/subscriptions", post(subscribe))
        .route("/namespaces/{namespace}/subscriptions/{api}", get(get_subscription).delete(unsubscribe))
        .with_state(catalog)
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

/// Why a request failed, as the service answers it.
#[derive(Debug)]
pub enum ServiceError {
    /// The body is not the JSON the request takes.
    Body(serde_json::Error),
    /// The catalog refused, or could not do, what was asked.
    Catalog(CatalogError),
}

impl From<CatalogError> for ServiceError {
    fn from(error: CatalogError) -> ServiceError {
        ServiceError::Catalog(error)
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let code = match &self {
            ServiceError::Body(_) => StatusCode::BAD_REQUEST,
            ServiceError::Catalog(error) => match error {
                CatalogError::Invalid(_) => StatusCode::BAD_REQUEST,
                CatalogError::NotFound(_) | CatalogError::Sync(_) => StatusCode::NOT_FOUND,
                CatalogError::NamespaceTerminating(_) => StatusCode::FORBIDDEN,
                CatalogError::Conflict(_) => StatusCode::CONFLICT,
                CatalogError::Store(store) if store.is_retryable() => StatusCode::SERVICE_UNAVAILABLE,
                CatalogError::Store(_) | CatalogError::Corrupt { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            },
        };
        let message = match &self {
            ServiceError::Body(error) => format!("the request body is not valid: {error}"),
            // What failed inside is for the log, not for the caller.
            ServiceError::Catalog(error) if code.is_server_error() => {
                tracing::error!(%error, "a catalog request failed");
                "the catalog cannot answer now; try again".to_owned()
            }
            ServiceError::Catalog(error) => error.to_string(),
        };
        (code, axum::Json(json!({"error": message}))).into_response()
    }
}

type Answer = Result<(StatusCode, axum::Json<Value>), ServiceError>;

/// An object as the catalog stores it, in its envelope (`apiVersion`, `kind`, `metadata`).
fn answer<T: Serialize>(code: StatusCode, catalog: &Catalog, kind: &str, stored: &Stored<T>) -> Answer {
    Ok((code, axum::Json(stored.to_json(&catalog.api_version(), kind))))
}

fn body<T: DeserializeOwned + Default>(bytes: &[u8]) -> Result<T, ServiceError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(ServiceError::Body)
}

async fn list_registrations(State(catalog): State<Arc<Catalog>>) -> Answer {
    let (items, _) = catalog.snapshot("apiregistrations").await?;
    Ok((StatusCode::OK, axum::Json(json!({"items": items}))))
}

async fn create_registration(State(catalog): State<Arc<Catalog>>, bytes: Bytes) -> Answer {
    let registration: ApiRegistration = body(&bytes)?;
    let created = catalog.create_registration(registration).await?;
    answer(StatusCode::CREATED, &catalog, "ApiRegistration", &created)
}

async fn get_registration(State(catalog): State<Arc<Catalog>>, Path(name): Path<String>) -> Answer {
    let registration = catalog.registration(&name).await?;
    answer(StatusCode::OK, &catalog, "ApiRegistration", &registration)
}

async fn update_registration(
    State(catalog): State<Arc<Catalog>>,
    Path(name): Path<String>,
    bytes: Bytes,
) -> Answer {
    let changes: serde_json::Map<String, Value> = body(&bytes)?;
    let updated = catalog.update_registration(&name, &changes).await?;
    answer(StatusCode::OK, &catalog, "ApiRegistration", &updated)
}

async fn delete_registration(State(catalog): State<Arc<Catalog>>, Path(name): Path<String>) -> Answer {
    let deleted = catalog.delete_registration(&name).await?;
    answer(StatusCode::OK, &catalog, "ApiRegistration", &deleted)
}

async fn sync(State(catalog): State<Arc<Catalog>>, Path(name): Path<String>, bytes: Bytes) -> Answer {
    let request: SyncRequest = body(&bytes)?;
    let synced = catalog.sync(&name, &request).await?;
    answer(StatusCode::OK, &catalog, "ApiRegistration", &synced)
}

async fn status(State(catalog): State<Arc<Catalog>>, Path(name): Path<String>) -> Answer {
    let status = catalog.status(&name).await?;
    Ok((StatusCode::OK, axum::Json(serde_json::to_value(status).unwrap_or(Value::Null))))
}

async fn subscribe(
    State(catalog): State<Arc<Catalog>>,
    Path(namespace): Path<String>,
    bytes: Bytes,
) -> Answer {
    let subscription: Subscription = body(&bytes)?;
    let created = catalog.subscribe(&namespace, subscription).await?;
    answer(StatusCode::CREATED, &catalog, "Subscription", &created)
}

async fn get_subscription(
    State(catalog): State<Arc<Catalog>>,
    Path((namespace, api)): Path<(String, String)>,
) -> Answer {
    let subscription = catalog.subscription(&namespace, &api).await?;
    answer(StatusCode::OK, &catalog, "Subscription", &subscription)
}

async fn unsubscribe(
    State(catalog): State<Arc<Catalog>>,
    Path((namespace, api)): Path<(String, String)>,
) -> Answer {
    let deleted = catalog.unsubscribe(&namespace, &api).await?;
    answer(StatusCode::OK, &catalog, "Subscription", &deleted)
}
