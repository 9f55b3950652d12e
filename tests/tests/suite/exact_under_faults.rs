//! Where features cross faults, no limit admits more than its threshold: one test per defect
//! the review of "Exact under every fault" found, each failing before its fix. The randomized
//! fault checker (`fault_checker.rs`) looks for the whole class; these pin each case down.
//!
//! Each test has a private `redis-server`: they pause it, fill its memory, or count its
//! scripts.

use std::time::Duration;

use ratelimit_runtime::{Algorithm, FailurePolicy, Limit, Limiter, Rate, RateLimitError};
use redis::AsyncCommands as _;
use tests::{TestRedis, connected, unique_prefix};

/// Longer than a loaded machine ever takes to answer, so that only the faults made here time
/// out.
const TIMEOUT: Duration = Duration::from_secs(1);

async fn limiter(redis: &TestRedis, name: &str, policy: FailurePolicy) -> Limiter {
    Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(unique_prefix(name))
        .failure_policy(policy)
        .timeout(TIMEOUT)
        .deny_cache(false)
        .build()
        .expect("a Redis limiter")
}

/// A sliding window counter's check that timed out may not have counted (here it was denied,
/// once the server ran it): taking its cost back would free what other calls hold. Before the
/// fix, its refund was sent in the background and took 5 from the counter, so the next cost-5
/// check was admitted: 15 in one window against a threshold of 10.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_check_that_timed_out_is_not_refunded() {
    let redis = TestRedis::start_private();
    let limiter = limiter(&redis, "timed-out-counter", FailurePolicy::Closed).await;
    let rate = Rate::new(10, Duration::from_secs(3600))
        .unwrap()
        .with_algorithm(Algorithm::SlidingWindowCounter);
    connected(&limiter, "warm-up").await;
    assert!(limiter.check_n("k", rate, 10).await.unwrap().allowed);
    assert!(!limiter.check_n("k", rate, 5).await.unwrap().allowed);

    // The server takes the next scripts but runs none: the check times out, unanswered.
    let mut admin = redis.connection().await;
    let () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "600000", "WRITE"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let timed_out = limiter.check_n("k", rate, 5).await;
    assert!(
        matches!(timed_out, Err(RateLimitError::Unavailable(_))),
        "{timed_out:?}"
    );
    // Its connection was dropped when it timed out: the server never runs it. A refund of
    // it, sent since on a new connection, waits behind the pause (for its own timeout), and
    // runs now.
    let () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query_async(&mut admin)
        .await
        .unwrap();
    connected(&limiter, "warm-up").await;

    let next = limiter.check_n("k", rate, 5).await.unwrap();
    assert!(!next.allowed, "15 admitted against 10: {next:?}");
    assert_eq!(limiter.peek("k", rate).await.unwrap().remaining, 0);
}

/// The check script of several limits, sent twice as it came (redis-rs's cluster client
/// resends a call whose connection dropped after it ran, without the resend mark the store
/// adds to its own resends): the second run finds the logs full of the first's members. It
/// must answer as the first did, admitted and counted once; before the fix it answered
/// "denied" while the first run's record stayed: the caller was refused and charged.
#[tokio::test]
async fn a_check_of_several_limits_resent_unmarked_stays_admitted_and_counts_once() {
    /// The script the store runs for several limits, as `script.rs` builds it.
    const SCRIPT: &str = concat!(
        include_str!("../../../ratelimit-runtime/src/store/redis/counter.lua"),
        include_str!("../../../ratelimit-runtime/src/store/redis/sliding_window_limits.lua")
    );
    let redis = TestRedis::start_private();
    let mut connection = redis.connection().await;
    let script = redis::Script::new(SCRIPT);
    let (burst, daily) = ("resend:{u}:burst", "resend:{u}:daily");
    let mut call = script.key(burst);
    call.key(daily)
        .arg("admission-1")
        .arg("") // the server's time
        .arg("") // not marked as a resend
        .arg(60_000_000_u64)
        .arg(3)
        .arg(3) // fills the burst log
        .arg(86_400_000_000_u64)
        .arg(100)
        .arg(3);
    let first: Vec<i64> = call.invoke_async(&mut connection).await.unwrap();
    assert_eq!(first[0], 1, "admitted: {first:?}");
    let again: Vec<i64> = call.invoke_async(&mut connection).await.unwrap();
    assert_eq!(again[0], 1, "the resend is answered as admitted: {again:?}");
    assert_eq!(again[2], 0, "its count leaves the call out: {again:?}");
    for key in [burst, daily] {
        let members: u64 = connection.zcard(key).await.unwrap();
        assert_eq!(members, 3, "{key}: counted once");
    }
    // A call that never ran is still denied by the full log.
    let mut other = script.key(burst);
    other
        .key(daily)
        .arg("admission-2")
        .arg("")
        .arg("")
        .arg(60_000_000_u64)
        .arg(3)
        .arg(1)
        .arg(86_400_000_000_u64)
        .arg(100)
        .arg(1);
    let denied: Vec<i64> = other.invoke_async(&mut connection).await.unwrap();
    assert_eq!(denied[0], 0, "{denied:?}");
}

/// A server out of memory refuses the writes of admissions, key by key: that call gets the
/// policy's answer, and the breaker stays closed, so a full key is still denied by Redis.
/// Before the fix, one `OOM` opened the breaker, and under `Open` every key was admitted,
/// the full ones included, while an attacker's new keys kept the memory full. (A log's
/// scripts never meet `OOM`: their first write, the eviction, lets Redis 7 run the rest of
/// the script. A counter's first write is its admission, which Redis refuses.)
#[tokio::test]
async fn an_out_of_memory_reply_is_answered_by_the_policy_without_opening_the_breaker() {
    let redis = TestRedis::start_private();
    let limiter = limiter(&redis, "oom", FailurePolicy::Open).await;
    let rate = Rate::new(3, Duration::from_secs(3600))
        .unwrap()
        .with_algorithm(Algorithm::SlidingWindowCounter);
    connected(&limiter, "warm-up").await;
    for _ in 0..3 {
        assert!(limiter.check("full", rate).await.unwrap().allowed);
    }
    // Memory full: under the default policy, noeviction, Redis refuses every write that may
    // need more (an admission's ZADD), and still runs the others (a denial's reads).
    let mut admin = redis.connection().await;
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "maxmemory", "1"])
        .query_async(&mut admin)
        .await
        .unwrap();

    let new = limiter.check("attacker-key-1", rate).await.unwrap();
    assert!(new.allowed && new.answered_by_policy(), "{new:?}");
    assert!(!limiter.is_degraded(), "one refused write is not an outage");
    let full = limiter.check("full", rate).await.unwrap();
    assert!(
        !full.allowed,
        "the full key is still denied by Redis: {full:?}"
    );
    assert!(!full.answered_by_policy());
    assert_eq!(limiter.policy_answers(), 1);
}

/// A key given by hand that names another key's counter hash in Redis is turned away. Before,
/// `user:42#swc` (a caller's choice inside `format!("user:{id}")`) shared the Redis key of
/// `user:42`'s counter: its checks met a hash (`WRONGTYPE`, answered by the policy, here
/// `Open`'s admission), and a log written there first would have failed the counter's.
#[tokio::test]
async fn a_hand_key_that_names_a_counter_hash_is_turned_away() {
    let redis = TestRedis::start_private();
    let limiter = limiter(&redis, "counter-name", FailurePolicy::Open).await;
    let hour = Duration::from_secs(3600);
    let counter = Rate::new(2, hour)
        .unwrap()
        .with_algorithm(Algorithm::SlidingWindowCounter);
    let log = Rate::new(2, hour).unwrap();
    connected(&limiter, "warm-up").await;
    assert!(limiter.check("user:42", counter).await.unwrap().allowed);
    // `user:42\` (a caller's choice too) is a key of its own, whose counter is
    // `user:42\#swc`: a hand key names a counter after any run of backslashes.
    assert!(limiter.check("user:42\\", counter).await.unwrap().allowed);
    for checked in [
        limiter.check("user:42#swc", log).await,
        limiter.check_n("user:42#swc", log, 2).await,
        limiter.check("user:42\\#swc", log).await,
    ] {
        assert!(
            matches!(checked, Err(RateLimitError::InvalidInput(_))),
            "{checked:?}"
        );
    }
    let all = limiter.check_all([Limit::new("user:42\\#swc", log)]).await;
    assert!(
        matches!(all, Err(RateLimitError::InvalidInput(_))),
        "{all:?}"
    );
    // Nor may a look or a reset name it: the reset would delete `user:42`'s counter.
    let peeked = limiter.peek("user:42#swc", log).await;
    assert!(
        matches!(peeked, Err(RateLimitError::InvalidInput(_))),
        "{peeked:?}"
    );
    for key in ["user:42#swc", "user:42\\#swc"] {
        let reset = limiter.reset(key).await;
        assert!(
            matches!(reset, Err(RateLimitError::InvalidInput(_))),
            "{key} {reset:?}"
        );
    }
    // The counters are still the store's, and enforced.
    for key in ["user:42", "user:42\\"] {
        assert!(limiter.check(key, counter).await.unwrap().allowed);
        let third = limiter.check(key, counter).await.unwrap();
        assert!(
            !third.allowed && !third.answered_by_policy(),
            "{key} {third:?}"
        );
    }
    assert_eq!(limiter.policy_answers(), 0);
}
