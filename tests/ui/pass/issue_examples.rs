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

fn main() {
    let plan = Plan(Rate::new(5, std::time::Duration::from_secs(60)).unwrap());
    let account = Account { id: 7 };
    let _ = assert_send(search("u", "q"));
    let _ = assert_send(upload("k", vec![1]));
    let _ = assert_send(weighted("k", 3));
    let _ = assert_send(tiered(&plan, &account));
    let _ = assert_send(exempted("ip", &Caller));
    let _ = assert_send(list("u"));
}
