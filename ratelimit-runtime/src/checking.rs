//! [`Checking`]: the future of one check. An in-process check completes on its first poll, in
//! its span, without building any inner future; a Redis check boxes its future, since it
//! waits on the network anyway.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::SystemTime;

use tracing::Instrument as _;

use crate::clock;
use crate::{Decision, Limiter, Rate, RateLimitError};

/// A key a check borrows, or owns (the attribute's `scope:key`, built per call).
pub(crate) enum Key<'a> {
    Borrowed(&'a str),
    Owned(String),
}

impl Key<'_> {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(key) => key,
            Key::Owned(key) => key,
        }
    }
}

/// The Redis path of a check: its answer, and the key back.
type Remote<'a> =
    Pin<Box<dyn Future<Output = (Result<Decision, RateLimitError>, Key<'a>)> + Send + 'a>>;

/// One check of `key` against `rate` by `limiter`, made when first polled.
pub(crate) struct Checking<'a> {
    limiter: &'a Limiter,
    /// The attribute's or the layer's scope: the span's field, the metrics' label, and the
    /// prefix stripped from a scoped key in the denial's debug event.
    scope: Option<&'a str>,
    /// `None` while the Redis path owns it, or after an early error.
    key: Option<Key<'a>>,
    rate: Rate,
    /// The time `check_at` gave (`None`: now), turned into µs when the check is made.
    at: Option<SystemTime>,
    remote: Option<Remote<'a>>,
    done: bool,
}

impl<'a> Checking<'a> {
    #[inline]
    pub(crate) fn new(
        limiter: &'a Limiter,
        scope: Option<&'a str>,
        key: Key<'a>,
        rate: Rate,
        at: Option<SystemTime>,
    ) -> Checking<'a> {
        Checking {
            limiter,
            scope,
            key: Some(key),
            rate,
            at,
            remote: None,
            done: false,
        }
    }

    /// The key, once the check is over.
    pub(crate) fn take_key(&mut self) -> Option<Key<'a>> {
        self.key.take()
    }

    /// The rate checked against.
    pub(crate) fn rate(&self) -> Rate {
        self.rate
    }
}

impl Future for Checking<'_> {
    type Output = Result<Decision, RateLimitError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        assert!(!this.done, "a rate limit check polled after it completed");
        if let Some(remote) = &mut this.remote {
            let (result, key) = ready!(remote.as_mut().poll(cx));
            this.remote = None;
            this.key = Some(key);
            this.done = true;
            return Poll::Ready(result);
        }
        let now_us = match this.at.map(clock::micros_since_epoch).transpose() {
            Ok(now_us) => now_us,
            Err(error) => {
                this.done = true;
                return Poll::Ready(Err(error));
            }
        };
        let (limiter, scope, rate) = (this.limiter, this.scope, this.rate);
        // Only the Redis path takes the key, and it was polled above.
        let key = this.key.as_ref().expect("`Checking` holds its key");
        let check = || limiter.check_local(scope, key.as_str(), rate, now_us);
        let span = Limiter::span(scope);
        // A disabled span (no subscriber wants it) has nothing to enter.
        let local = if span.is_disabled() {
            check()
        } else {
            span.in_scope(check)
        };
        let probe = match local {
            Ok(result) => {
                this.done = true;
                return Poll::Ready(result);
            }
            Err(probe) => probe,
        };
        let key = this.key.take().expect("`Checking` holds its key");
        let mut remote: Remote<'_> = Box::pin(
            async move {
                #[cfg(feature = "metrics")]
                let started = std::time::Instant::now();
                let outcome = match limiter.remote_call(key.as_str(), rate, now_us, probe) {
                    Ok(call) => call.await,
                    Err(error) => Err(error),
                };
                let result = limiter.finish_remote(
                    scope,
                    key.as_str(),
                    rate,
                    now_us,
                    outcome,
                    #[cfg(feature = "metrics")]
                    started,
                );
                (result, key)
            }
            .instrument(span),
        );
        match remote.as_mut().poll(cx) {
            Poll::Ready((result, key)) => {
                this.key = Some(key);
                this.done = true;
                Poll::Ready(result)
            }
            Poll::Pending => {
                this.remote = Some(remote);
                Poll::Pending
            }
        }
    }
}
