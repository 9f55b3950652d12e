//! A flood of denied calls: what the deny cache saves Redis, side by side in one run with the
//! most one Redis can answer.
//!
//! The flood: `BENCH_TASKS` (50) Tokio tasks check `BENCH_HOT_KEYS` (10) keys in turn, threshold
//! `BENCH_LIMIT` (100) per 60 s, for `BENCH_SECONDS` (10) s, through one Redis limiter: with
//! the deny cache (the default), then without it. The first `threshold` checks of each key are
//! admitted; every later one is denied (nothing leaves a 60 s window in 10 s). The limit:
//! `redis-benchmark -c 50 -P 16` sending our script's `EVALSHA` for the same keys, already full,
//! so that every call is a denial, as the flood's are. `INFO commandstats` counts the scripts
//! that reached Redis during each flood.
//!
//! The targets (issue 15): with the cache, at least 10× the `redis-benchmark` rate; each
//! admission reaches Redis once; the denials that reach Redis are at most the checks in flight
//! when a window filled (one per task) plus one per cache expiry per key (the time to live is
//! 1 s).
//!
//! Settings (environment): `BENCH_REDIS_URL` (unset: a private `redis-server`), `BENCH_TASKS`,
//! `BENCH_HOT_KEYS`, `BENCH_LIMIT`, `BENCH_SECONDS`, `BENCH_WORKERS` (the runtime's workers:
//! the number of cores), `REDIS_BENCHMARK` (the binary; `none` skips the limit).
//!
//! Stdout: JSON lines (`flood` rows, the `redis-benchmark` row, the `ratio` row); stderr: a
//! table.

use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::{BenchRedis, BenchmarkLoad, command_stats, reset_stats, setting};
use ratelimit_runtime::{Limiter, LimiterBuilder, Rate};

/// Our script, the one a check of one log at cost 1 runs.
const OURS: &str = include_str!("../../../ratelimit-runtime/src/store/redis/sliding_window.lua");

/// Checks a task makes between two yields, so that the 50 tasks share the workers.
const BATCH: u64 = 64;

/// What one flood measured.
struct Flood {
    checks: u64,
    admitted: u64,
    elapsed: Duration,
    /// Scripts Redis ran during the flood.
    scripts: u64,
    cached: u64,
}

impl Flood {
    fn checks_per_s(&self) -> f64 {
        self.checks as f64 / self.elapsed.as_secs_f64()
    }
}

struct Settings {
    tasks: usize,
    keys: usize,
    limit: u64,
    seconds: u64,
    redis_benchmark: String,
}

fn main() {
    let settings = Settings {
        tasks: setting("BENCH_TASKS", 50),
        keys: setting("BENCH_HOT_KEYS", 10),
        limit: setting("BENCH_LIMIT", 100),
        seconds: setting("BENCH_SECONDS", 10),
        redis_benchmark: setting("REDIS_BENCHMARK", "redis-benchmark".to_owned()),
    };
    let workers = setting(
        "BENCH_WORKERS",
        std::thread::available_parallelism().map_or(1, usize::from),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let redis = BenchRedis::start();
    let mut admin = redis.admin();
    let rate = Rate::new(settings.limit, Duration::from_secs(60)).expect("a rate");
    eprintln!(
        "{} tasks, {} hot keys, {} per 60 s, {} s per flood, {workers} workers; redis at {}",
        settings.tasks,
        settings.keys,
        settings.limit,
        settings.seconds,
        redis.url()
    );

    let run = std::process::id();
    let cached = runtime.block_on(flood(&redis, &mut admin, &settings, rate, true, run));
    print_flood("deny cache", &cached, &settings);
    let uncached = runtime.block_on(flood(&redis, &mut admin, &settings, rate, false, run));
    print_flood("no deny cache", &uncached, &settings);

    // Per key: the checks in flight when its window filled (at most one per task), and one
    // per expiry of its entry (plus the one in flight when the flood ends).
    let expiries = settings
        .seconds
        .div_ceil(LimiterBuilder::DEFAULT_DENY_CACHE_TTL.as_secs().max(1))
        + 1;
    let bound = (settings.tasks as u64 + expiries) * settings.keys as u64;
    let denied_sent = cached.scripts.saturating_sub(cached.admitted);
    println!(
        "{{\"name\":\"flood_redis_calls\",\"admitted\":{},\"scripts\":{},\"denied_sent\":{denied_sent},\"bound\":{bound},\"within\":{}}}",
        cached.admitted,
        cached.scripts,
        denied_sent <= bound
    );
    eprintln!(
        "  with the cache: {} admitted, {} scripts reached Redis: {denied_sent} denials sent (bound {bound}: ({} in flight + {expiries} expiries) × {} keys)",
        cached.admitted, cached.scripts, settings.tasks, settings.keys
    );
    eprintln!(
        "  cache on / off: {:.1}×",
        cached.checks_per_s() / uncached.checks_per_s()
    );
    if settings.redis_benchmark == "none" {
        return;
    }
    let limit = limit(&redis, &mut admin, &settings, rate, &runtime);
    let ratio = cached.checks_per_s() / limit;
    println!(
        "{{\"name\":\"ratio\",\"what\":\"flood checks/s with the deny cache / redis-benchmark -c 50 -P 16\",\"ratio\":{ratio:.2},\"target\":10}}"
    );
    eprintln!(
        "  with the cache / redis-benchmark -c 50 -P 16: {ratio:.1}× (target ≥ 10×); without: {:.2}×",
        uncached.checks_per_s() / limit
    );
}

/// One flood of `settings.tasks` tasks on fresh keys, the deny cache on or off.
async fn flood(
    redis: &BenchRedis,
    admin: &mut redis::Connection,
    settings: &Settings,
    rate: Rate,
    deny_cache: bool,
    run: u32,
) -> Flood {
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(format!("flood:{run}:{deny_cache}:"))
        .deny_cache(deny_cache)
        .build()
        .expect("a Redis limiter");
    // Connected, and the script loaded, before the clock starts.
    limiter.check("warm-up", rate).await.expect("a check");
    let keys: Arc<Vec<String>> = Arc::new((0..settings.keys).map(|i| format!("hot:{i}")).collect());
    reset_stats(admin);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(settings.seconds);
    let tasks: Vec<_> = (0..settings.tasks)
        .map(|task| {
            let (limiter, keys) = (limiter.clone(), Arc::clone(&keys));
            tokio::spawn(async move {
                let (mut checks, mut admitted) = (0_u64, 0_u64);
                let mut next = task % keys.len();
                while Instant::now() < deadline {
                    for _ in 0..BATCH {
                        let decision = limiter.check(&keys[next], rate).await.expect("a check");
                        admitted += u64::from(decision.allowed);
                        checks += 1;
                        next = (next + 1) % keys.len();
                    }
                    tokio::task::yield_now().await;
                }
                (checks, admitted)
            })
        })
        .collect();
    let (mut checks, mut admitted) = (0, 0);
    for task in tasks {
        let (c, a) = task.await.expect("a flood task");
        checks += c;
        admitted += a;
    }
    let elapsed = started.elapsed();
    let (scripts, _) = command_stats(admin, "evalsha");
    assert_eq!(
        admitted,
        settings.limit * settings.keys as u64,
        "each hot key admits its threshold, no more"
    );
    Flood {
        checks,
        admitted,
        elapsed,
        scripts,
        cached: limiter.deny_cache_answers(),
    }
}

/// `redis-benchmark -c 50 -P 16` sending our script for the hot keys, already full: the most
/// denials per second one Redis answers.
fn limit(
    redis: &BenchRedis,
    admin: &mut redis::Connection,
    settings: &Settings,
    rate: Rate,
    runtime: &tokio::runtime::Runtime,
) -> f64 {
    let prefix = format!("flood:{}:bench:", std::process::id());
    // Fill the keys redis-benchmark names (`__rand_int__`: 12 digits below the key count).
    runtime.block_on(async {
        let limiter = Limiter::builder()
            .redis_url(redis.url())
            .key_prefix(&prefix)
            .deny_cache(false)
            .build()
            .expect("a Redis limiter");
        for key in benches::key_names(settings.keys, 12) {
            for _ in 0..rate.threshold() {
                assert!(limiter.check(key, rate).await.expect("a check").allowed);
            }
        }
    });
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(OURS)
        .query(admin)
        .expect("SCRIPT LOAD");
    let args = vec![
        "1".to_owned(),
        format!("{prefix}__rand_int__"),
        rate.period().as_micros().to_string(),
        rate.threshold().to_string(),
        // Never admitted: the keys are full, and this member is in none of them.
        "denied:__rand_int__".to_owned(),
        String::new(),
    ];
    let load = BenchmarkLoad {
        checks: 2_000_000,
        keys: settings.keys,
        concurrency: 50,
        pipeline: 16,
    };
    let run = benches::redis_benchmark(redis, &settings.redis_benchmark, &load, &sha, &args);
    println!(
        "{{\"name\":\"redis-benchmark\",\"concurrency\":50,\"pipeline\":16,\"checks\":{},\"checks_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1}}}",
        load.checks, run.checks_per_s, run.p50_us, run.p99_us
    );
    eprintln!(
        "  redis-benchmark -c 50 -P 16 (all denials) {:>11.0} checks/s",
        run.checks_per_s
    );
    run.checks_per_s
}

fn print_flood(name: &str, flood: &Flood, settings: &Settings) {
    println!(
        "{{\"name\":\"flood\",\"deny_cache\":{},\"tasks\":{},\"keys\":{},\"seconds\":{:.3},\"checks\":{},\"checks_per_s\":{:.0},\"admitted\":{},\"scripts\":{},\"cached\":{}}}",
        name == "deny cache",
        settings.tasks,
        settings.keys,
        flood.elapsed.as_secs_f64(),
        flood.checks,
        flood.checks_per_s(),
        flood.admitted,
        flood.scripts,
        flood.cached
    );
    eprintln!(
        "  flood, {name:<14} {:>11.0} checks/s  {:>10} checks  {:>8} scripts reached Redis  {:>10} answered by the cache",
        flood.checks_per_s(),
        flood.checks,
        flood.scripts,
        flood.cached
    );
}
