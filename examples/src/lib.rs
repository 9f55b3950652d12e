//! Examples of `ratelimit-runtime`: see `examples/`. The HTTP examples keep their routers here,
//! so that the end-to-end tests in `tests/` serve the very same apps.

pub mod hello_axum;
pub mod router_layer;

use std::net::SocketAddr;

/// Binds 127.0.0.1 on the port in the `PORT` environment variable, or on a free one.
///
/// # Errors
///
/// When `PORT` is not a port number or the port cannot be bound.
pub async fn bind_from_env() -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let port = match std::env::var("PORT") {
        Ok(port) if !port.is_empty() => port.parse().map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("PORT is not a port number: {port:?}"),
            )
        })?,
        _ => 0,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}
