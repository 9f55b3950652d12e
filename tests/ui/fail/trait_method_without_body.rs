use ratelimit_runtime::{RateLimitError, rate_limit};

trait Greeter {
    #[rate_limit(period = 30, threshold = 2)]
    async fn greet(&self) -> Result<(), RateLimitError>;
}

fn main() {}
