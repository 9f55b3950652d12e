//! The stores against each other and at their edges: random out-of-order sequences answered
//! alike by the in-process store and Redis, to the microsecond; keys that survive the tables'
//! growth; keys around the in-process store's inline limit (23 bytes); extreme rates; the
//! server clock's scores. Written by a review of the performance work (issue 5), kept as
//! regression tests.

use std::time::Duration;

use ratelimit_runtime::{Decision, Limiter, Rate, RateLimitError};
use tests::{TestRedis, at_micros, unique_prefix};

const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

fn rate(threshold: u64, period: Duration) -> Rate {
    Rate::new(threshold, period).expect("valid rate")
}

async fn at(l: &Limiter, key: &str, rate: Rate, micros: u64) -> Decision {
    l.check_at(key, rate, at_micros(micros))
        .await
        .expect("check")
}

/// Many keys: the tables grow many times; every old key must keep its log.
#[tokio::test]
async fn keys_survive_table_growth() {
    let limiter = Limiter::memory();
    let limit = rate(3, Duration::from_secs(3600));
    let n = 100_000usize;
    let key = |i: usize| match i % 5 {
        0 => format!("k{i}"),
        1 => format!("{i:0>22}"),
        2 => format!("{i:0>23}"),
        3 => format!("{i:0>24}"),
        _ => format!("é{i:0>40}"),
    };
    for i in 0..n {
        let d = at(&limiter, &key(i), limit, T0 + i as u64).await;
        assert!(d.allowed && d.remaining == 2, "first {i}: {d:?}");
    }
    for i in 0..n {
        let d = at(&limiter, &key(i), limit, T0 + SECOND + i as u64).await;
        assert!(d.allowed && d.remaining == 1, "second {i}: {d:?}");
    }
}

/// Keys around SmolStr's inline limit, multi-byte, empty, and prefixes of one another.
#[tokio::test]
async fn odd_keys_are_distinct() {
    let limiter = Limiter::memory();
    let limit = rate(2, Duration::from_secs(60));
    let mut keys: Vec<String> = vec![String::new(), "\0".into(), "\0\0".into()];
    for len in [1usize, 21, 22, 23, 24, 25, 64] {
        keys.push("a".repeat(len));
        keys.push("é".repeat(len / 2) + &"b".repeat(len % 2));
    }
    keys.push("€".repeat(7) + "xx"); // 23 bytes
    keys.push("€".repeat(8)); // 24 bytes
    keys.push("😀".repeat(6)); // 24 bytes
    for (nl, sp) in [
        (0usize, 1usize),
        (0, 100),
        (1, 0),
        (32, 128),
        (33, 0),
        (32, 129),
        (2, 3),
    ] {
        keys.push("\n".repeat(nl) + &" ".repeat(sp));
    }
    keys.sort();
    keys.dedup();
    for (i, key) in keys.iter().enumerate() {
        let d = at(&limiter, key, limit, T0 + i as u64).await;
        assert!(d.allowed && d.remaining == 1, "{key:?}: {d:?}");
    }
    for (i, key) in keys.iter().enumerate() {
        let d = at(&limiter, key, limit, T0 + 100 + i as u64).await;
        assert!(d.allowed && d.remaining == 0, "{key:?}: {d:?}");
        let d = at(&limiter, key, limit, T0 + 200 + i as u64).await;
        assert!(!d.allowed, "{key:?}: {d:?}");
    }
}

/// Extreme rates: the Verdict flag must never leak into retry_after or reset_after.
#[tokio::test]
async fn extreme_rates() {
    let limiter = Limiter::memory();
    let max = rate(u64::from(u32::MAX), Rate::MAX_PERIOD);
    let d = at(&limiter, "x", max, T0).await;
    assert!(d.allowed);
    assert_eq!(d.remaining, u64::from(u32::MAX) - 1);
    assert_eq!(d.reset_after, Rate::MAX_PERIOD);
    let one = rate(1, Rate::MAX_PERIOD);
    let d = at(&limiter, "y", one, T0).await;
    assert!(d.allowed && d.remaining == 0);
    let d = at(&limiter, "y", one, T0 + 5).await;
    assert!(!d.allowed);
    assert_eq!(
        d.retry_after,
        Some(Rate::MAX_PERIOD - Duration::from_micros(5))
    );
    assert_eq!(d.reset_after, Rate::MAX_PERIOD - Duration::from_micros(5));
    // Near the latest time accepted.
    let late = (1u64 << 53) - Rate::MAX_PERIOD.as_micros() as u64;
    let d = at(&limiter, "z", one, late).await;
    assert!(d.allowed);
    let d = at(&limiter, "z", one, late).await;
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Some(Rate::MAX_PERIOD));
    let err = limiter
        .check_at("z", one, at_micros(late + 1))
        .await
        .unwrap_err();
    assert!(matches!(err, RateLimitError::InvalidInput(_)), "{err:?}");
    let err = limiter
        .check_at("z", one, std::time::UNIX_EPOCH - Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, RateLimitError::InvalidInput(_)), "{err:?}");
}

/// Capacity denials: retry and reset after one period, nothing recorded.
#[tokio::test]
async fn capacity_denials() {
    let limiter = Limiter::builder()
        .max_keys(2)
        .build()
        .expect("memory limiter");
    let limit = rate(5, Duration::from_secs(10));
    assert!(at(&limiter, "a", limit, T0).await.allowed);
    assert!(at(&limiter, "b", limit, T0).await.allowed);
    let d = at(&limiter, "c", limit, T0).await;
    assert!(!d.allowed, "{d:?}");
    assert_eq!(d.retry_after, Some(Duration::from_secs(10)));
    assert_eq!(d.reset_after, Duration::from_secs(10));
    assert_eq!(d.remaining, 0);
    assert_eq!(d.limit, 5);
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random out-of-order sequences: the two stores answer alike, to the microsecond.
#[tokio::test]
async fn memory_and_redis_answer_alike() {
    let redis = TestRedis::start_private();
    let prefix = unique_prefix("conformance");
    let remote = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("redis limiter");
    let mut connection = redis.connection().await;
    for seed in 1..=40u64 {
        let local = Limiter::memory();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        for step in 0..200 {
            let key = format!("s{seed}:{}", rng.below(3));
            let threshold = [1u64, 1, 2, 3, 4][rng.below(5) as usize];
            let period = [3 * SECOND, 10 * SECOND][rng.below(2) as usize];
            let limit = rate(threshold, Duration::from_micros(period));
            let t = T0 + rng.below(60) * SECOND / 2 + [0, 1, 7][rng.below(3) as usize];
            let m = at(&local, &key, limit, t).await;
            let r = at(&remote, &key, limit, t).await;
            // Redis expires a key on its own clock (at least a second after its newest
            // admission's window, counted from the check): at these explicit times, a loaded
            // machine's pause between two steps could let it forget a key the in-process store
            // keeps. Expiry has tests of its own; here the keys stay.
            let _: () = redis::cmd("PERSIST")
                .arg(format!("{prefix}{key}"))
                .query_async(&mut connection)
                .await
                .expect("PERSIST");
            assert_eq!(
                m,
                r,
                "seed {seed} step {step} key {key} t {} rate {limit:?}",
                t - T0
            );
        }
    }
}

/// The server's `TIME`: every stored score is its clock in whole µs (the script joins `TIME`'s
/// seconds and zero-padded microseconds as text).
#[tokio::test]
async fn time_scores_are_microseconds() {
    let redis = TestRedis::start_private();
    let prefix = unique_prefix("conformance-time");
    // A timeout no loaded machine reaches: a check answered by the (default, Local) policy
    // would not be in Redis.
    let remote = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("redis limiter");
    let limit = rate(1000, Duration::from_secs(60));
    let micros_now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64
    };
    let before = micros_now();
    for i in 0..400 {
        let d = remote.check(&format!("t{}", i % 2), limit).await.unwrap();
        assert!(d.allowed);
        assert!(d.reset_after <= Duration::from_secs(60), "{d:?}");
    }
    let after = micros_now();
    assert_eq!(remote.policy_answers(), 0);
    let mut con = redis.connection().await;
    for k in ["t0", "t1"] {
        let entries: Vec<(String, String)> = redis::cmd("ZRANGE")
            .arg(format!("{prefix}{k}"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut con)
            .await
            .unwrap();
        assert_eq!(entries.len(), 200);
        // Between the clock before the first check and after the last (the server's clock is
        // this machine's; 5 s allow for a step of it meanwhile), in µs.
        for (_, score) in entries {
            let s: i64 = score.parse().unwrap();
            assert!(
                (before - 5_000_000..=after + 5_000_000).contains(&s),
                "{s} not within {before}..={after}"
            );
        }
    }
}

/// Threads growing the same tables at once: no key lost, no count reset.
#[test]
fn concurrent_growth() {
    let limiter = std::sync::Arc::new(Limiter::memory());
    let limit = rate(2, Duration::from_secs(3600));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let limiter = limiter.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    for round in 0..2u64 {
                        for i in 0..40_000u64 {
                            let key = format!("{t}:{i:0>22}");
                            let d = at(&limiter, &key, limit, T0 + round).await;
                            assert!(d.allowed && d.remaining == 1 - round, "{key} {round} {d:?}");
                        }
                    }
                });
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
