//! README's recipe: a login limited on failures only.

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
