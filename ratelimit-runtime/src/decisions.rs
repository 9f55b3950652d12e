//! [`Decisions`]: the answer to one check of several limits, and each limit's
//! [`LimitDecision`].

use std::borrow::Cow;
use std::ops::Deref;
use std::time::Duration;

use crate::decision::Decision;
use crate::rate::Rate;

/// The answer to one check of several limits
/// ([`Limiter::check_all`](crate::Limiter::check_all)): one decision for the call, and each
/// limit's own.
///
/// It derefs to the deciding limit's [`Decision`]: on a denial, the denying limit with the
/// longest retry-after (the call fits once it has passed, unless others used the quota
/// meanwhile); on an admission, the limit with the fewest admissions remaining. So
/// `decisions.allowed` says whether the call was admitted, and `decisions.retry_after` how
/// long to wait. In shadow mode (every limit admits), a limit that
/// [would deny](Decision::would_deny) decides as a denial would, so that
/// `decisions.would_deny()` tells whether any of them would have.
///
/// On a denial nothing is recorded in any limit, and a limit that would have admitted the
/// call says so (`allowed == true`), its `remaining` counting what is left without this call.
///
/// ```
/// use std::time::Duration;
/// use ratelimit_runtime::{Limit, Limiter, Rate};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), ratelimit_runtime::RateLimitError> {
/// let limiter = Limiter::memory();
/// let burst = Rate::new(2, Duration::from_secs(1))?;
/// let daily = Rate::new(1_000, Duration::from_secs(86_400))?;
/// let limits = || [Limit::new("user:42:burst", burst), Limit::new("user:42:daily", daily)];
/// assert!(limiter.check_all(limits()).await?.allowed);
/// assert!(limiter.check_all(limits()).await?.allowed);
/// let third = limiter.check_all(limits()).await?;
/// assert!(!third.allowed);
/// assert_eq!(third.deciding().label(), "1s");
/// for limit in &third {
///     println!("{}: allowed {}, {} left", limit.label(), limit.allowed, limit.remaining);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decisions {
    limits: Vec<LimitDecision>,
    deciding: usize,
    /// The index among the check's limits of `limits[0]`: 0, except for the deny cache's
    /// answer, which lists the one limit it denied.
    first: usize,
}

/// One limit's part of [`Decisions`]: its label, its rate and its [`Decision`] (which it
/// derefs to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitDecision {
    label: Cow<'static, str>,
    rate: Rate,
    decision: Decision,
}

impl LimitDecision {
    /// The label naming the limit's policy in the HTTP fields: the one given, or the rate's
    /// window (`1s`, `90s`, `1d`), with `-2`, `-3`... after it when two limits would share one.
    #[must_use]
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The rate the limit was checked against.
    #[must_use]
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The limit's decision.
    #[must_use]
    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}

impl Deref for LimitDecision {
    type Target = Decision;

    fn deref(&self) -> &Decision {
        &self.decision
    }
}

impl Decisions {
    /// The decisions of a check's limits, in its order: each limit's label (`None`: its
    /// window, or `concurrency`), rate and decision; `admitted` whether the call was. Not empty.
    pub(crate) fn new(
        limits: impl IntoIterator<Item = (Option<Cow<'static, str>>, Rate, Decision)>,
    ) -> Decisions {
        let mut decided: Vec<LimitDecision> = Vec::new();
        for (label, rate, decision) in limits {
            let label = label.unwrap_or_else(|| Cow::Owned(label_of(rate)));
            let label = unique(label, |taken| {
                decided.iter().any(|limit| limit.label == taken)
            });
            decided.push(LimitDecision {
                label,
                rate,
                decision,
            });
        }
        let deciding = if decided.iter().any(|limit| limit.would_deny()) {
            // Shadow mode: the would-be denial with the longest retry-after decides, as a
            // denial would.
            position_min_by_key(&decided, |limit| match limit.retry_after {
                Some(wait) if limit.would_deny() => (false, std::cmp::Reverse(wait)),
                _ => (true, std::cmp::Reverse(Duration::ZERO)),
            })
        } else if decided.iter().all(|limit| limit.allowed) {
            position_min_by_key(&decided, |limit| limit.remaining)
        } else {
            position_min_by_key(&decided, |limit| match limit.retry_after {
                Some(wait) if !limit.allowed => std::cmp::Reverse(wait),
                _ => std::cmp::Reverse(Duration::ZERO),
            })
        };
        Decisions {
            limits: decided,
            deciding,
            first: 0,
        }
    }

    /// These decisions, of one limit, as those of the limit at `index` among a check's (the
    /// deny cache's answer, which names the limit it denied alone).
    pub(crate) fn of_limit_at(mut self, index: usize) -> Decisions {
        self.first = index;
        self
    }

    /// The decisions of a call exempt from every limit (`#[rate_limit(exempt = ..)]`): no
    /// limit, see [`is_empty`](Decisions::is_empty).
    pub(crate) fn exempt() -> Decisions {
        Decisions {
            limits: Vec::new(),
            deciding: 0,
            first: 0,
        }
    }

    /// The deciding limit (see [`Decisions`]). For a call exempt from every limit
    /// ([`is_empty`](Decisions::is_empty)), a placeholder labelled `exempt`: admitted, with
    /// `limit` and `remaining` at `u64::MAX`, and the largest rate.
    #[must_use]
    pub fn deciding(&self) -> &LimitDecision {
        self.limits.get(self.deciding).unwrap_or(&EXEMPT)
    }

    /// The deciding limit's index, in the check's order.
    pub(crate) fn deciding_index(&self) -> usize {
        self.first + self.deciding
    }

    /// Each limit's decision, in the order the check gave the limits.
    pub fn iter(&self) -> std::slice::Iter<'_, LimitDecision> {
        self.limits.iter()
    }

    /// How many limits the check had: at least one, except for a call that
    /// `#[rate_limit(exempt = ..)]` exempted from every limit of its function (0).
    #[must_use]
    pub fn len(&self) -> usize {
        self.limits.len()
    }

    /// Whether the call was exempt from every limit (then nothing was checked or recorded:
    /// the decisions list no limit, deref to an admission without limit, and
    /// [`headers`](Decisions::headers) writes no field). `false` for every by-hand check.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }
}

/// The deciding "limit" of a call exempt from every limit.
static EXEMPT: LimitDecision = LimitDecision {
    label: Cow::Borrowed("exempt"),
    rate: Rate::new_const(Rate::MAX_THRESHOLD, Rate::MAX_PERIOD),
    decision: Decision::exempt(),
};

impl Deref for Decisions {
    type Target = Decision;

    fn deref(&self) -> &Decision {
        &self.deciding().decision
    }
}

impl<'a> IntoIterator for &'a Decisions {
    type Item = &'a LimitDecision;
    type IntoIter = std::slice::Iter<'a, LimitDecision>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The index of the first item with the least key (`items` is not empty).
fn position_min_by_key<T, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> usize {
    let mut best = 0;
    for (i, item) in items.iter().enumerate().skip(1) {
        if key(item) < key(&items[best]) {
            best = i;
        }
    }
    best
}

/// `label`, or when `taken` says it is, `label-2`, `label-3`...: the first that is not.
fn unique(label: Cow<'static, str>, taken: impl Fn(&str) -> bool) -> Cow<'static, str> {
    let mut unique = label.clone();
    let mut n = 1;
    while taken(&unique) {
        n += 1;
        unique = Cow::Owned(format!("{label}-{n}"));
    }
    unique
}

/// The default labels of `rates`, as [`Decisions`] gives them: each one's window (or
/// `concurrency`), made unique.
#[cfg_attr(not(feature = "axum"), allow(dead_code))] // the layer's
pub(crate) fn window_labels(rates: &[Rate]) -> Vec<String> {
    let mut labels: Vec<String> = Vec::with_capacity(rates.len());
    for rate in rates {
        let label = unique(Cow::Owned(label_of(*rate)), |taken| {
            labels.iter().any(|label| label == taken)
        });
        labels.push(label.into_owned());
    }
    labels
}

/// A rate's label before another takes it: its window, or `concurrency` for a concurrency
/// limit (which has none).
pub(crate) fn label_of(rate: Rate) -> String {
    if rate.is_concurrency() {
        CONCURRENCY_LABEL.to_owned()
    } else {
        window(rate.period())
    }
}

/// A concurrency limit's label unless one is given: no window's.
pub(crate) const CONCURRENCY_LABEL: &str = "concurrency";

/// A window's label: the period in the largest unit that divides it (`1d`, `12h`, `90s`,
/// `1500ms`, `2500us`).
pub(crate) fn window(period: Duration) -> String {
    let mut label = String::new();
    write_window(&mut label, period);
    label
}

/// The longest label [`window`] writes: the longest period, 100 years, in microseconds.
pub(crate) const MAX_WINDOW_LEN: usize = "3155760000000000us".len();

/// The units a window is written in, the largest first, in µs (below them all, `us`).
const WINDOW_UNITS: [(&str, u64); 5] = [
    ("d", 86_400_000_000),
    ("h", 3_600_000_000),
    ("m", 60_000_000),
    ("s", 1_000_000),
    ("ms", 1_000),
];

/// The window `text` names, as [`write_window`] writes it (a number and a unit, `us` to
/// `d`; any count, not only the largest unit's), if it names one.
pub(crate) fn read_window(text: &str) -> Option<Duration> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (count, unit) = text.split_at(digits);
    let count: u64 = count.parse().ok()?;
    let size = match unit {
        "us" => 1,
        unit => WINDOW_UNITS.iter().find(|(name, _)| *name == unit)?.1,
    };
    count.checked_mul(size).map(Duration::from_micros)
}

/// [`window`]'s label, written at the end of `out` (a key being built: no `String` of its
/// own).
pub(crate) fn write_window(out: &mut String, period: Duration) {
    use std::fmt::Write as _;
    let micros = period.as_micros();
    let (count, unit) = WINDOW_UNITS
        .iter()
        .find(|(_, size)| micros.is_multiple_of(u128::from(*size)))
        .map_or((micros, "us"), |(unit, size)| {
            (micros / u128::from(*size), *unit)
        });
    // Writing to a String cannot fail.
    let _ = write!(out, "{count}{unit}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(threshold: u64, secs: u64) -> Rate {
        Rate::new(threshold, Duration::from_secs(secs)).unwrap()
    }

    #[test]
    fn windows_read_back_as_written() {
        for micros in [
            1,
            999,
            1_000,
            1_500_000,
            60_000_000,
            5_400_000_000,
            86_400_000_000,
        ] {
            let period = Duration::from_micros(micros);
            let mut written = String::new();
            write_window(&mut written, period);
            assert_eq!(read_window(&written), Some(period), "{written}");
        }
        assert_eq!(read_window("90s"), Some(Duration::from_secs(90)));
        for bad in ["", "s", "10", "10y", "1.5s", "-1s", "99999999999999999999d"] {
            assert_eq!(read_window(bad), None, "{bad}");
        }
    }

    #[test]
    fn windows_are_labelled_in_their_largest_unit() {
        assert_eq!(window(Duration::from_secs(86_400)), "1d");
        assert_eq!(window(Duration::from_secs(7_200)), "2h");
        assert_eq!(window(Duration::from_secs(60)), "1m");
        assert_eq!(window(Duration::from_secs(90)), "90s");
        assert_eq!(window(Duration::from_millis(1_500)), "1500ms");
        assert_eq!(window(Duration::from_micros(2_500)), "2500us");
    }

    #[test]
    fn the_deciding_limit_and_unique_labels() {
        let denied = Decisions::new([
            (
                None,
                rate(5, 1),
                Decision::denied(5, Duration::from_millis(300), Duration::ZERO),
            ),
            (None, rate(9, 1), Decision::admitted(9, 4, Duration::ZERO)),
            (
                Some("slow".into()),
                rate(2, 60),
                Decision::denied(2, Duration::from_secs(7), Duration::ZERO),
            ),
        ]);
        assert!(!denied.allowed);
        assert_eq!(denied.deciding().label(), "slow");
        assert_eq!(denied.retry_after, Some(Duration::from_secs(7)));
        let labels: Vec<_> = denied.iter().map(LimitDecision::label).collect();
        assert_eq!(labels, ["1s", "1s-2", "slow"]);

        let admitted = Decisions::new([
            (None, rate(5, 1), Decision::admitted(5, 3, Duration::ZERO)),
            (
                None,
                rate(100, 86_400),
                Decision::admitted(100, 1, Duration::ZERO),
            ),
        ]);
        assert!(admitted.allowed);
        assert_eq!(admitted.deciding().label(), "1d");
        assert_eq!(admitted.remaining, 1);
        assert_eq!(admitted.len(), 2);
    }
}
