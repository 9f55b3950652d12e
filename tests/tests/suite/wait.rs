//! `Limiter::until_ready`: a check that waits for a slot, on both stores and on a manual clock.
//!
//! Timing: the waiters' admissions are checked against the log Redis kept (the scores of the
//! admissions), never against latencies; the budget is generous (30 s for what needs about
//! 2 s), and a dropped waiter is dropped while it sleeps through a one-minute window.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{Limiter, Rate};
use redis::AsyncCommands as _;
use tests::{TestRedis, unique_prefix};

const BUDGET: Duration = Duration::from_secs(30);

/// 20 waiters on 2 calls per 200 ms: every one admitted within the budget.
async fn twenty_waiters(limiter: &Limiter, key: &'static str) {
    let rate = Rate::new(2, Duration::from_millis(200)).expect("a rate");
    let limiter = Arc::new(limiter.clone());
    let started = Instant::now();
    let mut waiters = Vec::new();
    for _ in 0..20 {
        let limiter = Arc::clone(&limiter);
        waiters.push(tokio::spawn(async move {
            limiter.until_ready(key, rate, BUDGET).await
        }));
    }
    for waiter in waiters {
        let decision = waiter.await.expect("a waiter").expect("a check");
        assert!(decision.allowed, "{decision:?}");
    }
    let elapsed = started.elapsed();
    println!("20 waiters admitted in {elapsed:?}");
    // A lower bound the window guarantees: 2 per 200 ms, so the last pair comes 9 windows
    // after the first (less a few µs of clock steps).
    assert!(elapsed >= Duration::from_millis(1_799), "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_admitted_in_process() {
    twenty_waiters(&Limiter::memory(), "k").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_admitted_on_redis_and_the_log_keeps_the_rate() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("wait");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    twenty_waiters(&limiter, "k").await;
    // The admissions the last window kept, and each one's window: never more than 2 in any
    // 200 ms (the scores are the server's clock, in µs).
    let mut connection = redis.connection().await;
    let scores: Vec<(String, f64)> = connection
        .zrange_withscores(format!("{prefix}k"), 0, -1)
        .await
        .expect("ZRANGE");
    let times: Vec<u64> = scores.iter().map(|(_, score)| *score as u64).collect();
    for (i, &t) in times.iter().enumerate() {
        let in_window = times[..=i].iter().filter(|&&s| s + 200_000 > t).count();
        assert!(
            in_window <= 2,
            "{in_window} admissions in a window: {times:?}"
        );
    }
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn on_a_manual_clock_a_wait_moves_the_clock() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let clock = ManualClock::new(start);
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .build()
        .expect("an in-process limiter");
    let rate = Rate::new(2, Duration::from_secs(30)).expect("a rate");
    let real = Instant::now();
    for _ in 0..2 {
        assert!(limiter.check("k", rate).await.expect("a check").allowed);
    }
    // A wait shorter than the retry-after: the denial, at once, the clock unmoved.
    let denied = limiter
        .until_ready("k", rate, Duration::from_secs(29))
        .await
        .expect("a check");
    assert_eq!(denied.retry_after, Some(Duration::from_secs(30)));
    assert_eq!(clock.now(), start);
    // A long enough one: the clock moves to the wake-up time, exactly (no jitter).
    let admitted = limiter
        .until_ready("k", rate, Duration::from_secs(30))
        .await
        .expect("a check");
    assert!(admitted.allowed);
    assert_eq!(clock.now(), start + Duration::from_secs(30));
    println!("a 30 s wait in {:?} of real time", real.elapsed());
}

#[tokio::test]
async fn a_dropped_waiter_records_nothing() {
    let limiter = Limiter::memory();
    let rate = Rate::new(1, Duration::from_secs(60)).expect("a rate");
    assert!(limiter.check("k", rate).await.expect("a check").allowed);
    let waiting = limiter.until_ready("k", rate, Duration::from_secs(120));
    // It sleeps through the minute: stop waiting long before.
    let stopped = tokio::time::timeout(Duration::from_millis(50), waiting).await;
    assert!(stopped.is_err(), "still waiting");
    let look = limiter.peek("k", rate).await.expect("a peek");
    assert_eq!(
        (look.allowed, look.remaining),
        (false, 0),
        "one admission, the first"
    );
    let two = Rate::new(2, Duration::from_secs(60)).expect("a rate");
    let look = limiter.peek("k", two).await.expect("a peek");
    assert_eq!(look.remaining, 1, "the waiter recorded nothing");
}

// The attribute's `wait`: the plain form, stacked limits, and under `#[async_trait]`.
#[ratelimit_runtime::rate_limit(period = 30, threshold = 2, limiter = limiter, wait = "30s")]
async fn patient(limiter: &Limiter) -> Result<(), ratelimit_runtime::RateLimitError> {
    Ok(())
}

#[ratelimit_runtime::rate_limit(period = 30, threshold = 2, limiter = limiter, wait = "29s")]
async fn hasty(limiter: &Limiter) -> Result<(), ratelimit_runtime::RateLimitError> {
    Ok(())
}

#[ratelimit_runtime::rate_limit(period = 10, threshold = 1, key = user, limiter = limiter)]
#[ratelimit_runtime::rate_limit(period = "1h", threshold = 5, key = user, wait = "1m")]
async fn stacked(limiter: &Limiter, user: &str) -> Result<(), ratelimit_runtime::RateLimitError> {
    Ok(())
}

#[async_trait::async_trait]
trait Client {
    async fn call(&self) -> Result<(), ratelimit_runtime::RateLimitError>;
}

struct Api {
    limiter: Limiter,
}

#[async_trait::async_trait]
impl Client for Api {
    #[ratelimit_runtime::rate_limit(period = 1, threshold = 1, limiter = &self.limiter, wait = "5s")]
    async fn call(&self) -> Result<(), ratelimit_runtime::RateLimitError> {
        Ok(())
    }
}

#[tokio::test]
async fn the_attributes_wait_on_a_manual_clock() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let clock = ManualClock::new(start);
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .build()
        .expect("an in-process limiter");
    for _ in 0..2 {
        assert!(patient(&limiter).await.is_ok());
    }
    assert!(patient(&limiter).await.is_ok(), "waited for the window");
    assert_eq!(clock.now(), start + Duration::from_secs(30));

    for _ in 0..2 {
        assert!(hasty(&limiter).await.is_ok());
    }
    let err = hasty(&limiter).await.unwrap_err();
    assert_eq!(
        err.retry_after(),
        Some(Duration::from_secs(30)),
        "a wait too short"
    );
    assert_eq!(
        clock.now(),
        start + Duration::from_secs(30),
        "and no time spent"
    );

    // Stacked: the burst of 1 per 10 s makes each call after the first wait 10 s.
    for n in 1..=5 {
        assert!(stacked(&limiter, "u").await.is_ok(), "call {n}");
    }
    assert_eq!(clock.now(), start + Duration::from_secs(70));
    // The hourly quota is spent: waiting for it would take longer than a minute.
    let err = stacked(&limiter, "u").await.unwrap_err();
    assert!(err.retry_after() > Some(Duration::from_secs(60)), "{err}");

    let api = Api {
        limiter: Limiter::builder()
            .clock(clock.clone())
            .build()
            .expect("an in-process limiter"),
    };
    assert!(api.call().await.is_ok());
    assert!(api.call().await.is_ok(), "waited a second");
    assert_eq!(clock.now(), start + Duration::from_secs(71));
}

#[ratelimit_runtime::rate_limit(period = "200ms", threshold = 2, limiter = limiter, wait = "30s")]
async fn outbound(limiter: &Limiter) -> Result<(), ratelimit_runtime::RateLimitError> {
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_callers_of_a_limited_client_all_get_through() {
    let limiter = Arc::new(Limiter::memory());
    let started = Instant::now();
    let mut callers = Vec::new();
    for _ in 0..20 {
        let limiter = Arc::clone(&limiter);
        callers.push(tokio::spawn(async move { outbound(&limiter).await }));
    }
    for caller in callers {
        caller
            .await
            .expect("a caller")
            .expect("admitted within the wait");
    }
    let elapsed = started.elapsed();
    println!("20 callers through 2 per 200 ms in {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(1_799), "{elapsed:?}");
}

// A wait as long as the period, on real time: the slot frees within it, so the call is
// admitted whatever the jitter (which never pushes a wait past its budget).
#[ratelimit_runtime::rate_limit(period = "300ms", threshold = 1, limiter = limiter, wait = "300ms")]
async fn as_long_as_the_period(limiter: &Limiter) -> Result<(), ratelimit_runtime::RateLimitError> {
    Ok(())
}

#[tokio::test]
async fn a_wait_as_long_as_the_period_gets_the_slot() {
    let limiter = Limiter::memory();
    for attempt in 0..5 {
        let started = Instant::now();
        assert!(
            as_long_as_the_period(&limiter).await.is_ok(),
            "attempt {attempt}"
        );
        assert!(
            as_long_as_the_period(&limiter).await.is_ok(),
            "attempt {attempt}, waited"
        );
        println!("two calls in {:?}", started.elapsed());
    }
}

// Stacked limits with a wait under `#[async_trait]`: its guard of several limits.
struct Stacked {
    limiter: Limiter,
}

#[async_trait::async_trait]
impl Client for Stacked {
    #[ratelimit_runtime::rate_limit(period = 1, threshold = 1, limiter = &self.limiter, wait = "5s")]
    #[ratelimit_runtime::rate_limit(period = "1h", threshold = 2)]
    async fn call(&self) -> Result<(), ratelimit_runtime::RateLimitError> {
        Ok(())
    }
}

#[tokio::test]
async fn stacked_limits_wait_under_async_trait() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let clock = ManualClock::new(start);
    let client = Stacked {
        limiter: Limiter::builder()
            .clock(clock.clone())
            .build()
            .expect("an in-process limiter"),
    };
    assert!(client.call().await.is_ok());
    assert!(client.call().await.is_ok(), "waited a second");
    assert_eq!(clock.now(), start + Duration::from_secs(1));
    assert!(
        client.call().await.is_err(),
        "the hourly limit: longer than the wait"
    );
}
