//! Failure behaviour against real processes: a private `redis-server` behind a TCP proxy that
//! refuses, stalls, delays and cuts connections on command (`tests::proxy`), and a server
//! killed and restarted on its port.
//!
//! Each test asserts the answer (which policy gave it, and with the `Closed` policy its kind:
//! `CircuitOpen` when the open breaker answered without asking Redis), that it came in bounded
//! time (the limiter's timeout bounds every check; ten times it is asserted, as a guard against
//! a check that hangs, not a speed measurement), and afterwards that the key's sorted set holds
//! exactly the admissions the callers saw from Redis (plus, for a call cut off after Redis ran
//! it, that call, counted once even when it is resent on a new connection).
//!
//! A fault lasts until the test ends it (`FaultProxy::set(Fault::Pass)`); the tests wait for
//! states (Redis answering again, polled within `tests::STATE_DEADLINE`), never for a guessed
//! time, and assert only bounds the design guarantees (an open breaker's probes are one at a
//! time, at most every 100 ms after the previous one failed). Measured times are printed
//! (`cargo test -- --nocapture` shows them).

use std::time::{Duration, Instant};

use ratelimit_runtime::{Decision, FailurePolicy, Limiter, Rate, RateLimitError, StoreError};
use redis::AsyncCommands as _;
use tests::proxy::{Fault, FaultProxy};
use tests::{STATE_DEADLINE, TestRedis, at_secs, connected, spare_port, unique_prefix, wait_for};

/// The limiter's timeout in these tests.
const TIMEOUT: Duration = Duration::from_millis(200);
/// The most a check may take: the timeout bounds every check by design; ten times it leaves
/// room for a loaded machine.
const BOUND: Duration = Duration::from_millis(200 * 10);
/// While a breaker is open, the least time between a failed probe and the next probe.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// The start of the tests' explicit timeline (seconds since the Unix epoch).
const T0: f64 = 1_800_000_000.0;

fn rate() -> Rate {
    Rate::new(5, Duration::from_secs(60)).unwrap()
}

/// A check's answer, whether the failure policy gave it, and how long it took.
struct Answer {
    result: Result<Decision, RateLimitError>,
    by_policy: bool,
    took: Duration,
}

impl Answer {
    fn admitted(&self) -> bool {
        matches!(&self.result, Ok(decision) if decision.allowed)
    }
}

/// Checks `key` at `T0 + seconds`, noting whether the policy answered (the limiter's count of
/// policy answers moved; these tests check one call at a time per limiter).
async fn check(limiter: &Limiter, key: &str, seconds: f64) -> Answer {
    let before = limiter.policy_answers();
    let started = Instant::now();
    let result = limiter.check_at(key, rate(), at_secs(T0 + seconds)).await;
    Answer {
        result,
        by_policy: limiter.policy_answers() > before,
        took: started.elapsed(),
    }
}

/// The first answer from Redis once it can answer again ([`until_redis_answers`]).
struct Recovery {
    answer: Answer,
    /// Since the fault ended.
    took: Duration,
    /// Checks answered by the policy meanwhile that waited the whole timeout: each may have
    /// reached Redis and run there unseen (on an idle machine, none: a probe of a healthy Redis
    /// is answered well within the timeout).
    may_have_run: u64,
}

/// Checks until Redis answers one (polling every 5 ms, within `STATE_DEADLINE`), and returns
/// that answer with the time since `since`.
async fn until_redis_answers(
    limiter: &Limiter,
    key: &str,
    seconds: f64,
    since: Instant,
) -> Recovery {
    let mut may_have_run = 0;
    let (answer, _) = wait_for("checks go back to Redis", STATE_DEADLINE, async || {
        let answer = check(limiter, key, seconds).await;
        if !answer.by_policy {
            return Some(answer);
        }
        may_have_run += u64::from(answer.took >= TIMEOUT);
        None
    })
    .await;
    Recovery {
        answer,
        took: since.elapsed(),
        may_have_run,
    }
}

/// The most probes an open breaker can make in `elapsed`, by design: one at a time, each
/// taking at least `probe_takes` (the whole timeout on a stalled Redis), the next no sooner
/// than 100 ms after the previous one failed.
fn most_probes(elapsed: Duration, probe_takes: Duration) -> u64 {
    let cycle = (probe_takes + PROBE_INTERVAL).as_nanos();
    1 + u64::try_from(elapsed.as_nanos() / cycle).unwrap_or(u64::MAX)
}

async fn zcard(redis: &TestRedis, key: &str) -> u64 {
    redis.connection().await.zcard(key).await.unwrap()
}

async fn limiter(url: &str, prefix: &str, policy: FailurePolicy) -> Limiter {
    Limiter::builder()
        .redis_url(url)
        .key_prefix(prefix)
        .failure_policy(policy)
        .timeout(TIMEOUT)
        .build()
        .unwrap()
}

/// The policy's answer to the first check of an outage, on a key with no local history.
fn assert_policy_answer(policy: FailurePolicy, answer: &Answer, what: &str) {
    assert!(answer.by_policy, "{what}: not answered by the policy");
    match policy {
        FailurePolicy::Open | FailurePolicy::Local => {
            assert!(answer.admitted(), "{what}: {:?}", answer.result);
        }
        FailurePolicy::Closed => assert!(
            matches!(answer.result, Err(RateLimitError::Unavailable(_))),
            "{what}: {:?}",
            answer.result
        ),
        _ => unreachable!(),
    }
}

/// One fault under one policy: admissions before it, answers in bounded time during it (the
/// first one waits at most the timeout, the rest are answered at once by the open circuit but
/// for its probes), checks back on Redis once it is over, and the sorted set matching what
/// callers saw.
async fn fault_scenario(fault: Fault, policy: FailurePolicy) {
    let what = format!("{fault:?} under {policy:?}");
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("fault");
    let limiter = limiter(&proxy.url(), &prefix, policy).await;
    let key = "user:1";
    let full_key = format!("{prefix}{key}");
    connected(&limiter, "warm-up").await;

    let mut from_redis = 0;
    for second in [0.0, 1.0] {
        let answer = check(&limiter, key, second).await;
        assert!(
            answer.admitted() && !answer.by_policy,
            "{what}: {:?}",
            answer.result
        );
        from_redis += 1;
    }

    proxy.set(fault);
    let first = check(&limiter, key, 2.0).await;
    assert_policy_answer(policy, &first, &what);
    assert!(
        first.took < BOUND,
        "{what}: the first answer took {:?}",
        first.took
    );
    if fault == Fault::Stall {
        assert!(
            matches!(
                &first.result,
                Err(RateLimitError::Unavailable(StoreError::Timeout(_)))
            ) || first.result.is_ok(),
            "{what}: {:?}",
            first.result
        );
    }

    // The circuit is open: the next checks are answered by the policy without waiting on the
    // store, except a probe now and then (one at a time, at most every 100 ms after the last
    // one failed), which waits the timeout on a stalled Redis. Which checks went to the store:
    // under `Closed`, those not answered `CircuitOpen`; on a stalled Redis, under any policy,
    // one new connection each (the store connects afresh after a timeout, and a stalled
    // connection never completes its handshake).
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    let mut local_admitted = usize::from(first.admitted());
    let accepted = proxy.accepted();
    let looped = Instant::now();
    for i in 0..20 {
        let answer = check(&limiter, key, 3.0 + f64::from(i) / 100.0).await;
        assert!(answer.by_policy, "{what}: check {i} reached Redis");
        assert!(
            answer.took < BOUND,
            "{what}: check {i} took {:?}",
            answer.took
        );
        if policy == FailurePolicy::Closed {
            match &answer.result {
                Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_))) => {}
                Err(RateLimitError::Unavailable(_)) => probes += 1,
                other => panic!("{what}: check {i}: {other:?}"),
            }
        }
        slowest = slowest.max(answer.took);
        local_admitted += usize::from(answer.admitted());
    }
    let looped = looped.elapsed();
    let connections = u64::try_from(proxy.accepted() - accepted).unwrap();
    let probe_takes = if fault == Fault::Stall {
        TIMEOUT
    } else {
        Duration::ZERO
    };
    let most = most_probes(looped, probe_takes);
    assert!(
        probes <= most,
        "{what}: {probes} of 20 checks went to the store in {looped:?}"
    );
    if fault == Fault::Stall {
        assert!(
            connections <= most,
            "{what}: {connections} of 20 checks went to the store in {looped:?}"
        );
    }
    match policy {
        FailurePolicy::Open => assert_eq!(local_admitted, 21, "{what}"),
        FailurePolicy::Closed => assert_eq!(local_admitted, 0, "{what}"),
        // Local: the same rate, per process: 5 of the 21.
        _ => assert_eq!(local_admitted, 5, "{what}"),
    }

    proxy.set(Fault::Pass);
    let healed = Instant::now();
    let recovery = until_redis_answers(&limiter, key, 4.0, healed).await;
    let answer = &recovery.answer;
    assert!(answer.admitted(), "{what}: {:?}", answer.result);
    from_redis += 1;

    // What Redis holds: the admissions callers saw from it, plus the call cut off after Redis
    // ran it (CutMidCall), or possibly the stalled call the proxy delivered once it passed
    // traffic again (Stall), or possibly a check that timed out on a loaded machine after the
    // fault (none on an idle one). Never a call counted twice, never one lost.
    let recorded = zcard(&redis, &full_key).await;
    let (least, most) = match fault {
        Fault::CutMidCall => (1, 1),
        Fault::Stall => (0, 1),
        _ => (0, 0),
    };
    let most = most + recovery.may_have_run;
    let unseen = recorded - from_redis;
    assert!(
        (least..=most).contains(&unseen),
        "{what}: Redis holds {recorded} admissions, callers saw {from_redis} from it"
    );
    // The decision Redis gave agrees with its set: nothing double-counted (a check that timed
    // out after the fault may have run after it).
    let Ok(decision) = &answer.result else {
        unreachable!()
    };
    assert!(
        (5 - recorded..=5 - recorded + recovery.may_have_run).contains(&decision.remaining),
        "{what}: {decision:?}, Redis holds {recorded}"
    );
    eprintln!(
        "{what}: first answer {:?}; of the next 20, {probes} probe(s) (Closed) and \
         {connections} new connection(s) in {looped:?}, slowest {slowest:?}; back on Redis \
         {:?} after the fault; Redis holds {recorded} = {from_redis} seen + {unseen} unseen",
        first.took, recovery.took
    );
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn refused_connections_are_answered_by_each_policy() {
    for policy in [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Local,
    ] {
        fault_scenario(Fault::Refuse, policy).await;
    }
}

#[tokio::test]
async fn a_stalled_redis_is_answered_by_each_policy_within_the_timeout() {
    for policy in [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Local,
    ] {
        fault_scenario(Fault::Stall, policy).await;
    }
}

#[tokio::test]
async fn a_connection_cut_mid_call_is_answered_by_each_policy_and_never_resent() {
    for policy in [
        FailurePolicy::Open,
        FailurePolicy::Closed,
        FailurePolicy::Local,
    ] {
        fault_scenario(Fault::CutMidCall, policy).await;
    }
}

/// Replies slower than the timeout are answered by the policy, replies slower but within it by
/// Redis. The delays are far from the timeout on either side, so that a loaded machine cannot
/// move a round trip across it: 2 x 30 ms within 1 s, and 2 x 600 ms past it.
#[tokio::test]
async fn a_slow_redis_within_the_timeout_still_answers() {
    const SLOW_TIMEOUT: Duration = Duration::from_secs(1);
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("slow");
    let limiter = Limiter::builder()
        .redis_url(proxy.url())
        .key_prefix(&prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(SLOW_TIMEOUT)
        .build()
        .unwrap();
    connected(&limiter, "warm-up").await;
    assert!(check(&limiter, "k", 0.0).await.admitted());

    // 2 × 30 ms per round trip: slow, but within the timeout.
    proxy.set(Fault::Delay(Duration::from_millis(30)));
    let answer = check(&limiter, "k", 1.0).await;
    assert!(
        answer.admitted() && !answer.by_policy,
        "{:?}",
        answer.result
    );
    assert!(
        answer.took >= Duration::from_millis(60),
        "{:?}",
        answer.took
    );
    let within = answer.took;

    // 2 × 600 ms: past the timeout, answered by the policy when it runs out.
    proxy.set(Fault::Delay(Duration::from_millis(600)));
    let answer = check(&limiter, "k", 2.0).await;
    assert!(
        matches!(
            answer.result,
            Err(RateLimitError::Unavailable(StoreError::Timeout(_)))
        ),
        "{:?}",
        answer.result
    );
    assert!(answer.took < SLOW_TIMEOUT * 10, "{:?}", answer.took);
    let past = answer.took;

    proxy.set(Fault::Pass);
    let recovery = until_redis_answers(&limiter, "k", 3.0, Instant::now()).await;
    // The call that timed out may have run once its bytes got through (never twice).
    let recorded = zcard(&redis, &format!("{prefix}k")).await;
    assert!(
        (3..=4 + recovery.may_have_run).contains(&recorded),
        "{recorded}"
    );
    let remaining = recovery.answer.result.unwrap().remaining;
    assert!(
        (5 - recorded..=5 - recorded + recovery.may_have_run).contains(&remaining),
        "{remaining}, Redis holds {recorded}"
    );
    eprintln!(
        "delay within the timeout: answered in {within:?}; past it: in {past:?}; back on Redis \
         {:?} after it",
        recovery.took
    );
    redis.clean_up(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_callers_on_a_stalled_redis_all_get_answers_in_bounded_time() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("stall50");
    let limiter = limiter(&proxy.url(), &prefix, FailurePolicy::Local).await;
    connected(&limiter, "warm-up").await;
    assert!(check(&limiter, "warm", 0.0).await.admitted());

    proxy.set(Fault::Stall);
    let started = Instant::now();
    let callers: Vec<_> = (0..50)
        .map(|i| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let result = limiter
                    .check_at(&format!("user:{i}"), rate(), at_secs(T0 + 1.0))
                    .await;
                (result, started.elapsed())
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    for caller in callers {
        let (result, took) = caller.await.unwrap();
        assert!(result.unwrap().allowed, "Local admits each new key");
        slowest = slowest.max(took);
    }
    assert!(slowest < BOUND, "{slowest:?}");
    assert_eq!(limiter.policy_answers(), 50);
    eprintln!(
        "50 callers on a stalled Redis: slowest answer {slowest:?}, all in {:?}",
        started.elapsed()
    );
    drop(proxy);
}

/// A server killed and started again on its port (empty, without the script): checks are
/// answered by the policy meanwhile, and go back to Redis once it accepts connections,
/// through a reconnection and a script reload no caller sees.
#[tokio::test]
async fn after_a_restart_checks_go_back_to_redis() {
    let port = spare_port();
    let mut redis = TestRedis::start_on(port).expect("start redis-server");
    let prefix = unique_prefix("restart");
    let limiter = limiter(redis.url(), &prefix, FailurePolicy::Closed).await;
    connected(&limiter, "warm-up").await;
    assert!(check(&limiter, "k", 0.0).await.admitted());

    redis.stop();
    let down = check(&limiter, "k", 1.0).await;
    assert!(
        matches!(down.result, Err(RateLimitError::Unavailable(_))),
        "{:?}",
        down.result
    );
    assert!(down.took < BOUND, "{:?}", down.took);
    // The open circuit answers at once, but for a probe now and then (at most every 100 ms),
    // which a refused connection fails at once.
    wait_for(
        "a check is answered by the open circuit",
        STATE_DEADLINE,
        async || {
            let next = check(&limiter, "k", 1.5).await;
            match next.result {
                Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_))) => Some(()),
                Err(RateLimitError::Unavailable(_)) => None,
                other => panic!("Redis is down: {other:?}"),
            }
        },
    )
    .await;
    assert!(limiter.is_degraded());

    let redis = TestRedis::start_on(port).expect("start redis-server again on its port");
    let accepting = Instant::now();
    let recovery = until_redis_answers(&limiter, "k", 2.0, accepting).await;
    assert!(recovery.answer.admitted(), "{:?}", recovery.answer.result);
    assert!(!limiter.is_degraded());
    // The restarted server started empty: the one admission since (and any check that timed
    // out on a loaded machine meanwhile, which may have run).
    let recorded = zcard(&redis, &format!("{prefix}k")).await;
    assert!(
        (1..=1 + recovery.may_have_run).contains(&recorded),
        "{recorded}"
    );
    eprintln!(
        "restart: down answered in {:?}, back on Redis {:?} after it accepted connections",
        down.took, recovery.took
    );
}

/// The same, for a limiter that was built while Redis was down and never reached it.
#[tokio::test]
async fn a_limiter_built_while_redis_is_down_works_once_it_comes_up() {
    let port = spare_port();
    let prefix = unique_prefix("late");
    let limiter = limiter(
        &format!("redis://127.0.0.1:{port}/"),
        &prefix,
        FailurePolicy::Local,
    )
    .await;
    let down = check(&limiter, "k", 0.0).await;
    assert!(down.by_policy && down.admitted());
    assert!(down.took < BOUND, "{:?}", down.took);

    let redis = TestRedis::start_on(port).expect("start redis-server on the chosen port");
    let accepting = Instant::now();
    let recovery = until_redis_answers(&limiter, "k", 1.0, accepting).await;
    assert!(recovery.answer.admitted());
    let recorded = zcard(&redis, &format!("{prefix}k")).await;
    assert!(
        (1..=1 + recovery.may_have_run).contains(&recorded),
        "{recorded}"
    );
    eprintln!(
        "built while down: first Redis answer {:?} after it came up",
        recovery.took
    );
}
