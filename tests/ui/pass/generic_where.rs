use std::fmt::Display;

use ratelimit_runtime::{RateLimitError, rate_limit};

#[derive(Debug)]
enum AppError {
    Limited(RateLimitError),
}

impl From<RateLimitError> for AppError {
    fn from(err: RateLimitError) -> Self {
        AppError::Limited(err)
    }
}

type AppResult<T> = Result<T, AppError>;

#[rate_limit(period = 60, threshold = 5, key = id)]
pub(crate) async fn show<'a, T, K: Display>(value: &'a T, id: K) -> AppResult<&'a T>
where
    T: Display + Sync + ?Sized,
{
    Ok(value)
}

struct Wrapper<T>(T);

impl<T: Clone + Send> Wrapper<T> {
    #[rate_limit(period = "2s", threshold = 1)]
    async fn get<U>(&self, _other: U) -> Result<T, AppError>
    where
        U: Into<T>,
    {
        Ok(self.0.clone())
    }
}

#[rate_limit(period = 60, threshold = 5)]
async fn opaque() -> Result<impl Display, AppError> {
    Ok(5)
}

fn main() {
    let _ = show("x", 1);
    let _ = Wrapper(1u8).get(2u8);
    let _ = opaque();
}
