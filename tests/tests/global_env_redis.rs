//! The process-wide default built from `RATELIMIT_REDIS_URL` (its own test binary: the
//! environment is read once per process).

use ratelimit_runtime::{RateLimitError, rate_limit};
use redis::AsyncCommands;
use tests::TestRedis;

#[rate_limit(period = 60, threshold = 2, key = user, name = "global_env_redis")]
async fn limited(user: &str) -> Result<(), RateLimitError> {
    let _ = user;
    Ok(())
}

#[tokio::test]
async fn the_default_uses_redis_from_the_environment() {
    let redis = TestRedis::start_private();
    // SAFETY: the only test of this binary, run before any other thread reads the environment.
    unsafe { std::env::set_var("RATELIMIT_REDIS_URL", redis.url()) };
    limited("ada").await.unwrap();
    limited("ada").await.unwrap();
    assert!(limited("ada").await.unwrap_err().is_denied());
    let mut connection = redis.connection().await;
    let recorded: u64 = connection
        .zcard("ratelimit:global_env_redis:ada")
        .await
        .unwrap();
    assert_eq!(recorded, 2);
}
