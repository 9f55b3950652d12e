//! Where a check recorded its call ([`Records`]), and the refund that removes exactly those
//! entries later, once the call's outcome says it does not count.
//!
//! A refund goes where the call was recorded: the in-process store, the in-process fallback of
//! `FailurePolicy::Local` (a check the policy answered), or the Redis server or cluster slot
//! that admitted it, by the name the check recorded it under (its members
//! `<admission>.<j>`). There, as a check, it goes through the part's circuit breaker (an open
//! one sends nothing), within the timeout, and is handed to the runtime when its caller stops
//! waiting, so that it still reaches its end and tells the breakers. A refund that cannot
//! reach its part leaves the entries to expire with their window; the outage is logged once
//! (warn), as for checks.

use std::sync::Arc;

use super::shared::Shared;
use crate::error::StoreError;
use crate::limit::LimitRef;
use crate::rate::Rate;
use crate::store::Admission;

/// Where one check recorded its call: one place per store part it was recorded in.
#[derive(Clone, Default, Debug)]
pub(crate) struct Records {
    places: Vec<Place>,
}

/// One place a call was recorded in, and the limits (their indices among the check's) it was
/// recorded for there.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    place: Where,
    limits: Vec<usize>,
}

/// A store a call was recorded in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Where {
    /// The in-process store, at `at` (µs since the Unix epoch).
    InProcess { at: u64 },
    /// The in-process fallback of `FailurePolicy::Local`, at `at`.
    Fallback { at: u64 },
    /// A Redis part (the server, or a cluster slot), as `admission`, checked there at `now`.
    Store { admission: Admission, now: u64 },
}

impl Records {
    /// The call recorded at `place` for the limits of `indices` among `limits` (those of cost
    /// 0 record nothing, and are left out).
    pub(crate) fn of(
        place: Where,
        limits: &[LimitRef<'_>],
        indices: impl IntoIterator<Item = usize>,
    ) -> Records {
        let limits: Vec<usize> = indices
            .into_iter()
            .filter(|&i| limits[i].cost > 0)
            .collect();
        if limits.is_empty() {
            return Records::default();
        }
        Records {
            places: vec![Place { place, limits }],
        }
    }

    /// Adds `other`'s places.
    pub(crate) fn extend(&mut self, other: Records) {
        self.places.extend(other.places);
    }

    /// The same records, their limits' indices mapped by `index` (a check of one limit among
    /// several, renumbered as the whole's).
    pub(crate) fn renumber(&mut self, index: impl Fn(usize) -> usize) {
        for place in &mut self.places {
            for limit in &mut place.limits {
                *limit = index(*limit);
            }
        }
    }

    /// `true` when nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// The limits (their indices among the check's) recorded in each place.
    pub(crate) fn places(&self) -> impl Iterator<Item = &[usize]> {
        self.places.iter().map(|place| place.limits.as_slice())
    }

    /// The places in a Redis part: the admission, its check's time, and the limits (their
    /// indices among the check's) recorded there.
    pub(crate) fn in_store(&self) -> impl Iterator<Item = (Admission, u64, &[usize])> {
        self.places.iter().filter_map(|place| match place.place {
            Where::Store { admission, now } => Some((admission, now, place.limits.as_slice())),
            Where::InProcess { .. } | Where::Fallback { .. } => None,
        })
    }
}

/// A limit a store call owns (a refund's, a check's remote leg of several limits), so that the
/// call can outlive its caller (see `runtime::HandOff`).
pub(super) type Owned = (String, Rate, u32);

/// `limits`, owned (their keys copied).
pub(super) fn owned(limits: &[LimitRef<'_>]) -> Vec<Owned> {
    limits
        .iter()
        .map(|limit| (limit.key.to_owned(), limit.rate, limit.cost))
        .collect()
}

/// The limits of `owned`, borrowed.
pub(super) fn borrowed(owned: &[Owned]) -> Vec<LimitRef<'_>> {
    owned
        .iter()
        .map(|(key, rate, cost)| LimitRef {
            key,
            rate: *rate,
            cost: *cost,
        })
        .collect()
}

impl Shared {
    /// Removes the call `records` names from each limit `refunded` says in the places in
    /// process (the in-process store, the fallback), at once; returns the other places.
    pub(crate) fn refund_in_process(
        &self,
        limits: &[LimitRef<'_>],
        records: Records,
        refunded: impl Fn(usize) -> bool,
    ) -> Records {
        let mut remote = Records::default();
        for Place {
            place,
            limits: indices,
        } in records.places
        {
            let chosen = indices.iter().filter(|&&i| refunded(i)).map(|&i| limits[i]);
            match place {
                Where::InProcess { at } => {
                    if let crate::store::Access::InProcess(store) = self.store.access() {
                        chosen.for_each(|limit| store.refund(limit, at));
                    }
                }
                Where::Fallback { at } => chosen.for_each(|limit| self.fallback.refund(limit, at)),
                Where::Store { .. } => remote.places.push(Place {
                    place,
                    limits: indices,
                }),
            }
        }
        remote
    }

    /// Removes the call `records` names from each limit `refunded` says (by its index among
    /// `limits`, the check's), in every place it was recorded in, the places at once. Each
    /// Redis place is one script (`refund.lua`), through its part's breaker and within the
    /// timeout; the in-process places are updated at once.
    ///
    /// # Errors
    ///
    /// The first place that could not be reached (its breaker open, down, slow, or outside a
    /// runtime): its entries stay until their window ends. The other places are refunded all
    /// the same.
    pub(crate) async fn refund_records(
        self: &Arc<Self>,
        limits: &[LimitRef<'_>],
        records: Records,
        refunded: impl Fn(usize) -> bool,
    ) -> Result<(), StoreError> {
        let records = self.refund_in_process(limits, records, &refunded);
        let mut calls = Vec::new();
        for Place {
            place,
            limits: indices,
        } in records.places
        {
            let chosen: Vec<LimitRef<'_>> = indices
                .into_iter()
                .filter(|&i| refunded(i))
                .map(|i| limits[i])
                .collect();
            if chosen.is_empty() {
                continue;
            }
            match place {
                // Refunded above.
                Where::InProcess { .. } | Where::Fallback { .. } => {}
                Where::Store { admission, now } => {
                    let owned = owned(&chosen);
                    calls.push(self.remote_op(chosen[0], move |shared| async move {
                        let limits = borrowed(&owned);
                        let outcome = shared.store.refund(&limits, &admission, now).await;
                        // Freed units (or maybe, when it failed): a cached denial of these
                        // keys no longer holds.
                        shared.forget_denials(limits.iter().map(|limit| limit.key));
                        outcome.map(drop)
                    }));
                }
            }
        }
        let outcomes = futures_util::future::join_all(calls).await;
        match outcomes.into_iter().find_map(Result::err) {
            Some(error) => {
                tracing::debug!(%error, "a refund could not reach the store: its entries expire with their window");
                Err(error)
            }
            None => Ok(()),
        }
    }
}
