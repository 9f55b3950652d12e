use async_trait::async_trait;
use ratelimit_runtime::rate_limit;

#[async_trait]
trait Fetch {
    async fn fetch(&self) -> Result<u32, String>;
}

struct Service;

#[async_trait]
impl Fetch for Service {
    #[rate_limit(period = 30, threshold = 2)]
    async fn fetch(&self) -> Result<u32, String> {
        Ok(7)
    }
}

fn main() {
    let _ = Service.fetch();
}
