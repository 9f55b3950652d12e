// A rejected attribute leaves no "unused import" behind: the imports that only its arguments
// used stay used, so that the one error stands alone (and no advice to remove them).
use std::sync::LazyLock;
use std::time::Duration;

use ratelimit_runtime::{Limiter, Rate, RateLimitError, rate_limit};

mod limits {
    use super::*;

    pub static LOGIN: LazyLock<Limiter> = LazyLock::new(Limiter::memory);
}

use limits::LOGIN;

#[rate_limit(rate = Rate::new(5, Duration::from_secs(1)).unwrap(), limiter = &*LOGIN, shadow = "yes")]
async fn login() -> Result<(), RateLimitError> {
    Ok(())
}

fn main() {
    let _ = login();
}
