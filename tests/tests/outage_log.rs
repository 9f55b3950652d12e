//! An outage is logged once when it starts (warn) and once when it ends (info, with its length
//! and how many checks the policy answered), never once per call, and never with the key.
//! One test in its own binary: a subscriber set for one thread does not see callsites that
//! other threads, without one, have cached as disabled.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ratelimit_runtime::{FailurePolicy, Limiter, Rate};
use tests::TestRedis;

/// Writes down the runtime's events at info level and above: `<level> <message> <fields>`.
#[derive(Clone, Default)]
struct Journal(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl tracing::Subscriber for Journal {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target().starts_with("ratelimit_runtime")
            && *metadata.level() <= tracing::Level::INFO
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        self.0
            .lock()
            .unwrap()
            .push(format!("{}{}", event.metadata().level(), fields.0));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn an_outage_is_logged_once_when_it_starts_and_once_when_it_ends() {
    let journal = Journal::default();
    let _guard = tracing::subscriber::set_default(journal.clone());

    let port = tests::spare_port();
    let mut redis = TestRedis::start_on(port).expect("start redis-server");
    let limiter = Limiter::builder()
        .redis_url(redis.url())
        .key_prefix(tests::unique_prefix("outage"))
        .failure_policy(FailurePolicy::Local)
        .timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let rate = Rate::new(1_000, Duration::from_secs(60)).unwrap();
    let key = "user:secret-id-42";
    // Connected. A loaded machine may make the first check time out: that outage is not this
    // test's, and is forgotten with what it logged.
    tests::connected(&limiter, "warm-up").await;
    journal.0.lock().unwrap().clear();
    let before = limiter.policy_answers();

    redis.stop();
    for _ in 0..200 {
        assert!(limiter.check(key, rate).await.unwrap().allowed);
    }
    assert_eq!(limiter.policy_answers() - before, 200);

    let _redis = TestRedis::start_on(port).expect("start redis-server again");
    let back = Instant::now();
    tests::wait_for(
        "checks go back to Redis",
        tests::STATE_DEADLINE,
        async || {
            if !limiter.is_degraded() {
                return Some(());
            }
            let _ = limiter.check(key, rate).await.unwrap();
            None
        },
    )
    .await;
    eprintln!(
        "back on Redis {:?} after it accepted connections",
        back.elapsed()
    );
    let answered = limiter.policy_answers() - before;

    let lines = journal.0.lock().unwrap().clone();
    let starts: Vec<_> = lines
        .iter()
        .filter(|line| line.starts_with("WARN"))
        .collect();
    let ends: Vec<_> = lines
        .iter()
        .filter(|line| line.starts_with("INFO"))
        .collect();
    assert_eq!(starts.len(), 1, "{lines:#?}");
    assert!(
        starts[0].contains("rate limit store unavailable"),
        "{lines:#?}"
    );
    assert_eq!(ends.len(), 1, "{lines:#?}");
    assert!(ends[0].contains("answers again"), "{lines:#?}");
    assert!(
        ends[0].contains(&format!("answered_by_policy={answered}")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().all(|line| !line.contains("secret-id-42")),
        "{lines:#?}"
    );
    eprintln!("{lines:#?}");
}
