// On a mistake: the function as written, then the error (here, one per mistake).
#[rate_limit(period = 0, thresold = 2)]
async fn f() -> Result<(), AppError> {
    Ok(())
}
