//! [`EitherStore`]: a limiter of either store, for the semantics both run (`on_both_stores`
//! cases in `tests/tests/suite/semantics.rs` and `tests/tests/suite/counter.rs`), with checks
//! at explicit times.

use std::time::Duration;

use ratelimit_runtime::testing::ManualClock;
use ratelimit_runtime::{Decision, Limit, Limiter, Rate};

use crate::{TestRedis, at_micros, unique_prefix};

/// A limiter in process or on a Redis of its own (a private server, or the one
/// `RATELIMIT_TEST_REDIS_URL` names, under a unique prefix), and that server.
pub struct EitherStore {
    /// The limiter under test.
    pub limiter: Limiter,
    redis: Option<(TestRedis, String)>,
}

impl EitherStore {
    /// An in-process limiter.
    #[must_use]
    pub fn memory() -> EitherStore {
        EitherStore {
            limiter: Limiter::memory(),
            redis: None,
        }
    }

    /// Whether the limiter is a Redis one.
    #[must_use]
    pub fn is_redis(&self) -> bool {
        self.redis.is_some()
    }

    /// A Redis limiter, its keys under a prefix made from `name`.
    ///
    /// # Panics
    ///
    /// When no server starts or the limiter cannot be built.
    pub async fn redis(name: &str) -> EitherStore {
        let redis = TestRedis::start();
        let prefix = unique_prefix(name);
        let limiter = redis_limiter(&redis, &prefix, None).await;
        EitherStore {
            limiter,
            redis: Some((redis, prefix)),
        }
    }

    /// Another limiter of the same store (and, for Redis, the same prefix) on `clock`.
    ///
    /// # Panics
    ///
    /// When the limiter cannot be built.
    pub async fn with_clock(&self, clock: ManualClock) -> Limiter {
        match &self.redis {
            None => Limiter::builder()
                .clock(clock)
                .build()
                .expect("an in-process limiter"),
            Some((redis, prefix)) => redis_limiter(redis, prefix, Some(clock)).await,
        }
    }

    /// Deletes the test's keys, in case the server is a shared one.
    pub async fn clean_up(&self) {
        if let Some((redis, prefix)) = &self.redis {
            redis.clean_up(prefix).await;
        }
    }

    /// A check of `key` at `micros` (µs since the Unix epoch).
    ///
    /// # Panics
    ///
    /// When the check fails.
    pub async fn at(&self, key: &str, rate: Rate, micros: u64) -> Decision {
        self.limiter
            .check_at(key, rate, at_micros(micros))
            .await
            .expect("check succeeds")
    }

    /// A check of `key` for a call of `cost` at `micros`.
    ///
    /// # Panics
    ///
    /// When the check fails.
    pub async fn costly(&self, key: &str, rate: Rate, cost: u32, micros: u64) -> Decision {
        let limits = [Limit::new(key, rate).with_cost(cost)];
        *self
            .limiter
            .check_all_at(limits, at_micros(micros))
            .await
            .expect("check succeeds")
    }

    /// A look at `key` at `micros`.
    ///
    /// # Panics
    ///
    /// When the look fails.
    pub async fn peek(&self, key: &str, rate: Rate, micros: u64) -> Decision {
        self.limiter
            .peek_at(key, rate, at_micros(micros))
            .await
            .expect("look succeeds")
    }
}

/// A Redis limiter under `prefix`, on `clock` if given, with a timeout no loaded machine
/// reaches (every answer is the store's).
///
/// # Panics
///
/// When the limiter cannot be built.
pub async fn redis_limiter(redis: &TestRedis, prefix: &str, clock: Option<ManualClock>) -> Limiter {
    let mut builder = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(prefix)
        .timeout(Duration::from_secs(10));
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    builder.build().expect("build a Redis limiter")
}
