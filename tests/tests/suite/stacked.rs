//! The attribute's composite checks: stacked `#[rate_limit]`s, `cost`, `rate = expr`,
//! `exempt`, `decision` and `label`, on every store (in process, one real `redis-server`, a
//! real 3-master cluster), with the key layout the README documents.
//!
//! Timing: every window is far longer than a test runs (an hour, a day), so nothing frees
//! while a test runs and every count is exact; racing callers assert counts only.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ratelimit_runtime::{Limiter, Rate, RateLimitError, rate_limit};
use redis::AsyncCommands as _;
use tests::cluster::TestCluster;
use tests::{TestRedis, connected, unique_prefix};

const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);

fn rate(threshold: u64, period: Duration) -> Rate {
    Rate::new(threshold, period).expect("valid rate")
}

/// How many admissions `key`'s log of `rate` holds now, read with a check of cost 0 (which
/// records nothing).
async fn count(limiter: &Limiter, key: &str, rate: Rate) -> u64 {
    let decision = limiter.check_n(key, rate, 0).await.expect("a peek");
    rate.threshold() - decision.remaining
}

// A burst limit and a daily quota on one key: the burst decides first.
#[rate_limit(period = 3600, threshold = 2, key = user, limiter = limiter)]
#[rate_limit(period = "1d", threshold = 3, key = user, limiter = limiter)]
async fn burst_then_daily(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

// The same, the daily quota the smaller: it decides first.
#[rate_limit(period = 3600, threshold = 5, key = user, limiter = limiter)]
#[rate_limit(period = "1d", threshold = 2, key = user, limiter = limiter)]
async fn daily_first(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// On any store: a call denied by one stacked limit is recorded by none, and the logs are
/// laid out as `#<scope>:{<key>}:<window>`, a limit's default scope its function's path and
/// its position.
async fn stacked_limits_are_one_decision(limiter: &Limiter) {
    let user = "u1";
    assert!(burst_then_daily(limiter, user).await.is_ok());
    assert!(burst_then_daily(limiter, user).await.is_ok());
    let err = burst_then_daily(limiter, user).await.unwrap_err();
    let denied = err.as_denied().expect("a denial");
    assert_eq!(denied.scope(), "suite::stacked::burst_then_daily#1");
    assert_eq!(denied.key(), Some(user));
    let decisions = denied.decisions().expect("every limit's decision");
    assert_eq!(decisions.len(), 2);
    assert_eq!(decisions.deciding().label(), "1h");
    let hour = rate(2, HOUR);
    let day = rate(3, DAY);
    assert_eq!(
        count(limiter, "#suite::stacked::burst_then_daily#1/{u1}@1h", hour).await,
        2
    );
    assert_eq!(
        count(limiter, "#suite::stacked::burst_then_daily#2/{u1}@1d", day).await,
        2,
        "the call the burst limit denied is not in the daily log"
    );

    assert!(daily_first(limiter, user).await.is_ok());
    assert!(daily_first(limiter, user).await.is_ok());
    let err = daily_first(limiter, user).await.unwrap_err();
    let deciding = err
        .as_denied()
        .and_then(|d| d.decisions())
        .map(|d| d.deciding().label().to_owned());
    assert_eq!(deciding.as_deref(), Some("1d"));
    assert_eq!(
        count(
            limiter,
            "#suite::stacked::daily_first#1/{u1}@1h",
            rate(5, HOUR)
        )
        .await,
        2,
        "the call the daily quota denied is not in the burst log"
    );
    // Another key has logs of its own.
    assert!(daily_first(limiter, "u2").await.is_ok());
}

#[tokio::test]
async fn stacked_limits_in_process() {
    stacked_limits_are_one_decision(&Limiter::memory()).await;
}

#[tokio::test]
async fn stacked_limits_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("stacked");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    stacked_limits_are_one_decision(&limiter).await;
    let mut connection = redis.connection().await;
    let size: u64 = connection
        .zcard(format!(
            "{prefix}#suite::stacked::burst_then_daily#2/{{u1}}@1d"
        ))
        .await
        .expect("ZCARD");
    assert_eq!(size, 2);
    redis.clean_up(&prefix).await;
}

// Keyless: the logs are `#{<function>}#<position>:<window>`, one slot per function.
#[rate_limit(period = 3600, threshold = 50, limiter = limiter)]
#[rate_limit(period = "1d", threshold = 70, limiter = limiter)]
async fn shared(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

/// 400 callers through 4 limiters of one store: exactly 50 admitted, and each log holds
/// exactly the admitted calls.
async fn race(limiters: Vec<Limiter>) -> usize {
    let limiters = Arc::new(limiters);
    let admitted = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..400 {
        let limiters = Arc::clone(&limiters);
        let admitted = Arc::clone(&admitted);
        tasks.push(tokio::spawn(async move {
            match shared(&limiters[i % 4]).await {
                Ok(()) => {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
                Err(RateLimitError::Denied(_)) => {}
                Err(other) => panic!("{other}"),
            }
        }));
    }
    for task in tasks {
        task.await.expect("a caller");
    }
    let admitted = admitted.load(Ordering::Relaxed);
    assert_eq!(admitted, 50);
    for (key, threshold, period) in [
        ("#{suite::stacked::shared}#1@1h", 50, HOUR),
        ("#{suite::stacked::shared}#2@1d", 70, DAY),
    ] {
        assert_eq!(
            count(&limiters[0], key, rate(threshold, period)).await,
            50,
            "{key}"
        );
    }
    admitted
}

// Two keys: their logs' slots follow their values, so a call may span two masters.
#[rate_limit(period = 3600, threshold = 50, key = first, limiter = limiter)]
#[rate_limit(period = "1d", threshold = 70, key = second, limiter = limiter)]
async fn across(limiter: &Limiter, first: &str, second: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// 400 callers through 4 limiters, each call's limits on two masters (reserve, then refund):
/// at most 50 admitted, and after the last call each log holds exactly the admitted calls.
async fn race_across(limiters: Vec<Limiter>, first: &'static str, second: &'static str) {
    let limiters = Arc::new(limiters);
    let admitted = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..400 {
        let limiters = Arc::clone(&limiters);
        let admitted = Arc::clone(&admitted);
        tasks.push(tokio::spawn(async move {
            match across(&limiters[i % 4], first, second).await {
                Ok(()) => {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
                Err(RateLimitError::Denied(_)) => {}
                Err(other) => panic!("{other}"),
            }
        }));
    }
    for task in tasks {
        task.await.expect("a caller");
    }
    let admitted = admitted.load(Ordering::Relaxed) as u64;
    println!("across two masters: {admitted} of 400 admitted");
    // Racing reservations may deny each other (documented): only the bound is guaranteed.
    assert!(admitted <= 50, "{admitted}");
    let first_log = format!("#suite::stacked::across#1/{{{first}}}@1h");
    let second_log = format!("#suite::stacked::across#2/{{{second}}}@1d");
    assert_eq!(
        count(&limiters[0], &first_log, rate(50, HOUR)).await,
        admitted
    );
    assert_eq!(
        count(&limiters[0], &second_log, rate(70, DAY)).await,
        admitted
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_callers_on_redis_and_in_a_cluster() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("stacked-race");
    let mut limiters = Vec::new();
    for _ in 0..4 {
        limiters.push(tests::closed_redis_limiter(redis.url(), &prefix).await);
    }
    race(limiters).await;
    redis.clean_up(&prefix).await;

    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("stacked-race-cluster");
    let mut limiters = Vec::new();
    for _ in 0..4 {
        let limiter = tests::closed_cluster_limiter(cluster.urls(), &prefix).await;
        connected(&limiter, "stacked-race-canary").await;
        limiters.push(limiter);
    }
    let slot = |key: &str| TestCluster::key_slot(&format!("{prefix}{key}"));
    assert_eq!(
        slot("#{suite::stacked::shared}#1@1h"),
        slot("#{suite::stacked::shared}#2@1d"),
        "a function's keyless limits share a slot"
    );
    assert_eq!(
        slot("#suite::stacked::burst_then_daily#1/{u1}@1h"),
        slot("#suite::stacked::burst_then_daily#2/{u1}@1d"),
        "a call's limits of one key share a slot"
    );
    race(limiters.clone()).await;

    // Two key values whose tags two different masters own.
    let node = |value: &str| cluster.node_for_slot(TestCluster::key_slot(&format!("{{{value}}}")));
    let first = "first";
    let second = [
        "second", "second-1", "second-2", "second-3", "second-4", "second-5",
    ]
    .into_iter()
    .find(|value| node(value) != node(first))
    .expect("a value on another master");
    race_across(limiters, first, second).await;
}

// A cost per call: `items.len()`, a `usize`.
#[rate_limit(period = 3600, threshold = 10, key = user, cost = items.len(), limiter = limiter)]
async fn upload(limiter: &Limiter, user: &str, items: &[u8]) -> Result<usize, RateLimitError> {
    Ok(items.len())
}

#[rate_limit(period = 3600, threshold = 10, cost = n, limiter = limiter)]
async fn huge(limiter: &Limiter, n: usize) -> Result<(), RateLimitError> {
    Ok(())
}

async fn costs(limiter: &Limiter) {
    let threshold = rate(10, HOUR);
    assert_eq!(upload(limiter, "u", &[0; 3]).await.ok(), Some(3));
    assert_eq!(upload(limiter, "u", &[0; 3]).await.ok(), Some(3));
    let err = upload(limiter, "u", &[0; 5]).await.unwrap_err();
    let denied = err.as_denied().expect("a denial");
    assert_eq!(denied.decision().remaining, 4, "a smaller call still fits");
    assert!(denied.decision().retry_after.is_some());
    assert_eq!(
        upload(limiter, "u", &[0; 4]).await.ok(),
        Some(4),
        "to the threshold"
    );
    assert_eq!(
        upload(limiter, "u", &[]).await.ok(),
        Some(0),
        "cost 0 is admitted"
    );
    // One attribute keeps the plain form's key, `<scope>:<key>`.
    assert_eq!(
        count(limiter, "suite::stacked::upload/u", threshold).await,
        10
    );
    assert!(matches!(
        upload(limiter, "v", &[0; 11]).await,
        Err(RateLimitError::CostTooHigh { cost: 11, max: 10 })
    ));
    // A `usize` above `u32::MAX` is not truncated.
    let above = usize::try_from(u64::from(u32::MAX) + 1).expect("a 64-bit target");
    assert!(matches!(
        huge(limiter, above).await,
        Err(RateLimitError::CostTooHigh {
            cost: 4_294_967_296,
            max: 10
        })
    ));
    assert!(huge(limiter, 10).await.is_ok());
}

#[tokio::test]
async fn costs_in_process_and_on_redis() {
    costs(&Limiter::memory()).await;
    let redis = TestRedis::start();
    let prefix = unique_prefix("stacked-cost");
    costs(&tests::closed_redis_limiter(redis.url(), &prefix).await).await;
    redis.clean_up(&prefix).await;
}

// A rate chosen per call: a tier.
#[rate_limit(rate = plan, key = user, limiter = limiter)]
async fn tiered(limiter: &Limiter, user: &str, plan: Rate) -> Result<(), RateLimitError> {
    Ok(())
}

async fn tiers(limiter: &Limiter) {
    let free = rate(2, HOUR);
    let pro = rate(5, HOUR);
    assert!(tiered(limiter, "u", free).await.is_ok());
    assert!(tiered(limiter, "u", free).await.is_ok());
    assert!(tiered(limiter, "u", free).await.is_err());
    // The same period: the same log, under the higher threshold.
    for _ in 0..3 {
        assert!(tiered(limiter, "u", pro).await.is_ok());
    }
    assert!(tiered(limiter, "u", pro).await.is_err());
    assert!(
        tiered(limiter, "u", free).await.is_err(),
        "a lowered threshold denies"
    );
    assert_eq!(count(limiter, "suite::stacked::tiered/u@1h", pro).await, 5);
    // Another period: another log.
    let daily = rate(2, DAY);
    assert!(tiered(limiter, "u", daily).await.is_ok());
    assert!(tiered(limiter, "u", daily).await.is_ok());
    assert!(tiered(limiter, "u", daily).await.is_err());
    assert_eq!(
        count(limiter, "suite::stacked::tiered/u@1d", daily).await,
        2
    );
    assert_eq!(count(limiter, "suite::stacked::tiered/u@1h", pro).await, 5);
}

#[tokio::test]
async fn tiers_in_process_and_on_redis() {
    tiers(&Limiter::memory()).await;
    let redis = TestRedis::start();
    let prefix = unique_prefix("stacked-tiers");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    tiers(&limiter).await;
    let mut connection = redis.connection().await;
    let size: u64 = connection
        .zcard(format!("{prefix}suite::stacked::tiered/u@1d"))
        .await
        .expect("ZCARD");
    assert_eq!(size, 2);
    redis.clean_up(&prefix).await;
}

// Exemptions: the per-IP limit skips internal callers; the per-user one still applies.
#[rate_limit(period = 3600, threshold = 2, key = ip, exempt = internal, limiter = limiter)]
#[rate_limit(period = 3600, threshold = 4, key = user, name = "per-user", limiter = limiter)]
async fn exempted(
    limiter: &Limiter,
    ip: &str,
    user: &str,
    internal: bool,
) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 3600, threshold = 1, exempt = internal, decision = d, limiter = limiter)]
async fn all_exempt(
    limiter: &Limiter,
    internal: bool,
) -> Result<(usize, Vec<String>), RateLimitError> {
    let fields = d
        .headers()
        .iter()
        .map(|(name, _)| name.to_owned())
        .collect();
    Ok((d.len(), fields))
}

#[tokio::test]
async fn exempt_limits_are_skipped_and_others_still_apply() {
    let limiter = Limiter::memory();
    assert!(exempted(&limiter, "ip", "a", false).await.is_ok());
    assert!(exempted(&limiter, "ip", "b", false).await.is_ok());
    assert!(
        exempted(&limiter, "ip", "c", false).await.is_err(),
        "the IP limit"
    );
    assert!(
        exempted(&limiter, "ip", "c", true).await.is_ok(),
        "exempt from it"
    );
    assert_eq!(
        count(
            &limiter,
            "#suite::stacked::exempted#1/{ip}@1h",
            rate(2, HOUR)
        )
        .await,
        2
    );
    for _ in 0..4 {
        assert!(exempted(&limiter, "ip", "d", true).await.is_ok());
    }
    let err = exempted(&limiter, "ip", "d", true).await.unwrap_err();
    assert_eq!(
        err.as_denied().map(ratelimit_runtime::Denied::scope),
        Some("per-user")
    );
    assert_eq!(err.as_denied().and_then(|d| d.key()), Some("d"));

    // Exempt from every limit: no check; the decisions are empty and write no field.
    for _ in 0..3 {
        assert_eq!(all_exempt(&limiter, true).await.ok(), Some((0, Vec::new())));
    }
    let (len, fields) = all_exempt(&limiter, false)
        .await
        .expect("the first counted call");
    assert_eq!(len, 1);
    assert_eq!(fields, ["RateLimit-Policy", "RateLimit"]);
    assert!(all_exempt(&limiter, false).await.is_err());
}

// The body reads its check's decisions.
#[rate_limit(period = 3600, threshold = 3, key = user, label = "burst", limiter = limiter)]
#[rate_limit(period = "1d", threshold = 10, key = user, decision = d, limiter = limiter)]
async fn with_decisions(limiter: &Limiter, user: &str) -> Result<(u64, String), RateLimitError> {
    Ok((d.remaining, d.headers().policy()))
}

#[tokio::test]
async fn the_body_reads_its_decisions() {
    let limiter = Limiter::memory();
    let (remaining, policy) = with_decisions(&limiter, "u").await.expect("admitted");
    assert_eq!(remaining, 2, "the limit with the fewest remaining decides");
    assert_eq!(policy, r#""burst";q=3;w=3600, "1d";q=10;w=86400"#);
}

// A rate expression that panics: the panic is the caller's, and nothing is recorded.
fn pick(panic: bool) -> Rate {
    assert!(!panic, "the rate's own panic");
    rate(2, HOUR)
}

#[rate_limit(period = 3600, threshold = 5, key = user, limiter = limiter)]
#[rate_limit(rate = pick(panic), key = user, limiter = limiter)]
async fn panicky(limiter: &Limiter, user: &str, panic: bool) -> Result<(), RateLimitError> {
    Ok(())
}

#[tokio::test]
async fn a_panicking_rate_leaves_the_limiter_consistent() {
    let limiter = Arc::new(Limiter::memory());
    for _ in 0..3 {
        let limiter = Arc::clone(&limiter);
        let outcome = tokio::spawn(async move { panicky(&limiter, "u", true).await }).await;
        assert!(outcome.expect_err("the rate panics").is_panic());
    }
    assert_eq!(
        count(&limiter, "#suite::stacked::panicky#1/{u}@1h", rate(5, HOUR)).await,
        0
    );
    assert!(panicky(&limiter, "u", false).await.is_ok());
    assert!(panicky(&limiter, "u", false).await.is_ok());
    assert!(panicky(&limiter, "u", false).await.is_err());
    assert_eq!(
        count(&limiter, "#suite::stacked::panicky#1/{u}@1h", rate(5, HOUR)).await,
        2
    );
}

// Two rates chosen at run time on one key: each limit keeps its own log, whatever the
// periods of a call (a key never depends on another limit's rate or exemption).
#[rate_limit(rate = first, key = user, limiter = limiter)]
#[rate_limit(rate = second, key = user, limiter = limiter)]
async fn two_tiers(
    limiter: &Limiter,
    user: &str,
    first: Rate,
    second: Rate,
) -> Result<(), RateLimitError> {
    Ok(())
}

#[tokio::test]
async fn rates_chosen_per_call_keep_logs_of_their_own() {
    let limiter = Limiter::memory();
    let (a, b) = (rate(2, HOUR), rate(3, HOUR));
    assert!(two_tiers(&limiter, "u", a, b).await.is_ok());
    assert!(two_tiers(&limiter, "u", a, b).await.is_ok());
    assert!(two_tiers(&limiter, "u", a, b).await.is_err());
    assert_eq!(
        count(&limiter, "#suite::stacked::two_tiers#1/{u}@1h", a).await,
        2
    );
    assert_eq!(
        count(&limiter, "#suite::stacked::two_tiers#2/{u}@1h", b).await,
        2
    );
    // Another period for the first limit: the second's log of an hour is still its own.
    let minute = rate(2, Duration::from_secs(60));
    assert!(two_tiers(&limiter, "v", minute, a).await.is_ok());
    assert!(two_tiers(&limiter, "v", a, a).await.is_ok());
    assert_eq!(
        count(&limiter, "#suite::stacked::two_tiers#1/{v}@1h", a).await,
        1
    );
    assert_eq!(
        count(&limiter, "#suite::stacked::two_tiers#2/{v}@1h", a).await,
        2
    );
}

// Two keys of one period: a user and an IP. Equal values must not share a log.
#[rate_limit(period = 60, threshold = 2, key = user, limiter = limiter)]
#[rate_limit(period = 60, threshold = 100, key = ip, limiter = limiter)]
async fn per_user_and_ip(limiter: &Limiter, user: &str, ip: &str) -> Result<(), RateLimitError> {
    Ok(())
}

// An exempt limit beside another of the same key and period.
#[rate_limit(period = 60, threshold = 1, key = user, exempt = vip, limiter = limiter)]
#[rate_limit(period = 60, threshold = 5, key = user, limiter = limiter)]
async fn vip_or_not(limiter: &Limiter, user: &str, vip: bool) -> Result<(), RateLimitError> {
    Ok(())
}

// One attribute named as a stacked limit is: a key value shaped like a stacked key.
#[rate_limit(period = 1, threshold = 5, key = user, name = "api", limiter = limiter)]
async fn plain_api(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 1, threshold = 2, key = user, name = "api", limiter = limiter)]
#[rate_limit(period = "1d", threshold = 1000, key = user, name = "api.daily", limiter = limiter)]
async fn stacked_api(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[tokio::test]
async fn a_key_value_cannot_reach_a_stacked_log() {
    let limiter = Limiter::memory();
    for _ in 0..5 {
        assert!(plain_api(&limiter, "{bob}:1s").await.is_ok());
        assert!(plain_api(&limiter, "#api:{bob}:1s").await.is_ok());
        assert!(plain_api(&limiter, "#api/{bob}@1s").await.is_ok());
        assert!(plain_api(&limiter, "bob@1s").await.is_ok());
    }
    assert!(
        stacked_api(&limiter, "bob").await.is_ok(),
        "bob's stacked log is his own"
    );
    let day = rate(1000, DAY);
    assert_eq!(count(&limiter, "#api.daily/{bob}@1d", day).await, 1);
}

#[tokio::test]
async fn limits_of_equal_key_values_or_exempt_ones_never_share_a_log() {
    let minute = rate(2, Duration::from_secs(60));
    let limiter = Limiter::memory();
    // Mallory names herself after alice's IP: alice's per-user log is untouched.
    assert!(per_user_and_ip(&limiter, "alice", "10.0.0.1").await.is_ok());
    assert!(per_user_and_ip(&limiter, "10.0.0.1", "alice").await.is_ok());
    assert!(per_user_and_ip(&limiter, "alice", "10.0.0.1").await.is_ok());
    let alice = "#suite::stacked::per_user_and_ip#1/{alice}@1m";
    assert_eq!(count(&limiter, alice, minute).await, 2);
    // A VIP call, exempt from the first limit, is recorded by the second only.
    assert!(vip_or_not(&limiter, "bob", true).await.is_ok());
    assert!(
        vip_or_not(&limiter, "bob", false).await.is_ok(),
        "the first limit's log was empty"
    );
    assert!(vip_or_not(&limiter, "bob", false).await.is_err());
    let bob = "#suite::stacked::vip_or_not#2/{bob}@1m";
    assert_eq!(
        count(&limiter, bob, rate(5, Duration::from_secs(60))).await,
        2
    );
}

// Under `#[async_trait]`, stacked limits too.
#[async_trait::async_trait]
trait Search {
    async fn search(&self, user: &str) -> Result<(), RateLimitError>;
}

struct Service {
    limiter: Limiter,
}

#[async_trait::async_trait]
impl Search for Service {
    #[rate_limit(period = 3600, threshold = 2, key = user, limiter = &self.limiter)]
    #[rate_limit(period = "1d", threshold = 5, key = user, limiter = &self.limiter)]
    async fn search(&self, user: &str) -> Result<(), RateLimitError> {
        Ok(())
    }
}

#[tokio::test]
async fn stacked_limits_under_async_trait() {
    let service = Service {
        limiter: Limiter::memory(),
    };
    assert!(service.search("u").await.is_ok());
    assert!(service.search("u").await.is_ok());
    assert!(service.search("u").await.is_err());
    let key = "#<suite::stacked::Service as suite::stacked::Search>::search#2/{u}@1d";
    assert_eq!(count(&service.limiter, key, rate(5, DAY)).await, 2);
}
