//! The Java articles' Spring `HelloController` on actix-web: `GET /hello/sayHi`, at most 2 calls per
//! 30 seconds per user and URI, with the denial turned into a standard 429 by
//! `RateLimitError`'s `ResponseError` (feature `actix-web`). The same app as
//! [`hello_axum`](crate::hello_axum), answering alike.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::error::InternalError;
use actix_web::http::StatusCode;
use actix_web::{FromRequest, HttpRequest, web};
use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

use crate::user::{self, User, UserQuery};

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

impl FromRequest for User {
    type Error = actix_web::Error;
    type Future = Ready<Result<User, actix_web::Error>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        let header = request
            .headers()
            .get(user::HEADER)
            .and_then(|value| value.to_str().ok());
        let query = web::Query::<UserQuery>::from_query(request.query_string())
            .ok()
            .map(web::Query::into_inner);
        ready(User::from_header_or_query(header, query).ok_or_else(|| {
            let answer =
                ratelimit_runtime::actix_web::problem(StatusCode::BAD_REQUEST, user::MISSING);
            InternalError::from_response("no user", answer).into()
        }))
    }
}
