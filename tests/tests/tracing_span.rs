//! The check runs in a `ratelimit.check` span (debug level, field `scope`, never the key),
//! child of the caller's; inside it, a trace event per admission and a debug event per denial
//! with the scope, the key and the retry-after. One test in its own binary: a subscriber set
//! for one thread does not see callsites that other threads, without one, have cached as
//! disabled.

use std::fmt::Write as _;
use std::future::Future;
use std::time::Duration;

use ratelimit_runtime::{Limiter, Rate, RateLimitError, rate_limit};

#[rate_limit(period = 60, threshold = 1, name = "app.login", key = user, limiter = limiter)]
async fn login(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// A subscriber that writes down spans and events: `span <name> <fields>` and
/// `<level> in <span> <fields>`.
#[derive(Clone, Default)]
struct Journal(std::sync::Arc<std::sync::Mutex<Journaled>>);

#[derive(Default)]
struct Journaled {
    names: Vec<&'static str>,
    stack: Vec<usize>,
    lines: Vec<String>,
}

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl tracing::Subscriber for Journal {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Fields(String::new());
        span.record(&mut fields);
        let mut journal = self.0.lock().unwrap();
        let name = span.metadata().name();
        journal.lines.push(format!(
            "{} span {name}{}",
            span.metadata().level(),
            fields.0
        ));
        journal.names.push(name);
        tracing::span::Id::from_u64(journal.names.len() as u64)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        let mut journal = self.0.lock().unwrap();
        let span = journal
            .stack
            .last()
            .map_or("-", |&index| journal.names[index - 1]);
        let line = format!("{} in {span}{}", event.metadata().level(), fields.0);
        journal.lines.push(line);
    }
    fn enter(&self, span: &tracing::span::Id) {
        let index = usize::try_from(span.into_u64()).unwrap();
        self.0.lock().unwrap().stack.push(index);
    }
    fn exit(&self, _: &tracing::span::Id) {
        self.0.lock().unwrap().stack.pop();
    }
}

/// Polls a check of the in-process store, which is ready on the first poll.
fn ready<T>(future: impl Future<Output = T>) -> T {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(future).poll(&mut context) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => panic!("the check is not ready at once"),
    }
}

#[test]
fn checks_run_in_a_span_named_with_the_scope_never_the_key() {
    let journal = Journal::default();
    tracing::subscriber::with_default(journal.clone(), || {
        let limiter = Limiter::memory();
        ready(login(&limiter, "user:7")).unwrap();
        ready(login(&limiter, "user:7")).unwrap_err();
        let rate = Rate::new(1, Duration::from_secs(60)).unwrap();
        ready(limiter.check("by-hand", rate)).unwrap();
    });
    let mut lines = journal.0.lock().unwrap().lines.clone();
    // The wait is a few microseconds short of the minute.
    let denial = &mut lines[3];
    let wait = denial.rfind(" retry_after=Some(").unwrap();
    assert!(denial.ends_with("s)"), "{denial}");
    denial.truncate(wait);
    assert_eq!(
        *lines,
        [
            r#"DEBUG span ratelimit.check scope="app.login""#,
            r#"TRACE in ratelimit.check message=rate limit admitted the call scope="app.login""#,
            r#"DEBUG span ratelimit.check scope="app.login""#,
            r#"DEBUG in ratelimit.check message=rate limit denied the call scope="app.login" key="user:7""#,
            "DEBUG span ratelimit.check",
        ]
    );
    for line in &lines {
        assert!(
            !line.contains("user:7") || line.starts_with("DEBUG in") || line.starts_with("TRACE"),
            "the key above debug: {line}"
        );
    }
}
