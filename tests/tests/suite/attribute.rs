//! Runtime behaviour of `#[rate_limit]`: what the generated code does when called. Each test
//! has its own in-process limiter, passed with `limiter = `, so tests never share a counter
//! (the process-wide default has its own test binaries).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ratelimit_runtime::{Limiter, RateLimitError, rate_limit};

/// A limiter of its own for each test that needs a free fn (a `static` per test).
macro_rules! limiter {
    () => {{
        static LIMITER: OnceLock<Limiter> = OnceLock::new();
        LIMITER.get_or_init(Limiter::memory)
    }};
}

fn greet_limiter() -> &'static Limiter {
    limiter!()
}

#[rate_limit(period = 60, threshold = 2, limiter = greet_limiter())]
async fn greet(name: &str) -> Result<String, RateLimitError> {
    Ok(format!("hello {name}"))
}

#[tokio::test]
async fn free_fn_admits_threshold_calls_then_denies_with_its_path_as_scope() {
    assert_eq!(greet("a").await.unwrap(), "hello a");
    assert_eq!(greet("b").await.unwrap(), "hello b");
    let err = greet("c").await.unwrap_err();
    let denied = err.as_denied().expect("a denial");
    assert_eq!(denied.scope(), "suite::attribute::greet");
    assert_eq!(denied.key(), None);
    assert!(!denied.decision().allowed);
    let retry = err.retry_after().expect("a retry-after");
    assert!(
        retry > Duration::from_secs(59) && retry <= Duration::from_secs(60),
        "{retry:?}"
    );
    // The attribute's key is the scope alone: the limiter holds two admissions of it.
    let rate = ratelimit_runtime::Rate::new(2, Duration::from_secs(60)).unwrap();
    let decision = greet_limiter()
        .check("suite::attribute::greet", rate)
        .await
        .unwrap();
    assert!(!decision.allowed, "{decision:?}");
}

fn body_limiter() -> &'static Limiter {
    limiter!()
}

static BODY_RUNS: AtomicUsize = AtomicUsize::new(0);

#[rate_limit(period = 60, threshold = 3, limiter = body_limiter())]
async fn counted() -> Result<usize, RateLimitError> {
    Ok(BODY_RUNS.fetch_add(1, Ordering::SeqCst) + 1)
}

#[tokio::test]
async fn denied_call_does_not_run_the_body() {
    for expected in 1..=3 {
        assert_eq!(counted().await.unwrap(), expected);
    }
    for _ in 0..5 {
        assert!(counted().await.unwrap_err().is_denied());
    }
    assert_eq!(BODY_RUNS.load(Ordering::SeqCst), 3);
}

fn keyed_limiter() -> &'static Limiter {
    limiter!()
}

#[rate_limit(period = 60, threshold = 1, key = user_id, limiter = keyed_limiter())]
async fn login(user_id: u64) -> Result<u64, RateLimitError> {
    Ok(user_id)
}

#[tokio::test]
async fn keys_are_counted_apart() {
    assert_eq!(login(1).await.unwrap(), 1);
    assert_eq!(login(2).await.unwrap(), 2);
    let err = login(1).await.unwrap_err();
    let denied = err.as_denied().expect("a denial");
    assert_eq!(denied.scope(), "suite::attribute::login");
    assert_eq!(denied.key(), Some("1"));
    assert!(login(2).await.unwrap_err().is_denied());
    assert_eq!(login(3).await.unwrap(), 3);
    // The stored key is `<scope>:<key>`.
    let rate = ratelimit_runtime::Rate::new(1, Duration::from_secs(60)).unwrap();
    assert!(
        !keyed_limiter()
            .check("suite::attribute::login/3", rate)
            .await
            .unwrap()
            .allowed
    );
    assert!(
        keyed_limiter()
            .check("suite::attribute::login/4", rate)
            .await
            .unwrap()
            .allowed
    );
}

fn named_limiter() -> &'static Limiter {
    limiter!()
}

#[rate_limit(period = "1500ms", threshold = 1, name = "login", limiter = named_limiter())]
async fn sign_in() -> Result<(), RateLimitError> {
    Ok(())
}

#[rate_limit(period = "1500ms", threshold = 1, name = "login", limiter = named_limiter())]
async fn sign_in_again() -> Result<(), RateLimitError> {
    Ok(())
}

/// The second call is denied when it comes within the 1.5 s period of the first, which is
/// measured: a machine too loaded for that (never an idle one) waits for the window to pass,
/// and calls again.
#[tokio::test]
async fn name_sets_the_scope_and_shares_the_counter() {
    const PERIOD: Duration = Duration::from_millis(1500);
    for _ in 0..5 {
        let started = std::time::Instant::now();
        sign_in().await.unwrap();
        let second = sign_in_again().await;
        if started.elapsed() >= PERIOD {
            eprintln!("the calls were {:?} apart; again", started.elapsed());
            tokio::time::sleep(PERIOD).await;
            continue;
        }
        let err = second.unwrap_err();
        assert_eq!(err.as_denied().expect("a denial").scope(), "login");
        let retry = err.retry_after().expect("a retry-after");
        assert!(retry <= PERIOD, "the period is 1500 ms: {retry:?}");
        return;
    }
    panic!("the two calls were never within 1.5 s of each other");
}

struct Tenant {
    id: String,
    limiter: Limiter,
    runs: AtomicUsize,
}

impl Tenant {
    #[rate_limit(period = 60, threshold = 2, key = self.id, limiter = &self.limiter)]
    async fn fetch(&self, n: u32) -> Result<u32, RateLimitError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(n * 2)
    }
}

#[tokio::test]
async fn method_with_a_key_from_a_field_of_self() {
    let limiter = Limiter::memory();
    let acme = Tenant {
        id: "acme".to_owned(),
        limiter: limiter.clone(),
        runs: AtomicUsize::new(0),
    };
    let globex = Tenant {
        id: "globex".to_owned(),
        limiter,
        runs: AtomicUsize::new(0),
    };
    assert_eq!(acme.fetch(1).await.unwrap(), 2);
    assert_eq!(acme.fetch(2).await.unwrap(), 4);
    let err = acme.fetch(3).await.unwrap_err();
    let denied = err.as_denied().expect("a denial");
    assert_eq!(denied.scope(), "suite::attribute::Tenant::fetch");
    assert_eq!(denied.key(), Some("acme"));
    assert_eq!(
        globex.fetch(5).await.unwrap(),
        10,
        "another tenant, another counter"
    );
    assert_eq!(acme.runs.load(Ordering::SeqCst), 2);
}

fn same_name_limiter() -> &'static Limiter {
    limiter!()
}

struct Cat;
struct Dog;

impl Cat {
    #[rate_limit(period = 60, threshold = 1, limiter = same_name_limiter())]
    async fn speak(&self) -> Result<&'static str, RateLimitError> {
        Ok("meow")
    }
}

impl Dog {
    #[rate_limit(period = 60, threshold = 1, limiter = same_name_limiter())]
    async fn speak(&self) -> Result<&'static str, RateLimitError> {
        Ok("woof")
    }
}

#[tokio::test]
async fn same_named_methods_of_different_types_do_not_share_a_counter() {
    assert_eq!(Cat.speak().await.unwrap(), "meow");
    assert_eq!(Dog.speak().await.unwrap(), "woof");
    let cat = Cat.speak().await.unwrap_err();
    let dog = Dog.speak().await.unwrap_err();
    assert_eq!(
        cat.as_denied().unwrap().scope(),
        "suite::attribute::Cat::speak"
    );
    assert_eq!(
        dog.as_denied().unwrap().scope(),
        "suite::attribute::Dog::speak"
    );
}

#[derive(Debug)]
enum AppError {
    TooManyRequests {
        retry_after: Option<Duration>,
    },
    // Read through `Debug` only, in the panic message below.
    #[allow(dead_code)]
    Other(RateLimitError),
}

impl From<RateLimitError> for AppError {
    fn from(err: RateLimitError) -> Self {
        if err.is_denied() {
            AppError::TooManyRequests {
                retry_after: err.retry_after(),
            }
        } else {
            AppError::Other(err)
        }
    }
}

type AppResult<T> = Result<T, AppError>;

fn app_limiter() -> &'static Limiter {
    limiter!()
}

#[rate_limit(period = 60, threshold = 1, limiter = app_limiter())]
async fn handler() -> AppResult<u16> {
    Ok(200)
}

#[tokio::test]
async fn an_app_error_type_through_a_result_alias() {
    assert_eq!(handler().await.unwrap(), 200);
    match handler().await {
        Err(AppError::TooManyRequests {
            retry_after: Some(wait),
        }) => {
            assert!(wait <= Duration::from_secs(60));
        }
        other => panic!("expected TooManyRequests, got {other:?}"),
    }
}

fn send_limiter() -> &'static Limiter {
    limiter!()
}

#[rate_limit(period = 60, threshold = 2, key = user, limiter = send_limiter())]
async fn send_work(user: String, runs: Arc<AtomicUsize>) -> Result<String, RateLimitError> {
    tokio::task::yield_now().await;
    runs.fetch_add(1, Ordering::SeqCst);
    Ok(user)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn returned_future_is_send() {
    fn assert_send<T: Send>(value: T) -> T {
        value
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..4 {
        let future = assert_send(send_work("u".to_owned(), Arc::clone(&runs)));
        handles.push(tokio::spawn(future));
    }
    let mut admitted = 0;
    for handle in handles {
        match handle.await.unwrap() {
            Ok(user) => {
                assert_eq!(user, "u");
                admitted += 1;
            }
            Err(err) => assert!(err.is_denied(), "{err}"),
        }
    }
    assert_eq!(admitted, 2);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

fn moved_limiter() -> &'static Limiter {
    limiter!()
}

struct Order {
    customer: String,
    items: Vec<u32>,
}

/// The key borrows `order.customer`; the body then moves `order`.
#[rate_limit(period = 60, threshold = 1, key = order.customer.as_str(), limiter = moved_limiter())]
async fn place(order: Order) -> Result<(String, usize), RateLimitError> {
    let Order { customer, items } = order;
    Ok((customer, items.len()))
}

#[tokio::test]
async fn key_may_borrow_an_argument_the_body_moves() {
    let order = || Order {
        customer: "ann".to_owned(),
        items: vec![1, 2, 3],
    };
    assert_eq!(place(order()).await.unwrap(), ("ann".to_owned(), 3));
    let err = place(order()).await.unwrap_err();
    assert_eq!(err.as_denied().unwrap().key(), Some("ann"));
    let other = Order {
        customer: "bob".to_owned(),
        items: vec![],
    };
    assert_eq!(place(other).await.unwrap(), ("bob".to_owned(), 0));
}

fn generic_limiter() -> &'static Limiter {
    limiter!()
}

#[rate_limit(period = 60, threshold = 1, key = id, limiter = generic_limiter())]
async fn generic<T, K>(value: T, id: K) -> Result<T, RateLimitError>
where
    T: Send,
    K: std::fmt::Display,
{
    Ok(value)
}

#[tokio::test]
async fn generic_fn_with_a_where_clause() {
    assert_eq!(generic(1u8, "x").await.unwrap(), 1);
    assert_eq!(generic("s", "y").await.unwrap(), "s");
    let err = generic(2u16, "x").await.unwrap_err();
    let denied = err.as_denied().unwrap();
    assert_eq!(
        denied.scope(),
        "suite::attribute::generic",
        "one scope for every instantiation"
    );
}

fn daily_limiter() -> &'static Limiter {
    limiter!()
}

#[rate_limit(period = "1d", threshold = 1, limiter = daily_limiter())]
async fn once_a_day() -> Result<(), RateLimitError> {
    Ok(())
}

/// `d` is a day of 24 hours: the denial waits about a day.
#[tokio::test]
async fn a_period_in_days() {
    once_a_day().await.unwrap();
    let err = once_a_day().await.unwrap_err();
    let retry = err.retry_after().expect("a denial");
    assert!(
        retry > Duration::from_secs(86_399) && retry <= Duration::from_secs(86_400),
        "{retry:?}"
    );
    assert_eq!(
        err.as_denied().unwrap().rate().period(),
        Duration::from_secs(86_400)
    );
}
