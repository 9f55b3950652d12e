//! The `metrics` feature: after a known sequence of checks, a recorder holds exactly the
//! expected counts, labelled with the attribute's scope (never a key), and none for checks
//! made by calling the limiter by hand. The recorder is local to the test's thread
//! (`metrics::with_local_recorder`), and the checks run on a current-thread runtime inside it.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use ratelimit_runtime::{FailurePolicy, Limiter, Rate, RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 2, name = "metrics.hello", key = user, limiter = limiter)]
async fn hello(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 2, name = "metrics.closed", limiter = limiter)]
async fn closed(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 2, name = "metrics.local", limiter = limiter)]
async fn local(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

/// Runs `checks` on a current-thread runtime with a fresh local recorder; returns every
/// counter as `"name{labels}" => count` and every histogram as `"name{labels}" => samples`.
fn record<F: Future<Output = ()>>(
    checks: impl FnOnce() -> F,
) -> (BTreeMap<String, u64>, BTreeMap<String, usize>) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || runtime.block_on(checks()));
    let (mut counters, mut histograms) = (BTreeMap::new(), BTreeMap::new());
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let labels: Vec<String> = key
            .key()
            .labels()
            .map(|label| format!("{}={}", label.key(), label.value()))
            .collect();
        let name = format!("{}{{{}}}", key.key().name(), labels.join(","));
        match (key.kind(), value) {
            (MetricKind::Counter, DebugValue::Counter(count)) => {
                counters.insert(name, count);
            }
            (MetricKind::Histogram, DebugValue::Histogram(samples)) => {
                assert!(samples.iter().all(|s| s.0 >= 0.0 && s.0 < 10.0), "{name}");
                histograms.insert(name, samples.len());
            }
            other => panic!("unexpected metric {name}: {other:?}"),
        }
    }
    (counters, histograms)
}

fn map<V: Copy>(entries: &[(&str, V)]) -> BTreeMap<String, V> {
    entries
        .iter()
        .map(|&(name, value)| (name.to_owned(), value))
        .collect()
}

const RATE: Rate = Rate::new_const(2, Duration::from_secs(60));

#[test]
fn three_calls_at_threshold_two_are_two_admitted_and_one_denied() {
    let (counters, histograms) = record(|| async {
        let limiter = Limiter::memory();
        for _ in 0..3 {
            let _ = hello(&limiter, "user-42").await;
        }
        // Another user: a counter of its own in the store, the same label in the metrics.
        hello(&limiter, "user-7").await.unwrap();
    });
    assert_eq!(
        counters,
        map(&[
            ("ratelimit_admitted_total{scope=metrics.hello}", 3),
            ("ratelimit_denied_total{scope=metrics.hello}", 1),
        ])
    );
    assert_eq!(
        histograms,
        map(&[("ratelimit_check_duration_seconds{scope=metrics.hello}", 4)])
    );
    assert!(!format!("{counters:?}").contains("user-"), "never a key");
}

#[test]
fn checks_by_hand_carry_no_label() {
    let (counters, histograms) = record(|| async {
        let limiter = Limiter::memory();
        for _ in 0..3 {
            limiter.check("user-42", RATE).await.unwrap();
        }
    });
    assert_eq!(
        counters,
        map(&[
            ("ratelimit_admitted_total{}", 2),
            ("ratelimit_denied_total{}", 1),
        ])
    );
    assert_eq!(
        histograms,
        map(&[("ratelimit_check_duration_seconds{}", 3)])
    );
}

async fn dead_redis(policy: FailurePolicy) -> Limiter {
    Limiter::builder()
        .redis_url("redis://127.0.0.1:1/")
        .failure_policy(policy)
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap()
}

#[test]
fn a_store_that_cannot_answer_counts_as_policy_answered() {
    let (counters, histograms) = record(|| async {
        let limiter = dead_redis(FailurePolicy::Closed).await;
        let err = closed(&limiter).await.unwrap_err();
        assert!(matches!(err, RateLimitError::Unavailable(_)), "{err}");

        // `Local` answers from its in-process fallback: admitted, admitted, denied.
        let limiter = dead_redis(FailurePolicy::Local).await;
        for _ in 0..3 {
            let _ = local(&limiter).await;
        }
    });
    assert_eq!(
        counters,
        map(&[
            ("ratelimit_admitted_total{scope=metrics.local}", 2),
            ("ratelimit_denied_total{scope=metrics.local}", 1),
            ("ratelimit_policy_answered_total{scope=metrics.closed}", 1),
            ("ratelimit_policy_answered_total{scope=metrics.local}", 3),
        ])
    );
    assert_eq!(
        histograms,
        map(&[
            ("ratelimit_check_duration_seconds{scope=metrics.closed}", 1),
            ("ratelimit_check_duration_seconds{scope=metrics.local}", 3),
        ])
    );
}

// Shadow mode: a shadow limit alone, and one beside an enforced limit.
#[rate_limit(period = 60, threshold = 2, name = "metrics.trial", shadow = true, limiter = limiter)]
async fn trial(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 4, name = "metrics.enforced", limiter = limiter)]
#[rate_limit(period = 60, threshold = 1, name = "metrics.tried", shadow = true, limiter = limiter)]
async fn enforced_and_tried(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 60, threshold = 2, name = "metrics.everything", limiter = limiter)]
async fn everything(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

/// Shadow limits never deny, and exactly their would-be denials are counted, as
/// `ratelimit_shadow_denied_total` (a would-be denial is an admission to the other counters).
#[test]
fn shadow_limits_count_exactly_their_would_be_denials() {
    let (counters, _) = record(|| async {
        let limiter = Limiter::memory();
        for _ in 0..5 {
            trial(&limiter).await.expect("a shadow limit never denies");
        }
        // The enforced limit denies the fifth call: the shadow limit is not asked then.
        for _ in 0..4 {
            enforced_and_tried(&limiter).await.expect("admitted");
        }
        assert!(enforced_and_tried(&limiter).await.unwrap_err().is_denied());
        // A limiter in shadow mode: every limit is a shadow one, the attribute's and by hand.
        let shadow = Limiter::builder().shadow(true).build().expect("a limiter");
        for _ in 0..3 {
            everything(&shadow).await.expect("shadow mode never denies");
        }
        for _ in 0..3 {
            assert!(shadow.check("k", RATE).await.unwrap().allowed);
        }
    });
    assert_eq!(
        counters,
        map(&[
            ("ratelimit_admitted_total{scope=metrics.trial}", 5),
            ("ratelimit_shadow_denied_total{scope=metrics.trial}", 3),
            ("ratelimit_admitted_total{scope=metrics.enforced}", 8),
            ("ratelimit_denied_total{scope=metrics.enforced}", 1),
            ("ratelimit_shadow_denied_total{scope=metrics.enforced}", 3),
            ("ratelimit_admitted_total{scope=metrics.everything}", 3),
            ("ratelimit_shadow_denied_total{scope=metrics.everything}", 1),
            ("ratelimit_admitted_total{}", 3),
            ("ratelimit_shadow_denied_total{}", 1),
        ])
    );
}

#[rate_limit(period = 60, threshold = 2, name = "metrics.cached", limiter = limiter)]
async fn cached(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

/// The deny cache: a denial it answers counts as a denial, and in its own counter.
#[test]
fn denials_the_deny_cache_answers_are_counted() {
    let redis = tests::TestRedis::start();
    let (counters, _) = record(|| async {
        let limiter = Limiter::builder()
            .redis_url(redis.url())
            .key_prefix(tests::unique_prefix("metrics-cached"))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        for _ in 0..5 {
            let _ = cached(&limiter).await;
        }
        assert_eq!(limiter.deny_cache_answers(), 2);
    });
    assert_eq!(
        counters,
        map(&[
            ("ratelimit_admitted_total{scope=metrics.cached}", 2),
            ("ratelimit_denied_total{scope=metrics.cached}", 3),
            (
                "ratelimit_deny_cache_answered_total{scope=metrics.cached}",
                2
            ),
        ])
    );
}

/// The registry: each change of a mode counted (`enforce` set over the default is none; a scope's labelled, the limiter's not), each
/// change of a scope's rate or overrides counted; a blocked key's call counted as denied, an
/// exempt one not at all.
#[test]
fn registry_changes_and_blocked_calls_are_counted() {
    use ratelimit_runtime::{Limits, Mode, Override, ScopeLimits};
    let (counters, histograms) = record(|| async {
        let limiter = Limiter::memory();
        let entry = ScopeLimits::new()
            .mode(Mode::Enforce)
            .key("bot", Override::block())
            .key("ops", Override::exempt());
        limiter
            .set_limits(Limits::new().scope("metrics.hello", entry.clone()))
            .expect("limits accepted");
        let _ = hello(&limiter, "bot").await;
        hello(&limiter, "ops").await.unwrap();
        limiter
            .set_limits(Limits::new().scope("metrics.hello", entry.mode(Mode::Shadow)))
            .expect("limits accepted");
        limiter.set_mode(Mode::Off);
    });
    assert_eq!(
        counters,
        map(&[
            ("ratelimit_denied_total{scope=metrics.hello}", 1),
            ("ratelimit_mode_changes_total{scope=metrics.hello}", 1),
            ("ratelimit_mode_changes_total{}", 1),
            ("ratelimit_registry_changes_total{scope=metrics.hello}", 1),
        ])
    );
    assert!(histograms.is_empty(), "no check was made: {histograms:?}");
}

#[rate_limit(concurrency = 1, name = "metrics.slots", limiter = limiter)]
async fn held(limiter: &Limiter, gauge: impl Fn() -> f64) -> Result<f64, RateLimitError> {
    Ok(gauge())
}

/// The slots a process's calls hold: a gauge of their scope, up while held, down when
/// released; a concurrency limit's denial counts as any denial.
#[test]
fn slots_in_flight_are_a_gauge_of_their_scope() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // A snapshot takes what the gauges moved since the last one: their sums are the values.
    let totals = std::cell::RefCell::new(BTreeMap::<String, f64>::new());
    let gauge = |name: &str| -> f64 {
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            let full = format!("{}{{{}}}", key.key().name(), labels.join(","));
            if let DebugValue::Gauge(value) = value {
                *totals.borrow_mut().entry(full).or_default() += value.into_inner();
            }
        }
        totals.borrow().get(name).copied().unwrap_or(0.0)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let limiter = Limiter::memory();
            let limit = ratelimit_runtime::Concurrency::new(2).unwrap();
            let a = limiter.acquire("k", limit).await.unwrap();
            let b = limiter.acquire("k", limit).await.unwrap();
            assert_eq!(gauge("ratelimit_in_flight{}"), 2.0);
            assert!(limiter.acquire("k", limit).await.unwrap_err().is_denied());
            drop(a);
            assert_eq!(gauge("ratelimit_in_flight{}"), 1.0);
            drop(b);
            assert_eq!(gauge("ratelimit_in_flight{}"), 0.0);
            // Through the attribute: its scope's gauge, 1 while its body runs.
            let inside = held(&limiter, || {
                gauge("ratelimit_in_flight{scope=metrics.slots}")
            })
            .await
            .unwrap();
            assert_eq!(inside, 1.0);
            assert_eq!(gauge("ratelimit_in_flight{scope=metrics.slots}"), 0.0);
        });
    });
}
