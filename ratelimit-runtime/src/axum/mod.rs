//! [axum](https://docs.rs/axum) integration (feature `axum`):
//! [`RateLimitError`](crate::RateLimitError) as an HTTP response, and a tower
//! [`RateLimitLayer`] that limits whole routers.
//!
//! # Responses
//!
//! `RateLimitError` implements [`IntoResponse`](::axum::response::IntoResponse), so a handler
//! under `#[rate_limit]` may return `Result<impl IntoResponse, RateLimitError>`, or
//! `Result<_, AppError>` where `AppError` implements `From<RateLimitError>` and `IntoResponse`
//! (delegating to this one for its rate-limit variant; the guide's `http` page has an example).
//! The statuses, fields and problem+json bodies are listed under
//! [`headers`' Responses](crate::headers#responses); the `actix-web` feature answers the same.
//! [`problem`] makes such a body for an application's other errors.
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
pub(crate) mod response;

pub use self::key::{HeaderKey, IpRange, KeyExtractor, PeerIp};
pub use self::layer::{RateLimitLayer, RateLimitService};
pub use self::response::problem;
