//! [`Limiter`]: checks keys against a sliding window log, in Redis or in process.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime};

use crate::checking::{Checking, Key};
use crate::error::StoreError;
use crate::health::{Health, Route};
use crate::store::memory::{MemoryStore, Verdict};
use crate::store::redis::{RedisStore, TlsSettings};
use crate::{Decision, FailurePolicy, Rate, RateLimitError};

/// The key prefix when none is set: Redis keys are `ratelimit:<key>`.
pub const DEFAULT_KEY_PREFIX: &str = "ratelimit:";
/// How long a Redis check may take, connecting included, when no timeout is set: 250 ms.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// Checks calls against a [`Rate`] with an exact sliding window log, and records admissions.
///
/// # Semantics
///
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
/// # Stores
///
/// - In process ([`Limiter::memory`]): sharded maps guarded by mutexes, safe under concurrent
///   callers and usable without a runtime; keys idle for a period are dropped by sweeps that
///   ride on later checks.
/// - Redis ([`LimiterBuilder::redis_url`]): one sorted set per key named
///   `<prefix><key>`, scores in integer microseconds since the Unix epoch, checked by one Lua
///   script (evict, count, then admit and record, or deny). The clock is the Redis server's
///   `TIME`, one clock for every application server, unless [`check_at`](Limiter::check_at)
///   passes one. Each admission extends the key's `PEXPIRE` (never shortens it) so an idle key
///   vanishes once its newest admission leaves the window (and at least 1 s after it was
///   made). The connection is made on first use, inside a check, and
///   every check (connecting included) is bounded by the timeout (default 250 ms); a check
///   that timed out is never resent, since Redis may have recorded it.
/// - Redis Cluster ([`LimiterBuilder::redis_cluster`]): the same, each key's set on the node
///   that owns its slot.
///
/// When the store cannot answer, the [`FailurePolicy`] decides (default: `Local`). After a
/// failure of the store (anything but an error about one key's value: a timeout, a refused
/// connection, a wrong password, a TLS failure), the circuit breaker opens: every check is
/// answered by the policy at once, without waiting on the store, except one probe at a time,
/// at most every 100 ms; the first probe the store answers closes it (one breaker per server;
/// in a cluster one per hash slot, a failed slot opening its master's other slots with it). A Redis call whose caller stops waiting is handed to the
/// runtime, so that it reaches its end, and tells the breaker, all the same. Each outage is logged
/// once when it starts (warn) and once when it ends (info, with its length and the number of
/// checks the policy answered), and [`Limiter::policy_answers`] counts them.
///
/// A `Limiter` is cheap to clone (one `Arc`); clones share their store.
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    policy: FailurePolicy,
    /// The in-process store that `FailurePolicy::Local` falls back on.
    fallback: MemoryStore,
    /// The store's circuit breaker, outage log and policy-answer count.
    health: Health,
    /// Set once a key was found holding something other than a sorted set (logged once).
    foreign_key_seen: AtomicBool,
}

#[allow(clippy::large_enum_variant)] // one per limiter, behind its `Arc`
enum Store {
    Memory(MemoryStore),
    Redis(RedisStore),
    /// A store that could not be built (from the environment); every check fails with this.
    Misconfigured(Cow<'static, str>),
}

impl Limiter {
    /// An in-process limiter: the embedded default, for tests, examples and single-instance
    /// services. Limits are per process.
    #[must_use]
    pub fn memory() -> Limiter {
        Limiter::from_store(Store::Memory(MemoryStore::new()), FailurePolicy::default())
    }

    /// A builder, for a Redis limiter or to set the failure policy, prefix and timeout.
    #[must_use]
    pub fn builder() -> LimiterBuilder {
        LimiterBuilder::default()
    }

    fn from_store(store: Store, policy: FailurePolicy) -> Limiter {
        Limiter::with_fallback(store, policy, MemoryStore::new())
    }

    fn with_fallback(store: Store, policy: FailurePolicy, fallback: MemoryStore) -> Limiter {
        let parts = match &store {
            Store::Redis(store) => store.parts(),
            Store::Memory(_) | Store::Misconfigured(_) => 1,
        };
        Limiter {
            inner: Arc::new(Inner {
                store,
                policy,
                fallback,
                health: Health::new(parts),
                foreign_key_seen: AtomicBool::new(false),
            }),
        }
    }

    /// A limiter whose every check fails with `reason` and is answered by `policy`: what the
    /// process-wide default becomes when its environment holds a malformed URL.
    pub(crate) fn misconfigured(reason: Cow<'static, str>, policy: FailurePolicy) -> Limiter {
        Limiter::from_store(Store::Misconfigured(reason), policy)
    }

    /// The policy applied when the store cannot answer.
    #[must_use]
    pub fn failure_policy(&self) -> FailurePolicy {
        self.inner.policy
    }

    /// How many checks the [`FailurePolicy`] answered since this limiter was built (clones
    /// share the count): each check the store failed, or skipped while its circuit was open.
    #[must_use]
    pub fn policy_answers(&self) -> u64 {
        self.inner.health.policy_answers()
    }

    /// `true` from a failure of the store until it answers again (with a cluster: an answer
    /// after 250 ms without a failure on any slot). Meanwhile the checks of failed parts (the
    /// server, or a cluster's failed slots) are answered by the [`FailurePolicy`]; other slots
    /// still go to Redis. Probes ride on checks: with no traffic it stays `true`.
    #[must_use]
    pub fn is_degraded(&self) -> bool {
        self.inner.health.is_open()
    }

    /// Checks `key` against `rate` now, and records the call if it is admitted.
    ///
    /// `key` is any text (user identifiers included; it is never logged above debug level,
    /// nor used as a metrics label); in Redis it becomes `<prefix><key>`. Now is the Redis
    /// server's `TIME` for a Redis limiter, the local wall clock otherwise. Like any future,
    /// the check happens when it is polled; an in-process check completes on the first poll.
    ///
    /// The check runs in a `ratelimit.check` span (without a `scope`), and with the `metrics`
    /// feature is counted without labels: see the crate's
    /// [Observability](crate#observability).
    ///
    /// # Errors
    ///
    /// A denial is `Ok` with `allowed == false`. `Err` only when the store failed and the
    /// policy is [`FailurePolicy::Closed`]: [`RateLimitError::Unavailable`].
    pub fn check<'a>(
        &'a self,
        key: &'a str,
        rate: Rate,
    ) -> impl Future<Output = Result<Decision, RateLimitError>> + Send + 'a {
        Checking::new(self, None, Key::Borrowed(key), rate, None)
    }

    /// Checks `key` against `rate` at the time `at`, and records the call if it is admitted.
    ///
    /// For tests and for callers that keep their own clock. Do not mix `check_at` and
    /// [`check`](Limiter::check) on one key of a Redis limiter: `check` reads the Redis
    /// server's clock, which may differ from the one `at` comes from.
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
        Checking::new(self, None, Key::Borrowed(key), rate, Some(at))
    }

    /// A check for the attribute and the layer: in a span with the field `scope`, labelled
    /// with `scope` in the metrics, and with an event for its decision (trace when admitted,
    /// debug when denied, with the key stripped of its `scope:` prefix).
    #[inline]
    pub(crate) fn checking<'a>(&'a self, scope: &'a str, key: Key<'a>, rate: Rate) -> Checking<'a> {
        Checking::new(self, Some(scope), key, rate, None)
    }

    /// The span a check runs in: `ratelimit.check` at debug level, with the field `scope`
    /// for the checks of `#[rate_limit]` and of the axum layer (never the key).
    pub(crate) fn span(scope: Option<&str>) -> tracing::Span {
        tracing::debug_span!("ratelimit.check", scope)
    }

    /// The check when it needs no I/O: in process, or answered by the failure policy (a
    /// misconfigured store, an open circuit breaker). Otherwise `Err(probe)`: the check goes
    /// to Redis ([`remote_call`](Limiter::remote_call)), as the probe of the open breaker
    /// of part `probe` when it is `Some`.
    #[inline(always)]
    pub(crate) fn check_local(
        &self,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
    ) -> Result<Local, Option<usize>> {
        #[cfg(feature = "metrics")]
        let started = std::time::Instant::now();
        let result = match &self.inner.store {
            Store::Memory(store) => {
                let verdict = store.verdict(key, rate, now_us);
                observe(
                    scope,
                    key,
                    Some(verdict.is_admitted()),
                    || verdict.retry_after(),
                    #[cfg(feature = "metrics")]
                    started,
                );
                return Ok(Local::InProcess(verdict));
            }
            Store::Misconfigured(reason) => self.answer_misconfigured(
                scope,
                key,
                rate,
                now_us,
                StoreError::Misconfigured(reason.clone()),
            ),
            Store::Redis(store) => self.route(scope, key, rate, now_us, store)?,
        };
        observe_result(
            scope,
            key,
            &result,
            #[cfg(feature = "metrics")]
            started,
        );
        Ok(Local::Answered(result))
    }

    /// The answer of a misconfigured store (`error`): the failure policy's. Out of line (as
    /// [`route`](Limiter::route)), so that the in-process check inlined into its future stays
    /// small.
    #[inline(never)]
    fn answer_misconfigured(
        &self,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
        error: StoreError,
    ) -> Result<Decision, RateLimitError> {
        self.inner
            .health
            .failed(0, &error, self.inner.policy, false);
        self.answer_by_policy(scope, key, rate, now_us, error)
    }

    /// A Redis check's route: `Err(probe)` when it goes to Redis, else the failure policy's
    /// answer (its breaker is open).
    #[inline(never)]
    fn route(
        &self,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
        store: &RedisStore,
    ) -> Result<Result<Decision, RateLimitError>, Option<usize>> {
        match self.inner.health.route(|| store.part(key)) {
            Route::Store(probe) => Err(probe),
            Route::Policy(error) => Ok(self.answer_by_policy(scope, key, rate, now_us, error)),
        }
    }

    /// The Redis call of a check: owning what it needs, so that when its caller stops waiting
    /// it can be handed to the runtime ([`Call`]) and still reach its end (bounded by the
    /// timeout) and tell the breakers how it went; `probe`: the part whose open breaker it
    /// probes (its key's, or in a cluster the slot that stands for its master's).
    ///
    /// # Errors
    ///
    /// [`StoreError::NoRuntime`] outside a Tokio runtime.
    pub(crate) fn remote_call(
        &self,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
        probe: Option<usize>,
    ) -> Result<Call, StoreError> {
        // Ends the probe if the call is dropped unfinished (even before its first poll).
        let unanswered = probe.map(|part| EndProbe(self.clone(), part));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(StoreError::NoRuntime);
        };
        let limiter = self.clone();
        let key = key.to_owned();
        let call = async move {
            let Store::Redis(store) = &limiter.inner.store else {
                unreachable!("check_local answers every other store")
            };
            let health = &limiter.inner.health;
            let outcome = store.check(&key, rate, now_us).await;
            // The breaker the outcome is recorded against (worked out only when needed).
            let part = || probe.unwrap_or_else(|| store.part(&key));
            match &outcome {
                Err(error) if error.is_outage() => {
                    let part = part();
                    let opened = health.failed(part, error, limiter.inner.policy, probe.is_some());
                    if opened && store.parts() > 1 {
                        // In a cluster: open the failed master's other slots too, once the
                        // cluster tells which they are (in the background, one at a time).
                        let limiter = limiter.clone();
                        tokio::spawn(async move {
                            let Store::Redis(store) = &limiter.inner.store else {
                                unreachable!("a Redis limiter's store is Redis")
                            };
                            let Some(_claim) = store.claim_lookup() else {
                                return;
                            };
                            if let Some(ranges) = store.master_parts(part).await {
                                limiter.inner.health.open_ranges(&ranges, part);
                            }
                        });
                    }
                }
                // Redis answered, even if with an error about this one key.
                _ => health.succeeded(part, probe.is_some()),
            }
            if let Some(end) = unanswered {
                std::mem::forget(end);
            }
            outcome
        };
        Ok(Call {
            future: Some(Box::pin(call)),
            runtime,
        })
    }

    /// The answer to a check that went to Redis: its decision, or the failure policy's.
    pub(crate) fn finish_remote(
        &self,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
        outcome: Result<Decision, StoreError>,
        #[cfg(feature = "metrics")] started: std::time::Instant,
    ) -> Result<Decision, RateLimitError> {
        let result = match outcome {
            Ok(decision) => Ok(decision),
            Err(error) => self.answer_by_policy(scope, key, rate, now_us, error),
        };
        observe_result(
            scope,
            key,
            &result,
            #[cfg(feature = "metrics")]
            started,
        );
        result
    }

    fn answer_by_policy(
        &self,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
        now_us: Option<u64>,
        error: StoreError,
    ) -> Result<Decision, RateLimitError> {
        let policy = self.inner.policy;
        if matches!(error, StoreError::NoRuntime) {
            tracing::debug!("a Redis rate limit check outside a Tokio runtime");
        } else if !error.is_outage() {
            // One bad key is not an outage: other keys keep their store, and the logs stay
            // quiet about recoveries that are not.
            if !self.inner.foreign_key_seen.swap(true, Ordering::Relaxed) {
                tracing::warn!(%error, ?policy, "a rate limit key holds a value the script cannot use (not a sorted set of times: another application writes under this prefix?); its checks are answered by the failure policy");
            }
        }
        self.inner.health.answered_by_policy();
        tracing::debug!(%error, key, ?policy, "check answered by the failure policy");
        #[cfg(feature = "metrics")]
        crate::observe::policy_answered(scope);
        #[cfg(not(feature = "metrics"))]
        let _ = scope;
        match policy {
            FailurePolicy::Open => Ok(Decision::admitted(
                rate.threshold(),
                rate.threshold() - 1,
                rate.period(),
            )),
            FailurePolicy::Closed => Err(RateLimitError::Unavailable(error)),
            FailurePolicy::Local => Ok(self.inner.fallback.check(key, rate, now_us)),
        }
    }
}

/// A check's answer without I/O ([`Limiter::check_local`]).
pub(crate) enum Local {
    /// The in-process store's, turned into a [`Decision`] where the check's future returns
    /// it, so that the decision is written once (see [`Verdict`]).
    InProcess(Verdict),
    /// The failure policy's.
    Answered(Result<Decision, RateLimitError>),
}

/// Ends the probe of a breaker part when dropped.
struct EndProbe(Limiter, usize);

impl Drop for EndProbe {
    fn drop(&mut self) {
        self.0.inner.health.end_probe(self.1);
    }
}

/// The Redis call of one check, polled by the check itself; if the check is dropped before
/// the call finishes, the rest of the call runs as a task of its runtime, so that it still
/// tells the breakers how it went (a caller's deadline shorter than the limiter's timeout
/// would otherwise keep a stalled Redis from ever opening them).
pub(crate) struct Call {
    future: Option<StoreCall>,
    runtime: tokio::runtime::Handle,
}

/// The store's side of a [`Call`].
type StoreCall = Pin<Box<dyn Future<Output = Result<Decision, StoreError>> + Send>>;

impl Future for Call {
    type Output = Result<Decision, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = self
            .future
            .as_mut()
            .expect("a rate limit `Call` polled after it completed");
        let outcome = ready!(future.as_mut().poll(cx));
        self.future = None;
        Poll::Ready(outcome)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            // On a runtime that is shutting down the task is dropped at once, and with it the
            // probe (see `EndProbe`).
            drop(self.runtime.spawn(future));
        }
    }
}

/// Counts a check's answer in the metrics (feature `metrics`, timed from `started`) and, for
/// a scoped check, emits its decision's event: trace when admitted, debug when denied (with
/// the key without its `scope:` prefix, and the retry-after). Checks by hand have none.
#[inline]
fn observe_result(
    scope: Option<&str>,
    key: &str,
    result: &Result<Decision, RateLimitError>,
    #[cfg(feature = "metrics")] started: std::time::Instant,
) {
    let decision = result.as_ref().ok();
    observe(
        scope,
        key,
        decision.map(|decision| decision.allowed),
        || decision.and_then(|decision| decision.retry_after),
        #[cfg(feature = "metrics")]
        started,
    );
}

/// [`observe_result`] of an answer that was `admitted` (`None`: an error), whose
/// retry-after `retry_after` gives when denied.
#[inline]
fn observe(
    scope: Option<&str>,
    key: &str,
    admitted: Option<bool>,
    retry_after: impl FnOnce() -> Option<Duration>,
    #[cfg(feature = "metrics")] started: std::time::Instant,
) {
    #[cfg(feature = "metrics")]
    crate::observe::checked(scope, admitted, started.elapsed());
    let (Some(scope), Some(admitted)) = (scope, admitted) else {
        return;
    };
    if admitted {
        tracing::trace!(scope, "rate limit admitted the call");
    } else {
        denial_event(scope, key, retry_after());
    }
}

/// The debug event of a denial, with the key stripped of its `scope:` prefix.
#[cold]
#[inline(never)]
fn denial_event(scope: &str, key: &str, retry_after: Option<Duration>) {
    let key = crate::checking::unscoped(scope, key);
    tracing::debug!(scope, key, ?retry_after, "rate limit denied the call");
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let store = match &self.inner.store {
            Store::Memory(_) => "memory",
            Store::Redis(store) => store.kind(),
            Store::Misconfigured(_) => "misconfigured",
        };
        f.debug_struct("Limiter")
            .field("store", &store)
            .field("failure_policy", &self.inner.policy)
            .finish_non_exhaustive()
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
}

/// The Redis deployment a builder was pointed at.
#[derive(Clone)]
enum RedisTarget {
    Url(String),
    Cluster(Vec<String>),
}

impl Default for LimiterBuilder {
    fn default() -> Self {
        LimiterBuilder {
            redis: None,
            tls: TlsSettings::default(),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            failure_policy: FailurePolicy::default(),
            timeout: DEFAULT_TIMEOUT,
            max_keys: None,
        }
    }
}

impl LimiterBuilder {
    /// Keeps the logs in the Redis server at `url`: `redis://[[user]:password@]host[:port][/db]`,
    /// `rediss://…` for TLS (feature `tls`), or `redis+unix:///path`. Without it (or
    /// [`redis_cluster`](LimiterBuilder::redis_cluster)) the limiter is in process. The last of
    /// the two calls wins.
    #[must_use]
    pub fn redis_url(mut self, url: &str) -> Self {
        self.redis = Some(RedisTarget::Url(url.to_owned()));
        self
    }

    /// Keeps the logs in the Redis Cluster reached through `nodes` (`redis://` or `rediss://`
    /// URLs of some of its masters; the rest is discovered), each key's sorted set on the node
    /// that owns its slot. Every check touches one key, so keys need no hash tags; use
    /// `{tags}` in keys only to co-locate them on purpose.
    ///
    /// The cluster client follows `MOVED` and `ASK` redirections and reconnects to moved or
    /// failed-over masters within the check's timeout; the script counts a call that it resends
    /// once.
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
    pub fn key_prefix(mut self, prefix: &str) -> Self {
        prefix.clone_into(&mut self.key_prefix);
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
    /// timeout. Zero is rejected by [`build`](LimiterBuilder::build) (`InvalidConfig`).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Builds the limiter. It connects lazily, on the first check, so a Redis that is down
    /// now does not make this fail.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidConfig`] for a malformed Redis URL, an unknown scheme,
    /// `rediss://` without the `tls` feature, TLS certificates for a URL that is not
    /// `rediss://`, a TLS certificate or key that does not parse or a key that is not the
    /// certificate's, an empty list of cluster nodes (or nodes that disagree on TLS or
    /// credentials, or a `redis+unix://` or `/<db>` node URL), a zero timeout, or a zero
    /// `max_keys`.
    #[allow(clippy::unused_async)] // async in the contract: room to validate against the server
    pub async fn build(self) -> Result<Limiter, RateLimitError> {
        self.build_now()
    }

    /// [`build`](LimiterBuilder::build) without a runtime, for the process-wide default.
    pub(crate) fn build_now(self) -> Result<Limiter, RateLimitError> {
        if self.timeout.is_zero() {
            return Err(RateLimitError::InvalidConfig(
                "the timeout must be longer than zero".into(),
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
            Some(RedisTarget::Cluster(nodes)) => Store::Redis(
                RedisStore::cluster(nodes, &self.tls, &self.key_prefix, self.timeout)
                    .map_err(RateLimitError::InvalidConfig)?,
            ),
        };
        let fallback = MemoryStore::with_max_keys(max_keys);
        Ok(Limiter::with_fallback(store, self.failure_policy, fallback))
    }
}

/// Leaves the URL out: it may carry a password.
impl fmt::Debug for LimiterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redis = match &self.redis {
            None => None,
            Some(RedisTarget::Url(_)) => Some("url <redacted>".to_owned()),
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
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

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
    #[test]
    fn redis_checks_outside_a_runtime_answer_by_policy() {
        let limiter = Limiter::builder()
            .redis_url("redis://127.0.0.1:1/")
            .failure_policy(FailurePolicy::Closed)
            .build_now()
            .unwrap();
        let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
        let mut context = Context::from_waker(Waker::noop());
        let mut check = pin!(limiter.check("k", rate));
        let Poll::Ready(Err(RateLimitError::Unavailable(StoreError::NoRuntime))) =
            check.as_mut().poll(&mut context)
        else {
            panic!("expected an immediate `Unavailable` answer");
        };
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
