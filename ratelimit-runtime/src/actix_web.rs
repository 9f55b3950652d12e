//! [actix-web](https://docs.rs/actix-web) integration (feature `actix-web`):
//! [`RateLimitError`] implements [`ResponseError`], so a handler under `#[rate_limit]` may
//! return `Result<impl Responder, RateLimitError>`, or `Result<_, AppError>` where `AppError`
//! implements `From<RateLimitError>` and `ResponseError` (delegating to this one for its
//! rate-limit variant).
//!
//! The statuses, fields and problem+json bodies are those of the `axum` feature, listed under
//! [`headers`' Responses](crate::headers#responses); [`problem`] makes such a body for an
//! application's other errors.
//!
//! `#[rate_limit]` goes on a handler like on any `async fn`; its `key` and `limiter` may use
//! the handler's extractors:
//!
//! ```
//! use actix_web::{web, HttpRequest};
//! use ratelimit_runtime::{rate_limit, Limiter, RateLimitError};
//!
//! #[rate_limit(period = 60, threshold = 10, key = req.path(), limiter = limiter.get_ref())]
//! async fn profile(limiter: web::Data<Limiter>, req: HttpRequest) -> Result<String, RateLimitError> {
//!     Ok("profile".to_owned())
//! }
//!
//! let app = actix_web::App::new()
//!     .app_data(web::Data::new(Limiter::memory()))
//!     .route("/profile", web::get().to(profile));
//! ```

use ::actix_web::http::StatusCode;
use ::actix_web::http::header::{CONTENT_TYPE, RETRY_AFTER};
use ::actix_web::{HttpResponse, ResponseError};

use crate::error::RateLimitError;
use crate::headers::PROBLEM_JSON;
use crate::headers::{CompositeHeaders, RateLimitHeaders};
use crate::problem::{ErrorResponse, problem_body};

impl RateLimitHeaders {
    /// Sets the fields on an actix-web response: `RateLimit-Policy`, `RateLimit` and, on a
    /// denial, `Retry-After`, replacing any present.
    pub fn apply_to_actix(&self, response: &mut ::actix_web::HttpResponseBuilder) {
        for (name, value) in self.iter() {
            response.insert_header((name, value));
        }
    }
}

impl CompositeHeaders {
    /// Sets the fields on an actix-web response: `RateLimit-Policy` and `RateLimit` listing
    /// every limit and, on a denial, `Retry-After`, replacing any present.
    pub fn apply_to_actix(&self, response: &mut ::actix_web::HttpResponseBuilder) {
        for (name, value) in self.iter() {
            response.insert_header((name, value));
        }
    }
}

/// Answers 429 for a denial (with every limit's fields, for a check of several), 503 for an
/// unavailable store, 400 for a cost no window can admit, and 500 for invalid input or
/// configuration, each with a problem+json body (see the [module docs](self)).
impl ResponseError for RateLimitError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(ErrorResponse::status_of(self))
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let answer = ErrorResponse::of(self);
        let status =
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = problem_builder(status);
        for field in answer.fields {
            response.insert_header(field);
        }
        if let Some(seconds) = answer.retry_after {
            response.insert_header((RETRY_AFTER, seconds));
        }
        response.body(body(status, &answer.detail))
    }
}

/// A problem details response (RFC 9457) of `status`, with `type` `about:blank`, the status's
/// reason phrase as `title`, and `detail`.
#[must_use]
pub fn problem(status: StatusCode, detail: &str) -> HttpResponse {
    problem_builder(status).body(body(status, detail))
}

fn problem_builder(status: StatusCode) -> ::actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::build(status);
    response.insert_header((CONTENT_TYPE, PROBLEM_JSON));
    response
}

fn body(status: StatusCode, detail: &str) -> String {
    problem_body(
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        detail,
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ::actix_web::body::MessageBody as _;

    use super::*;
    use crate::decision::Decision;
    use crate::error::{Denied, StoreError};
    use crate::rate::Rate;

    fn parts(response: HttpResponse) -> (u16, Vec<(String, String)>, String) {
        let status = response.status().as_u16();
        let mut headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_owned()))
            .collect();
        headers.sort();
        let body = response.into_body().try_into_bytes().unwrap();
        (status, headers, String::from_utf8(body.to_vec()).unwrap())
    }

    #[test]
    fn a_denial_is_a_429_with_the_fields_and_a_problem() {
        let rate = Rate::new(2, Duration::from_secs(30)).unwrap();
        let decision = Decision::denied(2, Duration::from_millis(27_400), Duration::from_secs(29));
        let error = RateLimitError::Denied(Box::new(Denied::new(
            "hello",
            Some("user-42".into()),
            rate,
            decision,
        )));
        assert_eq!(error.status_code(), StatusCode::TOO_MANY_REQUESTS);
        let (status, headers, body) = parts(error.error_response());
        assert_eq!(status, 429);
        let expected = [
            ("content-type", "application/problem+json"),
            ("ratelimit", r#""default";r=0;t=28"#),
            ("ratelimit-policy", r#""default";q=2;w=30"#),
            ("retry-after", "28"),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()));
        assert_eq!(headers, expected);
        assert_eq!(
            body,
            r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded for `hello`: retry after 27.400s"}"#
        );
    }

    #[test]
    fn an_unavailable_store_is_a_503_and_bad_input_a_500() {
        let unavailable =
            RateLimitError::Unavailable(StoreError::Timeout(Duration::from_millis(250)));
        assert_eq!(unavailable.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        let (status, headers, body) = parts(unavailable.error_response());
        assert_eq!(status, 503);
        assert!(headers.contains(&("retry-after".into(), "5".into())));
        assert!(
            !headers
                .iter()
                .any(|(name, _)| name.starts_with("ratelimit"))
        );
        assert_eq!(
            body,
            r#"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the rate limit store is unavailable; try again later"}"#
        );
        let invalid = RateLimitError::InvalidInput("secret detail".into());
        assert_eq!(invalid.status_code(), StatusCode::INTERNAL_SERVER_ERROR);
        let (status, headers, body) = parts(invalid.error_response());
        assert_eq!(status, 500);
        assert_eq!(
            headers,
            [("content-type".to_owned(), PROBLEM_JSON.to_owned())]
        );
        assert_eq!(
            body,
            r#"{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"the rate limit could not be checked"}"#
        );
    }
}
