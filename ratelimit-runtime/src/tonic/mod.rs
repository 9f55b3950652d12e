//! [tonic](https://docs.rs/tonic) integration (feature `tonic`): gRPC services limited by
//! `#[rate_limit]` on their methods, or by a tower layer on the whole server, each denial
//! answered as gRPC clients and their retry policies expect.
//!
//! # The attribute on a service's methods
//!
//! [`RateLimitError`](crate::RateLimitError) converts into a [`tonic::Status`], so
//! `#[rate_limit]` goes on a method of a `#[tonic::async_trait]` impl returning
//! `Result<Response<T>, Status>` as on any `async fn`; its `key` may read the request:
//!
//! ```
//! use ratelimit_runtime::rate_limit;
//! use tonic::{Code, Request, Response, Status};
//! use tonic_types::StatusExt as _;
//!
//! # #[tonic::async_trait]
//! # pub trait Greeter: Send + Sync + 'static {
//! #     async fn say_hello(&self, request: Request<String>) -> Result<Response<String>, Status>;
//! # }
//! // `Greeter` is a trait tonic generated from a `.proto` file.
//! struct MyGreeter;
//!
//! #[tonic::async_trait]
//! impl Greeter for MyGreeter {
//!     #[rate_limit(period = 60, threshold = 2, key = request.get_ref(), name = "greeter")]
//!     async fn say_hello(&self, request: Request<String>) -> Result<Response<String>, Status> {
//!         Ok(Response::new(format!("hello, {}", request.into_inner())))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! # ratelimit_runtime::set_global(ratelimit_runtime::Limiter::memory()).unwrap();
//! let greeter = MyGreeter;
//! for _ in 0..2 {
//!     greeter.say_hello(Request::new("ana".into())).await.unwrap();
//! }
//! let denied = greeter.say_hello(Request::new("ana".into())).await.unwrap_err();
//! assert_eq!(denied.code(), Code::ResourceExhausted);
//! assert!(denied.get_details_retry_info().unwrap().retry_delay.is_some());
//! assert!(denied.metadata().get("grpc-retry-pushback-ms").is_some());
//! # }
//! ```
//!
//! A denied call's status goes back as its whole answer (a trailers-only response) before
//! the body runs, whatever the kind of call: a server-streaming method's stream is never made,
//! a client-streaming method's stream is never read, and the client's call itself returns
//! `Err(Status)`.
//!
//! # The layer on a server
//!
//! [`RateLimitLayer`] is the `axum` feature's layer: tonic servers are tower services of
//! `http::Request`s, and the layer answers a gRPC call (a `POST` whose `content-type` is
//! `application/grpc`, alone or with a subtype) with the statuses below instead of HTTP
//! responses, before the service runs. It keys requests by the peer's address ([`PeerIp`],
//! believing `x-forwarded-for` from trusted proxies only), by a metadata entry
//! ([`MetadataKey`]), or by a closure over the request's head (metadata entries are its
//! headers; extensions such as a TLS server's `TlsConnectInfo` are there too):
//!
//! ```no_run
//! use std::time::Duration;
//! use ratelimit_runtime::tonic::{MetadataKey, RateLimitLayer};
//! use ratelimit_runtime::{Limiter, Rate};
//!
//! # async fn run(routes: tonic::service::Routes) -> Result<(), Box<dyn std::error::Error>> {
//! // The attribute's default limiter (Redis when `REDIS_URL` is set), or one of your own.
//! let limiter: Limiter = ratelimit_runtime::global().clone();
//! let per_key = RateLimitLayer::new(
//!     limiter,
//!     Rate::new(100, Duration::from_secs(60))?,
//!     MetadataKey::new("x-api-key"),
//! )
//! .scope("api");
//! tonic::transport::Server::builder()
//!     .layer(per_key)
//!     .add_routes(routes) // or `.add_service(GreeterServer::new(greeter))`
//!     .serve("127.0.0.1:50051".parse()?)
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`PeerIp`] reads the address a tonic server gives over TCP (`TcpConnectInfo`). A server on
//! a Unix socket, or behind tonic's own TLS, gives none: key its requests by a metadata entry
//! (or, with TLS, by a closure reading `TlsConnectInfo<TcpConnectInfo>`); a [`PeerIp`] layer
//! there answers every request `INTERNAL`, naming this fix.
//!
//! Admitted calls get the `ratelimit-policy` and `ratelimit` fields as response metadata,
//! unless the service set its own (a method under `#[rate_limit]` that denies sets its
//! limit's). A concurrency limit ([`RateLimitLayer::concurrency`]) holds a call's slot until
//! its response stream ends. Limits apply to calls, not to the messages of a stream: a stream
//! of a thousand messages is one call.
//!
//! # Statuses
//!
//! | error | code | message | details | metadata |
//! | --- | --- | --- | --- | --- |
//! | [`Denied`](crate::RateLimitError::Denied) | `RESOURCE_EXHAUSTED` | ``rate limit exceeded for `scope`: retry after 27.400s`` (a concurrency limit's: ``concurrency limit reached for `scope`: 4 calls in flight; retry after 0.100s``) | `RetryInfo` (the retry-after), `QuotaFailure` | `grpc-retry-pushback-ms`, `ratelimit-policy`, `ratelimit`, `retry-after` |
//! | [`Unavailable`](crate::RateLimitError::Unavailable) (store down, [`FailurePolicy::Closed`](crate::FailurePolicy::Closed)) | `UNAVAILABLE` | `the rate limit store is unavailable; try again later` | `RetryInfo` (5 s) | `grpc-retry-pushback-ms` (`5000`), `retry-after` (`5`) |
//! | [`CostTooHigh`](crate::RateLimitError::CostTooHigh) | `INVALID_ARGUMENT` | its `Display` | | |
//! | [`InvalidInput`](crate::RateLimitError::InvalidInput), [`InvalidConfig`](crate::RateLimitError::InvalidConfig) (logged at error level) | `INTERNAL` | `the rate limit could not be checked` | | |
//! | the layer: no key in the request | `INVALID_ARGUMENT` | `the request does not carry what its rate limit is keyed by` | | |
//! | the layer: a [`PeerIp`] layer on a server that gives no peer address | `INTERNAL` | ``the server cannot tell the client's address, which its rate limit is keyed by: serve a tonic server over TCP without TLS (`Server::serve`, or `serve_with_incoming` of TCP streams), an axum router with `into_make_service_with_connect_info::<SocketAddr>()`, or key the requests by a metadata entry (`MetadataKey`)`` | | |
//!
//! The messages name the scope, never the key (keys may hold user identifiers). The
//! `QuotaFailure` holds a violation per limit that denied the call: its `subject` the scope,
//! its `description` the limit (`at most 2 per 30s`, `at most 4 calls in flight`), its
//! `quota_id` the limit's name in `ratelimit-policy` (`default` for a lone limit, else its
//! label) and its `quota_value` the threshold. `grpc-retry-pushback-ms` is the retry-after in
//! whole milliseconds, rounded up, which gRPC's retry policy honours (gRFC A6) for the codes
//! it retries. A layer's [`on_missing_key`](RateLimitLayer::on_missing_key) response replaces
//! the `INVALID_ARGUMENT` (answer it with `Status::into_http`).
//!
//! Without the `tonic` feature, the layer answers gRPC requests as HTTP ones: a `429`, which
//! gRPC clients read as `UNAVAILABLE` without the details.

pub(crate) mod status;

pub use crate::axum::{IpRange, KeyExtractor, PeerIp, RateLimitLayer, RateLimitService};

/// Keys requests by the value of an ASCII metadata entry, such as an API key
/// (`MetadataKey::new("x-api-key")`): the `axum` feature's [`HeaderKey`](crate::axum::HeaderKey),
/// since a gRPC request's metadata entries are its headers. A request without it, or with a
/// value that is empty, has no key: it is answered `INVALID_ARGUMENT`. Key by ASCII entries:
/// a binary (`-bin`) entry's value is keyed as sent, its base64 text, which a client may write
/// in more than one way (padded or not) and so be counted under more than one key.
pub type MetadataKey = crate::axum::HeaderKey;
