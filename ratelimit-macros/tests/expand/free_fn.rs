// A free function without `key`: one counter for every call, in the default limiter.
#[rate_limit(period = 30, threshold = 2)]
pub async fn say_hi() -> Result<&'static str, RateLimitError> {
    Ok("hi")
}
