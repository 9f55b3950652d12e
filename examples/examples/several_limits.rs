//! Several limits per call, and a cost per call, by hand: a burst limit (5 per second) and a
//! daily quota (40 items per day) on one user, checked together by `Limiter::check_all`. A
//! call is admitted only if both admit it, and a call denied by one is recorded by neither.
//!
//! In process by default; through Redis when `REDIS_URL` is set, e.g.
//! `REDIS_URL=redis://127.0.0.1:6379/ cargo run -p examples --example several_limits`.

use std::time::Duration;

use ratelimit_runtime::{Decisions, FailurePolicy, Limit, Limiter, Rate, RateLimitError};

/// Checks one search by `user` for `items` items: the burst limit counts searches, the daily
/// quota counts items. The two keys share a hash tag, `{user:<id>}`, so that in a Redis
/// Cluster they share a slot and are checked by one script.
async fn search(limiter: &Limiter, user: &str, items: u32) -> Result<Decisions, RateLimitError> {
    let burst = Rate::new(5, Duration::from_secs(1))?;
    let daily = Rate::new(40, Duration::from_secs(86_400))?;
    let burst_key = format!("{{user:{user}}}:burst");
    let daily_key = format!("{{user:{user}}}:daily");
    limiter
        .check_all([
            Limit::new(burst_key.as_str(), burst),
            Limit::new(daily_key.as_str(), daily)
                .with_cost(items)
                .with_label("daily"),
        ])
        .await
}

#[tokio::main]
async fn main() {
    let limiter = match std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
    {
        Some(url) => Limiter::builder()
            .redis_url(url)
            .key_prefix("example:several:")
            .failure_policy(FailurePolicy::Closed)
            .build()
            .unwrap_or_else(|error| {
                eprintln!("cannot use that Redis: {error}");
                std::process::exit(2);
            }),
        None => Limiter::memory(),
    };
    let user = format!("{}", std::process::id());
    for (call, items) in [10, 10, 10, 1, 1, 15, 1].into_iter().enumerate() {
        match search(&limiter, &user, items).await {
            Ok(decisions) => {
                let verdict = if decisions.allowed {
                    "admitted".to_owned()
                } else {
                    format!(
                        "denied by {} (retry after {:?})",
                        decisions.deciding().label(),
                        decisions.retry_after.unwrap_or_default()
                    )
                };
                let left: Vec<String> = decisions
                    .iter()
                    .map(|limit| format!("{} {} left", limit.label(), limit.remaining))
                    .collect();
                println!(
                    "call {} ({items:>2} items): {verdict}; {}",
                    call + 1,
                    left.join(", ")
                );
                println!("  {}", decisions.headers().rate_limit());
            }
            Err(error) => println!("call {} ({items:>2} items): {error}", call + 1),
        }
    }
}
