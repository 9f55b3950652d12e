//! A seeded randomized fault checker (in the spirit of Jepsen) for the limiter's promise: no
//! limit ever admits more than its threshold in any window, whatever happens.
//!
//! [`run`] takes three topologies in turn: one `redis-server` behind a [`FaultProxy`], a
//! 3-master Redis Cluster (a replica each in the full-size run), and a Sentinel deployment (a
//! master, its replica, three sentinels). On each it builds three limiters (three application
//! servers) sharing one key prefix, failing `Closed`, `Open` and `Local`, each with a 1 s
//! timeout (a busy 2-core machine never looks like a fault), and runs concurrent tasks
//! drawing, from the seed, a mix of operations, one in six given a deadline of its caller's
//! that may stop it at any point (within a round trip or two, or later):
//!
//! - by hand (`ops.rs`): `check`, `check_n`, `check_all` (logs and sliding window counters,
//!   one cluster slot through `{u1}` or several), `check_permit` then a refund or not, `peek`,
//!   `until_ready` and `reset`, on nine keys of thresholds 3 to 10 and periods of 1 to 5 s, and
//!   two leased ones (a log of 64 and a counter of 48 per 2 s, whose plain checks go through
//!   quota leases, and which half of the resets reset while other limiters spend their
//!   leases);
//! - through the real attribute (`callers.rs`: named and unnamed, stacked with names and with
//!   positions, leased logs and counters) and the real axum layers of one router (`/login` and
//!   `/search` on the default scope at two rates, `/export` on a named scope of two rates),
//!   for two users, each caller with a short and a long limit somewhere, so that the checker
//!   reads the attribute's and the layers' key layouts as the guide documents them;
//!   `reset_scope` of their scopes, half of them leased ones;
//! - a leased function only the first limiter calls and resets (in pairs, the second while the
//!   window fills again, then a period before the next pair), each reset stopped by its caller
//!   once its first, second or third round trip is done: a reserve only the resetting limiter
//!   holds;
//! - the subjects the limits shared through Redis address (`changes.rs`), each limiter a task
//!   of its own: checks by hand in a scope (`Limiter::scope`: a log, a counter, a leased log)
//!   and an attributed function, while a changer changes their entries through a random
//!   limiter (every limiter follows them): a scope's rate lowered or raised, the scope
//!   removed, a key's override (a rate, a block, an exemption, with or without an expiry) set
//!   or removed, the scope's switch flipped to `shadow` or `off` and back; each change proven
//!   in force on every limiter (a refresh of each after the write) and read back.
//!
//! - concurrency limits' slots (`slots.rs`), a few holder tasks per limiter: held by hand
//!   (`Limiter::acquire`), through an attributed function whose concurrency limit is stacked
//!   under a rate, and through the layer's route (the limiter's that fails closed), from a few
//!   milliseconds to past their slot time (renewed meanwhile), some given up by their callers
//!   before or while they hold.
//!
//! Meanwhile a thread injects faults on a seeded schedule, each held until it ends it: proxy
//! stall, delay, cut mid-call (the command ran, its reply is lost), refuse, the server killed
//! and restarted on its port (without disk: it forgets everything); in the cluster a master
//! frozen then thawed, and in the full run a manual failover; in the Sentinel deployment the
//! master frozen (for less than the sentinels' down-after time) then thawed, or failed over by
//! the sentinels with writes paused and the replica caught up, so that nothing is lost.
//!
//! # Judged on what the servers recorded
//!
//! Every node is tapped with `MONITOR` before traffic starts (again after a restart, before
//! the proxy lets traffic through). A script's commands show as `[<db> lua]` lines right after
//! its `EVALSHA`/`EVAL` line, which names the script (by the SHA1 of the runtime's own
//! sources) and carries its arguments; a replica's replicated commands show with its master's
//! address, so counting only script lines counts each command once. From them:
//!
//! - **Exactness of logs**: each `ZADD ... NX <score> <member>` that added a member is an
//!   admission at server time `<score>`; a refund's `ZREM` of it takes it back; a reset (the
//!   reset script, a `DEL` or `UNLINK` of the key) or a restart forgets what came before, but
//!   for what the reset kept (live leases' reserves), which starts the new epoch at its
//!   scores. In every key, every window `(t − P, t]` holds at most the threshold of the
//!   admission in it that its script decided last (that script counted all the others: the
//!   store contract's bound while limits change), among the admissions not taken back since
//!   the last reset; a log checked under two periods (two thresholds, but for a subject the
//!   shared limits address) is two limits sharing one log.
//! - **The shared limits**: each check script of a subject they address carries a threshold
//!   that one of their versions possible then gives it (`changes.rs`'s timeline: a version is
//!   possible from its write until the next is in force on every limiter, and 5 s after, the
//!   longest a check resolved before may take to reach the store).
//! - **Exactness of counters**: a check's `HSET` of a counter's field adds the check's cost to
//!   the fixed window its value names; a refund takes its cost from the window of its check's
//!   time only when that admission added to that window (same key, period, since the last
//!   reset, once). Per key, period and window, the cost admitted and not taken back is at
//!   most the threshold. (The sliding estimate's bound, `counter.rs`'s, is not judged: the
//!   check's time is not in what the tap shows of a counter check, only the tap's own clock.)
//! - **Leases**: a lease's entries count as any admission (a log's reserve at its score, the
//!   lease's end; a counter's grant, read from its `HSET`, in its window); a resent lease
//!   removes only its own reserve (members `<lease>.1..`), and a give-back only members
//!   `<lease>.1..=cost` of its own lease, at most what it reserved, once.
//! - **Refunds**: a refund removes only members `<admission>.<j>` (`j` up to its cost) of its
//!   own admission, and a counter refund subtracts only from a window its admission added to,
//!   at most once.
//! - **Denied calls record nothing**: per key, what the servers hold (recorded, refunds taken
//!   off) is at most what the application servers were told was admitted, plus the cost of
//!   the calls whose outcome they could not know (errors, the failure policy's answers, and
//!   denials of checks across cluster slots: a reservation a refund could not reach stays),
//!   and the reserves of leases not given back (spent, or left to leave with their lease).
//! - **No admission unrecorded**: per key, what the application servers were told was
//!   admitted (refunds taken off) is at most what the servers recorded, plus the cost of the
//!   refunds whose outcome they could not know and of the calls admitted while the server was
//!   killed (the tap may miss a command whose reply the stalled proxy delivered after the
//!   restart). A limiter that spent more of a lease than it reserved, or a reserve after
//!   giving it back, fails here.
//! - **Counters kept by a reset**: the reset script's rewrite of a counter's field (a window's
//!   kept reserve) starts the new epoch, and the grants of that window's leases go with it:
//!   their give-backs take at most what the reset kept.
//! - **State**: after quiet, every key under the prefix has a TTL.
//! - **Liveness**: every call returned within its timeout (twice for two round trips: across
//!   cluster slots, a reset of a log and counter in two slots, a leased check that waited for
//!   its lease's renewal; plus a wait's own limit) and 500 ms; no task panicked.
//!
//! # Judged on what the callers were told
//!
//! The records of every call (its start and end, its answer, who answered for each limit)
//! are judged per limit as callers name it (a key by hand, an attribute's limit, a layer's
//! rate for a user), per window, whatever the servers recorded: a log at most its threshold
//! in every window of one period, a counter at most its threshold in every fixed window and
//! `2 × threshold − 1` in every window of one period, counting the admissions whose whole
//! span lies in the window; after a reset (as the taps saw it run) or a restart, over the
//! admissions that started after it; for a subject the shared limits address, the highest
//! threshold their versions possible during the window give it (exact where one alone is).
//! `told.rs` says what it leaves out and why.
//!
//! Concurrency limits are judged apart (`slots.rs`): at no instant more holders whose claim
//! the store counts than the limit, each over the span its holder knew it held; the failure
//! policy `Local`'s, per limiter.
//!
//! # Documented exceptions, and the rules that exclude them
//!
//! - Calls answered by the failure policy (`Decision::answered_by_policy`: `Open`'s and
//!   `Local`'s admissions) record nothing in Redis: the tap never sees them. Counted.
//! - A call of counters only, resent after its connection closed mid-call, may be counted
//!   twice (it over-counts, which is safe): a second `HSET` of one admission is not counted
//!   again. Counted.
//! - Replication lost on a failover (the store contract's one exception: a lost admission
//!   lets the new master admit again, and a later refund of a counter's admission there takes
//!   another call's cost): the full run fails over by hand (`CLUSTER FAILOVER`, which waits
//!   for the replica to catch up) and keeps frozen masters below the node timeout, so nothing
//!   is lost, and its cluster limiters wait for their replica (`wait_for_replicas`); the
//!   Sentinel deployment's failovers pause writes until the replica caught up, and its freezes
//!   stay below the sentinels' down-after time. A failover that loses writes (a master
//!   killed) is not injected.
//! - The layers' requests all go through the limiter that fails closed: another's `200` may
//!   be its policy's, which a response does not tell.
//! - Blindness: a hot key whose admissions callers were told of, and of which the tap saw
//!   none, is a violation (a lost tap, or a key layout the checker cannot read, would
//!   otherwise pass unjudged).
//!
//! A failing run panics with its seed and the command that replays it
//! ([`Report::assert_clean`]).
//!
//! [`FaultProxy`]: crate::proxy::FaultProxy

mod callers;
mod changes;
mod faults;
mod ops;
mod slots;
mod tap;
mod told;
mod verify;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ratelimit_runtime::{Algorithm, FailurePolicy, Limiter, Rate};

use self::faults::Servers;
use self::ops::{Kind, Outcome, Record, Source, Subject, Traffic};
use self::tap::{Line, Tap};

/// The variable that fixes the CI run's seed.
pub const SEED_VARIABLE: &str = "RATELIMIT_CHECKER_SEED";

/// The limiters' timeout (≥ 1 s: a busy 2-core machine's starvation is not a fault).
const TIMEOUT: Duration = Duration::from_secs(1);

/// Traffic tasks per limiter.
const TASKS_PER_LIMITER: usize = 3;

/// A run's size and seed.
#[derive(Clone, Debug)]
pub struct Config {
    /// Draws the operations and the faults.
    pub seed: u64,
    /// Traffic per topology.
    pub traffic: Duration,
    /// Replicas and failovers in the cluster.
    pub full: bool,
    /// The topologies to run, in turn ([`Topology::ALL`] for all).
    pub topologies: Vec<Topology>,
    /// The command that replays this run, for a failure's message.
    pub replay: String,
}

/// What one topology's run did and found.
#[derive(Debug, Default)]
pub struct TopologyReport {
    /// `single server` or `cluster`.
    pub name: String,
    /// Calls per kind, then per outcome.
    pub operations: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    /// Faults injected, per kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Documented exceptions and notable events, counted.
    pub exceptions: BTreeMap<&'static str, u64>,
    /// What broke the promise.
    pub violations: Vec<String>,
    /// Per limiter, the share of its checks the store answered (admitted or denied), per
    /// tenth of the traffic: a limiter that stays on its failure policy long after the faults
    /// show here.
    pub answered_by_store: Vec<String>,
    /// Wall time, servers included.
    pub took: Duration,
}

/// A run's report.
#[derive(Debug)]
pub struct Report {
    /// The run's configuration.
    pub config: Config,
    /// One per topology.
    pub topologies: Vec<TopologyReport>,
    /// Wall time in all.
    pub took: Duration,
}

impl Report {
    /// How many violations were found.
    #[must_use]
    pub fn violations(&self) -> usize {
        self.topologies.iter().map(|t| t.violations.len()).sum()
    }

    /// Panics when a violation was found, with the report, the seed and the command that
    /// replays the run.
    ///
    /// # Panics
    ///
    /// When [`Report::violations`] is not 0.
    pub fn assert_clean(&self) {
        assert!(
            self.violations() == 0,
            "{self}\nthe fault checker found {} violation(s) with seed {}; replay: {}",
            self.violations(),
            self.config.seed,
            self.config.replay
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fault checker, seed {} ({} s of traffic per topology{}), {:.1} s in all",
            self.config.seed,
            self.config.traffic.as_secs(),
            if self.config.full {
                ", full size: replicas and failovers"
            } else {
                ""
            },
            self.took.as_secs_f64()
        )?;
        writeln!(
            f,
            "outcomes: admitted / denied by Redis; policy admitted / denied: answered by the \
             failure policy (Open, Local), which records nothing in Redis; error: an error \
             answer (Unavailable under Closed, a refund or reset that failed), which may have \
             been recorded; judged: what the tap saw and the verdict weighed"
        )?;
        for topology in &self.topologies {
            writeln!(
                f,
                "== {} ({:.1} s)",
                topology.name,
                topology.took.as_secs_f64()
            )?;
            for (kind, outcomes) in &topology.operations {
                let total: u64 = outcomes.values().sum();
                let detail: Vec<String> =
                    outcomes.iter().map(|(o, n)| format!("{o} {n}")).collect();
                writeln!(f, "  op {kind}: {total} ({})", detail.join(", "))?;
            }
            for (fault, n) in &topology.faults {
                writeln!(f, "  fault {fault}: {n}")?;
            }
            for (exception, n) in &topology.exceptions {
                writeln!(f, "  {exception}: {n}")?;
            }
            for line in &topology.answered_by_store {
                writeln!(f, "  {line}")?;
            }
            writeln!(f, "  violations: {}", topology.violations.len())?;
            for violation in topology.violations.iter().take(50) {
                writeln!(f, "    - {violation}")?;
            }
        }
        Ok(())
    }
}

/// A seed for a run: `RATELIMIT_CHECKER_SEED`, or drawn from the clock.
///
/// # Panics
///
/// When the variable is set but is not a number.
#[must_use]
pub fn seed_from_env() -> u64 {
    match std::env::var(SEED_VARIABLE) {
        Ok(seed) if !seed.is_empty() => seed
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_VARIABLE}={seed:?} is not a number")),
        _ => now_micros() % 1_000_000_007,
    }
}

/// Runs the checker: the single server, then the cluster.
///
/// # Panics
///
/// When the servers cannot be started, a limiter cannot be built or connect, or a tap does
/// not catch up (a fault of the harness, not a violation).
pub async fn run(config: Config) -> Report {
    let started = Instant::now();
    let mut topologies = Vec::new();
    for &topology in &config.topologies {
        topologies.push(run_topology(&config, topology).await);
    }
    Report {
        config,
        topologies,
        took: started.elapsed(),
    }
}

/// The deployments a run takes in turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// One server behind a fault proxy.
    Single,
    /// A 3-master Redis Cluster (a replica each in the full-size run).
    Cluster,
    /// A master, its replica and three sentinels.
    Sentinel,
}

impl Topology {
    /// Every topology, in the order a run takes them.
    pub const ALL: [Topology; 3] = [Topology::Single, Topology::Cluster, Topology::Sentinel];

    fn name(self) -> &'static str {
        match self {
            Topology::Single => "single server",
            Topology::Cluster => "cluster",
            Topology::Sentinel => "sentinel",
        }
    }
}

/// Server time as the taps read it: µs since the Unix epoch (one machine, one clock).
pub(crate) fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

/// A number never handed out twice in this process (tap markers).
pub(crate) fn next_marker() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// How long the checker's sentinels wait before they call a master down: longer than any
/// freeze it injects, so that only the failovers it asks for happen.
const SENTINEL_DOWN_AFTER: Duration = Duration::from_secs(10);

/// Starts a topology's servers (blocking work, off the runtime's threads).
async fn start(topology: Topology, full: bool) -> (Servers, Vec<Tap>) {
    match topology {
        Topology::Single => tokio::task::spawn_blocking(|| (Servers::single(), Vec::new()))
            .await
            .expect("start the server"),
        Topology::Cluster => tokio::task::spawn_blocking(move || Servers::cluster(full))
            .await
            .expect("start the cluster"),
        Topology::Sentinel => (Servers::sentinel(SENTINEL_DOWN_AFTER).await, Vec::new()),
    }
}

/// Three limiters on `servers`, sharing `prefix`.
async fn limiters(servers: &Servers, prefix: &str, topology: Topology, full: bool) -> Vec<Limiter> {
    let policies = [
        FailurePolicy::Closed,
        FailurePolicy::Open,
        FailurePolicy::Local,
    ];
    let mut limiters = Vec::new();
    for (i, policy) in policies.into_iter().enumerate() {
        // Each follows the limits shared through Redis, which the changer changes.
        let builder = Limiter::builder()
            .key_prefix(prefix)
            .failure_policy(policy)
            .timeout(TIMEOUT)
            .shared_limits();
        let builder = if topology == Topology::Cluster {
            builder.redis_cluster(servers.urls())
        } else {
            builder.redis_url(&servers.urls()[0])
        };
        let builder = builder.deny_cache(i % 2 == 0);
        let builder = if topology == Topology::Cluster && full {
            builder.wait_for_replicas(1, Duration::from_millis(400))
        } else {
            builder
        };
        limiters.push(builder.build().expect("build a limiter"));
    }
    for limiter in &limiters {
        crate::connected(limiter, "checker-warm-up").await;
    }
    limiters
}

/// The tasks per limiter holding concurrency limits' slots (`slots.rs`): more than a limit's
/// two slots, so that they contend.
const HOLDERS_PER_LIMITER: usize = 3;

async fn run_topology(config: &Config, topology: Topology) -> TopologyReport {
    let started = Instant::now();
    let name = topology.name();
    let seed = config.seed.wrapping_mul(3).wrapping_add(topology as u64);
    let (servers, cluster_taps) = start(topology, config.full).await;
    let prefix = crate::unique_prefix(match topology {
        Topology::Single => "checker-single",
        Topology::Cluster => "checker-cluster",
        Topology::Sentinel => "checker-sentinel",
    });
    let cluster = topology == Topology::Cluster;
    let limiters = limiters(&servers, &prefix, topology, config.full).await;
    let epoch = Instant::now();
    let epoch_micros = now_micros();
    let router = callers::router(&limiters[ops::CLOSED]);
    let traffic = Arc::new(Traffic {
        limiters,
        router,
        subjects: ops::subjects(),
        cluster,
        timeout: TIMEOUT,
        epoch,
        records: Mutex::new(Vec::new()),
        epoch_micros,
        holds: Mutex::new(Vec::new()),
        solo_reset: Mutex::new((None, 0)),
    });
    let until = epoch + config.traffic;
    let servers = Arc::new(servers);
    let injector = std::thread::spawn({
        let servers = Arc::clone(&servers);
        let full = config.full;
        move || faults::inject(&servers, seed ^ 0x5eed_fa17, until, full)
    });
    let mut tasks = Vec::new();
    for task in 0..traffic.limiters.len() * TASKS_PER_LIMITER {
        let traffic = Arc::clone(&traffic);
        let seed = seed.wrapping_mul(31).wrapping_add(task as u64);
        tasks.push(tokio::spawn(traffic.run_task(task, seed, until)));
    }
    // The registered subjects' traffic and the changes of the shared limits, each drawn
    // from seeds of their own (the other tasks draw as they did before them).
    let registered: Vec<usize> = (0..traffic.subjects.len())
        .filter(|&i| traffic.subjects[i].address.is_some())
        .collect();
    for limiter in 0..traffic.limiters.len() {
        let traffic = Arc::clone(&traffic);
        let seed = seed ^ 0x0005_1ab5_u64.wrapping_mul(limiter as u64 + 1);
        tasks.push(tokio::spawn(traffic.run_registered(
            limiter,
            registered.clone(),
            seed,
            until,
        )));
    }
    // The holders of concurrency limits' slots, a few tasks per limiter.
    for holder in 0..traffic.limiters.len() * HOLDERS_PER_LIMITER {
        let traffic = Arc::clone(&traffic);
        let seed = seed ^ 0x0510_7500_u64.wrapping_mul(holder as u64 + 1);
        let limiter = holder % traffic.limiters.len();
        tasks.push(tokio::spawn(traffic.run_holders(limiter, seed, until)));
    }
    let changer = Arc::new(changes::Changer {
        limiters: traffic.limiters.clone(),
        subjects: registered
            .iter()
            .map(|&i| traffic.subjects[i].clone())
            .collect(),
        epoch,
        timeline: Mutex::new(changes::Timeline::new(epoch_micros)),
        refreshed: Mutex::new(0),
    });
    tasks.push(tokio::spawn(
        Arc::clone(&changer).run(seed ^ 0x0c4a_96e5, until),
    ));
    let mut violations = Vec::new();
    for task in tasks {
        if let Err(error) = task.await {
            violations.push(format!("liveness: a traffic task failed: {error}"));
        }
    }
    let faults = tokio::task::spawn_blocking(move || injector.join())
        .await
        .expect("join the injector")
        .unwrap_or_else(|_| panic!("the fault injector panicked (seed {})", config.seed));
    // Quiet: what a timed-out call handed to the runtime (its run, its refund) ends within
    // the timeout of each of its two round trips.
    tokio::time::sleep(2 * TIMEOUT + Duration::from_millis(500)).await;
    violations.extend(untimed_keys(&servers, &prefix).await);
    let (own_taps, closed, wipes) = servers.take_taps();
    let restarts = wipes.clone();
    let mut taps: Vec<(usize, Vec<Line>)> = closed;
    for tap in own_taps.into_iter().chain(cluster_taps) {
        let node = tap.node;
        let synced = tokio::task::block_in_place(|| tap.sync(crate::STATE_DEADLINE));
        assert!(synced, "the tap on node {node} did not catch up");
        taps.push((node, tap.close()));
    }
    let records = traffic.records.lock().expect("the records").clone();
    let timeline = changer.timeline.lock().expect("the timeline").clone();
    let policies: Vec<FailurePolicy> = traffic
        .limiters
        .iter()
        .map(Limiter::failure_policy)
        .collect();
    let verdict = verify::judge(&verify::Inputs {
        taps,
        wipes,
        epoch_micros,
        records: &records,
        subjects: &traffic.subjects,
        policies: &policies,
        servers: &servers.ports(),
        prefix: &prefix,
        timeline: &timeline,
    });
    let mut verdict = verdict;
    let holds = traffic.holds.lock().expect("the holds").clone();
    slots::judge(
        &holds,
        &traffic.subjects,
        &policies,
        &restarts,
        epoch_micros,
        &mut verdict,
    );
    violations.extend(verdict.violations);
    let mut exceptions = verdict.exceptions;
    violations.extend(liveness(&records, &traffic.subjects));
    let mut operations: BTreeMap<&'static str, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for record in &records {
        let outcome = match record.outcome {
            Outcome::Admitted => "admitted",
            Outcome::Denied => "denied",
            Outcome::Policy { allowed: true } => "policy admitted",
            Outcome::Policy { allowed: false } => "policy denied",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
            Outcome::Done => "done",
            Outcome::Unchecked => "not checked (off, exempt)",
            Outcome::Unknown => "unknown (shadow or off)",
        };
        *operations
            .entry(record.kind.name())
            .or_default()
            .entry(outcome)
            .or_default() += 1;
        if matches!(record.outcome, Outcome::Policy { .. }) {
            *exceptions
                .entry("answered by the failure policy (recorded nothing in Redis)")
                .or_default() += 1;
        }
    }
    let (mut answered_by_store, stuck) = answered_by_store(&records, traffic.limiters.len());
    // The changes of the shared limits, and how long each took to be seen in force on every
    // limiter (a refresh of each after its write).
    let mut took: Vec<Duration> = Vec::new();
    for version in timeline.versions.iter().skip(1) {
        *exceptions.entry(version.kind).or_default() += 1;
        match version.applied {
            Some(applied) => took.push(applied.saturating_sub(version.began)),
            None => {
                *exceptions
                    .entry("shared limits: changes never seen in force everywhere (judged as possible to the end)")
                    .or_default() += 1;
            }
        }
    }
    took.sort();
    if let (Some(median), Some(most)) = (took.get(took.len() / 2), took.last()) {
        answered_by_store.push(format!(
            "shared limits: {} changes, each in force on every limiter (its thread's reads, \
             or a refresh for {} of them) after {:.0} ms at the median, {:.0} ms at most",
            took.len(),
            changer.refreshed.lock().expect("the count"),
            median.as_secs_f64() * 1e3,
            most.as_secs_f64() * 1e3
        ));
    }
    violations.extend(stuck);
    drop(traffic);
    drop(servers);
    TopologyReport {
        name: name.to_owned(),
        operations,
        faults,
        exceptions,
        violations,
        answered_by_store,
        took: started.elapsed(),
    }
}

/// Per limiter, the percentage of its checks (calls that admit) the store answered, admitted
/// or denied, in each tenth of the run; and the liveness violations it shows: a limiter the
/// store answered at most 1 % of the time in three tenths in a row (longer than any fault
/// holds, at CI size too), while it answered another limiter of the same servers at least 30 %
/// of the time in each (its breaker stuck open: no fault explains it).
fn answered_by_store(records: &[Record], limiters: usize) -> (Vec<String>, Vec<String>) {
    let end = records
        .iter()
        .map(|record| record.started)
        .max()
        .unwrap_or_default()
        .as_secs_f64()
        .max(1e-3);
    let shares: Vec<[(u64, u64); 10]> = (0..limiters)
        .map(|limiter| {
            let mut tenths = [(0_u64, 0_u64); 10];
            for record in records
                .iter()
                .filter(|r| r.limiter == limiter && r.kind.admits())
            {
                let tenth = ((record.started.as_secs_f64() / end * 10.0) as usize).min(9);
                tenths[tenth].1 += 1;
                if matches!(record.outcome, Outcome::Admitted | Outcome::Denied) {
                    tenths[tenth].0 += 1;
                }
            }
            tenths
        })
        .collect();
    let percent = |&(store, all): &(u64, u64)| store * 100 / all.max(1);
    let lines = shares
        .iter()
        .enumerate()
        .map(|(limiter, tenths)| {
            let shown: Vec<String> = tenths.iter().map(|t| format!("{}%", percent(t))).collect();
            format!(
                "answered by the store, limiter {limiter}, per tenth of the run: {}",
                shown.join(" ")
            )
        })
        .collect();
    let mut stuck = Vec::new();
    for (limiter, tenths) in shares.iter().enumerate() {
        let starved = |tenth: usize| {
            tenths[tenth].1 > 0
                && percent(&tenths[tenth]) <= 1
                && shares
                    .iter()
                    .enumerate()
                    .any(|(other, theirs)| other != limiter && percent(&theirs[tenth]) >= 30)
        };
        if let Some(first) = (0..8).find(|&tenth| (tenth..tenth + 3).all(starved)) {
            stuck.push(format!(
                "liveness: the store answered limiter {limiter} at most 1 % of the time from tenth \
                 {first} of the run on, for three tenths, while it answered another at least 30 % \
                 of the time (a breaker stuck open?)"
            ));
        }
    }
    (lines, stuck)
}

/// Every call returned within its bound.
fn liveness(records: &[Record], subjects: &[Subject]) -> Vec<String> {
    records
        .iter()
        .filter(|record| record.took > record.bound)
        .map(|record| {
            let keys: Vec<&str> = record
                .limits
                .iter()
                .map(|&(i, _)| subjects[i].name.as_str())
                .collect();
            format!(
                "liveness: {} of {keys:?} by limiter {} started at {:.3} s took {:?} (bound {:?})",
                record.kind.name(),
                record.limiter,
                record.started.as_secs_f64(),
                record.took,
                record.bound
            )
        })
        .collect()
}

/// The keys under `prefix` without a TTL, after quiet.
async fn untimed_keys(servers: &Servers, prefix: &str) -> Vec<String> {
    let mut connections = Vec::new();
    match servers {
        Servers::Single(single) => {
            let url = format!("redis://{}/", single.proxy.upstream());
            let client = redis::Client::open(url).expect("a URL");
            connections.push(
                client
                    .get_multiplexed_async_connection_with_config(&crate::inspection_config())
                    .await
                    .expect("connect to the server"),
            );
        }
        Servers::Cluster(cluster) => {
            // The masters: a replica answers a key's PTTL with MOVED.
            for node in 0..cluster.len() {
                if cluster.slots_of(node).is_empty() {
                    continue;
                }
                connections.push(cluster.connection(node).await);
            }
        }
        Servers::Sentinel(sentinel) => {
            let master = sentinel
                .deployment
                .master()
                .await
                .expect("the sentinels name a master");
            connections.push(sentinel.deployment.server(master).connection().await);
        }
    }
    let mut violations = Vec::new();
    for mut connection in connections {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}*"))
            .query_async(&mut connection)
            .await
            .expect("list the keys");
        // The shared limits' keys are kept until changed, as any configuration.
        for key in keys.into_iter().filter(|key| !key.contains("{registry}")) {
            let ttl: i64 = redis::cmd("PTTL")
                .arg(&key)
                .query_async(&mut connection)
                .await
                .expect("PTTL");
            if ttl == -1 {
                let key = key.strip_prefix(prefix).unwrap_or(&key);
                violations.push(format!("state: key {key} has no TTL after quiet"));
            }
        }
    }
    violations
}

/// The focused scenario that the counter's background refund of a timed-out check breaks
/// (threshold 10: a check of cost 10 admitted, a check of cost 5 stalled past the timeout and
/// refunded once the stall ends, then a check of cost 5): on the single server, judged as
/// [`run`] judges.
///
/// # Panics
///
/// When the server, its proxy or its tap cannot be started, or the limiter built.
pub async fn stalled_counter_refund(config: Config) -> Report {
    let started = Instant::now();
    let (servers, _) = start(Topology::Single, false).await;
    let Servers::Single(single) = &servers else {
        unreachable!("a single server")
    };
    let prefix = crate::unique_prefix("checker-focused");
    let limiter = Limiter::builder()
        .redis_url(single.proxy.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(TIMEOUT)
        .deny_cache(false)
        .build()
        .expect("build a limiter");
    crate::connected(&limiter, "checker-warm-up").await;
    let period = Duration::from_secs(10);
    let rate = Rate::new(10, period)
        .expect("a valid rate")
        .with_algorithm(Algorithm::SlidingWindowCounter);
    let hot = vec![Subject {
        name: "ctr:focused".to_owned(),
        key: "ctr:focused".to_owned(),
        rate,
        caller: ops::Caller::Hand,
        scope: None,
        address: None,
    }];
    // Start early in a fixed window, so that the three checks share it.
    let within = now_micros() % period.as_micros() as u64;
    if within > 4_000_000 {
        tokio::time::sleep(Duration::from_micros(period.as_micros() as u64 - within)).await;
    }
    let epoch = Instant::now();
    let epoch_micros = now_micros();
    let mut records = Vec::new();
    let mut call = async |cost: u32, stall: bool| {
        if stall {
            single.proxy.set(crate::proxy::Fault::Stall);
        }
        let begun = Instant::now();
        let outcome = ops::decided(limiter.check_n(&hot[0].key, rate, cost).await);
        records.push(Record {
            kind: Kind::CheckN,
            limiter: 0,
            limits: vec![(0, cost)],
            sources: vec![Source::Store],
            refunds: None,
            cross_slot: false,
            outcome,
            started: begun - epoch,
            took: begun.elapsed(),
            bound: TIMEOUT + Duration::from_millis(500),
        });
        if stall {
            single.proxy.set(crate::proxy::Fault::Pass);
            // What the runtime does in the background about the timed-out call (its
            // refund) ends within the timeout; the breaker it opened closes once a check
            // started a probe that Redis answered.
            tokio::time::sleep(2 * TIMEOUT).await;
            crate::connected(&limiter, "checker-warm-up").await;
        }
    };
    call(10, false).await;
    call(5, true).await;
    call(5, false).await;
    let (taps, _, _) = servers.take_taps();
    let mut lines = Vec::new();
    for tap in taps {
        assert!(tokio::task::block_in_place(
            || tap.sync(crate::STATE_DEADLINE)
        ));
        lines.push((tap.node, tap.close()));
    }
    let verdict = verify::judge(&verify::Inputs {
        taps: lines,
        wipes: Vec::new(),
        epoch_micros,
        records: &records,
        subjects: &hot,
        policies: &[FailurePolicy::Closed],
        servers: &servers.ports(),
        prefix: &prefix,
        timeline: &changes::Timeline::new(epoch_micros),
    });
    let mut operations: BTreeMap<&'static str, BTreeMap<&'static str, u64>> = BTreeMap::new();
    for record in &records {
        let outcome = match record.outcome {
            Outcome::Admitted => "admitted",
            Outcome::Denied => "denied",
            Outcome::Error => "error",
            _ => "other",
        };
        *operations
            .entry("check_n")
            .or_default()
            .entry(outcome)
            .or_default() += 1;
    }
    let mut violations = verdict.violations;
    violations.extend(liveness(&records, &hot));
    let topology = TopologyReport {
        name: "single server, focused: a stalled counter check's refund".to_owned(),
        operations,
        faults: BTreeMap::from([("proxy stall", 1)]),
        exceptions: verdict.exceptions,
        violations,
        answered_by_store: Vec::new(),
        took: started.elapsed(),
    };
    Report {
        config,
        topologies: vec![topology],
        took: started.elapsed(),
    }
}
