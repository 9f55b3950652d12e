//! End to end: the `hello_axum` example's app (the articles' `HelloController`) and handlers using
//! axum's extractors, served on 127.0.0.1 and called by a real HTTP client. Status codes, the
//! draft-ietf-httpapi-ratelimit-headers-11 fields (parsed), `Retry-After` against the limiter's
//! own decision, and the RFC 9457 problem+json bodies.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::Router;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};
use support::{client, field, retry_after_range, serve};

use crate::support::hello;
use crate::support::http as support;

#[tokio::test]
async fn say_hi_admits_two_calls_per_user_and_uri_then_answers_429() {
    let limiter = Limiter::memory();
    let base = serve(examples::hello_axum::router(limiter.clone())).await;
    hello::admits_two_calls_per_user_and_uri_then_answers_429(&base, &limiter).await;
}

/// The example's `GET /hello/search`: an admitted response carries both stacked limits'
/// fields, read by the handler through `decision = d`; the limits' logs are the documented
/// `#<name>/{<key>}@<window>`.
#[tokio::test]
async fn search_sends_every_limits_fields_on_admitted_responses() {
    let limiter = Limiter::memory();
    let base = serve(examples::hello_axum::router(limiter.clone())).await;
    let response = client()
        .get(format!("{base}/hello/search"))
        .header("X-User-Id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let policies = support::parse_list(field(&response, "ratelimit-policy"));
    let names: Vec<&str> = policies.iter().map(|item| item.name.as_str()).collect();
    assert_eq!(names, ["burst", "daily"]);
    assert_eq!(policies[0].param("q"), Some(5));
    assert_eq!(policies[0].param("w"), Some(1));
    assert_eq!(policies[1].param("q"), Some(1000));
    assert_eq!(policies[1].param("w"), Some(86_400));
    let limits = support::parse_list(field(&response, "ratelimit"));
    assert_eq!(limits[0].param("r"), Some(4));
    assert_eq!(limits[1].param("r"), Some(999));
    assert_eq!(response.text().await.unwrap(), "results for alice");
    let daily = ratelimit_runtime::Rate::new_const(1000, std::time::Duration::from_secs(86_400));
    let peek = limiter
        .check_n("#hello.search.daily/{alice}@1d", daily, 0)
        .await
        .unwrap();
    assert_eq!(peek.remaining, 999);
}

/// The HTTP guide's first example, served: a handler under one attribute that returns
/// `(d.headers(), body)` sends the fields on its 200s, and its denial sends them on the 429
/// with `Retry-After`, as a real client reads them.
#[tokio::test]
async fn one_limits_fields_reach_the_client_on_a_200_and_on_the_429() {
    #[rate_limit(period = 30, threshold = 2, limiter = &limiter, decision = d)]
    async fn hello(State(limiter): State<Limiter>) -> Result<impl IntoResponse, RateLimitError> {
        Ok((d.headers(), "hi"))
    }

    let app = Router::new()
        .route("/hello", get(hello))
        .with_state(Limiter::memory());
    let base = serve(app).await;
    let get_hello = || client().get(format!("{base}/hello")).send();
    for remaining in [1, 0] {
        let admitted = get_hello().await.unwrap();
        assert_eq!(admitted.status().as_u16(), 200);
        assert_eq!(
            field(&admitted, "ratelimit-policy"),
            r#""default";q=2;w=30"#
        );
        assert_eq!(
            field(&admitted, "ratelimit"),
            format!(r#""default";r={remaining};t=30"#)
        );
        assert!(admitted.headers().get("retry-after").is_none());
        assert_eq!(admitted.text().await.unwrap(), "hi");
    }
    let denied = get_hello().await.unwrap();
    assert_eq!(denied.status().as_u16(), 429);
    assert_eq!(field(&denied, "ratelimit-policy"), r#""default";q=2;w=30"#);
    let limit = support::parse_list(field(&denied, "ratelimit"));
    assert_eq!(limit[0].param("r"), Some(0));
    let retry_after: u64 = field(&denied, "retry-after").parse().unwrap();
    assert!(
        retry_after_range(
            std::time::Duration::from_secs(30),
            std::time::Duration::from_secs(10)
        )
        .contains(&retry_after),
        "{retry_after}"
    );
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
    let first_sent = std::time::Instant::now();
    let first = http.get(format!("{base}/peer")).send().await.unwrap();
    assert_eq!(first.text().await.unwrap(), "hello, 127.0.0.1");
    let second = http.get(format!("{base}/peer")).send().await.unwrap();
    let age = first_sent.elapsed();
    let retry_after: u64 = field(&second, "retry-after").parse().unwrap();
    // The period less the time between the calls (milliseconds when idle), rounded up.
    assert!(
        retry_after_range(std::time::Duration::from_secs(60), age).contains(&retry_after),
        "{retry_after} s, {age:?} after the first call"
    );
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
}

/// `FailurePolicy::Closed` and a Redis that is not there: 503 with `Retry-After`.
#[tokio::test]
async fn an_unavailable_store_answers_503() {
    let base = serve(examples::hello_axum::router(
        hello::unavailable_limiter().await,
    ))
    .await;
    hello::answers_503(&base).await;
}
