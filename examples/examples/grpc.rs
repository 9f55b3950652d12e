//! A gRPC service limited two ways, called by a tonic client over TCP: the server's tonic
//! layer allows 5 calls per minute per API key (`x-api-key` metadata), and `#[rate_limit]` on
//! the service's methods 2 calls per 30 seconds per user. Each denial is a status the client
//! reads: `RESOURCE_EXHAUSTED` with `RetryInfo`, `QuotaFailure` and `grpc-retry-pushback-ms`.
//!
//! In process by default; through Redis when `REDIS_URL` (or `RATELIMIT_REDIS_URL`) is set, e.g.
//! `REDIS_URL=redis://127.0.0.1:6379/ cargo run -p examples --features tonic --example grpc`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use examples::grpc::LimitedEcho;
use examples::grpc::echo::EchoRequest;
use examples::grpc::echo::echo_client::EchoClient;
use examples::grpc::echo::echo_server::EchoServer;
use ratelimit_runtime::Rate;
use ratelimit_runtime::tonic::{MetadataKey, RateLimitLayer};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_types::StatusExt as _;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (limiter, store) = examples::limiter_from_env()?;
    println!("store: {store}");

    // The server: the layer in front of every call, the attribute on each method.
    let per_api_key = RateLimitLayer::new(
        limiter.clone(),
        Rate::new(5, Duration::from_secs(60))?,
        MetadataKey::new("x-api-key"),
    )
    .scope("echo-server");
    let service = LimitedEcho::new(limiter, Rate::new(2, Duration::from_secs(30))?);
    let (listener, addr) = examples::bind_from_env().await?;
    tokio::spawn(
        Server::builder()
            .layer(per_api_key)
            .add_service(EchoServer::new(service))
            .serve_with_incoming(TcpIncoming::from(listener)),
    );

    // The client: a key and users unique to this run, so that running it again shows the
    // same outcomes.
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros());
    let mut client = EchoClient::connect(format!("http://{addr}")).await?;
    for (call, user) in ["ana", "ana", "ana", "bob", "bob", "bob"]
        .into_iter()
        .enumerate()
    {
        let mut request = tonic::Request::new(EchoRequest {
            message: format!("hello from {user}"),
            user: format!("{user}-{run}"),
            count: 0,
        });
        request
            .metadata_mut()
            .insert("x-api-key", format!("key-{run}").parse()?);
        match client.unary(request).await {
            Ok(reply) => println!("call {}: {}", call + 1, reply.into_inner().message),
            Err(status) => {
                println!(
                    "call {}: {:?}: {}",
                    call + 1,
                    status.code(),
                    status.message()
                );
                if let Some(retry) = status.get_details_retry_info() {
                    println!(
                        "  RetryInfo: retry after {:?}",
                        retry.retry_delay.unwrap_or_default()
                    );
                }
                for violation in status
                    .get_details_quota_failure()
                    .map(|q| q.violations)
                    .unwrap_or_default()
                {
                    println!(
                        "  QuotaFailure: `{}`: {}",
                        violation.subject, violation.description
                    );
                }
                if let Some(pushback) = status.metadata().get("grpc-retry-pushback-ms") {
                    println!("  grpc-retry-pushback-ms: {}", pushback.to_str()?);
                }
            }
        }
    }
    Ok(())
}
