//! Exact rate limiting for async Rust: `#[rate_limit]` on an `async fn` checks each call
//! against a sliding window log (or a sliding window counter) kept in Redis, shared by every
//! process, or in process. A denied call returns `Err` before its body runs.
//!
//! ```
//! use ratelimit_runtime::{rate_limit, RateLimitError};
//!
//! #[rate_limit(period = "1m", threshold = 3, key = ip)]
//! async fn sign_up(ip: &str, email: &str) -> Result<String, RateLimitError> {
//!     Ok(format!("welcome, {email}"))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! # ratelimit_runtime::set_global(ratelimit_runtime::Limiter::memory()).unwrap();
//! for n in 0..3 {
//!     assert!(sign_up("192.0.2.7", &format!("user{n}@example.com")).await.is_ok());
//! }
//! let denied = sign_up("192.0.2.7", "user3@example.com").await.unwrap_err(); // the body did not run
//! assert!(denied.retry_after().is_some());
//! # }
//! ```
//!
//! The same check by hand:
//!
//! ```
//! use std::time::Duration;
//! use ratelimit_runtime::{Limiter, Rate};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), ratelimit_runtime::RateLimitError> {
//! let limiter = Limiter::memory(); // or Limiter::builder().redis_url("redis://127.0.0.1/").build()?
//! let rate = Rate::new(3, Duration::from_secs(60))?;
//! let decision = limiter.check("sign_up/192.0.2.7", rate).await?;
//! if !decision.allowed {
//!     println!("denied: retry after {:?}", decision.retry_after);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Where to go next
//!
//! - The [`guide::tutorial`]: from a limited function to production in five steps, each a
//!   complete program.
//! - The [`guide`]: the attribute in use, the two algorithms, several limits, outcomes and
//!   waiting, the key layout, Redis, quota leases, production, testing, HTTP services and
//!   recipes.
//! - [`rate_limit`]: the attribute and each of its arguments.
//! - [`Limiter`]: the checks by hand and the exact semantics; [`LimiterBuilder`]: Redis, a
//!   Redis Cluster or Sentinel, the failure policy, timeouts and the deny cache; [`global`]:
//!   the default limiter the attribute uses.
//! - [`Rate`] and [`Algorithm`]; [`Decision`] and [`Decisions`], the answers;
//!   [`RateLimitError`]; [`headers`], the HTTP fields of an answer, and [`testing`], the
//!   manual clock.
//!
//! # Feature flags
//!
#![doc = document_features::document_features!()]
#![forbid(unsafe_code)]
// docs.rs (`--cfg docsrs`, a nightly) marks each feature-gated item with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The layers, bottom first: each file imports only from the layers below its own (see
// CONTRIBUTING.md's "Architecture", which lists every file, and tests/tests/layers.rs, which
// checks the code against it).
mod clock;
mod concurrency;
mod decision;
mod decisions;
mod error;
pub mod headers;
mod key;
mod layout;
mod limit;
mod policy;
mod rate;
mod returns;
pub mod testing;

mod runtime;
#[cfg(feature = "tls")]
mod tls;

mod store;

mod health;
#[cfg(feature = "metrics")]
mod metrics;
mod telemetry;

mod registry;
mod shared_limits;

mod check;

mod builder;
mod global;
mod limiter;
mod permit;
mod slot;
mod wait;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
#[cfg(any(feature = "axum", feature = "actix-web"))]
mod problem;

pub use builder::LimiterBuilder;
pub use concurrency::Concurrency;
pub use decision::Decision;
pub use decisions::{Decisions, LimitDecision};
pub use error::{Denied, RateLimitError, StoreError};
pub use global::{global, set_global};
pub use headers::{CompositeHeaders, RateLimitHeaders};
pub use limit::Limit;
pub use limiter::{Limiter, Scoped};
pub use permit::Permit;
pub use policy::FailurePolicy;
pub use rate::{Algorithm, Rate};
pub use registry::{Action, DeclaredLimit, Limits, Mode, Override, ScopeLimits, declared_limits};
pub use returns::{FromRateLimitError, LimitedResult};
pub use shared_limits::SharedLimits;
pub use slot::Slot;

#[cfg(feature = "axum")]
pub mod axum;

#[cfg(feature = "tonic")]
pub mod tonic;

#[cfg(feature = "actix-web")]
pub mod actix_web;

#[cfg(feature = "macros")]
pub mod guide;

#[cfg(feature = "macros")]
pub use ratelimit_macros::rate_limit;
