//! Examples of `ratelimit-runtime`: see `examples/`. The HTTP examples keep their routers here,
//! so that the end-to-end tests in `tests/` serve the very same apps; they are behind the
//! features `axum`, `actix-web` and `tonic`, so that the quickstart builds without those
//! frameworks.

#[cfg(feature = "tonic")]
pub mod grpc;
#[cfg(feature = "actix-web")]
pub mod hello_actix;
#[cfg(feature = "axum")]
pub mod hello_axum;
#[cfg(feature = "axum")]
pub mod router_layer;
#[cfg(any(feature = "axum", feature = "actix-web"))]
pub mod user;

use std::net::SocketAddr;

use ratelimit_runtime::{FailurePolicy, Limiter, RateLimitError};

/// The limiter of an example: through Redis when `RATELIMIT_REDIS_URL` or `REDIS_URL` is set
/// (the variables the default limiter reads), failing closed so that a Redis that cannot be
/// reached shows as an error instead of being answered by the in-process fallback; in process
/// otherwise. With the store's name, to print.
///
/// # Errors
///
/// When the URL is not a Redis URL.
pub fn limiter_from_env() -> Result<(Limiter, &'static str), RateLimitError> {
    let url = ["RATELIMIT_REDIS_URL", "REDIS_URL"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|url| !url.is_empty()));
    match url {
        Some(url) => {
            let limiter = Limiter::builder()
                .redis_url(&url)
                .failure_policy(FailurePolicy::Closed)
                .build()?;
            Ok((limiter, "Redis"))
        }
        None => Ok((Limiter::memory(), "in process (set REDIS_URL to use Redis)")),
    }
}

/// Binds 127.0.0.1 on the port in the `PORT` environment variable, or on a free one.
///
/// # Errors
///
/// When `PORT` is not a port number or the port cannot be bound.
pub async fn bind_from_env() -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port_from_env()?)).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// As [`bind_from_env`], for servers that take a `std` listener (actix-web).
///
/// # Errors
///
/// When `PORT` is not a port number or the port cannot be bound.
pub fn bind_std_from_env() -> std::io::Result<(std::net::TcpListener, SocketAddr)> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port_from_env()?))?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

/// The port in `PORT`, or 0 (a free one) when it is not set.
fn port_from_env() -> std::io::Result<u16> {
    match std::env::var("PORT") {
        Ok(port) if !port.is_empty() => port.parse().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("PORT is not a port number: {port:?}"),
            )
        }),
        _ => Ok(0),
    }
}
