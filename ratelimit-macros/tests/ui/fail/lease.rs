use ratelimit_runtime::{Rate, RateLimitError, rate_limit};

#[rate_limit(period = 1, threshold = 100_000, lease = "yes")]
async fn not_a_bool() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(rate = plan, key = tenant, lease = true)]
async fn with_rate(plan: Rate, tenant: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, lease = true)]
async fn below_a_leased_threshold() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {}
