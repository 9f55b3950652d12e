use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2)]
fn limited() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    // The function is still emitted as written: no error here.
    let _ = limited();
}
