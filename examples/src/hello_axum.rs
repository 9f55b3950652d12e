//! The seeds' Spring `HelloController` in Rust: `GET /hello/sayHi`, at most 2 calls per 30
//! seconds per user and URI, with the denial turned into a standard 429 by
//! `RateLimitError`'s `IntoResponse` (feature `axum`).
//!
//! ```java
//! @RestController
//! @RequestMapping("/hello")
//! public class HelloController {
//!     @RateLimit(period = 30, threshold = 2)
//!     @GetMapping("/sayHi")
//!     public void sayHi() {}
//! }
//! ```

use axum::Router;
use axum::extract::{FromRequestParts, OriginalUri, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use axum::routing::get;
use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};
use serde::Deserialize;

/// The app: `GET /hello/sayHi`, limited by `limiter` (the handler takes it from the state).
pub fn router(limiter: Limiter) -> Router {
    Router::new()
        .route("/hello/sayHi", get(say_hi))
        .with_state(limiter)
}

/// `GET /hello/sayHi`: greets the caller, at most twice per 30 s per user and URI (the path,
/// without the query string, so that extra query parameters do not open new counters).
#[rate_limit(
    period = 30,
    threshold = 2,
    name = "hello.sayHi",
    key = format_args!("{user}:{}", uri.path()),
    limiter = &limiter,
)]
async fn say_hi(
    State(limiter): State<Limiter>,
    user: User,
    OriginalUri(uri): OriginalUri,
) -> Result<String, RateLimitError> {
    Ok(format!("hi, {user}"))
}

/// The caller: the `X-User-Id` header, else the `user` query parameter. A request with
/// neither is answered `400 Bad Request` before the limit is checked.
#[derive(Debug)]
pub struct User(String);

impl std::fmt::Display for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Deserialize)]
struct UserQuery {
    user: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get("x-user-id")
            .and_then(|value| value.to_str().ok());
        let user = match header {
            Some(user) => Some(user.to_owned()),
            None => Query::<UserQuery>::try_from_uri(&parts.uri)
                .ok()
                .and_then(|Query(query)| query.user),
        };
        match user.map(|user| user.trim().to_owned()) {
            Some(user) if !user.is_empty() => Ok(User(user)),
            _ => Err(ratelimit_runtime::axum::problem(
                StatusCode::BAD_REQUEST,
                "name the user in the `X-User-Id` header or the `user` query parameter",
            )),
        }
    }
}
