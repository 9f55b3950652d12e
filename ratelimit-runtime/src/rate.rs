//! [`Rate`]: how many admissions one key may have within a sliding window.

use std::fmt;
use std::time::Duration;

/// A rate limit: at most `threshold` admissions of a key within any window of length `period`.
///
/// A call at time `now` is admitted iff fewer than `threshold` admitted calls of the same key
/// happened in the half-open window `(now - period, now]`; an admission at `t` stops counting at
/// exactly `t + period` (see [`Limiter`](crate::Limiter) for the algorithm).
///
/// Invalid rates are unrepresentable: the threshold is in `1..=2^32 - 1` admissions and the period
/// is a whole number of microseconds in `1 ms..=100 years` (100 Julian years, so that a Redis
/// score, microseconds since the Unix epoch, plus a period stays an exact integer in a `f64`).
// `Rate::new` is written in `error.rs`: its error, a `RateLimitError`, carries a `Rate` (a
// denial's), so `error.rs` sits above this file, and only there may both be named.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    threshold: u32,
    period_us: u64,
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
            period_us,
        })
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

impl fmt::Debug for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rate({} per {:?})", self.threshold, self.period())
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} per {:?}", self.threshold, self.period())
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
