//! Testing code that is rate limited: a `ManualClock` drives an annotated function's windows
//! in microseconds of real time, in process, on a real `redis-server` (the clock's time sent
//! with each check) and in the in-process fallback of a Redis that cannot be reached.
//!
//! Timing: every asserted time is the manual clock's; real time is only printed.

use std::sync::LazyLock;
use std::time::{Duration, Instant, SystemTime};

use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{FailurePolicy, Limit, Limiter, Rate, RateLimitError, rate_limit};
use redis::AsyncCommands as _;
use tests::{TestRedis, unique_prefix};

const START: Duration = Duration::from_secs(1_700_000_000);

fn start() -> SystemTime {
    SystemTime::UNIX_EPOCH + START
}

#[rate_limit(period = 30, threshold = 2, key = user, limiter = limiter)]
async fn say_hi(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

// Windows of a minute and more: on Redis a key's expiry counts real time (at least the window),
// which a loaded machine's pauses between checks must not reach.
#[rate_limit(period = 60, threshold = 2, key = user, limiter = limiter)]
#[rate_limit(period = "1d", threshold = 3, key = user, limiter = limiter)]
async fn search(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// A 30 s window through an annotated function, and a burst limit with a daily quota, on
/// `clock`: denials carry the clock's exact retry-after, and windows pass when it moves.
async fn windows_pass_when_the_clock_moves(limiter: &Limiter, clock: &ManualClock) {
    let started = Instant::now();
    assert!(say_hi(limiter, "alice").await.is_ok());
    clock.advance(Duration::from_secs(10));
    assert!(say_hi(limiter, "alice").await.is_ok());
    let err = say_hi(limiter, "alice").await.unwrap_err();
    assert_eq!(
        err.retry_after(),
        Some(Duration::from_secs(20)),
        "the clock's own time"
    );
    clock.advance(Duration::from_secs(20) - Duration::from_micros(1));
    assert!(
        say_hi(limiter, "alice").await.is_err(),
        "1 µs before the first admission leaves"
    );
    clock.advance(Duration::from_micros(1));
    assert!(say_hi(limiter, "alice").await.is_ok());

    assert!(search(limiter, "bob").await.is_ok());
    assert!(search(limiter, "bob").await.is_ok());
    assert!(search(limiter, "bob").await.is_err(), "the burst limit");
    clock.advance(Duration::from_secs(60));
    assert!(search(limiter, "bob").await.is_ok());
    clock.advance(Duration::from_secs(60));
    let err = search(limiter, "bob").await.unwrap_err();
    let day = Duration::from_secs(86_400);
    let waited = Duration::from_secs(120);
    assert_eq!(err.retry_after(), Some(day - waited), "the daily quota");
    // A cost, and an explicit time, which wins over the clock.
    let rate = Rate::new(3, Duration::from_secs(60)).expect("a rate");
    assert!(
        limiter
            .check_n("cost", rate, 3)
            .await
            .expect("a check")
            .allowed
    );
    assert!(
        !limiter
            .check_n("cost", rate, 1)
            .await
            .expect("a check")
            .allowed
    );
    let later = clock.now() + Duration::from_secs(60);
    assert!(
        limiter
            .check_at("cost", rate, later)
            .await
            .expect("a check")
            .allowed
    );
    clock.advance(Duration::from_secs(60));
    let three = limiter.check_n("cost", rate, 3).await.expect("a check");
    assert!(!three.allowed, "the explicit time's admission counts");
    assert_eq!(three.remaining, 2);
    clock.advance(day);
    assert!(search(limiter, "bob").await.is_ok());
    println!("a day of windows in {:?} of real time", started.elapsed());
}

#[tokio::test]
async fn in_process() {
    let clock = ManualClock::new(start());
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .build()
        .expect("an in-process limiter");
    windows_pass_when_the_clock_moves(&limiter, &clock).await;
}

#[tokio::test]
async fn a_static_limiter_on_a_static_clock() {
    static CLOCK: LazyLock<ManualClock> = LazyLock::new(|| ManualClock::new(start()));
    static LIMITER: LazyLock<Limiter> = LazyLock::new(|| {
        Limiter::builder()
            .clock(CLOCK.clone())
            .build()
            .expect("an in-process limiter")
    });
    windows_pass_when_the_clock_moves(&LIMITER, &CLOCK).await;
}

#[tokio::test]
async fn on_redis_the_clocks_time_is_sent() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("manual-clock");
    let clock = ManualClock::new(start());
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .clock(clock.clone())
        .build()
        .expect("a Redis limiter");
    windows_pass_when_the_clock_moves(&limiter, &clock).await;
    // The scores are the clock's times, not the server's.
    let mut connection = redis.connection().await;
    let key = format!("{prefix}suite::manual_clock::say_hi/alice");
    let scores: Vec<(String, f64)> = connection
        .zrange_withscores(&key, 0, -1)
        .await
        .expect("ZRANGE");
    let first = START + Duration::from_secs(10);
    let expected = (first.as_micros() + 20_000_000) as f64;
    assert_eq!(scores.last().map(|(_, score)| *score), Some(expected));
    // A check of several limits by hand is on the clock too.
    let rate = Rate::new(1, Duration::from_secs(60)).expect("a rate");
    let limits = || [Limit::new("by-hand:a", rate), Limit::new("by-hand:b", rate)];
    assert!(limiter.check_all(limits()).await.expect("a check").allowed);
    assert!(!limiter.check_all(limits()).await.expect("a check").allowed);
    clock.advance(Duration::from_secs(60));
    assert!(limiter.check_all(limits()).await.expect("a check").allowed);
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn a_redis_limiter_on_a_clock_needs_a_prefix_of_its_own() {
    let built = Limiter::builder()
        .redis_url("redis://127.0.0.1:6379/")
        .clock(ManualClock::new(start()))
        .build();
    let Err(RateLimitError::InvalidConfig(reason)) = built else {
        panic!("the default prefix is refused");
    };
    assert!(reason.contains("key prefix of its own"), "{reason}");
}

#[tokio::test]
async fn the_local_fallback_is_on_the_clock_too() {
    let clock = ManualClock::new(start());
    let limiter = Limiter::builder()
        .redis_url(format!("redis://127.0.0.1:{}/", tests::spare_port()))
        .key_prefix(unique_prefix("manual-clock-local"))
        .failure_policy(FailurePolicy::Local)
        .timeout(Duration::from_secs(10))
        .clock(clock.clone())
        .build()
        .expect("a Redis limiter");
    windows_pass_when_the_clock_moves(&limiter, &clock).await;
    assert!(limiter.policy_answers() > 0, "the fallback answered");
}
