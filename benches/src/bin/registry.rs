//! The registry's cost on the Redis check, side by side in one run: the attribute's check of
//! a keyed limit on a limiter without entries (`code`) and on one whose scope holds 10,000 key
//! overrides, every checked key's among them with the code's own rate (`overrides`: the
//! whole look-up, then the same script), in alternating rounds (`BENCH_ROUNDS`, 7), each
//! `BENCH_REGISTRY_CHECKS` (5,000) checks one after another (c = 1) over 1,000 keys, against
//! the same server.
//!
//! Stdout: one JSON line per round (`"bench":"registry_round"`) and the medians
//! (`"bench":"registry"`, `"ratio"`: overrides / code, per check); stderr: progress.
//! Settings: `BENCH_REDIS_URL` (unset: a private `redis-server`), `BENCH_ROUNDS`,
//! `BENCH_REGISTRY_CHECKS`.

use std::time::{Duration, Instant};

use benches::{BenchRedis, alternating, median, setting};
use ratelimit_runtime::{
    FailurePolicy, Limiter, Limits, Override, Rate, RateLimitError, ScopeLimits, rate_limit,
};

/// Keys checked, each with an override in the `overrides` limiter.
const KEYS: usize = 1_000;

/// Overrides in the scope, the checked keys' among them.
const OVERRIDES: usize = 10_000;

#[rate_limit(name = "bench-registry", period = 3600, threshold = 4294967295, key = user, limiter = limiter)]
async fn checked(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn limiter(redis: &BenchRedis, prefix: &str) -> Limiter {
    Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(5))
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

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let redis = BenchRedis::start();
    let rounds: usize = setting("BENCH_ROUNDS", 7);
    let checks: usize = setting("BENCH_REGISTRY_CHECKS", 5_000);
    let code = limiter(&redis, "bench:registry:code:");
    let overrides = limiter(&redis, "bench:registry:overrides:");
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user-{i:06}")).collect();
    let rate = Rate::new(u64::from(u32::MAX), Duration::from_secs(3_600)).expect("a rate");
    let mut entry = ScopeLimits::new();
    for i in 0..OVERRIDES {
        entry = entry.key(format!("user-{i:06}"), Override::rate(rate));
    }
    overrides
        .set_limits(Limits::new().scope("bench-registry", entry))
        .expect("limits accepted");
    // Warm-up: connections, scripts loaded, every key's log made.
    run(&code, &keys, KEYS).await;
    run(&overrides, &keys, KEYS).await;
    eprintln!("== the registry on the Redis check: {rounds} rounds of {checks} checks each, c = 1");
    let (mut code_us, mut overrides_us, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let pairs = alternating(
        rounds,
        async || run(&code, &keys, checks).await,
        async || run(&overrides, &keys, checks).await,
    )
    .await;
    for (round, (a, b)) in pairs.into_iter().enumerate() {
        println!(
            "{{\"bench\":\"registry_round\",\"round\":{round},\"code_us\":{a:.3},\"overrides_us\":{b:.3},\"ratio\":{:.4}}}",
            b / a
        );
        eprintln!(
            "round {round}: code {a:.2} µs, overrides {b:.2} µs, {:.3}x",
            b / a
        );
        code_us.push(a);
        overrides_us.push(b);
        ratios.push(b / a);
    }
    println!(
        "{{\"bench\":\"registry\",\"rounds\":{rounds},\"checks\":{checks},\"code_us\":{:.3},\"overrides_us\":{:.3},\"ratio\":{:.4}}}",
        median(&mut code_us),
        median(&mut overrides_us),
        median(&mut ratios)
    );
}
