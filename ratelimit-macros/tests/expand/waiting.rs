// `wait`: a denied call waits for a slot, up to 30 s, then fails as a denial.
#[rate_limit(period = 1, threshold = 10, key = host, wait = "30s")]
async fn fetch(host: &str) -> Result<Page, AppError> {
    get(host).await
}
