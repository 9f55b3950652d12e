use ratelimit_runtime::{RateLimitError, rate_limit};

#[rate_limit(period = 30, threshold = 2)]
const async fn const_async() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 2)]
const fn const_fn() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 30, threshold = 2)]
fn not_async() -> Result<(), RateLimitError> {
    Ok(())
}

pub struct Service;

#[rate_limit(period = 30, threshold = 2)]
impl Service {
    pub async fn call(&self) -> Result<(), RateLimitError> {
        Ok(())
    }
}

#[rate_limit(period = 30, threshold = 2)]
pub struct Login {
    pub user: u64,
}

trait Greeter {
    #[rate_limit(period = 30, threshold = 2)]
    async fn greet(&self) -> Result<(), RateLimitError>;
}

fn main() {
    // The function, the impl block and the struct are still emitted as written: no error here.
    let _ = not_async();
    let _ = Service.call();
    let _ = Login { user: 1 };
}
