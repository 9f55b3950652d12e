//! The `grpc` example's service, limited two ways: [`Echo`] by the tonic layer on the server,
//! [`LimitedEcho`] by `#[rate_limit]` on its methods. The tests of the `tonic` feature serve
//! these very services.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ratelimit_runtime::{Limiter, Rate, rate_limit};
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status, Streaming};

/// The messages, client and server tonic generated from `examples/proto/echo.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod echo {
    include!("echo.rs");
}

use echo::{EchoReply, EchoRequest};

/// A stream of replies.
pub type Replies = Pin<Box<dyn Stream<Item = Result<EchoReply, Status>> + Send>>;

/// The echo service with no limits of its own: put the tonic layer in front of it. Its clones
/// count the calls they handle together.
#[derive(Clone, Debug, Default)]
pub struct Echo {
    handled: Arc<AtomicU64>,
}

impl Echo {
    /// How many calls reached a method of this service (or of a clone of it).
    #[must_use]
    pub fn handled(&self) -> u64 {
        self.handled.load(Ordering::SeqCst)
    }

    fn handle(&self) {
        self.handled.fetch_add(1, Ordering::SeqCst);
    }
}

fn reply(message: impl Into<String>) -> EchoReply {
    EchoReply {
        message: message.into(),
    }
}

#[tonic::async_trait]
impl echo::echo_server::Echo for Echo {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        self.handle();
        Ok(Response::new(reply(request.into_inner().message)))
    }

    type ServerStreamStream = Replies;

    async fn server_stream(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<Replies>, Status> {
        self.handle();
        let request = request.into_inner();
        let replies =
            (0..request.count).map(move |n| Ok(reply(format!("{} {n}", request.message))));
        Ok(Response::new(Box::pin(tokio_stream::iter(replies))))
    }

    async fn client_stream(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoReply>, Status> {
        self.handle();
        let mut stream = request.into_inner();
        let mut messages = Vec::new();
        while let Some(next) = stream.next().await {
            messages.push(next?.message);
        }
        Ok(Response::new(reply(messages.join(" "))))
    }

    type BidiStream = Replies;

    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<Replies>, Status> {
        self.handle();
        let replies = request
            .into_inner()
            .map(|next| next.map(|request| reply(request.message)));
        Ok(Response::new(Box::pin(replies)))
    }
}

/// The echo service whose every method is limited by `#[rate_limit]` at `rate`, in the scope
/// `echo`: a unary or server-streaming call keyed by its message's `user`, a client-streaming
/// or bidirectional one (whose messages come later) by its `x-user` metadata entry (the calls
/// without one share the key `""`: the tonic layer's `MetadataKey` refuses them instead).
#[derive(Clone, Debug)]
pub struct LimitedEcho {
    limiter: Limiter,
    rate: Rate,
    echo: Echo,
}

impl LimitedEcho {
    /// The service checking its calls against `rate` with `limiter`.
    #[must_use]
    pub fn new(limiter: Limiter, rate: Rate) -> Self {
        LimitedEcho {
            limiter,
            rate,
            echo: Echo::default(),
        }
    }

    /// How many calls its limits admitted: those that reached its methods' bodies.
    #[must_use]
    pub fn handled(&self) -> u64 {
        self.echo.handled()
    }
}

/// The `x-user` metadata entry of a request (empty when it has none).
fn user<T>(request: &Request<T>) -> &str {
    request
        .metadata()
        .get("x-user")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
}

#[tonic::async_trait]
impl echo::echo_server::Echo for LimitedEcho {
    #[rate_limit(rate = self.rate, key = request.get_ref().user, name = "echo", limiter = &self.limiter)]
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        echo::echo_server::Echo::unary(&self.echo, request).await
    }

    type ServerStreamStream = Replies;

    #[rate_limit(rate = self.rate, key = request.get_ref().user, name = "echo", limiter = &self.limiter)]
    async fn server_stream(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<Replies>, Status> {
        echo::echo_server::Echo::server_stream(&self.echo, request).await
    }

    #[rate_limit(rate = self.rate, key = user(&request), name = "echo", limiter = &self.limiter)]
    async fn client_stream(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoReply>, Status> {
        echo::echo_server::Echo::client_stream(&self.echo, request).await
    }

    type BidiStream = Replies;

    #[rate_limit(rate = self.rate, key = user(&request), name = "echo", limiter = &self.limiter)]
    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<Replies>, Status> {
        echo::echo_server::Echo::bidi(&self.echo, request).await
    }
}
