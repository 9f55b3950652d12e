//! The remote leg of a check: the circuit breakers' route (and the probe of an open breaker,
//! started in the background), the store's call with the breakers' bookkeeping (and, in a
//! cluster, the lookup that opens a failed master's other slots), run as a [`HandOff`] so
//! that it reaches its end even when its caller stops waiting; then the failure policy's
//! answer when the store failed.

use std::future::Future;
use std::sync::{Arc, Weak};

use futures_util::FutureExt as _;

use super::deny_cache::Ticket;
use super::shared::Shared;
use crate::decision::Decision;
use crate::error::{RateLimitError, StoreError};
use crate::health::{PROBE_INTERVAL, Route};
use crate::limit::LimitRef;
use crate::runtime::{HandOff, Runtime};
use crate::telemetry::Timer;

impl Shared {
    /// Checks `limit` at `at` (µs since the Unix epoch; `None`: the store's clock) with the
    /// store; `ticket`: the deny cache's, which the answer settles. Reported as
    /// [`Shared::next`]'s answers.
    ///
    /// # Errors
    ///
    /// The failure policy's when the store failed: [`RateLimitError::Unavailable`] under
    /// [`FailurePolicy::Closed`](crate::FailurePolicy::Closed).
    pub(super) async fn remote(
        self: &Arc<Self>,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        at: Option<u64>,
        ticket: Option<Ticket>,
    ) -> Result<Decision, RateLimitError> {
        if limit.rate.is_leased() && at.is_none() {
            return self.leased(scope, limit, ticket).await;
        }
        self.direct(scope, limit, at, ticket).await
    }

    /// [`remote`](Shared::remote) without a lease: the check's own call to the store.
    ///
    /// # Errors
    ///
    /// As [`remote`](Shared::remote).
    pub(super) async fn direct(
        self: &Arc<Self>,
        scope: Option<&str>,
        limit: LimitRef<'_>,
        at: Option<u64>,
        ticket: Option<Ticket>,
    ) -> Result<Decision, RateLimitError> {
        let timer = Timer::start();
        let outcome = match self.call(limit, at, ticket) {
            Ok(call) => call.await,
            Err(error) => {
                self.settle_denial(ticket, limit, None);
                Err(error)
            }
        };
        let result = match outcome {
            Ok(decision) => Ok(decision),
            Err(error) => self.answer_by_policy(scope, limit, at, error),
        };
        self.answered(scope, limit.key, result, timer)
    }

    /// The store's call of a check, owning what it needs (the key copied, this state shared),
    /// so that when its caller stops waiting it can be handed to the runtime and still reach
    /// its end (bounded by the timeout), tell the breakers how it went, and settle `ticket`
    /// in the deny cache.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoRuntime`] outside a runtime.
    fn call(
        self: &Arc<Self>,
        limit: LimitRef<'_>,
        at: Option<u64>,
        ticket: Option<Ticket>,
    ) -> Result<HandOff<Result<Decision, StoreError>>, StoreError> {
        let Some(runtime) = Runtime::current() else {
            return Err(StoreError::NoRuntime);
        };
        let shared = Arc::clone(self);
        let (key, rate, cost) = (limit.key.to_owned(), limit.rate, limit.cost);
        let part = self.store.part_of(limit);
        let call = async move {
            let limit = LimitRef {
                key: &key,
                rate,
                cost,
            };
            let outcome = shared.store.check(limit, at).await;
            shared.settle_denial(ticket, limit, outcome.as_ref().ok());
            outcome
        };
        Ok(self.handed_off(runtime, call, part))
    }

    /// `call`, a call to the part `part` of the store, as a [`HandOff`] to `runtime` that
    /// tells the breakers how it went, so that a caller that stops waiting still lets it reach
    /// its end (bounded by the timeout) and settle.
    pub(super) fn handed_off<T: Send + 'static>(
        self: &Arc<Self>,
        runtime: Runtime,
        call: impl Future<Output = Result<T, StoreError>> + Send + 'static,
        part: usize,
    ) -> HandOff<Result<T, StoreError>> {
        let shared = Arc::clone(self);
        // A map, not an `async` block: one would keep `call` twice (captured, then awaited).
        let settled = call.map(move |outcome| {
            shared.settle(outcome.as_ref().err(), || part, false);
            outcome
        });
        HandOff::new(settled, runtime)
    }

    /// Whether a call of `limit` (to the part `part` gives, worked out only during an outage)
    /// goes to the store: [`Open`] while the part's breaker is open. A call that finds the
    /// breaker's next probe due starts it, in the background ([`probe`](Shared::probe)), and
    /// is answered by the policy as the others are: no caller waits on a store that failed
    /// lately.
    ///
    /// # Errors
    ///
    /// [`Open`], with [`StoreError::CircuitOpen`], while the breaker is open.
    #[inline]
    pub(super) fn breaker_route(
        self: &Arc<Self>,
        part: impl FnOnce() -> usize,
        limit: LimitRef<'_>,
    ) -> Result<(), Open> {
        match self.health.route(part) {
            Route::Store => Ok(()),
            Route::Policy { error, probe } => {
                let started = probe.is_some_and(|probe| self.probe(probe, limit));
                Err(Open {
                    error,
                    yields: started || self.health.yield_due(),
                })
            }
        }
    }

    /// Starts on the runtime the probes of part `part`'s open breaker, claimed by a call of
    /// `limit`: [`Store::probe`](crate::store::Store::probe) of the node that holds `limit`'s
    /// state (in a cluster, the master of `part`: `limit`'s slot, or the slot that stands for
    /// its master's). A probe the store fails is followed by another a probe interval later,
    /// the claim kept, until one is answered (which closes the breaker), the breaker closes
    /// otherwise (a check sent before it opened was answered), or the limiter is dropped: a
    /// limiter without traffic finds its store back by itself, and its next check goes there.
    /// Outside a runtime, or dropped unfinished by a runtime shutting down, the probes end
    /// unanswered (the next check claims them again).
    /// Returns whether they started (on a runtime).
    #[cold]
    fn probe(self: &Arc<Self>, part: usize, limit: LimitRef<'_>) -> bool {
        let unanswered = EndProbe::new(Arc::downgrade(self), part);
        let Some(runtime) = Runtime::current() else {
            return false;
        };
        // Weak between probes: a dropped limiter ends them (and its state goes).
        let weak = Arc::downgrade(self);
        let (key, rate) = (limit.key.to_owned(), limit.rate);
        runtime.spawn(async move {
            let limit = LimitRef {
                key: &key,
                rate,
                cost: 1,
            };
            loop {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                match shared.store.probe(limit).await {
                    // Failed: the breaker stays open, and this task keeps its claim.
                    Err(error) if error.is_outage() => shared.settle(Some(&error), || part, false),
                    outcome => {
                        shared.settle(outcome.as_ref().err(), || part, true);
                        unanswered.disarm();
                        return;
                    }
                }
                drop(shared);
                crate::runtime::sleep(PROBE_INTERVAL).await;
                if !weak
                    .upgrade()
                    .is_some_and(|shared| shared.health.is_open(part))
                {
                    return;
                }
            }
        });
        true
    }

    /// Tells the breakers how a call of the part `part` gives (worked out only when needed)
    /// went: answered, or failed with `error` (`probe`: it was that part's probe, answered; a
    /// failed probe keeps its claim, its task probing again).
    pub(super) fn settle(
        self: &Arc<Self>,
        error: Option<&StoreError>,
        part: impl FnOnce() -> usize,
        probe: bool,
    ) {
        match error {
            Some(error) if error.is_outage() => {
                let part = part();
                let opened = self.health.failed(part, error, self.answering_policy());
                if opened && self.store.parts() > 1 {
                    self.open_group_of(part);
                }
            }
            // The store answered, even if with an error about this one key.
            _ => self.health.succeeded(part, probe),
        }
    }

    /// Opens, in the background (one lookup at a time), the breakers of the parts that fail
    /// with `part`: in a cluster, the failed master's other slots, once the cluster tells
    /// which they are.
    #[cold]
    fn open_group_of(self: &Arc<Self>, part: usize) {
        let Some(runtime) = Runtime::current() else {
            return;
        };
        let shared = Arc::clone(self);
        runtime.spawn(async move {
            if let Some(ranges) = shared.store.group_of(part).await {
                shared.health.open_ranges(&ranges, part);
            }
        });
    }
}

/// A call an open circuit breaker answers.
pub(super) struct Open {
    /// What the policy answers it with.
    pub(super) error: StoreError,
    /// Whether its caller yields to the runtime once before answering: it started the
    /// breaker's probes, or a yield is due ([`Health::yield_due`](crate::health::Health::yield_due)),
    /// so that the probes run even under a caller that awaits nothing but checks.
    pub(super) yields: bool,
}

/// Ends the probe of a breaker part when dropped unanswered (while its limiter lives);
/// [`disarm`](EndProbe::disarm) it once the probe was answered. It holds the limiter's state
/// weakly: a guard that held it (and was forgotten) once kept a dropped limiter's state, its
/// deny cache and its Sentinel watch, alive for good.
struct EndProbe {
    shared: Weak<Shared>,
    part: usize,
    armed: bool,
}

impl EndProbe {
    /// Ends the probe of `part` of `shared`'s breakers when dropped.
    fn new(shared: Weak<Shared>, part: usize) -> EndProbe {
        EndProbe {
            shared,
            part,
            armed: true,
        }
    }

    /// The probe was answered (and settled): dropping the guard ends nothing.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for EndProbe {
    fn drop(&mut self) {
        if self.armed
            && let Some(shared) = self.shared.upgrade()
        {
            shared.health.end_probe(self.part);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::limit::LimitRef;
    use crate::{Algorithm, Limiter, Rate};

    /// The size of a Redis check's call, pinned: it is boxed (and was copied) on every remote
    /// check, so a change that grows it must say so here. Every layer of an `async fn` that
    /// takes a future as an argument and awaits it keeps it twice, which once made it 23.7 KB
    /// (a memcpy of 38 KB per check, 25 % of a client's CPU at 50 callers).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_remote_checks_call_stays_small() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let limiter = Limiter::builder()
            .redis_url("redis://127.0.0.1:1/")
            .build()
            .expect("a limiter");
        let shared = limiter.shared();
        runtime.block_on(async {
            for rate in [
                Rate::new(5, Duration::from_secs(1)).unwrap(),
                Rate::new(5, Duration::from_secs(1))
                    .unwrap()
                    .with_algorithm(Algorithm::SlidingWindowCounter),
            ] {
                let limit = LimitRef {
                    key: "k",
                    rate,
                    cost: 1,
                };
                let call = shared.call(limit, None, None).expect("a runtime");
                let size = call.boxed_size();
                eprintln!("a remote check's call: {size} bytes");
                assert!(size <= 2_048, "a remote check's call takes {size} bytes");
                // The remote leg around it (boxed by `Checking`), leased or not.
                for rate in [rate, rate.leased()] {
                    let limit = LimitRef { rate, ..limit };
                    let remote = shared.remote(None, limit, None, None);
                    let size = std::mem::size_of_val(&remote);
                    eprintln!("a remote check's leg: {size} bytes");
                    assert!(size <= 2_048, "a remote check's leg takes {size} bytes");
                }
            }
        });
    }
}
