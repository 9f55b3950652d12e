//! What a check tells the world: the span it runs in, the event of its decision, and (feature
//! `metrics`) its counters and duration. See the crate docs' Observability for what each
//! carries: keys never appear above debug level, nor in spans or metrics.

use std::time::Duration;

use crate::decision::Decision;
use crate::error::{RateLimitError, StoreError};
use crate::layout::unscoped;
use crate::policy::FailurePolicy;

/// The span a check runs in: `ratelimit.check` at debug level, with the field `scope` for the
/// checks of `#[rate_limit]` and of the axum layer (never the key).
pub(crate) fn span(scope: Option<&str>) -> tracing::Span {
    tracing::debug_span!("ratelimit.check", scope)
}

/// Times a check, for the histogram `ratelimit_check_duration_seconds` (feature `metrics`).
/// Without the feature it is zero-sized and reads no clock, so that the signatures carrying
/// it need no `cfg`.
#[derive(Clone, Copy)]
pub(crate) struct Timer {
    #[cfg(feature = "metrics")]
    started: std::time::Instant,
}

impl Timer {
    /// Starts timing now.
    #[inline]
    pub(crate) fn start() -> Timer {
        Timer {
            #[cfg(feature = "metrics")]
            started: std::time::Instant::now(),
        }
    }
}

/// A check's answer, `admitted` or denied (`None`: an error), whose retry-after `retry_after`
/// gives when denied: counted in the metrics (timed by `timer`) and, for a scoped check, its
/// decision's event: trace when admitted, debug when denied (with the key without its
/// `scope:` prefix, and the retry-after). Checks made by hand have no event.
#[inline(always)]
pub(crate) fn decided(
    scope: Option<&str>,
    key: &str,
    admitted: Option<bool>,
    retry_after: impl FnOnce() -> Option<Duration>,
    timer: Timer,
) {
    #[cfg(feature = "metrics")]
    crate::metrics::checked(scope, admitted, timer.started.elapsed());
    #[cfg(not(feature = "metrics"))]
    let _ = timer;
    let (Some(scope), Some(admitted)) = (scope, admitted) else {
        return;
    };
    if admitted {
        tracing::trace!(scope, "rate limit admitted the call");
    } else {
        denial_event(scope, key, retry_after());
    }
}

/// [`decided`], for a check's result.
#[inline]
pub(crate) fn answered(
    scope: Option<&str>,
    key: &str,
    result: &Result<Decision, RateLimitError>,
    timer: Timer,
) {
    let decision = result.as_ref().ok();
    decided(
        scope,
        key,
        decision.map(|decision| decision.allowed),
        || decision.and_then(|decision| decision.retry_after),
        timer,
    );
}

/// A check the store could not answer (`error`), answered by `policy` instead: a debug event
/// with the key, and the counter `ratelimit_policy_answered_total`.
pub(crate) fn policy_answered(
    scope: Option<&str>,
    key: &str,
    error: &StoreError,
    policy: FailurePolicy,
) {
    if matches!(error, StoreError::NoRuntime) {
        tracing::debug!("a Redis rate limit check outside a Tokio runtime");
    }
    tracing::debug!(%error, key, ?policy, "check answered by the failure policy");
    #[cfg(feature = "metrics")]
    crate::metrics::policy_answered(scope);
    #[cfg(not(feature = "metrics"))]
    let _ = scope;
}

/// The deny cache answered a check (its decision is reported as any other's): the counter
/// `ratelimit_deny_cache_answered_total`.
#[inline]
pub(crate) fn deny_cache_answered(scope: Option<&str>) {
    #[cfg(feature = "metrics")]
    crate::metrics::deny_cache_answered(scope);
    #[cfg(not(feature = "metrics"))]
    let _ = scope;
}

/// A shadow limit would have denied a call, which went on: a debug event with the scope and
/// the key (stripped of its `E(scope)/` prefix, unescaped), and the counter `ratelimit_shadow_denied_total`.
#[cold]
#[inline(never)]
pub(crate) fn shadow_denied(scope: Option<&str>, key: &str) {
    let unscoped = scope.and_then(|scope| unscoped(scope, key));
    let key = unscoped.as_deref().unwrap_or(key);
    tracing::debug!(scope, key, "a shadow rate limit would have denied the call");
    #[cfg(feature = "metrics")]
    crate::metrics::shadow_denied(scope);
}

/// The debug event of a denial, with the key stripped of its `E(scope)/` prefix, unescaped.
#[cold]
#[inline(never)]
fn denial_event(scope: &str, key: &str, retry_after: Option<Duration>) {
    let key = unscoped(scope, key);
    let key = key.as_deref();
    tracing::debug!(scope, key, ?retry_after, "rate limit denied the call");
}

/// A mode changed in the registry (`scope`'s, or `None`: the limiter's), counted (its event is
/// the registry's).
pub(crate) fn mode_changed(scope: Option<&str>) {
    #[cfg(feature = "metrics")]
    crate::metrics::mode_changed(scope);
    #[cfg(not(feature = "metrics"))]
    let _ = scope;
}

/// A scope's rate or overrides changed in the registry, counted.
pub(crate) fn registry_changed(scope: &str) {
    #[cfg(feature = "metrics")]
    crate::metrics::registry_changed(scope);
    #[cfg(not(feature = "metrics"))]
    let _ = scope;
}

/// A blocked key's call was denied without a check: counted as a denial, with a debug event.
pub(crate) fn blocked(scope: &str) {
    tracing::debug!(scope, "a blocked key was denied");
    #[cfg(feature = "metrics")]
    crate::metrics::blocked(scope);
}

/// A source's change of the registry applied (`true`) or rejected, counted (its event is the
/// source's).
pub(crate) fn registry_load(source: &'static str, applied: bool) {
    #[cfg(feature = "metrics")]
    crate::metrics::registry_load(source, applied);
    #[cfg(not(feature = "metrics"))]
    let _ = (source, applied);
}

/// A call's slots counted in flight (with the `metrics` feature, `ratelimit_in_flight` of its
/// scope) from when they are taken until this is dropped.
pub(crate) struct InFlight {
    #[cfg(feature = "metrics")]
    labels: &'static [::metrics::Label],
    #[cfg(feature = "metrics")]
    slots: f64,
}

impl InFlight {
    /// `slots` slots of `scope` taken (a scope's label is kept for the process's life).
    pub(crate) fn new(scope: Option<&str>, slots: usize) -> InFlight {
        #[cfg(feature = "metrics")]
        {
            let labels = crate::metrics::labels(scope);
            let slots = slots as f64;
            if slots > 0.0 {
                crate::metrics::in_flight(labels, slots);
            }
            InFlight { labels, slots }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (scope, slots);
            InFlight {}
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        if self.slots > 0.0 {
            crate::metrics::in_flight(self.labels, -self.slots);
        }
    }
}
