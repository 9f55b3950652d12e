//! The Redis store: one sorted set per key, checked by one atomic Lua script, on one server or
//! a Redis Cluster.

mod script;
mod target;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock, Weak};
use std::time::Duration;

use redis::{ErrorKind, ServerErrorKind};
use tokio::runtime::{Handle, Id as RuntimeId};

use self::script::MemberSource;
pub(crate) use self::target::{ConfigError, TlsSettings};
use self::target::{Connection, Target};
use crate::error::StoreError;
use crate::{Decision, Rate};

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
    connecting: tokio::sync::Mutex<()>,
    members: MemberSource,
    /// Set while a cluster's slot map is being asked for (one lookup at a time).
    looking_up: AtomicBool,
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
            connecting: tokio::sync::Mutex::new(()),
            members: MemberSource::new(),
            looking_up: AtomicBool::new(false),
        }
    }

    /// `redis` or `redis-cluster`.
    pub(crate) fn kind(&self) -> &'static str {
        self.target.kind()
    }

    /// How many parts the limiter's circuit breakers split this store into: one for a server;
    /// for a cluster, one per hash slot, so that a failed master stops only its own slots.
    pub(crate) fn parts(&self) -> usize {
        match self.target {
            Target::Single(_) => 1,
            Target::Cluster(_) => SLOTS,
        }
    }

    /// The part `key` belongs to (below [`RedisStore::parts`]): in a cluster, the hash slot of
    /// `<prefix><key>`.
    pub(crate) fn part(&self, key: &str) -> usize {
        match self.target {
            Target::Single(_) => 0,
            Target::Cluster(_) => usize::from(key_slot(&self.prefix, key)),
        }
    }

    /// Checks `key` against `rate` at `now_us` (µs since the Unix epoch; `None`: the Redis
    /// server's clock) and records the call when admitted, all within the store's timeout.
    ///
    /// # Errors
    ///
    /// [`StoreError::Timeout`] when the whole check (connecting included) took longer than the
    /// timeout; the call is not resent, since it may have been recorded. [`StoreError::Redis`]
    /// when connecting or the script failed, [`StoreError::Protocol`] on a malformed reply.
    pub(crate) async fn check(
        &self,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
    ) -> Result<Decision, StoreError> {
        let Ok(runtime) = Handle::try_current() else {
            return Err(StoreError::NoRuntime);
        };
        let check = self.run_script(&runtime, key, rate, now_us);
        let result = match tokio::time::timeout(self.timeout, check).await {
            Ok(result) => result,
            Err(_elapsed) => Err(StoreError::Timeout(self.timeout)),
        };
        let stale = match &result {
            // The connection may be dead without knowing it (a failover behind a virtual IP,
            // a dropped NAT entry), or lead to a demoted primary: the next check connects
            // afresh. Not in a cluster, whose client reconnects each node by itself: dropping
            // it would drop every master's connection for one slow master.
            Err(StoreError::Timeout(_)) => true,
            Err(StoreError::Redis(error)) => error.code() == Some("READONLY"),
            _ => false,
        };
        if stale && matches!(self.target, Target::Single(_)) {
            self.forget_connection(runtime.id());
        }
        result
    }

    async fn run_script(
        &self,
        runtime: &Handle,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
    ) -> Result<Decision, StoreError> {
        let mut connection = self.connection(runtime).await?;
        let member = self.members.next();
        let command = script::evalsha(&self.prefix, key, rate, &member, now_us);
        let mut result = connection.query(&command).await;
        if matches!(&result, Err(err) if err.is_connection_dropped()) {
            // The connection was found closed (the server's idle timeout, a restart, a load
            // balancer): the call may or may not have reached Redis. The script counts a
            // member once, so the same call is sent once more, on the connection the manager
            // makes again.
            result = connection.query(&command).await;
        }
        if matches!(&result, Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
        {
            // The server lost its scripts (restarted, failed over, `SCRIPT FLUSH`), so the call
            // did not run: send it once more with the script's text, which also reloads it.
            let command = script::eval(&self.prefix, key, rate, &member, now_us);
            result = connection.query(&command).await;
        }
        let reply = match result {
            Ok(reply) => reply,
            Err(err) => {
                if err.is_unrecoverable_error() {
                    // Let the next check build a fresh connection.
                    self.forget_connection(runtime.id());
                }
                return Err(self.store_error(err));
            }
        };
        script::decode(&reply, rate.threshold())
    }

    /// Claims the one slot-map lookup that may run at a time (cluster only); `None` when
    /// another runs. The lookup ends when the claim is dropped.
    pub(crate) fn claim_lookup(&self) -> Option<LookupClaim<'_>> {
        (matches!(self.target, Target::Cluster(_)) && !self.looking_up.swap(true, Ordering::AcqRel))
            .then_some(LookupClaim(&self.looking_up))
    }

    /// In a cluster, the slot ranges of the master that owns `part`'s slot (see
    /// [`RedisStore::part`]), asked of up to three nodes, each within the timeout (four
    /// timeouts in all, connecting included); `None` for a single server, or when the cluster
    /// does not tell.
    pub(crate) async fn master_parts(&self, part: usize) -> Option<Vec<(u16, u16)>> {
        let Target::Cluster(_) = self.target else {
            return None;
        };
        let runtime = Handle::try_current().ok()?;
        let slot = u16::try_from(part).ok()?;
        let lookup = async {
            self.connection(&runtime)
                .await
                .ok()?
                .master_slots(slot, self.timeout)
                .await
        };
        tokio::time::timeout(self.timeout.saturating_mul(4), lookup)
            .await
            .ok()
            .flatten()
    }

    /// This runtime's connection, made now if it has none.
    async fn connection(&self, runtime: &Handle) -> Result<Connection, StoreError> {
        let id = runtime.id();
        if let Some(connection) = self.cached(id) {
            return Ok(connection);
        }
        let _gate = self.connecting.lock().await;
        if let Some(connection) = self.cached(id) {
            return Ok(connection);
        }
        let connection = self
            .target
            .connect(self.timeout)
            .await
            .map_err(|err| self.store_error(err))?;
        let watched = self
            .write_connections()
            .insert(id, Some(connection.clone()))
            .is_some();
        if !watched {
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

/// The claim of [`RedisStore::claim_lookup`].
pub(crate) struct LookupClaim<'a>(&'a AtomicBool);

impl Drop for LookupClaim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The hash slots of a Redis Cluster.
const SLOTS: usize = 16_384;

/// The hash slot of `<prefix><key>`, without joining them unless a `{` makes a hash tag
/// possible.
fn key_slot(prefix: &str, key: &str) -> u16 {
    if prefix.contains('{') || key.contains('{') {
        let mut full_key = Vec::with_capacity(prefix.len() + key.len());
        full_key.extend_from_slice(prefix.as_bytes());
        full_key.extend_from_slice(key.as_bytes());
        return hash_slot(&full_key);
    }
    let mut crc = crc16::State::<crc16::XMODEM>::new();
    crc.update(prefix.as_bytes());
    crc.update(key.as_bytes());
    crc.get() % 16_384
}

/// A key's hash slot: CRC16 (XMODEM) of its hash tag (the text between the first `{` and the
/// next `}`, when not empty) or of the whole key, modulo 16,384 (Redis Cluster specification,
/// "Keys distribution model").
fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % 16_384
}

/// Each runtime's connection (`None` once forgotten, until the next check makes one).
type Connections = HashMap<RuntimeId, Option<Connection>>;

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

#[cfg(test)]
mod tests {
    use super::{hash_slot, key_slot};

    /// Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    #[test]
    fn hash_slots_follow_the_cluster_specification() {
        assert_eq!(hash_slot(b"123456789"), 0x31C3);
        assert_eq!(hash_slot(b"foo"), 12_182);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        // An empty tag hashes the whole key.
        let whole = crc16::State::<crc16::XMODEM>::calculate(b"foo{}{bar}") % 16_384;
        assert_eq!(hash_slot(b"foo{}{bar}"), whole);
        assert_ne!(hash_slot(b"foo{}{bar}"), hash_slot(b"bar"));
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
    }

    #[test]
    fn key_slots_hash_the_prefix_and_the_key_as_one() {
        for (prefix, key) in [
            ("ratelimit:", "user:1"),
            ("", "foo"),
            ("app{", "x}y"),
            ("{tenant}:", "user"),
            ("p:", "{user1000}.following"),
        ] {
            let whole = format!("{prefix}{key}");
            assert_eq!(
                key_slot(prefix, key),
                hash_slot(whole.as_bytes()),
                "{whole}"
            );
        }
    }
}
