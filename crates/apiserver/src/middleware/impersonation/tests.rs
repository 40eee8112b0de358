//! Impersonation headers: one user, its groups and at most one uid, acted as only when the
//! caller may impersonate each.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use tower::ServiceExt;

use super::*;
use crate::tests::{admin_request, router, status_of};

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_str(value).expect("a header value"));
    }
    headers
}

#[test]
fn the_headers_name_one_user_its_groups_and_at_most_one_uid() {
    assert_eq!(wanted(&HeaderMap::new()).expect("no headers"), None);
    let asked = wanted(&headers(&[
        ("impersonate-user", "alice"),
        ("impersonate-group", "a"),
        ("impersonate-group", "b"),
    ]))
    .expect("valid")
    .expect("someone");
    assert_eq!(
        asked,
        Impersonation { user: "alice".into(), groups: vec!["a".into(), "b".into()], uid: None }
    );
    for bad in [
        headers(&[("impersonate-group", "a")]),
        headers(&[("impersonate-user", "alice"), ("impersonate-user", "bob")]),
        headers(&[("impersonate-user", "")]),
        headers(&[("impersonate-user", "alice"), ("impersonate-uid", "1"), ("impersonate-uid", "2")]),
        headers(&[("impersonate-user", "alice"), ("impersonate-extra-scopes", "x")]),
    ] {
        assert!(matches!(wanted(&bad), Err(ApiError::BadRequest(_))), "{bad:?}");
    }
}

#[tokio::test]
async fn a_request_acts_as_whom_it_may_impersonate_and_is_refused_otherwise() {
    let dir = tempfile::tempdir().expect("a directory");
    let app = router(dir.path());
    let request = admin_request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header("impersonate-user", "alice")
        .header("impersonate-group", "system:masters")
        .header("content-type", "application/json")
        .body(Body::from(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#))
        .expect("a request");
    let (code, review) = status_of(app.clone().oneshot(request).await.expect("an answer")).await;
    assert_eq!(code, StatusCode::CREATED, "{review}");
    assert_eq!(review["status"]["userInfo"]["username"], "alice", "{review}");
    // Alice, acting, may not impersonate in turn: only the authenticated caller impersonates.
    let request = admin_request("GET", "/api/v1/namespaces")
        .header("impersonate-user", "alice")
        .header("impersonate-user", "bob")
        .body(Body::empty())
        .expect("a request");
    let (code, _) = status_of(app.oneshot(request).await.expect("an answer")).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
}
