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
mod names;
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
///   `#[allow(..)]`, `#[inline]`, and `#[tracing::instrument]`, below this attribute (it
///   expands after this one, so its span also covers the check) or above it (it expands
///   first, and its span covers the body only).
///
/// ## Under `#[async_trait]`
///
/// Put `#[rate_limit]` on the method, inside the `#[async_trait]` impl or trait, above or below
/// the method's other attributes. `#[async_trait]`, being on the block, always expands first,
/// turning the method into a plain `fn` returning `Pin<Box<dyn Future<Output = R> + Send>>`;
/// `#[rate_limit]` recognises that shape (by its `'async_trait` lifetime) and wraps the future
/// the method returns. Three differences with a plain `async fn`: the `key`, `limiter`,
/// `rate`, `cost` and `exempt` expressions are evaluated when the method is called rather
/// than when its future is first polled (the check itself still happens at the first poll),
/// `decision` is refused (the body's future exists before the check), and the expressions
/// cannot use the bindings of pattern arguments, which `#[async_trait]` only makes inside the future ("cannot
/// find value `a` in this scope"): name the argument and read its fields instead. Any other
/// non-`async` function is refused.
///
/// A limit counts the calls of its **scope** and its [`key`](#key) together. The scope is the
/// function's path unless [`name`](#name) sets it. In Redis the log is the sorted set
/// `<prefix><scope>/<key>` (`<prefix><scope>` without a `key`; `prefix` is the limiter's key
/// prefix, `"ratelimit:"` by default), the scope and the key escaped so that no key value
/// reaches another scope's log; the guide's `keys` page (`ratelimit_runtime::guide::keys`)
/// lays out every form, stacked and `rate = expr` ones included.
///
/// # `period`
///
/// Required unless [`rate`](#rate) is given: the window's length, an integer literal in whole seconds (`period = 60`) or a
/// string `"<integer><unit>"` with unit `ms`, `s`, `m`, `h` or `d` (days of 24 hours) and no
/// space (`period = "1500ms"`, `period = "1d"`), from 1 ms to 100 years (3,155,760,000 s).
///
/// # `threshold`
///
/// Required unless [`rate`](#rate) is given: the number of calls admitted per window, an integer literal from 1 to 4294967295
/// (`threshold = 10`).
///
/// # `algorithm`
///
/// Optional: the string literal `"sliding_window_log"` (the default: exact, one entry per
/// admission in the window) or `"sliding_window_counter"` (two counts per key whatever the
/// threshold and the cost; a rolling window may hold up to `2 × threshold − 1`). Not with
/// [`rate`](#rate), whose `Rate` carries its algorithm (`Rate::with_algorithm`). The guide's
/// `algorithms` page compares the two.
///
/// # `lease`
///
/// Optional: `lease = true` checks the limit through quota leases on a Redis store: each
/// process reserves admissions of the key in one round trip and spends them without one,
/// never admitting more than the threshold in any window (`Rate::leased`; the guide's
/// `leases` page tells when it pays, what it trades, and which checks go through a lease: one
/// attribute's limit at cost 1, not stacked, nor with `count` or `shadow`; the others, and
/// every check in process, are checked as without it). Below a threshold of 32 a lease could
/// hold no reserve: `lease = true` there is an error. Not with [`rate`](#rate): lease the
/// `Rate` (`rate = plan.rate().leased()`).
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
/// `ratelimit_runtime::global()` is used. An expression that visibly makes a new limiter on
/// each call (`&Limiter::memory()`, `&Limiter::builder()...`) is refused: every call would see
/// an empty log and none would be denied (`&Limiter::memory()` is what rustc suggests for
/// `limiter = Limiter::memory()`: the error shows the fixes). The attribute cannot see through
/// a function of yours: `&my_limiter()` where `my_limiter` returns a new `Limiter` has the
/// same flaw and is not caught; return a `&'static Limiter`, or a clone of one limiter made
/// once (clones share their counts). Make the limiter once: a
/// `static LIMITER: LazyLock<Limiter> = LazyLock::new(Limiter::memory)` with
/// `limiter = &LIMITER` (a Redis limiter too: `LimiterBuilder::build` does no I/O),
/// `ratelimit_runtime::set_global`, or the application's state. Temporaries of the expression live until the check
/// has answered (a Redis round trip): do not take a lock there (`&*self.lock.read().unwrap()`
/// would hold it, and make the future `!Send`); keep the `Limiter`, which is cheap to clone,
/// where a plain reference reaches it.
///
/// # `name`
///
/// Optional: sets the scope, a non-empty string literal without the characters that separate
/// the parts of a key (`\`, `/`, `@`, `#`, `{`, `}`: `name = "login"`, `name = "api::login"`),
/// so that no caller's key reaches a named limit's log. Functions with the same `name` share
/// their counters. Without it the scope is the function's
/// path, such as `app::handlers::login` or `app::Session<_>::login` (distinct for same-named
/// methods of different types). Set a `name` to keep keys stable when code moves or the
/// compiler changes: the default comes from `std::any::type_name`, whose output Rust does not
/// promise to keep. The default is the path of the function's code, so a trait's default method
/// is one scope for every implementor (give it a `key` that tells them apart), and so are
/// functions in `const _: () = { ... }` blocks of one module. A `name` and a key never meet
/// another's (`name = "a:b"` and `name = "a", key = "b"` are two logs).
///
/// # `rate`
///
/// Instead of `period` and `threshold`: an expression of type `Rate`, evaluated on each call
/// before the body, for a rate chosen per caller (a plan's tier, configuration, a database):
/// `rate = plan.rate()`. Rates that differ only in threshold share the key's log (a lowered
/// threshold denies until the count drops below it); the period is part of the key, so a rate
/// of another period counts in a log of its own (`<scope>/<key>@<window>`, such as
/// `app::search/42@1h`), and never evicts a longer period's entries. A panic in the
/// expression is the caller's: nothing is checked or recorded.
///
/// # `concurrency`
///
/// Instead of a rate: at most this many calls of the key in flight at once, across every
/// process sharing the limiter's store, an integer literal from 1 to 100000
/// (`Concurrency::MAX`): `concurrency = 4`. An admitted call holds a slot while its body runs
/// and releases it when the function returns, fails, panics or its future is dropped; a call
/// that finds every slot held is denied at once (or, with [`wait`](#wait), waits for one).
/// Stacked under rate limits it is one check with them, all or nothing
/// (`#[rate_limit(period = 1, threshold = 10, key = user)]` above
/// `#[rate_limit(concurrency = 2, key = user)]`); not with `period`, `threshold`, `rate`,
/// `algorithm`, `lease`, `cost`, `count` or `count_if`. A denial's retry-after is an estimate
/// (100 ms at most): a slot frees when a call ends. The guide's `concurrency` page tells the
/// bound, the renewals, and what failures do.
///
/// # `slot_time`
///
/// Optional, with [`concurrency`](#concurrency): how long a slot counts after its process
/// last renewed it, in the grammar of `period`, from 1 s to 1 day in whole milliseconds
/// (`slot_time = "10s"`; 30 s without it). A process renews its slots every third of it; a
/// process that dies frees its slots within it.
///
/// # `cost`
///
/// Optional: what the call costs, 1 by default; an unsigned integer literal (checked at
/// compile time: at least 1, at most the literal `threshold` and, under the sliding window
/// log, `Limit::MAX_COST`, 10,000) or
/// expression (`u8` to `u64`, or `usize` such as `cost = items.len()`). A call of cost `c` is
/// admitted iff the window's recorded cost plus `c` stays within the threshold, and is then
/// recorded as `c` admissions; a cost of 0 is admitted and records nothing. A cost above the
/// threshold or the log's `Limit::MAX_COST` (a `usize` above `u32::MAX` included, never truncated) fails the
/// call with `RateLimitError::CostTooHigh` without running the body: not a denial, since
/// retrying never helps (the `axum` and `actix-web` features answer it 400).
///
/// # `exempt`
///
/// Optional: a `bool` expression, evaluated before the limit's other expressions; when true,
/// this limit is skipped for the call (neither checked nor recorded; its `rate`, `cost` and
/// `key` are not evaluated), and the function's other stacked limits still apply:
/// `exempt = caller.is_internal()`. An exempt limit is left out of the call's
/// [`decision`](#decision) and its HTTP fields, so that a response's `RateLimit-Policy` lists
/// the limits that applied to it. A call exempt from every limit runs without a check (the
/// `limiter` expression is still evaluated; the store is not asked).
///
/// # `decision`
///
/// Optional: a name the body reads the check's `&Decisions` by (`decision = d`): every
/// limit's label, rate and decision, and their HTTP fields (`d.headers()`), for an admitted
/// response. It derefs to the deciding limit's `Decision` (the one with the fewest
/// remaining). For a call exempt from every limit it is empty (`d.is_empty()`) and writes no
/// field. Given on at most one of stacked attributes, and not the name of an argument (the
/// body would lose it); not available under `#[async_trait]`, whose body's future is made
/// before the check.
///
/// # `label`
///
/// Optional: the limit's policy name in the `RateLimit-Policy` and `RateLimit` fields, a
/// non-empty printable ASCII string literal (`label = "burst"`); by default the window, such
/// as `1s` or `1d` (`-2` after a label another limit has) for stacked limits, and the plain
/// form's `default` for one attribute (so adding `cost` or `exempt` to it keeps its fields).
/// Never the scope: a module path must not reach clients.
///
/// # `wait`
///
/// Optional: how long a denied call waits for a slot, in the grammar of `period`
/// (`wait = "30s"`, 1 ms to 100 years): instead of failing at once, it sleeps until the
/// denial's retry-after, plus a jitter (up to a tenth of the retry-after, at most 100 ms, so
/// that callers denied together do not wake together), and is checked again, until admitted
/// or until the next retry-after would end past the wait; then it fails as a denial, without
/// running the body. For an outbound API client that must not exceed someone else's quota.
/// Each attempt is a check (its metrics count each denial), and the key is formatted once
/// and copied per attempt. Nothing is recorded while it sleeps; a wait is not a queue (a
/// later call may take the slot a waiter woke for). Stacked limits are one check, which
/// waits once: give `wait` on any of them. The sleeps need a Tokio runtime with its time
/// driver, or outside Tokio the runtime's `smol` feature (smol's timers); outside any runtime
/// the first denial is the answer. On a limiter on a
/// `ManualClock` the wait moves that clock instead of sleeping (see
/// `ratelimit_runtime::testing`). `Limiter::until_ready` documents the rest.
///
/// # `count` and `count_if`
///
/// Optional: which calls count, by the body's outcome. `count = "all"` (the default),
/// `"errors"` (only calls whose body returns `Err`: failed logins) or `"ok"` (only those
/// returning `Ok`: a caller is not charged for our failures); `count_if = |r: &Result<T, E>|
/// ..` for any other rule (an axum login that answers `Ok((StatusCode::UNAUTHORIZED, ..))`),
/// a closure returning whether the call counts, its parameter's type written or left out.
/// The check before the body is unchanged: the call is recorded up front as a reservation (so
/// the limit stays exact under racing callers), and once the body returned it is refunded
/// from each limit under which it does not count (its own entries removed), before the
/// function returns, within the limiter's timeout. The body runs in an `async` block of its
/// own, so that its `return` and `?` end it as before. A body that panics, or a future
/// dropped before its body finished, keeps its reservation; a refund that cannot reach the
/// store leaves its entries to expire with their window (the outage is logged once). Not
/// with `wait` (a compile error for now: in-flight reservations would make a waiter sleep for
/// a whole period while refunds free the slots in milliseconds). The body's result is kept
/// while its refund runs, so the function's future is `Send` only if the result is (a result
/// holding an `Rc` makes it `!Send`; under `#[async_trait]`, which needs `Send`, that is a
/// compile error); under `#[async_trait]` the `count_if` closure is made outside the method's
/// body: it may read `self`, not an argument taken by value. `Limiter::check_permit` is the
/// same by hand.
///
/// # `shadow`
///
/// Optional: `shadow = true` makes the limit a shadow one, to try it on real traffic without
/// denying anyone. It is checked once the enforced limits admitted the call, on its own: it
/// records the call when it admits it, and when it would deny it records nothing and the call
/// goes on; each would-be denial is a debug event (scope and key) and, with the `metrics`
/// feature, counts in `ratelimit_shadow_denied_total`. A shadow limit stays out of
/// `decision` and the HTTP fields, never waits and never fails a call.
///
/// # Stacked limits
///
/// Several `#[rate_limit]`s on one function are one check: a call is admitted only if every
/// limit admits it, and then recorded by each; denied by any, it is recorded by none (a burst
/// limit and a daily quota: a call the burst limit denies does not use the quota).
///
/// ```ignore
/// #[rate_limit(period = 1, threshold = 5, key = user)]        // burst
/// #[rate_limit(period = "1d", threshold = 1000, key = user)]  // daily quota
/// async fn search(user: &str, q: &str) -> Result<Hits, AppError> { ... }
/// ```
///
/// The outermost attribute expands first and takes the others off the function: the check
/// of all of them is placed as the outermost one alone would place it, so the attributes
/// below it (those between stacked ones included, such as `#[tracing::instrument]`) wrap the
/// check with the body. In process and on one Redis server the check is one lock or one
/// script, whatever the keys; in a Redis Cluster, limits in different slots are reserved,
/// then refunded when another denies, fails or times out (`Limiter::check_all` documents
/// the guarantees). The limits' own expressions are evaluated before the check, the
/// outermost limit's first.
///
/// Each stacked limit keeps its own log. A stacked limit's scope is its `name`, or by
/// default the function's path and the limit's position (`app::search#1` for the outermost,
/// `app::search#2`...: a denial's `Denied::scope` says which limit denied; the check's span
/// and metrics keep the function's path). A call's limits of one key value share a Redis
/// Cluster hash slot, so one round trip, but for a few exceptions. Since the position is part of the scope, reordering
/// stacked attributes without `name`s, or adding a second attribute to a function, moves
/// their logs: for one window the function then admits up to one threshold more. Give
/// stacked limits `name`s to keep their logs through such changes. The guide's `keys` page
/// (`ratelimit_runtime::guide::keys`) has their layout, the exceptions and what each change
/// moves.
///
/// The stacked attributes share one limiter: give `limiter` (and `crate`) once, on any of
/// them, or identically on each; two different limiters are refused (all or nothing across
/// two stores would be a distributed transaction). A limit given twice (the same key, rate
/// and name), and a `name` or `label` given to two of them, are refused too.
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
///     let key = format!("login/{user_id}"); // the scope and the key, escaped; without `key`: the scope
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
/// The `key`, `limiter`, `rate`, `cost` and `exempt` expressions are evaluated next to that
/// function, so they may not name `__ratelimit` (a compile error says so). Every path the expansion writes is absolute,
/// and it adds no `#[allow]`, so `#![forbid(..)]` and `#![deny(warnings, clippy::pedantic)]`
/// in the user's crate keep working, and an unused function still gets its `dead_code`
/// warning.
///
/// # Errors at compile time
///
/// Each mistake is reported at its token, and the function is then kept as written (without
/// its `#[rate_limit]`s) so the rest of the crate still compiles: an unknown, duplicate or
/// missing argument, `rate` beside `period` or `threshold`, a value out of bounds or of the
/// wrong kind (a literal `cost` of 0 or above the literal `threshold`), a malformed duration
/// string, stacked attributes that disagree (another `limiter`, a second `decision`, a limit
/// or a `label` given twice), a `limiter` made on each call, an `exempt` that is not a `bool`
/// or a `cost` that is not an unsigned integer (at the expression), an item that is not an `async
/// fn` (a struct, an impl block, a `const fn`...), a return type that is not `Result<T, E>`
/// with `E: From<RateLimitError>` (at the return type), a `key` that does not implement
/// `Display` (at the key), and a `limiter` that is not a `&Limiter` (at the limiter).
#[proc_macro_attribute]
pub fn rate_limit(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::rate_limit(args.into(), item.into()).into()
}
