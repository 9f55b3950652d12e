//! Concurrency limits: at most N calls of a key in flight, across every limiter (and process)
//! sharing the store: `Limiter::acquire` and its `Slot`, in process, on a real `redis-server`
//! and a real 3-master cluster; releases on return, cancellation and panic; renewals past the
//! first expiry; a killed process's slots; renewals that cannot reach Redis; the failure
//! policies.
//!
//! Timing: every wait is for a state, with a generous deadline; the bounds asserted are the
//! design's (never more than N bodies at once; a call whose claim is held is counted).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{Concurrency, FailurePolicy, Limiter, RateLimitError};
use redis::AsyncCommands as _;
use tests::cluster::TestCluster;
use tests::proxy::{Fault, FaultProxy};
use tests::{TestRedis, closed_cluster_limiter, closed_redis_limiter, unique_prefix, wait_for};

/// Generous: a state a loaded 2-core machine reaches in well under a second.
const DEADLINE: Duration = Duration::from_secs(30);

/// At most `max` calls in flight, slots lasting `slot_time` seconds.
fn slots(max: u64, slot_time: u64) -> Concurrency {
    Concurrency::new(max)
        .and_then(|limit| limit.with_slot_time(Duration::from_secs(slot_time)))
        .expect("a concurrency limit")
}

/// Counts the bodies running at once, and the most ever seen.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
    ran: AtomicUsize,
}

impl InFlight {
    /// A body: counted in while it runs (a few milliseconds, yielding).
    async fn body(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(2)).await;
        self.ran.fetch_add(1, Ordering::SeqCst);
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// 400 racing calls through `limiters` (round robin), each waiting for a slot of `key` under
/// `limit`: never more than `limit.max()` bodies at once, and every call runs.
async fn race(limiters: &[Limiter], key: &str, limit: Concurrency) -> Arc<InFlight> {
    let counts = Arc::new(InFlight::default());
    let calls: Vec<_> = (0..400)
        .map(|i| {
            let limiter = limiters[i % limiters.len()].clone();
            let counts = Arc::clone(&counts);
            let key = key.to_owned();
            tokio::spawn(async move {
                let slot = limiter
                    .acquire_waiting(&key, limit, Duration::from_secs(120))
                    .await
                    .expect("a slot within two minutes");
                counts.body().await;
                drop(slot);
            })
        })
        .collect();
    for call in calls {
        call.await.expect("a call");
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_calls_in_process_never_run_more_than_the_limit() {
    let limit = Concurrency::new(3).unwrap();
    let counts = race(&[Limiter::memory()], "exports", limit).await;
    assert_eq!(counts.ran.load(Ordering::SeqCst), 400);
    let most = counts.most.load(Ordering::SeqCst);
    assert!((1..=3).contains(&most), "{most} bodies at once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_calls_through_four_redis_limiters_never_run_more_than_the_limit() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-race");
    let mut limiters = Vec::new();
    for _ in 0..4 {
        limiters.push(closed_redis_limiter(redis.url(), &prefix).await);
    }
    let limit = Concurrency::new(4).unwrap();
    let counts = race(&limiters, "tenant:7:exports", limit).await;
    assert_eq!(counts.ran.load(Ordering::SeqCst), 400);
    let most = counts.most.load(Ordering::SeqCst);
    assert!((1..=4).contains(&most), "{most} bodies at once");
    // Every slot was released: the set is empty (or gone).
    wait_for("every slot released", DEADLINE, async || {
        let held: u64 = redis
            .connection()
            .await
            .zcard(format!("{prefix}tenant:7:exports"))
            .await
            .unwrap();
        (held == 0).then_some(())
    })
    .await;
    redis.clean_up(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_calls_on_a_cluster_never_run_more_than_the_limit() {
    let _alone = crate::ONE_AT_A_TIME.lock().await;
    let cluster = TestCluster::start(3);
    let prefix = unique_prefix("concurrency-cluster");
    let mut limiters = Vec::new();
    for _ in 0..4 {
        limiters.push(closed_cluster_limiter(cluster.urls(), &prefix).await);
    }
    let limit = Concurrency::new(2).unwrap();
    for key in ["a", "b", "c"] {
        let counts = race(&limiters, key, limit).await;
        assert_eq!(counts.ran.load(Ordering::SeqCst), 400);
        let most = counts.most.load(Ordering::SeqCst);
        assert!((1..=2).contains(&most), "{most} bodies at once on {key}");
    }
}

/// A denial at once: every slot held, by two limiters of one Redis; the denial names the key,
/// its retry-after an estimate of at most 100 ms.
#[tokio::test]
async fn a_full_key_is_denied_at_once_across_limiters() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-full");
    let one = closed_redis_limiter(redis.url(), &prefix).await;
    let two = closed_redis_limiter(redis.url(), &prefix).await;
    let limit = Concurrency::new(2).unwrap();
    let first = one.acquire("k", limit).await.unwrap();
    assert_eq!((first.decision().limit, first.decision().remaining), (2, 1));
    let second = two.acquire("k", limit).await.unwrap();
    assert_eq!(second.decision().remaining, 0);
    let Err(RateLimitError::Denied(denied)) = one.acquire("k", limit).await else {
        panic!("the third call is denied");
    };
    assert_eq!((denied.scope(), denied.key()), ("concurrency", Some("k")));
    assert_eq!(denied.rate(), limit.rate());
    let retry = denied.decision().retry_after.unwrap();
    assert!(retry <= Duration::from_millis(100), "{retry:?}");
    // Another key is another set of slots.
    drop(two.acquire("other", limit).await.unwrap());
    drop(second);
    wait_for("the slot released", DEADLINE, async || {
        two.acquire("k", limit).await.ok()
    })
    .await;
    drop(first);
    redis.clean_up(&prefix).await;
}

/// A slot is released when its call is cancelled (its future dropped) or panics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_and_panic_release_the_slot() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-cancel");
    let limiters = [
        Limiter::memory(),
        closed_redis_limiter(redis.url(), &prefix).await,
    ];
    let limit = Concurrency::new(1).unwrap();
    for limiter in limiters {
        // Cancelled: a task holding the slot is aborted.
        let (taken, held) = tokio::sync::oneshot::channel();
        let holder = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let _slot = limiter.acquire("job", limit).await.unwrap();
                let _ = taken.send(());
                std::future::pending::<()>().await;
            })
        };
        held.await.unwrap();
        assert!(limiter.acquire("job", limit).await.unwrap_err().is_denied());
        holder.abort();
        let _ = holder.await;
        wait_for("the cancelled call's slot released", DEADLINE, async || {
            limiter.acquire("job", limit).await.ok()
        })
        .await;
        // Panicked: the slot is dropped while the panic unwinds.
        let panicking = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let _slot = limiter.acquire("job", limit).await.unwrap();
                panic!("the body failed");
            })
        };
        assert!(panicking.await.unwrap_err().is_panic());
        wait_for("the panicked call's slot released", DEADLINE, async || {
            limiter.acquire("job", limit).await.ok()
        })
        .await;
    }
    redis.clean_up(&prefix).await;
}

/// A slot dropped is free for the same process's next acquire of the key: in process at once;
/// in Redis its release (not awaited by the caller) is on the connection before it, as it is
/// for the attribute and the layer (a client's next request after a response), once the
/// server holds the release's script (its first run is sent twice: `NOSCRIPT`, then its text).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_dropped_is_free_for_the_next_acquire_of_its_process() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-next");
    let limit = Concurrency::new(1).unwrap();
    for limiter in [
        Limiter::memory(),
        closed_redis_limiter(redis.url(), &prefix).await,
    ] {
        // The scripts loaded: a first slot taken, released, and taken again.
        drop(limiter.acquire("k", limit).await.unwrap());
        drop(
            wait_for("the first release", DEADLINE, async || {
                limiter.acquire("k", limit).await.ok()
            })
            .await,
        );
        for _ in 0..100 {
            let slot = limiter.acquire("k", limit).await.unwrap();
            assert!(limiter.acquire("k", limit).await.unwrap_err().is_denied());
            assert!(slot.is_held());
            drop(slot);
        }
        for _ in 0..50 {
            let (started, _) = tokio::sync::oneshot::channel();
            let (done, finished) = tokio::sync::oneshot::channel();
            drop(done);
            report(&limiter, "next", started, finished).await.unwrap();
        }
    }
    redis.clean_up(&prefix).await;
}

/// A slot renewed past its first expiry is not taken by another call: on a manual clock, the
/// renewal scores it at the clock's time, so that it still counts once the clock passes the
/// slot time after its check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_renewed_past_its_first_expiry_is_not_taken() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-renewed");
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .clock(clock.clone())
        .build()
        .unwrap();
    let limit = slots(1, 3);
    let key = format!("{prefix}k");
    let slot = limiter.acquire("k", limit).await.unwrap();
    let first = clock.now();
    let score = async || -> Option<f64> {
        let scores: Vec<(String, f64)> = redis
            .connection()
            .await
            .zrange_withscores(&key, 0, -1)
            .await
            .unwrap();
        scores.first().map(|(_, score)| *score)
    };
    // Two seconds on, a renewal scores the slot then.
    clock.advance(Duration::from_secs(2));
    let renewed = micros(clock.now());
    wait_for("a renewal at the clock's time", DEADLINE, async || {
        (score().await? >= renewed as f64).then_some(())
    })
    .await;
    // Past the first expiry (3 s after the check): still held, another call is denied.
    clock.set(first + Duration::from_secs(4));
    assert!(limiter.acquire("k", limit).await.unwrap_err().is_denied());
    assert!(slot.is_held());
    // A slot time past its last renewal on the limiter's clock, the store no longer counts
    // it, and the slot says so at once (and for good).
    clock.set(first + Duration::from_secs(60));
    assert!(!slot.is_held());
    tokio::time::timeout(DEADLINE, slot.lost()).await.unwrap();
    let other = limiter.acquire("k", limit).await.unwrap();
    assert!(!slot.is_held());
    drop((slot, other));
    redis.clean_up(&prefix).await;
}

fn micros(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// A killed process's slots free within their slot time: no renewal comes, and they leave
/// their window.
#[tokio::test]
async fn a_killed_process_frees_its_slots_within_the_slot_time() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-killed");
    let mut holder = std::process::Command::new(env!("CARGO_BIN_EXE_slot_holder"))
        .args([redis.url(), &prefix, "k", "2", "2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start slot_holder");
    let stdout = holder.stdout.take().expect("its output");
    let line = tokio::task::spawn_blocking(move || {
        use std::io::BufRead as _;
        std::io::BufReader::new(stdout).lines().next()
    })
    .await
    .unwrap();
    assert_eq!(line.unwrap().unwrap(), "held");
    let limiter = closed_redis_limiter(redis.url(), &prefix).await;
    let limit = slots(2, 2);
    holder.kill().unwrap();
    holder.wait().unwrap();
    // Both free, each a slot time after its last renewal.
    let mut taken = Vec::new();
    wait_for("the killed process's slots free", DEADLINE, async || {
        if let Ok(slot) = limiter.acquire("k", limit).await {
            taken.push(slot);
        }
        (taken.len() == 2).then_some(())
    })
    .await;
    drop(taken);
    redis.clean_up(&prefix).await;
}

/// A renewal that cannot reach Redis ends the call's claim once a slot time passed since the
/// last one that did; while the holder says it holds the slot, Redis counts it: another
/// limiter that takes the slot does so only once the holder no longer says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_that_cannot_reach_redis_end_the_claim() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-cut");
    let proxy = FaultProxy::start(redis.address());
    let cut_off = closed_redis_limiter(&proxy.url(), &prefix).await;
    let direct = closed_redis_limiter(redis.url(), &prefix).await;
    let limit = slots(1, 2);
    let slot = cut_off.acquire("k", limit).await.unwrap();
    proxy.set(Fault::Refuse);
    let (taken, _) = wait_for(
        "the slot taken through the other limiter",
        DEADLINE,
        async || {
            let taken = direct.acquire("k", limit).await.ok()?;
            // Admitted by Redis once the slot left its window, which is after the holder's claim
            // ended: it no longer says it holds it.
            assert!(!slot.is_held(), "two holders Redis counts at once");
            Some(taken)
        },
    )
    .await;
    tokio::time::timeout(DEADLINE, slot.lost())
        .await
        .expect("the claim's end is told");
    drop((slot, taken));
    redis.clean_up(&prefix).await;
}

/// The failure policies, Redis down: `Closed` fails, `Open` admits holding nothing, `Local`
/// is a semaphore of the process (its fallback), released there.
#[tokio::test]
async fn the_failure_policies_answer_for_a_store_that_is_down() {
    let port = tests::free_port();
    let limit = Concurrency::new(1).unwrap();
    let build = |policy| {
        Limiter::builder()
            .redis_url(format!("redis://127.0.0.1:{port}"))
            .failure_policy(policy)
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let closed = build(FailurePolicy::Closed);
    assert!(matches!(
        closed.acquire("k", limit).await,
        Err(RateLimitError::Unavailable(_))
    ));
    let open = build(FailurePolicy::Open);
    let a = open.acquire("k", limit).await.unwrap();
    let b = open.acquire("k", limit).await.unwrap();
    assert!(a.decision().answered_by_policy() && b.decision().answered_by_policy());
    // Nothing counts them: no claim, and told so.
    assert!(!a.is_held() && !b.is_held());
    tokio::time::timeout(DEADLINE, a.lost()).await.unwrap();
    let local = build(FailurePolicy::Local);
    let held = local.acquire("k", limit).await.unwrap();
    assert!(held.decision().answered_by_policy());
    // The process's fallback counts it.
    assert!(held.is_held());
    assert!(local.acquire("k", limit).await.unwrap_err().is_denied());
    drop(held);
    drop(local.acquire("k", limit).await.unwrap());
}

/// A check by hand, `Limiter::check`, and the stores' answers: a concurrency limit is never
/// answered from the deny cache (a slot frees when its call ends).
#[tokio::test]
async fn a_full_key_is_asked_every_time_never_answered_by_the_deny_cache() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-deny-cache");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .deny_cache(true)
        .deny_cache_ttl(Duration::from_secs(60))
        .build()
        .unwrap();
    let limit = Concurrency::new(1).unwrap();
    let slot = limiter.acquire("k", limit).await.unwrap();
    for _ in 0..5 {
        assert!(limiter.acquire("k", limit).await.unwrap_err().is_denied());
    }
    assert_eq!(limiter.deny_cache_answers(), 0);
    drop(slot);
    wait_for("the slot released", DEADLINE, async || {
        limiter.acquire("k", limit).await.ok()
    })
    .await;
    redis.clean_up(&prefix).await;
}

/// A concurrency limit's rate is no rate to check: its slot would never be released.
#[tokio::test]
async fn a_check_refuses_a_concurrency_limits_rate() {
    let limiter = Limiter::memory();
    let rate = Concurrency::new(2).unwrap().rate();
    for result in [
        limiter.check("k", rate).await.map(drop),
        limiter.check_n("k", rate, 2).await.map(drop),
        limiter.check_permit("k", rate, 1).await.map(drop),
        limiter
            .check_all(vec![ratelimit_runtime::Limit::new("k", rate)])
            .await
            .map(drop),
    ] {
        let error = result.unwrap_err();
        assert!(matches!(error, RateLimitError::InvalidInput(_)), "{error}");
        assert!(error.to_string().contains("Limiter::acquire"), "{error}");
    }
}

/// The attribute: `concurrency = N` on a function, its slot held while the body runs.
#[ratelimit_runtime::rate_limit(concurrency = 2, key = tenant, wait = "2m", limiter = limiter)]
async fn export(limiter: &Limiter, tenant: &str, counts: &InFlight) -> Result<(), RateLimitError> {
    counts.body().await;
    Ok(())
}

/// Stacked: a rate and a concurrency limit, checked together (all or nothing).
#[ratelimit_runtime::rate_limit(period = "1h", threshold = 1000, key = tenant, name = "reports.rate", limiter = limiter)]
#[ratelimit_runtime::rate_limit(concurrency = 1, key = tenant, name = "reports.slots", limiter = limiter)]
async fn report(
    limiter: &Limiter,
    tenant: &str,
    started: tokio::sync::oneshot::Sender<()>,
    finish: tokio::sync::oneshot::Receiver<()>,
) -> Result<(), RateLimitError> {
    let _ = started.send(());
    let _ = finish.await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_attribute_holds_a_slot_while_the_body_runs() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-attribute");
    for limiter in [
        Limiter::memory(),
        closed_redis_limiter(redis.url(), &prefix).await,
    ] {
        let counts = Arc::new(InFlight::default());
        let calls: Vec<_> = (0..100)
            .map(|_| {
                let (limiter, counts) = (limiter.clone(), Arc::clone(&counts));
                tokio::spawn(async move { export(&limiter, "t", &counts).await })
            })
            .collect();
        for call in calls {
            call.await.unwrap().expect("a slot within two minutes");
        }
        assert_eq!(counts.ran.load(Ordering::SeqCst), 100);
        let most = counts.most.load(Ordering::SeqCst);
        assert!((1..=2).contains(&most), "{most} bodies at once");
    }
    redis.clean_up(&prefix).await;
}

/// Stacked limits are one check: a call denied by its slot takes nothing of the rate (its
/// count stays), is never cached as a denial of the rate's key, and a cancelled call releases
/// its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_denied_by_its_slot_takes_nothing_of_its_rate() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-stacked");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(10))
        .deny_cache(true)
        .build()
        .unwrap();
    let (started, running) = tokio::sync::oneshot::channel();
    let (finish, finishing) = tokio::sync::oneshot::channel();
    let holder = {
        let limiter = limiter.clone();
        tokio::spawn(async move { report(&limiter, "t", started, finishing).await })
    };
    running.await.unwrap();
    for _ in 0..5 {
        let (started, _) = tokio::sync::oneshot::channel();
        let (_, finishing) = tokio::sync::oneshot::channel();
        let Err(RateLimitError::Denied(denied)) = report(&limiter, "t", started, finishing).await
        else {
            panic!("denied by its slot");
        };
        assert_eq!(denied.scope(), "reports.slots");
        let rate = denied
            .decisions()
            .expect("every limit's decision")
            .iter()
            .next()
            .unwrap();
        // The rate would have admitted the call, and counts the holder's admission only:
        // the denied calls took nothing (a denial tells what is left without the call).
        assert!(rate.decision().allowed);
        assert_eq!(rate.decision().remaining, 999);
    }
    assert_eq!(limiter.deny_cache_answers(), 0);
    finish.send(()).unwrap();
    holder.await.unwrap().unwrap();
    // The slot is free again (once its release arrived); a cancelled call releases its own.
    let ((cancelled, _keep), _) = wait_for("a call holding the slot again", DEADLINE, async || {
        let (started, running) = tokio::sync::oneshot::channel();
        let (keep, finishing) = tokio::sync::oneshot::channel::<()>();
        let limiter = limiter.clone();
        let call = tokio::spawn(async move { report(&limiter, "t", started, finishing).await });
        // Denied (the release not there yet): its body never started.
        running.await.ok().map(|()| (call, keep))
    })
    .await;
    cancelled.abort();
    let _ = cancelled.await;
    wait_for("the cancelled call's slot released", DEADLINE, async || {
        let (probe, _) = tokio::sync::oneshot::channel();
        let (done, finished) = tokio::sync::oneshot::channel();
        drop(done);
        report(&limiter, "t", probe, finished).await.ok()
    })
    .await;
    redis.clean_up(&prefix).await;
}

#[ratelimit_runtime::rate_limit(name = "shared.name", period = "1h", threshold = 1, limiter = limiter)]
async fn rated(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[ratelimit_runtime::rate_limit(name = "shared.name", concurrency = 1, limiter = limiter)]
async fn held(
    limiter: &Limiter,
    started: tokio::sync::oneshot::Sender<()>,
    release: tokio::sync::oneshot::Receiver<()>,
) -> Result<(), RateLimitError> {
    let _ = started.send(());
    let _ = release.await;
    Ok(())
}

/// A call of `held` that returns at once.
async fn held_briefly(limiter: &Limiter) -> Result<(), RateLimitError> {
    let (started, _) = tokio::sync::oneshot::channel();
    let (done, release) = tokio::sync::oneshot::channel();
    drop(done);
    held(limiter, started, release).await
}

/// A rate and a concurrency limit of one `name` never share a key: the rate's log is full
/// and a slot still free, a slot held and the rate's log still empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_and_a_concurrency_limit_of_one_name_keep_apart() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-apart");
    for limiter in [
        Limiter::memory(),
        closed_redis_limiter(redis.url(), &prefix).await,
    ] {
        let (release, released) = tokio::sync::oneshot::channel();
        let (started, running) = tokio::sync::oneshot::channel();
        let holder = {
            let limiter = limiter.clone();
            tokio::spawn(async move { held(&limiter, started, released).await })
        };
        running.await.unwrap();
        assert!(held_briefly(&limiter).await.unwrap_err().is_denied());
        rated(&limiter).await.expect("the rate's log is empty");
        assert!(rated(&limiter).await.unwrap_err().is_denied());
        release.send(()).unwrap();
        holder.await.unwrap().unwrap();
        wait_for("the slot free, the rate's log full", DEADLINE, async || {
            held_briefly(&limiter).await.ok()
        })
        .await;
        assert!(rated(&limiter).await.unwrap_err().is_denied());
    }
    redis.clean_up(&prefix).await;
}

/// The axum layer: a request holds its slot until its response's body ends (not when the
/// handler returns: a streamed body is still in flight), or until the client hangs up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_holds_a_slot_until_the_response_body_ends() {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use ratelimit_runtime::axum::{HeaderKey, RateLimitLayer};
    use tokio::sync::{Mutex, mpsc};

    use crate::support::http::{client, field, policy, serve};

    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-layer");
    for limiter in [
        Limiter::memory(),
        closed_redis_limiter(redis.url(), &prefix).await,
    ] {
        // The body of `/stream`: its chunks, sent by the test, until the sender is dropped.
        let (chunks, receiver) = mpsc::channel::<&'static str>(4);
        let receiver = Arc::new(Mutex::new(Some(receiver)));
        let stream = move || {
            let receiver = Arc::clone(&receiver);
            async move {
                let receiver = receiver.lock().await.take().expect("one stream");
                Body::from_stream(futures_util::stream::unfold(
                    receiver,
                    |mut rx| async move {
                        let chunk = rx.recv().await?;
                        Some((Ok::<_, std::io::Error>(chunk), rx))
                    },
                ))
            }
        };
        let layer = RateLimitLayer::concurrency(
            limiter.clone(),
            Concurrency::new(1).unwrap(),
            HeaderKey::new("x-user"),
        )
        .scope("streams");
        let app = Router::new()
            .route("/stream", get(stream))
            .route("/quick", get(|| async { "ok" }))
            .layer(layer);
        let base = serve(app).await;
        let http = client();
        let mut streaming = http
            .get(format!("{base}/stream"))
            .header("x-user", "alice")
            .send()
            .await
            .unwrap();
        assert_eq!(streaming.status(), 200);
        // Its handler returned; its body is in flight: alice's slot is held.
        let denied = http
            .get(format!("{base}/quick"))
            .header("x-user", "alice")
            .send()
            .await
            .unwrap();
        assert_eq!(denied.status(), 429);
        assert_eq!(field(&denied, "retry-after"), "1");
        assert_eq!(
            policy(field(&denied, "ratelimit-policy")),
            ("concurrency".to_owned(), 1, None)
        );
        // Another key has a slot of its own.
        let bob = http
            .get(format!("{base}/quick"))
            .header("x-user", "bob")
            .send()
            .await
            .unwrap();
        assert_eq!(bob.status(), 200);
        chunks.send("rows").await.unwrap();
        assert_eq!(&streaming.chunk().await.unwrap().unwrap()[..], b"rows");
        drop(chunks);
        assert!(streaming.chunk().await.unwrap().is_none());
        wait_for("alice's slot released", DEADLINE, async || {
            let response = http
                .get(format!("{base}/quick"))
                .header("x-user", "alice")
                .send()
                .await
                .unwrap();
            (response.status() == 200).then_some(())
        })
        .await;
        // A client's requests one after another: each finds the slot its last one released.
        for _ in 0..20 {
            let response = http
                .get(format!("{base}/quick"))
                .header("x-user", "carol")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            assert_eq!(response.text().await.unwrap(), "ok");
        }
    }
    redis.clean_up(&prefix).await;
}

/// An acquire whose caller stops waiting while its check is on its way to Redis: the check
/// ends on the runtime, and a slot it took is released at once (not at the end of its slot
/// time, a day here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_given_up_mid_call_releases_what_it_took() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-given-up");
    let proxy = FaultProxy::start(redis.address());
    let slow = closed_redis_limiter(&proxy.url(), &prefix).await;
    let direct = closed_redis_limiter(redis.url(), &prefix).await;
    let limit = slots(1, 86_400);
    // Connected first, then every byte delayed: the next acquire is in flight for a while.
    drop(slow.acquire("warm", limit).await.unwrap());
    proxy.set(Fault::Delay(Duration::from_millis(300)));
    let given_up = tokio::time::timeout(Duration::from_millis(50), slow.acquire("k", limit)).await;
    assert!(given_up.is_err(), "the acquire was still on its way");
    // Whether it took the slot or not, the slot ends up free.
    wait_for("the given-up acquire's slot free", DEADLINE, async || {
        direct.acquire("k", limit).await.ok()
    })
    .await;
    proxy.set(Fault::Pass);
    redis.clean_up(&prefix).await;
}

/// `Slot::release` waits for the store's answer: the slot is free once it returns, for any
/// process; a denial's message says it is a concurrency limit's.
#[tokio::test]
async fn an_explicit_release_waits_for_the_store() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-release");
    let one = closed_redis_limiter(redis.url(), &prefix).await;
    let other = closed_redis_limiter(redis.url(), &prefix).await;
    let limit = Concurrency::new(1).unwrap();
    for _ in 0..20 {
        let slot = one.acquire("k", limit).await.unwrap();
        let denied = other.acquire("k", limit).await.unwrap_err();
        assert_eq!(
            denied.to_string(),
            "concurrency limit reached for `concurrency`: 1 call in flight; retry after 0.100s"
                .replace(
                    "0.100",
                    &format!("{:.3}", denied.retry_after().unwrap().as_secs_f64())
                )
        );
        slot.release().await.unwrap();
        // Free for any process once `release` returned.
        let taken = other.acquire("k", limit).await.expect("released");
        taken.release().await.unwrap();
    }
    redis.clean_up(&prefix).await;
}

/// A concurrency layer in shadow mode (its scope's switch): requests over the limit go on,
/// each holding its slot as an enforced one would, and the limit's decisions are reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_concurrency_layer_lets_requests_through() {
    use axum::Router;
    use axum::routing::get;
    use ratelimit_runtime::axum::{HeaderKey, RateLimitLayer};
    use ratelimit_runtime::{Limits, Mode, ScopeLimits};

    use crate::support::http::{client, serve};

    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrency-shadow");
    let limiter = closed_redis_limiter(redis.url(), &prefix).await;
    limiter
        .set_limits(Limits::new().scope(
            "shadowed@concurrency",
            ScopeLimits::new().mode(Mode::Shadow),
        ))
        .unwrap();
    let layer = RateLimitLayer::concurrency(
        limiter.clone(),
        Concurrency::new(1).unwrap(),
        HeaderKey::new("x-user"),
    )
    .scope("shadowed");
    let (release, released) = tokio::sync::watch::channel(false);
    let app = Router::new()
        .route(
            "/slow",
            get(move || {
                let mut released = released.clone();
                async move {
                    let _ = released.wait_for(|done| *done).await;
                    "slow"
                }
            }),
        )
        .route("/quick", get(|| async { "ok" }))
        .layer(layer);
    let base = serve(app).await;
    let http = client();
    let slow = tokio::spawn({
        let (http, base) = (http.clone(), base.clone());
        async move {
            http.get(format!("{base}/slow"))
                .header("x-user", "dave")
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    // The slow one holds its slot in Redis, as an enforced limit's would.
    let key = format!("{prefix}{{shadowed/dave}}@concurrency");
    let held = async || -> u64 { redis.connection().await.zcard(&key).await.unwrap() };
    wait_for("the slow request's slot held", DEADLINE, async || {
        (held().await == 1).then_some(())
    })
    .await;
    // While it holds it, the others go on (a shadow limit never denies).
    for _ in 0..5 {
        let response = http
            .get(format!("{base}/quick"))
            .header("x-user", "dave")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }
    release.send(true).unwrap();
    assert_eq!(slow.await.unwrap(), 200);
    wait_for("every shadow slot released", DEADLINE, async || {
        (held().await == 0).then_some(())
    })
    .await;
    redis.clean_up(&prefix).await;
}
