//! The limits shared through Redis (`LimiterBuilder::shared_limits`, `Limiter::shared_limits`):
//! a change made through one instance is in force on another (two limiters, each on its own
//! connection; two processes), on a server, a Cluster and a Sentinel deployment; the
//! precedence between the sources (file < Redis < API); an instance cut off during a change
//! keeps what it knew and applies the change when it is back; a log it can no longer follow
//! is read whole; an entry written by hand that does not parse is skipped and the rest apply;
//! no caller's key reaches the shared limits' keys.
//!
//! Timing: windows are an hour; each propagation is awaited with a generous deadline (3 s,
//! what the issue asserts; the design's is 250 ms and a round trip), never slept for.

use std::time::{Duration, Instant};

use ratelimit_runtime::{
    FailurePolicy, Limiter, LimiterBuilder, Limits, Mode, Override, Rate, RateLimitError,
    ScopeLimits, rate_limit,
};
use redis::AsyncCommands as _;
use tests::proxy::{Fault, FaultProxy};
use tests::{TestRedis, unique_prefix, wait_for, write_shared_by_hand};

const HOUR: Duration = Duration::from_secs(3_600);

/// How long a change may take to reach another instance here (the design's: a quarter of a
/// second and a round trip).
const PROPAGATION: Duration = Duration::from_secs(3);

/// The code's rate of the limits below.
const CODE: u64 = 2;

fn rate(threshold: u64) -> Rate {
    Rate::new(threshold, HOUR).expect("a rate")
}

#[rate_limit(name = "shared-login", period = 3600, threshold = 2, key = user, limiter = limiter)]
async fn login(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn builder(url: &str, prefix: &str) -> LimiterBuilder {
    Limiter::builder()
        .redis_url(url)
        .key_prefix(prefix)
        .timeout(Duration::from_secs(2))
        .shared_limits()
}

/// What a check of `scope` for a fresh key answers on `limiter`: the threshold in force
/// (`Some(0)` for a blocked key's denial, `None` for an exempt one's), by a hand check in the
/// scope that records one call of a key used once.
async fn in_force(limiter: &Limiter, scope: &str, key: &str) -> Option<u64> {
    let decision = limiter
        .scope(scope)
        .check(key, rate(CODE))
        .await
        .expect("a decision");
    if decision.is_exempt() {
        None
    } else if !decision.allowed {
        Some(0)
    } else {
        Some(decision.limit)
    }
}

/// Waits until `limiter` answers `scope`'s checks as `expected` (see [`in_force`]), each try
/// with a fresh key (`<key>-<try>`); returns how long it took.
async fn until_in_force(
    limiter: &Limiter,
    scope: &str,
    key: &str,
    expected: Option<u64>,
) -> Duration {
    let mut tries = 0_u32;
    let (_, took) = wait_for(
        &format!("{scope} in force as {expected:?}"),
        PROPAGATION,
        async || {
            tries += 1;
            let probe = format!("{key}-{tries}");
            (in_force(limiter, scope, &probe).await == expected).then_some(())
        },
    )
    .await;
    took
}

/// Waits until `limiter` answers `scope`'s checks of `key` itself as `expected` (its override
/// in force); each try records one call when admitted, so the rate before the change must
/// leave room for a few hundred (a full window's denial would pass for a block).
async fn until_override(
    limiter: &Limiter,
    scope: &str,
    key: &str,
    expected: Option<u64>,
) -> Duration {
    let (_, took) = wait_for(
        &format!("{scope}'s override in force as {expected:?}"),
        PROPAGATION,
        async || (in_force(limiter, scope, key).await == expected).then_some(()),
    )
    .await;
    took
}

/// Two limiters on one server, each with its own connection: every kind of change made
/// through one is in force on the other within the deadline, and on the writer when the write
/// returns; `entries` reads back what Redis holds.
#[tokio::test]
async fn a_change_through_one_instance_is_in_force_on_another() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared");
    let one = builder(redis.url(), &prefix).build().expect("a limiter");
    let other = builder(redis.url(), &prefix).build().expect("a limiter");
    let shared = one.shared_limits();
    shared.refresh().await.expect("read");
    other.shared_limits().refresh().await.expect("read");
    // The code: 2 an hour, through the attribute.
    assert!(login(&other, "ann").await.is_ok());

    // A scope's rate, in force on the writer when the write returns.
    shared
        .set_scope("shared-login", ScopeLimits::new().rate(rate(5)))
        .await
        .expect("written");
    assert_eq!(in_force(&one, "shared-login", "w1").await, Some(5));
    let mut took = vec![until_in_force(&other, "shared-login", "a", Some(5)).await];
    // The attribute's checks take it too, in the same log: ann had 1, now 4 more.
    let mut admitted = 0;
    for _ in 0..6 {
        admitted += usize::from(login(&other, "ann").await.is_ok());
    }
    assert_eq!(admitted, 4);

    // A key's block, exemption and rate; each removal (under a rate that leaves room for the
    // probes).
    shared
        .set_scope("shared-login", ScopeLimits::new().rate(rate(500)))
        .await
        .expect("written");
    took.push(until_in_force(&other, "shared-login", "b", Some(500)).await);
    shared
        .set_override("shared-login", "mallory", Override::block())
        .await
        .expect("written");
    took.push(until_override(&other, "shared-login", "mallory", Some(0)).await);
    shared
        .set_override("shared-login", "mallory", Override::exempt())
        .await
        .expect("written");
    took.push(until_override(&other, "shared-login", "mallory", None).await);
    shared
        .remove_override("shared-login", "mallory")
        .await
        .expect("written");
    took.push(until_override(&other, "shared-login", "mallory", Some(500)).await);

    // The whole limiter's mode, and back.
    shared.set_mode(Some(Mode::Off)).await.expect("written");
    took.push(until_in_force(&other, "elsewhere", "m", None).await);
    shared.set_mode(None).await.expect("written");
    took.push(until_in_force(&other, "elsewhere", "m", Some(CODE)).await);

    // What Redis holds.
    shared
        .set_override(
            "shared-login",
            "vip",
            Override::rate(rate(50)).until(tests::at_secs(4_000_000_000.0)),
        )
        .await
        .expect("written");
    let expected = Limits::new().scope(
        "shared-login",
        ScopeLimits::new().rate(rate(500)).key(
            "vip",
            Override::rate(rate(50)).until(tests::at_secs(4_000_000_000.0)),
        ),
    );
    assert_eq!(
        other.shared_limits().entries().await.expect("read"),
        expected
    );
    took.push(until_override(&other, "shared-login", "vip", Some(50)).await);

    // The scope's whole entry removed: the code again.
    shared.remove_scope("shared-login").await.expect("written");
    took.push(until_in_force(&other, "shared-login", "c", Some(CODE)).await);
    assert_eq!(shared.entries().await.expect("read"), Limits::new());
    took.sort();
    eprintln!(
        "propagation: median {:?}, most {:?}",
        took[took.len() / 2],
        took[took.len() - 1]
    );
    redis.clean_up(&prefix).await;
}

/// At one specificity, the shared limits win over a limits file's entries and yield to the
/// API's; the most specific entry wins whatever its source.
#[tokio::test]
async fn the_shared_limits_rank_between_the_file_and_the_api() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-rank");
    let directory = tempfile::tempdir().expect("a directory");
    let file = directory.path().join("limits.toml");
    std::fs::write(
        &file,
        "[scopes.ranked]\nthreshold = 3\nperiod = \"1h\"\n[scopes.ranked.keys]\nfiled = { threshold = 7, period = \"1h\" }\n",
    )
    .expect("write the file");
    let limiter = builder(redis.url(), &prefix)
        .limits_file(&file)
        .build()
        .expect("a limiter");
    let shared = limiter.shared_limits();
    assert_eq!(in_force(&limiter, "ranked", "a1").await, Some(3));
    shared
        .set_scope("ranked", ScopeLimits::new().rate(rate(4)))
        .await
        .expect("written");
    assert_eq!(in_force(&limiter, "ranked", "a2").await, Some(4));
    // The file's key override is more specific than the shared scope's rate.
    assert_eq!(in_force(&limiter, "ranked", "filed").await, Some(7));
    limiter
        .set_limits(Limits::new().scope("ranked", ScopeLimits::new().rate(rate(6))))
        .expect("accepted");
    assert_eq!(in_force(&limiter, "ranked", "a3").await, Some(6));
    limiter.set_limits(Limits::new()).expect("accepted");
    assert_eq!(in_force(&limiter, "ranked", "a4").await, Some(4));
    shared.remove_scope("ranked").await.expect("written");
    assert_eq!(in_force(&limiter, "ranked", "a5").await, Some(3));
    redis.clean_up(&prefix).await;
}

/// An instance cut off from Redis keeps the limits it knew, its checks answering by its
/// policy meanwhile without waiting for the registry; a change made during the cut is in
/// force there once it is back.
#[tokio::test]
async fn an_instance_cut_off_during_a_change_applies_it_when_back() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("shared-cut");
    let writer = builder(redis.url(), &prefix).build().expect("a limiter");
    let cut = builder(&proxy.url(), &prefix)
        .failure_policy(FailurePolicy::Local)
        .timeout(Duration::from_millis(200))
        .build()
        .expect("a limiter");
    writer
        .shared_limits()
        .set_scope("cut", ScopeLimits::new().rate(rate(5)))
        .await
        .expect("written");
    until_in_force(&cut, "cut", "before", Some(5)).await;

    proxy.set(Fault::Refuse);
    writer
        .shared_limits()
        .set_scope("cut", ScopeLimits::new().rate(rate(9)))
        .await
        .expect("written");
    // Cut off: the checks answer by the policy (in process), under the last limits known.
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(600) {
        let decision = cut
            .scope("cut")
            .check("during", rate(CODE))
            .await
            .expect("a decision");
        assert_eq!(decision.limit, 5, "the last limits read stay in force");
    }
    assert!(
        cut.shared_limits().refresh().await.is_err(),
        "Redis is out of reach"
    );

    proxy.set(Fault::Pass);
    until_in_force(&cut, "cut", "after", Some(9)).await;
    redis.clean_up(&prefix).await;
}

/// A reader whose last change is no longer in the log (trimmed, lost in a failover, or the
/// keys deleted) reads every entry again: it misses no change, and keeps nothing removed.
#[tokio::test]
async fn a_log_that_lost_the_readers_place_is_read_whole() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-lost");
    let one = builder(redis.url(), &prefix).build().expect("a limiter");
    let other = builder(redis.url(), &prefix).build().expect("a limiter");
    let shared = one.shared_limits();
    shared
        .set_scope("lost", ScopeLimits::new().rate(rate(500)))
        .await
        .expect("written");
    until_in_force(&other, "lost", "a", Some(500)).await;
    shared
        .set_override("lost", "blocked", Override::block())
        .await
        .expect("written");
    until_override(&other, "lost", "blocked", Some(0)).await;
    // The log emptied behind the readers' backs, and the block removed by hand without a
    // log entry; then one more change.
    let mut connection = redis.connection().await;
    let entries = format!("{prefix}{{registry}}entries");
    let log = format!("{prefix}{{registry}}changes");
    let _: () = redis::cmd("XTRIM")
        .arg(&log)
        .arg("MAXLEN")
        .arg(0)
        .query_async(&mut connection)
        .await
        .expect("XTRIM");
    let _: () = connection
        .hdel(&entries, "key:lost/blocked")
        .await
        .expect("HDEL");
    // (Above what the probes of the block recorded.)
    shared
        .set_scope("lost", ScopeLimits::new().rate(rate(5_000)))
        .await
        .expect("written");
    until_in_force(&other, "lost", "x", Some(5_000)).await;
    assert_eq!(
        in_force(&other, "lost", "blocked").await,
        Some(5_000),
        "read whole"
    );
    redis.clean_up(&prefix).await;
}

/// Entries written by hand (`HSET`, then `XADD` naming the field, as the guide shows): one
/// that does not parse, or that the code's limits reject, is skipped (not in force), and the
/// rest apply; fixed, it applies.
#[tokio::test]
async fn a_malformed_entry_written_by_hand_is_skipped_and_the_rest_apply() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-hand");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    limiter.shared_limits().refresh().await.expect("read");
    let mut connection = redis.connection().await;
    let mut by_hand = async |field: &str, value: &str| {
        write_shared_by_hand(&mut connection, &prefix, field, value).await;
    };
    by_hand("scope:hand-bad", "threshold=ten period=1h").await;
    by_hand("key:hand-good/alice", "block").await;
    // A cost the code writes above the threshold: rejected by the catalog.
    by_hand("scope:shared-costly", "threshold=1 period=1h").await;
    by_hand("nonsense", "block").await;
    // Written last: once it is in force, the log was read past every entry above.
    by_hand("scope:hand-good", "threshold=6 period=1h").await;
    until_in_force(&limiter, "hand-good", "x", Some(6)).await;
    assert_eq!(in_force(&limiter, "hand-good", "alice").await, Some(0));
    assert_eq!(in_force(&limiter, "hand-bad", "x").await, Some(CODE));
    let entries_read = limiter.shared_limits().entries().await.expect("read");
    assert!(entries_read.get_scope("hand-bad").is_none());
    assert!(entries_read.get_scope("shared-costly").is_none());
    // Each skipped entry counted as it is read (once, or again by a read of every entry).
    let rejected = limiter.limits_rejected();
    assert!(rejected >= 3, "{rejected}");
    by_hand("scope:hand-bad", "threshold=10 period=1h").await;
    until_in_force(&limiter, "hand-bad", "y", Some(10)).await;
    assert_eq!(limiter.limits_rejected(), rejected);
    redis.clean_up(&prefix).await;
}

/// Entries written by hand without their log entries are read by an instance that starts,
/// and while the log is empty, again when their number changes (once each time).
#[tokio::test]
async fn entries_without_log_entries_are_read_at_start_and_applied_once() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-unlogged");
    let mut connection = redis.connection().await;
    let entries = format!("{prefix}{{registry}}entries");
    let _: () = connection
        .hset(&entries, "scope:unlogged", "threshold=7 period=1h")
        .await
        .expect("HSET");
    let _: () = connection
        .hset(&entries, "scope:unlogged-bad", "threshold=7")
        .await
        .expect("HSET");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    limiter.shared_limits().refresh().await.expect("read");
    assert_eq!(in_force(&limiter, "unlogged", "a").await, Some(7));
    // Several of the thread's reads later, the bad entry was counted once.
    tokio::time::sleep(Duration::from_millis(800)).await;
    limiter.shared_limits().refresh().await.expect("read");
    assert_eq!(limiter.limits_rejected(), 1);
    // An entry added by hand, still without a log entry: read all the same.
    let _: () = connection
        .hset(&entries, "scope:unlogged-more", "threshold=9 period=1h")
        .await
        .expect("HSET");
    until_in_force(&limiter, "unlogged-more", "b", Some(9)).await;
    assert_eq!(
        limiter.limits_rejected(),
        2,
        "the bad entry read again, once"
    );
    redis.clean_up(&prefix).await;
}

#[rate_limit(name = "shared-costly", period = 3600, threshold = 5, cost = 3, limiter = limiter)]
async fn costly(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

/// A change the code's limits contradict is refused before anything is written; a limiter
/// that shares no limits says how to make one that does.
#[tokio::test]
async fn what_cannot_be_shared_is_refused_with_the_reason() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-refused");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    assert!(costly(&limiter).await.is_ok());
    let refused = limiter
        .shared_limits()
        .set_scope("shared-costly", ScopeLimits::new().rate(rate(2)))
        .await
        .expect_err("below the cost");
    assert!(
        matches!(&refused, RateLimitError::InvalidConfig(reason) if reason.contains("cost 3")),
        "{refused}"
    );
    assert_eq!(
        limiter.shared_limits().entries().await.expect("read"),
        Limits::new()
    );
    let plain = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .build()
        .expect("a limiter");
    let refused = plain
        .shared_limits()
        .set_mode(Some(Mode::Off))
        .await
        .expect_err("not shared");
    assert!(refused.to_string().contains("shared_limits()"), "{refused}");
    let in_process = Limiter::builder().shared_limits().build();
    assert!(
        matches!(&in_process, Err(RateLimitError::InvalidConfig(reason)) if reason.contains("needs a Redis limiter")),
        "{in_process:?}"
    );
    redis.clean_up(&prefix).await;
}

/// No caller's key reaches the shared limits' keys: a hand key that names them is refused by
/// a check, a look and a reset; the attribute's and a scope's reset never touch them.
#[tokio::test]
async fn no_callers_key_reaches_the_shared_limits() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-reserved");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    limiter
        .shared_limits()
        .set_scope("reserved", ScopeLimits::new().rate(rate(5)))
        .await
        .expect("written");
    for key in ["{registry}entries", "{registry}changes", "{registry}"] {
        let refused = limiter.check(key, rate(5)).await.expect_err("reserved");
        assert!(
            matches!(refused, RateLimitError::InvalidInput(_)),
            "{refused}"
        );
        assert!(matches!(
            limiter.peek(key, rate(5)).await,
            Err(RateLimitError::InvalidInput(_))
        ));
        assert!(matches!(
            limiter.reset(key).await,
            Err(RateLimitError::InvalidInput(_))
        ));
        // The attribute escapes its key: its log is its own.
        assert!(login(&limiter, key).await.is_ok());
        limiter
            .reset_scope("shared-login", Some(key))
            .await
            .expect("reset");
    }
    for scope in ["", "{registry}", "registry", "reserved"] {
        limiter.reset_scope(scope, None).await.expect("reset");
        limiter
            .reset_scope(scope, Some("entries"))
            .await
            .expect("reset");
    }
    let mut connection = redis.connection().await;
    for name in ["entries", "changes"] {
        let exists: bool = connection
            .exists(format!("{prefix}{{registry}}{name}"))
            .await
            .expect("EXISTS");
        assert!(exists, "{name} is kept");
    }
    assert_eq!(in_force(&limiter, "reserved", "x").await, Some(5));
    redis.clean_up(&prefix).await;
}

/// On a Redis Cluster: the shared limits' keys in one slot, a change through one limiter in
/// force on another.
#[tokio::test]
async fn a_change_reaches_every_instance_on_a_cluster() {
    let _alone = crate::ONE_AT_A_TIME.lock().await;
    let cluster = tests::cluster::TestCluster::start(3);
    let prefix = unique_prefix("shared-cluster");
    let build = || {
        Limiter::builder()
            .redis_cluster(cluster.urls())
            .key_prefix(&prefix)
            .timeout(Duration::from_secs(2))
            .shared_limits()
            .build()
            .expect("a cluster limiter")
    };
    let (one, other) = (build(), build());
    one.shared_limits()
        .set_scope("clustered", ScopeLimits::new().rate(rate(500)))
        .await
        .expect("written");
    until_in_force(&other, "clustered", "a", Some(500)).await;
    other
        .shared_limits()
        .set_override("clustered", "b", Override::block())
        .await
        .expect("written");
    until_override(&one, "clustered", "b", Some(0)).await;
    one.shared_limits()
        .remove_scope("clustered")
        .await
        .expect("written");
    until_in_force(&other, "clustered", "c", Some(CODE)).await;
}

/// On a Sentinel deployment, waiting for the replica: a change is written on the master and
/// acknowledged by the replica, and reaches the other instance; after a failover, the new
/// master holds it and a later change reaches every instance.
#[tokio::test]
async fn a_change_reaches_every_instance_through_sentinel_and_a_failover() {
    let _alone = crate::ONE_AT_A_TIME.lock().await;
    let sentinel = tests::sentinel::TestSentinel::start().await;
    let prefix = unique_prefix("shared-sentinel");
    let build = || {
        builder(&sentinel.url(), &prefix)
            .wait_for_replicas(1, Duration::from_millis(500))
            .build()
            .expect("a Sentinel limiter")
    };
    let (one, other) = (build(), build());
    one.shared_limits()
        .set_scope("sentineled", ScopeLimits::new().rate(rate(5)))
        .await
        .expect("written and acknowledged");
    until_in_force(&other, "sentineled", "a", Some(5)).await;
    sentinel.graceful_failover(|_, _| {}).await;
    // The replica had acknowledged it: the new master holds it.
    wait_for(
        "the change written after the failover",
        Duration::from_secs(30),
        async || {
            one.shared_limits()
                .set_scope("sentineled", ScopeLimits::new().rate(rate(7)))
                .await
                .ok()
        },
    )
    .await;
    until_in_force(&other, "sentineled", "b", Some(7)).await;
    assert_eq!(
        other.shared_limits().entries().await.expect("read"),
        Limits::new().scope("sentineled", ScopeLimits::new().rate(rate(7)))
    );
}

/// Two processes: a change made here is in force in another process (`shared_limits_peer`)
/// within the deadline.
#[tokio::test]
async fn a_change_reaches_another_process() {
    use std::io::{BufRead as _, BufReader};
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-process");
    let mut peer = std::process::Command::new(env!("CARGO_BIN_EXE_shared_limits_peer"))
        .args([redis.url(), &prefix, "processed", "11"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start shared_limits_peer");
    let mut lines = BufReader::new(peer.stdout.take().expect("its output")).lines();
    let ready = tokio::task::spawn_blocking(move || {
        let first = lines.next();
        (first, lines)
    });
    let (first, mut lines) = ready.await.expect("read");
    assert_eq!(first.expect("a line").expect("text"), "ready");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    let written = Instant::now();
    limiter
        .shared_limits()
        .set_scope("processed", ScopeLimits::new().rate(rate(11)))
        .await
        .expect("written");
    let applied = tokio::task::spawn_blocking(move || lines.next())
        .await
        .expect("read")
        .expect("a line")
        .expect("text");
    let took = written.elapsed();
    assert_eq!(applied, "applied");
    assert!(
        took <= PROPAGATION,
        "in force in the other process after {took:?}"
    );
    assert!(peer.wait().expect("the peer ends").success());
    redis.clean_up(&prefix).await;
}

/// A write whose reply is lost is sent again on a new connection: logged once, in force.
#[tokio::test]
async fn a_write_sent_again_after_its_reply_was_lost_is_in_force_once() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("shared-resent");
    let limiter = builder(&proxy.url(), &prefix).build().expect("a limiter");
    // A first write: the server holds the script (a `NOSCRIPT` reply cut would run nothing).
    limiter
        .shared_limits()
        .set_scope("warm", ScopeLimits::new().rate(rate(3)))
        .await
        .expect("written");
    proxy.set(Fault::CutMidCall);
    let written = limiter
        .shared_limits()
        .set_scope("resent", ScopeLimits::new().rate(rate(5)))
        .await;
    proxy.set(Fault::Pass);
    assert!(written.is_err(), "its replies were cut: {written:?}");
    let mut connection = redis.connection().await;
    let logged: u64 = redis::cmd("XLEN")
        .arg(format!("{prefix}{{registry}}changes"))
        .query_async(&mut connection)
        .await
        .expect("XLEN");
    assert_eq!(logged, 2, "the second write ran once");
    until_in_force(&limiter, "resent", "a", Some(5)).await;
    redis.clean_up(&prefix).await;
}

/// More changes than one read returns (1,000 log entries) reach another instance whole.
#[tokio::test]
async fn a_change_of_many_entries_reaches_another_instance_whole() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-many");
    let one = builder(redis.url(), &prefix).build().expect("a limiter");
    let other = builder(redis.url(), &prefix).build().expect("a limiter");
    other.shared_limits().refresh().await.expect("read");
    let mut entry = ScopeLimits::new().rate(rate(500));
    for i in 0..1_500 {
        entry = entry.key(format!("user-{i}"), Override::block());
    }
    one.shared_limits()
        .set_scope("many", entry)
        .await
        .expect("written");
    let expected = one.shared_limits().entries().await.expect("read");
    assert_eq!(
        expected
            .get_scope("many")
            .expect("the scope")
            .overrides()
            .count(),
        1_500
    );
    wait_for("every entry in force", PROPAGATION, async || {
        (other.shared_limits().in_force() == expected).then_some(())
    })
    .await;
    one.shared_limits()
        .remove_scope("many")
        .await
        .expect("written");
    wait_for("every entry removed", PROPAGATION, async || {
        other.shared_limits().in_force().is_empty().then_some(())
    })
    .await;
    redis.clean_up(&prefix).await;
}

/// A reader whose last log entry's id was given to another entry (the log lost after a
/// failover, written again) tells them apart by their marks and reads every entry; a hand
/// entry with the largest sequence stalls no reader.
#[tokio::test]
async fn a_log_entry_id_given_again_is_told_apart() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-reused");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    limiter
        .shared_limits()
        .set_scope("reused", ScopeLimits::new().rate(rate(5)))
        .await
        .expect("written");
    let mut connection = redis.connection().await;
    let log = format!("{prefix}{{registry}}changes");
    let last: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
        .arg(&log)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut connection)
        .await
        .expect("XREVRANGE");
    let id = last[0].0.clone();
    // The log lost, and the same id given to another change (by hand, as a new master's
    // `XADD *` could).
    let _: () = connection.del(&log).await.expect("DEL");
    let _: () = connection
        .hset(
            format!("{prefix}{{registry}}entries"),
            "scope:reused-too",
            "threshold=8 period=1h",
        )
        .await
        .expect("HSET");
    let _: String = redis::cmd("XADD")
        .arg(&log)
        .arg(&id)
        .arg("field")
        .arg("scope:reused-too")
        .query_async(&mut connection)
        .await
        .expect("XADD");
    until_in_force(&limiter, "reused-too", "a", Some(8)).await;
    // The largest sequence a stream id can have, then a change after it.
    let ms: u64 = id.split('-').next().expect("ms").parse().expect("a number");
    let _: String = redis::cmd("XADD")
        .arg(&log)
        .arg(format!("{}-18446744073709551615", ms + 1))
        .arg("field")
        .arg("scope:reused")
        .query_async(&mut connection)
        .await
        .expect("XADD");
    limiter
        .shared_limits()
        .set_scope("reused", ScopeLimits::new().rate(rate(9)))
        .await
        .expect("written");
    until_in_force(&limiter, "reused", "b", Some(9)).await;
    redis.clean_up(&prefix).await;
}

/// An override that expired is removed by the next write through any instance (by Redis's
/// clock, however it was spelt), so that expired overrides do not pile up.
#[tokio::test]
async fn a_write_removes_the_overrides_that_expired() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-expired");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    let shared = limiter.shared_limits();
    let soon = std::time::SystemTime::now() + Duration::from_millis(100);
    shared
        .set_override("expiring", "brief", Override::block().until(soon))
        .await
        .expect("written");
    shared
        .set_override("expiring", "kept", Override::block())
        .await
        .expect("written");
    // By hand, spelt otherwise than the runtime writes it, long expired.
    let mut connection = redis.connection().await;
    write_shared_by_hand(
        &mut connection,
        &prefix,
        "key:expiring/by-hand",
        "until=1000000ms  block",
    )
    .await;
    wait_for("the hand entry read", PROPAGATION, async || {
        let read = limiter.shared_limits().in_force();
        (read.get_scope("expiring")?.overrides().count() == 3).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    // The next write, through a view of the limits made now.
    limiter
        .shared_limits()
        .set_mode(None)
        .await
        .expect("written");
    let entries = limiter.shared_limits().entries().await.expect("read");
    let keys: Vec<&str> = entries
        .get_scope("expiring")
        .expect("the scope")
        .overrides()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(keys, ["kept"]);
    redis.clean_up(&prefix).await;
}

/// The write script runs a write once, by its id: sent again after another write (its reply
/// lost, the runtime sends it again), it does not undo the later one.
#[tokio::test]
async fn a_write_sent_again_does_not_undo_a_later_one() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("shared-once");
    let script = redis::Script::new(include_str!(
        "../../../ratelimit-runtime/src/store/redis/registry_write.lua"
    ));
    let mut connection = redis.connection().await;
    let mut write = async |id: &str, value: &str| {
        let changed: Vec<u64> = script
            .key(format!("{prefix}{{registry}}entries"))
            .key(format!("{prefix}{{registry}}changes"))
            .key(format!("{prefix}{{registry}}write:{id}"))
            .arg(10_000)
            .arg("")
            .arg(id)
            .arg("s")
            .arg("scope:once")
            .arg(value)
            .invoke_async(&mut connection)
            .await
            .expect("the script");
        changed[0]
    };
    assert_eq!(write("first", "threshold=5 period=1h").await, 1);
    assert_eq!(write("second", "threshold=7 period=1h").await, 1);
    assert_eq!(write("first", "threshold=5 period=1h").await, 0, "ran once");
    let limiter = builder(redis.url(), &prefix).build().expect("a limiter");
    limiter.shared_limits().refresh().await.expect("read");
    assert_eq!(in_force(&limiter, "once", "a").await, Some(7));
    redis.clean_up(&prefix).await;
}
