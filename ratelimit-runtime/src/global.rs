//! The process-wide default limiter, used by `#[rate_limit]` when no `limiter` is given.

use std::sync::OnceLock;

use crate::limiter::Limiter;
use crate::policy::FailurePolicy;

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
/// Built from the environment, with the default prefix, timeout and failure policy:
/// - `RATELIMIT_REDIS_CLUSTER`: a Redis Cluster, given by some of its nodes' URLs separated by
///   commas (`redis://10.0.0.1:6379,redis://10.0.0.2:6379`);
/// - else `RATELIMIT_REDIS_URL`, else `REDIS_URL`: one Redis server, or a Sentinel
///   deployment's master (`redis+sentinel://…`, see
///   [`LimiterBuilder::redis_url`](crate::LimiterBuilder::redis_url));
/// - else (none set, or all empty): in process.
///
/// No connection is made here (the first check connects, on its own runtime). A malformed
/// setting is logged once at error level (naming the variable, never its value), and every
/// check is then answered by the failure policy ([`FailurePolicy::Local`]).
pub fn global() -> &'static Limiter {
    GLOBAL.get_or_init(from_env)
}

fn from_env() -> Limiter {
    let setting = |name: &'static str| {
        std::env::var(name)
            .ok()
            .filter(|value| !value.trim().is_empty())
            .map(|value| (name, value))
    };
    let builder = Limiter::builder();
    let (variable, builder) = if let Some((variable, nodes)) = setting("RATELIMIT_REDIS_CLUSTER") {
        (
            variable,
            builder.redis_cluster(
                nodes
                    .split(',')
                    .map(str::trim)
                    .filter(|node| !node.is_empty()),
            ),
        )
    } else if let Some((variable, url)) =
        setting("RATELIMIT_REDIS_URL").or_else(|| setting("REDIS_URL"))
    {
        (variable, builder.redis_url(&url))
    } else {
        return Limiter::memory();
    };
    match builder.build() {
        Ok(limiter) => limiter,
        Err(error) => {
            tracing::error!(
                %error,
                variable,
                "the default rate limiter cannot use Redis; checks fall back on the failure policy"
            );
            Limiter::misconfigured(
                format!("{variable} is not a usable Redis setting").into(),
                FailurePolicy::default(),
            )
        }
    }
}
