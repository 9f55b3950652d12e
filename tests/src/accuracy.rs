//! Traffic replayed through the sliding window log and the sliding window counter side by
//! side, at explicit times: how often the counter decides otherwise than the exact log, and
//! how far past the threshold its rolling windows go. Shared by
//! `tests/tests/suite/accuracy.rs` and the `accuracy` bench binary (BENCHMARKS.md).
//!
//! A trace is a time-ordered list of calls, each to one of its keys. Each algorithm runs on
//! its own history (its own admissions), as in a deployment that used it: a call is "decided
//! differently" when one admits it and the other denies it.

use std::sync::Arc;
use std::time::Duration;

use ratelimit_runtime::{Algorithm, Limiter, Rate};

use crate::at_micros;

/// The traces' base time (2023-11-14T22:13:20Z), in µs since the Unix epoch.
const BASE: u64 = 1_700_000_000_000_000;

/// One call of a trace: when, and to which of the trace's keys.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    /// µs since the Unix epoch.
    pub at: u64,
    /// The key's index.
    pub key: u32,
}

/// A time-ordered list of calls, and the rate they are checked against.
#[derive(Clone, Debug)]
pub struct Trace {
    /// What the trace is, for the table.
    pub name: String,
    /// The calls, by time.
    pub calls: Vec<Call>,
    /// Admissions per period.
    pub threshold: u64,
    /// The period, µs.
    pub period_us: u64,
}

/// A small deterministic random number generator (xorshift64*), so that every run replays the
/// same traffic.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value).
    #[must_use]
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Below `n` (above 0), nearly uniform for the small `n` of the tests.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `(0, 1]`.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// An exponential variate of mean `mean`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -self.unit().ln() * mean
    }
}

/// Poisson arrivals on one key at `multiple` times the threshold rate (`threshold / period`),
/// for `windows` periods.
#[must_use]
pub fn poisson(multiple: f64, threshold: u64, period: Duration, windows: u64, seed: u64) -> Trace {
    let period_us = micros(period);
    let mean_gap = period_us as f64 / (threshold as f64 * multiple);
    let mut rng = Rng::new(seed);
    let end = BASE + windows * period_us;
    let mut calls = Vec::new();
    let mut t = BASE as f64;
    loop {
        t += rng.exponential(mean_gap);
        let at = t as u64;
        if at >= end {
            break;
        }
        calls.push(Call { at, key: 0 });
    }
    Trace {
        name: format!("Poisson, {multiple}× the threshold rate"),
        calls,
        threshold,
        period_us,
    }
}

/// Bursts at the fixed windows' edges, the counter's worst case: at every edge, `threshold`
/// calls spread over the last 5 % of the window before it and `threshold` over the first 5 %
/// of the window after it, on one key, for `windows` edges.
#[must_use]
pub fn edge_bursts(threshold: u64, period: Duration, windows: u64, seed: u64) -> Trace {
    let period_us = micros(period);
    let start = BASE - BASE % period_us + period_us;
    let spread = period_us / 20;
    let mut rng = Rng::new(seed);
    let mut calls = Vec::new();
    for edge in 1..=windows {
        let at_edge = start + edge * period_us;
        let mut burst: Vec<u64> = Vec::with_capacity(2 * threshold as usize);
        for _ in 0..threshold {
            burst.push(at_edge - 1 - rng.next_u64() % spread);
            burst.push(at_edge + rng.next_u64() % spread);
        }
        burst.sort_unstable();
        calls.extend(burst.into_iter().map(|at| Call { at, key: 0 }));
    }
    Trace {
        name: "bursts at window edges".to_owned(),
        calls,
        threshold,
        period_us,
    }
}

/// `keys` keys with heavy-tailed rates (Pareto, shape 1.2: the median key at `median` times
/// the threshold rate, a few far above it, capped at 50 times), each a Poisson stream, merged
/// by time, for `windows` periods.
#[must_use]
pub fn heavy_tailed(
    keys: u32,
    median: f64,
    threshold: u64,
    period: Duration,
    windows: u64,
    seed: u64,
) -> Trace {
    let period_us = micros(period);
    let mut rng = Rng::new(seed);
    let end = BASE + windows * period_us;
    let median_share = median;
    let median = median * threshold as f64 / period_us as f64;
    let shape = 1.2;
    // Pareto(x_m, shape) has median x_m · 2^(1/shape).
    let scale = median / 2f64.powf(1.0 / shape);
    let mut calls = Vec::new();
    for key in 0..keys {
        // Capped at 50× the threshold rate, so that one key cannot make the trace huge.
        let rate =
            (scale / rng.unit().powf(1.0 / shape)).min(50.0 * threshold as f64 / period_us as f64);
        let mut t = BASE as f64;
        loop {
            t += rng.exponential(1.0 / rate);
            let at = t as u64;
            if at >= end {
                break;
            }
            calls.push(Call { at, key });
        }
    }
    calls.sort_by_key(|call| (call.at, call.key));
    Trace {
        name: format!(
            "{keys} keys, heavy-tailed rates (median {median_share}× the threshold rate)"
        ),
        calls,
        threshold,
        period_us,
    }
}

/// How the counter's decisions on a trace compare with the exact log's.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The trace's calls.
    pub calls: u64,
    /// Calls the log admitted.
    pub log_admitted: u64,
    /// Calls the counter admitted.
    pub counter_admitted: u64,
    /// Calls the counter admitted and the log denied.
    pub false_admits: u64,
    /// Calls the counter denied and the log admitted.
    pub false_denials: u64,
    /// The most admissions of one key the counter let into any rolling window of length
    /// `period` (`(t − period, t]`).
    pub counter_max_window: u64,
    /// The same for the log (at most the threshold).
    pub log_max_window: u64,
    /// The most admissions of one key the counter let into one fixed window.
    pub counter_max_fixed: u64,
    /// Rolling windows of the counter above `T + ⌊T · f⌋` (`f` the fraction of its fixed
    /// window at which the window ends): 0 when the bound holds.
    pub bound_violations: u64,
    /// Each call's two decisions, `(log, counter)`, for comparing stores.
    pub decisions: Vec<(bool, bool)>,
}

impl Comparison {
    /// `part` as a percentage of the calls.
    #[must_use]
    pub fn percent(&self, part: u64) -> f64 {
        100.0 * part as f64 / self.calls.max(1) as f64
    }

    /// The counter's largest rolling window, as a multiple of the threshold.
    #[must_use]
    pub fn max_multiple(&self, threshold: u64) -> f64 {
        self.counter_max_window as f64 / threshold as f64
    }
}

/// Replays `trace` through `limiter` under both algorithms (keys `<tag>:<key>`, each
/// algorithm's state apart), at the calls' times, and compares them. The keys are replayed
/// by up to 16 tasks at once, each key's calls in order by one task (keys are independent, so
/// the outcome is the same as one call after another).
///
/// # Panics
///
/// When a check fails (the store could not answer).
pub async fn replay(limiter: &Limiter, tag: &str, trace: &Trace) -> Comparison {
    let log = Rate::new(trace.threshold, Duration::from_micros(trace.period_us)).expect("a rate");
    let counter = log.with_algorithm(Algorithm::SlidingWindowCounter);
    let keys = trace
        .calls
        .iter()
        .map(|call| call.key)
        .max()
        .map_or(0, |k| k + 1) as usize;
    let groups = keys.clamp(1, 16);
    let calls: Arc<[Call]> = trace.calls.as_slice().into();
    let tasks: Vec<_> = (0..groups)
        .map(|group| {
            let (limiter, calls, tag) = (limiter.clone(), Arc::clone(&calls), tag.to_owned());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for (index, call) in calls.iter().enumerate() {
                    if call.key as usize % groups != group {
                        continue;
                    }
                    let key = format!("{tag}:{}", call.key);
                    let at = at_micros(call.at);
                    let by_log = limiter.check_at(&key, log, at).await.expect("log check");
                    let by_counter = limiter.check_at(&key, counter, at).await;
                    let by_counter = by_counter.expect("counter check");
                    answers.push((index, by_log.allowed, by_counter.allowed));
                }
                answers
            })
        })
        .collect();
    let mut decisions = vec![(false, false); calls.len()];
    for task in tasks {
        for (index, by_log, by_counter) in task.await.expect("a replay task") {
            decisions[index] = (by_log, by_counter);
        }
    }
    let mut log_times: Vec<Vec<u64>> = vec![Vec::new(); keys];
    let mut counter_times: Vec<Vec<u64>> = vec![Vec::new(); keys];
    for (call, &(by_log, by_counter)) in calls.iter().zip(&decisions) {
        if by_log {
            log_times[call.key as usize].push(call.at);
        }
        if by_counter {
            counter_times[call.key as usize].push(call.at);
        }
    }
    let count = |f: fn(&(bool, bool)) -> bool| decisions.iter().filter(|d| f(d)).count() as u64;
    let (threshold, period) = (trace.threshold, trace.period_us);
    let mut comparison = Comparison {
        calls: decisions.len() as u64,
        log_admitted: count(|d| d.0),
        counter_admitted: count(|d| d.1),
        false_admits: count(|d| d.1 && !d.0),
        false_denials: count(|d| d.0 && !d.1),
        counter_max_window: 0,
        log_max_window: 0,
        counter_max_fixed: 0,
        bound_violations: 0,
        decisions,
    };
    for times in &log_times {
        comparison.log_max_window = comparison.log_max_window.max(max_window(times, period));
    }
    for times in &counter_times {
        let max = max_window(times, period);
        comparison.counter_max_window = comparison.counter_max_window.max(max);
        comparison.bound_violations += bound_violations(times, threshold, period);
        let mut fixed = 0;
        let mut current = None;
        for &t in times {
            if current == Some(t / period) {
                fixed += 1;
            } else {
                current = Some(t / period);
                fixed = 1;
            }
            comparison.counter_max_fixed = comparison.counter_max_fixed.max(fixed);
        }
    }
    comparison
}

/// The most of `times` (sorted) in any window `(t − period, t]` (a maximum is reached where a
/// window ends at one of them).
pub fn max_window(times: &[u64], period: u64) -> u64 {
    let mut first = 0;
    let mut max = 0;
    for (i, &t) in times.iter().enumerate() {
        while times[first] + period <= t {
            first += 1;
        }
        max = max.max((i + 1 - first) as u64);
    }
    max
}

/// The windows ending at an admission (of `times`, sorted) that hold more than
/// `T + ⌊T · f⌋`, `f` the fraction of its fixed window at which the window ends.
pub fn bound_violations(times: &[u64], threshold: u64, period: u64) -> u64 {
    let mut first = 0;
    let mut violations = 0;
    for (i, &t) in times.iter().enumerate() {
        while times[first] + period <= t {
            first += 1;
        }
        // Every admission at t counts, those after index i in the same microsecond too.
        let last = i + times[i..].iter().take_while(|&&u| u == t).count();
        let held = (last - first) as u64;
        let elapsed = t % period;
        // ⌊T · f⌋ < T: it fits a u64.
        let share = u128::from(threshold) * u128::from(elapsed) / u128::from(period);
        let bound = threshold + share as u64;
        if held > bound {
            violations += 1;
        }
    }
    violations
}

fn micros(period: Duration) -> u64 {
    u64::try_from(period.as_micros()).expect("a rate's period")
}
