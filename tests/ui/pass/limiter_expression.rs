use std::sync::OnceLock;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

fn my_limiter() -> &'static Limiter {
    static LIMITER: OnceLock<Limiter> = OnceLock::new();
    LIMITER.get_or_init(Limiter::memory)
}

#[rate_limit(period = 60, threshold = 5, limiter = my_limiter())]
async fn from_a_function() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 5, limiter = limiter)]
async fn from_an_argument(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = from_a_function();
    let limiter = Limiter::memory();
    let _ = from_an_argument(&limiter);
}
