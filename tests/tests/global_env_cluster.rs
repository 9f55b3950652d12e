//! The process-wide default built from `RATELIMIT_REDIS_CLUSTER` (its own test binary: the
//! environment is read once per process).

use ratelimit_runtime::{RateLimitError, rate_limit};
use redis::AsyncCommands;
use tests::cluster::TestCluster;

#[rate_limit(period = 60, threshold = 2, key = user, name = "global_env_cluster")]
async fn limited(user: &str) -> Result<(), RateLimitError> {
    let _ = user;
    Ok(())
}

#[tokio::test]
async fn the_default_uses_a_redis_cluster_from_the_environment() {
    let cluster = TestCluster::start(3);
    // Spaces and a trailing comma, as such lists get written.
    let nodes = format!("{} ,", cluster.urls()[..2].join(" , "));
    // SAFETY: the only test of this binary, run before any other thread reads the environment.
    unsafe { std::env::set_var("RATELIMIT_REDIS_CLUSTER", nodes) };
    for user in ["ada", "grace", "edsger", "barbara"] {
        limited(user).await.unwrap();
        limited(user).await.unwrap();
        assert!(limited(user).await.unwrap_err().is_denied(), "{user}");
    }
    assert!(format!("{:?}", ratelimit_runtime::global()).contains("redis-cluster"));
    assert_eq!(ratelimit_runtime::global().policy_answers(), 0);
    let mut connection = cluster.cluster_connection().await;
    for user in ["ada", "grace", "edsger", "barbara"] {
        let recorded: u64 = connection
            .zcard(format!("ratelimit:global_env_cluster:{user}"))
            .await
            .unwrap();
        assert_eq!(recorded, 2, "{user}");
    }
}
