use ratelimit_runtime::{RateLimitError, rate_limit};

#[async_trait::async_trait]
trait Api {
    async fn get(&self) -> Result<(), RateLimitError>;
}

struct Server;

#[async_trait::async_trait]
impl Api for Server {
    #[rate_limit(period = 60, threshold = 5, decision = d)]
    async fn get(&self) -> Result<(), RateLimitError> {
        Ok(())
    }
}

fn main() {}
