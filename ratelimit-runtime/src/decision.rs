//! [`Decision`]: the answer to one check.

use std::time::Duration;

/// The answer to one check of a key against a [`Rate`](crate::Rate).
///
/// A denied call is not recorded, so it does not push the window further out: a client that keeps
/// retrying is admitted as soon as [`retry_after`](Decision::retry_after) has passed.
///
/// Two decisions are equal when they say the same and were given the same way: a decision of
/// the failure policy ([`answered_by_policy`](Decision::answered_by_policy)) or of shadow mode
/// ([`would_deny`](Decision::would_deny)) differs from the store's with the same fields.
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
    /// threshold, normally the oldest counted admission + period − now. (On an admission that
    /// shadow mode let through, what the denial would have said: see
    /// [`would_deny`](Decision::would_deny).)
    pub retry_after: Option<Duration>,
    /// The time until no admission of the key remains in the window (the newest admission +
    /// period − now), after which the key may be forgotten (Redis: its TTL, at least 1 s; in
    /// process: at a later sweep).
    pub reset_after: Duration,
    /// What answered, and whether shadow mode let a denial through.
    pub(crate) answer: Answer,
}

/// Who gave a [`Decision`], and how (see [`Decision::would_deny`] and
/// [`Decision::answered_by_policy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) enum Answer {
    /// The store decided, and its decision stands.
    #[default]
    Store,
    /// The [`FailurePolicy`](crate::FailurePolicy) answered: the store could not.
    Policy,
    /// Shadow mode: the call would have been denied, and is admitted all the same.
    WouldDeny,
    /// Shadow mode, while the failure policy answered: the policy's fallback would have
    /// denied the call, which is admitted all the same.
    PolicyWouldDeny,
    /// No check was made: the limit, or the limiter, is off, or the key exempt (see
    /// [`Decision::is_exempt`]).
    Exempt,
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
            answer: Answer::Store,
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
            answer: Answer::Store,
        }
    }

    /// The answer of a check that was not made (see [`is_exempt`](Decision::is_exempt)).
    #[must_use]
    pub(crate) const fn exempt() -> Decision {
        Decision {
            allowed: true,
            limit: u64::MAX,
            remaining: u64::MAX,
            retry_after: None,
            reset_after: Duration::ZERO,
            answer: Answer::Exempt,
        }
    }

    /// `true` for a call admitted without a check, recording nothing: its limit or the whole
    /// limiter is [`Mode::Off`](crate::Mode::Off), or its key is exempt
    /// ([`Override::exempt`](crate::Override::exempt)). `limit` and `remaining` are
    /// `u64::MAX`, as for a call exempt from every limit ([`Decisions::is_empty`](crate::Decisions::is_empty)); send no RateLimit fields for it (the layer
    /// does not).
    #[must_use]
    pub const fn is_exempt(&self) -> bool {
        matches!(self.answer, Answer::Exempt)
    }

    /// The denial of a blocked key (the registry's [`Override::block`](crate::Override::block)):
    /// nothing left of `limit`, for `retry_after` (the block's end, or a period).
    #[must_use]
    pub(crate) const fn blocked(limit: u64, retry_after: Duration) -> Decision {
        Decision::denied(limit, retry_after, retry_after)
    }

    /// `true` when the call was admitted.
    #[must_use]
    pub const fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// `true` for an admission that shadow mode let through: the limit would have denied the
    /// call (a [`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow) limiter, or a shadow
    /// limit of the attribute). The call was not recorded, as a denial is not; `remaining`
    /// and `retry_after` are what the denial would have said (0 left at a cost of 1). Its
    /// [`headers`](Decision::headers) are the denial's fields too: in a trial, do not send
    /// them to clients (the attribute and the axum layer do not).
    #[must_use]
    pub const fn would_deny(&self) -> bool {
        matches!(self.answer, Answer::WouldDeny | Answer::PolicyWouldDeny)
    }

    /// `true` when the [`FailurePolicy`](crate::FailurePolicy) answered instead of the store
    /// (it could not be reached, or its circuit breaker was open): `Open`'s empty window, or
    /// `Local`'s in-process fallback.
    #[must_use]
    pub const fn answered_by_policy(&self) -> bool {
        matches!(self.answer, Answer::Policy | Answer::PolicyWouldDeny)
    }

    /// This decision, as the failure policy's answer.
    #[must_use]
    pub(crate) const fn by_policy(self) -> Decision {
        let answer = match self.answer {
            Answer::WouldDeny | Answer::PolicyWouldDeny => Answer::PolicyWouldDeny,
            Answer::Store | Answer::Policy | Answer::Exempt => Answer::Policy,
        };
        Decision { answer, ..self }
    }

    /// This decision in shadow mode: a denial becomes an admission that
    /// [`would_deny`](Decision::would_deny); an admission stays.
    #[must_use]
    pub(crate) const fn in_shadow(self) -> Decision {
        if self.allowed {
            return self;
        }
        let answer = match self.answer {
            Answer::Policy | Answer::PolicyWouldDeny => Answer::PolicyWouldDeny,
            Answer::Store | Answer::WouldDeny | Answer::Exempt => Answer::WouldDeny,
        };
        Decision {
            allowed: true,
            answer,
            ..self
        }
    }

    /// This decision of a concurrency limit: a slot frees when a call ends, which no store
    /// foresees, so a denial's retry-after is an estimate, [`SLOT_RETRY`] (less when the
    /// slot renewed least recently would leave its window sooner, its holder gone); its
    /// `reset_after` the same. An admission's `reset_after` is zero: a slot has no window
    /// to empty.
    #[must_use]
    pub(crate) fn of_slots(self) -> Decision {
        match self.retry_after {
            Some(retry_after) if !self.allowed || self.would_deny() => {
                let retry_after = retry_after.min(SLOT_RETRY);
                Decision {
                    retry_after: Some(retry_after),
                    reset_after: retry_after,
                    ..self
                }
            }
            _ => Decision {
                reset_after: Duration::ZERO,
                ..self
            },
        }
    }
}

/// What a concurrency limit's denial tells a caller to wait before asking again (see
/// [`Decision::of_slots`]), and how often a wait for a slot asks.
pub(crate) const SLOT_RETRY: Duration = Duration::from_millis(100);
