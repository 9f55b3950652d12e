// A counter per value of `key`, formatted before the check.
#[rate_limit(period = "1500ms", threshold = 10, key = user_id)]
async fn greet(user_id: u64) -> Result<String, AppError> {
    Ok(format!("hi, {user_id}"))
}
