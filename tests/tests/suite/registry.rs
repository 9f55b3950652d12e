//! The registry: limits changed while the process runs (`Limiter::set_limits`), through the
//! entry points users call (the attribute, stacked limits, the axum layer, checks by hand in a
//! scope), on every store (in process, a real `redis-server`): the precedence table (code,
//! scope entry, key override: rate, block, exempt, expiry; scope mode; limiter mode), the log
//! kept across a change, and `off` sending nothing to Redis (counted at the server).
//!
//! Timing: windows are an hour, and time moves only by a manual clock.

use std::time::{Duration, SystemTime};

use axum::Router;
use axum::routing::get;
use ratelimit_runtime::axum::{HeaderKey, RateLimitLayer};
use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{
    Limiter, Limits, Mode, Override, Rate, RateLimitError, ScopeLimits, rate_limit,
};
use tests::{TestRedis, at_secs, connected, logged, scripts_run, unique_prefix};

use crate::support::http::{client, serve};
use crate::support::line_of_fn;

const HOUR: Duration = Duration::from_secs(3_600);

fn rate(threshold: u64) -> Rate {
    Rate::new(threshold, HOUR).expect("a rate")
}

fn start() -> SystemTime {
    at_secs(1_800_000_000.0)
}

#[rate_limit(name = "login", period = 3600, threshold = 2, key = user, limiter = limiter)]
async fn login(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// Admitted (`true`) or denied (`false`); any other error fails the test.
async fn admitted(limiter: &Limiter, user: &str) -> bool {
    match login(limiter, user).await {
        Ok(()) => true,
        Err(RateLimitError::Denied(_)) => false,
        Err(error) => panic!("not a decision: {error}"),
    }
}

/// How many of `n` calls of `user` are admitted.
async fn admits(limiter: &Limiter, user: &str, n: usize) -> usize {
    let mut admitted_calls = 0;
    for _ in 0..n {
        admitted_calls += usize::from(admitted(limiter, user).await);
    }
    admitted_calls
}

/// Every row of the precedence table through the attribute, on `limiter` (on `clock`);
/// `scripts`, when on Redis, counts the scripts the server ran.
async fn precedence(limiter: &Limiter, clock: &ManualClock, scripts: impl AsyncFn() -> u64) {
    // The code: 2 an hour.
    assert_eq!(admits(limiter, "ann", 3).await, 2);

    // A scope entry's rate, in the same log: one more, not three.
    let more = ScopeLimits::new().rate(rate(3));
    limiter
        .set_limits(Limits::new().scope("login", more.clone()))
        .expect("limits accepted");
    assert_eq!(admits(limiter, "ann", 3).await, 1);
    assert_eq!(logged(limiter, "login/ann", rate(3)).await, 3);

    // Key overrides beat the scope's entry.
    let until = start() + Duration::from_secs(10);
    let entry = more
        .clone()
        .key("vip", Override::rate(rate(5)))
        .key("evil", Override::block().until(until))
        .key("ops", Override::exempt())
        .key("trial", Override::rate(rate(5)).until(until));
    limiter
        .set_limits(Limits::new().scope("login", entry.clone()))
        .expect("limits accepted");
    assert_eq!(admits(limiter, "vip", 6).await, 5);
    assert_eq!(admits(limiter, "trial", 6).await, 5);
    let before = scripts().await;
    assert_eq!(admits(limiter, "ops", 10).await, 10);
    let err = login(limiter, "evil").await.expect_err("blocked");
    let denied = err.as_denied().expect("a denial");
    assert_eq!(
        (denied.scope(), denied.key()),
        ("login", Some("evil")),
        "a block names its scope and key"
    );
    assert_eq!(denied.decision().retry_after, Some(Duration::from_secs(10)));
    assert_eq!(
        scripts().await,
        before,
        "an exempt key and a blocked one cost the store nothing"
    );
    assert_eq!(logged(limiter, "login/ops", rate(3)).await, 0);
    assert_eq!(logged(limiter, "login/evil", rate(3)).await, 0);

    // Expired overrides are gone: the scope's rate again (trial's log holds 5 already).
    clock.advance(Duration::from_secs(10));
    assert_eq!(admits(limiter, "evil", 4).await, 3);
    assert_eq!(admits(limiter, "trial", 1).await, 0);

    // A scope in shadow mode admits, records what fits, reports the rest.
    let shadow = entry.clone().mode(Mode::Shadow);
    limiter
        .set_limits(Limits::new().scope("login", shadow))
        .expect("limits accepted");
    assert_eq!(admits(limiter, "ann", 3).await, 3);
    assert_eq!(logged(limiter, "login/ann", rate(3)).await, 3);
    assert_eq!(admits(limiter, "bea", 4).await, 4);
    assert_eq!(logged(limiter, "login/bea", rate(3)).await, 3);

    // A scope off: nothing checked, nothing sent.
    limiter
        .set_limits(Limits::new().scope("login", entry.clone().mode(Mode::Off)))
        .expect("limits accepted");
    let before = scripts().await;
    assert_eq!(admits(limiter, "ann", 5).await, 5);
    assert_eq!(scripts().await, before, "`off` sends nothing to the store");

    // The limiter's mode beats the scope's: off everywhere, then shadow over `enforce`.
    limiter
        .set_limits(Limits::new().scope("login", entry.clone()).mode(Mode::Off))
        .expect("limits accepted");
    assert_eq!(limiter.mode(), Mode::Off);
    let before = scripts().await;
    assert_eq!(admits(limiter, "ann", 5).await, 5);
    let hand = limiter.check("by-hand", rate(1)).await.expect("a check");
    assert!(hand.is_exempt(), "{hand:?}");
    assert_eq!(scripts().await, before, "`off` sends nothing to the store");
    limiter
        .set_limits(
            Limits::new()
                .scope("login", entry.clone())
                .mode(Mode::Shadow),
        )
        .expect("limits accepted");
    assert!(limiter.is_shadow());
    assert_eq!(admits(limiter, "ann", 2).await, 2);
    assert_eq!(logged(limiter, "login/ann", rate(3)).await, 3);

    // Back to the code: the log kept all along.
    limiter.set_limits(Limits::new()).expect("limits accepted");
    assert_eq!(limiter.mode(), Mode::Enforce);
    assert_eq!(admits(limiter, "ann", 1).await, 0);
    assert_eq!(
        admits(limiter, "vip", 1).await,
        0,
        "5 logged, above the code's 2"
    );
}

#[tokio::test]
async fn the_precedence_table_in_process() {
    let clock = ManualClock::new(start());
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .build()
        .expect("a limiter");
    precedence(&limiter, &clock, async || 0).await;
}

#[tokio::test]
async fn the_precedence_table_on_redis() {
    let redis = TestRedis::start();
    let clock = ManualClock::new(start());
    let prefix = unique_prefix("registry");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .clock(clock.clone())
        .build()
        .expect("a limiter");
    connected(&limiter, "warm-up").await;
    precedence(&limiter, &clock, async || scripts_run(&redis).await).await;
    redis.clean_up(&prefix).await;
}

// Two limits stacked: the first named, the second addressed by its function and position.
#[rate_limit(name = "burst", period = 3600, threshold = 3, key = user, limiter = limiter)]
#[rate_limit(period = 3600, threshold = 2, key = user, limiter = limiter)]
async fn stacked(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// Stacked limits: each is addressed by the scope its denial names; a limit off is left out,
/// a blocked key denies the whole call, and the check stays all or nothing.
#[tokio::test]
async fn stacked_limits_are_addressed_by_the_scope_their_denials_name() {
    let limiter = Limiter::memory();
    stacked(&limiter, "ann").await.expect("admitted");
    stacked(&limiter, "ann").await.expect("admitted");
    let err = stacked(&limiter, "ann").await.expect_err("denied");
    let second = err.as_denied().expect("a denial").scope().to_owned();
    assert!(second.ends_with("::stacked#2"), "{second}");

    // The second limit off: the first (3) decides.
    limiter
        .set_limits(Limits::new().scope(&second, ScopeLimits::new().mode(Mode::Off)))
        .expect("limits accepted");
    stacked(&limiter, "ann").await.expect("admitted");
    let err = stacked(&limiter, "ann").await.expect_err("denied");
    assert_eq!(err.as_denied().expect("a denial").scope(), "burst");

    // A blocked key of the first: denied by it, recorded by neither.
    let blocked = ScopeLimits::new().key("bob", Override::block());
    limiter
        .set_limits(Limits::new().scope("burst", blocked))
        .expect("limits accepted");
    let err = stacked(&limiter, "bob").await.expect_err("blocked");
    let denied = err.as_denied().expect("a denial");
    assert_eq!((denied.scope(), denied.key()), ("burst", Some("bob")));
    assert_eq!(denied.decision().retry_after, Some(HOUR), "a period");
    limiter.set_limits(Limits::new()).expect("limits accepted");
    stacked(&limiter, "bob")
        .await
        .expect("nothing was recorded");
    stacked(&limiter, "bob")
        .await
        .expect("nothing was recorded");

    // A threshold the registry lowers below the burst's count denies.
    let lower = ScopeLimits::new().rate(rate(1));
    limiter
        .set_limits(Limits::new().scope("burst", lower))
        .expect("limits accepted");
    let err = stacked(&limiter, "cy").await;
    assert!(err.is_ok(), "the first call fits one: {err:?}");
    let err = stacked(&limiter, "cy").await.expect_err("denied");
    assert_eq!(err.as_denied().expect("a denial").scope(), "burst");
}

/// A check by hand in a scope: the scope's entries apply to it, its keys as given.
#[tokio::test]
async fn checks_by_hand_in_a_scope_take_its_entries() {
    let limiter = Limiter::memory();
    let search = limiter.scope("search");
    let entry = ScopeLimits::new()
        .rate(rate(2))
        .key("bot", Override::block());
    limiter
        .set_limits(Limits::new().scope("search", entry))
        .expect("limits accepted");
    for expected in [true, true, false] {
        let decision = search.check("ann", rate(1)).await.expect("a check");
        assert_eq!(decision.allowed, expected, "{decision:?}");
    }
    assert_eq!(
        logged(&limiter, "ann", rate(2)).await,
        2,
        "the key as given"
    );
    let bot = search.check("bot", rate(1)).await.expect("a check");
    assert!(!bot.allowed && bot.retry_after == Some(HOUR), "{bot:?}");
    let unscoped = limiter.check("bot", rate(1)).await.expect("a check");
    assert!(unscoped.allowed, "a check without a scope has no entries");
}

/// A layer's rates are addressed `<scope>@<label>`: the default scope's labels name the
/// rates (`2/1h`), a scope's own are the rates' windows. Off: no RateLimit fields.
#[tokio::test]
async fn a_layers_rates_are_addressed_by_scope_and_label() {
    let limiter = Limiter::memory();
    let layer = RateLimitLayer::new(limiter.clone(), rate(2), HeaderKey::new("x-user"));
    let scoped = RateLimitLayer::new(limiter.clone(), rate(2), HeaderKey::new("x-user"))
        .and_rate(Rate::new(5, Duration::from_secs(86_400)).expect("a rate"))
        .scope("api");
    let app = Router::new()
        .route("/a", get(|| async { "ok" }))
        .layer(layer)
        .merge(
            Router::new()
                .route("/b", get(|| async { "ok" }))
                .layer(scoped),
        );
    let base = serve(app).await;
    let call = async |path: &str, user: &str| {
        let response = client()
            .get(format!("{base}{path}"))
            .header("x-user", user)
            .send()
            .await
            .expect("a response");
        let fields = response.headers().contains_key("ratelimit");
        (response.status().as_u16(), fields)
    };
    let limits = Limits::new()
        .scope(
            "layer@2/1h",
            ScopeLimits::new().key("evil", Override::block()),
        )
        .scope("api@1d", ScopeLimits::new().mode(Mode::Off))
        .scope("api@1h", ScopeLimits::new().key("ops", Override::exempt()));
    limiter.set_limits(limits).expect("limits accepted");
    assert_eq!(call("/a", "evil").await, (429, true));
    assert_eq!(call("/a", "ann").await, (200, true));
    // `/b`: its daily rate off, its hourly one in force; `ops` exempt from it too.
    for _ in 0..2 {
        assert_eq!(call("/b", "ann").await, (200, true));
    }
    assert_eq!(call("/b", "ann").await.0, 429);
    for _ in 0..3 {
        assert_eq!(call("/b", "ops").await, (200, false), "exempt from both");
    }
    limiter.set_mode(Mode::Off);
    assert_eq!(call("/a", "evil").await, (200, false), "off: no fields");
}

/// Shadow mode never fails a call, set for a scope as for the limiter: with the store down
/// under `Closed`, a scope in shadow admits through the attribute, a hand check in the scope
/// and a layer, where an enforced scope fails.
#[tokio::test]
async fn a_scope_in_shadow_never_fails_a_call_under_closed() {
    use ratelimit_runtime::FailurePolicy;
    let limiter = Limiter::builder()
        .redis_url("redis://127.0.0.1:1/")
        .failure_policy(FailurePolicy::Closed)
        .build()
        .expect("a limiter");
    assert!(matches!(
        login(&limiter, "ann").await,
        Err(RateLimitError::Unavailable(_))
    ));
    let shadow = ScopeLimits::new().mode(Mode::Shadow);
    limiter
        .set_limits(
            Limits::new()
                .scope("login", shadow.clone())
                .scope("search", shadow.clone())
                .scope("layer@2/1h", shadow),
        )
        .expect("limits accepted");
    login(&limiter, "ann").await.expect("admitted in shadow");
    let hand = limiter.scope("search").check("ann", rate(2)).await;
    assert!(hand.as_ref().is_ok_and(|d| d.allowed), "{hand:?}");
    let layer = RateLimitLayer::new(limiter.clone(), rate(2), HeaderKey::new("x-user"));
    let base = serve(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let response = client()
        .get(format!("{base}/"))
        .header("x-user", "ann")
        .send()
        .await
        .expect("a response");
    assert_eq!(response.status().as_u16(), 200);
}

/// A key given by hand stays a key given by hand in a scope in shadow: one that names a
/// counter's hash in Redis is refused, as `Limiter::check` refuses it.
#[tokio::test]
async fn a_hand_key_in_a_scope_in_shadow_cannot_name_a_counter() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("registry-counter");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .build()
        .expect("a limiter");
    connected(&limiter, "warm-up").await;
    limiter
        .set_limits(Limits::new().scope("s", ScopeLimits::new().mode(Mode::Shadow)))
        .expect("limits accepted");
    let crafted = r"victim\#swc";
    for checked in [
        limiter.check(crafted, rate(1)).await,
        limiter.scope("s").check(crafted, rate(1)).await,
    ] {
        assert!(
            matches!(checked, Err(RateLimitError::InvalidInput(_))),
            "{checked:?}"
        );
    }
    redis.clean_up(&prefix).await;
}

/// A layer's fields and denials carry the rate in force, not the code's.
#[tokio::test]
async fn a_layer_reports_the_rate_in_force() {
    let limiter = Limiter::memory();
    let layer = RateLimitLayer::new(limiter.clone(), rate(2), HeaderKey::new("x-user")).scope("rv");
    let minute = Rate::new(1, Duration::from_secs(60)).expect("a rate");
    limiter
        .set_limits(Limits::new().scope("rv@1h", ScopeLimits::new().rate(minute)))
        .expect("limits accepted");
    let base = serve(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let call = async || {
        client()
            .get(format!("{base}/"))
            .header("x-user", "ann")
            .send()
            .await
            .expect("a response")
    };
    let admitted = call().await;
    let policy = admitted.headers()["ratelimit-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(policy, "\"default\";q=1;w=60");
    assert_eq!(call().await.status().as_u16(), 429);
}

/// Under `off`, every way of checking says the call was not checked.
#[tokio::test]
async fn an_unchecked_call_says_so() {
    let limiter = Limiter::memory();
    limiter.set_mode(Mode::Off);
    assert!(limiter.check("k", rate(1)).await.unwrap().is_exempt());
    assert!(limiter.check_n("k", rate(2), 2).await.unwrap().is_exempt());
    let decisions = limiter
        .check_all([ratelimit_runtime::Limit::new("k", rate(1))])
        .await
        .unwrap();
    assert!(decisions.is_empty() && decisions.is_exempt());
}

/// A limit whose tiers are in code: its scope's entry may set its mode, not its rate.
#[rate_limit(name = "tiered", rate = tier(user), key = user, limiter = limiter)]
async fn tiered(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn tier(user: &str) -> Rate {
    rate(if user.starts_with("pro-") { 10 } else { 2 })
}

/// A limit whose calls cost 5: no entry may give it a threshold below that.
#[rate_limit(name = "bulk", period = 3600, threshold = 20, cost = 5, key = user, limiter = limiter)]
async fn bulk(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// A change that contradicts the code's limits is rejected whole, naming the scope and the
/// attribute's file and line (never a key), and the limits in force stay; what the code
/// allows (a mode over `rate = expr`, a key's rate there, a threshold of the cost) is taken.
#[tokio::test]
async fn a_change_that_contradicts_the_code_is_rejected_whole() {
    let limiter = Limiter::memory();
    let good = Limits::new().scope("login", ScopeLimits::new().rate(rate(3)));
    limiter.set_limits(good.clone()).expect("limits accepted");

    let line_of = |name: &str| line_of_fn(include_str!("registry.rs"), name);
    let rejected = |limits: Limits, expected: String| {
        let error = limiter.set_limits(limits).expect_err("rejected");
        let RateLimitError::InvalidConfig(reason) = &error else {
            panic!("{error:?}");
        };
        assert!(reason.contains(&expected), "{reason}");
        assert!(!reason.contains("user-4711"), "a key in {reason}");
        assert_eq!(limiter.limits(), good, "nothing changed");
    };
    rejected(
        good.clone()
            .scope("tiered", ScopeLimits::new().rate(rate(50))),
        format!(
            "scope \"tiered\": its limit chooses its rate per call (`rate = expr`, {}:{})",
            file!(),
            line_of("tiered")
        ),
    );
    rejected(
        good.clone().scope("bulk", ScopeLimits::new().rate(rate(4))),
        format!(
            "scope \"bulk\": threshold 4 is below the cost 5 a call of its limit takes ({}:{})",
            file!(),
            line_of("bulk")
        ),
    );
    rejected(
        good.clone().scope(
            "bulk",
            ScopeLimits::new().key("user-4711", Override::rate(rate(4))),
        ),
        "scope \"bulk\", the override of a key: threshold 4".to_owned(),
    );
    let error = limiter
        .update_limits(|limits| {
            limits.remove_scope("login");
            *limits = limits
                .clone()
                .scope("tiered", ScopeLimits::new().rate(rate(50)));
        })
        .expect_err("rejected whole");
    assert!(matches!(error, RateLimitError::InvalidConfig(_)));
    assert_eq!(
        limiter.limits(),
        good,
        "nothing changed, the first edit neither"
    );
    // Still 3 an hour.
    assert_eq!(admits(&limiter, "ann", 4).await, 3);

    // What the code allows.
    let allowed = good
        .scope(
            "tiered",
            ScopeLimits::new()
                .mode(Mode::Shadow)
                .key("pro-vip", Override::rate(rate(11))),
        )
        .scope("bulk", ScopeLimits::new().rate(rate(5)));
    limiter.set_limits(allowed).expect("allowed");
    bulk(&limiter, "ann").await.expect("one call of 5");
    let err = bulk(&limiter, "ann")
        .await
        .expect_err("the threshold is the cost");
    assert_eq!(err.as_denied().expect("a denial").scope(), "bulk");
    for _ in 0..12 {
        tiered(&limiter, "pro-vip")
            .await
            .expect("shadow: never denied");
    }
}

struct Catalogued {
    limiter: Limiter,
}

#[async_trait::async_trait]
trait Find {
    async fn find(&self, id: u64) -> Result<u64, RateLimitError>;
}

#[async_trait::async_trait]
impl Find for Catalogued {
    #[rate_limit(period = 3600, threshold = 1, key = id, limiter = &self.limiter)]
    async fn find(&self, id: u64) -> Result<u64, RateLimitError> {
        Ok(id)
    }
}

// Never called: in the catalog all the same.
#[rate_limit(period = 3600, threshold = 4)]
#[rate_limit(period = 60, threshold = 3, cost = n)]
async fn never_called(n: u32) -> Result<(), RateLimitError> {
    let _ = n;
    Ok(())
}

/// The catalog lists every attribute's limits before any call, under the scopes their denials
/// name (a function's path, a stacked limit's position, an `#[async_trait]` method's), with
/// the rate, cost, file and line as written.
#[tokio::test]
async fn the_catalog_names_each_limit_as_its_denials_do() {
    let declared = ratelimit_runtime::declared_limits();
    let _ = never_called;
    let here = |suffix: &str| {
        declared
            .iter()
            .filter(|limit| limit.file() == file!() && limit.scope().ends_with(suffix))
            .cloned()
            .collect::<Vec<_>>()
    };
    let never = here("::never_called#2");
    assert_eq!(never.len(), 1, "{declared:#?}");
    assert_eq!(
        never[0].rate(),
        Some(Rate::new(3, Duration::from_secs(60)).unwrap())
    );
    assert_eq!(never[0].cost(), None, "computed per call");
    let first = here("::never_called#1");
    assert_eq!(
        (first[0].rate().map(|r| r.threshold()), first[0].cost()),
        (Some(4), Some(1))
    );
    let tiered_limit = declared
        .iter()
        .find(|limit| limit.scope() == "tiered")
        .expect("tiered in the catalog");
    assert_eq!((tiered_limit.rate(), tiered_limit.file()), (None, file!()));

    // The scopes the denials name.
    let limiter = Limiter::memory();
    stacked(&limiter, "ann").await.expect("admitted");
    stacked(&limiter, "ann").await.expect("admitted");
    let err = stacked(&limiter, "ann").await.expect_err("denied");
    let denied = err.as_denied().expect("a denial").scope().to_owned();
    assert!(
        declared.iter().any(|limit| limit.scope() == denied),
        "{denied}"
    );
    let service = Catalogued { limiter };
    service.find(1).await.expect("admitted");
    let err = service.find(1).await.expect_err("denied");
    let denied = err.as_denied().expect("a denial").scope().to_owned();
    let method = declared
        .iter()
        .find(|limit| limit.scope() == denied)
        .unwrap_or_else(|| panic!("{denied} in {declared:#?}"));
    assert_eq!(method.rate().map(|r| r.threshold()), Some(1));
}

/// What an override costs in memory: the live heap a scope of 10,000 key overrides adds to a
/// limiter (the source's entries, as set, and the merged snapshot that checks read), per
/// override, printed under `--nocapture` (BENCHMARKS.md quotes it); bounded by a few
/// allocations of its key and entry, not a table per key.
#[test]
fn an_override_costs_a_few_hundred_bytes() {
    use tests::counting_alloc::heap_growth;

    const KEYS: usize = 10_000;
    let limiter = Limiter::memory();
    let ((), grown) = heap_growth(|| {
        let mut entry = ScopeLimits::new();
        for i in 0..KEYS {
            entry = entry.key(format!("user-{i:06}"), Override::rate(rate(10)));
        }
        limiter
            .set_limits(Limits::new().scope("memory", entry))
            .expect("limits accepted");
    });
    let per_override = grown as f64 / KEYS as f64;
    eprintln!("{KEYS} overrides of 11-byte keys: {grown} bytes, {per_override:.0} bytes each");
    assert!(per_override < 512.0, "{per_override:.0} bytes per override");
}

// One `name` given to two attributes that differ: one chooses its rate per call, the other's
// calls cost 10.
#[rate_limit(name = "mixed", rate = tier(user), key = user, limiter = limiter)]
async fn mixed_tiered(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(name = "mixed", period = 3600, threshold = 100, cost = 10, key = user, limiter = limiter)]
async fn mixed_costly(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// A scope whose limits differ takes a rate one of them can: a threshold that contradicts
/// each of them (one for its `rate = expr`, the other for its cost) is rejected with both
/// reasons; one the costly limit can take is accepted.
#[tokio::test]
async fn a_rate_that_contradicts_every_limit_of_a_mixed_scope_is_rejected() {
    let limiter = Limiter::memory();
    let error = limiter
        .set_limits(Limits::new().scope("mixed", ScopeLimits::new().rate(rate(5))))
        .expect_err("contradicts both");
    let reason = error.to_string();
    assert!(
        reason.contains("rate = expr") && reason.contains("below the cost 10"),
        "{reason}"
    );
    limiter
        .set_limits(Limits::new().scope("mixed", ScopeLimits::new().rate(rate(10))))
        .expect("the costly limit takes it");
    mixed_costly(&limiter, "ann").await.expect("one call of 10");
    mixed_tiered(&limiter, "ann").await.expect("its own tiers");
}
