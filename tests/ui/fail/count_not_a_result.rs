use ratelimit_runtime::rate_limit;

#[rate_limit(period = 60, threshold = 5, count = "errors")]
async fn total() -> u32 {
    5
}

fn main() {}
