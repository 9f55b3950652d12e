//! The examples of the attribute's forms compile, each module under its own
//! `#![deny(warnings, clippy::pedantic)]`: the sliding window counter, the composite forms, and
//! the outcome, waiting and shadow forms. One module per former case; `main` runs each
//! module's `main`.

mod counter_examples {
    //! The sliding window counter on the attribute: a fixed rate, a token cost above the log's
    //! 10,000, and stacked beside a log.
    #![deny(warnings, clippy::pedantic)]

    use ratelimit_runtime::{Algorithm, Rate, RateLimitError, rate_limit};

    #[rate_limit(period = "1h", threshold = 100_000, key = api_key, algorithm = "sliding_window_counter")]
    async fn search(api_key: &str) -> Result<usize, RateLimitError> {
        Ok(api_key.len())
    }

    #[rate_limit(
        period = "1m",
        threshold = 1_000_000,
        key = api_key,
        cost = 250_000,
        algorithm = "sliding_window_counter"
    )]
    async fn complete_large(api_key: &str) -> Result<(), RateLimitError> {
        let _ = api_key;
        Ok(())
    }

    #[rate_limit(period = "1m", threshold = 1_000_000, key = api_key, cost = tokens, algorithm = "sliding_window_counter")]
    #[rate_limit(period = 1, threshold = 10, key = api_key, algorithm = "sliding_window_log")]
    async fn complete(api_key: &str, tokens: u32) -> Result<u32, RateLimitError> {
        let _ = api_key;
        Ok(tokens)
    }

    const HOURLY: Rate = Rate::new_const(100_000, std::time::Duration::from_secs(3_600))
        .with_algorithm(Algorithm::SlidingWindowCounter);

    #[rate_limit(rate = HOURLY, key = api_key)]
    async fn by_const(api_key: &str) -> Result<(), RateLimitError> {
        let _ = api_key;
        Ok(())
    }

    fn assert_send<T: Send>(_: &T) {}

    pub fn main() {
        assert_send(&search("k"));
        assert_send(&complete_large("k"));
        assert_send(&complete("k", 3));
        assert_send(&by_const("k"));
    }
}

mod issue_examples {
    // Every example of the attribute's composite forms compiles: stacked limits, a cost, a rate
    // chosen per call, an exemption, the decisions read by the body, a label; and all of them
    // under `#![deny(warnings)]`, with a `Send` future.
    #![deny(warnings, clippy::pedantic)]

    use ratelimit_runtime::{Decisions, Rate, RateLimitError, rate_limit};

    #[derive(Debug)]
    pub struct AppError;

    impl From<RateLimitError> for AppError {
        fn from(_: RateLimitError) -> Self {
            AppError
        }
    }

    pub struct Plan(Rate);

    impl Plan {
        fn rate(&self) -> Rate {
            self.0
        }
    }

    pub struct Account {
        id: u64,
    }

    pub struct Caller;

    impl Caller {
        fn is_internal(&self) -> bool {
            false
        }
    }

    #[rate_limit(period = 1, threshold = 5, key = user)]
    #[rate_limit(period = "1d", threshold = 1000, key = user)]
    async fn search(user: &str, q: &str) -> Result<usize, AppError> {
        Ok(q.len())
    }

    #[rate_limit(period = 60, threshold = 10_000, key = api_key, cost = items.len())]
    async fn upload(api_key: &str, items: Vec<u8>) -> Result<Vec<u8>, AppError> {
        Ok(items)
    }

    #[rate_limit(period = 60, threshold = 100, key = api_key, cost = weight)]
    async fn weighted(api_key: &str, weight: u32) -> Result<(), AppError> {
        Ok(())
    }

    #[rate_limit(rate = plan.rate(), key = account.id)]
    async fn tiered(plan: &Plan, account: &Account) -> Result<(), AppError> {
        Ok(())
    }

    #[rate_limit(period = 60, threshold = 5, key = ip, exempt = caller.is_internal())]
    async fn exempted(ip: &str, caller: &Caller) -> Result<(), AppError> {
        Ok(())
    }

    #[rate_limit(period = 60, threshold = 100, key = user, decision = d, label = "minute")]
    async fn list(user: &str) -> Result<u64, AppError> {
        let decisions: &Decisions = d;
        Ok(decisions.remaining)
    }

    fn assert_send<F: std::future::Future + Send>(future: F) -> F {
        future
    }

    pub fn main() {
        let plan = Plan(Rate::new(5, std::time::Duration::from_secs(60)).unwrap());
        let account = Account { id: 7 };
        let _ = assert_send(search("u", "q"));
        let _ = assert_send(upload("k", vec![1]));
        let _ = assert_send(weighted("k", 3));
        let _ = assert_send(tiered(&plan, &account));
        let _ = assert_send(exempted("ip", &Caller));
        let _ = assert_send(list("u"));
    }
}

mod outcome_examples {
    // The attribute's outcome, waiting and shadow forms of the issue compile, under
    // `#![deny(warnings)]`, with a `Send` future: `count = "errors" | "ok"`, `count_if` over an
    // axum response, `wait`, `shadow`, with `decision`, stacked, and under `#[async_trait]`.
    #![deny(warnings, clippy::pedantic)]

    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use ratelimit_runtime::{RateLimitError, rate_limit};

    #[derive(Debug)]
    pub struct AppError;

    impl From<RateLimitError> for AppError {
        fn from(_: RateLimitError) -> Self {
            AppError
        }
    }

    fn failed_login(result: &Result<Response, AppError>) -> bool {
        !matches!(result, Ok(response) if response.status().is_success())
    }

    // Count only calls whose body returns Err (login brute force): successes are refunded.
    #[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors")]
    async fn login(ip: &str, password: &str) -> Result<String, AppError> {
        if password.is_empty() {
            return Err(AppError);
        }
        Ok(format!("session for {ip}"))
    }

    // Count only calls whose body returns Ok (do not charge a caller for our failures).
    #[rate_limit(period = 60, threshold = 100, key = user, count = "ok")]
    async fn report(user: u64) -> Result<u64, AppError> {
        Ok(user)
    }

    // Count by any rule over the result (an axum login answers Ok((StatusCode::UNAUTHORIZED, ..))).
    #[rate_limit(period = "15m", threshold = 5, key = ip, count_if = |r: &Result<Response, AppError>| failed_login(r))]
    async fn axum_login(ip: &str) -> Result<Response, AppError> {
        Ok((StatusCode::UNAUTHORIZED, ip.to_owned()).into_response())
    }

    // Wait for a slot instead of failing: up to the given time, then deny as usual.
    #[rate_limit(period = 1, threshold = 10, wait = "30s")]
    async fn outbound() -> Result<(), AppError> {
        Ok(())
    }

    // Shadow mode: decide and record as usual, but never deny; would-be denials are reported.
    #[rate_limit(period = 60, threshold = 100, key = user, shadow = true)]
    async fn trial(user: u64) -> Result<u64, AppError> {
        Ok(user)
    }

    // Stacked, with the decisions read by the body and a closure that reads nothing of it.
    #[rate_limit(period = 1, threshold = 5, key = ip, decision = d)]
    #[rate_limit(period = "1d", threshold = 20, key = ip, count = "errors")]
    #[rate_limit(period = "1h", threshold = 50, key = ip, shadow = true, count_if = |_: &Result<u64, AppError>| true)]
    async fn stacked(ip: &str) -> Result<u64, AppError> {
        let _ = ip;
        Ok(d.remaining)
    }

    // Bodies whose values coerce to the return type, an inner attribute, an untyped closure.
    pub struct Named {
        name: String,
    }

    impl Named {
        #[rate_limit(period = 60, threshold = 5, count = "errors")]
        async fn name(&self) -> Result<&str, AppError> {
            #![allow(clippy::needless_return)]
            return Ok(&self.name);
        }

        #[rate_limit(period = 60, threshold = 5, count_if = |r| r.is_err())]
        async fn boxed(&self) -> Result<Box<dyn std::fmt::Display + Send>, AppError> {
            Ok(Box::new(self.name.len()))
        }
    }

    #[rate_limit(period = 60, threshold = 5, count = "ok")]
    async fn bytes() -> Result<&'static [u8], AppError> {
        Ok(b"abc")
    }

    #[rate_limit(period = 60, threshold = 5, count = "ok")]
    async fn opaque() -> Result<impl std::fmt::Display, AppError> {
        Ok(5)
    }

    #[async_trait::async_trait]
    pub trait Logins {
        async fn login(&self, ip: &str) -> Result<(), AppError>;
    }

    pub struct Service;

    #[async_trait::async_trait]
    impl Logins for Service {
        #[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors")]
        async fn login(&self, ip: &str) -> Result<(), AppError> {
            if ip.is_empty() { Err(AppError) } else { Ok(()) }
        }
    }

    fn assert_send<F: std::future::Future + Send>(future: F) -> F {
        future
    }

    pub fn main() {
        let _ = assert_send(login("ip", "pw"));
        let _ = assert_send(report(7));
        let _ = assert_send(axum_login("ip"));
        let _ = assert_send(outbound());
        let _ = assert_send(trial(7));
        let _ = assert_send(stacked("ip"));
        let _ = assert_send(Service.login("ip"));
        let named = Named { name: "n".into() };
        let _ = assert_send(named.name());
        let _ = assert_send(named.boxed());
        let _ = assert_send(bytes());
        let _ = assert_send(opaque());
    }
}

fn main() {
    counter_examples::main();
    issue_examples::main();
    outcome_examples::main();
}
