//! The process-wide default built from `RATELIMIT_REDIS_URL`, following the shared limits
//! (`RATELIMIT_SHARED_LIMITS`) (its own test binary: the environment is read once per
//! process).

use ratelimit_runtime::{RateLimitError, rate_limit};
use redis::AsyncCommands;
use tests::TestRedis;

#[rate_limit(period = 60, threshold = 2, key = user, name = "global_env_redis")]
async fn limited(user: &str) -> Result<(), RateLimitError> {
    let _ = user;
    Ok(())
}

/// The default limiter has the default timeout (250 ms) and policy (`Local`): on a loaded
/// machine a check may miss it and be answered in process, which would not be recorded in
/// Redis. The test waits for the default limiter to be connected, and runs its calls again
/// for another user when one of them was answered by the policy (never on an idle machine).
#[tokio::test]
async fn the_default_uses_redis_from_the_environment() {
    let redis = TestRedis::start_private();
    // SAFETY: the only test of this binary, run before any other thread reads the environment.
    unsafe {
        std::env::set_var("RATELIMIT_REDIS_URL", redis.url());
        std::env::set_var("RATELIMIT_SHARED_LIMITS", "true");
    }
    let global = ratelimit_runtime::global();
    // It follows the shared limits: a change through it is in force for the attribute.
    let rate = ratelimit_runtime::Rate::new(1, std::time::Duration::from_secs(60)).unwrap();
    global
        .shared_limits()
        .set_scope(
            "global_env_redis",
            ratelimit_runtime::ScopeLimits::new().rate(rate),
        )
        .await
        .expect("written");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let user = format!("shared-{attempts}");
        let first = limited(&user).await;
        let second = limited(&user).await;
        if first.is_ok() && second.as_ref().is_err_and(RateLimitError::is_denied) {
            break;
        }
        // Answered by the policy on a loaded machine: again, for another user.
        assert!(attempts < 5, "{first:?} {second:?}");
    }
    global
        .shared_limits()
        .remove_scope("global_env_redis")
        .await
        .expect("written");
    tests::connected(global, "warm-up").await;
    let mut connection = redis.connection().await;
    for user in ["ada", "ada-again", "ada-once-more"] {
        let before = global.policy_answers();
        limited(user).await.unwrap();
        limited(user).await.unwrap();
        assert!(limited(user).await.unwrap_err().is_denied());
        if global.policy_answers() != before {
            eprintln!("{user}: a call was answered by the policy (a loaded machine); again");
            continue;
        }
        let recorded: u64 = connection
            .zcard(format!("ratelimit:global_env_redis/{user}"))
            .await
            .unwrap();
        assert_eq!(recorded, 2);
        return;
    }
    panic!("every attempt had a call answered by the policy");
}
