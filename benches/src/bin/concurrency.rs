//! Concurrency limits (issue 38), measured in one run against one server, beside the rate
//! check as the reference:
//!
//! 1. latency at c = 1: `Limiter::check` of a log (one script) against `Limiter::acquire` of
//!    a concurrency limit (its own latency: each slot held until the round ends, then all
//!    released, outside the time), in alternating rounds (`BENCH_ROUNDS`, 7) of
//!    `BENCH_SLOT_CALLS` (5,000) calls one after another; the ratio is acquire / check;
//! 2. throughput at c = 50: 50 tasks calling for `BENCH_SLOT_SECS` (3) seconds, checks against
//!    acquire-then-drop cycles (one key of 100 slots: a cycle counts once admitted, so the
//!    releases must keep up or the slots fill and calls are denied), alternating rounds; the
//!    ratio is cycles / checks per second;
//! 3. renewals at rest: one limiter holding `BENCH_SLOT_HELD` (1,000) slots over as many keys
//!    for `BENCH_SLOT_REST_SECS` (25) seconds, its default slot time (30 s: a renewal every
//!    10 s): the scripts it sends per second, from `INFO commandstats`, nothing else running.
//!
//! Stdout: `"bench":"concurrency_latency_round"` and `"bench":"concurrency_latency"`,
//! `"bench":"concurrency_throughput_round"` and `"bench":"concurrency_throughput"`,
//! `"bench":"concurrency_renewals"`; stderr: progress. Settings: `BENCH_REDIS_URL` (unset: a
//! private `redis-server`; the scripts' count needs one), `BENCH_ROUNDS`, `BENCH_SLOT_CALLS`,
//! `BENCH_SLOT_SECS`, `BENCH_SLOT_HELD`, `BENCH_SLOT_REST_SECS`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use benches::{BenchRedis, alternating, command_stats, median, reset_stats, setting};
use ratelimit_runtime::{Concurrency, FailurePolicy, Limiter, Rate};

fn limiter(redis: &BenchRedis, prefix: &str) -> Limiter {
    Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a Redis limiter")
}

/// The mean time per call of `calls` checks one after another.
async fn checks(limiter: &Limiter, rate: Rate, calls: usize) -> Duration {
    let started = Instant::now();
    for _ in 0..calls {
        let decision = limiter.check("bench:check", rate).await.expect("checked");
        assert!(decision.allowed);
    }
    started.elapsed() / u32::try_from(calls).expect("calls fit a u32")
}

/// The mean time per call of `calls` acquires one after another (their own latency), each
/// slot held until the round ends, then all released: the releases' cost is the cycles'.
async fn acquires(limiter: &Limiter, limit: Concurrency, calls: usize) -> Duration {
    let mut held = Vec::with_capacity(calls);
    let started = Instant::now();
    for _ in 0..calls {
        held.push(limiter.acquire("bench:slots", limit).await.expect("a slot"));
    }
    let took = started.elapsed() / u32::try_from(calls).expect("calls fit a u32");
    drop(held);
    // Their releases gone through before the next round.
    tokio::time::sleep(Duration::from_millis(200)).await;
    took
}

/// The operations per second of 50 tasks for `secs`, each running `op` in a loop (an op
/// counts when it returns `true`); and the ops that returned `false`.
async fn throughput<F>(secs: Duration, op: impl Fn() -> F + Send + Sync + 'static) -> (f64, u64)
where
    F: std::future::Future<Output = bool> + Send + 'static,
{
    let op = Arc::new(op);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (op, stop, done, failed) = (
                Arc::clone(&op),
                Arc::clone(&stop),
                Arc::clone(&done),
                Arc::clone(&failed),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if op().await {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    let started = Instant::now();
    tokio::time::sleep(secs).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed();
    for task in tasks {
        task.await.expect("a task");
    }
    (
        done.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64(),
        failed.load(Ordering::Relaxed),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let redis = BenchRedis::start();
    let rounds: usize = setting("BENCH_ROUNDS", 7);
    let calls: usize = setting("BENCH_SLOT_CALLS", 5_000);
    let secs = Duration::from_secs(setting("BENCH_SLOT_SECS", 3));
    let held: usize = setting("BENCH_SLOT_HELD", 1_000);
    let rest = Duration::from_secs(setting("BENCH_SLOT_REST_SECS", 25));
    let rate = Rate::new(u64::from(u32::MAX), Duration::from_secs(1)).expect("a rate");
    let limit = Concurrency::new(100).expect("a limit");
    // Room for a round's slots, each held until the round ends.
    let roomy = Concurrency::new(Concurrency::MAX).expect("a limit");

    // 1. Latency at c = 1.
    let checking = limiter(&redis, "bench:conc:check:");
    let holding = limiter(&redis, "bench:conc:hold:");
    checks(&checking, rate, calls / 5).await;
    acquires(&holding, roomy, calls / 5).await;
    eprintln!("== latency at c = 1: {rounds} rounds of {calls} calls each, check against acquire");
    let (mut check_us, mut acquire_us, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let pairs = alternating(
        rounds,
        async || checks(&checking, rate, calls).await,
        async || acquires(&holding, roomy, calls).await,
    )
    .await;
    for (round, (a, b)) in pairs.into_iter().enumerate() {
        println!(
            "{{\"bench\":\"concurrency_latency_round\",\"round\":{round},\"check_us\":{a:.3},\"acquire_us\":{b:.3},\"ratio\":{:.4}}}",
            b / a
        );
        eprintln!(
            "round {round}: check {a:.2} µs, acquire {b:.2} µs, {:.3}x",
            b / a
        );
        check_us.push(a);
        acquire_us.push(b);
        ratios.push(b / a);
    }
    println!(
        "{{\"bench\":\"concurrency_latency\",\"rounds\":{rounds},\"calls\":{calls},\"check_us\":{:.3},\"acquire_us\":{:.3},\"ratio\":{:.4}}}",
        median(&mut check_us),
        median(&mut acquire_us),
        median(&mut ratios)
    );

    // 2. Throughput at c = 50.
    eprintln!(
        "== throughput at c = 50: {rounds} rounds of {} s each, checks against acquire-and-release cycles",
        secs.as_secs()
    );
    let (mut check_ops, mut cycle_ops, mut ratios, mut denied) =
        (Vec::new(), Vec::new(), Vec::new(), 0);
    for round in 0..rounds {
        let check = async || {
            let limiter = checking.clone();
            throughput(secs, move || {
                let limiter = limiter.clone();
                async move {
                    limiter
                        .check("bench:check", rate)
                        .await
                        .is_ok_and(|decision| decision.allowed)
                }
            })
            .await
        };
        let cycle = async || {
            let limiter = holding.clone();
            throughput(secs, move || {
                let limiter = limiter.clone();
                async move { limiter.acquire("bench:slots", limit).await.is_ok() }
            })
            .await
        };
        let ((checks_per_s, _), (cycles_per_s, refused)) = if round % 2 == 0 {
            let a = check().await;
            (a, cycle().await)
        } else {
            let b = cycle().await;
            (check().await, b)
        };
        denied += refused;
        let ratio = cycles_per_s / checks_per_s;
        println!(
            "{{\"bench\":\"concurrency_throughput_round\",\"round\":{round},\"checks_per_s\":{checks_per_s:.0},\"cycles_per_s\":{cycles_per_s:.0},\"denied\":{refused},\"ratio\":{ratio:.4}}}"
        );
        eprintln!(
            "round {round}: checks {checks_per_s:.0}/s, acquire-and-release {cycles_per_s:.0}/s ({refused} denied), {ratio:.3}x"
        );
        check_ops.push(checks_per_s);
        cycle_ops.push(cycles_per_s);
        ratios.push(ratio);
    }
    println!(
        "{{\"bench\":\"concurrency_throughput\",\"rounds\":{rounds},\"secs\":{},\"checks_per_s\":{:.0},\"cycles_per_s\":{:.0},\"denied\":{denied},\"ratio\":{:.4}}}",
        secs.as_secs(),
        median(&mut check_ops),
        median(&mut cycle_ops),
        median(&mut ratios)
    );
    drop((checking, holding));

    // 3. Renewals at rest: one limiter holding `held` slots.
    let renewing = limiter(&redis, "bench:conc:rest:");
    let one = Concurrency::new(1).expect("a limit");
    let mut slots = Vec::with_capacity(held);
    for i in 0..held {
        slots.push(
            renewing
                .acquire(&format!("slot-{i:05}"), one)
                .await
                .expect("a slot"),
        );
    }
    let mut admin = redis.admin();
    reset_stats(&mut admin);
    eprintln!(
        "== renewals at rest: {held} slots held for {} s (slot time 30 s)",
        rest.as_secs()
    );
    tokio::time::sleep(rest).await;
    let scripts = command_stats(&mut admin, "evalsha").0 + command_stats(&mut admin, "eval").0;
    let per_second = scripts as f64 / rest.as_secs_f64();
    assert!(slots.iter().all(ratelimit_runtime::Slot::is_held));
    println!(
        "{{\"bench\":\"concurrency_renewals\",\"held\":{held},\"secs\":{},\"scripts\":{scripts},\"scripts_per_s\":{per_second:.3}}}",
        rest.as_secs()
    );
    eprintln!(
        "{scripts} scripts in {} s: {per_second:.3}/s",
        rest.as_secs()
    );
}
