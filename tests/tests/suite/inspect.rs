//! `Limiter::peek`, what a check would answer, writing nothing, and `Limiter::reset`, a key
//! forgotten: on every store (in process, a real `redis-server`, a 3-master cluster) and
//! under every failure policy.
//!
//! Timing: every asserted answer is at an explicit time (or a manual clock's); the stores'
//! own state is read back with Redis commands.

use std::time::{Duration, SystemTime};

use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{Decision, FailurePolicy, Limiter, Rate, RateLimitError, rate_limit};
use redis::AsyncCommands as _;
use tests::cluster::TestCluster;
use tests::{TestRedis, at_micros, connected, fields, unique_prefix};

const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

fn rate() -> Rate {
    Rate::new(3, Duration::from_secs(60)).expect("a rate")
}

async fn check(limiter: &Limiter, key: &str, at: u64) -> Decision {
    limiter
        .check_at(key, rate(), at_micros(at))
        .await
        .expect("a check")
}

async fn peek(limiter: &Limiter, key: &str, at: u64) -> Decision {
    limiter
        .peek_at(key, rate(), at_micros(at))
        .await
        .expect("a peek")
}

/// On any store: a look answers as the documented check would (`remaining` counting no call),
/// and changes nothing a later check sees.
async fn looks_then_checks(limiter: &Limiter, key: &str) {
    let empty = peek(limiter, key, T0).await;
    assert_eq!(
        empty,
        Decision::admitted(3, 3, Duration::ZERO),
        "a key never checked"
    );
    check(limiter, key, T0).await;
    check(limiter, key, T0 + 10 * SECOND).await;
    let two = peek(limiter, key, T0 + 20 * SECOND).await;
    assert_eq!(two, Decision::admitted(3, 1, Duration::from_secs(50)));
    assert!(check(limiter, key, T0 + 20 * SECOND).await.allowed);
    let full = peek(limiter, key, T0 + 30 * SECOND).await;
    assert_eq!(
        full,
        Decision::denied(3, Duration::from_secs(30), Duration::from_secs(50))
    );
    // Looking again and again changes nothing: the check at that time answers the same.
    for _ in 0..3 {
        assert_eq!(peek(limiter, key, T0 + 30 * SECOND).await, full);
    }
    let checked = check(limiter, key, T0 + 30 * SECOND).await;
    assert_eq!(checked.retry_after, full.retry_after);
    // Once the first admission has left, a call fits; a look evicts nothing.
    let after = peek(limiter, key, T0 + 60 * SECOND).await;
    assert_eq!(after, Decision::admitted(3, 1, Duration::from_secs(20)));
    // A reset during a denial lets the next call in, with a fresh window.
    assert!(!check(limiter, key, T0 + 50 * SECOND).await.allowed);
    limiter.reset(key).await.expect("a reset");
    assert_eq!(
        peek(limiter, key, T0 + 50 * SECOND).await,
        Decision::admitted(3, 3, Duration::ZERO)
    );
    let fresh = check(limiter, key, T0 + 50 * SECOND).await;
    assert_eq!(fresh, Decision::admitted(3, 2, Duration::from_secs(60)));
    limiter.reset(key).await.expect("a reset");
    limiter
        .reset(key)
        .await
        .expect("a reset of a key that is gone");
}

/// A log that a longer rate keeps: entries older than the shorter rate's window are still
/// there when it looks, and the look's retry-after is the check's.
async fn a_longer_rates_entries(limiter: &Limiter, key: &str) -> Vec<Decision> {
    let hour = Rate::new(10, Duration::from_secs(3_600)).expect("a rate");
    let minute = Rate::new(2, Duration::from_secs(60)).expect("a rate");
    for seconds in [0, 100, 110] {
        let at = at_micros(T0 + seconds * SECOND);
        assert!(
            limiter
                .check_at(key, hour, at)
                .await
                .expect("a check")
                .allowed
        );
    }
    let at = at_micros(T0 + 120 * SECOND);
    let look = limiter.peek_at(key, minute, at).await.expect("a peek");
    let checked = limiter.check_at(key, minute, at).await.expect("a check");
    assert_eq!(
        look,
        Decision::denied(2, Duration::from_secs(40), Duration::from_secs(50))
    );
    assert_eq!(
        (checked.allowed, checked.retry_after),
        (false, look.retry_after)
    );
    // A threshold lowered below the count; a period of 100 years, reaching before 1970.
    let lowered = Rate::new(1, Duration::from_secs(3_600)).expect("a rate");
    let longest = Rate::new(3, Rate::MAX_PERIOD).expect("a rate");
    vec![
        limiter.peek_at(key, lowered, at).await.expect("a peek"),
        limiter.peek_at(key, longest, at).await.expect("a peek"),
    ]
}

#[tokio::test]
async fn in_process() {
    looks_then_checks(&Limiter::memory(), "k").await;
    let answers = a_longer_rates_entries(&Limiter::memory(), "shared").await;
    assert_eq!(
        answers[0],
        Decision::denied(1, Duration::from_secs(3_590), Duration::from_secs(3_590))
    );
    assert_eq!((answers[1].allowed, answers[1].remaining), (true, 1));
}

#[tokio::test]
async fn on_redis_a_look_writes_nothing() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("peek");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    looks_then_checks(&limiter, "k").await;
    let mut connection = redis.connection().await;
    let key = format!("{prefix}k");
    let before: Vec<(String, f64)> = connection.zrange_withscores(&key, 0, -1).await.unwrap();
    let ttl_before: i64 = connection.pttl(&key).await.unwrap();
    // A look long after the window: a check would evict every admission; a look leaves them.
    let late = peek(&limiter, "k", T0 + 3_600 * SECOND).await;
    assert_eq!(late, Decision::admitted(3, 3, Duration::ZERO));
    let after: Vec<(String, f64)> = connection.zrange_withscores(&key, 0, -1).await.unwrap();
    let ttl_after: i64 = connection.pttl(&key).await.unwrap();
    assert_eq!(after, before, "the set is untouched");
    assert!(ttl_after <= ttl_before, "the TTL is not extended");
    let never: bool = connection.exists(format!("{prefix}never")).await.unwrap();
    assert!(!never);
    peek(&limiter, "never", T0).await;
    let never: bool = connection.exists(format!("{prefix}never")).await.unwrap();
    assert!(!never, "a look at a key never checked makes none");
    check(&limiter, "gone", T0).await;
    limiter.reset("gone").await.expect("a reset");
    let gone: bool = connection.exists(format!("{prefix}gone")).await.unwrap();
    assert!(!gone, "a reset deletes the key");
    let in_process = a_longer_rates_entries(&Limiter::memory(), "shared").await;
    let on_redis = a_longer_rates_entries(&limiter, "shared").await;
    assert_eq!(on_redis, in_process, "both stores answer alike");
    // On the server's clock too.
    let now = limiter.peek("k2", rate()).await.expect("a peek");
    assert_eq!(now, Decision::admitted(3, 3, Duration::ZERO));
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn in_a_cluster_a_look_goes_to_the_keys_master() {
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("peek-cluster");
    let limiter = tests::closed_cluster_limiter(cluster.urls(), &prefix).await;
    connected(&limiter, "peek-canary").await;
    for node in 0..cluster.len() {
        let full = cluster.key_for_node(node, &format!("{prefix}k"));
        let key = full.strip_prefix(&prefix).expect("the prefix");
        looks_then_checks(&limiter, key).await;
    }
}

#[tokio::test]
async fn when_the_store_fails_the_policy_answers() {
    let url = format!("redis://127.0.0.1:{}/", tests::spare_port());
    let build = |policy| {
        Limiter::builder()
            .redis_url(&url)
            .failure_policy(policy)
            .timeout(Duration::from_secs(10))
            .build()
    };
    let open = build(FailurePolicy::Open).expect("a limiter");
    let answer = peek(&open, "k", T0).await;
    assert!(answer.answered_by_policy(), "{answer:?}");
    assert_eq!(
        fields(&answer),
        fields(&Decision::admitted(3, 3, Duration::ZERO))
    );
    assert_eq!(open.policy_answers(), 0, "a look is not counted as a check");

    let closed = build(FailurePolicy::Closed).expect("a limiter");
    let err = closed
        .peek_at("k", rate(), at_micros(T0))
        .await
        .unwrap_err();
    assert!(matches!(err, RateLimitError::Unavailable(_)), "{err}");

    // `Local`: the fallback's log, which the checks answered by the policy recorded.
    let local = build(FailurePolicy::Local).expect("a limiter");
    check(&local, "k", T0).await;
    check(&local, "k", T0 + SECOND).await;
    let answer = peek(&local, "k", T0 + 2 * SECOND).await;
    assert!(answer.answered_by_policy(), "{answer:?}");
    assert_eq!(
        fields(&answer),
        fields(&Decision::admitted(3, 1, Duration::from_secs(59)))
    );

    // A reset the store cannot make is an error under every policy; the fallback forgets.
    for limiter in [&open, &closed, &local] {
        let err = limiter.reset("k").await.unwrap_err();
        assert!(matches!(err, RateLimitError::Unavailable(_)), "{err}");
    }
    let answer = peek(&local, "k", T0 + 2 * SECOND).await;
    assert_eq!(
        fields(&answer),
        fields(&Decision::admitted(3, 3, Duration::ZERO)),
        "the fallback forgot"
    );
}

#[rate_limit(period = 60, threshold = 1, key = user, limiter = limiter)]
async fn login(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 1, key = user, limiter = limiter)]
#[rate_limit(period = "1d", threshold = 10, key = user, limiter = limiter)]
async fn search(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[tokio::test]
async fn the_attributes_keys_are_reset_as_documented() {
    let limiter = Limiter::memory();
    assert!(login(&limiter, "alice").await.is_ok());
    assert!(login(&limiter, "alice").await.is_err());
    limiter
        .reset("suite::inspect::login/alice")
        .await
        .expect("a reset");
    assert!(login(&limiter, "alice").await.is_ok(), "unblocked");

    assert!(search(&limiter, "bob").await.is_ok());
    assert!(search(&limiter, "bob").await.is_err());
    limiter
        .reset("#suite::inspect::search#1/{bob}@1m")
        .await
        .expect("a reset");
    assert!(
        search(&limiter, "bob").await.is_ok(),
        "the burst limit forgot"
    );
    let day = Rate::new(10, Duration::from_secs(86_400)).expect("a rate");
    let daily = limiter
        .peek("#suite::inspect::search#2/{bob}@1d", day)
        .await
        .expect("a peek");
    assert_eq!(daily.remaining, 8, "the daily quota kept its count");
}

#[tokio::test]
async fn on_a_manual_clock() {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_micros(T0));
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .build()
        .expect("an in-process limiter");
    for _ in 0..3 {
        assert!(limiter.check("k", rate()).await.expect("a check").allowed);
    }
    let full = limiter.peek("k", rate()).await.expect("a peek");
    assert_eq!(full.retry_after, Some(Duration::from_secs(60)));
    clock.advance(Duration::from_secs(60));
    let free = limiter.peek("k", rate()).await.expect("a peek");
    assert_eq!(free, Decision::admitted(3, 3, Duration::ZERO));
}

// Every form of the layout under one scope: one attribute with a rate chosen per call, stacked
// limits with a key, stacked limits without one, and a `name`.
#[rate_limit(rate = rate, key = user, limiter = limiter)]
async fn tiered(limiter: &Limiter, user: &str, rate: Rate) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 1, limiter = limiter)]
#[rate_limit(period = "1d", threshold = 10, limiter = limiter)]
async fn keyless(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 1, key = user, name = "inspect.named", limiter = limiter)]
#[rate_limit(period = "1d", threshold = 10, key = user, name = "inspect.named.daily", limiter = limiter)]
async fn named(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// On any store: a reset by scope and key unblocks that caller in every limit of the scope,
/// whatever the form of its logs, and leaves other callers and scopes alone.
async fn resets_by_scope(limiter: &Limiter) {
    let hour = Rate::new(1, Duration::from_secs(3_600)).expect("a rate");
    let day = Rate::new(1, Duration::from_secs(86_400)).expect("a rate");
    for user in ["carol", "dave"] {
        assert!(search(limiter, user).await.is_ok());
        assert!(search(limiter, user).await.is_err());
        assert!(tiered(limiter, user, hour).await.is_ok());
        assert!(tiered(limiter, user, day).await.is_ok());
        assert!(tiered(limiter, user, day).await.is_err());
        assert!(named(limiter, user).await.is_ok());
        assert!(named(limiter, user).await.is_err());
    }
    assert!(keyless(limiter).await.is_ok());
    assert!(keyless(limiter).await.is_err());

    let forgot = limiter
        .reset_scope("suite::inspect::search", Some("carol"))
        .await
        .expect("a reset");
    assert_eq!(forgot, 2, "both stacked limits' logs");
    assert!(search(limiter, "carol").await.is_ok(), "unblocked");
    assert!(search(limiter, "dave").await.is_err(), "another caller");
    let forgot = limiter
        .reset_scope("suite::inspect::tiered", Some("carol"))
        .await
        .expect("a reset");
    assert_eq!(forgot, 2, "the log of each period");
    assert!(tiered(limiter, "carol", day).await.is_ok());
    assert!(tiered(limiter, "dave", day).await.is_err());
    // A name resets its own limit only; the other name is another scope.
    limiter
        .reset_scope("inspect.named", Some("carol"))
        .await
        .expect("a reset");
    let daily = limiter
        .peek("#inspect.named.daily/{carol}@1d", day)
        .await
        .expect("a peek");
    assert!(!daily.allowed, "the other name kept its count");
    assert!(named(limiter, "dave").await.is_err());
    // Without a key.
    let forgot = limiter
        .reset_scope("suite::inspect::keyless", None)
        .await
        .expect("a reset");
    assert_eq!(forgot, 2);
    assert!(keyless(limiter).await.is_ok());
    // Nothing to forget: not an error.
    let forgot = limiter
        .reset_scope("suite::inspect::nothing", Some("*"))
        .await
        .expect("a reset");
    assert_eq!(forgot, 0);
}

#[tokio::test]
async fn resets_by_scope_in_process() {
    resets_by_scope(&Limiter::memory()).await;
}

#[tokio::test]
async fn resets_by_scope_on_redis_and_in_a_cluster() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("reset-scope");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    resets_by_scope(&limiter).await;
    redis.clean_up(&prefix).await;

    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("reset-scope-cluster");
    let limiter = tests::closed_cluster_limiter(cluster.urls(), &prefix).await;
    connected(&limiter, "canary").await;
    resets_by_scope(&limiter).await;
}

#[rate_limit(period = "1h", threshold = 2, key = user, name = "inspect.report", limiter = limiter)]
async fn report(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// A `reset_scope` its caller stops waiting for once the store forgot the logs (a `timeout`
/// around it) still runs to its end, which clears the deny cache: the caller it unblocked is
/// admitted, not denied by a cached denial for the cache's time to live (an hour here). It
/// ended where its caller stopped it (issue 34).
#[tokio::test]
async fn a_reset_scope_its_caller_stops_waiting_for_still_clears_the_deny_cache() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("reset-scope-dropped");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .deny_cache(true)
        .deny_cache_ttl(Duration::from_secs(3_600))
        .build()
        .expect("a limiter");
    assert!(report(&limiter, "erin").await.is_ok());
    assert!(report(&limiter, "erin").await.is_ok());
    assert!(report(&limiter, "erin").await.unwrap_err().is_denied());
    let before = limiter.deny_cache_answers();
    assert!(report(&limiter, "erin").await.unwrap_err().is_denied());
    assert_eq!(
        limiter.deny_cache_answers(),
        before + 1,
        "the denial is cached"
    );
    let key = format!("{prefix}inspect.report/erin");
    let mut connection = redis.connection().await;
    {
        // Polled until the store forgot the log, then dropped.
        let mut reset = std::pin::pin!(limiter.reset_scope("inspect.report", Some("erin")));
        let deadline = std::time::Instant::now() + tests::STATE_DEADLINE;
        loop {
            let polled = std::future::poll_fn(|context| {
                std::task::Poll::Ready(reset.as_mut().poll(context))
            })
            .await;
            let exists: bool = connection.exists(&key).await.expect("EXISTS");
            if polled.is_ready() || !exists {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the reset never ran");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    tests::wait_for(
        "the reset's caller admitted again",
        tests::STATE_DEADLINE,
        async || report(&limiter, "erin").await.ok(),
    )
    .await;
    redis.clean_up(&prefix).await;
}

/// The look's script is flagged `no-writes` and sent by `EVALSHA_RO` (Redis 7 and later): a
/// user allowed to read only (and those commands) can look, and not check.
#[tokio::test]
async fn a_user_allowed_to_read_only_can_look() {
    let redis = TestRedis::start_private();
    let prefix = unique_prefix("peek-reader");
    let writer = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&writer, "canary").await;
    check(&writer, "k", T0).await;
    let mut connection = redis.connection().await;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut connection)
        .await
        .unwrap();
    let major: u32 = info
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .and_then(|v| v.split('.').next()?.parse().ok())
        .expect("a version");
    if major < 7 {
        eprintln!("skipped: Redis {major} has no read-only scripts");
        return;
    }
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "reader", "on", ">secret", "~*", "resetchannels"])
        .arg(&["+@read", "+@connection", "+evalsha_ro", "+eval_ro", "+time"])
        .query_async(&mut connection)
        .await
        .unwrap();
    let url = redis
        .url()
        .replacen("redis://", "redis://reader:secret@", 1);
    let reader = tests::closed_redis_limiter(&url, &prefix).await;
    let look = peek(&reader, "k", T0 + SECOND).await;
    assert_eq!(look, Decision::admitted(3, 2, Duration::from_secs(59)));
    let now = reader
        .peek("k", rate())
        .await
        .expect("a look on the server's clock");
    assert!(now.allowed);
    let err = reader
        .check_at("k", rate(), at_micros(T0 + SECOND))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("rate limit store"), "{err}");

    // A user granted the scripts by `EVALSHA` alone (as checks send them): the look falls back
    // on it, and the refusal of `EVALSHA_RO` is no outage.
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "legacy", "on", ">secret", "~*", "resetchannels"])
        .arg(&["+@read", "+@connection", "+evalsha", "+eval", "+time"])
        .query_async(&mut connection)
        .await
        .unwrap();
    let url = redis
        .url()
        .replacen("redis://", "redis://legacy:secret@", 1);
    let legacy = tests::closed_redis_limiter(&url, &prefix).await;
    for _ in 0..3 {
        let look = peek(&legacy, "k", T0 + SECOND).await;
        assert_eq!(look, Decision::admitted(3, 2, Duration::from_secs(59)));
    }
    assert!(!legacy.is_degraded(), "no breaker opened");
}

/// In a cluster, a reset by scope scans each master by its address, from a slot map read for
/// it: a master that took a slot after the limiter connected (so that the client's own map is
/// older) is scanned all the same.
#[tokio::test]
async fn a_reset_by_scope_finds_keys_on_a_master_whose_slots_moved() {
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("reset-moved");
    let limiter = tests::closed_cluster_limiter(cluster.urls(), &prefix).await;
    connected(&limiter, "canary").await;
    let from = cluster.node_for_slot(0);
    let to = (from + 1) % cluster.len();
    cluster.migrate_slot(0, from, to).await;
    let user = (0..)
        .map(|i| format!("u{i}"))
        .find(|user| {
            let slot = TestCluster::key_slot(&format!("{prefix}suite::inspect::tiered/{user}@1h"));
            slot != 0 && cluster.node_for_slot(slot) == to
        })
        .expect("a user whose log lies on the node that took slot 0");
    let hour = Rate::new(1, Duration::from_secs(3_600)).expect("a rate");
    assert!(tiered(&limiter, &user, hour).await.is_ok());
    assert!(tiered(&limiter, &user, hour).await.is_err());
    let forgot = limiter
        .reset_scope("suite::inspect::tiered", Some(&user))
        .await
        .expect("a reset");
    assert_eq!(forgot, 1, "the master that took slot 0 was scanned");
    assert!(tiered(&limiter, &user, hour).await.is_ok());
}

/// A server without the read-only script commands (as Redis 5 and 6): the look falls back on
/// `EVALSHA` and its unflagged script, from then on, and no breaker opens.
#[tokio::test]
async fn a_server_without_read_only_scripts_still_answers_looks() {
    let redis = TestRedis::start_private_with(&[
        "--rename-command",
        "EVALSHA_RO",
        "",
        "--rename-command",
        "EVAL_RO",
        "",
    ]);
    let prefix = unique_prefix("peek-legacy");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    check(&limiter, "k", T0).await;
    for _ in 0..3 {
        let look = peek(&limiter, "k", T0 + SECOND).await;
        assert_eq!(look, Decision::admitted(3, 2, Duration::from_secs(59)));
    }
    assert!(!limiter.is_degraded(), "no breaker opened");
}
