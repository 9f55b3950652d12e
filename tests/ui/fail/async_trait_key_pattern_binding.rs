//! Under `#[async_trait]`, the key is evaluated before the method's future is made, where only
//! the arguments as `#[async_trait]` renamed them exist: a binding of a pattern argument is not
//! in scope yet.
use async_trait::async_trait;
use ratelimit_runtime::{RateLimitError, rate_limit};

#[async_trait]
trait Pairs {
    async fn add(&self, pair: (u8, u8)) -> Result<u16, RateLimitError>;
}

struct Service;

#[async_trait]
impl Pairs for Service {
    #[rate_limit(period = 30, threshold = 2, key = a)]
    async fn add(&self, (a, b): (u8, u8)) -> Result<u16, RateLimitError> {
        Ok(u16::from(a) + u16::from(b))
    }
}

fn main() {
    let _ = Service.add((1, 2));
}
