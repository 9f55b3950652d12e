//! A process that takes quota leases of one key and dies holding one (for the suite's
//! `leases::a_killed_process_holding_a_lease_admits_nothing_more`): with a Redis URL, a key
//! prefix and a threshold per hour, it checks the key `held` (leased) until its lease holds a
//! reserve, prints how many calls it was admitted, and aborts without giving anything back.

use std::io::Write as _;
use std::time::Duration;

use ratelimit_runtime::{Limiter, Rate};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(prefix), Some(threshold)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: lease_holder <redis url> <key prefix> <threshold per hour>");
        std::process::exit(2);
    };
    let threshold: u64 = threshold.parse().expect("a threshold");
    let rate = Rate::new(threshold, Duration::from_secs(3_600))
        .expect("a valid rate")
        .leased();
    let limiter = Limiter::builder()
        .redis_url(&url)
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a Redis limiter");
    // Leases grow from one admission: after 40 calls of a threshold of 320 (leases of at most
    // 20), the last lease holds a reserve, spent only in part.
    let mut admitted = 0;
    for _ in 0..40 {
        if limiter.check("held", rate).await.expect("a check").allowed {
            admitted += 1;
        }
    }
    println!("{admitted}");
    std::io::stdout().flush().expect("stdout");
    std::process::abort();
}
