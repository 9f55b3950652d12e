//! [`RateLimitLayer`]: a tower layer that limits every request to the service it wraps.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ::axum::body::{Body, Bytes};
use ::axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{Request, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::key::KeyExtractor;
use super::response::problem;
use crate::__private::scoped_key;
use crate::check::Held;
use crate::concurrency::Concurrency;
use crate::decisions::Decisions;
use crate::error::{Denied, RateLimitError};
use crate::key::Key;
use crate::layout::{rate_key, rate_names, several_rates_key};
use crate::limit::{Limit, LimitRef};
use crate::limiter::{LimitResolved, Limiter};
use crate::rate::Rate;

/// The scope of a layer's keys when none is set, whose keys name their rates.
const DEFAULT_SCOPE: &str = "layer";

/// Limits a whole router (or any tower service taking `http::Request`s): each request is
/// checked against one [`Rate`] by a [`Limiter`], keyed by a [`KeyExtractor`], with the same
/// stores and semantics as `#[rate_limit]`.
///
/// - Admitted: the request goes on, and the response gets `RateLimit-Policy` and `RateLimit`
///   (unless the handler set its own).
/// - Denied: `429` with `Retry-After`, the same fields and a problem+json body (as
///   [`RateLimitError`]'s `IntoResponse`); the inner service is not called.
/// - Store unavailable under [`FailurePolicy::Closed`](crate::FailurePolicy::Closed): `503`.
/// - No key in the request: the [`on_missing_key`](RateLimitLayer::on_missing_key) response,
///   by default `400 Bad Request` with a problem+json body; but `500` when the server is set
///   up so that no request can have one ([`KeyExtractor::setup_error`]: a [`PeerIp`](super::PeerIp) router
///   served without connect info), its problem's `detail` saying how to fix it.
/// - A gRPC call (a `POST` of `content-type: application/grpc`, alone or with a subtype), with the
///   `tonic` feature: each of these answered with a gRPC status instead (`RESOURCE_EXHAUSTED`,
///   `UNAVAILABLE`, `INVALID_ARGUMENT`, `INTERNAL`), trailers-only, as the `tonic` module lists;
///   so the layer serves tonic servers, and routers serving gRPC beside HTTP. Without the
///   feature a gRPC client reads the `429` as `UNAVAILABLE`.
///
/// On the default scope, `layer`, each rate keeps its own log per key, so that two layers of
/// different rates never meet; on a scope set by [`scope`](RateLimitLayer::scope), the keys
/// leave the threshold out, and layers of one scope share a key's logs (the guide's `http`
/// page says which layers share; its `keys` page lists the forms). No key a client sends
/// reaches another scope's log: every part of a key is escaped, as the attribute's are.
///
/// ```no_run
/// use std::net::SocketAddr;
/// use std::time::Duration;
/// use axum::{routing::get, Router};
/// use ratelimit_runtime::axum::{PeerIp, RateLimitLayer};
/// use ratelimit_runtime::{Limiter, Rate};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let rate = Rate::new(100, Duration::from_secs(60))?;
/// let app = Router::new()
///     .route("/", get(|| async { "hi" }))
///     .layer(RateLimitLayer::new(Limiter::memory(), rate, PeerIp::new()).scope("api"));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// // The peer address reaches `PeerIp` through `ConnectInfo`:
/// axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
/// # Ok(())
/// # }
/// ```
pub struct RateLimitLayer<K> {
    config: Arc<Config<K>>,
}

struct Config<K> {
    limiter: Limiter,
    rate: Rate,
    /// The rates after the first ([`and_rate`](RateLimitLayer::and_rate)), each with its
    /// label, which ends its keys on a scope set by [`scope`](RateLimitLayer::scope).
    more: Vec<(Rate, String)>,
    scope: Cow<'static, str>,
    /// On the default scope, each rate's name in its keys, the first rate's first; `None` on
    /// a scope set by [`scope`](RateLimitLayer::scope).
    rate_names: Option<Vec<String>>,
    /// Each rate's address in the registry, `<scope>@<label>`, the first rate's first (the
    /// label: its name on the default scope, else its label, the first one's its window).
    addresses: Vec<String>,
    key: Arc<K>,
    /// The response to a request without a key; `None`: the default, `400` (a gRPC request's
    /// `INVALID_ARGUMENT`).
    on_missing_key: Option<MissingKey>,
}

/// What [`RateLimitLayer::on_missing_key`] answers.
type MissingKey = Arc<dyn Fn(&Parts) -> Response + Send + Sync>;

impl<K> Clone for Config<K> {
    fn clone(&self) -> Self {
        Config {
            limiter: self.limiter.clone(),
            rate: self.rate,
            more: self.more.clone(),
            scope: self.scope.clone(),
            rate_names: self.rate_names.clone(),
            addresses: self.addresses.clone(),
            key: Arc::clone(&self.key),
            on_missing_key: self.on_missing_key.clone(),
        }
    }
}

impl<K: KeyExtractor> RateLimitLayer<K> {
    /// A layer checking every request against `rate` with `limiter`, keyed by `key`.
    #[must_use]
    pub fn new(limiter: Limiter, rate: Rate, key: K) -> Self {
        let mut config = Config {
            limiter,
            rate,
            more: Vec::new(),
            scope: Cow::Borrowed(DEFAULT_SCOPE),
            rate_names: Some(rate_names(&[rate])),
            addresses: Vec::new(),
            key: Arc::new(key),
            on_missing_key: None,
        };
        config.addresses = config.addresses();
        RateLimitLayer {
            config: Arc::new(config),
        }
    }

    /// A layer allowing at most [`concurrency.max()`](Concurrency::max) requests of a key in
    /// flight at once, across every process sharing `limiter`'s store, keyed by `key`: a
    /// request holds a slot from its check until its response's body ends (a streamed body
    /// is still in flight), or until it is dropped (the client hung up). A request that finds
    /// every slot held is answered `429` at once, its `retry-after` an estimate (see the
    /// guide's `concurrency` page); the inner service is not called. Add rates with
    /// [`and_rate`](RateLimitLayer::and_rate): a request is then checked against all of
    /// them in one check, all or nothing.
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use ratelimit_runtime::axum::{HeaderKey, RateLimitLayer};
    /// use ratelimit_runtime::{Concurrency, Limiter};
    ///
    /// # fn main() -> Result<(), ratelimit_runtime::RateLimitError> {
    /// // At most 4 exports in flight per API key.
    /// let exports = RateLimitLayer::concurrency(
    ///     Limiter::memory(),
    ///     Concurrency::new(4)?,
    ///     HeaderKey::new("x-api-key"),
    /// )
    /// .scope("exports");
    /// let app: Router = Router::new()
    ///     .route("/export", get(|| async { "rows" }))
    ///     .layer(exports);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn concurrency(limiter: Limiter, concurrency: Concurrency, key: K) -> Self {
        RateLimitLayer::new(limiter, concurrency.rate(), key)
    }

    /// Checks every request against `concurrency` too: at most
    /// [`concurrency.max()`](Concurrency::max) requests of a key in flight, each holding its
    /// slot until its response's body ends (see [`concurrency`](RateLimitLayer::concurrency)),
    /// in one check with the layer's rates, all or nothing.
    #[must_use]
    pub fn and_concurrency(self, concurrency: Concurrency) -> Self {
        self.and_rate(concurrency.rate())
    }

    /// Checks every request against `rate` too: a request is admitted only if every rate of
    /// the layer admits it, and a request denied by one is recorded by none (see
    /// [`Limiter::check_all`]). Responses list every rate in `RateLimit-Policy` and
    /// `RateLimit`, each named by its window (`1s`, `1d`; `-2` after a window given twice).
    ///
    /// A request's keys of several rates all have the same hash tag, `E(scope)/E(key)`, so
    /// that in a Redis Cluster its limits share a slot and are checked by one script in one
    /// round trip. (On a scope set by [`scope`](RateLimitLayer::scope), a layer of one rate
    /// keeps `E(scope)/E(key)`: adding a second rate to it starts the first one's windows
    /// afresh, once.)
    #[must_use]
    pub fn and_rate(self, rate: Rate) -> Self {
        self.map_config(|config| {
            let rates: Vec<Rate> = std::iter::once(config.rate)
                .chain(config.more.iter().map(|(rate, _)| *rate))
                .chain(std::iter::once(rate))
                .collect();
            let labels = crate::decisions::window_labels(&rates);
            config.more.push((rate, String::new()));
            for ((_, label), new) in config.more.iter_mut().zip(labels.into_iter().skip(1)) {
                *label = new;
            }
            if let Some(names) = &mut config.rate_names {
                *names = rate_names(&rates);
            }
        })
    }

    /// The scope of the layer's keys (default `layer`), which a denial's message (sent as its
    /// `detail`) names. On a scope set here the keys leave the threshold out: the layers of
    /// one scope share a key's logs whatever their rates, so give a layer of another rate a
    /// scope of its own (see [`RateLimitLayer`]).
    #[must_use]
    pub fn scope(self, scope: impl Into<Cow<'static, str>>) -> Self {
        self.map_config(|config| {
            config.scope = scope.into();
            config.rate_names = None;
        })
    }

    /// The response to a request whose key cannot be extracted (default:
    /// `400 Bad Request`, problem+json; for a gRPC call, with the `tonic` feature,
    /// `INVALID_ARGUMENT`), to every request, gRPC calls included: answer those with
    /// `tonic::Status::into_http`. The request is not passed on: a missing key never lifts
    /// the limit. 400 rather than 429 because waiting does not help: the request lacks what
    /// the limit is keyed by (a header, a peer address behind a trusted proxy), and retrying
    /// it as it is would fail again.
    #[must_use]
    pub fn on_missing_key(
        self,
        respond: impl Fn(&Parts) -> Response + Send + Sync + 'static,
    ) -> Self {
        self.map_config(|config| config.on_missing_key = Some(Arc::new(respond)))
    }

    fn map_config(self, change: impl FnOnce(&mut Config<K>)) -> Self {
        let mut config = Arc::unwrap_or_clone(self.config);
        change(&mut config);
        config.addresses = config.addresses();
        RateLimitLayer {
            config: Arc::new(config),
        }
    }
}

impl<K> Config<K> {
    /// Each rate's address in the registry (see [`Config::addresses`]'s field).
    fn addresses(&self) -> Vec<String> {
        let first = crate::decisions::label_of(self.rate);
        let labels = std::iter::once(first.as_str())
            .chain(self.more.iter().map(|(_, label)| label.as_str()));
        match &self.rate_names {
            Some(names) => names
                .iter()
                .map(|name| format!("{}@{name}", self.scope))
                .collect(),
            None => labels
                .map(|label| format!("{}@{label}", self.scope))
                .collect(),
        }
    }
}

/// The detail of the default answer to a request without a key.
const MISSING_KEY: &str = "the request does not carry what its rate limit is keyed by";

/// The default answer to a request without a key: `400`, or a gRPC call's
/// `INVALID_ARGUMENT` (retrying it as it is would fail again).
fn missing_key_response(parts: &Parts) -> Response {
    #[cfg(feature = "tonic")]
    if crate::tonic::status::is_grpc(parts) {
        return ::tonic::Status::invalid_argument(MISSING_KEY).into_http();
    }
    let _ = parts;
    problem(StatusCode::BAD_REQUEST, MISSING_KEY)
}

/// The answer to a request no request can be keyed by, the server's fault ([`KeyExtractor::setup_error`]):
/// `500`, or a gRPC call's `INTERNAL`, `detail` naming the fix.
fn setup_error_response(parts: &Parts, detail: &str) -> Response {
    #[cfg(feature = "tonic")]
    if crate::tonic::status::is_grpc(parts) {
        return ::tonic::Status::internal(detail).into_http();
    }
    let _ = parts;
    problem(StatusCode::INTERNAL_SERVER_ERROR, detail)
}

/// The answer to a request the layer denies, or cannot check: as [`RateLimitError`]'s
/// `IntoResponse`, or (feature `tonic`) a gRPC call's status, as its `From` for
/// `tonic::Status`. Whether the request is a gRPC call is asked only here, of the requests
/// the layer does not pass on.
fn error_response(parts: &Parts, error: RateLimitError) -> Response {
    #[cfg(feature = "tonic")]
    if crate::tonic::status::is_grpc(parts) {
        return ::tonic::Status::from(error).into_http();
    }
    let _ = parts;
    error.into_response()
}

impl<K> Clone for RateLimitLayer<K> {
    fn clone(&self) -> Self {
        RateLimitLayer {
            config: Arc::clone(&self.config),
        }
    }
}

impl<K> fmt::Debug for RateLimitLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("limiter", &self.config.limiter)
            .field("rate", &self.config.rate)
            .field(
                "more_rates",
                &self
                    .config
                    .more
                    .iter()
                    .map(|(rate, _)| rate)
                    .collect::<Vec<_>>(),
            )
            .field("scope", &self.config.scope)
            .finish_non_exhaustive()
    }
}

impl<S, K> Layer<S> for RateLimitLayer<K> {
    type Service = RateLimitService<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimitService {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service of a [`RateLimitLayer`], wrapping `S`.
pub struct RateLimitService<S, K> {
    inner: S,
    config: Arc<Config<K>>,
}

impl<S: Clone, K> Clone for RateLimitService<S, K> {
    fn clone(&self) -> Self {
        RateLimitService {
            inner: self.inner.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S: fmt::Debug, K> fmt::Debug for RateLimitService<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitService")
            .field("inner", &self.inner)
            .field("scope", &self.config.scope)
            .finish_non_exhaustive()
    }
}

impl<S, K, B> Service<Request<B>> for RateLimitService<S, K>
where
    S: Service<Request<B>> + Clone + Send + 'static,
    S::Response: IntoResponse,
    S::Future: Send + 'static,
    K: KeyExtractor,
    B: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        // The clone is not ready; the one `poll_ready` readied goes into the future.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let Some(key) = config.key.extract(&parts) else {
                if let Some(detail) = config.key.setup_error(&parts) {
                    return Ok(setup_error_response(&parts, &detail));
                }
                tracing::debug!(scope = %config.scope, "no rate limit key in the request");
                return Ok(match &config.on_missing_key {
                    Some(respond) => respond(&parts),
                    None => missing_key_response(&parts),
                });
            };
            // A concurrency limit holds its slot through the response: checked as one of
            // several, which keeps where it recorded the request.
            if !config.more.is_empty() || config.rate.is_concurrency() {
                return several(&config, key, parts, body, inner).await;
            }
            let stored = match &config.rate_names {
                Some(names) => rate_key(&config.scope, &key, &names[0]),
                None => scoped_key(&config.scope, &key),
            };
            let limiter = &config.limiter;
            let (checking, trial) = limiter.registered(
                (&config.scope, &config.addresses[0]),
                Key::Borrowed(&stored),
                // Asked only of a scope with key overrides.
                |_| Some(Cow::Owned(key.clone())),
                config.rate,
                false,
            );
            let rate = checking.rate();
            let checked = checking.await;
            let decision = match checked {
                Ok(decision) => decision,
                Err(error) => return Ok(error_response(&parts, error)),
            };
            if !decision.allowed {
                let denied = Denied::new(config.scope.clone(), Some(key), rate, decision);
                return Ok(error_response(&parts, denied.into()));
            }
            let mut response = inner
                .call(Request::from_parts(parts, body))
                .await?
                .into_response();
            // A trial must not make well-behaved clients back off, nor an unchecked call
            // tell them a quota.
            if !trial && !decision.is_exempt() {
                decision
                    .headers(rate)
                    .apply_if_absent(response.headers_mut());
            }
            Ok(response)
        })
    }
}

/// A request under a layer of several rates: one check of all of them.
async fn several<S, K, B>(
    config: &Config<K>,
    key: String,
    parts: Parts,
    body: B,
    mut inner: S,
) -> Result<Response, S::Error>
where
    S: Service<Request<B>>,
    S::Response: IntoResponse,
{
    // On a scope set by `scope`, the tag each label follows (no allocation otherwise).
    let scoped = match config.rate_names {
        Some(_) => String::new(),
        None => scoped_key(&config.scope, &key),
    };
    let first = crate::decisions::label_of(config.rate);
    let limiter = &config.limiter;
    let mut shadows = Vec::new();
    let mut limits = Vec::new();
    let view = limiter.registry_view();
    let rates = std::iter::once((config.rate, first.as_str())).chain(
        config
            .more
            .iter()
            .map(|(rate, label)| (*rate, label.as_str())),
    );
    for (index, (rate, label)) in rates.enumerate() {
        let stored = match &config.rate_names {
            Some(names) => rate_key(&config.scope, &key, &names[index]),
            None => several_rates_key(&scoped, label),
        };
        let address = &config.addresses[index];
        let caller = || Some(Cow::Borrowed(key.as_str()));
        let rate = match limiter.resolve_limit(&view, address, (rate, false, 1, false), caller) {
            LimitResolved::Skip | LimitResolved::WouldDeny => continue,
            LimitResolved::Shadow(rate) => {
                shadows.push((stored, rate));
                continue;
            }
            LimitResolved::Enforce(rate) => rate,
            LimitResolved::Deny(rate, decision) => {
                let label = Some(Cow::Owned(label.to_owned()));
                let decisions = Decisions::new(std::iter::once((label, rate, decision)));
                let denied = Denied::of_several(config.scope.clone(), Some(key), decisions);
                return Ok(error_response(&parts, denied.into()));
            }
        };
        limits.push(Limit::new(stored, rate).with_label(label.to_owned()));
    }
    // A view is short-lived: not held across the check.
    drop(view);
    let holding = limits.iter().any(|limit| limit.rate().is_concurrency());
    let (decisions, held) = if limits.is_empty() {
        (Decisions::exempt(), None)
    } else if holding {
        match hold(limiter, &config.scope, limits, false).await {
            Ok(checked) => checked,
            Err(error) => return Ok(error_response(&parts, error)),
        }
    } else {
        match limiter.checking_all(&config.scope, limits).await {
            Ok(decisions) => (decisions, None),
            Err(error) => return Ok(error_response(&parts, error)),
        }
    };
    if !decisions.allowed {
        let denied = Denied::of_several(config.scope.clone(), Some(key), decisions);
        return Ok(error_response(&parts, denied.into()));
    }
    // The shadow rates once the others admit: each on its own, reported when it would deny;
    // a shadow concurrency limit's slot held as the others' are.
    let mut held: Vec<Held> = held.into_iter().collect();
    for (stored, rate) in shadows {
        let checked = if rate.is_concurrency() {
            let limits = vec![Limit::new(stored, rate)];
            hold(limiter, &config.scope, limits, true)
                .await
                .map(|(_, shadow)| held.extend(shadow))
        } else {
            limiter
                .checking_in_shadow(Some(&config.scope), &stored, rate)
                .await
                .map(drop)
        };
        if let Err(error) = checked {
            tracing::debug!(scope = %config.scope, %error, "a shadow rate limit could not be checked");
        }
    }
    let mut response = inner
        .call(Request::from_parts(parts, body))
        .await?
        .into_response();
    if !limiter.is_shadow() {
        decisions.headers().apply_if_absent(response.headers_mut());
    }
    // The request's slots, held until its body ends.
    Ok(if held.is_empty() {
        response
    } else {
        response.map(|body| Body::new(Holding { body, held }))
    })
}

/// The check of a request's `limits`, some of them concurrency limits: its decisions and,
/// admitted, the slots it holds.
/// To its end even if the request is dropped meanwhile: the slots of a request admitted then
/// are released at once.
async fn hold(
    limiter: &Limiter,
    scope: &str,
    limits: Vec<Limit<'static>>,
    shadow: bool,
) -> Result<(Decisions, Option<Held>), RateLimitError> {
    let shared = std::sync::Arc::clone(limiter.shared());
    let scope = scope.to_owned();
    crate::runtime::to_the_end(async move {
        let owned: Vec<(String, Rate)> = limits
            .iter()
            .map(|limit| (limit.key().to_owned(), limit.rate()))
            .collect();
        let sent = Held::sent(&shared);
        let (decisions, records) = shared.check_holding(Some(&scope), limits, shadow).await?;
        let held = decisions.allowed.then(|| {
            let refs: Vec<LimitRef<'_>> = owned
                .iter()
                .map(|(key, rate)| LimitRef {
                    key,
                    rate: *rate,
                    cost: 1,
                })
                .collect();
            Held::new(&shared, Some(&scope), &refs, records, sent)
        });
        Ok((decisions, held))
    })
    .await
}

/// A response body that holds its request's slots until it ends: its last frame handed to
/// the server (which then writes it), or the body dropped (the client hung up, the server
/// stopped sending). A response that upgrades the connection (`101`) ends its body at once:
/// what runs on the upgraded connection holds no slot.
struct Holding {
    body: Body,
    held: Vec<Held>,
}

impl http_body::Body for Holding {
    type Data = Bytes;
    type Error = ::axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, ::axum::Error>>> {
        let this = &mut *self;
        let frame = std::task::ready!(Pin::new(&mut this.body).poll_frame(cx));
        if frame.is_none() || this.body.is_end_stream() {
            // Released: the body is all handed over.
            this.held.clear();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use ::axum::body::Body;
    use tower::ServiceExt as _;

    use super::*;
    use crate::axum::HeaderKey;

    /// The layer on a plain tower service: admitted responses carry the fields, denials are
    /// 429s that never reach the service, and a request without a key is answered as
    /// configured.
    #[tokio::test(flavor = "current_thread")]
    async fn limits_a_service() {
        let rate = Rate::new(2, Duration::from_secs(60)).unwrap();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let service = {
            let calls = Arc::clone(&calls);
            tower::service_fn(move |_: Request<Body>| {
                calls.fetch_add(1, Ordering::SeqCst);
                async { Ok::<_, std::convert::Infallible>("ok") }
            })
        };
        let layer = RateLimitLayer::new(Limiter::memory(), rate, HeaderKey::new("x-api-key"))
            .scope("api")
            .on_missing_key(|_| StatusCode::UNAUTHORIZED.into_response());
        let service = layer.layer(service);
        let request = |key: Option<&str>| {
            let mut request = Request::builder();
            if let Some(key) = key {
                request = request.header("x-api-key", key);
            }
            request.body(Body::empty()).unwrap()
        };

        let first = service.clone().oneshot(request(Some("a"))).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        assert_eq!(first.headers()["ratelimit"], r#""default";r=1;t=60"#);
        assert_eq!(first.headers()["ratelimit-policy"], r#""default";q=2;w=60"#);
        let second = service.clone().oneshot(request(Some("a"))).await.unwrap();
        assert_eq!(second.headers()["ratelimit"], r#""default";r=0;t=60"#);
        let third = service.clone().oneshot(request(Some("a"))).await.unwrap();
        assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(third.headers()["retry-after"], "60");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let other = service.clone().oneshot(request(Some("b"))).await.unwrap();
        assert_eq!(other.status(), StatusCode::OK);
        let missing = service.clone().oneshot(request(None)).await.unwrap();
        assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    /// A layer of two rates, on the default scope and on one of its own: both listed on every
    /// response, a denial by either recorded by neither.
    #[tokio::test(flavor = "current_thread")]
    async fn limits_a_service_by_several_rates() {
        let burst = Rate::new(2, Duration::from_secs(1)).unwrap();
        let hourly = Rate::new(3, Duration::from_secs(3_600)).unwrap();
        for (scope, hourly_key) in [(None, "{layer/k}@3/1h"), (Some("api"), "{api/k}@1h")] {
            let service = tower::service_fn(|_: Request<Body>| async {
                Ok::<_, std::convert::Infallible>("ok")
            });
            let limiter = Limiter::memory();
            let mut layer =
                RateLimitLayer::new(limiter.clone(), burst, HeaderKey::new("x-api-key"))
                    .and_rate(hourly);
            if let Some(scope) = scope {
                layer = layer.scope(scope);
            }
            let service = layer.layer(service);
            let request = || {
                Request::builder()
                    .header("x-api-key", "k")
                    .body(Body::empty())
                    .unwrap()
            };
            let first = service.clone().oneshot(request()).await.unwrap();
            assert_eq!(first.status(), StatusCode::OK);
            assert_eq!(
                first.headers()["ratelimit-policy"],
                r#""1s";q=2;w=1, "1h";q=3;w=3600"#
            );
            assert_eq!(
                first.headers()["ratelimit"],
                r#""1s";r=1;t=1, "1h";r=2;t=3600"#
            );
            service.clone().oneshot(request()).await.unwrap();
            let denied = service.clone().oneshot(request()).await.unwrap();
            assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(denied.headers()["retry-after"], "1");
            assert_eq!(
                denied.headers()["ratelimit"],
                r#""1s";r=0;t=1, "1h";r=1;t=3600"#
            );
            // The hourly limit did not count the denied request: one is left.
            let hour = limiter.check(hourly_key, hourly).await.unwrap();
            assert_eq!((hour.allowed, hour.remaining), (true, 0), "{scope:?}");
        }
    }

    /// On the default scope each rate's key names it, the same rate given twice in one layer
    /// with `-2`; a scope set by `scope`, even `layer`, keys as the attribute does.
    #[tokio::test(flavor = "current_thread")]
    async fn default_scoped_keys_name_their_rates() {
        let per_minute = Rate::new(2, Duration::from_secs(60)).unwrap();
        let request = || {
            Request::builder()
                .header("x-api-key", "a/b")
                .body(Body::empty())
                .unwrap()
        };
        let remaining =
            async |layer: RateLimitLayer<HeaderKey>, limiter: &Limiter, keys: &[&str]| {
                let service = layer.layer(tower::service_fn(|_: Request<Body>| async {
                    Ok::<_, std::convert::Infallible>("ok")
                }));
                let response = service.oneshot(request()).await.unwrap();
                assert_eq!(response.status(), StatusCode::OK);
                let mut remaining = Vec::new();
                for key in keys {
                    remaining.push(limiter.peek(key, per_minute).await.unwrap().remaining);
                }
                remaining
            };
        let limiter = Limiter::memory();
        let one = RateLimitLayer::new(limiter.clone(), per_minute, HeaderKey::new("x-api-key"));
        assert_eq!(
            remaining(one, &limiter, &[r"{layer/a\/b}@2/1m", r"layer/a\/b"]).await,
            [1, 2]
        );
        let limiter = Limiter::memory();
        let twice = RateLimitLayer::new(limiter.clone(), per_minute, HeaderKey::new("x-api-key"))
            .and_rate(per_minute);
        assert_eq!(
            remaining(
                twice,
                &limiter,
                &[r"{layer/a\/b}@2/1m", r"{layer/a\/b}@2/1m-2"]
            )
            .await,
            [1, 1]
        );
        let limiter = Limiter::memory();
        let named = RateLimitLayer::new(limiter.clone(), per_minute, HeaderKey::new("x-api-key"))
            .scope("layer");
        assert_eq!(
            remaining(named, &limiter, &[r"{layer/a\/b}@2/1m", r"layer/a\/b"]).await,
            [2, 1]
        );
    }
}
