//! The registry: the limits operators change while the process runs, beside the check path
//! and read by it through one call, [`Registry::resolve`].
//!
//! - `limits.rs`: the entries as a source gives them ([`Limits`], [`ScopeLimits`],
//!   [`Override`], [`Mode`]);
//! - `file.rs` (feature `limits-file`): the limits file, parsed and watched.
//!
//! Each source (a limits file, [`Source::File`]; the API, [`Source::Api`]) replaces its own entries
//! whole; the registry merges them into one snapshot, which every check reads without a lock
//! ([`arc_swap`]) and which a change replaces whole, so that a check sees one version of the
//! limits, never half of a change. Precedence: the most specific entry wins (a key's
//! override, then its scope's entry, then the code), and between sources of one specificity
//! the later [`Source`]. The limiter's own mode, when `shadow` or `off`, wins over every
//! scope's.
//!
//! The registry never moves a log: a check's keys come from the code's rate, whatever rate it
//! is checked against, so a new threshold reuses the log (see `guide::operating` for a changed
//! period).

#[cfg(feature = "limits-file")]
pub(crate) mod file;
mod limits;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;

pub use self::limits::{Action, Limits, Mode, Override, ScopeLimits};
use crate::rate::Rate;

/// Where a source's entries come from, the later winning over the earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The limits file (feature `limits-file`).
    #[cfg_attr(not(feature = "limits-file"), allow(dead_code))]
    File,
    /// [`Limiter::set_limits`](crate::Limiter::set_limits) and
    /// [`Limiter::set_mode`](crate::Limiter::set_mode).
    Api,
}

impl Source {
    /// Every source, the earliest (the weakest) first.
    const ALL: [Source; 2] = [Source::File, Source::Api];

    /// The source's name in logs and metrics.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Api => "api",
        }
    }
}

/// What a check does, once the registry was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// A check against `rate` (the code's, or the registry's), in shadow mode when `shadow`.
    Check { rate: Rate, shadow: bool },
    /// No check: the scope or the limiter is off, or the key exempt. Admitted, recording
    /// nothing.
    Exempt,
    /// The key is blocked: denied without a check, for `retry_after` (under shadow mode,
    /// admitted as a call that would have been denied).
    Blocked {
        rate: Rate,
        retry_after: Duration,
        shadow: bool,
    },
}

/// One scope's entries, merged from every source.
#[derive(Debug, Default)]
struct Entry {
    rate: Option<Entered>,
    mode: Option<Mode>,
    /// By the caller's key; expiries in µs since the Unix epoch.
    overrides: HashMap<Box<str>, (Action, Option<u64>, bool)>,
}

/// A rate an entry sets, and whether its algorithm is the code's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entered {
    rate: Rate,
    code_algorithm: bool,
}

impl Entered {
    /// The rate a check of the code's `code` rate takes: this one, with the code's algorithm
    /// if it names none, leased if the code's is (a lease is how the code reaches the store,
    /// not a limit).
    #[inline]
    fn over(self, code: Rate) -> Rate {
        let rate = if self.code_algorithm {
            self.rate.with_algorithm(code.algorithm())
        } else {
            self.rate
        };
        if code.is_leased() {
            rate.leased()
        } else {
            rate
        }
    }
}

/// Every scope's merged entries: what checks read.
#[derive(Debug, Default)]
struct Snapshot {
    scopes: HashMap<Box<str>, Entry>,
}

/// A limiter's registry: its sources' entries, and their merge.
pub(crate) struct Registry {
    /// The mode the limiter was built with (`shadow` for a shadow limiter).
    built: Mode,
    /// The limiter's mode in force: the latest source's, else `built`. Read by every check.
    mode: AtomicU8,
    /// Whether any scope has an entry: without, a check reads nothing more.
    any_scope: AtomicBool,
    snapshot: ArcSwap<Snapshot>,
    /// Each source's entries, in [`Source::ALL`]'s order; held while a change is applied, so
    /// that changes apply one at a time.
    sources: Mutex<Vec<Limits>>,
    /// The scopes whose rate entry was ignored over a rate chosen per call (logged once).
    ignored: Mutex<Vec<Box<str>>>,
    /// What watches a source (the limits file's directory), dropped with the registry.
    #[cfg_attr(not(feature = "limits-file"), allow(dead_code))]
    watchers: Mutex<Vec<Box<dyn Send>>>,
    /// The changes a source gave that were rejected.
    rejected: AtomicU64,
}

impl Registry {
    /// A registry without entries, for a limiter built in `mode`.
    pub(crate) fn new(mode: Mode) -> Registry {
        Registry {
            built: mode,
            mode: AtomicU8::new(mode as u8),
            any_scope: AtomicBool::new(false),
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            sources: Mutex::new(vec![Limits::default(); Source::ALL.len()]),
            ignored: Mutex::new(Vec::new()),
            watchers: Mutex::new(Vec::new()),
            rejected: AtomicU64::new(0),
        }
    }

    /// Applies the limits file at `path` (feature `limits-file`), and each change of it from
    /// then on (a rejected one counted, the limits in force kept), until the registry is
    /// dropped.
    ///
    /// # Errors
    ///
    /// The file's mistake, or why it cannot be read or watched.
    #[cfg(feature = "limits-file")]
    pub(crate) fn watch_file(self: &Arc<Self>, path: std::path::PathBuf) -> Result<(), String> {
        let registry = Arc::downgrade(self);
        let (limits, watcher) = file::watch(path, move |change| {
            let Some(registry) = registry.upgrade() else {
                return false;
            };
            let applied = change.is_ok();
            match change {
                Ok(limits) => registry.set(Source::File, limits),
                Err(_) => {
                    registry.rejected.fetch_add(1, Ordering::Relaxed);
                }
            }
            crate::telemetry::registry_load(Source::File.name(), applied);
            true
        })?;
        self.set(Source::File, limits);
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watcher);
        Ok(())
    }

    /// The changes a source gave that were rejected.
    pub(crate) fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// The limiter's mode in force.
    #[inline]
    pub(crate) fn mode(&self) -> Mode {
        match self.mode.load(Ordering::Acquire) {
            0 => Mode::Enforce,
            1 => Mode::Shadow,
            _ => Mode::Off,
        }
    }

    /// What a check of `scope`'s limit of `rate` (`per_call`: chosen per call, `rate = expr`)
    /// does, for the caller's key that `key` gives (asked only when the scope has overrides;
    /// `None`: a limit without a key), at `now` (µs since the Unix epoch, asked only for an
    /// override that expires). A check of several limits asks one [`View`] of them all.
    #[inline]
    pub(crate) fn resolve<'k>(
        &self,
        scope: &str,
        rate: Rate,
        per_call: bool,
        key: impl FnOnce() -> Option<std::borrow::Cow<'k, str>>,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        self.view().resolve(scope, rate, per_call, key, now)
    }

    /// The limits in force now, one version of them: the mode is read first (`Acquire`,
    /// stored last by [`set`](Registry::set)), so that a view of a change's mode sees its
    /// scopes too.
    #[inline]
    pub(crate) fn view(&self) -> View<'_> {
        let limiter = match self.mode.load(Ordering::Acquire) {
            0 => Mode::Enforce,
            1 => Mode::Shadow,
            _ => Mode::Off,
        };
        let snapshot = (limiter != Mode::Off && self.any_scope.load(Ordering::Acquire))
            .then(|| self.snapshot.load());
        View {
            registry: self,
            limiter,
            snapshot,
        }
    }
    /// Logs once per scope that its rate entry is ignored.
    #[cold]
    fn ignored_over_per_call(&self, scope: &str) {
        let mut ignored = self.ignored.lock().unwrap_or_else(PoisonError::into_inner);
        if !ignored.iter().any(|seen| **seen == *scope) {
            ignored.push(scope.into());
            tracing::warn!(
                scope,
                "the registry's rate for this scope is ignored: its limit chooses its rate per call (`rate = expr`), whose tiers stay in code; set only its mode, or override keys"
            );
        }
    }

    /// `source`'s entries.
    pub(crate) fn get(&self, source: Source) -> Limits {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources[source as usize].clone()
    }

    /// Replaces `source`'s entries by `limits`, logging and counting what changed; the
    /// change is in force for every check that starts once this returns.
    pub(crate) fn set(&self, source: Source, limits: Limits) {
        self.update(source, |entries| *entries = limits);
    }

    /// Changes `source`'s entries by `change`, as [`set`](Registry::set) does, one change at
    /// a time (no concurrent change is lost between reading the entries and writing them).
    pub(crate) fn update(&self, source: Source, change: impl FnOnce(&mut Limits)) {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let old_mode = self.mode();
        let old = self.snapshot.load_full();
        change(&mut sources[source as usize]);
        let (mode, snapshot) = merge(self.built, &sources);
        report(source, old_mode, mode, &old, &snapshot);
        let any_scope = !snapshot.scopes.is_empty();
        // The mode last: a check that reads it (`Acquire`) sees the rest of this change.
        self.snapshot.store(Arc::new(snapshot));
        self.any_scope.store(any_scope, Ordering::Release);
        self.mode.store(mode as u8, Ordering::Release);
    }
}

/// One version of the limits in force ([`Registry::view`]), which every limit of one check is
/// resolved against.
pub(crate) struct View<'r> {
    registry: &'r Registry,
    limiter: Mode,
    /// `None`: no scope has an entry (or the limiter is off).
    snapshot: Option<arc_swap::Guard<Arc<Snapshot>>>,
}

impl View<'_> {
    /// What a check of `scope`'s limit does (see [`Registry::resolve`]).
    #[inline]
    pub(crate) fn resolve<'k>(
        &self,
        scope: &str,
        rate: Rate,
        per_call: bool,
        key: impl FnOnce() -> Option<std::borrow::Cow<'k, str>>,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        let limiter = self.limiter;
        if limiter == Mode::Off {
            return Resolved::Exempt;
        }
        match &self.snapshot {
            None => Resolved::Check {
                rate,
                shadow: limiter == Mode::Shadow,
            },
            Some(snapshot) => self.resolve_entry(snapshot, scope, rate, per_call, key, now),
        }
    }

    #[inline(never)]
    fn resolve_entry<'k>(
        &self,
        snapshot: &Snapshot,
        scope: &str,
        rate: Rate,
        per_call: bool,
        key: impl FnOnce() -> Option<std::borrow::Cow<'k, str>>,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        let limiter = self.limiter;
        let Some(entry) = snapshot.scopes.get(scope) else {
            let shadow = limiter == Mode::Shadow;
            return Resolved::Check { rate, shadow };
        };
        let mode = match limiter {
            Mode::Enforce => entry.mode.unwrap_or(Mode::Enforce),
            limiter => limiter,
        };
        let shadow = match mode {
            Mode::Off => return Resolved::Exempt,
            Mode::Shadow => true,
            Mode::Enforce => false,
        };
        let code = rate;
        let rate = match entry.rate {
            Some(_) if per_call => {
                self.registry.ignored_over_per_call(scope);
                rate
            }
            Some(entered) => entered.over(code),
            None => rate,
        };
        let found = if entry.overrides.is_empty() {
            None
        } else {
            key().and_then(|key| entry.overrides.get(&*key).copied())
        };
        let Some((action, expires, code_algorithm)) = found else {
            return Resolved::Check { rate, shadow };
        };
        let left = match expires {
            None => None,
            Some(expires) => match expires.checked_sub(now()) {
                Some(left) if left > 0 => Some(Duration::from_micros(left)),
                // Expired: as if it were not there.
                _ => return Resolved::Check { rate, shadow },
            },
        };
        match action {
            Action::Exempt => Resolved::Exempt,
            Action::Rate(rate) => Resolved::Check {
                rate: Entered {
                    rate,
                    code_algorithm,
                }
                .over(code),
                shadow,
            },
            Action::Block => Resolved::Blocked {
                rate,
                retry_after: left.unwrap_or_else(|| rate.period()),
                shadow,
            },
        }
    }
}

/// The limiter's mode and the scopes' entries in force, from every source's (`sources`, the
/// weakest first) over the limiter's `built` mode.
fn merge(built: Mode, sources: &[Limits]) -> (Mode, Snapshot) {
    let mut mode = built;
    let mut snapshot = Snapshot::default();
    for limits in sources {
        mode = limits.mode.unwrap_or(mode);
        for (scope, given) in &limits.scopes {
            let entry = snapshot.scopes.entry(scope.as_str().into()).or_default();
            let entered = given.rate.map(|rate| Entered {
                rate,
                code_algorithm: given.code_algorithm,
            });
            entry.rate = entered.or(entry.rate);
            entry.mode = given.mode.or(entry.mode);
            for (key, over) in &given.overrides {
                let expires = over.expires.map(crate::clock::micros_saturating);
                entry.overrides.insert(
                    key.as_str().into(),
                    (over.action, expires, over.code_algorithm),
                );
            }
        }
    }
    (mode, snapshot)
}

/// Logs and counts what a change of `source` changed: the limiter's mode (`old_mode` to
/// `mode`), and each scope whose entry it changed (its rate, its mode, the number of its
/// overrides; their keys only at debug level).
fn report(source: Source, old_mode: Mode, mode: Mode, old: &Snapshot, new: &Snapshot) {
    let source = source.name();
    if old_mode != mode {
        tracing::info!(source, from = %old_mode, to = %mode, "the rate limiter's mode changed");
        crate::telemetry::mode_changed(None);
    }
    let empty = Entry::default();
    let scopes: std::collections::BTreeSet<&str> = old
        .scopes
        .keys()
        .chain(new.scopes.keys())
        .map(|scope| &**scope)
        .collect();
    for scope in scopes {
        let before = old.scopes.get(scope).unwrap_or(&empty);
        let after = new.scopes.get(scope).unwrap_or(&empty);
        let (from, to) = (
            before.mode.unwrap_or_default(),
            after.mode.unwrap_or_default(),
        );
        if from != to {
            tracing::info!(source, scope, %from, %to, "a rate limit's mode changed");
            crate::telemetry::mode_changed(Some(scope));
        }
        if before.rate != after.rate {
            let rate = |entered: Option<Entered>| entered.map(|entered| entered.rate);
            tracing::info!(source, scope, from = ?rate(before.rate), to = ?rate(after.rate), "a rate limit's rate changed (`None`: the code's)");
        }
        if before.overrides != after.overrides {
            tracing::info!(
                source,
                scope,
                from = before.overrides.len(),
                to = after.overrides.len(),
                "a rate limit's key overrides changed"
            );
            tracing::debug!(source, scope, overrides = ?after.overrides, "the key overrides now in force");
        }
        if before.rate != after.rate || before.overrides != after.overrides {
            crate::telemetry::registry_changed(scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use std::time::SystemTime;

    const CODE: Rate = Rate::new_const(5, Duration::from_secs(60));
    const MORE: Rate = Rate::new_const(50, Duration::from_secs(60));
    const VIP: Rate = Rate::new_const(500, Duration::from_secs(60));

    fn resolve(registry: &Registry, scope: &str, key: Option<&str>, now: u64) -> Resolved {
        registry.resolve(scope, CODE, false, || key.map(Cow::Borrowed), || now)
    }

    fn at(us: u64) -> SystemTime {
        crate::clock::at_micros(us)
    }

    /// The precedence table: code, scope entry, override (rate, block, exempt, expired),
    /// scope mode, limiter mode.
    #[test]
    fn the_most_specific_entry_wins_and_the_limiters_mode_beats_all() {
        let registry = Registry::new(Mode::Enforce);
        let enforce = |rate| Resolved::Check {
            rate,
            shadow: false,
        };
        assert_eq!(resolve(&registry, "login", Some("bob"), 0), enforce(CODE));
        registry.set(
            Source::Api,
            Limits::new().scope(
                "login",
                ScopeLimits::new()
                    .rate(MORE)
                    .key("vip", Override::rate(VIP))
                    .key("evil", Override::block().until(at(2_000_000)))
                    .key("ops", Override::exempt())
                    .key("trial", Override::rate(VIP).until(at(1_000_000))),
            ),
        );
        assert_eq!(resolve(&registry, "login", Some("bob"), 0), enforce(MORE));
        assert_eq!(resolve(&registry, "login", None, 0), enforce(MORE));
        assert_eq!(resolve(&registry, "search", Some("vip"), 0), enforce(CODE));
        assert_eq!(resolve(&registry, "login", Some("vip"), 0), enforce(VIP));
        assert_eq!(
            resolve(&registry, "login", Some("ops"), 0),
            Resolved::Exempt
        );
        assert_eq!(
            resolve(&registry, "login", Some("evil"), 500_000),
            Resolved::Blocked {
                rate: MORE,
                retry_after: Duration::from_micros(1_500_000),
                shadow: false
            }
        );
        assert_eq!(
            resolve(&registry, "login", Some("evil"), 2_000_000),
            enforce(MORE)
        );
        assert_eq!(
            resolve(&registry, "login", Some("trial"), 999_999),
            enforce(VIP)
        );
        assert_eq!(
            resolve(&registry, "login", Some("trial"), 1_000_000),
            enforce(MORE)
        );
        // A scope's mode applies to its overrides too; the limiter's beats it.
        let mut limits = registry.get(Source::Api);
        limits.scopes.get_mut("login").unwrap().mode = Some(Mode::Shadow);
        registry.set(Source::Api, limits.clone());
        let shadow = |rate| Resolved::Check { rate, shadow: true };
        assert_eq!(resolve(&registry, "login", Some("vip"), 0), shadow(VIP));
        assert_eq!(resolve(&registry, "search", None, 0), enforce(CODE));
        registry.set(Source::Api, limits.clone().mode(Mode::Off));
        assert_eq!(resolve(&registry, "search", None, 0), Resolved::Exempt);
        registry.set(Source::Api, limits.clone().mode(Mode::Enforce));
        assert_eq!(resolve(&registry, "login", None, 0), shadow(MORE));
        limits.scopes.get_mut("login").unwrap().mode = Some(Mode::Off);
        registry.set(Source::Api, limits.clone().mode(Mode::Shadow));
        assert_eq!(resolve(&registry, "login", None, 0), shadow(MORE));
        assert_eq!(resolve(&registry, "search", None, 0), shadow(CODE));
        registry.set(Source::Api, limits);
        assert_eq!(
            resolve(&registry, "login", Some("vip"), 0),
            Resolved::Exempt
        );
        // Back to the code.
        registry.set(Source::Api, Limits::new());
        assert_eq!(resolve(&registry, "login", Some("vip"), 0), enforce(CODE));
        assert_eq!(registry.mode(), Mode::Enforce);
    }

    #[test]
    fn a_shadow_limiter_is_shadow_until_a_source_says_otherwise() {
        let registry = Registry::new(Mode::Shadow);
        assert_eq!(
            resolve(&registry, "login", None, 0),
            Resolved::Check {
                rate: CODE,
                shadow: true
            }
        );
        registry.set(Source::Api, Limits::new().mode(Mode::Enforce));
        assert_eq!(registry.mode(), Mode::Enforce);
        registry.set(Source::Api, Limits::new());
        assert_eq!(registry.mode(), Mode::Shadow);
    }

    #[test]
    fn a_rate_over_a_rate_chosen_per_call_is_ignored_and_its_mode_kept() {
        let registry = Registry::new(Mode::Enforce);
        registry.set(
            Source::Api,
            Limits::new().scope("tiers", ScopeLimits::new().rate(MORE).mode(Mode::Shadow)),
        );
        let resolved = registry.resolve("tiers", CODE, true, || None, || 0);
        assert_eq!(
            resolved,
            Resolved::Check {
                rate: CODE,
                shadow: true
            }
        );
    }

    #[test]
    fn the_key_is_asked_only_of_a_scope_with_overrides() {
        let registry = Registry::new(Mode::Enforce);
        registry.set(
            Source::Api,
            Limits::new().scope("a", ScopeLimits::new().rate(MORE)),
        );
        let asked = |scope| {
            let mut asked = false;
            registry.resolve(
                scope,
                CODE,
                false,
                || {
                    asked = true;
                    None
                },
                || 0,
            );
            asked
        };
        assert!(!asked("a"));
        assert!(!asked("b"));
    }
}
