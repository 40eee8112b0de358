//! Acting as someone else: `Impersonate-User`, `Impersonate-Group` and `Impersonate-Uid`, as
//! Kubernetes honours them (`kubectl --as`, `--as-group`). This layer reads the headers; the
//! application layer decides whether the caller may act as each user, group and uid, and the
//! request then acts as exactly that user and those groups. A refusal is answered by the
//! authorization layer, after routing, as every refusal is.

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::Response;
use kayra_application::authorization::Impersonation;

use super::audit::Subject;
use super::authentication::Caller;
use crate::error::ApiError;
use crate::state::ApiState;

/// Applies the impersonation headers the caller sent.
pub(crate) async fn layer<F: Future<Output = Response>>(
    state: &Arc<ApiState>,
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    if let Some(Caller::Known { identity, impersonator: None }) =
        request.extensions().get::<Caller>().cloned()
    {
        let acting = wanted(request.headers()).and_then(|wanted| match wanted {
            None => Ok(None),
            Some(wanted) => state.layer().impersonate(&identity, &wanted).map(Some).map_err(ApiError::from),
        });
        let caller = match acting {
            Ok(None) => None,
            Ok(Some(acting)) => {
                Subject::tell(&request, &acting, Some(&identity));
                Some(Caller::Known { identity: acting, impersonator: Some(identity) })
            }
            Err(refusal) => Some(Caller::Refused { refusal: Arc::new(refusal) }),
        };
        if let Some(caller) = caller {
            request.extensions_mut().insert(caller);
        }
    }
    next(request).await
}

/// Whom the headers ask to act as, if anyone; malformed headers are refused.
fn wanted(headers: &HeaderMap) -> Result<Option<Impersonation>, ApiError> {
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
    Ok(Some(Impersonation { user, groups, uid: uids.into_iter().next() }))
}

#[cfg(test)]
mod tests;
