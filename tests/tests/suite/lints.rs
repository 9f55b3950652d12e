//! The expansion adds no warning, rustc's or clippy's (CI runs `cargo clippy --all-targets
//! -- -D warnings`, which checks this file), in a crate that denies them all, pedantic
//! included, whatever the shape: one-expression bodies, keys, methods, generics, `name`,
//! `limiter`, `#[async_trait]`, `#[tracing::instrument]`.

#![deny(warnings, clippy::all, clippy::pedantic)]
// `forbid`, which an `#[allow]` in the expansion could not override (`#[async_trait]` and
// `#[tracing::instrument]` allow `unreachable_code` and others, so those stay at `deny`).
#![forbid(unused_must_use, unused_braces, dead_code, unused_variables)]

use std::fmt::Display;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

fn limiter() -> &'static Limiter {
    static LIMITER: OnceLock<Limiter> = OnceLock::new();
    LIMITER.get_or_init(Limiter::memory)
}

#[rate_limit(period = 30, threshold = 2, limiter = limiter())]
async fn one_expression() -> Result<(), RateLimitError> {
    Ok(())
}

/// Public, documented, keyed by a `u64`.
///
/// # Errors
///
/// When the call is denied.
#[rate_limit(period = "1500ms", threshold = 10, key = id, limiter = limiter())]
pub async fn keyed(id: u64) -> Result<u64, RateLimitError> {
    Ok(id)
}

#[rate_limit(period = 60, threshold = 10, key = value, name = "generic", limiter = limiter())]
async fn generic<T>(value: &T) -> Result<String, RateLimitError>
where
    T: Display + ?Sized + Sync,
{
    Ok(value.to_string())
}

struct Service {
    tenant: String,
    limiter: Limiter,
}

impl Service {
    #[rate_limit(period = 60, threshold = 10, key = self.tenant, limiter = &self.limiter)]
    async fn by_ref(&self, n: u32) -> Result<u32, RateLimitError> {
        Ok(n + 1)
    }

    #[rate_limit(period = 60, threshold = 10, key = self.tenant, limiter = &self.limiter)]
    async fn by_arc(self: Arc<Self>) -> Result<usize, RateLimitError> {
        Ok(self.tenant.len())
    }
}

#[async_trait]
trait Repository {
    async fn find(&self, id: u64) -> Result<u64, RateLimitError>;
}

#[async_trait]
impl Repository for Service {
    #[rate_limit(period = 60, threshold = 10, key = id, limiter = &self.limiter)]
    async fn find(&self, id: u64) -> Result<u64, RateLimitError> {
        Ok(id)
    }
}

#[tracing::instrument(skip_all)]
#[rate_limit(period = 60, threshold = 10, limiter = limiter())]
async fn traced(n: u8) -> anyhow::Result<u8> {
    Ok(n)
}

#[rate_limit(period = 60, threshold = 10, limiter = limiter())]
async fn io(n: u8) -> std::io::Result<u8> {
    Ok(n)
}

#[tokio::test]
async fn every_shape_runs_under_denied_lints() {
    one_expression().await.unwrap();
    assert_eq!(keyed(1).await.unwrap(), 1);
    assert_eq!(generic("g").await.unwrap(), "g");
    let service = Arc::new(Service {
        tenant: "acme".to_owned(),
        limiter: Limiter::memory(),
    });
    assert_eq!(service.by_ref(1).await.unwrap(), 2);
    assert_eq!(service.find(3).await.unwrap(), 3);
    assert_eq!(Arc::clone(&service).by_arc().await.unwrap(), 4);
    assert_eq!(traced(5).await.unwrap(), 5);
    assert_eq!(io(6).await.unwrap(), 6);
}
