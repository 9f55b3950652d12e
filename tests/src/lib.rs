//! Test harness: a private `redis-server` per test, and unique key prefixes.
//!
//! [`TestRedis::start`] runs `redis-server` on a free loopback port with nothing on disk and
//! kills it on drop, unless `RATELIMIT_TEST_REDIS_URL` names a server to use instead. The binary
//! is `redis-server` on `PATH`, or the path in `REDIS_SERVER`.
//!
//! Timing: the tests run on loaded machines (a busy 2-core CI runner, with the other tests of
//! the binary beside them). Nothing here assumes that a step takes less than some guess: a
//! server, a cluster, a connection is waited for until it is in the wanted state, within
//! deadlines long enough for a loaded machine ([`STATE_DEADLINE`] and the like), which cost
//! nothing when it is idle.

pub mod accuracy;
pub mod checker;
pub mod cluster;
pub mod counting_alloc;
pub mod either;
pub mod journal;
pub mod proxy;
pub mod sentinel;
pub mod tls;
pub mod traffic;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate};

/// Names a Redis server for the tests instead of starting one.
pub const URL_VARIABLE: &str = "RATELIMIT_TEST_REDIS_URL";

/// How long a test waits for a state that a loaded machine may take long to reach (Redis
/// answering again after a fault, a connection made, tasks gone): reached in milliseconds on
/// an idle machine, so waiting for it costs nothing then.
pub const STATE_DEADLINE: Duration = Duration::from_secs(30);

/// How long a started `redis-server` may take to answer its first `PING`.
pub(crate) const SERVER_START_DEADLINE: Duration = Duration::from_secs(30);

/// A Redis server for one test: private (started here) or given by `RATELIMIT_TEST_REDIS_URL`.
pub struct TestRedis {
    url: String,
    child: Option<Child>,
}

impl TestRedis {
    /// The server named by `RATELIMIT_TEST_REDIS_URL`, or a private one on a free port.
    ///
    /// # Panics
    ///
    /// With a clear message when no `redis-server` can be found or it does not start.
    #[must_use]
    pub fn start() -> TestRedis {
        match std::env::var(URL_VARIABLE) {
            Ok(url) if !url.is_empty() => TestRedis { url, child: None },
            _ => TestRedis::start_private(),
        }
    }

    /// A private server, even when `RATELIMIT_TEST_REDIS_URL` is set (for tests that stop it).
    ///
    /// # Panics
    ///
    /// As [`TestRedis::start`].
    #[must_use]
    pub fn start_private() -> TestRedis {
        TestRedis::start_private_with(&[])
    }

    /// A private server started with the extra arguments `extra` (`--rename-command ...`).
    ///
    /// # Panics
    ///
    /// As [`TestRedis::start`].
    #[must_use]
    pub fn start_private_with(extra: &[&str]) -> TestRedis {
        let mut last_error = String::new();
        for _ in 0..5 {
            match TestRedis::start_on_with(free_port(), extra) {
                Ok(redis) => return redis,
                Err(error) => last_error = error,
            }
        }
        panic!("could not start a private redis-server: {last_error}")
    }

    /// A private server on `port` (e.g. one a limiter was pointed at before Redis was up).
    ///
    /// # Errors
    ///
    /// Why it did not start (the port was taken, the process exited).
    ///
    /// # Panics
    ///
    /// When no `redis-server` binary can be found.
    pub fn start_on(port: u16) -> Result<TestRedis, String> {
        TestRedis::start_on_with(port, &[])
    }

    /// [`TestRedis::start_on`], with the extra arguments `extra`.
    ///
    /// # Errors
    ///
    /// As [`TestRedis::start_on`].
    ///
    /// # Panics
    ///
    /// As [`TestRedis::start_on`].
    pub fn start_on_with(port: u16, extra: &[&str]) -> Result<TestRedis, String> {
        let binary = redis_server_binary();
        let mut child = spawn_or_explain(
            Command::new(&binary)
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--dir", &std::env::temp_dir().to_string_lossy()])
                .args(extra)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
            &binary,
            &format!(
                "the Redis tests need a redis-server binary. Install it (Debian/Ubuntu: \
                 `apt-get install -y redis-server`), set REDIS_SERVER to its path, or set \
                 {URL_VARIABLE}=redis://host:port/ to use a running server"
            ),
        );
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + SERVER_START_DEADLINE;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("redis-server on port {port} exited with {status}"));
            }
            if ping(address) {
                return Ok(TestRedis {
                    url: format!("redis://{address}/"),
                    child: Some(child),
                });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "redis-server on port {port} did not answer within {SERVER_START_DEADLINE:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The server's URL, `redis://127.0.0.1:<port>/`.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The server's socket address (resolved from [`TestRedis::url`]), e.g. for a
    /// [`proxy::FaultProxy`] in front of it.
    ///
    /// # Panics
    ///
    /// When the URL's host does not resolve.
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        use std::net::ToSocketAddrs;
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, rest)| rest);
        let authority = rest.split('/').next().unwrap_or(rest);
        let host_port = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        let host_port = if host_port.contains(':') {
            host_port.to_owned()
        } else {
            format!("{host_port}:6379")
        };
        host_port
            .to_socket_addrs()
            .ok()
            .and_then(|mut addresses| addresses.next())
            .unwrap_or_else(|| panic!("cannot resolve the test Redis address in {}", self.url))
    }

    /// A connection for inspecting what the limiter wrote.
    ///
    /// # Panics
    ///
    /// When the server cannot be reached.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url.as_str())
            .expect("valid test URL")
            .get_multiplexed_async_connection_with_config(&inspection_config())
            .await
            .expect("connect to the test Redis")
    }

    /// Deletes the keys under `prefix`, so that a test leaves nothing behind on a shared server
    /// (`RATELIMIT_TEST_REDIS_URL`).
    ///
    /// # Panics
    ///
    /// When the server cannot be reached.
    pub async fn clean_up(&self, prefix: &str) {
        use redis::AsyncCommands;
        let mut connection = self.connection().await;
        let keys: Vec<String> = connection
            .keys(format!("{prefix}*"))
            .await
            .expect("list the test's keys");
        if !keys.is_empty() {
            let _: usize = connection.del(keys).await.expect("delete the test's keys");
        }
    }

    /// Freezes a private server (`SIGSTOP`): it reads nothing and answers nothing until
    /// [`thaw`](TestRedis::thaw)ed; what it was sent meanwhile runs then, in order.
    ///
    /// # Panics
    ///
    /// When the server is not a private one still running, or the signal cannot be sent.
    pub fn freeze(&self) {
        let child = self.child.as_ref().expect("a private server, running");
        signal(child, "STOP", &self.url);
    }

    /// Lets a [`frozen`](TestRedis::freeze) server run again (`SIGCONT`).
    ///
    /// # Panics
    ///
    /// As [`TestRedis::freeze`].
    pub fn thaw(&self) {
        let child = self.child.as_ref().expect("a private server, running");
        signal(child, "CONT", &self.url);
    }

    /// Stops a private server now (a given one is left alone).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The timeouts of the harness's own connections (inspecting what a limiter wrote, setting
/// up a server): generous, so that a loaded machine never fails a test in its bookkeeping
/// (redis-rs's defaults are 1 s to connect and 500 ms per reply).
pub(crate) const INSPECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection configuration with [`INSPECTION_TIMEOUT`] for connecting and for each reply.
pub(crate) fn inspection_config() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(INSPECTION_TIMEOUT))
        .set_response_timeout(Some(INSPECTION_TIMEOUT))
}

/// A loopback port nobody listens on right now.
///
/// # Panics
///
/// When the OS has no free port to give.
#[must_use]
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().expect("local address").port()
}

/// A loopback port for a server that a test stops and starts again on the same port, or
/// starts only after a limiter was pointed at it: free now, below the OS's ephemeral range
/// (so that neither [`free_port`] nor an outgoing connection of a concurrent test can take it
/// while no server listens on it), and never handed out twice by this process (it shares its
/// range with the fault proxies').
///
/// # Panics
///
/// When no port can be found.
#[must_use]
pub fn spare_port() -> u16 {
    let listener = bind_below_ephemeral();
    listener.local_addr().expect("local address").port()
}

/// A range of loopback ports below the OS's ephemeral range, `span` ports from `floor - below`
/// on, handed out in turn from a start chosen at random per process: tests of one process
/// never get the same port twice, processes rarely meet, and neither [`free_port`] nor an
/// outgoing connection can take a port of it while a test has it unbound.
pub(crate) struct PortRange {
    next: AtomicUsize,
    below: u16,
    span: u16,
}

impl PortRange {
    /// The ports `[floor - below, floor - below + span)`.
    pub(crate) const fn new(below: u16, span: u16) -> PortRange {
        PortRange {
            next: AtomicUsize::new(usize::MAX),
            below,
            span,
        }
    }

    /// Up to `tries` ports of the range, the next ones in turn; none when the ephemeral range
    /// starts unusually low (below 26000), leaving no room under it.
    pub(crate) fn candidates(&self, tries: usize) -> impl Iterator<Item = u16> + '_ {
        use std::collections::hash_map::RandomState;
        use std::hash::BuildHasher;
        let floor = ephemeral_port_floor();
        let usable = floor >= 26_000;
        let span = usize::from(self.span);
        if usable {
            let _ = self.next.compare_exchange(
                usize::MAX,
                RandomState::new().hash_one(std::process::id()) as usize % span,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
        let low = usize::from(floor).saturating_sub(usize::from(self.below));
        (0..if usable { tries } else { 0 }).map(move |_| {
            let port = low + self.next.fetch_add(1, Ordering::SeqCst) % span;
            u16::try_from(port).expect("a port below the ephemeral range")
        })
    }
}

/// Binds a listener on a port below the ephemeral range, in `[floor - 4000, floor)`, shared by
/// [`spare_port`] and the fault proxies, or on any free port when that range is unusually low.
pub(crate) fn bind_below_ephemeral() -> TcpListener {
    static PORTS: PortRange = PortRange::new(4_000, 4_000);
    PORTS
        .candidates(200)
        .find_map(|port| TcpListener::bind(("127.0.0.1", port)).ok())
        .unwrap_or_else(|| TcpListener::bind("127.0.0.1:0").expect("bind a loopback port"))
}

/// Calls `attempt` (every few milliseconds) until it gives `Some`, and returns that with the
/// time it took; `what` names the awaited state in the panic when it is not reached within
/// `within`.
///
/// # Panics
///
/// When `attempt` still gives `None` after `within`.
pub async fn wait_for<T>(
    what: &str,
    within: Duration,
    mut attempt: impl AsyncFnMut() -> Option<T>,
) -> (T, Duration) {
    let started = Instant::now();
    loop {
        if let Some(reached) = attempt().await {
            return (reached, started.elapsed());
        }
        assert!(
            started.elapsed() < within,
            "{what}: not reached within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The scripts `redis` ran so far (`EVALSHA` and `EVAL`, read-only ones included), from
/// `INFO commandstats`; failed calls (a first `EVALSHA` of a script the server does not hold
/// yet, a script refused) left out.
///
/// # Panics
///
/// When the server does not answer `INFO`.
pub async fn scripts_run(redis: &TestRedis) -> u64 {
    let mut connection = redis.connection().await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut connection)
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter(|line| {
            [
                "cmdstat_evalsha:",
                "cmdstat_eval:",
                "cmdstat_evalsha_ro:",
                "cmdstat_eval_ro:",
            ]
            .iter()
            .any(|name| line.starts_with(name))
        })
        .map(|line| stat(line, "calls=") - stat(line, "failed_calls="))
        .sum()
}

/// The number after `name` in a line of `INFO commandstats` (0 when absent).
fn stat(line: &str, name: &str) -> u64 {
    line.split(',')
        .flat_map(|field| field.split(':'))
        .find_map(|field| field.strip_prefix(name))
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

/// Waits until `limiter` has a working connection: a check of `key` (a rate that never
/// denies) is answered by Redis, not by the failure policy, and the limiter is not degraded
/// (with a cluster, an outage ends at the first answer 250 ms after the last failure). The
/// first check of a limiter connects, which a loaded machine may not do within a short
/// timeout; tests call this before the checks whose answers they assert. Returns how long it
/// took.
///
/// # Panics
///
/// When it does not happen within [`STATE_DEADLINE`].
pub async fn connected(limiter: &Limiter, key: &str) -> Duration {
    let rate = Rate::new(Rate::MAX_THRESHOLD, Duration::from_secs(1)).expect("a valid rate");
    let ((), took) = wait_for(
        "the limiter answers from Redis",
        STATE_DEADLINE,
        async || {
            let before = limiter.policy_answers();
            let answered = limiter.check(key, rate).await.is_ok();
            (answered && limiter.policy_answers() == before && !limiter.is_degraded()).then_some(())
        },
    )
    .await;
    took
}

/// The lowest port of the OS's ephemeral range (what [`free_port`] and outgoing connections
/// get): the proxy and the test clusters pick their ports below it, so that nothing else takes
/// them meanwhile. 32768 (Linux's default) when it cannot be read.
pub(crate) fn ephemeral_port_floor() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// The `redis-server` binary the harness runs: `REDIS_SERVER`, else the one on the `PATH`.
pub(crate) fn redis_server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned())
}

/// Spawns `command`, which runs `binary`.
///
/// # Panics
///
/// When `binary` cannot be run; when it is missing, with "`binary` was not found: `missing`"
/// (`missing`: what needs it and how to get it).
pub(crate) fn spawn_or_explain(command: &mut Command, binary: &str, missing: &str) -> Child {
    match command.spawn() {
        Ok(child) => child,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            panic!("`{binary}` was not found: {missing}")
        }
        Err(error) => panic!("could not run `{binary}`: {error}"),
    }
}

/// Sends the signal `name` (`STOP`, `CONT`) to `child`, `what` naming it in a failure, with the
/// `kill` utility (procps, on every Linux; no `unsafe` FFI here for two signals).
///
/// # Panics
///
/// When the signal cannot be sent.
pub(crate) fn signal(child: &Child, name: &str, what: &str) {
    let pid = child.id().to_string();
    let status = spawn_or_explain(
        Command::new("kill")
            .args(["-s", name, &pid])
            .stdin(Stdio::null()),
        "kill",
        "stalling a test server needs the `kill` utility (Debian: procps)",
    )
    .wait();
    match status {
        Ok(status) if status.success() => {}
        other => panic!("`kill -s {name} {pid}` ({what}) failed: {other:?}"),
    }
}

/// A limiter on the Redis server at `url`, its keys under `prefix`, failing closed (a store
/// failure is an error the test sees, not a policy's answer) within a timeout a loaded
/// machine does not reach (10 s).
///
/// # Panics
///
/// When the limiter cannot be built.
pub async fn closed_redis_limiter(url: &str, prefix: &str) -> Limiter {
    Limiter::builder()
        .redis_url(url)
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build a Redis limiter")
}

/// [`closed_redis_limiter`] on the Redis Cluster whose nodes are at `urls`.
///
/// # Panics
///
/// When the limiter cannot be built.
pub async fn closed_cluster_limiter(urls: Vec<String>, prefix: &str) -> Limiter {
    Limiter::builder()
        .redis_cluster(urls)
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build a cluster limiter")
}

/// A key prefix no other test (or run) uses: `test:<pid>:<n>:<name>:`.
#[must_use]
pub fn unique_prefix(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "test:{}:{}:{name}:",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `true` when a Redis server at `address` answers `PING`.
fn ping(address: SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_millis(100)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

/// `seconds` after the Unix epoch, as a `SystemTime` (fractions kept to the microsecond).
#[must_use]
pub fn at_secs(seconds: f64) -> std::time::SystemTime {
    at_micros((seconds * 1e6).round() as u64)
}

/// `micros` microseconds after the Unix epoch, as a `SystemTime`.
#[must_use]
pub fn at_micros(micros: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_micros(micros)
}

/// A decision's public fields, to compare an answer of the failure policy (which says so:
/// `Decision::answered_by_policy`) with the decision a store would give.
#[must_use]
pub fn fields(
    decision: &ratelimit_runtime::Decision,
) -> (bool, u64, u64, Option<Duration>, Duration) {
    (
        decision.allowed,
        decision.limit,
        decision.remaining,
        decision.retry_after,
        decision.reset_after,
    )
}

/// Writes `field` = `value` into the limits shared through Redis under `prefix` by hand, as
/// the guide's `operating` page shows: `HSET` of the entries' hash, then `XADD` of the change
/// log naming the field.
///
/// # Panics
///
/// When Redis refuses either command.
pub async fn write_shared_by_hand(
    connection: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    field: &str,
    value: &str,
) {
    let () = redis::cmd("HSET")
        .arg(format!("{prefix}{{registry}}entries"))
        .arg(field)
        .arg(value)
        .query_async(connection)
        .await
        .map(|_: u64| ())
        .expect("HSET");
    let _: String = redis::cmd("XADD")
        .arg(format!("{prefix}{{registry}}changes"))
        .arg("*")
        .arg("field")
        .arg(field)
        .query_async(connection)
        .await
        .expect("XADD");
}

/// How many admissions `key`'s log of `rate` holds now, read with a look (`Limiter::peek`,
/// which records nothing).
///
/// # Panics
///
/// When the look fails.
pub async fn logged(limiter: &Limiter, key: &str, rate: Rate) -> u64 {
    let decision = limiter.peek(key, rate).await.expect("a look");
    rate.threshold() - decision.remaining
}
