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

fn main() {
    let _ = Limiter::memory();
}
