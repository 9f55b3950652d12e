//! A malformed URL in the environment: the default limiter is still built, and its checks are
//! answered by the failure policy (`Local`: limits per process). Its own test binary.

use ratelimit_runtime::{FailurePolicy, RateLimitError, global, rate_limit};

#[rate_limit(period = 60, threshold = 1)]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

#[tokio::test]
async fn a_malformed_url_falls_back_on_the_failure_policy() {
    // SAFETY: the only test of this binary, run before any other thread reads the environment.
    unsafe { std::env::set_var("RATELIMIT_REDIS_URL", "definitely not a url") };
    assert_eq!(global().failure_policy(), FailurePolicy::Local);
    limited().await.expect("admitted by the local fallback");
    assert!(limited().await.unwrap_err().is_denied());
}
