//! [`Journal`]: a `tracing` subscriber that writes down the runtime's events at info level and
//! above, as `<level> <fields>`, for tests of what the runtime logs (an outage once, never a
//! key). Set it for one thread (`tracing::subscriber::set_default`), in a test binary of its
//! own: a callsite that other threads, without a subscriber, have cached as disabled stays
//! disabled.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// The events seen, in order (clones share them).
#[derive(Clone, Default)]
pub struct Journal(Arc<Mutex<Vec<String>>>);

impl Journal {
    /// Every line written down so far.
    ///
    /// # Panics
    ///
    /// When a thread panicked while writing.
    #[must_use]
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// Forgets what was written down so far.
    ///
    /// # Panics
    ///
    /// When a thread panicked while writing.
    pub fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

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
