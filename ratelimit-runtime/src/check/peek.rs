//! A look at a key's log that records nothing ([`Limiter::peek`](crate::Limiter::peek)): the
//! store's answer, through the circuit breakers and within the timeout, or the failure
//! policy's when the store cannot give it.

use std::sync::Arc;

use super::remote::EndProbe;
use super::shared::Shared;
use crate::decision::Decision;
use crate::error::{RateLimitError, StoreError};
use crate::health::Route;
use crate::limit::LimitRef;
use crate::policy::FailurePolicy;
use crate::rate::Rate;
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
        let limit = LimitRef { key, rate, cost: 1 };
        match self.store.access() {
            Access::InProcess(store) => Ok(store.peek(key, rate, at)),
            Access::Unusable(error) => {
                self.health.failed(0, &error, self.policy, false);
                self.peek_by_policy(limit, at, error)
            }
            Access::Remote => {
                let probe = match self.health.route(|| self.store.part(key)) {
                    Route::Store(probe) => probe,
                    Route::Policy(error) => return self.peek_by_policy(limit, at, error),
                };
                // Ends the probe if the look is dropped unfinished (it has nothing to settle).
                let unanswered = probe.map(|part| EndProbe::new(Arc::clone(self), part));
                let outcome = self.store.peek(limit, at).await;
                self.settle(outcome.as_ref().err(), || self.store.part(key), probe);
                if let Some(end) = unanswered {
                    std::mem::forget(end);
                }
                match outcome {
                    Ok(decision) => Ok(decision),
                    Err(error) => self.peek_by_policy(limit, at, error),
                }
            }
        }
    }

    /// The failure policy's answer to a look the store could not give (`error`), counted among
    /// the policy's answers: `Open`, an empty window; `Local`, the fallback's log; `Closed`,
    /// the error.
    fn peek_by_policy(
        &self,
        limit: LimitRef<'_>,
        at: Option<u64>,
        error: StoreError,
    ) -> Result<Decision, RateLimitError> {
        self.health.answered_by_policy();
        telemetry::policy_answered(None, limit.key, &error, self.policy);
        let threshold = limit.rate.threshold();
        match self.policy {
            FailurePolicy::Open => Ok(Decision::admitted(
                threshold,
                threshold,
                std::time::Duration::ZERO,
            )),
            FailurePolicy::Closed => Err(RateLimitError::Unavailable(error)),
            FailurePolicy::Local => Ok(self.fallback.peek(limit.key, limit.rate, at)),
        }
    }
}
