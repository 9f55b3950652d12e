//! The Redis Cluster store against a real 3-master cluster (`tests::cluster::TestCluster`:
//! `redis-server --cluster-enabled yes` processes on free ports, formed by
//! `redis-cli --cluster create`): exact under concurrent callers across many slots, the script
//! loaded on every master (and reloaded after `SCRIPT FLUSH`), a killed master answered by the
//! policy in bounded time while the other masters keep answering, and a slot migrated during
//! traffic without an error reaching a caller.
//!
//! Timing: a fault lasts until the test ends it ([`TestCluster::freeze`] until
//! [`TestCluster::thaw`]), the tests wait for states (polling, within
//! [`tests::STATE_DEADLINE`]) rather than for guessed times, "answered at once" is read from an
//! answer's kind (`StoreError::CircuitOpen`: the open breaker answered, Redis was not asked),
//! and the only times asserted are bounds the design guarantees (the limiter's timeout bounds
//! every check; an open breaker's probes are one at a time, at most every 100 ms after the
//! previous one failed). Measured times are printed (`-- --nocapture`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate, RateLimitError, StoreError};
use redis::AsyncCommands as _;
use tests::cluster::TestCluster;
use tests::{STATE_DEADLINE, connected, unique_prefix, wait_for};

/// The limiter's timeout in the tests of a dead or stalled master, whose checks may wait it.
const TIMEOUT: Duration = Duration::from_millis(500);
/// The timeout of the limiters whose every check is meant to be answered by Redis: long, so
/// that a loaded machine does not turn a slow answer into a policy answer.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(10);
/// The most a check may take: the timeout bounds every check by design; ten times it leaves
/// room for a loaded machine, and still catches a check that waits on a dead master.
const BOUND: Duration = Duration::from_millis(500 * 10);
/// While a breaker is open, the least time between a failed probe and the next probe.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

async fn limiter(
    cluster: &TestCluster,
    prefix: &str,
    policy: FailurePolicy,
    timeout: Duration,
) -> Limiter {
    Limiter::builder()
        .redis_cluster(cluster.urls())
        .key_prefix(prefix)
        .failure_policy(policy)
        .timeout(timeout)
        .build()
        .unwrap()
}

/// The most probes an open breaker can make in `elapsed`, by design: one at a time, each
/// taking at least `probe_takes` (a stalled master's probe waits the whole timeout; a dead
/// master's may fail at once), the next no sooner than 100 ms after the previous one failed.
fn most_probes(elapsed: Duration, probe_takes: Duration) -> u64 {
    let cycle = (probe_takes + PROBE_INTERVAL).as_nanos();
    1 + u64::try_from(elapsed.as_nanos() / cycle).unwrap_or(u64::MAX)
}

fn script_hash() -> String {
    redis::Script::new(include_str!(
        "../../../ratelimit-runtime/src/store/redis/sliding_window.lua"
    ))
    .get_hash()
    .to_owned()
}

async fn script_loaded_on(cluster: &TestCluster, node: usize) -> bool {
    let exists: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(script_hash())
        .query_async(&mut cluster.connection(node).await)
        .await
        .unwrap();
    exists == [true]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_under_concurrent_callers_across_many_slots_with_the_script_on_every_master() {
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("cluster");
    // Without the deny cache: the denials after the scripts' flush below must reach their
    // masters (the cache would answer them in process).
    let limiter = Limiter::builder()
        .redis_cluster(cluster.urls())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(HEALTHY_TIMEOUT)
        .deny_cache(false)
        .build()
        .unwrap();
    assert!(format!("{limiter:?}").contains("redis-cluster"));
    let rate = Rate::new(4, Duration::from_secs(60)).unwrap();
    let keys: Vec<String> = (0..300).map(|i| format!("user:{i}")).collect();
    let nodes: HashSet<usize> = keys
        .iter()
        .map(|key| cluster.node_for_slot(TestCluster::key_slot(&format!("{prefix}{key}"))))
        .collect();
    assert_eq!(nodes.len(), 3, "the keys span every master");

    // 50 callers, each key checked 10 times in all, interleaved.
    let keys = Arc::new(keys);
    let callers: Vec<_> = (0..50)
        .map(|caller| {
            let limiter = limiter.clone();
            let keys = Arc::clone(&keys);
            tokio::spawn(async move {
                let mut admitted = Vec::new();
                for round in 0..60 {
                    let key = &keys[(caller * 7 + round * 50) % keys.len()];
                    let decision = limiter.check(key, rate).await.unwrap();
                    if decision.allowed {
                        admitted.push(key.clone());
                    }
                }
                admitted
            })
        })
        .collect();
    let mut per_key: HashMap<String, u64> = HashMap::new();
    for caller in callers {
        for key in caller.await.unwrap() {
            *per_key.entry(key).or_default() += 1;
        }
    }
    assert_eq!(limiter.policy_answers(), 0);
    let mut connection = cluster.cluster_connection().await;
    for key in keys.iter() {
        let admitted = per_key.get(key).copied().unwrap_or(0);
        assert_eq!(admitted, 4, "{key}: each key is checked 10 times");
        let recorded: u64 = connection.zcard(format!("{prefix}{key}")).await.unwrap();
        assert_eq!(recorded, admitted, "{key}");
    }
    for node in 0..3 {
        assert!(script_loaded_on(&cluster, node).await, "node {node}");
    }

    // Every master loses its scripts: the next checks reload them, unseen by callers.
    for node in 0..3 {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut cluster.connection(node).await)
            .await
            .unwrap();
        assert!(!script_loaded_on(&cluster, node).await);
    }
    for key in keys.iter() {
        assert!(!limiter.check(key, rate).await.unwrap().allowed, "{key}");
    }
    assert_eq!(limiter.policy_answers(), 0);
    for node in 0..3 {
        assert!(
            script_loaded_on(&cluster, node).await,
            "node {node} after the flush"
        );
    }
}

#[tokio::test]
async fn a_killed_master_is_answered_by_the_policy_in_bounded_time_and_alone() {
    let mut cluster = TestCluster::start(3);
    let prefix = unique_prefix("kill");
    let limiter = limiter(&cluster, &prefix, FailurePolicy::Closed, TIMEOUT).await;
    let rate = Rate::new(100, Duration::from_secs(60)).unwrap();
    // Keys far from the slot ranges' edges: node 0 owns the first third, node 1 the second.
    let key_in_slot = |slot| TestCluster::key_in_slot(slot, &prefix)[prefix.len()..].to_owned();
    let alive_key = key_in_slot(100);
    let dead_key = key_in_slot(8_000);
    let alive = cluster.node_for_slot(TestCluster::key_slot(&format!("{prefix}{alive_key}")));
    let dead = cluster.node_for_slot(TestCluster::key_slot(&format!("{prefix}{dead_key}")));
    assert_ne!(alive, dead);
    connected(&limiter, "warm-up").await;
    assert!(limiter.check(&alive_key, rate).await.unwrap().allowed);
    assert!(limiter.check(&dead_key, rate).await.unwrap().allowed);

    cluster.kill(dead);
    let started = Instant::now();
    let error = limiter.check(&dead_key, rate).await.unwrap_err();
    let first = started.elapsed();
    assert!(matches!(error, RateLimitError::Unavailable(_)), "{error:?}");
    assert!(first < BOUND, "{first:?}");

    // The dead master's keys are answered at once by the open breaker (CircuitOpen), but for
    // its probes (one at a time, at most every 100 ms after the last one failed); the other
    // masters' keys keep going to Redis.
    let (mut slowest, mut slowest_alive, mut probes) = (Duration::ZERO, Duration::ZERO, 0);
    let looped = Instant::now();
    for _ in 0..20 {
        let started = Instant::now();
        match limiter.check(&dead_key, rate).await {
            Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_))) => {
                slowest = slowest.max(started.elapsed());
            }
            Err(RateLimitError::Unavailable(_)) => probes += 1,
            other => panic!("a dead master's key: {other:?}"),
        }
        let started = Instant::now();
        let before = limiter.policy_answers();
        assert!(limiter.check(&alive_key, rate).await.unwrap().allowed);
        assert_eq!(limiter.policy_answers(), before, "a live master's key");
        slowest_alive = slowest_alive.max(started.elapsed());
    }
    let looped = looped.elapsed();
    assert!(
        probes <= most_probes(looped, Duration::ZERO),
        "{probes} of 20 checks of the dead master's key went to Redis in {looped:?}"
    );
    let recorded: u64 = cluster
        .connection(alive)
        .await
        .zcard(format!("{prefix}{alive_key}"))
        .await
        .unwrap();
    assert_eq!(recorded, 21);
    eprintln!(
        "killed master: first answer {first:?}; of the next 20 on its keys, {probes} probe(s), \
         the others answered in {slowest:?} at most; a live master's key in {slowest_alive:?} \
         at most"
    );
}

/// Breakers are per slot: a dead master's keys do not stop a live master's keys in the slots
/// next to its range (slot 5300 on node 0, 5600 on node 1).
#[tokio::test]
async fn a_dead_master_leaves_its_neighbours_slots_alone() {
    let mut cluster = TestCluster::start(3);
    let prefix = unique_prefix("neighbour");
    let limiter = limiter(&cluster, &prefix, FailurePolicy::Closed, TIMEOUT).await;
    let rate = Rate::new(100, Duration::from_secs(60)).unwrap();
    let key_in_slot = |slot| TestCluster::key_in_slot(slot, &prefix)[prefix.len()..].to_owned();
    let (dead_key, alive_key) = (key_in_slot(5_300), key_in_slot(5_600));
    let dead = cluster.node_for_slot(5_300);
    assert_ne!(dead, cluster.node_for_slot(5_600));
    connected(&limiter, "warm-up").await;
    assert!(limiter.check(&dead_key, rate).await.unwrap().allowed);
    assert!(limiter.check(&alive_key, rate).await.unwrap().allowed);

    cluster.kill(dead);
    assert!(limiter.check(&dead_key, rate).await.is_err());
    for _ in 0..10 {
        assert!(limiter.check(&dead_key, rate).await.is_err());
        let before = limiter.policy_answers();
        assert!(limiter.check(&alive_key, rate).await.unwrap().allowed);
        assert_eq!(limiter.policy_answers(), before, "a live master's key");
    }
}

/// A stalled master (frozen until the test thaws it: a fork, a swap storm, a paused VM) costs
/// its own keys a timeout, never the other masters' keys: the cluster connection is not
/// dropped for it.
#[tokio::test]
async fn a_stalled_master_leaves_the_other_masters_alone() {
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("stalled");
    let limiter = limiter(&cluster, &prefix, FailurePolicy::Closed, TIMEOUT).await;
    let rate = Rate::new(1_000, Duration::from_secs(60)).unwrap();
    let key_in_slot = |slot| TestCluster::key_in_slot(slot, &prefix)[prefix.len()..].to_owned();
    let stalled_key = key_in_slot(100);
    let stalled = cluster.node_for_slot(100);
    let alive_keys: Vec<String> = [8_000, 8_001, 14_000, 14_001]
        .into_iter()
        .filter(|&slot| cluster.node_for_slot(slot) != stalled)
        .map(key_in_slot)
        .collect();
    connected(&limiter, "warm-up").await;
    for key in alive_keys.iter().chain([&stalled_key]) {
        assert!(limiter.check(key, rate).await.unwrap().allowed);
    }

    cluster.freeze(stalled);
    let started = Instant::now();
    let error = limiter.check(&stalled_key, rate).await.unwrap_err();
    let stalled_took = started.elapsed();
    assert!(matches!(error, RateLimitError::Unavailable(_)), "{error:?}");
    assert!(stalled_took < BOUND, "{stalled_took:?}");
    // Every check of a live master's key is answered by Redis (a connection dropped for the
    // stalled master would have to be made again, through it, and time out).
    let mut slowest = Duration::ZERO;
    for _ in 0..5 {
        for key in &alive_keys {
            let started = Instant::now();
            let before = limiter.policy_answers();
            assert!(limiter.check(key, rate).await.unwrap().allowed, "{key}");
            assert_eq!(
                limiter.policy_answers(),
                before,
                "{key} was answered by the policy"
            );
            slowest = slowest.max(started.elapsed());
        }
    }
    cluster.thaw(stalled);
    eprintln!(
        "stalled master: its key answered in {stalled_took:?}; other masters' slowest {slowest:?}"
    );
}

/// One failure of a master's slot opens all its slots' breakers once the cluster says which
/// they are (`CLUSTER SLOTS`, asked in the background): its keys in other slots are then
/// answered at once, not after a timeout each, but for one probe at a time for the whole
/// master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_masters_other_slots_are_answered_at_once() {
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("wide");
    let limiter = limiter(&cluster, &prefix, FailurePolicy::Closed, TIMEOUT).await;
    let rate = Rate::new(1_000, Duration::from_secs(60)).unwrap();
    let key_in_slot = |slot| TestCluster::key_in_slot(slot, &prefix)[prefix.len()..].to_owned();
    let stalled = cluster.node_for_slot(100);
    // A fresh cluster gives each master one range. The lookup opens it from its first slot
    // up, so once a slot near its top is seen open, every key's slot below it is open too.
    let [(first, last)] = cluster.slots_of(stalled)[..] else {
        panic!("node {stalled} owns more than one range of slots")
    };
    let slots: Vec<u16> = (first..=last).step_by(97).take(30).collect();
    assert_eq!(slots.len(), 30);
    let keys: Vec<String> = slots.iter().map(|&slot| key_in_slot(slot)).collect();
    // Canaries: fresh slots from the top of the range down, each checked once.
    let highest_key_slot = slots[slots.len() - 1];
    let mut canaries = (first..=last)
        .rev()
        .take_while(|&slot| slot > highest_key_slot);
    connected(&limiter, "warm-up").await;
    for key in &keys {
        assert!(limiter.check(key, rate).await.unwrap().allowed);
    }

    cluster.freeze(stalled);
    let error = limiter.check(&keys[0], rate).await.unwrap_err();
    assert!(matches!(error, RateLimitError::Unavailable(_)), "{error:?}");
    // The lookup has opened the master's other slots once a fresh slot's check is answered by
    // an open breaker (only the lookup can have opened it). A canary whose slot is still
    // closed waits the timeout and opens its own slot (and asks the cluster again), or it
    // makes the master's probe: either way it is not used again.
    let mut canaries_used = 0;
    let ((), lookup) = wait_for(
        "a fresh slot of the stalled master is answered by an open breaker",
        STATE_DEADLINE,
        async || {
            let slot = canaries.next().expect("a fresh canary slot");
            canaries_used += 1;
            match limiter.check(&key_in_slot(slot), rate).await {
                Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_))) => Some(()),
                Err(RateLimitError::Unavailable(_)) => None,
                other => panic!("canary slot {slot}: {other:?}"),
            }
        },
    )
    .await;
    // From now on each check is answered at once by the open breakers, but for one probe at
    // a time for the whole master, which waits the timeout.
    let (mut slowest, mut probes) = (Duration::ZERO, 0);
    let looped = Instant::now();
    for key in &keys[1..] {
        let started = Instant::now();
        let error = limiter.check(key, rate).await.unwrap_err();
        let took = started.elapsed();
        if matches!(error, RateLimitError::Unavailable(StoreError::Timeout(_))) {
            probes += 1;
            continue;
        }
        assert!(
            matches!(
                error,
                RateLimitError::Unavailable(StoreError::CircuitOpen(_))
            ),
            "{key}: {error:?}"
        );
        slowest = slowest.max(took);
    }
    let looped = looped.elapsed();
    assert!(
        probes <= most_probes(looped, TIMEOUT),
        "{probes} of {} checks waited on the stalled master in {looped:?}",
        keys.len() - 1
    );

    // Back: checks on the other slots alone (none on the first one) find it.
    cluster.thaw(stalled);
    let mut round = 0;
    let ((), recovery) = wait_for(
        "checks of the thawed master's keys are answered by Redis",
        STATE_DEADLINE,
        async || {
            let key = &keys[1 + round % (keys.len() - 1)];
            round += 1;
            limiter.check(key, rate).await.ok().map(|_| ())
        },
    )
    .await;
    for key in &keys[1..] {
        assert!(limiter.check(key, rate).await.unwrap().allowed, "{key}");
    }
    eprintln!(
        "a stalled master's other slots: opened by the lookup {lookup:?} after the first \
         failure ({canaries_used} canary check(s)); of the next 29, {probes} probe(s) in \
         {looped:?}, the others answered in {slowest:?} at most; back on Redis {recovery:?} \
         after it resumed"
    );
}

/// Stretch goal of the issue: a slot moved from one master to another (`MIGRATING` /
/// `IMPORTING`, `MIGRATE`, `SETSLOT NODE`) while a caller keeps checking a key in it: redis-rs
/// follows the `ASK` and `MOVED` redirections and the key's log moves whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_migrated_during_traffic_surfaces_no_error() {
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("migrate");
    let limiter = limiter(&cluster, &prefix, FailurePolicy::Closed, HEALTHY_TIMEOUT).await;
    let rate = Rate::new(100_000, Duration::from_secs(60)).unwrap();
    let key = "user:moving";
    let slot = TestCluster::key_slot(&format!("{prefix}{key}"));
    let from = cluster.node_for_slot(slot);
    let to = (from + 1) % 3;
    for _ in 0..10 {
        assert!(limiter.check(key, rate).await.unwrap().allowed);
    }

    // Traffic until the migration is over, with a few hundred checks in each of its states
    // (before, migrating, keys moved, after).
    let checks = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let traffic = {
        let limiter = limiter.clone();
        let (checks, done) = (Arc::clone(&checks), Arc::clone(&done));
        tokio::spawn(async move {
            let mut admitted = 0_u64;
            let mut errors = Vec::new();
            while !done.load(Ordering::SeqCst) {
                match limiter.check(key, rate).await {
                    Ok(decision) => admitted += u64::from(decision.allowed),
                    Err(error) => errors.push(error.to_string()),
                }
                checks.fetch_add(1, Ordering::SeqCst);
            }
            (admitted, errors)
        })
    };
    let more_checks = async || {
        let from = checks.load(Ordering::SeqCst);
        wait_for("the traffic goes on", STATE_DEADLINE, async || {
            (checks.load(Ordering::SeqCst) >= from + 200).then_some(())
        })
        .await;
    };
    more_checks().await;
    cluster.begin_migration(slot, from, to).await;
    more_checks().await;
    let moved = cluster.migrate_keys(slot, from, to, 100).await;
    more_checks().await;
    cluster.finish_migration(slot, from, to).await;
    more_checks().await;
    done.store(true, Ordering::SeqCst);
    let (admitted, errors) = traffic.await.unwrap();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(limiter.policy_answers(), 0);
    assert_eq!(cluster.node_for_slot(slot), to);
    let recorded: u64 = cluster
        .connection(to)
        .await
        .zcard(format!("{prefix}{key}"))
        .await
        .unwrap();
    assert_eq!(recorded, 10 + admitted);
    eprintln!("slot {slot} moved from node {from} to {to} ({moved} keys) under {admitted} checks");
}

/// Sliding window counters in a cluster: each counter's hash in its own slot, stacked limits
/// mixing a log and a counter in one tagged slot, a check across slots reserved then refunded
/// from a counter, and a reset whose log and counter keys sit on different slots.
#[tokio::test]
async fn counters_check_stack_refund_and_reset_across_slots() {
    use ratelimit_runtime::{Algorithm, Limit};
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("cluster-counter");
    let limiter = limiter(&cluster, &prefix, FailurePolicy::Closed, HEALTHY_TIMEOUT).await;
    let counter = Rate::new(3, Duration::from_secs(60))
        .unwrap()
        .with_algorithm(Algorithm::SlidingWindowCounter);
    let log = Rate::new(2, Duration::from_secs(60)).unwrap();
    // Keys over many slots: three admitted each, the fourth denied.
    let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
    let slots: HashSet<u16> = keys
        .iter()
        .map(|key| TestCluster::key_slot(&format!("{prefix}{key}#swc")))
        .collect();
    assert!(slots.len() > 20, "{} slots", slots.len());
    for key in &keys {
        for _ in 0..3 {
            assert!(limiter.check(key, counter).await.unwrap().allowed, "{key}");
        }
        assert!(!limiter.check(key, counter).await.unwrap().allowed, "{key}");
    }
    // A log and a counter of one tagged key: one script in one slot, all or nothing.
    let stacked = || {
        [
            Limit::new("{u}:burst", log),
            Limit::new("{u}:hour", counter),
        ]
    };
    assert!(limiter.check_all(stacked()).await.unwrap().allowed);
    assert!(limiter.check_all(stacked()).await.unwrap().allowed);
    assert!(!limiter.check_all(stacked()).await.unwrap().allowed);
    assert_eq!(
        limiter.peek("{u}:hour", counter).await.unwrap().remaining,
        1
    );
    // Across slots: the log denies, the counter's reservation in its own slot is refunded.
    let (a, b) = (0..)
        .map(|i| (format!("a{i}"), format!("b{i}")))
        .find(|(a, b)| {
            TestCluster::key_slot(&format!("{prefix}{a}#swc"))
                != TestCluster::key_slot(&format!("{prefix}{b}"))
        })
        .unwrap();
    let tight = Rate::new(1, Duration::from_secs(60)).unwrap();
    assert!(limiter.check(&b, tight).await.unwrap().allowed);
    let across = [
        Limit::new(a.as_str(), counter),
        Limit::new(b.as_str(), tight),
    ];
    assert!(!limiter.check_all(across).await.unwrap().allowed);
    assert_eq!(limiter.peek(&a, counter).await.unwrap().remaining, 3);
    // A reset of a key whose log and counter are on different slots forgets both.
    let key = keys
        .iter()
        .find(|key| {
            TestCluster::key_slot(&format!("{prefix}{key}"))
                != TestCluster::key_slot(&format!("{prefix}{key}#swc"))
        })
        .unwrap();
    assert!(limiter.check(key, log).await.unwrap().allowed);
    limiter.reset(key).await.unwrap();
    assert_eq!(limiter.peek(key, counter).await.unwrap().remaining, 3);
    assert_eq!(limiter.peek(key, log).await.unwrap().remaining, 2);
    assert_eq!(limiter.policy_answers(), 0);
}
