//! `#[rate_limit(concurrency = 2)]` on an async fn, called five times at once: two calls run,
//! three are denied before their body runs (every slot held); once the two end, their slots
//! are free again. Then the same with `wait`: the five all run, never more than two at once.
//!
//! In process by default; through Redis when `REDIS_URL` (or `RATELIMIT_REDIS_URL`) is set,
//! where the limit holds across every process sharing it, e.g.
//! `REDIS_URL=redis://127.0.0.1:6379/ cargo run -p examples --example concurrency`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ratelimit_runtime::{RateLimitError, rate_limit, set_global};

/// Exports running now, and the most ever at once.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
static MOST: AtomicUsize = AtomicUsize::new(0);

/// An export: at most two running at once per tenant.
#[rate_limit(concurrency = 2, key = tenant)]
async fn export(tenant: &str) -> Result<&'static str, RateLimitError> {
    work().await;
    Ok("exported")
}

/// The same, each call waiting up to 5 s for a slot instead of failing at once.
#[rate_limit(concurrency = 2, key = tenant, wait = "5s", name = "export.waiting")]
async fn export_waiting(tenant: &str) -> Result<&'static str, RateLimitError> {
    work().await;
    Ok("exported")
}

async fn work() {
    let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
    MOST.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    RUNNING.fetch_sub(1, Ordering::SeqCst);
}

#[tokio::main]
async fn main() {
    let (limiter, store) = examples::limiter_from_env().unwrap_or_else(|error| {
        eprintln!("cannot use that Redis: {error}");
        std::process::exit(2);
    });
    set_global(limiter).expect("the default limiter is set once, before any call");
    println!("store: {store}");
    // A tenant unique to this run.
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros());
    let tenant = format!("tenant-{run}");

    // Five calls at once, each on a task of its own.
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let tenant = tenant.clone();
            tokio::spawn(async move { export(&tenant).await })
        })
        .collect();
    for (call, task) in calls.into_iter().enumerate() {
        match task.await.expect("a call") {
            Ok(done) => println!("call {}: {done}", call + 1),
            Err(RateLimitError::Denied(denied)) => println!(
                "call {}: denied, {} of {} in flight",
                call + 1,
                denied.decision().limit - denied.decision().remaining,
                denied.decision().limit
            ),
            Err(error) => println!("call {}: error: {error}", call + 1),
        }
    }
    println!("after they ended: {:?}", export(&tenant).await);

    MOST.store(0, Ordering::SeqCst);
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let tenant = tenant.clone();
            tokio::spawn(async move { export_waiting(&tenant).await })
        })
        .collect();
    let mut exported = 0;
    for task in calls {
        exported += usize::from(task.await.expect("a call").is_ok());
    }
    println!(
        "with wait: {exported} of 5 exported, at most {} at once",
        MOST.load(Ordering::SeqCst)
    );
}
