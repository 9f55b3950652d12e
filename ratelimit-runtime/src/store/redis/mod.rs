//! The Redis store: one sorted set per key, checked by one atomic Lua script, on one server or
//! a Redis Cluster.
//!
//! - `mod.rs`: the store: a check within its timeout, and the connections, one per runtime;
//! - `config.rs`: the settings (URLs, TLS), checked when the limiter is built;
//! - `sentinel.rs`: a Sentinel deployment's master, watched;
//! - `target.rs`: the server, Sentinel deployment or cluster, its client and connections;
//! - `script.rs`: the script and one check's exchange with Redis (`sliding_window.lua`);
//! - `member.rs`: the unique members that name admissions;
//! - `slot.rs`: cluster hash slots;
//! - `scan.rs`: a reset by scope, its keys found with `SCAN`.

mod config;
mod member;
mod scan;
mod script;
#[cfg(feature = "sentinel")]
mod sentinel;
mod slot;
mod target;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

pub(crate) use self::config::{ConfigError, TlsSettings};
pub(crate) use self::member::Admission;
use self::member::MemberSource;
use self::script::Call;
#[cfg(feature = "sentinel")]
use self::sentinel::WatchClaim;
use self::target::{Connection, Target};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::layout::{COUNTER_SUFFIX, ScopeKeys};
use crate::limit::{Grant, LimitRef, LimitsAnswer};
use crate::rate::{Algorithm, Rate};
use crate::runtime::{Runtime, RuntimeId, timeout};

/// A Redis-backed sliding window log, connected lazily (on a check) and reconnected by
/// redis-rs (a `ConnectionManager`, or the cluster connection's own reconnection).
pub(crate) struct RedisStore {
    target: Target,
    prefix: Box<str>,
    timeout: Duration,
    /// One multiplexed connection per Tokio runtime that checks through this store, made on
    /// that runtime's first check (its driver task lives on that runtime) and forgotten when
    /// the runtime shuts down, so a limiter outlives the runtimes that use it (one per test,
    /// one per worker thread).
    connections: Arc<RwLock<Connections>>,
    /// Serialises connection attempts so that a burst of first calls makes one connection.
    connecting: async_lock::Mutex<()>,
    members: MemberSource,
    /// Set while a cluster's slot map is being asked for (one lookup at a time).
    looking_up: AtomicBool,
    /// Each runtime's replacements of its cluster connection after a timeout (see
    /// [`RedisStore::replace_after_timeout`]).
    #[cfg(feature = "cluster")]
    replacements: Arc<Replacements>,
    /// Set once the server refused the `no-writes` flag of the look's script (Redis 5, 6).
    peek_without_flags: AtomicBool,
    /// The replicas a recording call waits for, and for how long at most (`WAIT`).
    replica_wait: Option<(u32, Duration)>,
}

impl RedisStore {
    /// A store on the server at `url` (no I/O happens here) whose keys are `prefix` + the key.
    ///
    /// # Errors
    ///
    /// The URL does not parse, names a scheme this build cannot serve, or does not match the
    /// TLS settings.
    pub(crate) fn single(
        url: &str,
        tls: &TlsSettings,
        prefix: &str,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        Ok(RedisStore::new(Target::single(url, tls)?, prefix, timeout))
    }

    /// A store on the Redis Cluster reached through `nodes` (no I/O happens here).
    ///
    /// # Errors
    ///
    /// No node, or a node URL rejected as by [`RedisStore::single`] or unfit for a cluster.
    #[cfg(feature = "cluster")]
    pub(crate) fn cluster(
        nodes: &[String],
        tls: &TlsSettings,
        prefix: &str,
        timeout: Duration,
    ) -> Result<Self, ConfigError> {
        Ok(RedisStore::new(
            Target::cluster(nodes, tls, timeout)?,
            prefix,
            timeout,
        ))
    }

    fn new(target: Target, prefix: &str, timeout: Duration) -> RedisStore {
        RedisStore {
            target,
            prefix: prefix.into(),
            timeout,
            connections: Arc::default(),
            connecting: async_lock::Mutex::new(()),
            members: MemberSource::new(),
            looking_up: AtomicBool::new(false),
            #[cfg(feature = "cluster")]
            replacements: Arc::default(),
            peek_without_flags: AtomicBool::new(false),
            replica_wait: None,
        }
    }

    /// This store, its recording calls waiting for `replicas` replicas to acknowledge them, at
    /// most `limit` each (`WAIT`, sent right behind the script on the key's master
    /// connection); `None`: no waiting.
    pub(crate) fn with_replica_wait(mut self, wait: Option<(u32, Duration)>) -> RedisStore {
        self.replica_wait = wait;
        self
    }

    /// How long a call may take, connecting included.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `redis` or `redis-cluster`.
    pub(crate) fn kind(&self) -> &'static str {
        self.target.kind()
    }

    /// How many parts the limiter's circuit breakers split this store into: one for a server;
    /// for a cluster, one per hash slot, so that a failed master stops only its own slots.
    pub(crate) fn parts(&self) -> usize {
        if self.target.is_one_server() {
            1
        } else {
            slot::SLOTS
        }
    }

    /// The part `key` belongs to (below [`RedisStore::parts`]): in a cluster, the hash slot of
    /// `<prefix><key>`.
    pub(crate) fn part(&self, key: &str) -> usize {
        if self.target.is_one_server() {
            0
        } else {
            usize::from(slot::key_slot(&self.prefix, key))
        }
    }

    /// The part `limit`'s state is in: [`part`](RedisStore::part) of its key, with
    /// [`COUNTER_SUFFIX`] after it for a sliding window counter (the same slot when the key
    /// has a hash tag, as the attribute's stacked keys do).
    pub(crate) fn part_of(&self, limit: LimitRef<'_>) -> usize {
        if !self.target.is_one_server() && limit.rate.is_counter() {
            usize::from(slot::slot_of(&[&self.prefix, limit.key, COUNTER_SUFFIX]))
        } else {
            self.part(limit.key)
        }
    }

    /// Checks `limit` at `at` (µs since the Unix epoch; `None`: the Redis server's clock) and
    /// records the call when admitted, all within the store's timeout.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoRuntime`] outside a runtime. [`StoreError::Timeout`] when the whole
    /// check (connecting included) took longer than the timeout; the call is not resent, since
    /// it may have been recorded. [`StoreError::Redis`] when connecting or the script failed,
    /// [`StoreError::Protocol`] on a malformed reply.
    pub(crate) async fn check(
        &self,
        limit: LimitRef<'_>,
        at: Option<u64>,
    ) -> Result<Decision, StoreError> {
        if limit.cost != 1 || limit.rate.is_counter() {
            let limits = [limit];
            let answer = if limit.rate.is_counter() {
                // Never refunded: no admission to name.
                let call = Call::Counter {
                    limit,
                    admission: None,
                    at,
                };
                script::decode_limits(&self.exchange(call).await?, &limits)?
            } else {
                // Boxed: a rare way (a cost above 1 through `check`), whose future would
                // otherwise size every check's.
                Box::pin(self.check_all(&limits, &self.admission(), at)).await?
            };
            return answer
                .decisions
                .into_iter()
                .next()
                .ok_or(StoreError::Protocol("no decision".into()));
        }
        let member = self.members.next();
        let reply = self
            .exchange(Call::One {
                limit,
                member: &member,
                at,
            })
            .await?;
        script::decode(&reply, limit.rate.threshold())
    }

    /// A new admission's name, unique across processes and calls, for
    /// [`check_all`](RedisStore::check_all) and its [`refund`](RedisStore::refund).
    pub(crate) fn admission(&self) -> Admission {
        self.members.next()
    }

    /// Checks `limits` (distinct keys, all in one part: see [`RedisStore::part`]) together at
    /// `at`, as [`check`](RedisStore::check): one script admits the call and records
    /// `admission` in every limit, or records it in none. Returns whether it was admitted,
    /// and each limit's decision (on a denial, a limit that would have admitted it says so).
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn check_all(
        &self,
        limits: &[LimitRef<'_>],
        admission: &Admission,
        at: Option<u64>,
    ) -> Result<LimitsAnswer, StoreError> {
        let call = match limits {
            // One counter: its own script, a few calls shorter, with the same reply.
            [limit] if limit.rate.is_counter() => Call::Counter {
                limit: *limit,
                admission: Some(admission),
                at,
            },
            _ => Call::Several {
                limits,
                admission,
                at,
            },
        };
        let reply = self.exchange(call).await?;
        script::decode_limits(&reply, limits)
    }

    /// Removes `admission`, recorded by [`check_all`](RedisStore::check_all) at `now` (µs
    /// since the Unix epoch, its answer's), from the sets of `limits` (all in one part), within
    /// the timeout; returns each limit's decision without the call. Each key's TTL stays.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn refund(
        &self,
        limits: &[LimitRef<'_>],
        admission: &Admission,
        now: u64,
    ) -> Result<Vec<Decision>, StoreError> {
        let reply = self
            .exchange(Call::Refund {
                limits,
                admission,
                now,
            })
            .await?;
        script::decode_refund(&reply, limits)
    }

    /// A lease of `limit` (cost 1) named `lease`, on the server's clock: the call at hand is
    /// checked and, admitted, recorded with up to `wanted − 1` more admissions reserved for
    /// `lasts` (`lease.lua`), within the timeout. Its give-back is [`refund`](RedisStore::refund)
    /// of the unused ones, at the grant's time.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check); a lease whose outcome is unknown reserved nothing
    /// anyone spends: what it may have recorded leaves the window with its lease.
    pub(crate) async fn lease(
        &self,
        limit: LimitRef<'_>,
        lease: &Admission,
        wanted: u32,
        lasts: std::time::Duration,
    ) -> Result<Grant, StoreError> {
        let lasts = u64::try_from(lasts.as_micros()).unwrap_or(u64::MAX);
        let call = Call::Lease {
            limit,
            lease,
            wanted,
            lasts,
        };
        script::decode_lease(&self.exchange(call).await?, limit.rate.threshold())
    }

    /// What a check of `limit` (cost 1) at `at` would answer, writing nothing (`peek.lua`),
    /// within the timeout: `remaining` is what is left now, no call counted.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn peek(
        &self,
        limit: LimitRef<'_>,
        at: Option<u64>,
    ) -> Result<Decision, StoreError> {
        let flagged = !self.peek_without_flags.load(Ordering::Relaxed);
        let mut reply = self.exchange(Call::Peek { limit, at, flagged }).await;
        if flagged && let Err(StoreError::Redis(error)) = &reply {
            let unknown = script::is_flags_refused(error);
            if unknown || error.code() == Some("NOPERM") {
                // Redis 5 or 6 (from now on), or a user allowed `EVALSHA` but not
                // `EVALSHA_RO` (this time): the look without its flag, as checks are sent.
                if unknown {
                    self.peek_without_flags.store(true, Ordering::Relaxed);
                }
                let flagged = false;
                reply = self.exchange(Call::Peek { limit, at, flagged }).await;
            }
        }
        script::decode_peek(&reply?, limit.rate.threshold())
    }

    /// Deletes `key`'s sorted set and its counter's hash (`reset.lua`), within the timeout:
    /// one call, or in a cluster one for each when their slots differ.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn reset(&self, key: &str) -> Result<(), StoreError> {
        // The rates go unused but for their algorithm, which names the key: the script
        // deletes the keys whatever their rates.
        let log = Rate::new_const(1, Duration::from_secs(1));
        let counter = log.with_algorithm(Algorithm::SlidingWindowCounter);
        let limits = [
            LimitRef {
                key,
                rate: log,
                cost: 0,
            },
            LimitRef {
                key,
                rate: counter,
                cost: 0,
            },
        ];
        let delete = |limits| async move {
            let reply = self.exchange(Call::Reset { limits }).await?;
            match reply.as_slice() {
                [_deleted] => Ok(()),
                other => Err(StoreError::Protocol(
                    format!("expected 1 integer, got {}", other.len()).into(),
                )),
            }
        };
        if self.part_of(limits[0]) == self.part_of(limits[1]) {
            delete(&limits[..]).await
        } else {
            let (log, counter) =
                futures_util::future::join(delete(&limits[..1]), delete(&limits[1..])).await;
            log.and(counter)
        }
    }

    /// Forgets every log of `keys`' scope and key (see [`ScopeKeys`]): `SCAN` on the server, or
    /// on the master of a pattern's hash tag (every master for a pattern without one), then
    /// `UNLINK` of the keys found, each round trip within the timeout.
    /// Returns how many keys were deleted.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check), for any round trip; the keys deleted before it stay
    /// deleted.
    pub(crate) async fn reset_scope(&self, keys: &ScopeKeys) -> Result<u64, StoreError> {
        let Some(runtime) = Runtime::current() else {
            return Err(StoreError::NoRuntime);
        };
        let mut connection = match timeout(self.timeout, self.connection(&runtime)).await {
            Ok(connection) => connection?,
            Err(_elapsed) => return Err(StoreError::Timeout(self.timeout)),
        };
        let patterns: Vec<scan::Pattern> = keys
            .patterns()
            .into_iter()
            .map(|(glob, exemplar)| scan::Pattern {
                glob,
                slot: exemplar.map(|key| slot::key_slot(&self.prefix, &key)),
            })
            .collect();
        scan::delete_matching(
            &mut connection,
            &self.prefix,
            keys.plain(),
            &patterns,
            |stored| keys.matches(stored),
            self.timeout,
        )
        .await
    }

    /// Runs `call` within the store's timeout, connecting first if need be; a connection that
    /// timed out, or leads to a replica, is forgotten (the next call connects afresh).
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    async fn exchange(&self, call: Call<'_>) -> Result<Vec<i64>, StoreError> {
        let Some(runtime) = Runtime::current() else {
            return Err(StoreError::NoRuntime);
        };
        let result = match timeout(self.timeout, self.run_script(&runtime, call)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(StoreError::Timeout(self.timeout)),
        };
        let stale = match &result {
            // The connection may be dead without knowing it (a failover behind a virtual IP,
            // a dropped NAT entry), or lead to a demoted primary: the next check connects
            // afresh. Not in a cluster, whose client reconnects each node by itself: there the
            // next checks would all wait for a new connection to every master, for one slow
            // master; a new one is made beside it instead (`replace_after_timeout`).
            Err(StoreError::Timeout(_)) => true,
            Err(StoreError::Redis(error)) => error.code() == Some("READONLY"),
            _ => false,
        };
        if stale && self.target.is_one_server() {
            self.forget_connection(runtime.id());
        } else if matches!(result, Err(StoreError::Timeout(_))) {
            #[cfg(feature = "cluster")]
            self.replace_after_timeout(&runtime);
        }
        result
    }

    /// After a cluster call timed out on the runtime's current connection (one made at least a
    /// timeout ago, so before the call began: no clock is read on the way of a check), a new
    /// connection is made in the background and takes its place once connected.
    /// redis-rs's cluster connection can stay on a stale slot map: after a master was killed
    /// under traffic, its slots' calls kept timing out long after its replica had taken over,
    /// no error ever telling it to ask the cluster again (redis-rs 1.8). A new connection
    /// asks. Checks meanwhile use the old one (their breakers answer the stuck slots); its
    /// calls in flight end on it, and none is resent on the new one.
    ///
    /// Per runtime, one replacement at a time, and while timeouts go on (a stalled master,
    /// which a new connection cannot cure) at most one per [`Replacements`] interval, which
    /// doubles from the timeout up to [`REPLACEMENT_INTERVAL_MAX`].
    #[cfg(feature = "cluster")]
    fn replace_after_timeout(&self, runtime: &Runtime) {
        let id = runtime.id();
        let Some(old) = self.cached(id) else {
            return;
        };
        let began = std::time::Instant::now().checked_sub(self.timeout);
        if !began.is_some_and(|began| old.cluster_made_before(began))
            || !self.replacements.start(id, self.timeout)
        {
            return;
        }
        let Some(reconnection) = self.target.cluster_reconnection() else {
            self.replacements.end(id);
            return;
        };
        /// Ends the runtime's replacement with the task, or when its runtime drops it.
        struct Ending(Weak<Replacements>, RuntimeId);
        impl Drop for Ending {
            fn drop(&mut self) {
                if let Some(replacements) = self.0.upgrade() {
                    replacements.end(self.1);
                }
            }
        }
        let ending = Ending(Arc::downgrade(&self.replacements), id);
        let connections = Arc::downgrade(&self.connections);
        let limit = self.timeout.saturating_mul(2);
        runtime.spawn(async move {
            let _ending = ending;
            let Ok(Ok(new)) = timeout(limit, reconnection).await else {
                return;
            };
            let Some(connections) = connections.upgrade() else {
                return;
            };
            let mut connections = connections.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(current) = connections.get_mut(&id)
                && current
                    .as_ref()
                    .is_some_and(|current| current.same_as(&old))
            {
                tracing::debug!("a Redis Cluster connection is replaced after a timeout");
                *current = Some(new);
            }
        });
    }

    async fn run_script(&self, runtime: &Runtime, call: Call<'_>) -> Result<Vec<i64>, StoreError> {
        let mut connection = self.connection(runtime).await?;
        let (reply, acknowledged) =
            script::run(&mut connection, &self.prefix, call, self.replica_wait)
                .await
                .map_err(|err| {
                    if err.is_unrecoverable_error() {
                        // Let the next check build a fresh connection.
                        self.forget_connection(runtime.id());
                    }
                    self.store_error(err)
                })?;
        // Only what the call recorded needs its replicas: a denial stands as the master gave
        // it.
        match (acknowledged, self.replica_wait) {
            (Some(acknowledged), Some((wanted, _)))
                if acknowledged < u64::from(wanted) && call.recorded(&reply) =>
            {
                Err(StoreError::NotReplicated {
                    acknowledged,
                    wanted,
                })
            }
            _ => Ok(reply),
        }
    }

    /// Claims the one slot-map lookup that may run at a time (cluster only); `None` when
    /// another runs. The lookup ends when the claim is dropped.
    pub(crate) fn claim_lookup(&self) -> Option<LookupClaim<'_>> {
        (!self.target.is_one_server() && !self.looking_up.swap(true, Ordering::AcqRel))
            .then_some(LookupClaim(&self.looking_up))
    }

    /// In a cluster, the slot ranges of the master that owns `part`'s slot (see
    /// [`RedisStore::part`]), asked of up to three nodes, each within the timeout (four
    /// timeouts in all, connecting included); `None` for a single server, or when the cluster
    /// does not tell.
    pub(crate) async fn master_parts(&self, part: usize) -> Option<Vec<(u16, u16)>> {
        if self.target.is_one_server() {
            return None;
        }
        let runtime = Runtime::current()?;
        let slot = u16::try_from(part).ok()?;
        let lookup = async {
            self.connection(&runtime)
                .await
                .ok()?
                .master_slots(slot, self.timeout)
                .await
        };
        timeout(self.timeout.saturating_mul(4), lookup)
            .await
            .ok()
            .flatten()
    }

    /// This runtime's connection, made now if it has none.
    async fn connection(&self, runtime: &Runtime) -> Result<Connection, StoreError> {
        let id = runtime.id();
        #[cfg(feature = "sentinel")]
        if let Some(claim) = self.target.watch_claim() {
            // A Sentinel deployment's watch, started (again, when its runtime shut down).
            let connections = Arc::downgrade(&self.connections);
            runtime.spawn(watch_master(claim, connections, self.timeout));
        }
        if let Some(connection) = self.cached(id) {
            return Ok(connection);
        }
        // Boxed: connecting's future is large, and every check's future would carry it.
        Box::pin(self.connect(runtime)).await
    }

    /// [`connection`](RedisStore::connection)'s slow path: connects, one caller at a time,
    /// unless another caller connected meanwhile.
    async fn connect(&self, runtime: &Runtime) -> Result<Connection, StoreError> {
        let id = runtime.id();
        let _gate = self.connecting.lock().await;
        if let Some(connection) = self.cached(id) {
            return Ok(connection);
        }
        let connection = self
            .target
            .connect(self.timeout, id)
            .await
            .map_err(|err| self.store_error(err))?;
        let watched = self
            .write_connections()
            .insert(id, Some(connection.clone()))
            .is_some();
        if !watched && runtime.shuts_down() {
            // Once per runtime: the entry stays (without a connection) when one is forgotten.
            runtime.spawn(forget_on_shutdown(id, Arc::downgrade(&self.connections)));
        }
        Ok(connection)
    }

    /// Drops this runtime's connection; the next check makes a new one.
    fn forget_connection(&self, id: RuntimeId) {
        if let Some(connection) = self.write_connections().get_mut(&id) {
            *connection = None;
        }
    }

    /// The error of a failed check: redis-rs's own connection and response timeouts (set to
    /// the store's) are reported as the check's timeout, like the one that bounds it.
    fn store_error(&self, err: redis::RedisError) -> StoreError {
        if err.is_timeout() {
            StoreError::Timeout(self.timeout)
        } else {
            StoreError::Redis(err)
        }
    }

    fn cached(&self, id: RuntimeId) -> Option<Connection> {
        self.connections
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
            .flatten()
    }

    fn write_connections(&self) -> std::sync::RwLockWriteGuard<'_, Connections> {
        self.connections
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The longest interval between two replacements of a runtime's cluster connection while its
/// checks keep timing out.
#[cfg(feature = "cluster")]
const REPLACEMENT_INTERVAL_MAX: Duration = Duration::from_secs(30);

/// Each runtime's replacements of its cluster connection: whether one is under way, when the
/// last began, and the interval before the next may begin: the store's timeout at first, then
/// doubled at each replacement that follows the last within twice the interval, up to
/// [`REPLACEMENT_INTERVAL_MAX`]; back to the timeout after a quiet spell.
#[cfg(feature = "cluster")]
#[derive(Default)]
struct Replacements(std::sync::Mutex<HashMap<RuntimeId, Replacement>>);

#[cfg(feature = "cluster")]
struct Replacement {
    under_way: bool,
    began: std::time::Instant,
    interval: Duration,
}

#[cfg(feature = "cluster")]
impl Replacements {
    /// Starts a replacement for runtime `id` unless one is under way or the interval since the
    /// last has not passed; `true` when it started (end it with [`Replacements::end`]).
    fn start(&self, id: RuntimeId, timeout: Duration) -> bool {
        let now = std::time::Instant::now();
        let mut replacements = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match replacements.get_mut(&id) {
            None => {
                replacements.insert(
                    id,
                    Replacement {
                        under_way: true,
                        began: now,
                        interval: timeout,
                    },
                );
                true
            }
            Some(last) => {
                let since = now.saturating_duration_since(last.began);
                if last.under_way || since < last.interval {
                    return false;
                }
                last.interval = if since < last.interval.saturating_mul(2) {
                    last.interval
                        .saturating_mul(2)
                        .min(REPLACEMENT_INTERVAL_MAX)
                } else {
                    timeout
                };
                last.under_way = true;
                last.began = now;
                true
            }
        }
    }

    fn end(&self, id: RuntimeId) {
        let mut replacements = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(last) = replacements.get_mut(&id) {
            last.under_way = false;
        }
    }
}

/// The claim of [`RedisStore::claim_lookup`].
pub(crate) struct LookupClaim<'a>(&'a AtomicBool);

impl Drop for LookupClaim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Each runtime's connection (`None` once forgotten, until the next check makes one).
type Connections = HashMap<RuntimeId, Option<Connection>>;

/// The watch of a Sentinel deployment's master (see `sentinel.rs`): every
/// [`INTERVAL`](sentinel::INTERVAL), asks the sentinels (each within `limit`) which master
/// they name, and forgets every runtime's connection once it is not the one they reach. Ends
/// with the store, or with its runtime (the next connection starts another).
#[cfg(feature = "sentinel")]
async fn watch_master(claim: WatchClaim, connections: Weak<RwLock<Connections>>, limit: Duration) {
    let (mut sentinel, mut previous) = (None, None);
    loop {
        crate::runtime::sleep(sentinel::INTERVAL).await;
        if connections.strong_count() == 0 {
            return;
        }
        let stale = claim.stale(&mut sentinel, &mut previous, limit).await;
        if stale.is_empty() {
            continue;
        }
        let Some(connections) = connections.upgrade() else {
            return;
        };
        let mut connections = connections.write().unwrap_or_else(PoisonError::into_inner);
        tracing::debug!("the sentinels name another master: its connections are dropped");
        for id in stale {
            if let Some(connection) = connections.get_mut(&id) {
                *connection = None;
            }
        }
    }
}

/// A task that never finishes: when its runtime shuts down and drops it, the runtime's
/// connection is forgotten (its driver task is gone with the runtime).
async fn forget_on_shutdown(id: RuntimeId, connections: Weak<RwLock<Connections>>) {
    struct Forget(RuntimeId, Weak<RwLock<Connections>>);
    impl Drop for Forget {
        fn drop(&mut self) {
            if let Some(connections) = self.1.upgrade() {
                connections
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&self.0);
            }
        }
    }
    let _forget = Forget(id, connections);
    std::future::pending::<()>().await;
}
