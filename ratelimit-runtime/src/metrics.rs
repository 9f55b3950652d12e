//! What the limiter reports through the `metrics` facade (feature `metrics`): see the crate
//! docs for the names and the label.
//!
//! The checks of `#[rate_limit]` are labelled with their scope, a `&'static str`; the layer's
//! with its configured scope. The labels of a scope are made once, the first time it is seen,
//! and kept for the life of the process (scopes are few: one per limited function or layer),
//! so that a check allocates nothing for its metrics.

use std::collections::HashMap;
use std::sync::{LazyLock, PoisonError, RwLock};
use std::time::Duration;

use ::metrics::{Key, Label, Level, Metadata};

/// Admitted checks (by the store or by the failure policy).
pub(crate) const ADMITTED: &str = "ratelimit_admitted_total";
/// Denied checks (by the store or by the `Local` failure policy's fallback).
pub(crate) const DENIED: &str = "ratelimit_denied_total";
/// Checks the store could not answer, answered by the failure policy instead.
pub(crate) const POLICY_ANSWERED: &str = "ratelimit_policy_answered_total";
/// Calls a shadow limit would have denied (shadow mode), which went on.
pub(crate) const SHADOW_DENIED: &str = "ratelimit_shadow_denied_total";
/// Denials the deny cache answered without a Redis call (each also counts as denied).
pub(crate) const DENY_CACHE_ANSWERED: &str = "ratelimit_deny_cache_answered_total";
/// Changes of a mode (a scope's, or without the label the limiter's) in the registry.
pub(crate) const MODE_CHANGES: &str = "ratelimit_mode_changes_total";
/// Changes of a scope's rate or key overrides in the registry.
pub(crate) const REGISTRY_CHANGES: &str = "ratelimit_registry_changes_total";
/// Changes a source of the registry gave (a limits file's edits), by outcome.
pub(crate) const REGISTRY_LOADS: &str = "ratelimit_registry_loads_total";
/// How long checks took, in seconds, store round trip included.
pub(crate) const CHECK_DURATION: &str = "ratelimit_check_duration_seconds";
/// Slots held now by this process's calls (concurrency limits), a gauge.
pub(crate) const IN_FLIGHT: &str = "ratelimit_in_flight";
/// The label naming the scope.
pub(crate) const SCOPE: &str = "scope";

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// The labels of each scope seen so far.
static LABELS: LazyLock<RwLock<HashMap<&'static str, &'static [Label]>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// `scope="<scope>"`, or no label for a check made by calling the limiter by hand.
pub(crate) fn labels(scope: Option<&str>) -> &'static [Label] {
    let Some(scope) = scope else {
        return &[];
    };
    let known = LABELS
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(scope)
        .copied();
    if let Some(labels) = known {
        return labels;
    }
    let mut all = LABELS.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(labels) = all.get(scope) {
        return labels;
    }
    let scope: &'static str = Box::leak(scope.into());
    let labels: &'static [Label] = Box::leak(Box::new([Label::from_static_parts(SCOPE, scope)]));
    all.insert(scope, labels);
    labels
}

/// Whichever the answer: admitted or denied, with the check's duration.
pub(crate) fn checked(scope: Option<&str>, admitted: Option<bool>, elapsed: Duration) {
    let labels = labels(scope);
    ::metrics::with_recorder(|recorder| {
        if let Some(admitted) = admitted {
            let name = if admitted { ADMITTED } else { DENIED };
            recorder
                .register_counter(&Key::from_static_parts(name, labels), &METADATA)
                .increment(1);
        }
        recorder
            .register_histogram(&Key::from_static_parts(CHECK_DURATION, labels), &METADATA)
            .record(elapsed.as_secs_f64());
    });
}

/// A shadow limit would have denied a call.
pub(crate) fn shadow_denied(scope: Option<&str>) {
    increment(SHADOW_DENIED, scope);
}

/// The deny cache answered a check.
pub(crate) fn deny_cache_answered(scope: Option<&str>) {
    increment(DENY_CACHE_ANSWERED, scope);
}

/// The store could not answer: the failure policy did.
pub(crate) fn policy_answered(scope: Option<&str>) {
    increment(POLICY_ANSWERED, scope);
}

/// A blocked key's call was denied without a check.
pub(crate) fn blocked(scope: &str) {
    increment(DENIED, Some(scope));
}

/// `slots` slots taken (positive) or released (negative), of the scope of `labels` (from
/// [`labels`]).
pub(crate) fn in_flight(labels: &'static [Label], slots: f64) {
    ::metrics::with_recorder(|recorder| {
        recorder
            .register_gauge(&Key::from_static_parts(IN_FLIGHT, labels), &METADATA)
            .increment(slots);
    });
}

/// A mode changed in the registry.
pub(crate) fn mode_changed(scope: Option<&str>) {
    increment(MODE_CHANGES, scope);
}

/// A scope's rate or overrides changed in the registry.
pub(crate) fn registry_changed(scope: &str) {
    increment(REGISTRY_CHANGES, Some(scope));
}

/// A source's change applied or rejected: labelled `source` and `outcome`
/// (`applied`, `rejected`).
#[cfg_attr(not(feature = "limits-file"), allow(dead_code))]
pub(crate) fn registry_load(source: &'static str, applied: bool) {
    let outcome = if applied { "applied" } else { "rejected" };
    let labels = [
        Label::from_static_parts("source", source),
        Label::from_static_parts("outcome", outcome),
    ];
    ::metrics::with_recorder(|recorder| {
        recorder
            .register_counter(&Key::from_parts(REGISTRY_LOADS, labels.to_vec()), &METADATA)
            .increment(1);
    });
}

/// Adds one to the counter `name` of `scope`.
fn increment(name: &'static str, scope: Option<&str>) {
    let labels = labels(scope);
    ::metrics::with_recorder(|recorder| {
        recorder
            .register_counter(&Key::from_static_parts(name, labels), &METADATA)
            .increment(1);
    });
}
