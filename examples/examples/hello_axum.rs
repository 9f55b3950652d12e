//! The seeds' `HelloController`: `GET /hello/sayHi`, at most 2 calls per 30 s per user (header
//! `X-User-Id` or query `user`) and URI; the third call within 30 s gets a 429 with
//! `Retry-After`, `RateLimit-Policy`, `RateLimit` and a problem+json body.
//!
//! `cargo run -p examples --features axum --example hello_axum` (listens on 127.0.0.1, on
//! `PORT` or a free port; in process, or through Redis when `REDIS_URL` is set), then call it
//! three times: `curl -i -H 'X-User-Id: alice' http://127.0.0.1:<port>/hello/sayHi`.

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let (listener, addr) = examples::bind_from_env().await?;
    println!("listening on http://{addr}");
    println!("try: curl -i -H 'X-User-Id: alice' http://{addr}/hello/sayHi");
    // The default limiter: Redis from RATELIMIT_REDIS_URL or REDIS_URL, else in process.
    let limiter = ratelimit_runtime::global().clone();
    axum::serve(listener, examples::hello_axum::router(limiter)).await
}
