//! [`Limit`]: one limit of a check made by hand with several ([`Limiter::check_all`]), and
//! [`LimitRef`], a limit as the stores see it.
//!
//! [`Limiter::check_all`]: crate::Limiter::check_all

use std::borrow::Cow;
use std::fmt;

use crate::decision::Decision;
use crate::rate::Rate;

/// One limit of a check of several ([`Limiter::check_all`](crate::Limiter::check_all)): a
/// key checked against a [`Rate`], with the cost of the call (1 unless
/// [`with_cost`](Limit::with_cost) says otherwise) and the label that names its policy in
/// the HTTP fields ([`Decisions::headers`](crate::Decisions::headers); by default the
/// rate's window, such as `1s` or `1d`).
///
/// Each limit's key names a log of its own (in Redis, `<prefix><key>`), the same log a
/// [`Limiter::check`](crate::Limiter::check) of that key counts: two limits of one check must
/// name different keys (`user:42:burst`, `user:42:daily`).
///
/// ```
/// use std::time::Duration;
/// use ratelimit_runtime::{Limit, Rate};
///
/// let burst = Rate::new(5, Duration::from_secs(1))?;
/// let daily = Rate::new(1_000, Duration::from_secs(86_400))?;
/// let limits = [
///     Limit::new("user:42:burst", burst),
///     Limit::new("user:42:daily", daily).with_cost(3).with_label("daily"),
/// ];
/// assert_eq!(limits[1].cost(), 3);
/// # Ok::<(), ratelimit_runtime::RateLimitError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Limit<'a> {
    key: Cow<'a, str>,
    rate: Rate,
    cost: u32,
    label: Option<Cow<'static, str>>,
}

impl<'a> Limit<'a> {
    /// The most a sliding window log lets one call cost: 10,000. The log records a call of cost
    /// `c` as `c` entries (in Redis, `c` members of the key's sorted set), so a call's work and
    /// memory grow with its cost; above this, a call is answered
    /// [`RateLimitError::CostTooHigh`](crate::RateLimitError::CostTooHigh), never admitted. A
    /// [sliding window counter](crate::Algorithm::SlidingWindowCounter) adds a cost to a count,
    /// and takes any cost up to its threshold.
    pub const MAX_COST: u32 = 10_000;

    /// A limit of `key` at `rate`, for a call of cost 1, labelled by its window.
    #[must_use]
    pub fn new(key: impl Into<Cow<'a, str>>, rate: Rate) -> Limit<'a> {
        Limit {
            key: key.into(),
            rate,
            cost: 1,
            label: None,
        }
    }

    /// The same limit for a call of cost `cost`: admitted iff the window's recorded cost plus
    /// `cost` stays within the threshold, and then recorded as `cost` admissions. A cost of 0
    /// is always admitted (even where another rate of the key lowered the threshold) and
    /// records nothing; a cost above the threshold (or, for a sliding window log, above
    /// [`MAX_COST`](Limit::MAX_COST)) is never admitted (the check fails with
    /// [`RateLimitError::CostTooHigh`](crate::RateLimitError::CostTooHigh)).
    #[must_use]
    pub fn with_cost(mut self, cost: u32) -> Limit<'a> {
        self.cost = cost;
        self
    }

    /// The same limit, its policy named `label` in the HTTP fields (printable ASCII; a check
    /// with another label fails with
    /// [`RateLimitError::InvalidInput`](crate::RateLimitError::InvalidInput)).
    #[must_use]
    pub fn with_label(mut self, label: impl Into<Cow<'static, str>>) -> Limit<'a> {
        self.label = Some(label.into());
        self
    }

    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The rate.
    #[must_use]
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The call's cost under this limit.
    #[must_use]
    pub fn cost(&self) -> u32 {
        self.cost
    }

    /// The label given by [`with_label`](Limit::with_label), if any.
    #[must_use]
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The limit as the stores see it.
    pub(crate) fn as_ref(&self) -> LimitRef<'_> {
        LimitRef {
            key: &self.key,
            rate: self.rate,
            cost: self.cost,
        }
    }

    /// The label, given or not.
    pub(crate) fn take_label(&mut self) -> Option<Cow<'static, str>> {
        self.label.take()
    }
}

/// Leaves the key out: it may hold a user identifier.
impl fmt::Debug for Limit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("key", &"<redacted>")
            .field("rate", &self.rate)
            .field("cost", &self.cost)
            .field("label", &self.label)
            .finish()
    }
}

/// One limit of a check as the stores see it: a key (before the store's key prefix) checked
/// against a rate for a call of `cost`. No `Debug`: the key may hold a user identifier.
#[derive(Clone, Copy)]
pub(crate) struct LimitRef<'a> {
    pub(crate) key: &'a str,
    pub(crate) rate: Rate,
    pub(crate) cost: u32,
}

/// A store's answer to a check of several limits (in one part of the store).
pub(crate) struct LimitsAnswer {
    /// The call was admitted and recorded in every limit (else in none).
    pub(crate) admitted: bool,
    /// Each limit's decision: on a denial, a limit that would have admitted the call says so,
    /// its count without the call.
    pub(crate) decisions: Vec<Decision>,
    /// The check's time (µs since the Unix epoch), which its refund is told (0 in process,
    /// where a check is never refunded).
    pub(crate) now: u64,
}

/// A store's answer to a lease (`Store::lease`).
pub(crate) struct Grant {
    /// The call at hand's decision: admitted (and recorded) or denied; `remaining` counts the
    /// reserve as this process's (what the store had left, plus the reserve).
    pub(crate) decision: Decision,
    /// The window's count with the lease (its reserve included): every process's.
    pub(crate) count: u64,
    /// Admissions reserved beyond the call at hand (0 on a denial).
    pub(crate) reserved: u32,
    /// The lease's time on the store's clock (µs since the Unix epoch), which its give-back
    /// names.
    pub(crate) now: u64,
    /// How long the reserve may be spent for, from `now` on the store's clock.
    pub(crate) lasts: std::time::Duration,
}
