//! The traffic: the subjects (every limit a caller is told about: hand keys, the attribute's
//! limits, the layers'), the operations a task draws (seeded), each maybe cancelled by its
//! caller, and the record of each call with its answer, its start and its end.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use ratelimit_runtime::{Algorithm, Decision, FailurePolicy, Limit, Limiter, Rate};

use super::callers::{self, Function, Refused, Route};
use crate::accuracy::Rng;

/// The users the attribute's functions and the layers are called for (fixed names: no user
/// data). The leased functions are called for the first only, so that their windows fill.
pub(crate) const USERS: [&str; 2] = ["alice", "bob"];

/// The user of the solo function, which only [`SOLO_LIMITER`] calls and resets: a leased limit
/// whose reserves one limiter alone holds.
pub(crate) const SOLO: &str = "solo";

/// The limiter that fails closed (the first): the layers' requests go through it.
pub(crate) const CLOSED: usize = 0;

/// The limiter that calls the solo function.
const SOLO_LIMITER: usize = 0;

/// How a subject is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    /// By hand: `check`, `check_n`, `check_all`, `check_permit`, `peek`, `until_ready`,
    /// `reset`, on its key.
    Hand,
    /// Through an attributed function (one of its limits), for a user.
    Function(Function, &'static str),
    /// Through a route's layer (one of its rates), for a user.
    Route(Route, &'static str),
    /// By hand in a scope the shared limits address (`Limiter::scope(..).check`), on its key.
    Scoped,
    /// Through the attributed function whose scope the shared limits address, for a user.
    Registered(&'static str),
    /// A concurrency limit's subject (or the rate stacked over one), held through an entry
    /// point, for a user (none by hand).
    Slots(super::slots::Via, &'static str),
}

impl Caller {
    /// Whether every limiter calls it (all but the solo function).
    fn is_shared(self) -> bool {
        !matches!(self, Caller::Function(Function::Solo, _))
    }
}

/// A limit whose admissions callers are told of, judged on its own: a key and its rate.
#[derive(Clone, Debug)]
pub(crate) struct Subject {
    /// How the report names it.
    pub(crate) name: String,
    /// Its stored key, without the limiter's prefix (a counter's hash has `#swc` after it).
    pub(crate) key: String,
    pub(crate) rate: Rate,
    pub(crate) caller: Caller,
    /// The scope `Limiter::reset_scope` forgets it by, with its caller's key (none for keys by
    /// hand).
    pub(crate) scope: Option<(&'static str, &'static str)>,
    /// The scope the shared limits' changes address it by (`changes.rs`); `None`: no change
    /// does.
    pub(crate) address: Option<&'static str>,
}

impl Subject {
    fn hand(key: &str, rate: Rate) -> Subject {
        Subject {
            name: key.to_owned(),
            key: key.to_owned(),
            rate,
            caller: Caller::Hand,
            scope: None,
            address: None,
        }
    }

    /// The key an override of it names: its user's, or its key by hand.
    pub(crate) fn override_key(&self) -> &str {
        match self.caller {
            Caller::Function(_, user)
            | Caller::Route(_, user)
            | Caller::Registered(user)
            | Caller::Slots(_, user) => user,
            Caller::Hand | Caller::Scoped => &self.key,
        }
    }
}

/// The subjects the shared limits' changes address, after every other: by hand in a scope of
/// its own each (a log, a counter, a leased log), and the registered function's limit for each
/// user.
fn registered() -> Vec<Subject> {
    let log = |threshold, seconds| {
        Rate::new(threshold, Duration::from_secs(seconds)).expect("a valid rate")
    };
    let scoped = |key: &str, rate: Rate, address: &'static str| Subject {
        name: format!("{key} (scope {address})"),
        key: key.to_owned(),
        rate,
        caller: Caller::Scoped,
        scope: None,
        address: Some(address),
    };
    let mut subjects = vec![
        scoped("reg:log", log(6, 2), "reg.log"),
        scoped(
            "reg:ctr",
            log(8, 2).with_algorithm(Algorithm::SlidingWindowCounter),
            "reg.ctr",
        ),
        scoped("reg:lease", log(64, 2).leased(), "reg.lease"),
    ];
    for user in USERS {
        subjects.push(Subject {
            name: format!("{}/{user} (registered)", callers::REGISTERED),
            key: format!("{}/{user}", callers::REGISTERED),
            rate: callers::REGISTERED_RATE,
            caller: Caller::Registered(user),
            scope: Some((callers::REGISTERED, user)),
            address: Some(callers::REGISTERED),
        });
    }
    subjects
}

/// The keys by hand: logs and counters, small thresholds, periods of 1 to 5 s; the `{u1}` ones
/// share a cluster slot; the `lease:` ones are leased.
fn hand() -> Vec<Subject> {
    let log = |threshold, seconds| {
        Rate::new(threshold, Duration::from_secs(seconds)).expect("a valid rate")
    };
    let counter = |threshold, seconds| {
        log(threshold, seconds).with_algorithm(Algorithm::SlidingWindowCounter)
    };
    vec![
        Subject::hand("log:a", log(5, 2)),
        Subject::hand("log:b", log(3, 1)),
        Subject::hand("log:c", log(10, 4)),
        Subject::hand("ctr:a", counter(10, 2)),
        Subject::hand("ctr:b", counter(6, 1)),
        Subject::hand("ctr:c", counter(8, 5)),
        Subject::hand("{u1}:burst", log(4, 1)),
        Subject::hand("{u1}:daily", counter(9, 3)),
        Subject::hand("{u1}:tokens", counter(10, 2)),
        // Leased (their plain checks go through leases of up to 4 and 3 admissions; their
        // other calls are checked as any other limit's).
        Subject::hand("lease:log", log(64, 2).leased()),
        Subject::hand("lease:ctr", counter(48, 2).leased()),
    ]
}

/// The indices of the keys by hand that share the `{u1}` slot.
const SAME_SLOT: [usize; 3] = [6, 7, 8];

/// The indices of the leased keys by hand.
const LEASED: [usize; 2] = [9, 10];

/// How many keys by hand there are: the subjects after them are the attribute's and the
/// layers'.
const HAND: usize = 11;

/// Every subject: the keys by hand (first, in [`hand`]'s order), then for each user the
/// attribute's limits and the layers' rates, with their stored keys as the guide's `keys` page
/// lays them out.
pub(crate) fn subjects() -> Vec<Subject> {
    let mut subjects = hand();
    let callers = USERS
        .iter()
        .flat_map(|&user| {
            Function::SHARED
                .iter()
                .map(move |&function| (function, user))
        })
        .filter(|&(function, user)| !function.leased() || user == USERS[0])
        .chain([(Function::Solo, SOLO)]);
    for (function, user) in callers {
        for (key, rate, scope) in function.limits(user) {
            subjects.push(Subject {
                name: format!("{key} ({})", function.name()),
                key,
                rate,
                caller: Caller::Function(function, user),
                scope: Some((scope, user)),
                address: None,
            });
        }
    }
    for user in USERS {
        for route in Route::ALL {
            for (key, rate, scope) in route.limits(user) {
                subjects.push(Subject {
                    name: format!("{key} (layer of {})", route.path()),
                    key,
                    rate,
                    caller: Caller::Route(route, user),
                    scope: Some((scope, user)),
                    address: None,
                });
            }
        }
    }
    subjects.extend(registered());
    subjects.extend(super::slots::subjects());
    subjects
}

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
    /// A call of an attributed function.
    Function,
    /// A call of an attributed tonic method (a denial is a `Status`).
    Method,
    /// A request through a route's layer.
    Request,
    /// A gRPC call through a route's layer (a denial is a status, trailers-only).
    GrpcRequest,
    ResetScope,
    /// A check by hand in a scope (`Limiter::scope`).
    Scoped,
    /// A call holding a slot (`Limiter::acquire`, the attribute's `concurrency`; the layer's
    /// are `Request`s).
    Acquire,
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
            Kind::Function => "#[rate_limit] fn",
            Kind::Method => "#[rate_limit] tonic method",
            Kind::Request => "layer request",
            Kind::GrpcRequest => "layer gRPC call",
            Kind::ResetScope => "reset_scope",
            Kind::Scoped => "scope(..).check",
            Kind::Acquire => "acquire (concurrency)",
        }
    }

    /// Whether an admitted call of this kind is an admission (not a look, a reset or a
    /// refund).
    pub(crate) fn admits(self) -> bool {
        !matches!(
            self,
            Kind::Refund | Kind::Peek | Kind::Reset | Kind::ResetScope
        )
    }
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Admitted (see each limit's [`Source`]).
    Admitted,
    /// The store (or the deny cache, or a lease's last denial) denied it.
    Denied,
    /// The failure policy answered for a part of it (`allowed` or not): what the store
    /// recorded of the rest is not known.
    Policy { allowed: bool },
    /// An error (`Closed`, a reset or a refund that failed): the call may have run.
    Error,
    /// Its caller stopped waiting (a deadline of its own): the call may have run, and may
    /// still run.
    Cancelled,
    /// A look, a reset or a refund that the store answered.
    Done,
    /// Not checked (its scope `off`, its key exempt): nothing recorded.
    Unchecked,
    /// Answered without telling whether the store recorded it (the attribute under a shadow
    /// scope, whose decision leaves the shadow limit out; or an exempt one, told apart by
    /// nothing): it may have been recorded.
    Unknown,
}

/// Who answered for one limit of an admitted call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The store (a lease's reserve spent, too).
    Store,
    /// The failure policy (`Open`: nothing; `Local`: the limiter's in-process fallback).
    Policy,
}

/// One call as the application server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    pub(crate) kind: Kind,
    /// Which limiter made it.
    pub(crate) limiter: usize,
    /// The subjects it names, with their costs (0 for looks and resets).
    pub(crate) limits: Vec<(usize, u32)>,
    /// Who answered for each limit (for an admission).
    pub(crate) sources: Vec<Source>,
    /// `true` for a check of limits in several cluster slots (reserve, then refund).
    pub(crate) cross_slot: bool,
    pub(crate) outcome: Outcome,
    /// Since the run's start.
    pub(crate) started: Duration,
    pub(crate) took: Duration,
    /// The most it may take (liveness).
    pub(crate) bound: Duration,
    /// For a refund: the record of the admission it refunds.
    pub(crate) refunds: Option<usize>,
}

/// What a traffic task needs.
pub(crate) struct Traffic {
    pub(crate) limiters: Vec<Limiter>,
    /// The router (its layers) of the limiter that fails closed.
    pub(crate) router: Router,
    pub(crate) subjects: Vec<Subject>,
    pub(crate) cluster: bool,
    pub(crate) timeout: Duration,
    pub(crate) epoch: Instant,
    pub(crate) records: Mutex<Vec<Record>>,
    /// The run's start, µs since the Unix epoch.
    pub(crate) epoch_micros: u64,
    /// The slots held (`slots.rs`).
    pub(crate) holds: Mutex<Vec<super::slots::Hold>>,
    /// When the solo function's scope was last reset, and how many times it was.
    pub(crate) solo_reset: Mutex<(Option<Instant>, u64)>,
}

/// The longest wait `until_ready` is given.
const MAX_WAIT: Duration = Duration::from_millis(800);

/// Liveness slack on top of the bounds (a loaded machine's scheduling).
const SLACK: Duration = Duration::from_millis(500);

/// One operation in this many is given a deadline of its caller's, which may cancel it.
const CANCEL_ONE_IN: u64 = 6;

impl Traffic {
    /// Records `record`; returns its index.
    pub(crate) fn record(&self, record: Record) -> usize {
        let mut records = self.records.lock().expect("the records");
        records.push(record);
        records.len() - 1
    }

    pub(crate) fn bound(&self, calls: u32, extra: Duration) -> Duration {
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

    /// The deadline a caller gives its call, if any: most calls none; some a few hundred
    /// microseconds to a few milliseconds (within a round trip or two), some up to 100 ms.
    pub(crate) fn deadline(rng: &mut Rng) -> Option<Duration> {
        if rng.below(CANCEL_ONE_IN) != 0 {
            return None;
        }
        Some(if rng.below(2) == 0 {
            Duration::from_micros(rng.below(3_000))
        } else {
            Duration::from_millis(rng.below(100))
        })
    }

    /// One operation, drawn from `rng`.
    async fn one(self: &Arc<Self>, index: usize, rng: &mut Rng) {
        let limiter = &self.limiters[index];
        let draw = rng.below(1_000);
        let deadline = Self::deadline(rng);
        let started = Instant::now();
        let at = started - self.epoch;
        let mut hot = rng.below(HAND as u64) as usize;
        if draw < 200 && rng.below(5) < 2 {
            // Plain checks of a leased key go through its lease: many, so that limiters hold
            // reserves, and spend them, while others reset the key.
            hot = LEASED[rng.below(LEASED.len() as u64) as usize];
        }
        let Subject { rate, .. } = self.subjects[hot];
        let key = self.subjects[hot].key.clone();
        let mut record = Record {
            kind: Kind::Check,
            limiter: index,
            limits: vec![(hot, 1)],
            sources: vec![Source::Store],
            cross_slot: false,
            outcome: Outcome::Done,
            started: at,
            took: Duration::ZERO,
            // A leased check may wait for its lease's renewal (at most the timeout), then make
            // its own call.
            bound: self.bound(if rate.is_leased() { 2 } else { 1 }, Duration::ZERO),
            refunds: None,
        };
        match draw {
            0..200 => {
                let answer = within(deadline, limiter.check(&key, rate)).await;
                self.decided(&mut record, answer);
            }
            200..280 => {
                let cost = 1 + rng.below(rate.threshold()) as u32;
                record.kind = Kind::CheckN;
                record.limits = vec![(hot, cost)];
                let answer = within(deadline, limiter.check_n(&key, rate, cost)).await;
                self.decided(&mut record, answer);
            }
            280..365 => {
                let chosen = self.pick_several(rng);
                record.kind = Kind::CheckAll;
                record.cross_slot =
                    self.cluster && !chosen.iter().all(|(i, _)| SAME_SLOT.contains(i));
                record.bound = self.bound(2, Duration::ZERO);
                let limits: Vec<Limit<'_>> = chosen
                    .iter()
                    .map(|&(i, cost)| {
                        let subject = &self.subjects[i];
                        Limit::new(subject.key.as_str(), subject.rate).with_cost(cost)
                    })
                    .collect();
                record.limits = chosen;
                match within(deadline, limiter.check_all(limits)).await {
                    None => record.outcome = Outcome::Cancelled,
                    Some(Ok(decisions)) => {
                        record.sources = decisions
                            .iter()
                            .map(|one| source(one.decision().answered_by_policy()))
                            .collect();
                        record.outcome = outcome(decisions.allowed, &record.sources);
                    }
                    Some(Err(_)) => record.outcome = Outcome::Error,
                }
            }
            365..480 => {
                let cost = 1 + rng.below(rate.threshold().min(3)) as u32;
                record.kind = Kind::Permit;
                record.limits = vec![(hot, cost)];
                let permit = within(deadline, limiter.check_permit(&key, rate, cost)).await;
                let permit = match permit {
                    None => {
                        record.outcome = Outcome::Cancelled;
                        None
                    }
                    Some(permit) => {
                        let decision = permit.as_ref().map(ratelimit_runtime::Permit::decision);
                        self.decided(&mut record, Some(decision));
                        permit.ok()
                    }
                };
                if let Some(permit) = permit
                    && record.outcome == Outcome::Admitted
                    && rng.below(2) == 0
                {
                    record.took = started.elapsed();
                    let admission = self.record(record.clone());
                    tokio::time::sleep(Duration::from_millis(rng.below(50))).await;
                    let refund_started = Instant::now();
                    let refunded = within(Self::deadline(rng), permit.refund()).await;
                    self.record(Record {
                        kind: Kind::Refund,
                        outcome: match refunded {
                            None => Outcome::Cancelled,
                            Some(Ok(_)) => Outcome::Done,
                            Some(Err(_)) => Outcome::Error,
                        },
                        started: refund_started - self.epoch,
                        took: refund_started.elapsed(),
                        refunds: Some(admission),
                        ..record
                    });
                    return;
                }
            }
            480..525 => {
                record.kind = Kind::Peek;
                record.limits = vec![(hot, 0)];
                record.outcome = done(within(deadline, limiter.peek(&key, rate)).await);
            }
            525..565 => {
                record.kind = Kind::Wait;
                let max_wait = Duration::from_millis(100 + rng.below(MAX_WAIT.as_millis() as u64));
                record.bound = self.bound(if rate.is_leased() { 4 } else { 2 }, max_wait);
                let answer = within(deadline, limiter.until_ready(&key, rate, max_wait)).await;
                self.decided(&mut record, answer);
            }
            565..575 => {
                // Half of them on a leased key, whose reserves other limiters may hold.
                if rng.below(2) == 0 {
                    hot = LEASED[rng.below(LEASED.len() as u64) as usize];
                }
                let key = self.subjects[hot].key.clone();
                record.kind = Kind::Reset;
                record.limits = vec![(hot, 0)];
                record.bound = self.bound(2, Duration::ZERO);
                record.outcome = done(within(deadline, limiter.reset(&key)).await);
            }
            575..730 => {
                // Half of them to a leased function, so that its windows fill; a sixth to
                // a function's tonic method, whose limits its plain twin shares.
                let (function, grpc) = match rng.below(6) {
                    0..3 => (
                        [Function::Leased, Function::LeasedCounter][rng.below(2) as usize],
                        false,
                    ),
                    3 => (
                        Function::METHODS[rng.below(Function::METHODS.len() as u64) as usize],
                        true,
                    ),
                    _ => (
                        Function::SHARED[rng.below(Function::SHARED.len() as u64) as usize],
                        false,
                    ),
                };
                let user = if function.leased() {
                    USERS[0]
                } else {
                    USERS[rng.below(USERS.len() as u64) as usize]
                };
                self.call(&mut record, (function, grpc), user, deadline)
                    .await;
            }
            730..860 => {
                // `/search` the least: each of its checks trims a log to its second.
                let route = match rng.below(20) {
                    0..9 => Route::Login,
                    9..16 => Route::Export,
                    _ => Route::Search,
                };
                let user = USERS[rng.below(USERS.len() as u64) as usize];
                // A third of them gRPC calls, answered with statuses.
                let grpc = rng.below(3) == 0;
                record.kind = if grpc {
                    Kind::GrpcRequest
                } else {
                    Kind::Request
                };
                record.limits = self.of(Caller::Route(route, user), 1);
                record.bound = self.bound(2, Duration::ZERO);
                // Through the application server whose limiter fails closed, which never
                // admits by its policy: another's 200 may be the policy's, which the response
                // does not tell, and would go unjudged.
                record.limiter = CLOSED;
                debug_assert_eq!(
                    self.limiters[CLOSED].failure_policy(),
                    FailurePolicy::Closed
                );
                let answer = callers::request(&self.router, route.path(), user, grpc);
                record.outcome = match within(deadline, answer).await {
                    None => Outcome::Cancelled,
                    Some(Ok(())) => Outcome::Admitted,
                    Some(Err(Refused::Denied)) => Outcome::Denied,
                    Some(Err(Refused::Failed)) => Outcome::Error,
                };
            }
            860..875 => {
                // The scope of a function's or a layer's limits, for a user; half of them a
                // leased function's, whose reserves limiters may hold.
                let scopes = self.scopes(|subject| subject.caller.is_shared());
                let leased =
                    self.scopes(|subject| subject.caller.is_shared() && subject.rate.is_leased());
                let (scope, user) = if rng.below(2) == 0 {
                    leased[rng.below(leased.len() as u64) as usize]
                } else {
                    scopes[rng.below(scopes.len() as u64) as usize]
                };
                self.reset_scope(&mut record, scope, user, deadline).await;
            }
            _ if index != SOLO_LIMITER => {
                // Others' share of the solo function's traffic: a plain check by hand.
                let answer = within(deadline, limiter.check(&key, rate)).await;
                self.decided(&mut record, answer);
            }
            _ if draw < 985 || !self.solo_reset_due() => {
                // The solo function: called by this limiter only.
                self.call(&mut record, (Function::Solo, false), SOLO, deadline)
                    .await;
            }
            _ => {
                // Its scope, reset by this limiter only, and every reset of it stopped by its
                // caller at a point of its progress: after its first, second or third wait.
                let (scope, user) = self.subjects[self.solo()].scope.expect("a scope");
                let waits = 1 + rng.below(3) as usize;
                record.kind = Kind::ResetScope;
                record.limits = vec![(self.solo(), 0)];
                record.bound = self.bound(8, Duration::ZERO);
                let reset = limiter.reset_scope(scope, Some(user));
                record.outcome = done(StopAfter::new(reset, waits).await);
            }
        }
        record.took = started.elapsed();
        self.record(record);
    }

    /// A registry task's loop: checks of the subjects the shared limits' changes address
    /// (`registered`: their indices), drawn from `seed`, by limiter `limiter`, until `until`.
    pub(crate) async fn run_registered(
        self: Arc<Self>,
        limiter: usize,
        registered: Vec<usize>,
        seed: u64,
        until: Instant,
    ) {
        let mut rng = Rng::new(seed);
        while Instant::now() < until {
            let subject = registered[rng.below(registered.len() as u64) as usize];
            self.registered(limiter, subject, &mut rng).await;
            tokio::time::sleep(Duration::from_millis(rng.below(15))).await;
        }
    }

    /// One check of the registered `subject` by limiter `index`: by hand in its scope, or a
    /// call of the registered function.
    async fn registered(&self, index: usize, subject: usize, rng: &mut Rng) {
        let limiter = &self.limiters[index];
        let deadline = Self::deadline(rng);
        let started = Instant::now();
        let Subject {
            rate,
            caller,
            address,
            ..
        } = self.subjects[subject];
        let key = self.subjects[subject].key.clone();
        let mut record = Record {
            kind: Kind::Scoped,
            limiter: index,
            limits: vec![(subject, 1)],
            sources: vec![Source::Store],
            cross_slot: false,
            outcome: Outcome::Done,
            started: started - self.epoch,
            took: Duration::ZERO,
            bound: self.bound(if rate.is_leased() { 2 } else { 1 }, Duration::ZERO),
            refunds: None,
        };
        let answer = if let Caller::Registered(user) = caller {
            record.kind = Kind::Function;
            record.bound = self.bound(2, Duration::ZERO);
            match within(deadline, callers::registered(limiter, user)).await {
                None => None,
                // No decision: its scope off, or in shadow mode (left out of the decision).
                Some(Ok(None)) => Some(Err(Outcome::Unknown)),
                Some(Ok(Some(decision))) => Some(Ok(decision)),
                Some(Err(error)) if error.is_denied() => Some(Err(Outcome::Denied)),
                Some(Err(_)) => Some(Err(Outcome::Error)),
            }
        } else {
            let scope = address.expect("a registered subject");
            within(deadline, limiter.scope(scope).check(&key, rate))
                .await
                .map(|answer| answer.map_err(|_| Outcome::Error))
        };
        match answer {
            Some(Ok(decision)) if decision.is_exempt() => record.outcome = Outcome::Unchecked,
            // Shadow mode let a denial through: the store recorded nothing.
            Some(Ok(decision)) if decision.would_deny() => record.outcome = Outcome::Denied,
            Some(Err(outcome)) => record.outcome = outcome,
            answer => self.decided(&mut record, answer),
        }
        record.took = started.elapsed();
        self.record(record);
    }

    /// Whether the solo function's scope is to be reset now (and then it is made): in pairs,
    /// the second 1 to 2 s after the first, while the window fills again and the limiter holds
    /// a reserve (a full window grants none), then 3.5 s or more before the next pair, in which
    /// the window after the second fills (48 admissions at about 20 calls a second).
    fn solo_reset_due(&self) -> bool {
        let mut resets = self.solo_reset.lock().expect("the solo resets");
        let (last, made) = *resets;
        let due = match last {
            None => true,
            // The second of a pair, or (its time missed) the first of the next.
            Some(at) if made % 2 == 1 => {
                (Duration::from_secs(1)..Duration::from_secs(2)).contains(&at.elapsed())
                    || at.elapsed() >= Duration::from_millis(3_500)
            }
            Some(at) => at.elapsed() >= Duration::from_millis(3_500),
        };
        if due {
            *resets = (Some(Instant::now()), made + 1);
        }
        due
    }

    /// The subject of the solo function.
    fn solo(&self) -> usize {
        self.subjects
            .iter()
            .position(|subject| subject.caller == Caller::Function(Function::Solo, SOLO))
            .expect("the solo function's subject")
    }

    /// The distinct scopes and users of the subjects `which` takes.
    fn scopes(&self, which: impl Fn(&Subject) -> bool) -> Vec<(&'static str, &'static str)> {
        let mut scopes: Vec<(&'static str, &'static str)> = self
            .subjects
            .iter()
            .filter(|subject| which(subject))
            .filter_map(|subject| subject.scope)
            .collect();
        scopes.dedup();
        scopes
    }

    /// `reset_scope(scope, Some(user))` into `record`.
    async fn reset_scope(
        &self,
        record: &mut Record,
        scope: &'static str,
        user: &'static str,
        deadline: Option<Duration>,
    ) {
        let limiter = &self.limiters[record.limiter];
        {
            {
                record.kind = Kind::ResetScope;
                record.limits = self
                    .subjects
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.scope == Some((scope, user)))
                    .map(|(i, _)| (i, 0))
                    .collect();
                // A scan per pattern, then a reset per key found: a few round trips.
                record.bound = self.bound(8, Duration::ZERO);
                record.outcome =
                    done(within(deadline, limiter.reset_scope(scope, Some(user))).await);
            }
        }
    }

    /// The subjects `caller` names, each at `cost`.
    fn of(&self, caller: Caller, cost: u32) -> Vec<(usize, u32)> {
        self.subjects
            .iter()
            .enumerate()
            .filter(|(_, subject)| subject.caller == caller)
            .map(|(i, _)| (i, cost))
            .collect()
    }

    /// A call of `function` for `user` into `record` (as its tonic method when `grpc`).
    async fn call(
        &self,
        record: &mut Record,
        (function, grpc): (Function, bool),
        user: &'static str,
        deadline: Option<Duration>,
    ) {
        if grpc {
            // A tonic method tells no limit's answer: through the limiter failing closed,
            // which never admits by its policy.
            record.limiter = CLOSED;
        }
        let limiter = &self.limiters[record.limiter];
        record.kind = if grpc { Kind::Method } else { Kind::Function };
        record.limits = self.of(Caller::Function(function, user), 1);
        record.bound = self.bound(2, Duration::ZERO);
        match within(deadline, function.call(limiter, user, grpc)).await {
            None => record.outcome = Outcome::Cancelled,
            Some(Ok(None)) => {
                record.sources = vec![source(false); record.limits.len()];
                record.outcome = outcome(true, &record.sources);
            }
            Some(Ok(Some(answered))) => {
                // Matched by period: a function's limits have distinct periods.
                record.sources = record
                    .limits
                    .iter()
                    .map(|&(i, _)| {
                        let period = self.subjects[i].rate.period();
                        let (_, policy) = answered
                            .iter()
                            .find(|(rate, _)| rate.period() == period)
                            .unwrap_or_else(|| {
                                panic!(
                                    "{} answered no limit of {period:?}: the checker's \
                                     subjects are out of date",
                                    function.name()
                                )
                            });
                        source(*policy)
                    })
                    .collect();
                record.outcome = outcome(true, &record.sources);
            }
            Some(Err(Refused::Denied)) => record.outcome = Outcome::Denied,
            Some(Err(Refused::Failed)) => record.outcome = Outcome::Error,
        }
    }

    /// A check's answer (`None`: cancelled) into `record`.
    fn decided<E>(&self, record: &mut Record, answer: Option<Result<Decision, E>>) {
        match answer {
            None => record.outcome = Outcome::Cancelled,
            Some(Ok(decision)) => {
                record.sources = vec![source(decision.answered_by_policy()); record.limits.len()];
                record.outcome = outcome(decision.allowed, &record.sources);
            }
            Some(Err(_)) => record.outcome = Outcome::Error,
        }
    }

    /// Two or three distinct keys by hand with costs: the `{u1}` slot's (one script) or any.
    fn pick_several(&self, rng: &mut Rng) -> Vec<(usize, u32)> {
        let mut chosen: Vec<usize> = if rng.below(2) == 0 {
            SAME_SLOT.to_vec()
        } else {
            (0..HAND).collect()
        };
        let keep = 2 + rng.below(2) as usize;
        while chosen.len() > keep {
            let drop = rng.below(chosen.len() as u64) as usize;
            chosen.remove(drop);
        }
        chosen
            .into_iter()
            .map(|i| {
                let most = self.subjects[i].rate.threshold().min(3);
                (i, 1 + rng.below(most) as u32)
            })
            .collect()
    }
}

/// A future its caller drops at a point of its progress, whatever the time: once what it
/// waited for the `waits`-th time is there (it was woken), before it goes on. A Redis call's
/// command has then run (redis-rs skips a queued command whose caller is gone, so a future
/// dropped while it waits for its first reply may have sent nothing).
struct StopAfter<F> {
    future: std::pin::Pin<Box<F>>,
    waits: usize,
}

impl<F: Future> StopAfter<F> {
    fn new(future: F, waits: usize) -> Self {
        StopAfter {
            future: Box::pin(future),
            waits,
        }
    }
}

impl<F: Future> Future for StopAfter<F> {
    type Output = Option<F::Output>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        if self.waits == 0 {
            // Woken after its last wait: dropped here, before it goes on.
            return std::task::Poll::Ready(None);
        }
        match self.future.as_mut().poll(context) {
            std::task::Poll::Ready(output) => std::task::Poll::Ready(Some(output)),
            std::task::Poll::Pending => {
                self.waits -= 1;
                std::task::Poll::Pending
            }
        }
    }
}

/// `future`'s output, or `None` when `deadline` passes first (the caller stopped waiting: the
/// future is dropped where it stands).
pub(crate) async fn within<T>(
    deadline: Option<Duration>,
    future: impl Future<Output = T>,
) -> Option<T> {
    match deadline {
        None => Some(future.await),
        Some(deadline) => tokio::time::timeout(deadline, future).await.ok(),
    }
}

fn source(by_policy: bool) -> Source {
    if by_policy {
        Source::Policy
    } else {
        Source::Store
    }
}

/// An answer's outcome: `Policy` when the policy answered for any limit.
fn outcome(allowed: bool, sources: &[Source]) -> Outcome {
    if sources.contains(&Source::Policy) {
        Outcome::Policy { allowed }
    } else if allowed {
        Outcome::Admitted
    } else {
        Outcome::Denied
    }
}

/// A look's or a reset's outcome.
fn done<T, E>(answer: Option<Result<T, E>>) -> Outcome {
    match answer {
        None => Outcome::Cancelled,
        Some(Ok(_)) => Outcome::Done,
        Some(Err(_)) => Outcome::Error,
    }
}

/// A check's answer as an outcome (the focused scenarios').
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
