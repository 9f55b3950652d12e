//! The Redis store: one sorted set per key, checked by one atomic Lua script, on one server or
//! a Redis Cluster.
//!
//! - `mod.rs`: the store: a check within its timeout, on its runtime's connection;
//! - `config.rs`: the settings (URLs, TLS), checked when the limiter is built;
//! - `sentinel.rs`: a Sentinel deployment's master, watched;
//! - `target.rs`: the server, Sentinel deployment or cluster, its client and connections;
//! - `per_runtime.rs`: what the store keeps for each runtime (its connection, the master it
//!   reaches, its replacement), dropped when the runtime shuts down;
//! - `script.rs`: the script and one check's exchange with Redis (`sliding_window.lua`);
//! - `member.rs`: the unique members that name admissions;
//! - `slot.rs`: cluster hash slots;
//! - `registry.rs`: the limits shared through Redis, read and written;
//! - `scan.rs`: a reset by scope, its keys found with `SCAN`.

mod config;
mod member;
mod per_runtime;
pub(crate) mod registry;
mod scan;
mod script;
#[cfg(feature = "sentinel")]
mod sentinel;
mod slot;
mod target;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(crate) use self::config::{ConfigError, TlsSettings};
pub(crate) use self::member::Admission;
use self::member::MemberSource;
use self::per_runtime::PerRuntime;
#[cfg(any(feature = "cluster", feature = "sentinel"))]
use self::per_runtime::WeakPerRuntime;
use self::script::Call;
#[cfg(feature = "sentinel")]
use self::sentinel::WatchClaim;
use self::target::{Connection, Target};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::layout::{COUNTER_SUFFIX, ScopeKeys};
use crate::limit::{Grant, LimitRef, LimitsAnswer};
use crate::rate::{Algorithm, Rate};
#[cfg(feature = "cluster")]
use crate::runtime::RuntimeId;
use crate::runtime::{Runtime, timeout};

/// A Redis-backed sliding window log, connected lazily (on a check) and reconnected by
/// redis-rs (a `ConnectionManager`, or the cluster connection's own reconnection).
pub(crate) struct RedisStore {
    target: Target,
    prefix: Box<str>,
    timeout: Duration,
    /// One multiplexed connection per Tokio runtime that checks through this store, made on
    /// that runtime's first check (its driver task lives on that runtime), and what goes with
    /// it (the master it reaches, its replacements), all dropped when the runtime shuts down,
    /// so a limiter outlives the runtimes that use it (one per test, one per worker thread).
    runtimes: PerRuntime,
    /// Serialises connection attempts so that a burst of first calls makes one connection.
    connecting: async_lock::Mutex<()>,
    members: MemberSource,
    /// Set while a cluster's slot map is being asked for (one lookup at a time).
    looking_up: AtomicBool,
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
            runtimes: PerRuntime::default(),
            connecting: async_lock::Mutex::new(()),
            members: MemberSource::new(),
            looking_up: AtomicBool::new(false),
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

    /// A new lease's name, unique across processes and calls, and told apart from every
    /// admission's (see [`MemberSource::next_lease`]), for [`lease`](RedisStore::lease).
    pub(crate) fn lease_name(&self) -> Admission {
        self.members.next_lease()
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
                give_back: false,
            })
            .await?;
        script::decode_refund(&reply, limits)
    }

    /// Renews the slots `limits[i]` held as `admissions[i]` (all in one part) at `at` (`None`:
    /// the server's `TIME`), within the timeout (`renew.lua`): whether each is still held.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn renew(
        &self,
        limits: &[LimitRef<'_>],
        admissions: &[Admission],
        at: Option<u64>,
    ) -> Result<Vec<bool>, StoreError> {
        let reply = self
            .exchange(Call::Renew {
                limits,
                admissions,
                at,
            })
            .await?;
        script::decode_renew(&reply, limits.len())
    }

    /// Gives back the unspent reserve of `limit`'s lease named `lease`, granted at `now`: its
    /// members `1..=cost` in a log, its cost in a counter (what a reset since kept of it, at
    /// most), within the timeout (`refund.lua`).
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn give_back(
        &self,
        limit: LimitRef<'_>,
        lease: &Admission,
        now: u64,
    ) -> Result<(), StoreError> {
        let limits = [limit];
        let reply = self
            .exchange(Call::Refund {
                limits: &limits,
                admission: lease,
                now,
                give_back: true,
            })
            .await?;
        script::decode_refund(&reply, &limits).map(drop)
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

    /// Probes the node that holds `limit`'s state for an open circuit breaker (`probe.lua`),
    /// within the timeout: answered when a check of `limit` would be (written, and under
    /// [`wait_for_replicas`](crate::LimiterBuilder::wait_for_replicas) acknowledged), changing
    /// nothing.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn probe(&self, limit: LimitRef<'_>) -> Result<(), StoreError> {
        self.exchange(Call::Probe { limit }).await.map(drop)
    }

    /// Forgets the admissions of `key`'s sorted set and its counter's hash up to the server's
    /// now, keeping what live leases reserved (`reset.lua`), within the timeout: one call, or
    /// in a cluster one for each when their slots differ.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check).
    pub(crate) async fn reset(&self, key: &str) -> Result<(), StoreError> {
        // The rates go unused but for their algorithm, which names the key: the script
        // forgets the keys whatever their rates.
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
    /// the reset script on the keys found (as [`reset`](RedisStore::reset)), each round trip
    /// within the timeout. Returns how many keys were forgotten.
    ///
    /// # Errors
    ///
    /// As [`check`](RedisStore::check), for any round trip; the keys forgotten before it stay
    /// forgotten.
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
        scan::forget_matching(
            &mut connection,
            &self.prefix,
            keys.plain(),
            &patterns,
            // The shared limits' keys are no scope's (`layout::REGISTRY_TAG`).
            |stored| !stored.starts_with(crate::layout::REGISTRY_TAG) && keys.matches(stored),
            self.timeout,
        )
        .await
    }

    /// The shared limits' entries changed since the log entry `since` and its mark (`None`:
    /// every entry; see `registry.rs`), within the store's timeout.
    ///
    /// # Errors
    ///
    /// As [`reset`](RedisStore::reset); a malformed reply.
    pub(crate) async fn read_shared(
        &self,
        since: Option<(&str, &str)>,
    ) -> Result<registry::SharedRead, StoreError> {
        let arguments = registry::read_arguments(since);
        let keys = registry::keys(&self.prefix);
        let reply = self.registry_call(&keys, &arguments, false).await?;
        registry::decode_read(reply)
    }

    /// Writes the shared limits' `writes` after removing the fields matching `clear` (a
    /// glob; a field a [`Write::Set`](registry::Write::Set) gives is written instead), in one
    /// script that logs each field that changed; within the store's timeout, waiting for the
    /// replicas [`with_replica_wait`](RedisStore::with_replica_wait) names. The write carries
    /// an id of its own, so that sent again after a dropped connection it runs once. Returns
    /// how many fields changed.
    ///
    /// # Errors
    ///
    /// As [`read_shared`](RedisStore::read_shared); [`StoreError::NotReplicated`] when fewer
    /// replicas acknowledged it in time (it was written on the master).
    pub(crate) async fn write_shared(
        &self,
        clear: Option<&str>,
        writes: &[registry::Write],
    ) -> Result<u64, StoreError> {
        let mut id = [0_u8; 12];
        getrandom::fill(&mut id).map_err(|error| {
            StoreError::Protocol(format!("no random id for a write: {error}").into())
        })?;
        let id: String = id.iter().map(|byte| format!("{byte:02x}")).collect();
        let arguments = registry::write_arguments(clear, &id, writes);
        let [entries, log] = registry::keys(&self.prefix);
        let keys = [entries, log, registry::write_mark(&self.prefix, &id)];
        let reply = self.registry_call(&keys, &arguments, true).await?;
        registry::decode_write(&reply)
    }

    /// Runs the shared limits' read or write script on this runtime's connection, within the
    /// timeout, as a check's script runs ([`exchange`](RedisStore::exchange)); a write waits
    /// for the replicas.
    async fn registry_call(
        &self,
        keys: &[String],
        arguments: &[String],
        write: bool,
    ) -> Result<redis::Value, StoreError> {
        let Some(runtime) = Runtime::current() else {
            return Err(StoreError::NoRuntime);
        };
        let call = async {
            let mut connection = self.connection(&runtime).await?;
            let (reply, acknowledged) =
                registry::call(&mut connection, keys, arguments, write, self.replica_wait)
                    .await
                    .map_err(|err| self.script_error(&runtime, err))?;
            self.replicated(reply, acknowledged, true)
        };
        let result = match timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_elapsed) => Err(StoreError::Timeout(self.timeout)),
        };
        self.ended(&runtime, result)
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
        self.ended(&runtime, result)
    }

    /// `result`, the result of a call within the timeout on `runtime`'s connection, once the
    /// connection is forgotten if it timed out or leads to a replica (the next call connects
    /// afresh).
    fn ended<T>(&self, runtime: &Runtime, result: Result<T, StoreError>) -> Result<T, StoreError> {
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
            self.runtimes.forget(runtime.id());
        } else if matches!(result, Err(StoreError::Timeout(_))) {
            #[cfg(feature = "cluster")]
            self.replace_after_timeout(runtime);
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
    /// which a new connection cannot cure) at most one per interval, which doubles from the
    /// timeout up to [`REPLACEMENT_INTERVAL_MAX`](per_runtime::REPLACEMENT_INTERVAL_MAX). The
    /// replacement task runs on the runtime: a runtime that shuts down drops it, and its state
    /// goes with the runtime's entry (`per_runtime.rs`).
    #[cfg(feature = "cluster")]
    fn replace_after_timeout(&self, runtime: &Runtime) {
        let id = runtime.id();
        let Some(old) = self.runtimes.connection(id) else {
            return;
        };
        let began = std::time::Instant::now().checked_sub(self.timeout);
        if !began.is_some_and(|began| old.cluster_made_before(began))
            || !self.runtimes.start_replacement(id, self.timeout)
        {
            return;
        }
        let runtimes = self.runtimes.downgrade();
        let Some(reconnection) = self.target.cluster_reconnection() else {
            runtimes.end_replacement(id);
            return;
        };
        /// Ends the runtime's replacement with the task, or when its runtime drops it.
        struct Ending(WeakPerRuntime, RuntimeId);
        impl Drop for Ending {
            fn drop(&mut self) {
                self.0.end_replacement(self.1);
            }
        }
        let ending = Ending(runtimes.clone(), id);
        let limit = self.timeout.saturating_mul(2);
        runtime.spawn(async move {
            let _ending = ending;
            let Ok(Ok(new)) = timeout(limit, reconnection).await else {
                return;
            };
            if runtimes.replace(id, &old, new) {
                tracing::debug!("a Redis Cluster connection is replaced after a timeout");
            }
        });
    }

    async fn run_script(&self, runtime: &Runtime, call: Call<'_>) -> Result<Vec<i64>, StoreError> {
        let mut connection = self.connection(runtime).await?;
        let (reply, acknowledged) =
            script::run(&mut connection, &self.prefix, call, self.replica_wait)
                .await
                .map_err(|err| self.script_error(runtime, err))?;
        // Only what the call recorded needs its replicas: a denial stands as the master gave
        // it.
        let recorded = call.recorded(&reply);
        self.replicated(reply, acknowledged, recorded)
    }

    /// A script's failure as the store's error; an unrecoverable one lets the next call on
    /// `runtime` build a fresh connection.
    fn script_error(&self, runtime: &Runtime, err: redis::RedisError) -> StoreError {
        if err.is_unrecoverable_error() {
            self.runtimes.forget(runtime.id());
        }
        self.store_error(err)
    }

    /// `reply`, unless it `needs` its replicas and fewer than the store waits for
    /// `acknowledged` it ([`StoreError::NotReplicated`]: it was made on the master).
    fn replicated<T>(
        &self,
        reply: T,
        acknowledged: Option<u64>,
        needs: bool,
    ) -> Result<T, StoreError> {
        match (acknowledged, self.replica_wait) {
            (Some(acknowledged), Some((wanted, _)))
                if acknowledged < u64::from(wanted) && needs =>
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
            let runtimes = self.runtimes.downgrade();
            runtime.spawn(watch_master(claim, runtimes, self.timeout));
        }
        if let Some(connection) = self.runtimes.connection(id) {
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
        if let Some(connection) = self.runtimes.connection(id) {
            return Ok(connection);
        }
        let connected = self
            .target
            .connect(self.timeout)
            .await
            .map_err(|err| self.store_error(err))?;
        let connection = connected.connection.clone();
        self.runtimes.connected(runtime, connected);
        Ok(connection)
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
}

/// The claim of [`RedisStore::claim_lookup`].
pub(crate) struct LookupClaim<'a>(&'a AtomicBool);

impl Drop for LookupClaim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The watch of a Sentinel deployment's master (see `sentinel.rs`): every
/// [`INTERVAL`](sentinel::INTERVAL), asks the sentinels (each within `limit`) which master
/// they name, and forgets every runtime's connection that reaches another once two answers in
/// a row name it. Ends with the store, or with its runtime (the next connection starts
/// another).
#[cfg(feature = "sentinel")]
async fn watch_master(claim: WatchClaim, runtimes: WeakPerRuntime, limit: Duration) {
    let (mut sentinel, mut previous) = (None, None);
    loop {
        crate::runtime::sleep(sentinel::INTERVAL).await;
        if runtimes.is_gone() {
            return;
        }
        let Some(named) = claim.confirmed(&mut sentinel, &mut previous, limit).await else {
            continue;
        };
        match runtimes.forget_other_masters(named) {
            None => return,
            Some(0) => {}
            Some(_) => {
                tracing::debug!("the sentinels name another master: its connections are dropped");
            }
        }
    }
}
