//! README's recipe: a client of someone else's API, with a per-second and an hourly quota,
//! that waits for a slot; and a unit test of it on a manual clock.

// [recipe: outbound]
use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

/// A client of a partner's API that allows 10 calls a second and 1,000 an hour. Both quotas
/// are one check, all or nothing, and a call denied by either waits for its slot, up to 30 s:
/// when the slot is further away (the hourly quota is spent), it fails at once, as a denial.
pub struct Partner {
    limiter: Limiter,
}

impl Partner {
    /// A client whose calls are limited by `limiter` (one per process, shared by clones).
    #[must_use]
    pub fn new(limiter: Limiter) -> Partner {
        Partner { limiter }
    }

    #[rate_limit(period = 1, threshold = 10, name = "partner.second", limiter = &self.limiter, wait = "30s")]
    #[rate_limit(period = "1h", threshold = 1000, name = "partner.hour", limiter = &self.limiter)]
    /// `GET path` on the partner's API, once both quotas admit it.
    ///
    /// # Errors
    ///
    /// A denial when no slot frees within 30 s (the hourly quota is spent).
    pub async fn fetch(&self, path: &str) -> Result<String, RateLimitError> {
        Ok(format!("partner: {path}")) // the HTTP call goes here
    }
}
// [end]

// [recipe: unit test]
#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use ratelimit_runtime::Limiter;
    use ratelimit_runtime::testing::ManualClock;

    use super::Partner;

    #[tokio::test]
    async fn the_eleventh_call_in_a_second_waits_for_the_next_second() {
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let partner = Partner::new(
            Limiter::builder()
                .clock(clock.clone())
                .build()
                .expect("an in-process limiter"),
        );
        let start = clock.now();
        for _ in 0..10 {
            partner.fetch("/orders").await.unwrap();
        }
        assert_eq!(clock.now(), start, "10 calls fit in the first second");
        partner.fetch("/orders").await.unwrap(); // waits on the clock: no real sleep
        let waited = clock.now().duration_since(start).unwrap();
        assert!(waited >= Duration::from_secs(1), "{waited:?}");
    }
}
// [end]
