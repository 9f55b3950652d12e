//! The slots a limiter's calls hold under concurrency limits
//! ([`Concurrency`](crate::Concurrency)): [`Held`], one call's, released when it is dropped,
//! and what the limiter's table of slots (`slot_table.rs`) renews them with.
//!
//! # A slot in the store
//!
//! A concurrency limit is checked as a sliding window log whose period is the slot time
//! (`Rate::of_slots`): a call's slot is its admission, recorded by the check of all of the
//! call's limits at once (all or nothing beside its rate limits), and released by the refund
//! of that admission alone (`permit.rs`: exactly its own member, once). In Redis a slot counts
//! until its score, the time it was last renewed, leaves the window; in process it lasts until
//! it is released (`Rate::in_process`), since a process that dies takes its store along.
//!
//! # Renewals
//!
//! Each slot held in Redis is renewed every third of its slot time: one thread per limiter
//! (started with its first such slot, ended within a second of the limiter's drop, on a
//! current-thread Tokio runtime and connection of its own, so that no call waits for it)
//! sends, per store part (the server, or a cluster's hash slot), one `renew.lua` for every
//! slot due there. A renewal gives the member the time now as its score if the key still holds
//! it within its window, and never adds one back.
//!
//! A call's **claim** is over, and its [`Claim`] says so (the body is not interrupted), when a
//! renewal finds its slot gone (released by a reset, lost in a failover without
//! `wait_for_replicas`, or left the window), or when no renewal reached the store for a slot
//! time since the last one that did was sent (counted from sending: the store scored it
//! later, so the slot surely counted until then). While the store answers, a renewal reaches
//! it every third of the slot time, so a slot never leaves the window under a running call.
//! A renewal that fails is tried again every ninth of the slot time.
//!
//! # Release
//!
//! Dropping a [`Held`] (the call returned, failed, panicked, or its future was dropped) stops
//! its renewals at once and releases its slots without waiting: in process at once; in Redis
//! by the refund of the slot limits only, through the part's breaker and within the timeout,
//! put on the runtime's connection before the drop returns (polled once there, then handed to
//! the runtime), so that the process's next check of the key runs after it; dropped outside
//! any runtime, through the table's thread, which the next acquire of the key in the process
//! waits for. A renewal of the same slot on its way changes nothing after the release (it
//! never adds a member).

use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Instant;

use futures_util::FutureExt as _;
use futures_util::future::join_all;

use super::permit::{Owned, Records, borrowed, owned};
use super::shared::Shared;
use super::slot_table::{Claim, Due, Renew, claim_now};
use crate::error::StoreError;
use crate::limit::LimitRef;
use crate::runtime::Runtime;
use crate::store::Admission;
use crate::telemetry::InFlight;

/// The most slots one renewal script renews.
const BATCH: usize = 500;

/// The renewal of the slots of `shared`'s limiter (held weakly: the table's thread must not
/// keep the limiter alive).
fn renewal(shared: &Arc<Shared>) -> Renew {
    let owner = Arc::downgrade(shared);
    Box::new(move |due| {
        let owner = owner.clone();
        async move {
            match owner.upgrade() {
                Some(shared) => round(&shared, &due).await,
                None => vec![None; due.len()],
            }
        }
        .boxed()
    })
}

/// One round of renewals: those of `due`, one script per store part (and per [`BATCH`]), all
/// at once. Returns whether each slot of `due` is still held (`None`: its renewal failed).
async fn round(shared: &Arc<Shared>, due: &[Due]) -> Vec<Option<bool>> {
    let at = shared.time_of(None);
    let mut parts: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, (_, key, rate, _)) in due.iter().enumerate() {
        let limit = LimitRef {
            key,
            rate: *rate,
            cost: 1,
        };
        parts
            .entry(shared.store.part_of(limit))
            .or_default()
            .push(i);
    }
    let batches: Vec<Vec<usize>> = parts
        .into_values()
        .flat_map(|indices| {
            indices
                .chunks(BATCH)
                .map(<[usize]>::to_vec)
                .collect::<Vec<_>>()
        })
        .collect();
    let renewals = batches.into_iter().map(|indices| async move {
        let limits: Vec<LimitRef<'_>> = indices
            .iter()
            .map(|&i| LimitRef {
                key: &due[i].1,
                rate: due[i].2,
                cost: 1,
            })
            .collect();
        let admissions: Vec<Admission> = indices.iter().map(|&i| due[i].3).collect();
        let outcome = shared.store.renew(&limits, &admissions, at).await;
        (indices, outcome)
    });
    let renewed = join_all(renewals).await;
    let mut held = vec![None; due.len()];
    for (indices, outcome) in renewed {
        match outcome {
            Ok(answers) => {
                for (i, answer) in indices.into_iter().zip(answers) {
                    held[i] = Some(answer);
                }
            }
            Err(error) => {
                tracing::debug!(%error, "a renewal of concurrency limits' slots failed");
            }
        }
    }
    held
}

/// The slots one call holds: those of its concurrency limits among the limits it was checked
/// against, released when this is dropped (see the module docs).
pub(crate) struct Held {
    shared: Arc<Shared>,
    limits: Vec<Owned>,
    /// Which of `limits` are concurrency limits.
    slots: Vec<bool>,
    records: Option<Records>,
    /// The slots renewed in the store, by their ids in the limiter's table.
    ids: Vec<u64>,
    claim: Arc<Claim>,
    /// The call's slots counted in flight (the `metrics` feature's gauge) until it is dropped.
    _in_flight: InFlight,
}

impl Held {
    /// The slots of the call checked in `scope` (the span's and the metrics') against
    /// `limits`, recorded as `records` (a copy of the
    /// check's), whose check was sent at `sent` (and at `claim_sent` on the limiter's clock
    /// for claims: see `Held::sent`).
    pub(crate) fn new(
        shared: &Arc<Shared>,
        scope: Option<&str>,
        limits: &[LimitRef<'_>],
        records: Records,
        sent: (Instant, u64),
    ) -> Held {
        let slots: Vec<bool> = limits
            .iter()
            .map(|limit| limit.rate.is_concurrency())
            .collect();
        let claim = Arc::new(Claim::new(shared.clock.clone()));
        let mut ids = Vec::new();
        for (admission, _, indices) in records.in_store() {
            for &i in indices.iter().filter(|&&i| slots[i]) {
                let renew = || renewal(shared);
                ids.push(shared.slots.hold(limits[i], admission, sent, &claim, renew));
            }
        }
        // The slots some place counts; one that none does (the failure policy `Open`
        // admitted the call) leaves the call no claim.
        let recorded = |i: usize| records.places().any(|indices| indices.contains(&i));
        let (counted, uncounted): (Vec<usize>, Vec<usize>) = (0..limits.len())
            .filter(|&i| slots[i])
            .partition(|&i| recorded(i));
        if !uncounted.is_empty() {
            claim.lose();
        }
        Held {
            _in_flight: InFlight::new(scope, counted.len()),
            shared: Arc::clone(shared),
            limits: owned(limits),
            slots,
            records: Some(records),
            ids,
            claim,
        }
    }

    /// Whether the call's claim on its slots still holds (see the module docs).
    pub(crate) fn claim(&self) -> &Claim {
        &self.claim
    }

    /// The time a check of slots is sent, as [`Held::new`] takes it: now, and now on the
    /// claims' clock (the limiter's manual clock, if any).
    pub(crate) fn sent(shared: &Shared) -> (Instant, u64) {
        (Instant::now(), claim_now(shared.clock.as_ref()))
    }

    /// Releases the slots now, and waits for the store's answers (see `Slot::release`).
    ///
    /// # Errors
    ///
    /// The first place that could not be reached: its slots count until their slot time
    /// ends after their last renewal.
    pub(crate) async fn release(mut self) -> Result<(), StoreError> {
        let Some(records) = self.records.take() else {
            return Ok(());
        };
        self.shared.slots.forget(&self.ids);
        let shared = Arc::clone(&self.shared);
        let limits = borrowed(&self.limits);
        let slots = &self.slots;
        shared.refund_records(&limits, records, |i| slots[i]).await
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(records) = self.records.take() else {
            return;
        };
        self.shared.slots.forget(&self.ids);
        let limits = borrowed(&self.limits);
        let slots = &self.slots;
        let remote = self
            .shared
            .refund_in_process(&limits, records, |i| slots[i]);
        drop(limits);
        if remote.is_empty() {
            return;
        }
        // A failed release leaves the slots to leave their window a slot time after their
        // last renewal (reported where it failed).
        let shared = Arc::clone(&self.shared);
        let limits = std::mem::take(&mut self.limits);
        let slots = std::mem::take(&mut self.slots);
        let keys: Vec<String> = limits
            .iter()
            .zip(&slots)
            .filter(|(_, slot)| **slot)
            .map(|((key, ..), _)| key.clone())
            .collect();
        let release = async move {
            let limits = borrowed(&limits);
            let _ = shared.refund_records(&limits, remote, |i| slots[i]).await;
        };
        match Runtime::current() {
            // Sent now, on the runtime's own connection: polled once here, which normally puts
            // its script on the connection before anything this task sends next (the
            // connection keeps their order), then handed to the runtime for its answer. Not
            // while a panic unwinds (a panic in the poll would abort the process).
            Some(runtime) if runtime.runs_by_itself() && !std::thread::panicking() => {
                let mut release = release.boxed();
                let mut context = Context::from_waker(Waker::noop());
                if release.as_mut().poll(&mut context).is_pending() {
                    runtime.spawn(release);
                }
            }
            // Outside a runtime, or on one whose tasks (the connection's driver) run only
            // while it is blocked on: sent by the table's thread, which the next acquire of
            // the key in this process waits for.
            _ => self.shared.slots.release(keys, release.boxed()),
        }
    }
}
