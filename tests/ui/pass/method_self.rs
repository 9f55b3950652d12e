use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

struct Service {
    tenant: String,
    limiter: Limiter,
}

impl Service {
    #[rate_limit(period = 60, threshold = 5, key = self.tenant, limiter = &self.limiter)]
    pub async fn call(&self, n: u32) -> Result<u32, RateLimitError> {
        Ok(n)
    }

    #[rate_limit(period = 60, threshold = 5)]
    async fn consume(self) -> Result<String, RateLimitError> {
        Ok(self.tenant)
    }

    #[rate_limit(period = 60, threshold = 5)]
    async fn mutate(&mut self) -> Result<(), RateLimitError> {
        self.tenant.push('!');
        Ok(())
    }
}

trait Greet {
    async fn greet(&self) -> Result<&'static str, RateLimitError>;
}

impl Greet for Service {
    #[rate_limit(period = 60, threshold = 5)]
    async fn greet(&self) -> Result<&'static str, RateLimitError> {
        Ok("hi")
    }
}

fn main() {
    let service = Service {
        tenant: "acme".to_owned(),
        limiter: Limiter::memory(),
    };
    let _ = service.call(1);
    let _ = service.greet();
}
