//! Shared pieces of the benchmarks (see `BENCHMARKS.md` at the root): settings from the
//! environment, a private Redis, `INFO commandstats`, a small random number generator and
//! percentiles.
//!
//! The binaries (`redis`, `scaling`) print JSON lines on stdout and everything else on stderr.

use std::time::Duration;

pub use ::tests::TestRedis;

/// A setting from the environment, or `default` when unset or empty.
///
/// # Panics
///
/// When the variable is set but does not parse.
#[must_use]
pub fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) if !value.trim().is_empty() => value
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} does not parse")),
        _ => default,
    }
}

/// A comma-separated list setting (`BENCH_CONCURRENCY=1,50`).
///
/// # Panics
///
/// When an item does not parse.
#[must_use]
pub fn list_setting(name: &str, default: &str) -> Vec<usize> {
    let value = std::env::var(name)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned());
    value
        .split(',')
        .map(|item| {
            item.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}={value}: `{item}` is not a number"))
        })
        .collect()
}

/// The Redis the benchmarks run against: `BENCH_REDIS_URL`, or a private `redis-server` on a
/// free loopback port (killed on drop).
pub struct BenchRedis {
    url: String,
    /// Keeps the private server alive.
    _private: Option<TestRedis>,
}

impl BenchRedis {
    /// `BENCH_REDIS_URL`, or a private server.
    #[must_use]
    pub fn start() -> BenchRedis {
        match std::env::var("BENCH_REDIS_URL") {
            Ok(url) if !url.is_empty() => BenchRedis {
                url,
                _private: None,
            },
            _ => {
                let private = TestRedis::start_private();
                BenchRedis {
                    url: private.url().to_owned(),
                    _private: Some(private),
                }
            }
        }
    }

    /// `redis://host:port/`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `true` when the server was started here, so it may be flushed between runs.
    #[must_use]
    pub fn is_private(&self) -> bool {
        self._private.is_some()
    }

    /// Host and port, for `redis-benchmark -h -p`.
    ///
    /// # Panics
    ///
    /// On a URL that names no host and port.
    #[must_use]
    pub fn host_port(&self) -> (String, u16) {
        let info = redis::Client::open(self.url.as_str())
            .expect("a valid Redis URL")
            .get_connection_info()
            .clone();
        match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            other => panic!("redis-benchmark needs a TCP address, not {other:?}"),
        }
    }

    /// A plain synchronous connection, for administration (`CONFIG RESETSTAT`, `INFO`).
    ///
    /// # Panics
    ///
    /// When the server cannot be reached.
    #[must_use]
    pub fn admin(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .expect("a valid Redis URL")
            .get_connection()
            .expect("connect to the benchmark's Redis")
    }
}

/// `CONFIG RESETSTAT`: zeroes `INFO commandstats`.
///
/// # Panics
///
/// When the command fails.
pub fn reset_stats(admin: &mut redis::Connection) {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(admin)
        .expect("CONFIG RESETSTAT");
}

/// Calls and microseconds spent in `command` (lowercase, e.g. `evalsha`) since the last
/// [`reset_stats`], from `INFO commandstats`.
///
/// # Panics
///
/// When `INFO` fails.
#[must_use]
pub fn command_stats(admin: &mut redis::Connection, command: &str) -> (u64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(admin)
        .expect("INFO commandstats");
    parse_command_stats(&info, command)
}

/// `(calls, usec)` of `cmdstat_<command>` in an `INFO commandstats` reply; zeros when absent.
#[must_use]
pub fn parse_command_stats(info: &str, command: &str) -> (u64, u64) {
    let prefix = format!("cmdstat_{command}:");
    let Some(line) = info.lines().find_map(|line| line.strip_prefix(&prefix)) else {
        return (0, 0);
    };
    let field = |name: &str| {
        line.split(',')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

/// `used_memory` from `INFO memory`, in bytes.
///
/// # Panics
///
/// When `INFO` fails.
#[must_use]
pub fn used_memory(admin: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(admin)
        .expect("INFO memory");
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// xorshift64*: a fast, seedable generator for picking keys (not for anything secret).
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is replaced).
    #[must_use]
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next number below `bound`.
    pub fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        ((u128::from(x) * bound as u128) >> 64) as usize
    }
}

/// The load of one `redis-benchmark` run.
pub struct BenchmarkLoad {
    /// Requests in all (`-n`).
    pub checks: usize,
    /// The range of `__rand_int__` (`-r`): how many keys.
    pub keys: usize,
    /// Connections (`-c`).
    pub concurrency: usize,
    /// Requests pipelined per connection (`-P`).
    pub pipeline: usize,
}

/// What a `redis-benchmark` run measured: requests per second, and latency percentiles in µs.
pub struct BenchmarkRun {
    /// Requests per second.
    pub checks_per_s: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
}

/// Runs `<binary> --csv -n -r -c -P EVALSHA <sha> <args>` against `redis` under `load`
/// (`__rand_int__` in `args` becomes a random 12-digit number below `load.keys`).
///
/// # Panics
///
/// When the binary cannot be run, fails, or prints no CSV row.
#[must_use]
pub fn redis_benchmark(
    redis: &BenchRedis,
    binary: &str,
    load: &BenchmarkLoad,
    sha: &str,
    args: &[String],
) -> BenchmarkRun {
    let (host, port) = redis.host_port();
    let output = std::process::Command::new(binary)
        .args(["-h", &host, "-p", &port.to_string()])
        .args(["-n", &load.checks.to_string()])
        .args(["-r", &load.keys.to_string()])
        .args(["-c", &load.concurrency.to_string()])
        .args(["-P", &load.pipeline.to_string()])
        .arg("--csv")
        .arg("EVALSHA")
        .arg(sha)
        .args(args)
        .output()
        .unwrap_or_else(|err| {
            panic!("could not run `{binary}` ({err}); set REDIS_BENCHMARK=none to skip the limit")
        });
    assert!(
        output.status.success(),
        "redis-benchmark failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let csv = String::from_utf8_lossy(&output.stdout);
    let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .map(csv_fields)
        .expect("redis-benchmark CSV header");
    let values: Vec<String> = lines
        .next_back()
        .map(csv_fields)
        .expect("redis-benchmark CSV row");
    let field = |name: &str| -> f64 {
        header
            .iter()
            .position(|h| h == name)
            .and_then(|i| values.get(i))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    BenchmarkRun {
        checks_per_s: field("rps"),
        p50_us: field("p50_latency_ms") * 1000.0,
        p99_us: field("p99_latency_ms") * 1000.0,
    }
}

/// The fields of one CSV line whose fields are quoted.
fn csv_fields(line: &str) -> Vec<String> {
    line.split("\",\"")
        .map(|f| f.trim_matches('"').to_owned())
        .collect()
}

/// `rounds` rounds of `a` and `b` (each a round's mean time per call), alternating which goes
/// first so that a drift of the machine falls on both: each round's pair, in µs.
pub async fn alternating(
    rounds: usize,
    mut a: impl AsyncFnMut() -> Duration,
    mut b: impl AsyncFnMut() -> Duration,
) -> Vec<(f64, f64)> {
    let mut pairs = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let (first, second) = if round % 2 == 0 {
            let first = a().await;
            (first, b().await)
        } else {
            let second = b().await;
            (a().await, second)
        };
        pairs.push((first.as_secs_f64() * 1e6, second.as_secs_f64() * 1e6));
    }
    pairs
}

/// The median of `values` (the upper one of an even count), sorting them.
///
/// # Panics
///
/// When `values` is empty.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The `p`-th percentile (0 ..= 100) of sorted latencies, in microseconds.
#[must_use]
pub fn percentile_us(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1e6
}

/// The key names of the standard workload: `count` keys, each `width` digits, zero-padded
/// (as `redis-benchmark`'s `__rand_int__` is 12 digits), leaked to `&'static str`.
#[must_use]
pub fn key_names(count: usize, width: usize) -> Vec<&'static str> {
    (0..count)
        .map(|i| &*Box::leak(format!("{i:0width$}").into_boxed_str()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_command_stats() {
        let info = "# Commandstats\r\ncmdstat_evalsha:calls=100,usec=1234,usec_per_call=12.34,rejected_calls=0,failed_calls=0\r\ncmdstat_zadd:calls=5,usec=9\r\n";
        assert_eq!(parse_command_stats(info, "evalsha"), (100, 1234));
        assert_eq!(parse_command_stats(info, "zadd"), (5, 9));
        assert_eq!(parse_command_stats(info, "eval"), (0, 0));
    }

    #[test]
    fn rng_stays_below_its_bound() {
        let mut rng = Rng::new(0);
        assert!((0..10_000).all(|_| rng.below(7) < 7));
    }
}
