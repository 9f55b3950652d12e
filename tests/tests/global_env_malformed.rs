//! A malformed URL in the environment: the default limiter is still built, and every check
//! of it answers `InvalidConfig` naming the variable (never its value), whatever its failure
//! policy: a typo is a mistake to fix, not an outage to ride out. Its own test binary.

use ratelimit_runtime::{FailurePolicy, RateLimitError, global, rate_limit};

#[rate_limit(period = 60, threshold = 1)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

#[tokio::test]
async fn a_malformed_url_makes_every_check_a_configuration_error() {
    // SAFETY: the only test of this binary, run before any other thread reads the environment.
    unsafe { std::env::set_var("RATELIMIT_REDIS_URL", "redis://:hunter2@127.0.0.1:99999/") };
    // The policy an outage would get: not used for a setting that cannot work.
    assert_eq!(global().failure_policy(), FailurePolicy::Local);
    for _ in 0..3 {
        let error = limited().await.unwrap_err();
        let RateLimitError::InvalidConfig(reason) = &error else {
            panic!("not a configuration error: {error:?}");
        };
        assert!(reason.starts_with("RATELIMIT_REDIS_URL "), "{reason}");
        let shown = format!("{error} {error:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("99999"),
            "{shown}"
        );
    }
}
