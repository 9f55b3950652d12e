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
        for &(port, _) in &self.sentinels {
            let Some(mut connection) = connect(port).await else {
                continue;
            };
            let reply: redis::RedisResult<()> = redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(MASTER_NAME)
                .query_async(&mut connection)
                .await;
            if reply.is_ok() {
                return;
            }
        }
        panic!("no sentinel accepted SENTINEL FAILOVER");
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

/// A connection to the server or sentinel on `port` (`None`: it does not answer).
async fn connect(port: u16) -> Option<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let config = inspection_config().set_connection_timeout(Some(Duration::from_millis(500)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .ok()
}
