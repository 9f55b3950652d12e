// Stacked limits, one check: a burst limit and a daily quota on one key, the body reading the
// decisions as `d`.
#[rate_limit(period = 1, threshold = 5, key = user, label = "burst")]
#[rate_limit(period = "1d", threshold = 1000, key = user, decision = d)]
async fn search(user: &str) -> Result<String, AppError> {
    Ok(d.headers().policy())
}
