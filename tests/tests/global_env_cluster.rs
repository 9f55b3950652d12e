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

/// The default limiter has the default timeout (250 ms) and policy (`Local`): on a loaded
/// machine a check may miss it and be answered in process, which would not be recorded in
/// Redis. The test waits for the default limiter to be connected (its first check discovers
/// the cluster), and runs a user's calls again, as another user, when one of them was answered
/// by the policy (never on an idle machine).
#[tokio::test]
async fn the_default_uses_a_redis_cluster_from_the_environment() {
    let cluster = TestCluster::start(3);
    // Spaces and a trailing comma, as such lists get written.
    let nodes = format!("{} ,", cluster.urls()[..2].join(" , "));
    // SAFETY: the only test of this binary, run before any other thread reads the environment.
    unsafe { std::env::set_var("RATELIMIT_REDIS_CLUSTER", nodes) };
    let global = ratelimit_runtime::global();
    assert!(format!("{global:?}").contains("redis-cluster"));
    tests::connected(global, "warm-up").await;
    let mut connection = cluster.cluster_connection().await;
    for user in ["ada", "grace", "edsger", "barbara"] {
        let attempts = (0..3).map(|attempt| format!("{user}{}", "-again".repeat(attempt)));
        let mut recorded_as = None;
        for attempt in attempts {
            let before = global.policy_answers();
            limited(&attempt).await.unwrap();
            limited(&attempt).await.unwrap();
            assert!(
                limited(&attempt).await.unwrap_err().is_denied(),
                "{attempt}"
            );
            if global.policy_answers() == before {
                recorded_as = Some(attempt);
                break;
            }
            eprintln!("{attempt}: a call was answered by the policy (a loaded machine); again");
        }
        let attempt = recorded_as
            .unwrap_or_else(|| panic!("{user}: every attempt had a call answered by the policy"));
        let recorded: u64 = connection
            .zcard(format!("ratelimit:global_env_cluster/{attempt}"))
            .await
            .unwrap();
        assert_eq!(recorded, 2, "{attempt}");
    }
}
