//! [`Rate`]: how many admissions one key may have within a sliding window, and the
//! [`Algorithm`] that counts them.

use std::fmt;
use std::time::Duration;

/// A rate limit: at most `threshold` admissions of a key within any window of length `period`.
///
/// A call at time `now` is admitted iff fewer than `threshold` admitted calls of the same key
/// happened in the half-open window `(now - period, now]`; an admission at `t` stops counting at
/// exactly `t + period` (see [`Limiter`](crate::Limiter) for the algorithm).
///
/// That is the rule of the default algorithm, the exact [sliding window
/// log](Algorithm::SlidingWindowLog); [`with_algorithm`](Rate::with_algorithm) chooses the
/// [sliding window counter](Algorithm::SlidingWindowCounter), which keeps two counts per key
/// instead of one entry per admission and bounds a rolling window by `2 * threshold - 1`.
///
/// Invalid rates are unrepresentable: the threshold is in `1..=2^32 - 1` admissions and the period
/// is a whole number of microseconds in `1 ms..=100 years` (100 Julian years, so that a Redis
/// score, microseconds since the Unix epoch, plus a period stays an exact integer in a `f64`).
// `Rate::new` is written in `error.rs`: its error, a `RateLimitError`, carries a `Rate` (a
// denial's), so `error.rs` sits above this file, and only there may both be named.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    threshold: u32,
    algorithm: Algorithm,
    leased: bool,
    /// A concurrency limit's rate ([`Concurrency`](crate::Concurrency)): `threshold` slots, each
    /// held for `period` unless renewed (a sliding window log whose admissions are renewed
    /// while their calls run and refunded when they end).
    slots: bool,
    period_us: u64,
}

/// How a [`Rate`] counts a key's admissions. Both admit a call only when its cost fits the
/// threshold, record nothing for a denied call, and answer with an exact retry-after (for
/// the counter: exact for its estimate); they differ in memory and in what a window may hold.
///
/// | | sliding window log | sliding window counter |
/// | --- | --- | --- |
/// | state per key | one entry per admission in the window (a sorted set member in Redis) | two counts and a window index (one small hash in Redis) |
/// | cost of a call | `O(cost)`, at most [`Limit::MAX_COST`](crate::Limit::MAX_COST) | `O(1)`, up to the threshold |
/// | any rolling window of length `period` | at most `threshold` | at most `threshold + ⌊threshold · f⌋ ≤ 2 · threshold − 1` |
/// | any fixed window (aligned to multiples of `period` since the Unix epoch) | at most `threshold` | at most `threshold` |
///
/// (`f` is the fraction of its fixed window at which the rolling window ends; the counter's
/// bounds hold for checks in time order.) The two keep their state under different keys:
/// changing a limit's algorithm starts it afresh; so does changing a counter's period, each
/// period of a key being a counter of its own.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Algorithm {
    /// The exact sliding window log (the default): a call at `now` is admitted iff the
    /// admissions recorded in `(now − period, now]` plus its cost stay within the threshold.
    /// Every admission is an entry of its own, kept until it leaves the window.
    #[default]
    SlidingWindowLog,
    /// The sliding window counter: two fixed windows of length `period` per key, aligned to
    /// multiples of `period` since the Unix epoch, counting the admissions of the current
    /// one (`cur`) and of the one before (`prev`). At `e` microseconds into the current window
    /// (`P` the period in microseconds, `T` the threshold), a call of cost `c` is admitted iff
    /// `prev · (P − e) + (cur + c) · P ≤ T · P`, in exact integers: the previous window's
    /// count weighted by the part of it the rolling window still covers, as if its admissions
    /// were spread evenly. Constant memory whatever the threshold and cost; a rolling window
    /// holds at most `2 · T − 1` (see the table above).
    ///
    /// The design is Cloudflare's ("How we built rate limiting capable of scaling to
    /// millions of domains", 2017) and the `limits` library's sliding window counter; the
    /// bound is proven in `ratelimit-runtime/src/store/counter.rs`.
    SlidingWindowCounter,
}

impl Algorithm {
    /// The algorithm's name as the attribute spells it: `sliding_window_log` or
    /// `sliding_window_counter`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::SlidingWindowLog => "sliding_window_log",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
        }
    }
}

impl fmt::Display for Algorithm {
    /// `sliding window log` or `sliding window counter`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Algorithm::SlidingWindowLog => "sliding window log",
            Algorithm::SlidingWindowCounter => "sliding window counter",
        })
    }
}

impl Rate {
    /// The largest threshold, `2^32 - 1` admissions per period.
    pub const MAX_THRESHOLD: u64 = u32::MAX as u64;
    /// The shortest period, one millisecond.
    pub const MIN_PERIOD: Duration = Duration::from_millis(1);
    /// The longest period, 100 Julian years (3,155,760,000 s).
    pub const MAX_PERIOD: Duration = Duration::from_secs(3_155_760_000);

    /// `threshold` admissions per `period`; the `const` form of [`Rate::new`], usable in a `const`
    /// item (an invalid rate there is a compile error).
    ///
    /// # Panics
    ///
    /// When [`Rate::new`] would return an error; in a `const` context that panic is reported at
    /// compile time.
    #[must_use]
    pub const fn new_const(threshold: u64, period: Duration) -> Rate {
        match Rate::checked(threshold, period) {
            Ok(rate) => rate,
            Err(reason) => panic!("{}", reason),
        }
    }

    /// `threshold` admissions per `period`, or why they are not a rate.
    pub(crate) const fn checked(threshold: u64, period: Duration) -> Result<Rate, &'static str> {
        if threshold == 0 {
            return Err("rate threshold must be at least 1");
        }
        if threshold > Rate::MAX_THRESHOLD {
            return Err("rate threshold must be at most 4294967295 (2^32 - 1)");
        }
        if period.as_nanos() < Rate::MIN_PERIOD.as_nanos() {
            return Err("rate period must be at least 1 ms");
        }
        if period.as_nanos() > Rate::MAX_PERIOD.as_nanos() {
            return Err("rate period must be at most 100 years");
        }
        if !period.subsec_nanos().is_multiple_of(1_000) {
            return Err("rate period must be a whole number of microseconds");
        }
        // Bounded by MAX_PERIOD above, so this fits a u64 (about 3.2e15 µs).
        let period_us = period.as_micros() as u64;
        Ok(Rate {
            threshold: threshold as u32,
            algorithm: Algorithm::SlidingWindowLog,
            leased: false,
            slots: false,
            period_us,
        })
    }

    /// The rate of a concurrency limit of `max` calls in flight whose slots last
    /// `slot_time_us` unless renewed (both already checked by [`Concurrency`](crate::Concurrency)).
    pub(crate) const fn of_slots(max: u32, slot_time_us: u64) -> Rate {
        Rate {
            threshold: max,
            algorithm: Algorithm::SlidingWindowLog,
            leased: false,
            slots: true,
            period_us: slot_time_us,
        }
    }

    /// Whether this is a concurrency limit's rate: its admissions are slots, held while their
    /// calls run (see [`Concurrency`](crate::Concurrency)).
    #[must_use]
    pub const fn is_concurrency(&self) -> bool {
        self.slots
    }

    /// The rate as the in-process store keeps it: a concurrency limit's slots never expire
    /// there (a process that dies takes its store along), so they last until released.
    pub(crate) const fn in_process(self) -> Rate {
        if self.slots {
            Rate {
                period_us: Rate::MAX_PERIOD.as_micros() as u64,
                ..self
            }
        } else {
            self
        }
    }

    /// The same rate counted by `algorithm` (a rate starts as a
    /// [sliding window log](Algorithm::SlidingWindowLog)). Usable in a `const` item.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ratelimit_runtime::{Algorithm, Rate};
    ///
    /// const HOURLY: Rate = Rate::new_const(100_000, Duration::from_secs(3_600))
    ///     .with_algorithm(Algorithm::SlidingWindowCounter);
    /// assert_eq!(HOURLY.algorithm(), Algorithm::SlidingWindowCounter);
    /// assert_eq!(HOURLY.to_string(), "100000 per 3600s (sliding window counter)");
    /// ```
    #[must_use]
    pub const fn with_algorithm(self, algorithm: Algorithm) -> Rate {
        Rate { algorithm, ..self }
    }

    /// The algorithm that counts the rate's admissions.
    #[must_use]
    pub const fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The same rate checked through quota leases on a remote store: a process reserves
    /// admissions of the key in one round trip and spends them without one, never admitting
    /// more than the threshold in any window. The [lease guide](crate::guide::leases) tells
    /// when it pays, what it trades, and which checks go through a lease (the others, and
    /// every check in process, are checked as without it). Usable in a `const` item.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ratelimit_runtime::Rate;
    ///
    /// const TENANT: Rate = Rate::new_const(50_000, Duration::from_secs(1)).leased();
    /// assert!(TENANT.is_leased());
    /// ```
    #[must_use]
    pub const fn leased(self) -> Rate {
        Rate {
            // A concurrency limit's slots are held by calls, never reserved ahead.
            leased: !self.slots,
            ..self
        }
    }

    /// Whether checks of the rate go through quota leases ([`leased`](Rate::leased)).
    #[must_use]
    pub const fn is_leased(&self) -> bool {
        self.leased
    }

    /// `true` for a [sliding window counter](Algorithm::SlidingWindowCounter).
    pub(crate) const fn is_counter(&self) -> bool {
        matches!(self.algorithm, Algorithm::SlidingWindowCounter)
    }

    /// How many admissions the window holds at most (`1..=2^32 - 1`).
    #[must_use]
    pub const fn threshold(&self) -> u64 {
        self.threshold as u64
    }

    /// The window's length (`1 ms..=100 years`, whole microseconds).
    #[must_use]
    pub const fn period(&self) -> Duration {
        Duration::from_micros(self.period_us)
    }

    /// The window's length in microseconds, the unit of the stores' timestamps.
    pub(crate) const fn period_us(&self) -> u64 {
        self.period_us
    }
}

/// `Rate(2 per 30s)`; a counter's says so: `Rate(2 per 30s, sliding window counter)`, and a
/// leased one `Rate(2 per 30s, leased)`; a concurrency limit's `Rate(4 in flight, slot time
/// 30s)`.
impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.slots {
            return write!(
                f,
                "Rate({} in flight, slot time {:?})",
                self.threshold,
                self.period()
            );
        }
        write!(f, "Rate({} per {:?}", self.threshold, self.period())?;
        if self.is_counter() {
            write!(f, ", {}", self.algorithm)?;
        }
        if self.leased {
            f.write_str(", leased")?;
        }
        f.write_str(")")
    }
}

/// `2 per 30s`; a counter's says so: `2 per 30s (sliding window counter)`; a concurrency
/// limit's is `4 in flight`.
impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.slots {
            return write!(f, "{} in flight", self.threshold);
        }
        write!(f, "{} per {:?}", self.threshold, self.period())?;
        if self.is_counter() {
            write!(f, " ({})", self.algorithm)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::RateLimitError;

    #[test]
    fn accepts_the_bounds() {
        let low = Rate::new(1, Rate::MIN_PERIOD).unwrap();
        assert_eq!(
            (low.threshold(), low.period()),
            (1, Duration::from_millis(1))
        );
        let high = Rate::new(Rate::MAX_THRESHOLD, Rate::MAX_PERIOD).unwrap();
        assert_eq!(high.threshold(), 4_294_967_295);
        assert_eq!(high.period(), Rate::MAX_PERIOD);
    }

    #[test]
    fn rejects_out_of_range_rates() {
        let cases = [
            (0, Duration::from_secs(1), "at least 1"),
            (1 << 32, Duration::from_secs(1), "at most 4294967295"),
            (u64::MAX, Duration::from_secs(1), "at most 4294967295"),
            (1, Duration::from_micros(999), "at least 1 ms"),
            (1, Duration::ZERO, "at least 1 ms"),
            (
                1,
                Rate::MAX_PERIOD + Duration::from_micros(1),
                "at most 100 years",
            ),
            (1, Duration::MAX, "at most 100 years"),
            (1, Duration::new(1, 1), "whole number of microseconds"),
        ];
        for (threshold, period, needle) in cases {
            let err = Rate::new(threshold, period).unwrap_err();
            assert!(
                matches!(err, RateLimitError::InvalidInput(_)),
                "{threshold} per {period:?}: {err:?}"
            );
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn const_constructor_matches_new() {
        const RATE: Rate = Rate::new_const(2, Duration::from_secs(30));
        assert_eq!(RATE, Rate::new(2, Duration::from_secs(30)).unwrap());
        assert_eq!(RATE.to_string(), "2 per 30s");
    }
}
