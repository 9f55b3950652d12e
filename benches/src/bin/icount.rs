//! Instructions per in-process check, for callgrind, whose counts do not depend on how busy
//! the machine is (criterion's times do): `icount <mode> <checks>` makes that many checks of
//! one key, denied (`deny`: threshold 1), admitted (`admit`: threshold 2^32 - 1, an hour's
//! period) or through a named `#[rate_limit]` function (`attribute`), on one thread; the
//! `counter-` modes are the first two under a sliding window counter. The registry's cost:
//! `attribute-entries` is `attribute` while 100 other scopes have entries (its own none);
//! `keyed` checks a keyed function, and `keyed-overrides` the same while its scope has 10,000
//! key overrides, the checked key's among them (a rate as large as the code's). Governor's
//! counts, the reference, are `icount_governor`'s (a binary of its own, so that this one's
//! code, and so its counts, stay as they were).
//!
//! ```sh
//! cargo build --release -p benches --bin icount
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/icount deny 200000
//! callgrind_annotate --inclusive=yes cg.out | grep 'Checking as core::future::future::Future>::poll \['
//! ```
//!
//! The poll's inclusive count, less that of `quanta::Clock::new` (the clock's one-time
//! calibration against the OS clock, whose count varies from run to run), over the checks,
//! is the cost of one check: see BENCHMARKS.md.

use std::hint::black_box;
use std::sync::LazyLock;
use std::time::Duration;

use ratelimit_runtime::{
    Algorithm, Limiter, Limits, Override, Rate, RateLimitError, ScopeLimits, rate_limit,
};
use tests::counting_alloc::poll_ready as ready;

static LIMITER: LazyLock<Limiter> = LazyLock::new(Limiter::memory);

const COUNTER: Algorithm = Algorithm::SlidingWindowCounter;

#[rate_limit(period = 3600, threshold = 4294967295, name = "hot", limiter = &LIMITER)]
async fn annotated() -> Result<u32, RateLimitError> {
    Ok(1)
}

#[rate_limit(period = 3600, threshold = 4294967295, name = "hot-keyed", key = user, limiter = &LIMITER)]
async fn keyed(user: &str) -> Result<u32, RateLimitError> {
    Ok(1)
}

/// 100 scopes other than the checked ones, each with a rate and a mode.
fn other_scopes(limits: Limits) -> Limits {
    let rate = Rate::new(10, Duration::from_secs(60)).expect("a valid rate");
    (0..100).fold(limits, |limits, i| {
        limits.scope(
            format!("other-{i}"),
            ScopeLimits::new()
                .rate(rate)
                .mode(ratelimit_runtime::Mode::Enforce),
        )
    })
}

/// `hot-keyed`'s 10,000 key overrides, `key-5000` among them.
fn overrides(limits: Limits) -> Limits {
    let rate = Rate::new(Rate::MAX_THRESHOLD, Duration::from_secs(3600)).expect("a valid rate");
    let entry = (0..10_000).fold(ScopeLimits::new(), |entry, i| {
        entry.key(format!("key-{i}"), Override::rate(rate))
    });
    limits.scope("hot-keyed", entry)
}

fn main() {
    let mut arguments = std::env::args().skip(1);
    let (Some(mode), Some(Ok(checks))) = (
        arguments.next(),
        arguments.next().map(|checks| checks.parse::<u64>()),
    ) else {
        eprintln!(
            "usage: icount <deny|admit|attribute|counter-deny|counter-admit|attribute-entries|keyed|keyed-overrides> <checks>"
        );
        std::process::exit(2);
    };
    let deny = Rate::new(1, Duration::from_secs(3600)).expect("a valid rate");
    let admit = Rate::new(Rate::MAX_THRESHOLD, Duration::from_secs(3600)).expect("a valid rate");
    let check = |rate| {
        ready(LIMITER.check(black_box("key"), rate))
            .expect("in-process checks do not fail")
            .allowed
    };
    let admitted = match mode.as_str() {
        "deny" => (0..checks).filter(|_| check(deny)).count(),
        "admit" => (0..checks).filter(|_| check(admit)).count(),
        "attribute" => (0..checks).filter(|_| ready(annotated()).is_ok()).count(),
        "attribute-entries" => {
            LIMITER
                .set_limits(other_scopes(Limits::new()))
                .expect("limits accepted");
            (0..checks).filter(|_| ready(annotated()).is_ok()).count()
        }
        "keyed" => (0..checks)
            .filter(|_| ready(keyed(black_box("key-5000"))).is_ok())
            .count(),
        "keyed-overrides" => {
            LIMITER
                .set_limits(overrides(other_scopes(Limits::new())))
                .expect("limits accepted");
            (0..checks)
                .filter(|_| ready(keyed(black_box("key-5000"))).is_ok())
                .count()
        }
        "counter-deny" => (0..checks)
            .filter(|_| check(deny.with_algorithm(COUNTER)))
            .count(),
        "counter-admit" => (0..checks)
            .filter(|_| check(admit.with_algorithm(COUNTER)))
            .count(),
        other => {
            eprintln!(
                "unknown mode `{other}`: deny, admit, attribute, counter-deny, counter-admit, attribute-entries, keyed or keyed-overrides"
            );
            std::process::exit(2);
        }
    };
    println!("{mode}: {admitted} of {checks} checks admitted");
}
