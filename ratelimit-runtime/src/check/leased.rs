//! The check of a leased rate ([`Rate::leased`](crate::Rate::leased)) on a remote store:
//! its reserve spent without I/O, or its lease renewed (one check at a time; the others wait
//! for it), then given back when it ends. `lease.rs` keeps the leases, and says why they stay
//! exact.

use std::sync::Arc;
use std::time::Instant;

use super::deny_cache::Ticket;
use super::lease::{AfterWait, GiveBack, Renewal, Spent, lasts, max_size};
use super::shared::Shared;
use crate::decision::Decision;
use crate::error::{RateLimitError, StoreError};
use crate::limit::LimitRef;
use crate::runtime::{self, Runtime};
use crate::telemetry::{self, Timer};

impl Shared {
    /// Spends a member of `limit`'s lease without I/O, if one is left; or, with the deny
    /// cache on, answers with the lease's last denial while it holds (counted among the deny
    /// cache's answers).
    #[inline]
    pub(super) fn spend_lease(&self, scope: Option<&str>, limit: LimitRef<'_>) -> Option<Decision> {
        match self.leases.spend(limit) {
            Spent::Admitted(decision) => Some(decision),
            Spent::Denied(decision) => {
                telemetry::deny_cache_answered(scope);
                Some(decision)
            }
            Spent::Nothing => None,
        }
    }

    /// Checks `limit` (cost 1, leased, on the store's clock) through its lease: spends its
    /// reserve, or renews it (one renewal at a time; the others wait for it), or answers by
    /// the failure policy when the renewal fails. `ticket`: the deny cache's, which a
    /// renewal's answer settles. Reported as [`Shared::next`]'s answers.
    ///
    /// # Errors
    ///
    /// As [`remote`](Shared::remote).
    pub(super) async fn leased(
        self: &Arc<Self>,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        ticket: Option<Ticket>,
    ) -> Result<Decision, RateLimitError> {
        if max_size(limit.rate) < 2 {
            // A lease could hold no reserve: a plain check, never one after another.
            return self.direct(scope, limit, None, ticket).await;
        }
        let timer = Timer::start();
        let lease = self.leases.lease(limit);
        let seen = self.leases.generation(limit);
        let renewing = match lease.try_lock() {
            Some(renewing) => renewing,
            // Outside a runtime there are no timers to wait with: the check goes on its own
            // (and is answered by the failure policy).
            None if Runtime::current().is_none() => {
                return self.direct(scope, limit, None, ticket).await;
            }
            // A renewal is on its way: its outcome, within the store's timeout (the renewal
            // itself is bounded by it), else a check of its own.
            None => match runtime::timeout(self.store.timeout(), lease.lock()).await {
                Ok(renewing) => renewing,
                Err(_) => return self.direct(scope, limit, None, ticket).await,
            },
        };
        let after = self.leases.after_wait(limit, seen, self.store.timeout());
        let (wanted, give_back, token) = match after {
            AfterWait::Answered(decision) => {
                drop(renewing);
                self.settle_denial(ticket, limit, None);
                return self.answered(scope, limit.key, Ok(decision), timer);
            }
            AfterWait::Renew {
                wanted,
                give_back,
                token,
            } => (wanted, give_back, token),
            AfterWait::Direct => {
                drop(renewing);
                return self.direct(scope, limit, None, ticket).await;
            }
        };
        let Some(runtime) = Runtime::current() else {
            drop(renewing);
            // The renewal never began: another may start at once.
            self.leases.abandon(limit, token);
            self.settle_denial(ticket, limit, None);
            let error = StoreError::NoRuntime;
            let result = self.answer_by_policy(scope, limit, None, error);
            return self.answered(scope, limit.key, result, timer);
        };
        if let Some(give_back) = give_back {
            self.give_back(&runtime, limit, give_back);
        }
        // The lock stays with this caller: one that stops waiting lets the next check in,
        // which then leaves the renewal on its way alone (its token) for up to the timeout.
        let outcome = self.renew(runtime, limit, token, wanted, ticket).await;
        drop(renewing);
        let result = match outcome {
            Ok(decision) => Ok(decision),
            Err(error) => self.answer_by_policy(scope, limit, None, error),
        };
        self.answered(scope, limit.key, result, timer)
    }

    /// Renews the lease of `limit` (the renewal `token`) for up to `wanted` admissions, the call at hand included, on `runtime` (so that
    /// it installs its grant even if its caller stops waiting); returns the call's decision.
    /// A grant with a reserve sets a timer that gives back what is left of it when it ends.
    async fn renew(
        self: &Arc<Self>,
        runtime: Runtime,
        limit: LimitRef<'_>,
        token: u64,
        wanted: u32,
        ticket: Option<Ticket>,
    ) -> Result<Decision, StoreError> {
        let shared = Arc::clone(self);
        let (key, rate) = (limit.key.to_owned(), limit.rate);
        let part = self.store.part_of(limit);
        let timers = runtime.clone();
        let call = async move {
            let limit = LimitRef {
                key: &key,
                rate,
                cost: 1,
            };
            // Held from before the grant is installed until its timer ends: no sweep takes
            // the entry of a lease with a reserve, even one whose caller stopped waiting.
            let held = shared.leases.lease(limit);
            let name = shared.store.lease_name();
            let sent = Instant::now();
            let outcome = shared.store.lease(limit, &name, wanted, lasts(rate)).await;
            let renewal = Renewal { token, name, sent };
            let back = shared.leases.install(limit, renewal, outcome.as_ref().ok());
            let installed = back.as_ref().is_none_or(|back| back.name != name);
            if let (Some(back), Some(runtime)) = (back, Runtime::current()) {
                shared.give_back(&runtime, limit, back);
            }
            shared.settle_denial(ticket, limit, outcome.as_ref().ok().map(|g| &g.decision));
            let grant = outcome?;
            if grant.reserved > 0 && installed {
                // The timer holds the lease, so that no sweep takes its entry before it ends.
                let shared = Arc::clone(&shared);
                timers.spawn(async move {
                    let limit = LimitRef {
                        key: &key,
                        rate,
                        cost: 1,
                    };
                    // Until the lease ends, or the limits changed and ended it early.
                    shared.leases.until_ended(limit, &name).await;
                    let give_back = shared.leases.take_ended(limit);
                    if let (Some(give_back), Some(runtime)) = (give_back, Runtime::current()) {
                        shared.give_back(&runtime, limit, give_back);
                    }
                    drop(held);
                });
            } else {
                drop(held);
            }
            Ok(grant.decision)
        };
        self.handed_off(runtime, call, part).await
    }

    /// Gives back, in the background, the unspent reserve of an ended lease of `limit`: its
    /// members `1..=left`, the store's refund of an admission of that cost (never resent for
    /// a counter). A give-back that fails leaves the reserve to leave the window with its
    /// lease: fewer admissions, never more.
    fn give_back(self: &Arc<Self>, runtime: &Runtime, limit: LimitRef<'_>, give_back: GiveBack) {
        let shared = Arc::clone(self);
        let (key, rate) = (limit.key.to_owned(), limit.rate);
        runtime.spawn(async move {
            let limit = LimitRef {
                key: &key,
                rate,
                cost: give_back.left,
            };
            if shared
                .store
                .give_back(limit, &give_back.name, give_back.now)
                .await
                .is_ok()
            {
                shared.forget_denials([key.as_str()]);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    /// A leased check polled outside any runtime while its lease is being renewed (elsewhere)
    /// answers by the failure policy: it used to wait for the renewal on Tokio's timers,
    /// which panic outside a runtime. (With the `smol` feature there is no "outside".)
    #[cfg(not(feature = "smol"))]
    #[test]
    fn a_leased_check_outside_a_runtime_during_a_renewal_answers_by_policy() {
        use std::future::Future;
        use std::pin::pin;
        use std::task::{Context, Poll, Waker};
        use std::time::Duration;

        use crate::error::{RateLimitError, StoreError};
        use crate::limit::LimitRef;
        use crate::{FailurePolicy, Limiter, Rate};

        let limiter = Limiter::builder()
            .redis_url("redis://127.0.0.1:1/")
            .failure_policy(FailurePolicy::Closed)
            .build()
            .unwrap();
        let rate = Rate::new(1_000, Duration::from_secs(60)).unwrap().leased();
        let limit = LimitRef {
            key: "k",
            rate,
            cost: 1,
        };
        // A renewal on its way: its lock held.
        let lease = limiter.shared().leases.lease(limit);
        let _renewing = lease.try_lock().expect("nobody renews yet");
        let mut context = Context::from_waker(Waker::noop());
        let mut check = pin!(limiter.check("k", rate));
        let Poll::Ready(Err(RateLimitError::Unavailable(StoreError::NoRuntime))) =
            check.as_mut().poll(&mut context)
        else {
            panic!("expected an immediate `Unavailable` answer");
        };
    }
}
