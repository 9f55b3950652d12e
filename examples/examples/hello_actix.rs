//! The seeds' `HelloController` on actix-web: `GET /hello/sayHi`, at most 2 calls per 30 s per
//! user (header `X-User-Id` or query `user`) and URI; the third call within 30 s gets a 429
//! with `Retry-After`, `RateLimit-Policy`, `RateLimit` and a problem+json body, as
//! `hello_axum`.
//!
//! `cargo run -p examples --features actix-web --example hello_actix` (listens on 127.0.0.1, on
//! `PORT` or a free port; in process, or through Redis when `REDIS_URL` is set), then call it
//! three times: `curl -i -H 'X-User-Id: alice' http://127.0.0.1:<port>/hello/sayHi`.

use actix_web::{App, HttpServer};

fn main() -> std::io::Result<()> {
    let (listener, addr) = examples::bind_std_from_env()?;
    println!("listening on http://{addr}");
    println!("try: curl -i -H 'X-User-Id: alice' http://{addr}/hello/sayHi");
    // The default limiter: Redis from RATELIMIT_REDIS_URL or REDIS_URL, else in process.
    let limiter = ratelimit_runtime::global().clone();
    let app = examples::hello_actix::app(limiter);
    actix_web::rt::System::new().block_on(
        HttpServer::new(move || App::new().configure(app.clone()))
            .listen(listener)?
            .run(),
    )
}
