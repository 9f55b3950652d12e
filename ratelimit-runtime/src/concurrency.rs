//! [`Concurrency`]: at most `max` calls of a key in flight at once, across every process that
//! shares the store.

use std::fmt;
use std::time::Duration;

use crate::rate::Rate;

/// A concurrency limit: at most [`max`](Concurrency::max) calls of a key in flight at once,
/// across every process sharing the store. An admitted call holds a **slot** until it ends
/// (returned, failed, panicked, or its future dropped); a call that finds every slot held is
/// denied at once, or waits for one.
///
/// In Redis the slots of a key are members of one sorted set, each scored with the time its
/// holder last renewed it: a slot not renewed for the [slot time](Concurrency::slot_time)
/// (its process died, or lost Redis) stops counting then. A holder's process renews all of
/// its slots every third of the slot time, in one script per Redis node or cluster slot. In
/// process, a slot lasts until its call ends. The [concurrency guide](crate::guide::concurrency)
/// tells the whole story: the bound, renewals, failures, and the HTTP answer.
///
/// Invalid limits are unrepresentable: `max` is in `1..=`[`MAX`](Concurrency::MAX), the slot
/// time a whole number of milliseconds in
/// [`MIN_SLOT_TIME`](Concurrency::MIN_SLOT_TIME)`..=`[`MAX_SLOT_TIME`](Concurrency::MAX_SLOT_TIME).
///
/// ```
/// use std::time::Duration;
/// use ratelimit_runtime::Concurrency;
///
/// const EXPORTS: Concurrency = Concurrency::new_const(4, Duration::from_secs(30));
/// assert_eq!(EXPORTS, Concurrency::new(4)?);
/// assert_eq!(EXPORTS.to_string(), "4 in flight");
/// # Ok::<(), ratelimit_runtime::RateLimitError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Concurrency {
    max: u32,
    slot_time_us: u64,
}

impl Concurrency {
    /// The most calls in flight a limit allows: 100,000 (in Redis, one sorted set member
    /// each).
    pub const MAX: u64 = 100_000;
    /// The slot time unless one is chosen: 30 seconds.
    pub const DEFAULT_SLOT_TIME: Duration = Duration::from_secs(30);
    /// The shortest slot time, one second: a process renews its slots every third of it.
    pub const MIN_SLOT_TIME: Duration = Duration::from_secs(1);
    /// The longest slot time, one day.
    pub const MAX_SLOT_TIME: Duration = Duration::from_secs(86_400);

    /// At most `max` calls in flight, whose slots last `slot_time` unless renewed; the `const`
    /// form of [`Concurrency::new`] and [`with_slot_time`](Concurrency::with_slot_time).
    ///
    /// # Panics
    ///
    /// When they would return an error; in a `const` context that panic is reported at
    /// compile time.
    #[must_use]
    pub const fn new_const(max: u64, slot_time: Duration) -> Concurrency {
        match Concurrency::checked(max, slot_time) {
            Ok(concurrency) => concurrency,
            Err(reason) => panic!("{}", reason),
        }
    }

    /// At most `max` calls in flight, slots lasting `slot_time`; or why they are no limit.
    pub(crate) const fn checked(
        max: u64,
        slot_time: Duration,
    ) -> Result<Concurrency, &'static str> {
        if max == 0 {
            return Err("concurrency must be at least 1 call in flight");
        }
        if max > Concurrency::MAX {
            return Err("concurrency must be at most 100000 calls in flight");
        }
        if slot_time.as_nanos() < Concurrency::MIN_SLOT_TIME.as_nanos() {
            return Err("slot time must be at least 1 s");
        }
        if slot_time.as_nanos() > Concurrency::MAX_SLOT_TIME.as_nanos() {
            return Err("slot time must be at most 1 day");
        }
        if !slot_time.subsec_nanos().is_multiple_of(1_000_000) {
            return Err("slot time must be a whole number of milliseconds");
        }
        Ok(Concurrency {
            max: max as u32,
            // At most a day: fits.
            slot_time_us: slot_time.as_micros() as u64,
        })
    }

    /// The most calls of a key in flight at once.
    #[must_use]
    pub const fn max(&self) -> u64 {
        self.max as u64
    }

    /// How long a slot counts after its holder last renewed it (see the type's docs).
    #[must_use]
    pub const fn slot_time(&self) -> Duration {
        Duration::from_micros(self.slot_time_us)
    }

    /// The limit as the stores check it: a sliding window log of `max` over the slot time,
    /// whose admissions are renewed while their calls run and refunded when they end.
    #[must_use]
    pub const fn rate(&self) -> Rate {
        Rate::of_slots(self.max, self.slot_time_us)
    }
}

/// `Concurrency(4 in flight, slot time 30s)`.
impl fmt::Debug for Concurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Concurrency({} in flight, slot time {:?})",
            self.max,
            self.slot_time()
        )
    }
}

/// `4 in flight`.
impl fmt::Display for Concurrency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in flight", self.max)
    }
}
