//! The `#[rate_limit]` attribute of [`ratelimit-runtime`](https://docs.rs/ratelimit-runtime).
//!
//! Use it through `ratelimit_runtime::rate_limit`: the code it generates calls into that crate
//! (its hidden `__private` module), so this crate is of no use alone.
//!
//! - `args` parses and validates the attribute's arguments, reporting each mistake at its token,
//!   with `duration` (the grammar of `"1500ms"`) and `suggest` (the "did you mean" of unknown
//!   names);
//! - `item` checks the annotated item is an `async fn` returning something, keeping its body as
//!   tokens;
//! - `spans` places generated tokens where rustc should report them;
//! - `expand` writes the guard that checks the limiter before the body runs.

#![forbid(unsafe_code)]

mod args;
mod duration;
mod expand;
mod item;
mod spans;
mod stack;
mod suggest;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod snapshots;

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
/// The function must be an `async fn` returning `Result<T, E>` where
/// `E: From<RateLimitError>`. Its signature, attributes and body are kept as written, and the
/// returned future is `Send` exactly when it would be without the attribute. That covers:
///
/// - free functions and methods, with any visibility, in any module, and any receiver: `self`,
///   `&self`, `&mut self`, `self: Arc<Self>`, `self: Pin<&mut Self>`;
/// - generics with bounds and `where` clauses, explicit and elided lifetimes, `impl Trait`
///   arguments, `Result<impl Trait, E>`, pattern arguments such as `(a, b): (u8, u8)` (the
///   `key` may use their bindings);
/// - `async fn` in trait impls and in traits with a default body, native or under
///   [`#[async_trait]`](https://docs.rs/async-trait) (see below);
/// - any spelling of the return type: `anyhow::Result<T>`, `std::io::Result<T>`
///   (`ratelimit_runtime` implements `From<RateLimitError>` for `std::io::Error`, of kind
///   `QuotaExceeded` for a denial), a crate's own `type Result<T> = Result<T, AppError>`;
/// - other attributes on either side of this one: doc comments, `#[must_use]`, `#[cfg(..)]`,
///   `#[allow(..)]`, `#[inline]`, and `#[tracing::instrument]`, above this attribute (the span
///   also covers the check) or below it (the span covers the body only).
///
/// ## Under `#[async_trait]`
///
/// Put `#[rate_limit]` on the method, inside the `#[async_trait]` impl or trait, above or below
/// the method's other attributes. `#[async_trait]`, being on the block, always expands first,
/// turning the method into a plain `fn` returning `Pin<Box<dyn Future<Output = R> + Send>>`;
/// `#[rate_limit]` recognises that shape (by its `'async_trait` lifetime) and wraps the future
/// the method returns. Two differences with a plain `async fn`: the `key` and `limiter`
/// expressions are evaluated when the method is called rather than when its future is first
/// polled (the check itself still happens at the first poll), and the `key` cannot use the
/// bindings of pattern arguments, which `#[async_trait]` only makes inside the future ("cannot
/// find value `a` in this scope"): name the argument and read its fields instead. Any other
/// non-`async` function is refused.
///
/// The counter is named by the scope (see [`name`](#name)) and the optional [`key`](#key): in
/// Redis it is the sorted set `<prefix><scope>`, or `<prefix><scope>:<key>` with a `key`
/// (`prefix` is the limiter's key prefix, `"ratelimit:"` by default).
///
/// # `period`
///
/// Required: the window's length, an integer literal in whole seconds (`period = 60`) or a
/// string `"<integer><unit>"` with unit `ms`, `s`, `m`, `h` or `d` (days of 24 hours) and no
/// space (`period = "1500ms"`, `period = "1d"`), from 1 ms to 100 years (3,155,760,000 s).
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
/// of it is held across the check's `.await`. It may not name `__ratelimit`, the one name the
/// expansion reserves (see [Hygiene](#hygiene)).
///
/// # `limiter`
///
/// Optional: an expression evaluating to `&Limiter`, such as `limiter = &self.limiter` or
/// `limiter = my_limiter()`, evaluated on each call; without it the process-wide default
/// `ratelimit_runtime::global()` is used. Temporaries of the expression live until the check
/// has answered (a Redis round trip): do not take a lock there (`&*self.lock.read().unwrap()`
/// would hold it, and make the future `!Send`); keep the `Limiter`, which is cheap to clone,
/// where a plain reference reaches it.
///
/// # `name`
///
/// Optional: the scope, a non-empty string literal (`name = "login"`). Functions with the same
/// `name` share their counters. Without it the scope is the function's path, such as
/// `app::handlers::login` or `app::Session<_>::login` (distinct for same-named methods of
/// different types). Set a `name` to keep keys stable when code moves or the compiler
/// changes: the default comes from `std::any::type_name`, whose output Rust does not promise
/// to keep. The default is the path of the function's code, so a trait's default method is
/// one scope for every implementor (give it a `key` that tells them apart), and so are
/// functions in `const _: () = { ... }` blocks of one module. A `name` with a `:` can meet a
/// keyed scope (`name = "a:b"` and `name = "a", key = "b"` are one key): prefer names without
/// one when a `key` is used beside them.
///
/// One function takes one `#[rate_limit]`: a second is refused, since both would record
/// every call.
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
///         let denied =
///             ratelimit_runtime::Denied::new("login", Some(user_id.to_string()), rate, decision);
///         return Err(AppError::from(RateLimitError::Denied(Box::new(denied))));
///     }
///     body
/// }
/// ```
///
/// # Hygiene
///
/// The expansion's locals all have one name, `__ratelimit`, with mixed-site hygiene: the body
/// cannot see them, and arguments, constants, statics or unit structs of the user's with any
/// name, `__ratelimit` included, do not disturb them (the expansion declares a function of that
/// name next to them, so that a user's constant cannot turn a `let` into a constant pattern).
/// The `key` and `limiter` expressions are evaluated next to that function, so they may not
/// name `__ratelimit` (a compile error says so). Every path the expansion writes is absolute,
/// and it adds no `#[allow]`, so `#![forbid(..)]` and `#![deny(warnings, clippy::pedantic)]`
/// in the user's crate keep working, and an unused function still gets its `dead_code`
/// warning.
///
/// # Errors at compile time
///
/// Each mistake is reported at its token, and the function is then kept as written so the rest
/// of the crate still compiles: an unknown, duplicate or missing argument, a value out of
/// bounds or of the wrong kind, a malformed duration string, an item that is not an `async
/// fn` (a struct, an impl block, a `const fn`...), a return type that is not `Result<T, E>`
/// with `E: From<RateLimitError>` (at the return type), a `key` that does not implement
/// `Display` (at the key), and a `limiter` that is not a `&Limiter` (at the limiter).
#[proc_macro_attribute]
pub fn rate_limit(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::rate_limit(args.into(), item.into()).into()
}
