//! A user type named like a primitive the expansion uses does not disturb it.
#![allow(non_camel_case_types, dead_code)]

use ratelimit_runtime::{RateLimitError, rate_limit};

struct str;
struct u64;

#[rate_limit(period = 30, threshold = 2)]
async fn unkeyed() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 2, key = id, name = "named")]
async fn keyed(id: u8) -> Result<u8, RateLimitError> {
    Ok(id)
}

fn main() {
    let _ = unkeyed();
    let _ = keyed(1);
}
