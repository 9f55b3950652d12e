//! [`TestCluster`]: a real Redis Cluster of N masters (no replicas, or one each) for one test.
//!
//! Each master is a `redis-server` on `127.0.0.1` with nothing on disk but its cluster
//! configuration file, in a temporary directory of its own cluster:
//!
//! ```text
//! redis-server --port P --bind 127.0.0.1 --cluster-enabled yes
//!     --cluster-config-file <dir>/nodes-P.conf --cluster-node-timeout 2000
//!     --cluster-require-full-coverage no --save "" --appendonly no --dir <dir>
//!     --logfile <dir>/node-P.log
//! ```
//!
//! formed with `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes`, and ready
//! when every node reports `cluster_state:ok` and all agree on `CLUSTER SLOTS`. Its slots are
//! split evenly in node order (node 0 owns the lowest slots), as `redis-cli` does.
//!
//! `cluster-require-full-coverage no` keeps the other masters serving their slots after
//! [`TestCluster::kill`] stops one (with the default, `yes`, the whole cluster would answer
//! `CLUSTERDOWN` once the dead node is marked failed, after the node timeout).
//!
//! [`TestCluster::freeze`] stalls a master until [`TestCluster::thaw`] (`SIGSTOP` and
//! `SIGCONT`: a paused VM, a swap storm): it accepts connections and answers nothing, for as
//! long as the test wants. (`CLIENT PAUSE ... ALL` cannot be ended early: while it lasts, the
//! server postpones every command of every client, `CLIENT UNPAUSE` included, so a pause
//! always lasts its full time, whatever a loaded machine does meanwhile.)
//!
//! Ports: each node needs P and its bus port P + 10000 free. They are picked below the OS's
//! ephemeral port range (bus ports included), so no [`crate::free_port`] or outgoing
//! connection of a concurrent test takes them between the probe and the start; a node whose
//! start fails anyway (port taken by another process) is started again on other ports. Clusters
//! of concurrent tests in one process never probe the same ports.
//!
//! The binaries are `redis-server` and `redis-cli` on `PATH`, or the paths in `REDIS_SERVER`
//! and `REDIS_CLI`. Dropping the cluster kills every node and removes its directory.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::Value;

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16_384;

/// The cluster's `cluster-node-timeout`, in milliseconds.
pub const NODE_TIMEOUT_MS: u64 = 2_000;

/// How long a started cluster may take to agree on its slots (seconds when idle; long, for a
/// loaded machine forming several clusters at once).
const FORM_DEADLINE: Duration = Duration::from_secs(60);

/// The timeouts of the harness's own (inspection and administration) connections.
const ADMIN_TIMEOUT: Duration = crate::INSPECTION_TIMEOUT;

/// The timeouts of [`TestCluster::cluster_client`]: generous, so that a healthy node never
/// fails an inspection on a loaded machine (a dead node is refused at once).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The timeout of one `MIGRATE`, in milliseconds.
const MIGRATE_TIMEOUT_MS: u64 = 5_000;

/// A Redis Cluster of masters for one test; see the [module documentation](self).
pub struct TestCluster {
    nodes: Vec<Node>,
    directory: PathBuf,
    /// Replicas per master (0, or 1 for [`TestCluster::start_with_replicas`]).
    replicas: usize,
}

struct Node {
    port: u16,
    id: String,
    log: PathBuf,
    child: Option<Child>,
}

/// One contiguous range of slots as a node reports it in `CLUSTER SLOTS`: first and last slot,
/// and the master's node id.
type SlotRange = (u16, u16, String);

impl TestCluster {
    /// Starts `masters` masters (at least 3, as `redis-cli --cluster create` requires), forms
    /// the cluster and waits (up to 60 s) until every node reports `cluster_state:ok` and all
    /// agree on the slots, which cover all 16384 and are shared by every master.
    ///
    /// # Panics
    ///
    /// When `redis-server` or `redis-cli` cannot be found (with how to install them), a node
    /// does not start, or the cluster does not form; the message carries the output of
    /// `redis-cli` and the nodes' logs.
    #[must_use]
    pub fn start(masters: usize) -> TestCluster {
        TestCluster::start_with(masters, 0)
    }

    /// [`TestCluster::start`] with one replica per master: `2 × masters` nodes, nodes
    /// `0..masters` the masters and the others their replicas (as `redis-cli --cluster create`
    /// assigns them: [`TestCluster::replica_of`] tells which), ready once every replica's link
    /// to its master is up, so that a failover can happen.
    ///
    /// # Panics
    ///
    /// As [`TestCluster::start`]; also when the replicas are not as described.
    #[must_use]
    pub fn start_with_replicas(masters: usize) -> TestCluster {
        let cluster = TestCluster::start_with(masters, 1);
        let deadline = Instant::now() + FORM_DEADLINE;
        for replica in masters..2 * masters {
            loop {
                let info: String = cluster
                    .query(replica, redis::cmd("INFO").arg("replication"))
                    .unwrap_or_default();
                if info.contains("role:slave") && info.contains("master_link_status:up") {
                    break;
                }
                if Instant::now() > deadline {
                    cluster.fail(&format!(
                        "node {replica} is not an up-to-date replica within \
                         {FORM_DEADLINE:?}:\n{info}"
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        cluster
    }

    fn start_with(masters: usize, replicas: usize) -> TestCluster {
        assert!(
            masters >= 3,
            "a TestCluster needs at least 3 masters (redis-cli --cluster create refuses fewer), \
             got {masters}"
        );
        let directory = unique_directory();
        std::fs::create_dir_all(&directory).unwrap_or_else(|error| {
            panic!(
                "could not create the cluster's directory {}: {error}",
                directory.display()
            )
        });
        // From here on, dropping the cluster (also when a panic unwinds) kills what was started
        // and removes the directory.
        let mut cluster = TestCluster {
            nodes: Vec::with_capacity(masters * (1 + replicas)),
            directory,
            replicas,
        };
        for _ in 0..masters * (1 + replicas) {
            let node = cluster.start_node();
            cluster.nodes.push(node);
        }
        cluster.create();
        cluster.wait_until_formed();
        for index in 0..cluster.nodes.len() {
            let id: String = cluster
                .query(index, redis::cmd("CLUSTER").arg("MYID"))
                .unwrap_or_else(|error| {
                    cluster.fail(&format!("CLUSTER MYID on node {index}: {error}"))
                });
            cluster.nodes[index].id = id;
        }
        cluster
    }

    /// How many nodes the cluster was started with (killed ones included): its masters, and
    /// their replicas if it has any.
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never: a cluster has at least 3 masters.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node's URL, `redis://127.0.0.1:<port>/`, in node order (killed ones included).
    #[must_use]
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|node| format!("redis://127.0.0.1:{}/", node.port))
            .collect()
    }

    /// Every node's address, in node order (killed ones included).
    #[must_use]
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.nodes
            .iter()
            .map(|node| SocketAddr::from(([127, 0, 0, 1], node.port)))
            .collect()
    }

    /// The URL of the nodes still running, for clients to start from.
    #[must_use]
    pub fn live_urls(&self) -> Vec<String> {
        (0..self.nodes.len())
            .filter(|&node| self.is_alive(node))
            .map(|node| format!("redis://127.0.0.1:{}/", self.nodes[node].port))
            .collect()
    }

    /// `node`'s cluster node id (`CLUSTER MYID`).
    #[must_use]
    pub fn node_id(&self, node: usize) -> &str {
        &self.nodes[node].id
    }

    /// `false` once `node` was [`TestCluster::kill`]ed.
    #[must_use]
    pub fn is_alive(&self, node: usize) -> bool {
        self.nodes[node].child.is_some()
    }

    /// The hash slot of `key`: CRC16 (XMODEM) of the key, or of its `{hash tag}` when it has a
    /// non-empty one, modulo 16384, as `CLUSTER KEYSLOT` computes it.
    #[must_use]
    pub fn key_slot(key: &str) -> u16 {
        let bytes = key.as_bytes();
        let hashed = bytes
            .iter()
            .position(|&byte| byte == b'{')
            .and_then(|open| {
                let close = bytes[open + 1..].iter().position(|&byte| byte == b'}')?;
                (close > 0).then(|| &bytes[open + 1..open + 1 + close])
            })
            .unwrap_or(bytes);
        crc16(hashed) % SLOTS
    }

    /// The node that owns `slot`, as the first live node sees it (`CLUSTER SLOTS`).
    ///
    /// # Panics
    ///
    /// When no live node answers or none owns the slot.
    #[must_use]
    pub fn node_for_slot(&self, slot: u16) -> usize {
        let ranges = self.slot_ranges();
        let (_, _, id) = ranges
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .unwrap_or_else(|| panic!("no node owns slot {slot}: {ranges:?}"));
        self.index_of(id)
    }

    /// The node that owns `slot` as the first live node sees it, or `None` while it sees no
    /// owner (in the middle of a failover).
    #[must_use]
    pub fn owner_of_slot(&self, slot: u16) -> Option<usize> {
        self.slot_ranges()
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, id)| self.index_of(id))
    }

    /// A key `"{prefix}<n>"` (no hash tag added) whose slot `node` owns.
    ///
    /// # Panics
    ///
    /// When `node` owns no slot.
    #[must_use]
    pub fn key_for_node(&self, node: usize, prefix: &str) -> String {
        let id = self.node_id(node).to_owned();
        let owned: Vec<(u16, u16)> = self
            .slot_ranges()
            .into_iter()
            .filter(|(_, _, owner)| *owner == id)
            .map(|(first, last, _)| (first, last))
            .collect();
        assert!(!owned.is_empty(), "node {node} owns no slot");
        (0u64..)
            .map(|n| format!("{prefix}{n}"))
            .find(|key| {
                let slot = TestCluster::key_slot(key);
                owned
                    .iter()
                    .any(|&(first, last)| (first..=last).contains(&slot))
            })
            .expect("some key hashes to an owned slot")
    }

    /// A key `"{prefix}<n>"` (no hash tag added) in `slot` (about 16384 tries on average).
    ///
    /// # Panics
    ///
    /// When `slot` is not below 16384.
    #[must_use]
    pub fn key_in_slot(slot: u16, prefix: &str) -> String {
        assert!(slot < SLOTS, "slot {slot} is not below {SLOTS}");
        (0u64..)
            .map(|n| format!("{prefix}{n}"))
            .find(|key| TestCluster::key_slot(key) == slot)
            .expect("every slot has keys")
    }

    /// The node that replicates `master` now.
    ///
    /// # Panics
    ///
    /// When none does.
    #[must_use]
    pub fn replica_of(&self, master: usize) -> usize {
        self.try_replica_of(master)
            .unwrap_or_else(|| panic!("no node replicates node {master}"))
    }

    /// The node that replicates `master` now, if any (a node failed over a moment ago
    /// becomes its new master's replica once it has been told).
    #[must_use]
    pub fn try_replica_of(&self, master: usize) -> Option<usize> {
        let port = format!("master_port:{}", self.nodes[master].port);
        (0..self.nodes.len())
            .filter(|&node| node != master && self.is_alive(node))
            .find(|&node| {
                self.query::<String>(node, redis::cmd("INFO").arg("replication"))
                    .is_ok_and(|info| info.contains("role:slave") && info.contains(&port))
            })
    }

    /// Whether `replica`'s link to its master is up (`master_link_status:up`): synchronised,
    /// ready for a manual failover.
    #[must_use]
    pub fn replica_in_sync(&self, replica: usize) -> bool {
        self.query::<String>(replica, redis::cmd("INFO").arg("replication"))
            .is_ok_and(|info| {
                info.lines()
                    .any(|line| line.trim() == "master_link_status:up")
            })
    }

    /// Asks `replica` for a manual failover (`CLUSTER FAILOVER`): it catches up with its
    /// master, which stops taking writes meanwhile, then takes its slots over; the old master
    /// becomes its replica.
    ///
    /// # Panics
    ///
    /// When the node refuses.
    pub fn failover(&self, replica: usize) {
        let () = self
            .query(replica, redis::cmd("CLUSTER").arg("FAILOVER"))
            .unwrap_or_else(|error| panic!("CLUSTER FAILOVER on node {replica}: {error}"));
    }

    /// Waits (up to a minute) until a live node other than `old` owns `slot`, as the first live
    /// node sees it; returns that node.
    ///
    /// # Panics
    ///
    /// When that does not happen in time.
    pub async fn wait_for_new_owner(&self, slot: u16, old: usize) -> usize {
        let deadline = Instant::now() + FORM_DEADLINE;
        loop {
            let owner = self.node_for_slot(slot);
            if owner != old {
                return owner;
            }
            assert!(
                Instant::now() < deadline,
                "slot {slot} still on node {old} after {FORM_DEADLINE:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops `node` now (`SIGKILL`): its connections drop, its slots stay assigned to it.
    pub fn kill(&mut self, node: usize) {
        if let Some(mut child) = self.nodes[node].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stalls `node` until [`TestCluster::thaw`] (`SIGSTOP`): its connections stay open and new
    /// ones are accepted (by the kernel), but it answers nothing, neither clients nor the
    /// cluster bus (after the node timeout the other masters flag it as failing; with
    /// `cluster-require-full-coverage no` they keep serving their own slots, and its slots stay
    /// assigned to it). Commands sent meanwhile run when it is thawed.
    ///
    /// # Panics
    ///
    /// When `node` was killed, or the signal cannot be sent.
    pub fn freeze(&self, node: usize) {
        self.signal(node, "STOP");
    }

    /// Lets a [`frozen`](TestCluster::freeze) `node` run again (`SIGCONT`): it answers what it
    /// was sent meanwhile, in order, then serves as before.
    ///
    /// # Panics
    ///
    /// As [`TestCluster::freeze`].
    pub fn thaw(&self, node: usize) {
        self.signal(node, "CONT");
    }

    /// Sends the signal `name` to `node`'s process.
    fn signal(&self, node: usize, name: &str) {
        let child = self.nodes[node]
            .child
            .as_ref()
            .unwrap_or_else(|| panic!("cluster node {node} was killed: it cannot get SIG{name}"));
        crate::signal(child, name, &format!("cluster node {node}"));
    }

    /// The slot ranges `node` owns, as the first live node sees them (`CLUSTER SLOTS`), sorted.
    ///
    /// # Panics
    ///
    /// When no live node answers.
    #[must_use]
    pub fn slots_of(&self, node: usize) -> Vec<(u16, u16)> {
        let id = self.node_id(node).to_owned();
        self.slot_ranges()
            .into_iter()
            .filter(|(_, _, owner)| *owner == id)
            .map(|(first, last, _)| (first, last))
            .collect()
    }

    /// A connection to `node` alone (no redirections followed), for inspection.
    ///
    /// # Panics
    ///
    /// When the node cannot be reached.
    pub async fn connection(&self, node: usize) -> redis::aio::MultiplexedConnection {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(ADMIN_TIMEOUT))
            .set_response_timeout(Some(ADMIN_TIMEOUT));
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.nodes[node].port))
            .expect("valid node URL")
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|error| panic!("connect to cluster node {node}: {error}"))
    }

    /// A cluster client starting from the live nodes, for inspection: connect and response
    /// timeouts of 5 s (generous, so that a loaded machine does not fail a healthy command; a
    /// dead node is refused at once), 3 retries. Start from `TestCluster::client_builder` to
    /// choose others.
    ///
    /// # Panics
    ///
    /// Never in practice (the URLs are valid).
    #[must_use]
    pub fn cluster_client(&self) -> redis::cluster::ClusterClient {
        self.client_builder()
            .build()
            .expect("a cluster client for the test cluster")
    }

    /// The builder of [`TestCluster::cluster_client`], to adjust.
    #[must_use]
    pub fn client_builder(&self) -> redis::cluster::ClusterClientBuilder {
        redis::cluster::ClusterClient::builder(self.live_urls())
            .connection_timeout(CLIENT_TIMEOUT)
            .response_timeout(CLIENT_TIMEOUT)
            .retries(3)
    }

    /// An async connection of [`TestCluster::cluster_client`].
    ///
    /// # Panics
    ///
    /// When no node can be reached.
    pub async fn cluster_connection(&self) -> redis::cluster_async::ClusterConnection {
        self.cluster_client()
            .get_async_connection()
            .await
            .unwrap_or_else(|error| panic!("connect to the test cluster: {error}"))
    }

    /// Moves `slot` and its keys from node `from` to node `to`, the standard way:
    /// [`begin_migration`](TestCluster::begin_migration),
    /// [`migrate_keys`](TestCluster::migrate_keys) (batches of 100),
    /// [`finish_migration`](TestCluster::finish_migration). Returns how many keys moved.
    ///
    /// # Panics
    ///
    /// As the three steps.
    pub async fn migrate_slot(&self, slot: u16, from: usize, to: usize) -> usize {
        self.begin_migration(slot, from, to).await;
        let moved = self.migrate_keys(slot, from, to, 100).await;
        self.finish_migration(slot, from, to).await;
        moved
    }

    /// First step of a slot migration: `CLUSTER SETSLOT <slot> IMPORTING <from>` on `to`, then
    /// `CLUSTER SETSLOT <slot> MIGRATING <to>` on `from`. From then until
    /// [`finish_migration`](TestCluster::finish_migration), `from` serves the slot's keys it
    /// still has and answers `-ASK` (to `to`) for the others, which `to` serves after `ASKING`.
    ///
    /// # Panics
    ///
    /// When a node refuses (e.g. `from` does not own the slot), with its error.
    pub async fn begin_migration(&self, slot: u16, from: usize, to: usize) {
        assert_ne!(from, to, "a slot migrates between two different nodes");
        self.admin(
            to,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("IMPORTING")
                .arg(self.node_id(from)),
        )
        .await;
        self.admin(
            from,
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("MIGRATING")
                .arg(self.node_id(to)),
        )
        .await;
    }

    /// Second step: moves every key `from` has in `slot` to `to`, `batch` at a time
    /// (`CLUSTER GETKEYSINSLOT`, then `MIGRATE ... KEYS`), until none is left. Returns how
    /// many moved. Clients may keep running commands meanwhile.
    ///
    /// # Panics
    ///
    /// When a command fails (e.g. `BUSYKEY`: `to` already has one of the keys).
    pub async fn migrate_keys(&self, slot: u16, from: usize, to: usize, batch: usize) -> usize {
        let mut source = self.connection(from).await;
        let mut moved = 0;
        loop {
            let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(batch.max(1))
                .query_async(&mut source)
                .await
                .unwrap_or_else(|error| {
                    panic!("CLUSTER GETKEYSINSLOT {slot} on node {from}: {error}")
                });
            if keys.is_empty() {
                return moved;
            }
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg("127.0.0.1")
                .arg(self.nodes[to].port)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS")
                .arg(&keys);
            let _: Value = migrate
                .query_async(&mut source)
                .await
                .unwrap_or_else(|error| {
                    panic!(
                        "MIGRATE of {} keys of slot {slot} from node {from} to node {to}: {error}",
                        keys.len()
                    )
                });
            moved += keys.len();
        }
    }

    /// Last step: `CLUSTER SETSLOT <slot> NODE <to>` on `to`, then `from`, then every other
    /// live node; all of them route the slot to `to` when this returns.
    ///
    /// # Panics
    ///
    /// When a node refuses (e.g. `from` still has keys in the slot), with its error.
    pub async fn finish_migration(&self, slot: u16, from: usize, to: usize) {
        let others = (0..self.nodes.len()).filter(|&node| node != from && node != to);
        for node in [to, from].into_iter().chain(others) {
            if self.is_alive(node) {
                self.admin(
                    node,
                    redis::cmd("CLUSTER")
                        .arg("SETSLOT")
                        .arg(slot)
                        .arg("NODE")
                        .arg(self.node_id(to)),
                )
                .await;
            }
        }
    }

    /// Runs an administration command on `node`, panicking with its error.
    async fn admin(&self, node: usize, command: &redis::Cmd) {
        let mut connection = self.connection(node).await;
        let _: Value = command
            .query_async(&mut connection)
            .await
            .unwrap_or_else(|error| panic!("{} on node {node}: {error}", describe(command)));
    }

    /// The slot ranges as the first live node reports them, sorted.
    fn slot_ranges(&self) -> Vec<SlotRange> {
        let mut last_error = String::from("no node is alive");
        for node in (0..self.nodes.len()).filter(|&node| self.is_alive(node)) {
            match self.query::<Value>(node, redis::cmd("CLUSTER").arg("SLOTS")) {
                Ok(reply) => {
                    return parse_slots(&reply).unwrap_or_else(|error| {
                        panic!("unexpected CLUSTER SLOTS reply from node {node}: {error}")
                    });
                }
                Err(error) => last_error = format!("node {node}: {error}"),
            }
        }
        panic!("could not read the cluster's slots: {last_error}")
    }

    fn index_of(&self, id: &str) -> usize {
        self.nodes
            .iter()
            .position(|node| node.id == id)
            .unwrap_or_else(|| panic!("node id {id} is not one of this cluster's nodes"))
    }

    /// A blocking command to `node` on a fresh connection (for setup and inspection from any
    /// context, runtime or not).
    fn query<T: redis::FromRedisValue>(
        &self,
        node: usize,
        command: &redis::Cmd,
    ) -> redis::RedisResult<T> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.nodes[node].port))?;
        let mut connection = client.get_connection_with_timeout(ADMIN_TIMEOUT)?;
        connection.set_read_timeout(Some(ADMIN_TIMEOUT))?;
        connection.set_write_timeout(Some(ADMIN_TIMEOUT))?;
        command.query(&mut connection)
    }

    /// Starts one node, on other ports when its ports turn out to be taken.
    fn start_node(&self) -> Node {
        let binary = crate::redis_server_binary();
        let mut failures = Vec::new();
        for _ in 0..10 {
            let port = cluster_port();
            let log = self.directory.join(format!("node-{port}.log"));
            let mut child = crate::spawn_or_explain(
                Command::new(&binary)
                    .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                    .args(["--cluster-enabled", "yes"])
                    .arg("--cluster-config-file")
                    .arg(self.directory.join(format!("nodes-{port}.conf")))
                    .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                    .args(["--cluster-require-full-coverage", "no"])
                    .args(["--save", "", "--appendonly", "no"])
                    // A replica's full sync writes its master's data to this file: one per
                    // node, so that no node ever loads another's.
                    .arg("--dbfilename")
                    .arg(format!("dump-{port}.rdb"))
                    .arg("--dir")
                    .arg(&self.directory)
                    .arg("--logfile")
                    .arg(&log)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
                &binary,
                "the Redis Cluster tests need a redis-server binary. Install it (Debian/Ubuntu: \
                 `apt-get install -y redis-server`) or set REDIS_SERVER to its path",
            );
            let address = SocketAddr::from(([127, 0, 0, 1], port));
            let deadline = Instant::now() + crate::SERVER_START_DEADLINE;
            let failure = loop {
                if let Ok(Some(status)) = child.try_wait() {
                    break format!("exited with {status}");
                }
                if crate::ping(address) {
                    return Node {
                        port,
                        id: String::new(),
                        log,
                        child: Some(child),
                    };
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break format!("did not answer within {:?}", crate::SERVER_START_DEADLINE);
                }
                std::thread::sleep(Duration::from_millis(5));
            };
            failures.push(format!(
                "redis-server on port {port} (bus {}) {failure}; its log:\n{}",
                u32::from(port) + 10_000,
                read_tail(&log)
            ));
        }
        panic!(
            "could not start a cluster node in 10 attempts:\n{}",
            failures.join("\n")
        )
    }

    /// `redis-cli --cluster create` over all nodes.
    fn create(&self) {
        let binary = std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_owned());
        let output_path = self.directory.join("create.out");
        let output = std::fs::File::create(&output_path).expect("create redis-cli's output file");
        let errors = output.try_clone().expect("share redis-cli's output file");
        let mut child = crate::spawn_or_explain(
            Command::new(&binary)
                .arg("--cluster")
                .arg("create")
                .args(
                    self.nodes
                        .iter()
                        .map(|node| format!("127.0.0.1:{}", node.port)),
                )
                .args([
                    "--cluster-replicas",
                    &self.replicas.to_string(),
                    "--cluster-yes",
                ])
                .stdin(Stdio::null())
                .stdout(output)
                .stderr(errors),
            &binary,
            "the Redis Cluster tests need redis-cli to form the cluster. Install it \
             (Debian/Ubuntu: `apt-get install -y redis-server`, which brings redis-tools) or set \
             REDIS_CLI to its path",
        );
        let deadline = Instant::now() + FORM_DEADLINE;
        let status = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let printed = std::fs::read_to_string(&output_path).unwrap_or_default();
        match status {
            Some(status) if status.success() && !printed.contains("[ERR]") => {}
            Some(status) => self.fail(&format!(
                "`redis-cli --cluster create` failed ({status}); it printed:\n{printed}"
            )),
            None => self.fail(&format!(
                "`redis-cli --cluster create` did not finish within {FORM_DEADLINE:?}; it \
                 printed:\n{printed}"
            )),
        }
    }

    /// Waits until every node reports `cluster_state:ok` and the same full slot map.
    fn wait_until_formed(&self) {
        let deadline = Instant::now() + FORM_DEADLINE;
        loop {
            let last = match self.formed() {
                Ok(()) => return,
                Err(why) => why,
            };
            if Instant::now() > deadline {
                self.fail(&format!(
                    "the cluster did not form within {FORM_DEADLINE:?}: {last}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `Ok` when the cluster is formed, else why not.
    fn formed(&self) -> Result<(), String> {
        let mut first: Option<Vec<SlotRange>> = None;
        for node in 0..self.nodes.len() {
            let info: String = self
                .query(node, redis::cmd("CLUSTER").arg("INFO"))
                .map_err(|error| format!("CLUSTER INFO on node {node}: {error}"))?;
            if !info.lines().any(|line| line.trim() == "cluster_state:ok") {
                return Err(format!("node {node} reports:\n{info}"));
            }
            let reply: Value = self
                .query(node, redis::cmd("CLUSTER").arg("SLOTS"))
                .map_err(|error| format!("CLUSTER SLOTS on node {node}: {error}"))?;
            let ranges = parse_slots(&reply)?;
            let covered: u32 = ranges
                .iter()
                .map(|(first, last, _)| u32::from(*last) - u32::from(*first) + 1)
                .sum();
            let mut owners: Vec<&str> = ranges.iter().map(|(_, _, id)| id.as_str()).collect();
            owners.sort_unstable();
            owners.dedup();
            if covered != u32::from(SLOTS) || owners.len() != self.nodes.len() / (1 + self.replicas)
            {
                return Err(format!(
                    "node {node} sees {covered} slots on {} masters: {ranges:?}",
                    owners.len()
                ));
            }
            match &first {
                None => first = Some(ranges),
                Some(expected) if *expected != ranges => {
                    return Err(format!(
                        "node 0 and node {node} disagree on the slots: {expected:?} vs {ranges:?}"
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// Panics with `message` and the tail of every node's log.
    fn fail(&self, message: &str) -> ! {
        let logs: Vec<String> = self
            .nodes
            .iter()
            .map(|node| {
                format!(
                    "--- node on port {} ---\n{}",
                    node.port,
                    read_tail(&node.log)
                )
            })
            .collect();
        panic!("test cluster: {message}\n{}", logs.join("\n"))
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        // SIGKILL ends a frozen node too.
        for node in 0..self.nodes.len() {
            self.kill(node);
        }
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|node| {
                format!(
                    "127.0.0.1:{} {}{}",
                    node.port,
                    node.id,
                    if node.child.is_some() {
                        ""
                    } else {
                        " (killed)"
                    }
                )
            })
            .collect();
        f.debug_struct("TestCluster")
            .field("nodes", &nodes)
            .field("directory", &self.directory)
            .finish()
    }
}

/// A directory no other cluster (of this or another process) uses.
fn unique_directory() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    std::env::temp_dir().join(format!(
        "ratelimit-test-cluster-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A port P for a cluster node such that P and P + 10000 (its bus port) are free now.
fn cluster_port() -> u16 {
    // Node ports in [floor - 24000, floor - 14000), bus ports in [floor - 14000, floor - 4000):
    // below the ephemeral range, and apart from the fault proxies' [floor - 4000, floor).
    static PORTS: crate::PortRange = crate::PortRange::new(24_000, 10_000);
    if let Some(port) = PORTS.candidates(1_000).find(|&port| pair_is_free(port)) {
        return port;
    }
    // An unusual ephemeral range: probe ephemeral ports (a failed start is retried).
    for _ in 0..1_000 {
        let port = crate::free_port();
        if port < 55_535 && pair_is_free(port) {
            return port;
        }
    }
    panic!("found no free port P with P + 10000 free for a cluster node")
}

fn pair_is_free(port: u16) -> bool {
    let Ok(_node) = TcpListener::bind(("127.0.0.1", port)) else {
        return false;
    };
    TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
}

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), Redis Cluster's key hash.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
    }
    crc
}

/// `CLUSTER SLOTS` as `(first, last, master id)`, sorted.
fn parse_slots(reply: &Value) -> Result<Vec<SlotRange>, String> {
    let Value::Array(ranges) = reply else {
        return Err(format!("not an array: {reply:?}"));
    };
    let mut parsed = Vec::with_capacity(ranges.len());
    for range in ranges {
        let Value::Array(fields) = range else {
            return Err(format!("a range is not an array: {range:?}"));
        };
        let slot = |index: usize| match fields.get(index) {
            Some(Value::Int(slot)) => u16::try_from(*slot).map_err(|_| format!("bad slot {slot}")),
            other => Err(format!("a range has no slot at {index}: {other:?}")),
        };
        let id = match fields.get(2) {
            Some(Value::Array(master)) => match master.get(2) {
                Some(Value::BulkString(id)) => String::from_utf8_lossy(id).into_owned(),
                Some(Value::SimpleString(id)) => id.clone(),
                other => return Err(format!("a master has no id: {other:?}")),
            },
            other => return Err(format!("a range has no master: {other:?}")),
        };
        parsed.push((slot(0)?, slot(1)?, id));
    }
    parsed.sort();
    Ok(parsed)
}

/// The last lines of a log file, for failure messages.
fn read_tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        }
        Err(error) => format!("(no log at {}: {error})", path.display()),
    }
}

/// A command's words, for error messages.
fn describe(command: &redis::Cmd) -> String {
    command
        .args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => "<cursor>".to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}
