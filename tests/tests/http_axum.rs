//! End to end: the `hello_axum` example's app (the seeds' `HelloController`) and handlers using
//! axum's extractors, served on 127.0.0.1 and called by a real HTTP client. Status codes, the
//! draft-ietf-httpapi-ratelimit-headers-11 fields (parsed), `Retry-After` against the limiter's
//! own decision, and the RFC 9457 problem+json bodies.

#[path = "support/http.rs"]
mod support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ratelimit_runtime::{FailurePolicy, Limiter, Rate, RateLimitError, rate_limit};
use serde_json::Value;
use support::{client, field, policy, rate_limit as rate_limit_field, serve};

/// The rate of `GET /hello/sayHi`.
const HELLO: Rate = Rate::new_const(2, Duration::from_secs(30));

async fn problem(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status);
    assert_eq!(field(&response, "content-type"), "application/problem+json");
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(body["type"], "about:blank");
    assert_eq!(body["status"], status);
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    body
}

#[tokio::test]
async fn say_hi_admits_two_calls_per_user_and_uri_then_answers_429() {
    let limiter = Limiter::memory();
    let base = serve(examples::hello_axum::router(limiter.clone())).await;
    let url = format!("{base}/hello/sayHi");
    let http = client();
    let alice = || http.get(&url).header("X-User-Id", "alice");

    for _ in 0..2 {
        let response = alice().send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.text().await.unwrap(), "hi, alice");
    }

    let denied = alice().send().await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // The same decision, asked of the same limiter right after (a denial is not recorded,
    // so this check sees the same window): Retry-After is its wait rounded up, to the second.
    let decision = limiter
        .check("hello.sayHi:alice:/hello/sayHi", HELLO)
        .await
        .unwrap();
    assert!(!decision.allowed);
    let wait = decision.retry_after.unwrap();
    let expected = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    assert_eq!(
        expected, 30,
        "calls microseconds apart wait the whole period, rounded up"
    );
    let retry_after = field(&denied, "retry-after");
    assert_eq!(retry_after, expected.to_string());
    assert_eq!(field(&denied, "ratelimit-policy"), r#""default";q=2;w=30"#);
    assert_eq!(
        policy(field(&denied, "ratelimit-policy")),
        ("default".into(), 2, Some(30))
    );
    assert_eq!(field(&denied, "ratelimit"), r#""default";r=0;t=30"#);
    assert_eq!(
        rate_limit_field(field(&denied, "ratelimit")),
        ("default".into(), 0, 30)
    );
    let body = problem(denied, 429).await;
    assert_eq!(body["title"], "Too Many Requests");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("rate limit exceeded for `hello.sayHi`: retry after 29."),
        "{detail}"
    );
    assert!(!detail.contains("alice"), "the detail never names the key");

    // The query parameter names the same user; another user has a counter of their own.
    let by_query = http.get(format!("{url}?user=alice")).send().await.unwrap();
    assert_eq!(by_query.status(), StatusCode::TOO_MANY_REQUESTS);
    let bob = http.get(format!("{url}?user=bob")).send().await.unwrap();
    assert_eq!(bob.status(), StatusCode::OK);
    assert_eq!(bob.text().await.unwrap(), "hi, bob");

    // No user: a 400 before the limit is checked.
    let anonymous = problem(http.get(&url).send().await.unwrap(), 400).await;
    assert_eq!(anonymous["title"], "Bad Request");
}

/// An application error type: the attribute converts the denial with `From`, and the
/// response delegates to `RateLimitError`'s.
#[derive(Debug)]
enum AppError {
    RateLimit(RateLimitError),
    NotFound,
}

impl From<RateLimitError> for AppError {
    fn from(error: RateLimitError) -> Self {
        AppError::RateLimit(error)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match self {
            AppError::RateLimit(error) => error.into_response(),
            AppError::NotFound => StatusCode::NOT_FOUND.into_response(),
        }
    }
}

/// `Path` and `State`; `Result<impl IntoResponse, AppError>`.
#[rate_limit(period = 60, threshold = 1, name = "item", key = id, limiter = &limiter)]
async fn item(
    State(limiter): State<Limiter>,
    Path(id): Path<u32>,
) -> Result<impl IntoResponse, AppError> {
    if id == 0 {
        return Err(AppError::NotFound);
    }
    Ok((StatusCode::OK, format!("item {id}")))
}

/// `Query` and `HeaderMap`; `Result<impl IntoResponse, RateLimitError>`.
#[rate_limit(
    period = 60,
    threshold = 1,
    name = "search",
    key = format_args!("{}:{}", headers.get("x-tenant").and_then(|v| v.to_str().ok()).unwrap_or("-"), query.get("q").map_or("", String::as_str)),
    limiter = &limiter,
)]
async fn search(
    State(limiter): State<Limiter>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<impl IntoResponse, RateLimitError> {
    Ok(format!("results for {:?}", query.get("q")))
}

/// `ConnectInfo`: keyed by the peer's IP address.
#[rate_limit(period = 60, threshold = 1, name = "peer", key = peer.ip(), limiter = &limiter)]
async fn peer(
    State(limiter): State<Limiter>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Result<String, RateLimitError> {
    Ok(format!("hello, {}", peer.ip()))
}

#[tokio::test]
async fn the_attribute_composes_with_extractors_and_error_types() {
    let app = Router::new()
        .route("/items/{id}", get(item))
        .route("/search", get(search))
        .route("/peer", get(peer))
        .with_state(Limiter::memory());
    let base = serve(app).await;
    let http = client();
    let status = |request: reqwest::RequestBuilder| async move {
        request.send().await.unwrap().status().as_u16()
    };

    // Path: one per id; the handler's own errors go through the same `AppError`.
    assert_eq!(status(http.get(format!("{base}/items/1"))).await, 200);
    assert_eq!(status(http.get(format!("{base}/items/1"))).await, 429);
    assert_eq!(status(http.get(format!("{base}/items/2"))).await, 200);
    assert_eq!(status(http.get(format!("{base}/items/0"))).await, 404);
    assert_eq!(status(http.get(format!("{base}/items/0"))).await, 429);

    // HeaderMap and Query: one per tenant and search term.
    let search = |tenant: &str, q: &str| {
        http.get(format!("{base}/search?q={q}"))
            .header("x-tenant", tenant)
    };
    assert_eq!(status(search("acme", "rust")).await, 200);
    assert_eq!(status(search("acme", "rust")).await, 429);
    assert_eq!(status(search("acme", "go")).await, 200);
    assert_eq!(status(search("globex", "rust")).await, 200);

    // ConnectInfo: one per client address (the test is 127.0.0.1).
    let first = http.get(format!("{base}/peer")).send().await.unwrap();
    assert_eq!(first.text().await.unwrap(), "hello, 127.0.0.1");
    let second = http.get(format!("{base}/peer")).send().await.unwrap();
    let retry_after: u64 = field(&second, "retry-after").parse().unwrap();
    assert_eq!(retry_after, 60);
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// `FailurePolicy::Closed` and a Redis that is not there: 503 with `Retry-After`.
#[tokio::test]
async fn an_unavailable_store_answers_503() {
    let limiter = Limiter::builder()
        .redis_url("redis://127.0.0.1:1/")
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let base = serve(examples::hello_axum::router(limiter)).await;
    let response = client()
        .get(format!("{base}/hello/sayHi?user=alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(field(&response, "retry-after"), "5");
    assert!(response.headers().get("ratelimit").is_none());
    let body = problem(response, 503).await;
    assert_eq!(body["title"], "Service Unavailable");
}
