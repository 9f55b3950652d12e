//! [`RateLimitError`] as an axum response (429, 503, 400, 500 with problem+json bodies), the rate
//! limit fields set on any `HeaderMap`, and RFC 9457 problem responses.

use std::convert::Infallible;

use ::axum::response::{IntoResponse, IntoResponseParts, Response, ResponseParts};
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use http::{HeaderMap, StatusCode};

use crate::error::RateLimitError;
use crate::headers::PROBLEM_JSON;
use crate::headers::{CompositeHeaders, RateLimitHeaders};
use crate::problem::{ErrorResponse, problem_body};

/// `RateLimit-Policy`, as an [`http`] header name.
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`, as an [`http`] header name.
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

impl RateLimitHeaders {
    /// Sets the fields on `headers`: `RateLimit-Policy`, `RateLimit` and, on a denial,
    /// `Retry-After`, replacing any present.
    pub fn apply(&self, headers: &mut HeaderMap) {
        headers.insert(RATELIMIT_POLICY.clone(), ascii_value(self.policy()));
        headers.insert(RATELIMIT.clone(), ascii_value(self.rate_limit()));
        if let Some(seconds) = self.retry_after() {
            headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
    }

    /// As [`apply`](RateLimitHeaders::apply), but keeps the fields `headers` already has: for
    /// an admitted response whose handler set its own.
    pub fn apply_if_absent(&self, headers: &mut HeaderMap) {
        if !headers.contains_key(&RATELIMIT_POLICY) && !headers.contains_key(&RATELIMIT) {
            self.apply(headers);
        }
    }
}

/// Answers 429 for a denial (with every limit's fields, for a check of several), 503 for an
/// unavailable store, 400 for a cost no window can admit, and 500 for invalid input or
/// configuration, each with a problem+json body (see the [module docs](crate::axum)).
impl IntoResponse for RateLimitError {
    fn into_response(self) -> Response {
        let answer = ErrorResponse::of(&self);
        let status =
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = problem(status, &answer.detail);
        set_error_fields(response.headers_mut(), answer.fields, answer.retry_after);
        response
    }
}

/// Sets an error's fields on `headers` (see [`ErrorResponse`]): a denial's `fields`, and
/// `Retry-After` of `retry_after` seconds for an answer that is not a denial. The gRPC
/// statuses (feature `tonic`) carry them as metadata.
pub(crate) fn set_error_fields(
    headers: &mut HeaderMap,
    fields: Vec<(&'static str, String)>,
    retry_after: Option<u64>,
) {
    for (name, value) in fields {
        headers.insert(header_name(name), ascii_value(value));
    }
    if let Some(seconds) = retry_after {
        headers.insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
}

/// A problem details response (RFC 9457) of `status`, with `type` `about:blank`, the status's
/// reason phrase as `title`, and `detail`.
pub fn problem(status: StatusCode, detail: &str) -> Response {
    let body = problem_body(
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        detail,
    );
    let mut response = (status, body).into_response();
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    response
}

/// The [`http`] name of a field [`RateLimitHeaders`] and [`CompositeHeaders`] write.
fn header_name(name: &'static str) -> HeaderName {
    match name {
        crate::headers::RATELIMIT_POLICY => RATELIMIT_POLICY.clone(),
        crate::headers::RATELIMIT => RATELIMIT.clone(),
        _ => RETRY_AFTER,
    }
}

impl CompositeHeaders {
    /// Sets the fields on `headers`: `RateLimit-Policy` and `RateLimit` listing every limit
    /// and, on a denial, `Retry-After`, replacing any present.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for (name, value) in self.iter() {
            headers.insert(header_name(name), ascii_value(value));
        }
    }

    /// As [`apply`](CompositeHeaders::apply), but keeps the fields `headers` already has: for
    /// an admitted response whose handler set its own.
    pub fn apply_if_absent(&self, headers: &mut HeaderMap) {
        if !headers.contains_key(&RATELIMIT_POLICY) && !headers.contains_key(&RATELIMIT) {
            self.apply(headers);
        }
    }
}

/// The fields on a handler's response: `Ok((decision.headers(rate), body))`.
impl IntoResponseParts for RateLimitHeaders {
    type Error = Infallible;

    fn into_response_parts(self, mut parts: ResponseParts) -> Result<ResponseParts, Infallible> {
        self.apply(parts.headers_mut());
        Ok(parts)
    }
}

/// Every limit's fields on a handler's response: `Ok((d.headers(), body))` in a function
/// under `#[rate_limit(.., decision = d)]`.
impl IntoResponseParts for CompositeHeaders {
    type Error = Infallible;

    fn into_response_parts(self, mut parts: ResponseParts) -> Result<ResponseParts, Infallible> {
        self.apply(parts.headers_mut());
        Ok(parts)
    }
}

/// A header value made of visible ASCII (what [`RateLimitHeaders`] writes).
fn ascii_value(value: String) -> HeaderValue {
    HeaderValue::try_from(value).expect("rate limit fields are visible ASCII")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::decision::Decision;
    use crate::error::{Denied, StoreError};
    use crate::rate::Rate;

    async fn body(response: Response) -> String {
        let bytes = ::axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn denial(scope: &'static str, retry_after: Duration) -> RateLimitError {
        let rate = Rate::new(2, Duration::from_secs(30)).unwrap();
        let decision = Decision::denied(2, retry_after, Duration::from_secs(29));
        RateLimitError::Denied(Box::new(Denied::new(
            scope,
            Some("user-42".into()),
            rate,
            decision,
        )))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_denial_is_a_429_with_the_fields_and_a_problem() {
        let response = denial("hello", Duration::from_millis(27_400)).into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        let headers = response.headers();
        assert_eq!(headers["retry-after"], "28");
        assert_eq!(headers["ratelimit-policy"], r#""default";q=2;w=30"#);
        assert_eq!(headers["ratelimit"], r#""default";r=0;t=28"#);
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(
            body(response).await,
            r#"{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded for `hello`: retry after 27.400s"}"#
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_detail_is_escaped_and_never_holds_the_key() {
        let response = denial("a \"quoted\\\" \u{1}scope", Duration::from_secs(1)).into_response();
        let body = body(response).await;
        assert!(
            body.contains(r#""detail":"rate limit exceeded for `a \"quoted\\\" \u0001scope`"#),
            "{body}"
        );
        assert!(!body.contains("user-42"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_unavailable_store_is_a_503_and_bad_input_a_500() {
        let unavailable =
            RateLimitError::Unavailable(StoreError::Timeout(Duration::from_millis(250)));
        let response = unavailable.into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()["retry-after"], "5");
        assert_eq!(response.headers()["content-type"], PROBLEM_JSON);
        assert!(response.headers().get("ratelimit").is_none());
        assert_eq!(
            body(response).await,
            r#"{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the rate limit store is unavailable; try again later"}"#
        );

        for error in [
            RateLimitError::InvalidInput("secret detail".into()),
            RateLimitError::InvalidConfig("redis://:password@host".into()),
        ] {
            let response = error.into_response();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(response.headers()["content-type"], PROBLEM_JSON);
            let body = body(response).await;
            assert_eq!(
                body,
                r#"{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"the rate limit could not be checked"}"#
            );
        }
    }

    #[test]
    fn apply_if_absent_keeps_a_handlers_own_fields() {
        let rate = Rate::new(5, Duration::from_secs(60)).unwrap();
        let fields = Decision::admitted(5, 4, Duration::from_secs(60)).headers(rate);
        let mut headers = HeaderMap::new();
        headers.insert("ratelimit", HeaderValue::from_static("\"own\";r=1;t=1"));
        fields.apply_if_absent(&mut headers);
        assert_eq!(headers["ratelimit"], "\"own\";r=1;t=1");
        assert!(headers.get("ratelimit-policy").is_none());
        let mut headers = HeaderMap::new();
        fields.apply_if_absent(&mut headers);
        assert_eq!(headers["ratelimit-policy"], r#""default";q=5;w=60"#);
        assert_eq!(headers["ratelimit"], r#""default";r=4;t=60"#);
        assert!(headers.get("retry-after").is_none());
    }
}
