//! Wall-clock time as the stores count it: integer microseconds since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::RateLimitError;
use crate::rate::Rate;

/// The latest time a check accepts: a score plus the longest period must stay below 2^53, the
/// largest integer a Redis score (a `f64`) holds exactly. About the year 2155.
pub(crate) const MAX_TIME_US: u64 = (1 << 53) - Rate::MAX_PERIOD.as_micros() as u64;

/// `at` as microseconds since the Unix epoch, truncated.
///
/// # Errors
///
/// [`RateLimitError::InvalidInput`] for a time before 1970 or after [`MAX_TIME_US`].
pub(crate) fn micros_since_epoch(at: SystemTime) -> Result<u64, RateLimitError> {
    let since = at
        .duration_since(UNIX_EPOCH)
        .map_err(|_| RateLimitError::InvalidInput("time is before the Unix epoch".into()))?;
    match u64::try_from(since.as_micros()) {
        Ok(us) if us <= MAX_TIME_US => Ok(us),
        _ => Err(RateLimitError::InvalidInput(
            "time is after the year 2155, beyond what a Redis score holds exactly".into(),
        )),
    }
}

/// `at` as microseconds since the Unix epoch, truncated, and clamped to `0..=MAX_TIME_US`
/// (an expiry that cannot be a check's time: before 1970 it has passed, after 2155 it never
/// comes).
pub(crate) fn micros_saturating(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |since| {
        since.as_micros().min(u128::from(MAX_TIME_US)) as u64
    })
}

/// The wall clock now, in microseconds since the Unix epoch (0 if the clock reads before 1970).
///
/// Read from the CPU's time-stamp counter (`quanta`, a few nanoseconds) and anchored to the
/// system clock, per thread, every 10 ms: the system clock itself (`clock_gettime`)
/// cost as much as the rest of an in-process check. Between anchors the reading drifts from
/// the system clock by the counter's calibration error (parts per million: well under 1 µs in
/// 10 ms); a re-anchoring may step it back by as much, which the stores already allow
/// (admissions later than now count as in the window). The first reading in a process
/// calibrates the counter against the OS clock (0.5 ms, at most 200 ms, once; governor pays
/// the same); where the counter is unusable, `quanta` reads the OS clock instead.
pub(crate) fn now_us() -> u64 {
    let counter = COUNTER.get_or_init(quanta::Clock::new);
    let now = counter.raw();
    let (wall, at) = ANCHOR.get();
    // 0 when the counter reads earlier than the anchor (another core's counter, slightly
    // behind): the time then stays at the anchor rather than stepping back.
    let elapsed_ns = counter.delta_as_nanos(at, now);
    if wall != 0 && elapsed_ns < REANCHOR_NS {
        return wall + elapsed_ns / 1_000;
    }
    let wall = system_now_us();
    ANCHOR.set((wall, now));
    wall
}

/// How long (ns) a thread's reading of the counter stays anchored to one reading of the
/// system clock.
const REANCHOR_NS: u64 = 10_000_000;

/// The counter, calibrated against the OS clock on first use.
static COUNTER: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();

thread_local! {
    /// The system clock (µs since the epoch; 0: not read yet) and the counter's raw reading
    /// at that moment.
    static ANCHOR: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The system clock now, in microseconds since the Unix epoch (0 if it reads before 1970).
fn system_now_us() -> u64 {
    micros_since_epoch(SystemTime::now()).unwrap_or_else(|_| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros().min(u128::from(MAX_TIME_US)) as u64)
    })
}

/// `us` microseconds after the epoch, as a `SystemTime`.
#[cfg(test)]
pub(crate) fn at_micros(us: u64) -> SystemTime {
    UNIX_EPOCH + std::time::Duration::from_micros(us)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn converts_and_bounds_times() {
        assert_eq!(micros_since_epoch(at_micros(1_234_567)).unwrap(), 1_234_567);
        assert!(micros_since_epoch(UNIX_EPOCH - Duration::from_secs(1)).is_err());
        assert!(micros_since_epoch(at_micros(MAX_TIME_US)).is_ok());
        assert!(micros_since_epoch(at_micros(MAX_TIME_US + 1)).is_err());
        assert!(now_us() > 1_700_000_000_000_000);
    }

    /// The counter-based clock stays within a millisecond of the system clock.
    #[test]
    fn now_follows_the_system_clock() {
        for _ in 0..3 {
            let before = system_now_us();
            let now = now_us();
            let after = system_now_us();
            assert!(
                now + 1_000 >= before && now <= after + 1_000,
                "{before} {now} {after}"
            );
            std::thread::sleep(std::time::Duration::from_millis(7));
        }
    }
}
