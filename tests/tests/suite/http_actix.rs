//! End to end: the `hello_actix` example's app (the articles' `HelloController` on actix-web),
//! served on 127.0.0.1 and called by a real HTTP client. Status codes, the
//! draft-ietf-httpapi-ratelimit-headers-11 fields (parsed), `Retry-After` against the limiter's
//! own decision, and the RFC 9457 problem+json bodies: the same answers as `http_axum`.

use ratelimit_runtime::Limiter;
use support::serve_actix;

use crate::support::hello;
use crate::support::http as support;

#[tokio::test]
async fn say_hi_admits_two_calls_per_user_and_uri_then_answers_429() {
    let limiter = Limiter::memory();
    let (base, server) = serve_actix(examples::hello_actix::app(limiter.clone()));
    hello::admits_two_calls_per_user_and_uri_then_answers_429(&base, &limiter).await;
    server.stop(true).await;
}

/// `FailurePolicy::Closed` and a Redis that is not there: 503 with `Retry-After`.
#[tokio::test]
async fn an_unavailable_store_answers_503() {
    let limiter = hello::unavailable_limiter().await;
    let (base, server) = serve_actix(examples::hello_actix::app(limiter));
    hello::answers_503(&base).await;
    server.stop(true).await;
}
