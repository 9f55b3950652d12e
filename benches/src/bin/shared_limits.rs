//! The limits shared through Redis, measured in one run against one server:
//!
//! 1. their cost on the Redis check: the attribute's check of a keyed limit on a limiter that
//!    does not follow them (`plain`) and on one that does, with 10,000 key overrides in Redis
//!    (every checked key's among them, at the code's own rate) and its thread reading the
//!    changes beside the checks (`shared`), in alternating rounds (`BENCH_ROUNDS`, 7) of
//!    `BENCH_SHARED_CHECKS` (5,000) checks one after another (c = 1) over 1,000 keys;
//! 2. what following them costs Redis: the scripts one instance runs per second at rest, and
//!    per change (from `INFO commandstats`, nothing else running);
//! 3. how long a change takes to be in force on another instance: `BENCH_SHARED_CHANGES` (40)
//!    changes of a scope's rate written through one limiter at random moments, each awaited
//!    on another (its own connection and thread), by a hand check in the scope every
//!    millisecond; the median, the 90th percentile and the most.
//!
//! Stdout: one JSON line per round (`"bench":"shared_limits_round"`), then
//! `"bench":"shared_limits"` (the medians, `"ratio"`: shared / plain), `"bench":
//! "shared_limits_follow"` (scripts per second at rest, per change) and `"bench":
//! "shared_limits_propagation"` (ms); stderr: progress. Settings: `BENCH_REDIS_URL` (unset: a
//! private `redis-server`; the scripts' count needs one), `BENCH_ROUNDS`, `BENCH_SHARED_CHECKS`,
//! `BENCH_SHARED_CHANGES`.

use std::time::{Duration, Instant};

use benches::{BenchRedis, alternating, command_stats, median, reset_stats, setting};
use ratelimit_runtime::{
    FailurePolicy, Limiter, Override, Rate, RateLimitError, ScopeLimits, rate_limit,
};

/// Keys checked, each with an override in the shared limits.
const KEYS: usize = 1_000;

/// Overrides in the scope, the checked keys' among them.
const OVERRIDES: usize = 10_000;

#[rate_limit(name = "bench-shared", period = 3600, threshold = 4294967295, key = user, limiter = limiter)]
async fn checked(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn limiter(redis: &BenchRedis, prefix: &str, shared: bool) -> Limiter {
    let builder = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(5));
    if shared {
        builder.shared_limits()
    } else {
        builder
    }
    .build()
    .expect("a Redis limiter")
}

/// The mean time per check of `checks` calls over `keys`, one after another.
async fn run(limiter: &Limiter, keys: &[String], checks: usize) -> Duration {
    let started = Instant::now();
    for i in 0..checks {
        checked(limiter, &keys[i % keys.len()])
            .await
            .expect("admitted");
    }
    started.elapsed() / u32::try_from(checks).expect("checks fit a u32")
}

/// The scripts run (`EVALSHA` and `EVAL`) since the last reset.
fn scripts(admin: &mut redis::Connection) -> u64 {
    command_stats(admin, "evalsha").0 + command_stats(admin, "eval").0
}

/// A moment below `n` µs, from the wall clock's nanoseconds: where in the follower's quarter
/// of a second a change falls, spread over it.
fn spread(n: u64) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .subsec_nanos();
    Duration::from_micros((u64::from(nanos).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % n)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let redis = BenchRedis::start();
    let rounds: usize = setting("BENCH_ROUNDS", 7);
    let checks: usize = setting("BENCH_SHARED_CHECKS", 5_000);
    let changes: usize = setting("BENCH_SHARED_CHANGES", 40);

    // 1. The cost on the check.
    let plain = limiter(&redis, "bench:shared:plain:", false);
    let shared = limiter(&redis, "bench:shared:shared:", true);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user-{i:06}")).collect();
    let rate = Rate::new(u64::from(u32::MAX), Duration::from_secs(3_600)).expect("a rate");
    let mut entry = ScopeLimits::new();
    for i in 0..OVERRIDES {
        entry = entry.key(format!("user-{i:06}"), Override::rate(rate));
    }
    shared
        .shared_limits()
        .set_scope("bench-shared", entry)
        .await
        .expect("written");
    // Warm-up: connections, scripts loaded, every key's log made.
    run(&plain, &keys, KEYS).await;
    run(&shared, &keys, KEYS).await;
    eprintln!(
        "== the shared limits on the Redis check: {rounds} rounds of {checks} checks each, c = 1"
    );
    let (mut plain_us, mut shared_us, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let pairs = alternating(
        rounds,
        async || run(&plain, &keys, checks).await,
        async || run(&shared, &keys, checks).await,
    )
    .await;
    for (round, (a, b)) in pairs.into_iter().enumerate() {
        println!(
            "{{\"bench\":\"shared_limits_round\",\"round\":{round},\"plain_us\":{a:.3},\"shared_us\":{b:.3},\"ratio\":{:.4}}}",
            b / a
        );
        eprintln!(
            "round {round}: plain {a:.2} µs, shared {b:.2} µs, {:.3}x",
            b / a
        );
        plain_us.push(a);
        shared_us.push(b);
        ratios.push(b / a);
    }
    println!(
        "{{\"bench\":\"shared_limits\",\"rounds\":{rounds},\"checks\":{checks},\"plain_us\":{:.3},\"shared_us\":{:.3},\"ratio\":{:.4}}}",
        median(&mut plain_us),
        median(&mut shared_us),
        median(&mut ratios)
    );
    drop(plain);
    drop(shared);

    // 2. What following them costs Redis, one instance alone.
    let follower = limiter(&redis, "bench:shared:follow:", true);
    let writer = limiter(&redis, "bench:shared:follow:", true);
    follower.shared_limits().refresh().await.expect("read");
    drop(writer);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut admin = redis.admin();
    let at_rest = Duration::from_secs(setting("BENCH_SHARED_REST_SECS", 5));
    reset_stats(&mut admin);
    tokio::time::sleep(at_rest).await;
    let per_second = scripts(&mut admin) as f64 / at_rest.as_secs_f64();
    // Per change: a change written by hand (no writer's script), then two reads' time.
    let mut hand = redis.admin();
    let per_change_changes = 10_u32;
    reset_stats(&mut admin);
    let started = Instant::now();
    for i in 0..per_change_changes {
        let field = "scope:bench-follow";
        let () = redis::cmd("HSET")
            .arg("bench:shared:follow:{registry}entries")
            .arg(field)
            .arg(format!("threshold={} period=1h", 10 + i))
            .query(&mut hand)
            .expect("HSET");
        let _: String = redis::cmd("XADD")
            .arg("bench:shared:follow:{registry}changes")
            .arg("*")
            .arg("field")
            .arg(field)
            .query(&mut hand)
            .expect("XADD");
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let reads = scripts(&mut admin) as f64;
    let at_rest_reads = per_second * started.elapsed().as_secs_f64();
    // A change is read by the next regular read: what is left is the estimate's noise, at
    // most a read's share (clamped at none).
    let per_change = ((reads - at_rest_reads) / f64::from(per_change_changes)).max(0.0);
    eprintln!(
        "following: {per_second:.2} scripts a second at rest, {per_change:.2} more per change"
    );
    println!(
        "{{\"bench\":\"shared_limits_follow\",\"scripts_per_second_at_rest\":{per_second:.3},\"scripts_per_change\":{per_change:.3}}}"
    );
    drop(follower);

    // 3. How long a change takes to reach another instance.
    let writer = limiter(&redis, "bench:shared:propagate:", true);
    let other = limiter(&redis, "bench:shared:propagate:", true);
    other.shared_limits().refresh().await.expect("read");
    let code = Rate::new(1, Duration::from_secs(3_600)).expect("a rate");
    let mut took = Vec::new();
    let mut probe = 0_u64;
    for change in 0..changes {
        // A moment anywhere in the follower's quarter of a second.
        tokio::time::sleep(spread(250_000) + Duration::from_millis(20)).await;
        let threshold = 1_000 + change as u64;
        let rate = Rate::new(threshold, Duration::from_secs(3_600)).expect("a rate");
        let written = Instant::now();
        writer
            .shared_limits()
            .set_scope("bench-propagate", ScopeLimits::new().rate(rate))
            .await
            .expect("written");
        loop {
            probe += 1;
            let key = format!("probe-{probe}");
            let decision = other
                .scope("bench-propagate")
                .check(&key, code)
                .await
                .expect("a check");
            if decision.limit == threshold {
                break;
            }
            assert!(
                written.elapsed() < Duration::from_secs(30),
                "never in force"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        took.push(written.elapsed().as_secs_f64() * 1e3);
    }
    took.sort_by(f64::total_cmp);
    let (p50, p90, most) = (
        took[took.len() / 2],
        took[took.len() * 9 / 10],
        took[took.len() - 1],
    );
    eprintln!(
        "propagation over {changes} changes: median {p50:.1} ms, p90 {p90:.1} ms, most {most:.1} ms"
    );
    println!(
        "{{\"bench\":\"shared_limits_propagation\",\"changes\":{changes},\"p50_ms\":{p50:.2},\"p90_ms\":{p90:.2},\"max_ms\":{most:.2}}}"
    );
}
