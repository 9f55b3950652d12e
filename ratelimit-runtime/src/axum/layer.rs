//! [`RateLimitLayer`]: a tower layer that limits every request to the service it wraps.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use ::axum::extract::ConnectInfo;
use ::axum::response::{IntoResponse, Response};
use http::request::Parts;
use http::{HeaderName, Request, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use crate::__private::scoped_key;
use crate::checking::Key;
use crate::{Denied, Limiter, Rate, RateLimitError};

/// The scope of a layer's keys when none is set: keys are `layer:<key>`.
const DEFAULT_SCOPE: &str = "layer";

/// Finds the key a request is limited by, in its head (method, URI, headers, extensions).
///
/// Implemented by [`PeerIp`], [`HeaderKey`], and any closure
/// `Fn(&http::request::Parts) -> Option<String>`. `None` means the request does not carry a key:
/// it is then answered by the layer's [`on_missing_key`](RateLimitLayer::on_missing_key)
/// response, never passed through unlimited.
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of the request whose head is `parts`, or `None` when it has none.
    fn extract(&self, parts: &Parts) -> Option<String>;
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<String> {
        self(parts)
    }
}

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
///   by default `400 Bad Request` with a problem+json body.
///
/// The Redis key of a request is `<prefix><scope>:<key>`, the scope `layer` unless set by
/// [`scope`](RateLimitLayer::scope): give each layer with another rate its own scope, since a
/// key is meant for one rate.
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
    scope: Cow<'static, str>,
    key: Arc<K>,
    on_missing_key: Arc<dyn Fn(&Parts) -> Response + Send + Sync>,
}

impl<K> Clone for Config<K> {
    fn clone(&self) -> Self {
        Config {
            limiter: self.limiter.clone(),
            rate: self.rate,
            scope: self.scope.clone(),
            key: Arc::clone(&self.key),
            on_missing_key: Arc::clone(&self.on_missing_key),
        }
    }
}

impl<K: KeyExtractor> RateLimitLayer<K> {
    /// A layer checking every request against `rate` with `limiter`, keyed by `key`.
    #[must_use]
    pub fn new(limiter: Limiter, rate: Rate, key: K) -> Self {
        RateLimitLayer {
            config: Arc::new(Config {
                limiter,
                rate,
                scope: Cow::Borrowed(DEFAULT_SCOPE),
                key: Arc::new(key),
                on_missing_key: Arc::new(|_: &Parts| missing_key_response()),
            }),
        }
    }

    /// The scope of the layer's keys (default `layer`): keys are `<scope>:<key>`, and a denial's
    /// message (sent as its `detail`) names the scope.
    #[must_use]
    pub fn scope(self, scope: impl Into<Cow<'static, str>>) -> Self {
        self.map_config(|config| config.scope = scope.into())
    }

    /// The response to a request whose key cannot be extracted (default:
    /// `400 Bad Request`, problem+json). The request is not passed on: a missing key never
    /// lifts the limit. 400 rather than 429 because waiting does not help: the request lacks
    /// what the limit is keyed by (a header, a peer address behind a trusted proxy), and
    /// retrying it as it is would fail again.
    #[must_use]
    pub fn on_missing_key(
        self,
        respond: impl Fn(&Parts) -> Response + Send + Sync + 'static,
    ) -> Self {
        self.map_config(|config| config.on_missing_key = Arc::new(respond))
    }

    fn map_config(self, change: impl FnOnce(&mut Config<K>)) -> Self {
        let mut config = Arc::unwrap_or_clone(self.config);
        change(&mut config);
        RateLimitLayer {
            config: Arc::new(config),
        }
    }
}

fn missing_key_response() -> Response {
    super::problem(
        StatusCode::BAD_REQUEST,
        "the request does not carry what its rate limit is keyed by",
    )
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
                tracing::debug!(scope = %config.scope, "no rate limit key in the request");
                return Ok((config.on_missing_key)(&parts));
            };
            let scoped = scoped_key(&config.scope, &key);
            let checked = config
                .limiter
                .checking(&config.scope, Key::Borrowed(&scoped), config.rate)
                .await;
            let decision = match checked {
                Ok(decision) => decision,
                Err(error) => return Ok(error.into_response()),
            };
            if !decision.allowed {
                let denied = Denied::new(config.scope.clone(), Some(key), config.rate, decision);
                return Ok(RateLimitError::Denied(Box::new(denied)).into_response());
            }
            let mut response = inner
                .call(Request::from_parts(parts, body))
                .await?
                .into_response();
            decision
                .headers(config.rate)
                .apply_if_absent(response.headers_mut());
            Ok(response)
        })
    }
}

/// Keys requests by the value of a header, such as an API key (`HeaderKey::new("x-api-key")`).
/// A request without it, or with a value that is empty or not visible ASCII, has no key.
///
/// The header's value becomes part of the key, so it reaches the store (keys are never logged
/// above debug level).
#[derive(Clone, Debug)]
pub struct HeaderKey {
    name: HeaderName,
}

impl HeaderKey {
    /// Keys by the header `name`.
    ///
    /// # Panics
    ///
    /// When `name` is not a valid header name.
    #[must_use]
    pub fn new(name: &str) -> Self {
        HeaderKey {
            name: HeaderName::from_str(name).expect("a valid header name"),
        }
    }
}

impl KeyExtractor for HeaderKey {
    fn extract(&self, parts: &Parts) -> Option<String> {
        let value = parts.headers.get(&self.name)?.to_str().ok()?.trim();
        (!value.is_empty()).then(|| value.to_owned())
    }
}

/// Keys requests by the client's IP address: the peer of the connection, from axum's
/// [`ConnectInfo<SocketAddr>`](ConnectInfo) (serve the router with
/// `into_make_service_with_connect_info::<SocketAddr>()`; without it no request has a key, and
/// an error is logged once).
///
/// # Behind a proxy
///
/// Behind a reverse proxy or load balancer every request comes from the proxy's address, so
/// all clients would share one limit. [`trust_forwarded_from`](PeerIp::trust_forwarded_from)
/// names the proxies whose `X-Forwarded-For` is believed: when the peer is one of them, the
/// list is read from its right end (the entry the proxy itself added) leftwards, skipping the
/// trusted proxies, and the first other address is the client.
///
/// **Spoofing**: `X-Forwarded-For` is written by whoever sends the request. Trusting it from
/// any peer would let every client pick its own key, and so its own limit, by sending a new
/// address each time. It is therefore ignored unless the peer is a configured proxy, and only
/// the entries that trusted proxies appended are used, so a forged entry to their left is
/// never reached. Trust only proxies that append the address they received from (as nginx's
/// `$proxy_add_x_forwarded_for`, HAProxy's `option forwardfor`, and cloud load balancers
/// do). When a trusted proxy's entry cannot be read as an IP address the request has no key.
/// IPv4-mapped IPv6 addresses count as their IPv4 address.
#[derive(Debug, Default)]
pub struct PeerIp {
    trusted: Vec<IpRange>,
    warned: AtomicBool,
}

impl PeerIp {
    /// Keys by the peer address, ignoring `X-Forwarded-For`.
    #[must_use]
    pub fn new() -> Self {
        PeerIp::default()
    }

    /// Believes `X-Forwarded-For` from these proxies (addresses or CIDR ranges, see
    /// [`IpRange`]).
    #[must_use]
    pub fn trust_forwarded_from(mut self, proxies: impl IntoIterator<Item = IpRange>) -> Self {
        self.trusted.extend(proxies);
        self
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|range| range.contains(ip))
    }

    /// The client address of a request from `peer` with these `X-Forwarded-For` field lines.
    fn client<'a>(
        &self,
        peer: IpAddr,
        forwarded: impl DoubleEndedIterator<Item = &'a str>,
    ) -> Option<IpAddr> {
        let mut client = peer.to_canonical();
        let mut entries = forwarded.rev().flat_map(|line| line.rsplit(','));
        while self.is_trusted(client) {
            let Some(entry) = entries.next() else {
                // Every hop is a trusted proxy: the leftmost one is the client.
                break;
            };
            client = parse_forwarded(entry)?.to_canonical();
        }
        Some(client)
    }
}

/// One `X-Forwarded-For` entry: an IP address, IPv6 possibly in brackets, possibly with a port
/// (not standard, but some proxies write it).
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    entry
        .parse::<SocketAddr>()
        .map(|addr| addr.ip())
        .ok()
        .or_else(|| entry.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

impl KeyExtractor for PeerIp {
    fn extract(&self, parts: &Parts) -> Option<String> {
        let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() else {
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::error!(
                    "PeerIp found no ConnectInfo<SocketAddr>: serve the router with \
                     `into_make_service_with_connect_info::<SocketAddr>()`; requests are \
                     answered as having no key"
                );
            }
            return None;
        };
        let forwarded = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .map(|value| value.to_str().unwrap_or(""))
            .collect::<Vec<_>>();
        self.client(peer.ip(), forwarded.into_iter())
            .map(|ip| ip.to_string())
    }
}

/// An IP address or a CIDR range of them, such as `10.0.0.7`, `10.0.0.0/8` or `fd00::/8`:
/// the proxies [`PeerIp`] believes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpRange {
    network: IpAddr,
    prefix: u8,
}

impl IpRange {
    /// The single address `ip`.
    #[must_use]
    pub fn ip(ip: IpAddr) -> Self {
        let ip = ip.to_canonical();
        let prefix = if ip.is_ipv4() { 32 } else { 128 };
        IpRange {
            network: ip,
            prefix,
        }
    }

    /// `true` when `ip` is in the range.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(
                u128::from(net.to_bits()) << 96,
                u128::from(ip.to_bits()) << 96,
                self.prefix,
            ),
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(net.to_bits(), ip.to_bits(), self.prefix)
            }
            _ => false,
        }
    }
}

fn prefix_eq(a: u128, b: u128, prefix: u8) -> bool {
    prefix == 0 || (a ^ b) >> (128 - u32::from(prefix)) == 0
}

/// Parses `ip` or `ip/prefix`.
impl FromStr for IpRange {
    type Err = RateLimitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || {
            RateLimitError::InvalidConfig(
                format!("`{text}` is not an IP address or a CIDR range such as 10.0.0.0/8").into(),
            )
        };
        let (ip, prefix) = match text.split_once('/') {
            Some((ip, prefix)) => (ip, Some(prefix)),
            None => (text, None),
        };
        let range = IpRange::ip(ip.parse().map_err(|_| invalid())?);
        let Some(prefix) = prefix else {
            return Ok(range);
        };
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        // An IPv4-mapped IPv6 range counts as its IPv4 range.
        let prefix = match (ip.parse::<IpAddr>(), range.network) {
            (Ok(IpAddr::V6(_)), IpAddr::V4(_)) => prefix.checked_sub(96).ok_or_else(invalid)?,
            _ => prefix,
        };
        if prefix > range.prefix {
            return Err(invalid());
        }
        Ok(IpRange {
            network: range.network,
            prefix,
        })
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ::axum::body::Body;
    use tower::ServiceExt as _;

    use super::*;

    fn range(text: &str) -> IpRange {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn ranges_parse_and_contain() {
        assert!(range("10.0.0.0/8").contains(ip("10.255.0.1")));
        assert!(!range("10.0.0.0/8").contains(ip("11.0.0.1")));
        assert!(range("10.1.2.3").contains(ip("10.1.2.3")));
        assert!(!range("10.1.2.3").contains(ip("10.1.2.4")));
        assert!(range("0.0.0.0/0").contains(ip("203.0.113.9")));
        assert!(!range("0.0.0.0/0").contains(ip("::1")));
        assert!(range("fd00::/8").contains(ip("fd12::1")));
        assert!(!range("fd00::/8").contains(ip("fe80::1")));
        assert!(range("127.0.0.1").contains(ip("::ffff:127.0.0.1")));
        assert!(range("::ffff:10.0.0.0/104").contains(ip("10.9.9.9")));
        assert_eq!(range("::ffff:10.0.0.0/104").to_string(), "10.0.0.0/8");
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/x",
            "host",
            "::ffff:1.2.3.4/95",
        ] {
            let err = bad.parse::<IpRange>().unwrap_err();
            assert!(matches!(err, RateLimitError::InvalidConfig(_)), "{bad}");
        }
    }

    #[test]
    fn forwarded_for_is_believed_from_trusted_proxies_only() {
        let open = PeerIp::new();
        let proxied = PeerIp::new().trust_forwarded_from([range("10.0.0.0/8"), range("::1")]);
        let client = |peer_ip: &PeerIp, peer: &str, lines: &[&str]| {
            peer_ip
                .client(ip(peer), lines.iter().copied())
                .map(|ip| ip.to_string())
        };
        // Untrusted peers: the header is ignored, whatever it says.
        assert_eq!(
            client(&open, "203.0.113.9", &["1.2.3.4"]).as_deref(),
            Some("203.0.113.9")
        );
        assert_eq!(
            client(&proxied, "203.0.113.9", &["1.2.3.4"]).as_deref(),
            Some("203.0.113.9")
        );
        // A trusted proxy: the rightmost untrusted entry, never a forged one to its left.
        let forged = ["6.6.6.6, 198.51.100.7"];
        assert_eq!(
            client(&proxied, "10.0.0.1", &forged).as_deref(),
            Some("198.51.100.7")
        );
        let chain = ["6.6.6.6, 198.51.100.7, 10.0.0.2", "10.0.0.3"];
        assert_eq!(
            client(&proxied, "10.0.0.1", &chain).as_deref(),
            Some("198.51.100.7")
        );
        // Brackets, ports, IPv4-mapped peers.
        assert_eq!(
            client(&proxied, "::1", &["[2001:db8::1]:4711"]).as_deref(),
            Some("2001:db8::1")
        );
        assert_eq!(
            client(&proxied, "::ffff:10.0.0.1", &["192.0.2.1:80"]).as_deref(),
            Some("192.0.2.1")
        );
        // Only trusted hops: the leftmost; a trusted proxy without the header: itself.
        assert_eq!(
            client(&proxied, "10.0.0.1", &["10.0.0.9"]).as_deref(),
            Some("10.0.0.9")
        );
        assert_eq!(
            client(&proxied, "10.0.0.1", &[]).as_deref(),
            Some("10.0.0.1")
        );
        // An unreadable entry where a trusted proxy's should be: no key.
        assert_eq!(client(&proxied, "10.0.0.1", &["1.2.3.4, unknown"]), None);
        assert_eq!(client(&proxied, "10.0.0.1", &[""]), None);
    }

    #[test]
    fn header_keys_need_a_visible_non_empty_value() {
        let key = HeaderKey::new("x-api-key");
        let parts = |value: Option<&str>| {
            let mut request = Request::builder();
            if let Some(value) = value {
                request = request.header("x-api-key", value);
            }
            request.body(()).unwrap().into_parts().0
        };
        assert_eq!(key.extract(&parts(Some(" abc "))).as_deref(), Some("abc"));
        assert_eq!(key.extract(&parts(Some("  "))), None);
        assert_eq!(key.extract(&parts(None)), None);
    }

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
}
