//! Who the caller is: the identity of a verified client certificate (the listener puts it in
//! the request), else of a bearer token — the static token file's, else a service-account
//! token's (verified by the application layer's issuer), else a bootstrap token's. A
//! request with neither, or with a credential that does not authenticate, comes from nobody;
//! this layer refuses nothing itself (authorization answers 401), so that what follows, the
//! audit line included, knows who asked.

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{Extensions, HeaderMap, header};
use axum::response::Response;
use kayra_authn::Identity;

use super::audit::Subject;
use crate::error::ApiError;
use crate::serve::PeerIdentity;
use crate::state::ApiState;

/// Who a request comes from, in its extensions.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    /// No credential, or one that does not authenticate.
    Anonymous,
    /// The identity the request acts as, and the authenticated caller when it impersonates.
    Known {
        /// Who the request acts as.
        identity: Identity,
        /// Who authenticated, when that is someone else.
        impersonator: Option<Identity>,
    },
    /// An authenticated caller whose request is refused before it is routed (impersonation it
    /// may not do, or malformed impersonation headers).
    Refused {
        /// Why the request is refused.
        refusal: Arc<ApiError>,
    },
}

/// Authenticates the request.
pub(crate) async fn layer<F: Future<Output = Response>>(
    state: &Arc<ApiState>,
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    #[cfg(test)]
    crate::tests::fault(request.headers(), "authentication");
    let caller = match authenticate(state, request.headers(), request.extensions()).await {
        Some(identity) => {
            Subject::tell(&request, &identity, None);
            Caller::Known { identity, impersonator: None }
        }
        None => Caller::Anonymous,
    };
    request.extensions_mut().insert(caller);
    next(request).await
}

/// The identity a bearer token stands for: the token file's, else a service-account token's
/// (a JWS: three dot-separated parts), else a bootstrap token's.
pub(crate) async fn bearer(state: &ApiState, token: &str) -> Option<Identity> {
    if let Some(identity) = state.tokens.authenticate(token) {
        return Some(identity);
    }
    // The verifications that read the store are boxed: every request's future would
    // otherwise make room for them, the token file's included.
    if token.bytes().filter(|byte| *byte == b'.').count() == 2 {
        return Box::pin(state.layer().service_account_identity(token)).await;
    }
    let bootstrap = kayra_authn::bootstrap::Token::parse(token)?;
    Box::pin(state.layer().bootstrap_token(&bootstrap)).await
}

/// The caller: the verified client certificate's identity, else a bearer token's.
async fn authenticate(state: &ApiState, headers: &HeaderMap, extensions: &Extensions) -> Option<Identity> {
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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use crate::tests::{admin_request, router_with_tokens, status_of};

    #[tokio::test]
    async fn a_certificate_or_a_known_token_identifies_the_caller_and_anything_else_is_nobody() {
        let dir = tempfile::tempdir().expect("a directory");
        let file = dir.path().join("tokens.csv");
        std::fs::write(&file, "secret-token,alice,alice,\"system:masters\"\n").expect("the token file");
        let app = router_with_tokens(dir.path(), kayra_authn::TokenFile::load(&file).expect("it loads"));
        let ask = |authorization: Option<&str>| {
            let mut request = Request::builder().uri("/api/v1/namespaces");
            if let Some(value) = authorization {
                request = request.header("authorization", value);
            }
            app.clone().oneshot(request.body(Body::empty()).expect("a request"))
        };
        for (authorization, expected) in [
            (Some("Bearer secret-token"), StatusCode::OK),
            (Some("bearer secret-token"), StatusCode::OK),
            (Some("Bearer wrong"), StatusCode::UNAUTHORIZED),
            (Some("Basic secret-token"), StatusCode::UNAUTHORIZED),
            (Some("Bearer "), StatusCode::UNAUTHORIZED),
            (None, StatusCode::UNAUTHORIZED),
        ] {
            let (code, body) = status_of(ask(authorization).await.expect("an answer")).await;
            assert_eq!(code, expected, "{authorization:?}: {body}");
        }
        let certified = admin_request("GET", "/api/v1/namespaces").body(Body::empty()).expect("a request");
        let (code, _) = status_of(app.oneshot(certified).await.expect("an answer")).await;
        assert_eq!(code, StatusCode::OK, "a verified certificate's identity");
    }
}
