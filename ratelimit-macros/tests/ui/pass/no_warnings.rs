//! The expansion adds no warning, even to one-expression bodies, under `deny(warnings)`.
#![deny(warnings)]

use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2)]
async fn one_expression() -> Result<(), RateLimitError> { Ok(()) }

#[rate_limit(period = 30, threshold = 2, key = id)]
pub async fn keyed(id: u64) -> Result<u64, RateLimitError> {
    Ok(id)
}

fn main() {
    let _ = one_expression();
    let _ = keyed(1);
}
