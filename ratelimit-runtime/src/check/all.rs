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

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use futures_util::future::join_all;

use super::answer::open_admission;
use super::shared::Shared;
use crate::clock;
use crate::decision::Decision;
use crate::decisions::Decisions;
use crate::error::{RateLimitError, StoreError};
use crate::headers::is_label;
use crate::health::Route;
use crate::limit::{Limit, LimitRef};
use crate::policy::FailurePolicy;
use crate::rate::Rate;
use crate::runtime::{HandOff, Runtime, timeout};
use crate::store::{Access, Admission};
use crate::telemetry::{self, Timer};

/// A limit the remote leg owns, so that its call can outlive its caller (see [`HandOff`]).
type Owned = (String, Rate, u32);

/// How one part's limits fared.
enum Outcome {
    /// The store admitted the call and recorded it: refunded if the check is not admitted.
    Recorded(Vec<Decision>),
    /// The store denied the call, recording nothing.
    Denied(Vec<Decision>),
    /// The failure policy answers for the part: the store failed with this error, or its
    /// breaker is open.
    Failed(StoreError),
}

impl Shared {
    /// Checks `limits` together at `at` (`None`: now): admitted iff every limit admits the
    /// call, and then recorded in each; denied, recorded in none (see the module docs for a
    /// cluster's slots and for failures). `scope`: the span's field and the metrics' label.
    ///
    /// # Errors
    ///
    /// [`RateLimitError::InvalidInput`] for no limit, two limits with one key, a label that
    /// is not printable ASCII, or `at` out of range; [`RateLimitError::CostTooHigh`] for a
    /// cost above its limit's threshold or [`MAX_COST`](crate::MAX_COST);
    /// [`RateLimitError::Unavailable`] when a part of the store failed under
    /// [`FailurePolicy::Closed`].
    pub(crate) async fn check_all(
        self: &Arc<Self>,
        scope: Option<&str>,
        mut limits: Vec<Limit<'_>>,
        at: Option<SystemTime>,
    ) -> Result<Decisions, RateLimitError> {
        validate(&limits)?;
        let at = at.map(clock::micros_since_epoch).transpose()?;
        let labels: Vec<Option<Cow<'static, str>>> =
            limits.iter_mut().map(Limit::take_label).collect();
        let refs: Vec<LimitRef<'_>> = limits.iter().map(Limit::as_ref).collect();
        let timer = Timer::start();
        let span = telemetry::span(scope);
        let result = match self.store.access() {
            Access::InProcess(store) => {
                let _entered = span.enter();
                let (_, verdicts) = store.check_all(&refs, at, true);
                Ok(verdicts
                    .iter()
                    .zip(&refs)
                    .map(|(verdict, limit)| verdict.decision(limit.rate))
                    .collect())
            }
            Access::Unusable(error) => {
                let _entered = span.enter();
                self.health.failed(0, &error, self.policy, false);
                self.answer_all_by_policy(scope, &refs, at, error)
            }
            Access::Remote => {
                use tracing::Instrument as _;
                self.remote_all(scope, &refs, at)
                    .instrument(span.clone())
                    .await
            }
        };
        let result = result.map(|decisions: Vec<Decision>| {
            Decisions::new(
                labels
                    .into_iter()
                    .zip(&refs)
                    .zip(decisions)
                    .map(|((label, limit), decision)| (label, limit.rate, decision)),
            )
        });
        let deciding = result.as_ref().ok().map(|decisions| **decisions);
        let key = refs.first().map_or("", |limit| limit.key);
        telemetry::decided(
            scope,
            key,
            deciding.map(|decision| decision.allowed),
            || deciding.and_then(|decision| decision.retry_after),
            timer,
        );
        result
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
    ) -> Result<Vec<Decision>, RateLimitError> {
        self.health.answered_by_policy();
        let key = limits.first().map_or("", |limit| limit.key);
        telemetry::policy_answered(scope, key, &error, self.policy);
        match self.policy {
            FailurePolicy::Open => Ok(open_admissions(limits)),
            FailurePolicy::Closed => Err(RateLimitError::Unavailable(error)),
            FailurePolicy::Local => Ok(self.fallback_all(limits, at, true).1),
        }
    }

    /// `limits` checked in the fallback (recorded when admitted and `record`).
    fn fallback_all(
        &self,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
        record: bool,
    ) -> (bool, Vec<Decision>) {
        let (admitted, verdicts) = self.fallback.check_all(limits, at, record);
        let decisions = verdicts
            .iter()
            .zip(limits)
            .map(|(verdict, limit)| verdict.decision(limit.rate))
            .collect();
        (admitted, decisions)
    }

    /// The remote leg of a check of several limits: one call per part at once, then the
    /// policy's answers for the parts that failed, then the refunds of a check that is not
    /// admitted.
    async fn remote_all(
        self: &Arc<Self>,
        scope: Option<&str>,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
    ) -> Result<Vec<Decision>, RateLimitError> {
        let Some(runtime) = Runtime::current() else {
            return self.answer_all_by_policy(scope, limits, at, StoreError::NoRuntime);
        };
        let parts = self.parts_of(limits);
        let admission = self.store.admission();
        let calls = parts.iter().map(|(part, members)| {
            let probe = match self.health.route(|| *part) {
                Route::Store(probe) => probe,
                Route::Policy(error) => return Err(error),
            };
            let owned: Vec<Owned> = members
                .iter()
                .map(|&i| (limits[i].key.to_owned(), limits[i].rate, limits[i].cost))
                .collect();
            let shared = Arc::clone(self);
            let part = *part;
            Ok(HandOff::new(
                async move {
                    let refs = borrowed(&owned);
                    let outcome = shared.store.check_all(&refs, &admission, at).await;
                    shared.settle(outcome.as_ref().err(), || part, probe);
                    outcome
                },
                runtime.clone(),
            ))
        });
        let calls: Vec<_> = calls.collect();
        let mut pending = Vec::new();
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(calls.len());
        for call in calls {
            match call {
                Ok(call) => {
                    pending.push(call);
                    outcomes.push(None);
                }
                Err(error) => outcomes.push(Some(Outcome::Failed(error))),
            }
        }
        let mut answers = join_all(pending).await.into_iter();
        let outcomes: Vec<Outcome> = outcomes
            .into_iter()
            .map(|outcome| {
                outcome.unwrap_or_else(|| match answers.next() {
                    Some(Ok((true, decisions))) => Outcome::Recorded(decisions),
                    Some(Ok((false, decisions))) => Outcome::Denied(decisions),
                    Some(Err(error)) => Outcome::Failed(error),
                    None => unreachable!("one answer per call"),
                })
            })
            .collect();
        self.combine(scope, limits, at, &parts, outcomes, admission, &runtime)
            .await
    }

    /// The parts of `limits`, each with the indices of its limits, in the order of their first
    /// limit: one for a store in one part.
    fn parts_of(&self, limits: &[LimitRef<'_>]) -> Vec<(usize, Vec<usize>)> {
        let mut parts: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, limit) in limits.iter().enumerate() {
            let part = self.store.part(limit.key);
            match parts.iter_mut().find(|(p, _)| *p == part) {
                Some((_, members)) => members.push(i),
                None => parts.push((part, vec![i])),
            }
        }
        parts
    }

    /// One decision from the parts' outcomes: the policy's answers for the failed parts, the
    /// fallback's for `Local` ones once every other part admitted, and the refunds of the
    /// recorded parts when the check is not admitted.
    #[allow(clippy::too_many_arguments)]
    async fn combine(
        self: &Arc<Self>,
        scope: Option<&str>,
        limits: &[LimitRef<'_>],
        at: Option<u64>,
        parts: &[(usize, Vec<usize>)],
        outcomes: Vec<Outcome>,
        admission: Admission,
        runtime: &Runtime,
    ) -> Result<Vec<Decision>, RateLimitError> {
        let mut decisions: Vec<Option<Decision>> = vec![None; limits.len()];
        let mut admitted = true;
        let mut failure = None;
        let mut recorded = Vec::new();
        let mut local = Vec::new();
        for ((part, members), outcome) in parts.iter().zip(outcomes) {
            let place = |decisions: &mut Vec<Option<Decision>>, answers: Vec<Decision>| {
                for (&i, decision) in members.iter().zip(answers) {
                    decisions[i] = Some(decision);
                }
            };
            match outcome {
                Outcome::Recorded(answers) => {
                    place(&mut decisions, answers);
                    recorded.push((*part, members));
                }
                Outcome::Denied(answers) => {
                    admitted = false;
                    place(&mut decisions, answers);
                }
                Outcome::Failed(error) => {
                    let key = limits[members[0]].key;
                    self.health.answered_by_policy();
                    telemetry::policy_answered(scope, key, &error, self.policy);
                    match self.policy {
                        FailurePolicy::Open => {
                            let refs: Vec<_> = members.iter().map(|&i| limits[i]).collect();
                            place(&mut decisions, open_admissions(&refs));
                        }
                        FailurePolicy::Local => local.extend(members.iter().copied()),
                        FailurePolicy::Closed => {
                            failure.get_or_insert(error);
                        }
                    }
                }
            }
        }
        if !local.is_empty() {
            // Recorded in the fallback only when the store's parts all admitted the call.
            let refs: Vec<_> = local.iter().map(|&i| limits[i]).collect();
            let (fits, answers) = self.fallback_all(&refs, at, admitted && failure.is_none());
            admitted &= fits;
            for (&i, decision) in local.iter().zip(answers) {
                decisions[i] = Some(decision);
            }
        }
        if !admitted || failure.is_some() {
            self.refund(limits, &recorded, admission, runtime).await;
            for (_, members) in &recorded {
                for &i in *members {
                    if let Some(decision) = &mut decisions[i] {
                        // Refunded: what is left without this call.
                        *decision = Decision::admitted(
                            decision.limit,
                            decision.remaining + u64::from(limits[i].cost),
                            decision.reset_after,
                        );
                    }
                }
            }
        }
        if let Some(error) = failure {
            return Err(RateLimitError::Unavailable(error));
        }
        Ok(decisions
            .into_iter()
            .map(|decision| decision.expect("every limit has its part's answer"))
            .collect())
    }

    /// Refunds `admission` in each recorded part, all at once, each within the store's
    /// timeout, before the check returns (handed to the runtime if the caller stops
    /// waiting). A refund that fails is the store's failure (its breaker and the outage log
    /// hear of it); its records expire with their keys.
    async fn refund(
        self: &Arc<Self>,
        limits: &[LimitRef<'_>],
        recorded: &[(usize, &Vec<usize>)],
        admission: Admission,
        runtime: &Runtime,
    ) {
        let refunds = recorded.iter().map(|(part, members)| {
            let owned: Vec<Owned> = members
                .iter()
                .map(|&i| (limits[i].key.to_owned(), limits[i].rate, limits[i].cost))
                .collect();
            let shared = Arc::clone(self);
            let part = *part;
            HandOff::new(
                async move {
                    let refs = borrowed(&owned);
                    let outcome = shared.store.refund(&refs, &admission).await;
                    shared.settle(outcome.as_ref().err(), || part, None);
                    if let Err(error) = outcome {
                        tracing::debug!(%error, "a refund failed: its records expire with their keys");
                    }
                },
                runtime.clone(),
            )
        });
        let refunds: Vec<_> = refunds.collect();
        // Each refund is bounded by the store's timeout already; this bounds a runtime that
        // cannot run them at all.
        let _ = timeout(std::time::Duration::from_secs(30), join_all(refunds)).await;
    }
}

/// [`FailurePolicy::Open`]'s answers to `limits`.
fn open_admissions(limits: &[LimitRef<'_>]) -> Vec<Decision> {
    limits
        .iter()
        .map(|limit| open_admission(limit.rate, limit.cost))
        .collect()
}

/// The limits of `owned`, borrowed.
fn borrowed(owned: &[Owned]) -> Vec<LimitRef<'_>> {
    owned
        .iter()
        .map(|(key, rate, cost)| LimitRef {
            key,
            rate: *rate,
            cost: *cost,
        })
        .collect()
}

/// Turns away a check that cannot be made: no limit, two limits with one key, a label that is
/// not printable ASCII, a cost that no window can admit.
fn validate(limits: &[Limit<'_>]) -> Result<(), RateLimitError> {
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
        if let Some(error) = RateLimitError::cost_too_high(limit.cost().into(), limit.rate()) {
            return Err(error);
        }
    }
    Ok(())
}
