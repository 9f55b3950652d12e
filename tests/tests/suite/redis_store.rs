//! What only the Redis store does: atomicity across processes, unique members, expiry, key
//! layout, the script cache, and answers when Redis is down or silent. Real `redis-server`s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate, RateLimitError, StoreError};
use redis::AsyncCommands;
use tests::{TestRedis, at_micros, unique_prefix};

const T0: u64 = 1_700_000_000_000_000;

async fn limiter(redis: &TestRedis, prefix: &str) -> Limiter {
    Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("build a Redis limiter")
}

fn rate(threshold: u64, period: Duration) -> Rate {
    Rate::new(threshold, period).expect("valid rate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_hundred_callers_through_four_limiters_admit_exactly_fifty() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("concurrent");
    let mut limiters = Vec::new();
    for _ in 0..4 {
        limiters.push(limiter(&redis, &prefix).await);
    }
    let limit = rate(50, Duration::from_secs(60));
    let barrier = Arc::new(tokio::sync::Barrier::new(400));
    let mut callers = Vec::new();
    for caller in 0..400 {
        let limiter = limiters[caller % 4].clone();
        let barrier = Arc::clone(&barrier);
        callers.push(tokio::spawn(async move {
            barrier.wait().await;
            limiter
                .check("hot", limit)
                .await
                .expect("check succeeds")
                .allowed
        }));
    }
    let mut admitted = 0;
    for caller in callers {
        admitted += u32::from(caller.await.expect("caller finished"));
    }
    assert_eq!(admitted, 50);
    let mut redis_connection = redis.connection().await;
    let recorded: u64 = redis_connection
        .zcard(format!("{prefix}hot"))
        .await
        .unwrap();
    assert_eq!(recorded, 50, "exactly the admissions are recorded");
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn same_microsecond_admissions_from_many_limiters_are_distinct_members() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("members");
    let limit = rate(1_000, Duration::from_secs(60));
    for _ in 0..4 {
        let limiter = limiter(&redis, &prefix).await;
        for _ in 0..10 {
            let decision = limiter
                .check_at("same", limit, at_micros(T0))
                .await
                .unwrap();
            assert!(decision.allowed);
        }
    }
    let mut connection = redis.connection().await;
    let members: Vec<(String, u64)> = connection
        .zrange_withscores(format!("{prefix}same"), 0, -1)
        .await
        .unwrap();
    assert_eq!(members.len(), 40);
    assert!(members.iter().all(|(_, score)| *score == T0));
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn scores_keep_full_microsecond_precision() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("precision");
    let limiter = limiter(&redis, &prefix).await;
    let limit = rate(10, Duration::from_secs(60));
    let times = [T0 + 123_457, T0 + 123_458, 4_000_000_000_000_001];
    for time in times {
        limiter
            .check_at(&time.to_string(), limit, at_micros(time))
            .await
            .unwrap();
    }
    let mut connection = redis.connection().await;
    for time in times {
        let scores: Vec<(String, u64)> = connection
            .zrange_withscores(format!("{prefix}{time}"), 0, -1)
            .await
            .unwrap();
        assert_eq!(scores.len(), 1);
        assert_eq!(scores[0].1, time);
    }
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn keys_expire_once_their_newest_admission_leaves_the_window() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("ttl");
    let limiter = limiter(&redis, &prefix).await;
    let mut connection = redis.connection().await;
    for period_ms in [1_u64, 1_500, 30_000, 86_400_000] {
        let key = format!("period-{period_ms}");
        let limit = rate(2, Duration::from_millis(period_ms));
        let started = Instant::now();
        limiter.check(&key, limit).await.unwrap();
        let ttl: i64 = connection.pttl(format!("{prefix}{key}")).await.unwrap();
        // Set to period + 1 ms, and at least 1 s.
        let set = (period_ms as i64 + 1).max(1_000);
        assert_ttl(&format!("{period_ms} ms"), ttl, set, started.elapsed());
    }
    // A denial does not extend the TTL; a later admission (explicit time) does, to cover the
    // newest admission.
    let limit = rate(2, Duration::from_secs(10));
    limiter
        .check_at("explicit", limit, at_micros(T0))
        .await
        .unwrap();
    let started = Instant::now();
    limiter
        .check_at("explicit", limit, at_micros(T0 + 4_000_001))
        .await
        .unwrap();
    let ttl: i64 = connection.pttl(format!("{prefix}explicit")).await.unwrap();
    assert_ttl("explicit", ttl, 10_001, started.elapsed());
    redis.clean_up(&prefix).await;
}

/// Asserts that `ttl` (`PTTL`, read `waited` after the start of the check whose `PEXPIRE` set
/// it to `set` ms) is at most `set`, and at least `set` minus the time since (rounded up, plus
/// a millisecond for each clock's truncation), or that the key is gone (-2) when that time
/// reached `set`. The time a loaded machine takes between the check and the read is measured,
/// not guessed.
fn assert_ttl(what: &str, ttl: i64, set: i64, waited: Duration) {
    let waited_ms = i64::try_from(waited.as_millis()).unwrap() + 2;
    if ttl == -2 {
        assert!(
            waited_ms >= set,
            "{what}: the key is gone {waited:?} after its TTL was set to {set} ms"
        );
    } else {
        assert!(
            (set - waited_ms..=set).contains(&ttl),
            "{what}: PTTL {ttl} ms, {waited:?} after it was set to {set} ms"
        );
    }
}

#[tokio::test]
async fn keys_stay_under_the_prefix() {
    let redis = TestRedis::start_private();
    let prefix = unique_prefix("layout");
    let limiter = limiter(&redis, &prefix).await;
    let limit = rate(5, Duration::from_secs(60));
    for key in ["a", "b:c", "{x}"] {
        limiter.check(key, limit).await.unwrap();
    }
    limiter
        .check_at("explicit", limit, at_micros(T0))
        .await
        .unwrap();
    let mut connection = redis.connection().await;
    let mut keys: Vec<String> = connection.keys("*").await.unwrap();
    keys.sort();
    let expected: Vec<String> = ["a", "b:c", "explicit", "{x}"]
        .iter()
        .map(|key| format!("{prefix}{key}"))
        .collect();
    assert_eq!(keys, expected);
    let kind: String = redis::cmd("TYPE")
        .arg(&expected[0])
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(kind, "zset");
}

#[tokio::test]
async fn a_flushed_script_cache_is_invisible_to_callers() {
    // Private: flushing a shared server's scripts would disturb its other users.
    let redis = TestRedis::start_private();
    let prefix = unique_prefix("noscript");
    let limiter = limiter(&redis, &prefix).await;
    let limit = rate(2, Duration::from_secs(60));
    assert!(limiter.check("k", limit).await.unwrap().allowed);
    let mut connection = redis.connection().await;
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(limiter.check("k", limit).await.unwrap().allowed);
    assert!(!limiter.check("k", limit).await.unwrap().allowed);
}

/// A server that accepts connections and never answers: the check must give up in time.
async fn silent_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("redis://{}/", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (url, server)
}

async fn policy_limiter(url: &str, policy: FailurePolicy, timeout: Duration) -> Limiter {
    Limiter::builder()
        .redis_url(url)
        .failure_policy(policy)
        .timeout(timeout)
        .build()
        .unwrap()
}

#[tokio::test]
async fn failure_policies_answer_when_redis_is_down_or_silent() {
    let (silent, server) = silent_server().await;
    // A port held (bound, not listening) for the whole test: connections to it are refused,
    // and no server of a concurrent test can take it.
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind(([127, 0, 0, 1], 0).into()).unwrap();
    let refused = format!("redis://{}/", held.local_addr().unwrap());
    let limit = rate(1, Duration::from_secs(60));
    // The silent server is answered when the timeout runs out; the refused connection at once,
    // within a timeout long enough that a loaded machine cannot turn it into a timeout.
    for (url, timeout) in [
        (&silent, Duration::from_millis(200)),
        (&refused, Duration::from_secs(5)),
    ] {
        let started = Instant::now();
        let closed = policy_limiter(url, FailurePolicy::Closed, timeout).await;
        let error = closed.check("k", limit).await.unwrap_err();
        // A silent server is a timeout; a refused connection is reported as what it is.
        if url == &silent {
            assert!(
                matches!(error, RateLimitError::Unavailable(StoreError::Timeout(_))),
                "{error:?}"
            );
        } else {
            assert!(
                matches!(&error, RateLimitError::Unavailable(StoreError::Redis(cause)) if cause.is_connection_refusal()),
                "{error:?}"
            );
        }
        // Not a speed assertion: a guard against hanging on a silent server (ten times the
        // timeout that bounds the check).
        assert!(started.elapsed() < timeout * 10, "{:?}", started.elapsed());
        eprintln!("{url}: {error:?} in {:?}", started.elapsed());

        let open = policy_limiter(url, FailurePolicy::Open, timeout).await;
        assert!(open.check("k", limit).await.unwrap().allowed);
        assert!(open.check("k", limit).await.unwrap().allowed);

        let local = policy_limiter(url, FailurePolicy::Local, timeout).await;
        assert!(local.check("k", limit).await.unwrap().allowed);
        let denied = local.check("k", limit).await.unwrap();
        assert!(!denied.allowed, "the local fallback keeps limiting");
    }
    server.abort();
}

#[tokio::test]
async fn malformed_urls_fail_at_build_time() {
    for url in ["not a url", "http://127.0.0.1/", "redis://127.0.0.1:99999/"] {
        let error = Limiter::builder().redis_url(url).build().unwrap_err();
        assert!(
            matches!(error, RateLimitError::InvalidConfig(_)),
            "{url}: {error:?}"
        );
    }
    let error = Limiter::builder()
        .timeout(Duration::ZERO)
        .build()
        .unwrap_err();
    assert!(matches!(error, RateLimitError::InvalidConfig(_)));
}

#[test]
fn credentials_stay_out_of_debug_output() {
    let builder = Limiter::builder().redis_url("redis://user:hunter2@127.0.0.1/");
    assert!(!format!("{builder:?}").contains("hunter2"));
}

/// One limiter (say the process-wide default) used from runtime after runtime, as tests with
/// one runtime each do: no check fails because an earlier runtime, and the connection it
/// drove, is gone.
#[test]
fn a_limiter_outlives_the_runtimes_that_use_it() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("runtimes");
    let first = tokio::runtime::Runtime::new().unwrap();
    let limiter = first.block_on(limiter(&redis, &prefix));
    let limit = rate(100, Duration::from_secs(60));
    assert!(first.block_on(limiter.check("k", limit)).unwrap().allowed);
    drop(first);
    for _ in 0..5 {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let decision = runtime.block_on(limiter.check("k", limit));
        assert!(decision.expect("checks succeed on a new runtime").allowed);
    }
    runtime_for_clean_up().block_on(redis.clean_up(&prefix));
}

fn runtime_for_clean_up() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A key someone else wrote with another type fails alone (by the policy); other keys, and
/// the TTL a longer rate needs, are not affected.
#[tokio::test]
async fn a_foreign_key_fails_alone() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("foreign");
    let limiter = limiter(&redis, &prefix).await;
    let mut connection = redis.connection().await;
    let _: () = connection
        .set(format!("{prefix}poisoned"), "x")
        .await
        .unwrap();
    let limit = rate(5, Duration::from_secs(60));
    for _ in 0..3 {
        let error = limiter.check("poisoned", limit).await.unwrap_err();
        assert!(
            matches!(&error, RateLimitError::Unavailable(StoreError::Redis(cause)) if cause.code() == Some("WRONGTYPE")),
            "{error:?}"
        );
        assert!(limiter.check("healthy", limit).await.unwrap().allowed);
    }
    redis.clean_up(&prefix).await;
}

/// Two rates on one key (a shared `name`, or a deploy that changed a period): the shorter
/// one's admission never shortens the TTL the longer one's admissions need.
#[tokio::test]
async fn a_shorter_rate_never_shortens_the_ttl() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("two-rates");
    let limiter = limiter(&redis, &prefix).await;
    let long = rate(2, Duration::from_secs(100));
    let short = rate(2, Duration::from_millis(1));
    // One instant for both: the short rate's window then still holds the long admission.
    assert!(
        limiter
            .check_at("shared", long, at_micros(T0))
            .await
            .unwrap()
            .allowed
    );
    assert!(
        limiter
            .check_at("shared", short, at_micros(T0))
            .await
            .unwrap()
            .allowed
    );
    let mut connection = redis.connection().await;
    let ttl: i64 = connection.pttl(format!("{prefix}shared")).await.unwrap();
    assert!(
        ttl > 90_000,
        "the long rate's admission still needs the key: {ttl} ms"
    );
    redis.clean_up(&prefix).await;
}
