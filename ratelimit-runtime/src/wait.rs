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
        let started = Instant::now();
        let mut waited = Duration::ZERO;
        loop {
            let decision = self.check(key, rate).await?;
            let Some(retry_after) = decision.retry_after.filter(|_| !decision.allowed) else {
                return Ok(decision);
            };
            let clock = self.manual_clock();
            let wake = match clock {
                Some(_) => retry_after,
                None => retry_after + jitter(retry_after),
            };
            let spent = match clock {
                Some(_) => waited,
                None => started.elapsed(),
            };
            if spent + wake > max_wait {
                return Ok(decision);
            }
            match clock {
                Some(clock) => clock.advance(wake),
                None if Runtime::current().is_some() => sleep(wake).await,
                None => return Ok(decision),
            }
            waited += wake;
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
