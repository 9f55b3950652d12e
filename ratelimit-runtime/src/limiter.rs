//! [`Limiter`]: checks keys against a sliding window log or counter, in Redis or in process. The public
//! type, its methods, and the semantics every store keeps; the check path is in `check/`, the
//! builder in `builder.rs`.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use futures_util::future::Either;

use crate::check::{Checking, DenyCache, Records, Registered, Shared};
use crate::decision::Decision;
use crate::decisions::Decisions;
use crate::error::RateLimitError;
use crate::key::Key;
use crate::limit::{Limit, LimitRef};
use crate::permit::Permit;
use crate::policy::FailurePolicy;
use crate::rate::Rate;
use crate::registry::{Limits, Mode, Resolved, Source, View};
use crate::shared_limits::SharedLimits;
use crate::store::Store;
use crate::store::memory::MemoryStore;
use crate::testing::ManualClock;

/// Checks calls against a [`Rate`] with an exact sliding window log (or the rate's
/// [sliding window counter](crate::Algorithm::SlidingWindowCounter)), and records admissions.
///
/// # Semantics
///
/// For the sliding window log, the default (the counter's rules are
/// [`Algorithm::SlidingWindowCounter`](crate::Algorithm::SlidingWindowCounter)'s):
/// A call of key `k` at time `now` is admitted iff fewer than `threshold` admitted calls of `k`
/// happened in the half-open window `(now - period, now]`: an admission at `t` stops counting at
/// exactly `t + period`. Denied calls are not recorded, so a client that keeps retrying is
/// admitted as soon as the window frees. Every admission is recorded as its own entry, even
/// many in the same microsecond. Check and record are one atomic step. Admissions recorded at
/// a time later than `now` (explicit times out of order, a Redis clock stepped back) count as
/// in the window, so that no window of length `period` ever holds more than `threshold`
/// admissions. A key is meant for one rate: a shorter period checked on a key also evicts
/// the admissions a longer one would still count.
///
/// This is the sliding window log algorithm (named so in Figma's "An alternative approach to
/// rate limiting", 2017; kept in Redis sorted sets as in the Java `@RateLimit` articles this
/// crate ports, without their bugs): exact, at a memory cost of one entry per admission in the
/// window.
///
/// A [sliding window counter](crate::Algorithm::SlidingWindowCounter) keeps instead, per key
/// and period, two counts and a window index (the guide's
/// [`algorithms`](crate::guide::algorithms#the-sliding-window-counter) page has its state and
/// its rules).
///
/// # Stores
///
/// - In process ([`Limiter::memory`]): sharded maps guarded by mutexes, safe under concurrent
///   callers and usable without a runtime; keys idle for a period are dropped by sweeps that
///   ride on later checks.
/// - Redis ([`LimiterBuilder::redis_url`](crate::LimiterBuilder::redis_url)): one sorted set per key named
///   `<prefix><key>`, scores in integer microseconds since the Unix epoch, checked by one Lua
///   script (evict, count, then admit and record, or deny). The clock is the Redis server's
///   `TIME`, one clock for every application server, unless [`check_at`](Limiter::check_at)
///   passes a time or the limiter is on a [`ManualClock`] (for tests). Each admission extends the key's `PEXPIRE` (never shortens it) so an idle key
///   vanishes once its newest admission leaves the window (and at least 1 s after it was
///   made). The connection is made on first use, inside a check, and
///   every check (connecting included) is bounded by the timeout (default 250 ms); a check
///   that timed out is never resent, since Redis may have recorded it.
/// - Redis Cluster ([`LimiterBuilder::redis_cluster`](crate::LimiterBuilder::redis_cluster)): the same, each key's set on the node
///   that owns its slot.
///
/// When the store cannot answer, the [`FailurePolicy`] decides (default: `Local`). After a
/// failure of the store (anything but an error about one key's value: a timeout, a refused
/// connection, a wrong password, a TLS failure), the circuit breaker opens: every check is
/// answered by the policy at once, without waiting on the store, while a probe that records
/// nothing runs in the background, one at a time, at most every 100 ms (started by a check);
/// the first probe the store answers closes it (one breaker per server; in a cluster one per
/// hash slot, a failed slot opening its master's other slots with it). A
/// Redis call whose caller stops waiting is handed to the runtime, so that it reaches its end,
/// and tells the breaker, all the same. Each outage is logged once when it starts (warn) and
/// once when it ends (info, with its length and the number of checks the policy answered),
/// and [`Limiter::policy_answers`] counts them.
///
/// A `Limiter` is cheap to clone (one `Arc`); clones share their store.
#[derive(Clone)]
pub struct Limiter {
    shared: Arc<Shared>,
}

impl Limiter {
    /// An in-process limiter: the embedded default, for tests, examples and single-instance
    /// services. Limits are per process.
    #[must_use]
    pub fn memory() -> Limiter {
        Limiter::from_store(Store::Memory(MemoryStore::new()), FailurePolicy::default())
    }

    /// A limiter on `store`, falling back on a fresh in-process store under
    /// [`FailurePolicy::Local`].
    fn from_store(store: Store, policy: FailurePolicy) -> Limiter {
        Limiter::from_shared(Shared::new(
            store,
            policy,
            MemoryStore::new(),
            None,
            false,
            None,
        ))
    }

    /// The limiter whose clones share `shared`.
    pub(crate) fn from_shared(shared: Shared) -> Limiter {
        let shared = Arc::new(shared);
        let weak = Arc::downgrade(&shared);
        shared.registry.on_applied(Box::new(move || {
            if let Some(shared) = weak.upgrade() {
                shared.limits_changed();
            }
        }));
        Limiter { shared }
    }

    /// The state its clones share (the registry's, for the limits file's watcher and the
    /// shared limits' thread).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A limiter whose every check fails with `reason`, as [`RateLimitError::InvalidConfig`]
    /// whatever its `policy`: what the process-wide default becomes when its environment
    /// holds a malformed URL.
    pub(crate) fn misconfigured(reason: Cow<'static, str>, policy: FailurePolicy) -> Limiter {
        Limiter::from_store(Store::Misconfigured(reason), policy)
    }

    /// The policy applied when the store cannot answer.
    #[must_use]
    pub fn failure_policy(&self) -> FailurePolicy {
        self.shared.policy
    }

    /// How many checks the [`FailurePolicy`] answered since this limiter was built (clones
    /// share the count): each check the store failed, or skipped while its circuit was open.
    #[must_use]
    pub fn policy_answers(&self) -> u64 {
        self.shared.health.policy_answers()
    }

    /// How many checks the deny cache answered since this limiter was built (clones share the
    /// count): denials of keys whose window the store said was full, answered without a
    /// round trip (see [`LimiterBuilder::deny_cache`](crate::LimiterBuilder::deny_cache)),
    /// the denials of [leased](crate::Rate::leased) rates' renewals included.
    /// Always 0 for an in-process limiter, which has no cache (its store is in process).
    #[must_use]
    pub fn deny_cache_answers(&self) -> u64 {
        self.shared.deny_cache.as_ref().map_or(0, DenyCache::hits)
            + self.shared.leases.denials_answered()
    }

    /// `true` from a failure of the store until it answers again (with a cluster: an answer
    /// after 250 ms without a failure on any slot). Meanwhile the checks of failed parts (the
    /// server, or a cluster's failed slots) are answered by the [`FailurePolicy`]; other slots
    /// still go to Redis. A check starts the probes of an open breaker (the first at least
    /// 100 ms after it opened), which then go on without traffic until the store answers one.
    #[must_use]
    pub fn is_degraded(&self) -> bool {
        self.shared.health.in_outage()
    }

    /// Checks `key` against `rate` now, and records the call if it is admitted.
    ///
    /// `key` is any text (user identifiers included; it is never logged above debug level,
    /// nor used as a metrics label); in Redis it becomes `<prefix><key>`, and may neither end
    /// with `#swc`, the suffix of a sliding window counter's hash, nor start with
    /// `{registry}`, the [shared limits'](SharedLimits) keys (such a check fails with
    /// [`RateLimitError::InvalidInput`]). Now is the limiter's
    /// [`ManualClock`]'s time when it has one (read when the check is first polled), else the
    /// Redis server's `TIME` for a Redis limiter, the local wall clock otherwise. Like any future,
    /// the check happens when it is polled; an in-process check completes on the first poll,
    /// as does a Redis limiter's check of a key its deny cache knows to be full (see
    /// [`LimiterBuilder::deny_cache`](crate::LimiterBuilder::deny_cache)).
    ///
    /// The check runs in a `ratelimit.check` span (without a `scope`), and with the `metrics`
    /// feature is counted without labels: see the crate's
    /// [Observability](crate#observability).
    ///
    /// # Errors
    ///
    /// A denial is `Ok` with `allowed == false`. `Err` when the store failed and the
    /// policy is [`FailurePolicy::Closed`]: [`RateLimitError::Unavailable`]; and whatever the
    /// policy for the default limiter ([`global`](crate::global)) given a malformed setting:
    /// [`RateLimitError::InvalidConfig`].
    pub fn check<'a>(
        &'a self,
        key: &'a str,
        rate: Rate,
    ) -> impl Future<Output = Result<Decision, RateLimitError>> + Send + 'a {
        Checking::new(&self.shared, None, Key::Borrowed(key), rate, None)
    }

    /// Checks `key` against `rate` at the time `at`, and records the call if it is admitted.
    ///
    /// For tests, replays and callers that keep their own clock; `at` wins over a
    /// [`ManualClock`]. Do not mix `check_at` and [`check`](Limiter::check) on one key of a
    /// Redis limiter, or of a limiter on a manual clock: see
    /// [`guide::testing`](crate::guide::testing#replaying-explicit-times).
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] when `at` is before 1970 or after the year 2155;
    /// otherwise as [`check`](Limiter::check).
    pub fn check_at<'a>(
        &'a self,
        key: &'a str,
        rate: Rate,
        at: SystemTime,
    ) -> impl Future<Output = Result<Decision, RateLimitError>> + Send + 'a {
        Checking::new(&self.shared, None, Key::Borrowed(key), rate, Some(at))
    }

    /// Checks `key` against `rate` now for a call of `cost`, and records it if admitted: the
    /// call is admitted iff the admissions in the window plus `cost` stay within the threshold,
    /// and is then recorded as `cost` admissions (each counts until it leaves the window). A
    /// cost of 0 is always admitted and records nothing. A denial's `retry_after` is the time
    /// until `cost` fits. `check_n(key, rate, 1)` is [`check`](Limiter::check).
    ///
    /// The log's work and memory grow with the cost: a cost above [`Limit::MAX_COST`](crate::Limit::MAX_COST)
    /// (10,000) is turned away, as is one above the threshold, which no window could admit. A
    /// [sliding window counter](crate::Algorithm::SlidingWindowCounter) adds the cost to a
    /// count in `O(1)`: any cost up to the threshold (an LLM gateway's tokens, bytes).
    ///
    /// # Errors
    ///
    /// [`RateLimitError::CostTooHigh`] when `cost` is above the threshold or, for a sliding
    /// window log, [`Limit::MAX_COST`](crate::Limit::MAX_COST); otherwise as [`check`](Limiter::check).
    pub fn check_n<'a>(
        &'a self,
        key: &'a str,
        rate: Rate,
        cost: u32,
    ) -> impl Future<Output = Result<Decision, RateLimitError>> + Send + 'a {
        // A cost other than 1 is checked as a check of several limits is (one of them): so
        // the checks of cost 1, `check`'s and the attribute's, never carry a cost.
        if cost == 1 {
            return Either::Left(Checking::new(
                &self.shared,
                None,
                Key::Borrowed(key),
                rate,
                None,
            ));
        }
        let limits = vec![Limit::new(key, rate).with_cost(cost)];
        let check = self.shared.check_all(None, limits, None);
        Either::Right(async move { check.await.map(|decisions| *decisions) })
    }

    /// [`check_n`](Limiter::check_n), returning a [`Permit`]: an admission that can be
    /// refunded once the call's outcome is known, so that only the calls that count stay
    /// counted (a login limited on its failures: check before, refund a success after).
    ///
    /// The call is checked and recorded up front, as a reservation, so the limit stays exact
    /// under racing callers: while calls are in flight, their reservations fill the window,
    /// and a denial's `retry_after` counts them (an upper bound: some may be refunded
    /// sooner). [`Permit::refund`] then removes exactly this call's entries; dropping the
    /// permit keeps them.
    ///
    /// # Errors
    ///
    /// As [`check_n`](Limiter::check_n).
    pub fn check_permit<'a>(
        &'a self,
        key: &'a str,
        rate: Rate,
        cost: u32,
    ) -> impl Future<Output = Result<Permit, RateLimitError>> + Send + 'a {
        let shared = &self.shared;
        async move {
            let limits = vec![Limit::new(key, rate).with_cost(cost)];
            let (decisions, records) = shared.check_recorded(None, limits, None, false).await?;
            let limit = LimitRef { key, rate, cost };
            Ok(Permit::new(shared, limit, *decisions, records))
        }
    }

    /// What a check of `key` against `rate` now would answer, recording nothing (no
    /// admission, no eviction, no TTL touched): "how many calls are left?". The decision is
    /// `allowed` iff a call would be admitted; unlike a check's, `remaining` counts no call
    /// (what is left now: a key with 3 left says 3); on a full window `retry_after` is the
    /// time until a call fits; `reset_after` the time until the window is empty (zero for a
    /// key never checked). A look is not atomic with a later check: racing calls may take
    /// what it saw.
    ///
    /// On Redis it is one script (`peek.lua`) that reads the key's set on its master (it
    /// writes nothing; Redis itself may still drop a key whose TTL ran out when the script
    /// reads it). On Redis 7 and later the script is flagged `no-writes` and sent by
    /// `EVALSHA_RO`, so that a user allowed to read only (ACL `+@read +evalsha_ro +eval_ro`)
    /// can look; Redis 5 and 6 get it without the flag, by `EVALSHA`. It goes through the
    /// circuit breakers and within the timeout, handed to the runtime
    /// when its caller stops waiting, as a check is. When the store cannot answer, the failure
    /// policy does: `Open` answers an empty window, `Local` the fallback's log, `Closed` the
    /// error; outside a Tokio runtime a Redis limiter cannot ask, and the policy answers too.
    /// In shadow mode ([`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow)) a look
    /// answers as a check would, a full window an admission that
    /// [would deny](Decision::would_deny), and under `Closed` a store that cannot answer as
    /// `Open`. A look is not a check: it has no `ratelimit.check` span, no metrics, and is not
    /// counted in [`policy_answers`](Limiter::policy_answers). In process, a look at a key the
    /// store does not track answers an empty window even where a check would be denied for
    /// room under [`max_keys`](crate::LimiterBuilder::max_keys).
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store cannot answer under
    /// [`FailurePolicy::Closed`]; [`RateLimitError::InvalidInput`] for a Redis key the store
    /// keeps for itself (see [`check`](Limiter::check)).
    pub fn peek<'a>(
        &'a self,
        key: &'a str,
        rate: Rate,
    ) -> impl Future<Output = Result<Decision, RateLimitError>> + Send + 'a {
        self.shared.peek(key, rate, None)
    }

    /// [`peek`](Limiter::peek) at the time `at` (see [`check_at`](Limiter::check_at)).
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] when `at` is before 1970 or after the year 2155;
    /// otherwise as [`peek`](Limiter::peek).
    pub fn peek_at<'a>(
        &'a self,
        key: &'a str,
        rate: Rate,
        at: SystemTime,
    ) -> impl Future<Output = Result<Decision, RateLimitError>> + Send + 'a {
        let shared = &self.shared;
        async move {
            let at = crate::clock::micros_since_epoch(at)?;
            shared.peek(key, rate, Some(at)).await
        }
    }

    /// Forgets `key` as [`check`](Limiter::check) names it: every admission of every rate
    /// that shares its log, and its log in the in-process fallback of
    /// [`FailurePolicy::Local`], so that the key's next call starts a fresh window (a support
    /// desk unblocking a customer). A call in flight may still record after it.
    ///
    /// In Redis it forgets what was admitted up to the server's now and keeps the reserves of
    /// the [quota leases](crate::guide::leases#how-it-stays-exact) of any process that may
    /// still be spent, which their holders go on spending: the window then admits its
    /// threshold, reserves included, and never more (a reset that deleted the reserves let
    /// their holders spend them beside a full window). What it keeps, and how long it stays
    /// counted, the leases guide says.
    ///
    /// The attribute's keys are laid out in [`guide::keys`](crate::guide::keys) (to forget all
    /// of a caller's, [`reset_scope`](Limiter::reset_scope)); a key given to
    /// [`check`](Limiter::check) by hand is the caller's own text, unescaped.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store could not forget the key (down, slow,
    /// its breaker open), whatever the failure policy: no policy can answer for a reset. The
    /// fallback's log is forgotten even then. [`RateLimitError::InvalidInput`] for a Redis key
    /// the store keeps for itself (see [`check`](Limiter::check)): another key's counter, or
    /// the shared limits.
    pub fn reset<'a>(
        &'a self,
        key: &'a str,
    ) -> impl Future<Output = Result<(), RateLimitError>> + Send + 'a {
        self.shared.reset(key)
    }

    /// Forgets the attribute's and the axum layers' logs of `scope` for the caller `key`:
    /// every limit of a function (stacked or not, every period of a `rate = expr`), of a
    /// `name` or of a layer's scope, so that a support desk unblocks a customer by what it can
    /// name. `scope` is the attribute's `name`, or the function's path (its default scope, as
    /// a denial's [`Denied::scope`](crate::Denied::scope) names it without its
    /// `#<position>`), or a layer's scope (`layer` by default); `key` the `key` argument's
    /// value as `Display` writes it, or a layer's key, `None` for limits without a key.
    ///
    /// It forgets the logs of every form of the [key layout](crate::guide::keys) (plain, with
    /// a window, stacked with or without a position, a layer's of several rates) for that
    /// scope and key, and the counter of each (`#swc` after it). A stacked limit with a `name`
    /// is that name's scope, not its function's. The layout is injective: no other scope's or
    /// key's log is forgotten, whatever the key values. The in-process fallback of
    /// [`FailurePolicy::Local`] forgets the same. Returns how many keys the store forgot.
    ///
    /// In process it is one pass over the store's keys. On Redis it is `SCAN ... MATCH`, 1,000
    /// keys per round trip, each within the timeout: for the stacked and the layers' tagged
    /// forms on the master that owns their hash tag, for the others over the whole keyspace
    /// (every master of a cluster, each by its address from `CLUSTER SLOTS`, scanned again if
    /// the slots moved meanwhile); then each key found is reset as [`reset`](Limiter::reset)
    /// does (live leases' reserves kept), 500 per script on one server, one per script in a
    /// cluster: a support desk's tool, not a hot path. It does not go through the circuit
    /// breakers, and a call in flight may still record after it. Its work is handed to the
    /// runtime: a caller that stops waiting (a `timeout` around it) leaves it to finish, the
    /// deny cache's denials it frees forgotten after it. For one key by its exact name,
    /// [`reset`](Limiter::reset).
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when the store could not be reached, or a round trip
    /// failed or timed out (what was forgotten before it stays forgotten), whatever the
    /// failure policy.
    pub fn reset_scope<'a>(
        &'a self,
        scope: &'a str,
        key: Option<&'a str>,
    ) -> impl Future<Output = Result<u64, RateLimitError>> + Send + 'a {
        self.shared.reset_scope(scope, key)
    }

    /// Checks several limits of one call together, now: the call is admitted iff every limit
    /// admits it (each with its key, rate and cost: see [`Limit`]), and then recorded in each;
    /// denied by any, it is recorded in none. The answer, [`Decisions`], derefs to the
    /// deciding limit's [`Decision`] and lists each limit's.
    ///
    /// In process and on one Redis server this is one atomic step whatever the keys: one
    /// lock of their shards, one script. In a Redis Cluster, limits whose keys hash to one
    /// slot are one script (give them a hash tag, `{user:42}:burst` and `{user:42}:daily`,
    /// for one round trip); limits in several slots are checked at once, one script per slot,
    /// and when any slot denies, fails or times out, the others' records are refunded before
    /// the check returns (so such a check may take twice the timeout; even when its caller
    /// stops waiting, the check runs to its end on the runtime). So no limit ever admits above its threshold, and after the check no limit
    /// holds a denied call, except a record its refund could not reach: one on a node that is
    /// down or stalled, which expires with its window (the outage is logged). A racing call may
    /// be denied meanwhile by a reservation that is refunded right after.
    ///
    /// A part of the store that cannot answer (a cluster slot, or the server) takes part as
    /// the [`FailurePolicy`] answers for its limits: `Open` admits there, `Local` checks them
    /// in the in-process fallback, `Closed` fails the check (at once, sending nothing, when the
    /// part's breaker is open), refunding the other parts' records. A call to a part that
    /// timed out may still run there: its sliding window logs are refunded in the background
    /// (by the members that name it, so only if it ran); its sliding window counters are not
    /// (a counter keeps no member to prove that the call counted), so its cost may stay
    /// counted there until its windows end: a counter may deny more after a timeout, never
    /// admit more.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] for no limit, two limits with the same key, or a label
    /// that is not printable ASCII; [`RateLimitError::CostTooHigh`] for a cost above its
    /// limit's threshold or [`Limit::MAX_COST`](crate::Limit::MAX_COST); [`RateLimitError::Unavailable`]
    /// when a part of the store failed under [`FailurePolicy::Closed`].
    pub fn check_all<'a>(
        &'a self,
        limits: impl IntoIterator<Item = Limit<'a>>,
    ) -> impl Future<Output = Result<Decisions, RateLimitError>> + Send + 'a {
        let limits: Vec<Limit<'a>> = limits.into_iter().collect();
        self.shared.check_all(None, limits, None)
    }

    /// [`check_all`](Limiter::check_all) at the time `at` (see [`check_at`](Limiter::check_at)).
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] when `at` is before 1970 or after the year 2155;
    /// otherwise as [`check_all`](Limiter::check_all).
    pub fn check_all_at<'a>(
        &'a self,
        limits: impl IntoIterator<Item = Limit<'a>>,
        at: SystemTime,
    ) -> impl Future<Output = Result<Decisions, RateLimitError>> + Send + 'a {
        let limits: Vec<Limit<'a>> = limits.into_iter().collect();
        self.shared.check_all(None, limits, Some(at))
    }

    /// [`check_all`](Limiter::check_all) for the layer and the attribute, in `scope` (as
    /// [`checking`](Limiter::checking)).
    pub(crate) fn checking_all<'a>(
        &'a self,
        scope: &'a str,
        limits: Vec<Limit<'a>>,
    ) -> impl Future<Output = Result<Decisions, RateLimitError>> + Send + 'a {
        self.shared.check_all(Some(scope), limits, None)
    }

    /// [`check_all`](Limiter::check_all) for the attribute, in `scope` (as
    /// [`checking`](Limiter::checking)), telling where the call was recorded; with `shadow`,
    /// the limits are shadow ones (see
    /// [`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow)).
    pub(crate) async fn checking_recorded(
        &self,
        scope: &str,
        limits: Vec<Limit<'_>>,
        shadow: bool,
    ) -> Result<(Decisions, Records), RateLimitError> {
        self.shared.check_holding(Some(scope), limits, shadow).await
    }

    /// Refunds the call `records` names (from [`checking_recorded`](Limiter::checking_recorded)
    /// of `limits`) in the limits `refunded` says, by index.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when a part of the store could not be reached.
    pub(crate) async fn refund_records(
        &self,
        limits: &[LimitRef<'_>],
        records: Records,
        refunded: impl Fn(usize) -> bool,
    ) -> Result<(), RateLimitError> {
        self.shared
            .refund_records(limits, records, refunded)
            .await
            .map_err(RateLimitError::from)
    }

    /// `true` when the limiter is in shadow mode (see
    /// [`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow)).
    #[must_use]
    pub fn is_shadow(&self) -> bool {
        self.shared.shadow()
    }

    /// The manual clock the limiter's checks are at, if any.
    pub(crate) fn manual_clock(&self) -> Option<&ManualClock> {
        self.shared.clock.as_ref()
    }

    /// A check of one limit for the attribute and the layer, through the registry, and whether
    /// it is a trial (shadow mode: its fields must not reach clients): the limit
    /// at `address` (the attribute's scope; a layer's `<scope>@<label>`) of `rate` (`per_call`: a rate chosen per call, which a scope entry's rate does
    /// not replace) for `key`, whose caller's key `caller` reads (asked only when the scope
    /// has overrides).
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) fn registered<'a>(
        &'a self,
        (scope, address): (&'a str, &str),
        key: Key<'a>,
        caller: impl FnOnce(&str) -> Option<Cow<'_, str>>,
        rate: Rate,
        per_call: bool,
    ) -> (Checking<'a>, bool) {
        let resolved = self.shared.registry.resolve(
            address,
            rate,
            per_call,
            || caller(&key),
            || self.shared.now_us(),
        );
        let trial = matches!(resolved, Resolved::Check { shadow: true, .. })
            || matches!(resolved, Resolved::Blocked { shadow: true, .. });
        let checking = match self.shared.registered(Some(scope), &key, rate, resolved) {
            Registered::Check(rate) => self.checking(scope, key, rate),
            Registered::Shadow(rate) => {
                let leg = async move {
                    let answer = self.checking_in_shadow(Some(scope), &key, rate).await;
                    (answer, key)
                };
                Checking::leg(&self.shared, Some(scope), rate, leg)
            }
            Registered::Decided(rate, decision) => {
                let leg = std::future::ready((Ok(decision), key));
                Checking::leg(&self.shared, Some(scope), rate, leg)
            }
        };
        (checking, trial)
    }

    /// The limits in force now, one version of them, which every limit of a composite check
    /// is resolved against ([`resolve_limit`](Limiter::resolve_limit)).
    pub(crate) fn registry_view(&self) -> View {
        self.shared.registry.view()
    }

    /// What the registry's `view` makes of one limit of a composite check (the attribute's
    /// stacked or composite limits, a layer's several rates): `address`'s limit of `rate`
    /// (`per_call`: chosen per call) and `cost`, a shadow one in code when `shadow`, for the
    /// caller's key that `caller` reads. A cost above a threshold the registry lowered is a
    /// denial, not the code's mistake.
    pub(crate) fn resolve_limit<'k>(
        &self,
        view: &View,
        address: &str,
        (rate, per_call, cost, shadow): (Rate, bool, u64, bool),
        caller: impl FnOnce() -> Option<Cow<'k, str>>,
    ) -> LimitResolved {
        let resolved = view.resolve(address, rate, per_call, caller, || self.shared.now_us());
        let code = rate;
        let (rate, in_shadow, blocked) = match resolved {
            Resolved::Exempt => return LimitResolved::Skip,
            Resolved::Check { rate, shadow } => (rate, shadow, None),
            Resolved::Blocked {
                rate,
                retry_after,
                shadow,
            } => (rate, shadow, Some(retry_after)),
        };
        let blocked = blocked.or_else(|| {
            (code != rate && RateLimitError::cost_too_high(cost, rate).is_some())
                .then(|| rate.period())
        });
        match blocked {
            Some(retry_after) => {
                let decision = Decision::blocked(rate.threshold(), retry_after);
                if shadow || in_shadow {
                    LimitResolved::WouldDeny
                } else {
                    crate::telemetry::blocked(address);
                    LimitResolved::Deny(rate, decision)
                }
            }
            None if shadow || in_shadow => LimitResolved::Shadow(rate),
            None => LimitResolved::Enforce(rate),
        }
    }

    /// A check of one limit in shadow mode: see `Shared::check_in_shadow`.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] or [`RateLimitError::InvalidConfig`]: the call's or
    /// the limiter's mistake, not the store's.
    pub(crate) async fn checking_in_shadow(
        &self,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
    ) -> Result<Decision, RateLimitError> {
        self.shared.check_in_shadow(scope, key, rate).await
    }

    /// The limits operators change while the process runs, as set by
    /// [`set_limits`](Limiter::set_limits) (a limits file's are apart from them).
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.shared.registry.get(Source::Api)
    }

    /// Replaces the limits set through this API by `limits`: scope entries (a rate, a mode),
    /// key overrides (a rate, a block, an exemption, each with an optional expiry) and the
    /// limiter's mode, addressed by the scope a denial names. In force for every check that
    /// starts once this returns, on every clone of the limiter; logged (info, keys at debug
    /// only) and counted. See [`guide::operating`](crate::guide::operating).
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidConfig`], nothing changed, when an entry contradicts the
    /// code's limits ([`declared_limits`](crate::declared_limits)): a scope's rate over a limit
    /// that chooses its rate per call (`rate = expr`), or a threshold below the `cost` a limit
    /// of its scope writes. The message names the scope and the attribute's file and line,
    /// never a key.
    pub fn set_limits(&self, limits: Limits) -> Result<(), RateLimitError> {
        self.shared
            .registry
            .set(Source::Api, limits)
            .map_err(|reason| RateLimitError::InvalidConfig(reason.into()))
    }

    /// Changes the limits set through this API by `change`, one change at a time (no
    /// concurrent change is lost between reading them and writing them back), as
    /// [`set_limits`](Limiter::set_limits) sets them.
    ///
    /// # Errors
    ///
    /// As [`set_limits`](Limiter::set_limits)': the changed limits are rejected whole.
    pub fn update_limits(&self, change: impl FnOnce(&mut Limits)) -> Result<(), RateLimitError> {
        self.shared
            .registry
            .update(Source::Api, change)
            .map(|_| ())
            .map_err(|reason| RateLimitError::InvalidConfig(reason.into()))
    }

    /// Sets the limiter's mode (the kill switch): [`Mode::Shadow`] lets every call through
    /// and reports what would have been denied, [`Mode::Off`] checks nothing, and
    /// [`Mode::Enforce`] leaves each scope its own mode. Kept among the
    /// [`limits`](Limiter::limits) of this API.
    pub fn set_mode(&self, mode: Mode) {
        self.shared.registry.set_mode(Source::Api, Some(mode));
    }

    /// Forgets the mode set through this API ([`set_mode`](Limiter::set_mode), or
    /// [`set_limits`](Limiter::set_limits)'s): the limits file's mode is in force again, else
    /// the one the limiter was built with. The end of an incident handled with
    /// `set_mode(Mode::Off)`, where `set_mode(Mode::Enforce)` would keep overriding the file.
    pub fn clear_mode(&self) {
        self.shared.registry.set_mode(Source::Api, None);
    }

    /// The limits shared by every instance through Redis: written here (each change one
    /// atomic write to Redis, read back here before it returns), followed by every
    /// instance built with
    /// [`LimiterBuilder::shared_limits`](crate::LimiterBuilder::shared_limits) within about a
    /// quarter of a second. Without it, every call fails with
    /// [`RateLimitError::InvalidConfig`]. See
    /// [`guide::operating`](crate::guide::operating#the-limits-shared-through-redis).
    #[must_use]
    pub fn shared_limits(&self) -> SharedLimits<'_> {
        let shared = &self.shared;
        SharedLimits {
            registry: &shared.registry,
            shared: shared
                .following()
                .map(|(_, follower, store)| (follower, store)),
        }
    }

    /// How many changes of the limits file were rejected since the limiter was built (each
    /// logged at error level, the limits in force kept), and entries of the
    /// [shared limits](Limiter::shared_limits) skipped (malformed, or contradicting the code;
    /// each time one is read): for a health check that tells an operator their last edit did
    /// not take.
    #[must_use]
    pub fn limits_rejected(&self) -> u64 {
        self.shared.registry.rejected()
    }

    /// The limiter's mode in force: that of the strongest source that sets one (this API's,
    /// then the [shared limits](Limiter::shared_limits)', then a limits file's), else the
    /// one it was built with ([`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow)).
    #[must_use]
    pub fn mode(&self) -> Mode {
        self.shared.registry.mode()
    }

    /// The checks by hand of `scope`, so that the registry's entries of that scope apply to
    /// them (see [`Scoped`]).
    #[must_use]
    pub fn scope<'a>(&'a self, scope: &'a str) -> Scoped<'a> {
        Scoped {
            limiter: self,
            scope,
        }
    }

    /// The attribute's check of one limit, through the registry (see
    /// [`Checking::registered`]).
    #[inline]
    pub(crate) fn checking_registered<'a>(
        &'a self,
        scope: &'a str,
        key: Key<'a>,
        rate: Rate,
    ) -> Checking<'a> {
        Checking::registered(&self.shared, scope, key, rate)
    }

    /// A check for the attribute and the layer: in a span with the field `scope`, labelled
    /// with `scope` in the metrics, and with an event for its decision (trace when admitted,
    /// debug when denied, with the key stripped of its `scope:` prefix).
    #[inline]
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) fn checking<'a>(&'a self, scope: &'a str, key: Key<'a>, rate: Rate) -> Checking<'a> {
        Checking::new(&self.shared, Some(scope), key, rate, None)
    }
}

/// Checks by hand in one scope ([`Limiter::scope`]): the registry's entries of the scope
/// apply to them (its rate, its mode, the overrides of their keys); keys are as
/// [`Limiter::check`] stores them, unchanged.
///
/// ```
/// use std::time::Duration;
/// use ratelimit_runtime::{Limiter, Limits, Override, Rate, ScopeLimits};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ratelimit_runtime::RateLimitError> {
/// let limiter = Limiter::memory();
/// let rate = Rate::new(1, Duration::from_secs(60))?;
/// limiter.set_limits(Limits::new().scope("search", ScopeLimits::new().key("ops", Override::exempt())))?;
/// let search = limiter.scope("search");
/// assert!(search.check("alice", rate).await?.allowed);
/// assert!(!search.check("alice", rate).await?.allowed);
/// assert!(search.check("ops", rate).await?.is_exempt());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Scoped<'a> {
    limiter: &'a Limiter,
    scope: &'a str,
}

impl<'a> Scoped<'a> {
    /// Checks `key` against `rate`, or the registry's entry of this scope and key, and
    /// records the call if it is admitted: [`Limiter::check`], through the registry.
    ///
    /// # Errors
    ///
    /// As [`Limiter::check`].
    pub async fn check(&self, key: &'a str, rate: Rate) -> Result<Decision, RateLimitError> {
        let shared = &self.limiter.shared;
        let resolved = shared.registry.resolve(
            self.scope,
            rate,
            false,
            || Some(Cow::Borrowed(key)),
            || shared.now_us(),
        );
        // A key given by hand: no scope, so that it is not taken for an escaped one.
        match shared.registered(None, key, rate, resolved) {
            Registered::Check(rate) => self.limiter.check(key, rate).await,
            Registered::Shadow(rate) => shared.check_in_shadow(None, key, rate).await,
            Registered::Decided(_, decision) => Ok(decision),
        }
    }

    /// The scope.
    #[must_use]
    pub fn name(&self) -> &'a str {
        self.scope
    }
}

/// What a limit of a composite check does, the registry asked ([`Limiter::resolve_limit`]).
pub(crate) enum LimitResolved {
    /// Left out: exempt, or off.
    Skip,
    /// Checked with the others, against this rate.
    Enforce(Rate),
    /// Checked on its own in shadow mode, against this rate, once the others admit.
    Shadow(Rate),
    /// A shadow limit that denies without a check (a blocked key): reported, left out.
    WouldDeny,
    /// Denies the call without a check (a blocked key, or a cost above the rate in force).
    Deny(Rate, Decision),
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("store", &self.shared.store.kind())
            .field("failure_policy", &self.shared.policy)
            .field("clock", &self.shared.clock)
            .field("mode", &self.shared.registry.mode())
            .field(
                "deny_cache",
                &self.shared.deny_cache.as_ref().map(DenyCache::capacity),
            )
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use std::time::Duration;

    use super::*;

    /// The memory store needs no runtime: its check is ready on the first poll.
    #[test]
    fn memory_checks_complete_without_a_runtime() {
        let limiter = Limiter::memory();
        let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
        let mut context = Context::from_waker(Waker::noop());
        let mut first = pin!(limiter.check("k", rate));
        let Poll::Ready(Ok(admitted)) = first.as_mut().poll(&mut context) else {
            panic!("the first check is not ready at once");
        };
        assert!(admitted.allowed);
        let mut second = pin!(limiter.check("k", rate));
        let Poll::Ready(Ok(denied)) = second.as_mut().poll(&mut context) else {
            panic!("the second check is not ready at once");
        };
        assert!(!denied.allowed);
    }

    /// A Redis limiter polled outside any runtime answers by its policy instead of panicking.
    /// (With the `smol` feature there is no "outside": smol's executor takes the call, as
    /// `tests/tests/suite/other_runtimes.rs` shows.)
    #[cfg(not(feature = "smol"))]
    #[test]
    fn redis_checks_outside_a_runtime_answer_by_policy() {
        let limiter = Limiter::builder()
            .redis_url("redis://127.0.0.1:1/")
            .failure_policy(FailurePolicy::Closed)
            .build()
            .unwrap();
        let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
        let mut context = Context::from_waker(Waker::noop());
        let mut check = pin!(limiter.check("k", rate));
        let Poll::Ready(Err(RateLimitError::Unavailable(crate::error::StoreError::NoRuntime))) =
            check.as_mut().poll(&mut context)
        else {
            panic!("expected an immediate `Unavailable` answer");
        };
    }

    /// A limiter whose checks probed its store's open breaker is freed once dropped: an
    /// answered probe's guard used to be forgotten, and with it a strong reference to the
    /// limiter's state (its deny cache, its connections) for the life of the process.
    #[tokio::test(flavor = "current_thread")]
    async fn a_limiter_that_probed_an_outage_is_freed_when_dropped() {
        // Nobody listens there: every call fails at once, and opens the breaker.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .unwrap()
            .port();
        let limiter = Limiter::builder()
            .redis_url(format!("redis://127.0.0.1:{port}"))
            .failure_policy(crate::FailurePolicy::Open)
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let state = Arc::downgrade(&limiter.shared);
        let rate = Rate::new(5, Duration::from_secs(60)).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !limiter.is_degraded() {
            assert!(
                std::time::Instant::now() < deadline,
                "the outage never began"
            );
            let _ = limiter.check("k", rate).await;
        }
        for _ in 0..3 {
            // Past the breaker's probe interval: this check starts its probe, answered
            // (refused) in the background.
            tokio::time::sleep(crate::health::PROBE_INTERVAL * 2).await;
            let _ = limiter.check("k", rate).await;
        }
        drop(limiter);
        while state.strong_count() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the dropped limiter's state is still held by {} references",
                state.strong_count()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A Tokio runtime built without its time (or I/O) driver: Tokio panics when a timer is
    /// made there, so the Redis store takes it for no runtime and the policy answers, without
    /// a panic (before, the check's timeout panicked). With the `smol` feature such a check
    /// would go to smol's executor instead; this crate's own tests build without it.
    #[cfg(not(feature = "smol"))]
    #[test]
    fn a_tokio_runtime_without_timers_gets_the_policy_answer() {
        for (enable_time, enable_io) in [(false, true), (true, false)] {
            let mut builder = tokio::runtime::Builder::new_current_thread();
            if enable_time {
                builder.enable_time();
            }
            if enable_io {
                builder.enable_io();
            }
            let runtime = builder.build().unwrap();
            let rate = Rate::new(5, Duration::from_secs(60)).unwrap();
            runtime.block_on(async {
                for policy in [crate::FailurePolicy::Open, crate::FailurePolicy::Closed] {
                    // Never reached: the check is answered before any I/O.
                    let limiter = Limiter::builder()
                        .redis_url("redis://127.0.0.1:1")
                        .failure_policy(policy)
                        .build()
                        .unwrap();
                    match (policy, limiter.check("k", rate).await) {
                        (crate::FailurePolicy::Open, Ok(decision)) => {
                            assert!(decision.allowed && decision.answered_by_policy());
                        }
                        (
                            crate::FailurePolicy::Closed,
                            Err(RateLimitError::Unavailable(crate::error::StoreError::NoRuntime)),
                        ) => {}
                        (policy, other) => panic!("{policy:?}: {other:?}"),
                    }
                    assert!(!limiter.is_degraded());
                }
            });
        }
    }

    #[test]
    fn limiters_are_send_sync_and_cheap_to_clone() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<Limiter>();
        assert_eq!(std::mem::size_of::<Limiter>(), std::mem::size_of::<usize>());
    }

    /// The check futures' sizes, pinned: each is moved into its caller's future, and its size
    /// is part of every in-process check's cost (see BENCHMARKS.md), so a change that grows
    /// them must say so here.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn check_futures_keep_their_size() {
        let limiter = Limiter::memory();
        let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
        let check = limiter.check("k", rate);
        let check_at = limiter.check_at("k", rate, SystemTime::UNIX_EPOCH);
        let attribute = crate::__private::check(&limiter, ("scope", None), rate);
        eprintln!(
            "check {}, check_at {}, __private::Check {}",
            std::mem::size_of_val(&check),
            std::mem::size_of_val(&check_at),
            std::mem::size_of_val(&attribute)
        );
        assert_eq!(std::mem::size_of_val(&check), 88);
        assert_eq!(std::mem::size_of_val(&check_at), 88);
        assert_eq!(std::mem::size_of::<crate::__private::Check<'_>>(), 104);
    }
}
