//! Shadow mode: a shadow limit is checked and recorded as any other, never denies, records
//! nothing when it would deny, and says so (`Decision::would_deny`); a limiter in shadow mode
//! makes every limit a shadow one. On every store (in process, a real `redis-server`). The
//! counts of would-be denials are in `metrics.rs`.
//!
//! Timing: every window is an hour, far longer than a test runs.

use std::time::Duration;

use ratelimit_runtime::{Limit, Limiter, Rate, RateLimitError, rate_limit};
use redis::AsyncCommands as _;
use tests::{TestRedis, connected, logged, unique_prefix};

const HOUR: Duration = Duration::from_secs(3_600);

/// A limiter in shadow mode: every check is admitted; those a limit would deny say so and
/// record nothing; a check of several limits checks each on its own; a cost that can never
/// fit is a would-be denial, not an error.
async fn shadow_mode(limiter: &Limiter) {
    assert!(limiter.is_shadow());
    let rate = Rate::new(2, HOUR).expect("a rate");
    let mut would_deny = 0;
    for _ in 0..5 {
        let decision = limiter.check("k", rate).await.expect("a check");
        assert!(decision.allowed, "{decision:?}");
        if decision.would_deny() {
            would_deny += 1;
            assert_eq!(decision.remaining, 0);
            assert!(decision.retry_after.is_some(), "what the denial would say");
        }
    }
    assert_eq!(would_deny, 3);
    let look = limiter.peek("k", rate).await.expect("a look");
    assert!(
        look.allowed && look.would_deny(),
        "a look answers as a check: {look:?}"
    );
    assert_eq!(
        logged(limiter, "k", rate).await,
        2,
        "would-be denials record nothing"
    );

    // Several limits: the full one would deny, the other still records the call.
    let small = Rate::new(1, HOUR).expect("a rate");
    let decisions = limiter
        .check_all([Limit::new("a", small), Limit::new("b", rate)])
        .await
        .expect("a check");
    assert!(decisions.allowed && !decisions.would_deny());
    let decisions = limiter
        .check_all([Limit::new("a", small), Limit::new("b", rate)])
        .await
        .expect("a check");
    assert!(decisions.allowed);
    let each: Vec<bool> = decisions.iter().map(|d| d.would_deny()).collect();
    assert_eq!(each, [true, false]);
    assert_eq!(logged(limiter, "a", small).await, 1);
    assert_eq!(logged(limiter, "b", rate).await, 2);

    // A cost above the threshold: a would-be denial of one period.
    let decision = limiter.check_n("c", rate, 3).await.expect("not an error");
    assert!(decision.allowed && decision.would_deny(), "{decision:?}");
    assert_eq!(decision.retry_after, Some(HOUR));
    assert_eq!(logged(limiter, "c", rate).await, 0);
}

#[tokio::test]
async fn shadow_mode_in_process() {
    let limiter = Limiter::builder().shadow(true).build().expect("a limiter");
    shadow_mode(&limiter).await;
}

#[tokio::test]
async fn shadow_mode_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shadow");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .failure_policy(ratelimit_runtime::FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .shadow(true)
        .build()
        .expect("a limiter");
    connected(&limiter, "canary").await;
    shadow_mode(&limiter).await;
    let mut connection = redis.connection().await;
    let members: u64 = connection.zcard(format!("{prefix}k")).await.unwrap();
    assert_eq!(members, 2);
    redis.clean_up(&prefix).await;
}

// A shadow limit beside an enforced one: the enforced one alone decides, and `d` holds its
// decision only.
#[rate_limit(period = 3600, threshold = 3, key = user, name = "shadow.enforced", limiter = limiter, decision = d)]
#[rate_limit(period = 3600, threshold = 1, key = user, name = "shadow.tried", shadow = true, limiter = limiter)]
async fn search(limiter: &Limiter, user: &str) -> Result<(u64, usize), RateLimitError> {
    Ok((d.remaining, d.len()))
}

// A shadow limit alone never denies (`decision` is refused there: it would always be empty).
#[rate_limit(period = 3600, threshold = 1, key = user, name = "shadow.alone", shadow = true, cost = cost, limiter = limiter)]
async fn alone(limiter: &Limiter, user: &str, cost: u32) -> Result<bool, RateLimitError> {
    Ok(true)
}

async fn shadow_limits_of_the_attribute(limiter: &Limiter) {
    let tried = Rate::new(1, HOUR).expect("a rate");
    let enforced = Rate::new(3, HOUR).expect("a rate");
    let keys = ["#shadow.enforced/{u}@1h", "#shadow.tried/{u}@1h"];
    assert_eq!(search(limiter, "u").await.expect("admitted"), (2, 1));
    assert_eq!(search(limiter, "u").await.expect("admitted"), (1, 1));
    assert_eq!(search(limiter, "u").await.expect("admitted"), (0, 1));
    assert!(search(limiter, "u").await.unwrap_err().is_denied());
    assert_eq!(logged(limiter, keys[0], enforced).await, 3);
    assert_eq!(
        logged(limiter, keys[1], tried).await,
        1,
        "it admitted one call only"
    );
    // A cost that can never fit (2 of 1): a would-be denial, the call runs.
    for _ in 0..3 {
        assert!(alone(limiter, "u", 2).await.expect("never denied"));
    }
}

#[tokio::test]
async fn shadow_limits_of_the_attribute_in_process() {
    shadow_limits_of_the_attribute(&Limiter::memory()).await;
}

#[tokio::test]
async fn shadow_limits_of_the_attribute_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shadow-attribute");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    shadow_limits_of_the_attribute(&limiter).await;
    redis.clean_up(&prefix).await;
}

#[rate_limit(period = 60, threshold = 5, limiter = limiter)]
async fn plain(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, label = "composite", limiter = limiter)]
async fn composite(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

/// Shadow mode never fails a call: a store that cannot answer under `Closed` is answered as
/// under `Open`, by hand and through either form of the attribute.
#[tokio::test]
async fn shadow_mode_answers_a_failed_store_as_open() {
    let limiter = Limiter::builder()
        .redis_url(format!("redis://127.0.0.1:{}/", tests::spare_port()))
        .failure_policy(ratelimit_runtime::FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .shadow(true)
        .build()
        .expect("a limiter");
    let rate = Rate::new(1, HOUR).expect("a rate");
    for _ in 0..2 {
        let decision = limiter.check("k", rate).await.expect("never an error");
        assert!(
            decision.allowed && decision.answered_by_policy(),
            "{decision:?}"
        );
        let decisions = limiter
            .check_all([Limit::new("a", rate), Limit::new("b", rate)])
            .await
            .expect("never an error");
        assert!(decisions.allowed && decisions.iter().all(|d| d.answered_by_policy()));
        let permit = limiter
            .check_permit("p", rate, 1)
            .await
            .expect("never an error");
        assert!(permit.allowed);
        plain(&limiter).await.expect("the plain form");
        composite(&limiter).await.expect("the composite form");
    }
}

/// In shadow mode a would-be denial decides a check of several limits, as a denial would.
#[tokio::test]
async fn a_would_be_denial_decides() {
    let limiter = Limiter::builder().shadow(true).build().expect("a limiter");
    let rate = Rate::new(1, HOUR).expect("a rate");
    assert!(limiter.check("full", rate).await.expect("a check").allowed);
    let decisions = limiter
        .check_all([Limit::new("empty", rate), Limit::new("full", rate)])
        .await
        .expect("a check");
    assert!(decisions.allowed && decisions.would_deny(), "{decisions:?}");
    assert_eq!(decisions.deciding().label(), "1h-2", "the full limit");
}
