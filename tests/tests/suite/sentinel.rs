//! Redis Sentinel: a `redis+sentinel://` limiter checks on the master the sentinels name, and
//! follows it through a failover under 50 callers: one an operator asks for (`SENTINEL
//! FAILOVER`, the old master alive and demoted) and one the sentinels decide (the master
//! killed). Real processes: a master, its replica and three sentinels (`tests::sentinel`).
//!
//! What is asserted is what the design guarantees, with deadlines for a loaded machine: no
//! check takes much longer than the timeout, no error reaches a caller (the policy is
//! `Local`), the checks are back on Redis once the new master is up, and admissions are lost
//! only around the failover. The times are printed (`-- --nocapture`); README's "Running in
//! production" records them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ratelimit_runtime::{Limiter, Rate};
use tests::sentinel::TestSentinel;
use tests::traffic::{REPLICATION_LAG, Report, Traffic, wait_for_quiet};
use tests::{STATE_DEADLINE, unique_prefix};

// One deployment under traffic at a time, across the suite (see `main.rs`).
use crate::ONE_AT_A_TIME;

/// The limiter's timeout in these tests.
const TIMEOUT: Duration = Duration::from_secs(1);

/// How long a check may take past the timeout on a loaded machine (scheduling).
const SLACK: Duration = Duration::from_secs(2);

/// How long the store takes at most to see that the sentinels name another master: two asks,
/// 200 ms apart (the runtime's `store/redis/sentinel.rs`).
const WATCH_INTERVAL: Duration = Duration::from_millis(400);

async fn limiter(url: &str, prefix: &str) -> Limiter {
    builder(url, prefix).build().expect("a Sentinel limiter")
}

fn builder(url: &str, prefix: &str) -> ratelimit_runtime::LimiterBuilder {
    Limiter::builder()
        .redis_url(url)
        .key_prefix(prefix)
        .timeout(TIMEOUT)
}

/// How long a recording check waits for the replica, with `wait_for_replicas`.
const REPLICA_WAIT: Duration = Duration::from_millis(200);

/// `ZCARD` of each of `keys` (under `prefix`) on the server at `master`.
async fn recorded(
    sentinel: &TestSentinel,
    master: SocketAddr,
    prefix: &str,
    keys: &[String],
) -> Vec<u64> {
    let mut connection = sentinel.server(master).connection().await;
    let mut counts = Vec::new();
    for key in keys {
        let count: u64 = redis::cmd("ZCARD")
            .arg(format!("{prefix}{key}"))
            .query_async(&mut connection)
            .await
            .expect("ZCARD");
        counts.push(count);
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_url_checks_on_the_master() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let sentinel = TestSentinel::start().await;
    let prefix = unique_prefix("sentinel");
    let limiter = limiter(&sentinel.url(), &prefix).await;
    assert!(
        format!("{limiter:?}").contains("redis-sentinel"),
        "{limiter:?}"
    );
    let rate = Rate::new(3, Duration::from_secs(60)).expect("a rate");
    for _ in 0..3 {
        let decision = limiter.check("k", rate).await.expect("a check");
        assert!(
            decision.allowed && !decision.answered_by_policy(),
            "{decision:?}"
        );
    }
    let denied = limiter.check("k", rate).await.expect("a check");
    assert!(
        !denied.allowed && !denied.answered_by_policy(),
        "{denied:?}"
    );
    let master = sentinel
        .master()
        .await
        .expect("the sentinels name a master");
    let counts = recorded(&sentinel, master, &prefix, &["k".to_owned()]).await;
    assert_eq!(
        counts,
        [3],
        "the admissions are on the master the sentinels name"
    );
}

/// How a failover is started.
#[derive(Clone, Copy, Debug)]
enum Trigger {
    /// `SENTINEL FAILOVER`: the replica is promoted, the old master demoted.
    Asked,
    /// The master is killed: the sentinels call it down and promote the replica.
    Killed,
}

async fn failover_under_traffic(trigger: Trigger, wait: bool) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut sentinel = TestSentinel::start().await;
    let prefix = unique_prefix("sentinel-failover");
    let mut builder = builder(&sentinel.url(), &prefix);
    if wait {
        builder = builder.wait_for_replicas(1, REPLICA_WAIT);
    }
    let limiter = builder.build().expect("a Sentinel limiter");
    let old = sentinel.master().await.expect("a master");
    let traffic = Traffic::start(&limiter, "k", 50, Duration::from_millis(5));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let began = Instant::now();
    match trigger {
        Trigger::Asked => sentinel.failover().await,
        Trigger::Killed => sentinel.kill(old),
    }
    let new = sentinel.wait_for_new_master(old).await;
    let promoted = began.elapsed();
    let quiet = wait_for_quiet(&limiter, began, Duration::from_secs(1), STATE_DEADLINE).await;
    // Traffic on the new master, past when the store must have seen it (asserted below).
    let seen_by_store = promoted + WATCH_INTERVAL + TIMEOUT + SLACK;
    let tail = seen_by_store.saturating_sub(began.elapsed()) + Duration::from_secs(1);
    tokio::time::sleep(tail).await;
    let keys = traffic.keys().to_vec();
    let report: Report = traffic.stop(began).await;
    let counts = recorded(&sentinel, new, &prefix, &keys).await;
    let (lost, unseen) = report.lost_against(&counts);
    let seen: u64 = report.admitted.iter().sum();
    println!(
        "{trigger:?} (waiting for the replica: {wait}): new master named after {promoted:?}; policy answered {} of {} checks, \
         from {:?} to {:?} ({:?}); quiet again {quiet:?} after the failover began; slowest \
         check {:?}; store admissions seen {seen}, on the new master {}: {} lost, {unseen} \
         recorded but answered by the policy (timed out)",
        report.policy,
        report.checks,
        report.first_policy,
        report.last_policy,
        report.policy_window(),
        report.slowest,
        counts.iter().sum::<u64>(),
        lost.iter().sum::<u64>(),
    );
    assert_eq!(report.errors, 0, "no error reaches a caller under Local");
    assert!(
        report.slowest <= TIMEOUT + SLACK,
        "a check took {:?}, past the timeout {TIMEOUT:?}",
        report.slowest
    );
    // Back on Redis, and on the new master: its sets grew with the traffic since.
    let back = recorded(&sentinel, new, &prefix, &keys).await;
    assert!(
        back.iter().all(|&count| count > 0),
        "every key is on the new master"
    );
    // Only admissions around the failover can be lost, key by key: those the replica had not
    // had yet when it was promoted (made at most the replication lag before), and those the
    // old master took after it (until the store saw the sentinels name the new master: at most
    // one watch interval, a timeout and some scheduling after the harness saw it). And only a
    // check answered by the policy (one that timed out after Redis ran it) can be recorded
    // unseen.
    let near = report.admitted_between(REPLICATION_LAG, seen_by_store);
    for (i, (&lost, &near)) in lost.iter().zip(&near).enumerate() {
        // Waiting for the replica, every admission the store answered was on the one replica,
        // the one promoted: none is lost.
        let near = if wait { 0 } else { near };
        assert!(
            lost <= near,
            "key {i}: {lost} lost, but {near} made within {REPLICATION_LAG:?} before the \
             failover and {seen_by_store:?} after"
        );
    }
    assert!(
        unseen <= report.policy,
        "{unseen} recorded unseen, {} policy answers",
        report.policy
    );
    assert_eq!(limiter.policy_answers(), report.policy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asked_failover_under_traffic() {
    failover_under_traffic(Trigger::Asked, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asked_failover_under_traffic_waiting_for_the_replica() {
    failover_under_traffic(Trigger::Asked, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_under_traffic() {
    failover_under_traffic(Trigger::Killed, false).await;
}

/// `wait_for_replicas`: every admission the store answers is on the replica when the check
/// returns; a replica that is gone makes the checks the policy's (recorded on the master,
/// not replicated), within the wait; and what the wait costs 50 callers, measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_the_replica() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let mut sentinel = TestSentinel::start().await;
    let prefix = unique_prefix("sentinel-wait");
    let limiter = builder(&sentinel.url(), &prefix)
        .wait_for_replicas(1, REPLICA_WAIT)
        .build()
        .expect("a limiter");
    let master = sentinel.master().await.expect("a master");
    let replica = sentinel.replica_of(master);
    let rate = Rate::new(1_000, Duration::from_secs(60)).expect("a rate");
    let mut on_replica = sentinel.server(replica).connection().await;
    for admitted in 1..=20_u64 {
        let decision = limiter.check("k", rate).await.expect("a check");
        assert!(
            decision.allowed && !decision.answered_by_policy(),
            "{decision:?}"
        );
        let count: u64 = redis::cmd("ZCARD")
            .arg(format!("{prefix}k"))
            .query_async(&mut on_replica)
            .await
            .expect("ZCARD");
        assert_eq!(
            count, admitted,
            "the replica has every admission once it is answered"
        );
    }

    // The cost: 50 callers for 2 s each way, on this deployment.
    let plain = limiter_for_cost(&sentinel, false).await;
    let waiting = limiter_for_cost(&sentinel, true).await;
    let (without, with) = (
        throughput(&plain, true).await,
        throughput(&waiting, false).await,
    );
    println!(
        "50 callers: {without:.0} checks/s without waiting, {with:.0} waiting for the replica \
         ({:.2}×)",
        with / without
    );

    sentinel.kill(replica);
    let started = Instant::now();
    let answered = limiter.check("k", rate).await.expect("the policy's answer");
    let took = started.elapsed();
    println!("with the replica gone: answered by the policy in {took:?}");
    assert!(answered.answered_by_policy(), "{answered:?}");
    assert!(took <= REPLICA_WAIT + SLACK, "{took:?}");
}

async fn limiter_for_cost(sentinel: &TestSentinel, wait: bool) -> Limiter {
    let mut builder = builder(&sentinel.url(), &unique_prefix("sentinel-cost"));
    if wait {
        builder = builder.wait_for_replicas(1, REPLICA_WAIT);
    }
    builder.build().expect("a limiter")
}

/// Checks per second of 50 callers over 2 s, each on a key of its own (`stored`: every check
/// is answered by the store; waiting for the replica, a loaded machine may let one wait run
/// out).
async fn throughput(limiter: &Limiter, stored: bool) -> f64 {
    let traffic = Traffic::start(limiter, "cost", 50, Duration::ZERO);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let report = traffic.stop(started).await;
    println!(
        "{} checks, {} answered by the policy",
        report.checks, report.policy
    );
    if stored {
        assert_eq!(report.policy, 0, "every check the store's");
    }
    report.checks as f64 / started.elapsed().as_secs_f64()
}
