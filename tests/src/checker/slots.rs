//! Concurrency limits under the faults: callers holding slots of a limit of [`MAX`] calls in
//! flight (slot time [`SLOT_TIME`]) through every entry point (`Limiter::acquire` by hand, an
//! attributed function stacked under a rate, the axum layer), each limiter a task of its own,
//! holding for a few milliseconds to past the slot time (its slots renewed meanwhile), some
//! cancelled by their callers before or while they hold.
//!
//! # Judged on what the callers were told
//!
//! At no instant more than [`MAX`] holders whose claim the store counts: per subject, the
//! holds the store answered for, each over the span its holder knew it held (by hand, from
//! `acquire`'s answer until the slot is dropped, while `Slot::is_held` still says so then; in
//! the function's body and the layer's handler, their span, when it ends within the slot time
//! from the call's start, before which the claim cannot have lapsed), narrowed by the clocks'
//! skew each way: the store counted the slot over a span that holds it. A hold whose span
//! holds a restart (which forgets every slot) is left out. The failure policy's `Local`
//! answers (its in-process fallback) are judged per limiter, at most [`MAX`] at once too;
//! `Open`'s hold nothing.
//!
//! On what the servers recorded, a slot is an admission of a log over the slot time (the
//! verifier judges it as one: a renewal moves a slot's score later, so a window's admissions
//! by their first scores were all counted by its last one), taken back by its release (a
//! refund); the renewals (`renew.lua`) record no admission.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use axum::body::Body;
use axum::http::{HeaderMap, Request};
use ratelimit_runtime::{Concurrency, FailurePolicy, Limiter, RateLimitError, rate_limit};
use tower_service::Service as _;

use super::callers::{Answered, USER_HEADER};
use super::ops::{Caller, Kind, Outcome, Record, Source, Subject, Traffic, USERS};
use super::verify::Verdict;
use crate::accuracy::Rng;

/// The calls of a key in flight a concurrency limit of the checker allows.
pub(crate) const MAX: u64 = 2;

/// Its slot time: renewals every ~667 ms, and holds up to past it.
pub(crate) const SLOT_TIME: Duration = Duration::from_secs(2);

/// The checker's concurrency limit.
pub(crate) const LIMIT: Concurrency = Concurrency::new_const(MAX, SLOT_TIME);

/// The key held by hand.
const HAND_KEY: &str = "slots:hand";

/// The layer's scope.
pub(crate) const LAYER_SCOPE: &str = "chk.slots.layer";

/// The header a request to the layer's route tells its handler how long to hold by, in ms.
pub(crate) const HOLD_HEADER: &str = "x-hold-ms";

/// How a slot subject is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// `Limiter::acquire` by hand.
    Hand,
    /// [`holding`], its concurrency limit stacked under a rate.
    Function,
    /// The concurrency layer's route (`/slots`).
    Layer,
}

/// A rate and a concurrency limit stacked, one check: `#chk.slots.rate/{<user>}@1s` and
/// `#chk.slots/{<user>}@slots`. Holds for `hold`; tells its decisions and its body's span.
#[rate_limit(name = "chk.slots.rate", period = 1, threshold = 30, key = user, limiter = limiter, decision = d)]
#[rate_limit(name = "chk.slots", concurrency = 2, slot_time = "2s", key = user)]
pub(crate) async fn holding(
    limiter: &Limiter,
    user: &str,
    hold: Duration,
) -> Result<(Answered, Instant, Instant), RateLimitError> {
    let began = Instant::now();
    let answered = super::callers::answered(d);
    tokio::time::sleep(hold).await;
    Ok((answered, began, Instant::now()))
}

/// The layer's handler: holds for what [`HOLD_HEADER`] says, and tells its span (µs since the
/// Unix epoch) in `x-began` and `x-ended`.
pub(crate) async fn handler(headers: HeaderMap) -> ([(&'static str, String); 2], &'static str) {
    let hold = headers
        .get(HOLD_HEADER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse().ok())
        .map_or(Duration::ZERO, Duration::from_millis);
    let began = now_micros();
    tokio::time::sleep(hold).await;
    let ended = now_micros();
    (
        [
            ("x-began", began.to_string()),
            ("x-ended", ended.to_string()),
        ],
        "held",
    )
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

/// The slot subjects, after every other: the key by hand, then for each user the function's
/// rate and concurrency limit and the layer's concurrency limit. None has a scope that a
/// reset is drawn for, nor an address the shared limits change.
pub(crate) fn subjects() -> Vec<Subject> {
    let subject = |name: String, key: String, rate, via, user| Subject {
        name,
        key,
        rate,
        caller: Caller::Slots(via, user),
        scope: None,
        address: None,
    };
    let mut subjects = vec![subject(
        HAND_KEY.to_owned(),
        HAND_KEY.to_owned(),
        LIMIT.rate(),
        Via::Hand,
        "",
    )];
    for user in USERS {
        let rate = ratelimit_runtime::Rate::new_const(30, Duration::from_secs(1));
        subjects.push(subject(
            format!("#chk.slots.rate/{{{user}}}@1s (stacked over slots)"),
            format!("#chk.slots.rate/{{{user}}}@1s"),
            rate,
            Via::Function,
            user,
        ));
        subjects.push(subject(
            format!("#chk.slots/{{{user}}}@slots (function)"),
            format!("#chk.slots/{{{user}}}@slots"),
            LIMIT.rate(),
            Via::Function,
            user,
        ));
        subjects.push(subject(
            format!("{{{LAYER_SCOPE}/{user}}}@concurrency (layer)"),
            format!("{{{LAYER_SCOPE}/{user}}}@concurrency"),
            LIMIT.rate(),
            Via::Layer,
            user,
        ));
    }
    subjects
}

/// One hold as its holder saw it.
#[derive(Clone, Debug)]
pub(crate) struct Hold {
    subject: usize,
    limiter: usize,
    source: Source,
    /// Its span, since the run's start.
    began: Duration,
    ended: Duration,
    /// Whether its holder knows the store counted it all along (see the module docs).
    judged: bool,
}

impl Traffic {
    /// A holder task's loop: slots held through a random entry point by limiter `index`, drawn
    /// from `seed`, until `until`.
    pub(crate) async fn run_holders(
        self: std::sync::Arc<Self>,
        index: usize,
        seed: u64,
        until: Instant,
    ) {
        let mut rng = Rng::new(seed);
        while Instant::now() < until {
            match rng.below(3) {
                0 => self.hold_by_hand(index, &mut rng).await,
                1 => self.hold_in_function(index, &mut rng).await,
                // The layer is the limiter's that fails closed (its router's).
                _ if index == super::ops::CLOSED => self.hold_in_layer(&mut rng).await,
                _ => self.hold_by_hand(index, &mut rng).await,
            }
            tokio::time::sleep(Duration::from_millis(rng.below(10))).await;
        }
    }

    /// How long a holder holds: mostly a few to a few hundred milliseconds, one in four past
    /// the slot time (renewed meanwhile).
    fn hold_for(rng: &mut Rng) -> Duration {
        if rng.below(4) == 0 {
            SLOT_TIME + Duration::from_millis(rng.below(1_500))
        } else {
            Duration::from_millis(rng.below(300))
        }
    }

    fn slot_subject(&self, via: Via, user: &'static str) -> usize {
        self.subjects
            .iter()
            .position(|subject| {
                subject.caller == Caller::Slots(via, user) && subject.rate.is_concurrency()
            })
            .expect("a slot subject")
    }

    fn push_hold(&self, hold: Hold) {
        self.holds.lock().expect("the holds").push(hold);
    }

    /// The release of the call recorded at `admission` (`limits` its slot subjects): made
    /// when its slots were dropped, its outcome unknown to the caller (the release is not
    /// awaited).
    fn released(&self, index: usize, admission: usize, subject: usize, at: Duration) {
        self.record(Record {
            kind: Kind::Refund,
            limiter: index,
            limits: vec![(subject, 1)],
            sources: vec![Source::Store],
            cross_slot: false,
            outcome: Outcome::Error,
            started: at,
            took: Duration::ZERO,
            bound: Duration::MAX,
            refunds: Some(admission),
        });
    }

    async fn hold_by_hand(&self, index: usize, rng: &mut Rng) {
        let limiter = &self.limiters[index];
        let subject = self.slot_subject(Via::Hand, "");
        let deadline = Self::deadline(rng);
        let started = Instant::now();
        let mut record = self.slot_record(index, vec![(subject, 1)], started, 1);
        let answer = super::ops::within(deadline, limiter.acquire(HAND_KEY, LIMIT)).await;
        record.took = started.elapsed();
        let slot = admitted(&mut record, answer);
        if let Some(slot) = &slot {
            record.outcome = super::ops::decided::<RateLimitError>(Ok(slot.decision()));
        }
        let by_policy = matches!(record.outcome, Outcome::Policy { .. });
        // Held from the answer on.
        let began = record.started + record.took;
        let admission = self.record(record);
        let Some(slot) = slot else {
            return;
        };
        tokio::time::sleep(Self::hold_for(rng)).await;
        // The span's end before the look: held then, the store counted it until then.
        let ended = self.epoch.elapsed();
        let judged = slot.is_held();
        drop(slot);
        let source = if by_policy {
            Source::Policy
        } else {
            Source::Store
        };
        self.push_hold(Hold {
            subject,
            limiter: index,
            source,
            began,
            ended,
            judged,
        });
        if !by_policy {
            self.released(index, admission, subject, ended);
        }
    }

    async fn hold_in_function(&self, index: usize, rng: &mut Rng) {
        let limiter = &self.limiters[index];
        let user = USERS[rng.below(USERS.len() as u64) as usize];
        let subject = self.slot_subject(Via::Function, user);
        let rate_subject = self
            .subjects
            .iter()
            .position(|s| {
                s.caller == Caller::Slots(Via::Function, user) && !s.rate.is_concurrency()
            })
            .expect("the stacked rate's subject");
        let deadline = Self::deadline(rng);
        let hold = Self::hold_for(rng);
        let started = Instant::now();
        let mut record = self.slot_record(index, vec![(rate_subject, 1), (subject, 1)], started, 2);
        // A deadline may end the call before, or while, it holds: either way, nothing is
        // judged of it (its span unknown), and it releases what it took.
        let answer = super::ops::within(deadline, holding(limiter, user, hold)).await;
        record.took = started.elapsed();
        let held = match admitted(&mut record, answer) {
            None => None,
            Some((answered, began, ended)) => {
                record.sources = answered
                    .iter()
                    .map(|&(_, by_policy)| {
                        if by_policy {
                            Source::Policy
                        } else {
                            Source::Store
                        }
                    })
                    .collect();
                record.outcome = if record.sources.contains(&Source::Policy) {
                    Outcome::Policy { allowed: true }
                } else {
                    Outcome::Admitted
                };
                Some((
                    record.sources.get(1).copied().unwrap_or(Source::Store),
                    began,
                    ended,
                ))
            }
        };
        let admission = self.record(record);
        let Some((source, began, ended)) = held else {
            return;
        };
        self.push_hold(Hold {
            subject,
            limiter: index,
            source,
            began: began - self.epoch,
            ended: ended - self.epoch,
            // Within the slot time of the check's start, the claim cannot have lapsed.
            judged: ended.duration_since(started) < SLOT_TIME,
        });
        if source == Source::Store {
            self.released(index, admission, subject, ended - self.epoch);
        }
    }

    async fn hold_in_layer(&self, rng: &mut Rng) {
        let index = super::ops::CLOSED;
        let user = USERS[rng.below(USERS.len() as u64) as usize];
        let subject = self.slot_subject(Via::Layer, user);
        let hold = Self::hold_for(rng);
        let started = Instant::now();
        let mut record = self.slot_record(index, vec![(subject, 1)], started, 1);
        record.kind = Kind::Request;
        let request = Request::get("/slots")
            .header(USER_HEADER, user)
            .header(HOLD_HEADER, hold.as_millis().to_string())
            .body(Body::empty())
            .expect("a request");
        let response = match self.router.clone().call(request).await {
            Ok(response) => response,
            Err(infallible) => match infallible {},
        };
        let status = response.status();
        let span = |headers: &HeaderMap, name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse::<u64>().ok())
        };
        let (began, ended) = (
            span(response.headers(), "x-began"),
            span(response.headers(), "x-ended"),
        );
        // The body, read to its end: the slot is released there.
        let _ = axum::body::to_bytes(response.into_body(), 1 << 16).await;
        record.took = started.elapsed();
        record.outcome = match status.as_u16() {
            200 => Outcome::Admitted,
            429 => Outcome::Denied,
            _ => Outcome::Error,
        };
        let admission = self.record(record);
        let (Some(began), Some(ended)) = (began, ended) else {
            return;
        };
        let since = |micros: u64| Duration::from_micros(micros.saturating_sub(self.epoch_micros));
        let (began, ended) = (since(began), since(ended));
        self.push_hold(Hold {
            subject,
            limiter: index,
            source: Source::Store,
            began,
            ended,
            judged: ended.saturating_sub(started - self.epoch) < SLOT_TIME,
        });
        self.released(index, admission, subject, ended);
    }

    /// The record of a call holding `limits`, started at `started`, bounded by `calls` round
    /// trips.
    fn slot_record(
        &self,
        index: usize,
        limits: Vec<(usize, u32)>,
        started: Instant,
        calls: u32,
    ) -> Record {
        Record {
            kind: Kind::Acquire,
            limiter: index,
            sources: vec![Source::Store; limits.len()],
            limits,
            cross_slot: false,
            outcome: Outcome::Done,
            started: started - self.epoch,
            took: Duration::ZERO,
            // A hold's call is its check; the function's and the layer's spans hold its
            // body too.
            bound: self.bound(calls, SLOT_TIME * 2),
            refunds: None,
        }
    }
}

/// What an entry point answered (`None`: its caller gave up), into `record`'s outcome when it
/// holds nothing; what it holds, otherwise (its outcome is then the caller's to tell).
fn admitted<T>(record: &mut Record, answer: Option<Result<T, RateLimitError>>) -> Option<T> {
    match answer {
        None => record.outcome = Outcome::Cancelled,
        Some(Err(error)) if error.is_denied() => record.outcome = Outcome::Denied,
        Some(Err(_)) => record.outcome = Outcome::Error,
        Some(Ok(held)) => return Some(held),
    }
    None
}

/// Judges the holds (see the module docs): `wipes` are the server times (µs since the Unix
/// epoch) of the restarts, `epoch_micros` the run's start on that clock.
pub(crate) fn judge(
    holds: &[Hold],
    subjects: &[Subject],
    policies: &[FailurePolicy],
    wipes: &[u64],
    epoch_micros: u64,
    verdict: &mut Verdict,
) {
    /// How far apart the records' clock and the servers' may read, µs, each way.
    const SKEW: u64 = 1_000;
    let micros = |at: Duration| epoch_micros + at.as_micros() as u64;
    let mut store: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    let mut local: BTreeMap<(usize, usize), Vec<(u64, u64)>> = BTreeMap::new();
    for hold in holds {
        let (began, ended) = (micros(hold.began), micros(hold.ended));
        match hold.source {
            // `Open` holds nothing anywhere.
            Source::Policy if policies[hold.limiter] != FailurePolicy::Local => {
                verdict.count(
                    "concurrency: holds the policy Open admitted (nothing held)",
                    1,
                );
            }
            Source::Policy => {
                local
                    .entry((hold.subject, hold.limiter))
                    .or_default()
                    .push((began, ended));
            }
            Source::Store if !hold.judged => {
                verdict.count(
                    "concurrency: holds not judged (their claim lapsed, or they outlasted the slot time unseen)",
                    1,
                );
            }
            Source::Store => {
                let (from, to) = (began + SKEW, ended.saturating_sub(SKEW));
                if from >= to {
                    continue;
                }
                if wipes.iter().any(|&wipe| from <= wipe && wipe <= to) {
                    verdict.count("concurrency: holds across a restart (not judged)", 1);
                    continue;
                }
                if to - from > SLOT_TIME.as_micros() as u64 {
                    verdict.count(
                        "concurrency: holds judged past their slot time (renewed)",
                        1,
                    );
                }
                store.entry(hold.subject).or_default().push((from, to));
            }
        }
    }
    for (subject, spans) in &store {
        let most = most_at_once(spans);
        verdict.count(
            "concurrency: holds judged (the store's)",
            spans.len() as u64,
        );
        if most.0 > MAX {
            verdict.violation(format!(
                "concurrency: {} holders of {} at once (at {} µs), of at most {MAX}",
                most.0, subjects[*subject].name, most.1
            ));
        }
        if most.0 == MAX {
            verdict.count("concurrency: subjects seen full (the store's)", 1);
        }
    }
    for ((subject, limiter), spans) in &local {
        let most = most_at_once(spans);
        verdict.count(
            "concurrency: holds judged (a Local fallback's)",
            spans.len() as u64,
        );
        if most.0 > MAX {
            verdict.violation(format!(
                "concurrency: {} holders of {} at once in limiter {limiter}'s fallback, of at most {MAX}",
                most.0, subjects[*subject].name
            ));
        }
    }
}

/// The most of `spans` (closed) that hold one instant, and the first such instant.
fn most_at_once(spans: &[(u64, u64)]) -> (u64, u64) {
    // Starts before ends at one instant: closed spans that touch overlap.
    let mut events: Vec<(u64, i8)> = spans
        .iter()
        .flat_map(|&(from, to)| [(from, -1), (to, 1)])
        .collect();
    events.sort_unstable();
    let (mut now, mut most, mut at) = (0_i64, 0_i64, 0);
    for (time, step) in events {
        now -= i64::from(step);
        if now > most {
            most = now;
            at = time;
        }
    }
    (most.max(0) as u64, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn most_at_once_counts_touching_spans_as_overlapping() {
        assert_eq!(most_at_once(&[]).0, 0);
        assert_eq!(most_at_once(&[(1, 5), (6, 9)]).0, 1);
        assert_eq!(most_at_once(&[(1, 5), (5, 9)]).0, 2);
        assert_eq!(most_at_once(&[(1, 10), (2, 3), (4, 5), (2, 8)]), (3, 2));
    }
}
