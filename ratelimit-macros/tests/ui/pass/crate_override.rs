// The runtime reached through a re-export, as a facade crate would offer it.
mod facade {
    pub use ::ratelimit_runtime as ratelimit;
}

use facade::ratelimit::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, crate = "crate::facade::ratelimit")]
async fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = limited();
}
