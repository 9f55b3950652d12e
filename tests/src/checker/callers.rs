//! The callers' code the checker drives, as an application writes it: functions under the
//! real `#[rate_limit]` attribute (named and unnamed, stacked with and without names, leased,
//! logs and counters) and an axum router under real `RateLimitLayer`s (two on the default
//! scope with different rates, one named scope of two rates). Each caller has a short and a
//! long limit of one user somewhere, so that several rates meet on one caller. Two functions
//! are also tonic service methods (the `tonic` feature: a denial is a `Status`), sharing their
//! limits with their plain twins, and the router's routes answer gRPC requests too: a gRPC
//! call and a plain one meet in one log.
//!
//! Their stored keys are written out by hand in [`super::ops::subjects`], in the layout the
//! guide's `keys` page documents: a key the runtime writes otherwise is one the tap never
//! shows for its subject, and the blindness rule fails the run.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use ratelimit_runtime::axum::{HeaderKey, RateLimitLayer};
use ratelimit_runtime::{Algorithm, Decisions, Limiter, Rate, RateLimitError, rate_limit};
use tonic::{Code, Status};
use tower_service::Service as _;

/// What a limited function tells its caller: each limit's rate, and whether the failure policy
/// answered for it (`true`) or the store did.
pub(crate) type Answered = Vec<(Rate, bool)>;

pub(crate) fn answered(decisions: &Decisions) -> Answered {
    decisions
        .iter()
        .map(|limit| (limit.rate(), limit.decision().answered_by_policy()))
        .collect()
}

/// One attribute with a `name`: `chk.login/<user>`.
#[rate_limit(name = "chk.login", period = "3s", threshold = 5, key = user, limiter = limiter, decision = d)]
pub(crate) async fn named(limiter: &Limiter, user: &str) -> Result<Answered, RateLimitError> {
    Ok(answered(d))
}

/// How a call that did not run was answered, as its caller reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Denied by a limit.
    Denied,
    /// Any other error: the store could not answer, or the call was malformed.
    Failed,
}

impl From<RateLimitError> for Refused {
    fn from(error: RateLimitError) -> Refused {
        if error.is_denied() {
            Refused::Denied
        } else {
            Refused::Failed
        }
    }
}

impl From<Status> for Refused {
    fn from(status: Status) -> Refused {
        if status.code() == Code::ResourceExhausted {
            Refused::Denied
        } else {
            Refused::Failed
        }
    }
}

/// A gRPC service of the `named` and `stacked_named` functions' limits, as tonic generates
/// its trait: each method's request the user, and its reply. Under `#[async_trait]` a method has no
/// `decision` to tell which of the store and the failure policy answered: the checker calls it
/// on a limiter failing closed, whose admissions are all the store's.
#[tonic::async_trait]
pub(crate) trait Service: Send + Sync + 'static {
    async fn login(
        &self,
        request: tonic::Request<String>,
    ) -> Result<tonic::Response<String>, Status>;
    async fn stacked(
        &self,
        request: tonic::Request<String>,
    ) -> Result<tonic::Response<String>, Status>;
}

/// The [`Service`] of a limiter.
pub(crate) struct Grpc(pub(crate) Limiter);

#[tonic::async_trait]
impl Service for Grpc {
    /// `named`'s limit, as a tonic method.
    #[rate_limit(name = "chk.login", period = "3s", threshold = 5, key = request.get_ref(), limiter = &self.0)]
    async fn login(
        &self,
        request: tonic::Request<String>,
    ) -> Result<tonic::Response<String>, Status> {
        Ok(tonic::Response::new(request.into_inner()))
    }

    /// `stacked_named`'s limits, as a tonic method.
    #[rate_limit(name = "chk.burst", period = 1, threshold = 3, key = request.get_ref(), limiter = &self.0)]
    #[rate_limit(
        name = "chk.window",
        period = 5,
        threshold = 8,
        algorithm = "sliding_window_counter",
        key = request.get_ref()
    )]
    async fn stacked(
        &self,
        request: tonic::Request<String>,
    ) -> Result<tonic::Response<String>, Status> {
        Ok(tonic::Response::new(request.into_inner()))
    }
}

/// One attribute without a name, a sliding window counter: its scope is this function's path.
#[rate_limit(
    period = "2s",
    threshold = 4,
    algorithm = "sliding_window_counter",
    key = user,
    limiter = limiter,
    decision = d
)]
pub(crate) async fn unnamed(limiter: &Limiter, user: &str) -> Result<Answered, RateLimitError> {
    Ok(answered(d))
}

/// Two stacked limits with names, a burst log and a longer counter:
/// `#chk.burst/{<user>}@1s`, `#chk.window/{<user>}@5s`.
#[rate_limit(name = "chk.burst", period = 1, threshold = 3, key = user, limiter = limiter, decision = d)]
#[rate_limit(
    name = "chk.window",
    period = 5,
    threshold = 8,
    algorithm = "sliding_window_counter",
    key = user
)]
pub(crate) async fn stacked_named(
    limiter: &Limiter,
    user: &str,
) -> Result<Answered, RateLimitError> {
    Ok(answered(d))
}

/// Two stacked limits without names, told apart by their positions:
/// `#<path>#1/{<user>}@1s`, `#<path>#2/{<user>}@4s`.
#[rate_limit(period = 1, threshold = 2, key = user, limiter = limiter, decision = d)]
#[rate_limit(period = 4, threshold = 6, key = user)]
pub(crate) async fn stacked(limiter: &Limiter, user: &str) -> Result<Answered, RateLimitError> {
    Ok(answered(d))
}

/// A leased log (leases of up to 3: a sixteenth of 48): `chk.leased/<user>`.
#[rate_limit(name = "chk.leased", period = 2, threshold = 48, lease = true, key = user, limiter = limiter, decision = d)]
pub(crate) async fn leased(limiter: &Limiter, user: &str) -> Result<Answered, RateLimitError> {
    Ok(answered(d))
}

/// A leased counter (leases of up to 2): `chk.leased.ctr/<user>#swc`.
#[rate_limit(
    name = "chk.leased.ctr",
    period = 2,
    threshold = 40,
    algorithm = "sliding_window_counter",
    lease = true,
    key = user,
    limiter = limiter,
    decision = d
)]
pub(crate) async fn leased_counter(
    limiter: &Limiter,
    user: &str,
) -> Result<Answered, RateLimitError> {
    Ok(answered(d))
}

/// A leased log that one limiter alone calls and resets (leases of up to 3: a sixteenth of
/// 48): `chk.solo/<user>`.
#[rate_limit(name = "chk.solo", period = 4, threshold = 48, lease = true, key = user, limiter = limiter, decision = d)]
pub(crate) async fn solo(limiter: &Limiter, user: &str) -> Result<Answered, RateLimitError> {
    Ok(answered(d))
}

/// The scope of [`registered`], which the shared limits' changes address.
pub(crate) const REGISTERED: &str = "chk.reg";

/// [`registered`]'s rate in code.
pub(crate) const REGISTERED_RATE: Rate = Rate::new_const(5, Duration::from_secs(2));

/// One attribute whose scope the changes of the shared limits address: `chk.reg/<user>`.
/// Its decision (`None`: not checked, or checked in shadow mode, which leaves its limit out).
#[rate_limit(name = "chk.reg", period = 2, threshold = 5, key = user, limiter = limiter, decision = d)]
pub(crate) async fn registered(
    limiter: &Limiter,
    user: &str,
) -> Result<Option<ratelimit_runtime::Decision>, RateLimitError> {
    Ok(d.iter().next().map(|limit| *limit.decision()))
}

/// The scopes of the functions above without a `name`: their paths.
const UNNAMED: &str = "tests::checker::callers::unnamed";
const STACKED: &str = "tests::checker::callers::stacked";

/// The attributed functions above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Function {
    Named,
    Unnamed,
    StackedNamed,
    Stacked,
    Leased,
    LeasedCounter,
    /// Called and reset by one limiter only.
    Solo,
}

/// A limit as the checker knows it: its stored key (a counter's without `#swc`), its rate, and
/// the scope `reset_scope` names it by.
pub(crate) type Known = (String, Rate, &'static str);

fn rate(threshold: u64, seconds: u64) -> Rate {
    Rate::new(threshold, Duration::from_secs(seconds)).expect("a valid rate")
}

fn counter(threshold: u64, seconds: u64) -> Rate {
    rate(threshold, seconds).with_algorithm(Algorithm::SlidingWindowCounter)
}

impl Function {
    /// The functions every limiter calls.
    pub(crate) const SHARED: [Function; 6] = [
        Function::Named,
        Function::Unnamed,
        Function::StackedNamed,
        Function::Stacked,
        Function::Leased,
        Function::LeasedCounter,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Function::Named => "fn named",
            Function::Unnamed => "fn unnamed",
            Function::StackedNamed => "fn stacked_named",
            Function::Stacked => "fn stacked",
            Function::Leased => "fn leased",
            Function::LeasedCounter => "fn leased_counter",
            Function::Solo => "fn solo",
        }
    }

    pub(crate) fn leased(self) -> bool {
        matches!(
            self,
            Function::Leased | Function::LeasedCounter | Function::Solo
        )
    }

    /// Its limits for `user`, as its attributes write them.
    pub(crate) fn limits(self, user: &str) -> Vec<Known> {
        match self {
            Function::Named => vec![(format!("chk.login/{user}"), rate(5, 3), "chk.login")],
            Function::Unnamed => vec![(format!("{UNNAMED}/{user}"), counter(4, 2), UNNAMED)],
            Function::StackedNamed => vec![
                (format!("#chk.burst/{{{user}}}@1s"), rate(3, 1), "chk.burst"),
                (
                    format!("#chk.window/{{{user}}}@5s"),
                    counter(8, 5),
                    "chk.window",
                ),
            ],
            Function::Stacked => vec![
                (format!("#{STACKED}#1/{{{user}}}@1s"), rate(2, 1), STACKED),
                (format!("#{STACKED}#2/{{{user}}}@4s"), rate(6, 4), STACKED),
            ],
            Function::Leased => vec![(
                format!("chk.leased/{user}"),
                rate(48, 2).leased(),
                "chk.leased",
            )],
            Function::LeasedCounter => vec![(
                format!("chk.leased.ctr/{user}"),
                counter(40, 2).leased(),
                "chk.leased.ctr",
            )],
            Function::Solo => vec![(format!("chk.solo/{user}"), rate(48, 4).leased(), "chk.solo")],
        }
    }

    /// The functions that are tonic methods of [`Service`] too.
    pub(crate) const METHODS: [Function; 2] = [Function::Named, Function::StackedNamed];

    /// Calls it for `user` with `limiter`: as its tonic method when `grpc` (one of
    /// [`METHODS`](Function::METHODS)), which tells no limit's answer (`None`), else as a
    /// function.
    pub(crate) async fn call(
        self,
        limiter: &Limiter,
        user: &str,
        grpc: bool,
    ) -> Result<Option<Answered>, Refused> {
        let request = || tonic::Request::new(user.to_owned());
        let service = || Grpc(limiter.clone());
        debug_assert!(!grpc || Function::METHODS.contains(&self));
        let answered = match self {
            Function::Named if grpc => {
                return Ok(service().login(request()).await.map(|_| None)?);
            }
            Function::StackedNamed if grpc => {
                return Ok(service().stacked(request()).await.map(|_| None)?);
            }
            Function::Named => named(limiter, user).await,
            Function::Unnamed => unnamed(limiter, user).await,
            Function::StackedNamed => stacked_named(limiter, user).await,
            Function::Stacked => stacked(limiter, user).await,
            Function::Leased => leased(limiter, user).await,
            Function::LeasedCounter => leased_counter(limiter, user).await,
            Function::Solo => solo(limiter, user).await,
        };
        Ok(Some(answered?))
    }
}

/// The routes of [`router`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Login,
    Search,
    Export,
}

impl Route {
    pub(crate) const ALL: [Route; 3] = [Route::Login, Route::Search, Route::Export];

    pub(crate) fn path(self) -> &'static str {
        match self {
            Route::Login => "/login",
            Route::Search => "/search",
            Route::Export => "/export",
        }
    }

    /// Its layer's rates for `user`, with the keys the layer writes.
    pub(crate) fn limits(self, user: &str) -> Vec<Known> {
        match self {
            Route::Login => vec![(format!("{{layer/{user}}}@10/4s"), login_rate(), "layer")],
            Route::Search => vec![(format!("{{layer/{user}}}@20/1s"), search_rate(), "layer")],
            Route::Export => {
                let [burst, window] = export_rates();
                vec![
                    (format!("{{chk.export/{user}}}@1s"), burst, "chk.export"),
                    (format!("{{chk.export/{user}}}@5s"), window, "chk.export"),
                ]
            }
        }
    }
}

/// The rates of the router's layers.
pub(crate) fn login_rate() -> Rate {
    rate(10, 4)
}

pub(crate) fn search_rate() -> Rate {
    rate(20, 1)
}

pub(crate) fn export_rates() -> [Rate; 2] {
    [
        Rate::new(4, Duration::from_secs(1)).expect("a valid rate"),
        Rate::new(8, Duration::from_secs(5)).expect("a valid rate"),
    ]
}

/// The header the layers key requests by.
pub(crate) const USER_HEADER: &str = "x-user";

/// A router limited by `limiter`, as an application layers one: `/login` and `/search` each
/// under a layer of the default scope (10 per 4 s, 20 per 1 s), `/export` under a layer of the
/// scope `chk.export` with two rates (4 per 1 s, 8 per 5 s); all keyed by the `x-user` header,
/// and answering `GET`s and (gRPC calls) `POST`s.
pub(crate) fn router(limiter: &Limiter) -> Router {
    let key = || HeaderKey::new(USER_HEADER);
    let [burst, window] = export_rates();
    Router::new()
        .route(
            "/login",
            get(ok)
                .post(ok)
                .layer(RateLimitLayer::new(limiter.clone(), login_rate(), key())),
        )
        .route(
            "/search",
            get(ok)
                .post(ok)
                .layer(RateLimitLayer::new(limiter.clone(), search_rate(), key())),
        )
        .route(
            "/export",
            get(ok).post(ok).layer(
                RateLimitLayer::new(limiter.clone(), burst, key())
                    .and_rate(window)
                    .scope("chk.export"),
            ),
        )
        .route(
            "/slots",
            get(super::slots::handler).layer(
                RateLimitLayer::concurrency(limiter.clone(), super::slots::LIMIT, key())
                    .scope(super::slots::LAYER_SCOPE),
            ),
        )
}

async fn ok() -> &'static str {
    "ok"
}

/// Sends `GET <path>` as `user` through `router`, or a gRPC call (`POST`,
/// `application/grpc`) when `grpc`; whether it was admitted, as its client reads the answer: a
/// `200` (a gRPC call's without a `grpc-status`: a denial is trailers-only), or denied, a
/// `429` (a gRPC call's `grpc-status` `RESOURCE_EXHAUSTED`).
pub(crate) async fn request(
    router: &Router,
    path: &str,
    user: &str,
    grpc: bool,
) -> Result<(), Refused> {
    let request = if grpc {
        Request::post(path).header(http::header::CONTENT_TYPE, "application/grpc")
    } else {
        Request::get(path)
    };
    let request = request
        .header(USER_HEADER, user)
        .body(Body::empty())
        .expect("a request");
    let response = match router.clone().call(request).await {
        Ok(response) => response,
        Err(infallible) => match infallible {},
    };
    let status = response.headers().get("grpc-status");
    match (grpc, response.status(), status) {
        (_, StatusCode::OK, None) => Ok(()),
        (false, StatusCode::TOO_MANY_REQUESTS, _) => Err(Refused::Denied),
        (true, StatusCode::OK, Some(code)) if code == "8" => Err(Refused::Denied),
        _ => Err(Refused::Failed),
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use ratelimit_runtime::FailurePolicy;
    use ratelimit_runtime::testing::ManualClock;

    use super::*;

    /// An in-process limiter on a clock that stands still: a window never ends in a test.
    fn still() -> Limiter {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        Limiter::builder().clock(clock).build().expect("a limiter")
    }

    /// The checker reads a gRPC answer (a status) as its client does, and as it reads the plain
    /// answer of the same limit: admitted, then denied once the limit is spent, and failed when
    /// the store cannot answer under `Closed`. Otherwise its judges would not see what the
    /// gRPC callers were told.
    #[tokio::test(flavor = "current_thread")]
    async fn grpc_answers_are_read_as_the_plain_ones() {
        let closed = Limiter::builder()
            .redis_url("redis://127.0.0.1:1/")
            .failure_policy(FailurePolicy::Closed)
            .timeout(Duration::from_millis(200))
            .build()
            .expect("a limiter");
        for grpc in [false, true] {
            let limited = router(&still());
            let mut read = Vec::new();
            for _ in 0..=login_rate().threshold() {
                read.push(request(&limited, "/login", "u", grpc).await);
            }
            assert_eq!(read[..10], [Ok(()); 10], "grpc: {grpc}");
            assert_eq!(read[10], Err(Refused::Denied), "grpc: {grpc}");
            let down = request(&router(&closed), "/login", "u", grpc).await;
            assert_eq!(down, Err(Refused::Failed), "grpc: {grpc}");

            for (function, threshold) in [(Function::Named, 5), (Function::StackedNamed, 3)] {
                let limiter = still();
                let mut called = Vec::new();
                for _ in 0..=threshold {
                    let answer = function.call(&limiter, "u", grpc).await;
                    // A tonic method tells no limit's answer; a function every limit's.
                    called.push(answer.map(|answered| answered.is_some()));
                }
                let admitted = vec![Ok(!grpc); threshold];
                assert_eq!(called[..threshold], admitted, "{function:?}, grpc: {grpc}");
                assert_eq!(called[threshold], Err(Refused::Denied), "{function:?}");
                let down = function.call(&closed, "u", grpc).await.map(drop);
                assert_eq!(down, Err(Refused::Failed), "{function:?}, grpc: {grpc}");
            }
        }
    }
}
