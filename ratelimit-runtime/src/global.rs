//! The process-wide default limiter, used by `#[rate_limit]` when no `limiter` is given.

use std::sync::OnceLock;

use crate::{FailurePolicy, Limiter};

static GLOBAL: OnceLock<Limiter> = OnceLock::new();

/// Installs `limiter` as the process-wide default, used by `#[rate_limit]` without `limiter =`.
///
/// Call it once, early (before the first limited call), for example in `main`.
///
/// # Errors
///
/// Gives `limiter` back when a default is already in place (set before, or built on first use
/// by [`global`]).
pub fn set_global(limiter: Limiter) -> Result<(), Limiter> {
    GLOBAL.set(limiter)
}

/// The process-wide default limiter, built on first use unless [`set_global`] came first.
///
/// Built from the environment: a Redis limiter for `RATELIMIT_REDIS_URL`, else `REDIS_URL`,
/// when one is set and not empty, with the default prefix, timeout and failure policy;
/// otherwise an in-process one. No connection is made here (the first check connects, on its
/// own runtime). A malformed URL is logged once at error level, and every check is then
/// answered by the failure policy ([`FailurePolicy::Local`]).
pub fn global() -> &'static Limiter {
    GLOBAL.get_or_init(from_env)
}

fn from_env() -> Limiter {
    let url = ["RATELIMIT_REDIS_URL", "REDIS_URL"]
        .into_iter()
        .find_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|url| !url.is_empty())
                .map(|url| (name, url))
        });
    let Some((variable, url)) = url else {
        return Limiter::memory();
    };
    match Limiter::builder().redis_url(&url).build_now() {
        Ok(limiter) => limiter,
        Err(error) => {
            tracing::error!(
                %error,
                variable,
                "the default rate limiter cannot use Redis; checks fall back on the failure policy"
            );
            Limiter::misconfigured(
                format!("{variable} is not a usable Redis URL").into(),
                FailurePolicy::default(),
            )
        }
    }
}
