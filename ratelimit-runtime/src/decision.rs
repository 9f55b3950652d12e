//! [`Decision`]: the answer to one check.

use std::time::Duration;

/// The answer to one check of a key against a [`Rate`](crate::Rate).
///
/// A denied call is not recorded, so it does not push the window further out: a client that keeps
/// retrying is admitted as soon as [`retry_after`](Decision::retry_after) has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Decision {
    /// `true` when the call was admitted (and recorded), `false` when it was denied.
    pub allowed: bool,
    /// The rate's threshold: admissions allowed per period.
    pub limit: u64,
    /// Admissions still available in the window after this call. On a denial, what is left
    /// without it: 0 for a call of cost 1; for a larger cost, a smaller call may still fit.
    pub remaining: u64,
    /// `None` when admitted; on a denial, the time until the key's count falls below the
    /// threshold, normally the oldest counted admission + period − now.
    pub retry_after: Option<Duration>,
    /// The time until no admission of the key remains in the window (the newest admission +
    /// period − now), after which the key may be forgotten (Redis: its TTL, at least 1 s; in
    /// process: at a later sweep).
    pub reset_after: Duration,
}

impl Decision {
    /// An admission: `remaining` admissions are left of `limit`, and the window empties in
    /// `reset_after`.
    #[must_use]
    pub const fn admitted(limit: u64, remaining: u64, reset_after: Duration) -> Decision {
        Decision {
            allowed: true,
            limit,
            remaining,
            retry_after: None,
            reset_after,
        }
    }

    /// A denial: the count falls below `limit` in `retry_after` and the window empties in
    /// `reset_after`.
    #[must_use]
    pub const fn denied(limit: u64, retry_after: Duration, reset_after: Duration) -> Decision {
        Decision {
            allowed: false,
            limit,
            remaining: 0,
            retry_after: Some(retry_after),
            reset_after,
        }
    }

    /// `true` when the call was admitted.
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        self.allowed
    }
}
