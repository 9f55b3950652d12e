//! A crate that depends on `ratelimit-runtime` renamed to `rl`: `#[rate_limit]` resolves the
//! runtime's path from this crate's `Cargo.toml` (through `proc-macro-crate`), so its expansion
//! names `::rl`, not `::ratelimit_runtime`, which does not exist here.

use std::sync::OnceLock;

use rl::{Limiter, RateLimitError, rate_limit};

/// This crate's limiter.
pub fn limiter() -> &'static Limiter {
    static LIMITER: OnceLock<Limiter> = OnceLock::new();
    LIMITER.get_or_init(Limiter::memory)
}

/// Greets `who`, once a minute each.
///
/// # Errors
///
/// [`RateLimitError::Denied`] from the second call for the same `who` within a minute.
#[rate_limit(period = 60, threshold = 1, key = who, limiter = limiter())]
pub async fn greet(who: &str) -> Result<String, RateLimitError> {
    Ok(format!("hi {who}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_attribute_finds_the_renamed_runtime() {
        assert_eq!(greet("ann").await.unwrap(), "hi ann");
        let err = greet("ann").await.unwrap_err();
        let denied = err.as_denied().expect("a denial");
        assert_eq!(denied.scope(), "renamed_dependency::greet");
        assert_eq!(denied.key(), Some("ann"));
    }
}
