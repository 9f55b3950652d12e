//! What an instance following the limits shared through Redis logs: each change applied, at
//! info with source `redis` and its scope; an entry written by hand that does not parse, at
//! error naming its scope, never its key; an outage of the reads once, at warn, and their
//! return at info. Alone in its binary: the follower logs on a thread of its own, so the
//! journal is the process's global subscriber.

use std::time::Duration;

use ratelimit_runtime::{Limiter, Rate, ScopeLimits};
use tests::journal::Journal;
use tests::proxy::{Fault, FaultProxy};
use tests::{TestRedis, unique_prefix, wait_for};

/// Whether a line of `journal` at `level` holds every one of `words`.
fn logged(journal: &Journal, level: &str, words: &[&str]) -> bool {
    journal
        .lines()
        .iter()
        .any(|line| line.starts_with(level) && words.iter().all(|word| line.contains(word)))
}

#[tokio::test]
async fn an_instance_logs_each_change_each_skipped_entry_and_its_outages() {
    let journal = Journal::default();
    tracing::subscriber::set_global_default(journal.clone()).expect("the only subscriber");
    let redis = TestRedis::start_private();
    let proxy = FaultProxy::start(redis.address());
    let prefix = unique_prefix("shared-log");
    let limiter = Limiter::builder()
        .redis_url(proxy.url())
        .key_prefix(&prefix)
        .timeout(Duration::from_millis(500))
        .shared_limits()
        .build()
        .expect("a limiter");
    limiter.shared_limits().refresh().await.expect("read");

    let mut connection = redis.connection().await;
    for (field, value) in [
        ("key:hand/user-secret-77", "block until=later"),
        ("scope:hand-bad", "threshold=ten period=1h"),
        ("scope:hand-good", "threshold=6 period=1h"),
    ] {
        tests::write_shared_by_hand(&mut connection, &prefix, field, value).await;
    }
    let deadline = Duration::from_secs(10);
    wait_for("the good entry logged", deadline, async || {
        logged(
            &journal,
            "INFO",
            &["rate changed", "source=\"redis\"", "scope=\"hand-good\""],
        )
        .then_some(())
    })
    .await;
    assert!(
        logged(
            &journal,
            "ERROR",
            &["skipped", "scope \"hand-bad\"", "not a whole number"]
        ),
        "{:#?}",
        journal.lines()
    );
    assert!(
        logged(
            &journal,
            "ERROR",
            &[
                "skipped",
                "a key's override in scope \"hand\"",
                "not a time"
            ]
        ),
        "{:#?}",
        journal.lines()
    );
    assert!(
        journal
            .lines()
            .iter()
            .all(|line| !line.contains("user-secret-77")),
        "a key logged above debug: {:#?}",
        journal.lines()
    );

    // An outage of the reads: once at warn, then at info when they come back; a change made
    // meanwhile applies then.
    proxy.set(Fault::Refuse);
    wait_for("the outage logged", deadline, async || {
        logged(&journal, "WARN", &["cannot be read", "source=\"redis\""]).then_some(())
    })
    .await;
    let writer = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(&prefix)
        .shared_limits()
        .build()
        .expect("a limiter");
    let rate = Rate::new(9, Duration::from_secs(3_600)).expect("a rate");
    writer
        .shared_limits()
        .set_scope("during", ScopeLimits::new().rate(rate))
        .await
        .expect("written");
    proxy.set(Fault::Pass);
    wait_for("the return logged", deadline, async || {
        logged(&journal, "INFO", &["read again", "source=\"redis\""]).then_some(())
    })
    .await;
    wait_for(
        "the change made during the outage applied",
        deadline,
        async || logged(&journal, "INFO", &["rate changed", "scope=\"during\""]).then_some(()),
    )
    .await;
    let warned = journal
        .lines()
        .iter()
        .filter(|line| line.starts_with("WARN") && line.contains("cannot be read"))
        .count();
    assert_eq!(warned, 1, "{:#?}", journal.lines());
    redis.clean_up(&prefix).await;
}
