//! [`LimiterBuilder`]: a limiter's store (Redis, a Redis Cluster, or in process), key prefix,
//! failure policy, timeout and key cap, checked when it is built.

use std::fmt;
use std::num::NonZeroUsize;
use std::time::Duration;

use crate::check::{DenyCache, Shared};
use crate::error::RateLimitError;
use crate::limiter::Limiter;
use crate::policy::FailurePolicy;
use crate::store::Store;
use crate::store::memory::MemoryStore;
use crate::store::redis::{RedisStore, TlsSettings};
use crate::testing::ManualClock;

/// The largest deny cache capacity a builder accepts: 2^22 entries (about 310 MiB).
const MAX_DENY_CACHE_CAPACITY: usize = 1 << 22;
impl Limiter {
    /// A builder, for a Redis limiter or to set the failure policy, prefix and timeout.
    #[must_use]
    pub fn builder() -> LimiterBuilder {
        LimiterBuilder::default()
    }
}

/// Configures a [`Limiter`]: the store (Redis, or in process when no URL is given), the key
/// prefix, the failure policy and the timeout.
#[derive(Clone)]
pub struct LimiterBuilder {
    redis: Option<RedisTarget>,
    tls: TlsSettings,
    key_prefix: String,
    failure_policy: FailurePolicy,
    timeout: Duration,
    max_keys: Option<usize>,
    clock: Option<ManualClock>,
    shadow: bool,
    deny_cache: bool,
    deny_cache_ttl: Duration,
    deny_cache_capacity: usize,
    replica_wait: Option<(u32, Duration)>,
    limits_file: Option<std::path::PathBuf>,
    shared_limits: bool,
}

/// The Redis deployment a builder was pointed at.
#[derive(Clone)]
enum RedisTarget {
    Url(String),
    #[cfg(feature = "cluster")]
    Cluster(Vec<String>),
}

impl Default for LimiterBuilder {
    fn default() -> Self {
        LimiterBuilder {
            redis: None,
            tls: TlsSettings::default(),
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            failure_policy: FailurePolicy::default(),
            timeout: Self::DEFAULT_TIMEOUT,
            max_keys: None,
            clock: None,
            shadow: false,
            deny_cache: true,
            deny_cache_ttl: Self::DEFAULT_DENY_CACHE_TTL,
            deny_cache_capacity: Self::DEFAULT_DENY_CACHE_CAPACITY,
            replica_wait: None,
            limits_file: None,
            shared_limits: false,
        }
    }
}

impl LimiterBuilder {
    /// The key prefix when none is set: Redis keys are `ratelimit:<key>`.
    pub const DEFAULT_KEY_PREFIX: &'static str = "ratelimit:";
    /// How long a Redis check may take, connecting included, when no timeout is set: 250 ms.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);
    /// How long a cached denial answers before a check asks the store again, when no time to
    /// live is set: 1 s (see [`deny_cache_ttl`](LimiterBuilder::deny_cache_ttl)).
    pub const DEFAULT_DENY_CACHE_TTL: Duration = Duration::from_secs(1);
    /// How many denials the deny cache keeps at most, when no capacity is set: 4,096 (about
    /// 310 KiB; see [`deny_cache_capacity`](LimiterBuilder::deny_cache_capacity)).
    pub const DEFAULT_DENY_CACHE_CAPACITY: usize = 4_096;

    /// Keeps the logs in the Redis server at `url`: `redis://[[user]:password@]host[:port][/db]`,
    /// `rediss://…` for TLS (feature `tls`), or `redis+unix:///path`. Without it (or
    /// [`redis_cluster`](LimiterBuilder::redis_cluster)) the limiter is in process. The last of
    /// the two calls wins. Takes what configuration gives: a `&str`, a `String`, a
    /// `Cow<str>`.
    ///
    /// Or, with the `sentinel` feature, the master of a Redis Sentinel deployment:
    /// `redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/<master name>[/<db>]`
    /// (`rediss+sentinel://` for TLS to the sentinels and the master; sentinels' port 26379 by
    /// default). The URL's user and password are the master's; sentinels with credentials of
    /// their own take `?sentinel_username=…&sentinel_password=…`. Each connection asks the
    /// sentinels for the master, and the limiter asks them again every 200 ms which master
    /// they name: once two asks in a row name another master than a connection reaches, that
    /// connection is dropped and the next check connects to the new master (see
    /// [`guide::redis`](crate::guide::redis#redis-sentinel) for what a failover costs).
    #[must_use]
    pub fn redis_url(mut self, url: impl AsRef<str>) -> Self {
        self.redis = Some(RedisTarget::Url(url.as_ref().to_owned()));
        self
    }

    /// Keeps the logs in the Redis Cluster reached through `nodes` (`redis://` or `rediss://`
    /// URLs of some of its masters; the rest is discovered), each key's sorted set on the node
    /// that owns its slot. A check of one limit touches one key, so keys need no hash tags; a
    /// check of several (stacked attributes, [`check_all`](Limiter::check_all)) is atomic
    /// within each slot it touches (the guide's [`keys`](crate::guide::keys) page says how
    /// the attribute's stacked keys share one).
    ///
    /// The cluster client follows `MOVED` and `ASK` redirections and reconnects to moved or
    /// failed-over masters within the check's timeout; the script counts a call that it resends
    /// once.
    #[cfg(feature = "cluster")]
    #[must_use]
    pub fn redis_cluster<I>(mut self, nodes: I) -> Self
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let nodes = nodes
            .into_iter()
            .map(|node| node.as_ref().to_owned())
            .collect();
        self.redis = Some(RedisTarget::Cluster(nodes));
        self
    }

    /// Trusts the CA certificates in `pem` (PEM text) for `rediss://` servers, instead of the
    /// platform's root certificates.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls_ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca_certificate = Some(pem.into());
        self
    }

    /// Presents the certificate chain `certificate_pem` with its private key `key_pem` (both
    /// PEM text) to `rediss://` servers that ask for client certificates (mutual TLS).
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn tls_client_identity(
        mut self,
        certificate_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client_identity = Some((certificate_pem.into(), key_pem.into()));
        self
    }

    /// Caps the keys the in-process store tracks (the in-process limiter's store, and the one
    /// [`FailurePolicy::Local`] falls back on). The cap is split evenly among the store's
    /// shards (one shard below 128 keys, so small caps are exact; above, the total stays under
    /// `max_keys + max_keys / 64`). A check for a new key that finds its shard full, after
    /// dropping the keys whose periods have passed, is denied with a retry-after of its period,
    /// and nothing is recorded (as nginx's `limit_req` answers 503 when its zone is full); keys
    /// already tracked are unaffected. The first such denial is logged once, at warn level.
    /// Without a cap (the default) memory follows the keys active within their periods: each
    /// shard holds at most about twice its keys active in one period. Zero is rejected by
    /// [`build`](LimiterBuilder::build) (`InvalidConfig`).
    #[must_use]
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = Some(max_keys);
        self
    }

    /// Prepended to every key in Redis (default `"ratelimit:"`); use one per application or
    /// environment sharing a Redis.
    #[must_use]
    pub fn key_prefix(mut self, prefix: impl AsRef<str>) -> Self {
        let prefix = prefix.as_ref();
        prefix.clone_into(&mut self.key_prefix);
        self
    }

    /// Checks every call at `clock`'s time instead of the wall clock's (in process) or the
    /// Redis server's: for tests of code that is rate limited (see [`ManualClock`]). A Redis
    /// limiter then sends the clock's time with each check, as
    /// [`Limiter::check_at`] does, and needs a key prefix of its own (see
    /// [`build`](LimiterBuilder::build)), so that no limiter on the server's clock shares its
    /// logs. Timeouts, circuit breakers and the expiry of Redis keys stay on real time (see
    /// [`ManualClock`]).
    #[must_use]
    pub fn clock(mut self, clock: ManualClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Shadow mode (default `false`): every limit is a shadow one, to try limits on real
    /// traffic without denying anyone. Checks are made and recorded as usual, but a call a
    /// limit would deny is admitted all the same, recording nothing (as a denial records
    /// nothing): its [`Decision`](crate::Decision) is `allowed`, and
    /// [`would_deny`](crate::Decision::would_deny) says what the limit would have done. Each
    /// such call is reported: a debug event (with the scope and the key) and, with the
    /// `metrics` feature, the counter `ratelimit_shadow_denied_total` (not
    /// `ratelimit_denied_total`: it counts as admitted).
    ///
    /// In a check of several limits each limit is then checked on its own (one that would
    /// deny does not keep the others from recording the call), a cost that can never fit is a
    /// would-be denial, not an error, and a store that cannot answer under
    /// [`FailurePolicy::Closed`] is answered as under `Open` (admitted, recording nothing):
    /// shadow mode never fails a call. The attribute's checks leave shadow limits out of
    /// its `decision` and HTTP fields, and the axum layer writes no `RateLimit` fields (a
    /// trial must not make well-behaved clients back off); nothing waits for them.
    #[must_use]
    pub fn shadow(mut self, shadow: bool) -> Self {
        self.shadow = shadow;
        self
    }

    /// A limits file (feature `limits-file`): scope entries, key overrides and the limiter's
    /// mode in TOML, applied at [`build`](LimiterBuilder::build) and re-read whenever it
    /// changes (its directory is watched, so a replacement by rename is seen too); a change
    /// that does not parse or validate is rejected whole, logged at error level, and the
    /// limits in force stay. Its entries rank below those of
    /// [`Limiter::set_limits`](crate::Limiter::set_limits). The format and a complete file are
    /// in [`guide::operating`](crate::guide::operating#the-limits-file).
    ///
    /// Without the `limits-file` feature, [`build`](LimiterBuilder::build) refuses it with an
    /// error naming the feature.
    #[must_use]
    pub fn limits_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.limits_file = Some(path.into());
        self
    }

    /// Follows the limits shared through Redis (default off): scope entries, key overrides
    /// and the limiter's mode kept in the limiter's Redis (its server, Cluster or Sentinel
    /// deployment, under its key prefix), changed at run time through
    /// [`Limiter::shared_limits`](crate::Limiter::shared_limits) by any instance and read by
    /// every instance built with this. A thread of the limiter's own reads the changes every
    /// quarter of a second (one script, a stream range read, while nothing changed; the
    /// changed entries only, when some did) and puts them in force: no check waits for them,
    /// and while Redis cannot be read the last ones read stay in force. Their entries rank
    /// above a [limits file](LimiterBuilder::limits_file)'s and below
    /// [`Limiter::set_limits`](crate::Limiter::set_limits)'. See
    /// [`guide::operating`](crate::guide::operating#the-limits-shared-through-redis).
    ///
    /// [`build`](LimiterBuilder::build) refuses it for an in-process limiter.
    #[must_use]
    pub fn shared_limits(mut self) -> Self {
        self.shared_limits = true;
        self
    }

    /// The deny cache of a Redis limiter (default on; an in-process limiter has none: its
    /// store is in process already). When the store denies a call of cost 1 because the key's
    /// window is full, the limiter keeps the denial in process until the window's first unit
    /// frees, and answers the key's next checks of cost 1 from it, counted down, without a
    /// round trip: a flood on one key (a scraper, a credential-stuffing run) then costs Redis
    /// one check per key per [time to live](LimiterBuilder::deny_cache_ttl), not one per
    /// call.
    ///
    /// The answers are the store's: denied calls record nothing, so no check anywhere can be
    /// admitted while the window is full, and each cached answer is the denial the store
    /// would give (`remaining` 0, `retry_after` and `reset_after` counted down from when the
    /// cached check was sent). What can free a unit sooner is a reset, a refund, a higher
    /// threshold (a tier change) or a check at a later explicit time: made through this
    /// limiter (or its clones), they drop the key's entries at once; made by another process,
    /// they are seen when the entry's time to live ends. Checks at an explicit time
    /// ([`Limiter::check_at`]), calls of another cost than 1 and looks ([`Limiter::peek`])
    /// always go to the store; a limiter on a [`ManualClock`] reads the cache on that clock.
    /// The cache is asked before the circuit breaker: while the store is down, a key it knows
    /// to be full is still denied (the denial stands, whatever the failure policy), until the
    /// entry ends.
    ///
    /// With several limits in one check, the limit of cost 1 the cache denies with the longest
    /// retry-after decides it, and its [`Decisions`](crate::Decisions) list that limit alone
    /// (the others were not checked): its retry-after is that limit's, which a full limit the
    /// cache does not know may exceed (the store's answer, the next time, says so). Each cached answer counts in
    /// [`Limiter::deny_cache_answers`](crate::Limiter::deny_cache_answers) and, with the
    /// `metrics` feature, in `ratelimit_deny_cache_answered_total` (and as a denial). The cache
    /// holds at most [`deny_cache_capacity`](LimiterBuilder::deny_cache_capacity) entries.
    /// A [leased](crate::Rate::leased) rate keeps its lease's last denial the same way, with
    /// the lease (counted among the cache's answers).
    #[must_use]
    pub fn deny_cache(mut self, enabled: bool) -> Self {
        self.deny_cache = enabled;
        self
    }

    /// The longest a cached denial answers before the next check of its key asks the store
    /// again (default [`DEFAULT_DENY_CACHE_TTL`](Self::DEFAULT_DENY_CACHE_TTL), 1 s): how stale a cached denial may be after
    /// another process reset the key, refunded a call of it or raised its threshold. One check
    /// refreshes an entry whose time ends; the others are still answered from it until its
    /// answer comes (at most the [`timeout`](LimiterBuilder::timeout)), so the staleness is at
    /// most the time to live plus that one round trip. Less than 1 ms is rejected by
    /// [`build`](LimiterBuilder::build) (`InvalidConfig`): switch the cache off with
    /// [`deny_cache(false)`](LimiterBuilder::deny_cache) instead.
    #[must_use]
    pub fn deny_cache_ttl(mut self, ttl: Duration) -> Self {
        self.deny_cache_ttl = ttl;
        self
    }

    /// How many denials the deny cache keeps (default [`DEFAULT_DENY_CACHE_CAPACITY`](Self::DEFAULT_DENY_CACHE_CAPACITY), 4,096;
    /// rounded up to a power of two, at most 80 bytes each), allocated once when the limiter is
    /// built. Entries are found by a keyed hash of the key in sets of 4; when a set is full,
    /// its entry that ends soonest gives way. A denial the cache does not hold is asked of the
    /// store, so a full cache costs round trips, never a wrong answer. Zero, or more than
    /// 2^22, is rejected by [`build`](LimiterBuilder::build) (`InvalidConfig`).
    #[must_use]
    pub fn deny_cache_capacity(mut self, entries: usize) -> Self {
        self.deny_cache_capacity = entries;
        self
    }

    /// Waits, after each call that records an admission (or refunds one), until `replicas`
    /// replicas of the key's master have it, at most `timeout` (default: no waiting). Redis
    /// replicates asynchronously, so an admission the master acknowledged can be lost when a
    /// replica that did not have it yet takes over (a killed master, a Sentinel failover):
    /// the limiter sends `WAIT replicas timeout` right behind the script, on the same
    /// connection, in the same round trip (it cannot run inside a script), and answers a call
    /// that fewer replicas acknowledged in time by the failure policy
    /// ([`StoreError::NotReplicated`](crate::StoreError::NotReplicated), an outage of that
    /// master: its breaker opens). This narrows the window in which admissions are lost; it
    /// does not close it (a replica can acknowledge and still not be the one promoted, and the
    /// call stays recorded on the master either way). Each recording check then waits for the
    /// slowest of those replicas: [`guide::redis`](crate::guide::redis#replication-and-lost-admissions)
    /// has the measured cost.
    /// `timeout` is rounded up to whole milliseconds, and must be shorter than the
    /// [`timeout`](LimiterBuilder::timeout) of the whole check (else the check times out
    /// first; Redis checks a blocked `WAIT` at its `hz`, 10 by default, so leave about 100 ms
    /// between the two). A server without the replicas asked for stays degraded: every check
    /// is the policy's (each probe, in the background, pays the wait); zero replicas, or a `timeout` of zero or not shorter than the check's, are
    /// rejected by [`build`](LimiterBuilder::build) (`InvalidConfig`).
    #[must_use]
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_wait = Some((replicas, timeout));
        self
    }

    /// What a check answers when the store cannot (default [`FailurePolicy::Local`]).
    #[must_use]
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// The longest a Redis check may take, connecting included (default 250 ms); past it the
    /// failure policy answers. For a cluster it is also each node's connection and response
    /// timeout. A check of a [leased](crate::Rate::leased) rate that finds its lease being
    /// renewed waits for that renewal at most this long, then makes its own call: at most
    /// twice the timeout in all. Zero is rejected by [`build`](LimiterBuilder::build) (`InvalidConfig`).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Builds the limiter. It does no network I/O: it connects lazily, on the first check, so
    /// a Redis that is down now does not make this fail, and a Redis limiter can be made in a
    /// `static` (`LazyLock`) like an in-process one. A [limits file](LimiterBuilder::limits_file)
    /// is read here, and its directory watched from here on.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidConfig`] for a malformed Redis URL, an unknown scheme,
    /// `rediss://` without the `tls` feature, `redis+sentinel://` without the `sentinel`
    /// feature, TLS certificates for a URL that is not `rediss://`, a TLS certificate or key
    /// that does not parse or a key that is not the certificate's, a Redis limiter on a
    /// [`ManualClock`] with the default key prefix, an empty list of cluster nodes (or nodes
    /// that disagree on TLS or credentials, or a `redis+unix://` or `/<db>` node URL), a zero
    /// timeout, a zero
    /// `max_keys`, a `deny_cache_ttl` under 1 ms, a `deny_cache_capacity` of zero or above
    /// 2^22, a `wait_for_replicas` of zero replicas or a wait not within the timeout, or a
    /// limits file that is missing, cannot be watched, or has a mistake (named with its line:
    /// a typo never means no limits).
    pub fn build(self) -> Result<Limiter, RateLimitError> {
        if self.timeout.is_zero() {
            return Err(RateLimitError::InvalidConfig(
                "the timeout must be longer than zero".into(),
            ));
        }
        if self.clock.is_some()
            && self.redis.is_some()
            && self.key_prefix == Self::DEFAULT_KEY_PREFIX
        {
            return Err(RateLimitError::InvalidConfig(
                "a Redis limiter on a ManualClock needs a key prefix of its own \
                 (`key_prefix`): the logs of limiters on the server's clock would mix two clocks"
                    .into(),
            ));
        }
        let max_keys = match self.max_keys {
            None => None,
            Some(max_keys) => Some(NonZeroUsize::new(max_keys).ok_or_else(|| {
                RateLimitError::InvalidConfig("max_keys must be at least 1".into())
            })?),
        };
        let store = match &self.redis {
            None => Store::Memory(MemoryStore::with_max_keys(max_keys)),
            Some(RedisTarget::Url(url)) => Store::Redis(
                RedisStore::single(url, &self.tls, &self.key_prefix, self.timeout)
                    .map_err(RateLimitError::InvalidConfig)?,
            ),
            #[cfg(feature = "cluster")]
            Some(RedisTarget::Cluster(nodes)) => Store::Redis(
                RedisStore::cluster(nodes, &self.tls, &self.key_prefix, self.timeout)
                    .map_err(RateLimitError::InvalidConfig)?,
            ),
        };
        if self.deny_cache_ttl < Duration::from_millis(1) {
            return Err(RateLimitError::InvalidConfig(
                "the deny cache's time to live must be at least 1 ms (to switch the cache \
                 off, use `deny_cache(false)`)"
                    .into(),
            ));
        }
        if !(1..=MAX_DENY_CACHE_CAPACITY).contains(&self.deny_cache_capacity) {
            return Err(RateLimitError::InvalidConfig(
                format!(
                    "the deny cache's capacity must be between 1 and {MAX_DENY_CACHE_CAPACITY} \
                     entries, not {} (to switch the cache off, use `deny_cache(false)`)",
                    self.deny_cache_capacity
                )
                .into(),
            ));
        }
        if let Some((replicas, wait)) = self.replica_wait
            && (replicas == 0 || wait.is_zero() || wait >= self.timeout)
        {
            return Err(RateLimitError::InvalidConfig(
                format!(
                    "wait_for_replicas needs at least one replica and a wait longer than zero \
                     and shorter than the check's timeout ({:?}), not {replicas} replicas for \
                     {wait:?}",
                    self.timeout
                )
                .into(),
            ));
        }
        let store = match store {
            Store::Redis(redis) => Store::Redis(redis.with_replica_wait(self.replica_wait)),
            other => other,
        };
        let deny_cache = (self.deny_cache && matches!(store, Store::Redis(_)))
            .then(|| DenyCache::new(self.deny_cache_capacity, self.deny_cache_ttl, self.timeout));
        if self.shared_limits && !matches!(store, Store::Redis(_)) {
            return Err(RateLimitError::InvalidConfig(
                "shared_limits needs a Redis limiter (`redis_url`, `redis_cluster` or \
                 `RATELIMIT_REDIS_URL`): an in-process limiter shares nothing; use \
                 `limits_file` or `Limiter::set_limits` there"
                    .into(),
            ));
        }
        let fallback = MemoryStore::with_max_keys(max_keys);
        let mut shared = Shared::new(
            store,
            self.failure_policy,
            fallback,
            self.clock,
            self.shadow,
            deny_cache,
        );
        if self.shared_limits {
            shared.follower = Some(crate::registry::redis::Follower::default());
        }
        let limiter = Limiter::from_shared(shared);
        if self.shared_limits {
            crate::registry::follow(limiter.shared(), Shared::following).map_err(|error| {
                RateLimitError::InvalidConfig(
                    format!("the thread following the shared limits cannot start: {error}").into(),
                )
            })?;
        }
        if let Some(path) = self.limits_file {
            #[cfg(feature = "limits-file")]
            limiter
                .shared()
                .registry
                .watch_file(path)
                .map_err(|error| RateLimitError::InvalidConfig(error.into()))?;
            #[cfg(not(feature = "limits-file"))]
            return Err(RateLimitError::InvalidConfig(
                format!(
                    "a limits file ({}) needs the `limits-file` feature of ratelimit-runtime",
                    path.display()
                )
                .into(),
            ));
        }
        Ok(limiter)
    }
}

/// Leaves the URL out: it may carry a password.
impl fmt::Debug for LimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redis = match &self.redis {
            None => None,
            Some(RedisTarget::Url(_)) => Some("url <redacted>".to_owned()),
            #[cfg(feature = "cluster")]
            Some(RedisTarget::Cluster(nodes)) => {
                Some(format!("cluster of {} <redacted> node URLs", nodes.len()))
            }
        };
        f.debug_struct("LimiterBuilder")
            .field("redis", &redis)
            .field("tls_ca_certificate", &self.tls.ca_certificate.is_some())
            .field(
                "tls_client_identity",
                &self.tls.client_identity.as_ref().map(|_| "<redacted>"),
            )
            .field("max_keys", &self.max_keys)
            .field("key_prefix", &self.key_prefix)
            .field("failure_policy", &self.failure_policy)
            .field("timeout", &self.timeout)
            .field("clock", &self.clock)
            .field("shadow", &self.shadow)
            .field("deny_cache", &self.deny_cache)
            .field("deny_cache_ttl", &self.deny_cache_ttl)
            .field("deny_cache_capacity", &self.deny_cache_capacity)
            .field("wait_for_replicas", &self.replica_wait)
            .field("limits_file", &self.limits_file)
            .field("shared_limits", &self.shared_limits)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings take what configuration gives: `String`s as well as `&str`s.
    #[test]
    fn takes_owned_and_borrowed_text() {
        let url: String = std::env::var("NO_SUCH_VARIABLE_HERE")
            .unwrap_or_else(|_| "redis://127.0.0.1:1/".to_owned());
        let prefix: String = "app:".to_owned();
        let limiter = Limiter::builder()
            .redis_url(url)
            .key_prefix(prefix)
            .build()
            .expect("a valid URL");
        assert!(format!("{limiter:?}").contains("redis"));
        let limiter = Limiter::builder()
            .redis_url("redis://127.0.0.1:1/")
            .key_prefix("app:")
            .build()
            .expect("a valid URL");
        assert!(format!("{limiter:?}").contains("redis"));
    }
}
