//! The process-wide default, installed by `set_global` (its own test binary: it is set once
//! per process).

use std::sync::atomic::{AtomicUsize, Ordering};

use ratelimit_runtime::{FailurePolicy, Limiter, RateLimitError, global, rate_limit, set_global};

static RUNS: AtomicUsize = AtomicUsize::new(0);

#[rate_limit(period = 60, threshold = 1, name = "global_set::once")]
async fn once() -> Result<(), RateLimitError> {
    RUNS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test]
async fn the_attribute_uses_the_limiter_set_as_default() {
    let installed = Limiter::builder()
        .failure_policy(FailurePolicy::Open)
        .build()
        .unwrap();
    set_global(installed).expect("first set_global succeeds");
    assert_eq!(global().failure_policy(), FailurePolicy::Open);
    let rejected = set_global(Limiter::memory()).expect_err("a default is already in place");
    assert_eq!(rejected.failure_policy(), FailurePolicy::Local);

    once().await.expect("first call admitted");
    let error = once().await.expect_err("second call denied");
    assert_eq!(error.as_denied().unwrap().scope(), "global_set::once");
    assert_eq!(
        RUNS.load(Ordering::SeqCst),
        1,
        "the denied body did not run"
    );
}
