//! A whole router limited per client IP by the tower layer: 5 requests per 10 s over all
//! routes; the sixth gets a 429. Admitted responses carry `RateLimit-Policy` and `RateLimit`.
//!
//! `cargo run -p examples --features axum --example router_layer` (listens on 127.0.0.1, on
//! `PORT` or a free port; `TRUSTED_PROXIES=10.0.0.0/8,127.0.0.1` believes `X-Forwarded-For`
//! from those), then `curl -i http://127.0.0.1:<port>/`.

use std::net::SocketAddr;

use ratelimit_runtime::axum::IpRange;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let trusted = std::env::var("TRUSTED_PROXIES")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|range| !range.is_empty())
        .map(str::parse::<IpRange>)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))?;
    let (listener, addr) = examples::bind_from_env().await?;
    println!("listening on http://{addr}");
    println!("try: curl -i http://{addr}/");
    let app = examples::router_layer::router(ratelimit_runtime::global().clone(), trusted);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}
