//! Waiting for a slot ([`Limiter::until_ready`]): a check retried after its denial's
//! retry-after, plus a jitter, until admitted or until the wait is spent.

use std::time::{Duration, Instant};

use crate::decision::Decision;
use crate::error::RateLimitError;
use crate::limiter::Limiter;
use crate::rate::Rate;
use crate::runtime::{Runtime, sleep};

/// The most a wait's jitter adds: a tenth of the wait, at most this.
const MAX_JITTER: Duration = Duration::from_millis(100);

impl Limiter {
    /// Checks `key` against `rate` (as [`check`](Limiter::check)) and, while denied, waits for
    /// a slot: it sleeps until the denial's retry-after, plus a jitter (uniform, up to a tenth
    /// of the wait and at most 100 ms, so that waiters denied together do not wake together),
    /// and checks again, until admitted or until `max_wait` would be spent; then it answers
    /// the last denial, at once rather than sleeping past `max_wait`. So an admitted call may
    /// have waited up to `max_wait`, and a denied one waited less.
    ///
    /// Nothing is recorded while waiting (a denial records nothing), so dropping the future
    /// mid-wait leaves no trace. A wait is not a queue: a waiter that wakes may find its slot
    /// taken by a call that came later, and wait again. On a limiter on a
    /// [`ManualClock`](crate::testing::ManualClock) a wait advances that clock to its wake-up
    /// time, without jitter, and checks again at once (as Tokio's paused clock does), so tests
    /// do not sleep. Outside a Tokio runtime it cannot sleep: it answers the first denial.
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
            let decision = self.check(key, rate).await?;
            let Some(retry_after) = decision.retry_after.filter(|_| !decision.allowed) else {
                return Ok(decision);
            };
            if !wait.pause(retry_after).await {
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
        let outcome = check().await;
        let Some(retry_after) = outcome.as_ref().err().and_then(RateLimitError::retry_after) else {
            return outcome;
        };
        if !wait.pause(retry_after).await {
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

    /// Waits `retry_after` (plus a jitter on real time) and says `true`, or says `false` at
    /// once when that would spend more than the wait has left, or outside a runtime.
    async fn pause(&mut self, retry_after: Duration) -> bool {
        let clock = self.limiter.manual_clock();
        let (wake, spent) = match clock {
            Some(_) => (retry_after, self.waited),
            None => (retry_after + jitter(retry_after), self.started.elapsed()),
        };
        if spent + wake > self.max_wait {
            return false;
        }
        match clock {
            Some(clock) => clock.advance(wake),
            None if Runtime::current().is_some() => sleep(wake).await,
            None => return false,
        }
        self.waited += wake;
        true
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
