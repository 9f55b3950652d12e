use async_trait::async_trait;
use ratelimit_runtime::{RateLimitError, rate_limit};

#[async_trait]
trait Api {
    async fn get(&self) -> Result<(), RateLimitError>;
}

struct Server;

#[async_trait]
impl Api for Server {
    #[rate_limit(period = 60, threshold = 5, decision = d)]
    async fn get(&self) -> Result<(), RateLimitError> {
        Ok(())
    }
}

struct Service;

#[async_trait]
trait Fetch {
    async fn fetch(&self) -> Result<u32, String>;
}

#[async_trait]
impl Fetch for Service {
    #[rate_limit(period = 30, threshold = 2)]
    async fn fetch(&self) -> Result<u32, String> {
        Ok(7)
    }
}

// Under `#[async_trait]`, the key is evaluated before the method's future is made, where only
// the arguments as `#[async_trait]` renamed them exist: a binding of a pattern argument is not
// in scope yet.
#[async_trait]
trait Pairs {
    async fn add(&self, pair: (u8, u8)) -> Result<u16, RateLimitError>;
}

#[async_trait]
impl Pairs for Service {
    #[rate_limit(period = 30, threshold = 2, key = a)]
    async fn add(&self, (a, b): (u8, u8)) -> Result<u16, RateLimitError> {
        Ok(u16::from(a) + u16::from(b))
    }
}

#[async_trait]
trait Notifier {
    async fn notify(&self);
}

#[async_trait]
impl Notifier for Service {
    #[rate_limit(period = 30, threshold = 2)]
    async fn notify(&self) {}
}

#[async_trait]
trait Counter {
    async fn count(&self) -> u32;
}

#[async_trait]
impl Counter for Service {
    #[rate_limit(period = 30, threshold = 2)]
    async fn count(&self) -> u32 {
        7
    }
}

fn main() {
    let _ = Server.get();
    let _ = Service.fetch();
    let _ = Service.add((1, 2));
    let _ = Service.notify();
    let _ = Service.count();
}
