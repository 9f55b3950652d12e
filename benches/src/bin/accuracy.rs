//! The sliding window counter against the exact sliding window log on the same traffic
//! (`tests::accuracy`): Poisson arrivals at 0.5×, 1×, 2× and 10× the threshold rate, bursts at
//! the fixed windows' edges, and many keys with heavy-tailed rates (the median key at a fifth of
//! the threshold rate, and, closer to everyday traffic, at a fiftieth), each replayed at explicit
//! times through the in-process store and through Redis (which must decide every call alike).
//!
//! Per trace: the fraction of calls the counter decided otherwise than the log (false admits:
//! the counter admitted, the log denied; false denials: the reverse), each algorithm on its own
//! history, and the most admissions of one key the counter let into any rolling window of
//! length `period`, as a multiple of the threshold (the log's is at most 1).
//!
//! Settings: `BENCH_REDIS_URL` (unset: a private `redis-server`), `BENCH_ACCURACY_WINDOWS`
//! (40: periods per single-key trace), `BENCH_ACCURACY_KEYS` (500; ten times as many for the
//! everyday trace), `BENCH_ACCURACY_THRESHOLD`
//! (100 per 60 s). Stdout: one JSON line per trace; stderr: the markdown table.

use std::time::{Duration, Instant};

use benches::{BenchRedis, setting};
use ratelimit_runtime::{FailurePolicy, Limiter};
use tests::accuracy::{self, Trace};

fn main() {
    let windows: u64 = setting("BENCH_ACCURACY_WINDOWS", 40);
    let keys: u32 = setting("BENCH_ACCURACY_KEYS", 500);
    let threshold: u64 = setting("BENCH_ACCURACY_THRESHOLD", 100);
    let period = Duration::from_secs(60);
    let mut traces: Vec<Trace> = [0.5, 1.0, 2.0, 10.0]
        .iter()
        .zip(1..)
        .map(|(&multiple, seed)| accuracy::poisson(multiple, threshold, period, windows, seed))
        .collect();
    traces.push(accuracy::edge_bursts(threshold, period, windows, 5));
    traces.push(accuracy::heavy_tailed(
        keys,
        0.2,
        threshold,
        period,
        windows / 4,
        6,
    ));
    // Closer to an API's everyday traffic: most keys far below their limit.
    traces.push(accuracy::heavy_tailed(
        keys * 10,
        0.02,
        threshold,
        period,
        windows / 4,
        7,
    ));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let redis = BenchRedis::start();
    let remote = runtime.block_on(async {
        Limiter::builder()
            .redis_url(redis.url())
            .key_prefix("bench:accuracy:")
            .failure_policy(FailurePolicy::Closed)
            .timeout(Duration::from_secs(10))
            .build()
            .expect("a Redis limiter")
    });
    eprintln!(
        "| trace | calls | log admitted | counter admitted | false admits | false denials | largest rolling window (× threshold) |"
    );
    eprintln!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    // All traces' calls, false admits and false denials.
    let mut all = (0, 0, 0);
    for (i, trace) in traces.iter().enumerate() {
        let started = Instant::now();
        let local = runtime.block_on(accuracy::replay(&Limiter::memory(), "a", trace));
        let in_process = started.elapsed();
        let started = Instant::now();
        let stored = runtime.block_on(accuracy::replay(&remote, &format!("r{i}"), trace));
        let through_redis = started.elapsed();
        assert_eq!(
            local, stored,
            "{}: the stores decided otherwise",
            trace.name
        );
        assert_eq!(local.bound_violations, 0, "{}: past T + ⌊T·f⌋", trace.name);
        assert!(local.log_max_window <= trace.threshold);
        let c = &local;
        println!(
            "{{\"name\":\"accuracy\",\"trace\":\"{}\",\"calls\":{},\"log_admitted\":{},\"counter_admitted\":{},\"false_admits\":{},\"false_denials\":{},\"false_admit_pct\":{:.4},\"false_denial_pct\":{:.4},\"max_window_multiple\":{:.3},\"max_fixed\":{},\"in_process_s\":{:.2},\"redis_s\":{:.2}}}",
            trace.name,
            c.calls,
            c.log_admitted,
            c.counter_admitted,
            c.false_admits,
            c.false_denials,
            c.percent(c.false_admits),
            c.percent(c.false_denials),
            c.max_multiple(trace.threshold),
            c.counter_max_fixed,
            in_process.as_secs_f64(),
            through_redis.as_secs_f64()
        );
        eprintln!(
            "| {} | {} | {} | {} | {:.3} % | {:.3} % | {:.2} |",
            trace.name,
            c.calls,
            c.log_admitted,
            c.counter_admitted,
            c.percent(c.false_admits),
            c.percent(c.false_denials),
            c.max_multiple(trace.threshold)
        );
        all = (
            all.0 + c.calls,
            all.1 + c.false_admits,
            all.2 + c.false_denials,
        );
    }
    let percent = |part: u64| 100.0 * part as f64 / all.0.max(1) as f64;
    eprintln!(
        "\nall traces: {} calls, {:.3} % false admits, {:.3} % false denials; both stores decided every call alike",
        all.0,
        percent(all.1),
        percent(all.2)
    );
}
