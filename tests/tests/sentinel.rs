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

/// The limiter's timeout in these tests.
const TIMEOUT: Duration = Duration::from_millis(500);

/// How long a check may take past the timeout on a loaded machine (scheduling).
const SLACK: Duration = Duration::from_secs(2);

/// How often the store asks the sentinels which master they name (the runtime's
/// `store/redis/sentinel.rs`).
const WATCH_INTERVAL: Duration = Duration::from_millis(200);

async fn limiter(url: &str, prefix: &str) -> Limiter {
    Limiter::builder()
        .redis_url(url)
        .key_prefix(prefix)
        .timeout(TIMEOUT)
        .build()
        .await
        .expect("a Sentinel limiter")
}

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

async fn failover_under_traffic(trigger: Trigger) {
    let mut sentinel = TestSentinel::start().await;
    let prefix = unique_prefix("sentinel-failover");
    let limiter = limiter(&sentinel.url(), &prefix).await;
    let old = sentinel.master().await.expect("a master");
    let traffic = Traffic::start(&limiter, "k", 50, Duration::from_millis(2));
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
    let lost: Vec<u64> = report
        .admitted
        .iter()
        .zip(&counts)
        .map(|(seen, held)| seen.saturating_sub(*held))
        .collect();
    let unseen: u64 = report
        .admitted
        .iter()
        .zip(&counts)
        .map(|(seen, held)| held.saturating_sub(*seen))
        .sum();
    let seen: u64 = report.admitted.iter().sum();
    println!(
        "{trigger:?}: new master named after {promoted:?}; policy answered {} of {} checks, \
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
    failover_under_traffic(Trigger::Asked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_under_traffic() {
    failover_under_traffic(Trigger::Killed).await;
}
