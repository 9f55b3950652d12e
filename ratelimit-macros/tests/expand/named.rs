// `name` sets the scope instead of the function's path.
#[rate_limit(period = 60, threshold = 5, key = user_id, name = "login")]
async fn login(user_id: u64, password: String) -> Result<Session, AppError> {
    check_password(user_id, password).await
}
