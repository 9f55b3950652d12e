use async_trait::async_trait;
use ratelimit_runtime::rate_limit;

#[async_trait]
trait Counter {
    async fn count(&self) -> u32;
}

struct Service;

#[async_trait]
impl Counter for Service {
    #[rate_limit(period = 30, threshold = 2)]
    async fn count(&self) -> u32 {
        7
    }
}

fn main() {
    let _ = Service.count();
}
