//! A whole router limited by client IP with the tower layer (feature `axum`): every route
//! shares one limit per client, 5 requests per 10 seconds.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratelimit_runtime::axum::{IpRange, PeerIp, RateLimitLayer};
use ratelimit_runtime::{Limiter, Rate};

/// The limit of every client: 5 requests per 10 seconds, over all routes.
pub const RATE: Rate = Rate::new_const(5, Duration::from_secs(10));

/// The app: `GET /` and `GET /status`, limited per client IP by `limiter`. `trusted_proxies`
/// are the reverse proxies whose `X-Forwarded-For` is believed (none: the peer address is the
/// client). Serve it with `into_make_service_with_connect_info::<SocketAddr>()`.
pub fn router(limiter: Limiter, trusted_proxies: Vec<IpRange>) -> Router {
    let key = PeerIp::new().trust_forwarded_from(trusted_proxies);
    Router::new()
        .route("/", get(|| async { "hello" }))
        .route("/status", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, RATE, key).scope("api"))
}
