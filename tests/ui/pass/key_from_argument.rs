use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 5, key = user_id)]
async fn login(user_id: u64) -> Result<u64, RateLimitError> {
    Ok(user_id)
}

// The key borrows an argument that the body then moves.
#[rate_limit(period = 60, threshold = 5, key = name.as_str())]
async fn consume(name: String) -> Result<String, RateLimitError> {
    Ok(name)
}

fn main() {
    let _ = login(1);
    let _ = consume(String::new());
}
