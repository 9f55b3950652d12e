//! The end-to-end scenario of the articles' `HelloController` (`GET /hello/sayHi`, 2 calls per
//! 30 s per user and URI), the same for every framework's example: `http_axum` and
//! `http_actix` serve their app and run these against it.

use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate};
use serde_json::Value;

use super::http::{
    client, field, policy, rate_limit as rate_limit_field, retry_after_range, seconds_up,
};

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
///
/// The waits depend on how long the calls took, which is measured: on an idle machine they
/// take milliseconds, and the third call waits the whole period, rounded up to 30 s.
pub async fn admits_two_calls_per_user_and_uri_then_answers_429(base: &str, limiter: &Limiter) {
    let url = format!("{base}/hello/sayHi");
    let http = client();
    let alice = || http.get(&url).header("X-User-Id", "alice");

    let first_sent = Instant::now();
    for _ in 0..2 {
        let response = alice().send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.text().await.unwrap(), "hi, alice");
    }

    let denial_sent = Instant::now();
    let denied = alice().send().await.unwrap();
    // At most how old the first admission was when the third call was denied.
    let age = first_sent.elapsed();
    assert_eq!(denied.status().as_u16(), 429);
    // The same decision, asked of the same limiter right after (a denial is not recorded,
    // so this check sees the same window): Retry-After is its wait rounded up, to the second
    // (the denial's wait was longer by at most the time since it was asked for).
    let decision = limiter
        .check("hello.sayHi/alice:\\/hello\\/sayHi", HELLO)
        .await
        .unwrap();
    let since_denial = denial_sent.elapsed();
    assert!(!decision.allowed);
    let wait = decision.retry_after.unwrap();
    let retry_after: u64 = field(&denied, "retry-after").parse().unwrap();
    assert!(
        (seconds_up(wait)..=seconds_up(wait + since_denial)).contains(&retry_after),
        "Retry-After {retry_after}: the wait rounded up (the limiter says {wait:?}, \
         {since_denial:?} after the denial)"
    );
    assert!(
        retry_after_range(HELLO.period(), age).contains(&retry_after),
        "calls {age:?} apart wait the whole period less that, rounded up: {retry_after}"
    );
    assert_eq!(field(&denied, "ratelimit-policy"), r#""default";q=2;w=30"#);
    assert_eq!(
        policy(field(&denied, "ratelimit-policy")),
        ("default".into(), 2, Some(30))
    );
    assert_eq!(
        field(&denied, "ratelimit"),
        format!(r#""default";r=0;t={retry_after}"#)
    );
    assert_eq!(
        rate_limit_field(field(&denied, "ratelimit")),
        ("default".into(), 0, i64::try_from(retry_after).unwrap())
    );
    let body = problem(denied, 429).await;
    assert_eq!(body["title"], "Too Many Requests");
    let detail = body["detail"].as_str().unwrap();
    // The wait, to the millisecond (truncated): the period less the first admission's age.
    let shown = detail
        .strip_prefix("rate limit exceeded for `hello.sayHi`: retry after ")
        .and_then(|wait| wait.strip_suffix('s'))
        .and_then(|wait| wait.split_once('.'))
        .and_then(|(secs, millis)| {
            Some(secs.parse::<u64>().ok()? * 1_000 + millis.parse::<u64>().ok()?)
        })
        .unwrap_or_else(|| panic!("{detail}"));
    let age_ms = u64::try_from(age.as_millis()).unwrap() + 1;
    assert!(
        (30_000 - age_ms..30_000).contains(&shown),
        "{detail} ({age:?} after the first call)"
    );
    eprintln!("the third call, {age:?} after the first: {detail}; Retry-After {retry_after}");
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
