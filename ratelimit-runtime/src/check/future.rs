//! [`Checking`]: the future of one check. An in-process check (or one the failure policy
//! answers without I/O) completes on its first poll, in its span, without building any inner
//! future; a remote check boxes its leg, since it waits on the network anyway.
//!
//! Hand-written rather than an `async fn`: an `async fn`'s state machine would keep every
//! local of the remote leg in the future's own size, which is moved into every caller's
//! future and costs every in-process check (its size is pinned by a test in `limiter.rs`),
//! and could not complete on its first poll without building that state.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::SystemTime;

use tracing::Instrument as _;

use super::answer::{Next, Registered};
use super::shared::Shared;
use crate::clock;
use crate::decision::Decision;
use crate::error::RateLimitError;
use crate::key::Key;
use crate::limit::LimitRef;
use crate::rate::Rate;
use crate::telemetry;

/// The remote leg of a check: its answer, and the key back.
type Remote<'a> =
    Pin<Box<dyn Future<Output = (Result<Decision, RateLimitError>, Key<'a>)> + Send + 'a>>;

/// One check of a key against `rate`, made when first polled.
pub(crate) struct Checking<'a> {
    shared: &'a Arc<Shared>,
    /// The attribute's or the layer's scope: the span's field, the metrics' label, and the
    /// prefix stripped from a scoped key in the denial's debug event.
    scope: Option<&'a str>,
    rate: Rate,
    /// The time `check_at` gave (`None`: now), turned into µs when the check is made.
    at: Option<SystemTime>,
    stage: Stage<'a>,
    done: bool,
    /// The attribute's check of one limit, whose scope the registry is asked about on the
    /// first poll (see [`Checking::registered`]).
    registered: bool,
}

/// Who holds the key: one field, so that the future stays small.
enum Stage<'a> {
    /// The check, before it is made, while it is made without I/O, and once it is over.
    Key(Key<'a>),
    /// The remote leg, until it answers with the key.
    Remote(Remote<'a>),
    /// Taken by the caller once the check was over.
    Taken,
}

impl<'a> Checking<'a> {
    /// A check of `key` against `rate` for a call of cost 1 (other costs go through
    /// `check/all.rs`) at `at` (`None`: now) on the limiter whose state is `shared`; `scope`
    /// for the checks of the attribute and the layer (see [`telemetry`]).
    #[inline]
    pub(crate) fn new(
        shared: &'a Arc<Shared>,
        scope: Option<&'a str>,
        key: Key<'a>,
        rate: Rate,
        at: Option<SystemTime>,
    ) -> Checking<'a> {
        Checking {
            shared,
            scope,
            rate,
            at,
            stage: Stage::Key(key),
            done: false,
            registered: false,
        }
    }

    /// The attribute's check of one limit in `scope` (its key `E(scope)/E(key)`, or the scope
    /// alone), through the registry: on its first poll, a scope without an entry costs a few
    /// instructions ([`Registry::is_code`](crate::registry::Registry::is_code)); otherwise
    /// the check is made against the rate in force, in shadow mode, or answered without one
    /// (off, an exempt key, a blocked one).
    #[inline]
    pub(crate) fn registered(
        shared: &'a Arc<Shared>,
        scope: &'a str,
        key: Key<'a>,
        rate: Rate,
    ) -> Checking<'a> {
        Checking {
            shared,
            scope: Some(scope),
            rate,
            at: None,
            stage: Stage::Key(key),
            done: false,
            registered: true,
        }
    }

    /// A check of `key` whose answer `leg` gives (with the key back), against `rate` (the
    /// registry's: a check in a scope in shadow mode, or an answer decided without a check),
    /// `scope` the attribute's or the layer's.
    #[cfg_attr(not(feature = "axum"), allow(dead_code))]
    pub(crate) fn leg(
        shared: &'a Arc<Shared>,
        scope: Option<&'a str>,
        rate: Rate,
        leg: impl Future<Output = (Result<Decision, RateLimitError>, Key<'a>)> + Send + 'a,
    ) -> Checking<'a> {
        Checking {
            shared,
            scope,
            rate,
            at: None,
            stage: Stage::Remote(Box::pin(leg)),
            done: false,
            registered: false,
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

impl Checking<'_> {
    /// The registry's part of an attribute's check in `scope`, which has an entry (or the
    /// limiter is off): `None` to go on with the check (its rate set to the one in force);
    /// else the answer decided without a check (`Some(Some(..))`), or the check in shadow
    /// mode, now its remote leg, to poll (`Some(None)`).
    #[cold]
    #[inline(never)]
    fn resolve(&mut self, scope: &str) -> Option<Option<Result<Decision, RateLimitError>>> {
        let shared = self.shared;
        let Stage::Key(key) = &self.stage else {
            unreachable!("resolved on the first poll")
        };
        // The poll asked `is_code` already: the snapshot at once, which finds the key's
        // override by the `E(key)` the key holds.
        let resolved = shared
            .registry
            .view()
            .resolve_stored(scope, self.rate, key, || shared.now_us());
        match shared.registered(Some(scope), key, self.rate, resolved) {
            Registered::Check(rate) => {
                self.rate = rate;
                None
            }
            Registered::Shadow(rate) => {
                self.rate = rate;
                let Stage::Key(key) = std::mem::replace(&mut self.stage, Stage::Taken) else {
                    unreachable!("matched above")
                };
                let scope = self.scope;
                self.stage = Stage::Remote(Box::pin(async move {
                    let answer = shared.check_in_shadow(scope, &key, rate).await;
                    (answer, key)
                }));
                Some(None)
            }
            Registered::Decided(rate, decision) => {
                self.rate = rate;
                self.done = true;
                Some(Some(Ok(decision)))
            }
        }
    }
}

impl Future for Checking<'_> {
    type Output = Result<Decision, RateLimitError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        assert!(!this.done, "a rate limit check polled after it completed");
        if this.registered {
            this.registered = false;
            if let Some(scope) = this.scope
                && !this.shared.registry.is_code(scope)
                && let Some(answer) = this.resolve(scope)
            {
                return match answer {
                    Some(answer) => Poll::Ready(answer),
                    None => Pin::new(this).poll(cx),
                };
            }
        }
        let key = match &mut this.stage {
            Stage::Key(key) => &**key,
            Stage::Remote(remote) => {
                let (result, key) = ready!(remote.as_mut().poll(cx));
                this.stage = Stage::Key(key);
                this.done = true;
                return Poll::Ready(result);
            }
            Stage::Taken => unreachable!("the key is taken only once the check is over"),
        };
        if this.rate.is_concurrency() {
            this.done = true;
            return Poll::Ready(Err(super::answer::concurrency_error()));
        }
        let explicit = this.at.is_some();
        let at = match this.at.map(clock::micros_since_epoch).transpose() {
            Ok(at) => this.shared.time_of(at),
            Err(error) => {
                this.done = true;
                return Poll::Ready(Err(error));
            }
        };
        let (shared, scope, rate, cost) = (this.shared, this.scope, this.rate, 1);
        let next = || shared.next(scope, LimitRef { key, rate, cost }, at, explicit);
        let span = telemetry::span(scope);
        // A span no subscriber wants (and no `log` logger, with tracing's `log` feature) is
        // `Span::none()`, with nothing to enter.
        let next = if span.is_none() {
            next()
        } else {
            span.in_scope(next)
        };
        let ticket = match next {
            Next::InProcess(verdict) => {
                this.done = true;
                let decision = verdict.decision(rate);
                if !decision.allowed && shared.shadow() {
                    return Poll::Ready(Ok(decision.in_shadow()));
                }
                return Poll::Ready(Ok(decision));
            }
            Next::Answered(result) => {
                this.done = true;
                return Poll::Ready(result);
            }
            Next::Yielding(result) => {
                let Stage::Key(key) = std::mem::replace(&mut this.stage, Stage::Taken) else {
                    unreachable!("the key was borrowed from this stage above")
                };
                this.stage = Stage::Remote(Box::pin(async move {
                    crate::runtime::yield_now().await;
                    (result, key)
                }));
                return Pin::new(this).poll(cx);
            }
            Next::Remote { ticket } => ticket,
        };
        let Stage::Key(key) = std::mem::replace(&mut this.stage, Stage::Taken) else {
            unreachable!("the key was borrowed from this stage above")
        };
        let remote: Remote<'_> = Box::pin(
            async move {
                let result = shared
                    .remote(
                        scope,
                        LimitRef {
                            key: &key,
                            rate,
                            cost,
                        },
                        at,
                        ticket,
                    )
                    .await;
                (result, key)
            }
            .instrument(span),
        );
        this.stage = Stage::Remote(remote);
        Pin::new(this).poll(cx)
    }
}
