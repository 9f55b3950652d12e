use ratelimit_runtime::rate_limit;

#[rate_limit(period = 30, threshold = 2)]
pub struct Login {
    pub user: u64,
}

fn main() {
    // The struct is still emitted as written: no error here.
    let _ = Login { user: 1 };
}
