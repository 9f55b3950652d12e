//! The stores a limiter keeps its logs in, behind one seam: [`Store`], its dispatch, and the
//! contract every store keeps.
//!
//! # The contract
//!
//! A store decides checks. A check asks, at one time, for the admission of one call under its
//! limit: a [`LimitRef`] is a key checked against a [`Rate`](crate::Rate) by the rate's
//! [algorithm](crate::Algorithm). Every store keeps these rules, and
//! `tests/tests/suite/store_conformance.rs` and `tests/tests/suite/counter.rs` run the same
//! semantics against each:
//!
//! - **Time** is integer microseconds since the Unix epoch: the check's explicit time (`at`,
//!   from `Limiter::check_at`, or a `ManualClock`'s time), else the store's own clock: the wall clock in process, the
//!   Redis server's `TIME` in Redis (one clock for every application server, whatever theirs
//!   say).
//! - **The sliding window log**: a limit admits a call at `now`
//!   iff fewer than `threshold` admissions of its key lie in the window `(now − period, now]`
//!   (an admission at `t` stops counting at exactly `t + period`); admissions recorded later
//!   than `now` (explicit times out of order, a server clock stepped back) count as in the
//!   window, so no window of length `period` ever holds more than `threshold`. An admission
//!   is recorded as an entry of its own, even many in one microsecond; in Redis it is a member
//!   unique across processes, which the script recognises when a call is resent and counts
//!   once. Denied calls record nothing.
//! - **The sliding window counter** (`counter.rs`, whose arithmetic both stores share: `u128`
//!   in process, integer halves in `counter.lua`): two fixed windows of length `period` per
//!   key, aligned to multiples of it since the Unix epoch; a call fits iff
//!   `prev · (P − e) + (cur + cost) · P ≤ T · P`, and is added to `cur`. Its state is apart
//!   from the log's: in Redis a hash under the key with
//!   [`COUNTER_SUFFIX`](crate::layout::COUNTER_SUFFIX) after it (a field per period), in
//!   process a table of its own (an entry per key and period): each period of a key is a
//!   counter of its own, and a refund leaves a counter first written after its check alone. Denied calls record nothing; a
//!   resend is recognised only through a log limit of the same call (a call of counters only
//!   may be counted twice when its connection closed mid-call).
//! - **Atomic**: a check is decided and recorded in one step that no other check of the key
//!   interleaves with: one Lua script on one server (or one cluster slot), one shard lock in
//!   process.
//! - **Answers**: an admission says how many admissions remain and when the window empties
//!   (`reset_after`: the newest admission + period − now); a denial says when the count falls
//!   below the threshold (`retry_after`: the admission at rank `count − threshold` among those
//!   counted, oldest first, + period − now: the oldest one unless the window holds more than
//!   `threshold`, as it can after a lower threshold or admissions later than now), exact for
//!   the log; for the counter, exact for its estimate: the first microsecond at which the
//!   call fits, no other call admitted before (`reset_after`: until the estimate is 0). A new
//!   key denied because the in-process store holds `max_keys` waits one period.
//! - **Expiry**: a key whose every admission has left its window is dropped: by `PEXPIRE` in
//!   Redis (never shortened by a check), by sweeps that ride on later checks in process. A
//!   counter lives until the window after its latest admission's ends (at most two periods).
//! - **Failures**: a store that cannot answer returns a [`StoreError`]; the check path, not the
//!   store, applies the failure policy. A check that failed may or may not have been recorded
//!   (a timeout): it is not resent, except where it is known not to have run (`NOSCRIPT`) or
//!   the store recognises the resend (a closed connection: the same member, counted once,
//!   whether the store marked the resend or redis-rs's cluster client made it). Only errors
//!   that say the store serves nobody now are outages, which open a breaker
//!   ([`StoreError::is_outage`]): I/O, timeouts, `LOADING`, `BUSY`, `TRYAGAIN`, `CLUSTERDOWN`,
//!   `MASTERDOWN`, `READONLY`. Any other error reply (`OOM`, `NOPERM`, a key of another type)
//!   is that call's: it gets the policy's answer, and the next check goes to the store.
//!   An open breaker's probe ([`Store::probe`]) stands for a check of a key and records
//!   nothing: in Redis it writes (it removes an empty range of scores), so it fails where a
//!   check of that key would (`READONLY` on a replica, replicas that are not connected under
//!   `wait_for_replicas`) and is answered where one would be.
//!
//! # Parts
//!
//! A part is a unit of a store that fails alone, and has one circuit breaker of its own: the
//! whole store for one server or in process, a hash slot in a Redis Cluster ([`Store::parts`]
//! of them; [`Store::part`] gives a key's). Parts may fail together, as a cluster master's
//! slots do: [`Store::group_of`] tells which, asked in the background after a failure.
//!
//! # Several limits and costs
//!
//! A check of several limits ([`Store::check_all`]) is one atomic step for all of them
//! whatever their keys: one lock of their shards in process, one script on one server or in
//! one cluster slot. Admitted, the call is recorded in every limit under one admission name;
//! denied by any, in none; its limits may mix logs and counters. A call of cost `c` counts,
//! and is recorded in a log, as `c` admissions (in Redis, `c` members `<admission>.<j>`),
//! in a counter as `c` added to its count; a cost of 0 always fits and records nothing;
//! costs above the threshold (or, for a log, [`Limit::MAX_COST`](crate::Limit::MAX_COST)) never
//! reach a store. Across a
//! cluster's slots the check path (`check/all.rs`) makes it reserve then refund: one script
//! per slot, and [`Store::refund`] of the recorded slots when the call is not admitted.
//!
//! # Refunds
//!
//! A refund asked for by the caller after the call (its outcome known) is a later, separate
//! step that names the admission: a log's members `<admission>.<j>`, as [`Store::refund`]
//! does for a cluster's reservations; for a counter, the fixed window the check's time falls
//! in, while it is the key's current or previous one (else the call no longer counts).
//!
//! The invariant: **a refund takes back its own admission, at most once, and nothing else.**
//! A log's refund removes only the members its admission named, so it takes nothing when the
//! call never ran, and nothing more when sent twice. A counter keeps no member, so its side
//! is kept by the check path and the connection instead: a counter is refunded only for a
//! call whose answer said it was admitted, never for one whose outcome is unknown (a timeout,
//! a dropped connection, replicas that did not acknowledge it: its cost stays counted until
//! its windows end, which can only deny more), and its refund is never resent (by the store,
//! or by redis-rs's cluster client: see `Connection::query`), so a refund whose reply
//! was lost may leave the cost counted, never take it twice. One exception, the one a log
//! shares for its admissions: a failover that loses the admission's write (its master
//! replaced by a replica that never received it; `wait_for_replicas` closes it where every
//! replica that can be promoted acknowledged) leaves a later refund of it to a master that
//! never counted it, where a counter's refund takes another call's cost.

//! # Resets
//!
//! A reset ([`Store::reset`], [`Store::reset_scope`]: `reset.lua`, in Redis) forgets a key's
//! admissions up to the store's now, **and keeps what leases that may still be spent
//! reserved**, so that no process can spend more than the window then holds:
//!
//! - a log keeps its reserve members scored after now: those of the leases granted in the last
//!   lease length, spent or not (a lease's name, its first character one of `E` to `H`, is
//!   never an admission's: `store/redis/member.rs`), counted until they leave the window, a
//!   period after their lease's end; it loses every other member, admissions at explicit
//!   times later than now included;
//! - a counter keeps the reserve of each limiter's current lease that lasts past now (a
//!   limiter renews only once its last lease was spent, ended or given back, so only its
//!   current one may still be spent: `counter.lua`'s lease record, one per limiter and rate),
//!   in the fixed window it was granted in, as a counter first written after every time written
//!   into it before (whatever the server's clock did), so that a refund of a check made before
//!   the reset takes nothing, and the give-back of a kept lease takes at most what was kept of
//!   it, that of any other lease granted before the reset nothing.
//!
//! What is kept, spent before the reset or not, means fewer admissions until it leaves the
//! window, never more. A reset resent after a lost connection forgets what came between its
//! two runs too. In process there are no leases, and a reset forgets everything. After a reset
//! the bound holds over the admissions that follow it, the reserves' spends among them. A
//! step of the server's clock forward across a lease's end lets a reset forget a reserve its
//! holder may still spend (at most what one process holds: the leases' clock caveat).
//!
//! # Leases
//!
//! A lease ([`Store::lease`], `lease.lua`) checks the call at hand of one limit at cost 1, on
//! the store's clock, and when it is admitted also reserves up to `wanted − 1` admissions for
//! the process that asked, which spends them without a round trip until the lease ends
//! (`lasts` after the lease's time, at most the period, and for a counter never past the end
//! of its fixed window). What it reserves counts for every other check at once, and:
//!
//! - **The bound holds over the times the reserve is spent.** A log records the call at
//!   `now` (member `<lease>.0`) and the reserve at the lease's end (members `<lease>.1..`):
//!   each stays in the window at least a period after any use it stands for, and counts as an
//!   admission later than now for the checks before it; a counter adds the whole lease to the
//!   fixed window that holds every use. The process spends only before the lease's end (its
//!   own clock, counted from before it sent the lease). So in every window of length
//!   `period`, calls admitted directly plus reserves spent are at most the threshold: the
//!   log's rule, and the counter's, over what the store recorded.
//! - **A give-back takes back exactly the unspent reserve, once.** The process spends
//!   members from the highest down and gives back members `1..=left`: [`Store::refund`] of
//!   an admission named by the lease, of cost `left`, at the lease's time (for a counter, the
//!   fixed window the lease was recorded in); it is never resent for a counter. A give-back
//!   that is lost leaves the reserve to leave the window with its lease: fewer admissions,
//!   never more.
//! - **A lease whose outcome is unknown is never spent** (a timeout, a lost reply, replicas
//!   that did not acknowledge it). Resent after a lost connection, a log's lease is
//!   recognised by its member `<lease>.0`: the call counts once, and the reserve the first
//!   run recorded is removed (nobody spends it); only a resend the client marks removes it, so
//!   that a first send delayed past its resend (a proxy that held it) cannot remove the reserve
//!   the process is spending. A counter's lease is never resent.
//! - **A reset keeps what live leases reserved** (see [Resets](self#resets)): their holders,
//!   this process among them, go on spending it, and every check after the reset counts it.
//!   A counter's give-back after a reset takes at most what the reset kept of its window.
//! - As for every admission, a failover that loses the lease's write (its master replaced by
//!   a replica that never got it) lets the new master admit what the lease holds;
//!   `wait_for_replicas` closes it.
//!
//! In process there is nothing to lease: every check is already local, and a leased rate is
//! checked as any other. `tests/tests/suite/leases.rs` and the fault checker (whose hot limits
//! include leased ones) hold the store to these rules.
//!
//! # Limits that change (the registry)
//!
//! The registry (`registry/`) changes the rate a check is made against, never its key: a
//! store sees a check of a log it already keeps, against another threshold or period, which
//! the rules above answer as they answer any rate (a shortened period evicts, a lengthened
//! one counts only what the log still holds; a counter's other period is another counter).
//! So the bound a store keeps is the rate each check was made against: a window straddling a
//! change holds at most the larger threshold. On a log it is sharper: every admission of a
//! window `(t - P, t]` lies in the window of its last admission `a`, `(a - P, a]`, whose check
//! counted them all, so the window holds at most the threshold `a` was checked against. Limits
//! shared through Redis (`registry/redis.rs`) apply on one instance after another, each check
//! carrying its own instance's threshold: while a change propagates, a window holds at most
//! the highest threshold any instance had in force during it or, for a check resolved before
//! it and still on its way to Redis (at most a timeout, unless a connection holds it), just
//! before it; a window that starts once every instance applied the change, and those checks
//! arrived, is exact under the new rate. The shared limits' own keys
//! (`{registry}…`) are no limit's: a key given by hand cannot name them. A check the registry answers (`off`, an exempt
//! key, a blocked one) reaches no store and records nothing. A change in force ends the
//! limiter's leases (nothing more spent from a reserve; the rest given back as for any lease
//! that ended) and clears its deny cache, so no reserve or cached denial made under one rate
//! answers under another, or again once a rate comes back. `tests/tests/suite/registry.rs`,
//! `shared_limits.rs` and `leases.rs` hold the check path to this, and the fault checker
//! changes the shared limits during its runs (rates lowered and raised, overrides set,
//! removed and expiring, a scope's switch flipped), judging every window against the highest
//! threshold possible during it, and every check's threshold against the versions possible
//! then.
//!
//! # Slots
//!
//! A concurrency limit ([`Concurrency`](crate::Concurrency)) is a sliding window log whose
//! period is its slot time, and whose admissions are **slots**: a call's slot is recorded by
//! the check of all its limits at once (all or nothing with its rate limits), as member
//! `<admission>.1`, and released by the refund of exactly that member (`refund.lua`) when the
//! call ends. While the call runs, its process renews it ([`Store::renew`], `renew.lua`) every
//! third of the slot time, one script per part for all of its slots there: a renewal scores
//! the member at the time now if the key still holds it within its window, and otherwise
//! removes it and says it is gone; it never adds a member.
//!
//! The invariant: **a key's slots counted at any instant are at most its `max`, and a slot
//! counts from its check until its release, or until a slot time after the last renewal that
//! found it.** A resent check or renewal changes nothing (the same member; a score never moves
//! back); a renewal after the release, or after the slot left its window, finds nothing to
//! renew; a release removes only its own member, once. A slot whose renewals cannot reach its
//! part stops counting a slot time after the last one that did (`Slot::is_held` says so from
//! then on, counted from that renewal's sending); a failover that loses a slot's write (its
//! master replaced by a replica that never got it) frees it early, which `wait_for_replicas`
//! closes for checks and renewals alike. In process a slot lasts until it is released: the
//! process takes its store along when it dies. No slot is ever answered by the deny cache.
//! `tests/tests/suite/concurrency.rs` holds the stores to this.

mod counter;
pub(crate) mod memory;
pub(crate) mod redis;

use std::borrow::Cow;

use self::memory::MemoryStore;
pub(crate) use self::redis::Admission;
use self::redis::RedisStore;
use crate::decision::Decision;
use crate::error::StoreError;
use crate::layout::ScopeKeys;
use crate::limit::{Grant, LimitRef, LimitsAnswer};

/// Where a limiter keeps its logs.
#[allow(clippy::large_enum_variant)] // one per limiter, behind its `Arc`
pub(crate) enum Store {
    /// In process: sharded maps in this process's memory.
    Memory(MemoryStore),
    /// Redis: one server or a Redis Cluster.
    Redis(RedisStore),
    /// A store that could not be built (from the environment): every check fails with this.
    Misconfigured(Cow<'static, str>),
}

/// How a store takes a check ([`Store::access`]).
pub(crate) enum Access<'a> {
    /// At once, on the caller's thread, without I/O: the in-process store.
    InProcess(&'a MemoryStore),
    /// Over the network: through the circuit breakers, within the timeout, on a runtime
    /// ([`Store::check`]).
    Remote,
    /// Never: its configuration cannot work ([`StoreError::Misconfigured`]). Every check fails
    /// with this error, as [`RateLimitError::InvalidConfig`](crate::RateLimitError::InvalidConfig)
    /// whatever the failure policy: it is no outage.
    Unusable(StoreError),
}

impl Store {
    /// How a check of this store is made.
    #[inline]
    pub(crate) fn access(&self) -> Access<'_> {
        match self {
            Store::Memory(store) => Access::InProcess(store),
            Store::Redis(_) => Access::Remote,
            Store::Misconfigured(reason) => {
                Access::Unusable(StoreError::Misconfigured(reason.clone()))
            }
        }
    }

    /// Checks `limit` at `at` (µs since the Unix epoch; `None`: the store's clock) and records
    /// the call when admitted.
    ///
    /// # Errors
    ///
    /// The store could not answer: see [`RedisStore::check`]; a misconfigured store always
    /// fails, with [`StoreError::Misconfigured`].
    pub(crate) async fn check(
        &self,
        limit: LimitRef<'_>,
        at: Option<u64>,
    ) -> Result<Decision, StoreError> {
        match self {
            Store::Memory(store) => Ok(store.check(limit.key, limit.rate, limit.cost, at)),
            Store::Redis(store) => store.check(limit, at).await,
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// What a check of `limit` (cost 1) at `at` would answer, recording nothing: see
    /// [`MemoryStore::peek`] and [`RedisStore::peek`].
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn peek(
        &self,
        limit: LimitRef<'_>,
        at: Option<u64>,
    ) -> Result<Decision, StoreError> {
        match self {
            Store::Memory(store) => Ok(store.peek(limit.key, limit.rate, at)),
            Store::Redis(store) => store.peek(limit, at).await,
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// Probes the part of the store that holds `limit`'s state, for its open circuit breaker:
    /// see [`RedisStore::probe`] (the in-process store has no breaker, and always answers).
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn probe(&self, limit: LimitRef<'_>) -> Result<(), StoreError> {
        match self {
            Store::Memory(_) => Ok(()),
            Store::Redis(store) => store.probe(limit).await,
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// Forgets `key`'s log: see [`MemoryStore::remove`] and [`RedisStore::reset`].
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn reset(&self, key: &str) -> Result<(), StoreError> {
        match self {
            Store::Memory(store) => {
                store.remove(key);
                Ok(())
            }
            Store::Redis(store) => store.reset(key).await,
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// Forgets every log of `keys`' scope and key: see [`MemoryStore::remove_where`] and
    /// [`RedisStore::reset_scope`]. Returns how many keys were forgotten.
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn reset_scope(&self, keys: &ScopeKeys) -> Result<u64, StoreError> {
        match self {
            Store::Memory(store) => Ok(store.remove_where(|stored| keys.matches(stored)) as u64),
            Store::Redis(store) => store.reset_scope(keys).await,
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// A new admission's name, for [`check_all`](Store::check_all) and its
    /// [`refund`](Store::refund) (the in-process store needs none: all zeros).
    pub(crate) fn admission(&self) -> Admission {
        match self {
            Store::Redis(store) => store.admission(),
            Store::Memory(_) | Store::Misconfigured(_) => Admission::default(),
        }
    }

    /// Checks `limits` (distinct keys, all in one [part](self#parts)) together at `at` (µs
    /// since the Unix epoch; `None`: the store's clock), as one atomic step: admitted, the
    /// call is recorded in every limit as `admission`; denied, in none. Returns whether it was
    /// admitted, and each limit's decision (on a denial, a limit that would have admitted the
    /// call says so, its count unchanged), and the check's time.
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn check_all(
        &self,
        limits: &[LimitRef<'_>],
        admission: &Admission,
        at: Option<u64>,
    ) -> Result<LimitsAnswer, StoreError> {
        match self {
            Store::Memory(store) => {
                let (admitted, decisions) = store.check_all(limits, at, true);
                // Never refunded: a check is one step in process.
                Ok(LimitsAnswer {
                    admitted,
                    decisions,
                    now: 0,
                })
            }
            Store::Redis(store) => store.check_all(limits, admission, at).await,
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// Removes `admission`, recorded by [`check_all`](Store::check_all) at `now` (its
    /// answer's), from `limits` (all in one part): the reservation of a check whose limits in
    /// other parts did not all admit it. Returns each limit's decision without the call. The
    /// in-process store never needs one (a check is one step there, whatever its keys), and
    /// does nothing (no decision).
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check); the records then expire with their keys.
    pub(crate) async fn refund(
        &self,
        limits: &[LimitRef<'_>],
        admission: &Admission,
        now: u64,
    ) -> Result<Vec<Decision>, StoreError> {
        match self {
            Store::Redis(store) => store.refund(limits, admission, now).await,
            Store::Memory(_) => Ok(Vec::new()),
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// Renews the slots `limits[i]` (concurrency limits, all in one part) held as
    /// `admissions[i]` at `at` (`None`: the store's clock): whether each is still held. Only
    /// a remote store's slots expire, and are renewed: in process a slot lasts until its call
    /// ends (see [Slots](self#slots)).
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn renew(
        &self,
        limits: &[LimitRef<'_>],
        admissions: &[Admission],
        at: Option<u64>,
    ) -> Result<Vec<bool>, StoreError> {
        match self {
            Store::Redis(store) => store.renew(limits, admissions, at).await,
            Store::Memory(_) => Ok(vec![true; limits.len()]),
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// A new lease's name, for [`lease`](Store::lease) and its give-back (the in-process store
    /// leases nothing: all zeros).
    pub(crate) fn lease_name(&self) -> Admission {
        match self {
            Store::Redis(store) => store.lease_name(),
            Store::Memory(_) | Store::Misconfigured(_) => Admission::default(),
        }
    }

    /// Gives back `limit`'s unspent reserve (its cost) of the lease named `lease`, granted at
    /// `now` (see [Leases](self#leases)).
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn give_back(
        &self,
        limit: LimitRef<'_>,
        lease: &Admission,
        now: u64,
    ) -> Result<(), StoreError> {
        match self {
            Store::Redis(store) => store.give_back(limit, lease, now).await,
            Store::Memory(_) => Ok(()),
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// A lease of `limit` (cost 1) named `lease` for up to `wanted` admissions (the call at
    /// hand included) lasting `lasts` (see [Leases](self#leases)). Only a remote store leases:
    /// in process every check is already local, and a lease is never asked for.
    ///
    /// # Errors
    ///
    /// As [`check`](Store::check).
    pub(crate) async fn lease(
        &self,
        limit: LimitRef<'_>,
        lease: &Admission,
        wanted: u32,
        lasts: std::time::Duration,
    ) -> Result<Grant, StoreError> {
        match self {
            Store::Redis(store) => store.lease(limit, lease, wanted, lasts).await,
            Store::Memory(_) => Err(StoreError::Protocol(
                "no lease in process: its checks are local".into(),
            )),
            Store::Misconfigured(reason) => Err(StoreError::Misconfigured(reason.clone())),
        }
    }

    /// How long a call to the store may take (zero in process, where nothing waits).
    pub(crate) fn timeout(&self) -> std::time::Duration {
        match self {
            Store::Redis(store) => store.timeout(),
            Store::Memory(_) | Store::Misconfigured(_) => std::time::Duration::ZERO,
        }
    }

    /// How many parts the store fails in (see [Parts](self#parts)): at least one.
    pub(crate) fn parts(&self) -> usize {
        match self {
            Store::Redis(store) => store.parts(),
            Store::Memory(_) | Store::Misconfigured(_) => 1,
        }
    }

    /// The part `limit`'s state is in: its key's, or for a sliding window counter in Redis
    /// that of the counter's own key (see [`RedisStore::part_of`]).
    pub(crate) fn part_of(&self, limit: LimitRef<'_>) -> usize {
        match self {
            Store::Redis(store) => store.part_of(limit),
            Store::Memory(_) | Store::Misconfigured(_) => 0,
        }
    }

    /// The ranges of parts (inclusive) that fail together with `part`: in a cluster, the slots
    /// of the master that owns it, from the cluster's slot map. `None` for a store whose parts
    /// fail alone, when the store does not tell, or while another lookup runs (one at a time).
    pub(crate) async fn group_of(&self, part: usize) -> Option<Vec<(u16, u16)>> {
        let Store::Redis(store) = self else {
            return None;
        };
        let _claim = store.claim_lookup()?;
        store.master_parts(part).await
    }

    /// What the store is, for `Debug`: `memory`, `redis`, `redis-cluster` or `misconfigured`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Store::Memory(_) => "memory",
            Store::Redis(store) => store.kind(),
            Store::Misconfigured(_) => "misconfigured",
        }
    }
}
