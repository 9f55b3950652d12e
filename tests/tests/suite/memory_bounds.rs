//! The cap on the keys the in-process store tracks (`LimiterBuilder::max_keys`), through the
//! public API: a check of a new key that finds the store full is denied with a retry-after of
//! its period and nothing recorded, keys already tracked are checked as before, room comes back
//! once the old keys' periods have passed, and the fallback of `FailurePolicy::Local` is capped
//! too.
//!
//! Caps below 128 keys are exact (one shard); 1000 splits into 8 shards of 125.

use std::time::{Duration, SystemTime};

use ratelimit_runtime::{Decision, FailurePolicy, Limiter, Rate, RateLimitError};
use tests::at_micros;
use tests::counting_alloc::{count_allocations, poll_ready};

/// A base time well after 1970 (2023-11-14T22:13:20Z), in microseconds since the epoch.
const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

async fn capped(max_keys: usize) -> Limiter {
    Limiter::builder()
        .max_keys(max_keys)
        .build()
        .expect("build a capped in-process limiter")
}

/// The answer to a new key when the store is full.
fn full(rate: Rate) -> Decision {
    Decision::denied(rate.threshold(), rate.period(), rate.period())
}

#[tokio::test]
async fn a_new_key_is_denied_at_the_cap_and_tracked_keys_are_not() {
    let limiter = capped(100).await;
    let rate = Rate::new(2, Duration::from_secs(60)).unwrap();
    let at = at_micros(T0);
    for i in 0..100 {
        let decision = limiter
            .check_at(&format!("user-{i}"), rate, at)
            .await
            .unwrap();
        assert!(
            decision.allowed && decision.remaining == 1,
            "user-{i}: {decision:?}"
        );
    }
    // The store is full: new keys are denied, again and again (a denial records nothing).
    for _ in 0..3 {
        let decision = limiter.check_at("newcomer", rate, at).await.unwrap();
        assert_eq!(decision, full(rate));
    }
    // Tracked keys: their second admission, then a denial by their own window.
    let later = at_micros(T0 + 10 * SECOND);
    for i in 0..100 {
        let key = format!("user-{i}");
        let second = limiter.check_at(&key, rate, later).await.unwrap();
        assert!(second.allowed && second.remaining == 0, "{key}: {second:?}");
        let third = limiter.check_at(&key, rate, later).await.unwrap();
        assert_eq!(
            third,
            Decision::denied(2, Duration::from_secs(50), Duration::from_secs(60)),
            "{key}"
        );
    }
}

/// 1000 keys are 8 shards of 125: of 5000 new keys, exactly 1000 are admitted (each shard
/// receives far more than 125 of them).
#[tokio::test]
async fn a_cap_split_among_shards_admits_exactly_max_keys() {
    let limiter = capped(1000).await;
    let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
    let at = at_micros(T0);
    let mut admitted = 0;
    for i in 0..5_000 {
        let decision = limiter.check_at(&format!("k{i}"), rate, at).await.unwrap();
        if decision.allowed {
            admitted += 1;
        } else {
            assert_eq!(decision, full(rate), "k{i}");
        }
    }
    assert_eq!(admitted, 1000);
}

/// Once the periods of the tracked keys have passed (by the check's time and by the wall
/// clock, which the store also requires), a new key finds room again.
#[tokio::test]
async fn room_comes_back_once_the_old_keys_periods_have_passed() {
    let limiter = capped(100).await;
    let period = Duration::from_millis(50);
    let rate = Rate::new(1, period).unwrap();
    let start = SystemTime::now();
    for i in 0..100 {
        assert!(
            limiter
                .check_at(&format!("old-{i}"), rate, start)
                .await
                .unwrap()
                .allowed
        );
    }
    assert_eq!(
        limiter.check_at("new-0", rate, start).await.unwrap(),
        full(rate)
    );
    tokio::time::sleep(period * 2).await;
    let later = start + period * 2;
    for i in 0..100 {
        let decision = limiter
            .check_at(&format!("new-{i}"), rate, later)
            .await
            .unwrap();
        assert!(decision.allowed, "new-{i}: {decision:?}");
    }
    assert_eq!(
        limiter.check_at("new-100", rate, later).await.unwrap(),
        full(rate)
    );
}

/// A check denied because the store is full stores nothing: it allocates nothing.
#[test]
fn a_denial_at_the_cap_allocates_nothing() {
    let limiter = poll_ready(capped(100));
    let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
    let at = at_micros(T0);
    for i in 0..100 {
        let key = format!("k{i}");
        assert!(
            poll_ready(limiter.check_at(&key, rate, at))
                .unwrap()
                .allowed
        );
    }
    // Warm-up (the first denial is logged).
    let _ = poll_ready(limiter.check_at("new", rate, at));
    for i in 0..10 {
        let key = format!("new-{i}");
        let (decision, count) = count_allocations(|| poll_ready(limiter.check_at(&key, rate, at)));
        assert_eq!(decision.unwrap(), full(rate));
        assert_eq!(count, 0, "{key}");
    }
}

/// `FailurePolicy::Local` answers from an in-process store with the same cap while Redis is
/// down.
#[tokio::test]
async fn the_local_fallback_is_capped_too() {
    let limiter = Limiter::builder()
        .redis_url("redis://127.0.0.1:1/")
        .failure_policy(FailurePolicy::Local)
        .timeout(Duration::from_millis(200))
        .max_keys(100)
        .build()
        .unwrap();
    let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
    let at = at_micros(T0);
    for i in 0..100 {
        let decision = limiter.check_at(&format!("k{i}"), rate, at).await.unwrap();
        assert!(decision.allowed, "k{i}: {decision:?}");
    }
    let answer = limiter.check_at("new", rate, at).await.unwrap();
    assert!(answer.answered_by_policy(), "{answer:?}");
    assert_eq!(tests::fields(&answer), tests::fields(&full(rate)));
}

#[tokio::test]
async fn a_cap_of_zero_keys_is_rejected() {
    let err = Limiter::builder().max_keys(0).build().unwrap_err();
    assert!(matches!(err, RateLimitError::InvalidConfig(_)), "{err}");
}
