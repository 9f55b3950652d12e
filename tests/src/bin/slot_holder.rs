//! A process holding slots of a concurrency limit (for the suite's
//! `concurrency::a_killed_process_frees_its_slots_within_the_slot_time`): with a Redis URL, a
//! key prefix, a key, a number of slots and a slot time in seconds, it takes that many slots
//! of the key (its limit allows as many), prints `held`, and keeps them (renewed) until it is
//! killed.

use std::io::Write as _;
use std::time::Duration;

use ratelimit_runtime::{Concurrency, Limiter};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(prefix), Some(key), Some(slots), Some(slot_time)) = (
        args.next(),
        args.next(),
        args.next(),
        args.next(),
        args.next(),
    ) else {
        eprintln!("usage: slot_holder <redis url> <key prefix> <key> <slots> <slot time, s>");
        std::process::exit(2);
    };
    let slots: u64 = slots.parse().expect("a number of slots");
    let slot_time = Duration::from_secs(slot_time.parse().expect("a slot time"));
    let concurrency = Concurrency::new(slots)
        .and_then(|limit| limit.with_slot_time(slot_time))
        .expect("a concurrency limit");
    let limiter = Limiter::builder()
        .redis_url(&url)
        .key_prefix(&prefix)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("a Redis limiter");
    let mut held = Vec::new();
    for _ in 0..slots {
        held.push(limiter.acquire(&key, concurrency).await.expect("a slot"));
    }
    println!("held");
    std::io::stdout().flush().expect("stdout");
    std::future::pending::<()>().await;
}
