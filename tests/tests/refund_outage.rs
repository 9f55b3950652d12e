//! A refund that cannot reach the store: the call's result stands, the outage is logged once
//! (warn, never with the key), and the entry it could not remove stays until its window ends
//! (the key keeps its TTL). One test in its own binary, for its subscriber (see `tests::journal`).

use std::time::Duration;

use ratelimit_runtime::{FailurePolicy, Limiter, RateLimitError, rate_limit};
use redis::AsyncCommands as _;
use tests::journal::Journal;
use tests::proxy::{Fault, FaultProxy};
use tests::{TestRedis, connected, unique_prefix};

// The body cuts the store off, then succeeds: its call must be refunded, and cannot be.
#[rate_limit(period = "1h", threshold = 5, key = user, count = "errors", name = "outage.login", limiter = limiter)]
async fn login(limiter: &Limiter, user: &str, proxy: &FaultProxy) -> Result<(), RateLimitError> {
    proxy.set(Fault::Refuse);
    Ok(())
}

#[tokio::test]
async fn a_refund_that_cannot_reach_the_store_is_logged_once_and_its_entry_expires() {
    let journal = Journal::default();
    let _guard = tracing::subscriber::set_default(journal.clone());
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("refund-outage");
    let limiter = Limiter::builder()
        .redis_url(proxy.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Local)
        .timeout(Duration::from_secs(2))
        .build()
        .expect("a limiter");
    connected(&limiter, "warm-up").await;
    journal.clear();

    login(&limiter, "secret-user-42", &proxy)
        .await
        .expect("the body's result stands");
    assert!(
        limiter.is_degraded(),
        "the refund's failure opened the breaker"
    );
    // The outage goes on (probes are refused too): the fallback admits and refunds, and
    // nothing more is logged.
    for _ in 0..3 {
        login(&limiter, "secret-user-42", &proxy)
            .await
            .expect("admitted by the fallback");
    }
    proxy.set(Fault::Pass);

    let lines = journal.lines();
    eprintln!("{lines:#?}");
    let warnings: Vec<_> = lines.iter().filter(|l| l.starts_with("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{lines:#?}");
    assert!(
        warnings[0].contains("rate limit store unavailable"),
        "{lines:#?}"
    );
    assert!(
        lines.iter().all(|l| !l.contains("secret-user")),
        "{lines:#?}"
    );

    // The entry the refund could not remove is still there, and expires with its window.
    let mut connection = redis.connection().await;
    let key = format!("{prefix}outage.login/secret-user-42");
    let members: u64 = connection.zcard(&key).await.unwrap();
    assert_eq!(members, 1);
    let ttl: i64 = connection.pttl(&key).await.unwrap();
    assert!(ttl > 0 && ttl <= 3_600_000 + 1_000, "{ttl}");
}
