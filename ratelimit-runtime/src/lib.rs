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
//! let limiter = Limiter::memory(); // or Limiter::builder().redis_url("redis://127.0.0.1/").build()?
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
#![doc = document_features::document_features!()]
//!
//! # HTTP fields
//!
//! [`Decision::headers`] gives the `RateLimit-Policy`, `RateLimit` and `Retry-After` fields of a
//! decision (draft-ietf-httpapi-ratelimit-headers-11), for any HTTP library: see [`headers`].
//!
//! # Observability
//!
//! Through [`tracing`](https://docs.rs/tracing), always on:
//!
//! - every check runs in a span `ratelimit.check` (debug level), a child of the caller's
//!   current span, with the field `scope` (the attribute's scope, or the axum layer's; absent
//!   for [`Limiter::check`] called by hand). It never holds the key;
//! - for the checks of the attribute and the axum layer (not [`Limiter::check`] by hand), a
//!   debug event per denial (`scope`, `key`, `retry_after`) and a trace event per admission
//!   (`scope`);
//! - a warn event once when the store becomes unavailable (and once for a key holding a value
//!   the script cannot use), an info event when it answers again (with the outage's length and
//!   the number of checks the policy answered), and a debug event (with the key)
//!   for each check the failure policy answered;
//! - a debug event (`scope`, `key`) for each call a shadow limit would have denied, and one for
//!   a refund that could not reach the store (its outage is logged as any other).
//!
//! Keys may hold user identifiers (user ids, IP addresses, API keys): they appear only in
//! debug and trace events, never in spans, events above debug, error messages or metrics.
//!
//! With the `metrics` feature, through the [`metrics`](https://docs.rs/metrics) facade (to any
//! recorder installed, global or local):
//!
//! | name | kind | counts |
//! | --- | --- | --- |
//! | `ratelimit_admitted_total` | counter | admitted checks (by the store, or by the failure policy) |
//! | `ratelimit_denied_total` | counter | denied checks (by the store, or by `FailurePolicy::Local`'s fallback) |
//! | `ratelimit_shadow_denied_total` | counter | calls a shadow limit would have denied, which went on (see [`LimiterBuilder::shadow`]; each also counts as admitted) |
//! | `ratelimit_deny_cache_answered_total` | counter | denials the deny cache answered without a Redis call (see [`LimiterBuilder::deny_cache`]; each also counts as denied) |
//! | `ratelimit_policy_answered_total` | counter | checks the store could not answer, answered by the [`FailurePolicy`] (a `Closed` answer is an error: it counts here only) |
//! | `ratelimit_check_duration_seconds` | histogram | how long each check took, the store's round trip included |
//!
//! Their one label is `scope`: the scope of the `#[rate_limit]` function (its path, or its
//! `name`) or of the axum layer. Checks made by calling [`Limiter::check`] or
//! [`Limiter::check_at`] by hand carry no label: the key is never a label (it may hold a user
//! identifier, and one series per user would swamp the metrics store). A scope's label is made
//! the first time the scope is seen and kept for the life of the process, so checks allocate
//! nothing for their metrics.

#![forbid(unsafe_code)]
// docs.rs (`--cfg docsrs`, a nightly) marks each feature-gated item with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers, bottom first: each file imports only from the layers below its own (see
// README.md's "Architecture", which lists every file, and tests/tests/layers.rs, which checks
// the code against it).
mod clock;
mod decision;
mod decisions;
mod error;
pub mod headers;
mod key;
mod layout;
mod limit;
mod policy;
mod rate;
pub mod testing;

mod runtime;
#[cfg(feature = "tls")]
mod tls;

mod store;

mod health;
#[cfg(feature = "metrics")]
mod metrics;
mod telemetry;

mod check;

mod builder;
mod global;
mod limiter;
mod permit;
mod wait;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
#[cfg(any(feature = "axum", feature = "actix-web"))]
mod problem;

pub use builder::LimiterBuilder;
pub use decision::Decision;
pub use decisions::{Decisions, LimitDecision};
pub use error::{Denied, RateLimitError, StoreError};
pub use global::{global, set_global};
pub use headers::{CompositeHeaders, RateLimitHeaders};
pub use limit::Limit;
pub use limiter::Limiter;
pub use permit::Permit;
pub use policy::FailurePolicy;
pub use rate::{Algorithm, Rate};

#[cfg(feature = "axum")]
pub mod axum;

#[cfg(feature = "actix-web")]
pub mod actix_web;

#[cfg(feature = "macros")]
pub use ratelimit_macros::rate_limit;
