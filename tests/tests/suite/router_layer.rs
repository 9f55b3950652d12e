//! End to end: the `router_layer` example's app (a whole router limited per client IP by the
//! tower layer), served on 127.0.0.1 and called by a real HTTP client.

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use examples::router_layer::{RATE, router};
use ratelimit_runtime::axum::{HeaderKey, RateLimitLayer};
use ratelimit_runtime::{Limiter, Rate};
use support::{client, field, policy, rate_limit, retry_after_range, serve};
use tests::{STATE_DEADLINE, TestRedis, unique_prefix, wait_for};

use crate::support::http as support;

#[tokio::test]
async fn limits_every_route_per_client_ip_and_reports_on_admissions() {
    assert_eq!(
        (RATE.threshold(), RATE.period()),
        (5, Duration::from_secs(10))
    );
    let base = serve(router(Limiter::memory(), Vec::new())).await;
    let http = client();

    let first_sent = Instant::now();
    for (call, path) in ["/", "/status", "/", "/status", "/"]
        .into_iter()
        .enumerate()
    {
        // Without trusted proxies, X-Forwarded-For changes nothing.
        let response = http
            .get(format!("{base}{path}"))
            .header("x-forwarded-for", format!("198.51.100.{call}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "call {call}");
        assert_eq!(
            policy(field(&response, "ratelimit-policy")),
            ("default".into(), 5, Some(10))
        );
        // On an admission, until the window is empty: the whole period, from this admission.
        let (_, remaining, reset) = rate_limit(field(&response, "ratelimit"));
        assert_eq!((remaining, reset), (4 - call as i64, 10), "call {call}");
        assert!(response.headers().get("retry-after").is_none());
    }
    // On a denial, until the first admission leaves the window: the period less its age
    // (measured: milliseconds when idle, so 10), rounded up.
    let sixth = http.get(&base).send().await.unwrap();
    let (name, remaining, wait) = rate_limit(field(&sixth, "ratelimit"));
    let age = first_sent.elapsed();
    assert_eq!((name.as_str(), remaining), ("default", 0));
    let range = retry_after_range(RATE.period(), age);
    assert!(
        range.contains(&u64::try_from(wait).unwrap()),
        "t={wait}, {age:?} after the first call"
    );
    assert_eq!(
        field(&sixth, "ratelimit"),
        format!(r#""default";r=0;t={wait}"#)
    );
    let denied = http.get(format!("{base}/status")).send().await.unwrap();
    let age = first_sent.elapsed();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = field(&denied, "retry-after").parse().unwrap();
    assert!(
        retry_after_range(RATE.period(), age).contains(&retry_after),
        "Retry-After {retry_after}, {age:?} after the first call"
    );
    assert_eq!(
        field(&denied, "ratelimit"),
        format!(r#""default";r=0;t={retry_after}"#)
    );
    assert_eq!(field(&denied, "ratelimit-policy"), r#""default";q=5;w=10"#);
    assert_eq!(field(&denied, "content-type"), "application/problem+json");
    let body: serde_json::Value = serde_json::from_str(&denied.text().await.unwrap()).unwrap();
    assert_eq!(body["status"], 429);
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("rate limit exceeded for `api`: retry after "),
        "{detail}"
    );
    assert!(
        !detail.contains("127.0.0.1"),
        "the detail never names the key"
    );
}

#[tokio::test]
async fn forwarded_for_counts_only_from_trusted_proxies() {
    let trusted = vec!["127.0.0.0/8".parse().unwrap()];
    let base = serve(router(Limiter::memory(), trusted)).await;
    let http = client();
    let from = |client_ip: &str| {
        http.get(&base)
            .header("x-forwarded-for", format!("6.6.6.6, {client_ip}"))
    };
    for _ in 0..5 {
        assert_eq!(
            from("203.0.113.7").send().await.unwrap().status(),
            StatusCode::OK
        );
    }
    assert_eq!(
        from("203.0.113.7").send().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the client the proxy saw is limited, whatever it forged to the left"
    );
    assert_eq!(
        from("203.0.113.8").send().await.unwrap().status(),
        StatusCode::OK
    );
    // The proxy itself, without the header, is a client of its own.
    assert_eq!(
        http.get(&base).send().await.unwrap().status(),
        StatusCode::OK
    );
    // A proxy entry that is not an address: no key, a 400 (never a bypass).
    let garbled = http
        .get(&base)
        .header("x-forwarded-for", "unknown")
        .send()
        .await
        .unwrap();
    assert_eq!(garbled.status(), StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_request_without_a_key_is_answered_not_passed() {
    let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
    let limited = |layer: RateLimitLayer<HeaderKey>| {
        Router::new()
            .route("/", get(|| async { "secret" }))
            .layer(layer)
    };
    let http = client();

    let base = serve(limited(RateLimitLayer::new(
        Limiter::memory(),
        rate,
        HeaderKey::new("x-api-key"),
    )))
    .await;
    let missing = http.get(&base).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
    assert_eq!(field(&missing, "content-type"), "application/problem+json");
    let body: serde_json::Value = serde_json::from_str(&missing.text().await.unwrap()).unwrap();
    assert_eq!(body["title"], "Bad Request");
    let keyed = || http.get(&base).header("x-api-key", "k1");
    assert_eq!(
        keyed().send().await.unwrap().text().await.unwrap(),
        "secret"
    );
    assert_eq!(
        keyed().send().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );

    // A configured answer instead.
    let layer = RateLimitLayer::new(Limiter::memory(), rate, HeaderKey::new("x-api-key"))
        .on_missing_key(|_| axum::response::IntoResponse::into_response(StatusCode::UNAUTHORIZED));
    let base = serve(limited(layer)).await;
    assert_eq!(
        http.get(&base).send().await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
}

/// A `PeerIp` layer on a router served without connect info: every request is answered `500`
/// (the server's mistake, not the client's), its problem naming the method that fixes it,
/// and never reaches the handler; a header-keyed request without its header stays a `400`.
#[tokio::test]
async fn a_peer_ip_layer_served_without_connect_info_answers_500_naming_the_fix() {
    use ratelimit_runtime::axum::PeerIp;

    let rate = Rate::new(100, Duration::from_secs(60)).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "secret" }))
        .layer(RateLimitLayer::new(Limiter::memory(), rate, PeerIp::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    // `into_make_service`, not `into_make_service_with_connect_info`: the mistake.
    tokio::spawn(async move { axum::serve(listener, app.into_make_service()).await });
    for _ in 0..2 {
        let response = client().get(&base).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(field(&response, "content-type"), "application/problem+json");
        let body: serde_json::Value =
            serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(body["status"], 500);
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains("into_make_service_with_connect_info::<SocketAddr>()"),
            "{detail}"
        );
    }

    // With connect info the same layer keys by the peer.
    let app = Router::new()
        .route("/", get(|| async { "secret" }))
        .layer(RateLimitLayer::new(Limiter::memory(), rate, PeerIp::new()));
    let base = serve(app).await;
    let response = client().get(&base).send().await.unwrap();
    assert_eq!(response.text().await.unwrap(), "secret");
}

/// A layer's rates may mix the algorithms: a burst log and an hourly sliding window counter,
/// checked together, both in the fields, the counter recording nothing for a call the log
/// denies.
#[tokio::test]
async fn a_layer_takes_a_sliding_window_counter_beside_a_log() {
    use ratelimit_runtime::Algorithm;
    use ratelimit_runtime::testing::ManualClock;

    let burst = Rate::new(3, Duration::from_secs(10)).unwrap();
    let hourly = Rate::new(4, Duration::from_secs(3_600))
        .unwrap()
        .with_algorithm(Algorithm::SlidingWindowCounter);
    // The start of an hour, so that the counter's window is the clock's hour.
    let clock = ManualClock::new(std::time::UNIX_EPOCH + Duration::from_secs(1_700_002_800));
    let layer = RateLimitLayer::new(
        Limiter::builder()
            .clock(clock.clone())
            .build()
            .expect("an in-process limiter"),
        burst,
        HeaderKey::new("x-api-key"),
    )
    .and_rate(hourly);
    let base = serve(
        Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer),
    )
    .await;
    let http = client();
    let call = || async {
        http.get(&base)
            .header("x-api-key", "k")
            .send()
            .await
            .unwrap()
    };
    for n in 0..3 {
        let response = call().await;
        assert_eq!(response.status(), StatusCode::OK, "call {n}");
        let policies = field(&response, "ratelimit-policy");
        assert!(policies.contains(";q=3;w=10"), "{policies}");
        assert!(policies.contains(";q=4;w=3600"), "{policies}");
    }
    // The burst denies; the counter records nothing for it.
    assert_eq!(call().await.status(), StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(10));
    let fourth = call().await;
    assert_eq!(fourth.status(), StatusCode::OK);
    assert!(
        field(&fourth, "ratelimit").contains(";r=0;"),
        "{}",
        field(&fourth, "ratelimit")
    );
    // Now the hourly counter denies, whatever the burst says.
    clock.advance(Duration::from_secs(10));
    let denied = call().await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(denied.headers().get("retry-after").is_some());
}

/// A router of `routes`, each under a layer of its own on the default scope, all with
/// `limiter`, keyed by the `x-user` header.
fn default_scoped(limiter: &Limiter, routes: &[(&'static str, &[Rate])]) -> Router {
    routes.iter().fold(Router::new(), |router, &(path, rates)| {
        let (first, more) = rates.split_first().expect("a rate");
        let layer = more.iter().fold(
            RateLimitLayer::new(limiter.clone(), *first, HeaderKey::new("x-user")),
            |layer, rate| layer.and_rate(*rate),
        );
        router.merge(
            Router::new()
                .route(path, get(|| async { "ok" }))
                .layer(layer),
        )
    })
}

/// `GET base/path` as `user`: the status and the `RateLimit` field (empty on a 400).
async fn call_as(base: &str, path: &str, user: &str) -> (StatusCode, String) {
    let response = client()
        .get(format!("{base}{path}"))
        .header("x-user", user)
        .send()
        .await
        .unwrap();
    let fields = response
        .headers()
        .get("ratelimit")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (response.status(), fields)
}

fn rate(threshold: u64, period: Duration) -> Rate {
    Rate::new(threshold, period).unwrap()
}

/// Two routes under default-scoped layers keyed alike, `/login` at 3 per minute and
/// `/search` at 100 per minute (issue 34): three searches spend nothing of the login's
/// budget (they shared one log, and `/login` answered 429). A third route at the login's
/// rate shares its budget; another user has budgets of their own.
async fn default_scoped_layers_of_two_rates_keep_two_logs(limiter: Limiter) {
    let minute = Duration::from_secs(60);
    let base = serve(default_scoped(
        &limiter,
        &[
            ("/login", &[rate(3, minute)]),
            ("/search", &[rate(100, minute)]),
            ("/signup", &[rate(3, minute)]),
        ],
    ))
    .await;
    for n in 0..3 {
        let (status, _) = call_as(&base, "/search", "alice").await;
        assert_eq!(status, StatusCode::OK, "search {n}");
    }
    for n in 0..2 {
        let (status, fields) = call_as(&base, "/login", "alice").await;
        assert_eq!(status, StatusCode::OK, "login {n}: {fields}");
        assert!(fields.contains(&format!(";r={};", 2 - n)), "{fields}");
    }
    // The same rate and key: one budget.
    let (status, _) = call_as(&base, "/signup", "alice").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call_as(&base, "/login", "alice").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let (status, fields) = call_as(&base, "/search", "alice").await;
    assert_eq!(status, StatusCode::OK);
    assert!(fields.contains(";r=96;"), "{fields}");
    let (status, _) = call_as(&base, "/login", "bob").await;
    assert_eq!(status, StatusCode::OK);
}

/// `/export` at 5 per hour beside `/search` at 100 per second, on the default scope (issue
/// 34): a search a second after the exports leaves the hourly log whole (in one log, the
/// search's eviction of what its second had left removed the exports' admissions, and
/// `/export` admitted 13 of 30 within 3.3 s).
async fn a_short_rates_eviction_leaves_a_long_rates_log(limiter: Limiter) {
    let base = serve(default_scoped(
        &limiter,
        &[
            ("/export", &[rate(5, Duration::from_secs(3_600))]),
            ("/search", &[rate(100, Duration::from_secs(1))]),
        ],
    ))
    .await;
    for n in 0..5 {
        let (status, _) = call_as(&base, "/export", "alice").await;
        assert_eq!(status, StatusCode::OK, "export {n}");
    }
    let mut answered = Instant::now();
    for n in 0..10 {
        let (status, _) = call_as(&base, "/search", "alice").await;
        assert_eq!(status, StatusCode::OK, "search {n}");
        answered = Instant::now();
    }
    // A search with its second otherwise empty, as the store's clock tells: each attempt a
    // second (by this clock) after the last admission was answered.
    wait_for("a search alone in its second", STATE_DEADLINE, async || {
        let wait = Duration::from_secs(1).saturating_sub(answered.elapsed());
        tokio::time::sleep(wait + Duration::from_millis(10)).await;
        let (status, fields) = call_as(&base, "/search", "alice").await;
        answered = Instant::now();
        assert_eq!(status, StatusCode::OK);
        fields.contains(";r=99;").then_some(())
    })
    .await;
    let (status, fields) = call_as(&base, "/export", "alice").await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "the search evicted the exports' admissions: {fields}"
    );
    let (_, remaining, wait) = rate_limit(&fields);
    assert_eq!(remaining, 0);
    assert!(wait > 3_000, "t={wait}");
}

#[tokio::test]
async fn default_scoped_layers_of_two_rates_keep_two_logs_in_process() {
    default_scoped_layers_of_two_rates_keep_two_logs(Limiter::memory()).await;
}

#[tokio::test]
async fn default_scoped_layers_of_two_rates_keep_two_logs_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("layer_two_rates");
    default_scoped_layers_of_two_rates_keep_two_logs(
        tests::closed_redis_limiter(redis.url(), &prefix).await,
    )
    .await;
    redis.clean_up(&prefix).await;
}

#[tokio::test]
async fn a_short_rates_eviction_leaves_a_long_rates_log_in_process() {
    a_short_rates_eviction_leaves_a_long_rates_log(Limiter::memory()).await;
}

#[tokio::test]
async fn a_short_rates_eviction_leaves_a_long_rates_log_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("layer_eviction");
    a_short_rates_eviction_leaves_a_long_rates_log(
        tests::closed_redis_limiter(redis.url(), &prefix).await,
    )
    .await;
    redis.clean_up(&prefix).await;
}

/// Two calls of `path` as `user` admitted, the third denied.
async fn spend_two(base: &str, path: &str, user: &str) {
    for n in 0..2 {
        assert_eq!(
            call_as(base, path, user).await.0,
            StatusCode::OK,
            "{path} {n}"
        );
    }
    assert_eq!(
        call_as(base, path, user).await.0,
        StatusCode::TOO_MANY_REQUESTS,
        "{path}"
    );
}

/// A layer of a scope of its own with several rates, a log and a counter, keyed as
/// `{E(scope)/E(key)}@E(label)`: [`Limiter::reset_scope`] forgets the caller's keys and their
/// counters (it forgot none), and no other caller's.
async fn reset_scope_forgets_a_scoped_layers_keys_of_several_rates(limiter: Limiter) {
    use ratelimit_runtime::Algorithm;

    let minute = rate(2, Duration::from_secs(60));
    let hourly =
        rate(2, Duration::from_secs(3_600)).with_algorithm(Algorithm::SlidingWindowCounter);
    let base = serve(
        Router::new().route("/api", get(|| async { "ok" })).layer(
            RateLimitLayer::new(limiter.clone(), minute, HeaderKey::new("x-user"))
                .and_rate(hourly)
                .scope("api"),
        ),
    )
    .await;
    spend_two(&base, "/api", "alice").await;
    assert_eq!(call_as(&base, "/api", "bob").await.0, StatusCode::OK);

    // The log and the counter.
    assert_eq!(limiter.reset_scope("api", Some("alice")).await.unwrap(), 2);
    assert_eq!(call_as(&base, "/api", "alice").await.0, StatusCode::OK);
    assert_eq!(call_as(&base, "/api", "bob").await.0, StatusCode::OK);
    assert_eq!(
        call_as(&base, "/api", "bob").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn reset_scope_forgets_a_scoped_layers_keys_of_several_rates_in_process() {
    reset_scope_forgets_a_scoped_layers_keys_of_several_rates(Limiter::memory()).await;
}

#[tokio::test]
async fn reset_scope_forgets_a_scoped_layers_keys_of_several_rates_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("layer_reset_several");
    reset_scope_forgets_a_scoped_layers_keys_of_several_rates(
        tests::closed_redis_limiter(redis.url(), &prefix).await,
    )
    .await;
    redis.clean_up(&prefix).await;
}

/// Layers on the default scope, of one rate and of a log and a counter:
/// `reset_scope("layer", ..)` forgets the caller's keys of every rate, with their counters,
/// and no other caller's or scope's.
async fn reset_scope_forgets_a_callers_default_scoped_layer_keys(limiter: Limiter) {
    use ratelimit_runtime::Algorithm;

    let minute = rate(2, Duration::from_secs(60));
    let ten_minutes = rate(2, Duration::from_secs(600));
    let hourly =
        rate(2, Duration::from_secs(3_600)).with_algorithm(Algorithm::SlidingWindowCounter);
    let api = Router::new()
        .route("/api", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter.clone(), minute, HeaderKey::new("x-user")).scope("api"));
    let app = default_scoped(
        &limiter,
        &[("/login", &[minute]), ("/search", &[ten_minutes, hourly])],
    )
    .merge(api);
    let base = serve(app).await;
    for path in ["/login", "/search", "/api"] {
        spend_two(&base, path, "alice").await;
    }
    assert_eq!(call_as(&base, "/login", "bob").await.0, StatusCode::OK);

    // `/login`'s log, `/search`'s log and counter.
    assert_eq!(
        limiter.reset_scope("layer", Some("alice")).await.unwrap(),
        3
    );
    assert_eq!(call_as(&base, "/login", "alice").await.0, StatusCode::OK);
    assert_eq!(call_as(&base, "/search", "alice").await.0, StatusCode::OK);
    assert_eq!(
        call_as(&base, "/api", "alice").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(call_as(&base, "/login", "bob").await.0, StatusCode::OK);
    assert_eq!(
        call_as(&base, "/login", "bob").await.0,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn reset_scope_forgets_a_callers_default_scoped_layer_keys_in_process() {
    reset_scope_forgets_a_callers_default_scoped_layer_keys(Limiter::memory()).await;
}

#[tokio::test]
async fn reset_scope_forgets_a_callers_default_scoped_layer_keys_on_redis() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("layer_reset_default");
    reset_scope_forgets_a_callers_default_scoped_layer_keys(
        tests::closed_redis_limiter(redis.url(), &prefix).await,
    )
    .await;
    redis.clean_up(&prefix).await;
}
