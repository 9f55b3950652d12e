//! Limits shared by two processes through Redis: this program starts a second copy of itself
//! (the follower), then raises `login`'s limit from 2 to 5 a minute and turns the limiter off,
//! each change written once to Redis (`Limiter::shared_limits`); the follower, which only
//! follows the shared limits (`LimiterBuilder::shared_limits`), prints each one as its own
//! checks take it, and this process prints how long it took to get there: about a quarter of
//! a second, the most it takes, since the follower has just read the shared limits when this
//! process changes them (a change made at any moment waits half that at the median).
//!
//! `cargo run -p examples --example shared_limits` (Redis at `REDIS_URL`, else
//! `redis://127.0.0.1:6379`). It prints:
//!
//! ```text
//! follower: ready
//! follower: login: 2 a minute
//! this process: login raised to 5 a minute for every instance
//! follower: login: 5 a minute (252.3ms later)
//! this process: the limiter turned off for every instance
//! follower: off (250.1ms later)
//! ```

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ratelimit_runtime::{Limiter, Mode, Rate, RateLimitError, ScopeLimits, rate_limit};

/// Where the example keeps its keys (and its shared limits) in Redis.
const PREFIX: &str = "shared-limits-example:";

/// 2 calls a minute per user in code; returns the threshold the call was checked against
/// (`None`: not checked, the limiter is off).
#[rate_limit(name = "login", period = 60, threshold = 2, key = user, limiter = limiter, decision = d)]
async fn login(limiter: &Limiter, user: &str) -> Result<Option<u64>, RateLimitError> {
    Ok((!d.is_exempt()).then_some(d.limit))
}

fn limiter() -> Result<Limiter, RateLimitError> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    Limiter::builder()
        .redis_url(url)
        .key_prefix(PREFIX)
        .shared_limits()
        .build()
}

/// The follower: calls `login` for a new user every 10 ms, and prints each threshold it is
/// checked against as it changes, until the limiter is off.
async fn follow() -> Result<(), Box<dyn std::error::Error>> {
    let limiter = limiter()?;
    // In force before the first call.
    limiter.shared_limits().refresh().await?;
    println!("ready");
    let mut seen = Some(0);
    for call in 0_u64.. {
        let threshold = login(&limiter, &format!("user-{}-{call}", std::process::id())).await?;
        if threshold != seen {
            match threshold {
                Some(threshold) => println!("login: {threshold} a minute"),
                None => println!("off"),
            }
            std::io::stdout().flush()?;
            seen = threshold;
        }
        if threshold.is_none() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("follower") {
        return follow().await;
    }
    let limiter = limiter()?;
    let shared = limiter.shared_limits();
    // From the code's limits.
    shared.remove_scope("login").await?;
    shared.set_mode(None).await?;

    let mut follower = Command::new(std::env::current_exe()?)
        .arg("follower")
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(follower.stdout.take().ok_or("no output")?).lines();
    let mut next_line = move || -> std::io::Result<String> {
        lines
            .next()
            .unwrap_or_else(|| Ok("(the follower ended)".into()))
    };
    println!("follower: {}", next_line()?);
    println!("follower: {}", next_line()?);

    let changed = Instant::now();
    let rate = Rate::new(5, Duration::from_secs(60))?;
    shared
        .set_scope("login", ScopeLimits::new().rate(rate))
        .await?;
    println!("this process: login raised to 5 a minute for every instance");
    println!("follower: {} ({:?} later)", next_line()?, changed.elapsed());

    let changed = Instant::now();
    shared.set_mode(Some(Mode::Off)).await?;
    println!("this process: the limiter turned off for every instance");
    println!("follower: {} ({:?} later)", next_line()?, changed.elapsed());
    follower.wait()?;

    // Back to the code's limits.
    shared.remove_scope("login").await?;
    shared.set_mode(None).await?;
    Ok(())
}
