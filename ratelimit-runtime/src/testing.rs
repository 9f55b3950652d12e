//! Testing code that is rate limited: [`ManualClock`], a clock that moves only when a test
//! moves it, so that a window of 30 s passes in microseconds of real time.
//!
//! ```
//! use std::sync::LazyLock;
//! use std::time::{Duration, SystemTime};
//! use ratelimit_runtime::testing::ManualClock;
//! use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};
//!
//! static CLOCK: LazyLock<ManualClock> = LazyLock::new(|| {
//!     ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
//! });
//! static LIMITER: LazyLock<Limiter> = LazyLock::new(|| {
//!     Limiter::builder().clock(CLOCK.clone()).build().expect("an in-process limiter")
//! });
//!
//! #[rate_limit(period = 30, threshold = 2, limiter = &LIMITER)]
//! async fn say_hi() -> Result<&'static str, RateLimitError> {
//!     Ok("hi")
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! assert!(say_hi().await.is_ok());
//! assert!(say_hi().await.is_ok());
//! let denied = say_hi().await.unwrap_err();
//! assert_eq!(denied.retry_after(), Some(Duration::from_secs(30)));
//! CLOCK.advance(Duration::from_secs(30));
//! assert!(say_hi().await.is_ok());
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::clock;

/// A clock for tests: it reads a time that moves only through [`advance`](ManualClock::advance)
/// and [`set`](ManualClock::set), and its clones share that time. A limiter on it
/// ([`LimiterBuilder::clock`](crate::LimiterBuilder::clock)) checks every call at the clock's
/// time, as [`Limiter::check_at`](crate::Limiter::check_at) would, so windows pass when the
/// test says so: no sleeping, no flaky timing. The time has microsecond resolution (what the
/// stores count).
///
/// Only the checks' time is the clock's, read when a check is first polled (a check made
/// before an [`advance`](ManualClock::advance) and awaited after it is at the later time).
/// Real time still rules:
///
/// - timeouts, circuit breakers and their probes (a test of a Redis outage still waits for
///   them: the breaker closes once a probe, started by a check and repeated in the background,
///   is answered);
/// - on Redis, the keys' expiry: a key lives its remaining window on the manual clock, but
///   counted on the server's real clock, and at least 1 s. A test that lets more real time
///   pass between two checks of one window than that window's length (a 1 s burst limit
///   across a wait for a breaker) finds the log gone: prefer the in-process limiter there,
///   or longer windows;
/// - in process, the sweeps that drop idle keys and make room under
///   [`max_keys`](crate::LimiterBuilder::max_keys): a key is dropped once its window has
///   passed on the manual clock and a period of real time since its last admission, so
///   advancing the clock does not free room under a cap.
///
/// A Redis limiter on a manual clock sends the clock's time with each check instead of
/// reading the server's `TIME`, and needs a key prefix of its own (a log shared with limiters
/// on the server's clock would mix two clocks). `cargo test` runs tests on parallel threads:
/// give each test its own clock and limiter, or, for a `static` limiter, keys of its own. On
/// Redis the logs also outlive the test (each expires after its window, counted in real
/// time), so a rerun within the window finds the last run's admissions: give each run a
/// prefix of its own (with the time or a random number in it), or
/// [`reset`](crate::Limiter::reset) the test's keys first.
///
/// Modeled on governor's `FakeRelativeClock`. There is no public clock trait: a clock per
/// application server is the bug a shared Redis clock exists to avoid.
#[derive(Clone)]
pub struct ManualClock {
    /// Microseconds since the Unix epoch.
    now_us: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start`.
    ///
    /// # Panics
    ///
    /// When `start` is before 1970 or after the year 2155 (the times a check accepts): a
    /// test's own mistake, reported where it is made.
    #[must_use]
    pub fn new(start: SystemTime) -> ManualClock {
        ManualClock {
            now_us: Arc::new(AtomicU64::new(micros(start))),
        }
    }

    /// The clock's time.
    #[must_use]
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.now_us())
    }

    /// Moves the clock forward by `by` (truncated to the microsecond).
    ///
    /// # Panics
    ///
    /// When the clock would pass the year 2155.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        let moved = self
            .now_us
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                now.checked_add(by).filter(|&to| to <= clock::MAX_TIME_US)
            });
        assert!(moved.is_ok(), "a ManualClock cannot pass the year 2155");
    }

    /// Sets the clock to `to`, earlier or later (the stores count an admission later than
    /// the time of a check as in its window, as for [`Limiter::check_at`](crate::Limiter::check_at)).
    /// Going back is exact only as far as no check has evicted since: admissions that left
    /// the window at a later time are gone, and do not count when the clock returns.
    ///
    /// # Panics
    ///
    /// When `to` is before 1970 or after the year 2155.
    pub fn set(&self, to: SystemTime) {
        self.now_us.store(micros(to), Ordering::Release);
    }

    /// Moves the clock forward to `to_us` (µs since the Unix epoch) unless it already reads
    /// later: what a wait that wakes at `to_us` does, so that waiters denied together move it
    /// once. `false` when `to_us` is past the year 2155 (the clock is left as it was).
    pub(crate) fn advance_to(&self, to_us: u64) -> bool {
        if to_us > clock::MAX_TIME_US {
            return false;
        }
        self.now_us.fetch_max(to_us, Ordering::AcqRel);
        true
    }

    /// The clock's time, in microseconds since the Unix epoch.
    pub(crate) fn now_us(&self) -> u64 {
        self.now_us.load(Ordering::Acquire)
    }
}

/// `at` in microseconds since the Unix epoch, within the times a check accepts.
fn micros(at: SystemTime) -> u64 {
    match clock::micros_since_epoch(at) {
        Ok(us) => us,
        Err(error) => panic!("a ManualClock cannot read {at:?}: {error}"),
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_time_and_it_moves_only_when_told() {
        let start = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let clock = ManualClock::new(start);
        let clone = clock.clone();
        assert_eq!(clock.now(), start);
        clone.advance(Duration::from_millis(1_500));
        assert_eq!(clock.now(), start + Duration::from_millis(1_500));
        clock.set(start);
        assert_eq!(clone.now(), start);
        assert_eq!(clone.now_us(), 1_700_000_000_000_000);
    }

    #[test]
    fn a_wait_moves_it_to_its_wake_up_time_never_back() {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(100));
        assert!(clock.advance_to(110_000_000));
        assert!(clock.advance_to(105_000_000), "a waiter that woke earlier");
        assert_eq!(clock.now_us(), 110_000_000);
        assert!(!clock.advance_to(u64::MAX));
        assert_eq!(clock.now_us(), 110_000_000);
    }

    #[test]
    #[should_panic(expected = "cannot pass the year 2155")]
    fn it_stops_before_the_scores_lose_precision() {
        let clock = ManualClock::new(UNIX_EPOCH);
        clock.advance(Duration::from_secs(u64::MAX));
    }
}
