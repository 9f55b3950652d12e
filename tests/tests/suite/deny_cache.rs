//! The deny cache of Redis limiters: a full window's denial answered in process until its first
//! unit frees (or its time to live ends), exact, and dropped by what frees units sooner.
//!
//! Each test has a private `redis-server` (even with `RATELIMIT_TEST_REDIS_URL` set), so that
//! `INFO commandstats` counts its scripts alone: the scripts that reach Redis are what the
//! cache exists to save. Time is a manual clock's (the cache reads it), except in the test of
//! the wall clock, which asserts only what holds at any speed.

use std::time::{Duration, SystemTime};

use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{
    Algorithm, FailurePolicy, Limit, LimitDecision, Limiter, Rate, RateLimitError,
};
use tests::cluster::TestCluster;
use tests::proxy::{Fault, FaultProxy};
use tests::{TestRedis, at_secs, scripts_run, unique_prefix};

/// A Redis limiter on `clock` under a fresh prefix, with a timeout no loaded machine reaches.
async fn limiter(redis_url: &str, name: &str, clock: &ManualClock) -> Limiter {
    builder(redis_url, &unique_prefix(name))
        .clock(clock.clone())
        .build()
        .expect("a Redis limiter")
}

fn builder(redis_url: &str, prefix: &str) -> ratelimit_runtime::LimiterBuilder {
    Limiter::builder()
        .redis_url(redis_url)
        .key_prefix(prefix)
        .timeout(Duration::from_secs(10))
}

fn start() -> SystemTime {
    at_secs(1_800_000_000.0)
}

fn rate(threshold: u64) -> Rate {
    Rate::new(threshold, Duration::from_secs(60)).expect("a rate")
}

/// Fills `key`'s window under `rate` at the clock's time, one second apart, and returns how
/// much of the clock this took.
async fn fill(limiter: &Limiter, clock: &ManualClock, key: &str, rate: Rate) -> Duration {
    for _ in 0..rate.threshold() {
        let decision = limiter.check(key, rate).await.expect("a check");
        assert!(decision.allowed, "{decision:?}");
        clock.advance(Duration::from_secs(1));
    }
    Duration::from_secs(rate.threshold())
}

/// Both algorithms: the denial is answered in process, exact and counted down, until its time
/// to live; then one check refreshes it; once the first unit frees, the store admits again.
#[tokio::test]
async fn a_full_window_is_denied_in_process_until_its_first_unit_frees() {
    let redis = TestRedis::start_private();
    for algorithm in [Algorithm::SlidingWindowLog, Algorithm::SlidingWindowCounter] {
        let clock = ManualClock::new(start());
        let limiter = limiter(redis.url(), "deny-cache-full", &clock).await;
        let rate = rate(3).with_algorithm(algorithm);
        let filled = fill(&limiter, &clock, "k", rate).await;
        let first = limiter.check("k", rate).await.expect("a check");
        assert!(!first.allowed && first.remaining == 0, "{first:?}");
        let retry = first.retry_after.expect("a denial's retry-after");
        let before = scripts_run(&redis).await;
        for step in 1..=1_000_u64 {
            clock.advance(Duration::from_micros(500));
            let cached = limiter.check("k", rate).await.expect("a check");
            let waited = Duration::from_micros(500 * step);
            assert!(!cached.allowed, "{algorithm:?}: {cached:?}");
            assert_eq!(cached.remaining, 0);
            assert_eq!(cached.limit, 3);
            assert_eq!(
                cached.retry_after,
                Some(retry - waited),
                "{algorithm:?} at {step}"
            );
            assert_eq!(cached.reset_after, first.reset_after - waited);
            assert!(!cached.answered_by_policy());
        }
        assert_eq!(
            scripts_run(&redis).await,
            before,
            "{algorithm:?}: no check reached Redis"
        );
        assert_eq!(limiter.deny_cache_answers(), 1_000);
        // Its time to live (1 s) over: the next check asks Redis, and is denied there.
        clock.advance(Duration::from_millis(500));
        let refreshed = limiter.check("k", rate).await.expect("a check");
        assert_eq!(
            scripts_run(&redis).await,
            before + 1,
            "{algorithm:?}: one refresh"
        );
        assert_eq!(refreshed.retry_after, Some(retry - Duration::from_secs(1)));
        assert_eq!(limiter.deny_cache_answers(), 1_000);
        assert!(!limiter.check("k", rate).await.expect("a check").allowed);
        assert_eq!(limiter.deny_cache_answers(), 1_001);
        // The first unit frees: the store admits.
        clock.advance(retry - Duration::from_secs(1));
        let admitted = limiter.check("k", rate).await.expect("a check");
        assert!(admitted.allowed, "{algorithm:?}: {admitted:?}");
        println!("{algorithm:?}: filled in {filled:?} of the clock, retry after {retry:?}");
    }
}

/// A reset, a refund and a higher threshold made through the limiter free units at once: the
/// cache drops what it knew of the key, and the next check is the store's.
#[tokio::test]
async fn what_frees_units_through_this_limiter_drops_the_entry() {
    let redis = TestRedis::start_private();
    let clock = ManualClock::new(start());
    let limiter = limiter(redis.url(), "deny-cache-invalidate", &clock).await;
    let higher = rate(5);
    let rate = rate(2);

    fill(&limiter, &clock, "reset", rate).await;
    assert!(!limiter.check("reset", rate).await.expect("a check").allowed);
    assert!(!limiter.check("reset", rate).await.expect("a check").allowed);
    assert_eq!(limiter.deny_cache_answers(), 1);
    limiter.reset("reset").await.expect("a reset");
    assert!(limiter.check("reset", rate).await.expect("a check").allowed);

    let permit = limiter
        .check_permit("refund", rate, 1)
        .await
        .expect("a check");
    assert!(permit.decision().allowed);
    assert!(
        limiter
            .check("refund", rate)
            .await
            .expect("a check")
            .allowed
    );
    assert!(
        !limiter
            .check("refund", rate)
            .await
            .expect("a check")
            .allowed
    );
    assert!(
        !limiter
            .check("refund", rate)
            .await
            .expect("a check")
            .allowed
    );
    assert_eq!(limiter.deny_cache_answers(), 2);
    permit.refund().await.expect("a refund");
    assert!(
        limiter
            .check("refund", rate)
            .await
            .expect("a check")
            .allowed
    );

    fill(&limiter, &clock, "tier", rate).await;
    assert!(!limiter.check("tier", rate).await.expect("a check").allowed);
    assert!(!limiter.check("tier", rate).await.expect("a check").allowed);
    let upgraded = limiter.check("tier", higher).await.expect("a check");
    assert!(
        upgraded.allowed,
        "the higher tier is the store's: {upgraded:?}"
    );
    // And back: the lower tier's entry was dropped; the store denies it afresh.
    let before = scripts_run(&redis).await;
    assert!(!limiter.check("tier", rate).await.expect("a check").allowed);
    assert_eq!(scripts_run(&redis).await, before + 1);

    fill(&limiter, &clock, "scope/a", rate).await;
    assert!(
        !limiter
            .check("scope/a", rate)
            .await
            .expect("a check")
            .allowed
    );
    limiter
        .reset_scope("scope", Some("a"))
        .await
        .expect("a reset");
    assert!(
        limiter
            .check("scope/a", rate)
            .await
            .expect("a check")
            .allowed
    );
    assert_eq!(limiter.deny_cache_answers(), 3);
}

/// Another process's reset is seen once the entry's time to live ends: the documented
/// staleness, on the manual clock.
#[tokio::test]
async fn another_process_reset_is_seen_within_the_time_to_live() {
    let redis = TestRedis::start_private();
    let clock = ManualClock::new(start());
    let prefix = unique_prefix("deny-cache-other");
    let ttl = Duration::from_millis(300);
    let ours = builder(redis.url(), &prefix)
        .clock(clock.clone())
        .deny_cache_ttl(ttl)
        .build()
        .expect("a limiter");
    let theirs = builder(redis.url(), &prefix)
        .clock(clock.clone())
        .build()
        .expect("a limiter");
    let rate = rate(2);
    fill(&ours, &clock, "k", rate).await;
    assert!(!ours.check("k", rate).await.expect("a check").allowed);
    theirs.reset("k").await.expect("a reset");
    clock.advance(ttl - Duration::from_micros(1));
    assert!(
        !ours.check("k", rate).await.expect("a check").allowed,
        "still cached"
    );
    clock.advance(Duration::from_micros(1));
    assert!(
        ours.check("k", rate).await.expect("a check").allowed,
        "asked the store"
    );
}

/// Checks at an explicit time, calls of another cost than 1 and looks go to the store; a
/// limiter with the cache switched off sends every check.
#[tokio::test]
async fn what_skips_the_cache() {
    let redis = TestRedis::start_private();
    let clock = ManualClock::new(start());
    let limiter = limiter(redis.url(), "deny-cache-skips", &clock).await;
    let rate = rate(2);
    fill(&limiter, &clock, "k", rate).await;
    assert!(!limiter.check("k", rate).await.expect("a check").allowed);
    let before = scripts_run(&redis).await;
    let at = clock.now();
    for _ in 0..3 {
        assert!(
            !limiter
                .check_at("k", rate, at)
                .await
                .expect("a check")
                .allowed
        );
        assert!(
            !limiter
                .check_n("k", rate, 2)
                .await
                .expect("a check")
                .allowed
        );
        assert!(!limiter.peek("k", rate).await.expect("a look").allowed);
    }
    assert_eq!(scripts_run(&redis).await, before + 9);
    assert_eq!(limiter.deny_cache_answers(), 0);

    let off = builder(redis.url(), &unique_prefix("deny-cache-off"))
        .clock(clock.clone())
        .deny_cache(false)
        .build()
        .expect("a limiter");
    fill(&off, &clock, "k", rate).await;
    let before = scripts_run(&redis).await;
    for _ in 0..5 {
        assert!(!off.check("k", rate).await.expect("a check").allowed);
    }
    assert_eq!(scripts_run(&redis).await, before + 5);
    assert_eq!(off.deny_cache_answers(), 0);
    assert!(format!("{off:?}").contains("deny_cache: None"), "{off:?}");
    assert_eq!(Limiter::memory().deny_cache_answers(), 0);
}

/// Stacked limits: a cached limit denies the check alone, and the answer reports that limit
/// only; the store's answers are composite as before.
#[tokio::test]
async fn a_cached_limit_denies_a_check_of_several() {
    let redis = TestRedis::start_private();
    let clock = ManualClock::new(start());
    let limiter = limiter(redis.url(), "deny-cache-stacked", &clock).await;
    let burst = Rate::new(2, Duration::from_secs(10)).expect("a rate");
    let daily = Rate::new(1_000, Duration::from_secs(86_400)).expect("a rate");
    let limits = || {
        vec![
            Limit::new("daily:u", daily).with_label("daily"),
            Limit::new("burst:u", burst).with_label("burst"),
        ]
    };
    for _ in 0..2 {
        assert!(limiter.check_all(limits()).await.expect("a check").allowed);
    }
    let stored = limiter.check_all(limits()).await.expect("a check");
    assert!(!stored.allowed);
    assert_eq!(stored.len(), 2, "the store's answer names both limits");
    let before = scripts_run(&redis).await;
    let waited = Duration::from_millis(500);
    clock.advance(waited);
    let cached = limiter.check_all(limits()).await.expect("a check");
    assert_eq!(scripts_run(&redis).await, before, "answered in process");
    assert!(!cached.allowed);
    let only: Vec<_> = cached.iter().map(LimitDecision::label).collect();
    assert_eq!(only, ["burst"]);
    assert_eq!(cached.retry_after, stored.retry_after.map(|r| r - waited));
    assert!(format!("{:?}", cached.headers()).contains("burst"));
    clock.advance(Duration::from_secs(10) - waited);
    assert!(limiter.check_all(limits()).await.expect("a check").allowed);
}

/// A store that goes down: cached denials still answer within their time to live (they are
/// exact); then the failure policy answers, and nothing else reaches a caller.
#[tokio::test]
async fn a_dead_store_is_answered_by_the_policy_once_the_entry_ends() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let clock = ManualClock::new(start());
    let limiter = builder(&proxy.url(), &unique_prefix("deny-cache-dead"))
        .clock(clock.clone())
        .timeout(Duration::from_millis(500))
        .failure_policy(FailurePolicy::Closed)
        .build()
        .expect("a limiter");
    let rate = rate(2);
    fill(&limiter, &clock, "k", rate).await;
    assert!(!limiter.check("k", rate).await.expect("a check").allowed);
    proxy.set(Fault::Refuse);
    for _ in 0..10 {
        let cached = limiter.check("k", rate).await.expect("a cached denial");
        assert!(!cached.allowed);
    }
    clock.advance(Duration::from_secs(1));
    for _ in 0..3 {
        match limiter.check("k", rate).await {
            Err(RateLimitError::Unavailable(_)) => {}
            other => panic!("expected the Closed policy's answer, got {other:?}"),
        }
    }
    assert_eq!(limiter.deny_cache_answers(), 10);
}

/// Without a manual clock: the cache reads a monotonic clock; its answers' retry-after never
/// exceeds the store's and counts down, and a flood of one key reaches Redis at most once per
/// time to live (plus the one check that filled it).
#[tokio::test]
async fn on_the_servers_clock_a_flood_reaches_redis_once_per_time_to_live() {
    let redis = TestRedis::start_private();
    let limiter = builder(redis.url(), &unique_prefix("deny-cache-wall"))
        .build()
        .expect("a limiter");
    let rate = rate(2);
    for _ in 0..2 {
        assert!(limiter.check("k", rate).await.expect("a check").allowed);
    }
    let stored = limiter.check("k", rate).await.expect("a check");
    let before = scripts_run(&redis).await;
    let started = std::time::Instant::now();
    let mut last = stored.retry_after.expect("a retry-after");
    let mut checks = 0_u64;
    while checks < 20_000 {
        let decision = limiter.check("k", rate).await.expect("a check");
        assert!(!decision.allowed);
        let retry = decision.retry_after.expect("a retry-after");
        assert!(retry <= last, "counted down: {retry:?} after {last:?}");
        last = retry;
        checks += 1;
    }
    let elapsed = started.elapsed();
    let sent = scripts_run(&redis).await - before;
    // One refresh per second that passed, and the one in flight at the end.
    let bound = elapsed.as_secs() + 1;
    println!("{checks} checks in {elapsed:?}: {sent} reached Redis (bound {bound})");
    assert!(sent <= bound, "{sent} scripts for {elapsed:?}");
    assert!(limiter.deny_cache_answers() >= checks - sent);
}

/// In a cluster: each key's denial is cached from its master's answer; a check of limits in
/// two slots, denied in one after the other reserved the call, is answered by the store, and
/// the reservation is refunded.
#[tokio::test]
async fn in_a_cluster() {
    let cluster = TestCluster::start(3);
    let clock = ManualClock::new(start());
    let prefix = unique_prefix("deny-cache-cluster");
    let limiter = Limiter::builder()
        .redis_cluster(cluster.urls())
        .key_prefix(&prefix)
        .clock(clock.clone())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a cluster limiter");
    let rate = rate(2);
    // Keys on two different masters.
    let full = cluster.key_for_node(0, &prefix);
    let open = cluster.key_for_node(1, &prefix);
    let full = full
        .strip_prefix(&prefix)
        .expect("the key under the prefix");
    let open = open
        .strip_prefix(&prefix)
        .expect("the key under the prefix");
    fill(&limiter, &clock, full, rate).await;
    for _ in 0..100 {
        assert!(!limiter.check(full, rate).await.expect("a check").allowed);
    }
    assert_eq!(limiter.deny_cache_answers(), 99);
    // The full key's denial is cached: a check of both is denied in process, naming it.
    let both = || vec![Limit::new(open, rate), Limit::new(full, rate)];
    let cached = limiter.check_all(both()).await.expect("a check");
    assert!(!cached.allowed);
    assert_eq!(cached.len(), 1);
    assert_eq!(limiter.deny_cache_answers(), 100);
    // Its time to live over, the store answers: the open key's reservation is refunded.
    clock.advance(Duration::from_secs(1));
    let stored = limiter.check_all(both()).await.expect("a check");
    assert!(!stored.allowed);
    assert_eq!(stored.len(), 2);
    assert!(limiter.check(open, rate).await.expect("a check").allowed);
    assert!(limiter.check(open, rate).await.expect("a check").allowed);
    assert!(
        !limiter.check(open, rate).await.expect("a check").allowed,
        "refunded: 2 fit"
    );
    assert_eq!(limiter.policy_answers(), 0);
}

/// Bad settings are refused when the limiter is built.
#[tokio::test]
async fn bad_settings_are_refused() {
    for (builder, expected) in [
        (
            Limiter::builder().deny_cache_ttl(Duration::ZERO),
            "time to live must be at least 1 ms",
        ),
        (
            Limiter::builder().deny_cache_ttl(Duration::from_nanos(500)),
            "time to live must be at least 1 ms",
        ),
        (
            Limiter::builder().deny_cache_capacity((1 << 22) + 1),
            "capacity must be between 1",
        ),
        (
            Limiter::builder().deny_cache_capacity(0),
            "capacity must be between 1",
        ),
        (
            Limiter::builder().deny_cache_capacity(usize::MAX),
            "capacity must be between 1",
        ),
    ] {
        match builder.redis_url("redis://127.0.0.1:1/").build() {
            Err(RateLimitError::InvalidConfig(message)) => {
                assert!(message.contains(expected), "{message}");
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }
}

/// Stacked limits, both full: the cached answer is decided as the store's is, by the denying
/// limit with the longest retry-after (the daily quota, not the burst).
#[tokio::test]
async fn a_cached_check_of_several_keeps_the_longest_retry_after() {
    let redis = TestRedis::start_private();
    let clock = ManualClock::new(start());
    let limiter = limiter(redis.url(), "deny-cache-longest", &clock).await;
    let burst = Rate::new(2, Duration::from_secs(10)).expect("a rate");
    let daily = Rate::new(2, Duration::from_secs(86_400)).expect("a rate");
    let limits = || {
        vec![
            Limit::new("burst:u", burst).with_label("burst"),
            Limit::new("daily:u", daily).with_label("daily"),
        ]
    };
    for _ in 0..2 {
        assert!(limiter.check_all(limits()).await.expect("a check").allowed);
    }
    let stored = limiter.check_all(limits()).await.expect("a check");
    assert_eq!(stored.deciding().label(), "daily");
    let waited = Duration::from_millis(500);
    clock.advance(waited);
    let cached = limiter.check_all(limits()).await.expect("a check");
    assert_eq!(
        limiter.deny_cache_answers(),
        1,
        "answered in process, counted once"
    );
    assert_eq!(cached.deciding().label(), "daily");
    assert_eq!(cached.retry_after, stored.retry_after.map(|r| r - waited));
}

#[ratelimit_runtime::rate_limit(period = 3600, threshold = 5, key = ip, name = "deny_cache.burst", limiter = limiter)]
#[ratelimit_runtime::rate_limit(period = "1d", threshold = 1, key = user, name = "deny_cache.daily", limiter = limiter)]
async fn stacked(limiter: &Limiter, ip: &str, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// The attribute's denial from the cache names the limit that denied, its scope and its
/// caller's key, as the store's does.
#[tokio::test]
async fn a_cached_denial_of_stacked_attributes_names_its_own_limit() {
    let redis = TestRedis::start_private();
    let clock = ManualClock::new(start());
    let limiter = limiter(redis.url(), "deny-cache-named", &clock).await;
    assert!(stacked(&limiter, "10.0.0.1", "alice").await.is_ok());
    let stored = stacked(&limiter, "10.0.0.1", "alice").await.unwrap_err();
    let stored = stored.as_denied().expect("a denial");
    assert_eq!(
        (stored.scope(), stored.key()),
        ("deny_cache.daily", Some("alice"))
    );
    let cached = stacked(&limiter, "10.0.0.1", "alice").await.unwrap_err();
    assert_eq!(limiter.deny_cache_answers(), 1, "answered in process");
    let cached = cached.as_denied().expect("a denial");
    assert_eq!(
        (cached.scope(), cached.key()),
        ("deny_cache.daily", Some("alice"))
    );
    assert_eq!(cached.rate(), stored.rate());
}

/// A check at a later explicit time evicts what the present counted (the log's window, the
/// counter's windows): the cache drops the key, and the next check is the store's.
#[tokio::test]
async fn a_check_at_a_later_time_drops_the_entry() {
    let redis = TestRedis::start_private();
    for algorithm in [Algorithm::SlidingWindowLog, Algorithm::SlidingWindowCounter] {
        let clock = ManualClock::new(start());
        let limiter = limiter(redis.url(), "deny-cache-later", &clock).await;
        let rate = rate(2).with_algorithm(algorithm);
        fill(&limiter, &clock, "k", rate).await;
        assert!(!limiter.check("k", rate).await.expect("a check").allowed);
        let later = clock.now() + Duration::from_secs(120);
        assert!(
            limiter
                .check_at("k", rate, later)
                .await
                .expect("a check")
                .allowed
        );
        assert!(
            limiter.peek("k", rate).await.expect("a look").allowed,
            "the store has room"
        );
        let now = limiter.check("k", rate).await.expect("a check");
        assert!(now.allowed, "{algorithm:?}: {now:?}");
        assert_eq!(limiter.deny_cache_answers(), 0);
    }
}

/// A check the cache answers allocates nothing (counted by the suite's global allocator, in
/// `main.rs`); in shadow mode, a cached denial becomes the same would-be denial as the store's.
#[tokio::test]
async fn a_cached_denial_allocates_nothing_and_keeps_shadow_mode() {
    use tests::counting_alloc::{count_allocations, poll_ready};
    let redis = TestRedis::start_private();
    let clock = ManualClock::new(start());
    let limiter = limiter(redis.url(), "deny-cache-alloc", &clock).await;
    let rate = rate(2);
    fill(&limiter, &clock, "k", rate).await;
    assert!(!limiter.check("k", rate).await.expect("a check").allowed);
    for _ in 0..5 {
        let (decision, count) = count_allocations(|| poll_ready(limiter.check("k", rate)));
        assert!(!decision.expect("a check").allowed);
        assert_eq!(count, 0, "a cached check allocated");
    }
    let shadow = builder(redis.url(), &unique_prefix("deny-cache-shadow"))
        .clock(clock.clone())
        .shadow(true)
        .build()
        .expect("a limiter");
    fill(&shadow, &clock, "k", rate).await;
    let stored = shadow.check("k", rate).await.expect("a check");
    let cached = shadow.check("k", rate).await.expect("a check");
    assert_eq!(shadow.deny_cache_answers(), 1);
    assert!(stored.allowed && stored.would_deny());
    assert_eq!(stored, cached);
}

/// The same operations on a limiter with the cache and one without (one Redis, one manual
/// clock, prefixes of their own): every single check gets the same decision, through permits
/// and their refunds, resets, tier changes and the clock's moves; a check of several limits
/// is admitted alike, and a cached one never says to wait longer than the store.
///
/// The clock only moves forward here, as a server's does. Set back, the two may differ: every
/// check the store runs evicts its window's past, denied ones included, and a denial the cache
/// answered did not reach the store, so at an earlier time the cached limiter's log may still
/// hold what the other's evicted at a later one: it answers stricter, never more lenient (see
/// `deny_cache.rs`).
#[tokio::test]
async fn with_and_without_the_cache_decide_alike() {
    let redis = TestRedis::start_private();
    for algorithm in [Algorithm::SlidingWindowLog, Algorithm::SlidingWindowCounter] {
        let clock = ManualClock::new(start());
        let cached = limiter(redis.url(), "deny-cache-diff-on", &clock).await;
        let plain = builder(redis.url(), &unique_prefix("deny-cache-diff-off"))
            .clock(clock.clone())
            .deny_cache(false)
            .build()
            .expect("a limiter");
        let mut rng = tests::accuracy::Rng::new(0x9E37_79B9_7F4A_7C15);
        // The counter keeps a counter per period of a key: two periods share the keys.
        let second = if algorithm == Algorithm::SlidingWindowCounter {
            7
        } else {
            10
        };
        let rates = [
            rate_of(3, 10).with_algorithm(algorithm),
            rate_of(5, second).with_algorithm(algorithm),
        ];
        let mut permits = Vec::new();
        let mut shorter = 0;
        for step in 0..3_000 {
            let key = ["a", "b"][usize::from(rng.below(2) == 1)];
            let rate = rates[usize::from(rng.below(10) == 0)];
            match rng.below(100) {
                0..=59 => {
                    let with = cached.check(key, rate).await.expect("a check");
                    let without = plain.check(key, rate).await.expect("a check");
                    assert_eq!(with, without, "{algorithm:?} step {step}: {key} {rate:?}");
                }
                60..=69 => {
                    let limits = || vec![Limit::new("a", rates[0]), Limit::new("b", rates[0])];
                    let with = cached.check_all(limits()).await.expect("a check");
                    let without = plain.check_all(limits()).await.expect("a check");
                    assert_eq!(with.allowed, without.allowed, "{algorithm:?} step {step}");
                    assert!(
                        with.retry_after <= without.retry_after,
                        "{algorithm:?} step {step}"
                    );
                    shorter += u32::from(with.retry_after < without.retry_after);
                }
                70..=74 => {
                    let with = cached.check_permit(key, rate, 1).await.expect("a check");
                    let without = plain.check_permit(key, rate, 1).await.expect("a check");
                    assert_eq!(
                        with.decision(),
                        without.decision(),
                        "{algorithm:?} step {step}"
                    );
                    permits.push((with, without));
                }
                75..=79 if !permits.is_empty() => {
                    let index = usize::try_from(rng.below(permits.len() as u64)).unwrap_or(0);
                    let (with, without) = permits.swap_remove(index);
                    with.refund().await.expect("a refund");
                    without.refund().await.expect("a refund");
                }
                80..=81 => {
                    cached.reset(key).await.expect("a reset");
                    plain.reset(key).await.expect("a reset");
                }
                82..=86 => clock.advance(Duration::from_micros(rng.below(30_000_000))),
                _ => clock.advance(Duration::from_micros(rng.below(1_500_000))),
            }
        }
        println!(
            "{algorithm:?}: {} answers from the cache; {shorter} cached checks of several \
             limits said a shorter retry-after than the store",
            cached.deny_cache_answers()
        );
        assert!(cached.deny_cache_answers() > 100, "the cache answered");
    }
}

fn rate_of(threshold: u64, seconds: u64) -> Rate {
    Rate::new(threshold, Duration::from_secs(seconds)).expect("a rate")
}
