//! The sliding window counter's arithmetic, in exact integers: a key's two fixed windows seen
//! at one time ([`Window`]), whether a call fits, and the answers. The in-process store keeps
//! [`Counts`] per key and calls this; `counter.lua` is the same arithmetic for Redis, where
//! numbers are doubles, in integer halves.
//!
//! # The algorithm
//!
//! Time is cut into fixed windows of length `P` (the period, in µs), aligned to multiples of
//! `P` since the Unix epoch: window `k` is `[k·P, (k+1)·P)`. A key keeps the index of its
//! current window, that window's admissions (`cur`) and the previous window's (`prev`). At
//! `now = k·P + e`, a call of cost `c` is admitted iff
//!
//! ```text
//! prev · (P − e) + (cur + c) · P ≤ T · P
//! ```
//!
//! the previous window's count weighted by the share of it that the rolling window
//! `(now − P, now]` still covers, as if its admissions were spread evenly (Cloudflare, "How we
//! built rate limiting capable of scaling to millions of domains", 2017). Both sides are
//! integers below 2^85: here `u128`, in Lua pairs of halves. Admitted, it adds `c` to `cur`;
//! denied, nothing is written.
//!
//! # The bound
//!
//! A fixed window never holds more than `T`: every admission checks `cur + c ≤ T` (the
//! weighted term is never negative). A rolling window `(t − P, t]` ending at `t = k·P + e`,
//! at fraction `f = e / P` of window `k`, holds the admissions of window `k − 1` made after
//! `(k − 1)·P + e`, `b` of them, and those of window `k` up to `t`, `n` of them. Say window
//! `k − 1` holds `a + b` in all. The last admission of window `k` was checked at some
//! `e' ≤ e`, so `(a + b) · (P − e') + n · P ≤ T · P`, and `n ≤ T − (a + b)(1 − f)`. Then
//! `b + n ≤ T + b·f − a·(1 − f) ≤ T + T·f`, and, being an integer, `≤ T + ⌊T·f⌋ ≤ 2T − 1`.
//! `T` admissions in the last microsecond of a window, then `⌊T·f⌋` at `f` close to 1, reach
//! it.
//!
//! # Times before the key's window
//!
//! A check at a time earlier than the key's current window (explicit times out of order, a
//! server clock stepped back) is seen as at the start of that window, with both counts at full
//! weight (the most the estimate can be), and admitted into `prev` (the window before): the
//! fixed windows' bound holds for the window the call belongs to when it is the previous one.
//! A call older than that is counted in the window before the key's, which it over-counts,
//! and is not checked against its own window, which can then hold more than `T`: the bounds
//! above are for checks in time order.

use crate::rate::Rate;

/// What a key keeps: its current window's index (`now / P`), and the admissions of that
/// window and of the one before.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) index: u64,
    pub(crate) prev: u64,
    pub(crate) cur: u64,
}

/// A key's windows seen at one time: its counts rolled forward to the time's window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    period: u64,
    threshold: u64,
    counts: Counts,
    /// µs into the current window (0 for a time before it: see [the module](self)).
    elapsed: u64,
    /// µs from the time to the current window's start: 0 unless the time is before it.
    ahead: u64,
}

impl Window {
    /// `stored` (a key's counts kept for `rate`'s period; `None`: none, or kept for another
    /// period, which starts afresh) seen at `now` (µs since the Unix epoch).
    pub(crate) fn at(stored: Option<Counts>, rate: Rate, now: u64) -> Window {
        let period = rate.period_us();
        // The usual case, a time in the key's current window, without a division.
        if let Some(counts) = stored
            && let Some(start) = counts.index.checked_mul(period)
            && now >= start
            && now - start < period
        {
            return Window {
                period,
                threshold: rate.threshold(),
                counts,
                elapsed: now - start,
                ahead: 0,
            };
        }
        let index = now / period;
        let start = index * period;
        let counts = match stored {
            None => Counts {
                index,
                prev: 0,
                cur: 0,
            },
            Some(counts) if counts.index == index => counts,
            Some(counts) if counts.index + 1 == index => Counts {
                index,
                prev: counts.cur,
                cur: 0,
            },
            Some(counts) if counts.index < index => Counts {
                index,
                prev: 0,
                cur: 0,
            },
            Some(later) => {
                return Window {
                    period,
                    threshold: rate.threshold(),
                    counts: later,
                    elapsed: 0,
                    ahead: later.index * period - now,
                };
            }
        };
        Window {
            period,
            threshold: rate.threshold(),
            counts,
            elapsed: now - start,
            ahead: 0,
        }
    }

    /// Whether a call of `cost` fits: `prev · (P − e) + (cur + cost) · P ≤ T · P`.
    pub(crate) fn fits(&self, cost: u64) -> bool {
        fits(
            self.counts.prev,
            self.counts.cur + cost,
            self.period - self.elapsed,
            self.threshold,
            self.period,
        )
    }

    /// The largest cost that fits now (0 when none does): `⌊T − cur − prev · (P − e) / P⌋`.
    pub(crate) fn remaining(&self) -> u64 {
        let Counts { prev, cur, .. } = self.counts;
        if prev == 0 {
            return self.threshold.saturating_sub(cur);
        }
        let period = u128::from(self.period);
        let used =
            u128::from(prev) * u128::from(self.period - self.elapsed) + u128::from(cur) * period;
        let room = (u128::from(self.threshold) * period).saturating_sub(used);
        // At most T (a u64).
        divide(room, self.period) as u64
    }

    /// µs until a call of `cost` (at most the threshold) fits, if no other call is admitted
    /// before: 0 when it fits now. Exact for the estimate: the call fits at that time, and
    /// not a microsecond before.
    pub(crate) fn retry_after(&self, cost: u64) -> u64 {
        if self.fits(cost) {
            return 0;
        }
        self.retry_after_denied(cost)
    }

    /// [`retry_after`](Window::retry_after) of a call known not to fit now.
    pub(crate) fn retry_after_denied(&self, cost: u64) -> u64 {
        let Counts { prev, cur, .. } = self.counts;
        let period = self.period;
        if cur + cost <= self.threshold {
            // Within this window, once the previous one's weight has fallen far enough.
            let first = first_fit(prev, self.threshold - cur - cost, period);
            return self.ahead + first - self.elapsed;
        }
        // In the next window, where this one is the previous (cost ≤ T, so cur > 0 here).
        let first = first_fit(cur, self.threshold.saturating_sub(cost), period);
        self.ahead + (period - self.elapsed) + first
    }

    /// µs until the estimate falls to zero: the end of the next window while the current one
    /// holds admissions, else the end of this one while the previous one does, else 0.
    pub(crate) fn reset_after(&self) -> u64 {
        let left = self.period - self.elapsed;
        if self.counts.cur > 0 {
            self.ahead + left + self.period
        } else if self.counts.prev > 0 {
            self.ahead + left
        } else {
            0
        }
    }

    /// Records a call of `cost`: in the current window, or in the previous one for a time
    /// before the current window.
    pub(crate) fn admit(&mut self, cost: u64) {
        if self.ahead > 0 {
            self.counts.prev += cost;
        } else {
            self.counts.cur += cost;
        }
    }

    /// The counts to keep.
    pub(crate) fn counts(&self) -> Counts {
        self.counts
    }

    /// The time (µs, on the checks' clock) at which these counts stop mattering: the end of
    /// the window after the current one.
    pub(crate) fn expires_at(&self) -> u64 {
        (self.counts.index + 2).saturating_mul(self.period)
    }
}

/// `counts` (kept for `rate`'s period) without a call of `cost` checked at `at`: taken from
/// the fixed window the call was counted in while that window is the current or the previous
/// one, else nothing (it no longer counts).
pub(crate) fn refund(counts: Counts, rate: Rate, at: u64, cost: u64) -> Counts {
    let index = at / rate.period_us();
    let mut counts = counts;
    if index == counts.index {
        counts.cur = counts.cur.saturating_sub(cost);
    } else if index + 1 == counts.index {
        counts.prev = counts.prev.saturating_sub(cost);
    }
    counts
}

/// `prev · weight + used · P ≤ T · P`, exactly.
#[inline]
fn fits(prev: u64, used: u64, weight: u64, threshold: u64, period: u64) -> bool {
    // Without a multiplication in the usual cases: a full window, an empty previous one.
    if used > threshold {
        return false;
    }
    if prev == 0 || weight == 0 {
        return true;
    }
    let period = u128::from(period);
    u128::from(prev) * u128::from(weight) + u128::from(used) * period
        <= u128::from(threshold) * period
}

/// The first `e` in `0..=P` with `prev · (P − e) ≤ room · P`: `P − ⌊room · P / prev⌋`, or 0.
fn first_fit(prev: u64, room: u64, period: u64) -> u64 {
    if prev == 0 {
        return 0;
    }
    let covered = divide(u128::from(room) * u128::from(period), prev);
    // `covered` ≥ P means the call fits at once; below P it is a u64.
    period.saturating_sub(u64::try_from(covered).unwrap_or(u64::MAX))
}

/// `n / d`, by a 64-bit division when `n` fits one (the usual case: a 128-bit division is a
/// call of its own, several times slower).
fn divide(n: u128, d: u64) -> u128 {
    match u64::try_from(n) {
        Ok(n) => u128::from(n / d),
        Err(_) => n / u128::from(d),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn rate(threshold: u64, period_us: u64) -> Rate {
        Rate::new(threshold, Duration::from_micros(period_us)).unwrap()
    }

    /// The smallest `d` with a call of `cost` fitting at `now + d`, by trying each: the
    /// reference for `retry_after`.
    fn first_fitting(counts: Counts, rate: Rate, now: u64, cost: u64) -> u64 {
        (0..=3 * rate.period_us())
            .find(|&d| Window::at(Some(counts), rate, now + d).fits(cost))
            .expect("within three windows")
    }

    #[test]
    fn weighs_the_previous_window_by_what_the_rolling_window_still_covers() {
        // 10 per 1,000 µs; 8 in the previous window, 2 in this one.
        let r = rate(10, 1_000);
        let counts = Counts {
            index: 5,
            prev: 8,
            cur: 2,
        };
        // At 250 µs in: 8 · 0.75 + 2 = 8 → 2 more fit, not 3.
        let window = Window::at(Some(counts), r, 5_250);
        assert_eq!(window.remaining(), 2);
        assert!(window.fits(2) && !window.fits(3));
        // 3 fit once 8 · (1 − e) ≤ 5: e ≥ 375 µs.
        assert_eq!(window.retry_after(3), 125);
        assert!(!Window::at(Some(counts), r, 5_374).fits(3));
        assert!(Window::at(Some(counts), r, 5_375).fits(3));
        assert_eq!(window.reset_after(), 750 + 1_000);
    }

    #[test]
    fn retry_after_is_the_first_time_the_call_fits() {
        let r = rate(7, 1_000);
        for prev in [0, 1, 3, 7, 9] {
            for cur in 0..=7 {
                for cost in 1..=7 {
                    for now in [4_000, 4_001, 4_333, 4_999] {
                        let counts = Counts {
                            index: 4,
                            prev,
                            cur,
                        };
                        let window = Window::at(Some(counts), r, now);
                        assert_eq!(
                            window.retry_after(cost),
                            first_fitting(counts, r, now, cost),
                            "prev {prev} cur {cur} cost {cost} at {now}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn windows_roll_forward_and_start_afresh_after_a_gap() {
        let r = rate(3, 1_000);
        let counts = Counts {
            index: 2,
            prev: 1,
            cur: 3,
        };
        let next = Window::at(Some(counts), r, 3_100).counts();
        assert_eq!((next.index, next.prev, next.cur), (3, 3, 0));
        let later = Window::at(Some(counts), r, 4_000).counts();
        assert_eq!((later.index, later.prev, later.cur), (4, 0, 0));
    }

    #[test]
    fn a_time_before_the_window_counts_everything_and_records_in_the_previous_one() {
        let r = rate(3, 1_000);
        let counts = Counts {
            index: 2,
            prev: 1,
            cur: 1,
        };
        let mut early = Window::at(Some(counts), r, 1_500);
        assert_eq!(early.remaining(), 1);
        assert!(early.fits(1) && !early.fits(2));
        assert_eq!(
            early.retry_after(2),
            500 + first_fitting(counts, r, 2_000, 2)
        );
        early.admit(1);
        assert_eq!(
            early.counts(),
            Counts {
                index: 2,
                prev: 2,
                cur: 1
            }
        );
        // Refunded from the window it was counted in.
        assert_eq!(refund(early.counts(), r, 1_500, 1), counts);
    }

    #[test]
    fn refunds_reach_the_current_and_previous_windows_only() {
        let r = rate(5, 1_000);
        let counts = Counts {
            index: 7,
            prev: 4,
            cur: 2,
        };
        assert_eq!(refund(counts, r, 7_500, 1).cur, 1);
        assert_eq!(refund(counts, r, 6_500, 3).prev, 1);
        assert_eq!(refund(counts, r, 5_500, 1), counts);
        assert_eq!(refund(counts, r, 7_500, 9).cur, 0);
    }

    #[test]
    fn extreme_rates_stay_exact() {
        // T = 2^32 − 1 over 100 years: T · P is about 1.4e25, far past a double's 2^53.
        let r = rate(Rate::MAX_THRESHOLD, Rate::MAX_PERIOD.as_micros() as u64);
        let period = r.period_us();
        let t = r.threshold();
        let counts = Counts {
            index: 1,
            prev: t,
            cur: 0,
        };
        // A microsecond into the window, the estimate is T − T / P, which rounding in
        // doubles would make T; exactly, a unit fits once T · e ≥ P: at e = ⌈P / T⌉.
        let window = Window::at(Some(counts), r, period + 1);
        assert_eq!(window.remaining(), 0);
        let first = period.div_ceil(t);
        assert_eq!(window.retry_after(1), first - 1);
        assert!(Window::at(Some(counts), r, period + first).fits(1));
        assert!(!Window::at(Some(counts), r, period + first - 1).fits(1));
        assert_eq!(Window::at(Some(counts), r, period + first).remaining(), 1);
        // Just over half the threshold fits once just over half the window has passed.
        for cost in [t / 2, t / 2 + 1, t - 1, t] {
            let wait = Window::at(Some(counts), r, period).retry_after(cost);
            assert!(
                Window::at(Some(counts), r, period + wait).fits(cost),
                "{cost}"
            );
            assert!(
                !Window::at(Some(counts), r, period + wait - 1).fits(cost),
                "{cost}"
            );
        }
        // A full previous window and a full current one: the cost of T fits two windows on.
        let full = Counts {
            index: 1,
            prev: t,
            cur: t,
        };
        assert_eq!(Window::at(Some(full), r, period).retry_after(t), 2 * period);
    }
}
