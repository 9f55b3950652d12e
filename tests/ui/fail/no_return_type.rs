use ratelimit_runtime::rate_limit;

#[rate_limit(period = 30, threshold = 2)]
async fn limited() {}

fn main() {}
