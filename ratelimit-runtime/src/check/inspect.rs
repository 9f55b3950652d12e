//! A key's log outside a check: looked at without recording anything
//! ([`Limiter::peek`](crate::Limiter::peek): the store's answer, through the circuit breakers
//! and within the timeout, or the failure policy's when the store cannot give it), or
//! forgotten ([`Limiter::reset`](crate::Limiter::reset)).

use std::future::Future;
use std::sync::Arc;

use super::shared::Shared;
use crate::decision::Decision;
use crate::error::{RateLimitError, StoreError};
use crate::layout::ScopeKeys;
use crate::limit::LimitRef;
use crate::policy::FailurePolicy;
use crate::rate::Rate;
use crate::runtime::{HandOff, Runtime};
use crate::store::Access;
use crate::telemetry;

impl Shared {
    /// What a check of `key` against `rate` (cost 1) at `at` (µs since the Unix epoch; `None`:
    /// the limiter's clock) would answer, recording nothing: admitted iff a call fits,
    /// `remaining` what is left now (no call counted), `retry_after` on a full window the time
    /// until a call fits, `reset_after` the time until the window is empty.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store cannot answer under
    /// [`FailurePolicy::Closed`].
    pub(crate) async fn peek(
        self: &Arc<Self>,
        key: &str,
        rate: Rate,
        at: Option<u64>,
    ) -> Result<Decision, RateLimitError> {
        let at = self.time_of(at);
        let decision = if let Access::InProcess(store) = self.store.access() {
            store.peek(key, rate, at)
        } else {
            // A look, as a reset, takes the attribute's keys as it writes them (escaped) too.
            if crate::layout::is_reserved(key, true) {
                return Err(super::answer::reserved_key_error());
            }
            let owned = key.to_owned();
            let limit = LimitRef { key, rate, cost: 1 };
            let outcome = self
                .remote_op(limit, move |shared| async move {
                    let limit = LimitRef {
                        key: &owned,
                        rate,
                        cost: 1,
                    };
                    shared.store.peek(limit, at).await
                })
                .await;
            outcome.or_else(|error| self.peek_by_policy(key, rate, at, error))?
        };
        // What a check would answer: in shadow mode, an admission that would deny.
        Ok(if self.shadow() {
            decision.in_shadow()
        } else {
            decision
        })
    }

    /// Forgets `key`: its log in the store (every admission of every rate that shares it, up to
    /// the store's now; what live leases reserved stays, to be spent) and in the in-process
    /// fallback, through the circuit breakers and within the timeout. The fallback is cleared
    /// even when the store cannot be reached.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store could not forget the key, whatever the
    /// failure policy (a reset is not a check: no policy can answer for it);
    /// [`RateLimitError::InvalidInput`] for a Redis key the store keeps for
    /// itself (`layout::is_reserved`).
    pub(crate) async fn reset(self: &Arc<Self>, key: &str) -> Result<(), RateLimitError> {
        self.fallback.remove(key);
        if let Access::InProcess(store) = self.store.access() {
            store.remove(key);
            return Ok(());
        }
        if crate::layout::is_reserved(key, false) {
            // It would delete the counter of the key without the suffix (a hand key's: no
            // backslash before the suffix escapes anything there; the attribute's keys are
            // reset by `reset_scope`).
            return Err(super::answer::reserved_key_error());
        }
        let owned = key.to_owned();
        // Its part is its log's: a log of the key stands for it.
        let log = LimitRef {
            key,
            rate: Rate::new_const(1, std::time::Duration::from_secs(1)),
            cost: 1,
        };
        self.remote_op(log, move |shared| async move {
            let outcome = shared.store.reset(&owned).await;
            // After the reset: a denial sent before it and cached meanwhile goes too. This
            // process's leases of the key stay: the reset kept their reserves.
            shared.forget_denials([owned.as_str()]);
            outcome
        })
        .await
        .map_err(RateLimitError::from)
    }

    /// Forgets every log of `scope` and `key` as the attribute lays them out (see
    /// [`ScopeKeys`]), in the store (keeping what live leases reserved, as
    /// [`reset`](Shared::reset)) and in the in-process fallback (cleared even when the store
    /// cannot be reached). Returns how many keys the store forgot. On a remote store the
    /// work is handed to the runtime: a caller that stops waiting leaves it to finish, the
    /// denials it frees forgotten after it.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store could not be reached, or a round trip
    /// failed or timed out (the logs forgotten before it stay forgotten).
    pub(crate) async fn reset_scope(
        self: &Arc<Self>,
        scope: &str,
        key: Option<&str>,
    ) -> Result<u64, RateLimitError> {
        let keys = ScopeKeys::new(scope, key);
        self.fallback.remove_where(|stored| keys.matches(stored));
        match self.store.access() {
            Access::InProcess(store) => {
                return Ok(store.remove_where(|stored| keys.matches(stored)) as u64);
            }
            Access::Unusable(error) => return Err(error.into()),
            Access::Remote => {}
        }
        let Some(runtime) = Runtime::current() else {
            return Err(RateLimitError::Unavailable(StoreError::NoRuntime));
        };
        let shared = Arc::clone(self);
        let reset = async move {
            let outcome = shared.store.reset_scope(&keys).await;
            // A pattern names no key the deny cache can find: all of it goes (even after a
            // failure, which may have forgotten some keys); so do the leases' remembered
            // denials of the keys, whose reserves stay.
            if let Some(cache) = &shared.deny_cache {
                cache.clear();
            }
            shared
                .leases
                .forget_denials_where(|leased| keys.matches(leased));
            outcome
        };
        HandOff::new(reset, runtime)
            .await
            .map_err(RateLimitError::from)
    }

    /// Runs `op` on the store's part that holds `limit`'s state, as a check of `limit`'s
    /// remote leg runs: through the part's circuit breaker (its open breaker answers at once),
    /// and handed to the runtime when its caller stops waiting, so that its outcome still
    /// reaches the breakers. Outside a runtime, or for an unusable store, the error, with
    /// nothing settled.
    pub(super) async fn remote_op<T, F, Op>(
        self: &Arc<Self>,
        limit: LimitRef<'_>,
        op: Op,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
        Op: FnOnce(Arc<Shared>) -> F + Send + 'static,
    {
        if let Access::Unusable(error) = self.store.access() {
            return Err(error);
        }
        let Some(runtime) = Runtime::current() else {
            return Err(StoreError::NoRuntime);
        };
        let part = self.store.part_of(limit);
        if let Err(open) = self.breaker_route(|| part, limit) {
            if open.yields {
                crate::runtime::yield_now().await;
            }
            return Err(open.error);
        }
        self.handed_off(runtime, op(Arc::clone(self)), part).await
    }

    /// The failure policy's answer to a look the store could not give (`error`): `Open`, an
    /// empty window; `Local`, the fallback's log; `Closed`, the error. Reported as a check's
    /// policy answer is (a debug event), but not counted among them
    /// ([`Limiter::policy_answers`](crate::Limiter::policy_answers) counts checks).
    fn peek_by_policy(
        &self,
        key: &str,
        rate: Rate,
        at: Option<u64>,
        error: StoreError,
    ) -> Result<Decision, RateLimitError> {
        if let StoreError::Misconfigured(_) = error {
            return Err(error.into());
        }
        telemetry::policy_answered(None, key, &error, self.answering_policy());
        let threshold = rate.threshold();
        match self.answering_policy() {
            FailurePolicy::Open => {
                Ok(Decision::admitted(threshold, threshold, std::time::Duration::ZERO).by_policy())
            }
            FailurePolicy::Closed => Err(error.into()),
            FailurePolicy::Local => Ok(self.fallback.peek(key, rate, at).by_policy()),
        }
    }
}
