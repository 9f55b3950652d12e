//! What a Redis limiter keeps for each Tokio runtime that checks through it (the runtime's
//! connection; with a Sentinel deployment, the master that connection reaches; in a cluster,
//! the state of the connection's replacement after a timeout) goes when the runtime shuts
//! down: a limiter that outlives runtime after runtime (one per test, one per short-lived
//! worker) does not grow with them. And the other way round: a runtime that outlives limiter
//! after limiter keeps nothing of them.
//!
//! Measured as the live heap of the test's thread ([`heap_growth`], through the suite's
//! allocator): each runtime is a `current_thread` one, built, driven and dropped on that
//! thread, so that its tasks (the connections' drivers, what the limiter spawns) allocate and
//! free there too. After a warm-up (what a first use allocates once: the tables' room, the
//! lazies), [`RUNTIMES`] runtimes may grow it by at most [`BOUND`]: a table that kept an entry
//! per runtime (50 bytes and more each) would grow by 100 KB and more.
//!
//! The cluster and Sentinel cases take [`ONE_AT_A_TIME`]: thousands of connections made one
//! after another, and in the cluster case a timeout short enough to be waited 2,000 times,
//! want the machine's cores to themselves. Their times are printed (`-- --nocapture`): on a
//! busy 2-core machine, one server 1.5 s, Sentinel 5 to 8 s, the cluster 32 to 36 s (each
//! runtime connects, stalls a master with `SIGSTOP`, waits the 10 ms timeout on it and thaws
//! it), 2,000 limiters on one runtime 2 s.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate, RateLimitError, StoreError};
use tests::cluster::TestCluster;
use tests::counting_alloc::heap_growth;
use tests::sentinel::TestSentinel;
use tests::{STATE_DEADLINE, TestRedis, unique_prefix, wait_for};

use crate::ONE_AT_A_TIME;

/// The runtimes measured, each built, checked on and dropped.
const RUNTIMES: usize = 2_000;

/// The runtimes used before the measure: the first connections, the tables' first room.
const WARM_UP: usize = 50;

/// The most the live heap may grow over [`RUNTIMES`] runtimes: nothing per runtime, with room
/// for what a table's growth or a lazy may still allocate once.
const BOUND: i64 = 4 * 1024;

/// The timeout of the limiters whose checks are all meant to be answered by Redis: long, so
/// that a loaded machine does not turn a slow answer into a failure.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(10);

/// The cluster limiter's timeout: every runtime waits it once on the stalled master, so it is
/// short; its connection (made by a check on a live master, which it also bounds) is made
/// again until it is made within it.
const STALL_TIMEOUT: Duration = Duration::from_millis(10);

fn rate() -> Rate {
    Rate::new(Rate::MAX_THRESHOLD, Duration::from_secs(60)).expect("a valid rate")
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

/// Calls `use_one` with [`WARM_UP`] runtimes, then with [`RUNTIMES`] more, each made for the
/// call and dropped after it; returns by how many bytes the latter grew this thread's live
/// heap (printed, with the time they took, under `--nocapture`).
fn growth_over_runtimes(case: &str, mut use_one: impl FnMut(&tokio::runtime::Runtime)) -> i64 {
    for _ in 0..WARM_UP {
        use_one(&current_thread());
    }
    let started = Instant::now();
    let ((), grown) = heap_growth(|| {
        for _ in 0..RUNTIMES {
            use_one(&current_thread());
        }
    });
    eprintln!(
        "{case}: {RUNTIMES} runtimes in {:.1?}, the live heap grew by {grown} bytes",
        started.elapsed()
    );
    grown
}

/// One server: the runtime's connection.
#[test]
fn a_servers_limiter_keeps_nothing_of_the_runtimes_gone() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("per-runtime");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(HEALTHY_TIMEOUT)
        .build()
        .expect("a Redis limiter");
    let grown = growth_over_runtimes("one server", |runtime| {
        let decision = runtime
            .block_on(limiter.check("k", rate()))
            .expect("checked by Redis");
        assert!(decision.allowed, "{decision:?}");
    });
    assert!(
        grown <= BOUND,
        "grew by {grown} bytes over {RUNTIMES} runtimes"
    );
    current_thread().block_on(redis.clean_up(&prefix));
}

/// The other way round: limiters that check on one runtime and are dropped before it (one per
/// request, say) leave nothing on it; the runtime's tasks for them (their connections'
/// drivers, what the limiter spawned to clean up after the runtime) end.
#[test]
fn a_runtime_keeps_nothing_of_the_limiters_gone() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("per-limiter");
    let runtime = current_thread();
    let use_one = || {
        let limiter = Limiter::builder()
            .redis_url(redis.url())
            .key_prefix(&prefix)
            .failure_policy(FailurePolicy::Closed)
            .timeout(HEALTHY_TIMEOUT)
            .build()
            .expect("a Redis limiter");
        let decision = runtime
            .block_on(limiter.check("k", rate()))
            .expect("checked by Redis");
        assert!(decision.allowed, "{decision:?}");
    };
    // Every task of the limiters dropped has ended (their ends are polled on this runtime);
    // `false` when some are still there after the deadline.
    let tasks_ended = || {
        let tasks = || runtime.metrics().num_alive_tasks();
        runtime.block_on(async {
            let started = Instant::now();
            while tasks() > 0 && started.elapsed() < STATE_DEADLINE {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        tasks() == 0
    };
    for _ in 0..WARM_UP {
        use_one();
    }
    tasks_ended();
    let started = Instant::now();
    let (ended, grown) = heap_growth(|| {
        for _ in 0..RUNTIMES {
            use_one();
        }
        tasks_ended()
    });
    eprintln!(
        "{RUNTIMES} limiters on one runtime in {:.1?}, the live heap grew by {grown} bytes, \
         {} tasks left",
        started.elapsed(),
        runtime.metrics().num_alive_tasks()
    );
    assert!(
        ended && grown <= BOUND,
        "grew by {grown} bytes over {RUNTIMES} limiters, {} tasks left",
        runtime.metrics().num_alive_tasks()
    );
    runtime.block_on(redis.clean_up(&prefix));
}

/// A cluster whose master stalls in each runtime: the runtime's connection, and its
/// replacement after the timeout (each runtime connects with a check on a live master, then
/// waits the timeout on the stalled one; a replacement starts for a connection older than the
/// timed-out call, so one check per runtime would not make one).
#[test]
fn a_clusters_limiter_keeps_no_replacement_of_the_runtimes_gone() {
    let _alone = ONE_AT_A_TIME.blocking_lock();
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("per-runtime-cluster");
    let limiter = Limiter::builder()
        .redis_cluster(cluster.urls())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(STALL_TIMEOUT)
        .build()
        .expect("a cluster limiter");
    let stalled = cluster.node_for_slot(0);
    let [(first, last)] = cluster.slots_of(stalled)[..] else {
        panic!("node {stalled} owns more than one range of slots")
    };
    let on_stalled = |key: &str| {
        let slot = TestCluster::key_slot(&format!("{prefix}{key}"));
        (first..=last).contains(&slot).then_some(slot)
    };
    // Keys of the stalled master, each in a slot of its own: a slot whose check timed out has
    // its breaker open, which would answer the next check there at once instead of Redis.
    // Found before the measure, and only read during it.
    let mut slots = HashSet::new();
    let stalled_keys: Vec<String> = (0u64..)
        .map(|n| format!("k{n}"))
        .filter(|key| on_stalled(key).is_some_and(|slot| slots.insert(slot)))
        .take(WARM_UP + RUNTIMES)
        .collect();
    let mut stalled_keys = stalled_keys.iter();
    let live_key = (0u64..)
        .map(|n| format!("live{n}"))
        .find(|key| on_stalled(key).is_none())
        .expect("a key of a live master");
    let grown = growth_over_runtimes("a cluster, a timeout per runtime", |runtime| {
        runtime.block_on(wait_for(
            "a check on a live master is answered by Redis",
            STATE_DEADLINE,
            async || limiter.check(&live_key, rate()).await.ok(),
        ));
        let key = stalled_keys
            .next()
            .expect("a key in a fresh slot of the stalled master");
        cluster.freeze(stalled);
        let timed_out = runtime.block_on(limiter.check(key, rate()));
        cluster.thaw(stalled);
        assert!(
            matches!(
                timed_out,
                Err(RateLimitError::Unavailable(StoreError::Timeout(_)))
            ),
            "{key}: {timed_out:?}"
        );
    });
    assert!(
        grown <= BOUND,
        "grew by {grown} bytes over {RUNTIMES} runtimes"
    );
}

/// A Sentinel deployment: the runtime's connection, and the master it reaches.
#[test]
fn a_sentinel_limiter_keeps_no_master_of_the_runtimes_gone() {
    let _alone = ONE_AT_A_TIME.blocking_lock();
    let sentinel = current_thread().block_on(TestSentinel::start());
    let prefix = unique_prefix("per-runtime-sentinel");
    let limiter = Limiter::builder()
        .redis_url(sentinel.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(HEALTHY_TIMEOUT)
        .build()
        .expect("a Sentinel limiter");
    let grown = growth_over_runtimes("Sentinel", |runtime| {
        let decision = runtime
            .block_on(limiter.check("k", rate()))
            .expect("checked by the master");
        assert!(decision.allowed, "{decision:?}");
    });
    assert!(
        grown <= BOUND,
        "grew by {grown} bytes over {RUNTIMES} runtimes"
    );
}
