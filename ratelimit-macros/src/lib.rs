//! The `#[rate_limit]` attribute of [`ratelimit-runtime`](https://docs.rs/ratelimit-runtime).
//!
//! Use it through `ratelimit_runtime::rate_limit`: the code it generates calls into that crate
//! (its hidden `__private` module), so this crate is of no use alone.
//!
//! - `args` parses and validates the attribute's arguments, reporting each mistake at its token.
//! - `item` checks the annotated item is an `async fn` returning something, keeping its body as
//!   tokens.
//! - `expand` writes the guard that checks the limiter before the body runs.

mod args;
mod expand;
mod item;

use proc_macro::TokenStream;

/// Rate-limits an `async fn`: each call is checked against a sliding window log before the body
/// runs, and a denied call returns `Err(E::from(RateLimitError))` without running it.
///
/// ```ignore
/// use ratelimit_runtime::{rate_limit, RateLimitError};
///
/// #[rate_limit(period = 30, threshold = 2)]
/// async fn say_hi() -> Result<&'static str, RateLimitError> {
///     Ok("hi")
/// }
/// ```
///
/// (Runnable examples are in the documentation of `ratelimit_runtime`, which re-exports this
/// attribute.)
///
/// # Semantics
///
/// A call is admitted iff fewer than `threshold` admitted calls of the same key happened in the
/// last `period` (a sliding window, not fixed buckets); an admitted call is recorded, a denied
/// one is not. The check happens when the returned future is first polled, before any of the
/// body runs. When it is denied, the function returns
/// `Err(E::from(RateLimitError::Denied(..)))` and the body never runs; the error carries the
/// scope, the key and when to retry. When the limiter's store fails, its `FailurePolicy`
/// decides, and with `FailurePolicy::Closed` the function returns
/// `Err(E::from(RateLimitError::Unavailable(..)))`, again without running the body.
///
/// The function must be an `async fn` (free, or a method with any receiver; generics and
/// `where` clauses are fine) returning `Result<T, E>` where `E: From<RateLimitError>`; any alias
/// of `Result`, such as `anyhow::Result<T>`, works. Its signature, attributes and body are kept
/// as written.
///
/// The counter is named by the scope (see [`name`](#name)) and the optional [`key`](#key): in
/// Redis it is the sorted set `<prefix><scope>`, or `<prefix><scope>:<key>` with a `key`
/// (`prefix` is the limiter's key prefix, `"ratelimit:"` by default).
///
/// # `period`
///
/// Required: the window's length, an integer literal in whole seconds (`period = 60`) or a
/// string `"<integer><unit>"` with unit `ms`, `s`, `m` or `h` and no space (`period =
/// "1500ms"`), from 1 ms to 100 years (3,155,760,000 s).
///
/// # `threshold`
///
/// Required: the number of calls admitted per window, an integer literal from 1 to 4294967295
/// (`threshold = 10`).
///
/// # `key`
///
/// Optional: an expression whose value, formatted with `Display`, splits the counter, such as
/// `key = user_id` or `key = self.tenant`; without it every call of the function shares one
/// counter. It may use the function's arguments and `self`; it is evaluated and formatted
/// before the body runs, so it may borrow an argument that the body later moves, and no borrow
/// of it is held across the check's `.await`.
///
/// # `limiter`
///
/// Optional: an expression evaluating to `&Limiter`, such as `limiter = &self.limiter` or
/// `limiter = my_limiter()`, evaluated on each call; without it the process-wide default
/// `ratelimit_runtime::global()` is used.
///
/// # `name`
///
/// Optional: the scope, a non-empty string literal (`name = "login"`). Functions with the same
/// `name` share their counters. Without it the scope is the function's path, such as
/// `app::handlers::login` or `app::Session<_>::login` (distinct for same-named methods of
/// different types). Set a `name` to keep keys stable when code moves or the compiler
/// changes: the default comes from `std::any::type_name`, whose output Rust does not promise
/// to keep.
///
/// # `crate`
///
/// Optional: the path of the `ratelimit_runtime` crate as a string (`crate =
/// "my_reexports::ratelimit"`), for when it is re-exported rather than a direct dependency. A
/// renamed direct dependency is found without it.
///
/// # Equivalent code without `#[rate_limit]`
///
/// ```ignore
/// #[rate_limit(period = 60, threshold = 5, key = user_id, name = "login")]
/// async fn login(user_id: u64) -> Result<Session, AppError> {
///     body
/// }
///
/// // is, in effect:
///
/// async fn login(user_id: u64) -> Result<Session, AppError> {
///     let rate = ratelimit_runtime::Rate::new(5, std::time::Duration::from_secs(60))
///         .expect("checked at compile time");
///     let key = format!("login:{}", user_id); // without `key`: the scope alone
///     let limiter = ratelimit_runtime::global(); // or the `limiter` expression
///     let decision = limiter.check(&key, rate).await.map_err(AppError::from)?;
///     if !decision.allowed {
///         let denied = ratelimit_runtime::Denied::new("login", Some(user_id.to_string()), decision);
///         return Err(AppError::from(RateLimitError::Denied(Box::new(denied))));
///     }
///     body
/// }
/// ```
///
/// # Errors at compile time
///
/// Each mistake is reported at its token, and the function is then kept as written so the rest
/// of the crate still compiles: an unknown, duplicate or missing argument, a value out of
/// bounds or of the wrong kind, a malformed duration string, an item that is not an `async
/// fn`, and a return type that is not `Result<T, E>` with `E: From<RateLimitError>`.
#[proc_macro_attribute]
pub fn rate_limit(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::rate_limit(args.into(), item.into()).into()
}
