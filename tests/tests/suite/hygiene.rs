//! The names the expansion introduces can neither collide with the user's nor be named by them:
//! arguments, constants, statics and unit structs named like every local the expansion has used
//! (`__ratelimit` now; `__scope`, `__key`, `__rate`, `__err` and `__ratelimit_scope` before),
//! in the function's module, where a binding pattern would be resolved against them.
//!
//! (The one name the `key` and `limiter` expressions cannot use, for an item or an argument of
//! the user's, is `__ratelimit`: they are evaluated where the expansion's `fn __ratelimit` is in
//! scope, and would get that function: the attribute refuses it, see `ui/fail/key.rs`.)

#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]

use std::sync::OnceLock;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

macro_rules! limiter {
    () => {{
        static LIMITER: OnceLock<Limiter> = OnceLock::new();
        LIMITER.get_or_init(Limiter::memory)
    }};
}

/// Constants, which would turn `let NAME = ..` or `Err(NAME)` into a constant pattern.
mod constants {
    use super::{Limiter, OnceLock, RateLimitError, rate_limit};

    pub(crate) const __ratelimit: u8 = 1;
    pub(crate) const __scope: u8 = 2;
    pub(crate) const __key: u8 = 3;
    pub(crate) const __rate: u8 = 4;
    pub(crate) const __err: u8 = 5;
    pub(crate) const __ratelimit_scope: u8 = 6;

    /// The body and the key see the user's constants, not the expansion's locals.
    #[rate_limit(period = 60, threshold = 1, key = __scope + __key, limiter = limiter!())]
    pub(crate) async fn keyed() -> Result<u8, RateLimitError> {
        Ok(__ratelimit + __scope + __key + __rate + __err + __ratelimit_scope)
    }

    #[rate_limit(period = 60, threshold = 1, name = "constants", limiter = limiter!())]
    pub(crate) async fn named() -> Result<u8, RateLimitError> {
        Ok(__ratelimit)
    }

    pub(crate) struct Service;

    impl Service {
        #[rate_limit(period = 60, threshold = 1, key = __err, limiter = limiter!())]
        pub(crate) async fn method(&self) -> Result<u8, RateLimitError> {
            Ok(__rate)
        }
    }
}

/// A static, which a binding pattern may not shadow at all.
mod statics {
    use super::{Limiter, OnceLock, RateLimitError, rate_limit};

    pub(crate) static __ratelimit: &str = "static";

    #[rate_limit(period = 60, threshold = 1, key = "static", limiter = limiter!())]
    pub(crate) async fn keyed() -> Result<&'static str, RateLimitError> {
        Ok(__ratelimit)
    }
}

/// A unit struct, which would turn a binding into a struct pattern.
mod unit_struct {
    use super::{Limiter, OnceLock, RateLimitError, rate_limit};

    #[derive(Debug, PartialEq, Eq)]
    pub(crate) struct __ratelimit;

    impl std::fmt::Display for __ratelimit {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("unit")
        }
    }

    #[rate_limit(period = 60, threshold = 1, key = "unit", limiter = limiter!())]
    pub(crate) async fn keyed() -> Result<__ratelimit, RateLimitError> {
        Ok(__ratelimit)
    }
}

/// Arguments named like the locals: the key and the body see the arguments.
#[rate_limit(
    period = 60,
    threshold = 1,
    key = format!("{__scope}{__key}{__rate}{__err}"),
    limiter = limiter!()
)]
async fn arguments(
    __ratelimit: u8,
    __scope: &str,
    __key: char,
    __rate: bool,
    __err: f32,
) -> Result<String, RateLimitError> {
    Ok(format!("{__ratelimit}{__scope}{__key}{__rate}{__err}"))
}

#[tokio::test]
async fn user_constants_named_like_the_locals() {
    assert_eq!(constants::keyed().await.unwrap(), 21);
    let err = constants::keyed().await.unwrap_err();
    assert_eq!(err.as_denied().unwrap().key(), Some("5"));

    assert_eq!(constants::named().await.unwrap(), 1);
    assert!(constants::named().await.unwrap_err().is_denied());

    assert_eq!(constants::Service.method().await.unwrap(), 4);
    let err = constants::Service.method().await.unwrap_err();
    assert_eq!(err.as_denied().unwrap().key(), Some("5"));
}

#[tokio::test]
async fn a_user_static_named_like_the_locals() {
    assert_eq!(statics::keyed().await.unwrap(), "static");
    let err = statics::keyed().await.unwrap_err();
    assert_eq!(err.as_denied().unwrap().key(), Some("static"));
}

#[tokio::test]
async fn a_user_unit_struct_named_like_the_locals() {
    assert_eq!(
        unit_struct::keyed().await.unwrap(),
        unit_struct::__ratelimit
    );
    let err = unit_struct::keyed().await.unwrap_err();
    assert_eq!(err.as_denied().unwrap().key(), Some("unit"));
}

#[tokio::test]
async fn arguments_named_like_the_locals() {
    assert_eq!(
        arguments(1, "s", 'k', true, 0.5).await.unwrap(),
        "1sktrue0.5"
    );
    let err = arguments(1, "s", 'k', true, 0.5).await.unwrap_err();
    assert_eq!(err.as_denied().unwrap().key(), Some("sktrue0.5"));
    assert_eq!(
        err.as_denied().unwrap().scope(),
        "suite::hygiene::arguments"
    );
}
