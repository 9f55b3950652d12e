//! Every shape of `async fn` that `#[rate_limit]` applies to, each called until it is denied:
//! the admitted calls run the body, the denied one does not. Each function has a limiter of its
//! own (`limiter = limiter!()`, a `static` per function, or a field of `self`), never the
//! process-wide default.

use std::fmt::Display;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

/// A limiter of its own for the function whose attribute names it (a `static` per call site).
macro_rules! limiter {
    () => {{
        static LIMITER: OnceLock<Limiter> = OnceLock::new();
        LIMITER.get_or_init(Limiter::memory)
    }};
}

/// How many times a body ran.
struct Runs(AtomicUsize);

impl Runs {
    const fn new() -> Self {
        Runs(AtomicUsize::new(0))
    }

    fn run(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// The error is a denial of `scope`, keyed by `key`.
#[track_caller]
fn assert_denied(err: &RateLimitError, scope: &str, key: Option<&str>) {
    let denied = err.as_denied().unwrap_or_else(|| panic!("a denial: {err}"));
    assert_eq!(denied.scope(), scope);
    assert_eq!(denied.key(), key);
}

// ---------------------------------------------------------------------------------------------
// Free functions: visibility, nested modules, attributes kept.

mod outer {
    pub(crate) mod inner {
        use super::super::{Limiter, OnceLock, RateLimitError, Runs, rate_limit};

        pub(crate) static RUNS: Runs = Runs::new();

        /// Documented, `#[must_use]`, `#[inline]`, and with an `#[allow]` that is still needed
        /// after the expansion (for the unused argument).
        #[must_use = "the greeting is the point"]
        #[allow(unused_variables)]
        #[rate_limit(period = 60, threshold = 2, key = who, limiter = limiter!())]
        #[inline]
        pub(crate) async fn greet(who: &str, unused: u8) -> Result<String, RateLimitError> {
            RUNS.run();
            Ok(format!("hi {who}"))
        }

        // Only one of the two is compiled: `#[cfg]` is kept (or applied) either side of ours.
        #[cfg(not(test))]
        #[rate_limit(period = 60, threshold = 1, limiter = limiter!())]
        pub(crate) async fn configured() -> Result<&'static str, RateLimitError> {
            Ok("compiled out")
        }

        #[rate_limit(period = 60, threshold = 1, limiter = limiter!())]
        #[cfg(test)]
        pub(crate) async fn configured() -> Result<&'static str, RateLimitError> {
            Ok("compiled in")
        }
    }
}

#[tokio::test]
async fn free_fn_in_nested_modules_with_attributes_kept() {
    use outer::inner;
    assert_eq!(inner::greet("ann", 0).await.unwrap(), "hi ann");
    assert_eq!(inner::greet("ann", 0).await.unwrap(), "hi ann");
    let err = inner::greet("ann", 0).await.unwrap_err();
    assert_denied(&err, "suite::shapes::outer::inner::greet", Some("ann"));
    assert_eq!(inner::RUNS.count(), 2);

    assert_eq!(inner::configured().await.unwrap(), "compiled in");
    let err = inner::configured().await.unwrap_err();
    assert_denied(&err, "suite::shapes::outer::inner::configured", None);
}

// `#[tracing::instrument]` written above ours (it expands first and keeps ours) and below it.

static TRACED_RUNS: Runs = Runs::new();

#[tracing::instrument(skip_all, fields(user = %user))]
#[rate_limit(period = 60, threshold = 1, key = user, limiter = limiter!())]
async fn traced_outside(user: u64) -> Result<u64, RateLimitError> {
    TRACED_RUNS.run();
    tracing::info!("inside");
    Ok(user)
}

#[rate_limit(period = 60, threshold = 1, key = user, limiter = limiter!())]
#[tracing::instrument(skip_all, err, fields(user = %user))]
async fn traced_inside(user: u64) -> Result<u64, RateLimitError> {
    TRACED_RUNS.run();
    Ok(user)
}

#[tokio::test]
async fn tracing_instrument_before_or_after() {
    assert_eq!(traced_outside(1).await.unwrap(), 1);
    assert_denied(
        &traced_outside(1).await.unwrap_err(),
        "suite::shapes::traced_outside",
        Some("1"),
    );
    assert_eq!(traced_inside(2).await.unwrap(), 2);
    assert_denied(
        &traced_inside(2).await.unwrap_err(),
        "suite::shapes::traced_inside",
        Some("2"),
    );
    assert_eq!(TRACED_RUNS.count(), 2);
}

// ---------------------------------------------------------------------------------------------
// Methods: every receiver, the key read from fields of `self`.

struct Account {
    id: String,
    balance: u64,
    limiter: Limiter,
    runs: Runs,
}

impl Account {
    fn new(id: &str, limiter: &Limiter) -> Self {
        Account {
            id: id.to_owned(),
            balance: 0,
            limiter: limiter.clone(),
            runs: Runs::new(),
        }
    }

    #[rate_limit(period = 60, threshold = 1, key = self.id, limiter = &self.limiter)]
    async fn by_ref(&self) -> Result<u64, RateLimitError> {
        self.runs.run();
        Ok(self.balance)
    }

    #[rate_limit(period = 60, threshold = 1, key = self.id, limiter = &self.limiter)]
    async fn by_mut(&mut self, amount: u64) -> Result<u64, RateLimitError> {
        self.runs.run();
        self.balance += amount;
        Ok(self.balance)
    }

    /// The key borrows `self`, which the body then moves.
    #[rate_limit(period = 60, threshold = 1, key = self.id, limiter = &self.limiter)]
    async fn by_value(self) -> Result<String, RateLimitError> {
        self.runs.run();
        Ok(self.id)
    }

    #[rate_limit(period = 60, threshold = 1, key = self.id, limiter = &self.limiter)]
    async fn by_arc(self: Arc<Self>) -> Result<usize, RateLimitError> {
        self.runs.run();
        Ok(Arc::strong_count(&self))
    }

    #[rate_limit(period = 60, threshold = 1, key = self.id, limiter = &self.limiter)]
    async fn by_pin(mut self: Pin<&mut Self>, amount: u64) -> Result<u64, RateLimitError> {
        self.runs.run();
        self.balance += amount;
        Ok(self.balance)
    }
}

#[tokio::test]
async fn methods_with_every_receiver() {
    let limiter = Limiter::memory();

    let account = Account::new("a", &limiter);
    assert_eq!(account.by_ref().await.unwrap(), 0);
    let err = account.by_ref().await.unwrap_err();
    assert_denied(&err, "suite::shapes::Account::by_ref", Some("a"));
    assert_eq!(account.runs.count(), 1);

    let mut account = Account::new("b", &limiter);
    assert_eq!(account.by_mut(5).await.unwrap(), 5);
    let err = account.by_mut(5).await.unwrap_err();
    assert_denied(&err, "suite::shapes::Account::by_mut", Some("b"));
    assert_eq!((account.balance, account.runs.count()), (5, 1));

    assert_eq!(Account::new("c", &limiter).by_value().await.unwrap(), "c");
    let err = Account::new("c", &limiter).by_value().await.unwrap_err();
    assert_denied(&err, "suite::shapes::Account::by_value", Some("c"));

    let account = Arc::new(Account::new("d", &limiter));
    assert_eq!(Arc::clone(&account).by_arc().await.unwrap(), 2);
    let err = Arc::clone(&account).by_arc().await.unwrap_err();
    assert_denied(&err, "suite::shapes::Account::by_arc", Some("d"));
    assert_eq!(account.runs.count(), 1);

    let mut account = Box::pin(Account::new("e", &limiter));
    assert_eq!(account.as_mut().by_pin(7).await.unwrap(), 7);
    let err = account.as_mut().by_pin(7).await.unwrap_err();
    assert_denied(&err, "suite::shapes::Account::by_pin", Some("e"));
    assert_eq!((account.balance, account.runs.count()), (7, 1));
}

// ---------------------------------------------------------------------------------------------
// Generics, lifetimes, `impl Trait`, patterns.

static GENERIC_RUNS: Runs = Runs::new();

/// Explicit lifetimes, kept as written (clippy would have them elided: its `#[allow]` is kept).
#[rate_limit(period = 60, threshold = 1, key = id, limiter = limiter!())]
#[allow(clippy::needless_lifetimes)]
async fn show<'a, T: Display + ?Sized, K>(value: &'a T, id: K) -> Result<&'a T, RateLimitError>
where
    K: Display + Send,
{
    GENERIC_RUNS.run();
    Ok(value)
}

/// An elided lifetime in an argument and in the return type.
#[rate_limit(period = 60, threshold = 1, key = items.len(), limiter = limiter!())]
async fn first(items: &[u8]) -> Result<Option<&u8>, RateLimitError> {
    GENERIC_RUNS.run();
    Ok(items.first())
}

/// `impl Trait` arguments, one the key, and an `impl Trait` in the `Result`.
#[rate_limit(period = 60, threshold = 1, key = tag, limiter = limiter!())]
async fn total(
    items: impl IntoIterator<Item = u32> + Send,
    tag: &(impl Display + Sync),
) -> Result<impl Display, RateLimitError> {
    GENERIC_RUNS.run();
    Ok(items.into_iter().sum::<u32>())
}

struct Data<T>(T);

/// Pattern arguments; the key reads their bindings.
#[rate_limit(period = 60, threshold = 1, key = format_args!("{a}-{x}"), limiter = limiter!())]
async fn patterns<T: Display>(
    (a, b): (u8, u8),
    Data(x): Data<T>,
) -> Result<String, RateLimitError> {
    GENERIC_RUNS.run();
    Ok(format!("{a}{b}{x}"))
}

struct Wrapper<T>(T);

impl<T: Clone + Display + Sync> Wrapper<T> {
    #[rate_limit(period = 60, threshold = 1, key = self.0, limiter = limiter!())]
    async fn get<U>(&self, other: U) -> Result<(T, U), RateLimitError>
    where
        U: Send,
    {
        GENERIC_RUNS.run();
        Ok((self.0.clone(), other))
    }
}

#[tokio::test]
async fn generics_lifetimes_impl_trait_and_patterns() {
    let value = String::from("v");
    assert_eq!(show(value.as_str(), 1).await.unwrap(), "v");
    assert_denied(
        &show(&5u8, 1).await.unwrap_err(),
        "suite::shapes::show",
        Some("1"),
    );

    let items = [3, 4];
    assert_eq!(first(&items).await.unwrap(), Some(&3));
    assert_denied(
        &first(&[1, 2]).await.unwrap_err(),
        "suite::shapes::first",
        Some("2"),
    );

    assert_eq!(total(vec![1, 2], &"t").await.unwrap().to_string(), "3");
    let Err(err) = total([5], &"t").await else {
        panic!("admitted past the threshold");
    };
    assert_denied(&err, "suite::shapes::total", Some("t"));

    assert_eq!(patterns((1, 2), Data("x")).await.unwrap(), "12x");
    assert_denied(
        &patterns((1, 9), Data("x")).await.unwrap_err(),
        "suite::shapes::patterns",
        Some("1-x"),
    );

    let wrapper = Wrapper(7u8);
    assert_eq!(wrapper.get("u").await.unwrap(), (7, "u"));
    let err = wrapper.get(1.5).await.unwrap_err();
    assert_denied(&err, "suite::shapes::Wrapper<_>::get", Some("7"));

    assert_eq!(GENERIC_RUNS.count(), 5);
}

// ---------------------------------------------------------------------------------------------
// Traits: native `async fn` in an impl, and `#[async_trait]`.

trait Native {
    async fn fetch(&self, id: u64) -> Result<u64, RateLimitError>;
}

struct Service {
    limiter: Limiter,
    runs: Runs,
}

impl Service {
    fn new() -> Self {
        Service {
            limiter: Limiter::memory(),
            runs: Runs::new(),
        }
    }
}

impl Native for Service {
    #[rate_limit(period = 60, threshold = 1, key = id, limiter = &self.limiter)]
    async fn fetch(&self, id: u64) -> Result<u64, RateLimitError> {
        self.runs.run();
        Ok(id)
    }
}

#[tokio::test]
async fn native_async_fn_in_a_trait_impl() {
    let service = Service::new();
    assert_eq!(service.fetch(1).await.unwrap(), 1);
    let err = service.fetch(1).await.unwrap_err();
    assert_denied(
        &err,
        "<suite::shapes::Service as suite::shapes::Native>::fetch",
        Some("1"),
    );
    assert_eq!(service.fetch(2).await.unwrap(), 2);
    assert_eq!(service.runs.count(), 2);
}

#[async_trait]
trait Repository {
    async fn find(&self, id: u64) -> Result<String, RateLimitError>;
    async fn find_traced(&self, id: u64) -> Result<String, RateLimitError>;
    async fn find_traced_too(&self, id: u64) -> Result<String, RateLimitError>;
    async fn take(self: Arc<Self>, (a, b): (u8, u8)) -> anyhow::Result<u16>;

    /// A provided method, limited in the trait itself.
    #[rate_limit(period = 60, threshold = 1, limiter = limiter!())]
    async fn ping(&self) -> Result<&'static str, RateLimitError> {
        Ok("pong")
    }
}

#[async_trait]
impl Repository for Service {
    #[rate_limit(period = 60, threshold = 1, key = id, limiter = &self.limiter)]
    async fn find(&self, id: u64) -> Result<String, RateLimitError> {
        self.runs.run();
        Ok(format!("item {id}"))
    }

    // Ours above `#[tracing::instrument]`, then below it: either order.
    #[rate_limit(period = 60, threshold = 1, key = id, limiter = &self.limiter)]
    #[tracing::instrument(skip(self))]
    async fn find_traced(&self, id: u64) -> Result<String, RateLimitError> {
        self.runs.run();
        Ok(format!("traced {id}"))
    }

    #[tracing::instrument(skip(self))]
    #[rate_limit(period = 60, threshold = 1, key = id, limiter = &self.limiter)]
    async fn find_traced_too(&self, id: u64) -> Result<String, RateLimitError> {
        self.runs.run();
        Ok(format!("traced too {id}"))
    }

    /// `self: Arc<Self>`, moved into the future; the limiter is a field of it.
    #[rate_limit(period = 60, threshold = 1, limiter = &self.limiter)]
    async fn take(self: Arc<Self>, (a, b): (u8, u8)) -> anyhow::Result<u16> {
        self.runs.run();
        Ok(u16::from(a) + u16::from(b))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_trait_methods() {
    let service = Arc::new(Service::new());
    let repository: Arc<dyn Repository + Send + Sync> = service.clone();

    // The future is `Send` (`#[async_trait]` requires it): spawn it.
    let find = tokio::spawn({
        let repository = Arc::clone(&repository);
        async move { repository.find(1).await }
    });
    assert_eq!(find.await.unwrap().unwrap(), "item 1");
    let err = repository.find(1).await.unwrap_err();
    assert_denied(
        &err,
        "<suite::shapes::Service as suite::shapes::Repository>::find",
        Some("1"),
    );

    assert_eq!(repository.find_traced(2).await.unwrap(), "traced 2");
    let err = repository.find_traced(2).await.unwrap_err();
    assert_denied(
        &err,
        "<suite::shapes::Service as suite::shapes::Repository>::find_traced",
        Some("2"),
    );
    assert_eq!(repository.find_traced_too(3).await.unwrap(), "traced too 3");
    let err = repository.find_traced_too(3).await.unwrap_err();
    assert_denied(
        &err,
        "<suite::shapes::Service as suite::shapes::Repository>::find_traced_too",
        Some("3"),
    );
    assert_eq!(service.runs.count(), 3);

    assert_eq!(Arc::clone(&service).take((1, 2)).await.unwrap(), 3);
    let err = Arc::clone(&service).take((1, 2)).await.unwrap_err();
    assert_eq!(service.runs.count(), 4);
    let err = err.downcast::<RateLimitError>().expect("a RateLimitError");
    assert_denied(
        &err,
        "<suite::shapes::Service as suite::shapes::Repository>::take",
        None,
    );

    assert_eq!(repository.ping().await.unwrap(), "pong");
    let err = repository.ping().await.unwrap_err();
    assert!(err.is_denied(), "{err}");
}

/// `#[async_trait(?Send)]`: the future need not be `Send`, and may hold an `Rc`.
#[async_trait(?Send)]
trait Local {
    async fn count(&self, shared: Rc<Runs>) -> Result<usize, RateLimitError>;
}

struct LocalService;

#[async_trait(?Send)]
impl Local for LocalService {
    #[rate_limit(period = 60, threshold = 1, limiter = limiter!())]
    async fn count(&self, shared: Rc<Runs>) -> Result<usize, RateLimitError> {
        tokio::task::yield_now().await;
        shared.run();
        Ok(shared.count())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn async_trait_without_send() {
    let shared = Rc::new(Runs::new());
    assert_eq!(LocalService.count(Rc::clone(&shared)).await.unwrap(), 1);
    let err = LocalService.count(Rc::clone(&shared)).await.unwrap_err();
    assert_denied(
        &err,
        "<suite::shapes::LocalService as suite::shapes::Local>::count",
        None,
    );
    assert_eq!(shared.count(), 1);
}

// ---------------------------------------------------------------------------------------------
// Return types through aliases, and error types with `From<RateLimitError>`.

static ALIAS_RUNS: Runs = Runs::new();

#[rate_limit(period = 60, threshold = 1, limiter = limiter!())]
async fn with_anyhow() -> anyhow::Result<u8> {
    ALIAS_RUNS.run();
    Ok(1)
}

#[rate_limit(period = 60, threshold = 1, limiter = limiter!())]
async fn with_io() -> std::io::Result<u8> {
    ALIAS_RUNS.run();
    Ok(2)
}

mod app {
    use std::time::Duration;

    use super::{Limiter, OnceLock, RateLimitError, Runs, rate_limit};

    pub(crate) static RUNS: Runs = Runs::new();

    #[derive(Debug)]
    pub(crate) enum AppError {
        TooManyRequests(Option<Duration>),
        // Read through `Debug` only.
        #[allow(dead_code)]
        Limiter(RateLimitError),
    }

    impl From<RateLimitError> for AppError {
        fn from(err: RateLimitError) -> Self {
            if err.is_denied() {
                AppError::TooManyRequests(err.retry_after())
            } else {
                AppError::Limiter(err)
            }
        }
    }

    /// Shadows the prelude's `Result`, as many crates do.
    pub(crate) type Result<T> = std::result::Result<T, AppError>;

    #[rate_limit(period = 60, threshold = 1, limiter = limiter!())]
    pub(crate) async fn handler() -> Result<u16> {
        RUNS.run();
        Ok(200)
    }
}

#[tokio::test]
async fn return_types_through_aliases() {
    assert_eq!(with_anyhow().await.unwrap(), 1);
    let err = with_anyhow().await.unwrap_err();
    let err = err
        .downcast_ref::<RateLimitError>()
        .expect("a RateLimitError");
    assert_denied(err, "suite::shapes::with_anyhow", None);

    assert_eq!(with_io().await.unwrap(), 2);
    let err = with_io().await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::QuotaExceeded);
    let inner = err
        .get_ref()
        .and_then(|e| e.downcast_ref::<RateLimitError>());
    assert_denied(
        inner.expect("a RateLimitError"),
        "suite::shapes::with_io",
        None,
    );

    assert_eq!(ALIAS_RUNS.count(), 2);

    assert_eq!(app::handler().await.unwrap(), 200);
    match app::handler().await {
        Err(app::AppError::TooManyRequests(Some(wait))) => {
            assert!(wait <= std::time::Duration::from_secs(60), "{wait:?}");
        }
        other => panic!("expected TooManyRequests, got {other:?}"),
    }
    assert_eq!(app::RUNS.count(), 1);
}

// ---------------------------------------------------------------------------------------------
// `Send`: kept when the original future was `Send`, not required when it was not.

#[rate_limit(period = 60, threshold = 2, key = user, limiter = limiter!())]
async fn send_work(user: String, runs: Arc<Runs>) -> Result<String, RateLimitError> {
    tokio::task::yield_now().await;
    runs.run();
    Ok(user)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_future_spawns_on_a_multi_threaded_runtime() {
    let runs = Arc::new(Runs::new());
    let handles: Vec<_> = (0..4)
        .map(|_| tokio::spawn(send_work("u".to_owned(), Arc::clone(&runs))))
        .collect();
    let mut admitted = 0;
    for handle in handles {
        match handle.await.unwrap() {
            Ok(user) => {
                assert_eq!(user, "u");
                admitted += 1;
            }
            Err(err) => assert_denied(&err, "suite::shapes::send_work", Some("u")),
        }
    }
    assert_eq!((admitted, runs.count()), (2, 2));
}

/// Holds an `Rc` (and a key borrowed from it) across an `.await`: not `Send`, and it need not be.
#[rate_limit(period = 60, threshold = 1, key = shared.0.load(Ordering::SeqCst), limiter = limiter!())]
async fn not_send(shared: Rc<Runs>) -> Result<usize, RateLimitError> {
    let held = Rc::clone(&shared);
    tokio::task::yield_now().await;
    held.run();
    Ok(held.count())
}

#[test]
fn non_send_future_runs_on_a_local_set() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, async {
        let shared = Rc::new(Runs::new());
        let first = tokio::task::spawn_local(not_send(Rc::clone(&shared)));
        assert_eq!(first.await.unwrap().unwrap(), 1);
        // The key is the count, now 1: a new key is admitted, then denied.
        assert_eq!(not_send(Rc::clone(&shared)).await.unwrap(), 2);
        let _ = shared.0.fetch_sub(1, Ordering::SeqCst);
        let err = not_send(Rc::clone(&shared)).await.unwrap_err();
        assert_denied(&err, "suite::shapes::not_send", Some("1"));
        assert_eq!(shared.count(), 1);
    });
}

// ---------------------------------------------------------------------------------------------
// A key that borrows arguments the body then moves.

struct Order {
    customer: String,
    items: Vec<u32>,
}

static ORDER_RUNS: Runs = Runs::new();

#[rate_limit(
    period = 60,
    threshold = 1,
    key = format!("{}/{}", order.customer, note),
    limiter = limiter!()
)]
async fn place(order: Order, note: String) -> Result<(String, usize, String), RateLimitError> {
    ORDER_RUNS.run();
    let Order { customer, items } = order;
    Ok((customer, items.len(), note))
}

#[tokio::test]
async fn key_borrows_arguments_the_body_moves() {
    let order = || Order {
        customer: "ann".to_owned(),
        items: vec![1, 2],
    };
    assert_eq!(
        place(order(), "n".to_owned()).await.unwrap(),
        ("ann".to_owned(), 2, "n".to_owned())
    );
    let err = place(order(), "n".to_owned()).await.unwrap_err();
    assert_denied(&err, "suite::shapes::place", Some("ann/n"));
    assert_eq!(ORDER_RUNS.count(), 1);
}
