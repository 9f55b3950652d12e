#![deny(unused, clippy::all)]

use ratelimit_runtime::{RateLimitError, rate_limit};

// Arguments named like the generated locals: the key must see the arguments, the body too.
#[rate_limit(period = 60, threshold = 5, key = format!("{scope}{key}{err}{rate}{RATE}"))]
#[allow(non_snake_case)]
async fn shadowing(
    scope: &str,
    key: u8,
    err: bool,
    rate: f64,
    RATE: char,
) -> Result<String, RateLimitError> {
    Ok(format!("{scope}{key}{err}{rate}{RATE}"))
}

// Lowercase constants named like the generated locals, which a binding pattern would match.
#[allow(dead_code, non_upper_case_globals)]
mod constants_in_scope {
    use ratelimit_runtime::{RateLimitError, rate_limit};

    const scope: u8 = 0;
    const key: u8 = 1;
    const err: u8 = 2;
    const rate: u8 = 3;

    #[rate_limit(period = 60, threshold = 5, key = key)]
    pub async fn limited() -> Result<u8, RateLimitError> {
        Ok(scope + key + err + rate)
    }
}

fn main() {
    let _ = shadowing("s", 1, true, 1.5, 'r');
    let _ = constants_in_scope::limited();
}
