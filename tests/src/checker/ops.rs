//! The traffic: the hot limits, the operations a task draws (seeded), and the record of each
//! call with its answer and its start and end.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ratelimit_runtime::{Algorithm, Decision, Limit, Limiter, Rate};

use crate::accuracy::Rng;

/// A hot limit: a key checked against one rate only (a key is meant for one rate).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hot {
    /// The key, without the limiter's prefix (no user data: fixed names).
    pub(crate) key: &'static str,
    /// Its rate.
    pub(crate) rate: Rate,
}

/// The hot limits: logs and counters, small thresholds, periods of 1 to 5 s; the `{u1}` ones
/// share a cluster slot; the `lease:` ones are leased.
pub(crate) fn hot_limits() -> Vec<Hot> {
    let log = |key, threshold, seconds| Hot {
        key,
        rate: Rate::new(threshold, Duration::from_secs(seconds)).expect("a valid rate"),
    };
    let counter = |key, threshold, seconds| Hot {
        key,
        rate: Rate::new(threshold, Duration::from_secs(seconds))
            .expect("a valid rate")
            .with_algorithm(Algorithm::SlidingWindowCounter),
    };
    vec![
        log("log:a", 5, 2),
        log("log:b", 3, 1),
        log("log:c", 10, 4),
        counter("ctr:a", 10, 2),
        counter("ctr:b", 6, 1),
        counter("ctr:c", 8, 5),
        log("{u1}:burst", 4, 1),
        counter("{u1}:daily", 9, 3),
        counter("{u1}:tokens", 10, 2),
        // Leased (their plain checks go through leases of up to 4 and 3 admissions; their
        // other calls are checked as any other limit's).
        Hot {
            rate: log("lease:log", 64, 2).rate.leased(),
            ..log("lease:log", 64, 2)
        },
        Hot {
            rate: counter("lease:ctr", 48, 2).rate.leased(),
            ..counter("lease:ctr", 48, 2)
        },
    ]
}

/// The indices of the hot limits that share the `{u1}` slot.
const SAME_SLOT: [usize; 3] = [6, 7, 8];

/// The kinds of operation, as the report counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Check,
    CheckN,
    CheckAll,
    Permit,
    Refund,
    Peek,
    Wait,
    Reset,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Check => "check",
            Kind::CheckN => "check_n",
            Kind::CheckAll => "check_all",
            Kind::Permit => "check_permit",
            Kind::Refund => "permit.refund",
            Kind::Peek => "peek",
            Kind::Wait => "until_ready",
            Kind::Reset => "reset",
        }
    }
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The store admitted (and recorded) it.
    Admitted,
    /// The store (or the deny cache) denied it.
    Denied,
    /// The failure policy answered (`allowed` or not): nothing is known of the store.
    Policy { allowed: bool },
    /// An error (`Closed`, a reset or a refund that failed): the call may have run.
    Error,
    /// A look, a reset or a refund that the store answered.
    Done,
}

/// One call as the application server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) kind: Kind,
    /// Which limiter made it.
    pub(crate) limiter: usize,
    /// The hot limits it names, with their costs.
    pub(crate) limits: Vec<(usize, u32)>,
    /// `true` for a check of limits in several cluster slots (reserve, then refund).
    pub(crate) cross_slot: bool,
    pub(crate) outcome: Outcome,
    /// Since the run's start.
    pub(crate) started: Duration,
    pub(crate) took: Duration,
    /// The most it may take (liveness).
    pub(crate) bound: Duration,
}

/// What a traffic task needs.
pub(crate) struct Traffic {
    pub(crate) limiters: Vec<Limiter>,
    pub(crate) hot: Vec<Hot>,
    pub(crate) cluster: bool,
    pub(crate) timeout: Duration,
    pub(crate) epoch: Instant,
    pub(crate) records: Mutex<Vec<Record>>,
}

/// The longest wait `until_ready` is given.
const MAX_WAIT: Duration = Duration::from_millis(800);

/// Liveness slack on top of the bounds (a loaded machine's scheduling).
const SLACK: Duration = Duration::from_millis(500);

impl Traffic {
    fn record(&self, record: Record) {
        self.records.lock().expect("the records").push(record);
    }

    fn bound(&self, calls: u32, extra: Duration) -> Duration {
        self.timeout * calls + extra + SLACK
    }

    /// A task's loop: draws operations from `rng` until `until`.
    pub(crate) async fn run_task(self: Arc<Self>, task: usize, seed: u64, until: Instant) {
        let mut rng = Rng::new(seed);
        let limiter_index = task % self.limiters.len();
        while Instant::now() < until {
            self.one(limiter_index, &mut rng).await;
            let pause = rng.below(15);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// One operation, drawn from `rng`.
    async fn one(self: &Arc<Self>, index: usize, rng: &mut Rng) {
        let limiter = &self.limiters[index];
        let draw = rng.below(100);
        let started = Instant::now();
        let at = started - self.epoch;
        let hot = rng.below(self.hot.len() as u64) as usize;
        let Hot { key, rate } = self.hot[hot];
        let mut record = Record {
            kind: Kind::Check,
            limiter: index,
            limits: vec![(hot, 1)],
            cross_slot: false,
            outcome: Outcome::Done,
            started: at,
            took: Duration::ZERO,
            // A leased check may wait for its lease's renewal (at most the timeout), then make
            // its own call.
            bound: self.bound(if rate.is_leased() { 2 } else { 1 }, Duration::ZERO),
        };
        match draw {
            0..30 => {
                record.outcome = decided(limiter.check(key, rate).await);
            }
            30..45 => {
                let cost = 1 + rng.below(rate.threshold()) as u32;
                record.kind = Kind::CheckN;
                record.limits = vec![(hot, cost)];
                record.outcome = decided(limiter.check_n(key, rate, cost).await);
            }
            45..60 => {
                let chosen = self.pick_several(rng);
                record.kind = Kind::CheckAll;
                record.cross_slot =
                    self.cluster && !chosen.iter().all(|(i, _)| SAME_SLOT.contains(i));
                record.bound = self.bound(2, Duration::ZERO);
                let limits: Vec<Limit<'_>> = chosen
                    .iter()
                    .map(|&(i, cost)| Limit::new(self.hot[i].key, self.hot[i].rate).with_cost(cost))
                    .collect();
                record.limits = chosen;
                record.outcome = match limiter.check_all(limits).await {
                    // A part answered by the policy: nothing is known of the store's records.
                    Ok(decisions)
                        if decisions
                            .iter()
                            .any(|one| one.decision().answered_by_policy()) =>
                    {
                        Outcome::Policy {
                            allowed: decisions.allowed,
                        }
                    }
                    answer => decided(answer.map(|decisions| *decisions)),
                };
            }
            60..78 => {
                let cost = 1 + rng.below(rate.threshold().min(3)) as u32;
                record.kind = Kind::Permit;
                record.limits = vec![(hot, cost)];
                let permit = limiter.check_permit(key, rate, cost).await;
                record.outcome = decided(permit.as_ref().map(ratelimit_runtime::Permit::decision));
                if let Ok(permit) = permit
                    && record.outcome == Outcome::Admitted
                    && rng.below(2) == 0
                {
                    record.took = started.elapsed();
                    self.record(record.clone());
                    tokio::time::sleep(Duration::from_millis(rng.below(50))).await;
                    let refund_started = Instant::now();
                    let refunded = permit.refund().await;
                    self.record(Record {
                        kind: Kind::Refund,
                        outcome: if refunded.is_ok() {
                            Outcome::Done
                        } else {
                            Outcome::Error
                        },
                        started: refund_started - self.epoch,
                        took: refund_started.elapsed(),
                        ..record
                    });
                    return;
                }
            }
            78..90 => {
                record.kind = Kind::Peek;
                record.limits = vec![(hot, 0)];
                record.outcome = match limiter.peek(key, rate).await {
                    Ok(_) => Outcome::Done,
                    Err(_) => Outcome::Error,
                };
            }
            90..98 => {
                record.kind = Kind::Wait;
                let max_wait = Duration::from_millis(100 + rng.below(MAX_WAIT.as_millis() as u64));
                record.bound = self.bound(if rate.is_leased() { 4 } else { 2 }, max_wait);
                record.outcome = decided(limiter.until_ready(key, rate, max_wait).await);
            }
            _ => {
                record.kind = Kind::Reset;
                record.limits = vec![(hot, 0)];
                record.bound = self.bound(2, Duration::ZERO);
                record.outcome = match limiter.reset(key).await {
                    Ok(()) => Outcome::Done,
                    Err(_) => Outcome::Error,
                };
            }
        }
        record.took = started.elapsed();
        self.record(record);
    }

    /// Two or three distinct hot limits with costs: the `{u1}` slot's (one script) or any.
    fn pick_several(&self, rng: &mut Rng) -> Vec<(usize, u32)> {
        let mut chosen: Vec<usize> = if rng.below(2) == 0 {
            SAME_SLOT.to_vec()
        } else {
            (0..self.hot.len()).collect()
        };
        let keep = 2 + rng.below(2) as usize;
        while chosen.len() > keep {
            let drop = rng.below(chosen.len() as u64) as usize;
            chosen.remove(drop);
        }
        chosen
            .into_iter()
            .map(|i| {
                let most = self.hot[i].rate.threshold().min(3);
                (i, 1 + rng.below(most) as u32)
            })
            .collect()
    }
}

/// A check's answer as an outcome.
pub(crate) fn decided<E>(answer: Result<Decision, E>) -> Outcome {
    match answer {
        Ok(decision) if decision.answered_by_policy() => Outcome::Policy {
            allowed: decision.allowed,
        },
        Ok(decision) if decision.allowed => Outcome::Admitted,
        Ok(_) => Outcome::Denied,
        Err(_) => Outcome::Error,
    }
}
