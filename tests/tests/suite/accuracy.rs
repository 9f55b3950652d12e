//! The sliding window counter against the exact log on the same traffic (`tests::accuracy`):
//! its bound holds on every trace, both stores decide every call alike, and a property test
//! over random traffic with costs never finds a rolling window above `T + ⌊T · f⌋`. The
//! figures (fractions decided differently, the largest window) are printed; the full-size
//! table is the `accuracy` bench binary's (BENCHMARKS.md).

use std::time::Duration;

use proptest::prelude::*;
use ratelimit_runtime::{Algorithm, Limit, Limiter, Rate};
use tests::accuracy::{self, Comparison, Trace};
use tests::{TestRedis, at_micros, unique_prefix};

fn traces() -> Vec<Trace> {
    let period = Duration::from_secs(60);
    let mut traces: Vec<Trace> = [0.5, 1.0, 2.0, 10.0]
        .iter()
        .zip(1..)
        .map(|(&multiple, seed)| accuracy::poisson(multiple, 20, period, 12, seed))
        .collect();
    traces.push(accuracy::edge_bursts(20, period, 12, 5));
    traces.push(accuracy::heavy_tailed(40, 0.2, 20, period, 6, 6));
    traces
}

fn print(trace: &Trace, store: &str, c: &Comparison) {
    println!(
        "{store:9} {:40} calls {:6}  false admits {:6.3} %  false denials {:6.3} %  largest window {:.2} T  (log {} / counter {} admitted)",
        trace.name,
        c.calls,
        c.percent(c.false_admits),
        c.percent(c.false_denials),
        c.max_multiple(trace.threshold),
        c.log_admitted,
        c.counter_admitted
    );
}

fn assert_bounds(trace: &Trace, c: &Comparison) {
    let t = trace.threshold;
    assert_eq!(
        c.bound_violations, 0,
        "{}: a window above T + ⌊T·f⌋",
        trace.name
    );
    assert!(
        c.counter_max_window < 2 * t,
        "{}: {}",
        trace.name,
        c.counter_max_window
    );
    assert!(
        c.counter_max_fixed <= t,
        "{}: {}",
        trace.name,
        c.counter_max_fixed
    );
    assert!(
        c.log_max_window <= t,
        "{}: {}",
        trace.name,
        c.log_max_window
    );
}

#[tokio::test]
async fn the_counter_keeps_its_bound_and_both_stores_decide_alike() {
    let redis = TestRedis::start();
    let prefix = unique_prefix("accuracy");
    let remote = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a Redis limiter");
    for (i, trace) in traces().iter().enumerate() {
        let local = accuracy::replay(&Limiter::memory(), "t", trace).await;
        print(trace, "in process", &local);
        assert_bounds(trace, &local);
        let tag = format!("t{i}");
        let stored = accuracy::replay(&remote, &tag, trace).await;
        print(trace, "Redis", &stored);
        assert_eq!(
            local, stored,
            "{}: the stores decided otherwise",
            trace.name
        );
    }
    // Traffic at half the threshold rate rarely fills a window: the two agree on most calls.
    let calm = &traces()[0];
    let c = accuracy::replay(&Limiter::memory(), "calm", calm).await;
    assert!(c.false_admits + c.false_denials < c.calls / 10, "{c:?}");
    assert_eq!(remote.policy_answers(), 0);
    redis.clean_up(&prefix).await;
}

/// The worst case is reached where the design says: the edge bursts push the counter's
/// rolling window past the threshold, the log's never.
#[tokio::test]
async fn edge_bursts_reach_past_the_threshold_only_under_the_counter() {
    let trace = accuracy::edge_bursts(50, Duration::from_secs(10), 10, 9);
    let c = accuracy::replay(&Limiter::memory(), "edges", &trace).await;
    print(&trace, "in process", &c);
    assert_bounds(&trace, &c);
    assert!(c.counter_max_window > trace.threshold, "{c:?}");
    assert!(c.false_admits > 0, "{c:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Random calls with random costs, at random times over a few windows (in time order,
    /// many in one microsecond), through the in-process counter: no rolling window of
    /// admitted cost exceeds `T + ⌊T · f⌋`, no fixed window exceeds `T`.
    #[test]
    fn no_rolling_window_exceeds_the_bound(
        threshold in 1u64..40,
        period_ms in 1u64..50,
        calls in proptest::collection::vec((0u64..200_000, 0u32..12), 1..300),
    ) {
        let period = period_ms * 1_000;
        let rate = Rate::new(threshold, Duration::from_millis(period_ms))
            .unwrap()
            .with_algorithm(Algorithm::SlidingWindowCounter);
        let base = 1_700_000_000_000_000u64;
        let mut calls = calls;
        calls.sort_unstable();
        let limiter = Limiter::memory();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut admitted: Vec<u64> = Vec::new();
        for (offset, cost) in calls {
            let cost = cost.min(u32::try_from(threshold).unwrap());
            let at = base + offset;
            let limits = [Limit::new("p", rate).with_cost(cost)];
            let decision = *runtime.block_on(limiter.check_all_at(limits, at_micros(at))).unwrap();
            if decision.allowed {
                admitted.extend(std::iter::repeat_n(at, cost as usize));
            }
        }
        prop_assert_eq!(accuracy::bound_violations(&admitted, threshold, period), 0);
        prop_assert!(accuracy::max_window(&admitted, period) < 2 * threshold);
        let mut per_window = std::collections::HashMap::new();
        for t in &admitted {
            *per_window.entry(t / period).or_insert(0u64) += 1;
        }
        prop_assert!(per_window.values().all(|&n| n <= threshold));
    }
}
