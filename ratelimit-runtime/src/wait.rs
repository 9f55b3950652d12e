//! Waiting for a slot ([`Limiter::until_ready`]): a check retried after its denial's
//! retry-after, plus a jitter, until admitted or until the wait is spent.

use std::time::Duration;

use crate::decision::Decision;
use crate::error::RateLimitError;
use crate::limiter::Limiter;
use crate::rate::Rate;
use crate::runtime::{Instant, Runtime, sleep, yield_now};

/// The most a wait's jitter adds: a tenth of the retry-after, at most this.
const MAX_JITTER: Duration = Duration::from_millis(100);

impl Limiter {
    /// Checks `key` against `rate` (as [`check`](Limiter::check)) and, while denied, waits for
    /// a slot: it sleeps until the denial's retry-after, plus a jitter (uniform, up to a tenth
    /// of the retry-after and at most 100 ms, so that waiters denied together do not wake
    /// together; cut short where it would pass `max_wait`), and checks again, until admitted,
    /// or until the next retry-after would end past `max_wait`: then it answers that denial
    /// (`Ok`, `allowed == false`) at once. The sleeps stay within `max_wait`; each check adds
    /// its own time (bounded by the store's timeout). Every attempt is a check, with its span,
    /// events and metrics: a call admitted after two waits counts two denials.
    ///
    /// Nothing is recorded while it sleeps (a denial records nothing): a future dropped then
    /// leaves no trace, and one dropped during a retry's Redis check leaves that check to
    /// finish on the runtime, as any check does (it may be admitted). A wait is not a queue: a
    /// waiter that wakes may find its slot taken by a call that came later, and wait again.
    /// On a limiter on a [`ManualClock`](crate::testing::ManualClock) a wait moves that clock
    /// forward to its wake-up time (unless another waiter moved it further), without jitter,
    /// lets the runtime's other tasks run, and checks again, so tests do not sleep. Real
    /// sleeps need a Tokio runtime with its time driver (`#[tokio::main]` has one) and follow
    /// Tokio's clock (paused under `tokio::time::pause`), or outside Tokio the `smol` feature
    /// (smol's timers); outside any runtime the first denial is the answer.
    ///
    /// This is the sliding window log's wait, as governor's `until_ready` is GCRA's.
    ///
    /// # Errors
    ///
    /// As [`check`](Limiter::check): the store failed under `FailurePolicy::Closed` (at once,
    /// with no retry).
    pub async fn until_ready(
        &self,
        key: &str,
        rate: Rate,
        max_wait: Duration,
    ) -> Result<Decision, RateLimitError> {
        let mut wait = Wait::new(self, max_wait);
        loop {
            let asked = Instant::now();
            let decision = self.check(key, rate).await?;
            let Some(retry_after) = decision.retry_after.filter(|_| !decision.allowed) else {
                return Ok(decision);
            };
            if !wait.pause(retry_after, asked).await {
                return Ok(decision);
            }
        }
    }
}

/// The `wait` of the attribute: `check` (a check that answers a denial as
/// [`RateLimitError::Denied`]) retried as [`Limiter::until_ready`] retries, until it is not a
/// denial or until `max_wait` would be spent; then the last denial.
///
/// # Errors
///
/// The last attempt's error.
pub(crate) async fn waiting<T, F>(
    limiter: &Limiter,
    max_wait: Duration,
    mut check: impl FnMut() -> F,
) -> Result<T, RateLimitError>
where
    F: std::future::Future<Output = Result<T, RateLimitError>>,
{
    let mut wait = Wait::new(limiter, max_wait);
    loop {
        let asked = Instant::now();
        let outcome = check().await;
        let Some(retry_after) = outcome.as_ref().err().and_then(RateLimitError::retry_after) else {
            return outcome;
        };
        if !wait.pause(retry_after, asked).await {
            return outcome;
        }
    }
}

/// One call's wait for a slot: what it has spent of its `max_wait`.
struct Wait<'a> {
    limiter: &'a Limiter,
    max_wait: Duration,
    started: Instant,
    /// What the pauses took on a manual clock, whose time real time does not tell.
    waited: Duration,
}

impl<'a> Wait<'a> {
    fn new(limiter: &'a Limiter, max_wait: Duration) -> Wait<'a> {
        Wait {
            limiter,
            max_wait,
            started: Instant::now(),
            waited: Duration::ZERO,
        }
    }

    /// Waits `retry_after`, the answer of a check sent at `asked` (plus a jitter on real
    /// time, cut to what the wait has left), and says `true`; or says `false` at once when
    /// `retry_after` ends past the wait, or outside a runtime on real time. The retry-after
    /// counts from the check's time, which is `asked` or later: measured from now, a loaded
    /// machine's delay in handing the answer over would count twice, and a wait as long as
    /// the period would miss the slot it has room for.
    async fn pause(&mut self, retry_after: Duration, asked: Instant) -> bool {
        // A floor, so that a wait always moves time on.
        let retry_after = retry_after.max(Duration::from_micros(1));
        match self.limiter.manual_clock() {
            Some(clock) => {
                if self.waited + retry_after > self.max_wait {
                    return false;
                }
                let wake = u64::try_from(retry_after.as_micros()).unwrap_or(u64::MAX);
                if !clock.advance_to(clock.now_us().saturating_add(wake)) {
                    return false;
                }
                self.waited += retry_after;
                if Runtime::current().is_some() {
                    yield_now().await;
                }
                true
            }
            None => {
                let spent_before = asked.saturating_duration_since(self.started);
                if spent_before + retry_after > self.max_wait || Runtime::current().is_none() {
                    return false;
                }
                let left = self.max_wait.saturating_sub(self.started.elapsed());
                sleep((retry_after + jitter(retry_after)).min(left)).await;
                true
            }
        }
    }
}

/// A random part of `wait`: uniform in `[0, min(wait / 10, MAX_JITTER)]`.
fn jitter(wait: Duration) -> Duration {
    let most = (wait / 10).min(MAX_JITTER);
    let mut bytes = [0; 8];
    if getrandom::fill(&mut bytes).is_err() {
        return most / 2;
    }
    let fraction = f64::from(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
        / f64::from(u32::MAX);
    most.mul_f64(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_a_tenth_of_the_wait_at_most_and_never_more_than_100_ms() {
        for _ in 0..1_000 {
            assert!(jitter(Duration::from_millis(200)) <= Duration::from_millis(20));
            assert!(jitter(Duration::from_secs(60)) <= MAX_JITTER);
        }
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }
}
