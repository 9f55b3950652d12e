//! governor's instructions per check, for callgrind: the reference of `icount`'s counts.
//! `icount_governor <deny|admit> <checks>` makes that many `check_key`s of one key, with
//! `icount`'s quotas (denied: one per hour; admitted: `u32::MAX` per second), on one thread.
//! A binary of its own: in `icount`'s, governor's code changed how the compiler laid out the
//! checks measured beside it (the attribute's count moved by 60 instructions).
//!
//! ```sh
//! cargo build --release -p benches --bin icount_governor
//! valgrind --tool=callgrind --callgrind-out-file=cg.out target/release/icount_governor deny 200000
//! ```

use std::hint::black_box;
use std::num::NonZeroU32;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

fn main() {
    let mut arguments = std::env::args().skip(1);
    let (Some(mode), Some(Ok(checks))) = (
        arguments.next(),
        arguments.next().map(|checks| checks.parse::<u64>()),
    ) else {
        eprintln!("usage: icount_governor <deny|admit> <checks>");
        std::process::exit(2);
    };
    let quota = match mode.as_str() {
        "deny" => Quota::per_hour(NonZeroU32::MIN),
        "admit" => Quota::per_second(NonZeroU32::MAX),
        other => {
            eprintln!("unknown mode `{other}`: deny or admit");
            std::process::exit(2);
        }
    };
    let governor: DefaultKeyedRateLimiter<&str> = RateLimiter::keyed(quota);
    let admitted = (0..checks)
        .filter(|_| governor.check_key(&black_box("key")).is_ok())
        .count();
    println!("governor {mode}: {admitted} of {checks} checks admitted");
}
