//! The in-process store side by side with governor's keyed limiter, the attribute's overhead,
//! and allocations per check, in one run: `cargo bench -p benches --bench memory`.
//!
//! - `memory_vs_governor/{admit,deny}/{1,2}_threads/{ratelimit,counter,governor}`: one check on
//!   a key drawn from the same 1000-key random sequence for every side (`ratelimit`: the
//!   sliding window log; `counter`: the same rate as a sliding window counter, a
//!   constant-memory algorithm as governor's GCRA is). `admit`: a rate nothing
//!   exceeds (every check admitted and recorded); `deny`: 100 per 60 s, which the warm-up
//!   exhausts (every check denied). Two threads share one limiter; the time reported is the
//!   wall time per check of both together (throughput).
//! - `macro_overhead/{by_hand,annotated,annotated_named}`: a call of an `async fn` under
//!   `#[rate_limit]` against the same check written by hand, same store, one hot key,
//!   every call admitted.
//!
//! Our checks are `async` but ready on their first poll: they are polled once with a no-op
//! waker, no runtime involved (governor's `check_key` is synchronous).
//!
//! Before criterion runs, a counting global allocator prints one JSON line per path with the
//! allocations per check in the steady state (after every key was seen once).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::{Barrier, LazyLock};
use std::time::{Duration, Instant};

use benches::{Rng, key_names};
use criterion::{BenchmarkId, Criterion};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use ratelimit_runtime::{Algorithm, Limiter, Rate, RateLimitError, rate_limit};
use tests::counting_alloc::{CountingAllocator, count_allocations, poll_ready as ready};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Keys of the standard workload.
const KEYS: usize = 1000;
/// Random key indexes, cycled through (a power of two).
const SEQUENCE: usize = 1 << 14;

static NAMES: LazyLock<Vec<&'static str>> = LazyLock::new(|| key_names(KEYS, 12));

/// The key sequence of thread `thread` (the same for both limiters).
fn sequence(thread: u64) -> Vec<&'static str> {
    let mut rng = Rng::new(thread + 1);
    (0..SEQUENCE).map(|_| NAMES[rng.below(KEYS)]).collect()
}

/// A workload: our rate and governor's quota for it.
struct Workload {
    name: &'static str,
    rate: Rate,
    quota: Quota,
}

fn workloads() -> [Workload; 2] {
    [
        Workload {
            // Nothing is ever denied: every check records an admission (and evicts old ones).
            name: "admit",
            rate: Rate::new(u64::from(u32::MAX), Duration::from_millis(1)).expect("a rate"),
            quota: Quota::per_second(NonZeroU32::MAX),
        },
        Workload {
            // The standard rate; the warm-up exhausts every key, so every check is denied.
            name: "deny",
            rate: Rate::new(100, Duration::from_secs(60)).expect("a rate"),
            quota: Quota::per_minute(NonZeroU32::new(100).expect("non-zero")),
        },
    ]
}

type Governor = DefaultKeyedRateLimiter<&'static str>;

/// Every key seen (and, for `deny`, exhausted) before measuring.
fn warm_up(limiter: &Limiter, governor: &Governor, rate: Rate) {
    for _ in 0..101 {
        for &key in NAMES.iter() {
            let _ = ready(limiter.check(key, rate));
            let _ = governor.check_key(&key);
        }
    }
}

/// Runs `check` over `iters` keys split between `threads` threads started together; the wall
/// time of the slowest.
fn run_threads(threads: u64, iters: u64, check: &(impl Fn(&'static str) + Sync)) -> Duration {
    let barrier = Barrier::new(threads as usize + 1);
    let sequences: Vec<_> = (0..threads).map(sequence).collect();
    std::thread::scope(|scope| {
        for keys in &sequences {
            let barrier = &barrier;
            let share = iters.div_ceil(threads);
            scope.spawn(move || {
                barrier.wait();
                for i in 0..share as usize {
                    check(keys[i & (SEQUENCE - 1)]);
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins every thread before returning.
        start
    })
    .elapsed()
}

fn memory_vs_governor(c: &mut Criterion) {
    for workload in workloads() {
        let limiter = Limiter::memory();
        let governor: Governor = RateLimiter::keyed(workload.quota);
        let rate = workload.rate;
        warm_up(&limiter, &governor, rate);
        let counters = Limiter::memory();
        let counter = rate.with_algorithm(Algorithm::SlidingWindowCounter);
        warm_up(&counters, &governor, counter);
        let mut group = c.benchmark_group(format!("memory_vs_governor/{}", workload.name));
        for threads in [1_u64, 2] {
            let id = |name: &str| BenchmarkId::new(name, format!("{threads}_threads"));
            group.bench_function(id("ratelimit"), |b| {
                b.iter_custom(|iters| {
                    run_threads(threads, iters, &|key| {
                        black_box(ready(limiter.check(black_box(key), rate)).is_ok());
                    })
                });
            });
            group.bench_function(id("counter"), |b| {
                b.iter_custom(|iters| {
                    run_threads(threads, iters, &|key| {
                        black_box(ready(counters.check(black_box(key), counter)).is_ok());
                    })
                });
            });
            group.bench_function(id("governor"), |b| {
                b.iter_custom(|iters| {
                    run_threads(threads, iters, &|key| {
                        black_box(governor.check_key(&black_box(key)).is_ok());
                    })
                });
            });
        }
        group.finish();
    }
}

/// Admits every call: the attribute's overhead is measured on the path where the body runs.
const HOT: Rate = Rate::new_const(u32::MAX as u64, Duration::from_millis(1));
static HOT_LIMITER: LazyLock<Limiter> = LazyLock::new(Limiter::memory);

fn hot_limiter() -> &'static Limiter {
    &HOT_LIMITER
}

#[rate_limit(period = "1ms", threshold = 4294967295, limiter = hot_limiter(), name = "bench::hot")]
async fn annotated_named() -> Result<u32, RateLimitError> {
    Ok(black_box(7))
}

#[rate_limit(period = "1ms", threshold = 4294967295, limiter = hot_limiter())]
async fn annotated() -> Result<u32, RateLimitError> {
    Ok(black_box(7))
}

/// What `#[rate_limit(name = "bench::hot", ...)]` does, written by hand.
async fn by_hand() -> Result<u32, RateLimitError> {
    let decision = hot_limiter().check("bench::hot", HOT).await?;
    if !decision.allowed {
        return Err(RateLimitError::InvalidInput("denied".into()));
    }
    Ok(black_box(7))
}

fn macro_overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("macro_overhead");
    group.bench_function("by_hand", |b| b.iter(|| ready(by_hand())));
    group.bench_function("annotated_named", |b| b.iter(|| ready(annotated_named())));
    group.bench_function("annotated", |b| b.iter(|| ready(annotated())));
    group.finish();
}

/// Allocations per check in the steady state, one JSON line per path.
fn allocations() {
    const CHECKS: u64 = 100_000;
    let keys = sequence(0);
    for workload in workloads() {
        let limiter = Limiter::memory();
        let governor: Governor = RateLimiter::keyed(workload.quota);
        let rate = workload.rate;
        warm_up(&limiter, &governor, rate);
        // At full speed the `admit` logs grow longer than in the interleaved warm-up: let
        // them reach their steady-state capacity before counting.
        for i in 0..10 * CHECKS as usize {
            black_box(ready(limiter.check(keys[i & (SEQUENCE - 1)], rate)).is_ok());
        }
        let ((), ours) = count_allocations(|| {
            for i in 0..CHECKS as usize {
                black_box(ready(limiter.check(keys[i & (SEQUENCE - 1)], rate)).is_ok());
            }
        });
        let counters = Limiter::memory();
        let counter = rate.with_algorithm(Algorithm::SlidingWindowCounter);
        warm_up(&counters, &governor, counter);
        let ((), by_counter) = count_allocations(|| {
            for i in 0..CHECKS as usize {
                black_box(ready(counters.check(keys[i & (SEQUENCE - 1)], counter)).is_ok());
            }
        });
        let ((), theirs) = count_allocations(|| {
            for i in 0..CHECKS as usize {
                black_box(governor.check_key(&keys[i & (SEQUENCE - 1)]).is_ok());
            }
        });
        for (name, count) in [
            ("ratelimit", ours),
            ("counter", by_counter),
            ("governor", theirs),
        ] {
            println!(
                "{{\"name\":\"allocations\",\"path\":\"{name}\",\"workload\":\"{}\",\"checks\":{CHECKS},\"allocations_per_check\":{}}}",
                workload.name,
                count as f64 / CHECKS as f64
            );
        }
    }
    // Each path warmed right before it is counted: a key idle for its period (1 ms here) is
    // dropped by the sweep, and its log grows back (allocating) when it is checked again.
    let counted = |check: &dyn Fn()| {
        for _ in 0..10 * CHECKS {
            check();
        }
        count_allocations(|| {
            for _ in 0..CHECKS {
                check();
            }
        })
        .1
    };
    for (name, count) in [
        (
            "attribute",
            counted(&|| {
                black_box(ready(annotated()).is_ok());
            }),
        ),
        (
            "by_hand",
            counted(&|| {
                black_box(ready(by_hand()).is_ok());
            }),
        ),
    ] {
        println!(
            "{{\"name\":\"allocations\",\"path\":\"{name}\",\"workload\":\"hot\",\"checks\":{CHECKS},\"allocations_per_check\":{}}}",
            count as f64 / CHECKS as f64
        );
    }
}

fn main() {
    allocations();
    let mut criterion = Criterion::default().configure_from_args();
    memory_vs_governor(&mut criterion);
    macro_overhead(&mut criterion);
    criterion.final_summary();
}
