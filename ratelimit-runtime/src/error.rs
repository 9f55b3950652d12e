//! [`RateLimitError`]: a denial kept apart from a store failure and from invalid input.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use crate::concurrency::Concurrency;
use crate::decision::Decision;
use crate::decisions::Decisions;
use crate::rate::Rate;

/// Everything a check can answer with other than an admission.
///
/// The generated code of `#[rate_limit]` returns it (through `From`) when a call is denied, so
/// its [`Display`](fmt::Display) names the scope and the retry-after but never the key: keys may
/// hold user identifiers, and errors get logged. [`Denied::key`] gives the key to code that
/// needs it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitError {
    /// The call was denied: the key already had `threshold` admissions in the window.
    #[error(transparent)]
    Denied(Box<Denied>),
    /// The store could not answer (Redis down, slow, full) and the limiter's
    /// [`FailurePolicy`](crate::FailurePolicy) is `Closed`.
    #[error(transparent)]
    Unavailable(StoreError),
    /// The input cannot be checked: a rate out of range, or a time before 1970 or after 2155.
    #[error("invalid rate limit input: {0}")]
    InvalidInput(Cow<'static, str>),
    /// The limiter's configuration is unusable, for example a malformed Redis URL in the
    /// environment of the process-wide default limiter ([`global`](crate::global)): every
    /// check, look, reset and refund of that limiter answers this, whatever the failure
    /// policy, until the process is reconfigured.
    #[error("invalid rate limiter configuration: {0}")]
    InvalidConfig(Cow<'static, str>),
    /// The call costs more than any window of its limit can ever admit: `cost` above `max`,
    /// the limit's threshold, or for a sliding window log [`Limit::MAX_COST`](crate::Limit::MAX_COST) if
    /// that is lower (a sliding window counter takes any cost up to its threshold). Not a
    /// denial: retrying never helps (the `axum` and `actix-web` features answer 400).
    #[error(
        "a call of cost {cost} can never be admitted: this limit takes a cost of at most {max} (its threshold, and at most {cap} under a sliding window log; a sliding window counter takes any cost up to its threshold)",
        cap = crate::limit::Limit::MAX_COST
    )]
    CostTooHigh {
        /// The call's cost, as the caller gave it.
        cost: u64,
        /// The most a call may cost under its limit.
        max: u64,
    },
}

impl RateLimitError {
    /// [`RateLimitError::CostTooHigh`] for a call of `cost` under `rate`, if it is one:
    /// `cost` above the threshold, or for a sliding window log above
    /// [`Limit::MAX_COST`](crate::Limit::MAX_COST).
    pub(crate) fn cost_too_high(cost: u64, rate: Rate) -> Option<RateLimitError> {
        let max = if rate.is_counter() {
            rate.threshold()
        } else {
            rate.threshold()
                .min(u64::from(crate::limit::Limit::MAX_COST))
        };
        (cost > max).then_some(RateLimitError::CostTooHigh { cost, max })
    }

    /// The denial's details when this error is [`RateLimitError::Denied`].
    #[must_use]
    pub fn as_denied(&self) -> Option<&Denied> {
        match self {
            RateLimitError::Denied(denied) => Some(denied),
            _ => None,
        }
    }

    /// `true` when the call was denied by the rate limit (not by a failure).
    #[must_use]
    pub fn is_denied(&self) -> bool {
        matches!(self, RateLimitError::Denied(_))
    }

    /// How long to wait before retrying: the denial's retry-after, `None` for other errors.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.as_denied()
            .and_then(|denied| denied.decision.retry_after)
    }
}

/// A store's failure as a check's error: [`RateLimitError::Unavailable`], but for a store
/// configured with an unusable setting, [`RateLimitError::InvalidConfig`] (not an outage: no
/// failure policy answers for it).
impl From<StoreError> for RateLimitError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Misconfigured(reason) => RateLimitError::InvalidConfig(reason),
            error => RateLimitError::Unavailable(error),
        }
    }
}

/// A denial as the error a limited handler returns: [`RateLimitError::Denied`].
impl From<Denied> for RateLimitError {
    fn from(denied: Denied) -> Self {
        RateLimitError::Denied(Box::new(denied))
    }
}

impl Rate {
    /// A rate of `threshold` admissions per `period`.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] when `threshold` is 0 or above [`Rate::MAX_THRESHOLD`],
    /// or when `period` is below [`Rate::MIN_PERIOD`], above [`Rate::MAX_PERIOD`] or not a whole
    /// number of microseconds.
    // Here rather than in `rate.rs`: see the comment on `Rate` there.
    pub fn new(threshold: u64, period: Duration) -> Result<Rate, RateLimitError> {
        match Rate::checked(threshold, period) {
            Ok(rate) => Ok(rate),
            Err(reason) => Err(RateLimitError::InvalidInput(reason.into())),
        }
    }
}

impl Concurrency {
    /// At most `max` calls of a key in flight, slots lasting
    /// [`DEFAULT_SLOT_TIME`](Concurrency::DEFAULT_SLOT_TIME) unless renewed.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] when `max` is 0 or above [`Concurrency::MAX`].
    // Here rather than in `concurrency.rs`, as `Rate::new`.
    pub fn new(max: u64) -> Result<Concurrency, RateLimitError> {
        Concurrency::checked(max, Concurrency::DEFAULT_SLOT_TIME)
            .map_err(|reason| RateLimitError::InvalidInput(reason.into()))
    }

    /// The same limit, its slots lasting `slot_time` unless renewed: how long the slots of a
    /// process that died (or lost the store) keep counting.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] when `slot_time` is below
    /// [`Concurrency::MIN_SLOT_TIME`], above [`Concurrency::MAX_SLOT_TIME`] or not a whole
    /// number of milliseconds.
    pub fn with_slot_time(self, slot_time: Duration) -> Result<Concurrency, RateLimitError> {
        Concurrency::checked(self.max(), slot_time)
            .map_err(|reason| RateLimitError::InvalidInput(reason.into()))
    }
}

/// So that functions returning [`std::io::Result`] can be put under `#[rate_limit]`: the
/// [`io::Error`](std::io::Error) wraps the `RateLimitError` (get it back with
/// [`get_ref`](std::io::Error::get_ref) and `downcast_ref`, or
/// [`into_inner`](std::io::Error::into_inner) and `downcast`), with the kind
/// [`QuotaExceeded`](std::io::ErrorKind::QuotaExceeded) for a denial,
/// [`TimedOut`](std::io::ErrorKind::TimedOut) for a store that did not answer in time,
/// [`InvalidInput`](std::io::ErrorKind::InvalidInput) for invalid input or configuration, and
/// [`Other`](std::io::ErrorKind::Other) for any other store failure.
impl From<RateLimitError> for std::io::Error {
    fn from(err: RateLimitError) -> Self {
        use std::io::ErrorKind;
        let kind = match &err {
            RateLimitError::Denied(_) => ErrorKind::QuotaExceeded,
            RateLimitError::Unavailable(StoreError::Timeout(_)) => ErrorKind::TimedOut,
            RateLimitError::InvalidInput(_)
            | RateLimitError::InvalidConfig(_)
            | RateLimitError::CostTooHigh { .. } => ErrorKind::InvalidInput,
            RateLimitError::Unavailable(_) => ErrorKind::Other,
        };
        std::io::Error::new(kind, err)
    }
}

/// A denied call: which scope and key, the [`Rate`] it was checked against, and the
/// [`Decision`] that denied it; for a call checked against several limits, the deciding
/// limit's, and every limit's in [`decisions`](Denied::decisions).
pub struct Denied {
    scope: Cow<'static, str>,
    key: Option<String>,
    rate: Rate,
    decision: Decision,
    decisions: Option<Decisions>,
}

impl Denied {
    /// A denial of `key` (if the limit is per key) in `scope`, by `decision`, taken against
    /// `rate`.
    #[must_use]
    pub fn new(
        scope: impl Into<Cow<'static, str>>,
        key: Option<String>,
        rate: Rate,
        decision: Decision,
    ) -> Self {
        Denied {
            scope: scope.into(),
            key,
            rate,
            decision,
            decisions: None,
        }
    }

    /// A denial of `key` (if the limit is per key) in `scope` by a check of several limits,
    /// `decisions` (its deciding limit gives [`rate`](Denied::rate) and
    /// [`decision`](Denied::decision)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use ratelimit_runtime::{Denied, Limit, Limiter, Rate, RateLimitError};
    ///
    /// async fn search(limiter: &Limiter, user: &str, items: u32) -> Result<(), RateLimitError> {
    ///     let burst = Rate::new(5, Duration::from_secs(1))?;
    ///     let daily = Rate::new(1_000, Duration::from_secs(86_400))?;
    ///     let burst_key = format!("{{user:{user}}}:burst");
    ///     let daily_key = format!("{{user:{user}}}:daily");
    ///     let decisions = limiter
    ///         .check_all([
    ///             Limit::new(burst_key, burst),
    ///             Limit::new(daily_key, daily).with_cost(items).with_label("daily"),
    ///         ])
    ///         .await?;
    ///     if !decisions.allowed {
    ///         return Err(Denied::of_several("search", Some(user.to_owned()), decisions).into());
    ///     }
    ///     Ok(())
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limiter = Limiter::memory();
    /// search(&limiter, "42", 600).await.unwrap();
    /// let denied = search(&limiter, "42", 600).await.unwrap_err();
    /// let fields = denied.as_denied().unwrap().fields();
    /// assert_eq!(fields[0].1, r#""1s";q=5;w=1, "daily";q=1000;w=86400"#);
    /// # }
    /// ```
    #[must_use]
    pub fn of_several(
        scope: impl Into<Cow<'static, str>>,
        key: Option<String>,
        decisions: Decisions,
    ) -> Self {
        let deciding = decisions.deciding();
        Denied {
            scope: scope.into(),
            key,
            rate: deciding.rate(),
            decision: *deciding.decision(),
            decisions: Some(decisions),
        }
    }

    /// Every limit's decision, when the denial was made from a check's
    /// [`Decisions`] ([`of_several`](Denied::of_several): the attribute's stacked limits, a
    /// limit that counts by outcome, or a handler's own); `None` for a denial of one
    /// [`Limiter::check`](crate::Limiter::check).
    #[must_use]
    pub fn decisions(&self) -> Option<&Decisions> {
        self.decisions.as_ref()
    }

    /// The HTTP fields of the denial, every limit listed for a check of several: as
    /// `(name, value)`, `RateLimit-Policy`, `RateLimit`, then `Retry-After`.
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        match &self.decisions {
            Some(decisions) => decisions.headers().iter().collect(),
            None => self.decision.headers(self.rate).iter().collect(),
        }
    }

    /// The rate the call was checked against.
    #[must_use]
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The scope: the limited function's path or the attribute's `name`.
    #[must_use]
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The key's text within the scope, when the limit is per key. It may hold a user
    /// identifier: log it at debug level at most.
    #[must_use]
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The decision that denied the call (`allowed == false`, `retry_after` set).
    #[must_use]
    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wait = self.decision.retry_after.unwrap_or_default();
        if self.rate.is_concurrency() {
            let max = self.rate.threshold();
            return write!(
                f,
                "concurrency limit reached for `{}`: {max} {} in flight; retry after {}.{:03}s",
                self.scope,
                if max == 1 { "call" } else { "calls" },
                wait.as_secs(),
                wait.subsec_millis()
            );
        }
        write!(
            f,
            "rate limit exceeded for `{}`: retry after {}.{:03}s",
            self.scope,
            wait.as_secs(),
            wait.subsec_millis()
        )
    }
}

/// Leaves the key out: `Debug` output gets logged as readily as `Display`.
impl fmt::Debug for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Denied")
            .field("scope", &self.scope)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("rate", &self.rate)
            .field("decision", &self.decision)
            .field("decisions", &self.decisions)
            .finish()
    }
}

impl std::error::Error for Denied {}

/// Why a store could not answer a check. It never holds a key or a credential.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The check did not finish within the limiter's timeout (connection attempts included).
    /// The call may or may not have been recorded; it is not resent.
    #[error("rate limit store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store has been failing for this long (an outage: down, stalled, unreachable), so
    /// the check was not sent to it. While a store fails, the limiter answers every check at
    /// once by its [`FailurePolicy`](crate::FailurePolicy) (the circuit breaker is open), and
    /// probes the store in the background, one probe at a time, at most every 100 ms.
    #[error(
        "rate limit store failing for the last {} (circuit open: not asked; probed at most \
         every 100 ms)",
        Elapsed(*.0)
    )]
    CircuitOpen(Duration),
    /// The Redis store was used outside a Tokio runtime (or while its runtime shut down, or
    /// on one built without its time or I/O driver), without the `smol` feature (which takes
    /// such calls to smol's executor). Not an outage: the store is not asked, and other
    /// callers are not affected.
    #[error(
        "the Redis rate limit store must be used inside a Tokio runtime with its time and I/O \
         drivers (enable_all(), as #[tokio::main] sets up), or build ratelimit-runtime with \
         its `smol` feature"
    )]
    NoRuntime,
    /// Redis answered with an error, or the connection failed.
    #[error("rate limit store failed: {0}")]
    Redis(#[source] redis::RedisError),
    /// Redis answered something the script never returns.
    #[error("rate limit store sent an unexpected reply: {0}")]
    Protocol(Cow<'static, str>),
    /// The call was recorded on the master, but fewer replicas than
    /// [`LimiterBuilder::wait_for_replicas`](crate::LimiterBuilder::wait_for_replicas) asks
    /// for acknowledged it in time (`WAIT`): a failover now could lose it. Answered by the
    /// failure policy, as an outage of the master (its replicas are gone or far behind).
    #[error(
        "rate limit store recorded the call, but {acknowledged} of the {wanted} replicas asked \
         for acknowledged it in time"
    )]
    NotReplicated {
        /// Replicas that acknowledged the call.
        acknowledged: u64,
        /// Replicas asked for.
        wanted: u32,
    },
    /// The store was configured with an unusable setting (for example a malformed URL in
    /// `RATELIMIT_REDIS_URL`), so every check fails until the process is reconfigured: a
    /// check answers [`RateLimitError::InvalidConfig`], whatever the failure policy.
    #[error("rate limit store is misconfigured: {0}")]
    Misconfigured(Cow<'static, str>),
}

/// A time that has passed, as a person reads it: whole µs, ms or s, or tenths of a second.
struct Elapsed(Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Each unit from where its rounded reading reaches it: never "1000 ms" nor "10.0 s".
        let micros = self.0.as_micros();
        match micros {
            0..1_000 => write!(f, "{micros} µs"),
            1_000..999_500 => write!(f, "{} ms", (micros + 500) / 1_000),
            999_500..9_950_000 => write!(f, "{:.1} s", self.0.as_secs_f64()),
            _ => write!(f, "{} s", self.0.as_secs_f64().round()),
        }
    }
}

impl StoreError {
    /// Whether the error says that the store (or its part) cannot answer anyone now, which
    /// opens its circuit breaker: it could not be reached, or did not answer in time (I/O,
    /// connection, timeout, refused credentials), or answered that it serves no key now
    /// (`LOADING`, `BUSY`, `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`; `READONLY` from a demoted
    /// master, whose connection is dropped so that the next one finds the new master). Any other error
    /// reply concerns this call alone (`OOM`, a missing ACL permission, a key of another
    /// type): that call gets the policy's answer and the others still go to the store. A
    /// breaker opened by one key's `OOM` would answer every key by the policy, the full ones
    /// included, while an attacker's new keys fill the memory. Nor is a check made outside a
    /// runtime an outage.
    pub(crate) fn is_outage(&self) -> bool {
        match self {
            StoreError::NoRuntime => false,
            StoreError::Redis(error) => {
                use redis::{ErrorKind, ServerErrorKind};
                match error.kind() {
                    ErrorKind::Server(
                        ServerErrorKind::BusyLoading
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::ClusterDown
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::ReadOnly,
                    ) => true,
                    ErrorKind::Server(_) => false,
                    // A script running too long; a connection whose credentials the server
                    // refuses (every call on it fails alike).
                    ErrorKind::Extension => {
                        matches!(error.code(), Some("BUSY" | "WRONGPASS" | "NOAUTH"))
                    }
                    _ => true,
                }
            }
            _ => true,
        }
    }

    /// Whether the error is a key holding a value the scripts cannot use: another type, or
    /// scores they cannot compute with (another application writes under the prefix).
    pub(crate) fn is_foreign_value(&self) -> bool {
        let StoreError::Redis(error) = self else {
            return false;
        };
        error.code() == Some("WRONGTYPE")
            || (error.code() == Some("ERR")
                && error.detail().is_some_and(|detail| {
                    detail.contains("@user_script")
                        && (detail.contains("not an integer")
                            || detail.contains("not a valid float")
                            || detail.contains("out of range"))
                }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial() -> RateLimitError {
        let decision = Decision::denied(2, Duration::from_millis(1234), Duration::from_secs(3));
        RateLimitError::Denied(Box::new(Denied::new(
            "app::say_hi",
            Some("user-42".to_owned()),
            Rate::new(2, Duration::from_secs(3)).unwrap(),
            decision,
        )))
    }

    /// An open breaker's error tells how long the store has been failing, as a person reads
    /// it, never as a forecast.
    #[test]
    fn an_open_circuit_says_for_how_long_the_store_has_failed() {
        for (elapsed, shown) in [
            (Duration::from_nanos(77_545), "77 µs"),
            (Duration::from_micros(1_499), "1 ms"),
            (Duration::from_micros(250_600), "251 ms"),
            (Duration::from_micros(999_600), "1.0 s"),
            (Duration::from_millis(2_340), "2.3 s"),
            (Duration::from_millis(9_960), "10 s"),
            (Duration::from_secs(95), "95 s"),
        ] {
            assert_eq!(
                StoreError::CircuitOpen(elapsed).to_string(),
                format!(
                    "rate limit store failing for the last {shown} (circuit open: not asked; \
                     probed at most every 100 ms)"
                )
            );
        }
    }

    #[test]
    fn display_names_the_scope_never_the_key() {
        let err = denial();
        assert_eq!(
            err.to_string(),
            "rate limit exceeded for `app::say_hi`: retry after 1.234s"
        );
        assert!(!format!("{err:?}").contains("user-42"));
        assert_eq!(err.as_denied().unwrap().key(), Some("user-42"));
        assert_eq!(err.retry_after(), Some(Duration::from_millis(1234)));
    }

    #[test]
    fn converts_to_an_io_error_that_keeps_it() {
        let io = std::io::Error::from(denial());
        assert_eq!(io.kind(), std::io::ErrorKind::QuotaExceeded);
        assert_eq!(
            io.to_string(),
            "rate limit exceeded for `app::say_hi`: retry after 1.234s"
        );
        let inner = io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<RateLimitError>());
        assert_eq!(
            inner.and_then(RateLimitError::retry_after),
            Some(Duration::from_millis(1234))
        );
        let timeout = RateLimitError::Unavailable(StoreError::Timeout(Duration::from_millis(250)));
        assert_eq!(
            std::io::Error::from(timeout).kind(),
            std::io::ErrorKind::TimedOut
        );
        let failed = RateLimitError::Unavailable(StoreError::Protocol("x".into()));
        assert_eq!(
            std::io::Error::from(failed).kind(),
            std::io::ErrorKind::Other
        );
        let invalid = RateLimitError::InvalidInput("x".into());
        assert_eq!(
            std::io::Error::from(invalid).kind(),
            std::io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn error_is_send_sync_static() {
        fn check<E: std::error::Error + Send + Sync + 'static>() {}
        check::<RateLimitError>();
        assert!(std::mem::size_of::<RateLimitError>() <= 32);
    }
}
