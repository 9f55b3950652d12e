//! Exact rate limiting for async Rust: `#[rate_limit]` on an `async fn` checks each call
//! against a sliding window log kept in Redis (one sorted set per key, one atomic Lua script)
//! or in process.
//!
//! ```
//! use ratelimit_runtime::{rate_limit, RateLimitError};
//!
//! #[rate_limit(period = 30, threshold = 2)]
//! async fn say_hi() -> Result<&'static str, RateLimitError> {
//!     Ok("hi")
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! assert!(say_hi().await.is_ok());
//! assert!(say_hi().await.is_ok());
//! let denied = say_hi().await.unwrap_err(); // the body did not run
//! assert!(denied.is_denied());
//! # }
//! ```
//!
//! Without the attribute, the same check by hand:
//!
//! ```
//! use std::time::Duration;
//! use ratelimit_runtime::{Limiter, Rate};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), ratelimit_runtime::RateLimitError> {
//! let limiter = Limiter::memory(); // or Limiter::builder().redis_url("redis://127.0.0.1/").build().await?
//! let rate = Rate::new(2, Duration::from_secs(30))?;
//! let decision = limiter.check("app::say_hi", rate).await?;
//! if !decision.allowed {
//!     println!("denied: retry after {:?}", decision.retry_after);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! See [`Limiter`] for the exact semantics and the Redis key layout, [`FailurePolicy`] for what
//! happens when Redis cannot answer, and [`global`] for the default limiter the attribute uses.
//!
//! # Feature flags
//!
//! - `macros` (default): re-exports the `#[rate_limit]` attribute.
//! - `axum`: [`RateLimitError`] implements axum's `IntoResponse` (429 with `Retry-After` and
//!   the IETF `RateLimit-Policy`/`RateLimit` fields, 503, 500, each with an RFC 9457
//!   problem+json body), and a tower layer limits whole routers: see the `axum` module.
//!
//! # HTTP fields
//!
//! [`Decision::headers`] gives the `RateLimit-Policy`, `RateLimit` and `Retry-After` fields of a
//! decision (draft-ietf-httpapi-ratelimit-headers-11), for any HTTP library: see [`headers`].

mod clock;
mod decision;
mod error;
mod global;
pub mod headers;
mod limiter;
mod policy;
mod rate;
mod store;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use decision::Decision;
pub use error::{Denied, RateLimitError, StoreError};
pub use global::{global, set_global};
pub use headers::RateLimitHeaders;
pub use limiter::{DEFAULT_KEY_PREFIX, DEFAULT_TIMEOUT, Limiter, LimiterBuilder};
pub use policy::FailurePolicy;
pub use rate::Rate;

#[cfg(feature = "axum")]
pub mod axum;

#[cfg(feature = "macros")]
pub use ratelimit_macros::rate_limit;
