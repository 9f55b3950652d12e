//! The Redis store against the physical limit of one Redis, side by side in one run.
//!
//! Our rows: `Limiter::check` on one limiter, `concurrency` tasks, the standard workload
//! (`BENCH_KEYS` keys picked at random, `BENCH_LIMIT` per `BENCH_WINDOW_MS`, `BENCH_MAX_CHECKS`
//! checks). The limit: `redis-benchmark` sending `EVALSHA` of the same script, with random keys
//! (`-r`), at `-c 1`, `-c 50` and `-c 50 -P 16`, against the same server. The seeds' script
//! (ZREMRANGEBYSCORE + ZCARD + ZADD) runs the same way, for the server time per check.
//!
//! Settings (environment): `BENCH_REDIS_URL` (unset: a private `redis-server`), `BENCH_KEYS`
//! (1000), `BENCH_LIMIT` (100), `BENCH_WINDOW_MS` (60000), `BENCH_MAX_CHECKS` (100000),
//! `BENCH_CONCURRENCY` (1,50), `BENCH_ROUNDS` (3), `BENCH_RUNTIME` (`multi`: Tokio's
//! multi-thread runtime, or `current`: one thread), `BENCH_WORKERS` (the multi-thread
//! runtime's workers: the number of cores), `BENCH_PIPELINE` (16), `REDIS_BENCHMARK` (the binary; `none` skips
//! the limit).
//!
//! Stdout: JSON lines only (`"name":"ratelimit"` rows in the format of issue 5, then
//! `redis-benchmark` rows and `ratio` rows); stderr: progress and a table.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use benches::{BenchRedis, Rng, command_stats, key_names, percentile_us, reset_stats, setting};
use ratelimit_runtime::{FailurePolicy, Limit, Limiter, Rate};

/// Our script, the one the Redis store runs.
const OURS: &str = include_str!("../../../ratelimit-runtime/src/store/redis/sliding_window.lua");

/// Our script for one sliding window counter, with the counter's arithmetic before it, as the
/// Redis store sends it.
const COUNTER: &str = concat!(
    include_str!("../../../ratelimit-runtime/src/store/redis/counter.lua"),
    include_str!("../../../ratelimit-runtime/src/store/redis/sliding_window_counter.lua")
);

/// The seeds' script: the Lua script of the Java `@RateLimit` articles this crate ports (the
/// "seed" articles, not in this repository; section "Lua脚本优化"): evict, count, add, and
/// nothing else (no expiry, no retry-after). Kept as written except for the member, which the
/// seed sets to the time (so that same-millisecond calls collapse into one): here it is
/// `ARGV[4]`, unique, so that its sets hold the same data as ours. `ARGV[1]` is the time (µs):
/// over a run of seconds against a 60 s window nothing leaves the window, so a fixed time
/// evicts exactly what the live one would (nothing).
const SEEDS: &str = r"
local key = KEYS[1]
local current_time = tonumber(ARGV[1])
local window_size = tonumber(ARGV[2])
local threshold = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, current_time - window_size)
local count = redis.call('ZCARD', key)
if count >= threshold then
  return tostring(0)
else
  redis.call('ZADD', key, current_time, ARGV[4])
  return tostring(1)
end
";

/// Digits of a key: `redis-benchmark` writes `__rand_int__` as 12 digits.
const KEY_DIGITS: usize = 12;

struct Settings {
    keys: usize,
    limit: u64,
    window_ms: u64,
    checks: usize,
    concurrency: Vec<usize>,
    rounds: usize,
    pipeline: usize,
    redis_benchmark: String,
}

/// What each of our checks asks: the standard check, two stacked limits on one key (the
/// workload's rate and a daily quota that never denies), or one check of cost 10.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    One,
    TwoLimits,
    Cost10,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::One => "one limit",
            Shape::TwoLimits => "two limits",
            Shape::Cost10 => "cost 10",
        }
    }
}

/// One measured run.
#[derive(Clone, Debug)]
struct Row {
    checks: usize,
    checks_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    allowed: Option<usize>,
    server_us_per_check: f64,
}

fn main() {
    let settings = Settings {
        keys: setting("BENCH_KEYS", 1000),
        limit: setting("BENCH_LIMIT", 100),
        window_ms: setting("BENCH_WINDOW_MS", 60_000),
        checks: setting("BENCH_MAX_CHECKS", 100_000),
        concurrency: benches::list_setting("BENCH_CONCURRENCY", "1,50"),
        rounds: setting("BENCH_ROUNDS", 3),
        pipeline: setting("BENCH_PIPELINE", 16),
        redis_benchmark: setting("REDIS_BENCHMARK", "redis-benchmark".to_owned()),
    };
    let workers = setting(
        "BENCH_WORKERS",
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    let flavor: String = setting("BENCH_RUNTIME", "multi".to_owned());
    let runtime = match flavor.as_str() {
        "current" => tokio::runtime::Builder::new_current_thread(),
        "multi" => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(workers);
            builder
        }
        other => panic!("BENCH_RUNTIME={other}: expected `multi` or `current`"),
    }
    .enable_all()
    .build()
    .expect("a Tokio runtime");
    let redis = BenchRedis::start();
    let mut admin = redis.admin();
    let version: String = redis::cmd("INFO")
        .arg("server")
        .query::<String>(&mut admin)
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("redis_version:").map(str::to_owned))
        })
        .unwrap_or_default();
    eprintln!(
        "redis {version} at {}; Tokio runtime {flavor} ({workers} workers if multi); {} keys, {} per {} ms, {} checks, {} rounds",
        redis.url(),
        settings.keys,
        settings.limit,
        settings.window_ms,
        settings.checks,
        settings.rounds
    );
    let ours_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(OURS)
        .query(&mut admin)
        .expect("SCRIPT LOAD");
    let seeds_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SEEDS)
        .query(&mut admin)
        .expect("SCRIPT LOAD");
    let counter_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(COUNTER)
        .query(&mut admin)
        .expect("SCRIPT LOAD");
    let with_limit = settings.redis_benchmark != "none";

    // Per concurrency, per round: (ours, limit at the same -c, pipelined limit).
    let mut ratios: Vec<(usize, Vec<f64>, Vec<f64>)> = settings
        .concurrency
        .iter()
        .map(|&c| (c, Vec::new(), Vec::new()))
        .collect();
    let mut server_ours = Vec::new();
    let mut server_seeds = Vec::new();
    let mut server_counter = Vec::new();
    let mut server_limiter = Vec::new();
    // Per concurrency: (two limits / one limit, cost 10 / one limit) throughput, and the
    // same for server µs per check, each ratio within one round.
    let mut shapes: Vec<(usize, [Vec<f64>; 4])> = settings
        .concurrency
        .iter()
        .map(|&c| (c, Default::default()))
        .collect();
    let mut run = 0;
    for round in 0..settings.rounds {
        for (index, &concurrency) in settings.concurrency.iter().enumerate() {
            run += 1;
            // Alternate who goes first, so that neither side always runs on a warmer machine.
            let ours_first = round % 2 == 0;
            let mut ours = None;
            let mut limit = None;
            for step in 0..2 {
                if (step == 0) == ours_first {
                    clean(&redis, &mut admin);
                    let row = runtime.block_on(ours_run(
                        &redis,
                        &mut admin,
                        &settings,
                        concurrency,
                        &format!("bench:r{run:04}:"),
                        Shape::One,
                    ));
                    print_ours(concurrency, &row);
                    if concurrency > 1 {
                        // Beside the pipelined runs', which are all at c > 1.
                        server_limiter.push(row.server_us_per_check);
                    }
                    ours = Some(row);
                } else if with_limit {
                    clean(&redis, &mut admin);
                    let row = redis_benchmark(
                        &redis,
                        &mut admin,
                        &settings,
                        concurrency,
                        1,
                        &ours_sha,
                        &ours_args(&settings, run),
                    );
                    print_limit("ours", concurrency, 1, &row);
                    limit = Some(row);
                }
            }
            if let Some(one) = &ours {
                for (slot, shape) in [(0, Shape::TwoLimits), (1, Shape::Cost10)] {
                    clean(&redis, &mut admin);
                    let row = runtime.block_on(ours_run(
                        &redis,
                        &mut admin,
                        &settings,
                        concurrency,
                        &format!("bench:r{run:04}:"),
                        shape,
                    ));
                    print_shape(concurrency, shape, &row);
                    shapes[index].1[slot].push(row.checks_per_s / one.checks_per_s);
                    shapes[index].1[slot + 2]
                        .push(row.server_us_per_check / one.server_us_per_check);
                }
            }
            let (Some(ours), Some(limit)) = (ours, limit) else {
                continue;
            };
            ratios[index].1.push(ours.checks_per_s / limit.checks_per_s);
            if concurrency > 1 {
                clean(&redis, &mut admin);
                let piped = redis_benchmark(
                    &redis,
                    &mut admin,
                    &settings,
                    concurrency,
                    settings.pipeline,
                    &ours_sha,
                    &ours_args(&settings, run),
                );
                print_limit("ours", concurrency, settings.pipeline, &piped);
                ratios[index].2.push(ours.checks_per_s / piped.checks_per_s);
                server_ours.push(piped.server_us_per_check);
                clean(&redis, &mut admin);
                let seeds = redis_benchmark(
                    &redis,
                    &mut admin,
                    &settings,
                    concurrency,
                    settings.pipeline,
                    &seeds_sha,
                    &seeds_args(&settings, run),
                );
                print_limit("seeds", concurrency, settings.pipeline, &seeds);
                server_seeds.push(seeds.server_us_per_check);
                clean(&redis, &mut admin);
                let counter = redis_benchmark(
                    &redis,
                    &mut admin,
                    &settings,
                    concurrency,
                    settings.pipeline,
                    &counter_sha,
                    &counter_args(&settings, run),
                );
                print_limit("counter", concurrency, settings.pipeline, &counter);
                server_counter.push(counter.server_us_per_check);
            }
        }
    }
    clean(&redis, &mut admin);

    eprintln!(
        "\nmedian over {} rounds (each ratio side by side in one round):",
        settings.rounds
    );
    for (concurrency, same, piped) in &ratios {
        if same.is_empty() {
            continue;
        }
        let same = median(same);
        let target = if *concurrency == 1 { 0.95 } else { 0.9 };
        let mut line = format!(
            "{{\"name\":\"ratio\",\"concurrency\":{concurrency},\"vs\":\"redis-benchmark -c {concurrency}\",\"ratio\":{same:.3}"
        );
        if piped.is_empty() {
            line.push_str(&format!(",\"target\":{target}}}"));
        } else {
            line.push('}');
        }
        println!("{line}");
        eprintln!("  c={concurrency:<3} ours / redis-benchmark -c {concurrency}: {same:.3}");
        if !piped.is_empty() {
            let piped = median(piped);
            println!(
                "{{\"name\":\"ratio\",\"concurrency\":{concurrency},\"vs\":\"redis-benchmark -c {concurrency} -P {}\",\"ratio\":{piped:.3},\"target\":{target}}}",
                settings.pipeline
            );
            eprintln!(
                "  c={concurrency:<3} ours / redis-benchmark -c {concurrency} -P {}: {piped:.3}",
                settings.pipeline
            );
        }
    }
    for (concurrency, [two, cost, two_server, cost_server]) in &shapes {
        if two.is_empty() {
            continue;
        }
        let (two, cost) = (median(two), median(cost));
        let (two_server, cost_server) = (median(two_server), median(cost_server));
        println!(
            "{{\"name\":\"ratio\",\"concurrency\":{concurrency},\"what\":\"two limits / one limit\",\"checks_per_s\":{two:.3},\"server_us_per_check\":{two_server:.3},\"target\":{{\"checks_per_s\":0.6,\"server_us_per_check\":1.7}}}}"
        );
        println!(
            "{{\"name\":\"ratio\",\"concurrency\":{concurrency},\"what\":\"cost 10 / one limit\",\"checks_per_s\":{cost:.3},\"server_us_per_check\":{cost_server:.3}}}"
        );
        eprintln!(
            "  c={concurrency:<3} two limits / one: throughput {two:.3}, server time {two_server:.3}; cost 10 / one: throughput {cost:.3}, server time {cost_server:.3}"
        );
    }
    if !server_ours.is_empty() {
        let ours = median(&server_ours);
        let seeds = median(&server_seeds);
        let limiter = median(&server_limiter);
        println!(
            "{{\"name\":\"ratio\",\"what\":\"server_us_per_check ours/seeds (redis-benchmark -P {})\",\"ours\":{ours:.3},\"seeds\":{seeds:.3},\"ratio\":{:.3},\"target\":1.0}}",
            settings.pipeline,
            ours / seeds
        );
        eprintln!(
            "  Redis time per check: ours {ours:.2} µs, seeds' {seeds:.2} µs: ratio {:.3} (through the limiter at c > 1: {limiter:.2} µs)",
            ours / seeds
        );
        let counter = median(&server_counter);
        println!(
            "{{\"name\":\"ratio\",\"what\":\"server_us_per_check counter/seeds (redis-benchmark -P {})\",\"counter\":{counter:.3},\"seeds\":{seeds:.3},\"log\":{ours:.3},\"ratio\":{:.3},\"vs_log\":{:.3},\"target\":1.0}}",
            settings.pipeline,
            counter / seeds,
            counter / ours
        );
        eprintln!(
            "  Redis time per check: counter {counter:.2} µs: {:.3} × seeds', {:.3} × the log's",
            counter / seeds,
            counter / ours
        );
    }
}

/// The arguments after `EVALSHA <sha>` for our script: a random key per call, a unique member
/// (two random numbers), the server's clock (`""`), as `Limiter::check` sends them.
fn ours_args(settings: &Settings, run: usize) -> Vec<String> {
    vec![
        "1".into(),
        format!("bench:b{run:04}:__rand_int__"),
        (settings.window_ms * 1000).to_string(),
        settings.limit.to_string(),
        "m:__rand_int__:__rand_int__".into(),
        String::new(),
    ]
}

/// Our counter script: a random key per call (its hash), the period, threshold and cost, the
/// server's clock (`""`), as `Limiter::check` sends them.
fn counter_args(settings: &Settings, run: usize) -> Vec<String> {
    vec![
        "1".into(),
        format!("bench:c{run:04}:__rand_int__#swc"),
        (settings.window_ms * 1000).to_string(),
        settings.limit.to_string(),
        "1".into(),
        String::new(),
    ]
}

/// The seeds' script: the same key, a fixed time (see [`SEEDS`]), window, threshold, member.
fn seeds_args(settings: &Settings, run: usize) -> Vec<String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    vec![
        "1".into(),
        format!("bench:s{run:04}:__rand_int__"),
        now.to_string(),
        (settings.window_ms * 1000).to_string(),
        settings.limit.to_string(),
        "m:__rand_int__:__rand_int__".into(),
    ]
}

/// Empties a private server between runs (keys expire on their own on a given one: ours in a
/// window, the seeds' are deleted by pattern).
fn clean(redis: &BenchRedis, admin: &mut redis::Connection) {
    if redis.is_private() {
        let () = redis::cmd("FLUSHALL").query(admin).expect("FLUSHALL");
        return;
    }
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("bench:*")
        .query(admin)
        .unwrap_or_default();
    for chunk in keys.chunks(1000) {
        let _: Result<usize, _> = redis::cmd("UNLINK").arg(chunk).query(admin);
    }
}

async fn ours_run(
    redis: &BenchRedis,
    admin: &mut redis::Connection,
    settings: &Settings,
    concurrency: usize,
    prefix: &str,
    shape: Shape,
) -> Row {
    // Every check a round trip: this measures the store (`flood` measures the deny cache).
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .deny_cache(false)
        .build()
        .expect("a Redis limiter");
    let rate =
        Rate::new(settings.limit, Duration::from_millis(settings.window_ms)).expect("a valid rate");
    let daily = Rate::new(u32::MAX.into(), Duration::from_secs(86_400)).expect("a valid rate");
    // Connect (and load the scripts) before the clock starts.
    limiter.check("warm-up", rate).await.expect("Redis answers");
    limiter
        .check_n("warm-up", rate, 2)
        .await
        .expect("Redis answers");
    reset_stats(admin);
    let keys: Arc<[&'static str]> = key_names(settings.keys, KEY_DIGITS).into();
    let next = Arc::new(AtomicUsize::new(0));
    let checks = settings.checks;
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let limiter = limiter.clone();
            let keys = Arc::clone(&keys);
            let next = Arc::clone(&next);
            tokio::spawn(async move {
                let mut rng = Rng::new(task as u64 + 1);
                let mut latencies = Vec::with_capacity(checks / concurrency + 1);
                let mut allowed = 0;
                while next.fetch_add(1, Ordering::Relaxed) < checks {
                    let key = keys[rng.below(keys.len())];
                    let began = Instant::now();
                    let admitted = match shape {
                        Shape::One => limiter.check(key, rate).await.map(|d| d.allowed),
                        Shape::Cost10 => limiter.check_n(key, rate, 10).await.map(|d| d.allowed),
                        Shape::TwoLimits => limiter
                            .check_all([
                                Limit::new(format!("{{{key}}}:burst"), rate),
                                Limit::new(format!("{{{key}}}:daily"), daily),
                            ])
                            .await
                            .map(|d| d.allowed),
                    };
                    latencies.push(began.elapsed());
                    allowed += usize::from(admitted.expect("Redis answers"));
                }
                (latencies, allowed)
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(checks);
    let mut allowed = 0;
    for task in tasks {
        let (mine, admitted) = task.await.expect("a bench task");
        latencies.extend(mine);
        allowed += admitted;
    }
    let elapsed = start.elapsed();
    let (calls, usec) = command_stats(admin, "evalsha");
    latencies.sort_unstable();
    Row {
        checks,
        checks_per_s: checks as f64 / elapsed.as_secs_f64(),
        p50_us: percentile_us(&latencies, 50.0),
        p99_us: percentile_us(&latencies, 99.0),
        allowed: Some(allowed),
        server_us_per_check: usec as f64 / calls.max(1) as f64,
    }
}

/// `redis-benchmark --csv -n <checks> -r <keys> -c <concurrency> -P <pipeline> EVALSHA <sha>
/// <args>` against the same server, with its server time from `INFO commandstats`.
fn redis_benchmark(
    redis: &BenchRedis,
    admin: &mut redis::Connection,
    settings: &Settings,
    concurrency: usize,
    pipeline: usize,
    sha: &str,
    args: &[String],
) -> Row {
    reset_stats(admin);
    let run = benches::redis_benchmark(
        redis,
        &settings.redis_benchmark,
        &benches::BenchmarkLoad {
            checks: settings.checks,
            keys: settings.keys,
            concurrency,
            pipeline,
        },
        sha,
        args,
    );
    let (calls, usec) = command_stats(admin, "evalsha");
    let failed: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(admin)
        .unwrap_or_default();
    assert!(
        !failed.contains("errorstat_"),
        "the script failed under redis-benchmark: {failed}"
    );
    Row {
        checks: settings.checks,
        checks_per_s: run.checks_per_s,
        p50_us: run.p50_us,
        p99_us: run.p99_us,
        allowed: None,
        server_us_per_check: usec as f64 / calls.max(1) as f64,
    }
}

fn print_ours(concurrency: usize, row: &Row) {
    println!(
        "{{\"name\":\"ratelimit\",\"concurrency\":{concurrency},\"checks\":{},\"checks_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\"allowed\":{},\"server_us_per_check\":{:.3}}}",
        row.checks,
        row.checks_per_s,
        row.p50_us,
        row.p99_us,
        row.allowed.unwrap_or(0),
        row.server_us_per_check
    );
    eprintln!(
        "  ratelimit       c={concurrency:<3}      {:>9.0} checks/s  p50 {:>7.1} µs  p99 {:>7.1} µs  server {:.2} µs/check  allowed {}",
        row.checks_per_s,
        row.p50_us,
        row.p99_us,
        row.server_us_per_check,
        row.allowed.unwrap_or(0)
    );
}

fn print_shape(concurrency: usize, shape: Shape, row: &Row) {
    println!(
        "{{\"name\":\"ratelimit\",\"shape\":\"{}\",\"concurrency\":{concurrency},\"checks\":{},\"checks_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\"allowed\":{},\"server_us_per_check\":{:.3}}}",
        shape.name(),
        row.checks,
        row.checks_per_s,
        row.p50_us,
        row.p99_us,
        row.allowed.unwrap_or(0),
        row.server_us_per_check
    );
    eprintln!(
        "  ours c={concurrency:<3} {:<10} {:>9.0} checks/s  p50 {:>7.1} µs  p99 {:>7.1} µs  server {:.2} µs/check",
        shape.name(),
        row.checks_per_s,
        row.p50_us,
        row.p99_us,
        row.server_us_per_check
    );
}

fn print_limit(script: &str, concurrency: usize, pipeline: usize, row: &Row) {
    println!(
        "{{\"name\":\"redis-benchmark\",\"script\":\"{script}\",\"concurrency\":{concurrency},\"pipeline\":{pipeline},\"checks\":{},\"checks_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\"server_us_per_check\":{:.3}}}",
        row.checks, row.checks_per_s, row.p50_us, row.p99_us, row.server_us_per_check
    );
    eprintln!(
        "  redis-benchmark c={concurrency:<3} P={pipeline:<3} {:>9.0} checks/s  p50 {:>7.1} µs  p99 {:>7.1} µs  server {:.2} µs/check  ({script} script)",
        row.checks_per_s, row.p50_us, row.p99_us, row.server_us_per_check
    );
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}
