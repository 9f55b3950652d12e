//! The sliding window log's semantics, on both stores, with explicit timestamps.
//!
//! Each case runs against the in-process store and a real Redis (a private `redis-server`
//! per test, see `tests::TestRedis`).

use std::time::{Duration, SystemTime};

use ratelimit_runtime::{Decision, Rate, RateLimitError};
use tests::at_secs;

/// A base time well after 1970 (2023-11-14T22:13:20Z), in microseconds since the epoch.
const T0: u64 = 1_700_000_000_000_000;
const SECOND: u64 = 1_000_000;

use tests::either::EitherStore as Store;

fn rate(threshold: u64, period: Duration) -> Rate {
    Rate::new(threshold, period).expect("valid rate")
}

/// Defines each case once per store: `memory::<case>` and `redis::<case>`.
macro_rules! on_both_stores {
    ($(async fn $case:ident($store:ident: &Store) $body:block)*) => {
        $(async fn $case($store: &Store) $body)*

        mod memory {
            $(#[tokio::test]
            async fn $case() {
                super::$case(&super::Store::memory()).await;
            })*
        }

        mod redis {
            $(#[tokio::test]
            async fn $case() {
                let store = super::Store::redis(stringify!($case)).await;
                super::$case(&store).await;
                store.clean_up().await;
            })*
        }
    };
}

on_both_stores! {
    async fn same_microsecond_burst_admits_exactly_threshold(store: &Store) {
        let limit = rate(5, Duration::from_secs(10));
        let mut admitted = 0;
        for _ in 0..20 {
            admitted += u32::from(store.at("burst", limit, T0).await.allowed);
        }
        assert_eq!(admitted, 5);
    }

    async fn denied_calls_are_not_counted(store: &Store) {
        let limit = rate(2, Duration::from_secs(10));
        assert!(store.at("retry", limit, T0).await.allowed);
        assert!(store.at("retry", limit, T0 + SECOND).await.allowed);
        // A client hammering the key while it is full is never recorded...
        for i in 0..50 {
            assert!(!store.at("retry", limit, T0 + 2 * SECOND + i * 100_000).await.allowed);
        }
        // ...so it is admitted the moment the first admission leaves the window.
        assert!(store.at("retry", limit, T0 + 10 * SECOND).await.allowed);
        assert!(!store.at("retry", limit, T0 + 10 * SECOND + 500_000).await.allowed);
        assert!(store.at("retry", limit, T0 + 11 * SECOND).await.allowed);
    }

    async fn window_edges_are_half_open(store: &Store) {
        let limit = rate(1, Duration::from_secs(30));
        assert!(store.at("edge", limit, T0).await.allowed);
        // An admission at t still counts at t + period - 1 µs...
        let last_moment = store.at("edge", limit, T0 + 30 * SECOND - 1).await;
        assert!(!last_moment.allowed);
        assert_eq!(last_moment.retry_after, Some(Duration::from_micros(1)));
        // ...and stops counting at exactly t + period.
        assert!(store.at("edge", limit, T0 + 30 * SECOND).await.allowed);
    }

    async fn seed_timeline_five_per_ten_seconds(store: &Store) {
        // The timeline drawn in the fourth seed article: 5 calls per 10 s.
        let limit = rate(5, Duration::from_secs(10));
        let base = 1_600_000_000.0;
        for second in [1.0, 2.8, 3.5, 5.0, 6.0] {
            assert!(check(store, limit, base + second).await.allowed, "{second} s");
        }
        for second in [8.0, 9.0, 10.0, 10.9, 10.999_999] {
            assert!(!check(store, limit, base + second).await.allowed, "{second} s");
        }
        // At 11.1 s the call at 1 s has left the window (10.1 s ago).
        assert!(check(store, limit, base + 11.1).await.allowed);
        assert!(!check(store, limit, base + 12.0).await.allowed);
        assert!(!check(store, limit, base + 12.799_999).await.allowed);
        // At 12.8 s the call at 2.8 s leaves too.
        assert!(check(store, limit, base + 12.8).await.allowed);

        async fn check(store: &Store, limit: Rate, seconds: f64) -> Decision {
            store.limiter.check_at("seed", limit, at_secs(seconds)).await.unwrap()
        }
    }

    async fn retry_after_comes_from_the_oldest_admission(store: &Store) {
        let limit = rate(2, Duration::from_secs(10));
        store.at("wait", limit, T0 + SECOND).await;
        store.at("wait", limit, T0 + 4 * SECOND).await;
        let denied = store.at("wait", limit, T0 + 6 * SECOND + 250).await;
        assert!(!denied.allowed);
        assert_eq!(denied.limit, 2);
        assert_eq!(denied.remaining, 0);
        // The oldest (1 s) leaves at 11 s; the newest (4 s) at 14 s.
        assert_eq!(denied.retry_after, Some(Duration::from_micros(5 * SECOND - 250)));
        assert_eq!(denied.reset_after, Duration::from_micros(8 * SECOND - 250));
        // Retrying exactly then succeeds.
        assert!(store.at("wait", limit, T0 + 11 * SECOND).await.allowed);
    }

    async fn admissions_out_of_order_answer_alike(store: &Store) {
        // Explicit times out of order: an admission later than `now` counts, and sets
        // `reset_after`, until it leaves its own window.
        let limit = rate(3, Duration::from_secs(10));
        let first = store.at("order", limit, T0 + 5 * SECOND).await;
        assert_eq!(first.reset_after, Duration::from_secs(10));
        let earlier = store.at("order", limit, T0 + 2 * SECOND).await;
        assert!(earlier.allowed);
        assert_eq!(earlier.remaining, 1);
        // The newest admission (5 s) is 3 s ahead of this one.
        assert_eq!(earlier.reset_after, Duration::from_secs(13));
        let between = store.at("order", limit, T0 + 4 * SECOND).await;
        assert!(between.allowed);
        assert_eq!(between.reset_after, Duration::from_secs(11));
        let denied = store.at("order", limit, T0 + 6 * SECOND).await;
        assert!(!denied.allowed);
        // The oldest (2 s) frees the window at 12 s; the newest (5 s) leaves at 15 s.
        assert_eq!(denied.retry_after, Some(Duration::from_secs(6)));
        assert_eq!(denied.reset_after, Duration::from_secs(9));
        // Once every admission has left, an earlier time than any seen starts afresh.
        let fresh = store.at("order", limit, T0 + 20 * SECOND).await;
        assert!(fresh.allowed);
        assert_eq!(fresh.remaining, 2);
        assert_eq!(fresh.reset_after, Duration::from_secs(10));
        let back = store.at("order", limit, T0 + 19 * SECOND).await;
        assert!(back.allowed);
        assert_eq!(back.reset_after, Duration::from_secs(11));
    }

    async fn remaining_counts_down(store: &Store) {
        let limit = rate(3, Duration::from_secs(60));
        let first = store.at("countdown", limit, T0).await;
        assert_eq!(first, Decision::admitted(3, 2, Duration::from_secs(60)));
        let second = store.at("countdown", limit, T0 + 2 * SECOND).await;
        assert_eq!(second, Decision::admitted(3, 1, Duration::from_secs(60)));
        let third = store.at("countdown", limit, T0 + 3 * SECOND).await;
        assert_eq!(third, Decision::admitted(3, 0, Duration::from_secs(60)));
        let fourth = store.at("countdown", limit, T0 + 4 * SECOND).await;
        assert_eq!(
            fourth,
            Decision::denied(3, Duration::from_secs(56), Duration::from_secs(59))
        );
    }

    async fn keys_are_counted_apart(store: &Store) {
        let limit = rate(1, Duration::from_secs(60));
        assert!(store.at("alice", limit, T0).await.allowed);
        assert!(store.at("bob", limit, T0).await.allowed);
        assert!(!store.at("alice", limit, T0 + 1).await.allowed);
    }

    async fn hostile_keys_are_just_keys(store: &Store) {
        let limit = rate(1, Duration::from_secs(60));
        let long = "x".repeat(10_000);
        let keys = ["", " ", "a b\r\n*3", "{tag}", "ключ:🔑", "\0nul", "*", &long];
        for key in keys {
            assert!(store.at(key, limit, T0).await.allowed, "{key:?}");
        }
        for key in keys {
            assert!(!store.at(key, limit, T0 + 1).await.allowed, "{key:?}");
        }
    }

    async fn extreme_rates_work(store: &Store) {
        let huge = rate(Rate::MAX_THRESHOLD, Rate::MAX_PERIOD);
        let first = store.at("huge", huge, T0).await;
        assert_eq!(first.remaining, Rate::MAX_THRESHOLD - 1);
        assert_eq!(first.reset_after, Rate::MAX_PERIOD);
        let tiny = rate(1, Duration::from_millis(1));
        assert!(store.at("tiny", tiny, T0).await.allowed);
        assert!(!store.at("tiny", tiny, T0 + 999).await.allowed);
        assert!(store.at("tiny", tiny, T0 + 1_000).await.allowed);
    }

    async fn times_outside_the_range_are_invalid_input(store: &Store) {
        let limit = rate(1, Duration::from_secs(1));
        let before_epoch = SystemTime::UNIX_EPOCH - Duration::from_secs(1);
        let error = store.limiter.check_at("k", limit, before_epoch).await.unwrap_err();
        assert!(matches!(error, RateLimitError::InvalidInput(_)), "{error:?}");
        let far_future = SystemTime::UNIX_EPOCH + Duration::from_secs(200 * 365 * 86_400);
        let error = store.limiter.check_at("k", limit, far_future).await.unwrap_err();
        assert!(matches!(error, RateLimitError::InvalidInput(_)), "{error:?}");
        // The earliest valid time works.
        assert!(store.at("k", limit, 0).await.allowed);
    }
}
