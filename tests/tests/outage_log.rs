//! An outage is logged once when it starts (warn) and once when it ends (info, with its length
//! and how many checks the policy answered), never once per call, and never with the key.
//! One test in its own binary: a subscriber set for one thread does not see callsites that
//! other threads, without one, have cached as disabled.

use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate};
use tests::TestRedis;
use tests::journal::Journal;

#[tokio::test]
async fn an_outage_is_logged_once_when_it_starts_and_once_when_it_ends() {
    let journal = Journal::default();
    let _guard = tracing::subscriber::set_default(journal.clone());

    let port = tests::spare_port();
    let mut redis = TestRedis::start_on(port).expect("start redis-server");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(tests::unique_prefix("outage"))
        .failure_policy(FailurePolicy::Local)
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let rate = Rate::new(1_000, Duration::from_secs(60)).unwrap();
    let key = "user:secret-id-42";
    // Connected. A loaded machine may make the first check time out: that outage is not this
    // test's, and is forgotten with what it logged.
    tests::connected(&limiter, "warm-up").await;
    journal.clear();
    let before = limiter.policy_answers();

    redis.stop();
    for _ in 0..200 {
        assert!(limiter.check(key, rate).await.unwrap().allowed);
    }
    assert_eq!(limiter.policy_answers() - before, 200);

    let _redis = TestRedis::start_on(port).expect("start redis-server again");
    let back = Instant::now();
    tests::wait_for(
        "checks go back to Redis",
        tests::STATE_DEADLINE,
        async || {
            if !limiter.is_degraded() {
                return Some(());
            }
            let _ = limiter.check(key, rate).await.unwrap();
            None
        },
    )
    .await;
    eprintln!(
        "back on Redis {:?} after it accepted connections",
        back.elapsed()
    );
    let answered = limiter.policy_answers() - before;

    let lines = journal.lines();
    let starts: Vec<_> = lines
        .iter()
        .filter(|line| line.starts_with("WARN"))
        .collect();
    let ends: Vec<_> = lines
        .iter()
        .filter(|line| line.starts_with("INFO"))
        .collect();
    assert_eq!(starts.len(), 1, "{lines:#?}");
    assert!(
        starts[0].contains("rate limit store unavailable"),
        "{lines:#?}"
    );
    assert_eq!(ends.len(), 1, "{lines:#?}");
    assert!(ends[0].contains("answers again"), "{lines:#?}");
    assert!(
        ends[0].contains(&format!("answered_by_policy={answered}")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().all(|line| !line.contains("secret-id-42")),
        "{lines:#?}"
    );
    eprintln!("{lines:#?}");
}
