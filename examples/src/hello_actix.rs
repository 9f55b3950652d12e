//! The seeds' Spring `HelloController` on actix-web: `GET /hello/sayHi`, at most 2 calls per
//! 30 seconds per user and URI, with the denial turned into a standard 429 by
//! `RateLimitError`'s `ResponseError` (feature `actix-web`). The same app as
//! [`hello_axum`](crate::hello_axum), answering alike.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::error::InternalError;
use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpRequest, web};
use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};
use serde::Deserialize;

/// The app: `GET /hello/sayHi`, limited by `limiter` (the handler takes it from the app
/// data). Give it to `App::configure`, in the factory of an `HttpServer`:
/// `App::new().configure(hello_actix::app(limiter.clone()))`.
pub fn app(limiter: Limiter) -> impl Fn(&mut web::ServiceConfig) + Clone + Send + 'static {
    move |config| {
        config
            .app_data(web::Data::new(limiter.clone()))
            .route("/hello/sayHi", web::get().to(say_hi));
    }
}

/// `GET /hello/sayHi`: greets the caller, at most twice per 30 s per user and URI (the path,
/// without the query string, so that extra query parameters do not open new counters).
#[rate_limit(
    period = 30,
    threshold = 2,
    name = "hello.sayHi",
    key = format_args!("{user}:{}", request.path()),
    limiter = limiter.get_ref(),
)]
async fn say_hi(
    limiter: web::Data<Limiter>,
    user: User,
    request: HttpRequest,
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

impl FromRequest for User {
    type Error = actix_web::Error;
    type Future = Ready<Result<User, actix_web::Error>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let header = request
            .headers()
            .get("x-user-id")
            .and_then(|value| value.to_str().ok());
        let user = match header {
            Some(user) => Some(user.to_owned()),
            None => web::Query::<UserQuery>::from_query(request.query_string())
                .ok()
                .and_then(|query| query.into_inner().user),
        };
        ready(match user.map(|user| user.trim().to_owned()) {
            Some(user) if !user.is_empty() => Ok(User(user)),
            _ => Err(InternalError::from_response(
                "no user",
                ratelimit_runtime::actix_web::problem(
                    StatusCode::BAD_REQUEST,
                    "name the user in the `X-User-Id` header or the `user` query parameter",
                ),
            )
            .into()),
        })
    }
}
