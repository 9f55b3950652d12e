//! The attribute's key layout is injective: a caller's key never reaches the log of another
//! limit, whatever it holds (a `:`, a window's text), on every store. Under the layout of
//! `<scope>:<key>`, the key `bob:1h` of `name = "login"` spent `bob`'s log of the `rate = expr`
//! form, and `name = "api"` with the key `v2:alice` spent `alice`'s log of `name = "api:v2"`.

use std::time::Duration;

use ratelimit_runtime::{Limiter, Rate, RateLimitError, rate_limit};
use tests::{TestRedis, unique_prefix};

const HOUR: Duration = Duration::from_secs(3_600);

fn once_an_hour() -> Rate {
    Rate::new(1, HOUR).expect("valid rate")
}

#[rate_limit(period = 3600, threshold = 1, key = user, name = "login", limiter = limiter)]
async fn login(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(rate = once_an_hour(), key = user, name = "login", limiter = limiter)]
async fn login_per_plan(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 3600, threshold = 1, key = user, name = "api", limiter = limiter)]
async fn api(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 3600, threshold = 1, key = user, name = "api:v2", limiter = limiter)]
async fn api_v2(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// `login` keyed `bob:1h` and `login` of a one-hour `rate = expr` keyed `bob`: each spends its
/// own log only, the second call of each denied, the first call of its look-alike admitted.
async fn a_key_like_a_window_is_not_the_rate_forms(limiter: &Limiter) {
    assert!(login(limiter, "bob:1h").await.is_ok());
    assert!(
        login_per_plan(limiter, "bob").await.is_ok(),
        "the key `bob:1h` spent `bob`'s log of the `rate = expr` form"
    );
    assert!(login(limiter, "bob:1h").await.is_err());
    assert!(login_per_plan(limiter, "bob").await.is_err());
}

/// `api` keyed `v2:alice` and `api:v2` keyed `alice`, as above; a reset of one forgets none of
/// the other's.
async fn a_key_with_a_colon_is_not_another_names(limiter: &Limiter) {
    assert!(api(limiter, "v2:alice").await.is_ok());
    assert!(
        api_v2(limiter, "alice").await.is_ok(),
        "the key `v2:alice` of `api` spent `alice`'s log of `api:v2`"
    );
    assert!(api(limiter, "v2:alice").await.is_err());
    let err = api_v2(limiter, "alice").await.unwrap_err();
    // A denial names the caller's key as given, not as the layout writes it.
    let denied = err.as_denied().expect("a denial");
    assert_eq!((denied.scope(), denied.key()), ("api:v2", Some("alice")));

    assert_eq!(
        limiter.reset_scope("api", Some("v2:alice")).await.ok(),
        Some(1)
    );
    assert!(api(limiter, "v2:alice").await.is_ok());
    assert!(api_v2(limiter, "alice").await.is_err());
}

async fn on_both_stores(name: &str, case: for<'a> fn(&'a Limiter) -> BoxFuture<'a>) {
    case(&Limiter::memory()).await;
    let redis = TestRedis::start();
    let prefix = unique_prefix(name);
    let limiter = tests::closed_redis_limiter(redis.url(), &prefix).await;
    case(&limiter).await;
    redis.clean_up(&prefix).await;
}

type BoxFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

#[tokio::test]
async fn a_key_like_a_window_is_not_the_rate_forms_on_both_stores() {
    on_both_stores("key_layout_window", |limiter| {
        Box::pin(a_key_like_a_window_is_not_the_rate_forms(limiter))
    })
    .await;
}

#[tokio::test]
async fn a_key_with_a_colon_is_not_another_names_on_both_stores() {
    on_both_stores("key_layout_colon", |limiter| {
        Box::pin(a_key_with_a_colon_is_not_another_names(limiter))
    })
    .await;
}
