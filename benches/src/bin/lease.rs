//! Quota leases (`Rate::leased`) on one hot key, side by side with the physical limit of one
//! Redis in the same run.
//!
//! For each algorithm: `redis-benchmark -c 50 -P 16` runs the store's own check script on the
//! hot key (its rate is the most one Redis core checks a key at without leases); then 4
//! limiter processes (this binary, started again as workers) × 50 tasks check the key,
//! leased, against a threshold of 12 × that rate per second, for a warm-up period and
//! `BENCH_LEASE_PERIODS` more. Each task times every check (start and end, wall clock); the
//! coordinator merges the admissions and looks for a window holding more than the threshold
//! (for the log any window of one period, for the counter each fixed one, the bound each
//! keeps), counting an admission only where its whole check lies inside the window (so that
//! a task preempted after its check never makes a window look fuller than it was: what is
//! found is over-admission for certain). The store's `INFO commandstats` gives the
//! scripts and the Redis time per admission.
//!
//! Then the other end: a threshold of 100 per `BENCH_LEASE_LOW_PERIOD_S` (60) with the same
//! 4 × 50 callers (each waiting 1 ms between checks), leased and not, for
//! `BENCH_LEASE_LOW_WINDOWS` (2) windows after the first admission: the admissions of each
//! window, and the check latency (p50, p99) of both runs; with the deny cache on (the
//! default: denials answered in process) and off (`BENCH_LEASE_LOW_DENY_CACHE`: `both`, `on`
//! or `off`).
//!
//! Stdout: one JSON line per run and algorithm (`"bench":"lease"`, `"algorithm"`, `"ratio"`,
//! `"over_admitted"`, `"scripts_per_admission"`, ...), then one per low-end run
//! (`"bench":"lease_low"`); stderr: progress. Settings: `BENCH_REDIS_URL` (unset: a private
//! `redis-server`), `BENCH_LEASE_PERIODS` (5), `BENCH_LEASE_PROCESSES` (4),
//! `BENCH_LEASE_TASKS` (50), `BENCH_LEASE_LOW_PERIOD_S` (60, 0 skips the low end),
//! `BENCH_LEASE_LOW_WINDOWS` (2), `REDIS_BENCHMARK` (`redis-benchmark`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use benches::{
    BenchRedis, BenchmarkLoad, command_stats, percentile_us, redis_benchmark, reset_stats, setting,
};
use ratelimit_runtime::{Algorithm, Limiter, Rate};

/// The store's script for one log at cost 1, as the Redis store sends it.
const LOG_SCRIPT: &str =
    include_str!("../../../ratelimit-runtime/src/store/redis/sliding_window.lua");

/// The store's script for one counter, with the counter's arithmetic before it.
const COUNTER_SCRIPT: &str = concat!(
    include_str!("../../../ratelimit-runtime/src/store/redis/counter.lua"),
    include_str!("../../../ratelimit-runtime/src/store/redis/sliding_window_counter.lua")
);

/// The variable that makes this binary a worker (its value: the run's settings).
const WORKER: &str = "BENCH_LEASE_WORKER";

/// The hot key, under the run's prefix.
const KEY: &str = "hot";

/// A worker's run: what to check, against what, from when, for how long.
#[derive(Clone, Debug)]
struct Run {
    url: String,
    prefix: String,
    threshold: u64,
    period_us: u64,
    counter: bool,
    leased: bool,
    /// The limiter's deny cache (on by default).
    deny_cache: bool,
    tasks: usize,
    /// Wall-clock µs since the Unix epoch: start together, stop together.
    start_us: u64,
    end_us: u64,
    /// Where the worker writes its admissions and latencies.
    out: PathBuf,
}

impl Run {
    fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.url,
            self.prefix,
            self.threshold,
            self.period_us,
            u8::from(self.counter),
            u8::from(self.leased),
            u8::from(self.deny_cache),
            self.tasks,
            self.start_us,
            self.end_us,
            self.out.display()
        )
    }

    fn decode(text: &str) -> Run {
        let f: Vec<&str> = text.split('|').collect();
        let number = |i: usize| {
            f[i].parse::<u64>()
                .expect("a number in the worker's settings")
        };
        Run {
            url: f[0].to_owned(),
            prefix: f[1].to_owned(),
            threshold: number(2),
            period_us: number(3),
            counter: number(4) == 1,
            leased: number(5) == 1,
            deny_cache: number(6) == 1,
            tasks: number(7) as usize,
            start_us: number(8),
            end_us: number(9),
            out: PathBuf::from(f[10]),
        }
    }

    fn rate(&self) -> Rate {
        let rate =
            Rate::new(self.threshold, Duration::from_micros(self.period_us)).expect("a valid rate");
        let rate = if self.counter {
            rate.with_algorithm(Algorithm::SlidingWindowCounter)
        } else {
            rate
        };
        if self.leased { rate.leased() } else { rate }
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn main() {
    if let Ok(settings) = std::env::var(WORKER) {
        worker(&Run::decode(&settings));
        return;
    }
    let redis = BenchRedis::start();
    let binary = setting("REDIS_BENCHMARK", "redis-benchmark".to_owned());
    let periods: u64 = setting("BENCH_LEASE_PERIODS", 5);
    let processes: usize = setting("BENCH_LEASE_PROCESSES", 4);
    let tasks: usize = setting("BENCH_LEASE_TASKS", 50);
    let low_period_s: u64 = setting("BENCH_LEASE_LOW_PERIOD_S", 60);
    let low_windows: u64 = setting("BENCH_LEASE_LOW_WINDOWS", 2);
    let dir = std::env::temp_dir().join(format!("ratelimit-lease-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let mut admin = redis.admin();

    for counter in [false, true] {
        let algorithm = if counter {
            "sliding_window_counter"
        } else {
            "sliding_window_log"
        };
        let prefix = format!("bench:lease:{algorithm}:");
        // The limit: the store's own check script on the hot key, without leases.
        let (script, key) = if counter {
            (COUNTER_SCRIPT, format!("{prefix}limit#swc"))
        } else {
            (LOG_SCRIPT, format!("{prefix}limit"))
        };
        let sha = load(&mut admin, script);
        let args: Vec<String> = if counter {
            vec![
                "1".into(),
                key,
                "1000000".into(),
                "4294967295".into(),
                "1".into(),
                String::new(),
            ]
        } else {
            vec![
                "1".into(),
                key,
                "1000000".into(),
                "4294967295".into(),
                "m:__rand_int__:__rand_int__".into(),
                String::new(),
            ]
        };
        let load_ = BenchmarkLoad {
            checks: 400_000,
            keys: 1_000_000_000,
            concurrency: 50,
            pipeline: 16,
        };
        let limit = redis_benchmark(&redis, &binary, &load_, &sha, &args);
        flush(&mut admin);
        let limit_rate = limit.checks_per_s;
        let threshold = (limit_rate * 12.0).ceil() as u64;
        eprintln!(
            "== {algorithm}: redis-benchmark -c 50 -P 16 {limit_rate:.0} checks/s on one key; \
             threshold {threshold} per second, leased, {processes} processes x {tasks} tasks"
        );
        let period_us = 1_000_000;
        reset_stats(&mut admin);
        let start_us = now_us() + 1_500_000;
        let end_us = start_us + (1 + periods) * period_us;
        let run = Run {
            url: redis.url().to_owned(),
            prefix,
            threshold,
            period_us,
            counter,
            leased: true,
            deny_cache: true,
            tasks,
            start_us,
            end_us,
            out: dir.clone(),
        };
        let results = run_workers(&run, processes);
        let (evalsha, usec_sha) = command_stats(&mut admin, "evalsha");
        let (eval, usec_eval) = command_stats(&mut admin, "eval");
        let scripts = evalsha + eval;
        let redis_usec = usec_sha + usec_eval;
        // The steady periods: after the warm-up one.
        let steady_from = start_us + period_us;
        let steady: u64 = results
            .admissions
            .iter()
            .filter(|(s, _)| *s >= steady_from)
            .count() as u64;
        let steady_per_s = steady as f64 / periods as f64;
        // The log's bound is every window of a period; the counter's, every fixed window (a
        // rolling one may hold up to twice the threshold, by design).
        let over = if counter {
            over_admitted_fixed(&results.admissions, period_us, threshold)
        } else {
            over_admitted(&results.admissions, period_us, threshold)
        };
        let admitted = results.admissions.len() as u64;
        eprintln!(
            "   {admitted} admitted of {} checks; steady {steady_per_s:.0}/s ({:.2} x the limit, \
             {:.1} % of the threshold); over-admitted {over}; {scripts} scripts \
             ({:.5} per admission, {:.3} µs of Redis per admission)",
            results.checks,
            steady_per_s / limit_rate,
            100.0 * steady_per_s / threshold as f64,
            scripts as f64 / admitted.max(1) as f64,
            redis_usec as f64 / admitted.max(1) as f64,
        );
        println!(
            "{{\"bench\":\"lease\",\"algorithm\":\"{algorithm}\",\"ratio\":{:.3},\"over_admitted\":{over},\
             \"scripts_per_admission\":{:.6},\"admitted_per_s\":{steady_per_s:.0},\
             \"redis_benchmark_per_s\":{limit_rate:.0},\"threshold_per_s\":{threshold},\
             \"under_admission\":{:.4},\"redis_us_per_admission\":{:.4},\"checks\":{},\
             \"admitted\":{admitted},\"processes\":{processes},\"tasks\":{tasks},\"periods\":{periods}}}",
            steady_per_s / limit_rate,
            scripts as f64 / admitted.max(1) as f64,
            1.0 - steady_per_s / threshold as f64,
            redis_usec as f64 / admitted.max(1) as f64,
            results.checks,
        );
        flush(&mut admin);
    }

    let deny_caches: &[bool] =
        match setting("BENCH_LEASE_LOW_DENY_CACHE", "both".to_owned()).as_str() {
            "on" => &[true],
            "off" => &[false],
            _ => &[true, false],
        };
    for &deny_cache in deny_caches.iter().filter(|_| low_period_s > 0) {
        let period_us = low_period_s * 1_000_000;
        let mut latencies = Vec::new();
        for leased in [false, true] {
            let prefix = format!(
                "bench:lease:low:{}:{}:",
                u8::from(deny_cache),
                u8::from(leased)
            );
            let start_us = now_us() + 1_500_000;
            // The first window opens at the start: then `low_windows` whole windows.
            let end_us = start_us + low_windows * period_us + period_us / 2;
            let run = Run {
                url: redis.url().to_owned(),
                prefix,
                threshold: 100,
                period_us,
                counter: false,
                leased,
                deny_cache,
                tasks,
                start_us,
                end_us,
                out: dir.clone(),
            };
            eprintln!(
                "== the other end: 100 per {low_period_s} s, {}, deny cache {}, {processes} x {tasks}, {} s",
                if leased { "leased" } else { "not leased" },
                if deny_cache { "on" } else { "off" },
                (end_us - start_us) / 1_000_000
            );
            let results = run_workers(&run, processes);
            let first = results
                .admissions
                .iter()
                .map(|(s, _)| *s)
                .min()
                .unwrap_or(start_us);
            let windows: Vec<u64> = (0..low_windows)
                .map(|w| {
                    let from = first + w * period_us;
                    results
                        .admissions
                        .iter()
                        .filter(|(s, _)| (from..from + period_us).contains(s))
                        .count() as u64
                })
                .collect();
            let over = over_admitted(&results.admissions, period_us, 100);
            let mut sorted = results.latencies.clone();
            sorted.sort_unstable();
            let p50 = percentile_us(&sorted, 50.0);
            let p99 = percentile_us(&sorted, 99.0);
            eprintln!(
                "   admitted per window {windows:?}; over-admitted {over}; p50 {p50:.1} µs, p99 {p99:.1} µs"
            );
            latencies.push((p50, p99));
            println!(
                "{{\"bench\":\"lease_low\",\"algorithm\":\"sliding_window_log\",\"leased\":{leased},\
                 \"deny_cache\":{deny_cache},\
                 \"threshold\":100,\"period_s\":{low_period_s},\"admitted_per_window\":{windows:?},\
                 \"over_admitted\":{over},\"p50_us\":{p50:.2},\"p99_us\":{p99:.2},\"checks\":{}}}",
                results.checks
            );
            flush(&mut admin);
        }
        let (off, on) = (latencies[0], latencies[1]);
        println!(
            "{{\"bench\":\"lease_low_ratio\",\"deny_cache\":{deny_cache},\"p50_ratio\":{:.3},\"p99_ratio\":{:.3}}}",
            on.0 / off.0,
            on.1 / off.1
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `SCRIPT LOAD`s `script`, returning its SHA1.
fn load(admin: &mut redis::Connection, script: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(script)
        .query(admin)
        .expect("SCRIPT LOAD")
}

/// Empties the benchmark's server between runs (a private one only; a given server keeps its
/// keys, which the runs' prefixes keep apart).
fn flush(admin: &mut redis::Connection) {
    if std::env::var("BENCH_REDIS_URL").is_ok_and(|url| !url.is_empty()) {
        return;
    }
    let () = redis::cmd("FLUSHALL").query(admin).expect("FLUSHALL");
}

/// What the workers of one run saw.
struct Results {
    /// Each admission's check, `(start, end)` in wall-clock µs, sorted by end.
    admissions: Vec<(u64, u64)>,
    /// Every check's latency.
    latencies: Vec<Duration>,
    checks: u64,
}

/// Starts `processes` workers for `run`, waits for them, and merges what they wrote.
fn run_workers(run: &Run, processes: usize) -> Results {
    let exe = std::env::current_exe().expect("this binary's path");
    let children: Vec<(Child, PathBuf)> = (0..processes)
        .map(|i| {
            let out = run.out.join(format!("worker-{i}"));
            let settings = Run {
                out: out.clone(),
                ..run.clone()
            };
            let child = Command::new(&exe)
                .env(WORKER, settings.encode())
                .stdout(Stdio::null())
                .spawn()
                .expect("start a worker process");
            (child, out)
        })
        .collect();
    let mut results = Results {
        admissions: Vec::new(),
        latencies: Vec::new(),
        checks: 0,
    };
    for (mut child, out) in children {
        let status = child.wait().expect("a worker's exit");
        assert!(status.success(), "a worker failed: {status}");
        let mut bytes = Vec::new();
        std::fs::File::open(&out)
            .and_then(|mut file| file.read_to_end(&mut bytes))
            .expect("a worker's results");
        let numbers: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        let (checks, admissions) = (numbers[0], numbers[1] as usize);
        results.checks += checks;
        let pairs = &numbers[2..2 + 2 * admissions];
        results
            .admissions
            .extend(pairs.chunks_exact(2).map(|p| (p[0], p[1])));
        results.latencies.extend(
            numbers[2 + 2 * admissions..]
                .iter()
                .map(|&ns| Duration::from_nanos(ns)),
        );
        let _ = std::fs::remove_file(&out);
    }
    results.admissions.sort_unstable_by_key(|&(_, end)| end);
    results
}

/// The most admissions above `threshold` in any window `(t − period, t]` that holds their
/// whole checks (`admissions` sorted by end): 0 when none holds more.
fn over_admitted(admissions: &[(u64, u64)], period: u64, threshold: u64) -> u64 {
    // Sweeping t over the ends: the checks that ended by t, less those that started at or
    // before t − period (never inside a later window either).
    let mut started: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
    let mut worst = 0;
    for &(start, end) in admissions {
        started.push(Reverse(start));
        while started.peek().is_some_and(|&Reverse(s)| s + period <= end) {
            started.pop();
        }
        worst = worst.max(started.len() as u64);
    }
    worst.saturating_sub(threshold)
}

/// The most admissions above `threshold` in any fixed window `[k · period, (k + 1) · period)`
/// (aligned to the Unix epoch, as the counter's are) that holds their whole checks.
fn over_admitted_fixed(admissions: &[(u64, u64)], period: u64, threshold: u64) -> u64 {
    let mut windows: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    for &(start, end) in admissions {
        if start / period == end / period {
            *windows.entry(start / period).or_default() += 1;
        }
    }
    windows
        .values()
        .max()
        .copied()
        .unwrap_or(0)
        .saturating_sub(threshold)
}

/// A worker process: `run.tasks` tasks checking the hot key from `start_us` to `end_us`; writes
/// the checks made, each admission's check (start, end) and, for a sample, latencies.
fn worker(run: &Run) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let limiter = Limiter::builder()
        .redis_url(&run.url)
        .key_prefix(&run.prefix)
        .timeout(Duration::from_secs(5))
        .deny_cache(run.deny_cache)
        .build()
        .expect("a Redis limiter");
    let rate = run.rate();
    let (start_us, end_us) = (run.start_us, run.end_us);
    let per_task = runtime.block_on(async {
        // Connect before the start.
        let _ = limiter.peek(KEY, rate).await;
        let mut tasks = Vec::new();
        for _ in 0..run.tasks {
            let limiter = limiter.clone();
            tasks.push(tokio::spawn(async move {
                let wait = start_us.saturating_sub(now_us());
                tokio::time::sleep(Duration::from_micros(wait)).await;
                let mut admissions = Vec::new();
                let mut latencies = Vec::new();
                let mut checks = 0_u64;
                loop {
                    let started = now_us();
                    if started >= end_us {
                        break;
                    }
                    let timer = std::time::Instant::now();
                    let decision = limiter.check(KEY, rate).await;
                    let took = timer.elapsed();
                    let ended = now_us();
                    checks += 1;
                    // A sample of latencies: every 64th check (all at the low end's rates).
                    if checks.is_multiple_of(64) || rate.threshold() <= 1_000 {
                        latencies.push(took.as_nanos() as u64);
                    }
                    match decision {
                        Ok(decision) if decision.allowed => admissions.push((started, ended)),
                        Ok(_) => {}
                        Err(error) => panic!("a check failed: {error}"),
                    }
                    // The low end: a caller that was denied tries again a little later.
                    if rate.threshold() <= 1_000 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                (checks, admissions, latencies)
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.push(task.await.expect("a task"));
        }
        all
    });
    let checks: u64 = per_task.iter().map(|(c, _, _)| c).sum();
    let admissions: Vec<(u64, u64)> = per_task
        .iter()
        .flat_map(|(_, a, _)| a.iter().copied())
        .collect();
    let mut bytes = Vec::with_capacity(16 + admissions.len() * 16);
    bytes.extend_from_slice(&checks.to_le_bytes());
    bytes.extend_from_slice(&(admissions.len() as u64).to_le_bytes());
    for (start, end) in &admissions {
        bytes.extend_from_slice(&start.to_le_bytes());
        bytes.extend_from_slice(&end.to_le_bytes());
    }
    for (_, _, latencies) in &per_task {
        for ns in latencies {
            bytes.extend_from_slice(&ns.to_le_bytes());
        }
    }
    std::fs::File::create(&run.out)
        .and_then(|mut file| file.write_all(&bytes))
        .expect("write the worker's results");
}
