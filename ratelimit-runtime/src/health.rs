//! The store's health as a limiter sees it: circuit breakers that open on an outage, so that a
//! Redis that is down or stalled costs one probe at a time instead of a timeout per check, and
//! a log of each outage once when it starts and once when it ends.
//!
//! One breaker for a Redis server; for a Redis Cluster, one per sixteenth of the hash slots, so
//! that a failed master opens the breakers of its slots and not those of its healthy peers.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::FailurePolicy;
use crate::error::StoreError;

/// While a breaker is open, the least time between two probes of the store. Short enough that
/// checks go back to Redis well within a second of it accepting connections again.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// The breakers of a limiter and what they share: the outage log and the policy-answer count.
pub(crate) struct Health {
    /// The origin of the times below.
    epoch: Instant,
    breakers: Box<[Breaker]>,
    /// How many breakers are open now; an outage lasts while any is.
    open: AtomicUsize,
    /// Checks answered by the failure policy since the limiter was built, and when the current
    /// outage began.
    policy_answers: AtomicU64,
    policy_answers_at_outage: AtomicU64,
    outage_since: AtomicU64,
}

/// Closed (checks go to the store) until a check fails with an outage; then open: checks are
/// answered by the failure policy at once, except one probe at a time, at most every
/// [`PROBE_INTERVAL`], whose success closes it again.
#[derive(Default)]
struct Breaker {
    /// 0 while closed; else nanoseconds since `epoch` (at least 1) when it opened.
    down_since: AtomicU64,
    /// Nanoseconds since `epoch` before which no probe starts.
    next_probe: AtomicU64,
    /// Set while a probe is in flight.
    probing: AtomicBool,
}

/// Whether a check goes to the store.
pub(crate) enum Route<'a> {
    /// Yes: as usual, or as the probe of an open breaker (released when dropped).
    Store(Option<ProbeGuard<'a>>),
    /// No: the breaker is open; answer by the policy with this error.
    Policy(StoreError),
}

/// Marks a probe in flight; a probe that is dropped unfinished (its check cancelled) frees the
/// way for the next one.
pub(crate) struct ProbeGuard<'a>(&'a Breaker);

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        self.0.probing.store(false, Ordering::Release);
    }
}

impl Health {
    /// Health with `breakers` breakers (at least one), checks being spread among them by the
    /// `part` the callers give.
    pub(crate) fn new(breakers: usize) -> Health {
        Health {
            epoch: Instant::now(),
            breakers: (0..breakers.max(1)).map(|_| Breaker::default()).collect(),
            open: AtomicUsize::new(0),
            policy_answers: AtomicU64::new(0),
            policy_answers_at_outage: AtomicU64::new(0),
            outage_since: AtomicU64::new(0),
        }
    }

    /// Where the next check of part `part` goes (`part` is called only during an outage).
    /// One relaxed load while every breaker is closed.
    pub(crate) fn route(&self, part: impl FnOnce() -> usize) -> Route<'_> {
        if self.open.load(Ordering::Relaxed) == 0 {
            return Route::Store(None);
        }
        let breaker = self.breaker(part());
        let since = breaker.down_since.load(Ordering::Relaxed);
        if since == 0 {
            return Route::Store(None);
        }
        let now = self.nanos();
        if now >= breaker.next_probe.load(Ordering::Relaxed)
            && breaker
                .probing
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return Route::Store(Some(ProbeGuard(breaker)));
        }
        Route::Policy(StoreError::CircuitOpen(Duration::from_nanos(
            now.saturating_sub(since),
        )))
    }

    /// A check of part `part` the store answered: closes its breaker, logging the end of the
    /// outage when it was the last one open.
    pub(crate) fn succeeded(&self, part: impl FnOnce() -> usize) {
        if self.open.load(Ordering::Relaxed) == 0 {
            return;
        }
        let breaker = self.breaker(part());
        if breaker.down_since.load(Ordering::Relaxed) == 0
            || breaker.down_since.swap(0, Ordering::AcqRel) == 0
        {
            return;
        }
        if self.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            let answered = self.policy_answers.load(Ordering::Relaxed)
                - self.policy_answers_at_outage.load(Ordering::Relaxed);
            let outage = Duration::from_nanos(
                self.nanos()
                    .saturating_sub(self.outage_since.load(Ordering::Relaxed)),
            );
            tracing::info!(
                ?outage,
                answered_by_policy = answered,
                "rate limit store answers again; checks go back to it"
            );
        }
    }

    /// A check of part `part` the store failed with an outage (not a one-key error): opens
    /// its breaker, logging the start of an outage when it is the first one open, and
    /// schedules the breaker's next probe.
    pub(crate) fn failed(&self, part: usize, error: &StoreError, policy: FailurePolicy) {
        let breaker = self.breaker(part);
        let now = self.nanos();
        let interval = u64::try_from(PROBE_INTERVAL.as_nanos()).unwrap_or(u64::MAX);
        breaker
            .next_probe
            .store(now.saturating_add(interval), Ordering::Relaxed);
        if breaker
            .down_since
            .compare_exchange(0, now.max(1), Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        if self.open.fetch_add(1, Ordering::AcqRel) == 0 {
            self.outage_since.store(now, Ordering::Relaxed);
            self.policy_answers_at_outage.store(
                self.policy_answers.load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
            tracing::warn!(
                %error,
                ?policy,
                probe_interval = ?PROBE_INTERVAL,
                "rate limit store unavailable; answering by the failure policy until it answers again"
            );
        }
    }

    /// Counts a check answered by the failure policy.
    pub(crate) fn answered_by_policy(&self) {
        self.policy_answers.fetch_add(1, Ordering::Relaxed);
    }

    /// Checks answered by the failure policy since the limiter was built.
    pub(crate) fn policy_answers(&self) -> u64 {
        self.policy_answers.load(Ordering::Relaxed)
    }

    /// `true` while any breaker is open.
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed) != 0
    }

    fn breaker(&self, part: usize) -> &Breaker {
        &self.breakers[part % self.breakers.len()]
    }

    fn nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage() -> StoreError {
        StoreError::Timeout(Duration::from_millis(250))
    }

    #[test]
    fn closed_until_an_outage_then_one_probe_at_a_time() {
        let health = Health::new(1);
        assert!(matches!(health.route(|| 0), Route::Store(None)));
        health.failed(0, &outage(), FailurePolicy::Local);
        assert!(health.is_open());
        // Within the probe interval: every check is answered by the policy.
        let Route::Policy(StoreError::CircuitOpen(_)) = health.route(|| 0) else {
            panic!("the breaker did not open");
        };
        // Once the interval has passed: one probe, and only one while it is in flight.
        health.breakers[0].next_probe.store(0, Ordering::Relaxed);
        let Route::Store(Some(probe)) = health.route(|| 0) else {
            panic!("no probe after the interval");
        };
        assert!(matches!(health.route(|| 0), Route::Policy(_)));
        drop(probe);
        let Route::Store(Some(_probe)) = health.route(|| 0) else {
            panic!("a dropped probe blocked the next");
        };
        health.succeeded(|| 0);
        assert!(!health.is_open());
        assert!(matches!(health.route(|| 0), Route::Store(None)));
    }

    #[test]
    fn one_failed_part_leaves_the_others_on_the_store() {
        let health = Health::new(16);
        health.failed(3, &outage(), FailurePolicy::Closed);
        health.failed(3, &outage(), FailurePolicy::Closed);
        assert!(matches!(health.route(|| 3), Route::Policy(_)));
        assert!(matches!(health.route(|| 4), Route::Store(None)));
        health.failed(4, &outage(), FailurePolicy::Closed);
        assert_eq!(health.open.load(Ordering::Relaxed), 2);
        health.succeeded(|| 3);
        health.succeeded(|| 3);
        assert!(health.is_open(), "part 4 is still failing");
        health.succeeded(|| 4);
        assert!(!health.is_open());
    }

    #[test]
    fn counts_policy_answers() {
        let health = Health::new(1);
        health.answered_by_policy();
        health.failed(0, &outage(), FailurePolicy::Closed);
        health.answered_by_policy();
        health.answered_by_policy();
        assert_eq!(health.policy_answers(), 3);
        assert_eq!(
            health.policy_answers() - health.policy_answers_at_outage.load(Ordering::Relaxed),
            2
        );
    }
}
