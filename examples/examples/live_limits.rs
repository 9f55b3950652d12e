//! A limit changed while the program runs, by its limits file: `login` admits 2 calls a
//! minute per user in code; the program writes a `limits.toml` raising it to 5 for one user
//! and blocking another, then makes a bad edit (rejected: the limits in force stay), then turns
//! the scope off, each change seen within moments as the file is replaced (as an editor or a
//! ConfigMap update replaces it). What the limiter logs (each change at info, a rejection at
//! error) goes to a `tracing` subscriber, which this example does not install: it prints
//! `Limiter::limits_rejected` instead.
//!
//! `cargo run -p examples --example live_limits --features limits-file`

use std::path::Path;
use std::time::Duration;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

#[rate_limit(name = "login", period = 60, threshold = 2, key = user, limiter = limiter)]
async fn login(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// Replaces the file at `path` by `text`, written beside it and renamed over it.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let next = path.with_extension("toml.new");
    std::fs::write(&next, text)?;
    std::fs::rename(&next, path)
}

/// Three calls of each user, and what each got.
async fn round(limiter: &Limiter, what: &str) {
    println!("{what}");
    for user in ["alice", "bob", "mallory"] {
        let mut answers = Vec::new();
        for _ in 0..3 {
            answers.push(match login(limiter, user).await {
                Ok(()) => "admitted".to_owned(),
                Err(RateLimitError::Denied(denied)) => format!(
                    "denied (retry after {}s)",
                    denied.decision().retry_after.unwrap_or_default().as_secs()
                ),
                Err(error) => format!("error: {error}"),
            });
        }
        println!("  {user:8} {}", answers.join(", "));
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("live-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("limits.toml");
    std::fs::write(&path, "# No entries: every limit as its code says.\n")?;
    let limiter = Limiter::builder().limits_file(&path).build()?;
    println!("limits file: {}", path.display());

    round(&limiter, "the code's limit, 2 a minute:").await;

    replace(
        &path,
        r#"
[scopes.login.keys]
alice = { threshold = 5, period = "1m" }   # a bigger plan: 3 more in the same log
mallory = { block = true }                 # blocked for a period at a time
"#,
    )?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    round(
        &limiter,
        "after the file raised alice's limit and blocked mallory:",
    )
    .await;

    replace(&path, "[scopes.login]\nthreshold = 0\nperiod = \"1m\"\n")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rejected = format!(
        "a bad edit (threshold 0) is rejected ({} so far), the limits in force stay:",
        limiter.limits_rejected()
    );
    round(&limiter, &rejected).await;

    replace(&path, "[scopes.login]\nmode = \"off\"\n")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    round(&limiter, "after the file turned the scope off:").await;

    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
