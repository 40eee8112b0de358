//! Serving a request to a Kind's objects, once it is authorized: each handler decodes the
//! request (query, body, media type), makes the one call to the application layer its permit
//! allows, and encodes the answer (JSON, a Table, a stream). No rule lives here.
//!
//! By concern: [`read`] (get and list), [`watch`], [`write`] (create, update, patch, delete,
//! delete-collection), [`reviews`], [`subresources`] (binding, eviction, scale, token),
//! [`history`] (history, rollback and the freeze and thaw doors), [`logs`], [`usage`] and
//! [`streams`] (exec, attach, port-forward, served from the dispatcher, which hands them the
//! connection to upgrade);
//! [`options`] and [`body`] read what the request asks, [`respond`] writes the answer.

pub(crate) mod body;
pub(crate) mod history;
pub(crate) mod logs;
pub(crate) mod options;
pub(crate) mod read;
pub(crate) mod respond;
pub(crate) mod reviews;
pub(crate) mod streams;
pub(crate) mod subresources;
pub(crate) mod usage;
pub(crate) mod watch;
pub(crate) mod write;

use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use kayra_api::verb::Verb;
use kayra_application::authorization::KindTarget;
use kayra_application::permitted::Permitted;

use crate::error::ApiError;
use crate::routes::Query;
use crate::serve::Disconnect;
use crate::state::ApiState;

/// One authorized request to a Kind's objects, as its handler reads it.
pub(crate) struct Call<'a> {
    /// The server's state.
    pub(crate) state: &'a Arc<ApiState>,
    /// What the caller may do.
    pub(crate) permitted: &'a Permitted,
    /// The Kind's objects it addresses.
    pub(crate) target: &'a KindTarget,
    /// Its query parameters.
    pub(crate) query: &'a Query,
    /// Its headers.
    pub(crate) headers: &'a HeaderMap,
    /// Its body, read whole.
    pub(crate) body: &'a Bytes,
    /// Drops its connection (a watch whose client stopped reading).
    pub(crate) disconnect: Option<Disconnect>,
}

/// Serves one authorized request to a Kind's objects.
pub(crate) async fn serve(call: Call<'_>) -> Result<Response, ApiError> {
    let verb = call.permitted.request().verb;
    match (verb, call.target.subresource.as_deref()) {
        (_, Some("log")) => logs::serve(&call).await,
        (_, Some("eviction")) => subresources::evict(&call).await,
        (_, Some("binding")) => subresources::bind(&call).await,
        (_, Some("token")) => subresources::token(&call).await,
        (_, Some("scale")) => subresources::scale(&call).await,
        (_, Some("metrics")) => usage::application(&call).await,
        (_, Some("history")) => history::history(&call).await,
        (_, Some("rollback")) => history::rollback(&call).await,
        (_, Some("freeze")) => history::freeze(&call).await,
        (_, Some("thaw")) => history::thaw(&call).await,
        (Verb::Get, None) if call.target.kind.usage => usage::get(&call).await,
        (Verb::List, None) if call.target.kind.usage => usage::list(&call).await,
        (Verb::Create, None) if call.target.kind.review => reviews::serve(&call).await,
        (Verb::Get, _) => read::get(&call).await,
        (Verb::List, _) => read::list(&call).await,
        (Verb::Watch, _) => watch::serve(call).await,
        (Verb::Create, _) => write::create(&call).await,
        (Verb::Update, _) => write::update(&call).await,
        (Verb::Patch, _) => write::patch(&call).await,
        (Verb::Delete, _) => write::delete(&call).await,
        (Verb::DeleteCollection, _) => write::delete_collection(&call).await,
    }
}
