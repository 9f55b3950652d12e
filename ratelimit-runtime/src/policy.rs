//! [`FailurePolicy`]: what a check answers when its store cannot.

/// What a [`Limiter`](crate::Limiter) answers when its store cannot (Redis down, slow past the
/// timeout, refusing a call).
///
/// The default is [`FailurePolicy::Local`]: an outage neither stops all traffic (as `Closed`
/// would) nor lifts every limit (as `Open` would). Each process keeps limiting on its own with
/// the same rate, so across `N` processes up to `N × threshold` calls per period get through
/// until Redis answers again, and checks go back to Redis as soon as it does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Fail open: admit the call (the decision reports `remaining = threshold - 1`).
    Open,
    /// Fail closed: return [`RateLimitError::Unavailable`](crate::RateLimitError::Unavailable).
    Closed,
    /// Check against an in-process store with the same rate until the store answers again.
    #[default]
    Local,
}
