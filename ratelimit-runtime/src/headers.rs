//! [`RateLimitHeaders`]: the HTTP response fields that tell a client about a [`Decision`].
//!
//! Framework-free: names and values as plain strings, for any HTTP library. The `axum` and
//! `actix-web` features set them on responses for you (see [Responses](#responses)).
//!
//! The fields follow [draft-ietf-httpapi-ratelimit-headers-11]: `RateLimit-Policy` and
//! `RateLimit` are Structured Field Lists (RFC 9651) of one Item each, a String naming the
//! policy (`"default"`) with Integer parameters:
//!
//! ```text
//! RateLimit-Policy: "default";q=2;w=30
//! RateLimit: "default";r=0;t=30
//! Retry-After: 30
//! ```
//!
//! - `q`: the quota, the rate's threshold;
//! - `w`: the window in seconds, the rate's period; left out when the period is not a whole
//!   number of seconds (`w` is an Integer, and rounding it would misstate the rate), and for
//!   a concurrency limit, which has none (its `q` is the calls in flight it allows, its `r`
//!   the slots left);
//! - `r`: the admissions remaining in the window after this request (0 on a denial);
//! - `t`: seconds until the quota is available again, rounded up: on a denial the time until a
//!   request would be admitted (the same value as `Retry-After`); on an admission the time until
//!   the window is empty and the whole quota is back;
//! - `Retry-After` (RFC 9110, delay-seconds), on a denial only: the wait rounded up to whole
//!   seconds, so it is never 0 for a positive wait and a client that waits that long is
//!   admitted (unless others used the quota meanwhile).
//!
//! The draft's optional `qu` (quota unit, default `"requests"`) and `pk` (partition key) are
//! not sent: the key may hold a user identifier.
//!
//! # Responses
//!
//! The `axum` and `actix-web` features answer a [`RateLimitError`](crate::RateLimitError)
//! alike, byte for byte:
//!
//! | error | status | fields |
//! | --- | --- | --- |
//! | [`Denied`](crate::RateLimitError::Denied) | 429 Too Many Requests | `Retry-After`, `RateLimit-Policy`, `RateLimit` (every limit's, for a check of several) |
//! | [`Unavailable`](crate::RateLimitError::Unavailable) (store down, [`FailurePolicy::Closed`](crate::FailurePolicy::Closed)) | 503 Service Unavailable | `Retry-After` ([`UNAVAILABLE_RETRY_AFTER`]) |
//! | [`CostTooHigh`](crate::RateLimitError::CostTooHigh) | 400 Bad Request | |
//! | [`InvalidInput`](crate::RateLimitError::InvalidInput), [`InvalidConfig`](crate::RateLimitError::InvalidConfig) | 500 Internal Server Error | |
//!
//! Every body is an RFC 9457 problem details document ([`PROBLEM_JSON`]) with the members
//! `type` (`about:blank`), `title` (the status's reason phrase), `status` and `detail`. A
//! denial's `detail` is the error's message, which names the scope and never the key (keys may
//! hold user identifiers); the other errors' `detail` says what happened without the internals
//! (the store's error, a configuration), which are logged instead: a 500 at error level when it
//! is answered, an outage by the limiter when it starts. The third call within 30 s of a
//! handler under `#[rate_limit(period = 30, threshold = 2, name = "hello.sayHi")]` (the fields
//! are exact, the milliseconds in `detail` vary):
//!
//! ```text
//! HTTP/1.1 429 Too Many Requests
//! content-type: application/problem+json
//! retry-after: 30
//! ratelimit-policy: "default";q=2;w=30
//! ratelimit: "default";r=0;t=30
//!
//! {"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit exceeded for `hello.sayHi`: retry after 29.998s"}
//! ```
//!
//! [draft-ietf-httpapi-ratelimit-headers-11]: https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/

use std::fmt::{self, Write as _};
use std::time::Duration;

use crate::decision::Decision;
use crate::decisions::Decisions;
use crate::rate::Rate;

/// The name of the field describing the quota policy: `RateLimit-Policy`.
pub const RATELIMIT_POLICY: &str = "RateLimit-Policy";
/// The name of the field describing the current state of the quota: `RateLimit`.
pub const RATELIMIT: &str = "RateLimit";
/// The name of the field telling a denied client how long to wait: `Retry-After`.
pub const RETRY_AFTER: &str = "Retry-After";
/// The name of the one policy these fields describe: `default`.
pub const POLICY_NAME: &str = "default";
/// The `Retry-After` of the 503 that the `axum` and `actix-web` features answer when the
/// store is unavailable (under [`FailurePolicy::Closed`](crate::FailurePolicy::Closed)):
/// 5 seconds. The limiter reconnects on its own; this keeps clients from hammering it
/// meanwhile.
pub const UNAVAILABLE_RETRY_AFTER: Duration = Duration::from_secs(5);
/// The media type of the bodies of the `axum` and `actix-web` features' error responses:
/// `application/problem+json` (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The rate limit fields of a response to one [`Decision`], made by
/// [`Decision::headers`]. See the [module docs](self) for their syntax and meaning.
///
/// ```
/// use std::time::Duration;
/// use ratelimit_runtime::{Decision, Rate};
///
/// let rate = Rate::new(2, Duration::from_secs(30))?;
/// let denial = Decision::denied(2, Duration::from_millis(27_400), Duration::from_secs(29));
/// let headers = denial.headers(rate);
/// assert_eq!(headers.policy(), r#""default";q=2;w=30"#);
/// assert_eq!(headers.rate_limit(), r#""default";r=0;t=28"#);
/// assert_eq!(headers.retry_after(), Some(28));
/// for (name, value) in headers.iter() {
///     println!("{name}: {value}"); // set them on your response
/// }
/// # Ok::<(), ratelimit_runtime::RateLimitError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateLimitHeaders {
    quota: u64,
    window: Option<u64>,
    remaining: u64,
    reset: u64,
    retry_after: Option<u64>,
}

impl Decision {
    /// The HTTP fields describing this decision, taken against `rate` (the rate it was
    /// checked against: the decision does not carry the period, which `w` needs).
    #[must_use]
    pub fn headers(&self, rate: Rate) -> RateLimitHeaders {
        let decision = self;
        let period = rate.period();
        // A concurrency limit has no window: its `q` is the calls in flight it allows.
        let window =
            (period.subsec_nanos() == 0 && !rate.is_concurrency()).then_some(period.as_secs());
        let retry_after = if decision.allowed {
            None
        } else {
            Some(ceil_secs(decision.retry_after.unwrap_or_default()))
        };
        RateLimitHeaders {
            quota: decision.limit,
            window,
            remaining: decision.remaining,
            reset: retry_after.unwrap_or_else(|| ceil_secs(decision.reset_after)),
            retry_after,
        }
    }
}

impl RateLimitHeaders {
    /// The value of `RateLimit-Policy`, such as `"default";q=2;w=30`.
    #[must_use]
    pub fn policy(&self) -> String {
        let mut value = String::new();
        self.write_policy(&mut value, POLICY_NAME);
        value
    }

    /// The value of `RateLimit`, such as `"default";r=0;t=28`.
    #[must_use]
    pub fn rate_limit(&self) -> String {
        let mut value = String::new();
        self.write_rate_limit(&mut value, POLICY_NAME);
        value
    }

    /// This policy's item of `RateLimit-Policy`, named `name` (printable ASCII).
    fn write_policy(&self, out: &mut String, name: &str) {
        write_name(out, name);
        let _ = write!(out, ";q={}", self.quota);
        if let Some(window) = self.window {
            let _ = write!(out, ";w={window}");
        }
    }

    /// This policy's item of `RateLimit`, named `name` (printable ASCII).
    fn write_rate_limit(&self, out: &mut String, name: &str) {
        write_name(out, name);
        let _ = write!(out, ";r={};t={}", self.remaining, self.reset);
    }

    /// On a denial, the value of `Retry-After` in whole seconds, rounded up (at least 1 for
    /// any positive wait); `None` for an admission.
    #[must_use]
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    /// The quota, `q`: admissions per window.
    #[must_use]
    pub fn quota(&self) -> u64 {
        self.quota
    }

    /// The window in whole seconds, `w`; `None` when the period is not a whole number of
    /// seconds, and then `w` is left out.
    #[must_use]
    pub fn window(&self) -> Option<u64> {
        self.window
    }

    /// The admissions remaining, `r`.
    #[must_use]
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Seconds until the quota is available again, `t`, rounded up.
    #[must_use]
    pub fn reset(&self) -> u64 {
        self.reset
    }

    /// Every field as `(name, value)`: `RateLimit-Policy`, `RateLimit`, then `Retry-After` on a
    /// denial.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, String)> + use<> {
        fields(self.policy(), self.rate_limit(), self.retry_after)
    }
}

impl fmt::Display for RateLimitHeaders {
    /// The fields as they appear in an HTTP/1.1 message, one `name: value` per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_lines(f, self.iter())
    }
}

/// `name` as a Structured Field String (RFC 9651 §3.3.3): quoted, `"` and `\` escaped. The
/// caller has made sure it is printable ASCII.
fn write_name(out: &mut String, name: &str) {
    out.push('"');
    for c in name.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// `true` when `label` can name a policy: printable ASCII (a Structured Field String's
/// characters), and not empty.
pub(crate) fn is_label(label: &str) -> bool {
    !label.is_empty() && label.bytes().all(|b| (0x20..=0x7e).contains(&b))
}

/// The rate limit fields of a response to a check of several limits, made by
/// [`Decisions::headers`]: every limit is a policy of its own, named by its label, listed in
/// the check's order in `RateLimit-Policy` and `RateLimit` (Structured Field Lists, as the
/// draft allows), and `Retry-After` on a denial gives the deciding limit's wait (the longest).
///
/// ```
/// use std::time::Duration;
/// use ratelimit_runtime::{Limit, Limiter, Rate};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ratelimit_runtime::RateLimitError> {
/// let limiter = Limiter::memory();
/// let burst = Rate::new(5, Duration::from_secs(1))?;
/// let daily = Rate::new(1_000, Duration::from_secs(86_400))?;
/// let decisions = limiter
///     .check_all([Limit::new("u:burst", burst), Limit::new("u:daily", daily)])
///     .await?;
/// let headers = decisions.headers();
/// assert_eq!(headers.policy(), r#""1s";q=5;w=1, "1d";q=1000;w=86400"#);
/// assert_eq!(headers.rate_limit(), r#""1s";r=4;t=1, "1d";r=999;t=86400"#);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CompositeHeaders {
    /// Each policy's label and fields.
    policies: Vec<(String, RateLimitHeaders)>,
    retry_after: Option<u64>,
}

impl Decisions {
    /// The HTTP fields describing every limit of this check (see [`CompositeHeaders`]).
    #[must_use]
    pub fn headers(&self) -> CompositeHeaders {
        CompositeHeaders {
            policies: self
                .iter()
                .map(|limit| (limit.label().to_owned(), limit.headers(limit.rate())))
                .collect(),
            retry_after: (!self.allowed).then(|| ceil_secs(self.retry_after.unwrap_or_default())),
        }
    }
}

impl CompositeHeaders {
    /// The value of `RateLimit-Policy`, such as `"1s";q=5;w=1, "1d";q=1000;w=86400`.
    #[must_use]
    pub fn policy(&self) -> String {
        self.list(RateLimitHeaders::write_policy)
    }

    /// The value of `RateLimit`, such as `"1s";r=0;t=1, "1d";r=990;t=86400`.
    #[must_use]
    pub fn rate_limit(&self) -> String {
        self.list(RateLimitHeaders::write_rate_limit)
    }

    /// On a denial, the value of `Retry-After` in whole seconds, rounded up: the deciding
    /// limit's; `None` for an admission.
    #[must_use]
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    /// Each policy's label and its own fields.
    pub fn policies(&self) -> impl Iterator<Item = (&str, &RateLimitHeaders)> {
        self.policies
            .iter()
            .map(|(label, headers)| (label.as_str(), headers))
    }

    /// Every field as `(name, value)`: `RateLimit-Policy`, `RateLimit`, then `Retry-After` on
    /// a denial; none for a call exempt from every limit ([`Decisions::is_empty`]).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, String)> + use<> {
        let exempt = self.policies.is_empty();
        fields(self.policy(), self.rate_limit(), self.retry_after).filter(move |_| !exempt)
    }

    fn list(&self, item: fn(&RateLimitHeaders, &mut String, &str)) -> String {
        let mut value = String::new();
        for (i, (label, headers)) in self.policies.iter().enumerate() {
            if i > 0 {
                value.push_str(", ");
            }
            item(headers, &mut value, label);
        }
        value
    }
}

impl fmt::Display for CompositeHeaders {
    /// The fields as they appear in an HTTP/1.1 message, one `name: value` per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_lines(f, self.iter())
    }
}

/// The fields of a response, as `(name, value)`: `RateLimit-Policy`, `RateLimit`, then
/// `Retry-After` when there is a wait.
fn fields(
    policy: String,
    rate_limit: String,
    retry_after: Option<u64>,
) -> impl Iterator<Item = (&'static str, String)> {
    [
        Some((RATELIMIT_POLICY, policy)),
        Some((RATELIMIT, rate_limit)),
        retry_after.map(|seconds| (RETRY_AFTER, seconds.to_string())),
    ]
    .into_iter()
    .flatten()
}

/// `fields` as they appear in an HTTP/1.1 message, one `name: value` per line.
fn write_lines(
    f: &mut fmt::Formatter<'_>,
    fields: impl Iterator<Item = (&'static str, String)>,
) -> fmt::Result {
    for (name, value) in fields {
        writeln!(f, "{name}: {value}")?;
    }
    Ok(())
}

/// `duration` in whole seconds, rounded up: 0 only for zero.
pub(crate) fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::limiter::Limiter;

    fn rate(threshold: u64, period: Duration) -> Rate {
        Rate::new(threshold, period).unwrap()
    }

    #[test]
    fn rounds_waits_up_to_whole_seconds() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_micros(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::new(29, 999_999_999)), 30);
        assert_eq!(ceil_secs(Rate::MAX_PERIOD), 3_155_760_000);
    }

    #[test]
    fn an_admission_reports_the_remaining_quota_and_when_the_window_empties() {
        let decision = Decision::admitted(5, 3, Duration::from_millis(59_001));
        let headers = decision.headers(rate(5, Duration::from_secs(60)));
        assert_eq!(headers.policy(), r#""default";q=5;w=60"#);
        assert_eq!(headers.rate_limit(), r#""default";r=3;t=60"#);
        assert_eq!(headers.retry_after(), None);
        let fields: Vec<_> = headers.iter().collect();
        assert_eq!(
            fields,
            [
                ("RateLimit-Policy", r#""default";q=5;w=60"#.to_owned()),
                ("RateLimit", r#""default";r=3;t=60"#.to_owned()),
            ]
        );
    }

    #[test]
    fn a_denial_reports_retry_after_rounded_up_in_both_fields() {
        let decision = Decision::denied(2, Duration::from_micros(1), Duration::from_secs(29));
        let headers = decision.headers(rate(2, Duration::from_secs(30)));
        assert_eq!(
            headers.retry_after(),
            Some(1),
            "never 0 for a positive wait"
        );
        assert_eq!(headers.rate_limit(), r#""default";r=0;t=1"#);
        assert_eq!(
            headers.to_string(),
            "RateLimit-Policy: \"default\";q=2;w=30\n\
             RateLimit: \"default\";r=0;t=1\n\
             Retry-After: 1\n"
        );
    }

    #[test]
    fn a_period_of_fractional_seconds_leaves_the_window_out() {
        let decision = Decision::admitted(10, 9, Duration::from_millis(1500));
        let headers = decision.headers(rate(10, Duration::from_millis(1500)));
        assert_eq!(headers.window(), None);
        assert_eq!(headers.policy(), r#""default";q=10"#);
        assert_eq!(headers.rate_limit(), r#""default";r=9;t=2"#);
    }

    /// Exact to the second against decisions of a real limiter at known times.
    #[tokio::test(flavor = "current_thread")]
    async fn matches_a_limiter_at_known_times() {
        let limiter = Limiter::memory();
        let rate = rate(2, Duration::from_secs(30));
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let check = |when: SystemTime| {
            let limiter = limiter.clone();
            async move { limiter.check_at("k", rate, when).await.unwrap() }
        };

        let first = check(at(0)).await.headers(rate);
        assert_eq!(first.rate_limit(), r#""default";r=1;t=30"#);
        let second = check(at(2_000)).await.headers(rate);
        assert_eq!(second.rate_limit(), r#""default";r=0;t=30"#);
        // Denied 2.5 s after the first admission: it leaves the window in 27.5 s.
        let third = check(at(2_500)).await.headers(rate);
        assert_eq!(third.policy(), r#""default";q=2;w=30"#);
        assert_eq!(third.rate_limit(), r#""default";r=0;t=28"#);
        assert_eq!(third.retry_after(), Some(28));
        // 1 µs before the first admission leaves: still denied, and still 1 s to wait.
        let last = check(at(30_000) - Duration::from_micros(1))
            .await
            .headers(rate);
        assert_eq!(last.retry_after(), Some(1));
        // At exactly first + period the first admission is out: admitted again.
        let again = check(at(30_000)).await.headers(rate);
        assert_eq!(again.retry_after(), None);
        assert_eq!(again.rate_limit(), r#""default";r=0;t=30"#);
    }
}
