//! The `tonic` feature end to end: the example's echo service served by tonic over a real
//! socket (TCP, and a Unix socket), called by its generated tonic client. A denial is a
//! status the client reads, with `RetryInfo`, `QuotaFailure` and `grpc-retry-pushback-ms`
//! that agree; every kind of call is denied before its handler (a trailers-only answer, so
//! the client's call itself fails); the layer and the attribute answer alike.

use std::future::Future;
use std::time::{Duration, Instant};

use examples::grpc::echo::echo_client::EchoClient;
use examples::grpc::echo::echo_server::EchoServer;
use examples::grpc::echo::{EchoReply, EchoRequest};
use examples::grpc::{Echo, LimitedEcho};
use hyper_util::rt::TokioIo;
use ratelimit_runtime::tonic::{KeyExtractor, MetadataKey, PeerIp, RateLimitLayer};
use ratelimit_runtime::{Concurrency, Limiter, Rate};
use tests::TestRedis;
use tokio_stream::StreamExt as _;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Request, Status};
use tonic_types::StatusExt as _;

use crate::support::hello::unavailable_limiter;
use crate::support::http::{client as http_client, seconds_up};

type Client = EchoClient<Channel>;
type Served = Result<(), tonic::transport::Error>;

fn per_minute(threshold: u64) -> Rate {
    Rate::new(threshold, Duration::from_secs(60)).unwrap()
}

/// Serves what `serve` makes of a listener on 127.0.0.1 (a free port), in the test's runtime;
/// a client of it.
async fn on_tcp<F: Future<Output = Served> + Send + 'static>(
    serve: impl FnOnce(TcpIncoming) -> F,
) -> Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(TcpIncoming::from(listener)));
    EchoClient::connect(format!("http://{addr}")).await.unwrap()
}

/// As [`on_tcp`], on a Unix socket in `dir`.
async fn on_unix_socket<F: Future<Output = Served> + Send + 'static>(
    dir: &tempfile::TempDir,
    serve: impl FnOnce(tokio_stream::wrappers::UnixListenerStream) -> F,
) -> Client {
    let path = dir.path().join("echo.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(serve(tokio_stream::wrappers::UnixListenerStream::new(
        listener,
    )));
    // The URI is not dialled: the connector opens the socket.
    let channel = Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        }))
        .await
        .unwrap();
    EchoClient::new(channel)
}

/// Where a test's server listens.
#[derive(Clone, Copy)]
enum Socket<'a> {
    Tcp,
    /// A Unix socket in this directory.
    Unix(&'a tempfile::TempDir),
}

/// Serves `echo` under `layer` on `socket`; a client of it.
async fn serve_layered<K: KeyExtractor>(
    layer: RateLimitLayer<K>,
    echo: Echo,
    socket: Socket<'_>,
) -> Client {
    let router = Server::builder()
        .layer(layer)
        .add_service(EchoServer::new(echo));
    match socket {
        Socket::Tcp => on_tcp(|incoming| router.serve_with_incoming(incoming)).await,
        Socket::Unix(dir) => {
            on_unix_socket(dir, |incoming| router.serve_with_incoming(incoming)).await
        }
    }
}

/// Serves `service`, whose methods the attribute limits, over TCP; a client of it.
async fn serve_attributed(service: LimitedEcho) -> Client {
    on_tcp(|incoming| {
        Server::builder()
            .add_service(EchoServer::new(service))
            .serve_with_incoming(incoming)
    })
    .await
}

/// A request of `user`, with `metadata` entries.
fn request(user: &str, metadata: &[(&'static str, &str)]) -> Request<EchoRequest> {
    with_metadata(
        EchoRequest {
            message: "hi".into(),
            user: user.into(),
            count: 2,
        },
        metadata,
    )
}

fn with_metadata<T>(message: T, metadata: &[(&'static str, &str)]) -> Request<T> {
    let mut request = Request::new(message);
    for (name, value) in metadata {
        request.metadata_mut().insert(*name, value.parse().unwrap());
    }
    request
}

/// A stream of two requests of `user`, its `x-user` entry set.
fn stream_of(user: &str) -> Request<impl tokio_stream::Stream<Item = EchoRequest> + use<>> {
    let messages = ["a", "b"].map(|message| EchoRequest {
        message: message.into(),
        user: user.into(),
        count: 0,
    });
    with_metadata(tokio_stream::iter(messages), &[("x-user", user)])
}

/// What a denial's status says, checked to agree with itself: its retry-after (`RetryInfo`),
/// equal to `grpc-retry-pushback-ms` in whole milliseconds rounded up and to `retry-after`
/// in whole seconds; and its single `QuotaFailure` violation, as
/// `(subject, description, quota_id, quota_value)`.
fn read_denial(status: &Status) -> (Duration, (String, String, String, i64)) {
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let retry = status
        .get_details_retry_info()
        .expect("RetryInfo")
        .retry_delay
        .expect("a retry delay");
    let metadata = status.metadata();
    let pushback: u128 = metadata
        .get("grpc-retry-pushback-ms")
        .expect("grpc-retry-pushback-ms")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(pushback, retry.as_nanos().div_ceil(1_000_000), "{status:?}");
    assert_eq!(
        metadata.get("retry-after").unwrap().to_str().unwrap(),
        seconds_up(retry).to_string()
    );
    let violations = status
        .get_details_quota_failure()
        .expect("QuotaFailure")
        .violations;
    assert_eq!(violations.len(), 1, "{violations:?}");
    let v = &violations[0];
    (
        retry,
        (
            v.subject.clone(),
            v.description.clone(),
            v.quota_id.clone(),
            v.quota_value,
        ),
    )
}

/// The tonic layer keyed by the peer's address over TCP: two calls admitted with the
/// RateLimit fields as metadata, the third `RESOURCE_EXHAUSTED` with details that agree, and
/// nothing of the key (the client's address) in the status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_over_tcp_carries_retry_info_quota_failure_and_pushback() {
    let layer =
        RateLimitLayer::new(Limiter::memory(), per_minute(2), PeerIp::new()).scope("grpc-peer");
    let mut client = serve_layered(layer, Echo::default(), Socket::Tcp).await;
    for remaining in [1, 0] {
        let reply = client.unary(request("ana", &[])).await.unwrap();
        assert_eq!(reply.get_ref().message, "hi");
        let metadata = reply.metadata();
        assert_eq!(
            metadata.get("ratelimit-policy").unwrap(),
            r#""default";q=2;w=60"#
        );
        let rate_limit = metadata.get("ratelimit").unwrap().to_str().unwrap();
        assert!(
            rate_limit.starts_with(&format!(r#""default";r={remaining};t="#)),
            "{rate_limit}"
        );
    }
    let denied = client.unary(request("ana", &[])).await.unwrap_err();
    let (retry, violation) = read_denial(&denied);
    assert!(retry > Duration::from_secs(50) && retry <= Duration::from_secs(60));
    assert_eq!(
        violation,
        (
            "grpc-peer".into(),
            "at most 2 per 1m".into(),
            "default".into(),
            2
        )
    );
    assert!(
        denied
            .message()
            .starts_with("rate limit exceeded for `grpc-peer`: retry after "),
        "{}",
        denied.message()
    );
    let everything = format!("{denied:?} {:?}", denied.get_error_details());
    assert!(!everything.contains("127.0.0.1"), "{everything}");
}

/// The answer of a first `attempt` (0), which must be admitted; `None` for a second one, which
/// must be denied in scope `echo`.
fn first_admitted<T>(attempt: u32, result: Result<T, Status>, kind: &str) -> Option<T> {
    match (attempt, result) {
        (0, Ok(answer)) => Some(answer),
        (0, Err(status)) => panic!("{kind}: the first call was denied: {status:?}"),
        (_, Ok(_)) => panic!("{kind}: the second call was admitted"),
        (_, Err(status)) => {
            let (_, violation) = read_denial(&status);
            assert_eq!(violation.0, "echo", "{kind}");
            None
        }
    }
}

/// Calls every kind of call of `client` as `user` (each kind as a user of its own): the first
/// of each admitted and answered in full, the second denied by the call itself (the answer is
/// trailers-only: no stream to read), `RESOURCE_EXHAUSTED`, scope `echo`, its handler never
/// run (`handled` counts the calls that reached one).
async fn each_kind_admits_once(client: &mut Client, user: &str, handled: impl Fn() -> u64) {
    let metadata = |kind: &str| format!("{user}-{kind}");
    for attempt in 0..2 {
        let before = handled();
        let unary_user = metadata("unary");
        let unary = client
            .unary(request(&unary_user, &[("x-user", &unary_user)]))
            .await;
        if let Some(reply) = first_admitted(attempt, unary, "unary") {
            assert_eq!(reply.into_inner().message, "hi");
        }
        let server_user = metadata("server");
        let server = client
            .server_stream(request(&server_user, &[("x-user", &server_user)]))
            .await;
        if let Some(stream) = first_admitted(attempt, server, "server streaming") {
            let replies: Vec<EchoReply> = stream.into_inner().map(Result::unwrap).collect().await;
            assert_eq!(replies.len(), 2);
        }
        let client_stream = client.client_stream(stream_of(&metadata("client"))).await;
        if let Some(reply) = first_admitted(attempt, client_stream, "client streaming") {
            assert_eq!(reply.into_inner().message, "a b");
        }
        let bidi = client.bidi(stream_of(&metadata("bidi"))).await;
        if let Some(stream) = first_admitted(attempt, bidi, "bidirectional streaming") {
            let replies: Vec<EchoReply> = stream.into_inner().map(Result::unwrap).collect().await;
            assert_eq!(replies.len(), 2);
        }
        let ran = if attempt == 0 { 4 } else { 0 };
        assert_eq!(handled() - before, ran, "handlers run on attempt {attempt}");
    }
}

/// Unary, server-, client- and bidirectional streaming calls, each denied before its handler
/// by the layer and by the attribute, the client's call itself returning the status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_call_is_denied_before_its_handler() {
    let layer = RateLimitLayer::new(Limiter::memory(), per_minute(1), MetadataKey::new("x-user"))
        .scope("echo");
    let echo = Echo::default();
    let served = echo.clone();
    let mut by_layer = serve_layered(layer, served, Socket::Tcp).await;
    each_kind_admits_once(&mut by_layer, "layer", || echo.handled()).await;
    let service = LimitedEcho::new(Limiter::memory(), per_minute(1));
    let served = service.clone();
    let mut by_attribute = serve_attributed(served).await;
    each_kind_admits_once(&mut by_attribute, "attribute", || service.handled()).await;
}

/// The layer and the attribute, in one scope on one Redis, deny alike: the same code, the same
/// message but for the time, the same details and fields; and both name no key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_and_the_attribute_answer_alike() {
    let redis = TestRedis::start();
    let limiter = || Limiter::builder().redis_url(redis.url()).build().unwrap();
    let layer =
        RateLimitLayer::new(limiter(), per_minute(1), MetadataKey::new("x-user")).scope("echo");
    let mut by_layer = serve_layered(layer, Echo::default(), Socket::Tcp).await;
    let service = LimitedEcho::new(limiter(), per_minute(1));
    let mut by_attribute = serve_attributed(service).await;
    // Users of their own: which logs a layer and an attribute share is the keys page's.
    let mut answers = Vec::new();
    for (client, user) in [
        (&mut by_layer, "bea-layer"),
        (&mut by_attribute, "bea-attr"),
    ] {
        let call = || request(user, &[("x-user", user)]);
        client.unary(call()).await.unwrap();
        let denied = client.unary(call()).await.unwrap_err();
        let (_, violation) = read_denial(&denied);
        let message = denied.message();
        assert!(!message.contains(user) && !format!("{violation:?}").contains(user));
        let metadata = denied.metadata();
        let field = |name: &str| metadata.get(name).unwrap().to_str().unwrap().to_owned();
        let before_time = message[..message.find("retry after").unwrap()].to_owned();
        let rate_limit = field("ratelimit");
        answers.push((
            before_time,
            violation,
            field("ratelimit-policy"),
            rate_limit[..rate_limit.find(";t=").unwrap()].to_owned(),
        ));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(
        answers[0].0, "rate limit exceeded for `echo`: ",
        "{answers:?}"
    );
}

/// Under a layer and the attribute at once: an admitted call carries the layer's fields, a
/// call the method denies the method's (the layer keeps a service's own), and counts in the
/// layer's limit all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_both_a_denial_carries_the_fields_of_the_limit_that_denied() {
    let limiter = Limiter::memory();
    let layer = RateLimitLayer::new(limiter.clone(), per_minute(3), MetadataKey::new("x-user"))
        .scope("server");
    let service = LimitedEcho::new(limiter, per_minute(1));
    let mut client = on_tcp(|incoming| {
        Server::builder()
            .layer(layer)
            .add_service(EchoServer::new(service))
            .serve_with_incoming(incoming)
    })
    .await;
    let call = || request("gus", &[("x-user", "gus")]);
    let admitted = client.unary(call()).await.unwrap();
    let policy = |metadata: &tonic::metadata::MetadataMap| {
        metadata
            .get("ratelimit-policy")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(policy(admitted.metadata()), r#""default";q=3;w=60"#);
    let by_method = client.unary(call()).await.unwrap_err();
    assert_eq!(read_denial(&by_method).1.0, "echo");
    assert_eq!(policy(by_method.metadata()), r#""default";q=1;w=60"#);
    client.unary(call()).await.unwrap_err();
    let by_layer = client.unary(call()).await.unwrap_err();
    assert_eq!(read_denial(&by_layer).1.0, "server");
    assert_eq!(policy(by_layer.metadata()), r#""default";q=3;w=60"#);
}

/// On a Unix socket, which gives no peer address: keyed by a metadata entry, a call without
/// it `INVALID_ARGUMENT`; a `PeerIp` layer there answers `INTERNAL`, naming the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_is_keyed_by_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let layer = RateLimitLayer::new(
        Limiter::memory(),
        per_minute(1),
        MetadataKey::new("x-api-key"),
    )
    .scope("unix");
    let mut client = serve_layered(layer, Echo::default(), Socket::Unix(&dir)).await;
    let keyed = || request("cy", &[("x-api-key", "k1")]);
    client.unary(keyed()).await.unwrap();
    let denied = client.unary(keyed()).await.unwrap_err();
    assert_eq!(read_denial(&denied).1.0, "unix");
    // Another key, its own limit.
    client
        .unary(request("cy", &[("x-api-key", "k2")]))
        .await
        .unwrap();
    let missing = client.unary(request("cy", &[])).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument);
    assert_eq!(
        missing.message(),
        "the request does not carry what its rate limit is keyed by"
    );

    let dir = tempfile::tempdir().unwrap();
    let layer = RateLimitLayer::new(Limiter::memory(), per_minute(1), PeerIp::new());
    let mut client = serve_layered(layer, Echo::default(), Socket::Unix(&dir)).await;
    let no_address = client.unary(request("cy", &[])).await.unwrap_err();
    assert_eq!(no_address.code(), Code::Internal);
    assert_eq!(
        no_address.message(),
        "the server cannot tell the client's address, which its rate limit is keyed by: serve \
         a tonic server over TCP without TLS (`Server::serve`, or `serve_with_incoming` of TCP \
         streams), an axum router with `into_make_service_with_connect_info::<SocketAddr>()`, \
         or key the requests by a metadata entry (`MetadataKey`)"
    );
}

/// A store that cannot answer, failing closed: `UNAVAILABLE` with a pushback of 5 s, from the
/// layer and from the attribute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_answer_is_unavailable() {
    let layer = RateLimitLayer::new(unavailable_limiter().await, per_minute(1), PeerIp::new());
    let mut by_layer = serve_layered(layer, Echo::default(), Socket::Tcp).await;
    let service = LimitedEcho::new(unavailable_limiter().await, per_minute(1));
    let mut by_attribute = serve_attributed(service).await;
    for client in [&mut by_layer, &mut by_attribute] {
        let status = client.unary(request("dee", &[])).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{status:?}");
        assert_eq!(
            status.message(),
            "the rate limit store is unavailable; try again later"
        );
        assert_eq!(
            status.metadata().get("grpc-retry-pushback-ms").unwrap(),
            "5000"
        );
        assert_eq!(
            status.get_details_retry_info().unwrap().retry_delay,
            Some(Duration::from_secs(5))
        );
    }
}

/// A concurrency limit on the layer holds a call's slot until its response stream ends: a
/// second bidirectional call is denied while the first one's stream is open, and admitted
/// once it has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_limit_holds_a_stream_until_it_ends() {
    let layer = RateLimitLayer::concurrency(
        Limiter::memory(),
        Concurrency::new(1).unwrap(),
        MetadataKey::new("x-user"),
    )
    .scope("streams");
    let mut client = serve_layered(layer, Echo::default(), Socket::Tcp).await;
    // The first call's requests go on until `sender` is dropped.
    let (sender, receiver) = tokio::sync::mpsc::channel::<EchoRequest>(1);
    let open = with_metadata(
        tokio_stream::wrappers::ReceiverStream::new(receiver),
        &[("x-user", "eve")],
    );
    let mut replies = client.bidi(open).await.unwrap().into_inner();
    sender
        .send(EchoRequest {
            message: "first".into(),
            ..EchoRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(replies.next().await.unwrap().unwrap().message, "first");
    let denied = client.bidi(stream_of("eve")).await.unwrap_err();
    assert_eq!(denied.code(), Code::ResourceExhausted);
    assert!(
        denied
            .message()
            .starts_with("concurrency limit reached for `streams`: 1 call in flight"),
        "{}",
        denied.message()
    );
    assert_eq!(
        read_denial(&denied).1,
        (
            "streams".into(),
            "at most 1 call in flight".into(),
            "concurrency".into(),
            1
        )
    );
    drop(sender);
    assert!(replies.next().await.is_none(), "the first stream ended");
    // The slot is released as the response ends: wait for that, with a generous deadline.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.bidi(stream_of("eve")).await {
            Ok(_) => break,
            Err(status) if status.code() == Code::ResourceExhausted => {
                assert!(Instant::now() < deadline, "the slot was never released");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => panic!("{status:?}"),
        }
    }
}

/// A tonic service behind axum's `RateLimitLayer` (one router serving HTTP and gRPC): an
/// HTTP client gets HTTP answers, a gRPC client gRPC statuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_axum_router_answers_grpc_clients_with_statuses() {
    let grpc = tonic::service::Routes::new(EchoServer::new(Echo::default())).into_axum_router();
    let app = grpc
        .route("/health", axum::routing::get(|| async { "ok" }))
        .layer(
            RateLimitLayer::new(
                Limiter::memory(),
                per_minute(1),
                MetadataKey::new("x-api-key"),
            )
            .scope("mixed"),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut client = EchoClient::connect(format!("http://{addr}")).await.unwrap();
    client
        .unary(request("fay", &[("x-api-key", "g")]))
        .await
        .unwrap();
    let denied = client
        .unary(request("fay", &[("x-api-key", "g")]))
        .await
        .unwrap_err();
    assert_eq!(read_denial(&denied).1.0, "mixed");
    let missing = client.unary(request("fay", &[])).await.unwrap_err();
    assert_eq!(missing.code(), Code::InvalidArgument);

    let http = http_client();
    let url = format!("http://{addr}/health");
    let get = || http.get(&url).header("x-api-key", "h").send();
    assert_eq!(get().await.unwrap().status(), 200);
    assert_eq!(get().await.unwrap().status(), 429);
    assert_eq!(http.get(&url).send().await.unwrap().status(), 400);
}
