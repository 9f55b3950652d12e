//! The `grpc` example's service, limited two ways: [`Echo`] by the tonic layer on the server,
//! [`LimitedEcho`] by `#[rate_limit]` on its methods. The tests of the `tonic` feature serve
//! these very services.

use std::pin::Pin;

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

/// The echo service with no limits of its own: put the tonic layer in front of it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Echo;

fn reply(message: impl Into<String>) -> EchoReply {
    EchoReply {
        message: message.into(),
    }
}

#[tonic::async_trait]
impl echo::echo_server::Echo for Echo {
    async fn unary(&self, request: Request<EchoRequest>) -> Result<Response<EchoReply>, Status> {
        Ok(Response::new(reply(request.into_inner().message)))
    }

    type ServerStreamStream = Replies;

    async fn server_stream(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<Replies>, Status> {
        let request = request.into_inner();
        let replies =
            (0..request.count).map(move |n| Ok(reply(format!("{} {n}", request.message))));
        Ok(Response::new(Box::pin(tokio_stream::iter(replies))))
    }

    async fn client_stream(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoReply>, Status> {
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
        let replies = request
            .into_inner()
            .map(|next| next.map(|request| reply(request.message)));
        Ok(Response::new(Box::pin(replies)))
    }
}

/// The echo service whose every method is limited by `#[rate_limit]` at `rate`, in the scope
/// `echo`: a unary or server-streaming call keyed by its message's `user`, a client-streaming
/// or bidirectional one (whose messages come later) by its `x-user` metadata entry.
#[derive(Clone, Debug)]
pub struct LimitedEcho {
    limiter: Limiter,
    rate: Rate,
}

impl LimitedEcho {
    /// The service checking its calls against `rate` with `limiter`.
    #[must_use]
    pub fn new(limiter: Limiter, rate: Rate) -> Self {
        LimitedEcho { limiter, rate }
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
        echo::echo_server::Echo::unary(&Echo, request).await
    }

    type ServerStreamStream = Replies;

    #[rate_limit(rate = self.rate, key = request.get_ref().user, name = "echo", limiter = &self.limiter)]
    async fn server_stream(
        &self,
        request: Request<EchoRequest>,
    ) -> Result<Response<Replies>, Status> {
        echo::echo_server::Echo::server_stream(&Echo, request).await
    }

    #[rate_limit(rate = self.rate, key = user(&request), name = "echo", limiter = &self.limiter)]
    async fn client_stream(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<EchoReply>, Status> {
        echo::echo_server::Echo::client_stream(&Echo, request).await
    }

    type BidiStream = Replies;

    #[rate_limit(rate = self.rate, key = user(&request), name = "echo", limiter = &self.limiter)]
    async fn bidi(
        &self,
        request: Request<Streaming<EchoRequest>>,
    ) -> Result<Response<Replies>, Status> {
        echo::echo_server::Echo::bidi(&Echo, request).await
    }
}
