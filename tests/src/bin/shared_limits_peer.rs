//! A second process following the limits shared through Redis (for the suite's
//! `shared_limits::a_change_reaches_another_process`): with a Redis URL, a key prefix, a scope
//! and a threshold, it builds a limiter that follows the shared limits, prints `ready` once it
//! has read them, then checks the scope (a hand check, each with a key of its own) until the
//! threshold in force is the one given, prints `applied` and exits; it gives up after 30 s.

use std::io::Write as _;
use std::time::{Duration, Instant};

use ratelimit_runtime::{Limiter, Rate};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(prefix), Some(scope), Some(threshold)) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        eprintln!("usage: shared_limits_peer <redis url> <key prefix> <scope> <threshold>");
        std::process::exit(2);
    };
    let threshold: u64 = threshold.parse().expect("a threshold");
    let limiter = Limiter::builder()
        .redis_url(&url)
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(5))
        .shared_limits()
        .build()
        .expect("a Redis limiter");
    limiter
        .shared_limits()
        .refresh()
        .await
        .expect("the shared limits read");
    println!("ready");
    std::io::stdout().flush().expect("stdout");
    let code = Rate::new(1, Duration::from_secs(3_600)).expect("a rate");
    let started = Instant::now();
    for probe in 0_u64.. {
        let key = format!("probe-{probe}");
        let decision = limiter
            .scope(&scope)
            .check(&key, code)
            .await
            .expect("a check");
        if decision.limit == threshold {
            println!("applied");
            std::io::stdout().flush().expect("stdout");
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "never applied");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
