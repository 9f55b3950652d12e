//! The sliding window counter (`Algorithm::SlidingWindowCounter`) on both stores, with
//! explicit timestamps: the semantics it shares with the log (run for both algorithms), then
//! its own: the `2T − 1` bound reached exactly, the fixed windows, refunds by window, a change
//! of period or algorithm, extreme rates in exact integers, its Redis state, and the two stores
//! answering alike to the microsecond.

use std::time::Duration;

use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{Algorithm, Limit, Limiter, Rate, RateLimitError};
use tests::accuracy::Rng;
use tests::{TestRedis, at_micros, unique_prefix};

/// A base time (2023-11-14T22:13:20Z), in µs: a multiple of 1 ms, 1 s, 4 s and 10 s, so that
/// the cases' windows start there (20 s into its minute, 800 s into its hour).
const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

use tests::either::{EitherStore as Store, redis_limiter};

fn log(threshold: u64, period: Duration) -> Rate {
    Rate::new(threshold, period).expect("valid rate")
}

fn counter(threshold: u64, period: Duration) -> Rate {
    log(threshold, period).with_algorithm(Algorithm::SlidingWindowCounter)
}

/// Defines each shared case for both algorithms on both stores, and each counter case on both
/// stores.
macro_rules! cases {
    (
        shared { $(async fn $shared:ident($s:ident: &Store, $algorithm:ident: Algorithm) $sbody:block)* }
        counter { $(async fn $case:ident($c:ident: &Store) $cbody:block)* }
    ) => {
        $(async fn $shared($s: &Store, $algorithm: Algorithm) $sbody)*
        $(async fn $case($c: &Store) $cbody)*

        mod memory {
            $(#[tokio::test]
            async fn $shared() {
                let store = super::Store::memory();
                super::$shared(&store, super::Algorithm::SlidingWindowLog).await;
                let store = super::Store::memory();
                super::$shared(&store, super::Algorithm::SlidingWindowCounter).await;
            })*
            $(#[tokio::test]
            async fn $case() {
                super::$case(&super::Store::memory()).await;
            })*
        }

        mod redis {
            $(#[tokio::test]
            async fn $shared() {
                for algorithm in [
                    super::Algorithm::SlidingWindowLog,
                    super::Algorithm::SlidingWindowCounter,
                ] {
                    let store = super::Store::redis(stringify!($shared)).await;
                    super::$shared(&store, algorithm).await;
                    store.clean_up().await;
                }
            })*
            $(#[tokio::test]
            async fn $case() {
                let store = super::Store::redis(stringify!($case)).await;
                super::$case(&store).await;
                store.clean_up().await;
            })*
        }
    };
}

cases! {
    shared {
        async fn same_microsecond_burst_admits_exactly_threshold(store: &Store, algorithm: Algorithm) {
            let limit = log(5, Duration::from_secs(10)).with_algorithm(algorithm);
            let mut admitted = 0;
            for _ in 0..20 {
                admitted += u32::from(store.at("burst", limit, T0 + 3 * SECOND).await.allowed);
            }
            assert_eq!(admitted, 5, "{algorithm}");
        }

        async fn denied_calls_change_nothing_and_retry_after_is_exact(store: &Store, algorithm: Algorithm) {
            let limit = log(3, Duration::from_secs(10)).with_algorithm(algorithm);
            for second in [1, 2, 4] {
                assert!(store.at("retry", limit, T0 + second * SECOND).await.allowed);
            }
            let now = T0 + 6 * SECOND + 250;
            let before = store.peek("retry", limit, now).await;
            let mut retry_after = None;
            for _ in 0..50 {
                let denied = store.at("retry", limit, now).await;
                assert!(!denied.allowed, "{algorithm}: {denied:?}");
                retry_after = denied.retry_after;
            }
            assert_eq!(store.peek("retry", limit, now).await, before, "{algorithm}");
            // The call fits exactly at retry-after, and not a microsecond before.
            let wait = u64::try_from(retry_after.expect("a denial's").as_micros()).unwrap();
            assert!(!store.at("retry", limit, now + wait - 1).await.allowed, "{algorithm}");
            assert!(store.at("retry", limit, now + wait).await.allowed, "{algorithm}");
        }

        async fn costs_count_as_that_many(store: &Store, algorithm: Algorithm) {
            let limit = log(10, Duration::from_secs(60)).with_algorithm(algorithm);
            let first = store.costly("cost", limit, 4, T0 + SECOND).await;
            assert_eq!((first.allowed, first.remaining), (true, 6), "{algorithm}");
            let too_much = store.costly("cost", limit, 7, T0 + 2 * SECOND).await;
            assert_eq!((too_much.allowed, too_much.remaining), (false, 6), "{algorithm}");
            let free = store.costly("cost", limit, 0, T0 + 2 * SECOND).await;
            assert_eq!((free.allowed, free.remaining), (true, 6), "{algorithm}");
            let rest = store.costly("cost", limit, 6, T0 + 3 * SECOND).await;
            assert_eq!((rest.allowed, rest.remaining), (true, 0), "{algorithm}");
            assert!(!store.at("cost", limit, T0 + 4 * SECOND).await.allowed);
            let error = store
                .limiter
                .check_n("cost", limit, 11)
                .await
                .unwrap_err();
            assert!(
                matches!(error, RateLimitError::CostTooHigh { cost: 11, max: 10 }),
                "{algorithm}: {error:?}"
            );
        }

        async fn keys_are_counted_apart(store: &Store, algorithm: Algorithm) {
            let limit = log(1, Duration::from_secs(60)).with_algorithm(algorithm);
            assert!(store.at("alice", limit, T0).await.allowed);
            assert!(store.at("bob", limit, T0).await.allowed);
            assert!(!store.at("alice", limit, T0 + 1).await.allowed);
        }

        async fn hostile_keys_are_just_keys(store: &Store, algorithm: Algorithm) {
            let limit = log(1, Duration::from_secs(60)).with_algorithm(algorithm);
            let long = "x".repeat(10_000);
            let keys = ["", " ", "a b\r\n*3", "{tag}", "{", "ключ:🔑", "\0nul", "*", "k#sw", &long];
            for key in keys {
                assert!(store.at(key, limit, T0).await.allowed, "{algorithm} {key:?}");
            }
            for key in keys {
                assert!(!store.at(key, limit, T0 + 1).await.allowed, "{algorithm} {key:?}");
            }
            // A key that names a counter's hash in Redis (`k\#swc` is the counter of the hand
            // key `k\`) is turned away there; in process the two are apart, and it is a key
            // like any other.
            for key in ["k#swc", "k\\#swc", "k\\\\#swc"] {
                let named = store.limiter.check_at(key, limit, tests::at_micros(T0)).await;
                if store.is_redis() {
                    assert!(matches!(named, Err(RateLimitError::InvalidInput(_))), "{named:?}");
                } else {
                    assert!(named.unwrap().allowed, "{algorithm} {key:?}");
                }
            }
        }

        async fn extreme_rates_work(store: &Store, algorithm: Algorithm) {
            let huge = log(Rate::MAX_THRESHOLD, Rate::MAX_PERIOD).with_algorithm(algorithm);
            let first = store.at("huge", huge, T0).await;
            assert_eq!(first.remaining, Rate::MAX_THRESHOLD - 1, "{algorithm}");
            let costly = store.costly("huge", huge, 10_000, T0 + 1).await;
            assert_eq!(costly.remaining, Rate::MAX_THRESHOLD - 10_001, "{algorithm}");
            let tiny = log(1, Duration::from_millis(1)).with_algorithm(algorithm);
            assert!(store.at("tiny", tiny, T0).await.allowed);
            let denied = store.at("tiny", tiny, T0 + 999).await;
            assert!(!denied.allowed, "{algorithm}");
            let wait = u64::try_from(denied.retry_after.unwrap().as_micros()).unwrap();
            assert!(!store.at("tiny", tiny, T0 + 999 + wait - 1).await.allowed);
            assert!(store.at("tiny", tiny, T0 + 999 + wait).await.allowed, "{algorithm}");
        }

        async fn reset_forgets_the_key(store: &Store, algorithm: Algorithm) {
            let limit = log(1, Duration::from_secs(60)).with_algorithm(algorithm);
            let now = tests::at_micros(T0);
            assert!(store.limiter.check_at("gone", limit, now).await.unwrap().allowed);
            assert!(!store.limiter.check_at("gone", limit, now).await.unwrap().allowed);
            store.limiter.reset("gone").await.unwrap();
            assert!(store.limiter.check_at("gone", limit, now).await.unwrap().allowed, "{algorithm}");
        }
    }

    counter {
        async fn a_rolling_window_reaches_exactly_twice_the_threshold_less_one(store: &Store) {
            let period = 10 * SECOND;
            let limit = counter(10, Duration::from_micros(period));
            // The threshold in the last microsecond of window 0...
            for i in 0..10 {
                assert!(store.at("edge", limit, T0 + period - 1).await.allowed, "{i}");
            }
            assert!(!store.at("edge", limit, T0 + period - 1).await.allowed);
            // ...then, at e = P − 2 into window 1, ⌊T · e / P⌋ = 9 more fit.
            let late = T0 + 2 * period - 2;
            let mut admitted = 0;
            while store.at("edge", limit, late).await.allowed {
                admitted += 1;
                assert!(admitted <= 10, "more than a window's threshold");
            }
            assert_eq!(admitted, 9);
            // All 19 are in the rolling window (late − P, late]: 2T − 1.
        }

        async fn the_previous_window_weighs_by_what_the_rolling_window_covers(store: &Store) {
            // 8 admitted in window 0; at 25 % into window 1 they weigh 6: 4 fit, not 5.
            let period = 4 * SECOND;
            let limit = counter(10, Duration::from_micros(period));
            assert!(store.costly("weigh", limit, 8, T0 + SECOND).await.allowed);
            let quarter = T0 + period + SECOND;
            let seen = store.peek("weigh", limit, quarter).await;
            assert_eq!((seen.allowed, seen.remaining), (true, 4));
            let denied = store.costly("weigh", limit, 5, quarter).await;
            assert!(!denied.allowed);
            // 5 fit once 8 · (1 − e/P) ≤ 5: e ≥ 1.5 s.
            assert_eq!(denied.retry_after, Some(Duration::from_millis(500)));
            // Until the previous window's count has gone: the end of this window; with an
            // admission in this one, the end of the next.
            assert_eq!(denied.reset_after, Duration::from_secs(3));
            let admitted = store.costly("weigh", limit, 4, quarter).await;
            assert_eq!((admitted.allowed, admitted.remaining), (true, 0));
            assert_eq!(admitted.reset_after, Duration::from_secs(7));
        }

        async fn each_period_and_algorithm_counts_apart(store: &Store) {
            let minute = counter(2, Duration::from_secs(60));
            assert!(store.at("k", minute, T0).await.allowed);
            assert!(store.at("k", minute, T0).await.allowed);
            assert!(!store.at("k", minute, T0).await.allowed);
            // Another period: its own count (the burst a change of period allows).
            let hour = counter(2, Duration::from_secs(3_600));
            assert!(store.at("k", hour, T0 + 1).await.allowed);
            // The log of the same key is another state altogether.
            let log_rate = log(1, Duration::from_secs(60));
            assert!(store.at("k", log_rate, T0 + 2).await.allowed);
            assert!(!store.at("k", log_rate, T0 + 3).await.allowed);
            // Back to the minute: its counts are still there.
            assert!(!store.at("k", minute, T0 + 4).await.allowed);
            // Two periods alternating on one key do not undo each other.
            let (per_minute, per_hour) = (counter(1, Duration::from_secs(60)), counter(1, Duration::from_secs(3_600)));
            let mut admitted = 0;
            for i in 0..20 {
                let rate = if i % 2 == 0 { per_minute } else { per_hour };
                admitted += u32::from(store.at("alt", rate, T0 + i).await.allowed);
            }
            assert_eq!(admitted, 2);
            // A reset forgets every period's counter.
            store.limiter.reset("alt").await.unwrap();
            assert!(store.at("alt", per_minute, T0 + 30).await.allowed);
            assert!(store.at("alt", per_hour, T0 + 31).await.allowed);
        }

        async fn refunds_take_from_the_window_the_call_was_counted_in(store: &Store) {
            let period = Duration::from_secs(10);
            let limit = counter(3, period);
            let clock = ManualClock::new(at_micros(T0 + SECOND));
            let limiter = store.with_clock(clock.clone()).await;
            let mut permits = Vec::new();
            for _ in 0..3 {
                permits.push(limiter.check_permit("r", limit, 1).await.unwrap());
            }
            assert!(!limiter.check("r", limit).await.unwrap().allowed);
            // Refunded in its own window: one fits again.
            permits.pop().unwrap().refund().await.unwrap();
            assert_eq!(limiter.peek("r", limit).await.unwrap().remaining, 1);
            // In the next window the two left weigh 2 · (1 − e/P): at the window's start
            // nothing fits; refunding one of them from the previous window frees one unit.
            clock.set(at_micros(T0 + 10 * SECOND));
            assert_eq!(limiter.peek("r", limit).await.unwrap().remaining, 1);
            permits.pop().unwrap().refund().await.unwrap();
            assert_eq!(limiter.peek("r", limit).await.unwrap().remaining, 2);
            // Two windows on, the call no longer counts: a refund takes nothing.
            let later = limiter.check_permit("r", limit, 1).await.unwrap();
            clock.set(at_micros(T0 + 30 * SECOND));
            assert!(limiter.check("r", limit).await.unwrap().allowed);
            let before = limiter.peek("r", limit).await.unwrap();
            later.refund().await.unwrap();
            permits.pop().unwrap().refund().await.unwrap();
            assert_eq!(limiter.peek("r", limit).await.unwrap(), before);
        }

        async fn a_refund_after_a_reset_takes_nothing(store: &Store) {
            let limit = counter(3, Duration::from_secs(10));
            let clock = ManualClock::new(at_micros(T0 + SECOND));
            let limiter = store.with_clock(clock.clone()).await;
            let mut permits = Vec::new();
            for _ in 0..3 {
                permits.push(limiter.check_permit("rr", limit, 1).await.unwrap());
            }
            limiter.reset("rr").await.unwrap();
            clock.advance(Duration::from_millis(1));
            for _ in 0..3 {
                assert!(limiter.check("rr", limit).await.unwrap().allowed);
            }
            // The permits' calls were in the counter the reset forgot: nothing to take from
            // the new one, which stays full.
            for permit in permits {
                permit.refund().await.unwrap();
            }
            assert!(!limiter.check("rr", limit).await.unwrap().allowed);
        }

        async fn empty_counts_before_the_window_reset_at_once(store: &Store) {
            let limit = counter(3, Duration::from_secs(10));
            let clock = ManualClock::new(at_micros(T0 + 15 * SECOND));
            let limiter = store.with_clock(clock.clone()).await;
            let permit = limiter.check_permit("z", limit, 1).await.unwrap();
            permit.refund().await.unwrap();
            // Both counts 0, seen from a time before the key's window: nothing to wait for.
            let seen = store.peek("z", limit, T0 + 5 * SECOND).await;
            assert_eq!(seen.reset_after, Duration::ZERO);
            assert_eq!(seen.remaining, 3);
        }

        async fn a_time_before_the_window_counts_everything(store: &Store) {
            let limit = counter(3, Duration::from_secs(10));
            assert!(store.at("back", limit, T0 + 15 * SECOND).await.allowed);
            // Window 0 is before the key's window 1: both counts at full weight, and the
            // admission recorded in window 0.
            assert!(store.at("back", limit, T0 + 5 * SECOND).await.allowed);
            let seen = store.peek("back", limit, T0 + 15 * SECOND).await;
            // prev 1 at half weight, cur 1: 1.5 → one more unit fits.
            assert_eq!(seen.remaining, 1);
        }

        async fn extreme_rates_stay_exact(store: &Store) {
            // T · P ≈ 1.4e25: in Lua, far past a double's 2^53.
            let limit = counter(Rate::MAX_THRESHOLD, Rate::MAX_PERIOD);
            let period = u64::try_from(Rate::MAX_PERIOD.as_micros()).unwrap();
            let start = T0 - T0 % period;
            let t = u32::try_from(Rate::MAX_THRESHOLD).unwrap();
            assert!(store.costly("max", limit, t, start + period - 1).await.allowed);
            assert!(!store.at("max", limit, start + period - 1).await.allowed);
            // A unit fits once T · e ≥ P: at e = ⌈P / T⌉.
            let denied = store.at("max", limit, start + period).await;
            let first = period.div_ceil(Rate::MAX_THRESHOLD);
            assert_eq!(denied.retry_after, Some(Duration::from_micros(first)));
            assert!(!store.at("max", limit, start + period + first - 1).await.allowed);
            let admitted = store.at("max", limit, start + period + first).await;
            assert_eq!((admitted.allowed, admitted.remaining), (true, 0));
            // Half the threshold's cost fits once half the window has gone.
            let half = store.costly("max", limit, t / 2, start + period + first).await;
            let wait = u64::try_from(half.retry_after.unwrap().as_micros()).unwrap();
            let at = start + period + first + wait;
            assert!(!store.costly("max", limit, t / 2, at - 1).await.allowed);
            assert!(store.costly("max", limit, t / 2, at).await.allowed);
        }

        async fn mixed_limits_are_all_or_nothing(store: &Store) {
            let burst = log(2, Duration::from_secs(1));
            let hourly = counter(3, Duration::from_secs(3_600));
            let check = |t: u64| {
                let limits = [Limit::new("m:burst", burst), Limit::new("m:hour", hourly)];
                store.limiter.check_all_at(limits, at_micros(t))
            };
            assert!(check(T0).await.unwrap().allowed);
            assert!(check(T0 + 1).await.unwrap().allowed);
            // The log denies: the counter records nothing.
            assert!(!check(T0 + 2).await.unwrap().allowed);
            assert_eq!(store.peek("m:hour", hourly, T0 + 3).await.remaining, 1);
            assert!(check(T0 + 2 * SECOND).await.unwrap().allowed);
            // The counter denies: the log records nothing.
            let denied = check(T0 + 4 * SECOND).await.unwrap();
            assert!(!denied.allowed);
            assert_eq!(store.peek("m:burst", burst, T0 + 4 * SECOND).await.remaining, 2);
        }
    }
}

/// The Redis state: one hash under the key and a suffix of its own, small and expiring.
#[tokio::test]
async fn redis_keeps_one_small_expiring_hash_per_key() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("counter-state");
    let limiter = redis_limiter(&redis, &prefix, None).await;
    let limit = counter(100_000, Duration::from_secs(60));
    for _ in 0..100 {
        assert!(limiter.check("api:1", limit).await.unwrap().allowed);
    }
    let mut connection = redis.connection().await;
    let key = format!("{prefix}api:1#swc");
    let kind: String = ::redis::cmd("TYPE")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(kind, "hash");
    // One field per period: '<window> <prev> <cur> <born> <latest>'.
    let fields: std::collections::HashMap<String, String> = ::redis::cmd("HGETALL")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    let value = &fields[&(60 * SECOND).to_string()];
    let numbers: Vec<u64> = value.split(' ').map(|n| n.parse().unwrap()).collect();
    assert_eq!(numbers.len(), 5, "{value}");
    assert_eq!(numbers[1] + numbers[2], 100, "{value}");
    assert_eq!(numbers[0], numbers[3] / (60 * SECOND), "{value}");
    assert!(
        numbers[4] >= numbers[3],
        "the latest write, after the first: {value}"
    );
    let ttl: i64 = ::redis::cmd("PTTL")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!((1..=120_001).contains(&ttl), "{ttl}");
    let bytes: u64 = ::redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&key)
        .query_async(&mut connection)
        .await
        .unwrap();
    println!("MEMORY USAGE of a counter's key: {bytes} bytes");
    assert!(bytes <= 200, "{bytes} bytes");
    // No sorted set beside it.
    let log_exists: bool = ::redis::cmd("EXISTS")
        .arg(format!("{prefix}api:1"))
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(!log_exists);
    redis.clean_up(&prefix).await;
}

/// Random sequences of costs and times, out of order, at small and extreme rates: the Lua
/// arithmetic in halves answers as the in-process `u128`, to the microsecond. Periods of at
/// least a second: a counter idle for its two periods may be swept in process by the wall
/// clock while Redis keeps its hash for at least 1 s, and a later check at an earlier time
/// would then see the difference.
#[tokio::test]
async fn memory_and_redis_answer_alike() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("counter-alike");
    let remote = redis_limiter(&redis, &prefix, None).await;
    let max_period = u64::try_from(Rate::MAX_PERIOD.as_micros()).unwrap();
    for seed in 1..=30u64 {
        let local = Limiter::memory();
        let mut rng = Rng::new(seed);
        for step in 0..150 {
            let key = format!("s{seed}:{}", rng.below(3));
            let (threshold, period) = match rng.below(4) {
                0 => (Rate::MAX_THRESHOLD, max_period),
                1 => (
                    Rate::MAX_THRESHOLD - rng.below(1_000),
                    [SECOND, 86_400 * SECOND][rng.below(2) as usize],
                ),
                _ => ([1, 2, 3, 7][rng.below(4) as usize], 3 * SECOND),
            };
            let limit = counter(threshold, Duration::from_micros(period));
            let cost = match rng.below(4) {
                0 => 0,
                1 => u32::try_from(threshold / (1 + rng.below(3))).unwrap(),
                _ => 1,
            };
            let t = T0 + rng.below(40) * SECOND / 4 + [0, 1, 7, 999][rng.below(4) as usize];
            let context = format!("seed {seed} step {step} t {} {limit:?} cost {cost}", t - T0);
            let limits = || [Limit::new(key.as_str(), limit).with_cost(cost)];
            let m = *local.check_all_at(limits(), at_micros(t)).await.unwrap();
            let r = *remote.check_all_at(limits(), at_micros(t)).await.unwrap();
            assert_eq!(m, r, "{context}");
            let m = local.peek_at(&key, limit, at_micros(t)).await.unwrap();
            let r = remote.peek_at(&key, limit, at_micros(t)).await.unwrap();
            assert_eq!(m, r, "look: {context}");
        }
    }
    assert_eq!(remote.policy_answers(), 0);
    redis.clean_up(&prefix).await;
}

/// A counter through the failure policy: `Local` answers from the in-process counter.
#[tokio::test]
async fn a_dead_store_falls_back_to_the_in_process_counter() {
    let limiter = Limiter::builder()
        .redis_url(format!("redis://127.0.0.1:{}/", tests::free_port()))
        .timeout(Duration::from_millis(500))
        .build()
        .expect("built lazily");
    let limit = counter(2, Duration::from_secs(60));
    assert!(limiter.check("dead", limit).await.unwrap().allowed);
    assert!(limiter.check("dead", limit).await.unwrap().allowed);
    assert!(!limiter.check("dead", limit).await.unwrap().allowed);
    assert_eq!(limiter.policy_answers(), 3);
}

/// The HTTP fields of a counter's answer: the window and what the estimate leaves.
#[tokio::test]
async fn http_fields_come_from_the_estimate() {
    let limiter = Limiter::memory();
    let limit = counter(10, Duration::from_secs(60));
    let minute = T0 - T0 % (60 * SECOND);
    let decision = *limiter
        .check_all_at([Limit::new("h", limit).with_cost(7)], at_micros(minute))
        .await
        .unwrap();
    let fields = decision.headers(limit);
    assert_eq!(fields.quota(), 10);
    assert_eq!(fields.window(), Some(60));
    assert_eq!(fields.remaining(), 3);
    // The estimate empties at the end of the next window.
    assert_eq!(fields.reset(), 120);
}

/// The attribute with `algorithm = "sliding_window_counter"`: counted by outcome (refunds go
/// to the window the call was counted in), and forgotten by a reset of its scope, on both
/// stores.
mod attribute {
    use std::sync::LazyLock;

    use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

    use super::TestRedis;

    #[derive(Debug)]
    enum Failure {
        Limited(RateLimitError),
        WrongPassword,
    }

    impl From<RateLimitError> for Failure {
        fn from(error: RateLimitError) -> Failure {
            Failure::Limited(error)
        }
    }

    static MEMORY: LazyLock<Limiter> = LazyLock::new(Limiter::memory);

    #[rate_limit(period = "1h", threshold = 3, key = user, algorithm = "sliding_window_counter",
                 count = "errors", name = "counter-login", limiter = limiter)]
    async fn login(limiter: &Limiter, user: &str, password_ok: bool) -> Result<(), Failure> {
        if password_ok {
            Ok(())
        } else {
            Err(Failure::WrongPassword)
        }
    }

    async fn failures_count_and_a_reset_forgets_them(limiter: &Limiter) {
        for _ in 0..5 {
            assert!(login(limiter, "alice", true).await.is_ok());
        }
        for _ in 0..3 {
            assert!(matches!(
                login(limiter, "alice", false).await,
                Err(Failure::WrongPassword)
            ));
        }
        let denied = login(limiter, "alice", true).await.unwrap_err();
        assert!(
            matches!(denied, Failure::Limited(ref e) if e.is_denied()),
            "{denied:?}"
        );
        assert!(login(limiter, "bob", false).await.is_err());
        let forgotten = limiter
            .reset_scope("counter-login", Some("alice"))
            .await
            .unwrap();
        assert_eq!(forgotten, 1);
        assert!(login(limiter, "alice", true).await.is_ok());
    }

    #[tokio::test]
    async fn in_process() {
        failures_count_and_a_reset_forgets_them(&MEMORY).await;
    }

    #[tokio::test]
    async fn through_redis() {
        let redis = TestRedis::start();
        let prefix = tests::unique_prefix("counter-attribute");
        let limiter = super::redis_limiter(&redis, &prefix, None).await;
        failures_count_and_a_reset_forgets_them(&limiter).await;
        redis.clean_up(&prefix).await;
    }
}
