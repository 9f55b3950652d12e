//! Counting calls by their outcome: the attribute's `count = "errors" | "ok"` and `count_if`,
//! and by hand `Limiter::check_permit` and `Permit::refund`, on every store (in process, a real
//! `redis-server`, a real 3-master cluster) and in the failure policy's fallback.
//!
//! The rule: a call is checked and recorded up front (a reservation, so the check stays exact
//! under racing callers), and once its body returned, refunded from every limit under which it
//! does not count, before the function returns. A body that panics, or a future dropped before
//! its body finished, keeps its reservation.
//!
//! Timing: every window is far longer than a test runs (15 minutes and more), so nothing frees
//! while a test runs and every count is exact; racing callers assert counts only.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use ratelimit_runtime::{Decisions, FailurePolicy, Limiter, Rate, RateLimitError, rate_limit};
use redis::AsyncCommands as _;
use tests::cluster::TestCluster;
use tests::{TestRedis, connected, logged, unique_prefix};

const QUARTER: Duration = Duration::from_secs(900);

/// An application's error: a rate limit's, or its own.
#[derive(Debug)]
enum AppError {
    Limited(RateLimitError),
    WrongPassword,
    Upstream,
}

impl From<RateLimitError> for AppError {
    fn from(err: RateLimitError) -> AppError {
        AppError::Limited(err)
    }
}

impl AppError {
    fn is_denied(&self) -> bool {
        matches!(self, AppError::Limited(err) if err.is_denied())
    }
}

// Brute force: only failed logins count.
#[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors", name = "login", limiter = limiter)]
async fn login(limiter: &Limiter, ip: &str, password_ok: bool) -> Result<&'static str, AppError> {
    if !password_ok {
        return Err(AppError::WrongPassword);
    }
    // `?` in the body ends the body, as it does without the attribute.
    let session: u32 = "42".parse().map_err(|_| AppError::Upstream)?;
    Ok(if session == 42 { "session" } else { "other" })
}

// A caller is not charged for our failures: only successes count.
#[rate_limit(period = "15m", threshold = 3, key = user, count = "ok", name = "reports", limiter = limiter)]
async fn report(limiter: &Limiter, user: u64, upstream_up: bool) -> Result<(), AppError> {
    if upstream_up {
        Ok(())
    } else {
        Err(AppError::Upstream)
    }
}

/// An axum-style login answers `Ok((401, ..))` for a wrong password.
fn failed_login(result: &Result<(StatusCode, &'static str), AppError>) -> bool {
    !matches!(result, Ok((StatusCode::OK, _)))
}

#[rate_limit(
    period = "15m",
    threshold = 3,
    key = ip,
    name = "axum.login",
    limiter = limiter,
    count_if = |result: &Result<(StatusCode, &'static str), AppError>| failed_login(result)
)]
async fn axum_login(
    limiter: &Limiter,
    ip: &str,
    password_ok: bool,
) -> Result<(StatusCode, &'static str), AppError> {
    Ok(if password_ok {
        (StatusCode::OK, "welcome")
    } else {
        (StatusCode::UNAUTHORIZED, "wrong password")
    })
}

/// On any store: each mode counts exactly the outcomes it names, and the call after the
/// threshold is denied without running its body.
async fn each_mode_counts_its_outcomes(limiter: &Limiter) {
    let rate = Rate::new(5, QUARTER).expect("a rate");
    // 5 failing and 5 succeeding logins, interleaved: the 5 failures fill the window.
    for i in 0..5 {
        assert_eq!(login(limiter, "10.0.0.1", true).await.ok(), Some("session"));
        let err = login(limiter, "10.0.0.1", false).await.unwrap_err();
        assert!(matches!(err, AppError::WrongPassword), "{err:?}");
        assert_eq!(logged(limiter, "login/10.0.0.1", rate).await, i + 1);
    }
    let denied = login(limiter, "10.0.0.1", true).await.unwrap_err();
    assert!(denied.is_denied(), "{denied:?}");
    assert_eq!(logged(limiter, "login/10.0.0.1", rate).await, 5);
    // Another address is another log.
    assert!(login(limiter, "10.0.0.2", true).await.is_ok());
    assert_eq!(logged(limiter, "login/10.0.0.2", rate).await, 0);

    // `count = "ok"`: failures are refunded, successes counted.
    let rate = Rate::new(3, QUARTER).expect("a rate");
    for _ in 0..4 {
        assert!(matches!(
            report(limiter, 7, false).await,
            Err(AppError::Upstream)
        ));
    }
    assert_eq!(logged(limiter, "reports/7", rate).await, 0);
    for _ in 0..3 {
        assert!(report(limiter, 7, true).await.is_ok());
    }
    assert!(report(limiter, 7, true).await.unwrap_err().is_denied());
    assert!(
        report(limiter, 7, false).await.unwrap_err().is_denied(),
        "a full window denies whatever the call would have returned"
    );

    // `count_if` over an axum-style answer: `Ok((401, ..))` counts, `Ok((200, ..))` does not.
    for _ in 0..3 {
        let (status, _) = axum_login(limiter, "10.0.0.3", true)
            .await
            .expect("admitted");
        assert_eq!(status, StatusCode::OK);
    }
    assert_eq!(logged(limiter, "axum.login/10.0.0.3", rate).await, 0);
    for i in 0..3 {
        let (status, _) = axum_login(limiter, "10.0.0.3", false)
            .await
            .expect("admitted");
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(logged(limiter, "axum.login/10.0.0.3", rate).await, i + 1);
    }
    assert!(
        axum_login(limiter, "10.0.0.3", true)
            .await
            .unwrap_err()
            .is_denied()
    );
}

#[tokio::test]
async fn each_mode_in_process() {
    each_mode_counts_its_outcomes(&Limiter::memory()).await;
}

#[tokio::test]
async fn each_mode_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("outcomes");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    each_mode_counts_its_outcomes(&limiter).await;
    // The refunded calls left nothing behind: only the counted ones are members.
    let mut connection = redis.connection().await;
    let members: u64 = connection
        .zcard(format!("{prefix}login/10.0.0.1"))
        .await
        .unwrap();
    assert_eq!(members, 5);
    let members: u64 = connection
        .zcard(format!("{prefix}login/10.0.0.2"))
        .await
        .unwrap();
    assert_eq!(members, 0, "a refunded call leaves no member");
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn each_mode_in_a_cluster() {
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("outcomes-cluster");
    let limiter = tests::closed_cluster_limiter(cluster.urls(), &prefix).await;
    connected(&limiter, "canary").await;
    each_mode_counts_its_outcomes(&limiter).await;
}

// Stacked: the burst limit counts every call, the daily one only failures; a shadow limit
// counts every call it admits, and its decision stays out of `d`.
#[rate_limit(period = "15m", threshold = 4, key = user, limiter = limiter, decision = d)]
#[rate_limit(period = "1d", threshold = 2, key = user, count = "errors", limiter = limiter)]
#[rate_limit(period = "1h", threshold = 1, key = user, shadow = true, limiter = limiter)]
async fn stacked(limiter: &Limiter, user: &str, fail: bool) -> Result<usize, AppError> {
    let seen: &Decisions = d;
    if fail {
        Err(AppError::Upstream)
    } else {
        Ok(seen.len())
    }
}

async fn stacked_limits_refund_only_where_the_call_does_not_count(limiter: &Limiter) {
    let burst = Rate::new(4, QUARTER).expect("a rate");
    let daily = Rate::new(2, Duration::from_secs(86_400)).expect("a rate");
    let shadow = Rate::new(1, Duration::from_secs(3_600)).expect("a rate");
    let keys = [
        "#suite::outcomes::stacked#1/{u}@15m",
        "#suite::outcomes::stacked#2/{u}@1d",
        "#suite::outcomes::stacked#3/{u}@1h",
    ];
    assert_eq!(
        stacked(limiter, "u", false).await.ok(),
        Some(2),
        "the shadow limit is not among the decisions"
    );
    assert_eq!(logged(limiter, keys[0], burst).await, 1);
    assert_eq!(
        logged(limiter, keys[1], daily).await,
        0,
        "refunded: a success"
    );
    assert_eq!(logged(limiter, keys[2], shadow).await, 1);
    // The shadow limit is full: it would deny, records nothing, and never fails a call.
    assert!(stacked(limiter, "u", true).await.is_err());
    assert!(stacked(limiter, "u", true).await.is_err());
    assert_eq!(logged(limiter, keys[0], burst).await, 3);
    assert_eq!(logged(limiter, keys[1], daily).await, 2);
    assert_eq!(logged(limiter, keys[2], shadow).await, 1);
    // The daily limit is full of failures: denied, whatever the burst limit says.
    assert!(stacked(limiter, "u", false).await.unwrap_err().is_denied());
    assert_eq!(logged(limiter, keys[0], burst).await, 3);
}

#[tokio::test]
async fn stacked_in_process() {
    stacked_limits_refund_only_where_the_call_does_not_count(&Limiter::memory()).await;
}

#[tokio::test]
async fn stacked_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("outcomes-stacked");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    stacked_limits_refund_only_where_the_call_does_not_count(&limiter).await;
    redis.clean_up(&prefix).await;
}

// Racing callers: the body yields, so that many calls are in flight at once.
#[rate_limit(period = "1h", threshold = 20, key = key, count = "errors", name = "race", limiter = limiter)]
async fn raced(limiter: &Limiter, key: &str, fail: bool) -> Result<(), AppError> {
    tokio::task::yield_now().await;
    if fail {
        Err(AppError::WrongPassword)
    } else {
        Ok(())
    }
}

#[rate_limit(period = "1h", threshold = 20, key = key, count = "ok", name = "race.ok", limiter = limiter)]
async fn raced_ok(limiter: &Limiter, key: &str, fail: bool) -> Result<(), AppError> {
    tokio::task::yield_now().await;
    if fail {
        Err(AppError::WrongPassword)
    } else {
        Ok(())
    }
}

/// 200 callers through clones of `limiter` on key `key`, each failing iff `fail`, under
/// `count = "ok"` when `ok` (else `"errors"`): returns how many were admitted (ran their body).
async fn race(limiter: &Limiter, key: &str, fail: bool, ok: bool) -> usize {
    let admitted = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..200 {
        let limiter = limiter.clone();
        let key = key.to_owned();
        let admitted = Arc::clone(&admitted);
        tasks.push(tokio::spawn(async move {
            let _ = i;
            let outcome = if ok {
                raced_ok(&limiter, &key, fail).await
            } else {
                raced(&limiter, &key, fail).await
            };
            match outcome {
                Err(err) if err.is_denied() => {}
                Err(AppError::WrongPassword) | Ok(()) => {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
                Err(err) => panic!("{err:?}"),
            }
        }));
    }
    for task in tasks {
        task.await.expect("a caller");
    }
    admitted.load(Ordering::Relaxed)
}

/// Every outcome counts: exactly the threshold is admitted. None counts: at least the
/// threshold is (reservations in flight may deny some), and the log is empty afterwards.
async fn racing_callers(limiter: &Limiter, prefix: &str) {
    let rate = Rate::new(20, Duration::from_secs(3_600)).expect("a rate");
    // (scope, whether the calls fail, whether the mode is "ok"), every outcome counting.
    for (scope, fail, ok) in [("race", true, false), ("race.ok", false, true)] {
        let key = format!("{prefix}all-count");
        assert_eq!(race(limiter, &key, fail, ok).await, 20, "{scope}");
        assert_eq!(logged(limiter, &format!("{scope}/{key}"), rate).await, 20);
    }
    // No outcome counting.
    for (scope, fail, ok) in [("race", false, false), ("race.ok", true, true)] {
        let key = format!("{prefix}none-count");
        let admitted = race(limiter, &key, fail, ok).await;
        eprintln!("{scope}, none counts: {admitted} of 200 admitted");
        assert!(admitted >= 20, "{scope}: {admitted}");
        assert_eq!(logged(limiter, &format!("{scope}/{key}"), rate).await, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_callers_in_process() {
    racing_callers(&Limiter::memory(), "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_callers_on_redis_and_in_a_cluster() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("outcomes-race");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    racing_callers(&limiter, "").await;
    let mut connection = redis.connection().await;
    for scope in ["race", "race.ok"] {
        let members: u64 = connection
            .zcard(format!("{prefix}{scope}/none-count"))
            .await
            .unwrap();
        assert_eq!(members, 0, "{scope}: every reservation was refunded");
    }
    redis.clean_up(&prefix).await;

    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("outcomes-race-cluster");
    let limiter = tests::closed_cluster_limiter(cluster.urls(), &prefix).await;
    connected(&limiter, "canary").await;
    racing_callers(&limiter, "").await;
}

// A body that panics, and one whose future is dropped before it finishes.
#[rate_limit(period = "1h", threshold = 3, key = key, count = "errors", name = "kept", limiter = limiter)]
async fn kept(limiter: &Limiter, key: &str, panic: bool) -> Result<(), AppError> {
    if panic {
        panic!("the body panicked");
    }
    std::future::pending::<()>().await;
    Ok(())
}

async fn unfinished_bodies_keep_their_reservation(limiter: &Limiter) {
    let rate = Rate::new(3, Duration::from_secs(3_600)).expect("a rate");
    let limiter_clone = limiter.clone();
    let panicked = tokio::spawn(async move { kept(&limiter_clone, "p", true).await }).await;
    assert!(panicked.unwrap_err().is_panic());
    assert_eq!(
        logged(limiter, "kept/p", rate).await,
        1,
        "the panic kept it"
    );
    // Polled until the body waits forever, then dropped: the body may have acted.
    let dropped = tokio::time::timeout(Duration::from_millis(50), kept(limiter, "d", false)).await;
    assert!(dropped.is_err(), "the body never finishes");
    assert_eq!(logged(limiter, "kept/d", rate).await, 1, "the drop kept it");
}

#[tokio::test]
async fn unfinished_bodies_in_process_and_on_redis() {
    unfinished_bodies_keep_their_reservation(&Limiter::memory()).await;
    let redis = TestRedis::start();
    let prefix = unique_prefix("outcomes-kept");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    // The check itself must be over before the timeout drops the future: connected already.
    unfinished_bodies_keep_their_reservation(&limiter).await;
    redis.clean_up(&prefix).await;
}

/// By hand: a permit's refund removes exactly its call; a dropped permit keeps it; a denied
/// permit has nothing to refund; a refund of a key reset since removes nothing else.
async fn permits(limiter: &Limiter) {
    let rate = Rate::new(5, Duration::from_secs(3_600)).expect("a rate");
    let first = limiter.check_permit("p", rate, 2).await.expect("a check");
    assert!(first.allowed);
    assert_eq!(first.remaining, 3);
    let second = limiter.check_permit("p", rate, 3).await.expect("a check");
    assert!(second.allowed);
    let denied = limiter.check_permit("p", rate, 1).await.expect("a check");
    assert!(!denied.allowed);
    assert!(denied.retry_after.is_some());
    denied
        .refund()
        .await
        .expect("a denial has nothing to refund");
    assert_eq!(logged(limiter, "p", rate).await, 5);
    first.refund().await.expect("a refund");
    assert_eq!(logged(limiter, "p", rate).await, 3, "exactly its cost");
    drop(second);
    assert_eq!(
        logged(limiter, "p", rate).await,
        3,
        "a dropped permit keeps it"
    );
    let kept = limiter.check_permit("p", rate, 1).await.expect("a check");
    limiter.reset("p").await.expect("a reset");
    let after = limiter.check_permit("p", rate, 1).await.expect("a check");
    kept.refund().await.expect("nothing left to remove");
    assert_eq!(logged(limiter, "p", rate).await, 1, "the later call stays");
    drop(after);
    // A cost of 0 records nothing, and refunds nothing.
    let free = limiter.check_permit("p", rate, 0).await.expect("a check");
    assert!(free.allowed);
    free.refund().await.expect("nothing to refund");
    assert_eq!(logged(limiter, "p", rate).await, 1);
    let too_high = limiter.check_permit("p", rate, 6).await.unwrap_err();
    assert!(
        matches!(too_high, RateLimitError::CostTooHigh { .. }),
        "{too_high}"
    );
}

#[tokio::test]
async fn permits_in_process() {
    permits(&Limiter::memory()).await;
}

#[tokio::test]
async fn permits_on_redis_and_in_a_cluster() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("permits");
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    connected(&limiter, "canary").await;
    permits(&limiter).await;
    redis.clean_up(&prefix).await;

    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("permits-cluster");
    let limiter = tests::closed_cluster_limiter(cluster.urls(), &prefix).await;
    connected(&limiter, "canary").await;
    for node in 0..cluster.len() {
        let full = cluster.key_for_node(node, &format!("{prefix}p"));
        let key = full.strip_prefix(&prefix).expect("the prefix").to_owned();
        let rate = Rate::new(2, Duration::from_secs(3_600)).expect("a rate");
        let permit = limiter.check_permit(&key, rate, 2).await.expect("a check");
        assert!(permit.allowed);
        assert_eq!(logged(&limiter, &key, rate).await, 2, "node {node}");
        permit.refund().await.expect("a refund");
        assert_eq!(logged(&limiter, &key, rate).await, 0, "node {node}");
    }
}

/// Under `FailurePolicy::Local`, a call the fallback admitted is refunded there; under `Open`
/// nothing was recorded, and the refund has nothing to do.
#[tokio::test]
async fn permits_answered_by_the_policy_are_refunded_where_they_were_recorded() {
    let url = format!("redis://127.0.0.1:{}/", tests::spare_port());
    let rate = Rate::new(2, Duration::from_secs(3_600)).expect("a rate");
    let local = Limiter::builder()
        .redis_url(&url)
        .failure_policy(FailurePolicy::Local)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a limiter");
    let first = local.check_permit("k", rate, 1).await.expect("a check");
    assert!(first.allowed && first.answered_by_policy(), "{first:?}");
    let second = local.check_permit("k", rate, 1).await.expect("a check");
    assert!(second.allowed);
    assert!(!local.check("k", rate).await.expect("a check").allowed);
    first.refund().await.expect("refunded in the fallback");
    assert!(local.check("k", rate).await.expect("a check").allowed);

    let open = Limiter::builder()
        .redis_url(&url)
        .failure_policy(FailurePolicy::Open)
        .build()
        .expect("a limiter");
    let permit = open.check_permit("k", rate, 1).await.expect("a check");
    assert!(permit.allowed && permit.answered_by_policy());
    permit.refund().await.expect("nothing was recorded");
}

// The body slows the store down, so that its refund is still on its way when the caller
// stops waiting.
#[rate_limit(period = "1h", threshold = 5, key = key, count = "errors", name = "dropped", limiter = limiter)]
async fn slowed(
    limiter: &Limiter,
    key: &str,
    proxy: &tests::proxy::FaultProxy,
    ran: &AtomicUsize,
) -> Result<(), AppError> {
    proxy.set(tests::proxy::Fault::Delay(Duration::from_secs(1)));
    ran.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// A future dropped during its refund: the refund is handed to the runtime, and still made.
#[tokio::test]
async fn a_refund_whose_caller_stops_waiting_is_still_made() {
    let redis = TestRedis::start_private();
    let proxy = tests::proxy::FaultProxy::start(redis.address());
    let prefix = unique_prefix("refund-dropped");
    let limiter = tests::closed_redis_limiter(&proxy.url(), &prefix).await;
    connected(&limiter, "canary").await;
    let ran = AtomicUsize::new(0);
    let mut call = Box::pin(slowed(&limiter, "k", &proxy, &ran));
    // Polled until its body ran; the next poll has started the refund, which waits on the
    // slowed store (2 s a round trip).
    loop {
        tokio::select! {
            biased;
            outcome = &mut call => panic!("finished before it was dropped: {outcome:?}"),
            () = tokio::time::sleep(Duration::from_millis(1)) => {
                if ran.load(Ordering::SeqCst) == 1 {
                    break;
                }
            }
        }
    }
    drop(call);
    let mut connection = redis.connection().await;
    let key = format!("{prefix}dropped/k");
    let (members, took) = tests::wait_for(
        "the refund reaches the store",
        tests::STATE_DEADLINE,
        async || {
            let members: u64 = connection.zcard(&key).await.unwrap();
            (members == 0).then_some(members)
        },
    )
    .await;
    eprintln!("refunded {took:?} after the drop");
    assert_eq!(members, 0);
}
