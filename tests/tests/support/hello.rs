//! The end-to-end scenario of the articles' `HelloController` (`GET /hello/sayHi`, 2 calls per
//! 30 s per user and URI), the same for every framework's example: `http_axum` and
//! `http_actix` serve their app and run these against it.

use std::time::Duration;

use ratelimit_runtime::{FailurePolicy, Limiter, Rate};
use serde_json::Value;

use crate::support::{client, field, policy, rate_limit as rate_limit_field};

/// The rate of `GET /hello/sayHi`.
pub const HELLO: Rate = Rate::new_const(2, Duration::from_secs(30));

/// Asserts `response` is an RFC 9457 problem+json answer with `status`, and returns its body.
pub async fn problem(response: reqwest::Response, status: u16) -> Value {
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

/// Two calls of one user admitted, the third answered 429 with the draft's fields (exact to the
/// second against `limiter`'s own decision) and a problem body that never names the key; the
/// query parameter names the same user, another user counts apart, and no user is a 400.
pub async fn admits_two_calls_per_user_and_uri_then_answers_429(base: &str, limiter: &Limiter) {
    let url = format!("{base}/hello/sayHi");
    let http = client();
    let alice = || http.get(&url).header("X-User-Id", "alice");

    for _ in 0..2 {
        let response = alice().send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.text().await.unwrap(), "hi, alice");
    }

    let denied = alice().send().await.unwrap();
    assert_eq!(denied.status().as_u16(), 429);
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
    assert_eq!(field(&denied, "retry-after"), "30");
    assert_eq!(field(&denied, "retry-after"), expected.to_string());
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
    assert_eq!(body.as_object().unwrap().len(), 4, "{body}");

    // The query parameter names the same user; another user has a counter of their own.
    let by_query = http.get(format!("{url}?user=alice")).send().await.unwrap();
    assert_eq!(by_query.status().as_u16(), 429);
    let bob = http.get(format!("{url}?user=bob")).send().await.unwrap();
    assert_eq!(bob.status().as_u16(), 200);
    assert_eq!(bob.text().await.unwrap(), "hi, bob");

    // No user: a 400 before the limit is checked.
    let anonymous = problem(http.get(&url).send().await.unwrap(), 400).await;
    assert_eq!(anonymous["title"], "Bad Request");
}

/// A limiter failing closed on a Redis that is not there.
pub async fn unavailable_limiter() -> Limiter {
    Limiter::builder()
        .redis_url("redis://127.0.0.1:1/")
        .failure_policy(FailurePolicy::Closed)
        .timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap()
}

/// With [`unavailable_limiter`]: 503 with `Retry-After: 5`, no rate limit fields, and a
/// problem body that names no internals.
pub async fn answers_503(base: &str) {
    let response = client()
        .get(format!("{base}/hello/sayHi?user=alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(field(&response, "retry-after"), "5");
    assert!(response.headers().get("ratelimit").is_none());
    let body = problem(response, 503).await;
    assert_eq!(body["title"], "Service Unavailable");
    assert_eq!(
        body["detail"],
        "the rate limit store is unavailable; try again later"
    );
}
