//! `#[rate_limit(period = 30, threshold = 2)]` on an async fn, called five times: two calls are
//! admitted, three denied (the body does not run), each denial with its retry-after.
//!
//! In process by default; through Redis when `REDIS_URL` (or `RATELIMIT_REDIS_URL`) is set, e.g.
//! `REDIS_URL=redis://127.0.0.1:6379/ cargo run -p examples --example quickstart`.

use std::time::{SystemTime, UNIX_EPOCH};

use ratelimit_runtime::{FailurePolicy, Limiter, RateLimitError, rate_limit, set_global};

/// Greets `user`, at most twice per 30 seconds per user.
#[rate_limit(period = 30, threshold = 2, key = user)]
async fn say_hi(user: &str) -> Result<String, RateLimitError> {
    Ok(format!("hi, {user}"))
}

#[tokio::main]
async fn main() {
    // The same variables the default limiter reads: RATELIMIT_REDIS_URL, else REDIS_URL.
    let url = ["RATELIMIT_REDIS_URL", "REDIS_URL"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|url| !url.is_empty()));
    let store = match url {
        Some(url) => {
            // Fail closed here so that a Redis that cannot be reached shows as an error
            // instead of being answered by the in-process fallback.
            let limiter = Limiter::builder()
                .redis_url(&url)
                .failure_policy(FailurePolicy::Closed)
                .build()
                .unwrap_or_else(|error| {
                    eprintln!("cannot use that Redis: {error}");
                    std::process::exit(2);
                });
            set_global(limiter).expect("the default limiter is set once, before any call");
            "Redis"
        }
        None => "in process (set REDIS_URL to use Redis)",
    };
    println!("store: {store}");

    // A user unique to this run, so that running it again shows the same outcomes.
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros());
    let user = format!("user-{run}");

    for call in 1..=5 {
        match say_hi(&user).await {
            Ok(greeting) => println!("call {call}: admitted: {greeting}"),
            Err(RateLimitError::Denied(denied)) => {
                let wait = denied.decision().retry_after.unwrap_or_default();
                println!(
                    "call {call}: denied, retry after {:.3}s",
                    wait.as_secs_f64()
                );
            }
            Err(error) => println!("call {call}: error: {error}"),
        }
    }
}
