//! `POST` of a review (`SelfSubjectAccessReview`, `SelfSubjectRulesReview`,
//! `SelfSubjectReview`): the caller asks about itself and is answered at once; nothing is
//! stored.

use axum::http::StatusCode;
use axum::response::Response;

use super::{Call, body, respond};
use crate::error::ApiError;

/// Answers the review.
pub(crate) fn serve(call: &Call<'_>) -> Result<Response, ApiError> {
    let review = body::object(&call.target.kind, call.headers, call.body)?;
    let answered = call.permitted.review(review)?;
    Ok(respond::json_response(StatusCode::CREATED, &answered, &[]))
}
