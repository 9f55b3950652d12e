//! A Redis Sentinel deployment for one test: a master, a replica of it and three sentinels,
//! all `redis-server` processes on free loopback ports (the sentinels in `--sentinel` mode,
//! each with a config file of its own in a private directory, which Sentinel rewrites), with
//! nothing on disk but those files; killed, and the directory removed, on drop.
//!
//! The sentinels watch the master as [`MASTER_NAME`] with a quorum of 2, call it down after
//! [`DOWN_AFTER_MS`] without an answer, and fail over to the replica.
//! [`TestSentinel::start`] returns once every sentinel knows the replica and the two other
//! sentinels, and the replica is in sync: a failover can then happen.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{STATE_DEADLINE, TestRedis, free_port, inspection_config};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "ratelimit-master";

/// How long a sentinel waits without an answer before it calls the master down (Sentinel's
/// default is 30 s).
pub const DOWN_AFTER_MS: u64 = 1_000;

/// A master, its replica and three sentinels (see the module docs).
pub struct TestSentinel {
    /// The two data servers; which is the master changes with failovers.
    servers: Vec<TestRedis>,
    sentinels: Vec<(u16, Child)>,
    directory: PathBuf,
}

impl TestSentinel {
    /// Starts the deployment and waits (up to [`STATE_DEADLINE`] for each step) until a
    /// failover can happen.
    ///
    /// # Panics
    ///
    /// When a server does not start, or the sentinels do not see the deployment in time.
    #[must_use]
    pub async fn start() -> TestSentinel {
        let directory = std::env::temp_dir().join(format!(
            "ratelimit-sentinel-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&directory).expect("create the sentinels' directory");
        // A directory of its own for each server: a replica's full sync writes the master's
        // data to `dump.rdb` in its directory, which any server started later there would
        // load (the harness's other servers share the temporary directory).
        let dir = |name: &str| {
            let dir = directory.join(name);
            std::fs::create_dir_all(&dir).expect("create a server's directory");
            dir.to_string_lossy().into_owned()
        };
        let (master_dir, replica_dir) = (dir("master"), dir("replica"));
        let master = TestRedis::start_private_with(&["--dir", &master_dir]);
        let port = master.address().port().to_string();
        let replica = TestRedis::start_private_with(&[
            "--dir",
            &replica_dir,
            "--replicaof",
            "127.0.0.1",
            &port,
        ]);
        let mut deployment = TestSentinel {
            servers: vec![master, replica],
            sentinels: Vec::new(),
            directory,
        };
        for _ in 0..3 {
            let sentinel = deployment.start_sentinel(&port);
            deployment.sentinels.push(sentinel);
        }
        deployment.wait_until_ready().await;
        deployment
    }

    /// A sentinel, answering: started again on another port when the first exits (a port
    /// another test took meanwhile).
    fn start_sentinel(&self, master_port: &str) -> (u16, Child) {
        for _ in 0..5 {
            let (port, mut child) = self.spawn_sentinel(master_port);
            let deadline = Instant::now() + STATE_DEADLINE;
            loop {
                if crate::ping(SocketAddr::from(([127, 0, 0, 1], port))) {
                    return (port, child);
                }
                if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        panic!("no sentinel started in 5 attempts (redis-server --sentinel)");
    }

    fn spawn_sentinel(&self, master_port: &str) -> (u16, Child) {
        let port = free_port();
        let config = self.directory.join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &config,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {MASTER_NAME} 10000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                self.directory.display()
            ),
        )
        .expect("write a sentinel's config");
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned());
        let child = Command::new(&binary)
            .arg(&config)
            .arg("--sentinel")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "could not start `{binary} --sentinel` ({error}): the Sentinel tests need \
                     redis-server (Debian/Ubuntu: `apt-get install -y redis-server`)"
                )
            });
        (port, child)
    }

    /// Waits until every sentinel knows a replica and the other two sentinels, and the
    /// replica's link to the master is up.
    async fn wait_until_ready(&self) {
        let deadline = Instant::now() + STATE_DEADLINE;
        loop {
            let mut ready = true;
            for &(port, _) in &self.sentinels {
                let state = self.sentinel_master(port).await;
                let field = |name: &str| {
                    state
                        .as_ref()
                        .and_then(|fields| fields.iter().position(|f| f == name))
                        .and_then(|i| state.as_ref()?.get(i + 1)?.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                ready &= field("num-slaves") >= 1 && field("num-other-sentinels") >= 2;
            }
            ready &= self.replica_in_sync(1).await;
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the sentinels did not see the master, its replica and each other within \
                 {STATE_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `SENTINEL MASTER <name>` of the sentinel on `port`, as its list of names and values.
    async fn sentinel_master(&self, port: u16) -> Option<Vec<String>> {
        let mut connection = connect(port).await?;
        redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(MASTER_NAME)
            .query_async(&mut connection)
            .await
            .ok()
    }

    /// Whether server `index` is a replica whose link to its master is up.
    async fn replica_in_sync(&self, index: usize) -> bool {
        let Some(mut connection) = connect(self.servers[index].address().port()).await else {
            return false;
        };
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut connection)
            .await
            .unwrap_or_default();
        info.contains("role:slave") && info.contains("master_link_status:up")
    }

    /// `redis+sentinel://` URL of the deployment: its three sentinels and the master's name.
    #[must_use]
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The master's address as the first sentinel that answers says (`None`: none answers).
    pub async fn master(&self) -> Option<SocketAddr> {
        for &(port, _) in &self.sentinels {
            let Some(mut connection) = connect(port).await else {
                continue;
            };
            let reply: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query_async(&mut connection)
                .await
                .ok()
                .flatten();
            if let Some((host, port)) = reply {
                return format!("{host}:{port}").parse().ok();
            }
        }
        None
    }

    /// The index of the data server at `address`.
    fn index_of(&self, address: SocketAddr) -> usize {
        self.servers
            .iter()
            .position(|server| server.address() == address)
            .unwrap_or_else(|| panic!("{address} is not a server of this deployment"))
    }

    /// The data server at `address`.
    ///
    /// # Panics
    ///
    /// When it is not one of the deployment's.
    #[must_use]
    pub fn server(&self, address: SocketAddr) -> &TestRedis {
        &self.servers[self.index_of(address)]
    }

    /// The data servers' addresses, the first master's first.
    #[must_use]
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.servers.iter().map(TestRedis::address).collect()
    }

    /// Sets every sentinel's `down-after-milliseconds` (how long a master may not answer
    /// before they fail it over): a test that freezes the master for longer than
    /// [`DOWN_AFTER_MS`] without wanting a failover raises it first.
    ///
    /// # Panics
    ///
    /// When a sentinel refuses it, or none answers.
    pub async fn set_down_after(&self, millis: u64) {
        for &(port, _) in &self.sentinels {
            let mut connection = connect(port).await.expect("a sentinel answers");
            let () = redis::cmd("SENTINEL")
                .arg("SET")
                .arg(MASTER_NAME)
                .arg("down-after-milliseconds")
                .arg(millis)
                .query_async(&mut connection)
                .await
                .expect("SENTINEL SET down-after-milliseconds");
        }
    }

    /// A failover that loses no write, as an operator makes one: writes paused on the master
    /// (`CLIENT PAUSE ... WRITE`), the replica caught up with it, the sentinels asked for the
    /// failover (`SENTINEL FAILOVER`), then `paused` called, the old master made a replica of
    /// the new one, and the writes let through. Returns the new master.
    ///
    /// The replica is never paused: a pause holds a sentinel's `PUBLISH` of its hello, and
    /// with it every later command on that link, the promotion's `REPLICAOF NO ONE` among
    /// them (the failover then times out). Instead it is set to refuse writes while it has no
    /// replica (`min-replicas-to-write 1`, dormant on a replica): once promoted it takes none
    /// (`NOREPLICAS`) until the old master is its replica, which it becomes after `paused`
    /// (the promotion closed the new master's clients: `paused` reopens what it needs first).
    ///
    /// # Panics
    ///
    /// When a step does not happen within [`STATE_DEADLINE`].
    pub async fn graceful_failover(
        &self,
        paused: impl FnOnce(SocketAddr, SocketAddr),
    ) -> SocketAddr {
        let old = self.master().await.expect("the sentinels name a master");
        let new = self.replica_of(old);
        let min_replicas = |server: SocketAddr, count: &'static str| async move {
            let () = command(
                server,
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("min-replicas-to-write")
                    .arg(count),
            )
            .await
            .expect("CONFIG SET min-replicas-to-write");
        };
        min_replicas(new, "1").await;
        let () = command(
            old,
            // Longer than every step below may take: its deadlines, 30 s and 60 s, and a
            // wait for the role.
            redis::cmd("CLIENT").arg("PAUSE").arg(180_000).arg("WRITE"),
        )
        .await
        .expect("CLIENT PAUSE WRITE");
        let offset = |server: SocketAddr, field: &'static str| async move {
            let info: String = command(server, redis::cmd("INFO").arg("replication"))
                .await
                .unwrap_or_default();
            info_field(&info, field)
        };
        let deadline = Instant::now() + STATE_DEADLINE;
        loop {
            let master = offset(old, "master_repl_offset").await;
            let replica = offset(new, "slave_repl_offset").await;
            if master.is_some() && master == replica && self.replica_known(old, new).await {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the replica did not catch up, or the sentinels did not see it, in time"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Asked again until done: a sentinel may abort one (another's vote, a replica it
        // judged unfit for a moment), and then waits twice its failover timeout (20 s here)
        // before it tries again: a deadline of its own, past that.
        let deadline = Instant::now() + 2 * STATE_DEADLINE;
        let mut refusals = Vec::new();
        loop {
            // One that is under way answers the next ask with an error: the ask is then moot.
            if let Err(refused) = self.ask_failover().await {
                refusals.push(refused);
            }
            if self
                .role_within(new, "role:master", Duration::from_secs(10))
                .await
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no failover to {new} in time; the sentinels' refusals: {refusals:?}"
            );
        }
        paused(old, new);
        let (host, port) = (new.ip().to_string(), new.port());
        let () = command(old, redis::cmd("REPLICAOF").arg(host).arg(port))
            .await
            .expect("REPLICAOF the new master");
        self.wait_for_role(old, "master_link_status:up").await;
        let () = command(old, redis::cmd("CLIENT").arg("UNPAUSE"))
            .await
            .expect("CLIENT UNPAUSE");
        min_replicas(new, "0").await;
        let deadline = Instant::now() + STATE_DEADLINE;
        while self.master().await != Some(new) {
            assert!(
                Instant::now() < deadline,
                "the sentinels did not name {new}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        new
    }

    /// Waits until the server at `address` says `role` in `INFO replication`.
    async fn wait_for_role(&self, address: SocketAddr, role: &str) {
        assert!(
            self.role_within(address, role, STATE_DEADLINE).await,
            "{address} did not say {role} in time"
        );
    }

    /// Whether the server at `address` says `role` in `INFO replication` within `within`.
    async fn role_within(&self, address: SocketAddr, role: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let info: String = command(address, redis::cmd("INFO").arg("replication"))
                .await
                .unwrap_or_default();
            if info.contains(role) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether every sentinel names `master`, is not in a failover of it (a sentinel ends one
    /// only once it has seen every replica reconfigured), and knows `replica` as its replica,
    /// linked, not down, and seen lately enough to be picked: a sentinel picks no replica whose
    /// last answer to its pings is 5 s old, or its last `INFO` 30 s old (`NOGOODSLAVE`).
    async fn replica_known(&self, master: SocketAddr, replica: SocketAddr) -> bool {
        for &(port, _) in &self.sentinels {
            let Some(mut connection) = connect(port).await else {
                return false;
            };
            let named: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query_async(&mut connection)
                .await
                .ok()
                .flatten();
            if named != Some((master.ip().to_string(), master.port())) {
                return false;
            }
            let fields: Vec<String> = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(MASTER_NAME)
                .query_async(&mut connection)
                .await
                .unwrap_or_default();
            let flags = fields
                .iter()
                .position(|f| f == "flags")
                .and_then(|i| fields.get(i + 1));
            if flags.is_none_or(|flags| flags.contains("failover")) {
                return false;
            }
            let replicas: Vec<Vec<String>> = redis::cmd("SENTINEL")
                .arg("REPLICAS")
                .arg(MASTER_NAME)
                .query_async(&mut connection)
                .await
                .unwrap_or_default();
            let fit = replicas.iter().any(|fields| {
                let field = |name: &str| {
                    fields
                        .iter()
                        .position(|f| f == name)
                        .and_then(|i| fields.get(i + 1))
                        .map(String::as_str)
                };
                let millis = |name: &str| field(name).and_then(|ms| ms.parse::<u64>().ok());
                field("port") == Some(replica.port().to_string().as_str())
                    && field("flags") == Some("slave")
                    && field("master-link-status") == Some("ok")
                    && millis("last-ok-ping-reply").is_some_and(|ms| ms < 2_000)
                    && millis("info-refresh").is_some_and(|ms| ms < 10_000)
            });
            if !fit {
                return false;
            }
        }
        true
    }

    /// Freezes the data server at `address` (`SIGSTOP`) until [`thaw`](TestSentinel::thaw).
    ///
    /// # Panics
    ///
    /// When it is not one of the deployment's, was killed, or the signal cannot be sent.
    pub fn freeze(&self, address: SocketAddr) {
        self.server(address).freeze();
    }

    /// Lets a frozen data server run again (`SIGCONT`).
    ///
    /// # Panics
    ///
    /// As [`TestSentinel::freeze`].
    pub fn thaw(&self, address: SocketAddr) {
        self.server(address).thaw();
    }

    /// The other data server than `master`: its replica.
    #[must_use]
    pub fn replica_of(&self, master: SocketAddr) -> SocketAddr {
        let index = 1 - self.index_of(master);
        self.servers[index].address()
    }

    /// Kills the server at `address` (the master, for a failover by the sentinels).
    pub fn kill(&mut self, address: SocketAddr) {
        let index = self.index_of(address);
        self.servers[index].stop();
    }

    /// Asks a sentinel for a failover now (`SENTINEL FAILOVER`), as an operator would.
    ///
    /// # Panics
    ///
    /// When no sentinel accepts it.
    pub async fn failover(&self) {
        if let Err(answers) = self.ask_failover().await {
            panic!("no sentinel accepted SENTINEL FAILOVER: {answers}");
        }
    }

    /// Asks the sentinels, one after another, for a failover: `Ok` when one accepted, else
    /// what each answered.
    async fn ask_failover(&self) -> Result<(), String> {
        let mut answers = Vec::new();
        for &(port, _) in &self.sentinels {
            let Some(mut connection) = connect(port).await else {
                answers.push(format!("{port}: no connection"));
                continue;
            };
            let reply: redis::RedisResult<()> = redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(MASTER_NAME)
                .query_async(&mut connection)
                .await;
            match reply {
                Ok(()) => return Ok(()),
                Err(error) => answers.push(format!("{port}: {error}")),
            }
        }
        Err(answers.join("; "))
    }

    /// Waits (up to [`STATE_DEADLINE`]) until the sentinels name a master other than `old`
    /// and it says it is a master; returns it.
    ///
    /// # Panics
    ///
    /// When that does not happen in time.
    pub async fn wait_for_new_master(&self, old: SocketAddr) -> SocketAddr {
        let deadline = Instant::now() + STATE_DEADLINE;
        loop {
            if let Some(master) = self.master().await
                && master != old
                && let Some(mut connection) = connect(master.port()).await
            {
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut connection)
                    .await
                    .unwrap_or_default();
                if info.contains("role:master") {
                    return master;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no new master within {STATE_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestSentinel {
    fn drop(&mut self) {
        for (_, child) in &mut self.sentinels {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// `command`'s reply from the server at `address`, on a connection of its own (a failover
/// closes the clients it had).
async fn command<T: redis::FromRedisValue>(
    address: SocketAddr,
    command: &mut redis::Cmd,
) -> redis::RedisResult<T> {
    let mut connection = connect(address.port()).await.ok_or_else(|| {
        redis::RedisError::from((redis::ErrorKind::Io, "no answer", address.to_string()))
    })?;
    command.query_async(&mut connection).await
}

/// The number `field:<n>` of an `INFO` reply.
fn info_field(info: &str, field: &str) -> Option<u64> {
    info.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
}

/// A connection to the server or sentinel on `port` (`None`: it does not answer).
async fn connect(port: u16) -> Option<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let config = inspection_config().set_connection_timeout(Some(Duration::from_millis(500)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .ok()
}
