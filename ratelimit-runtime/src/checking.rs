//! [`Checking`]: the future of one check. An in-process check completes on its first poll, in
//! its span, without building any inner future; a Redis check boxes its future, since it
//! waits on the network anyway.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::SystemTime;

use tracing::Instrument as _;

use crate::clock;
use crate::limiter::Local;
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

/// The key of a scoped check without its `scope:` prefix (`None`: it has none, as the key of
/// an attribute without `key`, which is the scope itself).
pub(crate) fn unscoped<'k>(scope: &str, key: &'k str) -> Option<&'k str> {
    key.strip_prefix(scope)?.strip_prefix(':')
}

/// The Redis path of a check: its answer, and the key back.
type Remote<'a> =
    Pin<Box<dyn Future<Output = (Result<Decision, RateLimitError>, Key<'a>)> + Send + 'a>>;

/// One check of a key against `rate` by `limiter`, made when first polled.
pub(crate) struct Checking<'a> {
    limiter: &'a Limiter,
    /// The attribute's or the layer's scope: the span's field, the metrics' label, and the
    /// prefix stripped from a scoped key in the denial's debug event.
    scope: Option<&'a str>,
    rate: Rate,
    /// The time `check_at` gave (`None`: now), turned into µs when the check is made.
    at: Option<SystemTime>,
    stage: Stage<'a>,
    done: bool,
}

/// Who holds the key: one field, so that the future stays small (it is moved into the
/// caller's future, and its size is part of every in-process check's cost).
enum Stage<'a> {
    /// The check, before it is made, while it is made in process, and once it is over.
    Key(Key<'a>),
    /// The Redis path, until it answers with the key.
    Remote(Remote<'a>),
    /// Taken by the caller once the check was over.
    Taken,
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
            rate,
            at,
            stage: Stage::Key(key),
            done: false,
        }
    }

    /// The key, once the check is over.
    pub(crate) fn take_key(&mut self) -> Option<Key<'a>> {
        if !self.done {
            return None;
        }
        match std::mem::replace(&mut self.stage, Stage::Taken) {
            Stage::Key(key) => Some(key),
            Stage::Remote(_) | Stage::Taken => None,
        }
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
        let key = match &mut this.stage {
            Stage::Key(key) => &*key,
            Stage::Remote(remote) => {
                let (result, key) = ready!(remote.as_mut().poll(cx));
                this.stage = Stage::Key(key);
                this.done = true;
                return Poll::Ready(result);
            }
            Stage::Taken => unreachable!("the key is taken only once the check is over"),
        };
        let now_us = match this.at.map(clock::micros_since_epoch).transpose() {
            Ok(now_us) => now_us,
            Err(error) => {
                this.done = true;
                return Poll::Ready(Err(error));
            }
        };
        let (limiter, scope, rate) = (this.limiter, this.scope, this.rate);
        let check = || limiter.check_local(scope, key.as_str(), rate, now_us);
        let span = Limiter::span(scope);
        // A span no subscriber wants (and no `log` logger, with tracing's `log` feature) is
        // `Span::none()`, with nothing to enter.
        let local = if span.is_none() {
            check()
        } else {
            span.in_scope(check)
        };
        let probe = match local {
            Ok(Local::InProcess(verdict)) => {
                this.done = true;
                return Poll::Ready(Ok(verdict.decision(rate)));
            }
            Ok(Local::Answered(result)) => {
                this.done = true;
                return Poll::Ready(result);
            }
            Err(probe) => probe,
        };
        let Stage::Key(key) = std::mem::replace(&mut this.stage, Stage::Taken) else {
            unreachable!("the key was borrowed from this stage above")
        };
        let remote: Remote<'_> = Box::pin(
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
        this.stage = Stage::Remote(remote);
        Pin::new(this).poll(cx)
    }
}
