//! A check of several limits at once (each with its key, rate and cost): one decision, all or
//! nothing.
//!
//! In process, and on one Redis server, the limits are one atomic step whatever their keys:
//! one lock of all their shards, one script. In a Redis Cluster they go by slot, one script
//! per slot at once (limits whose keys share a hash tag share a slot, and a round trip), and
//! the step is reserve then refund: each slot's script admits and records, and when any slot
//! denies, fails or times out, the others' records are refunded before the check returns.
//!
//! A slot the store cannot answer (its breaker open, or its call failed) takes part as the
//! failure policy answers: `Open` admits and records nothing; `Local` checks its limits in the
//! fallback, once the store's slots have all admitted (so that it never needs a refund);
//! `Closed` fails the check with `Unavailable`.
//!
//! An admitted check tells where it recorded the call ([`Records`]), so that a refund asked
//! for later (the call's outcome known: `Limiter::check_permit`, the attribute's `count`)
//! removes exactly that call's entries, from the store that holds them (`permit.rs` in this
//! folder). A shadow check (shadow mode) is checked and recorded as any other, and its denial
//! is reported, then answered as an admission that would have been denied, recording nothing.
//!
//! Before a remote check, the deny cache (`deny_cache.rs`) is asked of each limit of cost 1:
//! the first one it denies decides the check, which then reports that limit alone (the
//! others were not checked); the composite rules apply to the store's answers. The store's
//! answers settle the tickets of the limits the cache did not know.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use futures_util::future::join_all;

use super::answer::open_admission;
use super::deny_cache::Ticket;
use super::future::Checking;
use super::shared::Shared;
use crate::clock;
use crate::decision::Decision;
use crate::decisions::Decisions;
use crate::error::{RateLimitError, StoreError};
use crate::headers::is_label;
use crate::limit::{Limit, LimitRef};
use crate::policy::FailurePolicy;
use crate::rate::Rate;
use crate::runtime::{HandOff, Runtime};
use crate::store::{Access, Admission};
use crate::telemetry::{self, Timer};

use super::permit::{Owned, Records, Where, borrowed, owned};

impl Shared {
    /// Checks `limits` together at `at` (`None`: now): admitted iff every limit admits the
    /// call, and then recorded in each; denied, recorded in none (see the module docs for a
    /// cluster's slots and for failures). `scope`: the span's field and the metrics' label.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] for no limit, two limits with one key, a label that
    /// is not printable ASCII, or `at` out of range; [`RateLimitError::CostTooHigh`] for a
    /// cost above its limit's threshold or [`Limit::MAX_COST`](crate::Limit::MAX_COST);
    /// [`RateLimitError::Unavailable`] when a part of the store failed under
    /// [`FailurePolicy::Closed`].
    pub(crate) async fn check_all(
        self: &Arc<Self>,
        scope: Option<&str>,
        limits: Vec<Limit<'_>>,
        at: Option<SystemTime>,
    ) -> Result<Decisions, RateLimitError> {
        // One leased limit of cost 1 on a remote store (the attribute with `decision` or a
        // `label`, `check_n` of 1): through its lease, as `Limiter::check` goes. A permit needs
        // its records (`check_recorded`), and is checked without.
        if let [limit] = limits.as_slice()
            && limit.cost() == 1
            && limit.rate().is_leased()
            && at.is_none()
            && self.clock.is_none()
            && !self.shadow()
            && matches!(self.store.access(), Access::Remote)
        {
            validate(&limits, false)?;
            let mut limits = limits;
            let label = limits[0].take_label();
            let (key, rate) = (limits[0].key(), limits[0].rate());
            let decision = Checking::new(self, scope, Cow::Borrowed(key), rate, None).await?;
            return Ok(Decisions::new(std::iter::once((label, rate, decision))));
        }
        let (decisions, _records) = self.check_recorded(scope, limits, at, false).await?;
        Ok(decisions)
    }

    /// A check of one limit in shadow mode (a scope's): checked and recorded as any other, a
    /// denial reported and answered as an admission that would have been denied. Shadow mode
    /// never fails a call: a store that cannot answer is answered as [`FailurePolicy::Open`]
    /// does (admitted, recording nothing), whatever the limiter's policy. `scope`: the
    /// attribute's or the layer's (whose keys are escaped), `None` for a key given by hand.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] or [`RateLimitError::InvalidConfig`]: the call's or
    /// the limiter's mistake, not the store's.
    pub(crate) async fn check_in_shadow(
        self: &Arc<Self>,
        scope: Option<&str>,
        key: &str,
        rate: Rate,
    ) -> Result<Decision, RateLimitError> {
        let limit = Limit::new(key, rate);
        match self.check_recorded(scope, vec![limit], None, true).await {
            Ok((decisions, _records)) => Ok(*decisions.deciding().decision()),
            Err(RateLimitError::Unavailable(error)) => {
                tracing::debug!(scope, %error, "a shadow rate limit could not be checked");
                Ok(open_admission(rate, 1))
            }
            Err(error) => Err(error),
        }
    }

    /// [`check_all`](Shared::check_all), telling where the call was recorded. With `shadow`
    /// (or on a limiter in shadow mode) every limit is a shadow one, checked on its own: it
    /// records the call iff it admits it, and a denial is reported and answered as an
    /// admission that [would deny](Decision::would_deny).
    ///
    /// # Errors
    ///
    /// As [`check_all`](Shared::check_all); under shadow mode a cost above the threshold is a
    /// would-be denial, not an error.
    pub(crate) async fn check_recorded(
        self: &Arc<Self>,
        scope: Option<&str>,
        limits: Vec<Limit<'_>>,
        at: Option<SystemTime>,
        shadow: bool,
    ) -> Result<(Decisions, Records), RateLimitError> {
        self.recorded(scope, limits, at, shadow, false).await
    }

    /// [`check_recorded`](Shared::check_recorded) of limits among which concurrency limits
    /// may be, now: the caller holds the call's slots from its records (`slots.rs`), and
    /// releases them. A release of one of their keys queued for the limiter's thread (a slot
    /// dropped outside any runtime) is waited for first, at most the store's timeout: the
    /// others went on the connection before this check (`slots.rs`).
    ///
    /// # Errors
    ///
    /// As [`check_recorded`](Shared::check_recorded).
    pub(crate) async fn check_holding(
        self: &Arc<Self>,
        scope: Option<&str>,
        limits: Vec<Limit<'_>>,
        shadow: bool,
    ) -> Result<(Decisions, Records), RateLimitError> {
        // A slot this process released is free for it: its release is there first.
        let keys: Vec<&str> = limits
            .iter()
            .filter(|limit| limit.rate().is_concurrency())
            .map(Limit::key)
            .collect();
        self.slots.settled(&keys, self.store.timeout()).await;
        self.recorded(scope, limits, None, shadow, true).await
    }

    /// [`check_recorded`](Shared::check_recorded); concurrency limits among `limits` only
    /// when `holding`.
    async fn recorded(
        self: &Arc<Self>,
        scope: Option<&str>,
        mut limits: Vec<Limit<'_>>,
        at: Option<SystemTime>,
        shadow: bool,
        holding: bool,
    ) -> Result<(Decisions, Records), RateLimitError> {
        let shadow = shadow || self.shadow();
        if !holding && limits.iter().any(|limit| limit.rate().is_concurrency()) {
            return Err(super::answer::concurrency_error());
        }
        validate(&limits, shadow)?;
        if self.off() {
            return Ok((Decisions::exempt(), Records::default()));
        }
        let explicit = at.is_some();
        let at = self.time_of(at.map(clock::micros_since_epoch).transpose()?);
        let mut labels: Vec<Option<Cow<'static, str>>> =
            limits.iter_mut().map(Limit::take_label).collect();
        let refs: Vec<LimitRef<'_>> = limits.iter().map(Limit::as_ref).collect();
        let (decisions, records, only) = if shadow {
            let (decisions, records) = self
                .check_each_in_shadow(scope, &refs, at, explicit)
                .await?;
            (decisions, records, None)
        } else {
            self.check_limits(scope, &refs, at, explicit, false).await?
        };
        let decisions = match only {
            // The deny cache's denial: of this limit alone.
            Some(index) => Decisions::new(std::iter::once((
                labels.swap_remove(index),
                refs[index].rate,
                decisions[0],
            )))
            .of_limit_at(index),
            None => Decisions::new(
                labels
                    .into_iter()
                    .zip(&refs)
                    .zip(decisions)
                    .map(|((label, limit), decision)| (label, limit.rate, decision)),
            ),
        };
        Ok((decisions, records))
    }

    /// `limits` checked in shadow mode, each on its own and all at once (one that would deny
    /// must not keep the others from recording the call): a would-be denial is reported and
    /// answered as an admission that would deny; a cost that can never fit is one, checked
    /// nowhere.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when a limit's store failed under `Closed` (outside
    /// shadow mode's own limiter, which answers those as `Open`): the other limits' records
    /// are refunded first.
    async fn check_each_in_shadow(
        self: &Arc<Self>,
        scope: Option<&str>,
        refs: &[LimitRef<'_>],
        at: Option<u64>,
        explicit: bool,
    ) -> Result<(Vec<Decision>, Records), RateLimitError> {
        let checks = refs.iter().map(|limit| async move {
            if cost_fits(limit) {
                let (decisions, recorded, _) = self
                    .check_limits(scope, &[*limit], at, explicit, true)
                    .await?;
                Ok((decisions[0], recorded))
            } else {
                let period = limit.rate.period();
                let denied = Decision::denied(limit.rate.threshold(), period, period);
                Ok((denied, Records::default()))
            }
        });
        let outcomes: Vec<Result<(Decision, Records), RateLimitError>> = join_all(checks).await;
        let mut decisions = Vec::with_capacity(refs.len());
        let mut records = Records::default();
        let mut failed = None;
        for (i, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok((mut decision, mut recorded)) => {
                    if !decision.allowed {
                        telemetry::shadow_denied(scope, refs[i].key);
                        decision = decision.in_shadow();
                    }
                    recorded.renumber(|_| i);
                    records.extend(recorded);
                    decisions.push(decision);
                }
                Err(error) => failed = failed.or(Some(error)),
            }
        }
        if let Some(error) = failed {
            // Reported where it failed; the error is the check's answer.
            let _ = self.refund_records(refs, records, |_| true).await;
            return Err(error);
        }
        Ok((decisions, records))
    }

    /// `limits` checked together at `at` (µs since the Unix epoch; `None`: the store's
    /// clock; `explicit`: the caller's time, which skips the deny cache), in a span of their
    /// own and reported (a denial of a `shadow` check as the admission it becomes): each
    /// limit's decision, and where the call was recorded; or, when the deny cache denied
    /// limit `i`, `Some(i)` and its decision alone.
    async fn check_limits(
        self: &Arc<Self>,
        scope: Option<&str>,
        refs: &[LimitRef<'_>],
        at: Option<u64>,
        explicit: bool,
        shadow: bool,
    ) -> Result<(Vec<Decision>, Records, Option<usize>), RateLimitError> {
        let timer = Timer::start();
        let span = telemetry::span(scope);
        let result = match self.store.access() {
            Access::InProcess(store) => {
                let _entered = span.enter();
                // At a time of its own, so that a refund finds the call's entries.
                let at = at.unwrap_or_else(clock::now_us);
                let (admitted, decisions) = store.check_all(refs, Some(at), true);
                let records = if admitted {
                    Records::of(Where::InProcess { at }, refs, 0..refs.len())
                } else {
                    Records::default()
                };
                Ok((decisions, records, None))
            }
            // A setting that cannot work: no outage, no policy's answer.
            Access::Unusable(error) => Err(error.into()),
            Access::Remote
                if refs
                    .iter()
                    .any(|limit| crate::layout::is_reserved(limit.key, scope.is_some())) =>
            {
                Err(super::answer::reserved_key_error())
            }
            Access::Remote => match self.cached_among(scope, refs, at, explicit) {
                Ok((index, decision)) => Ok((vec![decision], Records::default(), Some(index))),
                Err(tickets) => {
                    use tracing::Instrument as _;
                    self.remote_all(scope, refs, at, tickets)
                        .instrument(span.clone())
                        .await
                        .map(|(decisions, records)| (decisions, records, None))
                }
            },
        };
        // A concurrency limit's answer (never the deny cache's, which is `only`'s).
        let result = result.map(|(mut decisions, records, only)| {
            if only.is_none() {
                for (decision, limit) in decisions.iter_mut().zip(refs) {
                    if limit.rate.is_concurrency() {
                        *decision = decision.of_slots();
                    }
                }
            }
            (decisions, records, only)
        });
        let deciding = result
            .as_ref()
            .ok()
            .map(|(decisions, _, only)| only.or_else(|| decisions.iter().position(|d| !d.allowed)));
        let key = match deciding {
            Some(Some(index)) => refs[index].key,
            _ => refs.first().map_or("", |limit| limit.key),
        };
        let retry_after = || {
            let (decisions, _, _) = result.as_ref().ok()?;
            decisions.iter().filter_map(|d| d.retry_after).max()
        };
        telemetry::decided(
            scope,
            key,
            deciding.map(|denied| denied.is_none() || shadow),
            retry_after,
            timer,
        );
        result
    }

    /// The deny cache's denial of `limits`: of the limit it denies with the longest
    /// retry-after (by its index), as the store's composite answer is decided; else each
    /// limit's ticket (none when there is no cache), for the store's answer.
    fn cached_among(
        &self,
        scope: Option<&str>,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
        explicit: bool,
    ) -> Result<(usize, Decision), Vec<Option<Ticket>>> {
        let Some(cache) = &self.deny_cache else {
            return Err(Vec::new());
        };
        let mut tickets = Vec::with_capacity(limits.len());
        let mut deciding: Option<(usize, Decision)> = None;
        for (index, limit) in limits.iter().enumerate() {
            match self.cached_denial(scope, *limit, at, explicit, false) {
                Ok(decision) => {
                    if deciding
                        .is_none_or(|(_, longest)| decision.retry_after > longest.retry_after)
                    {
                        deciding = Some((index, decision));
                    }
                    tickets.push(None);
                }
                Err(ticket) => tickets.push(ticket),
            }
        }
        let Some((index, decision)) = deciding else {
            return Err(tickets);
        };
        // The others are not sent: a refresh one of them claimed is released.
        for (ticket, limit) in tickets.into_iter().zip(limits) {
            self.settle_denial(ticket, *limit, None);
        }
        cache.count(limits[index].key);
        telemetry::deny_cache_answered(scope);
        Ok((index, decision))
    }

    /// Settles `tickets` (one per limit, or none) with the final `decisions` of a remote
    /// check (`None`: it failed): the store's are kept, the policy's release their claims.
    fn settle_all(
        &self,
        tickets: &[Option<Ticket>],
        limits: &[LimitRef<'_>],
        decisions: Option<&[Decision]>,
    ) {
        for (i, (ticket, limit)) in tickets.iter().zip(limits).enumerate() {
            let answer = decisions.and_then(|decisions| decisions.get(i));
            self.settle_denial(*ticket, *limit, answer);
        }
    }

    /// The failure policy's answer for `limits`, which the store could not check (`error`):
    /// `Open` admits, recording nothing; `Local` checks them in the fallback; `Closed` fails.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] under [`FailurePolicy::Closed`].
    fn answer_all_by_policy(
        &self,
        scope: Option<&str>,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
        error: StoreError,
    ) -> Result<(Vec<Decision>, Records), RateLimitError> {
        self.health.answered_by_policy();
        let key = limits.first().map_or("", |limit| limit.key);
        telemetry::policy_answered(scope, key, &error, self.answering_policy());
        match self.answering_policy() {
            FailurePolicy::Open => Ok((open_admissions(limits), Records::default())),
            FailurePolicy::Closed => Err(error.into()),
            FailurePolicy::Local => {
                let at = at.unwrap_or_else(clock::now_us);
                let (admitted, decisions) = self.fallback_all(limits, Some(at), true);
                let records = if admitted {
                    Records::of(Where::Fallback { at }, limits, 0..limits.len())
                } else {
                    Records::default()
                };
                Ok((by_policy(decisions), records))
            }
        }
    }

    /// `limits` checked in the fallback (recorded when admitted and `record`).
    fn fallback_all(
        &self,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
        record: bool,
    ) -> (bool, Vec<Decision>) {
        self.fallback.check_all(limits, at, record)
    }

    /// The remote leg of a check of several limits: the parts' routes, then (unless a part
    /// the policy answers fails the check under `Closed` before anything is sent) one call
    /// per part at once, the policy's answers for the parts that failed, and the refunds of a
    /// check that is not admitted, all in one [`HandOff`], so that a caller that stops waiting
    /// leaves no reservation behind.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::Unavailable`] when a part failed under [`FailurePolicy::Closed`].
    async fn remote_all(
        self: &Arc<Self>,
        scope: Option<&str>,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
        tickets: Vec<Option<Ticket>>,
    ) -> Result<(Vec<Decision>, Records), RateLimitError> {
        let Some(runtime) = Runtime::current() else {
            self.settle_all(&tickets, limits, None);
            return self.answer_all_by_policy(scope, limits, at, StoreError::NoRuntime);
        };
        let mut parts = Vec::new();
        let mut yields = false;
        for (part, members) in self.parts_of(limits) {
            let route = self
                .breaker_route(|| part, limits[members[0]])
                .map_err(|open| {
                    yields |= open.yields;
                    open.error
                });
            parts.push(Part {
                part,
                members,
                route,
            });
        }
        let result = if self.answering_policy() == FailurePolicy::Closed
            && let Some(failed) = parts.iter().position(|part| part.route.is_err())
        {
            // Fails without sending anything.
            self.settle_all(&tickets, limits, None);
            let Err(error) = parts.swap_remove(failed).route else {
                unreachable!("the part's route is the policy's")
            };
            self.policy_answered(scope, limits, &error);
            Err(error.into())
        } else {
            let owned = owned(limits);
            let shared = Arc::clone(self);
            let reserve = HandOff::new(
                async move { shared.reserve(owned, parts, at, tickets).await },
                runtime,
            );
            match reserve.await {
                (Ok(decisions), None) => Ok(decisions),
                (Ok(decisions), Some(error)) => {
                    self.policy_answered(scope, limits, &error);
                    Ok(decisions)
                }
                (Err(error), _) => {
                    self.policy_answered(scope, limits, &error);
                    Err(error.into())
                }
            }
        };
        if yields {
            // The probes of an open breaker run in the background (see `remote::Open`); the
            // check is settled before: a caller that stops waiting here leaves nothing open.
            crate::runtime::yield_now().await;
        }
        result
    }

    /// Counts one policy answer of a check (whatever the number of its parts that failed) and
    /// reports it.
    fn policy_answered(&self, scope: Option<&str>, limits: &[LimitRef<'_>], error: &StoreError) {
        self.health.answered_by_policy();
        let key = limits.first().map_or("", |limit| limit.key);
        telemetry::policy_answered(scope, key, error, self.answering_policy());
    }

    /// The parts of `limits`, each with the indices of its limits, in the order of their first
    /// limit: one for a store in one part.
    fn parts_of(&self, limits: &[LimitRef<'_>]) -> Vec<(usize, Vec<usize>)> {
        let mut parts: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, limit) in limits.iter().enumerate() {
            let part = self.store.part_of(*limit);
            match parts.iter_mut().find(|(p, _)| *p == part) {
                Some((_, members)) => members.push(i),
                None => parts.push((part, vec![i])),
            }
        }
        parts
    }

    /// Reserves the call in every part the store is asked of, at once; then one decision from
    /// the parts' outcomes (the policy's answers for the failed parts, the fallback's for
    /// `Local` ones once every other part admitted), and the refunds: of the recorded parts
    /// when the call is not admitted, and always of the logs of the failed parts whose call
    /// was sent (a call that timed out may still have run, or may run later: a stalled node
    /// runs what it was sent once it wakes, in order, the refund after it; a counter's cost,
    /// which no member names, stays). Returns the decisions, and the error the policy
    /// answered for, if any.
    async fn reserve(
        self: Arc<Self>,
        owned: Vec<Owned>,
        mut parts: Vec<Part>,
        at: Option<u64>,
        tickets: Vec<Option<Ticket>>,
    ) -> (
        Result<(Vec<Decision>, Records), StoreError>,
        Option<StoreError>,
    ) {
        let limits = borrowed(&owned);
        let admission = self.store.admission();
        let calls = parts.iter().filter_map(|part| {
            part.route.as_ref().ok()?;
            let refs: Vec<LimitRef<'_>> = part.members.iter().map(|&i| limits[i]).collect();
            let index = part.part;
            let shared = &self;
            Some(async move {
                let outcome = shared.store.check_all(&refs, &admission, at).await;
                shared.settle(outcome.as_ref().err(), || index, false);
                outcome
            })
        });
        let answers: Vec<_> = join_all(calls).await;
        let mut answers = answers.into_iter();
        let mut decisions: Vec<Option<Decision>> = vec![None; limits.len()];
        let mut admitted = true;
        let mut policy_error = None;
        let mut closed = false;
        // Indices into `parts`: recorded (with the check's time there), and failed after
        // their call was sent, with the limits to refund (their refund's answer is not used:
        // the policy answered them).
        let mut recorded: Vec<(usize, u64)> = Vec::new();
        let mut refunds: Vec<(usize, Vec<usize>, u64)> = Vec::new();
        let mut local: Vec<usize> = Vec::new();
        let local_at = at.unwrap_or_else(clock::now_us);
        for (index, part) in parts.iter_mut().enumerate() {
            let sent = part.route.is_ok();
            let outcome = match std::mem::replace(&mut part.route, Ok(())) {
                Ok(_) => answers.next().expect("one answer per call"),
                Err(error) => Err(error),
            };
            let members = &part.members;
            let mut place = |answers: Vec<Decision>| {
                for (&i, decision) in members.iter().zip(answers) {
                    decisions[i] = Some(decision);
                }
            };
            match outcome {
                Ok(answer) if answer.admitted => {
                    place(answer.decisions);
                    recorded.push((index, answer.now));
                }
                Ok(answer) => {
                    admitted = false;
                    place(answer.decisions);
                }
                Err(error) => {
                    // A call that timed out, or whose connection dropped, may have run (or may
                    // run yet, on a stalled node), and one its replicas did not acknowledge
                    // ran on a master a failover may yet replace: its logs are refunded, by
                    // the members that name this admission alone (a refund finds them only
                    // where the call ran). Its counters are not: a counter keeps no member,
                    // so a refund could take what other calls added (on a node that never
                    // counted the call, or from a window the refund's time, read here and
                    // not by the server, puts it in). Its cost stays counted until its
                    // windows end, which can only deny more. One that could not be sent, or
                    // that Redis answered with an error, recorded nothing.
                    let maybe_ran = matches!(
                        &error,
                        StoreError::Timeout(_) | StoreError::NotReplicated { .. }
                    ) || matches!(&error, StoreError::Redis(e) if e.is_io_error() || e.is_connection_dropped());
                    if sent && maybe_ran {
                        let members: Vec<usize> = members
                            .iter()
                            .copied()
                            .filter(|&i| !limits[i].rate.is_counter())
                            .collect();
                        if !members.is_empty() {
                            refunds.push((index, members, at.unwrap_or_else(clock::now_us)));
                        }
                    }
                    match self.answering_policy() {
                        FailurePolicy::Open => {
                            let refs: Vec<_> = members.iter().map(|&i| limits[i]).collect();
                            place(open_admissions(&refs));
                        }
                        FailurePolicy::Local => local.extend(members.iter().copied()),
                        FailurePolicy::Closed => closed = true,
                    }
                    policy_error.get_or_insert(error);
                }
            }
        }
        if !local.is_empty() {
            // Recorded in the fallback only when the store's parts all admitted the call.
            let refs: Vec<_> = local.iter().map(|&i| limits[i]).collect();
            let (fits, answers) = self.fallback_all(&refs, Some(local_at), admitted && !closed);
            admitted &= fits;
            for (&i, decision) in local.iter().zip(answers) {
                decisions[i] = Some(decision.by_policy());
            }
        }
        // The failed parts' refunds in the background: their node may be stalled, and waiting
        // on it would double the check's time, for a record the policy's answer never used.
        for (index, members, now) in refunds {
            let owned: Vec<Owned> = members.iter().map(|&i| owned[i].clone()).collect();
            let (shared, part) = (Arc::clone(&self), parts[index].part);
            if let Some(runtime) = Runtime::current() {
                runtime.spawn(async move {
                    let refs = borrowed(&owned);
                    // Its node failed this check already: only an answer tells the breakers
                    // something new (a failure here would push back the probe of a node that
                    // may have recovered since).
                    if shared.store.refund(&refs, &admission, now).await.is_ok() {
                        shared.settle(None, || part, false);
                    }
                    shared.forget_denials(refs.iter().map(|limit| limit.key));
                });
            }
        }
        let mut refunded: Vec<(&Part, u64)> = Vec::new();
        if !admitted || closed {
            refunded.extend(recorded.iter().map(|&(index, now)| (&parts[index], now)));
        }
        let answers = self.refund(&limits, &refunded, &admission).await;
        // What a denial cached meanwhile said of these keys no longer holds.
        self.forget_denials(
            refunded
                .iter()
                .flat_map(|(part, _)| part.members.iter().map(|&i| limits[i].key)),
        );
        for ((part, _), answer) in refunded.iter().zip(answers) {
            // Refunded: what is left without this call, as the refund found it. A refund that
            // failed leaves the reservation's decision: the record stays until its window ends.
            let members = &part.members;
            if let Some(answer) = answer
                && answer.len() == members.len()
            {
                for (&i, decision) in members.iter().zip(answer) {
                    decisions[i] = Some(decision);
                }
            }
        }
        match policy_error {
            Some(error) if closed => {
                self.settle_all(&tickets, &limits, None);
                (Err(error), None)
            }
            policy_error => {
                let decisions: Vec<Decision> = decisions
                    .into_iter()
                    .map(|decision| decision.expect("every limit has its part's answer"))
                    .collect();
                self.settle_all(&tickets, &limits, Some(&decisions));
                let mut records = Records::default();
                if admitted {
                    for &(index, now) in &recorded {
                        let part = &parts[index];
                        let place = Where::Store { admission, now };
                        records.extend(Records::of(place, &limits, part.members.iter().copied()));
                    }
                    records.extend(Records::of(
                        Where::Fallback { at: local_at },
                        &limits,
                        local.iter().copied(),
                    ));
                }
                (Ok((decisions, records)), policy_error)
            }
        }
    }

    /// Refunds `admission` in each of `parts` (each with the time its check was made), all
    /// at once, each within the store's timeout; returns each part's decisions without the
    /// call (`None`: the refund failed). A refund that fails is the store's failure (its
    /// breaker and the outage log hear of it); its records expire with their keys.
    async fn refund(
        self: &Arc<Self>,
        limits: &[LimitRef<'_>],
        parts: &[(&Part, u64)],
        admission: &Admission,
    ) -> Vec<Option<Vec<Decision>>> {
        let refunds = parts.iter().map(|&(part, now)| {
            let refs: Vec<LimitRef<'_>> = part.members.iter().map(|&i| limits[i]).collect();
            async move {
                let outcome = self.store.refund(&refs, admission, now).await;
                self.settle(outcome.as_ref().err(), || part.part, false);
                match outcome {
                    Ok(decisions) => Some(decisions),
                    Err(error) => {
                        tracing::debug!(%error, "a refund failed: its records expire with their keys");
                        None
                    }
                }
            }
        });
        join_all(refunds).await
    }
}

/// One part of a check's limits: the part, the indices of its limits, and its route (to the
/// store; or the policy's, with the error).
struct Part {
    part: usize,
    members: Vec<usize>,
    route: Result<(), StoreError>,
}

/// [`FailurePolicy::Open`]'s answers to `limits`.
fn open_admissions(limits: &[LimitRef<'_>]) -> Vec<Decision> {
    limits
        .iter()
        .map(|limit| open_admission(limit.rate, limit.cost))
        .collect()
}

/// Whether `limit`'s cost can fit in a window: at most its threshold and
/// [`Limit::MAX_COST`](crate::Limit::MAX_COST).
fn cost_fits(limit: &LimitRef<'_>) -> bool {
    RateLimitError::cost_too_high(limit.cost.into(), limit.rate).is_none()
}

/// `decisions`, as the failure policy's answers.
fn by_policy(decisions: Vec<Decision>) -> Vec<Decision> {
    decisions.into_iter().map(Decision::by_policy).collect()
}

/// Turns away a check that cannot be made: no limit, two limits with one key, a label that is
/// not printable ASCII, a cost that no window can admit.
fn validate(limits: &[Limit<'_>], shadow: bool) -> Result<(), RateLimitError> {
    if limits.is_empty() {
        return Err(RateLimitError::InvalidInput(
            "a check of several limits needs at least one".into(),
        ));
    }
    for (i, limit) in limits.iter().enumerate() {
        if limits[..i].iter().any(|other| other.key() == limit.key()) {
            // Not the key itself: it may hold a user identifier.
            return Err(RateLimitError::InvalidInput(
                format!(
                    "limits {} and {} of one check have the same key: give each its own (a key \
                     names one log, e.g. `user:42:burst` and `user:42:daily`)",
                    limits[..i]
                        .iter()
                        .position(|other| other.key() == limit.key())
                        .unwrap_or(0)
                        + 1,
                    i + 1
                )
                .into(),
            ));
        }
        if let Some(label) = limit.label()
            && !is_label(label)
        {
            return Err(RateLimitError::InvalidInput(
                format!(
                    "the label of limit {} is not printable ASCII (or is empty): it names a \
                     policy in the RateLimit fields",
                    i + 1
                )
                .into(),
            ));
        }
        if !shadow
            && let Some(error) = RateLimitError::cost_too_high(limit.cost().into(), limit.rate())
        {
            return Err(error);
        }
    }
    Ok(())
}
