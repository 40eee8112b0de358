//! `POST /apis/authorization.<domain>/v1/check`: the RBAC decision an app asks Kayra for, about
//! a request to its own API, from the same engine that decides every request to Kayra. The
//! rules are `kayra_application::reviews`'; here the body is read and a forwarded end-user
//! token is authenticated as any bearer token is.

use axum::http::StatusCode;
use axum::response::Response;
use kayra_api::kinds::check::Check;
use kayra_application::permitted::Permitted;

use crate::error::ApiError;
use crate::handlers::respond::json_response;
use crate::middleware::authentication::bearer;
use crate::state::ApiState;

/// Answers one check, authorized as `create` on `check`.
pub(crate) async fn serve(
    state: &ApiState,
    permitted: &Permitted,
    body: &[u8],
) -> Result<Response, ApiError> {
    let check: Check = serde_json::from_slice(body)
        .map_err(|error| ApiError::BadRequest(format!("the check is not valid: {error}")))?;
    let forwarded = match &check.token {
        Some(token) => bearer(state, token).await,
        None => None,
    };
    let answer = permitted.check(&check, forwarded)?;
    Ok(json_response(StatusCode::OK, &answer, &[]))
}
