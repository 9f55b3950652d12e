//! The catalog of the code's limits: every `#[rate_limit]` of the program declares each of its
//! limits (its scope, its rate as written or that it chooses one per call, its literal cost,
//! where it is written) in a list gathered before `main` runs ([`inventory`]), whether or not
//! the function was ever called. A source's entries are judged against it when they are
//! loaded, so that a mistake a check would only meet later (a rate over a limit whose tiers
//! are in code, a threshold below a cost) is rejected with the rest of the change; and
//! [`declared_limits`] lists it, for whatever shows the program's limits to an operator.
//!
//! The catalog names scopes, not limiters: an attribute's `limiter = expr` is known only
//! when it is called, so an entry is judged against every attribute of its scope, and
//! rejected only when it contradicts them all.

use std::sync::OnceLock;

use super::limits::{Action, Limits};
use crate::rate::Rate;

/// One limit as an attribute declares it: written by the attribute's expansion, not public
/// API.
#[doc(hidden)]
pub struct Declaration {
    /// The attribute's `name`.
    pub name: Option<&'static str>,
    /// The function's path, worked out as its checks work it out.
    pub function: fn() -> &'static str,
    /// Without `name`, a stacked limit's position (from 1).
    pub position: Option<usize>,
    /// The rate as written; `None` for `rate = expr`, chosen per call.
    pub rate: Option<Rate>,
    /// The cost as written (1 without `cost`); `None` for a cost computed per call.
    pub cost: Option<u64>,
    /// Where the attribute is: its file, and the line of its function's name.
    pub file: &'static str,
    /// See `file`.
    pub line: u32,
}

inventory::collect!(Declaration);

/// A limit the program's code declares with `#[rate_limit]`, whether or not its function was
/// called yet: what [`declared_limits`] lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredLimit {
    scope: String,
    rate: Option<Rate>,
    cost: Option<u64>,
    file: &'static str,
    line: u32,
}

impl DeclaredLimit {
    /// The limit's scope, as a denial names it and as the registry addresses it: the
    /// attribute's `name`, its function's path, or `<function>#<position>` for a stacked
    /// limit without `name`.
    #[must_use]
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The rate the attribute writes (`period` and `threshold`); `None` when the limit
    /// chooses its rate per call (`rate = expr`).
    #[must_use]
    pub const fn rate(&self) -> Option<Rate> {
        self.rate
    }

    /// The cost of a call as the attribute writes it (1 without `cost`); `None` when it is
    /// computed per call (`cost = expr`).
    #[must_use]
    pub const fn cost(&self) -> Option<u64> {
        self.cost
    }

    /// The source file of the attribute's function, as `file!()` names it.
    #[must_use]
    pub const fn file(&self) -> &'static str {
        self.file
    }

    /// The line of the attribute's function's name in [`file`](DeclaredLimit::file).
    #[must_use]
    pub const fn line(&self) -> u32 {
        self.line
    }

    /// `src/api.rs:42`, for messages.
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// Every limit the program's `#[rate_limit]` attributes declare (those of functions compiled
/// into it, called or not), ordered by scope, then by where they are written; one per limit
/// of each attribute. Limits of layers and of checks by hand are made at run time and are not
/// among them.
///
/// ```
/// use ratelimit_runtime::{RateLimitError, rate_limit};
///
/// #[rate_limit(name = "signup", period = 60, threshold = 5)]
/// async fn signup() -> Result<(), RateLimitError> {
///     Ok(())
/// }
///
/// let signup = ratelimit_runtime::declared_limits()
///     .iter()
///     .find(|limit| limit.scope() == "signup")
///     .expect("declared before any call");
/// assert_eq!(signup.rate().map(|rate| rate.threshold()), Some(5));
/// assert_eq!(signup.cost(), Some(1));
/// ```
#[must_use]
pub fn declared_limits() -> &'static [DeclaredLimit] {
    static CATALOG: OnceLock<Vec<DeclaredLimit>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut limits: Vec<DeclaredLimit> = inventory::iter::<Declaration>
            .into_iter()
            .map(|declared| {
                let base = declared.name.unwrap_or_else(declared.function);
                let scope = match declared.position {
                    Some(position) => format!("{base}#{position}"),
                    None => base.to_owned(),
                };
                DeclaredLimit {
                    scope,
                    rate: declared.rate,
                    cost: declared.cost,
                    file: declared.file,
                    line: declared.line,
                }
            })
            .collect();
        limits.sort_by(|a, b| {
            (&a.scope, a.file, a.line, a.rate.map(|r| r.period())).cmp(&(
                &b.scope,
                b.file,
                b.line,
                b.rate.map(|r| r.period()),
            ))
        });
        limits
    })
}

/// The declared limits of `scope`.
fn of(scope: &str) -> impl Iterator<Item = &'static DeclaredLimit> {
    let limits = declared_limits();
    let first = limits.partition_point(|limit| limit.scope.as_str() < scope);
    limits[first..]
        .iter()
        .take_while(move |limit| limit.scope == scope)
}

/// Why a source may not give `limits`, if it may not: the first entry [`judge_scope_rate`] or
/// [`judge_override_rate`] rejects, named by its scope (never by a key).
///
/// # Errors
///
/// The reason.
pub(crate) fn judge(limits: &Limits) -> Result<(), String> {
    let scopes: std::collections::BTreeMap<&String, _> = limits.scopes.iter().collect();
    for (scope, entry) in scopes {
        let named =
            |what: &str, e: String| format!("scope \"{}\"{what}: {e}", scope.escape_debug());
        if let Some(rate) = entry.rate {
            judge_scope_rate(scope, rate).map_err(|e| named("", e))?;
        }
        for over in entry.overrides.values() {
            if let Action::Rate(rate) = over.action {
                judge_override_rate(scope, rate)
                    .map_err(|e| named(", the override of a key", e))?;
            }
        }
    }
    Ok(())
}

/// Why `scope`'s entry may not set `rate`, if it may not: every limit of the scope either
/// chooses its rate per call (its tiers stay in code) or writes a cost above the rate's
/// threshold. A scope whose limits differ (one `name` given to several attributes, perhaps of
/// different limiters) takes the rate where one of them can: the limits it contradicts
/// ignore it, or deny their calls, as a check does without the catalog.
///
/// # Errors
///
/// The reason, naming each attribute's file and line.
pub(crate) fn judge_scope_rate(scope: &str, rate: Rate) -> Result<(), String> {
    let threshold = rate.threshold();
    judge_each(scope, |limit| match limit.rate {
        None => Some(format!(
            "its limit chooses its rate per call (`rate = expr`, {}), whose tiers stay in code: \
             set only its `mode`, or override keys",
            limit.at()
        )),
        Some(_) => below_cost(limit, threshold),
    })
}

/// Why a key's override in `scope` may not set `rate`, if it may not: every limit of the
/// scope writes a cost above its threshold, so that no call of the key could be admitted.
///
/// # Errors
///
/// The reason, naming each attribute's file and line.
pub(crate) fn judge_override_rate(scope: &str, rate: Rate) -> Result<(), String> {
    let threshold = rate.threshold();
    judge_each(scope, |limit| below_cost(limit, threshold))
}

/// What a threshold below `limit`'s written cost contradicts, if it is below.
fn below_cost(limit: &DeclaredLimit, threshold: u64) -> Option<String> {
    let cost = limit.cost.filter(|&cost| cost > threshold)?;
    Some(format!(
        "threshold {threshold} is below the cost {cost} a call of its limit takes ({}): no call \
         could be admitted; give a threshold of at least the cost",
        limit.at()
    ))
}

/// `Err` with each of `scope`'s declared limits' contradiction when there are some and
/// `contradiction` finds one in every one of them.
fn judge_each(
    scope: &str,
    contradiction: impl Fn(&DeclaredLimit) -> Option<String>,
) -> Result<(), String> {
    let mut reasons: Vec<String> = Vec::new();
    for limit in of(scope) {
        match contradiction(limit) {
            Some(reason) if !reasons.contains(&reason) => reasons.push(reason),
            Some(_) => {}
            None => return Ok(()),
        }
    }
    match reasons.is_empty() {
        true => Ok(()),
        false => Err(reasons.join("; and ")),
    }
}

/// The declared scope `scope` most likely misspells, when it names none: a scope of the
/// catalog within a typo's distance (a third of its length, at least 1). `None` for a declared
/// scope, a layer's (`<scope>@<rate>`), or one near none (a check by hand's, most likely).
pub(crate) fn misspelt(scope: &str) -> Option<&'static str> {
    if scope.contains('@') || of(scope).next().is_some() {
        return None;
    }
    let length = scope.chars().count();
    declared_limits()
        .iter()
        .map(|limit| (limit.scope.as_str(), limit.scope.chars().count()))
        // A typo's distance, and no more than that apart in length (which no distance within
        // it could bridge), before the distance is computed.
        .map(|(declared, declared_length)| {
            (declared, (declared_length / 3).max(1), declared_length)
        })
        .filter(|&(_, most, declared_length)| declared_length.abs_diff(length) <= most)
        .map(|(declared, most, _)| (declared, most, strsim::levenshtein(scope, declared)))
        .filter(|&(_, most, distance)| distance <= most)
        .min_by_key(|&(_, _, distance)| distance)
        .map(|(declared, _, _)| declared)
}
