//! Failure behaviour against real processes: a private `redis-server` behind a TCP proxy that
//! refuses, stalls, delays and cuts connections on command (`tests::proxy`), and a server
//! killed and restarted on its port.
//!
//! Each test asserts the answer, the time it took (bounded by the limiter's timeout plus
//! scheduling slack: the promise of bounded answers, not a speed measurement), and afterwards
//! that the key's sorted set holds exactly the admissions the callers saw from Redis (plus, for
//! a call cut off after Redis ran it, that call, counted once even when it is resent on a new
//! connection). Measured times
//! are printed (`cargo test -- --nocapture` shows them).

use std::time::{Duration, Instant};

use ratelimit_runtime::{Decision, FailurePolicy, Limiter, Rate, RateLimitError, StoreError};
use redis::AsyncCommands as _;
use tests::proxy::{Fault, FaultProxy};
use tests::{TestRedis, at_secs, unique_prefix};

/// The limiter's timeout in these tests.
const TIMEOUT: Duration = Duration::from_millis(200);
/// The most an answer under a fault may take: the timeout, plus slack for a loaded machine.
const BOUND: Duration = Duration::from_millis(200 + 400);
/// The most checks may take to go back to Redis once it accepts connections again.
const RECOVERY: Duration = Duration::from_secs(1);
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

/// Checks until Redis answers one (polling every 5 ms, for at most `RECOVERY` plus slack), and
/// returns that answer with the time since `since`.
async fn until_redis_answers(
    limiter: &Limiter,
    key: &str,
    seconds: f64,
    since: Instant,
) -> (Answer, Duration) {
    let deadline = since + RECOVERY + Duration::from_secs(2);
    loop {
        let answer = check(limiter, key, seconds).await;
        if !answer.by_policy {
            return (answer, since.elapsed());
        }
        assert!(
            Instant::now() < deadline,
            "checks did not go back to Redis: {:?}",
            answer.result
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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
        .await
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
/// first one waits at most the timeout, the rest are answered at once by the open circuit),
/// checks back on Redis within a second after it, and the sorted set matching what callers saw.
async fn fault_scenario(fault: Fault, policy: FailurePolicy) {
    let what = format!("{fault:?} under {policy:?}");
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("fault");
    let limiter = limiter(&proxy.url(), &prefix, policy).await;
    let key = "user:1";
    let full_key = format!("{prefix}{key}");

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
    // store, except a probe now and then (every 100 ms at most), which waits the timeout.
    let mut slowest = Duration::ZERO;
    let mut slow = 0;
    let mut local_admitted = usize::from(first.admitted());
    for i in 0..20 {
        let answer = check(&limiter, key, 3.0 + f64::from(i) / 100.0).await;
        assert!(answer.by_policy, "{what}: check {i} reached Redis");
        assert!(
            answer.took < BOUND,
            "{what}: check {i} took {:?}",
            answer.took
        );
        slowest = slowest.max(answer.took);
        slow += usize::from(answer.took >= TIMEOUT / 2);
        local_admitted += usize::from(answer.admitted());
    }
    assert!(slow <= 2, "{what}: {slow} of 20 checks waited on the store");
    match policy {
        FailurePolicy::Open => assert_eq!(local_admitted, 21, "{what}"),
        FailurePolicy::Closed => assert_eq!(local_admitted, 0, "{what}"),
        // Local: the same rate, per process: 5 of the 21.
        _ => assert_eq!(local_admitted, 5, "{what}"),
    }

    proxy.set(Fault::Pass);
    let healed = Instant::now();
    let (answer, recovery) = until_redis_answers(&limiter, key, 4.0, healed).await;
    assert!(
        recovery < RECOVERY,
        "{what}: back on Redis after {recovery:?}"
    );
    assert!(answer.admitted(), "{what}: {:?}", answer.result);
    from_redis += 1;

    // What Redis holds: the admissions callers saw from it, plus the call cut off after Redis
    // ran it (CutMidCall), or possibly the stalled call the proxy delivered once it passed
    // traffic again (Stall). Never a call counted twice, never one lost.
    let recorded = zcard(&redis, &full_key).await;
    let ran_unseen = match fault {
        Fault::CutMidCall => 1..=1,
        Fault::Stall => 0..=1,
        _ => 0..=0,
    };
    let unseen = recorded - from_redis;
    assert!(
        ran_unseen.contains(&unseen),
        "{what}: Redis holds {recorded} admissions, callers saw {from_redis} from it"
    );
    // The decision Redis gave agrees with its set: nothing double-counted.
    let Ok(decision) = &answer.result else {
        unreachable!()
    };
    assert_eq!(decision.remaining, 5 - recorded, "{what}");
    eprintln!(
        "{what}: first answer {:?}, slowest of the next 20 {slowest:?}, back on Redis {recovery:?}, \
         Redis holds {recorded} = {from_redis} seen + {unseen} unseen",
        first.took
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

#[tokio::test]
async fn a_slow_redis_within_the_timeout_still_answers() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("slow");
    let limiter = limiter(&proxy.url(), &prefix, FailurePolicy::Closed).await;
    assert!(check(&limiter, "k", 0.0).await.admitted());

    // 2 × 30 ms per round trip: slow, but within the 200 ms timeout.
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

    // 2 × 150 ms: past the timeout, answered by the policy within it.
    proxy.set(Fault::Delay(Duration::from_millis(150)));
    let answer = check(&limiter, "k", 2.0).await;
    assert!(
        matches!(
            answer.result,
            Err(RateLimitError::Unavailable(StoreError::Timeout(_)))
        ),
        "{:?}",
        answer.result
    );
    assert!(answer.took < BOUND, "{:?}", answer.took);
    eprintln!("delay past the timeout: answered in {:?}", answer.took);

    proxy.set(Fault::Pass);
    let (answer, recovery) = until_redis_answers(&limiter, "k", 3.0, Instant::now()).await;
    assert!(recovery < RECOVERY, "{recovery:?}");
    // The call that timed out may have run once its bytes got through (never twice).
    let recorded = zcard(&redis, &format!("{prefix}k")).await;
    assert!((3..=4).contains(&recorded), "{recorded}");
    assert_eq!(answer.result.unwrap().remaining, 5 - recorded);
    redis.clean_up(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_callers_on_a_stalled_redis_all_get_answers_in_bounded_time() {
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("stall50");
    let limiter = limiter(&proxy.url(), &prefix, FailurePolicy::Local).await;
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
/// answered by the policy meanwhile, and go back to Redis within a second of it accepting
/// connections, through a reconnection and a script reload no caller sees.
#[tokio::test]
async fn after_a_restart_checks_go_back_to_redis_within_a_second() {
    let port = tests::free_port();
    let mut redis = TestRedis::start_on(port).expect("start redis-server");
    let prefix = unique_prefix("restart");
    let limiter = limiter(redis.url(), &prefix, FailurePolicy::Closed).await;
    assert!(check(&limiter, "k", 0.0).await.admitted());

    redis.stop();
    let down = check(&limiter, "k", 1.0).await;
    assert!(
        matches!(down.result, Err(RateLimitError::Unavailable(_))),
        "{:?}",
        down.result
    );
    assert!(down.took < BOUND, "{:?}", down.took);
    // The open circuit answers at once.
    let next = check(&limiter, "k", 1.5).await;
    assert!(matches!(
        next.result,
        Err(RateLimitError::Unavailable(StoreError::CircuitOpen(_)))
    ));
    assert!(limiter.is_degraded());

    let redis = TestRedis::start_on(port).expect("start redis-server again on its port");
    let accepting = Instant::now();
    let (answer, recovery) = until_redis_answers(&limiter, "k", 2.0, accepting).await;
    assert!(recovery < RECOVERY, "back on Redis after {recovery:?}");
    assert!(answer.admitted(), "{:?}", answer.result);
    assert!(!limiter.is_degraded());
    // The restarted server started empty: the one admission since.
    assert_eq!(zcard(&redis, &format!("{prefix}k")).await, 1);
    eprintln!(
        "restart: down answered in {:?}, back on Redis {recovery:?} after it accepted connections",
        down.took
    );
}

/// The same, for a limiter that was built while Redis was down and never reached it.
#[tokio::test]
async fn a_limiter_built_while_redis_is_down_works_within_a_second_of_it_coming_up() {
    let port = tests::free_port();
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
    let (answer, recovery) = until_redis_answers(&limiter, "k", 1.0, accepting).await;
    assert!(recovery < RECOVERY, "{recovery:?}");
    assert!(answer.admitted());
    assert_eq!(zcard(&redis, &format!("{prefix}k")).await, 1);
    eprintln!("built while down: first Redis answer {recovery:?} after it came up");
}
