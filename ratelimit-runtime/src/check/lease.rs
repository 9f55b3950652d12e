//! Quota leases of a remote store's hot keys ([`Rate::leased`]), the state a process keeps of
//! them (`leased.rs` is the check that goes through them): a process reserves
//! admissions of a key in one script and spends them without a round trip, until the lease
//! ends, then gives back what it did not spend.
//!
//! Exactness rests on the store (`store/redis/lease.lua` states the recording that keeps its
//! bound over the times the reserve is really spent); this module keeps the process's side:
//!
//! - a reserve is spent only before the lease's end as the store set it: `lasts` from the
//!   store's now, counted here on the monotonic clock from before the script was sent (the
//!   store ran it later), less a thousandth for the clocks' drift;
//! - each reserved member is spent once (`left` counts down under the table's lock: members
//!   `left`, `left − 1`, … 1), and what is given back is exactly the unspent ones, members
//!   `1..=left`, taken out of the lease under that lock, once: the store's exact refund
//!   of an admission of that cost;
//! - a lease whose outcome is unknown (a timeout, a lost reply) is never spent: its
//!   recording, if any, leaves the window with it;
//! - the renewal runs handed off to the runtime, holding the lease's lock until it installs
//!   its grant, so a caller that stops waiting never strands a reserve (nor lets a second
//!   renewal overwrite one);
//! - a reset, by this process or another, keeps the reserves of the leases that may still be
//!   spent, so a lease goes on through it (the store contract's "Resets");
//! - one renewal at a time per key and rate, so that only a limiter's current lease of a key
//!   may still be spent: what a reset of a counter keeps (`counter.lua`'s lease record).
//!
//! Sizing: a lease asks for `size` admissions (the call at hand included), starting at 1 (a
//! plain check): `size` doubles when a lease was spent before its end, halves when one ended
//! with a reserve to give back, and never exceeds [`max_size`] (a sixteenth of the threshold,
//! at most [`Limit::MAX_COST`](crate::Limit::MAX_COST)), so that a small threshold is never
//! leased away by one process. A lease lasts a sixteenth of the period, at most a second.
//!
//! One renewal at a time per lease: the checks that find it empty while it is renewed wait
//! for it (at most the store's timeout), then spend its reserve, or share its denial (its
//! retry-after counted down), or, when it failed or left them nothing, are checked on their
//! own, side by side. A rate whose lease could hold no reserve (a threshold below 32) is never
//! leased: its checks are plain ones.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hashbrown::HashTable;
use smol_str::SmolStr;

use crate::decision::Decision;
use crate::limit::{Grant, Limit, LimitRef};
use crate::rate::Rate;
use crate::store::Admission;

/// The table holds at least this many leases before it sweeps out idle ones.
const SWEEP_FROM: usize = 1_024;

/// The most admissions a lease of `rate` asks for, the call at hand included: a sixteenth of
/// the threshold (at least 1: a plain check), at most [`Limit::MAX_COST`].
pub(super) fn max_size(rate: Rate) -> u32 {
    let share = (rate.threshold() / 16).clamp(1, u64::from(Limit::MAX_COST));
    u32::try_from(share).unwrap_or(Limit::MAX_COST)
}

/// How long a lease of `rate` lasts: a sixteenth of its period in whole microseconds (the
/// store's unit), at most a second, at least a microsecond.
pub(super) fn lasts(rate: Rate) -> Duration {
    Duration::from_micros((rate.period_us() / 16).clamp(1, 1_000_000))
}

/// A process's leases, one per key and rate.
pub(crate) struct Leases {
    table: Mutex<Table>,
    /// Notified when every lease ends early ([`Leases::end_all`]): the timers of leases with
    /// a reserve wake then, and give it back.
    ended: event_listener::Event,
    /// With the deny cache on, its time to live: a lease's last denial answers the checks
    /// that find it spent, while it lasts (at most that long), as the deny cache would.
    deny_ttl: Option<Duration>,
}

/// What a look at a lease found, without I/O.
pub(super) enum Spent {
    /// A member of the reserve, spent.
    Admitted(Decision),
    /// The lease's last denial, counted down, which still holds (see [`Leases::new`]).
    Denied(Decision),
    /// Nothing to spend: the check goes on to the store.
    Nothing,
}

/// The leases, their state under the table's one lock (a leased check takes one lock).
#[derive(Default)]
struct Table {
    /// Each lease with its key and rate, hashed by the key alone (a key checked under several
    /// rates is rare, and hashing the rate's fields too cost each look-up), so that a key's
    /// entries are found by its hash: forgetting its denials visits them only.
    leases: HashTable<(Leased, Entry)>,
    /// Std's `RandomState` (SipHash with a random key): keys are the callers'.
    hasher: RandomState,
    /// The entries the last [`Leases::forget_denials`] visited (a unit test's reading).
    #[cfg(test)]
    visited: usize,
    /// The table's size that triggers the next sweep.
    sweep_at: usize,
    /// The checks that leases' denials answered (counted among the deny cache's answers),
    /// counted under the lock the check holds anyway.
    denials_answered: u64,
}

/// A lease's key in the table: a key and a rate. A key of up to 23 bytes is kept inline
/// (`SmolStr`), so that a look-up reads no other memory.
struct Leased {
    key: SmolStr,
    rate: Rate,
}

impl Table {
    /// The hash of `key`, which its entries are found by.
    #[inline]
    fn hash(&self, key: &str) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The entry of `key`'s lease under `rate`.
    #[inline]
    fn get_mut(&mut self, key: &str, rate: Rate) -> Option<&mut Entry> {
        let hash = self.hash(key);
        self.leases
            .find_mut(hash, |(leased, _)| {
                *leased.key == *key && leased.rate == rate
            })
            .map(|(_, entry)| entry)
    }

    /// Adds the entry of a lease the table does not hold.
    fn insert(&mut self, limit: LimitRef<'_>, entry: Entry) {
        let Table { leases, hasher, .. } = self;
        let leased = Leased {
            key: limit.key.into(),
            rate: limit.rate,
        };
        leases.insert_unique(
            hasher.hash_one(limit.key),
            (leased, entry),
            |(leased, _)| hasher.hash_one(leased.key.as_str()),
        );
    }
}

/// One key's lease under one rate.
struct Entry {
    state: State,
    /// Held by whoever is renewing it or waiting to: a sweep keeps the entry while it is.
    lease: Lease,
}

/// The lock a lease's renewal holds until its grant is installed (in the renewal's handed-off
/// future, so that a caller that stops waiting does not let another renewal start beside it);
/// the checks that find nothing to spend wait on it.
pub(super) type Lease = Arc<async_lock::Mutex<()>>;

struct State {
    /// The current lease's name: its members are `<name>.0` (the call that took it) and
    /// `<name>.1..` (the reserve).
    name: Admission,
    /// The unspent reserve: members `1..=left`.
    left: u32,
    /// The process that holds the reserve (its id when the lease was installed). A process
    /// `fork()`ed meanwhile holds a copy of the table: the reserve is its parent's, which
    /// spends it and gives it back, so the child neither spends nor gives back any of it.
    owner: u32,
    /// Until when the reserve may be spent (this process's clock).
    ends: Instant,
    /// The lease's time on the store's clock, which its give-back names.
    now: u64,
    /// The store's count with this lease, at its grant: what other processes held then.
    count: u64,
    /// When the window empties, as the store said at the grant.
    empties: Instant,
    /// Renewals completed so far.
    generation: u64,
    /// How the last one went.
    last: Outcome,
    /// What the next lease asks for (the call at hand included).
    size: u32,
    /// The last lease ended with a reserve to give back (and was sized down for it): the next
    /// is not sized up.
    gave_back: bool,
    /// Until when the last denial answers the checks that find nothing to spend (with the
    /// deny cache on): the denial, and when it came.
    denied: Option<(Decision, Instant, Instant)>,
    /// The renewal on its way, if any: its token and when it began. Only it is installed; a
    /// renewal whose caller stopped waiting stays on its way (handed off), and while it is
    /// younger than the store's timeout no other starts.
    renewing: Option<(u64, Instant)>,
    /// The next renewal's token.
    tokens: u64,
}

/// How a renewal went.
#[derive(Clone, Copy)]
enum Outcome {
    /// Admitted, with or without a reserve (or none was made yet).
    Granted,
    /// Denied, with this decision, at this time.
    Denied(Decision, Instant),
    /// The store did not answer.
    Failed,
}

/// What the unspent reserve of a lease that ended is given back as: its members `1..=left`.
pub(super) struct GiveBack {
    pub(super) name: Admission,
    pub(super) left: u32,
    pub(super) now: u64,
}

/// A renewal as its install names it: its token, the lease's name, and when it was sent.
pub(super) struct Renewal {
    pub(super) token: u64,
    pub(super) name: Admission,
    pub(super) sent: Instant,
}

/// What a check that waited for the renewal does next.
pub(super) enum AfterWait {
    /// Answered by the renewal it waited for: a member of its reserve, or its denial.
    Answered(Decision),
    /// Renews, asking for `wanted`, after giving back what the ended lease left; `token`
    /// names the renewal (only its own is installed).
    Renew {
        wanted: u32,
        give_back: Option<GiveBack>,
        token: u64,
    },
    /// The renewal it waited for failed, or left nothing to spend: checked on its own, as a
    /// check of no lease is.
    Direct,
}

impl State {
    fn new() -> State {
        let now = Instant::now();
        State {
            name: Admission::default(),
            left: 0,
            owner: 0,
            ends: now,
            now: 0,
            count: 0,
            empties: now,
            generation: 0,
            last: Outcome::Granted,
            size: 1,
            gave_back: false,
            denied: None,
            renewing: None,
            tokens: 0,
        }
    }

    /// Spends a member of the reserve at `at`, if one is left, the lease has not ended and
    /// this process holds it.
    #[inline]
    fn spend(&mut self, rate: Rate, at: Instant) -> Option<Decision> {
        if self.left == 0 || at >= self.ends || !self.owned() {
            return None;
        }
        self.left -= 1;
        let threshold = rate.threshold();
        let remaining = threshold.saturating_sub(self.count) + u64::from(self.left);
        Some(Decision::admitted(
            threshold,
            remaining,
            self.empties.saturating_duration_since(at),
        ))
    }

    /// The unspent reserve of a lease that ended (none while it lasts), taken out of it,
    /// once; the lease is sized down for it.
    fn take_ended(&mut self, rate: Rate, at: Instant) -> Option<GiveBack> {
        if self.left == 0 || at < self.ends || !self.owned() {
            return None;
        }
        let left = std::mem::take(&mut self.left);
        self.size = (self.size / 2).max(1).min(max_size(rate));
        self.gave_back = true;
        Some(GiveBack {
            name: self.name,
            left,
            now: self.now,
        })
    }
}

impl State {
    /// Whether this process holds the reserve; if it does not (it was `fork()`ed since the
    /// lease was installed), the reserve is dropped here, once. Read only where a reserve is
    /// spent or given back: the process id is a system call (about 80 ns on the machine of
    /// BENCHMARKS.md), which a denial answered in process does not pay.
    fn owned(&mut self) -> bool {
        if self.owner == std::process::id() {
            return true;
        }
        self.left = 0;
        false
    }
}

impl Leases {
    /// No leases yet; `deny_ttl`: the deny cache's time to live, when it is on.
    pub(crate) fn new(deny_ttl: Option<Duration>) -> Leases {
        Leases {
            table: Mutex::default(),
            ended: event_listener::Event::new(),
            deny_ttl,
        }
    }

    /// The checks a lease's last denial answered.
    pub(crate) fn denials_answered(&self) -> u64 {
        self.lock().denials_answered
    }

    /// Spends a member of the reserve of `limit`'s lease, without I/O, if it holds one; or,
    /// with the deny cache on, answers with the lease's last denial while it holds.
    #[inline]
    pub(super) fn spend(&self, limit: LimitRef<'_>) -> Spent {
        let mut table = self.lock();
        let table = &mut *table;
        let Some(Entry { state, .. }) = table.get_mut(limit.key, limit.rate) else {
            return Spent::Nothing;
        };
        let at = Instant::now();
        if let Some(decision) = state.spend(limit.rate, at) {
            return Spent::Admitted(decision);
        }
        match state.denied {
            Some((denial, when, until)) if at < until => {
                table.denials_answered += 1;
                Spent::Denied(counted_down(denial, when, at))
            }
            Some(_) => {
                state.denied = None;
                Spent::Nothing
            }
            None => Spent::Nothing,
        }
    }

    /// Drops the remembered denials of `key`'s leases (a refund or a reset freed its window):
    /// it visits the entries of `key`'s hash only.
    pub(crate) fn forget_denials(&self, key: &str) {
        let mut table = self.lock();
        let table = &mut *table;
        let hash = table.hash(key);
        #[cfg(test)]
        {
            table.visited = 0;
        }
        for (leased, entry) in table.leases.iter_hash_mut(hash) {
            #[cfg(test)]
            {
                table.visited += 1;
            }
            if *leased.key == *key {
                entry.state.denied = None;
            }
        }
    }

    /// Drops the remembered denials of the leases of the keys `forgotten` names (a reset by
    /// scope): a pass over the table. Their reserves stay to be spent: a reset keeps what
    /// live leases reserved.
    pub(crate) fn forget_denials_where(&self, mut forgotten: impl FnMut(&str) -> bool) {
        let mut table = self.lock();
        for (leased, entry) in &mut table.leases {
            if forgotten(&leased.key) {
                entry.state.denied = None;
            }
        }
    }

    /// Ends every lease now (the limits changed): nothing more of a reserve installed so far
    /// is spent, and what is left is given back as for a lease that ended, by its timer,
    /// woken now (on the runtime it runs on, whatever thread changed the limits); the
    /// remembered denials are dropped.
    pub(crate) fn end_all(&self) {
        let now = Instant::now();
        let mut table = self.lock();
        for (_, entry) in &mut table.leases {
            entry.state.ends = entry.state.ends.min(now);
            entry.state.denied = None;
        }
        // Under the table's lock: a lease installed after this pass (by a renewal on its way)
        // is installed after the notification too, so its timer, which listens before it
        // reads its lease, is not woken by it (and waits for its own end).
        self.ended.notify(usize::MAX);
    }

    /// Waits until the lease of `limit` named `name` has ended: at its end, or when
    /// [`end_all`](Leases::end_all) ends it early; at once when `limit`'s lease is another one
    /// by then (installed over it, which gave its reserve back). A lease's timer awaits this,
    /// then gives back what is left.
    pub(super) async fn until_ended(&self, limit: LimitRef<'_>, name: &Admission) {
        loop {
            // Listened to before the lease is read, so that no early end between the two is
            // missed.
            let ended = self.ended.listen();
            let left = self.with(limit, |state| {
                (state.name == *name).then(|| state.ends.saturating_duration_since(Instant::now()))
            });
            match left {
                Some(left) if !left.is_zero() => {
                    let sleep = std::pin::pin!(crate::runtime::sleep(left));
                    futures_util::future::select(sleep, ended).await;
                }
                _ => return,
            }
        }
    }

    /// `limit`'s lease, made when it has none.
    pub(super) fn lease(&self, limit: LimitRef<'_>) -> Lease {
        let mut table = self.lock();
        if let Some(entry) = table.get_mut(limit.key, limit.rate) {
            return Arc::clone(&entry.lease);
        }
        if table.leases.len() >= table.sweep_at.max(SWEEP_FROM) {
            let now = Instant::now();
            // Leases nobody renews or waits on, with nothing to spend or give back: their
            // size is all they keep.
            table.leases.retain(|(_, entry)| {
                Arc::strong_count(&entry.lease) > 1
                    || (entry.state.left > 0 && now < entry.state.ends)
            });
            table.sweep_at = 2 * table.leases.len();
        }
        let lease = Lease::default();
        let entry = Entry {
            state: State::new(),
            lease: Arc::clone(&lease),
        };
        table.insert(limit, entry);
        lease
    }

    /// Runs `f` on `limit`'s lease state (made afresh if a sweep took it: it does not while
    /// a check holds its [`Lease`]).
    fn with<T>(&self, limit: LimitRef<'_>, f: impl FnOnce(&mut State) -> T) -> T {
        let mut table = self.lock();
        if let Some(entry) = table.get_mut(limit.key, limit.rate) {
            return f(&mut entry.state);
        }
        let mut state = State::new();
        let answer = f(&mut state);
        let lease = Lease::default();
        table.insert(limit, Entry { state, lease });
        answer
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic under this lock leaves the table whole: every change is one call.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `denial`, given at `when`, as it stands at `at`: its waits counted down.
fn counted_down(denial: Decision, when: Instant, at: Instant) -> Decision {
    let waited = at.saturating_duration_since(when);
    Decision {
        retry_after: denial.retry_after.map(|r| r.saturating_sub(waited)),
        reset_after: denial.reset_after.saturating_sub(waited),
        ..denial
    }
}

impl Leases {
    /// Renewals of `limit`'s lease completed so far.
    pub(super) fn generation(&self, limit: LimitRef<'_>) -> u64 {
        self.with(limit, |state| state.generation)
    }

    /// The unspent reserve of `limit`'s lease if it ended, taken out of it (see
    /// [`State::take_ended`]).
    pub(super) fn take_ended(&self, limit: LimitRef<'_>) -> Option<GiveBack> {
        self.with(limit, |state| state.take_ended(limit.rate, Instant::now()))
    }

    /// What a check of `limit` that saw `seen` renewals before it waited does, now that it
    /// holds the renewal's lock; `timeout`: the store's.
    pub(super) fn after_wait(
        &self,
        limit: LimitRef<'_>,
        seen: u64,
        timeout: Duration,
    ) -> AfterWait {
        self.with(limit, |state| state.after_wait(limit.rate, seen, timeout))
    }

    /// Forgets `limit`'s renewal `token`, which never began (no runtime to run it on).
    pub(super) fn abandon(&self, limit: LimitRef<'_>, token: u64) {
        self.with(limit, |state| {
            if state.renewing.is_some_and(|(current, _)| current == token) {
                state.renewing = None;
            }
        });
    }

    /// Installs the outcome of `limit`'s renewal `token` (see [`State::install`]); returns
    /// a reserve to give back at once: a lease it replaced left it, or it was not this
    /// lease's renewal any more.
    pub(super) fn install(
        &self,
        limit: LimitRef<'_>,
        renewal: Renewal,
        grant: Option<&Grant>,
    ) -> Option<GiveBack> {
        let deny_ttl = self.deny_ttl;
        self.with(limit, |state| state.install(renewal, grant, deny_ttl))
    }
}

impl State {
    /// What a check that saw `seen` renewals before it waited does, now that it holds the
    /// renewal's lock.
    fn after_wait(&mut self, rate: Rate, seen: u64, timeout: Duration) -> AfterWait {
        let at = Instant::now();
        let state = self;
        if let Some(decision) = state.spend(rate, at) {
            return AfterWait::Answered(decision);
        }
        match state.last {
            // The renewal it waited for was denied: so is this call, while that denial's
            // retry-after lasts.
            Outcome::Denied(denial, when) if state.generation != seen => {
                let denial = counted_down(denial, when, at);
                if denial.retry_after.is_some_and(|r| !r.is_zero()) {
                    return AfterWait::Answered(denial);
                }
            }
            // The renewal it waited for failed, or granted nothing left for it: checked on
            // its own, beside the others (never one renewal after another).
            Outcome::Failed | Outcome::Granted if state.generation != seen => {
                return AfterWait::Direct;
            }
            _ => {}
        }
        if let Some((_, began)) = state.renewing
            && at.saturating_duration_since(began) < timeout
        {
            // A renewal whose caller stopped waiting is still on its way: not a second one
            // beside it (nor a wait on a runtime that may not drive it).
            return AfterWait::Direct;
        }
        let give_back = state.take_ended(rate, at);
        if give_back.is_none()
            && !state.gave_back
            && state.generation > 0
            && matches!(state.last, Outcome::Granted)
        {
            // The last lease was spent before it ended (or was the call alone): a larger one.
            state.size = state.size.saturating_mul(2).min(max_size(rate));
        }
        let token = state.tokens;
        state.tokens += 1;
        state.renewing = Some((token, at));
        AfterWait::Renew {
            wanted: state.size,
            give_back,
            token,
        }
    }

    /// Installs a renewal's outcome, sent at `sent`: its reserve, or its denial; `None`: it
    /// failed, and nothing may be spent.
    fn install(
        &mut self,
        renewal: Renewal,
        grant: Option<&Grant>,
        deny_ttl: Option<Duration>,
    ) -> Option<GiveBack> {
        let Renewal { token, name, sent } = renewal;
        let state = self;
        if state.renewing.map(|(current, _)| current) != Some(token) {
            // Another renewal began since (this one outlived the store's timeout): its reserve,
            // none of it spent, goes back at once.
            return grant
                .filter(|grant| grant.reserved > 0)
                .map(|grant| GiveBack {
                    name,
                    left: grant.reserved,
                    now: grant.now,
                });
        }
        state.renewing = None;
        state.denied = None;
        state.generation += 1;
        let Some(grant) = grant else {
            state.last = Outcome::Failed;
            return None;
        };
        let at = Instant::now();
        if !grant.decision.allowed {
            state.last = Outcome::Denied(grant.decision, at);
            if let (Some(ttl), Some(retry_after)) = (deny_ttl, grant.decision.retry_after) {
                state.denied = Some((grant.decision, at, at + retry_after.min(ttl)));
            }
            return None;
        }
        state.last = Outcome::Granted;
        // One renewal at a time, after the last lease was spent or ended: a lease still
        // holding a reserve here is given back, never overwritten (unless it is a parent
        // process's, which that process gives back).
        let replaced = (state.left > 0 && state.owned()).then(|| GiveBack {
            name: state.name,
            left: std::mem::take(&mut state.left),
            now: state.now,
        });
        state.name = name;
        state.left = grant.reserved;
        state.owner = std::process::id();
        // The store's clock may run a little faster: a thousandth of the lease is kept back.
        state.ends = sent + grant.lasts.saturating_sub(grant.lasts / 1_000);
        state.now = grant.now;
        state.count = grant.count;
        state.gave_back = false;
        state.empties = at + grant.decision.reset_after;
        replaced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn rate(threshold: u64) -> Rate {
        Rate::new(threshold, Duration::from_secs(60))
            .unwrap()
            .leased()
    }

    /// A grant of the call and `reserved` more, lasting `lasts`, with `count` in the window.
    fn grant(threshold: u64, count: u64, reserved: u32, lasts: Duration) -> Grant {
        Grant {
            decision: Decision::admitted(
                threshold,
                threshold - count + u64::from(reserved),
                Duration::from_secs(61),
            ),
            count,
            reserved,
            now: 1_700_000_000_000_000,
            lasts,
        }
    }

    fn name(byte: u8) -> Admission {
        [byte; 22]
    }

    /// A renewal of `state`, begun now and sent at `sent`, installed with `grant`.
    fn renewed(
        state: &mut State,
        byte: u8,
        sent: Instant,
        grant: Option<&Grant>,
    ) -> Option<GiveBack> {
        let token = state.tokens;
        state.tokens += 1;
        state.renewing = Some((token, Instant::now()));
        let renewal = Renewal {
            token,
            name: name(byte),
            sent,
        };
        state.install(renewal, grant, None)
    }

    #[test]
    fn sizes_and_lengths_have_their_bounds() {
        assert_eq!(max_size(rate(31)), 1, "below 32: never leased");
        assert_eq!(max_size(rate(32)), 2);
        assert_eq!(max_size(rate(1_000)), 62);
        assert_eq!(max_size(rate(Rate::MAX_THRESHOLD)), Limit::MAX_COST);
        let short = Rate::new(100, Duration::from_millis(1)).unwrap();
        assert_eq!(lasts(short), Duration::from_micros(62));
        assert_eq!(
            lasts(Rate::new(100, Duration::from_secs(8)).unwrap()),
            Duration::from_millis(500)
        );
        let day = Rate::new(100, Duration::from_secs(86_400)).unwrap();
        assert_eq!(lasts(day), SECOND, "at most a second");
    }

    #[test]
    fn a_reserve_is_spent_once_each_highest_first_and_only_before_its_end() {
        let mut state = State::new();
        let sent = Instant::now();
        assert!(renewed(&mut state, 1, sent, Some(&grant(1_000, 40, 3, SECOND))).is_none());
        let at = sent + Duration::from_millis(10);
        // Remaining: the store's 960 left with this lease, plus what it still holds.
        let first = state.spend(rate(1_000), at).unwrap();
        assert_eq!((first.remaining, state.left), (962, 2));
        assert!(state.spend(rate(1_000), at).is_some());
        assert!(state.spend(rate(1_000), at).is_some());
        assert!(
            state.spend(rate(1_000), at).is_none(),
            "three members, three spends"
        );
        let mut state = State::new();
        renewed(&mut state, 2, sent, Some(&grant(1_000, 40, 3, SECOND)));
        // A thousandth of the lease is kept back for the clocks' drift.
        assert!(
            state
                .spend(rate(1_000), sent + SECOND - Duration::from_millis(1))
                .is_none()
        );
        assert!(
            state
                .spend(rate(1_000), sent + Duration::from_millis(998))
                .is_some()
        );
    }

    #[test]
    fn an_ended_lease_gives_back_its_unspent_members_once() {
        let mut state = State::new();
        let sent = Instant::now();
        state.size = 8;
        renewed(&mut state, 3, sent, Some(&grant(1_000, 8, 7, SECOND)));
        state.spend(rate(1_000), sent);
        assert!(
            state.take_ended(rate(1_000), sent).is_none(),
            "not before it ends"
        );
        let back = state.take_ended(rate(1_000), sent + SECOND).unwrap();
        assert_eq!((back.name, back.left), (name(3), 6), "members 1..=6");
        assert_eq!(state.size, 4, "halved for what it gave back");
        assert!(
            state.take_ended(rate(1_000), sent + SECOND).is_none(),
            "once"
        );
    }

    /// A `fork()`ed child holds a copy of its parent's table: it neither spends nor gives
    /// back the parent's reserve (which the parent does), and takes leases of its own.
    #[test]
    fn a_forked_process_neither_spends_nor_gives_back_its_parents_reserve() {
        let sent = Instant::now();
        let parent = std::process::id().wrapping_add(1);
        let mut state = State::new();
        renewed(&mut state, 6, sent, Some(&grant(1_000, 8, 7, SECOND)));
        state.owner = parent;
        assert!(state.spend(rate(1_000), sent).is_none(), "the parent's");
        assert_eq!(state.left, 0, "dropped here");
        assert!(state.take_ended(rate(1_000), sent + SECOND).is_none());
        let mut state = State::new();
        renewed(&mut state, 7, sent, Some(&grant(1_000, 8, 7, SECOND)));
        state.owner = parent;
        assert!(state.take_ended(rate(1_000), sent + SECOND).is_none());
        let mut state = State::new();
        renewed(&mut state, 8, sent, Some(&grant(1_000, 8, 7, SECOND)));
        state.owner = parent;
        let replaced = renewed(&mut state, 9, sent, Some(&grant(1_000, 16, 5, SECOND)));
        assert!(replaced.is_none(), "not given back by the child");
        assert!(state.spend(rate(1_000), sent).is_some(), "its own lease");
        assert_eq!(state.left, 4);
    }

    #[test]
    fn an_install_never_overwrites_a_reserve() {
        let mut state = State::new();
        let sent = Instant::now();
        renewed(&mut state, 4, sent, Some(&grant(1_000, 8, 7, SECOND)));
        let replaced = renewed(&mut state, 5, sent, Some(&grant(1_000, 16, 7, SECOND))).unwrap();
        assert_eq!((replaced.name, replaced.left), (name(4), 7));
        assert_eq!(state.left, 7);
        // A renewal that is not the lease's own any more (another began since) gives its whole
        // reserve back, and changes nothing.
        let stale = Renewal {
            token: 999,
            name: name(10),
            sent,
        };
        let back = state
            .install(stale, Some(&grant(1_000, 32, 7, SECOND)), None)
            .unwrap();
        assert_eq!((back.name, back.left, state.left), (name(10), 7, 7));
    }

    /// Forgetting a key's denials (every give-back and refund does, with the deny cache on)
    /// visits the entries of its hash, not the table: on a table of 100,000 leases, a handful.
    #[test]
    fn forgetting_a_keys_denials_visits_its_own_entries_only() {
        let leases = Leases::new(Some(SECOND));
        let rate = rate(1_000);
        let other = Rate::new(999, Duration::from_secs(60)).unwrap().leased();
        let denial = Decision::denied(1_000, SECOND, SECOND);
        let keys: Vec<String> = (0..100_000).map(|i| format!("user:{i}")).collect();
        // Held, as a renewal holds them: no sweep takes their entries.
        let mut held = Vec::new();
        for key in &keys {
            let rates: &[Rate] = if key == "user:7" {
                &[rate, other]
            } else {
                &[rate]
            };
            for &rate in rates {
                let limit = LimitRef { key, rate, cost: 1 };
                held.push(leases.lease(limit));
                let now = Instant::now();
                leases.with(limit, |state| {
                    state.denied = Some((denial, now, now + SECOND));
                });
            }
        }
        leases.forget_denials("user:7");
        let table = leases.lock();
        let visited = table.visited;
        assert!(
            (2..=16).contains(&visited),
            "visited {visited} of 100,001 entries"
        );
        let denied = |key: &str| {
            table
                .leases
                .iter()
                .filter(|(leased, entry)| *leased.key == *key && entry.state.denied.is_some())
                .count()
        };
        assert_eq!(denied("user:7"), 0, "both of its rates forgotten");
        assert_eq!(denied("user:8"), 1, "another key's kept");
    }

    #[test]
    fn waiters_share_a_denial_go_on_their_own_after_a_failure_or_an_empty_grant_and_leases_grow() {
        let rate = rate(1_000);
        let sent = Instant::now();
        let mut state = State::new();
        assert!(matches!(
            state.after_wait(rate, 0, SECOND),
            AfterWait::Renew { wanted: 1, .. }
        ));
        // The call alone (no reserve): those who waited for it go on their own...
        renewed(&mut state, 7, sent, Some(&grant(1_000, 1, 0, SECOND)));
        assert!(matches!(
            state.after_wait(rate, 0, SECOND),
            AfterWait::Direct
        ));
        // ... and the next renewal, the last one spent, asks for twice as many.
        assert!(matches!(
            state.after_wait(rate, 1, SECOND),
            AfterWait::Renew { wanted: 2, .. }
        ));
        let denial = Decision::denied(1_000, Duration::from_secs(5), Duration::from_secs(60));
        let denied = Grant {
            decision: denial,
            ..grant(1_000, 1_000, 0, SECOND)
        };
        renewed(&mut state, 8, sent, Some(&denied));
        match state.after_wait(rate, 1, SECOND) {
            AfterWait::Answered(decision) => {
                assert!(!decision.allowed);
                assert!(decision.retry_after.unwrap() <= Duration::from_secs(5));
            }
            _ => panic!("the denial it waited for is shared"),
        }
        assert!(
            matches!(state.after_wait(rate, 2, SECOND), AfterWait::Renew { .. }),
            "a check that came after it asks the store"
        );
        renewed(&mut state, 9, sent, None);
        assert!(matches!(
            state.after_wait(rate, 2, SECOND),
            AfterWait::Direct
        ));
    }

    /// Ending every lease (the limits changed) stops its reserve at once, drops its remembered
    /// denial, and wakes its timer, which gives back the rest once; a lease installed after
    /// that (a renewal that was on its way) is not ended by it: its timer waits for its own
    /// end, or the next change. Each lease here lasts an hour: a timer that returns was woken.
    #[test]
    fn ending_every_lease_stops_its_reserve_and_wakes_its_timer() {
        const HOUR: Duration = Duration::from_secs(3_600);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let leases = Arc::new(Leases::new(Some(SECOND)));
            let limit = LimitRef {
                key: "k",
                rate: rate(1_000),
                cost: 1,
            };
            let install = |byte: u8| {
                leases.with(limit, |state| {
                    renewed(
                        state,
                        byte,
                        Instant::now(),
                        Some(&grant(1_000, 40, 7, HOUR)),
                    )
                })
            };
            let timer = |byte: u8| {
                let leases = Arc::clone(&leases);
                tokio::spawn(async move {
                    let limit = LimitRef {
                        key: "k",
                        rate: rate(1_000),
                        cost: 1,
                    };
                    leases.until_ended(limit, &name(byte)).await;
                })
            };
            let _ = leases.lease(limit);
            assert!(install(1).is_none());
            assert!(matches!(leases.spend(limit), Spent::Admitted(_)));
            assert!(matches!(leases.spend(limit), Spent::Admitted(_)));
            let first = timer(1);
            tokio::task::yield_now().await;
            assert!(!first.is_finished(), "waiting for its lease's end");

            leases.end_all();
            first.await.expect("woken by the change");
            assert!(
                matches!(leases.spend(limit), Spent::Nothing),
                "nothing more is spent"
            );
            let back = leases.take_ended(limit).expect("the rest given back");
            assert_eq!(back.left, 5, "7 reserved, 2 spent");
            assert!(leases.take_ended(limit).is_none(), "once");

            // A renewal installed after the change: its own end, or the next change.
            leases.with(limit, |state| state.renewing = None);
            assert!(install(2).is_none());
            let second = timer(2);
            tokio::task::yield_now().await;
            assert!(!second.is_finished(), "not ended by the change before it");
            assert!(matches!(leases.spend(limit), Spent::Admitted(_)));
            leases.end_all();
            second.await.expect("woken by the next change");
            assert_eq!(leases.take_ended(limit).map(|back| back.left), Some(6));
            // A timer of a lease another was installed over returns at once.
            timer(1).await.expect("not its lease any more");
        });
    }
}
