//! [axum](https://docs.rs/axum) integration (feature `axum`):
//! [`RateLimitError`](crate::RateLimitError) as an HTTP response, and a tower
//! [`RateLimitLayer`] that limits whole routers.
//!
//! # Responses
//!
//! `RateLimitError` implements [`IntoResponse`](::axum::response::IntoResponse), so a handler
//! under `#[rate_limit]` may return `Result<impl IntoResponse, RateLimitError>`, or
//! `Result<_, AppError>` where `AppError` implements `From<RateLimitError>` and `IntoResponse`
//! (delegating to this one for its rate-limit variant):
//!
//! | error | status | fields |
//! | --- | --- | --- |
//! | [`Denied`](crate::RateLimitError::Denied) | 429 Too Many Requests | `Retry-After`, `RateLimit-Policy`, `RateLimit` |
//! | [`Unavailable`](crate::RateLimitError::Unavailable) (store down, [`FailurePolicy::Closed`](crate::FailurePolicy::Closed)) | 503 Service Unavailable | `Retry-After` ([`UNAVAILABLE_RETRY_AFTER`](crate::headers::UNAVAILABLE_RETRY_AFTER)) |
//! | [`CostTooHigh`](crate::RateLimitError::CostTooHigh) | 400 Bad Request | |
//! | [`InvalidInput`](crate::RateLimitError::InvalidInput), [`InvalidConfig`](crate::RateLimitError::InvalidConfig) | 500 Internal Server Error | |
//!
//! The rate limit fields follow draft-ietf-httpapi-ratelimit-headers-11 (see
//! [`RateLimitHeaders`](crate::headers)). Every body is an RFC 9457 problem details
//! document (`Content-Type: application/problem+json`) with the members `type`
//! (`about:blank`), `title` (the status's reason phrase), `status` and `detail`. A denial's
//! `detail` is the error's message, which names the scope and never the key (keys may hold user
//! identifiers):
//!
//! ```text
//! HTTP/1.1 429 Too Many Requests
//! content-type: application/problem+json
//! retry-after: 30
//! ratelimit-policy: "default";q=2;w=30
//! ratelimit: "default";r=0;t=30
//!
//! {"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded for `hello`: retry after 29.998s"}
//! ```
//!
//! The other errors' `detail` says what happened without the internals (the store's error, a
//! configuration), which are logged instead: a 500 at error level here, an outage by the
//! limiter when it starts.
//!
//! # Extractors
//!
//! `#[rate_limit]` goes on a handler like on any `async fn`, and its `key` (and `limiter`) may
//! use the values of the handler's extractors:
//!
//! ```
//! use axum::extract::{Path, State};
//! use axum::http::HeaderMap;
//! use ratelimit_runtime::{rate_limit, Limiter, RateLimitError};
//!
//! #[rate_limit(period = 60, threshold = 10, key = format_args!("{user}:{}", tenant(&headers)), limiter = &limiter)]
//! async fn profile(
//!     State(limiter): State<Limiter>,
//!     Path(user): Path<u64>,
//!     headers: HeaderMap,
//! ) -> Result<String, RateLimitError> {
//!     Ok(format!("user {user}"))
//! }
//!
//! fn tenant(headers: &HeaderMap) -> &str {
//!     headers.get("x-tenant").and_then(|v| v.to_str().ok()).unwrap_or("-")
//! }
//!
//! let app: axum::Router = axum::Router::new()
//!     .route("/users/{user}", axum::routing::get(profile))
//!     .with_state(Limiter::memory());
//! ```

mod key;
mod layer;
mod response;

pub use self::key::{HeaderKey, IpRange, KeyExtractor, PeerIp};
pub use self::layer::{RateLimitLayer, RateLimitService};
pub use self::response::problem;
