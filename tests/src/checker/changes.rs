//! The limits shared through Redis, changed during the run (issue 37): a changer task writes a
//! change of one registered subject's entry through a random limiter (a scope's rate lowered
//! or raised, the scope removed, a key's override set, with or without an expiry, or removed,
//! the scope's switch flipped to `shadow` or `off` and back), then proves every limiter has it
//! in force (a `refresh` of each that began after the write returned), and reads back what
//! Redis holds. Each change is a [`Version`]: when its write began, when every limiter was
//! seen to have it, and the states it may have left.
//!
//! The bound the judges apply ([`Timeline::possible`]): a version may be in force on some
//! instance from when its write began until the next version is in force on every one, and
//! [`LATE`] after that (a check resolved before an instance applied the change may reach the
//! store that much later: a stalled connection, a lease's renewal in flight); a restart of the
//! single server (which forgets the shared limits) makes the code's limits possible from then
//! until the next version is in force everywhere. A window may admit at most the highest
//! threshold any version possible during it gives its subject; a window during which one
//! version alone is possible is exact under that version's threshold.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use ratelimit_runtime::{Action, Limiter, Limits, Mode, Override, Rate, ScopeLimits};

use super::ops::Subject;
use crate::accuracy::Rng;

/// How long after every instance applied a change a check resolved under the limits before
/// it may still reach the store: the longest fault the checker holds (2.5 s), two timeouts
/// (a call, and a lease's renewal or a handed-off call behind it), and slack.
pub(crate) const LATE: Duration = Duration::from_millis(5_000);

/// How far apart the records' clock and the servers' may read, µs, each way (an override's
/// expiry is read on each instance's clock).
const SKEW: u64 = 2_000;

/// How long the changer tries a step (a write, a read, a refresh) before it gives it up: the
/// version then stays possible to the end of the run.
const STEP_DEADLINE: Duration = Duration::from_secs(20);

/// How long the changer watches the limiters' threads apply a change before it refreshes
/// them: the longest fault the checker holds, a read's timeout and two reads' intervals.
const THREADS_DEADLINE: Duration = Duration::from_millis(4_500);

/// One change of the shared limits.
#[derive(Clone, Debug)]
pub(crate) struct Version {
    /// What it changed, as the report counts it.
    pub(crate) kind: &'static str,
    /// When its write began, since the run's epoch.
    pub(crate) began: Duration,
    /// When every limiter was seen to have it in force (`None`: never seen).
    pub(crate) applied: Option<Duration>,
    /// The states it may have left in Redis: the one it meant, and the one read back.
    pub(crate) states: Vec<Limits>,
}

/// Every version of a run, the first the empty registry the run starts with.
#[derive(Clone, Debug)]
pub(crate) struct Timeline {
    pub(crate) versions: Vec<Version>,
    /// Server µs of the run's epoch.
    pub(crate) epoch_micros: u64,
}

impl Timeline {
    /// A run's timeline before any change.
    pub(crate) fn new(epoch_micros: u64) -> Timeline {
        Timeline {
            versions: vec![Version {
                kind: "none",
                began: Duration::ZERO,
                applied: Some(Duration::ZERO),
                states: vec![Limits::new()],
            }],
            epoch_micros,
        }
    }

    fn micros(&self, since_epoch: Duration) -> u64 {
        self.epoch_micros + since_epoch.as_micros() as u64
    }

    /// The thresholds `subject` may have been checked against by a check that reached the
    /// store in `[from, to]` (server µs): those of every version possible then, and the code's
    /// after a restart in `wipes`; none where each says no check is made (the scope off, the
    /// key blocked or exempt). A subject no change addresses: its code's threshold.
    pub(crate) fn possible(
        &self,
        subject: &Subject,
        from: u64,
        to: u64,
        wipes: &[u64],
    ) -> BTreeSet<u64> {
        let mut thresholds = BTreeSet::new();
        let Some(address) = subject.address else {
            thresholds.insert(subject.rate.threshold());
            return thresholds;
        };
        let late = LATE.as_micros() as u64;
        // When the first version that began after `at` was in force everywhere, and LATE.
        let superseded = |at: u64| -> u64 {
            self.versions
                .iter()
                .find(|version| self.micros(version.began) > at)
                .and_then(|version| version.applied)
                .map_or(u64::MAX, |applied| self.micros(applied) + late)
        };
        for (k, version) in self.versions.iter().enumerate() {
            let start = self.micros(version.began);
            let end = self.versions.get(k + 1).map_or(u64::MAX, |next| {
                next.applied
                    .map_or(u64::MAX, |applied| self.micros(applied) + late)
            });
            if start > to || end < from {
                continue;
            }
            for state in &version.states {
                in_force(
                    state,
                    subject,
                    address,
                    from.max(start),
                    to.min(end),
                    &mut thresholds,
                );
            }
        }
        for &wipe in wipes {
            if wipe <= to && superseded(wipe) >= from {
                in_force(
                    &Limits::new(),
                    subject,
                    address,
                    from.max(wipe),
                    to,
                    &mut thresholds,
                );
            }
        }
        thresholds
    }
}

/// The thresholds `state` gives `subject` (addressed by `address`) at some time of
/// `[from, to]` (server µs): an override that expires within it, both its own and the scope's.
fn in_force(
    state: &Limits,
    subject: &Subject,
    address: &str,
    from: u64,
    to: u64,
    thresholds: &mut BTreeSet<u64>,
) {
    let code = subject.rate.threshold();
    let Some(entry) = state.get_scope(address) else {
        thresholds.insert(code);
        return;
    };
    if entry.get_mode() == Some(Mode::Off) {
        return;
    }
    let scope = entry.get_rate().map_or(code, |rate| rate.threshold());
    let key = subject.override_key();
    let over = entry
        .overrides()
        .find(|(overridden, _)| *overridden == key)
        .map(|(_, over)| *over);
    let Some(over) = over else {
        thresholds.insert(scope);
        return;
    };
    // An override's own rate until it expires, and LATE after (a check resolved before its
    // expiry reaches the store that much later at most).
    let expires = over.expires().map(micros);
    if expires.is_none_or(|expires| expires + SKEW + LATE.as_micros() as u64 > from)
        && let Action::Rate(rate) = over.action()
    {
        thresholds.insert(rate.threshold());
    }
    if expires.is_some_and(|expires| expires < to + SKEW) {
        thresholds.insert(scope);
    }
}

fn micros(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_micros() as u64)
}

/// The changer: its limiters (each follows the shared limits), the subjects it addresses, and
/// the versions it made.
pub(crate) struct Changer {
    pub(crate) limiters: Vec<Limiter>,
    /// The subjects with an address, and their indices.
    pub(crate) subjects: Vec<Subject>,
    pub(crate) epoch: Instant,
    pub(crate) timeline: Mutex<Timeline>,
    /// The changes whose application the threads did not show in time (refreshed).
    pub(crate) refreshed: Mutex<u64>,
}

/// `step` tried until it succeeds, or `None` after [`STEP_DEADLINE`].
async fn until_done<T, E, F: Future<Output = Result<T, E>>>(
    mut step: impl FnMut() -> F,
) -> Option<T> {
    let deadline = Instant::now() + STEP_DEADLINE;
    loop {
        if let Ok(done) = step().await {
            return Some(done);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Changer {
    /// Changes the shared limits from `seed`'s draws until `until`: now and then in a burst
    /// (the next change before the last is in force everywhere), mostly a few seconds apart
    /// (windows that start once a change is in force everywhere are judged exact).
    pub(crate) async fn run(self: Arc<Self>, seed: u64, until: Instant) {
        let mut rng = Rng::new(seed);
        loop {
            let pause = if rng.below(4) == 0 {
                100 + rng.below(400)
            } else {
                1_500 + rng.below(4_500)
            };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            if Instant::now() >= until {
                return;
            }
            self.change(&mut rng).await;
        }
    }

    /// One change, drawn from `rng`, made and followed to every limiter.
    async fn change(&self, rng: &mut Rng) {
        let subject = &self.subjects[rng.below(self.subjects.len() as u64) as usize];
        let address = subject.address.expect("a registered subject");
        let key = subject.override_key();
        let began = self.epoch.elapsed();
        let by = &self.limiters[rng.below(self.limiters.len() as u64) as usize];
        let Some(base) = until_done(|| async { by.shared_limits().entries().await }).await else {
            // Nothing written.
            return;
        };
        let entry = base.get_scope(address).cloned().unwrap_or_default();
        let code = subject.rate;
        // A rate of the subject's period and algorithm (a change of period is not judged: the
        // guide's "What a change does to the logs").
        let rate_of = |threshold: u64| {
            Rate::new(threshold, code.period())
                .expect("a rate")
                .with_algorithm(code.algorithm())
        };
        // Leased rates are kept large enough to lease (a sixteenth of at least 2).
        let least = if code.is_leased() { 32 } else { 1 };
        let threshold = least + rng.below(2 * code.threshold() - least + 1);
        let mut intended = base.clone();
        let (kind, written) = match rng.below(12) {
            0..4 => {
                let mut changed = ScopeLimits::new().rate(rate_of(threshold));
                if let Some(mode) = entry.get_mode() {
                    changed = changed.mode(mode);
                }
                intended = intended.scope(address, entry.clone().rate(rate_of(threshold)));
                let shared = by.shared_limits();
                (
                    "shared limits changed: a scope's rate",
                    until_done(|| shared.set_scope(address, changed.clone())).await,
                )
            }
            4 => {
                intended.remove_scope(address);
                let shared = by.shared_limits();
                (
                    "shared limits changed: a scope removed",
                    until_done(|| shared.remove_scope(address)).await,
                )
            }
            5..8 => {
                let over = match rng.below(3) {
                    0 => Override::rate(rate_of(threshold)),
                    1 => Override::block(),
                    _ => Override::exempt(),
                };
                let over = if rng.below(2) == 0 {
                    over.until(SystemTime::now() + Duration::from_millis(300 + rng.below(2_000)))
                } else {
                    over
                };
                intended = intended.scope(address, entry.clone().key(key, over));
                let shared = by.shared_limits();
                (
                    "shared limits changed: a key's override",
                    until_done(|| shared.set_override(address, key, over)).await,
                )
            }
            8..10 => {
                let mut without = entry.clone();
                without.remove_key(key);
                intended = with_scope(intended, address, without);
                let shared = by.shared_limits();
                (
                    "shared limits changed: a key's override removed",
                    until_done(|| shared.remove_override(address, key)).await,
                )
            }
            _ => {
                // The scope's switch: `shadow` or `off`, or back to none.
                let mode = match (entry.get_mode(), rng.below(2)) {
                    (Some(_), _) => None,
                    (None, 0) => Some(Mode::Shadow),
                    (None, _) => Some(Mode::Off),
                };
                let mut changed = ScopeLimits::new();
                if let Some(rate) = entry.get_rate() {
                    changed = changed.rate(rate);
                }
                if let Some(mode) = mode {
                    changed = changed.mode(mode);
                }
                let mut whole = changed.clone();
                for (overridden, over) in entry.overrides() {
                    whole = whole.key(overridden, *over);
                }
                intended = with_scope(intended, address, whole);
                let shared = by.shared_limits();
                (
                    "shared limits changed: a scope's switch",
                    until_done(|| shared.set_scope(address, changed.clone())).await,
                )
            }
        };
        // What Redis holds now, and when every limiter's own thread has it in force (each
        // limiter's `in_force`, watched without a refresh: the thread's reads are what is
        // judged); a refresh of each after THREADS_DEADLINE. A write that never returned may
        // have been made, and is never seen everywhere.
        let mut states = vec![intended];
        let confirmed = match written {
            Some(()) => until_done(|| async { by.shared_limits().entries().await }).await,
            None => None,
        };
        let applied = match &confirmed {
            Some(confirmed) => self.seen_everywhere(confirmed).await,
            None => None,
        };
        if let Some(confirmed) = confirmed
            && confirmed != states[0]
        {
            states.push(confirmed);
        }
        self.timeline
            .lock()
            .expect("the timeline")
            .versions
            .push(Version {
                kind,
                began,
                applied,
                states,
            });
    }
}

impl Changer {
    /// When every limiter had `confirmed` in force: seen through their threads' reads, or,
    /// past [`THREADS_DEADLINE`] (a fault that holds their reads), through a refresh of each
    /// (counted); `None` when neither shows it.
    async fn seen_everywhere(&self, confirmed: &Limits) -> Option<Duration> {
        let deadline = Instant::now() + THREADS_DEADLINE;
        loop {
            if self
                .limiters
                .iter()
                .all(|limiter| limiter.shared_limits().in_force() == *confirmed)
            {
                return Some(self.epoch.elapsed());
            }
            if Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        *self.refreshed.lock().expect("the count") += 1;
        for limiter in &self.limiters {
            let shared = limiter.shared_limits();
            until_done(|| shared.refresh()).await?;
        }
        self.limiters
            .iter()
            .all(|limiter| limiter.shared_limits().in_force() == *confirmed)
            .then(|| self.epoch.elapsed())
    }
}

/// `limits` with `scope`'s entry replaced by `entry`, or removed when it holds nothing.
fn with_scope(mut limits: Limits, scope: &str, entry: ScopeLimits) -> Limits {
    if entry.is_empty() {
        limits.remove_scope(scope);
        limits
    } else {
        limits.scope(scope, entry)
    }
}
