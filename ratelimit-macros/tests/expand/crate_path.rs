// `crate` names the runtime where it is re-exported.
#[rate_limit(period = "1h", threshold = 1000, crate = "my_app::deps::ratelimit")]
async fn report() -> Result<(), my_app::Error> {
    Ok(())
}
