//! Outside Tokio. The Redis store and the attribute under `smol::block_on`, a fault through
//! the proxy included (the tests build the runtime with its `smol` feature: a check polled
//! outside a Tokio runtime runs its Redis call, its timers and the hand-off of an unfinished
//! call on smol's global executor); and the in-process store under
//! `futures::executor::block_on`, an executor with no runtime at all, which it never needs.
//! No Tokio runtime is made here (the proxy runs its own, on a thread of its own).

use std::future::Future;
use std::time::{Duration, Instant};

use ratelimit_runtime::{
    FailurePolicy, Limit, Limiter, Rate, RateLimitError, StoreError, rate_limit,
};
use tests::proxy::{Fault, FaultProxy};
use tests::{STATE_DEADLINE, TestRedis, unique_prefix};

#[rate_limit(period = 60, threshold = 2, name = "other_runtimes.hello", limiter = limiter)]
async fn hello(limiter: &Limiter) -> Result<&'static str, RateLimitError> {
    Ok("hi")
}

#[rate_limit(period = 60, threshold = 3, key = user, label = "minute", limiter = limiter)]
#[rate_limit(period = "1d", threshold = 2, key = user, label = "day", limiter = limiter)]
async fn stacked(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// `ZCARD` of `key`, on a plain synchronous connection (no executor at all).
fn recorded(redis: &TestRedis, key: &str) -> u64 {
    let mut connection = redis::Client::open(redis.url())
        .expect("a URL")
        .get_connection_with_timeout(Duration::from_secs(10))
        .expect("connect");
    redis::cmd("ZCARD")
        .arg(key)
        .query(&mut connection)
        .expect("ZCARD")
}

/// Polls `attempt` (on smol's timers) until it is `Some`, within `within`.
async fn wait_for<T, F: Future<Output = Option<T>>>(
    what: &str,
    within: Duration,
    mut attempt: impl FnMut() -> F,
) -> (T, Duration) {
    let started = Instant::now();
    loop {
        if let Some(reached) = attempt().await {
            return (reached, started.elapsed());
        }
        assert!(
            started.elapsed() < within,
            "{what}: not reached within {within:?}"
        );
        smol::Timer::after(Duration::from_millis(5)).await;
    }
}

#[test]
fn the_in_process_store_needs_no_runtime() {
    futures_executor::block_on(async {
        let limiter = Limiter::memory();
        assert_eq!(hello(&limiter).await.expect("admitted"), "hi");
        assert!(hello(&limiter).await.is_ok());
        let denied = hello(&limiter).await.unwrap_err();
        // The wall clock ran between the checks: a little under the period.
        let wait = denied.retry_after().expect("a retry-after");
        assert!(
            wait <= Duration::from_secs(60) && wait > Duration::from_secs(50),
            "{wait:?}"
        );
        for _ in 0..2 {
            stacked(&limiter, "ann").await.expect("admitted");
        }
        assert!(stacked(&limiter, "ann").await.is_err(), "the daily quota");
        let rate = Rate::new(1, Duration::from_secs(60)).expect("a rate");
        let permit = limiter.check_permit("p", rate, 1).await.expect("a check");
        assert!(permit.decision().allowed);
        permit.refund().await.expect("a refund");
        assert!(
            limiter.check("p", rate).await.expect("a check").allowed,
            "refunded"
        );
        limiter.reset("p").await.expect("a reset");
        assert!(limiter.peek("p", rate).await.expect("a look").allowed);
    });
}

#[test]
fn the_redis_store_and_the_attribute_under_smol() {
    let redis = TestRedis::start_private();
    let prefix = unique_prefix("smol");
    smol::block_on(async {
        let limiter = Limiter::builder()
            .redis_url(redis.url())
            .key_prefix(&prefix)
            .failure_policy(FailurePolicy::Closed)
            .timeout(Duration::from_secs(10))
            .build()
            .expect("a Redis limiter");
        assert!(hello(&limiter).await.is_ok());
        assert!(hello(&limiter).await.is_ok());
        let denied = hello(&limiter).await.unwrap_err();
        let decision = denied.as_denied().expect("a denial").decision();
        assert!(!decision.answered_by_policy(), "{decision:?}");
        assert!(
            decision
                .retry_after
                .is_some_and(|wait| wait <= Duration::from_secs(60))
        );
        assert_eq!(
            recorded(&redis, &format!("{prefix}other_runtimes.hello")),
            2
        );
        // A denial the deny cache answers, then stacked limits, a permit, a look, a reset.
        assert!(hello(&limiter).await.is_err());
        assert_eq!(limiter.deny_cache_answers(), 1);
        for _ in 0..2 {
            stacked(&limiter, "bob").await.expect("admitted");
        }
        assert!(stacked(&limiter, "bob").await.is_err());
        let rate = Rate::new(1, Duration::from_secs(60)).expect("a rate");
        let permit = limiter.check_permit("p", rate, 1).await.expect("a check");
        assert!(permit.decision().allowed);
        assert_eq!(recorded(&redis, &format!("{prefix}p")), 1);
        permit.refund().await.expect("a refund");
        assert_eq!(recorded(&redis, &format!("{prefix}p")), 0);
        let both = vec![Limit::new("a", rate), Limit::new("b", rate)];
        assert!(limiter.check_all(both).await.expect("a check").allowed);
        assert!(!limiter.peek("a", rate).await.expect("a look").allowed);
        limiter.reset("a").await.expect("a reset");
        assert!(limiter.peek("a", rate).await.expect("a look").allowed);
        // Waiting for a slot sleeps on smol's timers.
        let short = Rate::new(1, Duration::from_millis(300)).expect("a rate");
        assert!(limiter.check("w", short).await.expect("a check").allowed);
        let started = Instant::now();
        let waited = limiter
            .until_ready("w", short, Duration::from_secs(30))
            .await
            .expect("a check");
        println!("waited {:?} for a slot under smol", started.elapsed());
        assert!(waited.allowed && started.elapsed() >= Duration::from_millis(200));
        assert_eq!(limiter.policy_answers(), 0);
    });
}

#[test]
fn a_fault_under_smol_is_bounded_by_the_timeout_and_ends() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("smol-fault");
    let timeout = Duration::from_millis(300);
    smol::block_on(async {
        let limiter = Limiter::builder()
            .redis_url(proxy.url())
            .key_prefix(&prefix)
            .failure_policy(FailurePolicy::Closed)
            .timeout(timeout)
            .build()
            .expect("a Redis limiter");
        let rate = Rate::new(1_000, Duration::from_secs(60)).expect("a rate");
        wait_for("a first answer from Redis", STATE_DEADLINE, || async {
            limiter.check("warm", rate).await.ok()
        })
        .await;
        // Redis stalls: the first check ends at the timeout (smol's timer), the next one at
        // once (the breaker is open); nothing reaches a caller but `Unavailable`.
        proxy.set(Fault::Stall);
        let started = Instant::now();
        let stalled = limiter.check("k", rate).await;
        let took = started.elapsed();
        println!("a stalled Redis answered by the policy in {took:?} (timeout {timeout:?})");
        assert!(
            matches!(
                stalled,
                Err(RateLimitError::Unavailable(StoreError::Timeout(_)))
            ),
            "{stalled:?}"
        );
        assert!(
            took >= timeout && took < timeout + Duration::from_secs(5),
            "{took:?}"
        );
        let open = limiter.check("k", rate).await;
        assert!(
            matches!(
                open,
                Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_)))
            ),
            "{open:?}"
        );
        assert!(limiter.is_degraded());
        // Back: a probe (one every 100 ms at most, riding on checks) finds Redis again.
        proxy.set(Fault::Pass);
        let (_, back) = wait_for("Redis answers again", STATE_DEADLINE, || async {
            limiter.check("k", rate).await.ok()
        })
        .await;
        println!("back on Redis {back:?} after the stall ended");
        assert!(!limiter.is_degraded());

        // A caller that stops waiting hands its call to smol's executor, which still makes it.
        proxy.set(Fault::Delay(Duration::from_millis(100)));
        let check = limiter.check("handed-off", rate);
        let gave_up = smol::future::or(async { Some(check.await) }, async {
            smol::Timer::after(Duration::from_millis(20)).await;
            None
        })
        .await;
        assert!(gave_up.is_none(), "the caller stopped waiting first");
        let key = format!("{prefix}handed-off");
        wait_for("the handed-off check recorded", STATE_DEADLINE, || async {
            (recorded(&redis, &key) == 1).then_some(())
        })
        .await;
        proxy.set(Fault::Pass);
    });
}
