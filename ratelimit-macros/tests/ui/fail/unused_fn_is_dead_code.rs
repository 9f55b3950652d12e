//! `dead_code` still fires for an annotated function nobody calls.
#![deny(dead_code)]

use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2, key = id)]
async fn never_called(id: u64) -> Result<u64, RateLimitError> {
    Ok(id)
}

fn main() {}
