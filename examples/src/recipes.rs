//! The README's recipes, compiled and run here (`tests/tests/recipes.rs` checks that each of
//! README's "Recipes" blocks is in this file as written, and runs them; the unit test at the
//! bottom runs with `cargo test -p examples`).

// [recipe: login]
use ratelimit_runtime::{RateLimitError, rate_limit};

/// Why a login failed.
#[derive(Debug)]
pub enum LoginError {
    /// The password was wrong: this counts against the address.
    WrongPassword,
    /// Too many failures from this address: the body did not run.
    Limited(RateLimitError),
}

impl From<RateLimitError> for LoginError {
    fn from(err: RateLimitError) -> Self {
        LoginError::Limited(err)
    }
}

/// At most 5 failed logins per IP address in 15 minutes; successful logins do not count.
/// The 6th failure (and any login after it, right password or not) is denied until the
/// oldest failure is 15 minutes old.
///
/// # Errors
///
/// `WrongPassword`, or `Limited` (the body did not run).
#[rate_limit(period = "15m", threshold = 5, key = ip, count = "errors", name = "login")]
pub async fn login(ip: &str, user: &str, password: &str) -> Result<String, LoginError> {
    if password != "opensesame" {
        return Err(LoginError::WrongPassword);
    }
    Ok(format!("session of {user}"))
}
// [end]

// [recipe: outbound]
use ratelimit_runtime::Limiter;

/// A client of a partner's API that allows 10 calls a second and 1,000 an hour: a call waits
/// up to 30 s for a slot, then fails as a denial. Both quotas are one check, all or nothing.
pub struct Partner {
    limiter: Limiter,
}

impl Partner {
    /// A client whose calls are limited by `limiter` (one per process, shared by clones).
    #[must_use]
    pub fn new(limiter: Limiter) -> Partner {
        Partner { limiter }
    }

    #[rate_limit(period = 1, threshold = 10, name = "partner.second", limiter = &self.limiter, wait = "30s")]
    #[rate_limit(period = "1h", threshold = 1000, name = "partner.hour", limiter = &self.limiter)]
    /// `GET path` on the partner's API, once both quotas admit it.
    ///
    /// # Errors
    ///
    /// A denial when no slot frees within 30 s (the hourly quota is spent).
    pub async fn fetch(&self, path: &str) -> Result<String, RateLimitError> {
        Ok(format!("partner: {path}")) // the HTTP call goes here
    }
}
// [end]

// [recipe: tiers]
use std::time::Duration;

use ratelimit_runtime::Rate;

/// A customer's plan.
pub enum Plan {
    /// 10 exports a day.
    Free,
    /// 1,000 exports a day.
    Pro,
}

/// A customer account.
pub struct Account {
    /// Its id, the key of its quota.
    pub id: u64,
    /// Its plan, which sets the quota.
    pub plan: Plan,
    /// Staff accounts are not limited.
    pub staff: bool,
}

impl Plan {
    /// The plan's export quota.
    #[must_use]
    pub fn exports(&self) -> Rate {
        match self {
            Plan::Free => Rate::new_const(10, Duration::from_secs(86_400)),
            Plan::Pro => Rate::new_const(1_000, Duration::from_secs(86_400)),
        }
    }
}

/// A daily quota by plan (a plan's quota is its own log: an upgrade keeps the day's count
/// when the period stays), an export costing its number of rows (in thousands, rounded up),
/// staff exempt.
///
/// # Errors
///
/// A denial when the day's quota is spent.
#[rate_limit(rate = account.plan.exports(), key = account.id, cost = rows.div_ceil(1_000), exempt = account.staff, name = "export")]
pub async fn export(account: &Account, rows: u32) -> Result<u32, RateLimitError> {
    Ok(rows)
}
// [end]

#[cfg(test)]
// [recipe: unit test]
mod tests {
    use std::time::{Duration, SystemTime};

    use ratelimit_runtime::Limiter;
    use ratelimit_runtime::testing::ManualClock;

    use super::Partner;

    #[tokio::test]
    async fn the_eleventh_call_in_a_second_waits_for_the_next_second() {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let partner = Partner::new(Limiter::memory_with_clock(clock.clone()));
        let start = clock.now();
        for _ in 0..10 {
            partner.fetch("/orders").await.unwrap();
        }
        assert_eq!(clock.now(), start, "10 calls fit in the first second");
        partner.fetch("/orders").await.unwrap(); // waits on the clock: no real sleep
        let waited = clock.now().duration_since(start).unwrap();
        assert!(waited >= Duration::from_secs(1), "{waited:?}");
    }
}
// [end]
