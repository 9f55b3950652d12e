//! The store's health as a limiter sees it: circuit breakers that open on an outage, so that
//! a Redis that is down or stalled costs a timeout only to the calls sent before the first of
//! them failed (its probes run in the background, one at a time), and a log of each outage once when it starts and once when
//! it ends.
//!
//! One breaker for a Redis server; for a Redis Cluster, one per hash slot, so that a failed
//! master opens the breakers of its own slots only: the first to fail, and then (once the
//! cluster's slot map says which) the master's others, which follow it as their leader.
//!
//! # A breaker's states
//!
//! | state | stored as | a check of its part |
//! | --- | --- | --- |
//! | closed | `down_since` before the outage (or no outage), whatever `next_probe` holds | goes to the store |
//! | open | `down_since` in the outage, `next_probe` later than now | is answered by the policy |
//! | probing | open, and `next_probe == PROBING` | is answered by the policy (one probe is in flight, in the background) |
//! | following | `down_since` in the outage, `leader` another part | as the leader's breaker (closed while it is; its probes stand for both) |
//!
//! | from | event | to |
//! | --- | --- | --- |
//! | closed | a check fails with an outage ([`Health::failed`]); the first starts the outage (warn) | open, next probe a [`PROBE_INTERVAL`] later |
//! | open | a check comes once the next probe is due ([`Health::route`]) | probing: that check's caller starts the probe in the background, and is answered by the policy |
//! | probing | the probe is answered ([`Health::succeeded`]) | closed; the outage ends (info) if no part failed for [`QUIET`] (at once with one breaker) |
//! | probing | the probe fails ([`Health::failed`]) | probing: its task probes again a [`PROBE_INTERVAL`] later, until answered, the breaker closed otherwise, or the limiter dropped |
//! | probing | the probe is dropped unanswered, or its task ends with the breaker closed ([`Health::end_probe`]) | open (or closed), next probe a [`PROBE_INTERVAL`] later |
//! | open, probing | a check sent before it opened is answered by the store ([`Health::succeeded`]) | closed (a probe in flight ends by itself) |
//! | closed | its failed master's slot ranges arrive ([`Health::open_ranges`]) | following the failed slot |
//! | following | its leader closes | as closed, until the leader fails again in the same outage: then open with it |
//! | following | a check of its own fails | open, on its own |
//! | any | the outage ends | closed (opened before the next outage: stale) |

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::StoreError;
use crate::policy::FailurePolicy;

/// While a breaker is open, the least time between two probes of the store. Short enough that
/// checks go back to Redis well within a second of it accepting connections again.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// With several breakers (a cluster), an outage ends at the first answer from the store after
/// this long without a failure.
const QUIET: Duration = Duration::from_millis(250);

/// While a breaker is open, the least time between two of its answers that yield to the
/// runtime first (see [`Health::yield_due`]).
const YIELD_INTERVAL: Duration = Duration::from_millis(10);

/// `next_probe` while a probe is in flight.
const PROBING: u64 = u64::MAX;

/// `leader` of a breaker that probes for itself.
const NO_LEADER: u32 = u32::MAX;

/// The breakers of a limiter and what they share: the outage and the policy-answer count.
pub(crate) struct Health {
    /// The origin of the times below (nanoseconds since it; 0 means "never").
    epoch: Instant,
    breakers: Box<[Breaker]>,
    /// When the current outage began (0: none). A breaker opened before it is stale: closed.
    outage_since: AtomicU64,
    /// The latest failure.
    last_failure: AtomicU64,
    /// Checks answered by the failure policy since the limiter was built, and when the current
    /// outage began.
    policy_answers: AtomicU64,
    policy_answers_at_outage: AtomicU64,
    /// When an open breaker's answer last yielded to the runtime first.
    last_yield: AtomicU64,
}

/// Closed (checks go to the store) until a check fails with an outage; then open: checks are
/// answered by the failure policy at once, except one probe at a time, at most every
/// [`PROBE_INTERVAL`], whose answer closes it again.
struct Breaker {
    /// 0 while closed; else when it opened (at least 1).
    down_since: AtomicU64,
    /// When the next probe may start; [`PROBING`] while one is in flight.
    next_probe: AtomicU64,
    /// The part whose probes stand for this one ([`NO_LEADER`]: its own): in a cluster, the
    /// failed slot whose master's other slots were opened with it ([`Health::open_ranges`]).
    /// It is open while its leader is, and closes with it.
    leader: AtomicU32,
}

impl Breaker {
    /// Lets the next probe start at `at`: when `probe`, the caller's probe ends; otherwise a
    /// probe in flight is left to end by itself.
    fn schedule_probe(&self, at: u64, probe: bool) {
        if probe {
            self.next_probe.store(at, Ordering::Release);
        } else {
            let _ = self
                .next_probe
                .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |current| {
                    (current != PROBING).then_some(at)
                });
        }
    }
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker {
            down_since: AtomicU64::new(0),
            next_probe: AtomicU64::new(0),
            leader: AtomicU32::new(NO_LEADER),
        }
    }
}

/// Whether a check goes to the store.
pub(crate) enum Route {
    /// Yes.
    Store,
    /// No: the breaker is open; answer by the policy with `error`. `probe`: the check found
    /// the next probe of that part's breaker (its own, or its leader's) due and claimed it;
    /// its caller starts the probes in the background, ended by an answer
    /// ([`Health::succeeded`]) or by [`Health::end_probe`] (a failure keeps them going).
    Policy {
        error: StoreError,
        probe: Option<usize>,
    },
}

impl Health {
    /// Health with `breakers` breakers (at least one), checks being spread among them by the
    /// `part` the callers give.
    pub(crate) fn new(breakers: usize) -> Health {
        Health {
            epoch: Instant::now(),
            breakers: (0..breakers.max(1)).map(|_| Breaker::default()).collect(),
            outage_since: AtomicU64::new(0),
            last_failure: AtomicU64::new(0),
            policy_answers: AtomicU64::new(0),
            policy_answers_at_outage: AtomicU64::new(0),
            last_yield: AtomicU64::new(0),
        }
    }

    /// Where the next check of part `part` goes (`part` is called only during an outage).
    /// One relaxed load outside outages.
    pub(crate) fn route(&self, part: impl FnOnce() -> usize) -> Route {
        let outage = self.outage_since.load(Ordering::Relaxed);
        if outage == 0 {
            return Route::Store;
        }
        let part = part();
        let breaker = self.breaker(part);
        // Acquire, to pair with `open_ranges`' release: a check that finds one slot of a
        // failed master's range open also finds the slots opened before it (lower in the
        // range) open. Free on x86; reached only during an outage.
        let since = breaker.down_since.load(Ordering::Acquire);
        if since < outage {
            // Closed, or opened in an earlier outage.
            return Route::Store;
        }
        let now = self.nanos();
        let leader = breaker.leader.load(Ordering::Relaxed);
        let (part, breaker) = if leader != NO_LEADER && leader as usize != part {
            // Open with its master: the leader's probes stand for it, and it may make one.
            let leading = self.breaker(leader as usize);
            if leading.down_since.load(Ordering::Relaxed) < outage {
                return Route::Store;
            }
            (leader as usize, leading)
        } else {
            (part, breaker)
        };
        let next = breaker.next_probe.load(Ordering::Relaxed);
        let probe = (next <= now
            && breaker
                .next_probe
                .compare_exchange(next, PROBING, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok())
        .then_some(part);
        Route::Policy {
            error: StoreError::CircuitOpen(Duration::from_nanos(now.saturating_sub(since))),
            probe,
        }
    }

    /// Ends a probe of part `part` that got no answer (dropped unfinished, or never started):
    /// the next one may start a probe interval from now.
    pub(crate) fn end_probe(&self, part: usize) {
        let breaker = self.breaker(part);
        let next = self.nanos().saturating_add(interval_nanos());
        let _ =
            breaker
                .next_probe
                .compare_exchange(PROBING, next, Ordering::AcqRel, Ordering::Relaxed);
    }

    /// A call to part `part` the store answered (`probe`: the call was its probe): closes
    /// its breaker, and ends the outage when no other part failed lately (at once with a
    /// single breaker). A probe still in flight is left to end by itself.
    pub(crate) fn succeeded(&self, part: impl FnOnce() -> usize, probe: bool) {
        let outage = self.outage_since.load(Ordering::Relaxed);
        if outage == 0 {
            // A probe answered after an older check's answer ended the outage: it is over
            // (left claimed, the next outage would never probe, its breaker open for good).
            if probe {
                self.breaker(part()).schedule_probe(0, true);
            }
            return;
        }
        let breaker = self.breaker(part());
        breaker.down_since.store(0, Ordering::Relaxed);
        breaker.schedule_probe(0, probe);
        let now = self.nanos();
        let quiet = self.breakers.len() == 1
            || now.saturating_sub(self.last_failure.load(Ordering::Relaxed))
                >= u64::try_from(QUIET.as_nanos()).unwrap_or(u64::MAX);
        if quiet
            && self
                .outage_since
                .compare_exchange(outage, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            let answered = self.policy_answers.load(Ordering::Relaxed)
                - self.policy_answers_at_outage.load(Ordering::Relaxed);
            let outage = Duration::from_nanos(now.saturating_sub(outage));
            tracing::info!(
                ?outage,
                answered_by_policy = answered,
                "rate limit store answers again; checks go back to it"
            );
        }
    }

    /// A call to part `part` the store failed with an outage (not a one-key error): opens
    /// its breaker until a probe interval from now (a probe in flight, a failed one included,
    /// keeps its claim: its task probes again), logging the start of an outage when none is
    /// under way. `true` when this failure opened the breaker (it was closed).
    pub(crate) fn failed(&self, part: usize, error: &StoreError, policy: FailurePolicy) -> bool {
        let breaker = self.breaker(part);
        let now = self.nanos().max(1);
        self.last_failure.store(now, Ordering::Relaxed);
        if self
            .outage_since
            .compare_exchange(0, now, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
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
        let was_open = self.effectively_open(part, self.outage_since.load(Ordering::Relaxed));
        // Marked as opened now: never before the outage (which would read as closed), even
        // when failures race.
        breaker.down_since.fetch_max(now, Ordering::AcqRel);
        // A failure of its own: it probes for itself from now on.
        breaker.leader.store(NO_LEADER, Ordering::Relaxed);
        breaker.schedule_probe(now.saturating_add(interval_nanos()), false);
        !was_open
    }

    /// Whether `part`'s breaker is open in the outage that began at `outage`: opened in it,
    /// and not following a leader that has closed since.
    fn effectively_open(&self, part: usize, outage: u64) -> bool {
        let breaker = self.breaker(part);
        if outage == 0 || breaker.down_since.load(Ordering::Relaxed) < outage {
            return false;
        }
        let leader = breaker.leader.load(Ordering::Relaxed);
        leader == NO_LEADER
            || leader as usize == part
            || self
                .breaker(leader as usize)
                .down_since
                .load(Ordering::Relaxed)
                >= outage
    }

    /// Opens, during the current outage, the breakers of the parts in `ranges` (a cluster
    /// master's slots, when one of them, `leader`, failed) that are not open yet, so that the
    /// master's other slots do not each wait a timeout to find out: they stay open while
    /// `leader` is, and close with it, without probes of their own. They open one by one, in
    /// the order of `ranges`, each with a release that [`Health::route`] acquires: a check that
    /// finds a part open finds every part before it open too.
    pub(crate) fn open_ranges(&self, ranges: &[(u16, u16)], leader: usize) {
        let outage = self.outage_since.load(Ordering::Relaxed);
        // A late answer: the leader has closed since (or the outage ended), so its master is
        // back.
        if !self.effectively_open(leader, outage) {
            return;
        }
        let Ok(leader_id) = u32::try_from(leader) else {
            return;
        };
        let now = self.nanos().max(1);
        let next = now.saturating_add(interval_nanos());
        for &(first, last) in ranges {
            for part in usize::from(first)..=usize::from(last) {
                let Some(breaker) = self.breakers.get(part) else {
                    break;
                };
                if part != leader && !self.effectively_open(part, outage) {
                    breaker.leader.store(leader_id, Ordering::Relaxed);
                    breaker.down_since.fetch_max(now, Ordering::AcqRel);
                    breaker.schedule_probe(next, false);
                }
            }
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

    /// Whether an open breaker's answer should yield to the runtime before it is returned: at
    /// most once every [`YIELD_INTERVAL`] for all breakers, so that the probes, which run in
    /// the background, still run under a caller that awaits nothing but checks (a loop on
    /// one thread: an open breaker's answer is ready at once), at the cost of one yield per
    /// interval to such a caller.
    pub(crate) fn yield_due(&self) -> bool {
        let now = self.nanos();
        let last = self.last_yield.load(Ordering::Relaxed);
        now.saturating_sub(last) >= u64::try_from(YIELD_INTERVAL.as_nanos()).unwrap_or(u64::MAX)
            && self
                .last_yield
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Whether part `part`'s breaker is open in the current outage.
    pub(crate) fn is_open(&self, part: usize) -> bool {
        self.effectively_open(part, self.outage_since.load(Ordering::Relaxed))
    }

    /// `true` during an outage: from a failure until the store answers again.
    pub(crate) fn in_outage(&self) -> bool {
        self.outage_since.load(Ordering::Relaxed) != 0
    }

    fn breaker(&self, part: usize) -> &Breaker {
        &self.breakers[part % self.breakers.len()]
    }

    fn nanos(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX - 1)
    }
}

fn interval_nanos() -> u64 {
    u64::try_from(PROBE_INTERVAL.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outage() -> StoreError {
        StoreError::Timeout(Duration::from_millis(250))
    }

    /// Lets the next probe of `part` start now.
    fn probe_due(health: &Health, part: usize) {
        health.breakers[part].next_probe.store(0, Ordering::Relaxed);
    }

    #[test]
    fn closed_until_an_outage_then_one_probe_at_a_time() {
        let health = Health::new(1);
        assert!(matches!(health.route(|| 0), Route::Store));
        health.failed(0, &outage(), FailurePolicy::Local);
        assert!(health.in_outage());
        // Within the probe interval: every check is answered by the policy.
        let Route::Policy {
            error: StoreError::CircuitOpen(_),
            probe: None,
        } = health.route(|| 0)
        else {
            panic!("the breaker did not open");
        };
        // Once the interval has passed: one probe, and only one while it is in flight.
        probe_due(&health, 0);
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: Some(_), .. }
        ));
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: None, .. }
        ));
        // A probe dropped unanswered: the next waits a probe interval.
        health.end_probe(0);
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: None, .. }
        ));
        probe_due(&health, 0);
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: Some(_), .. }
        ));
        health.succeeded(|| 0, true);
        assert!(!health.in_outage());
        assert!(matches!(health.route(|| 0), Route::Store));
    }

    /// A probe whose answer comes after an older check's success ended the outage still
    /// frees the probe: left claimed, no probe of the next outage would ever start, and the
    /// breaker would stay open for good (the fault checker's Sentinel runs: a limiter answered
    /// by its policy for the rest of a 600 s run while its Redis answered others).
    #[test]
    fn a_probe_answered_after_the_outage_ended_frees_the_next_outages_probes() {
        let health = Health::new(1);
        health.failed(0, &outage(), FailurePolicy::Local);
        probe_due(&health, 0);
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: Some(_), .. }
        ));
        // A check sent before the outage is answered: the outage ends.
        health.succeeded(|| 0, false);
        assert!(!health.in_outage());
        // Then the probe's answer.
        health.succeeded(|| 0, true);
        // A new outage: its first probe is scheduled a probe interval on, not left claimed.
        health.failed(0, &outage(), FailurePolicy::Local);
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: None, .. }
        ));
        assert_ne!(
            health.breakers[0].next_probe.load(Ordering::Relaxed),
            PROBING,
            "no probe: the breaker stays open for good"
        );
    }

    #[test]
    fn a_failed_probe_waits_a_probe_interval() {
        let health = Health::new(1);
        health.failed(0, &outage(), FailurePolicy::Local);
        probe_due(&health, 0);
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: Some(_), .. }
        ));
        // An older check failing meanwhile leaves the probe in flight alone.
        health.failed(0, &outage(), FailurePolicy::Local);
        assert_eq!(
            health.breakers[0].next_probe.load(Ordering::Relaxed),
            PROBING
        );
        // The probe fails: its claim stays, for its task's next probe.
        health.failed(0, &outage(), FailurePolicy::Local);
        assert!(matches!(
            health.route(|| 0),
            Route::Policy { probe: None, .. }
        ));
        assert!(health.in_outage());
    }

    #[test]
    fn one_failed_part_leaves_the_others_on_the_store() {
        let mut health = Health::new(16_384);
        // Times far from the epoch, so that "quiet since 0" can be set below.
        health.epoch -= Duration::from_secs(10);
        health.failed(3, &outage(), FailurePolicy::Closed);
        health.failed(3, &outage(), FailurePolicy::Closed);
        assert!(matches!(
            health.route(|| 3),
            Route::Policy { probe: None, .. }
        ));
        assert!(matches!(health.route(|| 4), Route::Store));
        // Part 4 answering does not end the outage while part 3 failed lately.
        health.succeeded(|| 4, false);
        assert!(health.in_outage());
        assert!(matches!(
            health.route(|| 3),
            Route::Policy { probe: None, .. }
        ));
        // Once quiet, an answer ends it; part 3's breaker is then stale, and closed.
        health.last_failure.store(0, Ordering::Relaxed);
        health.succeeded(|| 4, false);
        assert!(!health.in_outage());
        health.failed(5, &outage(), FailurePolicy::Closed);
        assert!(matches!(health.route(|| 3), Route::Store));
        assert!(matches!(
            health.route(|| 5),
            Route::Policy { probe: None, .. }
        ));
    }

    #[test]
    fn a_failed_masters_ranges_open_together() {
        let health = Health::new(16_384);
        health.open_ranges(&[(0, 10)], 3);
        assert!(matches!(health.route(|| 5), Route::Store), "no outage yet");
        health.failed(3, &outage(), FailurePolicy::Closed);
        health.open_ranges(&[(0, 10), (100, 101)], 3);
        for part in [0, 5, 10, 100, 101] {
            assert!(
                matches!(health.route(|| part), Route::Policy { probe: None, .. }),
                "{part}"
            );
        }
        assert!(matches!(health.route(|| 11), Route::Store));
        assert!(matches!(health.route(|| 102), Route::Store));
        // One probe for them all, on the leader's breaker, whichever slot's check makes it.
        for part in [3, 5, 100] {
            probe_due(&health, part);
        }
        assert!(matches!(
            health.route(|| 5),
            Route::Policy { probe: Some(3), .. }
        ));
        assert!(matches!(
            health.route(|| 100),
            Route::Policy { probe: None, .. }
        ));
        assert!(matches!(
            health.route(|| 3),
            Route::Policy { probe: None, .. }
        ));
        // The leader's answer closes them all.
        health.succeeded(|| 3, true);
        for part in [0, 5, 10, 100, 101] {
            assert!(matches!(health.route(|| part), Route::Store), "{part}");
        }
    }

    #[test]
    fn a_late_lookup_does_not_reopen_a_recovered_master() {
        let mut health = Health::new(16_384);
        health.epoch -= Duration::from_secs(10);
        health.failed(3, &outage(), FailurePolicy::Closed);
        health.failed(200, &outage(), FailurePolicy::Closed); // another master
        health.succeeded(|| 3, false);
        health.open_ranges(&[(0, 10)], 3);
        assert!(matches!(health.route(|| 5), Route::Store));
    }

    #[test]
    fn a_master_that_fails_again_opens_its_slots_again() {
        let mut health = Health::new(16_384);
        health.epoch -= Duration::from_secs(10);
        health.failed(3, &outage(), FailurePolicy::Closed);
        health.failed(200, &outage(), FailurePolicy::Closed); // keeps the outage going
        health.open_ranges(&[(0, 10)], 3);
        health.succeeded(|| 3, true);
        // Slot 5 followed 3, which closed: a failure of 5 is a new opening (a new lookup).
        assert!(health.failed(5, &outage(), FailurePolicy::Closed));
        assert!(!health.failed(5, &outage(), FailurePolicy::Closed));
        health.open_ranges(&[(0, 10)], 5);
        assert!(matches!(
            health.route(|| 7),
            Route::Policy { probe: None, .. }
        ));
    }

    #[test]
    fn an_open_breakers_answers_yield_once_per_interval() {
        let mut health = Health::new(1);
        health.epoch -= Duration::from_secs(10);
        assert!(health.yield_due());
        assert!(!health.yield_due(), "twice within the interval");
        let now = health.nanos();
        let interval = u64::try_from(YIELD_INTERVAL.as_nanos()).unwrap();
        health.last_yield.store(now - interval, Ordering::Relaxed);
        assert!(health.yield_due());
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
