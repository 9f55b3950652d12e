//! README's recipe: limits per customer tier, with a cost per call and an exemption.

// [recipe: tiers]
use std::time::Duration;

use ratelimit_runtime::{Rate, RateLimitError, rate_limit};

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

/// A daily quota by plan (plans of one period share the account's log, so an upgrade keeps
/// the day's count under the new threshold), an export costing its number of rows (in
/// thousands, rounded up), staff exempt.
///
/// # Errors
///
/// A denial when the day's quota is spent.
#[rate_limit(rate = account.plan.exports(), key = account.id, cost = rows.div_ceil(1_000), exempt = account.staff, name = "export")]
pub async fn export(account: &Account, rows: u32) -> Result<u32, RateLimitError> {
    Ok(rows)
}
// [end]
