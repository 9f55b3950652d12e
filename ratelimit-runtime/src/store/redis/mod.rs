//! The Redis store: one sorted set per key, checked by one atomic Lua script.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, PoisonError, RwLock, Weak};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, ErrorKind, RedisWrite as _, ServerErrorKind};
use tokio::runtime::{Handle, Id as RuntimeId};

use crate::error::StoreError;
use crate::{Decision, Rate};

/// The sliding window log script, run through `EVALSHA` (see [`evalsha`]; loaded again on
/// `NOSCRIPT`).
///
/// `KEYS[1]`: the key's sorted set (scores: integer microseconds since the Unix epoch).
/// `ARGV`: period (µs), threshold, a unique member, now (µs since the Unix epoch, or empty for
/// the server's `TIME`). Replies `{admitted, count, retry_after_us, reset_after_us}`; the TTL it
/// sets is in milliseconds. The full contract heads `sliding_window.lua`.
static SLIDING_WINDOW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(include_str!("sliding_window.lua")));

/// A Redis-backed sliding window log, connected lazily and reconnected by a
/// [`ConnectionManager`].
pub(crate) struct RedisStore {
    client: redis::Client,
    prefix: Box<str>,
    timeout: Duration,
    /// One multiplexed connection per Tokio runtime that checks through this store, made on
    /// that runtime's first check (its driver task lives on that runtime) and forgotten when
    /// the runtime shuts down, so a limiter outlives the runtimes that use it (one per test,
    /// one per worker thread).
    connections: Arc<RwLock<HashMap<RuntimeId, ConnectionManager>>>,
    /// Serialises connection attempts so that a burst of first calls makes one connection.
    connecting: tokio::sync::Mutex<()>,
    members: MemberSource,
}

impl RedisStore {
    /// A store for `url` (no I/O happens here) whose keys are `prefix` + the key.
    ///
    /// # Errors
    ///
    /// The URL does not parse, or names a scheme this build cannot serve.
    pub(crate) fn new(url: &str, prefix: &str, timeout: Duration) -> redis::RedisResult<Self> {
        Ok(RedisStore {
            client: redis::Client::open(url)?,
            prefix: prefix.into(),
            timeout,
            connections: Arc::default(),
            connecting: tokio::sync::Mutex::new(()),
            members: MemberSource::new(),
        })
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
            return Err(StoreError::Misconfigured(
                "the Redis store must be used inside a Tokio runtime".into(),
            ));
        };
        let check = self.run_script(&runtime, key, rate, now_us);
        match tokio::time::timeout(self.timeout, check).await {
            Ok(result) => result,
            Err(_elapsed) => Err(StoreError::Timeout(self.timeout)),
        }
    }

    async fn run_script(
        &self,
        runtime: &Handle,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
    ) -> Result<Decision, StoreError> {
        let mut connection = self.connection(runtime).await?;
        let command = evalsha(&self.prefix, key, rate, &self.members.next(), now_us);
        let mut result = command.query_async(&mut connection).await;
        if matches!(&result, Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
        {
            // The server lost its scripts (restarted, `SCRIPT FLUSH`): load it, send once more.
            result = match SLIDING_WINDOW.load_async(&mut connection).await {
                Ok(_) => command.query_async(&mut connection).await,
                Err(err) => Err(err),
            };
        }
        let reply: Vec<i64> = match result {
            Ok(reply) => reply,
            Err(err) => {
                if err.is_unrecoverable_error() {
                    // Let the next check build a fresh connection manager.
                    self.write_connections().remove(&runtime.id());
                }
                return Err(self.store_error(err));
            }
        };
        decode(&reply, rate.threshold())
    }

    /// This runtime's connection, made now if it has none.
    async fn connection(&self, runtime: &Handle) -> Result<ConnectionManager, StoreError> {
        let id = runtime.id();
        if let Some(connection) = self.cached(id) {
            return Ok(connection);
        }
        let _gate = self.connecting.lock().await;
        if let Some(connection) = self.cached(id) {
            return Ok(connection);
        }
        // One attempt per check: retrying inside a check (with backoff) would spend the whole
        // timeout on a refused connection and report a timeout instead of the refusal. The
        // next check (or the manager, after a dropped connection) tries again.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        let connection = ConnectionManager::new_with_config(self.client.clone(), config)
            .await
            .map_err(|err| self.store_error(err))?;
        self.write_connections().insert(id, connection.clone());
        runtime.spawn(forget_on_shutdown(id, Arc::downgrade(&self.connections)));
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

    fn cached(&self, id: RuntimeId) -> Option<ConnectionManager> {
        self.connections
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    fn write_connections(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, HashMap<RuntimeId, ConnectionManager>> {
        self.connections
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A task that never finishes: when its runtime shuts down and drops it, the runtime's
/// connection is forgotten (its driver task is gone with the runtime).
async fn forget_on_shutdown(
    id: RuntimeId,
    connections: Weak<RwLock<HashMap<RuntimeId, ConnectionManager>>>,
) {
    struct Forget(
        RuntimeId,
        Weak<RwLock<HashMap<RuntimeId, ConnectionManager>>>,
    );
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

/// `EVALSHA <sha1> 1 <prefix><key> <period_us> <threshold> <member> <now_us or "">`: the
/// [`SLIDING_WINDOW`] call for one check, in a buffer sized for it up front. The key is written
/// into the command in its two pieces, never joined into a `String` of its own, so a check
/// builds no key: the command's two buffers are its only allocations on this side.
fn evalsha(prefix: &str, key: &str, rate: Rate, member: &[u8], now_us: Option<u64>) -> Cmd {
    /// Digits of a `u64`, the most a number argument takes.
    const NUMBER: usize = 20;
    let hash = SLIDING_WINDOW.get_hash();
    let bytes = "EVALSHA".len() + hash.len() + 1 + prefix.len() + key.len() + member.len();
    let mut command = Cmd::with_capacity(8, bytes + 3 * NUMBER);
    command.arg("EVALSHA").arg(hash).arg(1);
    {
        let mut full_key = command.writer_for_next_arg();
        // Writing into the command's own `Vec<u8>` cannot fail.
        let _ = full_key.write_all(prefix.as_bytes());
        let _ = full_key.write_all(key.as_bytes());
    }
    command
        .arg(rate.period_us())
        .arg(rate.threshold())
        .arg(member);
    match now_us {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
    command
}

/// Turns the script's reply `{admitted, count, retry_after_us, reset_after_us}` into a
/// [`Decision`].
fn decode(reply: &[i64], threshold: u64) -> Result<Decision, StoreError> {
    let &[admitted, count, retry_after, reset_after] = reply else {
        return Err(StoreError::Protocol(
            format!("expected 4 integers, got {}", reply.len()).into(),
        ));
    };
    let (Ok(count), Ok(retry_after), Ok(reset_after)) = (
        u64::try_from(count),
        u64::try_from(retry_after),
        u64::try_from(reset_after),
    ) else {
        return Err(StoreError::Protocol("negative count or duration".into()));
    };
    let reset_after = Duration::from_micros(reset_after);
    match admitted {
        1 => Ok(Decision::admitted(
            threshold,
            threshold.saturating_sub(count),
            reset_after,
        )),
        0 => Ok(Decision::denied(
            threshold,
            Duration::from_micros(retry_after),
            reset_after,
        )),
        other => Err(StoreError::Protocol(
            format!("admitted flag {other} is neither 0 nor 1").into(),
        )),
    }
}

/// Makes sorted-set members unique across processes and calls: 64 random bits chosen once per
/// store, then a counter, as 32 hex digits. (Members that collide would merge two admissions
/// into one, the bug of timestamp-as-member designs.)
struct MemberSource {
    nonce: u64,
    sequence: AtomicU64,
}

impl MemberSource {
    fn new() -> MemberSource {
        // Without OS randomness, fall back to a per-process hash seed: still distinct per process.
        let nonce = getrandom::u64().unwrap_or_else(|_| {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(std::process::id())
        });
        MemberSource {
            nonce,
            sequence: AtomicU64::new(0),
        }
    }

    fn next(&self) -> [u8; 32] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        let mut member = [0; 32];
        let bytes = self
            .nonce
            .to_be_bytes()
            .into_iter()
            .chain(sequence.to_be_bytes());
        for (pair, byte) in member.chunks_exact_mut(2).zip(bytes) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0xf)];
        }
        member
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_unique_hex() {
        let source = MemberSource::new();
        let first = source.next();
        let second = source.next();
        assert_ne!(first, second);
        assert!(first.iter().all(u8::is_ascii_hexdigit));
        assert_eq!(&first[..16], &second[..16]);
        assert_eq!(&second[16..], b"0000000000000001");
    }

    /// The arguments of a command, as text.
    fn arguments(command: &Cmd) -> Vec<String> {
        command
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                other => format!("<{other:?}>"),
            })
            .collect()
    }

    #[test]
    fn the_key_is_one_argument_made_of_the_prefix_and_the_key() {
        let rate = Rate::new(7, Duration::from_millis(1_500)).unwrap();
        let command = evalsha(
            "app:",
            "login:ünï:42",
            rate,
            b"00000000000000000000000000000001",
            Some(1_700_000_000_000_001),
        );
        assert_eq!(
            arguments(&command),
            [
                "EVALSHA",
                SLIDING_WINDOW.get_hash(),
                "1",
                "app:login:ünï:42",
                "1500000",
                "7",
                "00000000000000000000000000000001",
                "1700000000000001",
            ]
        );
        // Without a time, the script reads the server's clock; an empty prefix adds nothing.
        let command = evalsha("", "k", rate, b"m", None);
        assert_eq!(arguments(&command)[3..], ["k", "1500000", "7", "m", ""]);
    }

    #[test]
    fn decodes_replies() {
        let admitted = decode(&[1, 2, 0, 30_000_000], 5).unwrap();
        assert_eq!(admitted, Decision::admitted(5, 3, Duration::from_secs(30)));
        let denied = decode(&[0, 5, 1_500, 9_000], 5).unwrap();
        assert_eq!(
            denied,
            Decision::denied(
                5,
                Duration::from_micros(1_500),
                Duration::from_micros(9_000)
            )
        );
        assert!(decode(&[1, 2], 5).is_err());
        assert!(decode(&[2, 2, 0, 0], 5).is_err());
        assert!(decode(&[0, 2, -1, 0], 5).is_err());
    }
}
