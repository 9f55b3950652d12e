//! What a call of a `#[rate_limit]` function allocates, counted by the suite's global
//! allocator (`main.rs`): nothing for the key without a `key` argument (the scope, a
//! `&'static str`, is the key), one `String` with it (`scope:key`, allocated at its final
//! size), and nothing else on the way through the in-process store once the key is known.
//!
//! The count is per thread and only while a call is polled (once, on this thread, with no
//! runtime: the in-process store answers on the first poll), so the test harness, other tests
//! and the warm-up are not counted.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};
use tests::counting_alloc::{count_allocations, poll_ready};

/// Polls `future` once on this thread and returns its output with the number of allocations
/// made while it ran (its creation and its output's drop are outside the count).
fn allocations<F: Future>(future: F) -> (F::Output, u64) {
    count_allocations(|| poll_ready(future))
}

/// A window short enough for the next call, 2 ms later, to find the last admission gone, so
/// that every call is admitted and the key's log never holds more than one admission (it does
/// not grow, so it does not allocate).
#[rate_limit(period = "1ms", threshold = 1, limiter = limiter)]
async fn unkeyed(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "1ms", threshold = 1, key = user, limiter = limiter)]
async fn keyed<K: fmt::Display>(limiter: &Limiter, user: K) -> Result<(), RateLimitError> {
    Ok(())
}

/// A window no call of this test outlives: after the first, every call is denied.
#[rate_limit(period = 3600, threshold = 1, limiter = limiter)]
async fn unkeyed_hourly(limiter: &Limiter) -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = 3600, threshold = 1, key = user, limiter = limiter)]
async fn keyed_hourly<K: fmt::Display>(limiter: &Limiter, user: K) -> Result<(), RateLimitError> {
    Ok(())
}

/// Lets the last admission of a 1 ms window leave it.
fn wait_past_the_window() {
    std::thread::sleep(Duration::from_millis(2));
}

/// Fewer than 64 checks per limiter (a shard sweeps itself at its 64th), so the key's log,
/// idle between calls, is not swept away and made anew.
const CALLS: usize = 10;

#[test]
fn an_admitted_call_without_a_key_allocates_nothing() {
    let limiter = Limiter::memory();
    // Warm-up: the store copies the key and starts its log on the first call.
    let (first, _) = allocations(unkeyed(&limiter));
    first.expect("the first call is admitted");
    for call in 1..=CALLS {
        wait_past_the_window();
        let (result, count) = allocations(unkeyed(&limiter));
        result.unwrap_or_else(|err| panic!("call {call} was not admitted: {err}"));
        assert_eq!(count, 0, "call {call} allocated");
    }
}

#[test]
fn an_admitted_call_with_a_key_allocates_the_key_once() {
    let long = "ü".repeat(200);
    let keys: [&dyn fmt::Display; 3] = [&42_u64, &"user-7", &long];
    for key in keys {
        let limiter = Limiter::memory();
        let (first, _) = allocations(keyed(&limiter, key));
        first.expect("the first call is admitted");
        for call in 1..=CALLS {
            wait_past_the_window();
            let (result, count) = allocations(keyed(&limiter, key));
            result.unwrap_or_else(|err| panic!("call {call} was not admitted: {err}"));
            assert_eq!(count, 1, "call {call} with key {key}");
        }
    }
}

/// A denial allocates its error (one `Box`) and, with a key, nothing more: the key's `String`
/// is kept for it, the scope cut off in place.
#[test]
fn a_denied_call_allocates_its_error_and_nothing_more_for_the_key() {
    let limiter = Limiter::memory();
    let (first, _) = allocations(unkeyed_hourly(&limiter));
    first.expect("the first call is admitted");
    for call in 1..=CALLS {
        let (result, count) = allocations(unkeyed_hourly(&limiter));
        let err = result.expect_err("the window is full");
        assert!(err.is_denied(), "{err}");
        assert_eq!(count, 1, "denied call {call}");
    }

    let (first, _) = allocations(keyed_hourly(&limiter, "user-7"));
    first.expect("the first call is admitted");
    for call in 1..=CALLS {
        let (result, count) = allocations(keyed_hourly(&limiter, "user-7"));
        let err = result.expect_err("the window is full");
        let denied = err.as_denied().expect("a denial");
        assert_eq!(denied.key(), Some("user-7"));
        assert_eq!(count, 2, "denied call {call}: the key, then the error");
    }
}
