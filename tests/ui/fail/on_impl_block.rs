use ratelimit_runtime::{RateLimitError, rate_limit};

pub struct Service;

#[rate_limit(period = 30, threshold = 2)]
impl Service {
    pub async fn call(&self) -> Result<(), RateLimitError> {
        Ok(())
    }
}

fn main() {
    // The impl block is still emitted as written: no error here.
    let _ = Service.call();
}
