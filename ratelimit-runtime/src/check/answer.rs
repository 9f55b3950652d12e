//! The answers of a check that need no I/O, and the route of the others: the in-process
//! store's answer, a denial of the deny cache (one the remote store gave earlier that is
//! still exact: `deny_cache.rs`), the failure policy's (a store that is unusable, or whose
//! circuit breaker is open), or the way to the store.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::deny_cache::{Lookup, Ticket};
use super::shared::Shared;
use crate::decision::Decision;
use crate::error::{RateLimitError, StoreError};
use crate::limit::LimitRef;
use crate::policy::FailurePolicy;
use crate::rate::Rate;
use crate::registry::{Mode, Resolved};
use crate::store::Access;
use crate::store::memory::Verdict;
use crate::telemetry::{self, Timer};

/// What a check of one limit does once the registry was asked (see [`Shared::registered`]).
pub(crate) enum Registered {
    /// The check the check path makes, against this rate (the limiter's own shadow mode or
    /// `off` included: the check path answers those).
    Check(Rate),
    /// A check in shadow mode (a scope's or a key's), against this rate: by
    /// [`Shared::check_in_shadow`].
    Shadow(Rate),
    /// Decided without a check (an exempt key, a scope off, a blocked key), against this rate.
    Decided(Rate, Decision),
}

/// What comes next for a check.
pub(super) enum Next {
    /// The in-process store's answer, turned into a [`Decision`] where the check's future
    /// returns it, so that the decision is written once (see [`Verdict`]).
    InProcess(Verdict),
    /// Answered without the store: the deny cache's or the failure policy's answer.
    Answered(Result<Decision, RateLimitError>),
    /// The failure policy's answer of an open breaker, given after one yield to the runtime
    /// (see [`Open::yields`](super::remote::Open)).
    Yielding(Result<Decision, RateLimitError>),
    /// To the store, over the network; its answer kept in the deny cache with `ticket`, if
    /// any.
    Remote { ticket: Option<Ticket> },
}

impl Shared {
    /// What comes next for a check of `limit` at `at` (µs since the Unix epoch; `None`: the
    /// store's clock; `explicit`: the caller's own time, not a manual clock's, which skips the
    /// deny cache), `scope` its attribute's or layer's (the span's field, the metrics'
    /// label). Answers without I/O are counted and reported here (see
    /// [`telemetry::decided`]); the remote leg reports its own. The cost is 1 (other costs
    /// are checked as several limits are, by `all.rs`).
    ///
    /// Inlined into the check's future, whose fields the limit is built from: it stays in
    /// registers on the in-process path.
    #[inline(always)]
    pub(super) fn next(
        self: &Arc<Self>,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        at: Option<u64>,
        explicit: bool,
    ) -> Next {
        let timer = Timer::start();
        let LimitRef { key, rate, cost } = limit;
        // The limiter's mode, read once for the whole check.
        let mode = self.registry.mode();
        if mode == Mode::Off {
            return Next::Answered(Ok(Decision::exempt()));
        }
        match self.store.access() {
            Access::InProcess(store) => {
                debug_assert_eq!(cost, 1, "other costs are checked by `all.rs`");
                let verdict = store.verdict(key, rate, at);
                let admitted = verdict.is_admitted();
                let shadow = mode == Mode::Shadow;
                telemetry::decided(
                    scope,
                    key,
                    Some(admitted || shadow),
                    || verdict.retry_after(),
                    timer,
                );
                if !admitted && shadow {
                    telemetry::shadow_denied(scope, key);
                }
                Next::InProcess(verdict)
            }
            Access::Remote => self.route(scope, limit, at, explicit, timer),
            Access::Unusable(error) => self.answer_unusable(scope, limit, error, timer),
        }
    }

    /// A remote check's route: a denial of the deny cache; else to the store, or, while its
    /// part's breaker is open, the policy's answer. Out of line (as
    /// [`answer_unusable`](Shared::answer_unusable)), so that the in-process check inlined
    /// into its future stays small.
    #[inline(never)]
    fn route(
        self: &Arc<Self>,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        at: Option<u64>,
        explicit: bool,
        timer: Timer,
    ) -> Next {
        // The attribute's and the layer's keys (scoped) are escaped; a hand key is not.
        if crate::layout::is_reserved(limit.key, scope.is_some()) {
            return Next::Answered(Err(reserved_key_error()));
        }
        // A leased rate's reserve is spent first, an admission the store made already (even
        // while its breaker is open: the lease was recorded exactly).
        if limit.rate.is_leased()
            && at.is_none()
            && super::lease::max_size(limit.rate) > 1
            && let Some(decision) = self.spend_lease(scope, limit)
        {
            return Next::Answered(self.answered(scope, limit.key, Ok(decision), timer));
        }
        let ticket = match self.cached_denial(scope, limit, at, explicit, true) {
            Ok(decision) => {
                return Next::Answered(self.answered(scope, limit.key, Ok(decision), timer));
            }
            Err(ticket) => ticket,
        };
        match self.breaker_route(|| self.store.part_of(limit), limit) {
            Ok(()) => Next::Remote { ticket },
            Err(open) => {
                self.settle_denial(ticket, limit, None);
                let result = self.answer_by_policy(scope, limit, at, open.error);
                let result = self.answered(scope, limit.key, result, timer);
                if open.yields {
                    Next::Yielding(result)
                } else {
                    Next::Answered(result)
                }
            }
        }
    }

    /// The deny cache's denial of a check of `limit` at `at` (as
    /// [`time_of`](Shared::time_of) gave it: the manual clock's time, read on the cache as
    /// well; `None`: the cache's monotonic clock), counted among its answers when `count`;
    /// else the ticket the store's answer settles (`None`: no cache, or a check of another
    /// cost than 1, which it neither answers nor hears of; a check at an explicit time gets one
    /// that drops the key's entries).
    #[inline]
    pub(super) fn cached_denial(
        &self,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        at: Option<u64>,
        explicit: bool,
        count: bool,
    ) -> Result<Decision, Option<Ticket>> {
        let Some(cache) = &self.deny_cache else {
            return Err(None);
        };
        // A slot frees when its call ends, which no cached time foresees.
        if limit.rate.is_concurrency() {
            return Err(None);
        }
        if explicit {
            return Err(Some(cache.explicit(limit.key)));
        }
        if limit.cost != 1 {
            return Err(None);
        }
        let now = at.unwrap_or_else(|| cache.now());
        match cache.lookup(limit.key, limit.rate, now, count) {
            Lookup::Denied(decision) => {
                if count {
                    telemetry::deny_cache_answered(scope);
                }
                Ok(decision)
            }
            Lookup::Miss(ticket) => Err(Some(ticket)),
        }
    }

    /// Keeps in the deny cache what the store answered to a check of `limit` that missed it
    /// with `ticket` (`None`: the store did not answer).
    #[inline]
    pub(super) fn settle_denial(
        &self,
        ticket: Option<Ticket>,
        limit: LimitRef<'_>,
        answer: Option<&Decision>,
    ) {
        if let (Some(ticket), Some(cache)) = (ticket, &self.deny_cache) {
            cache.settle(ticket, limit.rate, answer);
        }
    }

    /// The answer when the store is unusable (`error`, its configuration): the error, as
    /// [`RateLimitError::InvalidConfig`]. A setting that cannot work is no outage: no failure
    /// policy answers for it, and no breaker counts it.
    #[inline(never)]
    fn answer_unusable(
        &self,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        error: StoreError,
        timer: Timer,
    ) -> Next {
        Next::Answered(self.answered(scope, limit.key, Err(error.into()), timer))
    }

    /// The failure policy's answer to a check the store could not answer (`error`), counted
    /// among the policy's answers.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] with `error` under [`FailurePolicy::Closed`].
    pub(super) fn answer_by_policy(
        &self,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        at: Option<u64>,
        error: StoreError,
    ) -> Result<Decision, RateLimitError> {
        let policy = self.answering_policy();
        // One bad key, or one refused call, is not an outage: other keys keep their store,
        // and the logs stay quiet about recoveries that are not (each is told once).
        if error.is_foreign_value() {
            if !self.foreign_key_seen.swap(true, Ordering::Relaxed) {
                tracing::warn!(%error, ?policy, "a rate limit key holds a value the script cannot use (not a sorted set of times: another application writes under this prefix?); its checks are answered by the failure policy");
            }
        } else if !matches!(error, StoreError::NoRuntime)
            && !error.is_outage()
            && !self.refusal_seen.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(%error, ?policy, "Redis refused a rate limit check (out of memory? a missing ACL permission?): such checks are answered by the failure policy, the others still go to Redis");
        }
        self.health.answered_by_policy();
        telemetry::policy_answered(scope, limit.key, &error, policy);
        let LimitRef { key, rate, cost } = limit;
        match policy {
            FailurePolicy::Open => Ok(open_admission(rate, cost)),
            FailurePolicy::Closed => Err(error.into()),
            FailurePolicy::Local => Ok(self.fallback.check(key, rate, cost, at).by_policy()),
        }
    }
}

impl Shared {
    /// What a check of one limit of `key` against `rate` does, the registry having answered
    /// `resolved`: `scope` the attribute's or the layer's, whose blocked calls are reported
    /// (`None`: a check by hand, which has no events).
    pub(crate) fn registered(
        &self,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
        resolved: Resolved,
    ) -> Registered {
        match resolved {
            // The limiter's own modes: the check path's (no allocation).
            Resolved::Check { rate, shadow } if !shadow || self.shadow() => Registered::Check(rate),
            Resolved::Exempt if self.off() => Registered::Check(rate),
            Resolved::Check { rate, .. } => Registered::Shadow(rate),
            Resolved::Exempt => Registered::Decided(rate, Decision::exempt()),
            Resolved::Blocked {
                rate,
                retry_after,
                shadow,
            } => {
                let decision = Decision::blocked(rate.threshold(), retry_after);
                if let Some(scope) = scope {
                    if shadow {
                        telemetry::shadow_denied(Some(scope), key);
                    } else {
                        telemetry::blocked(scope);
                    }
                }
                let decision = if shadow {
                    decision.in_shadow()
                } else {
                    decision
                };
                Registered::Decided(rate, decision)
            }
        }
    }

    /// A check's answer that did not come from the in-process store, as its caller gets it and
    /// reported (see [`telemetry::answered`]): in shadow mode, a denial of `key` is reported as
    /// such and becomes an admission that would have been denied.
    #[inline]
    pub(super) fn answered(
        &self,
        scope: Option<&str>,
        key: &str,
        result: Result<Decision, RateLimitError>,
        timer: Timer,
    ) -> Result<Decision, RateLimitError> {
        let result = match result {
            Ok(decision) if !decision.allowed && self.shadow() => {
                telemetry::shadow_denied(scope, key);
                Ok(decision.in_shadow())
            }
            result => result,
        };
        telemetry::answered(scope, key, &result, timer);
        result
    }
}

/// [`FailurePolicy::Open`]'s answer to a call of `cost` under `rate`: admitted, recording
/// nothing, as if the window were empty.
pub(super) fn open_admission(rate: Rate, cost: u32) -> Decision {
    Decision::admitted(
        rate.threshold(),
        rate.threshold().saturating_sub(cost.into()),
        rate.period(),
    )
    .by_policy()
}

/// The error of a concurrency limit's rate given to a check that does not hold slots: its
/// slot would never be released.
pub(super) fn concurrency_error() -> RateLimitError {
    RateLimitError::InvalidInput(
        "a concurrency limit's rate is checked by `Limiter::acquire` (or the attribute's \
         `concurrency`), which holds its slot while the call runs, not by a check"
            .into(),
    )
}

/// A key given by hand that names what the Redis store keeps for itself: a sliding window
/// counter's hash, or the shared limits' keys (`layout::is_reserved`).
#[cold]
pub(super) fn reserved_key_error() -> RateLimitError {
    RateLimitError::InvalidInput(
        "a Redis limiter's key may not end with `#swc` (the suffix of a sliding window \
         counter's hash: the key without it would share it) nor start with `{registry}` (the \
         shared limits' keys); choose another key"
            .into(),
    )
}
