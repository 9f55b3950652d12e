//! The circuit breaker and the connection under hostile conditions, each found by an
//! adversarial review: checks outside a runtime, a black-holed connection, reconnections,
//! huge timeouts, concurrent probes, a key the script cannot use, a connection the server
//! closed, and callers that give up before the timeout.
//!
//! Timing: faults last until the test ends them, the tests wait for states (polling, within
//! `tests::STATE_DEADLINE`), and the only times asserted are bounds the design guarantees: a
//! check is bounded by the limiter's timeout; an open breaker answers without waiting on
//! Redis, and its probes, in the background, are one at a time, at most every 100 ms after the
//! previous one failed. Limiters whose checks are all meant to be
//! answered by Redis have a long timeout, so that a loaded machine cannot turn a slow answer
//! into a policy answer.

use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate, RateLimitError, StoreError};
use tests::proxy::{Fault, FaultProxy};
use tests::{STATE_DEADLINE, TestRedis, connected, wait_for};

/// The timeout of the limiters whose checks are all meant to be answered by Redis.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(10);
/// While a breaker is open, the least time between a failed probe and the next probe.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// A limiter on `url` that fails closed, with `timeout`.
async fn closed(url: &str, timeout: Duration) -> Limiter {
    Limiter::builder()
        .redis_url(url)
        .failure_policy(FailurePolicy::Closed)
        .timeout(timeout)
        .build()
        .unwrap()
}

/// Makes the ACL user `rl` (password `pw`) on the server of `admin`, allowed the keys under
/// the default prefix and `commands`.
async fn acl_user(admin: &mut redis::aio::MultiplexedConnection, commands: &[&str]) {
    let () = redis::cmd("ACL")
        .arg(&["SETUSER", "rl", "on", ">pw", "~ratelimit:*"])
        .arg(commands)
        .query_async(admin)
        .await
        .unwrap();
}

fn rate() -> Rate {
    Rate::new(1_000_000, Duration::from_secs(60)).unwrap()
}

/// A check made outside any Tokio runtime (from `futures::executor::block_on` in synchronous
/// code) leaves the breaker closed for the Tokio callers. The tests build the runtime with
/// its `smol` feature, so smol's executor takes the call and Redis answers it; without the
/// feature the policy answers it alone (`StoreError::NoRuntime`, which is not an outage: the
/// runtime's own unit test).
#[test]
fn a_check_outside_tokio_leaves_the_breaker_closed() {
    let redis = TestRedis::start_private();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let limiter = rt.block_on(closed(redis.url(), HEALTHY_TIMEOUT));
    rt.block_on(async { limiter.check("warm", rate()).await.unwrap() });
    assert!(!limiter.is_degraded());
    // One check from a thread without a Tokio runtime.
    std::thread::scope(|s| {
        s.spawn(|| {
            let answer = futures_executor::block_on(limiter.check("sync-caller", rate()));
            eprintln!("outside tokio: {answer:?}");
            let decision = answer.expect("smol's executor makes the call");
            assert!(!decision.answered_by_policy(), "{decision:?}");
        });
    });
    eprintln!(
        "degraded after one misplaced check: {}",
        limiter.is_degraded()
    );
    // Every tokio caller now gets 503s (Closed) though Redis is fine.
    let result = rt.block_on(async { limiter.check("innocent", rate()).await });
    eprintln!("innocent caller on a healthy Redis: {result:?}");
    assert!(
        !matches!(
            result,
            Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_)))
        ),
        "a healthy Redis answered by the policy: {result:?}"
    );
}

/// A proxy whose existing connections can be black-holed (bytes silently dropped, sockets
/// kept open, as after a failover behind a VIP, a conntrack/NAT drop or a dead host), while
/// new connections go through.
struct Blackhole {
    address: SocketAddr,
    generation: Arc<AtomicU64>,
}

impl Blackhole {
    fn start(upstream: SocketAddr) -> Blackhole {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let generation = Arc::new(AtomicU64::new(0));
        let g = Arc::clone(&generation);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let server = TcpStream::connect(upstream).unwrap();
                let mine = g.load(Ordering::SeqCst);
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let g = Arc::clone(&g);
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16384];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => n,
                            };
                            if g.load(Ordering::SeqCst) != mine {
                                // Black hole: drop the bytes, keep the sockets open forever.
                                let _keep = (from, to);
                                loop {
                                    std::thread::sleep(Duration::from_secs(3600));
                                }
                            }
                            if to.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    });
                }
            }
        });
        Blackhole {
            address,
            generation,
        }
    }
    fn url(&self) -> String {
        format!("redis://{}/", self.address)
    }
    fn blackhole_existing(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// Once the limiter's connection is black-holed, a timeout makes the store connect afresh:
/// checks go back to Redis, which a new connection reaches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_connection_is_replaced() {
    let redis = TestRedis::start_private();
    let proxy = Blackhole::start(redis.address());
    let limiter = closed(&proxy.url(), Duration::from_millis(500)).await;
    connected(&limiter, "k").await;
    proxy.blackhole_existing();
    // A fresh client through the same proxy is served.
    let client = redis::Client::open(proxy.url()).unwrap();
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    let mut fresh = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut fresh).await.unwrap();
    assert_eq!(pong, "PONG");
    let mut first = None;
    let (_, took) = wait_for(
        "checks go back to Redis on a new connection",
        STATE_DEADLINE,
        async || {
            let result = limiter.check("k", rate()).await;
            first.get_or_insert_with(|| format!("{result:?}"));
            result.ok()
        },
    )
    .await;
    eprintln!("black-holed connection: first {first:?}, back on Redis after {took:?}");
}

/// Reconnections leave no task behind (the runtime's watcher is spawned once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnections_leave_no_tasks_behind() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let limiter = closed(&proxy.url(), HEALTHY_TIMEOUT).await;
    connected(&limiter, "k").await;
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let mut slowest = Duration::ZERO;
    for _ in 0..20 {
        proxy.cut();
        // The connection is dropped; a check reconnects (resending its call, or after a
        // failed check and the breaker's probe).
        let (_, took) = wait_for("a check reconnects", STATE_DEADLINE, async || {
            limiter.check("k", rate()).await.ok()
        })
        .await;
        slowest = slowest.max(took);
    }
    // Tasks of the old connections end once their sockets are closed: wait for it.
    let (after, settled) = wait_for(
        "the old connections' tasks end",
        STATE_DEADLINE,
        async || {
            let after = metrics.num_alive_tasks();
            (after < before + 10).then_some(after)
        },
    )
    .await;
    eprintln!(
        "alive tasks: {before} before, {after} after 20 reconnections (each within \
         {slowest:?}), settled in {settled:?}"
    );
}

/// Huge timeouts must not panic.
#[tokio::test]
async fn huge_timeouts() {
    let redis = TestRedis::start_private();
    for timeout in [
        Duration::MAX,
        Duration::from_secs(u64::MAX / 2),
        Duration::from_secs(1 << 40),
    ] {
        let limiter = Limiter::builder()
            .redis_url(redis.url())
            .timeout(timeout)
            .build()
            .unwrap();
        let r = limiter.check("k", rate()).await;
        eprintln!("{timeout:?}: {r:?} {}", limiter.policy_answers());
        assert_eq!(limiter.policy_answers(), 0);
    }
}

/// Under contention, a stalled Redis costs the timeout only to the checks sent before the
/// breaker opened (the first round, answered `Timeout`); every later check is answered
/// `CircuitOpen` at once, and the breaker's probes, in the background, come one at a time at
/// most every 100 ms after the previous one failed. Each probe connects afresh (a timeout
/// drops the connection), so the proxy's connections count them: at most one per timeout and
/// probe interval, plus the first round's reconnections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_probe_at_a_time_under_contention_and_no_caller_waits() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let timeout = Duration::from_millis(400);
    let limiter = closed(&proxy.url(), timeout).await;
    connected(&limiter, "k").await;
    proxy.set(Fault::Stall);
    let accepted_before = proxy.accepted();
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let start = Instant::now();
    let run = Duration::from_secs(3);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let limiter = limiter.clone();
            let answers = Arc::clone(&answers);
            tokio::spawn(async move {
                let mut mine = Vec::new();
                while start.elapsed() < run {
                    let t = Instant::now();
                    let r = limiter.check("k", rate()).await;
                    let took = t.elapsed();
                    let timed_out = match r {
                        Err(RateLimitError::Unavailable(StoreError::Timeout(_))) => true,
                        Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_))) => false,
                        other => panic!("a stalled Redis: {other:?}"),
                    };
                    mine.push((t, took, timed_out));
                    tokio::task::yield_now().await;
                }
                answers.lock().unwrap().extend(mine);
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed();
    let answers = answers.lock().unwrap().clone();
    // The first round: the checks that went to Redis before the breaker opened. It opened
    // before the first timeout was answered: a check sent after that waited on nothing.
    let opened = answers
        .iter()
        .filter(|answer| answer.2)
        .map(|&(started, took, _)| started + took)
        .min()
        .expect("the first round timed out");
    let first_round = answers.iter().filter(|answer| answer.2).count();
    let late: Vec<Duration> = answers
        .iter()
        .filter(|&&(started, _, _)| started > opened)
        .map(|&(_, took, _)| took)
        .collect();
    let slowest = late.iter().max().copied().unwrap_or_default();
    let probes = proxy.accepted() - accepted_before;
    eprintln!(
        "{first_round} checks timed out; then {} answered, the slowest in {slowest:?}; {probes} \
         connections made in {elapsed:?}",
        late.len()
    );
    assert!(
        late.len() > 100,
        "{} checks after the breaker opened",
        late.len()
    );
    assert!(
        late.iter().all(|&took| took < timeout / 2),
        "a check waited {slowest:?} after the breaker opened (timeout {timeout:?})"
    );
    // One probe at a time, each waiting the timeout, the next 100 ms after; and at least one.
    let most = 1 + elapsed.as_nanos() / (timeout + PROBE_INTERVAL).as_nanos();
    assert!(probes >= 1, "no probe connected");
    assert!(
        probes as u128 <= most + first_round as u128,
        "{probes} connections > {most} probes + {first_round} checks of the first round"
    );
}

/// A stalled Redis costs each breaker one caller's timeout, whatever the caller's pace: a
/// caller every 1 ms and one every 200 ms (two limiters, two breakers) each wait the timeout
/// once, and every other call of theirs is answered by the policy well under it, while each
/// breaker's probes run in the background (before, each check of the 200 ms caller was its
/// breaker's probe, and waited the timeout). Once Redis answers again, the probes close the
/// breakers and the callers are back on Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_costs_one_call_per_breaker_the_timeout() {
    let redis = TestRedis::start_private();
    let timeout = Duration::from_secs(1);
    let limiter = || {
        Limiter::builder()
            .redis_url(redis.url())
            .failure_policy(FailurePolicy::Local)
            .timeout(timeout)
            .build()
            .unwrap()
    };
    let (busy, steady) = (limiter(), limiter());
    connected(&busy, "busy").await;
    connected(&steady, "steady").await;
    redis.freeze();
    let stall = Duration::from_secs(2);
    let start = Instant::now();
    let caller = |limiter: Limiter, key: &'static str, pace: Duration| {
        tokio::spawn(async move {
            let mut took = Vec::new();
            while start.elapsed() < stall {
                let t = Instant::now();
                let decision = limiter
                    .check(key, rate())
                    .await
                    .expect("the policy's answer");
                took.push((t.elapsed(), decision.answered_by_policy()));
                tokio::time::sleep(pace).await;
            }
            took
        })
    };
    let busy_calls = caller(busy.clone(), "busy", Duration::from_millis(1));
    let steady_calls = caller(steady.clone(), "steady", Duration::from_millis(200));
    let (busy_calls, steady_calls) = (busy_calls.await.unwrap(), steady_calls.await.unwrap());
    redis.thaw();
    for (name, calls) in [("1 ms", &busy_calls), ("200 ms", &steady_calls)] {
        let waited = calls
            .iter()
            .filter(|(took, _)| *took >= timeout / 2)
            .count();
        let slowest_other = calls
            .iter()
            .map(|(took, _)| *took)
            .filter(|&took| took < timeout / 2)
            .max()
            .unwrap_or_default();
        eprintln!(
            "the caller every {name}: {} calls, {waited} waited at least half the timeout, the \
             slowest other took {slowest_other:?}",
            calls.len()
        );
        assert!(
            waited <= 1,
            "{waited} calls of the caller every {name} waited"
        );
        assert!(
            calls.iter().all(|(_, by_policy)| *by_policy),
            "Redis answered while stalled"
        );
        assert!(calls.len() >= 3, "{} calls", calls.len());
    }
    for (limiter, key) in [(&busy, "busy"), (&steady, "steady")] {
        let took = connected(limiter, key).await;
        eprintln!("{key} is back on Redis {took:?} after the thaw");
    }
}

/// One key holding a sorted set with an infinite score (another application under the
/// prefix) makes the script fail on that key alone: other keys keep going to Redis.
#[tokio::test]
async fn a_sorted_set_the_script_cannot_use_fails_alone() {
    let redis = TestRedis::start_private();
    let limiter = closed(redis.url(), HEALTHY_TIMEOUT).await;
    let mut c = redis.connection().await;
    let () = redis::cmd("ZADD")
        .arg("ratelimit:poisoned")
        .arg("+inf")
        .arg("x")
        .query_async(&mut c)
        .await
        .unwrap();
    let r = limiter.check("poisoned", rate()).await;
    eprintln!("poisoned key: {r:?}");
    let r = limiter.check("innocent", rate()).await;
    eprintln!("innocent key right after: {r:?}");
    assert!(r.is_ok(), "{r:?}");
}

/// Redis (or a load balancer) closing an idle connection is not an outage: the next check
/// resends its call on a new connection, and no caller is answered by the policy.
#[tokio::test]
async fn a_connection_the_server_closed_is_not_an_outage() {
    let redis = TestRedis::start_private();
    let limiter = closed(redis.url(), HEALTHY_TIMEOUT).await;
    limiter.check("k", rate()).await.unwrap();
    // As the server's idle timeout does: every client connection but this one, closed.
    let mut c = redis.connection().await;
    let killed: u64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"])
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(killed >= 1);
    let first = limiter.check("k", rate()).await;
    let second = limiter.check("other", rate()).await;
    eprintln!(
        "after the server closed the idle connection: {first:?}, then {second:?}; answered by policy {}",
        limiter.policy_answers()
    );
    assert_eq!(limiter.policy_answers(), 0);
}

/// Callers that give up before the limiter's timeout (a request deadline shorter than it)
/// still open the breaker: a dropped check hands its Redis call to the runtime. Until the
/// first call times out (250 ms) each caller waits its deadline; then none does (the probes
/// run in the background).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_give_up_early_still_open_the_breaker() {
    let timeout = Duration::from_millis(250);
    let deadline = Duration::from_millis(30);
    let pause = Duration::from_millis(1);
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let limiter = Limiter::builder()
        .redis_url(proxy.url())
        .failure_policy(FailurePolicy::Open)
        .timeout(timeout)
        .build()
        .unwrap();
    connected(&limiter, "k").await;
    proxy.set(Fault::Stall);
    let start = Instant::now();
    // When the breaker is seen open (no sooner than it opened).
    let opened = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            while !limiter.is_degraded() {
                assert!(start.elapsed() < STATE_DEADLINE, "the breaker never opened");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            Instant::now()
        })
    };
    let cancelled = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let limiter = limiter.clone();
            let cancelled = Arc::clone(&cancelled);
            tokio::spawn(async move {
                while start.elapsed() < Duration::from_secs(3) {
                    if tokio::time::timeout(deadline, limiter.check("k", rate()))
                        .await
                        .is_err()
                    {
                        cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(pause).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let ended = start.elapsed();
    let opened = opened.await.unwrap() - start;
    let cancelled = cancelled.load(Ordering::Relaxed);
    eprintln!(
        "degraded: {}, policy answers: {}; breaker seen open {opened:?} after the stall",
        limiter.is_degraded(),
        limiter.policy_answers()
    );
    eprintln!("{cancelled} checks hit the caller's 30 ms deadline in {ended:?}");
    assert!(limiter.is_degraded());
    // Before the breaker opened, each caller started a check (each waiting its deadline, then
    // a pause) at most every 31 ms; after, none waits (an open breaker answers on the first
    // poll, before any deadline).
    let per_caller = 1 + opened.as_nanos() / (deadline + pause).as_nanos();
    assert!(
        u128::from(cancelled) <= 8 * per_caller,
        "{cancelled} > 8 x {per_caller}"
    );
}

/// A limiter without traffic finds its store back by itself: once a check started its
/// breaker's probes, they go on in the background until Redis answers one, and the limiter's
/// next check goes to Redis (before, probes rode on checks: an idle limiter stayed degraded,
/// and its first check after a quiet period was the policy's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_limiter_finds_its_store_back_without_traffic() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let limiter = closed(&proxy.url(), HEALTHY_TIMEOUT).await;
    connected(&limiter, "k").await;
    proxy.set(Fault::Refuse);
    // Checks for three probe intervals: one of them, a probe interval after the first
    // failure, starts the probes.
    let start = Instant::now();
    while start.elapsed() < 3 * PROBE_INTERVAL {
        assert!(limiter.check("k", rate()).await.is_err());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(limiter.is_degraded());
    let policy_answers = limiter.policy_answers();
    proxy.set(Fault::Pass);
    let ((), took) = wait_for(
        "the breaker closes without a check",
        STATE_DEADLINE,
        async || {
            tokio::time::sleep(Duration::from_millis(10)).await;
            (!limiter.is_degraded()).then_some(())
        },
    )
    .await;
    eprintln!("back on Redis {took:?} after it listened again, without a check");
    assert_eq!(limiter.policy_answers(), policy_answers, "a check was made");
    let decision = limiter.check("k", rate()).await.expect("Redis answers");
    assert!(!decision.answered_by_policy());
}

/// The probes run in the background, yet a caller that awaits nothing but checks (a loop on a
/// one-thread runtime, whose checks an open breaker answers at once) still lets them run: an
/// open breaker's answer yields to the runtime now and then, and the loop is back on Redis
/// once it answers again (without the yield, the probes never ran and the loop stayed on the
/// policy for good).
#[test]
fn a_caller_that_awaits_only_checks_still_lets_the_probes_run() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let runtime = current_thread();
    let limiter = runtime.block_on(closed(&proxy.url(), HEALTHY_TIMEOUT));
    runtime.block_on(connected(&limiter, "k"));
    proxy.set(Fault::Refuse);
    let (checks, took) = runtime.block_on(async {
        let start = Instant::now();
        let mut checks = 0_u64;
        let mut passing = None;
        loop {
            let answer = limiter.check("k", rate()).await;
            checks += 1;
            match (passing, answer) {
                (Some(since), Ok(decision)) if !decision.answered_by_policy() => {
                    return (checks, Instant::now() - since);
                }
                (None, _) if limiter.is_degraded() && start.elapsed() > 3 * PROBE_INTERVAL => {
                    proxy.set(Fault::Pass);
                    passing = Some(Instant::now());
                }
                _ => {}
            }
            assert!(
                start.elapsed() < STATE_DEADLINE,
                "still answered by the policy after {checks} checks"
            );
        }
    });
    eprintln!("{checks} checks in a loop; back on Redis {took:?} after it listened again");
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A probe started by a check on a short-lived runtime (a test, a worker) that then ends: the
/// probe ends with it, and a later check starts another, which finds Redis healthy and closes
/// the breaker.
#[test]
fn a_probe_dropped_with_its_runtime_does_not_keep_the_breaker_open() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let main = current_thread();
    let limiter = main.block_on(closed(&proxy.url(), Duration::from_secs(1)));
    main.block_on(connected(&limiter, "k"));
    proxy.set(Fault::Refuse);
    assert!(main.block_on(limiter.check("k", rate())).is_err());
    assert!(limiter.is_degraded());
    proxy.set(Fault::Pass);
    std::thread::sleep(Duration::from_millis(150)); // a probe is due
    {
        let short = current_thread();
        short.block_on(async {
            let mut check = pin!(limiter.check("k", rate()));
            std::future::poll_fn(|cx| {
                let _ = check.as_mut().poll(cx);
                Poll::Ready(())
            })
            .await;
        });
    }
    let ((), took) = main.block_on(wait_for("the breaker closes", STATE_DEADLINE, async || {
        limiter.check("k", rate()).await.ok().map(|_| ())
    }));
    eprintln!("back on Redis {took:?} after the dropped probe");
    assert!(!limiter.is_degraded());
}

/// A primary demoted to a replica (a failover behind a DNS name or an endpoint that the old
/// connection still points at) answers READONLY, from inside the script: an outage, and the
/// connection is dropped so that the next one can reach the new primary. Its probes meet
/// READONLY too, so the breaker stays open, for an ACL user allowed only what checks need.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_primary_is_an_outage_and_its_connection_is_dropped() {
    let old = TestRedis::start_private();
    let new = TestRedis::start_private();
    let proxy = FaultProxy::start(old.address());
    let mut admin = old.connection().await;
    // The least the guide's ACL table asks for log checks: a probe needs nothing more.
    acl_user(
        &mut admin,
        &["+@scripting", "+@sortedset", "+pexpire", "+pttl", "+time"],
    )
    .await;
    let url = proxy.url().replacen("redis://", "redis://rl:pw@", 1);
    let limiter = closed(&url, HEALTHY_TIMEOUT).await;
    limiter.check("k", rate()).await.unwrap();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(new.address().port())
        .query_async(&mut admin)
        .await
        .unwrap();
    // Once it has synchronised with its primary (before, it may be loading its data set).
    wait_for("the old primary replicates", STATE_DEADLINE, async || {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut admin)
            .await
            .unwrap();
        info.lines()
            .any(|line| line.trim() == "master_link_status:up")
            .then_some(())
    })
    .await;
    let accepted = proxy.accepted();
    let error = limiter.check("k", rate()).await.unwrap_err();
    assert!(error.to_string().contains("read only"), "{error}");
    assert!(limiter.is_degraded());
    // Each probe connects afresh, and fails as a check would (a write, refused): the breaker
    // stays open, every check answered `CircuitOpen` without reaching the replica (a probe
    // that only read would close it, and the next check would meet READONLY again).
    let mut answers = 0;
    wait_for("three probes connect afresh", STATE_DEADLINE, async || {
        if proxy.accepted() >= accepted + 3 {
            return Some(());
        }
        let result = limiter.check("k", rate()).await;
        assert!(
            matches!(
                result,
                Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_)))
            ),
            "a check after the breaker opened on a replica: {result:?}"
        );
        answers += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
        None
    })
    .await;
    eprintln!("{answers} checks answered CircuitOpen while three probes met the replica");
    assert!(limiter.is_degraded());
}

/// An ACL user without a command the script runs (here `PEXPIRE`, `PTTL`): Redis answers,
/// with an error, so each such check gets the policy's answer (here `Closed`'s error), and
/// the breaker stays closed (an error reply concerns its call, never the store: see
/// `exact_under_faults.rs` for `OOM`).
#[tokio::test]
async fn a_missing_acl_permission_is_answered_by_the_policy_without_opening_the_breaker() {
    let redis = TestRedis::start_private();
    acl_user(
        &mut redis.connection().await,
        &["+@scripting", "+@sortedset", "+time"],
    )
    .await;
    let limiter = closed(
        &format!("redis://rl:pw@{}/", redis.address()),
        HEALTHY_TIMEOUT,
    )
    .await;
    let error = limiter.check("k", rate()).await.unwrap_err();
    assert!(
        error.to_string().contains("can't run this command"),
        "{error}"
    );
    assert!(!limiter.is_degraded());
    // The next check goes to Redis again, and is refused again.
    let again = limiter.check("k", rate()).await.unwrap_err();
    assert!(
        again.to_string().contains("can't run this command"),
        "{again}"
    );
    assert_eq!(limiter.policy_answers(), 2);
}
