use std::sync::LazyLock;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

// rustc's own suggestion for `limiter = Limiter::memory()`: compiles, and never limits.
#[rate_limit(period = 30, threshold = 2, limiter = &Limiter::memory())]
async fn in_process() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 2, limiter = &Limiter::builder().build_now().unwrap())]
async fn built() -> Result<(), RateLimitError> {
    Ok(())
}

static LIMITER: LazyLock<Limiter> = LazyLock::new(Limiter::memory);

#[rate_limit(period = 30, threshold = 2, limiter = LIMITER.clone())]
async fn not_a_reference() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 2, limiter = &"redis://127.0.0.1:6379/")]
async fn wrong_type() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = wrong_type();
}
