//! The process-wide default limiter, used by `#[rate_limit]` when no `limiter` is given.

use std::sync::OnceLock;

use crate::builder::LimiterBuilder;
use crate::error::RateLimitError;
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
/// - `RATELIMIT_REDIS_CLUSTER` (feature `cluster`): a Redis Cluster, given by some of its
///   nodes' URLs separated by commas (`redis://10.0.0.1:6379,redis://10.0.0.2:6379`);
/// - else `RATELIMIT_REDIS_URL`, else `REDIS_URL`: one Redis server, or a Sentinel
///   deployment's master (`redis+sentinel://…`, feature `sentinel`, see
///   [`LimiterBuilder::redis_url`](crate::LimiterBuilder::redis_url));
/// - else (none set, or all empty): in process;
/// - and `RATELIMIT_LIMITS_FILE` (feature `limits-file`): a limits file, read now and watched
///   (see [`LimiterBuilder::limits_file`](crate::LimiterBuilder::limits_file));
/// - and `RATELIMIT_SHARED_LIMITS` (`true` or `false`, `1` or `0`): whether it follows the
///   limits shared through Redis (see
///   [`LimiterBuilder::shared_limits`](crate::LimiterBuilder::shared_limits); not in
///   process).
///
/// No connection is made here (the first check connects, on its own runtime). A malformed
/// setting (a typo, a feature not compiled in) is a mistake to fix, not an outage to ride
/// out: it is logged once at error level, and every check of the default limiter then
/// returns [`RateLimitError::InvalidConfig`], whatever the failure policy; both name the
/// variable, never its value (a URL may hold a password). Redis that is down or slow is
/// answered by the failure policy ([`FailurePolicy::Local`]) as for any limiter.
pub fn global() -> &'static Limiter {
    GLOBAL.get_or_init(|| from_settings(|name| std::env::var(name).ok()))
}

/// The default limiter of the settings `lookup` finds by variable name.
fn from_settings(lookup: impl Fn(&'static str) -> Option<String>) -> Limiter {
    let setting = |name: &'static str| {
        lookup(name)
            .filter(|value| !value.trim().is_empty())
            .map(|value| (name, value))
    };
    let limiter = match shared_from_settings(&setting) {
        Ok(shared) => store_from_settings(&setting, shared),
        Err(reason) => {
            tracing::error!(
                variable = SHARED_LIMITS,
                "the default rate limiter's setting is not `true` or `false`; every check \
                 answers InvalidConfig until it is fixed"
            );
            return Limiter::misconfigured(reason.into(), FailurePolicy::default());
        }
    };
    match setting(LIMITS_FILE) {
        Some((_, path)) => with_limits_file(limiter, path),
        None => limiter,
    }
}

/// The variable that names the default limiter's limits file.
const LIMITS_FILE: &str = "RATELIMIT_LIMITS_FILE";

/// The variable that says whether the default limiter follows the shared limits.
const SHARED_LIMITS: &str = "RATELIMIT_SHARED_LIMITS";

/// Whether the settings ask the default limiter to follow the shared limits.
///
/// # Errors
///
/// A value that is none of `true`, `false`, `1`, `0` (in any case), naming the variable.
fn shared_from_settings(
    setting: &impl Fn(&'static str) -> Option<(&'static str, String)>,
) -> Result<bool, String> {
    let Some((_, value)) = setting(SHARED_LIMITS) else {
        return Ok(false);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("{SHARED_LIMITS} is `true` or `false`")),
    }
}

/// `limiter` with the limits file at `path` in force and watched; a limiter whose every check
/// answers `InvalidConfig` when the file cannot be used (a typo never means no limits).
fn with_limits_file(limiter: Limiter, path: String) -> Limiter {
    #[cfg(feature = "limits-file")]
    let used = limiter.shared().registry.watch_file(path.into());
    #[cfg(not(feature = "limits-file"))]
    let used: Result<(), String> = {
        let _ = path;
        Err("a limits file needs the `limits-file` feature of ratelimit-runtime".into())
    };
    match used {
        Ok(()) => limiter,
        Err(error) => {
            tracing::error!(
                %error,
                variable = LIMITS_FILE,
                "the default rate limiter cannot use its limits file; every check answers \
                 InvalidConfig until the file is fixed and the process restarted"
            );
            Limiter::misconfigured(
                format!("{LIMITS_FILE} names no usable limits file: {error}").into(),
                FailurePolicy::default(),
            )
        }
    }
}

/// The default limiter's store, from the settings `setting` finds.
fn store_from_settings(
    setting: &impl Fn(&'static str) -> Option<(&'static str, String)>,
    shared: bool,
) -> Limiter {
    let builder = if shared {
        Limiter::builder().shared_limits()
    } else {
        Limiter::builder()
    };
    let (variable, built) = if let Some((variable, nodes)) = setting("RATELIMIT_REDIS_CLUSTER") {
        (variable, cluster(builder, &nodes))
    } else if let Some((variable, url)) =
        setting("RATELIMIT_REDIS_URL").or_else(|| setting("REDIS_URL"))
    {
        (variable, builder.redis_url(&url).build())
    } else if shared {
        // In process, nothing is shared: a mistake to fix, never limits silently not shared.
        tracing::error!(
            variable = SHARED_LIMITS,
            "the default rate limiter is in process and shares no limits; every check \
             answers InvalidConfig until a Redis setting is given"
        );
        return Limiter::misconfigured(
            format!(
                "{SHARED_LIMITS} needs Redis: set RATELIMIT_REDIS_URL, REDIS_URL or \
                 RATELIMIT_REDIS_CLUSTER"
            )
            .into(),
            FailurePolicy::default(),
        );
    } else {
        return Limiter::memory();
    };
    match built {
        Ok(limiter) => limiter,
        Err(error) => {
            tracing::error!(
                %error,
                variable,
                "the default rate limiter cannot use Redis; every check answers InvalidConfig \
                 until the setting is fixed"
            );
            // The reason says why (a malformed URL, a feature not compiled in), never the
            // setting's value: build errors quote no URL.
            let reason = match error {
                RateLimitError::InvalidConfig(reason) => reason,
                other => other.to_string().into(),
            };
            Limiter::misconfigured(
                format!("{variable} is not a usable Redis setting: {reason}").into(),
                FailurePolicy::default(),
            )
        }
    }
}

/// The limiter of the Redis Cluster whose nodes `nodes` lists, separated by commas.
#[cfg(feature = "cluster")]
fn cluster(builder: LimiterBuilder, nodes: &str) -> Result<Limiter, RateLimitError> {
    builder
        .redis_cluster(
            nodes
                .split(',')
                .map(str::trim)
                .filter(|node| !node.is_empty()),
        )
        .build()
}

/// Without the `cluster` feature, a cluster setting is a configuration error.
#[cfg(not(feature = "cluster"))]
fn cluster(_: LimiterBuilder, _: &str) -> Result<Limiter, RateLimitError> {
    Err(RateLimitError::InvalidConfig(
        "a Redis Cluster needs the `cluster` feature of ratelimit-runtime".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::from_settings;
    use crate::{Rate, RateLimitError};

    /// A malformed setting of each variable: every check of the default limiter answers
    /// `InvalidConfig` naming the variable and never its value, whatever the failure policy
    /// (the real environment's path: `tests/tests/global_env_malformed.rs`).
    #[tokio::test]
    async fn a_malformed_setting_makes_every_check_a_configuration_error() {
        let secret = "redis://:hunter2@[::1:6379/";
        for variable in [
            "RATELIMIT_REDIS_CLUSTER",
            "RATELIMIT_REDIS_URL",
            "REDIS_URL",
        ] {
            let limiter = from_settings(|name| (name == variable).then(|| secret.to_owned()));
            let rate = Rate::new(5, std::time::Duration::from_secs(1)).unwrap();
            for _ in 0..3 {
                let error = limiter.check("k", rate).await.unwrap_err();
                let RateLimitError::InvalidConfig(reason) = &error else {
                    panic!("{variable}: {error:?}");
                };
                assert!(reason.starts_with(variable), "{variable}: {reason}");
                assert!(
                    !format!("{error} {error:?}").contains("hunter2"),
                    "{error:?}"
                );
            }
            let error = limiter.peek("k", rate).await.unwrap_err();
            assert!(
                matches!(error, RateLimitError::InvalidConfig(_)),
                "{error:?}"
            );
            let error = limiter.reset("k").await.unwrap_err();
            assert!(
                matches!(error, RateLimitError::InvalidConfig(_)),
                "{error:?}"
            );
        }
    }

    /// A limits file that cannot be used (missing here; without the feature, any): every
    /// check answers `InvalidConfig` naming the variable and why, never "no limits".
    #[tokio::test]
    async fn an_unusable_limits_file_makes_every_check_a_configuration_error() {
        let path = "/nonexistent/limits.toml";
        let limiter =
            from_settings(|name| (name == "RATELIMIT_LIMITS_FILE").then(|| path.to_owned()));
        let rate = Rate::new(5, std::time::Duration::from_secs(1)).unwrap();
        let error = limiter.check("k", rate).await.unwrap_err();
        let RateLimitError::InvalidConfig(reason) = &error else {
            panic!("{error:?}");
        };
        assert!(reason.starts_with("RATELIMIT_LIMITS_FILE"), "{reason}");
        #[cfg(feature = "limits-file")]
        assert!(
            reason.contains(path) && reason.contains("cannot read"),
            "{reason}"
        );
        #[cfg(not(feature = "limits-file"))]
        assert!(reason.contains("`limits-file` feature"), "{reason}");
    }

    /// `RATELIMIT_SHARED_LIMITS` that is not a boolean, or set without Redis: every check
    /// answers `InvalidConfig` naming it, never limits silently not shared.
    #[tokio::test]
    async fn shared_limits_without_redis_or_a_boolean_are_a_configuration_error() {
        let rate = Rate::new(5, std::time::Duration::from_secs(1)).unwrap();
        for value in ["yes please", "true"] {
            let limiter =
                from_settings(|name| (name == "RATELIMIT_SHARED_LIMITS").then(|| value.to_owned()));
            let error = limiter.check("k", rate).await.unwrap_err();
            let RateLimitError::InvalidConfig(reason) = &error else {
                panic!("{value}: {error:?}");
            };
            assert!(reason.starts_with("RATELIMIT_SHARED_LIMITS"), "{reason}");
        }
        let limiter =
            from_settings(|name| (name == "RATELIMIT_SHARED_LIMITS").then(|| "0".to_owned()));
        assert!(limiter.check("k", rate).await.unwrap().allowed);
    }

    /// Without the `cluster` feature a cluster setting is a configuration error that names it
    /// (every check of the process-wide default then answers it).
    #[cfg(not(feature = "cluster"))]
    #[test]
    fn a_cluster_needs_the_cluster_feature() {
        let error = super::cluster(crate::Limiter::builder(), "redis://127.0.0.1:7000")
            .err()
            .unwrap();
        assert!(error.to_string().contains("`cluster` feature"), "{error}");
    }
}
