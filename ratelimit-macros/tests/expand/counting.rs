// `count = "errors"` beside a limit that counts every call, and a shadow limit: the body runs
// in an async block of its own, then the limits under which the call does not count refund it.
#[rate_limit(period = 1, threshold = 5, key = ip, decision = d)]
#[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors")]
#[rate_limit(period = "1h", threshold = 50, key = ip, shadow = true, count_if = |r: &Result<Session, AppError>| r.is_ok())]
async fn login(ip: &str, password: &str) -> Result<Session, AppError> {
    if password.is_empty() {
        return Err(AppError::Empty);
    }
    let session = open(ip, password).await?;
    Ok(session)
}
