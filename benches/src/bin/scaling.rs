//! Cost per check and memory per key as the number of keys and the threshold grow, for the
//! in-process store and for Redis.
//!
//! Each row fills `keys` keys with `threshold` admissions each (every window full, a period
//! of one hour so nothing leaves it), then times `BENCH_SCALING_CHECKS` checks on keys drawn at
//! random (all denied: the steady state of a limited key). Memory per key: for the in-process
//! store, the bytes the store holds (a counting allocator); for Redis, the growth of
//! `used_memory` (`INFO memory`) and `MEMORY USAGE` of one key. Redis is filled with `ZADD`s
//! of the members and scores the script writes (22-character members, microsecond scores),
//! pipelined, since a million checks through the script would take minutes.
//!
//! Then the same for the sliding window counter, at 10 keys and thresholds 10, 1,000 and
//! 100,000, each key filled by one check of cost `threshold` through the limiter (the counter
//! takes it: a cost is a number added to a count), and a last table of counter against log.
//!
//! Settings: `BENCH_REDIS_URL` (unset: a private `redis-server`), `BENCH_SCALING_CHECKS`
//! (200000 in process, a tenth of it through Redis), `BENCH_SCALING_MAX_KEYS` (1000000: rows
//! with more keys are skipped), `BENCH_CONCURRENCY` (its last value: the Redis tasks, 50).
//! Stdout: one JSON line per row and store; stderr: a table of ratios to the first row.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use benches::{BenchRedis, Rng, command_stats, key_names, reset_stats, setting, used_memory};
use ratelimit_runtime::{Algorithm, FailurePolicy, Limiter, Rate};
use tests::counting_alloc::poll_ready as ready;

/// The system allocator, keeping the count of bytes live.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed on to `System` unchanged; the count is one atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The rows: keys growing at threshold 10, then the threshold growing at 10 keys.
const ROWS: [(usize, u64); 6] = [
    (1, 10),
    (1_000, 10),
    (1_000_000, 10),
    (10, 10),
    (10, 1_000),
    (10, 100_000),
];

/// The counter's rows, the log's last three beside them.
const COUNTER_ROWS: [(usize, u64); 3] = [(10, 10), (10, 1_000), (10, 100_000)];

struct Measured {
    ns_per_check: f64,
    bytes_per_key: f64,
    /// Redis only: `MEMORY USAGE` of one key, and the server's time per check.
    usage_per_key: Option<u64>,
    server_us_per_check: Option<f64>,
}

fn main() {
    let checks: usize = setting("BENCH_SCALING_CHECKS", 200_000);
    let max_keys: usize = setting("BENCH_SCALING_MAX_KEYS", 1_000_000);
    let concurrency = *benches::list_setting("BENCH_CONCURRENCY", "1,50")
        .last()
        .unwrap_or(&50);
    let rows: Vec<_> = ROWS
        .iter()
        .filter(|(k, _)| *k <= max_keys)
        .copied()
        .collect();
    let names = key_names(rows.iter().map(|r| r.0).max().unwrap_or(1), 12);

    let log = Algorithm::SlidingWindowLog;
    let counter = Algorithm::SlidingWindowCounter;
    let mut memory = Vec::new();
    for &(keys, threshold) in &rows {
        let row = memory_row(&names[..keys], threshold, checks, log);
        print_row("memory", log, keys, threshold, &row);
        memory.push(row);
    }
    let mut memory_counter = Vec::new();
    for &(keys, threshold) in &COUNTER_ROWS {
        let row = memory_row(&names[..keys], threshold, checks, counter);
        print_row("memory", counter, keys, threshold, &row);
        memory_counter.push(row);
    }

    let redis = BenchRedis::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    let mut through_redis = Vec::new();
    for &(keys, threshold) in &rows {
        let row = runtime.block_on(redis_row(
            &redis,
            &names[..keys],
            threshold,
            (checks / 10).max(1),
            concurrency,
            log,
        ));
        print_row("redis", log, keys, threshold, &row);
        through_redis.push(row);
    }
    let mut redis_counter = Vec::new();
    for &(keys, threshold) in &COUNTER_ROWS {
        let row = runtime.block_on(redis_row(
            &redis,
            &names[..keys],
            threshold,
            (checks / 10).max(1),
            concurrency,
            counter,
        ));
        print_row("redis", counter, keys, threshold, &row);
        redis_counter.push(row);
    }

    eprintln!(
        "\n| keys | threshold | memory: time/check | memory: bytes/key | Redis: time/check | Redis: server time/check | Redis: bytes/key (used_memory) | Redis: MEMORY USAGE/key |"
    );
    eprintln!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    let (m0, r0) = (&memory[0], &through_redis[0]);
    for (i, &(keys, threshold)) in rows.iter().enumerate() {
        let (m, r) = (&memory[i], &through_redis[i]);
        eprintln!(
            "| {keys} | {threshold} | {:.2}× | {:.0} B | {:.2}× | {:.2}× | {:.0} B | {} B |",
            m.ns_per_check / m0.ns_per_check,
            m.bytes_per_key,
            r.ns_per_check / r0.ns_per_check,
            r.server_us_per_check.unwrap_or(f64::NAN) / r0.server_us_per_check.unwrap_or(f64::NAN),
            r.bytes_per_key,
            r.usage_per_key.unwrap_or(0),
        );
    }

    eprintln!(
        "\n| threshold (10 keys, full) | log: memory B/key | counter: memory B/key | log: Redis MEMORY USAGE/key | counter: Redis MEMORY USAGE/key | log: Redis server µs/check | counter: Redis server µs/check | counter/log server time | counter/log in-process time |"
    );
    eprintln!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, &(keys, threshold)) in COUNTER_ROWS.iter().enumerate() {
        let Some(at) = rows.iter().position(|&row| row == (keys, threshold)) else {
            continue;
        };
        let (ml, mc) = (&memory[at], &memory_counter[i]);
        let (rl, rc) = (&through_redis[at], &redis_counter[i]);
        let (sl, sc) = (
            rl.server_us_per_check.unwrap_or(f64::NAN),
            rc.server_us_per_check.unwrap_or(f64::NAN),
        );
        eprintln!(
            "| {threshold} | {:.0} | {:.0} | {} | {} | {sl:.2} | {sc:.2} | {:.2}× | {:.2}× |",
            ml.bytes_per_key,
            mc.bytes_per_key,
            rl.usage_per_key.unwrap_or(0),
            rc.usage_per_key.unwrap_or(0),
            sc / sl,
            mc.ns_per_check / ml.ns_per_check,
        );
    }
}

fn print_row(store: &str, algorithm: Algorithm, keys: usize, threshold: u64, row: &Measured) {
    let mut line = format!(
        "{{\"name\":\"scaling\",\"store\":\"{store}\",\"algorithm\":\"{}\",\"keys\":{keys},\"threshold\":{threshold},\"ns_per_check\":{:.1},\"bytes_per_key\":{:.1}",
        algorithm.name(),
        row.ns_per_check,
        row.bytes_per_key
    );
    if let Some(usage) = row.usage_per_key {
        line.push_str(&format!(",\"memory_usage_per_key\":{usage}"));
    }
    if let Some(server) = row.server_us_per_check {
        line.push_str(&format!(",\"server_us_per_check\":{server:.3}"));
    }
    line.push('}');
    println!("{line}");
    eprintln!("{line}");
}

fn rate(threshold: u64, algorithm: Algorithm) -> Rate {
    Rate::new(threshold, Duration::from_secs(3600))
        .expect("a valid rate")
        .with_algorithm(algorithm)
}

/// The cost of one check that fills a counter to `threshold`.
fn full_cost(threshold: u64) -> u32 {
    u32::try_from(threshold).expect("a threshold")
}

fn memory_row(
    names: &[&'static str],
    threshold: u64,
    checks: usize,
    algorithm: Algorithm,
) -> Measured {
    let rate = rate(threshold, algorithm);
    let limiter = Limiter::memory();
    let before = LIVE.load(Ordering::Relaxed);
    for &key in names {
        if algorithm == Algorithm::SlidingWindowCounter {
            let decision = ready(limiter.check_n(key, rate, full_cost(threshold)));
            assert!(decision.expect("in process").allowed);
            continue;
        }
        for _ in 0..threshold {
            let decision = ready(limiter.check(key, rate)).expect("in process");
            assert!(decision.allowed);
        }
    }
    let bytes = LIVE.load(Ordering::Relaxed) - before;
    let mut rng = Rng::new(7);
    let picks: Vec<&str> = (0..checks).map(|_| names[rng.below(names.len())]).collect();
    let start = Instant::now();
    for &key in &picks {
        let decision = ready(limiter.check(key, rate)).expect("in process");
        std::hint::black_box(decision);
    }
    let elapsed = start.elapsed();
    drop(limiter);
    Measured {
        ns_per_check: elapsed.as_nanos() as f64 / checks as f64,
        bytes_per_key: bytes as f64 / names.len() as f64,
        usage_per_key: None,
        server_us_per_check: None,
    }
}

async fn redis_row(
    redis: &BenchRedis,
    names: &[&'static str],
    threshold: u64,
    checks: usize,
    concurrency: usize,
    algorithm: Algorithm,
) -> Measured {
    const PREFIX: &str = "bench:scaling:";
    let mut admin = redis.admin();
    if redis.is_private() {
        let () = redis::cmd("FLUSHALL").query(&mut admin).expect("FLUSHALL");
    } else {
        let _: Result<usize, _> = redis::cmd("EVAL")
            .arg("local n = 0 for _, k in ipairs(redis.call('KEYS', ARGV[1])) do n = n + redis.call('UNLINK', k) end return n")
            .arg(0)
            .arg(format!("{PREFIX}*"))
            .query(&mut admin);
    }
    let before = used_memory(&mut admin);
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(PREFIX)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a Redis limiter");
    let rate = rate(threshold, algorithm);
    if algorithm == Algorithm::SlidingWindowCounter {
        for &key in names {
            let decision = limiter.check_n(key, rate, full_cost(threshold)).await;
            assert!(decision.expect("Redis answers").allowed);
        }
    } else {
        fill_logs(&mut admin, PREFIX, names, threshold);
    }
    let bytes = used_memory(&mut admin).saturating_sub(before);
    let suffix = if algorithm == Algorithm::SlidingWindowCounter {
        "#swc"
    } else {
        ""
    };
    let usage: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(format!("{PREFIX}{}{suffix}", names[0]))
        .arg("SAMPLES")
        .arg(0)
        .query(&mut admin)
        .ok();
    limiter.check(names[0], rate).await.expect("Redis answers");
    reset_stats(&mut admin);
    let names: Arc<[&'static str]> = names.into();
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let (limiter, names, next) = (limiter.clone(), Arc::clone(&names), Arc::clone(&next));
            tokio::spawn(async move {
                let mut rng = Rng::new(task as u64 + 1);
                while next.fetch_add(1, Ordering::Relaxed) < checks {
                    let key = names[rng.below(names.len())];
                    let decision = limiter.check(key, rate).await.expect("Redis answers");
                    assert!(!decision.allowed, "the windows are full");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a bench task");
    }
    let elapsed = start.elapsed();
    let (calls, usec) = command_stats(&mut admin, "evalsha");
    Measured {
        ns_per_check: elapsed.as_nanos() as f64 / checks as f64,
        bytes_per_key: bytes as f64 / names.len() as f64,
        usage_per_key: usage,
        server_us_per_check: Some(usec as f64 / calls.max(1) as f64),
    }
}

/// Fills each log with `threshold` admissions a microsecond apart, the newest a second ago,
/// by `ZADD`s of the members and scores the script writes, pipelined.
fn fill_logs(admin: &mut redis::Connection, prefix: &str, names: &[&'static str], threshold: u64) {
    // Fill: `threshold` admissions a microsecond apart, the newest a second ago.
    let now_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_micros() as u64;
    let start_us = now_us - 1_000_000 - threshold;
    let mut member = 0_u64;
    let mut pipe = redis::pipe();
    let mut queued = 0;
    for &key in names {
        let full = format!("{prefix}{key}");
        let mut sent = 0;
        while sent < threshold {
            let batch = (threshold - sent).min(1000);
            let mut zadd = redis::cmd("ZADD");
            zadd.arg(&full);
            for i in 0..batch {
                zadd.arg(start_us + sent + i).arg(format!("{member:022}"));
                member += 1;
            }
            pipe.add_command(zadd).ignore();
            sent += batch;
            queued += 1;
        }
        pipe.cmd("PEXPIRE").arg(&full).arg(3_700_000).ignore();
        queued += 1;
        if queued >= 200 {
            let () = pipe.query(admin).expect("fill Redis");
            pipe = redis::pipe();
            queued = 0;
        }
    }
    if queued > 0 {
        let () = pipe.query(admin).expect("fill Redis");
    }
}
