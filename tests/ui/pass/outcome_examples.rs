// The attribute's outcome, waiting and shadow forms of the issue compile, under
// `#![deny(warnings)]`, with a `Send` future: `count = "errors" | "ok"`, `count_if` over an
// axum response, `wait`, `shadow`, with `decision`, stacked, and under `#[async_trait]`.
#![deny(warnings, clippy::pedantic)]

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ratelimit_runtime::{RateLimitError, rate_limit};

#[derive(Debug)]
pub struct AppError;

impl From<RateLimitError> for AppError {
    fn from(_: RateLimitError) -> Self {
        AppError
    }
}

fn failed_login(result: &Result<Response, AppError>) -> bool {
    !matches!(result, Ok(response) if response.status().is_success())
}

// Count only calls whose body returns Err (login brute force): successes are refunded.
#[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors")]
async fn login(ip: &str, password: &str) -> Result<String, AppError> {
    if password.is_empty() {
        return Err(AppError);
    }
    Ok(format!("session for {ip}"))
}

// Count only calls whose body returns Ok (do not charge a caller for our failures).
#[rate_limit(period = 60, threshold = 100, key = user, count = "ok")]
async fn report(user: u64) -> Result<u64, AppError> {
    Ok(user)
}

// Count by any rule over the result (an axum login answers Ok((StatusCode::UNAUTHORIZED, ..))).
#[rate_limit(period = "15m", threshold = 5, key = ip, count_if = |r: &Result<Response, AppError>| failed_login(r))]
async fn axum_login(ip: &str) -> Result<Response, AppError> {
    Ok((StatusCode::UNAUTHORIZED, ip.to_owned()).into_response())
}

// Wait for a slot instead of failing: up to the given time, then deny as usual.
#[rate_limit(period = 1, threshold = 10, wait = "30s")]
async fn outbound() -> Result<(), AppError> {
    Ok(())
}

// Shadow mode: decide and record as usual, but never deny; would-be denials are reported.
#[rate_limit(period = 60, threshold = 100, key = user, shadow = true)]
async fn trial(user: u64) -> Result<u64, AppError> {
    Ok(user)
}

// Stacked, with the decisions read by the body and a closure that reads nothing of it.
#[rate_limit(period = 1, threshold = 5, key = ip, decision = d)]
#[rate_limit(period = "1d", threshold = 20, key = ip, count = "errors")]
#[rate_limit(period = "1h", threshold = 50, key = ip, shadow = true, count_if = |_: &Result<u64, AppError>| true)]
async fn stacked(ip: &str) -> Result<u64, AppError> {
    let _ = ip;
    Ok(d.remaining)
}

// Bodies whose values coerce to the return type, an inner attribute, an untyped closure.
pub struct Named {
    name: String,
}

impl Named {
    #[rate_limit(period = 60, threshold = 5, count = "errors")]
    async fn name(&self) -> Result<&str, AppError> {
        #![allow(clippy::needless_return)]
        return Ok(&self.name);
    }

    #[rate_limit(period = 60, threshold = 5, count_if = |r| r.is_err())]
    async fn boxed(&self) -> Result<Box<dyn std::fmt::Display + Send>, AppError> {
        Ok(Box::new(self.name.len()))
    }
}

#[rate_limit(period = 60, threshold = 5, count = "ok")]
async fn bytes() -> Result<&'static [u8], AppError> {
    Ok(b"abc")
}

#[rate_limit(period = 60, threshold = 5, count = "ok")]
async fn opaque() -> Result<impl std::fmt::Display, AppError> {
    Ok(5)
}

#[async_trait::async_trait]
pub trait Logins {
    async fn login(&self, ip: &str) -> Result<(), AppError>;
}

pub struct Service;

#[async_trait::async_trait]
impl Logins for Service {
    #[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors")]
    async fn login(&self, ip: &str) -> Result<(), AppError> {
        if ip.is_empty() { Err(AppError) } else { Ok(()) }
    }
}

fn assert_send<F: std::future::Future + Send>(future: F) -> F {
    future
}

fn main() {
    let _ = assert_send(login("ip", "pw"));
    let _ = assert_send(report(7));
    let _ = assert_send(axum_login("ip"));
    let _ = assert_send(outbound());
    let _ = assert_send(trial(7));
    let _ = assert_send(stacked("ip"));
    let _ = assert_send(Service.login("ip"));
    let named = Named { name: "n".into() };
    let _ = assert_send(named.name());
    let _ = assert_send(named.boxed());
    let _ = assert_send(bytes());
    let _ = assert_send(opaque());
}
