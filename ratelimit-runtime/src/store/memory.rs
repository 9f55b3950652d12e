//! The in-process store: a sliding window log per key in sharded, mutex-guarded maps.
//!
//! Same semantics as the Redis store (see [`crate::Limiter`]); needs no runtime, so it also
//! serves synchronous callers and backs [`FailurePolicy::Local`](crate::FailurePolicy::Local).

use std::collections::VecDeque;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use hashbrown::HashTable;

use crate::{Decision, Rate, clock};

/// A sliding window log per key, in memory.
///
/// Keys whose every admission has left its window are dropped by an amortised sweep, so memory
/// stays proportional to the keys active within their period (times their admissions). A key is
/// dropped only when it is expired both at the sweeping check's time and by the wall clock (its
/// last admission a period ago), so that checks with explicit times far from the wall clock
/// (`check_at`) cannot sweep away keys other callers still count on. A shard
/// sweeps itself once it has seen as many checks as it holds keys (at least 64), and then also
/// sweeps one other shard in turn, so that shards no check reaches any more are emptied too.
pub(crate) struct MemoryStore {
    /// Hashes each key once (keyed SipHash, as `HashMap`'s default, against crafted
    /// collisions): the hash picks the shard and places the key in the shard's table.
    hasher: RandomState,
    shards: Box<[Padded]>,
    /// The next shard swept on behalf of another one.
    sweep_cursor: AtomicUsize,
}

/// A shard on cache lines of its own, so that threads working on neighbouring shards do not
/// contend for one line.
#[derive(Default)]
#[repr(align(128))]
struct Padded(Mutex<Shard>);

#[derive(Default)]
struct Shard {
    /// The logs, placed by the hash of their key (computed once per check, by the store).
    logs: HashTable<Entry>,
    /// Checks since the last sweep; a sweep runs once this reaches the shard's size, so its
    /// cost is amortised to O(1) per check.
    checks_since_sweep: usize,
}

/// One key's log, with the key's hash (to move it when the table grows).
struct Entry {
    hash: u64,
    key: Box<str>,
    log: Log,
}

/// One key's admissions, microseconds since the Unix epoch, sorted ascending.
struct Log {
    admissions: VecDeque<u64>,
    /// When the newest admission leaves its window (µs, on the checks' clock).
    expires_at: u64,
    /// The wall clock (µs) a period after the latest admission was made.
    idle_at: u64,
}

/// The time of a check: the one it is checked at, and the wall clock's.
#[derive(Clone, Copy)]
struct Now {
    at: u64,
    wall: u64,
}

impl MemoryStore {
    pub(crate) fn new() -> MemoryStore {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let count = (cores * 4).next_power_of_two().max(8);
        MemoryStore {
            hasher: RandomState::new(),
            shards: (0..count).map(|_| Padded::default()).collect(),
            sweep_cursor: AtomicUsize::new(0),
        }
    }

    /// Checks `key` against `rate` at `at` (microseconds since the Unix epoch; `None`: the
    /// wall clock) and records the call when it is admitted.
    pub(crate) fn check(&self, key: &str, rate: Rate, at: Option<u64>) -> Decision {
        let wall = clock::now_us();
        let now = Now {
            at: at.unwrap_or(wall),
            wall,
        };
        self.check_now(key, rate, now)
    }

    fn check_now(&self, key: &str, rate: Rate, now: Now) -> Decision {
        let hash = self.hasher.hash_one(key);
        // The map places entries by the hash's low bits: pick the shard by others.
        let index = (hash >> 32) as usize & (self.shards.len() - 1);
        let mut shard = self.shards[index]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let swept = shard.sweep_if_due(now);
        let decision = shard.check(hash, key, rate, now);
        drop(shard);
        if swept {
            self.sweep_another(now);
        }
        decision
    }

    /// Sweeps the shard under the cursor, unless another caller holds it right now.
    fn sweep_another(&self, now: Now) {
        let next = self.sweep_cursor.fetch_add(1, Ordering::Relaxed) & (self.shards.len() - 1);
        if let Ok(mut shard) = self.shards[next].0.try_lock() {
            shard.sweep(now);
        }
    }

    /// How many keys the store holds (including expired ones not yet swept).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                shard
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .logs
                    .len()
            })
            .sum()
    }
}

impl Shard {
    /// Checks the key `key`, whose hash is `hash`, and records its log when it is new.
    fn check(&mut self, hash: u64, key: &str, rate: Rate, now: Now) -> Decision {
        if let Some(entry) = self.logs.find_mut(hash, |entry| *entry.key == *key) {
            return entry.log.check(rate, now);
        }
        let mut log = Log::new();
        let decision = log.check(rate, now);
        let entry = Entry {
            hash,
            key: key.into(),
            log,
        };
        self.logs.insert_unique(hash, entry, |entry| entry.hash);
        decision
    }

    /// Sweeps when due; `true` when it did.
    fn sweep_if_due(&mut self, now: Now) -> bool {
        self.checks_since_sweep += 1;
        let due = self.checks_since_sweep >= self.logs.len().max(64);
        if due {
            self.sweep(now);
        }
        due
    }

    /// Drops the logs whose newest admission has left its window, at `now` and by the wall
    /// clock.
    fn sweep(&mut self, now: Now) {
        self.checks_since_sweep = 0;
        self.logs
            .retain(|entry| entry.log.expires_at > now.at || entry.log.idle_at > now.wall);
    }
}

impl Log {
    fn new() -> Log {
        Log {
            admissions: VecDeque::new(),
            expires_at: 0,
            idle_at: 0,
        }
    }

    fn check(&mut self, rate: Rate, now: Now) -> Decision {
        let period = rate.period_us();
        let now_us = now.at;
        // The window is (now - period, now]: an admission at `t` counts while t + period > now.
        while self
            .admissions
            .front()
            .is_some_and(|&t| t.saturating_add(period) <= now_us)
        {
            self.admissions.pop_front();
        }
        let count = self.admissions.len() as u64;
        let threshold = rate.threshold();
        if count < threshold {
            // Explicit timestamps may arrive out of order: keep the log sorted (in order, the
            // common case, the new admission goes last).
            if self
                .admissions
                .back()
                .is_none_or(|&newest| newest <= now_us)
            {
                self.admissions.push_back(now_us);
            } else {
                let at = self.admissions.partition_point(|&t| t <= now_us);
                self.admissions.insert(at, now_us);
            }
            let newest = *self.admissions.back().unwrap_or(&now_us);
            self.expires_at = self.expires_at.max(newest.saturating_add(period));
            self.idle_at = self.idle_at.max(now.wall.saturating_add(period));
            Decision::admitted(
                threshold,
                threshold - count - 1,
                micros(newest + period - now_us),
            )
        } else {
            // The count falls below the threshold when the admission at index
            // `count - threshold` (the oldest one, unless the log holds more) leaves.
            let freeing = self.admissions[(count - threshold) as usize];
            let newest = *self.admissions.back().unwrap_or(&freeing);
            Decision::denied(
                threshold,
                micros(freeing + period - now_us),
                micros(newest + period - now_us),
            )
        }
    }
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

    #[test]
    fn out_of_order_timestamps_stay_sorted() {
        let store = MemoryStore::new();
        let rate = Rate::new(3, Duration::from_secs(10)).unwrap();
        assert!(store.check("k", rate, Some(5 * SECOND)).allowed);
        assert!(store.check("k", rate, Some(2 * SECOND)).allowed);
        assert!(store.check("k", rate, Some(4 * SECOND)).allowed);
        let denied = store.check("k", rate, Some(6 * SECOND));
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
        assert!(store.check("victim", rate, None).allowed);
        let hour_ahead = clock::now_us() + 3_600 * SECOND;
        for i in 0..20_000 {
            store.check(&format!("other{}", i % 8), rate, Some(hour_ahead));
        }
        assert!(!store.check("victim", rate, None).allowed);
    }
}
