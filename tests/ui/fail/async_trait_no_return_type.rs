use async_trait::async_trait;
use ratelimit_runtime::rate_limit;

#[async_trait]
trait Notifier {
    async fn notify(&self);
}

struct Service;

#[async_trait]
impl Notifier for Service {
    #[rate_limit(period = 30, threshold = 2)]
    async fn notify(&self) {}
}

fn main() {
    let _ = Service.notify();
}
