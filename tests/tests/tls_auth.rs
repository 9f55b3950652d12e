//! Redis with TLS (a private CA, mutual TLS) and with credentials (an ACL user, `requirepass`),
//! and that no credential shows in `Debug`, `Display` or the logs. Real `redis-server`s, each
//! private to its test (see `tests::tls`): the TLS ones listen on a TLS port only
//! (`--port 0`), so any check that reaches them went over TLS.

use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, LimiterBuilder, Rate, RateLimitError};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use tests::tls::{AclRedis, TlsRedis};
use tests::{at_micros, unique_prefix};

const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;
/// The timeout of the limiters whose checks are meant to fail.
const FAILING_TIMEOUT: Duration = Duration::from_millis(500);
/// A check that fails must answer within this: its limiter's timeout bounds it by design; ten
/// times it leaves room for a loaded machine doing TLS handshakes in a debug build, and still
/// catches a check that hangs. (A failure is usually answered in milliseconds; the times are
/// printed.)
const BOUND: Duration = Duration::from_millis(500 * 10);
/// The timeout of the limiters whose checks are meant to succeed: generous, so that a loaded
/// machine doing TLS handshakes in a debug build does not make them flaky.
const WORKING_TIMEOUT: Duration = Duration::from_secs(5);

fn rate(threshold: u64, period: Duration) -> Rate {
    Rate::new(threshold, period).expect("valid rate")
}

/// A key prefix the ACL user may write under (`~ratelimit:*`).
fn acl_prefix(name: &str) -> String {
    format!("{}{}", AclRedis::KEY_PATTERN_PREFIX, unique_prefix(name))
}

/// A `Closed` limiter of `redis` trusting its CA, without a client identity.
fn tls_builder(redis: &TlsRedis, prefix: &str) -> LimiterBuilder {
    Limiter::builder()
        .redis_url(redis.url())
        .tls_ca_certificate(redis.ca_pem().to_vec())
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(WORKING_TIMEOUT)
}

/// A `Closed` limiter of the plain server at `url`.
fn plain_builder(url: &str, prefix: &str) -> LimiterBuilder {
    Limiter::builder()
        .redis_url(url)
        .key_prefix(prefix)
        .failure_policy(FailurePolicy::Closed)
        .timeout(WORKING_TIMEOUT)
}

fn build(builder: LimiterBuilder) -> Limiter {
    builder.build().expect("build a Redis limiter")
}

/// Threshold 3 per 10 s at explicit times, checked as `key` and read from Redis as
/// `redis_key`: 3 admitted, the 4th denied (and not recorded) until the first admission
/// leaves the window at exactly T0 + 10 s; the sorted set holds exactly the admissions.
async fn assert_exact(
    limiter: &Limiter,
    key: &str,
    redis_key: &str,
    connection: &mut MultiplexedConnection,
) {
    let limit = rate(3, Duration::from_secs(10));
    let mut remaining = Vec::new();
    for offset in 0..3 {
        let decision = limiter
            .check_at(key, limit, at_micros(T0 + offset * SECOND))
            .await
            .expect("check succeeds");
        assert!(decision.allowed, "call {offset} is admitted");
        remaining.push(decision.remaining);
    }
    assert_eq!(remaining, [2, 1, 0]);
    let denied = limiter
        .check_at(key, limit, at_micros(T0 + 3 * SECOND))
        .await
        .expect("check succeeds");
    assert!(!denied.allowed, "the 4th call in the window is denied");
    assert_eq!(denied.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(
        scores(connection, redis_key).await,
        [T0, T0 + SECOND, T0 + 2 * SECOND],
        "exactly the admissions are recorded, the denial is not"
    );
    let again = limiter
        .check_at(key, limit, at_micros(T0 + 10 * SECOND))
        .await
        .expect("check succeeds");
    assert!(
        again.allowed,
        "admitted once the first admission left the window"
    );
    assert_eq!(
        scores(connection, redis_key).await,
        [T0 + SECOND, T0 + 2 * SECOND, T0 + 10 * SECOND]
    );
    let ttl: i64 = connection.pttl(redis_key).await.expect("read the TTL");
    assert!(ttl > 0, "the key expires (PTTL {ttl})");
}

async fn scores(connection: &mut MultiplexedConnection, key: &str) -> Vec<u64> {
    let members: Vec<(String, u64)> = connection
        .zrange_withscores(key, 0, -1)
        .await
        .expect("read the sorted set");
    members.into_iter().map(|(_, score)| score).collect()
}

async fn exists(connection: &mut MultiplexedConnection, key: &str) -> bool {
    connection.exists(key).await.expect("read the key")
}

/// Checks twice with a `Closed` limiter that cannot use its store: both answer
/// `Err(Unavailable(_))` within [`BOUND`] (the first connection attempt, then a retry), and
/// the measured times are printed. Returns the first error.
async fn assert_unavailable(what: &str, limiter: &Limiter, key: &str) -> RateLimitError {
    let limit = rate(3, Duration::from_secs(10));
    let mut first = None;
    for attempt in 1..=2 {
        let started = Instant::now();
        let answer = tokio::time::timeout(
            tests::STATE_DEADLINE,
            limiter.check_at(key, limit, at_micros(T0)),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{what}: the check did not answer within {:?}",
                tests::STATE_DEADLINE
            )
        });
        let elapsed = started.elapsed();
        eprintln!("{what}: check {attempt} answered in {elapsed:?}: {answer:?}");
        let error = match answer {
            Err(error @ RateLimitError::Unavailable(_)) => error,
            other => panic!("{what}: expected Err(Unavailable(_)), got {other:?}"),
        };
        assert!(
            elapsed < BOUND,
            "{what}: check {attempt} took {elapsed:?}, not less than {BOUND:?}"
        );
        first.get_or_insert(error);
    }
    first.expect("two attempts")
}

/// The `Display` and `Debug` of `error` and of every error in its source chain.
fn error_texts(error: &(dyn std::error::Error + 'static)) -> String {
    use std::fmt::Write as _;
    let mut text = format!("{error}\n{error:?}");
    let mut source = error.source();
    while let Some(inner) = source {
        let _ = write!(text, "\n{inner}\n{inner:?}");
        source = inner.source();
    }
    text
}

/// The base64 lines of a PEM's body: any of them found in a text means the PEM leaked.
fn pem_body_lines(pem: &[u8]) -> Vec<String> {
    std::str::from_utf8(pem)
        .expect("PEM is text")
        .lines()
        .filter(|line| !line.starts_with("-----") && line.len() >= 16)
        .map(str::to_owned)
        .collect()
}

fn assert_hidden<S: AsRef<str>>(what: &str, text: &str, secrets: &[S]) {
    for secret in secrets {
        let secret = secret.as_ref();
        assert!(
            !text.contains(secret),
            "{what} shows the secret {secret:?}:\n{text}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// TLS

#[tokio::test]
async fn checks_over_tls_with_a_private_ca_are_exact_and_recorded() {
    let redis = TlsRedis::start();
    let prefix = unique_prefix("tls-exact");
    let limiter = build(tls_builder(&redis, &prefix));
    let mut connection = redis.connection().await;
    assert_exact(
        &limiter,
        "user-1",
        &format!("{prefix}user-1"),
        &mut connection,
    )
    .await;
}

#[tokio::test]
async fn checks_over_tls_with_the_server_clock_admit_up_to_the_threshold() {
    let redis = TlsRedis::start();
    let prefix = unique_prefix("tls-now");
    let limiter = build(tls_builder(&redis, &prefix));
    let limit = rate(2, Duration::from_secs(60));
    let mut allowed = Vec::new();
    for _ in 0..3 {
        allowed.push(limiter.check("now", limit).await.expect("check").allowed);
    }
    assert_eq!(allowed, [true, true, false]);
    let mut connection = redis.connection().await;
    let recorded: u64 = connection.zcard(format!("{prefix}now")).await.unwrap();
    assert_eq!(recorded, 2);
}

#[tokio::test]
async fn mutual_tls_with_the_client_identity_is_served() {
    let redis = TlsRedis::start_requiring_client_certificates();
    let prefix = unique_prefix("mtls");
    let limiter = build(tls_builder(&redis, &prefix).tls_client_identity(
        redis.client_cert_pem().to_vec(),
        redis.client_key_pem().to_vec(),
    ));
    let mut connection = redis.connection().await;
    assert_exact(
        &limiter,
        "user-2",
        &format!("{prefix}user-2"),
        &mut connection,
    )
    .await;
}

#[tokio::test]
async fn mutual_tls_without_a_client_identity_is_unavailable_when_closed() {
    let redis = TlsRedis::start_requiring_client_certificates();
    let prefix = unique_prefix("mtls-none");
    let limiter = build(tls_builder(&redis, &prefix).timeout(FAILING_TIMEOUT));
    assert_unavailable("mTLS without a client certificate", &limiter, "user-3").await;
    let mut connection = redis.connection().await;
    assert!(!exists(&mut connection, &format!("{prefix}user-3")).await);
}

#[tokio::test]
async fn a_server_certificate_from_another_ca_is_refused() {
    let redis = TlsRedis::start();
    let prefix = unique_prefix("tls-other-ca");
    let limiter = build(
        Limiter::builder()
            .redis_url(redis.url())
            .tls_ca_certificate(redis.unrelated_ca_pem().to_vec())
            .key_prefix(&prefix)
            .failure_policy(FailurePolicy::Closed)
            .timeout(FAILING_TIMEOUT),
    );
    assert_unavailable("server certificate from another CA", &limiter, "user-4").await;
    let mut connection = redis.connection().await;
    assert!(!exists(&mut connection, &format!("{prefix}user-4")).await);
}

#[tokio::test]
async fn platform_roots_do_not_trust_a_private_ca() {
    let redis = TlsRedis::start();
    let prefix = unique_prefix("tls-platform-roots");
    let limiter = build(
        Limiter::builder()
            .redis_url(redis.url())
            .key_prefix(&prefix)
            .failure_policy(FailurePolicy::Closed)
            .timeout(FAILING_TIMEOUT),
    );
    assert_unavailable("no CA given (platform roots)", &limiter, "user-5").await;
    let mut connection = redis.connection().await;
    assert!(!exists(&mut connection, &format!("{prefix}user-5")).await);
}

#[tokio::test]
async fn a_client_identity_with_a_malformed_key_never_shows_it() {
    let redis = TlsRedis::start_requiring_client_certificates();
    let prefix = unique_prefix("mtls-bad-key");
    let secret = "c2VjcmV0LWJ1dC1ub3QtYS1rZXktc2VjcmV0LWJ1dC1ub3QtYS1rZXk";
    let bad_key = format!("-----BEGIN PRIVATE KEY-----\n{secret}\n-----END PRIVATE KEY-----\n");
    let builder = tls_builder(&redis, &prefix)
        .timeout(FAILING_TIMEOUT)
        .tls_client_identity(redis.client_cert_pem().to_vec(), bad_key.into_bytes());
    assert_hidden("the builder's Debug", &format!("{builder:?}"), &[secret]);
    // Refused when built (a configuration error, not an outage), without echoing the key.
    let error = builder
        .build()
        .expect_err("a malformed client key is refused by build()");
    assert!(
        matches!(error, RateLimitError::InvalidConfig(_)),
        "expected InvalidConfig, got {error:?}"
    );
    assert_hidden("the build error", &error_texts(&error), &[secret]);
    let _ = redis;
}

// ---------------------------------------------------------------------------------------------
// ACL and requirepass

#[tokio::test]
async fn an_acl_user_in_the_url_is_served() {
    let redis = AclRedis::start();
    let prefix = acl_prefix("acl-user");
    let limiter = build(plain_builder(&redis.user_url(), &prefix));
    let mut connection = redis.connection().await;
    assert_exact(
        &limiter,
        "user-7",
        &format!("{prefix}user-7"),
        &mut connection,
    )
    .await;
}

#[tokio::test]
async fn requirepass_alone_in_the_url_is_served() {
    let redis = AclRedis::start();
    let prefix = unique_prefix("requirepass");
    let limiter = build(plain_builder(&redis.default_url(), &prefix));
    let mut connection = redis.connection().await;
    assert_exact(
        &limiter,
        "user-8",
        &format!("{prefix}user-8"),
        &mut connection,
    )
    .await;
}

#[tokio::test]
async fn a_wrong_password_is_unavailable_when_closed_and_never_shown() {
    let redis = AclRedis::start();
    let prefix = acl_prefix("acl-wrong");
    let wrong = format!("not-{}", redis.user_password());
    let url = redis.url_with(Some(AclRedis::USER), &wrong);
    let limiter = build(plain_builder(&url, &prefix).timeout(FAILING_TIMEOUT));
    let error = assert_unavailable("a wrong ACL password", &limiter, "user-9").await;
    let secrets = [wrong.as_str(), redis.user_password()];
    assert_hidden("the error", &error_texts(&error), &secrets);
    assert_hidden("the limiter's Debug", &format!("{limiter:?}"), &secrets);
    let mut connection = redis.connection().await;
    assert!(!exists(&mut connection, &format!("{prefix}user-9")).await);
}

#[tokio::test]
async fn a_wrong_requirepass_is_unavailable_when_closed() {
    let redis = AclRedis::start();
    let prefix = unique_prefix("requirepass-wrong");
    let wrong = format!("not-{}", redis.default_password());
    let limiter =
        build(plain_builder(&redis.url_with(None, &wrong), &prefix).timeout(FAILING_TIMEOUT));
    let error = assert_unavailable("a wrong requirepass", &limiter, "user-10").await;
    assert_hidden("the error", &error_texts(&error), &[wrong.as_str()]);
}

#[tokio::test]
async fn no_password_where_one_is_required_is_unavailable_when_closed() {
    let redis = AclRedis::start();
    let prefix = unique_prefix("noauth");
    let url = format!("redis://127.0.0.1:{}/", redis.port());
    let limiter = build(plain_builder(&url, &prefix).timeout(FAILING_TIMEOUT));
    assert_unavailable("no password", &limiter, "user-11").await;
}

#[tokio::test]
async fn an_acl_user_outside_its_key_pattern_is_unavailable_when_closed() {
    let redis = AclRedis::start();
    // Not under `ratelimit:`: the user may not touch these keys (NOPERM).
    let prefix = unique_prefix("acl-noperm");
    let limiter = build(plain_builder(&redis.user_url(), &prefix).timeout(FAILING_TIMEOUT));
    assert_unavailable("a key outside the ACL user's pattern", &limiter, "user-12").await;
    let mut connection = redis.connection().await;
    assert!(!exists(&mut connection, &format!("{prefix}user-12")).await);
}

// ---------------------------------------------------------------------------------------------
// No credential in Debug, Display or the logs

#[tokio::test]
async fn debug_of_builders_and_limiters_shows_no_credential() {
    let redis = TlsRedis::start_requiring_client_certificates();
    let password = "s3cr3t-in-debug";
    let url = format!("rediss://limiter:{password}@127.0.0.1:{}/", redis.port());
    let builder = Limiter::builder()
        .redis_url(&url)
        .tls_ca_certificate(redis.ca_pem().to_vec())
        .tls_client_identity(
            redis.client_cert_pem().to_vec(),
            redis.client_key_pem().to_vec(),
        )
        .key_prefix(unique_prefix("debug"))
        .failure_policy(FailurePolicy::Closed);
    let mut secrets = pem_body_lines(redis.client_key_pem());
    secrets.push(password.to_owned());
    secrets.push("PRIVATE KEY".to_owned());
    let debug = format!("{builder:?}");
    eprintln!("builder: {debug}");
    assert_hidden("the builder's Debug", &debug, &secrets);
    let debug = format!("{:#?}", builder.clone());
    assert_hidden("the builder's pretty Debug", &debug, &secrets);
    let limiter = build(builder);
    let debug = format!("{limiter:?} {limiter:#?}");
    eprintln!("limiter: {limiter:?}");
    assert_hidden("the limiter's Debug", &debug, &secrets);
}

#[tokio::test]
async fn build_errors_for_malformed_urls_show_no_password() {
    let password = "s3cr3t";
    for url in [
        "redis://user:s3cr3t@[bad",
        "rediss://user:s3cr3t@[bad",
        "redis://user:s3cr3t@127.0.0.1:notaport/",
        "rediss://:s3cr3t@127.0.0.1:99999/",
        "redis://user:s3cr3t@127.0.0.1:6379/notadb",
        "redis://user:s3cr3t@127.0.0.1:6379/?protocol=bogus",
        "http://user:s3cr3t@127.0.0.1:6379/",
    ] {
        let builder = Limiter::builder()
            .redis_url(url)
            .failure_policy(FailurePolicy::Closed);
        assert_hidden("the builder's Debug", &format!("{builder:?}"), &[password]);
        match builder.build() {
            Err(error) => {
                eprintln!("{url}: {error}");
                assert!(
                    matches!(error, RateLimitError::InvalidConfig(_)),
                    "{url}: expected InvalidConfig, got {error:?}"
                );
                assert_hidden(url, &error_texts(&error), &[password]);
            }
            Ok(limiter) => {
                // Accepted (redis-rs found it well formed): still nothing to show.
                eprintln!("{url}: accepted");
                assert_hidden(url, &format!("{limiter:?}"), &[password]);
            }
        }
    }
    let error = Limiter::builder()
        .redis_url("redis://user:s3cr3t@[bad")
        .build()
        .expect_err("a malformed URL does not build");
    assert!(matches!(error, RateLimitError::InvalidConfig(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_of_failing_checks_show_no_credential_and_no_key_above_debug() {
    capture::install();
    let acl = AclRedis::start();
    let tls = TlsRedis::start_requiring_client_certificates();
    let wrong = format!("not-{}", acl.user_password());
    let tls_password = format!("tlspw-{}", acl.default_password());
    let key = format!("leak-user-{}", std::process::id());
    let mut secrets = pem_body_lines(tls.client_key_pem());
    secrets.extend([
        wrong.clone(),
        acl.user_password().to_owned(),
        acl.default_password().to_owned(),
        tls_password.clone(),
    ]);
    let failing = [
        // A wrong ACL password.
        (
            "a wrong ACL password",
            Limiter::builder().redis_url(acl.url_with(Some(AclRedis::USER), &wrong)),
        ),
        // A password the TLS server does not expect, with a client identity, and a CA that did
        // not sign the server's certificate.
        (
            "TLS with an unrelated CA, a client identity and a password",
            Limiter::builder()
                .redis_url(format!(
                    "rediss://limiter:{tls_password}@127.0.0.1:{}/",
                    tls.port()
                ))
                .tls_ca_certificate(tls.unrelated_ca_pem().to_vec())
                .tls_client_identity(
                    tls.client_cert_pem().to_vec(),
                    tls.client_key_pem().to_vec(),
                ),
        ),
        // The right CA and identity, but a password nobody set: AUTH fails.
        (
            "TLS with a client identity and a wrong password",
            Limiter::builder()
                .redis_url(format!(
                    "rediss://limiter:{tls_password}@127.0.0.1:{}/",
                    tls.port()
                ))
                .tls_ca_certificate(tls.ca_pem().to_vec())
                .tls_client_identity(
                    tls.client_cert_pem().to_vec(),
                    tls.client_key_pem().to_vec(),
                ),
        ),
    ];
    let limit = rate(3, Duration::from_secs(10));
    for (what, builder) in failing {
        for policy in [
            FailurePolicy::Closed,
            FailurePolicy::Local,
            FailurePolicy::Open,
        ] {
            let limiter = build(
                builder
                    .clone()
                    .key_prefix(acl_prefix("leak"))
                    .failure_policy(policy)
                    .timeout(FAILING_TIMEOUT),
            );
            for _ in 0..2 {
                let started = Instant::now();
                let answer = limiter.check_at(&key, limit, at_micros(T0)).await;
                let elapsed = started.elapsed();
                eprintln!("{what}, {policy:?}: answered in {elapsed:?}: {answer:?}");
                assert!(elapsed < BOUND, "{what}: took {elapsed:?}");
                match (policy, &answer) {
                    (FailurePolicy::Closed, Err(RateLimitError::Unavailable(error))) => {
                        assert_hidden(what, &error_texts(error), &secrets);
                    }
                    (FailurePolicy::Closed, other) => {
                        panic!("{what}: expected Unavailable, got {other:?}")
                    }
                    (_, Ok(decision)) => assert!(decision.allowed),
                    (_, Err(error)) => panic!("{what}, {policy:?}: unexpected {error:?}"),
                }
            }
        }
    }
    let events = capture::events();
    assert!(
        events
            .iter()
            .any(|(level, line)| *level == tracing::Level::WARN && line.contains("unavailable")),
        "the capture saw the outage warning (is it capturing?):\n{}",
        capture::render(&events)
    );
    let all = capture::render(&events);
    eprintln!("{} events captured", events.len());
    assert_hidden("the logs", &all, &secrets);
    for (level, line) in &events {
        if matches!(*level, tracing::Level::DEBUG | tracing::Level::TRACE) {
            continue;
        }
        assert!(!line.contains(&key), "the key is logged at {level}: {line}");
    }
}

/// A `tracing` subscriber that keeps every event and span (all levels, all fields) of this
/// test binary, as text.
mod capture {
    use std::fmt::{self, Write as _};
    use std::sync::{Mutex, Once, PoisonError};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    static EVENTS: Mutex<Vec<(Level, String)>> = Mutex::new(Vec::new());
    /// The level of every span, for the fields recorded into it later.
    static SPAN_LEVELS: Mutex<Vec<Level>> = Mutex::new(Vec::new());

    /// Makes the capture the global default subscriber (once per process).
    pub fn install() {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            tracing::subscriber::set_global_default(Capture)
                .expect("no other global subscriber in this test binary");
        });
    }

    /// Every event and span so far: level and text.
    pub fn events() -> Vec<(Level, String)> {
        EVENTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn render(events: &[(Level, String)]) -> String {
        events
            .iter()
            .fold(String::new(), |mut text, (level, line)| {
                let _ = writeln!(text, "{level} {line}");
                text
            })
    }

    struct Capture;

    fn push(level: Level, line: String) {
        EVENTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((level, line));
    }

    struct Fields(String);

    impl Visit for Fields {
        fn record_str(&mut self, field: &Field, value: &str) {
            let _ = write!(self.0, " {}={value}", field.name());
        }

        fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
            let _ = write!(self.0, " {}={value}", field.name());
            let mut source = value.source();
            while let Some(inner) = source {
                let _ = write!(self.0, " (caused by {inner})");
                source = inner.source();
            }
        }

        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    fn describe(metadata: &Metadata<'_>, kind: &str) -> String {
        format!("{kind} {}: {}", metadata.target(), metadata.name())
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }

        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let mut fields = Fields(describe(span.metadata(), "span"));
            span.record(&mut fields);
            let level = *span.metadata().level();
            push(level, fields.0);
            let mut levels = SPAN_LEVELS.lock().unwrap_or_else(PoisonError::into_inner);
            levels.push(level);
            Id::from_u64(levels.len() as u64)
        }

        fn record(&self, span: &Id, values: &Record<'_>) {
            let mut fields = Fields("span record:".to_owned());
            values.record(&mut fields);
            let level = usize::try_from(span.into_u64())
                .ok()
                .and_then(|index| {
                    SPAN_LEVELS
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get(index - 1)
                        .copied()
                })
                // Unknown span: counted as the most visible level, so a key in it fails.
                .unwrap_or(Level::ERROR);
            push(level, fields.0);
        }

        fn record_follows_from(&self, _: &Id, _: &Id) {}

        fn event(&self, event: &Event<'_>) {
            let mut fields = Fields(describe(event.metadata(), "event"));
            event.record(&mut fields);
            push(*event.metadata().level(), fields.0);
        }

        fn enter(&self, _: &Id) {}

        fn exit(&self, _: &Id) {}
    }
}

/// Certificates and keys the handshake could not use fail at `build()`, not at every check.
#[tokio::test]
async fn unusable_certificates_and_keys_fail_at_build() {
    let redis = TlsRedis::start_requiring_client_certificates();
    let garbage = b"-----BEGIN CERTIFICATE-----\nAAAAAAAA\n-----END CERTIFICATE-----\n".to_vec();
    let mut bundle = redis.ca_pem().to_vec();
    bundle.extend_from_slice(&garbage);
    let other_key = rcgen::KeyPair::generate()
        .unwrap()
        .serialize_pem()
        .into_bytes();
    let builder = || {
        Limiter::builder()
            .redis_url(redis.url())
            .failure_policy(FailurePolicy::Closed)
            .timeout(WORKING_TIMEOUT)
    };
    let cases = [
        (
            "a CA that is not a certificate",
            builder().tls_ca_certificate(garbage.clone()),
        ),
        (
            "a CA bundle with one bad certificate",
            builder().tls_ca_certificate(bundle),
        ),
        (
            "a client key that is not the certificate's",
            builder()
                .tls_ca_certificate(redis.ca_pem().to_vec())
                .tls_client_identity(redis.client_cert_pem().to_vec(), other_key.clone()),
        ),
        (
            "a client certificate that does not parse",
            builder()
                .tls_ca_certificate(redis.ca_pem().to_vec())
                .tls_client_identity(garbage.clone(), redis.client_key_pem().to_vec()),
        ),
    ];
    for (what, builder) in cases {
        let error = builder.build().expect_err(what);
        assert!(
            matches!(error, RateLimitError::InvalidConfig(_)),
            "{what}: {error:?}"
        );
        assert!(
            !error.to_string().contains("PRIVATE KEY"),
            "{what}: {error}"
        );
    }
    let limiter = builder()
        .tls_ca_certificate(redis.ca_pem().to_vec())
        .tls_client_identity(
            redis.client_cert_pem().to_vec(),
            redis.client_key_pem().to_vec(),
        )
        .build()
        .unwrap();
    assert!(
        limiter
            .check("k", Rate::new(1, Duration::from_secs(60)).unwrap())
            .await
            .unwrap()
            .allowed
    );
}
