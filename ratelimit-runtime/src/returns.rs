//! What a function under `#[rate_limit]` returns: [`LimitedResult`] and its error type,
//! [`FromRateLimitError`]. Named in the compiler's messages about a function that returns
//! something else; sealed, so that only the types they describe implement them.

use crate::error::RateLimitError;

mod sealed {
    pub trait Result {}
    pub trait Error {}
}

/// The return type of a function under `#[rate_limit]`: `Result<T, E>`, whatever its spelling
/// (`anyhow::Result<T>` and other aliases included), whose `E` is a [`FromRateLimitError`]. A
/// denied call returns `Err(E::from(RateLimitError))` without running the body. Implemented
/// for `Result` only.
#[diagnostic::on_unimplemented(
    message = "`#[rate_limit]` needs the function to return `Result<T, E>` with `E: From<RateLimitError>`, not `{Self}`",
    label = "not a `Result<T, E>`",
    note = "a denied call returns `Err(E::from(RateLimitError))` without running the body"
)]
pub trait LimitedResult: sealed::Result {
    /// The `E` of `Result<T, E>`.
    type Error;
    /// `Err(error)`.
    #[doc(hidden)]
    fn err(error: Self::Error) -> Self;
}

impl<T, E> sealed::Result for Result<T, E> {}

#[diagnostic::do_not_recommend]
impl<T, E> LimitedResult for Result<T, E> {
    type Error = E;
    fn err(error: E) -> Self {
        Err(error)
    }
}

/// The error type of a function under `#[rate_limit]`: any `E: From<RateLimitError>`, such as
/// `RateLimitError` itself, `anyhow::Error`, `Box<dyn Error + Send + Sync>`, `std::io::Error`,
/// or an application's error type with such a `From`. Implemented for those only.
#[diagnostic::on_unimplemented(
    message = "`#[rate_limit]` needs the error type `{Self}` to implement `From<RateLimitError>`",
    label = "`{Self}` does not implement `From<RateLimitError>`",
    note = "a denied call returns `Err(E::from(RateLimitError))` without running the body"
)]
pub trait FromRateLimitError: sealed::Error {
    /// `E::from(err)`.
    #[doc(hidden)]
    fn from_rate_limit_error(err: RateLimitError) -> Self;
}

impl<E: From<RateLimitError>> sealed::Error for E {}

#[diagnostic::do_not_recommend]
impl<E: From<RateLimitError>> FromRateLimitError for E {
    fn from_rate_limit_error(err: RateLimitError) -> Self {
        E::from(err)
    }
}
