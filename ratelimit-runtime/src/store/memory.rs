//! The in-process store: a sliding window log per key in sharded, mutex-guarded maps.
//!
//! Same semantics as the Redis store (see [`crate::Limiter`]); needs no runtime, so it also
//! serves synchronous callers and backs [`FailurePolicy::Local`](crate::FailurePolicy::Local).

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hashbrown::HashTable;
use siphasher::sip::SipHasher13;
use smol_str::SmolStr;

use super::counter::{self, Counts, Window};
use crate::clock;
use crate::decision::Decision;
use crate::key::random_hash_key;
use crate::limit::LimitRef;
use crate::rate::Rate;

/// A sliding window log per key, in memory.
///
/// Keys whose every admission has left its window are dropped by an amortised sweep, so memory
/// stays proportional to the keys active within their period (times their admissions): a shard
/// holds at most its keys active within their period at its last sweep, plus as many new keys
/// (at least 64), so at most about twice the keys active within a period, plus 64 per shard,
/// even under a flood of distinct keys. A key is dropped only when it is expired both at the
/// sweeping check's time and by the wall clock (its last admission a period ago), so that checks
/// with explicit times far from the wall clock (`check_at`) cannot sweep away keys other callers
/// still count on. A shard sweeps itself once it has seen as many checks as it kept keys at its
/// last sweep (at least 64), so a sweep's cost (the keys kept plus those added since) is
/// amortised to O(1) per check, and then also sweeps one other shard in turn, so that shards no
/// check reaches any more are emptied too. Each shard keeps lower bounds of its keys' expiry
/// times, and skips the scan while no key can have expired yet.
///
/// With [`with_max_keys`](MemoryStore::with_max_keys), the number of keys is also capped.
pub(crate) struct MemoryStore {
    /// Hashes each key once (SipHash-1-3 keyed at random per store, as `HashMap`'s default,
    /// against crafted collisions): the hash picks the shard and places the key in the
    /// shard's table.
    hasher: SipHasher13,
    shards: Box<[Padded]>,
    /// The most keys one shard holds (`usize::MAX`: no cap).
    shard_capacity: usize,
    /// The cap given to [`with_max_keys`](MemoryStore::with_max_keys), for the log.
    max_keys: Option<NonZeroUsize>,
    /// The next shard swept on behalf of another one.
    sweep_cursor: AtomicUsize,
    /// Checks of new keys denied because their shard was full; the first one is logged.
    capacity_denials: AtomicU64,
}

/// A shard on cache lines of its own, so that threads working on neighbouring shards do not
/// contend for one line.
#[derive(Default)]
#[repr(align(128))]
struct Padded(Mutex<Shard>);

struct Shard {
    /// The logs, placed by the hash of their key (computed once per check, by the store).
    logs: HashTable<Entry>,
    /// The sliding window counters, placed as the logs (a key may have both: they are
    /// apart, as in Redis, where the counter's key has a suffix of its own).
    counters: HashTable<CounterEntry>,
    /// Checks since the last sweep.
    checks_since_sweep: usize,
    /// The keys the last sweep kept: the next sweep is due after as many checks (at least 64).
    /// A sweep's cost (the keys kept plus at most one new key per check since) is so amortised
    /// to O(1) per check, and it comes due under a flood of new keys too (a schedule counting
    /// against the current number of keys never would: it grows with the checks).
    kept: usize,
    /// Lower bounds of the keys' `expires_at` and `idle_at`: until a check's times reach both,
    /// no key can have expired, and a sweep skips its scan.
    soonest: Now,
    /// Set by a sweep made for room in a full shard that freed less than an eighth of the
    /// shard's capacity: the next sweep for room then waits for as many checks, so that a full
    /// shard whose keys expire one by one is not scanned on every check.
    starved: bool,
    /// Scans of the whole shard, for the tests of the amortisation.
    #[cfg(test)]
    scans: usize,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard {
            logs: HashTable::new(),
            counters: HashTable::new(),
            checks_since_sweep: 0,
            kept: 0,
            soonest: Now::NEVER,
            starved: false,
            #[cfg(test)]
            scans: 0,
        }
    }
}

/// One key's log. A key of up to 23 bytes is stored inline (`SmolStr`), so that finding it
/// reads one place in memory, not two.
struct Entry {
    key: SmolStr,
    log: Log,
}

/// One key's admissions, microseconds since the Unix epoch, sorted ascending.
struct Log {
    admissions: VecDeque<u64>,
    /// The newest admission while `admissions` is not empty (kept apart so that a denial
    /// reads the oldest admission only, not also the far end of the log).
    newest: u64,
    /// When the newest admission leaves its window (µs, on the checks' clock).
    expires_at: u64,
    /// The wall clock (µs) a period after the latest admission was made.
    idle_at: u64,
}

/// One key's sliding window counter for one period (see `counter.rs`): no allocation beyond
/// the key's. A key checked with two periods has two, which do not disturb each other.
struct CounterEntry {
    key: SmolStr,
    counter: Counter,
}

/// A key's two fixed windows, kept for one period.
struct Counter {
    counts: Counts,
    /// The period (µs) the counts were kept for: a check of another one starts afresh.
    period: u64,
    /// When the counts stop mattering (µs, on the checks' clock): the end of the window
    /// after the current one.
    expires_at: u64,
    /// The wall clock (µs) two periods after the latest admission was made (the sweep drops a
    /// counter once both this and `expires_at` have passed).
    idle_at: u64,
    /// When the counter was first written (µs, on the checks' clock): a refund of a check
    /// made before it (of a key reset since) has nothing to take here.
    born: u64,
}

impl Counter {
    /// `counter`'s windows (`None`: a key without one) for `rate` at `now`.
    /// (A counter is found by its key and period, so its counts are always of `rate`'s.)
    fn window(counter: Option<&Counter>, rate: Rate, now: u64) -> Window {
        Window::at(counter.map(|counter| counter.counts), rate, now)
    }

    /// The verdict on a call of `cost` in `window` (a cost of 0 always fits); admitted, the
    /// call is added to `window`.
    #[inline(always)]
    fn verdict(window: &mut Window, cost: u32) -> Verdict {
        let cost = u64::from(cost);
        if cost == 0 || window.fits(cost) {
            let remaining = window.remaining() - cost;
            window.admit(cost);
            Verdict::admitted(remaining, window.reset_after())
        } else {
            Verdict::denied(window.retry_after_denied(cost), window.reset_after())
        }
    }

    /// Keeps `window`'s counts, in which a call was admitted at `now`.
    fn record(counter: &mut Counter, window: &Window, rate: Rate, now: Now) {
        if counter.born == Counter::UNBORN {
            counter.born = now.at;
        }
        counter.counts = window.counts();
        counter.period = rate.period_us();
        counter.expires_at = counter.expires_at.max(window.expires_at());
        counter.idle_at = counter
            .idle_at
            .max(now.wall.saturating_add(2 * rate.period_us()));
    }

    /// A counter that holds nothing yet.
    const EMPTY: Counter = Counter {
        counts: Counts {
            index: 0,
            prev: 0,
            cur: 0,
        },
        period: 0,
        expires_at: 0,
        idle_at: 0,
        born: Counter::UNBORN,
    };

    /// `born` of a counter not written yet.
    const UNBORN: u64 = u64::MAX;
}

/// The time of a check: the one it is checked at, and the wall clock's.
#[derive(Clone, Copy)]
struct Now {
    at: u64,
    wall: u64,
}

impl Now {
    /// The time of a check at `at` (µs since the Unix epoch; `None`: the wall clock).
    #[inline]
    fn of(at: Option<u64>) -> Now {
        let wall = clock::now_us();
        Now {
            at: at.unwrap_or(wall),
            wall,
        }
    }

    /// Later than any check.
    const NEVER: Now = Now {
        at: u64::MAX,
        wall: u64::MAX,
    };
}

/// The fewest keys per shard a cap leaves (when it allows more than one shard), so that keys
/// spread over the shards by their hash fill them about evenly.
const MIN_KEYS_PER_SHARD: usize = 64;

impl MemoryStore {
    /// A store without a cap on its keys.
    pub(crate) fn new() -> MemoryStore {
        MemoryStore::with_max_keys(None)
    }

    /// A store tracking at most about `max_keys` keys (`None`: no cap, as
    /// [`new`](MemoryStore::new)).
    ///
    /// The cap is split evenly among the shards: each holds at most
    /// `ceil(max_keys / shards)` keys, so the store never holds more than
    /// `shards * ceil(max_keys / shards)` keys, which is less than `max_keys + shards`. The
    /// shard count is a power of two: that of an uncapped store (4 × the available
    /// parallelism rounded up to a power of two, at least 8), but no more than
    /// `max_keys / 64` rounded down to a power of two, and at least 1. So a cap below 128 keys
    /// is exact (one shard), and a larger one is exceeded by less than `max_keys / 64` keys.
    ///
    /// A check of a key the store tracks is not affected by the cap. A check of a key not
    /// tracked yet that finds its shard full first sweeps the shard's expired keys (as the
    /// regular sweep: those whose every admission has left its window, at the check's time and
    /// by the wall clock); if the shard is still full, the check is denied with
    /// `Decision::denied(threshold, period, period)` (retry after one period, as nginx's
    /// `limit_req` answers 503 when its zone is full), and nothing is recorded. Such denials are
    /// counted ([`capacity_denials`](MemoryStore::capacity_denials)), and the first one is
    /// logged at warn level, once per store, without the key. A new key may so be denied while
    /// other shards have room.
    ///
    /// That sweep costs nothing while no key of the shard can have expired yet (the shard
    /// keeps lower bounds of its keys' expiry times). When it scans the shard but frees fewer
    /// than `ceil(capacity / 8)` keys (`capacity` the shard's), the next sweep for room waits
    /// until the shard has seen `ceil(capacity / 8)` more checks, which keeps its cost O(1)
    /// amortised per check when a full shard's keys expire one by one under a flood: until
    /// then, a new key is denied even if keys of its shard have expired since. Any other sweep
    /// of the shard (its regular one, due every `max(keys it kept, 64)` checks, or one made on
    /// behalf of another shard) also ends that wait.
    pub(crate) fn with_max_keys(max_keys: Option<NonZeroUsize>) -> MemoryStore {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let mut count = (cores * 4).next_power_of_two().max(8);
        let mut shard_capacity = usize::MAX;
        if let Some(max) = max_keys {
            let fit = (max.get() / MIN_KEYS_PER_SHARD).max(1);
            count = count.min(1 << fit.ilog2());
            shard_capacity = max.get().div_ceil(count);
        }
        MemoryStore {
            hasher: random_hasher(),
            shards: (0..count).map(|_| Padded::default()).collect(),
            shard_capacity,
            max_keys,
            sweep_cursor: AtomicUsize::new(0),
            capacity_denials: AtomicU64::new(0),
        }
    }

    /// Checks `key` against `rate` at `at` (microseconds since the Unix epoch; `None`: the
    /// wall clock) for a call of `cost` (at most the threshold: the check path turns larger
    /// costs away), and records the call when it is admitted.
    pub(crate) fn check(&self, key: &str, rate: Rate, cost: u32, at: Option<u64>) -> Decision {
        if cost != 1 {
            // A denial of a cost says what is left ([`check_all`](MemoryStore::check_all)).
            let limit = LimitRef { key, rate, cost };
            let (_, decisions) = self.check_all(&[limit], at, true);
            return decisions[0];
        }
        self.verdict(key, rate, at).decision(rate)
    }

    /// What a check of `key` against `rate` (cost 1) at `at` (µs since the Unix epoch;
    /// `None`: the wall clock) would answer, recording nothing and evicting nothing: admitted
    /// iff a call fits, `remaining` what is left now (no call counted). A key the store does
    /// not track is an empty log.
    pub(crate) fn peek(&self, key: &str, rate: Rate, at: Option<u64>) -> Decision {
        let now = Now::of(at).at;
        let hash = self.hash(key);
        let mut shard = self.shards[self.shard_index(hash)]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let threshold = rate.threshold();
        if rate.is_counter() {
            let counter = shard.find_counter(hash, key, rate.period_us());
            let window = Counter::window(counter.as_deref(), rate, now);
            let reset_after = micros(window.reset_after());
            return if window.fits(1) {
                Decision::admitted(threshold, window.remaining(), reset_after)
            } else {
                Decision::denied(threshold, micros(window.retry_after(1)), reset_after)
            };
        }
        match shard.find(hash, key) {
            Some(log) => log.peek(rate, now),
            None => Decision::admitted(threshold, threshold, Duration::ZERO),
        }
    }

    /// Forgets every key `forget` accepts; returns how many.
    pub(crate) fn remove_where(&self, forget: impl Fn(&str) -> bool) -> usize {
        let mut removed = 0;
        for shard in &self.shards {
            let mut shard = shard.0.lock().unwrap_or_else(PoisonError::into_inner);
            let before = shard.len();
            shard.logs.retain(|entry| !forget(&entry.key));
            shard.counters.retain(|entry| !forget(&entry.key));
            removed += before - shard.len();
        }
        removed
    }

    /// Forgets `key`: its log, every admission of every rate that shares it, and its
    /// counter.
    pub(crate) fn remove(&self, key: &str) {
        let hash = self.hash(key);
        let mut shard = self.shards[self.shard_index(hash)]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Ok(entry) = shard.logs.find_entry(hash, |entry| *entry.key == *key) {
            entry.remove();
        }
        // One counter per period the key was checked with.
        while let Ok(entry) = shard.counters.find_entry(hash, |entry| *entry.key == *key) {
            entry.remove();
        }
    }

    /// Removes a call of `limit.cost` admitted at `at` (µs since the Unix epoch, the time it
    /// was checked at) from `limit.key`'s log: a refund. Admissions recorded in one
    /// microsecond are alike, so removing `cost` of those at `at` restores the log as it was
    /// without the call. An admission that left the log already (its window passed, or the key
    /// was reset or swept) is not there to remove: nothing happens.
    pub(crate) fn refund(&self, limit: LimitRef<'_>, at: u64) {
        let hash = self.hash(limit.key);
        let mut shard = self.shards[self.shard_index(hash)]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if limit.rate.is_counter() {
            if let Some(counter) = shard.find_counter(hash, limit.key, limit.rate.period_us())
                && counter.born <= at
            {
                let cost = u64::from(limit.cost);
                counter.counts = counter::refund(counter.counts, limit.rate, at, cost);
            }
        } else if let Some(log) = shard.find(hash, limit.key) {
            log.remove(limit.cost, at);
        }
    }

    /// [`check`](MemoryStore::check) of a call of cost 1 (every check of `Limiter::check` and
    /// the attribute's), its answer in two words (returned in registers; the caller builds the
    /// [`Decision`] where it keeps it).
    #[inline]
    pub(crate) fn verdict(&self, key: &str, rate: Rate, at: Option<u64>) -> Verdict {
        self.verdict_now(key, rate, Now::of(at))
    }

    #[cfg(test)]
    fn check_now(&self, key: &str, rate: Rate, now: Now) -> Decision {
        self.verdict_now(key, rate, now).decision(rate)
    }

    fn verdict_now(&self, key: &str, rate: Rate, now: Now) -> Verdict {
        if rate.is_counter() {
            return self.counter_verdict_now(key, rate, now);
        }
        self.verdict_locked(key, rate, now, Shard::check_log)
    }

    /// [`verdict_now`](MemoryStore::verdict_now) of a sliding window counter: its whole
    /// path in one function (the log's is another), since the calls between its steps were
    /// a tenth of its instructions (callgrind, `icount counter-deny`: 689 per check as
    /// three functions, 634 as one; the log's unchanged).
    #[inline(never)]
    fn counter_verdict_now(&self, key: &str, rate: Rate, now: Now) -> Verdict {
        self.verdict_locked(key, rate, now, Shard::check_counter)
    }

    /// The verdict of `check` on `key` under its shard's lock, after the shard's sweep when
    /// one is due (and another shard's then, once the lock is released).
    #[inline(always)]
    fn verdict_locked(
        &self,
        key: &str,
        rate: Rate,
        now: Now,
        check: impl FnOnce(&mut Shard, &SipHasher13, u64, &str, Rate, Now, usize) -> Option<Verdict>,
    ) -> Verdict {
        let hash = self.hash(key);
        let mut shard = self.shards[self.shard_index(hash)]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let swept = shard.sweep_if_due(now);
        let verdict = check(
            &mut shard,
            &self.hasher,
            hash,
            key,
            rate,
            now,
            self.shard_capacity,
        );
        drop(shard);
        if swept {
            self.sweep_another(now);
        }
        verdict.unwrap_or_else(|| self.deny_for_capacity(rate))
    }

    /// Checks the limits of one call together at `at` (µs since the Unix epoch; `None`: the
    /// wall clock), in one step under the locks of all their shards (taken in the order of
    /// their index, so that two such checks cannot deadlock): the call is admitted iff every
    /// limit admits it, and then each records it (`record`; without it, nothing is recorded
    /// either way). Returns whether it was admitted, and each limit's own decision: on a
    /// denial, a limit that would have admitted the call says so, its count unchanged, and a
    /// limit that denied a cost above 1 says what is left (a smaller call may fit).
    ///
    /// The limits' keys are distinct (the check path makes sure). The cap on keys counts the
    /// new keys of one check together; a key of the check that a sweep for room drops may be
    /// made again, so one check may pass its shard's cap by at most its number of limits.
    pub(crate) fn check_all(
        &self,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
        record: bool,
    ) -> (bool, Vec<Decision>) {
        // A concurrency limit's slots last until released here (`Rate::in_process`).
        let in_process: Vec<LimitRef<'_>>;
        let limits = if limits.iter().any(|limit| limit.rate.is_concurrency()) {
            in_process = limits
                .iter()
                .map(|&limit| LimitRef {
                    rate: limit.rate.in_process(),
                    ..limit
                })
                .collect();
            &in_process
        } else {
            limits
        };
        let now = Now::of(at);
        let hashes: Vec<u64> = limits.iter().map(|limit| self.hash(limit.key)).collect();
        let mut indices: Vec<usize> = hashes.iter().map(|&hash| self.shard_index(hash)).collect();
        indices.sort_unstable();
        indices.dedup();
        let mut shards: Vec<(usize, MutexGuard<'_, Shard>)> = indices
            .iter()
            .map(|&index| {
                let guard = self.shards[index]
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                (index, guard)
            })
            .collect();
        let mut swept = false;
        for (_, shard) in &mut shards {
            swept |= shard.sweep_if_due(now);
        }
        // The locked shard of index `index`.
        fn locked<'s>(
            shards: &'s mut [(usize, MutexGuard<'_, Shard>)],
            index: usize,
        ) -> &'s mut Shard {
            let at = shards.partition_point(|(i, _)| *i < index);
            &mut shards[at].1
        }
        // New keys each shard would take, so that several of one call respect its cap.
        let mut new_keys: Vec<(usize, usize)> = Vec::new();
        let mut verdicts = Vec::with_capacity(limits.len());
        // Each limit's count in its window, before this call.
        let mut counts = Vec::with_capacity(limits.len());
        for (limit, &hash) in limits.iter().zip(&hashes) {
            let shard = locked(&mut shards, self.shard_index(hash));
            let mut count = 0;
            let found = if limit.rate.is_counter() {
                let period = limit.rate.period_us();
                shard.find_counter(hash, limit.key, period).map(|counter| {
                    let mut window = Counter::window(Some(&*counter), limit.rate, now.at);
                    count = limit.rate.threshold() - window.remaining();
                    Counter::verdict(&mut window, limit.cost)
                })
            } else {
                shard.find(hash, limit.key).map(|log| {
                    log.evict(limit.rate.period_us(), now.at);
                    count = log.admissions.len() as u64;
                    log.verdict(limit.rate, limit.cost, now.at)
                })
            };
            let verdict = match found {
                Some(verdict) => verdict,
                None => {
                    let index = self.shard_index(hash);
                    let taken = new_keys
                        .iter()
                        .find(|(i, _)| *i == index)
                        .map_or(0, |(_, n)| *n);
                    let capacity = self.shard_capacity.saturating_sub(taken);
                    if limit.cost > 0 && shard.len() >= capacity && !shard.make_room(now, capacity)
                    {
                        self.deny_for_capacity(limit.rate)
                    } else {
                        if limit.cost > 0 {
                            match new_keys.iter_mut().find(|(i, _)| *i == index) {
                                Some((_, n)) => *n += 1,
                                None => new_keys.push((index, 1)),
                            }
                        }
                        if limit.rate.is_counter() {
                            let mut window = Counter::window(None, limit.rate, now.at);
                            Counter::verdict(&mut window, limit.cost)
                        } else {
                            Log::new().verdict(limit.rate, limit.cost, now.at)
                        }
                    }
                }
            };
            verdicts.push(verdict);
            counts.push(count);
        }
        let admitted = verdicts.iter().all(|verdict| verdict.is_admitted());
        if !admitted || !record {
            // The limits that would have admitted the call answer without it: what is left.
            for ((limit, &hash), verdict) in limits.iter().zip(&hashes).zip(&mut verdicts) {
                if verdict.is_admitted() && limit.cost > 0 {
                    let shard = locked(&mut shards, self.shard_index(hash));
                    if limit.rate.is_counter() {
                        let period = limit.rate.period_us();
                        let counter = shard.find_counter(hash, limit.key, period);
                        let mut window = Counter::window(counter.as_deref(), limit.rate, now.at);
                        *verdict = Counter::verdict(&mut window, 0);
                        continue;
                    }
                    *verdict = match shard.find(hash, limit.key) {
                        Some(log) => log.verdict(limit.rate, 0, now.at),
                        None => Log::new().verdict(limit.rate, 0, now.at),
                    };
                }
            }
        }
        if admitted && record {
            for (limit, &hash) in limits.iter().zip(&hashes) {
                let shard = locked(&mut shards, self.shard_index(hash));
                if limit.cost > 0 && limit.rate.is_counter() {
                    let period = limit.rate.period_us();
                    let counter = shard.counter_of(&self.hasher, hash, limit.key, period);
                    let mut window = Counter::window(Some(&*counter), limit.rate, now.at);
                    window.admit(u64::from(limit.cost));
                    Counter::record(counter, &window, limit.rate, now);
                } else if limit.cost > 0 {
                    shard
                        .log_of(&self.hasher, hash, limit.key)
                        .record(limit.rate, limit.cost, now);
                }
            }
        }
        drop(shards);
        if swept {
            self.sweep_another(now);
        }
        let decisions = verdicts
            .iter()
            .zip(limits)
            .zip(counts)
            .map(|((verdict, limit), count)| {
                let decision = verdict.decision(limit.rate);
                if decision.allowed || limit.cost <= 1 {
                    decision
                } else {
                    Decision {
                        remaining: limit.rate.threshold().saturating_sub(count),
                        ..decision
                    }
                }
            })
            .collect();
        (admitted, decisions)
    }

    /// The hash of `key` (see [`hash`]).
    fn hash(&self, key: &str) -> u64 {
        hash(&self.hasher, key)
    }

    /// The shard of the key whose hash is `hash`.
    fn shard_index(&self, hash: u64) -> usize {
        // The map places entries by the hash's low bits: pick the shard by others.
        (hash >> 32) as usize & (self.shards.len() - 1)
    }

    /// The answer to a new key whose shard is full.
    #[cold]
    fn deny_for_capacity(&self, rate: Rate) -> Verdict {
        if self.capacity_denials.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                max_keys = self.max_keys.map_or(0, NonZeroUsize::get),
                shards = self.shards.len(),
                "the in-process rate limiter tracks as many keys as it may: checks of new keys \
                 are denied until tracked keys expire (logged once)"
            );
        }
        Verdict::denied(rate.period_us(), rate.period_us())
    }

    /// Sweeps the shard under the cursor, unless another caller holds it right now.
    fn sweep_another(&self, now: Now) {
        let next = self.sweep_cursor.fetch_add(1, Ordering::Relaxed) & (self.shards.len() - 1);
        if let Ok(mut shard) = self.shards[next].0.try_lock() {
            shard.sweep(now);
        }
    }

    /// How many keys the store holds (including expired ones not yet swept). Locks each shard
    /// in turn, so under concurrent checks the sum is not a snapshot.
    #[cfg_attr(not(test), allow(dead_code))] // for an accessor of `Limiter`
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.0.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    /// How many checks were denied because the key was new and its shard full.
    #[cfg_attr(not(test), allow(dead_code))] // for an accessor of `Limiter`
    pub(crate) fn capacity_denials(&self) -> u64 {
        self.capacity_denials.load(Ordering::Relaxed)
    }
}

impl Shard {
    /// Checks the key `key`, whose hash is `hash`, against `rate` (a sliding window log's)
    /// for a call of cost 1, and records its log when it is new; `None` when it is new and
    /// the shard holds `capacity` keys even after sweeping.
    fn check_log(
        &mut self,
        hasher: &SipHasher13,
        hash: u64,
        key: &str,
        rate: Rate,
        now: Now,
        capacity: usize,
    ) -> Option<Verdict> {
        if let Some(log) = self.find(hash, key) {
            return Some(log.check(rate, now));
        }
        if self.len() >= capacity && !self.make_room(now, capacity) {
            return None;
        }
        let mut log = Log::new();
        let verdict = log.check(rate, now);
        self.insert(hasher, hash, key, log);
        Some(verdict)
    }

    /// [`check_log`](Shard::check_log) of a sliding window counter.
    #[inline(always)]
    fn check_counter(
        &mut self,
        hasher: &SipHasher13,
        hash: u64,
        key: &str,
        rate: Rate,
        now: Now,
        capacity: usize,
    ) -> Option<Verdict> {
        if let Some(counter) = self.find_counter(hash, key, rate.period_us()) {
            let mut window = Counter::window(Some(&*counter), rate, now.at);
            let verdict = Counter::verdict(&mut window, 1);
            if verdict.is_admitted() {
                Counter::record(counter, &window, rate, now);
            }
            return Some(verdict);
        }
        if self.len() >= capacity && !self.make_room(now, capacity) {
            return None;
        }
        let mut window = Counter::window(None, rate, now.at);
        let verdict = Counter::verdict(&mut window, 1);
        let mut counter = Counter::EMPTY;
        Counter::record(&mut counter, &window, rate, now);
        self.insert_counter(hasher, hash, key, counter);
        Some(verdict)
    }

    /// The keys the shard holds: its logs and its counters.
    fn len(&self) -> usize {
        self.logs.len() + self.counters.len()
    }

    /// The counter of `key` for `period` (µs), whose hash is `hash`, if the shard holds it.
    #[inline]
    fn find_counter(&mut self, hash: u64, key: &str, period: u64) -> Option<&mut Counter> {
        self.counters
            .find_mut(hash, |entry| {
                entry.counter.period == period && *entry.key == *key
            })
            .map(|entry| &mut entry.counter)
    }

    /// The counter of `key` for `period`, made empty now if the shard holds none (the caller
    /// has made sure of the room).
    fn counter_of(
        &mut self,
        hasher: &SipHasher13,
        hash: u64,
        key: &str,
        period: u64,
    ) -> &mut Counter {
        if self.find_counter(hash, key, period).is_none() {
            let counter = Counter {
                period,
                ..Counter::EMPTY
            };
            self.insert_counter(hasher, hash, key, counter);
        }
        self.find_counter(hash, key, period)
            .expect("the counter was inserted just above")
    }

    /// Adds `key`'s `counter`, which the shard does not hold.
    fn insert_counter(&mut self, hasher: &SipHasher13, hash: u64, key: &str, counter: Counter) {
        self.soonest.at = self.soonest.at.min(counter.expires_at);
        self.soonest.wall = self.soonest.wall.min(counter.idle_at);
        let entry = CounterEntry {
            key: SmolStr::new(key),
            counter,
        };
        self.counters
            .insert_unique(hash, entry, |entry| self::hash(hasher, &entry.key));
    }

    /// The log of `key`, whose hash is `hash`, if the shard holds it.
    #[inline]
    fn find(&mut self, hash: u64, key: &str) -> Option<&mut Log> {
        self.logs
            .find_mut(hash, |entry| *entry.key == *key)
            .map(|entry| &mut entry.log)
    }

    /// The log of `key`, whose hash is `hash`, made empty now if the shard holds none (the
    /// caller has made sure of the room).
    fn log_of(&mut self, hasher: &SipHasher13, hash: u64, key: &str) -> &mut Log {
        if self.find(hash, key).is_none() {
            self.insert(hasher, hash, key, Log::new());
        }
        self.find(hash, key)
            .expect("the log was inserted just above")
    }

    /// Adds `key`'s `log`, which the shard does not hold.
    fn insert(&mut self, hasher: &SipHasher13, hash: u64, key: &str, log: Log) {
        self.soonest.at = self.soonest.at.min(log.expires_at);
        self.soonest.wall = self.soonest.wall.min(log.idle_at);
        let entry = Entry {
            key: SmolStr::new(key),
            log,
        };
        // When the table grows, it rehashes its keys (rarely: not worth 8 bytes per key).
        self.logs
            .insert_unique(hash, entry, |entry| self::hash(hasher, &entry.key));
    }

    /// Sweeps a full shard, unless nothing can have expired or its last sweep for room was
    /// starved and too few checks came since; `true` when the shard has room then.
    fn make_room(&mut self, now: Now, capacity: usize) -> bool {
        let enough = capacity.div_ceil(8);
        if self.may_hold_expired(now) && !(self.starved && self.checks_since_sweep < enough) {
            let freed = self.sweep(now);
            self.starved = freed < enough;
        }
        self.len() < capacity
    }

    /// Sweeps when due; `true` when it did.
    fn sweep_if_due(&mut self, now: Now) -> bool {
        self.checks_since_sweep += 1;
        let due = self.checks_since_sweep >= self.kept.max(64);
        if due {
            self.sweep(now);
        }
        due
    }

    /// `false` when no key can have expired at `now` (by the lower bounds of their expiry).
    fn may_hold_expired(&self, now: Now) -> bool {
        self.soonest.at <= now.at && self.soonest.wall <= now.wall
    }

    /// Drops the logs whose newest admission has left its window, at `now` and by the wall
    /// clock; returns how many.
    fn sweep(&mut self, now: Now) -> usize {
        self.checks_since_sweep = 0;
        self.starved = false;
        let before = self.len();
        if self.may_hold_expired(now) {
            #[cfg(test)]
            {
                self.scans += 1;
            }
            let mut soonest = Now::NEVER;
            // Kept unless expired at `now` and by the wall clock; a kept one lowers the bounds.
            let mut keep = |expires_at: u64, idle_at: u64| {
                let keep = expires_at > now.at || idle_at > now.wall;
                if keep {
                    soonest.at = soonest.at.min(expires_at);
                    soonest.wall = soonest.wall.min(idle_at);
                }
                keep
            };
            self.logs
                .retain(|entry| keep(entry.log.expires_at, entry.log.idle_at));
            self.counters
                .retain(|entry| keep(entry.counter.expires_at, entry.counter.idle_at));
            self.soonest = soonest;
        }
        self.kept = self.len();
        before - self.kept
    }
}

impl Log {
    fn new() -> Log {
        Log {
            admissions: VecDeque::new(),
            newest: 0,
            expires_at: 0,
            idle_at: 0,
        }
    }

    /// Checks a call of cost 1 against `rate` at `now`, and records it when admitted: every
    /// check of `Limiter::check` and the attribute's. The arithmetic of [`verdict`](Log::verdict)
    /// and [`record`](Log::record) (a cost, an empty window's `None`), which the checks of
    /// several limits and costs use, spelled out for one admission: on this hot path the
    /// general form cost 26 instructions of 500 on a denial, 74 of 515 on an admission (by
    /// callgrind).
    #[inline]
    fn check(&mut self, rate: Rate, now: Now) -> Verdict {
        let period = rate.period_us();
        let now_us = now.at;
        self.evict(period, now_us);
        let count = self.admissions.len() as u64;
        let threshold = rate.threshold();
        if count < threshold {
            // Explicit timestamps may arrive out of order: keep the log sorted (in order, the
            // common case, the new admission goes last).
            if count == 0 || self.newest <= now_us {
                self.admissions.push_back(now_us);
                self.newest = now_us;
            } else {
                let at = self.admissions.partition_point(|&t| t <= now_us);
                self.admissions.insert(at, now_us);
            }
            let newest = self.newest;
            self.expires_at = self.expires_at.max(newest.saturating_add(period));
            self.idle_at = self.idle_at.max(now.wall.saturating_add(period));
            Verdict::admitted(threshold - count - 1, newest + period - now_us)
        } else {
            // The count falls below the threshold when the admission at index
            // `count - threshold` (the oldest one, unless the log holds more) leaves.
            let freeing = self.admissions[(count - threshold) as usize];
            let newest = self.newest;
            Verdict::denied(freeing + period - now_us, newest + period - now_us)
        }
    }

    /// [`MemoryStore::peek`]'s answer at `now`: the window's admissions counted where they
    /// lie (the log is sorted), none dropped.
    fn peek(&self, rate: Rate, now: u64) -> Decision {
        let period = rate.period_us();
        let threshold = rate.threshold();
        let first = self
            .admissions
            .partition_point(|&t| t.saturating_add(period) <= now);
        let count = (self.admissions.len() - first) as u64;
        if count == 0 {
            return Decision::admitted(threshold, threshold, Duration::ZERO);
        }
        let reset_after = micros(self.newest + period - now);
        if count < threshold {
            return Decision::admitted(threshold, threshold - count, reset_after);
        }
        // As a check's denial: the admission at index `count − threshold` of the window.
        let freeing = self.admissions[first + (count - threshold) as usize];
        Decision::denied(threshold, micros(freeing + period - now), reset_after)
    }

    /// Removes up to `cost` admissions recorded at `at`. The key's expiry times stay: they
    /// only ever bound it from above, and a sweep finds it empty.
    fn remove(&mut self, cost: u32, at: u64) {
        let start = self.admissions.partition_point(|&t| t < at);
        let end = self.admissions.partition_point(|&t| t <= at);
        let count = (end - start).min(cost as usize);
        self.admissions.drain(start..start + count);
        self.newest = self.admissions.back().copied().unwrap_or(0);
    }

    /// Drops the admissions that left the window `(now − period, now]`: an admission at `t`
    /// counts while `t + period > now`.
    #[inline]
    fn evict(&mut self, period: u64, now: u64) {
        while self
            .admissions
            .front()
            .is_some_and(|&t| t.saturating_add(period) <= now)
        {
            self.admissions.pop_front();
        }
    }

    /// The answer to a call of `cost` at `now`, once evicted, without recording it: admitted
    /// iff the count plus `cost` stays within the threshold, the remaining and the reset as
    /// they are once it is recorded; denied, the time until `cost` fits.
    #[inline]
    fn verdict(&self, rate: Rate, cost: u32, now: u64) -> Verdict {
        let period = rate.period_us();
        let count = self.admissions.len() as u64;
        let threshold = rate.threshold();
        let cost = u64::from(cost);
        let newest = (count > 0).then_some(self.newest);
        if cost == 0 {
            // Always admitted, recording nothing (even past a lowered threshold).
            let reset_after = newest.map_or(0, |newest| newest + period - now);
            return Verdict::admitted(threshold.saturating_sub(count), reset_after);
        }
        if count + cost <= threshold {
            // Recorded at `now`, unless a later admission is the newest (explicit times out
            // of order); a cost of 0 records nothing.
            let newest = if cost > 0 {
                Some(newest.map_or(now, |newest| newest.max(now)))
            } else {
                newest
            };
            let reset_after = newest.map_or(0, |newest| newest + period - now);
            Verdict::admitted(threshold - count - cost, reset_after)
        } else {
            // The call fits when the admission at index `count + cost − threshold − 1` (the
            // oldest one for a cost of 1, unless the log holds more) leaves. A cost above the
            // threshold never fits (the check path turns it away before): one period.
            let reset_after = newest.map_or(0, |newest| newest + period - now);
            let index = (count + cost - threshold - 1) as usize;
            let retry_after = match self.admissions.get(index) {
                Some(&freeing) if cost <= threshold => freeing + period - now,
                _ => period,
            };
            Verdict::denied(retry_after, reset_after)
        }
    }

    /// Records a call of `cost` at `now`, in order: explicit timestamps may arrive out of
    /// order (in order, the common case, the new admissions go last).
    #[inline]
    fn record(&mut self, rate: Rate, cost: u32, now: Now) {
        let period = rate.period_us();
        let now_us = now.at;
        let cost = cost as usize;
        if self.admissions.is_empty() || self.newest <= now_us {
            self.admissions.extend(std::iter::repeat_n(now_us, cost));
            self.newest = now_us;
        } else {
            let at = self.admissions.partition_point(|&t| t <= now_us);
            let mut later = self.admissions.split_off(at);
            self.admissions.extend(std::iter::repeat_n(now_us, cost));
            self.admissions.append(&mut later);
        }
        self.expires_at = self.expires_at.max(self.newest.saturating_add(period));
        self.idle_at = self.idle_at.max(now.wall.saturating_add(period));
    }
}

/// A check's answer in two words: small enough to travel in registers, so that the
/// [`Decision`] is written once, where the caller keeps it (copying one right after it was
/// written field by field costs a store-forwarding stall per copy).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Verdict {
    /// Admitted: the admissions remaining (below 2^32). Denied: [`Verdict::DENIED`] plus
    /// the retry-after in µs (below 2^62: periods are at most 100 years).
    remaining_or_retry: u64,
    /// µs until no admission is left in the window.
    reset_after_us: u64,
}

impl Verdict {
    const DENIED: u64 = 1 << 63;

    fn admitted(remaining: u64, reset_after_us: u64) -> Verdict {
        Verdict {
            remaining_or_retry: remaining,
            reset_after_us,
        }
    }

    fn denied(retry_after_us: u64, reset_after_us: u64) -> Verdict {
        Verdict {
            remaining_or_retry: Verdict::DENIED | retry_after_us,
            reset_after_us,
        }
    }

    /// `true` when the call was admitted.
    #[inline]
    pub(crate) fn is_admitted(self) -> bool {
        self.remaining_or_retry & Verdict::DENIED == 0
    }

    /// `None` when admitted; otherwise the time until the count falls below the threshold.
    pub(crate) fn retry_after(self) -> Option<Duration> {
        (!self.is_admitted()).then(|| micros(self.remaining_or_retry & !Verdict::DENIED))
    }

    /// The decision, against `rate` (the one checked).
    #[inline]
    pub(crate) fn decision(self, rate: Rate) -> Decision {
        let reset_after = micros(self.reset_after_us);
        if self.is_admitted() {
            Decision::admitted(rate.threshold(), self.remaining_or_retry, reset_after)
        } else {
            let retry_after = micros(self.remaining_or_retry & !Verdict::DENIED);
            Decision::denied(rate.threshold(), retry_after, reset_after)
        }
    }
}

/// The hash of `key` by `hasher`: its bytes alone (`str`'s `Hash` also writes a terminator,
/// which only matters when several fields are hashed together).
fn hash(hasher: &SipHasher13, key: &str) -> u64 {
    hasher.hash(key.as_bytes())
}

/// A SipHash-1-3 hasher with a random key.
fn random_hasher() -> SipHasher13 {
    SipHasher13::new_with_key(&random_hash_key())
}

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000;

    /// A check at `at` with the wall clock reading `wall` (both in seconds).
    fn at(at: u64, wall: u64) -> Now {
        Now {
            at: at * SECOND,
            wall: wall * SECOND,
        }
    }

    #[test]
    fn idle_keys_are_swept() {
        let store = MemoryStore::new();
        let rate = Rate::new(1, Duration::from_secs(1)).unwrap();
        for i in 0..10_000 {
            assert!(store.check_now(&format!("k{i}"), rate, at(1, 100)).allowed);
        }
        assert_eq!(store.len(), 10_000);
        // Expired at the checks' time but not yet by the wall clock: kept.
        for i in 0..20_000 {
            store.check_now(&format!("fresh{}", i % 8), rate, at(3, 100));
        }
        assert_eq!(store.len(), 10_008);
        // Once a period has passed by both, checks on other keys sweep the old ones away,
        // shard after shard.
        for i in 0..20_000 {
            store.check_now(&format!("fresh{}", i % 8), rate, at(3, 102));
        }
        assert_eq!(store.len(), 8);
    }

    /// A verdict carries every decision exactly, at the extremes of a rate too.
    #[test]
    fn verdicts_round_trip_to_decisions() {
        let rate = Rate::new(u64::from(u32::MAX), Rate::MAX_PERIOD).unwrap();
        let longest = rate.period_us();
        let admitted = Verdict::admitted(u64::from(u32::MAX) - 1, longest);
        assert!(admitted.is_admitted());
        assert_eq!(admitted.retry_after(), None);
        assert_eq!(
            admitted.decision(rate),
            Decision::admitted(rate.threshold(), rate.threshold() - 1, rate.period())
        );
        let denied = Verdict::denied(longest, longest);
        assert!(!denied.is_admitted());
        assert_eq!(denied.retry_after(), Some(rate.period()));
        assert_eq!(
            denied.decision(rate),
            Decision::denied(rate.threshold(), rate.period(), rate.period())
        );
        let soon = Verdict::denied(0, 1).decision(rate);
        assert_eq!(soon.retry_after, Some(Duration::ZERO));
        assert_eq!(soon.reset_after, Duration::from_micros(1));
    }

    #[test]
    fn out_of_order_timestamps_stay_sorted() {
        let store = MemoryStore::new();
        let rate = Rate::new(3, Duration::from_secs(10)).unwrap();
        assert!(store.check("k", rate, 1, Some(5 * SECOND)).allowed);
        assert!(store.check("k", rate, 1, Some(2 * SECOND)).allowed);
        assert!(store.check("k", rate, 1, Some(4 * SECOND)).allowed);
        let denied = store.check("k", rate, 1, Some(6 * SECOND));
        // The oldest admission (2 s) frees the window at 12 s.
        assert_eq!(denied.retry_after, Some(Duration::from_secs(6)));
        assert_eq!(denied.reset_after, Duration::from_secs(9));
    }

    /// Checks at a time far ahead of a key's own (here: an hour after the wall clock) do not
    /// sweep it away while it still counts.
    #[test]
    fn sweeps_at_other_times_keep_keys_that_still_count() {
        let store = MemoryStore::new();
        let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
        assert!(store.check("victim", rate, 1, None).allowed);
        let hour_ahead = clock::now_us() + 3_600 * SECOND;
        for i in 0..20_000 {
            store.check(&format!("other{}", i % 8), rate, 1, Some(hour_ahead));
        }
        assert!(!store.check("victim", rate, 1, None).allowed);
    }

    /// A check at `us` microseconds, by both clocks: the tests below run with explicit times
    /// on the wall clock too (the store's seam), so they neither sleep nor depend on the machine.
    fn both(us: u64) -> Now {
        Now { at: us, wall: us }
    }

    /// A base time, 2023-11-14T22:13:20Z, in microseconds.
    const T0: u64 = 1_700_000_000 * SECOND;

    /// Writes the `i`th key of a flood into `key`.
    fn flood_key(key: &mut String, round: u64, i: u64) {
        use std::fmt::Write;
        key.clear();
        write!(key, "flood{round}-{i}").unwrap();
    }

    /// The sum of the shards' table allocations (the keys and logs aside).
    fn table_bytes(store: &MemoryStore) -> usize {
        store
            .shards
            .iter()
            .map(|shard| shard.0.lock().unwrap().logs.allocation_size())
            .sum()
    }

    /// The scans of whole shards so far.
    fn scans(store: &MemoryStore) -> usize {
        store
            .shards
            .iter()
            .map(|shard| shard.0.lock().unwrap().scans)
            .sum()
    }

    /// One million one-shot keys, 10 000 a second over 100 s with a period of 1 s: the store
    /// holds at most about twice the keys of one period (plus 64 per shard) during the flood,
    /// and returns to the keys still in use once the periods have passed.
    #[test]
    fn a_flood_of_one_shot_keys_stays_bounded_and_drains() {
        const KEYS: u64 = 1_000_000;
        const SPACING: u64 = 100; // µs between keys
        const PER_PERIOD: usize = (SECOND / SPACING) as usize;
        let store = MemoryStore::new();
        let bound = 2 * PER_PERIOD + 64 * store.shards.len();
        let rate = Rate::new(1, Duration::from_secs(1)).unwrap();
        let started = std::time::Instant::now();
        let mut key = String::new();
        let mut peak = 0;
        for i in 0..KEYS {
            flood_key(&mut key, 0, i);
            assert!(store.check_now(&key, rate, both(T0 + i * SPACING)).allowed);
            // The count grows by at most one per check: sampled every 64 checks, the peak is
            // at most 63 above the largest sample.
            if i % 64 == 63 {
                let len = store.len();
                peak = peak.max(len);
                assert!(len <= bound, "{len} keys after {} checks", i + 1);
            }
        }
        let after_flood = store.len();
        // A period later, by both clocks, checks of 8 other keys sweep every shard.
        let later = T0 + KEYS * SPACING + 2 * SECOND;
        let mut checks = 0;
        while store.len() > 8 {
            store.check_now(&format!("other{}", checks % 8), rate, both(later));
            checks += 1;
            assert!(checks <= 4 * bound, "{} keys left", store.len());
        }
        eprintln!(
            "{KEYS} one-shot keys, {PER_PERIOD} per period: peak {peak} (bound {bound}), \
             {after_flood} at the end of the flood, 8 after {checks} later checks, in {:?}",
            started.elapsed()
        );
    }

    /// The cap splits evenly among the shards, and bounds the store to less than
    /// `max_keys + shards`, under `max_keys + max_keys / 64`.
    #[test]
    fn the_cap_is_split_among_shards() {
        let default = MemoryStore::new().shards.len();
        assert_eq!(MemoryStore::new().shard_capacity, usize::MAX);
        for max in [
            1,
            2,
            63,
            64,
            127,
            128,
            129,
            255,
            256,
            1000,
            1001,
            4099,
            100_000,
            1 << 20,
        ] {
            let store = MemoryStore::with_max_keys(NonZeroUsize::new(max));
            let (shards, capacity) = (store.shards.len(), store.shard_capacity);
            assert!(
                shards.is_power_of_two() && shards <= default,
                "{max}: {shards}"
            );
            assert_eq!(capacity, max.div_ceil(shards), "{max}");
            let bound = shards * capacity;
            assert!(
                bound >= max && bound < max + shards,
                "{max}: {shards} × {capacity}"
            );
            if max < 128 {
                assert_eq!((shards, bound), (1, max));
            } else {
                assert!(
                    shards <= max / 64 && bound - max < max / 64,
                    "{max}: {shards}"
                );
            }
        }
        let store = MemoryStore::with_max_keys(NonZeroUsize::new(1000));
        assert_eq!((store.shards.len(), store.shard_capacity), (8, 125));
        let store = MemoryStore::with_max_keys(NonZeroUsize::new(1 << 20));
        assert_eq!(store.shards.len(), default);
    }

    /// A new key is denied exactly when its shard is full; keys already tracked are checked
    /// as before.
    #[test]
    fn the_cap_denies_new_keys_at_capacity_and_only_them() {
        let store = MemoryStore::with_max_keys(NonZeroUsize::new(1000));
        let rate = Rate::new(2, Duration::from_secs(10)).unwrap();
        let full = Decision::denied(2, Duration::from_secs(10), Duration::from_secs(10));
        let mut filled = [0; 8];
        let mut tracked = Vec::new();
        let mut denied = Vec::new();
        for i in 0..5_000 {
            let key = format!("k{i}");
            let shard = store.shard_index(store.hash(&key));
            let decision = store.check_now(&key, rate, both(T0));
            if filled[shard] < 125 {
                filled[shard] += 1;
                assert!(decision.allowed, "{key}");
                assert_eq!(decision.remaining, 1);
                tracked.push(key);
            } else {
                assert_eq!(decision, full, "{key}");
                denied.push(key);
            }
        }
        // 5 000 keys fill all 8 shards (625 a shard on average).
        assert_eq!(filled, [125; 8]);
        assert_eq!(
            (store.len(), tracked.len(), denied.len()),
            (1000, 1000, 4000)
        );
        assert_eq!(store.capacity_denials(), 4000);
        // Denied keys were not recorded: denied again, later too.
        for key in &denied {
            assert_eq!(store.check_now(key, rate, both(T0 + SECOND)), full, "{key}");
        }
        assert_eq!(store.capacity_denials(), 8000);
        // Tracked keys: their second admission, then a denial by their own window.
        for key in &tracked {
            let second = store.check_now(key, rate, both(T0 + SECOND));
            assert!(second.allowed && second.remaining == 0, "{key}");
            let third = store.check_now(key, rate, both(T0 + 2 * SECOND));
            assert_eq!(
                third,
                Decision::denied(2, Duration::from_secs(8), Duration::from_secs(9)),
                "{key}"
            );
        }
        assert_eq!(store.capacity_denials(), 8000);
        assert_eq!(store.len(), 1000);
    }

    /// A full shard makes room by sweeping the keys expired at the check's time and by the wall
    /// clock, and only those.
    #[test]
    fn a_full_shard_sweeps_its_expired_keys_for_room() {
        // Below 128 keys: one shard, an exact cap.
        let store = MemoryStore::with_max_keys(NonZeroUsize::new(100));
        let second = Rate::new(1, Duration::from_secs(1)).unwrap();
        let hour = Rate::new(1, Duration::from_secs(3600)).unwrap();
        for i in 0..100 {
            let rate = if i % 2 == 0 { second } else { hour };
            assert!(store.check_now(&format!("k{i}"), rate, both(T0)).allowed);
        }
        let full = Decision::denied(1, Duration::from_secs(1), Duration::from_secs(1));
        // Nothing expired yet: denied, without scanning the shard.
        assert_eq!(store.check_now("new0", second, both(T0 + SECOND / 2)), full);
        assert_eq!(scans(&store), 0);
        // Expired at the check's time, not yet by the wall clock: still denied.
        let not_idle = Now {
            at: T0 + SECOND,
            wall: T0 + SECOND / 2,
        };
        assert_eq!(store.check_now("new0", second, not_idle), full);
        assert_eq!(store.capacity_denials(), 2);
        // Past the 1 s period by both clocks: the 50 keys of the 1 s rate make room for 50
        // new keys, the hourly ones stay.
        for i in 0..50 {
            assert!(
                store
                    .check_now(&format!("new{i}"), second, both(T0 + SECOND))
                    .allowed
            );
        }
        assert_eq!(store.len(), 100);
        assert_eq!(store.check_now("new50", second, both(T0 + SECOND)), full);
        assert!(!store.check_now("k1", hour, both(T0 + SECOND)).allowed);
        assert_eq!(store.capacity_denials(), 3);
    }

    /// Under a flood of new keys at a full shard whose keys expire one by one, sweeps for room
    /// stay amortised (at most one scan of the shard per `capacity / 8` checks, and one per
    /// regular sweep), and new keys are still admitted about as fast as old ones expire.
    #[test]
    fn sweeps_for_room_are_amortised() {
        const CAPACITY: u64 = 100;
        let rate = Rate::new(1, Duration::from_secs(1)).unwrap();
        // New keys arriving as fast as keys expire (100 a second), then 10 times as fast.
        for spacing in [SECOND / CAPACITY, SECOND / CAPACITY / 10] {
            let store = MemoryStore::with_max_keys(NonZeroUsize::new(CAPACITY as usize));
            let checks = 30 * SECOND / spacing;
            let mut key = String::new();
            let mut admitted = 0;
            for i in 0..checks {
                flood_key(&mut key, 0, i);
                admitted += u64::from(store.check_now(&key, rate, both(T0 + i * spacing)).allowed);
                assert!(store.len() <= CAPACITY as usize);
            }
            let scans = scans(&store) as u64;
            eprintln!(
                "one new key every {spacing} µs: {admitted} of {checks} admitted, {scans} scans"
            );
            // A scan for room per 13 checks at most, and a regular one per 64.
            assert!(scans <= checks / 13 + checks / 64 + 2, "{scans} scans");
            // 30 periods of 100 keys, all but about a period's worth of lag.
            assert!(admitted >= 25 * CAPACITY, "{admitted} admitted");
        }
    }

    /// At the cap, key after key expiring and new ones taking their place, the tables stay
    /// bounded, and denied keys are not stored. The bound is hashbrown's: the sweep leaves
    /// tombstones, and a table out of room for them rehashes in place when at most half full,
    /// else doubles once; so no shard's table outgrows what twice its cap takes (whether and
    /// when a shard doubles depends on the store's random hash key).
    #[test]
    fn the_cap_bounds_the_tables() {
        let store = MemoryStore::with_max_keys(NonZeroUsize::new(1000));
        let rate = Rate::new(1, Duration::from_secs(1)).unwrap();
        let mut key = String::new();
        let mut sizes = Vec::new();
        for round in 0..12 {
            let at = T0 + round * 2 * SECOND;
            let mut admitted = 0;
            for i in 0..3_000 {
                flood_key(&mut key, round, i);
                admitted += usize::from(store.check_now(&key, rate, both(at)).allowed);
            }
            assert_eq!(admitted, 1000, "round {round}");
            assert_eq!(store.len(), 1000, "round {round}");
            let bound = HashTable::<Entry>::with_capacity(2 * store.shard_capacity);
            for shard in &store.shards {
                let bytes = shard.0.lock().unwrap().logs.allocation_size();
                assert!(
                    bytes <= bound.allocation_size(),
                    "round {round}: {bytes} > {}",
                    bound.allocation_size()
                );
            }
            sizes.push(table_bytes(&store));
        }
        eprintln!("table bytes by round: {sizes:?}");
    }
}
