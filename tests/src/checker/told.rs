//! What callers were told, judged per window: the promise as a caller sees it, whatever the
//! servers recorded.
//!
//! An admission counts in a window only if its call's whole span, `[start, end]` (a
//! millisecond wider each way: the records' clock and the servers' are two readings of one
//! clock), lies inside it: the store decided it somewhere in that span. Per subject (a key and
//! its rate, as its caller names it: a key by hand, an attribute's limit, a layer's rate):
//!
//! - a sliding window log admits at most its threshold in every window of one period;
//! - a sliding window counter at most its threshold in every fixed window (aligned to
//!   multiples of the period), and `2 × threshold − 1` in every window of one period;
//! - counted are the admissions the store answered for (a lease's reserve spent included),
//!   less those a refund may have taken back (whatever the refund's outcome); the failure
//!   policy's answers are left out, but `Local`'s admissions, which its in-process fallback
//!   decides, are judged per limiter on their own;
//! - a reset (by key or by scope, as the taps saw it run; a server's restart, which forgets
//!   everything) starts the bound afresh: it applies to the admissions that started after it,
//!   and an admission whose span holds a reset is reported, not counted. So is a counter's
//!   admission whose span holds the edge of a fixed window (for the fixed windows only), and
//!   a leased subject's admission within its lease's length after a restart (the limiters
//!   still spend the reserves the restart forgot: the data loss the store contract names);
//! - a subject the shared limits' changes address is judged, in each window, against the
//!   highest threshold any version of them possible during it gives it (`changes.rs`): the
//!   store contract's bound while limits change; a window during which one version alone is
//!   possible is exact under its threshold.

use std::collections::{BTreeMap, HashMap, HashSet};

use ratelimit_runtime::{Algorithm, FailurePolicy};

use super::ops::{Kind, Outcome, Record, Source, Subject};
use super::verify::{Inputs, Verdict};

/// How far apart the records' clock and the servers' may read, µs, each way.
const SKEW: u64 = 1_000;

/// One admission a caller was told of.
#[derive(Clone, Copy, Debug)]
struct Told {
    /// Its call's span, server µs, widened by [`SKEW`].
    start: u64,
    end: u64,
    cost: u64,
    limiter: usize,
}

/// A reset of a subject as its judge sees it: somewhere in `[from, to]` (server µs).
#[derive(Clone, Copy, Debug)]
struct Boundary {
    from: u64,
    to: u64,
}

/// Judges every subject's told admissions. `resets`: per stored key (without the prefix and a
/// counter's suffix), the server times at which the taps saw it reset.
pub(crate) fn judge(
    inputs: &Inputs<'_>,
    resets: &HashMap<String, Vec<u64>>,
    verdict: &mut Verdict,
) {
    let records = inputs.records;
    // The admissions a refund may have taken back.
    let refunded: HashSet<usize> = records.iter().filter_map(|r| r.refunds).collect();
    let span = |record: &Record| {
        let start = inputs.epoch_micros + record.started.as_micros() as u64;
        (
            start.saturating_sub(SKEW),
            start + record.took.as_micros() as u64 + SKEW,
        )
    };
    for (index, subject) in inputs.subjects.iter().enumerate() {
        // A concurrency limit bounds the calls in flight, not those in a window: `slots.rs`
        // judges it.
        if subject.rate.is_concurrency() {
            continue;
        }
        let mut store = Vec::new();
        let mut local: BTreeMap<usize, Vec<Told>> = BTreeMap::new();
        for (at, record) in records.iter().enumerate() {
            if !record.kind.admits()
                || refunded.contains(&at)
                || !matches!(
                    record.outcome,
                    Outcome::Admitted | Outcome::Policy { allowed: true }
                )
            {
                continue;
            }
            for (j, &(limit, cost)) in record.limits.iter().enumerate() {
                if limit != index || cost == 0 {
                    continue;
                }
                let (start, end) = span(record);
                let told = Told {
                    start,
                    end,
                    cost: u64::from(cost),
                    limiter: record.limiter,
                };
                match record.sources.get(j).copied().unwrap_or(Source::Store) {
                    Source::Store => store.push(told),
                    Source::Policy
                        if inputs.policies.get(record.limiter) == Some(&FailurePolicy::Local) =>
                    {
                        local.entry(record.limiter).or_default().push(told);
                    }
                    Source::Policy => {}
                }
            }
        }
        // The store's resets of the subject's key, and the restarts.
        let mut boundaries: Vec<Boundary> = resets
            .get(&subject.key)
            .into_iter()
            .flatten()
            .chain(&inputs.wipes)
            .map(|&at| Boundary { from: at, to: at })
            .collect();
        boundaries.sort_by_key(|b| b.from);
        // A leased subject's reserves outlive a restart in the limiters for a lease's length.
        let lease_slack = subject
            .rate
            .is_leased()
            .then(|| (subject.rate.period().as_micros() as u64 / 16).clamp(1, 1_000_000));
        let store: Vec<Told> = store
            .into_iter()
            .filter(|told| {
                let after_wipe = lease_slack.is_some_and(|slack| {
                    inputs
                        .wipes
                        .iter()
                        .any(|&wipe| told.start <= wipe + slack + SKEW && wipe <= told.end)
                });
                if after_wipe {
                    verdict.count(
                        "told: leased admissions within a lease after a restart (not counted)",
                        1,
                    );
                }
                !after_wipe
            })
            .collect();
        let judged = Judged {
            subject,
            index,
            whose: "",
            inputs,
        };
        judge_epochs(&judged, store, &boundaries, verdict);
        // `Local`'s fallback, per limiter: reset by that limiter's own resets, which clear it
        // when they start, or (handed off) later within their bound.
        for (limiter, told) in local {
            let boundaries: Vec<Boundary> = records
                .iter()
                .filter(|r| {
                    r.limiter == limiter
                        && matches!(r.kind, Kind::Reset | Kind::ResetScope)
                        && r.limits.iter().any(|&(limit, _)| limit == index)
                })
                .map(|r| {
                    let (from, end) = span(r);
                    let to = if r.outcome == Outcome::Cancelled {
                        end.max(from + r.bound.as_micros() as u64)
                    } else {
                        end
                    };
                    Boundary { from, to }
                })
                .collect();
            let whose = format!(" (limiter {limiter}'s `Local` fallback)");
            let judged = Judged {
                whose: &whose,
                ..judged
            };
            judge_epochs(&judged, told, &boundaries, verdict);
        }
    }
}

/// One subject's judgement, and what its messages name.
struct Judged<'a> {
    subject: &'a Subject,
    index: usize,
    /// Whose admissions: empty for the store's, or a limiter's fallback.
    whose: &'a str,
    inputs: &'a Inputs<'a>,
}

/// Splits `told` into the epochs `boundaries` make (an admission whose span meets one is left
/// out) and judges each.
fn judge_epochs(
    judged: &Judged<'_>,
    told: Vec<Told>,
    boundaries: &[Boundary],
    verdict: &mut Verdict,
) {
    let mut epochs: BTreeMap<usize, Vec<Told>> = BTreeMap::new();
    for one in told {
        if boundaries
            .iter()
            .any(|b| one.start <= b.to && b.from <= one.end)
        {
            verdict.count("told: admissions whose span holds a reset (not counted)", 1);
            continue;
        }
        let epoch = boundaries.iter().filter(|b| b.to < one.start).count();
        epochs.entry(epoch).or_default().push(one);
    }
    let rate = judged.subject.rate;
    let period = rate.period().as_micros() as u64;
    for (epoch, mut told) in epochs {
        told.sort_by_key(|t| t.start);
        verdict.count("judged: told admissions", told.len() as u64);
        let after = epoch
            .checked_sub(1)
            .and_then(|e| boundaries.get(e))
            .map(|b| b.to);
        if rate.algorithm() == Algorithm::SlidingWindowCounter {
            fixed_windows(judged, &told, period, after, verdict);
            // A rolling window's bound leans on the fixed window before it too.
            sliding(
                judged,
                &told,
                period,
                |from, to, verdict| {
                    judged
                        .bound(from.saturating_sub(period), to, verdict)
                        .map(|t| 2 * t - 1)
                },
                after,
                verdict,
            );
        } else {
            sliding(
                judged,
                &told,
                period,
                |from, to, verdict| judged.bound(from, to, verdict),
                after,
                verdict,
            );
        }
    }
}

impl Judged<'_> {
    /// The most a window `[from, to]` (server µs) may hold of the subject: its threshold, or
    /// for a subject the shared limits address the highest threshold any of their versions
    /// possible then gives it (`None`: none checks it then; nothing may be admitted).
    fn bound(&self, from: u64, to: u64, verdict: &mut Verdict) -> Option<u64> {
        if self.subject.address.is_none() {
            return Some(self.subject.rate.threshold());
        }
        let possible = self
            .inputs
            .timeline
            .possible(self.subject, from, to, &self.inputs.wipes);
        verdict.count(
            if possible.len() == 1 {
                "judged: windows of registered subjects under one threshold (exact)"
            } else {
                "judged: windows of registered subjects across a change (the highest bound)"
            },
            1,
        );
        possible.last().copied()
    }
}

/// No window of `period` holds more than `bound` gives it (from its start and end, server
/// µs; `None`: nothing) of `told` (sorted by start).
fn sliding(
    judged: &Judged<'_>,
    told: &[Told],
    period: u64,
    bound: impl Fn(u64, u64, &mut Verdict) -> Option<u64>,
    after: Option<u64>,
    verdict: &mut Verdict,
) {
    // The most over its bound is reached in a window that starts at an admission's start.
    let mut worst: Option<(u64, u64, u64, Vec<&Told>)> = None;
    for (i, first) in told.iter().enumerate() {
        let from = first.start;
        let inside: Vec<&Told> = told[i..]
            .iter()
            .take_while(|t| t.start < from + period)
            .filter(|t| t.end < from + period)
            .collect();
        let sum: u64 = inside.iter().map(|t| t.cost).sum();
        let most = bound(from, from + period, verdict).unwrap_or(0);
        if sum > most
            && worst
                .as_ref()
                .is_none_or(|(excess, _, _, _)| sum - most > *excess)
        {
            worst = Some((sum - most, sum, from, inside));
        }
    }
    if let Some((excess, sum, from, inside)) = worst {
        let bound = sum - excess;
        let kind = if judged.subject.rate.algorithm() == Algorithm::SlidingWindowCounter {
            "rolling window (2 × threshold − 1)"
        } else {
            "window"
        };
        verdict.violation(format!(
            "told: {}{} admitted {sum} in the {kind} of {} s from {} (bound {bound}); {}",
            judged.subject.name,
            judged.whose,
            period / 1_000_000,
            run_time(from, judged.inputs),
            context(judged, &inside, after),
        ));
    }
}

/// No fixed window (aligned to multiples of `period`) holds more than the threshold of
/// `told`; an admission whose span holds a window's edge is left out.
fn fixed_windows(
    judged: &Judged<'_>,
    told: &[Told],
    period: u64,
    after: Option<u64>,
    verdict: &mut Verdict,
) {
    let mut windows: BTreeMap<u64, Vec<&Told>> = BTreeMap::new();
    for one in told {
        let window = one.start / period;
        if one.end / period != window {
            verdict.count(
                "told: counter admissions whose span holds a fixed window's edge (not counted there)",
                1,
            );
            continue;
        }
        windows.entry(window).or_default().push(one);
    }
    for (window, inside) in windows {
        let sum: u64 = inside.iter().map(|t| t.cost).sum();
        let threshold = judged
            .bound(window * period, (window + 1) * period, verdict)
            .unwrap_or(0);
        if sum > threshold {
            verdict.violation(format!(
                "told: {}{} admitted {sum} in its fixed window from {} (threshold {threshold}); {}",
                judged.subject.name,
                judged.whose,
                run_time(window * period, judged.inputs),
                context(judged, &inside, after),
            ));
        }
    }
}

/// `at` (server µs) as the run's time, in seconds.
fn run_time(at: u64, inputs: &Inputs<'_>) -> String {
    format!(
        "{:.3} s",
        at.saturating_sub(inputs.epoch_micros) as f64 / 1e6
    )
}

/// Who admitted what in a violating window, and the resets that may have run last before it
/// (the calls that could have run it then).
fn context(judged: &Judged<'_>, inside: &[&Told], after: Option<u64>) -> String {
    let inputs = judged.inputs;
    let mut by_limiter: BTreeMap<usize, u64> = BTreeMap::new();
    for told in inside {
        *by_limiter.entry(told.limiter).or_default() += told.cost;
    }
    let by: Vec<String> = by_limiter
        .iter()
        .map(|(limiter, cost)| format!("limiter {limiter}: {cost}"))
        .collect();
    let Some(at) = after else {
        return format!("{}; no reset before it", by.join(", "));
    };
    // The calls that may have run it: begun before it, within their bound of it.
    let calls: Vec<String> = inputs
        .records
        .iter()
        .filter(|r| {
            matches!(r.kind, Kind::Reset | Kind::ResetScope)
                && r.limits.iter().any(|&(limit, _)| limit == judged.index)
        })
        .filter(|r| {
            // A call that ended ran before it ended; one cancelled or failed may run later
            // (handed off, or held by a stalled proxy), within its bound.
            let start = inputs.epoch_micros + r.started.as_micros() as u64;
            let last = match r.outcome {
                Outcome::Done => r.took,
                _ => r.took.max(r.bound),
            };
            start.saturating_sub(SKEW) <= at && at <= start + last.as_micros() as u64 + SKEW
        })
        .map(|r| {
            format!(
                "{} by limiter {} ({:?})",
                r.kind.name(),
                r.limiter,
                r.outcome
            )
        })
        .collect();
    format!(
        "{}; after a reset at {} (run by: {})",
        by.join(", "),
        run_time(at, inputs),
        if calls.is_empty() {
            "a restart, or no call seen".to_owned()
        } else {
            calls.join(", ")
        }
    )
}
