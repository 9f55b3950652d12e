//! The Java articles' Spring `HelloController` in Rust: `GET /hello/sayHi`, at most 2 calls per 30
//! seconds per user and URI, with the denial turned into a standard 429 by
//! `RateLimitError`'s `IntoResponse` (feature `axum`); and `GET /hello/search`, under a burst
//! limit and a daily quota checked together, whose admitted responses carry both limits' fields.
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
use ratelimit_runtime::{CompositeHeaders, Limiter, RateLimitError, rate_limit};

use crate::user::{self, User, UserQuery};

/// The app: `GET /hello/sayHi`, limited by `limiter` (the handler takes it from the state).
pub fn router(limiter: Limiter) -> Router {
    Router::new()
        .route("/hello/sayHi", get(say_hi))
        .route("/hello/search", get(search))
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

/// `GET /hello/search`: at most 5 calls per second and 1000 per day per user, one decision (a
/// call the burst limit denies does not use the daily quota). The body reads the check's
/// decisions as `d` and sends every limit's `RateLimit-Policy` and `RateLimit` fields.
#[rate_limit(period = 1, threshold = 5, name = "hello.search.burst", key = user, label = "burst")]
#[rate_limit(
    period = "1d",
    threshold = 1000,
    name = "hello.search.daily",
    key = user,
    label = "daily",
    limiter = &limiter,
    decision = d,
)]
async fn search(
    State(limiter): State<Limiter>,
    user: User,
) -> Result<(CompositeHeaders, String), RateLimitError> {
    Ok((d.headers(), format!("results for {user}")))
}

impl<S: Send + Sync> FromRequestParts<S> for User {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(user::HEADER)
            .and_then(|value| value.to_str().ok());
        let query = Query::<UserQuery>::try_from_uri(&parts.uri)
            .ok()
            .map(|Query(query)| query);
        User::from_header_or_query(header, query)
            .ok_or_else(|| ratelimit_runtime::axum::problem(StatusCode::BAD_REQUEST, user::MISSING))
    }
}
