//! The grammar of `#[rate_limit(...)]`: `name = value` arguments, each at most once, each
//! validated where it is written so that an error points at the offending token.
//!
//! ```text
//! args      := arg ("," arg)* ","?
//! arg       := "period" "=" (INT | STR)     whole seconds, or "<integer><unit>", unit ms|s|m|h|d
//!            | "threshold" "=" INT          1..=4294967295
//!            | "algorithm" "=" STR          "sliding_window_log" | "sliding_window_counter"
//!            | "lease" "=" BOOL             checked through quota leases (a remote store)
//!            | "rate" "=" EXPR              a `Rate`, instead of `period` and `threshold`
//!            | "concurrency" "=" INT        1..=100000 calls in flight, instead of a rate
//!            | "slot_time" "=" (INT | STR)  as `period`, 1 s..=1 day: a concurrency limit's
//!            | "key" "=" EXPR               any expression implementing Display
//!            | "cost" "=" (INT | EXPR)      1..=threshold (a log: ..=10000), or an unsigned
//!                                           integer expression
//!            | "exempt" "=" EXPR            a `bool`: true skips this limit
//!            | "decision" "=" IDENT         binds `&Decisions` for the body
//!            | "label" "=" STR              the policy's name in the HTTP fields
//!            | "wait" "=" (INT | STR)       as `period`: how long a denied call waits for a slot
//!            | "count" "=" STR              "all" | "errors" | "ok": which outcomes count
//!            | "count_if" "=" EXPR          a closure over `&Result`: whether the call counts
//!            | "shadow" "=" BOOL            a shadow limit: reported, never denies
//!            | "limiter" "=" EXPR           an expression evaluating to &Limiter
//!            | "name" "=" STR               a non-empty scope name
//!            | "crate" "=" STR              the path of ratelimit_runtime
//! ```
//!
//! What concerns several stacked attributes together is `stack`'s.

use std::fmt::Display;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Ident, Lit, LitFloat, LitInt, LitStr, Path, Token, UnOp};

use crate::{duration, suggest};

/// The largest threshold, `2^32 - 1` (`Rate::MAX_THRESHOLD` in the runtime).
const MAX_THRESHOLD: u128 = u32::MAX as u128;
/// The shortest period in microseconds, 1 ms (`Rate::MIN_PERIOD`).
const MIN_PERIOD_US: u128 = 1_000;
/// The longest period in microseconds, 100 Julian years (`Rate::MAX_PERIOD`).
const MAX_PERIOD_US: u128 = 3_155_760_000 * 1_000_000;

/// The most one call may cost under a sliding window log (`MAX_COST` in the runtime).
const MAX_COST: u128 = 10_000;

/// The most calls in flight a concurrency limit allows (`Concurrency::MAX`).
const MAX_CONCURRENCY: u128 = 100_000;
/// A concurrency limit's shortest and longest slot times, in microseconds (1 s and 1 day).
const SLOT_TIME_US: (u64, u64) = (1_000_000, 86_400_000_000);
/// The slot time unless one is chosen (`Concurrency::DEFAULT_SLOT_TIME`), in microseconds.
pub(crate) const DEFAULT_SLOT_TIME_US: u64 = 30_000_000;

/// The arguments, in the order the error messages list them, with an example of each.
const ARGUMENTS: [(&str, &str); 19] = [
    ("period", "period = 60"),
    ("threshold", "threshold = 10"),
    ("algorithm", "algorithm = \"sliding_window_counter\""),
    ("lease", "lease = true"),
    ("key", "key = user_id"),
    ("rate", "rate = plan.rate()"),
    ("concurrency", "concurrency = 4"),
    ("slot_time", "slot_time = \"30s\""),
    ("cost", "cost = items.len()"),
    ("exempt", "exempt = caller.is_internal()"),
    ("decision", "decision = d"),
    ("label", "label = \"burst\""),
    ("wait", "wait = \"30s\""),
    ("count", "count = \"errors\""),
    (
        "count_if",
        "count_if = |result: &Result<Response, AppError>| failed_login(result)",
    ),
    ("shadow", "shadow = true"),
    ("limiter", "limiter = &LIMITER"),
    ("name", "name = \"login\""),
    ("crate", "crate = \"::ratelimit_runtime\""),
];

/// Words people reach for instead of an argument's name.
const SYNONYMS: [(&str, &str); 23] = [
    ("strategy", "algorithm"),
    ("algo", "algorithm"),
    ("window", "period"),
    ("interval", "period"),
    ("duration", "period"),
    ("per", "period"),
    ("every", "period"),
    ("limit", "threshold"),
    ("max", "threshold"),
    ("dry_run", "shadow"),
    ("trial", "shadow"),
    ("refund_if", "count_if"),
    ("calls", "threshold"),
    ("requests", "threshold"),
    ("burst", "threshold"),
    ("capacity", "threshold"),
    ("scope", "name"),
    ("store", "limiter"),
    ("weight", "cost"),
    ("skip", "exempt"),
    ("bypass", "exempt"),
    ("in_flight", "concurrency"),
    ("max_concurrent", "concurrency"),
];

/// The validated arguments of one `#[rate_limit(...)]`.
pub(crate) struct Args {
    /// The rate: `period` and `threshold`, or `rate = expr`.
    pub(crate) rate: RateArg,
    /// The per-call key expression.
    pub(crate) key: Option<Expr>,
    /// The call's cost, 1 without it.
    pub(crate) cost: Option<CostArg>,
    /// The `bool` expression that skips this limit when true.
    pub(crate) exempt: Option<Expr>,
    /// The name the body sees the check's `&Decisions` by.
    pub(crate) decision: Option<Ident>,
    /// The policy's name in the HTTP fields: non-empty printable ASCII.
    pub(crate) label: Option<LitStr>,
    /// How long a denied call waits for a slot, in microseconds (1 ms..=100 years), with the
    /// tokens that gave it.
    pub(crate) wait: Option<(u64, Expr)>,
    /// Which calls count, by their outcome, with the tokens that gave it (`None`: all).
    pub(crate) count: Option<(Count, TokenStream)>,
    /// A shadow limit: checked and recorded, reported when it would deny, never denying.
    pub(crate) shadow: bool,
    /// The expression evaluating to `&Limiter`.
    pub(crate) limiter: Option<Expr>,
    /// The scope name, non-empty.
    pub(crate) name: Option<LitStr>,
    /// The runtime crate's path, from `crate = "..."`.
    pub(crate) krate: Option<Path>,
}

/// The rate of one limit.
pub(crate) enum RateArg {
    /// `period` and `threshold`, known at compile time, `algorithm` and `lease`.
    Fixed {
        /// The window's length in microseconds, within `1 ms..=100 years`.
        period_us: u64,
        /// Admissions per window, within `1..=2^32 - 1`.
        threshold: u64,
        /// `algorithm = "sliding_window_counter"` (else the sliding window log).
        counter: bool,
        /// `lease = true`: checked through quota leases.
        leased: bool,
    },
    /// `rate = expr`: a `Rate` evaluated on each call, before the body.
    Expr(Expr),
    /// `concurrency = N`: at most `max` calls in flight, each holding a slot that lasts
    /// `slot_time_us` unless renewed (`slot_time`, 30 s without it).
    Concurrency {
        /// Calls in flight, within `1..=100000`.
        max: u64,
        /// Microseconds, within `1 s..=1 day`, whole milliseconds.
        slot_time_us: u64,
    },
}

/// Which calls a limit counts, by the body's outcome: the others are refunded after the body.
pub(crate) enum Count {
    /// `count = "all"`: every call that runs (the default).
    All,
    /// `count = "errors"`: the calls whose body returns `Err`.
    Errors,
    /// `count = "ok"`: the calls whose body returns `Ok`.
    Ok,
    /// `count_if = closure`: the calls for whose `&Result` the closure returns `true`.
    If(Expr),
}

/// The cost of one call under a limit.
pub(crate) enum CostArg {
    /// An integer literal, within `1..=10000` and the threshold.
    Literal(u64),
    /// Any other expression: an unsigned integer, checked by rustc and then at run time.
    Expr(Expr),
}

impl Args {
    /// Whether this attribute is the plain form, one fixed rate for calls of cost 1 (checked
    /// on its own, without the composite check's `Decisions`).
    pub(crate) fn is_plain(&self) -> bool {
        matches!(self.rate, RateArg::Fixed { .. })
            && self.cost.is_none()
            && self.exempt.is_none()
            && self.decision.is_none()
            && self.label.is_none()
            && self.count.is_none()
            && !self.shadow
    }

    /// Whether some of this limit's calls may be refunded after the body (a `count` other than
    /// `"all"`, or `count_if`).
    pub(crate) fn counts_by_outcome(&self) -> bool {
        !matches!(self.count, None | Some((Count::All, _)))
    }
}

/// Parses and validates the attribute's arguments (the tokens between its parentheses).
///
/// # Errors
///
/// Every mistake found, one error each, combined into one [`syn::Error`]. A syntax error stops
/// the parse (what follows it cannot be trusted); a missing argument is only reported when
/// nothing else is wrong, since a misspelt argument would otherwise be reported twice.
pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Args> {
    let mut builder = ArgsBuilder::default();
    let parsed = (|input: ParseStream| parse_arguments(input, &mut builder)).parse2(tokens.clone());
    if let Err(syntax) = parsed {
        builder.errors.push(syntax);
        std::mem::take(&mut builder.errors).finish()?;
    }
    builder.build(&tokens)
}

fn parse_arguments(input: ParseStream, builder: &mut ArgsBuilder) -> syn::Result<()> {
    while !input.is_empty() {
        if !input.peek(Ident::peek_any) {
            return Err(input
                .error("expected `name = value` arguments, e.g. `period = 60, threshold = 10`"));
        }
        let name = input.call(Ident::parse_any)?;
        let known = ARGUMENTS.iter().find(|(known, _)| name == known);
        if !input.peek(Token![=]) {
            return Err(match known {
                Some((known, example)) => {
                    error(&name, format!("`{known}` needs a value, e.g. `{example}`"))
                }
                None => unknown_argument(&name),
            });
        }
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        if !input.is_empty() {
            input.parse::<Token![,]>()?;
        }
        builder.set(&name, value);
    }
    Ok(())
}

/// The arguments as written, each with the name token that set it, before the cross-argument
/// checks of [`ArgsBuilder::build`].
#[derive(Default)]
struct ArgsBuilder {
    errors: Errors,
    period_us: Option<u64>,
    threshold: Option<u64>,
    /// The name tokens of `period`, `threshold` and `algorithm`, for an error beside `rate`.
    fixed_names: Vec<Ident>,
    /// `algorithm = "sliding_window_counter"`.
    counter: bool,
    /// `lease = true`.
    leased: bool,
    /// `rate = expr`, with its name token.
    rate: Option<(Ident, Expr)>,
    /// `concurrency = N`, with its name token.
    concurrency: Option<(Ident, u64)>,
    /// `slot_time`, in microseconds, with its name token.
    slot_time: Option<(Ident, u64)>,
    key: Option<Expr>,
    /// `cost`, with its value as written.
    cost: Option<(CostArg, Expr)>,
    exempt: Option<Expr>,
    decision: Option<Ident>,
    label: Option<LitStr>,
    wait: Option<(u64, Expr)>,
    /// `count` or `count_if`, with the name token that set it (for the error when both are).
    count: Option<(Count, TokenStream, Ident)>,
    shadow: bool,
    limiter: Option<Expr>,
    name: Option<LitStr>,
    krate: Option<Path>,
    /// The names already seen, for duplicates.
    seen: Vec<String>,
}

impl ArgsBuilder {
    fn set(&mut self, name: &Ident, value: Expr) {
        let text = name.to_string();
        if !ARGUMENTS.iter().any(|(known, _)| *known == text) {
            self.errors.push(unknown_argument(name));
            return;
        }
        if self.seen.contains(&text) {
            self.errors
                .push(error(name, format!("duplicate `{text}` argument")));
            return;
        }
        self.seen.push(text.clone());
        if ["period", "threshold", "algorithm", "lease"].contains(&text.as_str()) {
            self.fixed_names.push(name.clone());
        }
        let value = strip_groups(value);
        let result = match text.as_str() {
            "period" => period(&value).map(|us| self.period_us = Some(us)),
            "threshold" => threshold(&value).map(|n| self.threshold = Some(n)),
            "algorithm" => algorithm(&value).map(|counter| self.counter = counter),
            "lease" => lease(&value).map(|leased| self.leased = leased),
            "key" => unreserved(&text, value).map(|expr| self.key = Some(expr)),
            "rate" => unreserved(&text, value).map(|expr| self.rate = Some((name.clone(), expr))),
            "concurrency" => {
                concurrency(&value).map(|max| self.concurrency = Some((name.clone(), max)))
            }
            "slot_time" => slot_time(&value).map(|us| self.slot_time = Some((name.clone(), us))),
            "cost" => unreserved(&text, value)
                .and_then(|expr| Ok((cost(&expr)?, expr)))
                .map(|cost| self.cost = Some(cost)),
            "exempt" => unreserved(&text, value).map(|expr| self.exempt = Some(expr)),
            "decision" => binding(&value).map(|ident| self.decision = Some(ident)),
            "label" => label(&value).map(|lit| self.label = Some(lit)),
            "wait" => duration("wait", &value).map(|us| self.wait = Some((us, value.clone()))),
            "count" | "count_if" => self.count(name, value),
            "shadow" => shadow(&value).map(|shadow| self.shadow = shadow),
            "limiter" => unreserved(&text, value)
                .and_then(made_per_call)
                .map(|expr| self.limiter = Some(expr)),
            "name" => scope_name(&value).map(|lit| self.name = Some(lit)),
            "crate" => crate_path(&value).map(|path| self.krate = Some(path)),
            _ => unreachable!("`{text}` is in ARGUMENTS"),
        };
        if let Err(err) = result {
            self.errors.push(err);
        }
    }

    /// `count = "..."` or `count_if = closure`, at most one of the two.
    fn count(&mut self, name: &Ident, value: Expr) -> syn::Result<()> {
        if let Some((_, _, first)) = &self.count {
            return Err(error(
                name,
                format!(
                    "`{name}` cannot be given with `{first}`: `count` chooses among the outcomes \
                     `\"all\"`, `\"errors\"` and `\"ok\"`, `count_if` by any rule; keep one"
                ),
            ));
        }
        let tokens = value.to_token_stream();
        let count = if name == "count" {
            count(&value)?
        } else {
            Count::If(unreserved("count_if", value)?)
        };
        self.count = Some((count, tokens, name.clone()));
        Ok(())
    }

    /// The cross-argument checks: `period` and `threshold` are required, unless `rate` is
    /// given, which excludes them; a literal cost fits a literal threshold.
    fn build(mut self, whole: &TokenStream) -> syn::Result<Args> {
        let errors = std::mem::take(&mut self.errors);
        errors.finish()?;
        if let (Some(_), Some(fixed)) = (&self.rate, self.fixed_names.first()) {
            let given: Vec<String> = self.fixed_names.iter().map(|n| format!("`{n}`")).collect();
            let message = if *fixed == "algorithm" && self.fixed_names.len() == 1 {
                "`algorithm` cannot be given with `rate`, whose `Rate` chooses its algorithm: \
                 remove `algorithm`, and choose it on the rate, e.g. \
                 `Rate::new(..)?.with_algorithm(Algorithm::SlidingWindowCounter)` (a `Rate` is \
                 a sliding window log unless told otherwise)"
                    .to_owned()
            } else if *fixed == "lease" && self.fixed_names.len() == 1 {
                "`lease` cannot be given with `rate`, whose `Rate` chooses it: remove `lease`, \
                 and lease the rate, e.g. `Rate::new(..)?.leased()`"
                    .to_owned()
            } else {
                format!(
                    "`{fixed}` cannot be given with `rate`, whose `Rate` gives the period and \
                     the threshold: remove {}, or remove `rate`",
                    given.join(" and ")
                )
            };
            return Err(error(fixed, message));
        }
        if let Some((_, max)) = self.concurrency {
            return self.build_concurrency(max);
        }
        if let Some((slot_time, _)) = &self.slot_time {
            return Err(error(
                slot_time,
                "`slot_time` is a concurrency limit's: give it with `concurrency = N`, or \
                 remove it",
            ));
        }
        let rate = match (self.rate, self.period_us, self.threshold) {
            (Some((_, expr)), _, _) => RateArg::Expr(expr),
            (None, Some(period_us), Some(threshold)) => RateArg::Fixed {
                period_us,
                threshold,
                counter: self.counter,
                leased: self.leased,
            },
            (None, None, None) => {
                return Err(syn::Error::new(
                    Span::call_site(),
                    "missing `period` and `threshold` arguments, e.g. \
                     `#[rate_limit(period = 60, threshold = 10)]` (or a `Rate` chosen per call: \
                     `rate = plan.rate()`; or the calls in flight: `concurrency = 4`)",
                ));
            }
            (None, None, Some(_)) => return Err(missing(whole, "period")),
            (None, Some(_), None) => return Err(missing(whole, "threshold")),
        };
        if let RateArg::Fixed {
            threshold,
            leased: true,
            ..
        } = rate
            && threshold < MIN_LEASED_THRESHOLD
        {
            let lease = self.fixed_names.iter().find(|name| *name == "lease");
            return Err(error(
                lease.expect("`leased` is set by a `lease` argument"),
                format!(
                    "`lease = true` does nothing at a threshold of {threshold}: a lease holds at \
                     most a sixteenth of the threshold, so below {MIN_LEASED_THRESHOLD} it could \
                     reserve nothing, and every call goes to the store; remove `lease`"
                ),
            ));
        }
        let cost = match (self.cost, &rate) {
            (Some((CostArg::Literal(cost), written)), RateArg::Fixed { threshold, .. })
                if cost > *threshold =>
            {
                return Err(error(
                    written,
                    format!(
                        "`cost = {cost}` is above `threshold = {threshold}`: no window could \
                         ever admit the call"
                    ),
                ));
            }
            (Some((CostArg::Literal(cost), written)), RateArg::Fixed { counter, .. })
                if u128::from(cost) > MAX_COST && !counter =>
            {
                return Err(error(
                    written,
                    "`cost` must be at most 10000 under a sliding window log, which records a \
                     call of cost `c` as `c` entries; for larger costs (tokens, bytes) use \
                     `algorithm = \"sliding_window_counter\"`, whose cost is a number added to \
                     a count",
                ));
            }
            (cost, _) => cost.map(|(cost, _)| cost),
        };
        Ok(Args {
            rate,
            key: self.key,
            cost,
            exempt: self.exempt,
            decision: self.decision,
            label: self.label,
            wait: self.wait,
            count: self.count.map(|(count, tokens, _)| (count, tokens)),
            shadow: self.shadow,
            limiter: self.limiter,
            name: self.name,
            krate: self.krate,
        })
    }
}

impl ArgsBuilder {
    /// The arguments of a concurrency limit (`concurrency` given): no rate, no
    /// cost, no count by outcome (a slot is held by the call while it runs, and released
    /// when it ends).
    fn build_concurrency(self, max: u64) -> syn::Result<Args> {
        let rated = self
            .fixed_names
            .first()
            .cloned()
            .or_else(|| self.rate.as_ref().map(|(rate, _)| rate.clone()));
        if let Some(rated) = rated {
            return Err(error(
                &rated,
                format!(
                    "`{rated}` cannot be given with `concurrency`, which limits the calls in \
                     flight, not a rate: put the rate in an attribute of its own, stacked on \
                     the same function (`#[rate_limit(period = 1, threshold = 10)]` above \
                     `#[rate_limit(concurrency = {max})]`)"
                ),
            ));
        }
        if let Some((_, written)) = &self.cost {
            return Err(error(
                written,
                "`cost` cannot be given with `concurrency`: a call holds one slot while it \
                 runs; remove `cost`",
            ));
        }
        if let Some((_, _, counted)) = &self.count {
            return Err(error(
                counted,
                format!(
                    "`{counted}` cannot be given with `concurrency`: a call's slot is released \
                     when it ends, whatever its outcome; remove `{counted}`"
                ),
            ));
        }
        Ok(Args {
            rate: RateArg::Concurrency {
                max,
                slot_time_us: self.slot_time.map_or(DEFAULT_SLOT_TIME_US, |(_, us)| us),
            },
            key: self.key,
            cost: None,
            exempt: self.exempt,
            decision: self.decision,
            label: self.label,
            wait: self.wait,
            count: None,
            shadow: self.shadow,
            limiter: self.limiter,
            name: self.name,
            krate: self.krate,
        })
    }
}

/// `concurrency = 4`: calls in flight, `1..=100000`.
fn concurrency(value: &Expr) -> syn::Result<u64> {
    const EXPECTED: &str = "`concurrency` must be an integer literal, e.g. `concurrency = 4`; \
                            for a limit chosen at run time, take a slot by hand with \
                            `Limiter::acquire(key, Concurrency::new(n)?)`";
    let Expr::Lit(lit) = value else {
        return Err(error(value, EXPECTED));
    };
    match &lit.lit {
        Lit::Int(int) => {
            let suffix = int.suffix();
            if !suffix.is_empty() && !is_integer_suffix(suffix) {
                return Err(error(
                    int,
                    format!("invalid suffix `{suffix}` for `concurrency`"),
                ));
            }
            let count = int.base10_digits().parse::<u128>().unwrap_or(u128::MAX);
            check_suffix_range(int, count, "concurrency")?;
            if count == 0 {
                return Err(error(
                    int,
                    "`concurrency` must be at least 1 call in flight",
                ));
            }
            if count > MAX_CONCURRENCY {
                return Err(error(
                    int,
                    "`concurrency` must be at most 100000 calls in flight (`Concurrency::MAX`)",
                ));
            }
            Ok(u64::try_from(count).expect("bounded by MAX_CONCURRENCY"))
        }
        Lit::Str(text) if text.value().trim().parse::<u128>().is_ok() => Err(error(
            text,
            format!(
                "`concurrency` must be an integer, not a string: write `concurrency = {}`",
                text.value().trim()
            ),
        )),
        Lit::Float(float) => Err(error(
            float,
            "`concurrency` counts calls in flight: it must be a whole number, e.g. \
             `concurrency = 4`",
        )),
        _ => Err(error(value, EXPECTED)),
    }
}

/// `slot_time = "30s"`: a concurrency limit's slot time, as a duration, within `1 s..=1 day`
/// and in whole milliseconds.
fn slot_time(value: &Expr) -> syn::Result<u64> {
    let us = duration("slot_time", value)?;
    let (least, most) = SLOT_TIME_US;
    if us < least {
        return Err(error(value, "`slot_time` must be at least 1 s"));
    }
    if us > most {
        return Err(error(value, "`slot_time` must be at most 1 day (\"1d\")"));
    }
    if us % 1_000 != 0 {
        return Err(error(
            value,
            "`slot_time` must be a whole number of milliseconds",
        ));
    }
    Ok(us)
}

fn missing(whole: &TokenStream, argument: &str) -> syn::Error {
    let example = ARGUMENTS
        .iter()
        .find(|(known, _)| *known == argument)
        .map_or("", |(_, e)| e);
    syn::Error::new_spanned(
        whole,
        format!("missing `{argument}` argument, e.g. `{example}`"),
    )
}

/// Collects errors; it panics if dropped with errors not taken by [`Errors::finish`], so an
/// error cannot be forgotten.
#[derive(Default)]
struct Errors(Option<syn::Error>);

impl Errors {
    fn push(&mut self, err: syn::Error) {
        match &mut self.0 {
            Some(errors) => errors.combine(err),
            None => self.0 = Some(err),
        }
    }

    fn finish(mut self) -> syn::Result<()> {
        match self.0.take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

impl Drop for Errors {
    fn drop(&mut self) {
        if self.0.is_some() && !std::thread::panicking() {
            panic!("rate_limit: errors collected but never reported");
        }
    }
}

fn error(tokens: impl ToTokens, message: impl Display) -> syn::Error {
    syn::Error::new_spanned(tokens, message)
}

/// "unknown argument `x`", with the closest valid argument or, when none is close, the list.
fn unknown_argument(name: &Ident) -> syn::Error {
    let text = name.to_string();
    // A synonym first (`limit` means `threshold` more often than `limiter`), then the nearest
    // name.
    let closest = suggest::closest(&text, ARGUMENTS.iter().map(|(known, _)| *known), &SYNONYMS);
    let message = match closest {
        Some(known) => format!("unknown argument `{text}`; did you mean `{known}`?"),
        None => {
            let list: Vec<String> = ARGUMENTS
                .iter()
                .map(|(known, _)| format!("`{known}`"))
                .collect();
            format!(
                "unknown argument `{text}`; expected one of {}",
                list.join(", ")
            )
        }
    };
    error(name, message)
}

/// Removes the invisible groups a `macro_rules!` fragment (`$period:expr`) is wrapped in.
fn strip_groups(expr: Expr) -> Expr {
    match expr {
        Expr::Group(group) => strip_groups(*group.expr),
        other => other,
    }
}

/// `period = 30` (whole seconds) or `period = "1500ms"`, in microseconds.
fn period(value: &Expr) -> syn::Result<u64> {
    duration("period", value)
}

/// A duration argument (`period`, `wait`): whole seconds (`30`) or `"<integer><unit>"`
/// (`"1500ms"`), in microseconds, from 1 ms to 100 years; `argument` names it in the errors.
fn duration(argument: &str, value: &Expr) -> syn::Result<u64> {
    let us = match value {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Int(int) => whole_seconds(argument, int)?,
            Lit::Str(text) => duration::parse(&text.value()).map_err(|reason| {
                error(
                    text,
                    format!("invalid `{argument}` {}: {reason}", text.token()),
                )
            })?,
            Lit::Float(float) => return Err(fractional_seconds(argument, float)),
            _ => return Err(duration_type(argument, value)),
        },
        Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => {
            return Err(error(
                value,
                format!("`{argument}` cannot be negative; it must be at least 1 ms"),
            ));
        }
        _ => return Err(duration_type(argument, value)),
    };
    duration_in_range(argument, us).map_err(|message| error(value, message))
}

fn duration_type(argument: &str, value: &Expr) -> syn::Error {
    error(
        value,
        format!(
            "`{argument}` must be an integer number of seconds or a duration string, \
             e.g. `{argument} = 60` or `{argument} = \"1500ms\"`"
        ),
    )
}

fn whole_seconds(argument: &str, int: &LitInt) -> syn::Result<u128> {
    let suffix = int.suffix();
    if duration::UNITS.iter().any(|(unit, _)| *unit == suffix) {
        return Err(error(
            int,
            format!(
                "a `{argument}` with a unit is a string: write `{argument} = \"{}{suffix}\"`",
                int.base10_digits()
            ),
        ));
    }
    if !suffix.is_empty() && !is_integer_suffix(suffix) {
        return Err(error(
            int,
            format!(
                "invalid suffix `{suffix}` for `{argument}`; units go in a string, e.g. `{argument} = \"1500ms\"`"
            ),
        ));
    }
    // Digits beyond u128 are far beyond 100 years: saturate, then the range check reports it.
    let seconds = int.base10_digits().parse::<u128>().unwrap_or(u128::MAX);
    check_suffix_range(int, seconds, argument)?;
    Ok(seconds.saturating_mul(1_000_000))
}

fn fractional_seconds(argument: &str, float: &LitFloat) -> syn::Error {
    // `1.5h` is a float with the suffix `h`: a fraction of that unit, not of seconds.
    let per = duration::UNITS
        .iter()
        .find(|(unit, _)| *unit == float.suffix())
        .map_or(1_000_000, |(_, us)| *us);
    let suggestion = duration::decimal_us(float.base10_digits(), per).and_then(duration::suggest);
    let message = match suggestion {
        Some(text) => {
            format!("`{argument}` takes whole seconds; write `{argument} = \"{text}\"`")
        }
        None => format!(
            "`{argument}` takes whole seconds or a duration string of whole milliseconds, \
             e.g. `{argument} = \"1500ms\"`"
        ),
    };
    error(float, message)
}

fn duration_in_range(argument: &str, us: u128) -> Result<u64, String> {
    if us < MIN_PERIOD_US {
        return Err(format!("`{argument}` must be at least 1 ms"));
    }
    if us > MAX_PERIOD_US {
        return Err(format!(
            "`{argument}` must be at most 100 years (3155760000 s)"
        ));
    }
    Ok(u64::try_from(us).expect("bounded by MAX_PERIOD_US"))
}

fn is_integer_suffix(suffix: &str) -> bool {
    suffix_max(suffix).is_some()
}

/// The largest value an integer literal with `suffix` holds (`usize`/`isize` taken as 64-bit).
fn suffix_max(suffix: &str) -> Option<u128> {
    Some(match suffix {
        "u8" => u8::MAX.into(),
        "u16" => u16::MAX.into(),
        "u32" => u32::MAX.into(),
        "u64" | "usize" => u64::MAX.into(),
        "u128" => u128::MAX,
        "i8" => i8::MAX.unsigned_abs().into(),
        "i16" => i16::MAX.unsigned_abs().into(),
        "i32" => i32::MAX.unsigned_abs().into(),
        "i64" | "isize" => i64::MAX.unsigned_abs().into(),
        "i128" => i128::MAX.unsigned_abs(),
        _ => return None,
    })
}

/// An error when `int`'s value overflows its own suffix (`300u8`), as rustc would report it.
fn check_suffix_range(int: &LitInt, value: u128, argument: &str) -> syn::Result<()> {
    match suffix_max(int.suffix()) {
        Some(max) if value > max => Err(error(
            int,
            format!(
                "`{}` does not fit in `{}`; drop the suffix: `{argument} = {}`",
                int,
                int.suffix(),
                int.base10_digits()
            ),
        )),
        _ => Ok(()),
    }
}

/// `threshold = 10`: admissions per period, `1..=2^32 - 1`.
fn threshold(value: &Expr) -> syn::Result<u64> {
    const EXPECTED: &str = "`threshold` must be an integer literal, e.g. `threshold = 10`";
    match value {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Int(int) => {
                let suffix = int.suffix();
                if !suffix.is_empty() && !is_integer_suffix(suffix) {
                    return Err(error(
                        int,
                        format!("invalid suffix `{suffix}` for `threshold`"),
                    ));
                }
                let count = int.base10_digits().parse::<u128>().unwrap_or(u128::MAX);
                check_suffix_range(int, count, "threshold")?;
                if count == 0 {
                    return Err(error(int, "`threshold` must be at least 1"));
                }
                if count > MAX_THRESHOLD {
                    return Err(error(
                        int,
                        "`threshold` must be at most 4294967295 (2^32 - 1)",
                    ));
                }
                Ok(u64::try_from(count).expect("bounded by MAX_THRESHOLD"))
            }
            Lit::Str(text) if text.value().trim().parse::<u128>().is_ok() => Err(error(
                text,
                format!(
                    "`threshold` must be an integer, not a string: write `threshold = {}`",
                    text.value().trim()
                ),
            )),
            _ => Err(error(value, EXPECTED)),
        },
        Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => Err(error(
            value,
            "`threshold` cannot be negative; it must be at least 1",
        )),
        _ => Err(error(value, EXPECTED)),
    }
}

/// The name of the expansion's locals, and of the function it declares next to them so that no
/// item of the user's can turn a `let` of them into a constant pattern. The `key` and
/// `limiter` expressions are evaluated where that function is in scope.
pub(crate) const RESERVED: &str = "__ratelimit";

/// `expr`, unless it names [`RESERVED`], which would resolve to the expansion's function
/// rather than to the user's argument or item of that name.
fn unreserved(argument: &str, expr: Expr) -> syn::Result<Expr> {
    fn find(tokens: TokenStream) -> Option<proc_macro2::Ident> {
        tokens.into_iter().find_map(|tree| match tree {
            proc_macro2::TokenTree::Ident(ident) if ident == RESERVED => Some(ident),
            proc_macro2::TokenTree::Group(group) => find(group.stream()),
            _ => None,
        })
    }
    match find(expr.to_token_stream()) {
        Some(ident) => Err(error(
            ident,
            format!(
                "`{RESERVED}` is reserved by `#[rate_limit]` and cannot be used in `{argument}`; \
                 rename it"
            ),
        )),
        None => Ok(expr),
    }
}

/// `cost = 3` (a literal, checked here) or `cost = items.len()` (an expression, which rustc
/// checks is an unsigned integer).
fn cost(value: &Expr) -> syn::Result<CostArg> {
    match value {
        Expr::Lit(lit) => match &lit.lit {
            // A suffix other than an unsigned one of at most 64 bits: rustc's message, as for
            // any expression of that type.
            Lit::Int(int)
                if !matches!(int.suffix(), "" | "u8" | "u16" | "u32" | "u64" | "usize") =>
            {
                Ok(CostArg::Expr(value.clone()))
            }
            Lit::Int(int) => {
                let cost = int.base10_digits().parse::<u128>().unwrap_or(u128::MAX);
                check_suffix_range(int, cost, "cost")?;
                if cost == 0 {
                    return Err(error(
                        int,
                        "`cost = 0` never counts a call, so this limit could never deny; \
                         remove `cost` (a call costs 1) or remove the limit",
                    ));
                }
                if cost > MAX_THRESHOLD {
                    return Err(error(
                        int,
                        "`cost` must be at most 4294967295 (2^32 - 1), the largest threshold",
                    ));
                }
                Ok(CostArg::Literal(
                    u64::try_from(cost).expect("bounded by MAX_THRESHOLD"),
                ))
            }
            _ => Ok(CostArg::Expr(value.clone())),
        },
        Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => Err(error(
            value,
            "`cost` cannot be negative; it must be at least 1",
        )),
        _ => Ok(CostArg::Expr(value.clone())),
    }
}

/// `decision = d`: the name of a binding.
fn binding(value: &Expr) -> syn::Result<Ident> {
    let ident = match value {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
            path.path.get_ident().cloned()
        }
        _ => None,
    };
    match ident {
        Some(ident)
            if ["self", "Self", "crate", "super"]
                .iter()
                .any(|k| ident == k) =>
        {
            Err(error(
                &ident,
                "`decision` takes a new name for the decisions, not a keyword, e.g. \
                 `decision = d`",
            ))
        }
        Some(ident) if ident == RESERVED => Err(error(
            &ident,
            format!("`{RESERVED}` is reserved by `#[rate_limit]`; choose another name"),
        )),
        Some(ident) => Ok(ident),
        None => Err(error(
            value,
            "`decision` takes the name the body reads the decisions by, e.g. `decision = d`",
        )),
    }
}

/// The outcomes `count` chooses among, with what each counts.
const COUNTS: [&str; 3] = ["all", "errors", "ok"];

/// `count = "errors"`: which outcomes count.
fn count(value: &Expr) -> syn::Result<Count> {
    if let Expr::Lit(syn::ExprLit {
        lit: Lit::Int(_), ..
    }) = value
    {
        return Err(error(
            value,
            format!(
                "`count` chooses which calls count by their outcome (`\"all\"`, `\"errors\"` or \
                 `\"ok\"`); for the number of calls allowed per period, write \
                 `threshold = {}`",
                value.to_token_stream()
            ),
        ));
    }
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(text),
        ..
    }) = value
    else {
        return Err(error(
            value,
            "`count` must be a string literal: `\"all\"` (the default), `\"errors\"` (only calls \
             whose body returns `Err`) or `\"ok\"` (only those returning `Ok`); for another rule, \
             `count_if = |result| ..`",
        ));
    };
    match text.value().as_str() {
        "all" => Ok(Count::All),
        "errors" => Ok(Count::Errors),
        "ok" => Ok(Count::Ok),
        other => {
            const SYNONYMS: [(&str, &str); 6] = [
                ("error", "errors"),
                ("err", "errors"),
                ("failures", "errors"),
                ("failed", "errors"),
                ("success", "ok"),
                ("successes", "ok"),
            ];
            let hint = match suggest::closest(other, COUNTS, &SYNONYMS) {
                Some(meant) => format!(" (did you mean `\"{meant}\"`?)"),
                None => String::new(),
            };
            Err(error(
                text,
                format!(
                    "unknown `count` value `{other:?}`{hint}: expected `\"all\"` (the default), \
                     `\"errors\"` (only calls whose body returns `Err`) or `\"ok\"` (only those \
                     returning `Ok`); for another rule, `count_if = |result| ..`"
                ),
            ))
        }
    }
}

/// The algorithms `algorithm` takes, by name.
const ALGORITHMS: [&str; 2] = ["sliding_window_log", "sliding_window_counter"];

/// `algorithm = "sliding_window_counter"` (`true`) or `"sliding_window_log"` (`false`).
fn algorithm(value: &Expr) -> syn::Result<bool> {
    const EXPECTED: &str = "expected `\"sliding_window_log\"` (the default: exact, one entry \
                            per admission) or `\"sliding_window_counter\"` (two counts per key, \
                            a rolling window within twice the threshold)";
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(text),
        ..
    }) = value
    else {
        return Err(error(
            value,
            format!("`algorithm` must be a string literal: {EXPECTED}"),
        ));
    };
    match text.value().as_str() {
        "sliding_window_log" => Ok(false),
        "sliding_window_counter" => Ok(true),
        other => {
            const SYNONYMS: [(&str, &str); 6] = [
                ("log", "sliding_window_log"),
                ("sliding_log", "sliding_window_log"),
                ("counter", "sliding_window_counter"),
                ("sliding_counter", "sliding_window_counter"),
                ("sliding_window", "sliding_window_counter"),
                ("approximate", "sliding_window_counter"),
            ];
            let hint = match suggest::closest(other, ALGORITHMS, &SYNONYMS) {
                Some(meant) => format!(" (did you mean `\"{meant}\"`?)"),
                None => String::new(),
            };
            Err(error(
                text,
                format!("unknown `algorithm` `{other:?}`{hint}: {EXPECTED}"),
            ))
        }
    }
}

/// The lowest threshold a lease holds a reserve of (the runtime's `check::lease::max_size`:
/// a sixteenth of the threshold, the call at hand included, is at least 2 from 32 on).
const MIN_LEASED_THRESHOLD: u64 = 32;

/// `lease = true`: a `bool` literal.
fn lease(value: &Expr) -> syn::Result<bool> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(flag),
            ..
        }) => Ok(flag.value),
        _ => Err(error(
            value,
            "`lease` must be `true` or `false`: a leased limit reserves admissions of its key \
             in the store in one round trip and spends them in process (for a rate chosen per \
             call, lease the `Rate` instead: `rate = plan.rate().leased()`)",
        )),
    }
}

/// `shadow = true`: a `bool` literal.
fn shadow(value: &Expr) -> syn::Result<bool> {
    match value {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Bool(flag),
            ..
        }) => Ok(flag.value),
        _ => Err(error(
            value,
            "`shadow` must be `true` or `false`: a shadow limit is checked and recorded, and \
             reports the calls it would deny without denying them",
        )),
    }
}

/// `label = "burst"`: the policy's name in the HTTP fields, non-empty printable ASCII.
fn label(value: &Expr) -> syn::Result<LitStr> {
    const EXPECTED: &str = "`label` must be a string literal, e.g. `label = \"burst\"`";
    let Expr::Lit(syn::ExprLit {
        lit: Lit::Str(text),
        ..
    }) = value
    else {
        return Err(error(value, EXPECTED));
    };
    let label = text.value();
    if label.is_empty() || !label.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(error(
            text,
            "`label` must be non-empty printable ASCII: it is sent to clients in the \
             `RateLimit` fields",
        ));
    }
    Ok(text.clone())
}

/// A `limiter` expression, unless it visibly makes a new limiter on each call
/// (`&Limiter::memory()`, `&Limiter::builder()...build().unwrap()`): each call would then
/// see an empty log, and none would ever be denied.
fn made_per_call(expr: Expr) -> syn::Result<Expr> {
    /// The call at the root of `expr`'s chain of references, method calls, `?` and `.await`.
    fn root(expr: &Expr) -> &Expr {
        match expr {
            Expr::Reference(reference) => root(&reference.expr),
            Expr::Paren(paren) => root(&paren.expr),
            Expr::Group(group) => root(&group.expr),
            Expr::MethodCall(call) => root(&call.receiver),
            Expr::Try(try_expr) => root(&try_expr.expr),
            Expr::Await(await_expr) => root(&await_expr.base),
            other => other,
        }
    }
    let constructor = match root(&expr) {
        Expr::Call(call) => match &*call.func {
            Expr::Path(path) => {
                let segments: Vec<String> = path
                    .path
                    .segments
                    .iter()
                    .map(|segment| segment.ident.to_string())
                    .collect();
                match segments.as_slice() {
                    [.., ty, function] if ty == "Limiter" || ty == "LimiterBuilder" => {
                        Some(format!("{ty}::{function}"))
                    }
                    _ => None,
                }
            }
            _ => None,
        },
        _ => None,
    };
    match constructor {
        None => Ok(expr),
        Some(constructor) => Err(error(
            &expr,
            format!(
                "this `limiter` calls `{constructor}` on every call of the function, so each \
                 call is checked against a new, empty limiter and none is ever denied; make \
                 the limiter once: `static LIMITER: std::sync::LazyLock<Limiter> = \
                 std::sync::LazyLock::new(Limiter::memory);` with `limiter = &LIMITER` (a \
                 limiter of `Limiter::builder()` fits a `LazyLock` too: its `.build()` does no \
                 I/O), `ratelimit_runtime::set_global` at start-up (then leave `limiter` out), \
                 or application state (`limiter = &self.limiter`)"
            ),
        )),
    }
}

/// `name = "login"`: a non-empty string literal.
fn scope_name(value: &Expr) -> syn::Result<LitStr> {
    match value {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Str(text) if text.value().is_empty() => {
                Err(error(text, "`name` must not be empty"))
            }
            Lit::Str(text) => match text.value().chars().find(|c| SEPARATORS.contains(c)) {
                // A name is a key as written (`name` without `key`): it may hold none of the
                // characters the layout escapes in a caller's key, or a name such as
                // `login/global` would be the log of `name = "login"`'s caller `global`.
                Some(separator) => Err(error(
                    text,
                    format!(
                        "`name` must not contain `{separator}`: `\\`, `/`, `@`, `#`, `{{` and \
                         `}}` separate the parts of a limit's key; use e.g. `.` or `::` \
                         (`name = \"api::login\"`)"
                    ),
                )),
                None => Ok(text.clone()),
            },
            _ => Err(error(
                value,
                "`name` must be a string literal, e.g. `name = \"login\"`",
            )),
        },
        _ => Err(error(
            value,
            "`name` must be a string literal, e.g. `name = \"login\"`",
        )),
    }
}

/// The characters of the key layout that a caller's key has escaped (`guide::keys`).
const SEPARATORS: [char; 6] = ['\\', '/', '@', '#', '{', '}'];

/// `crate = "path::to::ratelimit_runtime"`.
fn crate_path(value: &Expr) -> syn::Result<Path> {
    const EXPECTED: &str =
        "`crate` must be a path in a string, e.g. `crate = \"::ratelimit_runtime\"`";
    match value {
        Expr::Lit(lit) => match &lit.lit {
            Lit::Str(text) => text.parse::<Path>().map_err(|_| error(text, EXPECTED)),
            _ => Err(error(value, EXPECTED)),
        },
        _ => Err(error(value, EXPECTED)),
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use super::*;

    /// The messages of every error for `tokens`, in order.
    fn errors(tokens: TokenStream) -> Vec<String> {
        match parse(tokens) {
            Ok(_) => Vec::new(),
            Err(err) => err.into_iter().map(|e| e.to_string()).collect(),
        }
    }

    fn error_of(tokens: TokenStream) -> String {
        let all = errors(tokens);
        assert_eq!(all.len(), 1, "one error expected: {all:?}");
        all.into_iter().next().unwrap_or_default()
    }

    /// The period and threshold of a fixed rate.
    fn fixed(args: &Args) -> (u64, u64) {
        match args.rate {
            RateArg::Fixed {
                period_us,
                threshold,
                ..
            } => (period_us, threshold),
            RateArg::Expr(_) | RateArg::Concurrency { .. } => panic!("not a fixed rate"),
        }
    }

    #[test]
    fn concurrency_is_a_limit_of_its_own_with_a_slot_time() {
        let args = parse(quote!(concurrency = 4, key = tenant, wait = "1s")).unwrap();
        assert!(!args.is_plain());
        assert!(matches!(
            args.rate,
            RateArg::Concurrency {
                max: 4,
                slot_time_us: DEFAULT_SLOT_TIME_US
            }
        ));
        let args = parse(quote!(concurrency = 100000, slot_time = "1500ms")).unwrap();
        assert!(matches!(
            args.rate,
            RateArg::Concurrency {
                max: 100_000,
                slot_time_us: 1_500_000
            }
        ));
        for (tokens, needle) in [
            (quote!(concurrency = 0), "at least 1"),
            (quote!(concurrency = 100001), "at most 100000"),
            (
                quote!(concurrency = 4, rate = plan.rate()),
                "`rate` cannot be given",
            ),
            (
                quote!(concurrency = 4, lease = true),
                "`lease` cannot be given",
            ),
            (
                quote!(slot_time = 10),
                "`slot_time` is a concurrency limit's",
            ),
            (quote!(concurrency = 4, slot_time = "1d1ms"), "unknown unit"),
        ] {
            let error = parse(tokens.clone()).err().map(|e| e.to_string());
            assert!(
                error.as_deref().is_some_and(|e| e.contains(needle)),
                "{tokens}: {error:?}"
            );
        }
    }

    fn period_of(tokens: TokenStream) -> u64 {
        match parse(tokens) {
            Ok(args) => fixed(&args).0,
            Err(err) => panic!("{err}"),
        }
    }

    #[test]
    fn accepts_every_argument() {
        let args = parse(quote! {
            period = 30, threshold = 2, key = user.id, limiter = &LIMITER,
            name = "login", crate = "::my_runtime",
        })
        .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(fixed(&args), (30_000_000, 2));
        assert!(args.is_plain());
        assert_eq!(args.key.to_token_stream().to_string(), "user . id");
        assert_eq!(args.limiter.to_token_stream().to_string(), "& LIMITER");
        assert_eq!(args.name.map(|name| name.value()).as_deref(), Some("login"));
        assert_eq!(args.krate.to_token_stream().to_string(), ":: my_runtime");
    }

    #[test]
    fn periods_in_every_unit_and_at_the_bounds() {
        assert_eq!(period_of(quote!(period = 1, threshold = 1)), 1_000_000);
        assert_eq!(period_of(quote!(period = "1ms", threshold = 1)), 1_000);
        assert_eq!(
            period_of(quote!(period = "1500ms", threshold = 1)),
            1_500_000
        );
        assert_eq!(period_of(quote!(period = "30s", threshold = 1)), 30_000_000);
        assert_eq!(period_of(quote!(period = "2m", threshold = 1)), 120_000_000);
        assert_eq!(
            period_of(quote!(period = "1h", threshold = 1)),
            3_600_000_000
        );
        assert_eq!(
            period_of(quote!(period = 3155760000, threshold = 1)),
            3_155_760_000_000_000
        );
        assert_eq!(
            period_of(quote!(period = "876600h", threshold = 1)),
            3_155_760_000_000_000
        );
        assert_eq!(
            period_of(quote!(period = "1d", threshold = 1)),
            86_400_000_000
        );
        assert_eq!(
            period_of(quote!(period = "36525d", threshold = 1)),
            3_155_760_000_000_000
        );
        assert_eq!(period_of(quote!(period = 0x10, threshold = 1)), 16_000_000);
        assert_eq!(period_of(quote!(period = 30u64, threshold = 1)), 30_000_000);
    }

    #[test]
    fn threshold_bounds() {
        let max = parse(quote!(period = 1, threshold = 4294967295)).map(|args| fixed(&args).1);
        assert_eq!(max.ok(), Some(4_294_967_295));
        assert_eq!(
            error_of(quote!(period = 1, threshold = 0)),
            "`threshold` must be at least 1"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = -1)),
            "`threshold` cannot be negative; it must be at least 1"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 4294967296)),
            "`threshold` must be at most 4294967295 (2^32 - 1)"
        );
        assert_eq!(
            error_of(quote!(
                period = 1,
                threshold = 340282366920938463463374607431768211456
            )),
            "`threshold` must be at most 4294967295 (2^32 - 1)"
        );
    }

    #[test]
    fn threshold_of_the_wrong_kind() {
        let expected = "`threshold` must be an integer literal, e.g. `threshold = 10`";
        assert_eq!(error_of(quote!(period = 1, threshold = "x")), expected);
        assert_eq!(error_of(quote!(period = 1, threshold = 1.5)), expected);
        assert_eq!(error_of(quote!(period = 1, threshold = LIMIT)), expected);
        assert_eq!(
            error_of(quote!(period = 1, threshold = "10")),
            "`threshold` must be an integer, not a string: write `threshold = 10`"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 10ms)),
            "invalid suffix `ms` for `threshold`"
        );
    }

    #[test]
    fn period_bounds() {
        for tokens in [
            quote!(period = 0, threshold = 1),
            quote!(period = "0s", threshold = 1),
            quote!(period = "0ms", threshold = 1),
        ] {
            assert_eq!(error_of(tokens), "`period` must be at least 1 ms");
        }
        let too_long = "`period` must be at most 100 years (3155760000 s)";
        assert_eq!(
            error_of(quote!(period = 3155760001, threshold = 1)),
            too_long
        );
        assert_eq!(
            error_of(quote!(period = "876601h", threshold = 1)),
            too_long
        );
        assert_eq!(
            error_of(quote!(period = "99999999999999999999h", threshold = 1)),
            too_long
        );
        assert_eq!(
            error_of(quote!(
                period = "999999999999999999999999999999999999999999999ms",
                threshold = 1
            )),
            too_long
        );
        assert_eq!(
            error_of(quote!(
                period = 999999999999999999999999999999999999999999999,
                threshold = 1
            )),
            too_long
        );
        assert_eq!(
            error_of(quote!(period = -5, threshold = 1)),
            "`period` cannot be negative; it must be at least 1 ms"
        );
    }

    #[test]
    fn fractional_periods_suggest_a_smaller_unit() {
        assert_eq!(
            error_of(quote!(period = 1.5, threshold = 1)),
            "`period` takes whole seconds; write `period = \"1500ms\"`"
        );
        assert_eq!(
            error_of(quote!(period = 0.25, threshold = 1)),
            "`period` takes whole seconds; write `period = \"250ms\"`"
        );
        assert_eq!(
            error_of(quote!(period = 0.0001, threshold = 1)),
            "`period` takes whole seconds or a duration string of whole milliseconds, \
             e.g. `period = \"1500ms\"`"
        );
        assert_eq!(
            error_of(quote!(period = "1.5h", threshold = 1)),
            "invalid `period` \"1.5h\": fractions are not supported; write \"90m\""
        );
        // A fraction with a unit suffix, outside a string: a fraction of that unit.
        assert_eq!(
            error_of(quote!(period = 1.5d, threshold = 1)),
            "`period` takes whole seconds; write `period = \"36h\"`"
        );
        assert_eq!(
            error_of(quote!(period = 1.5h, threshold = 1)),
            "`period` takes whole seconds; write `period = \"90m\"`"
        );
        assert_eq!(
            error_of(quote!(period = "1.5d", threshold = 1)),
            "invalid `period` \"1.5d\": fractions are not supported; write \"36h\""
        );
        assert_eq!(
            error_of(quote!(period = "0.5ms", threshold = 1)),
            "invalid `period` \"0.5ms\": fractions are not supported; use a smaller unit, \
             e.g. \"1500ms\""
        );
    }

    #[test]
    fn malformed_duration_strings() {
        let cases = [
            (
                "abc",
                "expected an integer followed by a unit (`ms`, `s`, `m`, `h` or `d`), e.g. \"1500ms\"",
            ),
            (
                "",
                "expected an integer followed by a unit (`ms`, `s`, `m`, `h` or `d`), e.g. \"1500ms\"",
            ),
            (
                " 10s",
                "expected an integer followed by a unit (`ms`, `s`, `m`, `h` or `d`), e.g. \"1500ms\"",
            ),
            (
                "10",
                "missing unit; write \"10s\" (units: `ms`, `s`, `m`, `h`, `d`)",
            ),
            ("10 s", "no space is allowed in a duration; write \"10s\""),
            ("10s ", "no space is allowed in a duration; write \"10s\""),
            (
                "10 parsecs",
                "unknown unit `parsecs`; expected `ms`, `s`, `m`, `h` or `d` right after the number",
            ),
            (
                "10secs",
                "unknown unit `secs`; expected `ms`, `s`, `m`, `h` or `d` right after the number \
                 (did you mean \"10s\"?)",
            ),
            (
                "10S",
                "unknown unit `S`; expected `ms`, `s`, `m`, `h` or `d` right after the number \
                 (did you mean \"10s\"?)",
            ),
            (
                "5 minutes",
                "unknown unit `minutes`; expected `ms`, `s`, `m`, `h` or `d` right after the number \
                 (did you mean \"5m\"?)",
            ),
            (
                "10us",
                "unknown unit `us`; expected `ms`, `s`, `m`, `h` or `d` right after the number",
            ),
        ];
        for (text, reason) in cases {
            let literal = LitStr::new(text, Span::call_site());
            assert_eq!(
                error_of(quote!(period = #literal, threshold = 1)),
                format!("invalid `period` {}: {reason}", literal.token()),
                "{text:?}"
            );
        }
    }

    #[test]
    fn period_of_the_wrong_kind() {
        let expected = "`period` must be an integer number of seconds or a duration string, \
                        e.g. `period = 60` or `period = \"1500ms\"`";
        assert_eq!(error_of(quote!(period = PERIOD, threshold = 1)), expected);
        assert_eq!(error_of(quote!(period = true, threshold = 1)), expected);
        assert_eq!(
            error_of(quote!(period = 1500ms, threshold = 1)),
            "a `period` with a unit is a string: write `period = \"1500ms\"`"
        );
        assert_eq!(
            error_of(quote!(period = 10days, threshold = 1)),
            "invalid suffix `days` for `period`; units go in a string, e.g. `period = \"1500ms\"`"
        );
    }

    #[test]
    fn suffixed_literals_must_fit_their_suffix() {
        assert_eq!(
            error_of(quote!(period = 30, threshold = 300u8)),
            "`300u8` does not fit in `u8`; drop the suffix: `threshold = 300`"
        );
        assert_eq!(
            error_of(quote!(period = 100000u16, threshold = 1)),
            "`100000u16` does not fit in `u16`; drop the suffix: `period = 100000`"
        );
        let args = parse(quote!(period = 30u32, threshold = 255u8)).unwrap();
        assert_eq!(fixed(&args), (30_000_000, 255));
    }

    #[test]
    fn unknown_arguments_suggest_the_closest() {
        assert_eq!(
            error_of(quote!(period = 1, thresold = 2)),
            "unknown argument `thresold`; did you mean `threshold`?"
        );
        assert_eq!(
            error_of(quote!(perod = 1, threshold = 2)),
            "unknown argument `perod`; did you mean `period`?"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 2, Key = id)),
            "unknown argument `Key`; did you mean `key`?"
        );
        assert_eq!(
            error_of(quote!(period = 1, limit = 2)),
            "unknown argument `limit`; did you mean `threshold`?"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 2, colour = "red")),
            "unknown argument `colour`; expected one of `period`, `threshold`, `algorithm`, \
             `lease`, `key`, `rate`, `concurrency`, `slot_time`, \
             `cost`, `exempt`, `decision`, `label`, `wait`, `count`, `count_if`, `shadow`, \
             `limiter`, `name`, `crate`"
        );
    }

    #[test]
    fn duplicates_and_missing_arguments() {
        assert_eq!(
            error_of(quote!(period = 1, threshold = 2, period = 3)),
            "duplicate `period` argument"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 2, key = a, key = b)),
            "duplicate `key` argument"
        );
        assert_eq!(
            error_of(quote!(period = 1)),
            "missing `threshold` argument, e.g. `threshold = 10`"
        );
        assert_eq!(
            error_of(quote!(threshold = 1)),
            "missing `period` argument, e.g. `period = 60`"
        );
        let both = "missing `period` and `threshold` arguments, e.g. \
                    `#[rate_limit(period = 60, threshold = 10)]` (or a `Rate` chosen per call: \
                    `rate = plan.rate()`; or the calls in flight: `concurrency = 4`)";
        assert_eq!(error_of(quote!()), both);
        assert_eq!(error_of(quote!(name = "x")), both);
    }

    #[test]
    fn one_error_per_mistake() {
        // The misspelt `threshold` is not also reported missing.
        assert_eq!(
            errors(quote!(period = "abc", threshold = 0, thresold = 2)),
            [
                "invalid `period` \"abc\": expected an integer followed by a unit \
                 (`ms`, `s`, `m`, `h` or `d`), e.g. \"1500ms\"",
                "`threshold` must be at least 1",
                "unknown argument `thresold`; did you mean `threshold`?",
            ]
        );
        // An invalid `period` is not also reported missing.
        assert_eq!(errors(quote!(period = "x", threshold = 1)).len(), 1);
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(
            error_of(quote!(30, 2)),
            "expected `name = value` arguments, e.g. `period = 60, threshold = 10`"
        );
        assert_eq!(
            error_of(quote!(period, threshold = 1)),
            "`period` needs a value, e.g. `period = 60`"
        );
        assert_eq!(error_of(quote!(period = 1 threshold = 2)), "expected `,`");
        // A syntax error after a mistake reports both, and nothing more.
        assert_eq!(errors(quote!(thresold = 1, period)).len(), 2);
    }

    #[test]
    fn name_and_crate() {
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, name = "")),
            "`name` must not be empty"
        );
        for (name, separator) in [("#login", '#'), ("login/global", '/'), (r"a\b", '\\')] {
            let message = error_of(quote!(period = 1, threshold = 1, name = #name));
            assert!(
                message.starts_with(&format!("`name` must not contain `{separator}`")),
                "{message}"
            );
        }
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, name = login)),
            "`name` must be a string literal, e.g. `name = \"login\"`"
        );
        let bad_crate =
            "`crate` must be a path in a string, e.g. `crate = \"::ratelimit_runtime\"`";
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, crate = "not a path")),
            bad_crate
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, crate = ratelimit)),
            bad_crate
        );
    }

    #[test]
    fn the_reserved_name_is_refused_in_key_and_limiter() {
        assert_eq!(
            error_of(quote!(
                period = 1,
                threshold = 1,
                key = format!("{}", (__ratelimit))
            )),
            "`__ratelimit` is reserved by `#[rate_limit]` and cannot be used in `key`; rename it"
        );
        assert_eq!(
            error_of(quote!(
                period = 1,
                threshold = 1,
                limiter = &__ratelimit.limiter
            )),
            "`__ratelimit` is reserved by `#[rate_limit]` and cannot be used in `limiter`; \
             rename it"
        );
        assert!(errors(quote!(period = 1, threshold = 1, key = __ratelimit_id)).is_empty());
    }

    #[test]
    fn rate_cost_exempt_decision_and_label() {
        let args = parse(quote!(
            rate = plan.rate(),
            key = user,
            cost = items.len(),
            exempt = caller.is_internal(),
            decision = d,
            label = "daily",
        ))
        .unwrap_or_else(|err| panic!("{err}"));
        assert!(matches!(args.rate, RateArg::Expr(_)));
        assert!(matches!(args.cost, Some(CostArg::Expr(_))));
        assert!(args.exempt.is_some());
        assert_eq!(args.decision.map(|d| d.to_string()).as_deref(), Some("d"));
        assert_eq!(args.label.map(|l| l.value()).as_deref(), Some("daily"));
        let literal = parse(quote!(period = 1, threshold = 10, cost = 10)).unwrap();
        assert!(matches!(literal.cost, Some(CostArg::Literal(10))));
        assert!(!literal.is_plain());
    }

    #[test]
    fn rate_excludes_period_and_threshold() {
        assert_eq!(
            error_of(quote!(rate = r, period = 1)),
            "`period` cannot be given with `rate`, whose `Rate` gives the period and the \
             threshold: remove `period`, or remove `rate`"
        );
        assert_eq!(
            error_of(quote!(threshold = 1, rate = r)),
            "`threshold` cannot be given with `rate`, whose `Rate` gives the period and the \
             threshold: remove `threshold`, or remove `rate`"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, rate = r)),
            "`period` cannot be given with `rate`, whose `Rate` gives the period and the \
             threshold: remove `period` and `threshold`, or remove `rate`"
        );
    }

    #[test]
    fn literal_costs_are_checked() {
        assert_eq!(
            error_of(quote!(period = 1, threshold = 5, cost = 0)),
            "`cost = 0` never counts a call, so this limit could never deny; remove `cost` \
             (a call costs 1) or remove the limit"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 5, cost = 6)),
            "`cost = 6` is above `threshold = 5`: no window could ever admit the call"
        );
        assert!(errors(quote!(period = 1, threshold = 5, cost = 5)).is_empty());
        assert_eq!(
            error_of(quote!(period = 1, threshold = 20000, cost = 10001)),
            "`cost` must be at most 10000 under a sliding window log, which records a call of \
             cost `c` as `c` entries; for larger costs (tokens, bytes) use `algorithm = \
             \"sliding_window_counter\"`, whose cost is a number added to a count"
        );
        // A counter adds any cost up to its threshold; a `Rate` expression may be either, and
        // the call is checked when it is made.
        assert!(
            errors(quote!(
                period = 1,
                threshold = 20000,
                cost = 20000,
                algorithm = "sliding_window_counter"
            ))
            .is_empty()
        );
        assert!(errors(quote!(rate = r, cost = 10001)).is_empty());
        assert_eq!(
            error_of(quote!(rate = r, cost = 4294967296)),
            "`cost` must be at most 4294967295 (2^32 - 1), the largest threshold"
        );
        assert_eq!(
            error_of(quote!(rate = r, cost = -1)),
            "`cost` cannot be negative; it must be at least 1"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, cost = 1, cost = 1)),
            "duplicate `cost` argument"
        );
    }

    #[test]
    fn lease_is_a_flag_of_a_fixed_rate() {
        let leased = parse(quote!(period = 1, threshold = 1000, lease = true)).unwrap();
        assert!(matches!(leased.rate, RateArg::Fixed { leased: true, .. }));
        let plain = parse(quote!(period = 1, threshold = 1000, lease = false)).unwrap();
        assert!(matches!(plain.rate, RateArg::Fixed { leased: false, .. }));
        assert!(
            error_of(quote!(period = 1, threshold = 5, lease = 1))
                .starts_with("`lease` must be `true` or `false`")
        );
    }

    #[test]
    fn algorithm_names_one_of_two() {
        let counter = parse(quote!(
            period = 1,
            threshold = 5,
            algorithm = "sliding_window_counter"
        ))
        .unwrap();
        assert!(matches!(counter.rate, RateArg::Fixed { counter: true, .. }));
        let log = parse(quote!(
            period = 1,
            threshold = 5,
            algorithm = "sliding_window_log"
        ))
        .unwrap();
        assert!(matches!(log.rate, RateArg::Fixed { counter: false, .. }));
        assert!(
            error_of(quote!(period = 1, threshold = 5, algorithm = "counter")).starts_with(
                "unknown `algorithm` `\"counter\"` (did you mean `\"sliding_window_counter\"`?)"
            )
        );
        assert!(
            error_of(quote!(period = 1, threshold = 5, algorithm = counter))
                .starts_with("`algorithm` must be a string literal")
        );
        assert!(
            error_of(quote!(rate = r, algorithm = "sliding_window_counter"))
                .starts_with("`algorithm` cannot be given with `rate`")
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 5, strategy = "x")),
            "unknown argument `strategy`; did you mean `algorithm`?"
        );
    }

    #[test]
    fn decision_and_label_take_a_name_and_a_string() {
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, decision = a.b)),
            "`decision` takes the name the body reads the decisions by, e.g. `decision = d`"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, decision = __ratelimit)),
            "`__ratelimit` is reserved by `#[rate_limit]`; choose another name"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, label = burst)),
            "`label` must be a string literal, e.g. `label = \"burst\"`"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, label = "")),
            "`label` must be non-empty printable ASCII: it is sent to clients in the \
             `RateLimit` fields"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, label = "é")),
            "`label` must be non-empty printable ASCII: it is sent to clients in the \
             `RateLimit` fields"
        );
    }

    #[test]
    fn wait_takes_a_duration() {
        let args = parse(quote!(period = 1, threshold = 1, wait = "30s")).unwrap();
        assert_eq!(args.wait.as_ref().map(|(us, _)| *us), Some(30_000_000));
        assert!(args.is_plain(), "a wait keeps the plain form");
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, wait = "0s")),
            "`wait` must be at least 1 ms"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, wait = "36526d")),
            "`wait` must be at most 100 years (3155760000 s)"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, wait = 1.5)),
            "`wait` takes whole seconds; write `wait = \"1500ms\"`"
        );
        assert_eq!(
            error_of(quote!(period = 1, threshold = 1, wait = forever)),
            "`wait` must be an integer number of seconds or a duration string, e.g. \
             `wait = 60` or `wait = \"1500ms\"`"
        );
    }

    #[test]
    fn a_limiter_made_on_every_call_is_refused() {
        for tokens in [
            quote!(period = 1, threshold = 1, limiter = &Limiter::memory()),
            quote!(period = 1, threshold = 1, limiter = Limiter::memory()),
            quote!(
                period = 1,
                threshold = 1,
                limiter = &ratelimit_runtime::Limiter::memory()
            ),
            quote!(
                period = 1,
                threshold = 1,
                limiter = &Limiter::builder().build().unwrap()
            ),
            quote!(
                period = 1,
                threshold = 1,
                limiter = &Limiter::builder().build()?
            ),
        ] {
            let message = error_of(tokens.clone());
            assert!(
                message.contains("none is ever denied"),
                "{tokens}: {message}"
            );
            assert!(message.contains("LazyLock"), "{message}");
        }
        for tokens in [
            quote!(period = 1, threshold = 1, limiter = &LIMITER),
            quote!(period = 1, threshold = 1, limiter = &self.limiter),
            quote!(period = 1, threshold = 1, limiter = limiter()),
            quote!(period = 1, threshold = 1, limiter = &*LIMITER),
            quote!(period = 1, threshold = 1, limiter = state.limiter()),
        ] {
            assert!(errors(tokens.clone()).is_empty(), "{tokens}");
        }
    }
}
