//! What a [`RateLimitLayer`](super::RateLimitLayer) keys requests by: [`KeyExtractor`], and
//! the extractors it comes with: a header ([`HeaderKey`]) and the client's IP address
//! ([`PeerIp`], believing `X-Forwarded-For` from the proxies in [`IpRange`]s only).

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use ::axum::extract::ConnectInfo;
use http::HeaderName;
use http::request::Parts;
use ipnet::IpNet;

use crate::error::RateLimitError;

/// Finds the key a request is limited by, in its head (method, URI, headers, extensions).
///
/// Implemented by [`PeerIp`], [`HeaderKey`], and any closure
/// `Fn(&http::request::Parts) -> Option<String>`. `None` means the request does not carry a key:
/// it is then answered by the layer's
/// [`on_missing_key`](super::RateLimitLayer::on_missing_key)
/// response, never passed through unlimited; or, when the server is set up so that no request
/// can carry one ([`setup_error`](KeyExtractor::setup_error)), by a `500`.
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of the request whose head is `parts`, or `None` when it has none.
    fn extract(&self, parts: &Parts) -> Option<String>;

    /// For a request of no key ([`extract`](KeyExtractor::extract) gave `None`): what is wrong
    /// with the server when the fault is its own rather than the request's, such as a router
    /// served without the connect info [`PeerIp`] reads. The layer answers it `500 Internal
    /// Server Error`, with this as the problem's `detail`, instead of the
    /// [`on_missing_key`](super::RateLimitLayer::on_missing_key) response, which tells the
    /// client that its request lacks something. Say how to fix it; never quote the request.
    /// `None` (the default): the request's fault.
    fn setup_error(&self, parts: &Parts) -> Option<Cow<'static, str>> {
        let _ = parts;
        None
    }
}

impl<F> KeyExtractor for F
where
    F: Fn(&Parts) -> Option<String> + Send + Sync + 'static,
{
    fn extract(&self, parts: &Parts) -> Option<String> {
        self(parts)
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
/// the layer answers each `500`, naming that method, and logs an error once).
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
///
/// # IPv6
///
/// An IPv6 client is keyed by its network, a /64 by default (`2001:db8:1:2::/64`): one
/// subscriber, or one host, is usually given a whole /64, so keying each address would give
/// one client 2^64 budgets to rotate through. [`ipv6_prefix`](PeerIp::ipv6_prefix) sets
/// another length (128: each address alone).
#[derive(Debug)]
pub struct PeerIp {
    trusted: Vec<IpRange>,
    ipv6_prefix: u8,
    warned: AtomicBool,
}

impl Default for PeerIp {
    fn default() -> Self {
        PeerIp {
            trusted: Vec::new(),
            ipv6_prefix: 64,
            warned: AtomicBool::new(false),
        }
    }
}

impl PeerIp {
    /// Keys by the peer address (an IPv6 one by its /64), ignoring `X-Forwarded-For`.
    #[must_use]
    pub fn new() -> Self {
        PeerIp::default()
    }

    /// Keys an IPv6 client by its first `length` bits (64 by default; 128 keys each address
    /// alone, 0 puts every IPv6 client under one key; a length above 128 counts as 128).
    /// IPv4 clients are keyed by their address whatever it is.
    #[must_use]
    pub fn ipv6_prefix(mut self, length: u8) -> Self {
        self.ipv6_prefix = length.min(128);
        self
    }

    /// The key of `client`: an IPv4 address as it is, an IPv6 one as its network.
    fn key_of(&self, client: IpAddr) -> String {
        match client {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(_) if self.ipv6_prefix == 128 => client.to_string(),
            IpAddr::V6(v6) => {
                let bits = u128::from(v6);
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.ipv6_prefix))
                    .unwrap_or(0);
                let network = std::net::Ipv6Addr::from(bits & mask);
                format!("{network}/{}", self.ipv6_prefix)
            }
        }
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
        let Some(peer) = connect_info(parts) else {
            if !self.warned.swap(true, Ordering::Relaxed) {
                let detail = no_peer_address(parts);
                tracing::error!(
                    "PeerIp found no connect info ({detail}); requests are answered 500 \
                     (gRPC calls INTERNAL) meanwhile"
                );
            }
            return None;
        };
        // Connect info without the peer's address (its lookup failed): the request has no
        // key.
        let peer = peer?;
        let forwarded = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .map(|value| value.to_str().unwrap_or(""))
            .collect::<Vec<_>>();
        self.client(peer.ip(), forwarded.into_iter())
            .map(|ip| self.key_of(ip))
    }

    fn setup_error(&self, parts: &Parts) -> Option<Cow<'static, str>> {
        connect_info(parts)
            .is_none()
            .then(|| Cow::Borrowed(no_peer_address(parts)))
    }
}

/// The peer's address, as axum's `ConnectInfo<SocketAddr>` or (feature `tonic`) a tonic
/// server's `TcpConnectInfo` gives it; `None` when the request has neither, `Some(None)` when
/// a tonic server could not tell the address of a TCP peer.
fn connect_info(parts: &Parts) -> Option<Option<SocketAddr>> {
    if let Some(ConnectInfo(peer)) = parts.extensions.get::<ConnectInfo<SocketAddr>>() {
        return Some(Some(*peer));
    }
    #[cfg(feature = "tonic")]
    if let Some(info) = parts
        .extensions
        .get::<::tonic::transport::server::TcpConnectInfo>()
    {
        return Some(info.remote_addr());
    }
    None
}

/// The detail of the answer to a request that reached a [`PeerIp`] layer without the peer's
/// address: how to serve an axum router so that it has one, and (feature `tonic`) for a gRPC
/// call, a tonic server too.
fn no_peer_address(parts: &Parts) -> &'static str {
    #[cfg(feature = "tonic")]
    if crate::tonic::status::is_grpc(parts) {
        return NO_GRPC_PEER_ADDRESS;
    }
    let _ = parts;
    NO_CONNECT_INFO
}

/// The detail of a `500` for an HTTP request that reached a [`PeerIp`] layer without the
/// peer's address.
const NO_CONNECT_INFO: &str = "the server cannot tell the client's address, which its rate \
    limit is keyed by: serve the router with \
    `into_make_service_with_connect_info::<SocketAddr>()`";

/// The message of an `INTERNAL` status for a gRPC call that reached a [`PeerIp`] layer
/// without the peer's address: a tonic server on a Unix socket or behind TLS, or an axum
/// router served without connect info.
#[cfg(feature = "tonic")]
const NO_GRPC_PEER_ADDRESS: &str = "the server cannot tell the client's address, which its \
    rate limit is keyed by: serve a tonic server over TCP without TLS (`Server::serve`, or \
    `serve_with_incoming` of TCP streams), an axum router with \
    `into_make_service_with_connect_info::<SocketAddr>()`, or key the requests by a metadata \
    entry (`MetadataKey`)";

/// An IP address or a CIDR range of them, such as `10.0.0.7`, `10.0.0.0/8` or `fd00::/8`:
/// the proxies [`PeerIp`] believes. An IPv4-mapped IPv6 address or range
/// (`::ffff:10.0.0.0/104`) is its IPv4 one (`10.0.0.0/8`), as the addresses it is matched
/// against are.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpRange(IpNet);

impl fmt::Debug for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IpRange")
            .field("network", &self.0.addr())
            .field("prefix", &self.0.prefix_len())
            .finish()
    }
}

impl IpRange {
    /// The single address `ip`.
    #[must_use]
    pub fn ip(ip: IpAddr) -> Self {
        IpRange(IpNet::from(ip.to_canonical()))
    }

    /// `true` when `ip` is in the range.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.contains(&ip.to_canonical())
    }
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
        let ip: IpAddr = ip.parse().map_err(|_| invalid())?;
        let Some(prefix) = prefix else {
            return Ok(IpRange::ip(ip));
        };
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        // An IPv4-mapped IPv6 range counts as its IPv4 range: its prefix less the 96 bits of
        // the mapping.
        let canonical = ip.to_canonical();
        let prefix = if ip.is_ipv6() && canonical.is_ipv4() {
            prefix.checked_sub(96).ok_or_else(invalid)?
        } else {
            prefix
        };
        IpNet::new(canonical, prefix)
            .map(IpRange)
            .map_err(|_| invalid())
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.0.addr(), self.0.prefix_len())
    }
}

#[cfg(test)]
mod tests {
    use http::Request;

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
        assert_eq!(
            format!("{:?}", range("10.1.2.3/8")),
            "IpRange { network: 10.1.2.3, prefix: 8 }"
        );
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
    fn ipv6_clients_are_keyed_by_their_network() {
        let key = |peer_ip: &PeerIp, client: &str| peer_ip.key_of(ip(client));
        let default = PeerIp::new();
        // Every address of one /64 is one client; the next /64 another.
        assert_eq!(key(&default, "2001:db8:1:2::1"), "2001:db8:1:2::/64");
        assert_eq!(
            key(&default, "2001:db8:1:2:ffff:ffff:ffff:ffff"),
            "2001:db8:1:2::/64"
        );
        assert_eq!(key(&default, "2001:db8:1:3::1"), "2001:db8:1:3::/64");
        // IPv4, and IPv4-mapped IPv6 (made canonical before), by the address.
        assert_eq!(key(&default, "203.0.113.9"), "203.0.113.9");
        assert_eq!(
            default
                .client(ip("::ffff:203.0.113.9"), std::iter::empty())
                .map(|client| default.key_of(client))
                .as_deref(),
            Some("203.0.113.9")
        );
        // Other lengths.
        let each = PeerIp::new().ipv6_prefix(128);
        assert_eq!(key(&each, "2001:db8:1:2::1"), "2001:db8:1:2::1");
        assert_eq!(key(&PeerIp::new().ipv6_prefix(200), "::1"), "::1");
        let site = PeerIp::new().ipv6_prefix(48);
        assert_eq!(key(&site, "2001:db8:1:2::1"), "2001:db8:1::/48");
        assert_eq!(key(&PeerIp::new().ipv6_prefix(0), "2001:db8::1"), "::/0");
        assert_eq!(key(&PeerIp::new().ipv6_prefix(1), "ffff::1"), "8000::/1");
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

    /// The peer's address from axum's `ConnectInfo` or a tonic server's `TcpConnectInfo`;
    /// without either the server's setup is at fault, and the answer says how to fix it for
    /// the kind of request; a tonic server that could not tell the address gives a request
    /// without a key, not a setup error.
    #[cfg(feature = "tonic")]
    #[test]
    fn the_peer_comes_from_axum_or_tonic_connect_info() {
        use ::tonic::transport::server::TcpConnectInfo;

        let peer: SocketAddr = "192.0.2.7:4000".parse().unwrap();
        let request = |method: http::Method, grpc: bool| {
            let mut request = Request::builder().method(method);
            if grpc {
                request = request.header(http::header::CONTENT_TYPE, "application/grpc");
            }
            request.body(()).unwrap().into_parts().0
        };
        let key = PeerIp::new();
        let mut axum = request(http::Method::GET, false);
        axum.extensions.insert(ConnectInfo(peer));
        assert_eq!(key.extract(&axum).as_deref(), Some("192.0.2.7"));
        let tonic = |remote_addr| {
            let mut parts = request(http::Method::POST, true);
            parts.extensions.insert(TcpConnectInfo {
                local_addr: None,
                remote_addr,
            });
            parts
        };
        assert_eq!(
            key.extract(&tonic(Some(peer))).as_deref(),
            Some("192.0.2.7")
        );
        assert_eq!(key.setup_error(&tonic(Some(peer))), None);
        assert_eq!(key.extract(&tonic(None)), None);
        assert_eq!(key.setup_error(&tonic(None)), None);
        let grpc = request(http::Method::POST, true);
        assert_eq!(key.extract(&grpc), None);
        assert_eq!(
            key.setup_error(&grpc).as_deref(),
            Some(NO_GRPC_PEER_ADDRESS)
        );
        let http = request(http::Method::GET, true);
        assert_eq!(key.setup_error(&http).as_deref(), Some(NO_CONNECT_INFO));
    }
}
