//! [`DenyCache`]: the full-window denials a remote store gave, kept in process, so that a
//! flood of calls on a key that is denied anyway (a scraper, a credential-stuffing run) costs
//! no Redis round trip each: the limiter does not amplify the attack. The idea is Upstash's
//! `ephemeralCache` and rate-limiter-flexible's `inMemoryBlockOnConsumed`; what makes it exact
//! here is the window's own rule.
//!
//! # Why a cached denial is exact
//!
//! A denial of a call of cost 1 with nothing remaining says that the key's window is full (a
//! sliding window log: at least `threshold` admissions in it; a counter: an estimate with no
//! room for one more) and when its first unit frees (`retry_after`). Denied calls record
//! nothing, so until then no check anywhere can be admitted: the window stays full, and every
//! check of cost 1 would be denied with the same retry-after and reset-after, counted down.
//! What frees a unit sooner: a reset, a refund, a higher threshold (a tier change), and a
//! check at a later explicit time (`check_at`, whose eviction of its own window, or roll of
//! the counter's windows, frees what the present still counted). Those made through this
//! limiter invalidate what it knows: a reset, a refund or a check at an explicit time drops
//! the key's entries, and a check under another threshold drops the entry it finds. (Two log
//! rates of different periods on one key free units too, by the shorter one's eviction: a
//! misuse the guide's `several_limits` page, "Tiers", warns of, not covered here.)
//! Those made by other processes are seen when the entry's time to live
//! ([`LimiterBuilder::deny_cache_ttl`](crate::LimiterBuilder::deny_cache_ttl)) ends it: that
//! is the documented staleness.
//!
//! # Times
//!
//! Time that goes backwards (a manual clock set back, checks at explicit times out of order, a
//! server clock stepped back) is the one case where the cache changes what the store holds: a
//! store evicts its window's past at every check it runs, denied ones included, and a denial
//! the cache answered never reached it. At an earlier time the log may then still hold
//! admissions that the store, asked every time, would have evicted at the later one. The
//! cached limiter then answers stricter, never more lenient.
//!
//! An entry's times are counted from the instant its check was sent, read before the call on
//! the limiter's clock: its [`ManualClock`](crate::testing::ManualClock) when it has one, else
//! a monotonic clock (a step of the system clock moves no entry). The store's answer was
//! computed later than that instant, so an entry ends no later than the window's first unit
//! frees. Checks at an explicit time (`check_at`) and calls of another cost than 1 skip the
//! cache: their answers depend on more of the window than its first unit.
//!
//! # Refreshes
//!
//! When an entry's time to live ends before its first unit frees, the next check claims its
//! refresh and goes to the store; until that check's answer comes (at most the store's
//! timeout), the others are still answered from the entry, which is as exact as before. So a
//! flood sends one check per key per time to live, and a store that stays down (its answers
//! the failure policy's) releases each claim for the next check to try.
//!
//! # Bounds
//!
//! A fixed table of entries, allocated once: sets of [`WAYS`] entries, each set behind its
//! own lock, found by a 128-bit SipHash-1-3 of the key under a random key per limiter (a
//! client cannot choose keys that collide, and two keys share an identity with probability
//! 2^−128: the key itself is not kept, so the table holds no user identifier and allocates
//! nothing). When a set is full, its entry that ends soonest gives way: a denial that is not
//! kept is asked of the store next time, so a full cache costs round trips, never a wrong
//! answer. A lookup hashes the key once and locks one set; it allocates nothing.
//!
//! A set has a generation, bumped whenever a key of it is invalidated; a check that missed
//! carries the generation it saw, and its answer is kept only if none came since, so that a
//! denial sent before a reset and answered after it is not cached.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use siphasher::sip128::SipHasher13;

use crate::decision::Decision;
use crate::key::random_hash_key;
use crate::rate::Rate;

/// The entries of one set.
const WAYS: usize = 4;

/// A limiter's deny cache (see the module docs).
pub(crate) struct DenyCache {
    sets: Box<[Mutex<Set>]>,
    hasher: SipHasher13,
    /// The longest an entry answers before it is refreshed, in µs.
    ttl_us: u64,
    /// How long a claimed refresh stands without an answer, in µs: the store's timeout.
    refresh_us: u64,
    /// The origin of the monotonic clock, for limiters without a manual clock.
    origin: Instant,
}

/// One set of entries, behind its lock.
#[derive(Default)]
struct Set {
    slots: [Slot; WAYS],
    /// Bumped by every invalidation of a key of this set.
    generation: u64,
    /// The checks this set's entries answered.
    hits: u64,
}

/// One cached denial. All times are µs on the cache's clock ([`DenyCache::now`]).
#[derive(Clone, Copy, Default)]
struct Slot {
    /// The key's fingerprint (two words rather than a `u128`, whose 16-byte alignment would
    /// pad every slot).
    key: [u64; 2],
    /// The rate it was denied under; `None`: the slot is empty.
    rate: Option<Rate>,
    /// When the check that was denied was sent.
    anchor: u64,
    /// When the window's first unit frees: the denial's retry-after from `anchor`.
    frees_at: u64,
    /// When the window empties: the denial's reset-after from `anchor`.
    resets_at: u64,
    /// When the entry stops answering: `frees_at`, or `anchor` + the time to live if sooner.
    until: u64,
    /// While a check refreshes the entry, until when its claim stands (0: no claim).
    refresh_by: u64,
}

impl Slot {
    /// Whether this slot holds `key` under `rate`'s period and algorithm (the threshold is the
    /// tier, which may change).
    fn holds(&self, key: [u64; 2], rate: Rate) -> bool {
        self.key == key
            && self.rate.is_some_and(|held| {
                held.period_us() == rate.period_us() && held.algorithm() == rate.algorithm()
            })
    }
}

/// What the cache says of a check.
pub(crate) enum Lookup {
    /// Denied: the cached decision, counted down to now.
    Denied(Decision),
    /// Not known: the check goes to the store, and its answer to
    /// [`settle`](DenyCache::settle) with this ticket.
    Miss(Ticket),
}

/// A check that missed the cache, for its answer to be kept: the key's fingerprint, the
/// generation of its set when it looked, and when it was sent (µs on the cache's clock); or
/// a check at an explicit time, whose answer drops the key's entries instead (`forget`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ticket {
    key: [u64; 2],
    generation: u64,
    anchor: u64,
    forget: bool,
}

impl DenyCache {
    /// A cache of at least `capacity` entries (rounded up to a power of two, at least one
    /// set), whose entries answer for at most `ttl` before they are refreshed, and whose
    /// refresh claims stand for `timeout` (the store's).
    pub(crate) fn new(capacity: usize, ttl: Duration, timeout: Duration) -> DenyCache {
        let sets = capacity.div_ceil(WAYS).max(1).next_power_of_two();
        DenyCache {
            sets: (0..sets).map(|_| Mutex::default()).collect(),
            hasher: SipHasher13::new_with_key(&random_hash_key()),
            ttl_us: micros(ttl),
            refresh_us: micros(timeout),
            origin: Instant::now(),
        }
    }

    /// How long an entry answers before it is refreshed.
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_micros(self.ttl_us)
    }

    /// The cache's clock when the limiter has no manual one: µs since the cache was made, on
    /// the monotonic clock.
    pub(crate) fn now(&self) -> u64 {
        micros(self.origin.elapsed())
    }

    /// Whether a check of `key` against `rate` at `now` (µs on the cache's clock) is denied by
    /// a cached denial; else the ticket its answer is kept with. A denial counts among the
    /// cache's answers when `count` (a check of several limits counts the one it answers
    /// with, by [`count`](DenyCache::count)).
    pub(crate) fn lookup(&self, key: &str, rate: Rate, now: u64, count: bool) -> Lookup {
        let fingerprint = self.fingerprint(key);
        let mut set = self.set(fingerprint);
        let miss = Lookup::Miss(Ticket {
            key: fingerprint,
            generation: set.generation,
            anchor: now,
            forget: false,
        });
        let Some(slot) = set
            .slots
            .iter_mut()
            .find(|slot| slot.holds(fingerprint, rate))
        else {
            return miss;
        };
        let tier_changed = slot.rate.is_some_and(|held| held != rate);
        if tier_changed || now >= slot.frees_at {
            *slot = Slot::default();
            return miss;
        }
        if now >= slot.until && now >= slot.refresh_by {
            // Its time to live is over: this check refreshes it; the others are still
            // answered from it until its answer comes.
            slot.refresh_by = now
                .saturating_add(self.refresh_us)
                .max(now.saturating_add(1));
            return miss;
        }
        let decision = Decision::denied(
            rate.threshold(),
            Duration::from_micros(slot.frees_at - now),
            Duration::from_micros(slot.resets_at.saturating_sub(now)),
        );
        if count {
            set.hits += 1;
        }
        Lookup::Denied(decision)
    }

    /// Counts one check answered by a denial of `key` (see [`lookup`](DenyCache::lookup)).
    pub(crate) fn count(&self, key: &str) {
        self.set(self.fingerprint(key)).hits += 1;
    }

    /// The ticket of a check of `key` at an explicit time: its answer drops the key's entries
    /// (see the module docs).
    pub(crate) fn explicit(&self, key: &str) -> Ticket {
        Ticket {
            key: self.fingerprint(key),
            generation: 0,
            anchor: 0,
            forget: true,
        }
    }

    /// Keeps what the store answered to the check of `ticket` against `rate`: `Some` the
    /// store's decision (a full-window denial is cached; an admission drops the entry it
    /// makes stale), `None` when the store did not answer (the failure policy did): a refresh
    /// it claimed is released.
    pub(crate) fn settle(&self, ticket: Ticket, rate: Rate, answer: Option<&Decision>) {
        let mut set = self.set(ticket.key);
        if ticket.forget {
            // Whatever it answered: a check that failed may have run.
            forget_in(&mut set, ticket.key);
            return;
        }
        let found = set
            .slots
            .iter()
            .position(|slot| slot.holds(ticket.key, rate));
        let Some(decision) = answer.filter(|decision| !decision.answered_by_policy()) else {
            if let Some(index) = found {
                set.slots[index].refresh_by = 0;
            }
            return;
        };
        if decision.allowed {
            // The window had room when this check ran, which was after the entry's check
            // only if it was sent later (a reset or refund elsewhere, seen by a refresh):
            // one sent before, or in the same microsecond, says nothing of the entry.
            if let Some(index) = found
                && set.slots[index].anchor < ticket.anchor
            {
                set.slots[index] = Slot::default();
            }
            return;
        }
        let Some(retry_after) = decision.retry_after else {
            return;
        };
        let frees_at = ticket.anchor.saturating_add(micros(retry_after));
        if decision.remaining != 0 || frees_at <= ticket.anchor {
            return;
        }
        if set.generation != ticket.generation {
            // A reset or refund of a key of this set came after the check was sent: its
            // answer is not kept, and a refresh it claimed is released.
            if let Some(index) = found {
                set.slots[index].refresh_by = 0;
            }
            return;
        }
        let index = match found {
            Some(index) if set.slots[index].anchor > ticket.anchor => return,
            Some(index) => index,
            None => (0..WAYS)
                .min_by_key(|&index| set.slots[index].until)
                .unwrap_or(0),
        };
        set.slots[index] = Slot {
            key: ticket.key,
            rate: Some(rate),
            anchor: ticket.anchor,
            frees_at,
            resets_at: ticket
                .anchor
                .saturating_add(micros(decision.reset_after))
                .max(frees_at),
            until: frees_at.min(ticket.anchor.saturating_add(self.ttl_us)),
            refresh_by: 0,
        };
    }

    /// Drops every entry of `key` (whatever its rate): it was reset, or a refund freed units
    /// of its window.
    pub(crate) fn forget(&self, key: &str) {
        let fingerprint = self.fingerprint(key);
        forget_in(&mut self.set(fingerprint), fingerprint);
    }

    /// Drops every entry: keys were reset by a pattern, which names no key the cache can find.
    pub(crate) fn clear(&self) {
        for set in &self.sets {
            let mut set = lock(set);
            set.generation += 1;
            set.slots = Default::default();
        }
    }

    /// How many checks the cache answered. Reads every set (under its lock): for tests and
    /// metrics scrapes, not for each check.
    pub(crate) fn hits(&self) -> u64 {
        self.sets.iter().map(|set| lock(set).hits).sum()
    }

    /// How many entries the cache holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.sets.len() * WAYS
    }

    fn fingerprint(&self, key: &str) -> [u64; 2] {
        let (high, low) = self.hasher.hash(key.as_bytes()).as_u64();
        [high, low]
    }

    fn set(&self, fingerprint: [u64; 2]) -> MutexGuard<'_, Set> {
        // The set count is a power of two; the low bits of a SipHash are as good as any.
        lock(&self.sets[fingerprint[1] as usize & (self.sets.len() - 1)])
    }
}

/// Drops `set`'s entries of the key whose fingerprint is `key`, and bumps its generation.
fn forget_in(set: &mut Set, key: [u64; 2]) {
    set.generation += 1;
    for slot in &mut set.slots {
        if slot.key == key {
            *slot = Slot::default();
        }
    }
}

/// A set's lock; a panic while it was held (none can: the code under it does not panic)
/// left it consistent.
fn lock(set: &Mutex<Set>) -> MutexGuard<'_, Set> {
    set.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `duration` in whole µs, saturating.
fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000;

    fn cache() -> DenyCache {
        DenyCache::new(8, Duration::from_secs(1), Duration::from_millis(250))
    }

    fn rate() -> Rate {
        Rate::new_const(100, Duration::from_secs(60))
    }

    fn miss(lookup: Lookup) -> Ticket {
        match lookup {
            Lookup::Miss(ticket) => ticket,
            Lookup::Denied(decision) => panic!("expected a miss, got {decision:?}"),
        }
    }

    fn denied(lookup: Lookup) -> Decision {
        match lookup {
            Lookup::Denied(decision) => decision,
            Lookup::Miss(ticket) => panic!("expected a denial, got a miss {ticket:?}"),
        }
    }

    /// The store's full-window denial: retry after `retry` s, reset after `reset` s.
    fn full(retry: u64, reset: u64) -> Decision {
        Decision::denied(100, Duration::from_secs(retry), Duration::from_secs(reset))
    }

    #[test]
    fn a_denial_answers_counted_down_until_its_time_to_live() {
        let cache = cache();
        let ticket = miss(cache.lookup("k", rate(), 10 * SECOND, true));
        cache.settle(ticket, rate(), Some(&full(30, 50)));
        let later = denied(cache.lookup("k", rate(), 10 * SECOND + 400_000, true));
        assert_eq!(later.retry_after, Some(Duration::from_micros(29_600_000)));
        assert_eq!(later.reset_after, Duration::from_micros(49_600_000));
        assert_eq!(
            (later.remaining, later.limit, later.allowed),
            (0, 100, false)
        );
        // Its time to live (1 s) is over: one check refreshes, the others still hear it.
        let refresh = miss(cache.lookup("k", rate(), 11 * SECOND, true));
        denied(cache.lookup("k", rate(), 11 * SECOND + 1, true));
        cache.settle(refresh, rate(), Some(&full(29, 49)));
        let fresh = denied(cache.lookup("k", rate(), 11 * SECOND + 2, true));
        assert_eq!(fresh.retry_after, Some(Duration::from_micros(28_999_998)));
        assert_eq!(cache.hits(), 3);
    }

    #[test]
    fn an_entry_ends_when_its_first_unit_frees() {
        let cache = cache();
        let ticket = miss(cache.lookup("k", rate(), 0, true));
        cache.settle(
            ticket,
            rate(),
            Some(&Decision::denied(
                100,
                Duration::from_millis(300),
                Duration::from_secs(5),
            )),
        );
        denied(cache.lookup("k", rate(), 299_999, true));
        miss(cache.lookup("k", rate(), 300_000, true));
        miss(cache.lookup("k", rate(), 300_001, true));
    }

    #[test]
    fn only_full_windows_of_the_store_are_kept() {
        let cache = cache();
        let mut room = full(3, 3);
        room.remaining = 2; // a denial of a larger cost, with room for smaller calls
        for answer in [
            Some(room),
            Some(full(3, 3).by_policy()),
            Some(Decision::admitted(100, 0, Duration::from_secs(3))),
            None,
        ] {
            let ticket = miss(cache.lookup("k", rate(), 0, true));
            cache.settle(ticket, rate(), answer.as_ref());
            miss(cache.lookup("k", rate(), 1, true));
        }
    }

    #[test]
    fn a_reset_drops_every_rate_of_the_key_and_an_earlier_answer() {
        let cache = cache();
        let hourly = Rate::new_const(5, Duration::from_secs(3600));
        for rate in [rate(), hourly] {
            let ticket = miss(cache.lookup("k", rate, 0, true));
            cache.settle(ticket, rate, Some(&full(30, 30)));
        }
        let in_flight =
            miss(cache.lookup("k", Rate::new_const(1, Duration::from_secs(1)), 0, true));
        cache.forget("k");
        miss(cache.lookup("k", rate(), 1, true));
        miss(cache.lookup("k", hourly, 1, true));
        // Sent before the reset, answered after it: not kept.
        cache.settle(
            in_flight,
            Rate::new_const(1, Duration::from_secs(1)),
            Some(&full(1, 1)),
        );
        miss(cache.lookup("k", Rate::new_const(1, Duration::from_secs(1)), 2, true));
        let ticket = miss(cache.lookup("other", rate(), 0, true));
        cache.clear();
        cache.settle(ticket, rate(), Some(&full(30, 30)));
        miss(cache.lookup("other", rate(), 1, true));
    }

    #[test]
    fn a_tier_change_drops_the_entry() {
        let cache = cache();
        let ticket = miss(cache.lookup("k", rate(), 0, true));
        cache.settle(ticket, rate(), Some(&full(30, 30)));
        miss(cache.lookup(
            "k",
            Rate::new_const(1_000, Duration::from_secs(60)),
            1,
            true,
        ));
        miss(cache.lookup("k", rate(), 2, true));
        // Another algorithm is another state.
        let counter = rate().with_algorithm(crate::rate::Algorithm::SlidingWindowCounter);
        let ticket = miss(cache.lookup("k", rate(), 3, true));
        cache.settle(ticket, rate(), Some(&full(30, 30)));
        miss(cache.lookup("k", counter, 4, true));
        denied(cache.lookup("k", rate(), 5, true));
    }

    #[test]
    fn an_admission_drops_an_older_entry_only() {
        let cache = cache();
        let early = miss(cache.lookup("k", rate(), 0, true));
        let same = miss(cache.lookup("k", rate(), 10, true));
        let late = miss(cache.lookup("k", rate(), 10, true));
        cache.settle(late, rate(), Some(&full(30, 30)));
        for ticket in [early, same] {
            let admitted = Decision::admitted(100, 0, Duration::from_secs(30));
            cache.settle(ticket, rate(), Some(&admitted));
        }
        denied(cache.lookup("k", rate(), 11, true));
        let refresh = miss(cache.lookup("k", rate(), SECOND + 10, true));
        cache.settle(
            refresh,
            rate(),
            Some(&Decision::admitted(100, 0, Duration::from_secs(30))),
        );
        miss(cache.lookup("k", rate(), SECOND + 11, true));
    }

    #[test]
    fn a_failed_refresh_is_claimed_again() {
        let cache = cache();
        let ticket = miss(cache.lookup("k", rate(), 0, true));
        cache.settle(ticket, rate(), Some(&full(30, 30)));
        let refresh = miss(cache.lookup("k", rate(), SECOND, true));
        denied(cache.lookup("k", rate(), SECOND, true));
        cache.settle(refresh, rate(), None);
        miss(cache.lookup("k", rate(), SECOND, true));
        // Unanswered, a claim stands for the store's timeout.
        denied(cache.lookup("k", rate(), SECOND + 249_999, true));
        miss(cache.lookup("k", rate(), SECOND + 250_000, true));
    }

    #[test]
    fn a_check_at_an_explicit_time_drops_the_key() {
        let cache = cache();
        let ticket = miss(cache.lookup("k", rate(), 0, true));
        cache.settle(ticket, rate(), Some(&full(30, 30)));
        denied(cache.lookup("k", rate(), 1, true));
        // Its answer (or its failure) drops the entry: it may have evicted the window.
        cache.settle(cache.explicit("k"), rate(), None);
        miss(cache.lookup("k", rate(), 2, true));
    }

    #[test]
    fn a_refresh_refused_after_an_invalidation_releases_its_claim() {
        // One set: every key shares its generation.
        let cache = DenyCache::new(1, Duration::from_secs(1), Duration::from_millis(250));
        let ticket = miss(cache.lookup("k", rate(), 0, true));
        cache.settle(ticket, rate(), Some(&full(30, 30)));
        let refresh = miss(cache.lookup("k", rate(), SECOND, true));
        denied(cache.lookup("k", rate(), SECOND, true));
        cache.forget("another key");
        cache.settle(refresh, rate(), Some(&full(29, 29)));
        // Not kept, and the next check refreshes again at once.
        miss(cache.lookup("k", rate(), SECOND + 1, true));
        denied(cache.lookup("k", rate(), SECOND + 2, true));
    }

    #[test]
    fn uncounted_lookups_count_once_by_hand() {
        let cache = cache();
        let ticket = miss(cache.lookup("k", rate(), 0, true));
        cache.settle(ticket, rate(), Some(&full(30, 30)));
        denied(cache.lookup("k", rate(), 1, false));
        assert_eq!(cache.hits(), 0);
        cache.count("k");
        assert_eq!(cache.hits(), 1);
    }

    /// The memory the builder's docs state: at most 80 bytes an entry, lock included.
    #[test]
    fn an_entry_takes_under_80_bytes() {
        let per_entry = std::mem::size_of::<Mutex<Set>>() / WAYS;
        assert!(per_entry <= 80, "{per_entry} bytes");
    }

    #[test]
    fn a_full_set_gives_way_to_its_soonest_end() {
        let cache = DenyCache::new(1, Duration::from_secs(60), Duration::from_millis(250));
        assert_eq!(cache.capacity(), WAYS);
        for (i, retry) in [(0, 50), (1, 10), (2, 40), (3, 30), (4, 20)] {
            let key = format!("k{i}");
            let ticket = miss(cache.lookup(&key, rate(), 0, true));
            cache.settle(ticket, rate(), Some(&full(retry, retry)));
        }
        miss(cache.lookup("k1", rate(), 1, true));
        for key in ["k0", "k2", "k3", "k4"] {
            denied(cache.lookup(key, rate(), 1, true));
        }
    }
}
