// A concurrency limit stacked under a rate: one check of both, the call's slot held in
// `__ratelimit` while the body runs, released when the function returns (or its future is
// dropped).
#[rate_limit(period = 1, threshold = 10, key = tenant)]
#[rate_limit(concurrency = 4, slot_time = "10s", key = tenant, wait = "2s", decision = d)]
async fn export(tenant: &str) -> Result<usize, AppError> {
    Ok(d.len())
}
