//! The registry's entries as one source gives them: [`Limits`], a scope's [`ScopeLimits`], a
//! key's [`Override`], and the [`Mode`] of a scope or of the whole limiter.

use std::collections::HashMap;
use std::time::SystemTime;

use crate::rate::{Algorithm, Rate};

/// What a limit does with its checks: the kill switch of a scope, or of a whole limiter
/// ([`Limits::mode`], [`ScopeLimits::mode`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Checks run, and denials deny (the default).
    #[default]
    Enforce,
    /// Checks run and report what they would deny, and nobody is denied: shadow mode, as
    /// [`LimiterBuilder::shadow`](crate::LimiterBuilder::shadow) sets it for a whole limiter.
    Shadow,
    /// No check: no store call, nothing recorded; every call is admitted as an exempt one is
    /// (an empty [`Decisions`](crate::Decisions), no RateLimit fields).
    Off,
}

impl Mode {
    /// The mode's name, as a limits file spells it: `enforce`, `shadow` or `off`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Shadow => "shadow",
            Mode::Off => "off",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The mode `name` names, as [`Mode::name`] spells it.
///
/// # Errors
///
/// What the modes are, for any other name.
pub(crate) fn mode_named(name: &str) -> Result<Mode, String> {
    [Mode::Enforce, Mode::Shadow, Mode::Off]
        .into_iter()
        .find(|mode| mode.name() == name)
        .ok_or_else(|| {
            format!(
                "`{}` is not a mode: `enforce`, `shadow` or `off`",
                name.escape_debug()
            )
        })
}

/// The algorithm `name` names, as [`Algorithm::name`] spells it.
///
/// # Errors
///
/// What the algorithms are, for any other name.
pub(crate) fn algorithm_named(name: &str) -> Result<Algorithm, String> {
    [Algorithm::SlidingWindowLog, Algorithm::SlidingWindowCounter]
        .into_iter()
        .find(|algorithm| algorithm.name() == name)
        .ok_or_else(|| {
            format!(
                "`{}` is not an algorithm: `sliding_window_log` or `sliding_window_counter`",
                name.escape_debug()
            )
        })
}

/// What one key's [`Override`] does.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The key is checked against this rate instead of its scope's (a customer on a bigger
    /// plan), in the same log.
    Rate(Rate),
    /// Every call of the key is denied without a check, until the override expires (its
    /// retry-after is the time left until then, or, without an expiry, one period).
    Block,
    /// Every call of the key is admitted without a check, recording nothing.
    Exempt,
}

/// One key's entry in a scope: a rate, a block or an exemption, with an optional expiry
/// (after which the key is limited as if it had none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Override {
    pub(crate) action: Action,
    pub(crate) expires: Option<SystemTime>,
    /// The rate's algorithm is the code's (a limits file's entry that names none).
    pub(crate) code_algorithm: bool,
}

impl Override {
    /// The key is checked against `rate` instead of its scope's.
    #[must_use]
    pub const fn rate(rate: Rate) -> Override {
        Override {
            action: Action::Rate(rate),
            expires: None,
            code_algorithm: false,
        }
    }

    /// Every call of the key is denied without a check.
    #[must_use]
    pub const fn block() -> Override {
        Override {
            action: Action::Block,
            expires: None,
            code_algorithm: false,
        }
    }

    /// Every call of the key is admitted without a check.
    #[must_use]
    pub const fn exempt() -> Override {
        Override {
            action: Action::Exempt,
            expires: None,
            code_algorithm: false,
        }
    }

    /// This override, in force until `expires` (by the limiter's clock: the wall clock, or a
    /// [`ManualClock`](crate::testing::ManualClock)'s).
    #[must_use]
    pub const fn until(self, expires: SystemTime) -> Override {
        Override {
            expires: Some(expires),
            ..self
        }
    }

    /// What the override does.
    #[must_use]
    pub const fn action(&self) -> Action {
        self.action
    }

    /// When it expires, if it does.
    #[must_use]
    pub const fn expires(&self) -> Option<SystemTime> {
        self.expires
    }
}

/// One scope's entry: a rate replacing the code's, a mode, and the overrides of its keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeLimits {
    pub(crate) rate: Option<Rate>,
    /// The rate's algorithm is the code's (a limits file's entry that names none).
    pub(crate) code_algorithm: bool,
    pub(crate) mode: Option<Mode>,
    pub(crate) overrides: HashMap<String, Override>,
}

impl ScopeLimits {
    /// An entry that changes nothing yet.
    #[must_use]
    pub fn new() -> ScopeLimits {
        ScopeLimits::default()
    }

    /// The scope's keys are checked against `rate` instead of the code's (its threshold,
    /// period and algorithm; a leased rate stays leased), in the same logs (see
    /// [`guide::operating`](crate::guide::operating) for what a changed period does). Not
    /// for a limit whose rate is chosen per call (`rate = expr`): its tiers stay in code, and
    /// such an entry is ignored there (logged once).
    #[must_use]
    pub fn rate(mut self, rate: Rate) -> ScopeLimits {
        self.rate = Some(rate);
        self.code_algorithm = false;
        self
    }

    /// The scope's mode (unless the limiter's own is `shadow` or `off`, which wins).
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> ScopeLimits {
        self.mode = Some(mode);
        self
    }

    /// The override of the caller's `key`: the key as the caller gave it (the attribute's
    /// `key` argument, a layer's key, a hand check's key), before any escaping.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>, entry: Override) -> ScopeLimits {
        self.overrides.insert(key.into(), entry);
        self
    }

    /// The rate set by [`rate`](ScopeLimits::rate), if any.
    #[must_use]
    pub fn get_rate(&self) -> Option<Rate> {
        self.rate
    }

    /// The mode set by [`mode`](ScopeLimits::mode), if any.
    #[must_use]
    pub fn get_mode(&self) -> Option<Mode> {
        self.mode
    }

    /// Removes the override of `key`, if any.
    pub fn remove_key(&mut self, key: &str) -> Option<Override> {
        self.overrides.remove(key)
    }

    /// `true` without a rate, a mode or an override.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rate.is_none() && self.mode.is_none() && self.overrides.is_empty()
    }

    /// The overrides, by key.
    pub fn overrides(&self) -> impl Iterator<Item = (&str, &Override)> {
        self.overrides
            .iter()
            .map(|(key, entry)| (key.as_str(), entry))
    }
}

/// One source's entries for a limiter: its mode and its scopes' entries, each addressed by the
/// scope a denial names ([`Denied::scope`](crate::Denied::scope)). Set by
/// [`Limiter::set_limits`](crate::Limiter::set_limits); see
/// [`guide::operating`](crate::guide::operating).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub(crate) mode: Option<Mode>,
    pub(crate) scopes: HashMap<String, ScopeLimits>,
}

impl Limits {
    /// No entry: every limit as its code says.
    #[must_use]
    pub fn new() -> Limits {
        Limits::default()
    }

    /// The whole limiter's mode: `shadow` or `off` wins over every scope's; `enforce` leaves
    /// each scope its own.
    #[must_use]
    pub fn mode(mut self, mode: Mode) -> Limits {
        self.mode = Some(mode);
        self
    }

    /// The entry of `scope` (replacing any earlier one).
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>, entry: ScopeLimits) -> Limits {
        self.scopes.insert(scope.into(), entry);
        self
    }

    /// The mode set by [`mode`](Limits::mode), if any.
    #[must_use]
    pub fn get_mode(&self) -> Option<Mode> {
        self.mode
    }

    /// The entry of `scope` to change in place, if any.
    pub fn get_scope_mut(&mut self, scope: &str) -> Option<&mut ScopeLimits> {
        self.scopes.get_mut(scope)
    }

    /// Removes the entry of `scope`, if any.
    pub fn remove_scope(&mut self, scope: &str) -> Option<ScopeLimits> {
        self.scopes.remove(scope)
    }

    /// The entry of `scope`, if any.
    #[must_use]
    pub fn get_scope(&self, scope: &str) -> Option<&ScopeLimits> {
        self.scopes.get(scope)
    }

    /// The scopes' entries.
    pub fn scopes(&self) -> impl Iterator<Item = (&str, &ScopeLimits)> {
        self.scopes
            .iter()
            .map(|(scope, entry)| (scope.as_str(), entry))
    }

    /// `true` without any entry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.mode.is_none() && self.scopes.is_empty()
    }
}
