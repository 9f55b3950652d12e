//! Traffic through a failover: callers that keep checking, each its own key, while a test
//! fails the store over; then what they saw, timed from the moment the failover began.
//!
//! Every caller records each check's answer and how long it took: admitted by the store,
//! answered by the failure policy, or an error (which no policy but `Closed` gives). The
//! report holds the times the policy answered (first, last), when the store answered again,
//! the slowest check, and the admissions the callers saw from the store, key by key, to be
//! compared with what the new master holds (replication is asynchronous: the admissions the
//! old master had not yet sent to its replica are lost with it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ratelimit_runtime::{Limiter, Rate};

/// What one caller saw of one check.
#[derive(Clone, Copy)]
struct Seen {
    at: Instant,
    took: Duration,
    outcome: Outcome,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Store,
    Policy,
    Error,
}

/// Callers checking until [`Traffic::stop`].
pub struct Traffic {
    stop: Arc<AtomicBool>,
    callers: Vec<tokio::task::JoinHandle<Vec<Seen>>>,
    keys: Vec<String>,
}

/// More than a replica on one machine lags behind its master (it is sent each write as the
/// master makes it; in the tests the lag is a few milliseconds).
pub const REPLICATION_LAG: Duration = Duration::from_secs(1);

/// A rate no caller reaches in a test: every answer of the store is an admission.
pub const RATE: Rate = Rate::new_const(1_000_000_000, Duration::from_secs(600));

impl Traffic {
    /// `callers` tasks on the current runtime, each checking its key `<name>:<i>` against
    /// [`RATE`] every `pause`.
    ///
    /// # Panics
    ///
    /// A caller panics when the store denies a call (no caller reaches [`RATE`]).
    #[must_use]
    pub fn start(limiter: &Limiter, name: &str, callers: usize, pause: Duration) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let keys: Vec<String> = (0..callers).map(|i| format!("{name}:{i}")).collect();
        let callers = keys
            .iter()
            .map(|key| {
                let (limiter, key, stop) = (limiter.clone(), key.clone(), Arc::clone(&stop));
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let at = Instant::now();
                        let outcome = match limiter.check(&key, RATE).await {
                            Ok(decision) if decision.answered_by_policy() => Outcome::Policy,
                            Ok(decision) => {
                                assert!(decision.allowed, "{decision:?}");
                                Outcome::Store
                            }
                            Err(_) => Outcome::Error,
                        };
                        seen.push(Seen {
                            at,
                            took: at.elapsed(),
                            outcome,
                        });
                        tokio::time::sleep(pause).await;
                    }
                    seen
                })
            })
            .collect();
        Traffic {
            stop,
            callers,
            keys,
        }
    }

    /// The callers' keys, in caller order.
    #[must_use]
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Stops the callers and reports what they saw, timed from `began` (when the failover
    /// was started).
    ///
    /// # Panics
    ///
    /// When a caller panicked.
    pub async fn stop(self, began: Instant) -> Report {
        self.stop.store(true, Ordering::Relaxed);
        let mut report = Report {
            began,
            seen: Vec::new(),
            admitted: Vec::new(),
            checks: 0,
            policy: 0,
            errors: 0,
            first_policy: None,
            last_policy: None,
            slowest: Duration::ZERO,
        };
        for caller in self.callers {
            let seen = caller.await.expect("a caller");
            report.admitted.push(
                seen.iter()
                    .filter(|seen| seen.outcome == Outcome::Store)
                    .count() as u64,
            );
            for seen in &seen {
                report.checks += 1;
                report.slowest = report.slowest.max(seen.took);
                let since = seen.at.saturating_duration_since(began);
                match seen.outcome {
                    Outcome::Policy => {
                        report.policy += 1;
                        report.first_policy =
                            Some(report.first_policy.map_or(since, |t| t.min(since)));
                        report.last_policy =
                            Some(report.last_policy.map_or(since, |t| t.max(since)));
                    }
                    Outcome::Error => report.errors += 1,
                    Outcome::Store => {}
                }
            }
            report.seen.push(seen);
        }
        report
    }
}

/// What the callers saw through a failover (times from when it began).
pub struct Report {
    began: Instant,
    /// Each caller's checks.
    seen: Vec<Vec<Seen>>,
    /// The store's admissions each caller saw, in caller order.
    pub admitted: Vec<u64>,
    /// Checks made in all.
    pub checks: u64,
    /// Checks the failure policy answered.
    pub policy: u64,
    /// Checks that returned an error.
    pub errors: u64,
    /// When the policy first answered a check.
    pub first_policy: Option<Duration>,
    /// When the policy last answered a check: from then on, every check was the store's.
    pub last_policy: Option<Duration>,
    /// The longest a check took.
    pub slowest: Duration,
}

impl Report {
    /// Against `held`, what the new master holds of each caller's key (in caller order): the
    /// admissions each caller saw from the store that it does not hold (lost with the old
    /// master), and how many it holds that no caller saw (calls that ran, answered by the
    /// policy after a timeout).
    #[must_use]
    pub fn lost_against(&self, held: &[u64]) -> (Vec<u64>, u64) {
        let lost = self
            .admitted
            .iter()
            .zip(held)
            .map(|(seen, held)| seen.saturating_sub(*held))
            .collect();
        let unseen = self
            .admitted
            .iter()
            .zip(held)
            .map(|(seen, held)| held.saturating_sub(*seen))
            .sum();
        (lost, unseen)
    }

    /// The store's admissions each caller saw of checks it began from `from` before the
    /// failover began until `to` after, in caller order.
    #[must_use]
    pub fn admitted_between(&self, from: Duration, to: Duration) -> Vec<u64> {
        let (from, to) = (
            self.began.checked_sub(from).unwrap_or(self.began),
            self.began + to,
        );
        self.seen
            .iter()
            .map(|seen| {
                seen.iter()
                    .filter(|seen| {
                        seen.outcome == Outcome::Store && seen.at >= from && seen.at <= to
                    })
                    .count() as u64
            })
            .collect()
    }

    /// How long the policy answered checks (0 when it never did).
    #[must_use]
    pub fn policy_window(&self) -> Duration {
        match (self.first_policy, self.last_policy) {
            (Some(first), Some(last)) => last - first,
            _ => Duration::ZERO,
        }
    }
}

/// Waits until the callers have been answered by the store alone for `quiet` (their latest
/// policy answer `quiet` ago), checking `limiter`'s policy count; at most `within` after
/// `began`. Returns how long after `began` that was.
///
/// # Panics
///
/// When that does not happen in time.
pub async fn wait_for_quiet(
    limiter: &Limiter,
    began: Instant,
    quiet: Duration,
    within: Duration,
) -> Duration {
    let started = began;
    let mut count = limiter.policy_answers();
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = limiter.policy_answers();
        if now != count {
            count = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "the policy still answered checks {within:?} after the failover began"
        );
    }
}
