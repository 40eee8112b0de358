//! `POST` of a review (`SelfSubjectAccessReview`, `SelfSubjectRulesReview`,
//! `SelfSubjectReview`, `TokenReview`): the caller asks about itself or a token and is answered
//! at once; nothing is stored.

use axum::http::StatusCode;
use axum::response::Response;

use super::{Call, body, respond};
use crate::error::ApiError;

/// Answers the review.
pub(crate) async fn serve(call: &Call<'_>) -> Result<Response, ApiError> {
    let review = body::object(&call.target.kind, call.headers, call.body)?;
    let answered = call.permitted.review(review).await?;
    Ok(respond::json_response(StatusCode::CREATED, &answered, &[]))
}
