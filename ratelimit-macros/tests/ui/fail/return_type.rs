use ratelimit_runtime::rate_limit;

#[rate_limit(period = 30, threshold = 2)]
async fn limited() {}

#[rate_limit(period = 30, threshold = 2)]
async fn not_a_result() -> u32 {
    7
}

#[rate_limit(period = 30, threshold = 2)]
async fn error_without_from() -> Result<(), String> {
    Ok(())
}

fn main() {}
