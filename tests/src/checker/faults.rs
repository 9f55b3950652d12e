//! The servers of a topology and the faults injected into them: on a seeded schedule, each
//! fault held until the injector ends it. Runs on a thread of its own (every step blocks:
//! signals, processes, the proxy's orders).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::tap::{Line, Tap};
use crate::TestRedis;
use crate::accuracy::Rng;
use crate::cluster::TestCluster;
use crate::proxy::{Fault, FaultProxy};
use crate::sentinel::TestSentinel;

/// One `redis-server` behind a fault proxy, tapped directly (not through the proxy).
pub(crate) struct Single {
    redis: Mutex<TestRedis>,
    pub(crate) proxy: FaultProxy,
    taps: Mutex<Vec<Tap>>,
    /// The lines of taps on servers since killed.
    closed: Mutex<Vec<Line>>,
    /// When (server µs) the server was killed: it lost everything then (no disk).
    wipes: Mutex<Vec<u64>>,
}

/// A Sentinel deployment (a master, its replica, three sentinels), both data servers tapped
/// (a failover closes the new master's clients, its tap among them: the taps are opened again
/// while writes are paused).
pub(crate) struct Sentinel {
    pub(crate) deployment: TestSentinel,
    taps: Mutex<Vec<Tap>>,
    /// The lines of taps since closed, with their nodes.
    closed: Mutex<Vec<(usize, Vec<Line>)>>,
}

impl Sentinel {
    /// Closes every tap (keeping its lines) and opens a tap on each data server again.
    fn reopen_taps(&self) {
        let mut taps = self.taps.lock().expect("taps");
        let mut closed = self.closed.lock().expect("closed taps");
        for tap in taps.drain(..) {
            let node = tap.node;
            closed.push((node, tap.close()));
        }
        for (node, address) in self.deployment.addresses().into_iter().enumerate() {
            taps.push(Tap::open(node, address));
        }
    }
}

/// What [`Servers::take_taps`] hands over: the open taps, the lines of closed ones with their
/// nodes, and the times the single server was wiped.
pub(crate) type Taken = (Vec<Tap>, Vec<(usize, Vec<Line>)>, Vec<u64>);

/// The servers a topology runs on (one per run: their sizes do not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Servers {
    Single(Single),
    Cluster(TestCluster),
    Sentinel(Sentinel),
}

impl Servers {
    /// One server behind a proxy, tapped.
    pub(crate) fn single() -> Servers {
        let redis = TestRedis::start_private();
        let proxy = FaultProxy::start(redis.address());
        let tap = Tap::open(0, redis.address());
        Servers::Single(Single {
            redis: Mutex::new(redis),
            proxy,
            taps: Mutex::new(vec![tap]),
            closed: Mutex::new(Vec::new()),
            wipes: Mutex::new(Vec::new()),
        })
    }

    /// A 3-master cluster (with a replica each when `replicas`), every node tapped.
    pub(crate) fn cluster(replicas: bool) -> (Servers, Vec<Tap>) {
        let cluster = if replicas {
            TestCluster::start_with_replicas(3)
        } else {
            TestCluster::start(3)
        };
        let taps = cluster
            .addresses()
            .into_iter()
            .enumerate()
            .map(|(node, address)| Tap::open(node, address))
            .collect();
        (Servers::Cluster(cluster), taps)
    }

    /// A Sentinel deployment, both data servers tapped; its sentinels call a master down only
    /// after `down_after` (a frozen master is not failed over by them).
    pub(crate) async fn sentinel(down_after: Duration) -> Servers {
        let deployment = TestSentinel::start().await;
        deployment
            .set_down_after(down_after.as_millis() as u64)
            .await;
        let sentinel = Sentinel {
            deployment,
            taps: Mutex::new(Vec::new()),
            closed: Mutex::new(Vec::new()),
        };
        tokio::task::block_in_place(|| sentinel.reopen_taps());
        Servers::Sentinel(sentinel)
    }

    /// The URLs limiters use.
    pub(crate) fn urls(&self) -> Vec<String> {
        match self {
            Servers::Single(single) => vec![single.proxy.url()],
            Servers::Cluster(cluster) => cluster.urls(),
            Servers::Sentinel(sentinel) => vec![sentinel.deployment.url()],
        }
    }

    /// The data nodes' ports (a replica sees its master's as the client of what it
    /// replicates).
    pub(crate) fn ports(&self) -> Vec<u16> {
        match self {
            Servers::Single(single) => vec![single.proxy.upstream().port()],
            Servers::Cluster(cluster) => cluster.addresses().iter().map(SocketAddr::port).collect(),
            Servers::Sentinel(sentinel) => sentinel
                .deployment
                .addresses()
                .iter()
                .map(SocketAddr::port)
                .collect(),
        }
    }

    /// Takes the taps this keeps (the single server's and the Sentinel deployment's; the
    /// cluster's are kept by the caller), the lines of its closed taps with their nodes, and
    /// the times the single server was wiped.
    pub(crate) fn take_taps(&self) -> Taken {
        match self {
            Servers::Single(single) => {
                let closed = std::mem::take(&mut *single.closed.lock().expect("closed taps"));
                (
                    std::mem::take(&mut *single.taps.lock().expect("taps")),
                    if closed.is_empty() {
                        Vec::new()
                    } else {
                        vec![(0, closed)]
                    },
                    std::mem::take(&mut *single.wipes.lock().expect("wipes")),
                )
            }
            Servers::Cluster(_) => (Vec::new(), Vec::new(), Vec::new()),
            Servers::Sentinel(sentinel) => (
                std::mem::take(&mut *sentinel.taps.lock().expect("taps")),
                std::mem::take(&mut *sentinel.closed.lock().expect("closed taps")),
                Vec::new(),
            ),
        }
    }
}

/// Injects faults until `until`, drawn from `seed`; returns how many of each kind. Every
/// fault is over when it returns.
pub(crate) fn inject(
    servers: &Servers,
    seed: u64,
    until: Instant,
    failovers: bool,
) -> BTreeMap<&'static str, u64> {
    let mut rng = Rng::new(seed);
    let mut counts = BTreeMap::new();
    // The Sentinel harness is async: a runtime of this thread's own drives it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the injector");
    loop {
        std::thread::sleep(Duration::from_millis(300 + rng.below(1_200)));
        if Instant::now() >= until {
            return counts;
        }
        let hold = Duration::from_millis(300 + rng.below(2_200));
        let kind = match servers {
            Servers::Single(single) => single_fault(single, &mut rng, hold),
            Servers::Cluster(cluster) => cluster_fault(cluster, &mut rng, hold, failovers),
            Servers::Sentinel(sentinel) => {
                runtime.block_on(sentinel_fault(sentinel, &mut rng, hold))
            }
        };
        *counts.entry(kind).or_default() += 1;
    }
}

/// One fault of the single server, held for `hold`.
fn single_fault(single: &Single, rng: &mut Rng, hold: Duration) -> &'static str {
    let proxy = &single.proxy;
    let kind = match rng.below(6) {
        0 | 1 => {
            proxy.set(Fault::Stall);
            "proxy stall"
        }
        2 => {
            proxy.set(Fault::Delay(Duration::from_millis(50 + rng.below(400))));
            "proxy delay"
        }
        3 => {
            proxy.set(Fault::CutMidCall);
            "proxy cut mid-call (reply lost)"
        }
        4 => {
            proxy.set(Fault::Refuse);
            "proxy refuse"
        }
        _ => {
            restart(single, hold);
            return "server killed and restarted";
        }
    };
    std::thread::sleep(hold);
    proxy.set(Fault::Pass);
    kind
}

/// Kills the server, keeps it down for `down`, starts it again on its port and taps it
/// before the proxy lets traffic through.
fn restart(single: &Single, down: Duration) {
    single.proxy.set(Fault::Stall);
    let mut redis = single.redis.lock().expect("the server");
    let address = redis.address();
    redis.stop();
    single
        .wipes
        .lock()
        .expect("wipes")
        .push(super::now_micros());
    let old: Vec<Tap> = std::mem::take(&mut *single.taps.lock().expect("taps"));
    for tap in old {
        single
            .closed
            .lock()
            .expect("closed taps")
            .extend(tap.close());
    }
    std::thread::sleep(down);
    let deadline = Instant::now() + crate::STATE_DEADLINE;
    *redis = loop {
        match TestRedis::start_on(address.port()) {
            Ok(started) => break started,
            Err(error) => {
                assert!(Instant::now() < deadline, "restart the server: {error}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    single
        .taps
        .lock()
        .expect("taps")
        .push(Tap::open(0, address));
    single.proxy.set(Fault::Pass);
}

/// One fault of the cluster, held for `hold`: a master frozen, or (with `failovers`) a
/// manual failover of a master to its replica.
fn cluster_fault(
    cluster: &TestCluster,
    rng: &mut Rng,
    hold: Duration,
    failovers: bool,
) -> &'static str {
    let masters: Vec<usize> = (0..cluster.len())
        .filter(|&node| cluster.is_alive(node) && !cluster.slots_of(node).is_empty())
        .collect();
    if masters.is_empty() {
        // The node asked sees no master for a moment (a failover under way): no fault now.
        return "none: no master seen for a moment";
    }
    let master = masters[rng.below(masters.len() as u64) as usize];
    let replica = cluster.try_replica_of(master);
    let slot = cluster.slots_of(master).first().map(|&(slot, _)| slot);
    if let (true, Some(replica), Some(slot)) = (failovers && rng.below(3) == 0, replica, slot) {
        // A manual failover needs a replica in sync (one that was the master a moment ago
        // syncs first), and gives up by itself when it cannot catch up in time: it is asked
        // again until it is done.
        let deadline = Instant::now() + crate::STATE_DEADLINE;
        let mut asked = None;
        // Done once another node owns the slot (none may, for a moment, in between).
        while cluster
            .owner_of_slot(slot)
            .is_none_or(|owner| owner == master)
        {
            assert!(
                Instant::now() < deadline,
                "failover of node {master} to node {replica} not done"
            );
            if cluster.replica_in_sync(replica)
                && asked.is_none_or(|at: Instant| at.elapsed() > Duration::from_secs(5))
            {
                cluster.failover(replica);
                asked = Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        return "master failed over (manual)";
    }
    // With replicas, a freeze stays below the node timeout (2 s), so that no automatic
    // failover drops what the frozen master runs when thawed.
    let hold = if failovers {
        hold.min(Duration::from_millis(1_200))
    } else {
        hold
    };
    cluster.freeze(master);
    std::thread::sleep(hold);
    cluster.thaw(master);
    "master frozen, then thawed"
}

/// One fault of the Sentinel deployment, held for `hold`: the master frozen (below the
/// sentinels' down-after time: no failover), or a failover that loses no write (writes paused,
/// the replica caught up: see `TestSentinel::graceful_failover`).
async fn sentinel_fault(sentinel: &Sentinel, rng: &mut Rng, hold: Duration) -> &'static str {
    let deployment = &sentinel.deployment;
    let Some(master) = deployment.master().await else {
        return "none: no master named for a moment";
    };
    if rng.below(3) == 0 {
        deployment
            .graceful_failover(|_, _| sentinel.reopen_taps())
            .await;
        return "master failed over (writes paused, none lost)";
    }
    deployment.freeze(master);
    tokio::time::sleep(hold).await;
    deployment.thaw(master);
    "master frozen, then thawed"
}
