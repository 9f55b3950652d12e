//! The stored key layout of the attribute's and the layers' limits, written and read in this
//! one place: the writers (`push_escaped`, [`Form`] and `push_limit_key`, `several_rates_key`,
//! `rate_names` and `rate_key`) that `__private::scoped_key`, `__private::Stack` and the axum
//! layer build their keys with, and the reader ([`ScopeKeys`]) by which
//! [`Limiter::reset_scope`](crate::Limiter::reset_scope) forgets every limit of a function, a
//! `name` or a layer's scope for one caller.
//!
//! Every free-text component (a scope: a `name` or a function's path; a caller's key; a
//! layer's label) is written escaped, `E(text)`: `\` → `\\`, `/` → `\/`, `@` → `\@`,
//! `#` → `\#`, `{` → `\(`, `}` → `\)`, everything else as is (`app::search`, `user:42`). So
//! `E(text)` holds no brace, every raw `/`, `@` or `#` in it follows an odd run of
//! backslashes, and it ends with an even run: the layout's own `/`, `@`, `#`, `{` and `}`
//! cannot be told for a component's, and the stored keys, before the Redis key prefix, are
//! injective:
//!
//! - one attribute: `E(scope)`, or `E(scope)/E(key)` with a key; `rate = expr` appends
//!   `@<window>` (`login@15m`, `app::export/42@1h`);
//! - stacked, keyed: `#E(name)/{E(key)}@<window>`, or `#E(function)#<position>/{E(key)}@<window>`
//!   without a `name`; keyless: `#{E(name)}@<window>`, `#{E(function)}#<position>@<window>`;
//! - the axum layer on a scope set by `.scope(..)`: one rate `E(scope)/E(key)` (one
//!   attribute's form), several rates `{E(scope)/E(key)}@E(label)`; on the default scope
//!   `layer`, each rate `{E(scope)/E(key)}@<threshold>/<window>` (`{layer/alice}@100/1s`),
//!   with `-<nth>` after it for the `nth` (from 2) of one layer's rates named alike;
//! - a concurrency limit's slots: its form's key without a window, then `@slots` in its
//!   place (`export/42@slots`, `#export#2/{42}@slots`); a layer's on the default scope
//!   `{E(scope)/E(key)}@<max>/slots`, and on a scope of its own the form of several rates
//!   with the label `concurrency` ([`SLOTS`]); so that no rate's log is ever a concurrency
//!   limit's slots;
//! - a sliding window counter's Redis hash: its limit's key and [`COUNTER_SUFFIX`], `#swc`.
//!
//! A `<window>` is a period as `write_window` writes it: digits and one of `us`, `ms`, `s`,
//! `m`, `h`, `d`; a `<threshold>` and a `<position>` (the stacked attribute's, from 1) are
//! digits. After a layer's `}@`, a raw `/` tells a rate from a label, whose `E` has none. A
//! stacked keyed limit's hash tag is `E(key)`, the key itself when it holds none of the escaped
//! characters (`{alice}`); a layer's tagged keys', `E(scope)/E(key)`.
//! Keys given by hand to [`Limiter::check`](crate::Limiter::check) are the caller's own text,
//! unescaped: the caller's key space.

use std::borrow::Cow;
use std::fmt::{self, Display, Write as _};
use std::ops::Range;
use std::time::Duration;

use crate::decisions::{MAX_WINDOW_LEN, write_window};
#[cfg(any(feature = "axum", test))]
use crate::rate::Rate;

/// What a sliding window counter's key has after the key its limit names, in Redis: the
/// counter is a hash, the log a sorted set, and one key cannot hold both (`WRONGTYPE`). The
/// in-process store keeps the two apart without it. A raw `#` after an even run of
/// backslashes, which no key of the attribute or the layers ends with.
pub(crate) const COUNTER_SUFFIX: &str = "#swc";

/// Whether `key` (as a check names it, before the Redis key prefix) may be the name a
/// counter's hash takes in Redis: the counter of the key without [`COUNTER_SUFFIX`].
///
/// A key of the attribute or the layers (`escaped`) ends so only after an even run of
/// backslashes: its own `#` is escaped, so `E(text)\#swc` names no counter of theirs. A key
/// given by hand is the caller's text, unescaped: whatever comes before the suffix may end
/// a key of its own (`user:evil\#swc` is the counter of `user:evil\`), so any such key is
/// one.
pub(crate) fn is_counter_name(key: &str, escaped: bool) -> bool {
    key.strip_suffix(COUNTER_SUFFIX).is_some_and(|rest| {
        !escaped || rest.bytes().rev().take_while(|&byte| byte == b'\\').count() % 2 == 0
    })
}

/// What the keys of the limits shared through Redis (the registry in Redis: its entries and its
/// change log) start with, before the Redis key prefix: one hash tag, so one Cluster slot.
/// No key of the attribute or the layers starts so: `E(text)` holds no brace, a stacked key
/// starts with `#`, and a layer's tag holds the raw `/` between its scope and its key. A key
/// given by hand that starts so is refused ([`is_reserved`]).
pub(crate) const REGISTRY_TAG: &str = "{registry}";

/// Whether `key` (as a check, a look or a reset names it, before the Redis key prefix) is one
/// the Redis store keeps for itself: a counter's hash ([`is_counter_name`]), or one of the
/// shared registry's keys ([`REGISTRY_TAG`]).
pub(crate) fn is_reserved(key: &str, escaped: bool) -> bool {
    key.starts_with(REGISTRY_TAG) || is_counter_name(key, escaped)
}

/// Between a scope and its key.
const KEY: char = '/';
/// Before a window (or a layer's label).
const WINDOW: char = '@';
/// Before a stacked key, and before a stacked limit's position.
const STACKED: char = '#';

/// Whether the escape writes `byte` as two bytes.
#[inline]
fn is_special(byte: u8) -> bool {
    matches!(byte, b'\\' | b'/' | b'@' | b'#' | b'{' | b'}')
}

/// What the escape writes after its backslash for the special `byte`.
#[inline]
fn escaped(byte: u8) -> char {
    match byte {
        b'{' => '(',
        b'}' => ')',
        other => char::from(other),
    }
}

/// The length of `E(text)`: one byte scan.
#[inline]
pub(crate) fn escaped_len(text: &str) -> usize {
    text.len() + text.bytes().filter(|&byte| is_special(byte)).count()
}

/// Appends `E(text)` to `out`, without allocating beyond `out`'s growth: a text without a
/// special character is one byte scan and one copy.
#[inline]
pub(crate) fn push_escaped(out: &mut String, text: &str) {
    let mut rest = text;
    // The special characters are ASCII: their byte indices are char boundaries.
    while let Some(at) = rest.bytes().position(is_special) {
        out.push_str(&rest[..at]);
        out.push('\\');
        out.push(escaped(rest.as_bytes()[at]));
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

/// A `fmt::Write` that appends what is written to it escaped: a `Display` key written as
/// `E(key)` as it is formatted.
pub(crate) struct Escaping<'a>(pub(crate) &'a mut String);

impl fmt::Write for Escaping<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        push_escaped(self.0, text);
        Ok(())
    }
}

/// A `fmt::Write` that counts the bytes of `E(what is written)`, without allocating.
struct EscapedLen(usize);

impl fmt::Write for EscapedLen {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.0 += escaped_len(text);
        Ok(())
    }
}

/// The length of `E(value's Display output)`, without allocating (the value is formatted).
pub(crate) fn escaped_display_len<T: Display + ?Sized>(value: &T) -> usize {
    let mut counter = EscapedLen(0);
    // Only a Display impl that reports an error fails; what it wrote is counted.
    let _ = write!(counter, "{value}");
    counter.0
}

/// Appends `E(value's Display output)` to `out`, returning where it lies in `out`.
fn push_escaped_display<T: Display + ?Sized>(out: &mut String, value: &T) -> Range<usize> {
    let start = out.len();
    // Writing to a String only fails if the Display impl itself reports an error.
    let _ = write!(Escaping(out), "{value}");
    start..out.len()
}

/// `E(text)`, borrowed when `text` holds no special character (most keys and scopes).
pub(crate) fn escape_key(text: &str) -> Cow<'_, str> {
    if !text.bytes().any(is_special) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(escaped_len(text));
    push_escaped(&mut escaped, text);
    Cow::Owned(escaped)
}

/// `E(text)` of a text borrowed or owned: as [`escape_key`], the same one when it holds no
/// special character.
pub(crate) fn escape_key_cow(text: Cow<'_, str>) -> Cow<'_, str> {
    match escape_key(&text) {
        Cow::Borrowed(_) => text,
        Cow::Owned(escaped) => Cow::Owned(escaped),
    }
}

/// The text `escaped` is `E` of (any text: a backslash escapes the character after it).
pub(crate) fn unescape(escaped: &str) -> Cow<'_, str> {
    if !escaped.contains('\\') {
        return Cow::Borrowed(escaped);
    }
    let mut text = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        text.push(match c {
            '\\' => match chars.next() {
                Some('(') => '{',
                Some(')') => '}',
                Some(other) => other,
                None => break,
            },
            c => c,
        });
    }
    Cow::Owned(text)
}

/// `text` after `E(raw)`, if it starts with it.
fn strip_escaped<'t>(text: &'t str, raw: &str) -> Option<&'t str> {
    // Most scopes have no special character, and are their own escape.
    if !raw.bytes().any(is_special) {
        return text.strip_prefix(raw);
    }
    let mut rest = text.as_bytes();
    for &byte in raw.as_bytes() {
        rest = if is_special(byte) {
            rest.strip_prefix(b"\\")?
                .strip_prefix(&[escaped(byte) as u8][..])?
        } else {
            rest.strip_prefix(&[byte][..])?
        };
    }
    // `rest` is a suffix of `text` cut after a whole `E(raw)`, at a char boundary.
    Some(&text[text.len() - rest.len()..])
}

/// The caller's key of `stored`, the key of one attribute or a layer of one rate in `scope`
/// (`E(scope)/E(key)`), unescaped; `None` for a key not of that form (the scope alone, a
/// stacked key, a key given by hand).
pub(crate) fn unscoped<'k>(scope: &str, stored: &'k str) -> Option<Cow<'k, str>> {
    // Most scopes and keys hold no special character: then a stored key without a backslash
    // escaped nothing (an escape always writes one), so `E(key)` is the key, and one
    // comparison finds it.
    if let Some(key) = stored.strip_prefix(scope)
        && !key.bytes().any(|byte| byte == b'\\')
        && !scope.bytes().any(is_special)
    {
        return key.strip_prefix(KEY).map(Cow::Borrowed);
    }
    let key = strip_escaped(stored, scope)?.strip_prefix(KEY)?;
    Some(unescape(key))
}

/// What a concurrency limit's key has where a rate's has its window: `@slots`, which no
/// window is (a window is digits and a unit).
pub(crate) const SLOTS: &str = "slots";

/// Appends a concurrency limit's tail, `@slots`, to its form's key (written without a
/// window).
pub(crate) fn push_slots(out: &mut String) {
    out.push(WINDOW);
    out.push_str(SLOTS);
}

/// Which of the attribute's forms a limit's key takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Form {
    /// One attribute: `E(scope)` or `E(scope)/E(key)`.
    One,
    /// A stacked attribute: `#E(scope)/{E(key)}` or `#{E(scope)}`, its position (`None` for a
    /// named limit) after the scope, `#<position>`.
    Stacked(Option<usize>),
}

/// The most bytes [`push_limit_key`] writes besides the escaped scope and key.
pub(crate) const LIMIT_KEY_OVERHEAD: usize = 1 + 1 + 20 + 3 + 1 + MAX_WINDOW_LEN;

/// Appends the key of a limit of `form` in `scope` (a `name` or a function's path), keyed by
/// `key`'s `Display` output, with the `window` of `period` (always for a stacked limit; for one
/// attribute with `rate = expr`), as the [module](self) lays it out. Returns where `E(key)`
/// lies in `out`.
pub(crate) fn push_limit_key<K: Display + ?Sized>(
    out: &mut String,
    form: Form,
    scope: &str,
    key: Option<&K>,
    window: Option<Duration>,
) -> Option<Range<usize>> {
    let push_position = |out: &mut String| {
        if let Form::Stacked(Some(position)) = form {
            let _ = write!(out, "{STACKED}{position}");
        }
    };
    let caller_key = match (form, key) {
        (Form::One, None) => {
            push_escaped(out, scope);
            None
        }
        (Form::One, Some(key)) => {
            push_escaped(out, scope);
            out.push(KEY);
            Some(push_escaped_display(out, key))
        }
        (Form::Stacked(_), None) => {
            // The function's unnamed limits without a key share one tag, and one slot.
            out.push(STACKED);
            out.push('{');
            push_escaped(out, scope);
            out.push('}');
            push_position(out);
            None
        }
        (Form::Stacked(_), Some(key)) => {
            out.push(STACKED);
            push_escaped(out, scope);
            push_position(out);
            out.push(KEY);
            out.push('{');
            let range = push_escaped_display(out, key);
            out.push('}');
            Some(range)
        }
    };
    if let Some(period) = window {
        out.push(WINDOW);
        write_window(out, period);
    }
    caller_key
}

/// The key of one rate among a layer's several: `{<scoped>}@E(label)`, where `scoped` is the
/// layer's key of one rate (`E(scope)/E(key)`, from `__private::scoped_key`), the hash tag
/// that puts a request's limits in one Redis Cluster slot.
#[cfg(any(feature = "axum", test))]
pub(crate) fn several_rates_key(scoped: &str, label: &str) -> String {
    let mut key = String::with_capacity(scoped.len() + 3 + escaped_len(label));
    key.push('{');
    key.push_str(scoped);
    key.push('}');
    key.push(WINDOW);
    push_escaped(&mut key, label);
    key
}

/// A rate as a layer's keys on the default scope name it: `<threshold>/<window>` (`100/1s`),
/// and `-<nth>` after it for the `nth` (from 2) of one layer's rates named alike.
#[cfg(any(feature = "axum", test))]
fn rate_name(rate: Rate, nth: usize) -> String {
    let mut name = String::with_capacity(RATE_NAME_MAX_LEN);
    // Writing to a String cannot fail.
    let _ = write!(name, "{}{KEY}", rate.threshold());
    if rate.is_concurrency() {
        // `<max>/slots`: never a rate's name.
        name.push_str(SLOTS);
    } else {
        write_window(&mut name, rate.period());
    }
    if nth > 1 {
        let _ = write!(name, "-{nth}");
    }
    name
}

/// The most bytes [`rate_name`] writes below a thousand rates alike: a threshold's 10 digits,
/// the `/`, a window, `-<nth>`.
#[cfg(any(feature = "axum", test))]
const RATE_NAME_MAX_LEN: usize = 10 + 1 + MAX_WINDOW_LEN + 4;

/// The names [`rate_name`] gives a layer's `rates`, in their order: each rate's, `-2` after
/// the second of one threshold and period, `-3` after the third...
#[cfg(any(feature = "axum", test))]
pub(crate) fn rate_names(rates: &[Rate]) -> Vec<String> {
    let alike = |a: &Rate, b: &Rate| rate_name(*a, 1) == rate_name(*b, 1);
    rates
        .iter()
        .enumerate()
        .map(|(i, rate)| {
            let earlier = rates[..i].iter().filter(|other| alike(other, rate)).count();
            rate_name(*rate, earlier + 1)
        })
        .collect()
}

/// The key of a layer's rate named `name` (from [`rate_names`]) on the default scope,
/// `{E(scope)/E(key)}@<name>`, allocated at its final size: its hash tag, the caller's, puts a
/// request's limits in one Redis Cluster slot.
#[cfg(any(feature = "axum", test))]
pub(crate) fn rate_key(scope: &str, key: &str, name: &str) -> String {
    let mut stored = String::with_capacity(escaped_len(scope) + escaped_len(key) + 4 + name.len());
    stored.push('{');
    push_escaped(&mut stored, scope);
    stored.push(KEY);
    push_escaped(&mut stored, key);
    stored.push('}');
    stored.push(WINDOW);
    stored.push_str(name);
    stored
}

/// The logs the attribute and the layers keep for `scope` (a `name`, a function's path, a
/// layer's scope) and `key` (the `key` argument's value, a layer's key; `None`: limits
/// without a key), before the Redis key prefix, in the [module](self)'s layout:
/// `E(scope)[/E(key)]`, also with `@<window>`; stacked,
/// `#E(scope)[#<position>]/{E(key)}@<window>` or `#{E(scope)}[#<position>]@<window>`; a
/// layer's of several rates, `{E(scope)/E(key)}@E(label)`, or on the default scope
/// `{E(scope)/E(key)}@<threshold>/<window>[-<nth>]`; and the counter of each (with
/// [`COUNTER_SUFFIX`]). A layer's keys of one rate on a scope set by `.scope(..)` are one
/// attribute's form.
pub(crate) struct ScopeKeys {
    /// `E(scope)`.
    scope: String,
    /// `E(key)`.
    key: Option<String>,
    /// `E(scope)` or `E(scope)/E(key)`.
    plain: String,
}

impl ScopeKeys {
    /// The logs of `scope` and `key`.
    pub(crate) fn new(scope: &str, key: Option<&str>) -> ScopeKeys {
        let mut escaped_scope = String::with_capacity(escaped_len(scope));
        push_escaped(&mut escaped_scope, scope);
        let mut plain = String::new();
        let range = push_limit_key(&mut plain, Form::One, scope, key, None);
        let key = range.map(|range| plain[range].to_owned());
        ScopeKeys {
            scope: escaped_scope,
            key,
            plain,
        }
    }

    /// The one key without a window: `E(scope)` or `E(scope)/E(key)` (the plain form's).
    pub(crate) fn plain(&self) -> &str {
        &self.plain
    }

    /// Glob patterns (for Redis `SCAN ... MATCH`, after the escaped key prefix) that every
    /// other log and counter of the scope and key matches, each with a key of the same hash
    /// tag as every key it finds, when they share one (the stacked forms, whose tag is the
    /// key or the scope, not when that tag would be empty; a layer's tagged forms, whose tag
    /// is the plain key); [`matches`](ScopeKeys::matches) tells which of the keys they find
    /// are.
    pub(crate) fn patterns(&self) -> Vec<(String, Option<String>)> {
        let scope = escape(&self.scope);
        let plain = escape(&self.plain);
        // The plain key's own counter (`#swc`) and the windowed logs (`@`) and their counters.
        let one = (format!("{plain}[{WINDOW}{STACKED}]*"), None);
        match &self.key {
            Some(key) => {
                // An empty tag (`{}`) makes Redis hash the whole key.
                let exemplar =
                    (!key.is_empty()).then(|| format!("{STACKED}{}{KEY}{{{key}}}", self.scope));
                let key = escape(key);
                vec![
                    one,
                    (
                        format!("{STACKED}{scope}*{KEY}{{{key}}}{WINDOW}*"),
                        exemplar,
                    ),
                    // Never an empty tag: it holds the `/`.
                    (
                        format!("{{{plain}}}{WINDOW}*"),
                        Some(format!("{{{}}}", self.plain)),
                    ),
                ]
            }
            None => {
                let exemplar =
                    (!self.scope.is_empty()).then(|| format!("{STACKED}{{{}}}", self.scope));
                vec![one, (format!("{STACKED}{{{scope}}}*"), exemplar)]
            }
        }
    }

    /// Whether `stored` (a key before the Redis prefix) is one of the scope and key's logs,
    /// or the counter of one (the same key with [`COUNTER_SUFFIX`] after it).
    pub(crate) fn matches(&self, stored: &str) -> bool {
        self.matches_log(stored)
            || stored
                .strip_suffix(COUNTER_SUFFIX)
                .is_some_and(|log| self.matches_log(log))
    }

    /// Whether `stored` is one of the scope and key's logs.
    fn matches_log(&self, stored: &str) -> bool {
        // A window, or a concurrency limit's `slots` in its place.
        let windowed = |rest: Option<&str>| {
            rest.and_then(|rest| rest.strip_prefix(WINDOW))
                .is_some_and(|tail| is_window(tail) || tail == SLOTS)
        };
        if stored
            .strip_prefix(self.plain.as_str())
            .is_some_and(|rest| rest.is_empty() || windowed(Some(rest)))
        {
            return true;
        }
        if let Some(tail) = self.tagged_tail(stored) {
            return is_escaped(tail) || is_rate_name(tail);
        }
        let Some(rest) = stored.strip_prefix(STACKED) else {
            return false;
        };
        match &self.key {
            Some(key) => {
                let Some(rest) = rest.strip_prefix(self.scope.as_str()) else {
                    return false;
                };
                windowed(
                    skip_position(rest)
                        .strip_prefix(KEY)
                        .and_then(|rest| rest.strip_prefix('{'))
                        .and_then(|rest| rest.strip_prefix(key.as_str()))
                        .and_then(|rest| rest.strip_prefix('}')),
                )
            }
            None => {
                let rest = rest
                    .strip_prefix('{')
                    .and_then(|rest| rest.strip_prefix(self.scope.as_str()))
                    .and_then(|rest| rest.strip_prefix('}'));
                windowed(rest.map(skip_position))
            }
        }
    }

    /// What follows `{E(scope)/E(key)}@` in `stored`, a layer's tagged key of the scope and
    /// key, if it is one (never without a key).
    fn tagged_tail<'s>(&self, stored: &'s str) -> Option<&'s str> {
        self.key.as_ref()?;
        stored
            .strip_prefix('{')?
            .strip_prefix(self.plain.as_str())?
            .strip_prefix('}')?
            .strip_prefix(WINDOW)
    }
}

/// Whether `text` is `E` of some text: each `\` escapes one of `\`, `/`, `@`, `#`, `(`, `)`,
/// and no special character is raw.
fn is_escaped(text: &str) -> bool {
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        let valid = match byte {
            b'\\' => matches!(bytes.next(), Some(b'\\' | b'/' | b'@' | b'#' | b'(' | b')')),
            byte => !is_special(byte),
        };
        if !valid {
            return false;
        }
    }
    true
}

/// Whether `text` is a rate's name as [`rate_name`] writes one (`100/1s`, `5/1h-2`, a
/// concurrency limit's `4/slots`).
fn is_rate_name(text: &str) -> bool {
    let is_number = |text: &str| {
        !text.is_empty() && !text.starts_with('0') && text.bytes().all(|b| b.is_ascii_digit())
    };
    let Some((threshold, rest)) = text.split_once(KEY) else {
        return false;
    };
    let (window, nth) = match rest.split_once('-') {
        Some((window, nth)) => (window, Some(nth)),
        None => (rest, None),
    };
    is_number(threshold)
        && (is_window(window) || window == SLOTS)
        && nth.is_none_or(|nth| is_number(nth) && nth != "1")
}

/// `rest` after a stacked limit's `#<position>`, if it starts with one.
fn skip_position(rest: &str) -> &str {
    match rest.strip_prefix(STACKED) {
        Some(position) => {
            let digits = position.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0 {
                &position[digits..]
            } else {
                rest
            }
        }
        None => rest,
    }
}

/// Whether `text` is a window as the layout writes one (`90s`, `1500ms`, `1d`).
fn is_window(text: &str) -> bool {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && matches!(&text[digits..], "us" | "ms" | "s" | "m" | "h" | "d")
}

/// `text` with Redis glob's special characters escaped, so that it matches only itself.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;
    use proptest::sample::select;

    use super::*;
    use crate::__private::scoped_key;

    /// A key written by `form` (no key when `key` is `None`), with a window or not.
    fn limit_key(form: Form, scope: &str, key: Option<&str>, window: Option<Duration>) -> String {
        let mut out = String::new();
        push_limit_key(&mut out, form, scope, key, window);
        out
    }

    const HOUR: Duration = Duration::from_secs(3_600);

    #[test]
    fn hand_keys_that_name_a_counter_are_told_apart_from_escaped_ones() {
        for escaped in [false, true] {
            assert!(is_counter_name("user:42#swc", escaped));
            assert!(is_counter_name("#swc", escaped));
            assert!(is_counter_name(r"a\\#swc", escaped));
            assert!(!is_counter_name("user:42", escaped));
            assert!(!is_counter_name("user:42swc", escaped));
        }
        // By hand, after any run of backslashes: `a\#swc` is the counter of the hand key `a\`.
        assert!(is_counter_name(r"a\#swc", false));
        // The attribute's keys escape a key's `#`: their `\#swc` ends no counter's name.
        let stored = crate::__private::scoped_key("login", "bob#swc");
        assert!(stored.ends_with(COUNTER_SUFFIX));
        assert!(!is_counter_name(&stored, true), "{stored}");
    }
    #[test]
    fn the_layout_escapes_every_free_text_component() {
        let minute = Some(Duration::from_secs(60));
        assert_eq!(
            limit_key(Form::One, "app::search", Some("user:42"), None),
            "app::search/user:42"
        );
        assert_eq!(
            limit_key(
                Form::One,
                "login",
                None::<&str>,
                Some(Duration::from_secs(900))
            ),
            "login@15m"
        );
        assert_eq!(
            limit_key(Form::One, "app::export", Some("42"), Some(HOUR)),
            "app::export/42@1h"
        );
        assert_eq!(
            limit_key(
                Form::Stacked(Some(1)),
                "app::{{closure}}::f",
                Some("u"),
                minute
            ),
            r"#app::\(\(closure\)\)::f#1/{u}@1m"
        );
        assert_eq!(
            limit_key(Form::Stacked(Some(2)), "app::{{closure}}::f", None, minute),
            r"#{app::\(\(closure\)\)::f}#2@1m"
        );
        assert_eq!(
            limit_key(Form::Stacked(None), "api", Some("}x{"), minute),
            r"#api/{\)x\(}@1m"
        );
        assert_eq!(
            limit_key(Form::Stacked(None), "login", None, minute),
            "#{login}@1m"
        );
        assert_eq!(
            limit_key(Form::One, r"a\b/c@d#e", Some(r"{k}/@#\"), None),
            r"a\\b\/c\@d\#e/\(k\)\/\@\#\\"
        );
        assert_eq!(
            several_rates_key(&scoped_key("api", "k"), "1h"),
            "{api/k}@1h"
        );
        assert_eq!(
            several_rates_key(&scoped_key("api", "k"), "1h-2"),
            "{api/k}@1h-2"
        );
        let rate = |threshold, secs| Rate::new(threshold, Duration::from_secs(secs)).unwrap();
        let counter = rate(100, 1).with_algorithm(crate::rate::Algorithm::SlidingWindowCounter);
        assert_eq!(
            rate_names(&[
                rate(100, 1),
                rate(5, 3_600),
                rate(100, 1),
                counter,
                rate(5, 60)
            ]),
            ["100/1s", "5/1h", "100/1s-2", "100/1s-3", "5/1m"]
        );
        let stored = rate_key("layer", "alice", "100/1s");
        assert_eq!(stored, "{layer/alice}@100/1s");
        assert_eq!(stored.capacity(), stored.len());
        assert_eq!(
            rate_key("layer", "a/b@c{", "5/1h-2"),
            r"{layer/a\/b\@c\(}@5/1h-2"
        );
        // A label is escaped: its `/` is no rate's.
        assert_ne!(
            rate_key("api", "k", "1/1h"),
            several_rates_key(&scoped_key("api", "k"), "1/1h")
        );
        // The collisions of the layout `<scope>:<key>` are gone.
        assert_ne!(
            limit_key(Form::One, "login", Some("bob:1h"), None),
            limit_key(Form::One, "login", Some("bob"), Some(HOUR))
        );
        assert_ne!(scoped_key("api", "v2:alice"), scoped_key("api:v2", "alice"));
        assert_ne!(
            format!("{}{COUNTER_SUFFIX}", scoped_key("s", "a")),
            scoped_key("s", "a#swc")
        );
        assert_ne!(
            limit_key(Form::Stacked(None), "a{b", Some("k"), minute),
            limit_key(Form::Stacked(None), "a(b", Some("k"), minute)
        );
    }

    #[test]
    fn unscoped_and_unescape_give_the_callers_key_back() {
        for (scope, key) in [("app::login", "user:7"), ("a{b}", r"x/y@z#\{}"), ("", "")] {
            let scoped = scoped_key(scope, key);
            assert_eq!(unscoped(scope, &scoped).as_deref(), Some(key), "{scoped}");
        }
        assert!(matches!(
            unscoped("s", "s/plain"),
            Some(Cow::Borrowed("plain"))
        ));
        assert_eq!(unscoped("s", "s"), None);
        assert_eq!(unscoped("s", "#s/{k}@1h"), None);
        assert_eq!(unscoped("s#1", r"s#1/k"), None);
    }

    #[test]
    fn a_scope_and_key_match_every_form_of_their_logs_and_no_other() {
        let keyed = ScopeKeys::new("app::{{closure}}::search", Some("alice"));
        for stored in [
            r"app::\(\(closure\)\)::search/alice",
            r"app::\(\(closure\)\)::search/alice@1h",
            r"app::\(\(closure\)\)::search/alice#swc",
            r"app::\(\(closure\)\)::search/alice@1h#swc",
            r"#app::\(\(closure\)\)::search#1/{alice}@1s",
            r"#app::\(\(closure\)\)::search#12/{alice}@1500ms",
            r"#app::\(\(closure\)\)::search/{alice}@1d#swc",
            r"{app::\(\(closure\)\)::search/alice}@1h",
            r"{app::\(\(closure\)\)::search/alice}@1h-2#swc",
            r"{app::\(\(closure\)\)::search/alice}@\(\\\)",
            r"{app::\(\(closure\)\)::search/alice}@100/1s",
            r"{app::\(\(closure\)\)::search/alice}@5/1h-2#swc",
        ] {
            assert!(keyed.matches(stored), "{stored}");
        }
        for stored in [
            r"app::\(\(closure\)\)::search/alicia",
            r"app::\(\(closure\)\)::search/alice@x",
            r"app::\(\(closure\)\)::search/alice@1h@2",
            r"app::\(\(closure\)\)::search/alice\#swc",
            r"app::\(\(closure\)\)::search/alice:1h",
            r"#app::\(\(closure\)\)::search#1/{alice2}@1s",
            r"#app::\(\(closure\)\)::searches/{alice}@1s",
            r"#app::\(\(closure\)\)::search#/{alice}@1s",
            r"#app::\(\(closure\)\)::search\#1/{alice}@1s",
            r"#{app::\(\(closure\)\)::search}#1@1s",
            r"{app::\(\(closure\)\)::search/alicia}@1h",
            r"{app::\(\(closure\)\)::search/alice}1h",
            r"{app::\(\(closure\)\)::search/alice}@1h}",
            r"{app::\(\(closure\)\)::search/alice}@1h\",
            r"{app::\(\(closure\)\)::search/alice}@\x",
            r"{app::\(\(closure\)\)::search/alice}@100/1s-1",
            r"{app::\(\(closure\)\)::search/alice}@100/1s-02",
            r"{app::\(\(closure\)\)::search/alice}@100/1s-",
            r"{app::\(\(closure\)\)::search/alice}@0100/1s",
            r"{app::\(\(closure\)\)::search/alice}@/1s",
            r"{app::\(\(closure\)\)::search/alice}@100/",
            r"{app::\(\(closure\)\)::search/alice}@100/1x",
            r"{app::\(\(closure\)\)::search/alice}@100/1s/2",
            r"{app::\(\(closure\)\)::search/alicia}@100/1s",
        ] {
            assert!(!keyed.matches(stored), "{stored}");
        }
        let named = ScopeKeys::new("login", None);
        for stored in [
            "login",
            "login@15m",
            "login#swc",
            "#{login}@1d",
            "#{login}#2@1d",
        ] {
            assert!(named.matches(stored), "{stored}");
        }
        for stored in [
            "login/alice",
            "login2",
            "login:15m",
            "#login/{x}@1d",
            "#{login}x@1d",
            "{login}@1h",
        ] {
            assert!(!named.matches(stored), "{stored}");
        }
        let globs = |keys: &ScopeKeys| -> Vec<String> {
            keys.patterns().into_iter().map(|(glob, _)| glob).collect()
        };
        assert_eq!(
            globs(&ScopeKeys::new("a*b", Some("[k]"))),
            [r"a\*b/\[k\][@#]*", r"#a\*b*/{\[k\]}@*", r"{a\*b/\[k\]}@*"]
        );
        assert_eq!(
            globs(&ScopeKeys::new("a{", Some("\\"))),
            [r"a\\(/\\\\[@#]*", r"#a\\(*/{\\\\}@*", r"{a\\(/\\\\}@*"]
        );
        assert_eq!(globs(&named), ["login[@#]*", "#{login}*"]);
        // The stacked and the layer's patterns' keys share the tag of their exemplar, unless
        // it is empty.
        let tags = |keys: &ScopeKeys| -> Vec<Option<String>> {
            keys.patterns().into_iter().map(|(_, tag)| tag).collect()
        };
        assert_eq!(tags(&named), [None, Some("#{login}".to_owned())]);
        assert_eq!(
            tags(&ScopeKeys::new("s", Some("u"))),
            [None, Some("#s/{u}".to_owned()), Some("{s/u}".to_owned())]
        );
        assert_eq!(
            tags(&ScopeKeys::new("s", Some(""))),
            [None, None, Some("{s/}".to_owned())]
        );
        assert_eq!(
            tags(&ScopeKeys::new("s", Some("}x"))),
            [
                None,
                Some(r"#s/{\)x}".to_owned()),
                Some(r"{s/\)x}".to_owned())
            ]
        );
    }

    /// Redis's glob (`stringmatchlen`) for the patterns [`ScopeKeys::patterns`] writes: `*`,
    /// `?`, `[...]` (no ranges) and `\` escapes.
    fn glob_matches(glob: &[u8], text: &[u8]) -> bool {
        match glob.split_first() {
            None => text.is_empty(),
            Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_matches(rest, &text[skip..])),
            Some((b'?', rest)) => !text.is_empty() && glob_matches(rest, &text[1..]),
            Some((b'[', rest)) => {
                let end = rest
                    .iter()
                    .position(|&b| b == b']')
                    .expect("a closed class");
                text.split_first().is_some_and(|(first, text)| {
                    rest[..end].contains(first) && glob_matches(&rest[end + 1..], text)
                })
            }
            Some((b'\\', rest)) => {
                let (&literal, rest) = rest.split_first().expect("an escaped byte");
                text.first() == Some(&literal) && glob_matches(rest, &text[1..])
            }
            Some((&literal, rest)) => {
                text.first() == Some(&literal) && glob_matches(rest, &text[1..])
            }
        }
    }

    /// A Redis Cluster key's hash tag: between the first `{` and the next `}`, if not empty.
    fn hash_tag(key: &str) -> Option<&str> {
        let open = key.find('{')?;
        let close = key[open + 1..].find('}')?;
        Some(&key[open + 1..open + 1 + close]).filter(|tag| !tag.is_empty())
    }

    /// One stored key, as a tuple of what the layout takes apart.
    #[derive(Clone, PartialEq, Eq, Debug)]
    enum Stored {
        /// An attribute's limit (or a layer of one rate: `Form::One` without a window).
        Limit {
            form: Form,
            scope: String,
            key: Option<String>,
            window: Option<Duration>,
        },
        /// An attribute's concurrency limit (or a layer's of no rate on a scope of its own).
        Slots {
            form: Form,
            scope: String,
            key: Option<String>,
        },
        /// A layer of several rates.
        Several {
            scope: String,
            key: String,
            label: String,
        },
        /// A layer's rate on the default scope, the `nth` of the layer's rates named alike.
        Rated {
            scope: String,
            key: String,
            threshold: u64,
            /// `None`: a concurrency limit's slots, `<max>/slots`.
            window: Option<Duration>,
            nth: usize,
        },
    }

    impl Stored {
        fn key(&self) -> String {
            match self {
                Stored::Limit {
                    form,
                    scope,
                    key,
                    window,
                } => limit_key(*form, scope, key.as_deref(), *window),
                Stored::Slots { form, scope, key } => {
                    let mut out = limit_key(*form, scope, key.as_deref(), None);
                    push_slots(&mut out);
                    out
                }
                Stored::Several { scope, key, label } => {
                    several_rates_key(&scoped_key(scope, key), label)
                }
                Stored::Rated {
                    scope,
                    key,
                    threshold,
                    window,
                    nth,
                } => {
                    let rate = match window {
                        Some(window) => Rate::new(*threshold, *window).unwrap(),
                        None => crate::concurrency::Concurrency::new(*threshold)
                            .unwrap()
                            .rate(),
                    };
                    rate_key(scope, key, &rate_name(rate, *nth))
                }
            }
        }
    }

    /// Free text made of the layout's own characters, glob characters and window-like
    /// suffixes, and any char.
    fn text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            6 => select(&[
                ":", "{", "}", "#", "*", "?", "\\", "/", "@", "[", "]", "(", ")", "1h", "15m",
                "swc", "#swc", ":swc", "@1h", ":1h", "\\\\", "#1", "{a}", "a", "b", "\\(", "",
                "{registry}", "registry", "entries",
            ][..])
            .prop_map(str::to_owned),
            1 => any::<char>().prop_map(String::from),
        ];
        proptest::collection::vec(piece, 0..5).prop_map(|pieces| pieces.concat())
    }

    fn stored() -> impl Strategy<Value = (Stored, bool)> {
        let window = select(&[1, 60, 900, 3_600, 86_400][..]).prop_map(Duration::from_secs);
        let form = prop_oneof![
            Just(Form::One),
            Just(Form::Stacked(None)),
            (1_usize..13).prop_map(|position| Form::Stacked(Some(position))),
        ];
        let limit = (
            form.clone(),
            text(),
            proptest::option::of(text()),
            proptest::option::of(window.clone()),
        )
            .prop_map(|(form, scope, key, window)| Stored::Limit {
                form,
                scope,
                key,
                // A stacked limit's key always has its window.
                window: match form {
                    Form::One => window,
                    Form::Stacked(_) => Some(window.unwrap_or(HOUR)),
                },
            });
        let slots = (form.clone(), text(), proptest::option::of(text()))
            .prop_map(|(form, scope, key)| Stored::Slots { form, scope, key });
        let several = (text(), text(), prop_oneof![Just("1h".to_owned()), text()])
            .prop_map(|(scope, key, label)| Stored::Several { scope, key, label });
        let rated = (
            prop_oneof![Just("layer".to_owned()), text()],
            text(),
            select(&[1, 5, 100, 1_000_000, Rate::MAX_THRESHOLD][..]),
            prop_oneof![4 => window.prop_map(Some), 1 => Just(None)],
            prop_oneof![3 => Just(1_usize), 1 => 2_usize..13],
        )
            .prop_map(|(scope, key, threshold, window, nth)| Stored::Rated {
                scope,
                key,
                // A concurrency limit's max is at most `Concurrency::MAX`.
                threshold: if window.is_some() {
                    threshold
                } else {
                    threshold.min(crate::concurrency::Concurrency::MAX)
                },
                window,
                nth,
            });
        // Counter or log.
        (
            prop_oneof![4 => limit, 1 => slots, 1 => several, 1 => rated],
            any::<bool>(),
        )
    }

    fn written((stored, counter): &(Stored, bool)) -> String {
        let mut key = stored.key();
        if *counter {
            key.push_str(COUNTER_SUFFIX);
        }
        key
    }

    /// A character of a stored key: escaped (`\x`) or raw.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Token {
        Escaped(char),
        Raw(char),
    }

    /// Reads `stored` back into what wrote it, by the layout's grammar alone (not by the
    /// writers): a left inverse of [`written`], so that `written` is injective wherever it
    /// gives `read(written(x)) == x`.
    fn read(stored: &str) -> Option<(Stored, bool)> {
        let mut tokens = Vec::new();
        let mut chars = stored.chars();
        while let Some(c) = chars.next() {
            tokens.push(match c {
                '\\' => Token::Escaped(chars.next()?),
                c => Token::Raw(c),
            });
        }
        let suffix = [
            Token::Raw('#'),
            Token::Raw('s'),
            Token::Raw('w'),
            Token::Raw('c'),
        ];
        let counter = tokens.ends_with(&suffix);
        if counter {
            tokens.truncate(tokens.len() - suffix.len());
        }
        let mut rest = &tokens[..];
        // `slots`, raw: a concurrency limit's tail.
        let is_slots = |rest: &[Token]| {
            rest.iter()
                .map(|token| match token {
                    Token::Raw(c) => Some(*c),
                    Token::Escaped(_) => None,
                })
                .collect::<Option<String>>()
                .is_some_and(|text| text == SLOTS)
        };
        // Free text up to a raw delimiter (left in `rest`); a raw special in it is no `E`.
        let text = |rest: &mut &[Token], ends: &[char]| -> Option<String> {
            let mut text = String::new();
            while let Some((&token, after)) = rest.split_first() {
                match token {
                    Token::Raw(c) if ends.contains(&c) => break,
                    Token::Raw(c) if is_special(c as u8) && c.is_ascii() => return None,
                    Token::Raw(c) => text.push(c),
                    Token::Escaped('(') => text.push('{'),
                    Token::Escaped(')') => text.push('}'),
                    Token::Escaped(c) if c.is_ascii() && is_special(c as u8) => text.push(c),
                    Token::Escaped(_) => return None,
                }
                *rest = after;
            }
            Some(text)
        };
        let raw = |rest: &mut &[Token], c: char| -> Option<()> {
            let (&first, after) = rest.split_first()?;
            (first == Token::Raw(c)).then(|| *rest = after)
        };
        let window = |rest: &[Token]| -> Option<Duration> {
            let text: String = rest
                .iter()
                .map(|token| match token {
                    Token::Raw(c) => Some(*c),
                    Token::Escaped(_) => None,
                })
                .collect::<Option<_>>()?;
            let digits = text.bytes().take_while(u8::is_ascii_digit).count();
            let count: u64 = text[..digits].parse().ok()?;
            let micros = match &text[digits..] {
                "us" => 1,
                "ms" => 1_000,
                "s" => 1_000_000,
                "m" => 60_000_000,
                "h" => 3_600_000_000,
                "d" => 86_400_000_000,
                _ => return None,
            };
            let period = Duration::from_micros(count.checked_mul(micros)?);
            // The one spelling `write_window` has for it.
            (crate::decisions::window(period) == text).then_some(period)
        };
        let position = |rest: &mut &[Token]| -> Option<Option<usize>> {
            if raw(rest, '#').is_none() {
                return Some(None);
            }
            let digits = rest
                .iter()
                .take_while(|t| matches!(t, Token::Raw(c) if c.is_ascii_digit()))
                .count();
            let text: String = rest[..digits]
                .iter()
                .map(|t| match t {
                    Token::Raw(c) => *c,
                    Token::Escaped(c) => *c,
                })
                .collect();
            *rest = &rest[digits..];
            let position: usize = text.parse().ok()?;
            (position.to_string() == text).then_some(Some(position))
        };
        // Digits, the number's one spelling.
        let number = |digits: &[Token]| -> Option<u64> {
            let text: String = digits
                .iter()
                .map(|token| match token {
                    Token::Raw(c) if c.is_ascii_digit() => Some(*c),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            let number: u64 = text.parse().ok()?;
            (number.to_string() == text).then_some(number)
        };
        let stored = if raw(&mut rest, '{').is_some() {
            let scope = text(&mut rest, &['/'])?;
            raw(&mut rest, '/')?;
            let key = text(&mut rest, &['}'])?;
            raw(&mut rest, '}')?;
            raw(&mut rest, '@')?;
            match rest.iter().position(|&token| token == Token::Raw('/')) {
                // A rate: `<threshold>/<window>[-<nth>]`.
                Some(slash) => {
                    let threshold = number(&rest[..slash])?;
                    let rate = &rest[slash + 1..];
                    let (window_tokens, nth) =
                        match rate.iter().position(|&token| token == Token::Raw('-')) {
                            Some(dash) => {
                                let nth = usize::try_from(number(&rate[dash + 1..])?).ok()?;
                                (&rate[..dash], (nth > 1).then_some(nth)?)
                            }
                            None => (rate, 1),
                        };
                    let window = if is_slots(window_tokens) {
                        None
                    } else {
                        Some(window(window_tokens)?)
                    };
                    Stored::Rated {
                        scope,
                        key,
                        threshold,
                        window,
                        nth,
                    }
                }
                None => {
                    let label = text(&mut rest, &[])?;
                    Stored::Several { scope, key, label }
                }
            }
        } else if raw(&mut rest, '#').is_some() {
            if raw(&mut rest, '{').is_some() {
                let scope = text(&mut rest, &['}'])?;
                raw(&mut rest, '}')?;
                let form = Form::Stacked(position(&mut rest)?);
                raw(&mut rest, '@')?;
                if is_slots(rest) {
                    Stored::Slots {
                        form,
                        scope,
                        key: None,
                    }
                } else {
                    let window = Some(window(rest)?);
                    Stored::Limit {
                        form,
                        scope,
                        key: None,
                        window,
                    }
                }
            } else {
                let scope = text(&mut rest, &['#', '/'])?;
                let form = Form::Stacked(position(&mut rest)?);
                raw(&mut rest, '/')?;
                raw(&mut rest, '{')?;
                let key = Some(text(&mut rest, &['}'])?);
                raw(&mut rest, '}')?;
                raw(&mut rest, '@')?;
                if is_slots(rest) {
                    Stored::Slots { form, scope, key }
                } else {
                    let window = Some(window(rest)?);
                    Stored::Limit {
                        form,
                        scope,
                        key,
                        window,
                    }
                }
            }
        } else {
            let scope = text(&mut rest, &['/', '@'])?;
            let key = match raw(&mut rest, '/') {
                Some(()) => Some(text(&mut rest, &['@'])?),
                None => None,
            };
            let window = match raw(&mut rest, '@') {
                Some(()) if is_slots(rest) => {
                    return Some((
                        Stored::Slots {
                            form: Form::One,
                            scope,
                            key,
                        },
                        counter,
                    ));
                }
                Some(()) => Some(window(rest)?),
                None if rest.is_empty() => None,
                None => return None,
            };
            Stored::Limit {
                form: Form::One,
                scope,
                key,
                window,
            }
        };
        Some((stored, counter))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Distinct (form, scope, key, window, position, label, threshold, nth, counter or
        /// log) are distinct stored keys.
        #[test]
        fn the_layout_is_injective(all in proptest::collection::vec(stored(), 2..24)) {
            for one in &all {
                let read = read(&written(one));
                prop_assert_eq!(read.as_ref(), Some(one), "{}", written(one));
                // No key of theirs is the shared limits'.
                prop_assert!(!written(one).starts_with(REGISTRY_TAG), "{}", written(one));
            }
            let mut seen: HashMap<String, &(Stored, bool)> = HashMap::new();
            for one in &all {
                if let Some(other) = seen.insert(written(one), one) {
                    prop_assert_eq!(other, one, "one key for two limits: {}", written(one));
                }
            }
        }

        /// A scope and key's [`ScopeKeys`] match exactly its attribute's and layers' logs and
        /// their counters; its patterns find each of them but the plain key (deleted by name), with
        /// the exemplar's hash tag when they have one.
        #[test]
        fn scope_keys_match_exactly_their_own(
            all in proptest::collection::vec(stored(), 1..24),
            scope in text(),
            key in proptest::option::of(text()),
        ) {
            let keys = ScopeKeys::new(&scope, key.as_deref());
            // Some of the scope and key's own among the others.
            let own_forms = [Form::One, Form::Stacked(None), Form::Stacked(Some(3))];
            let mut own = Vec::new();
            for form in own_forms {
                for (window, counter) in [(Some(HOUR), false), (Some(HOUR), true), (None, false), (None, true)] {
                    if form == Form::One || window.is_some() {
                        let limit = Stored::Limit { form, scope: scope.clone(), key: key.clone(), window };
                        own.push((limit, counter));
                    }
                }
            }
            if let Some(key) = &key {
                for counter in [false, true] {
                    let several = Stored::Several { scope: scope.clone(), key: key.clone(), label: "1h".to_owned() };
                    own.push((several, counter));
                    for nth in [1, 2] {
                        let rated = Stored::Rated { scope: scope.clone(), key: key.clone(), threshold: 100, window: Some(HOUR), nth };
                        own.push((rated, counter));
                    }
                }
            }
            let patterns = keys.patterns();
            // The shared limits' keys: no scope's.
            for registry in ["{registry}entries", "{registry}changes"] {
                prop_assert!(!keys.matches(registry));
                prop_assert!(
                    !patterns.iter().any(|(glob, _)| glob_matches(glob.as_bytes(), registry.as_bytes())),
                    "a pattern finds {}", registry
                );
            }
            for one in all.iter().cloned().chain(own) {
                let stored = written(&one);
                let mine = match &one.0 {
                    Stored::Limit { scope: s, key: k, .. } | Stored::Slots { scope: s, key: k, .. } => {
                        *s == scope && *k == key
                    }
                    Stored::Several { scope: s, key: k, .. } | Stored::Rated { scope: s, key: k, .. } => {
                        *s == scope && key.as_ref() == Some(k)
                    }
                };
                prop_assert_eq!(keys.matches(&stored), mine, "{}", stored);
                if !mine || stored == keys.plain() {
                    continue;
                }
                let found = patterns
                    .iter()
                    .find(|(glob, _)| glob_matches(glob.as_bytes(), stored.as_bytes()));
                prop_assert!(found.is_some(), "no pattern finds {}", stored);
                if let Some((_, Some(exemplar))) = found {
                    prop_assert_eq!(hash_tag(exemplar), hash_tag(&stored), "{}", stored);
                }
            }
        }

        /// The escape round-trips; a stacked keyed limit's hash tag is the escaped key, the
        /// key itself without special characters; a layer's tagged key's, the scoped key.
        #[test]
        fn tags_are_the_escaped_key(scope in text(), key in text(), plain in "[a-zA-Z0-9:._-]{1,12}") {
            let mut escaped = String::new();
            push_escaped(&mut escaped, &key);
            prop_assert_eq!(escaped.len(), escaped_len(&key));
            prop_assert_eq!(unescape(&escaped), key.as_str());
            prop_assert!(!escaped.contains(['{', '}']), "{}", escaped);
            let stacked = limit_key(Form::Stacked(Some(1)), &scope, Some(&key), Some(HOUR));
            prop_assert_eq!(hash_tag(&stacked), Some(escaped.as_str()).filter(|tag| !tag.is_empty()));
            let stacked = limit_key(Form::Stacked(None), &scope, Some(&plain), Some(HOUR));
            prop_assert_eq!(hash_tag(&stacked), Some(plain.as_str()));
            let scoped = scoped_key(&scope, &key);
            prop_assert_eq!(scoped.capacity(), scoped.len());
            // A layer's tagged keys are tagged by `E(scope)/E(key)`.
            let rated = rate_key(&scope, &key, "100/1s");
            prop_assert_eq!(hash_tag(&rated), Some(scoped.as_str()));
            prop_assert_eq!(rated.capacity(), rated.len());
            let unscoped = unscoped(&scope, &scoped);
            prop_assert_eq!(unscoped.as_deref(), Some(key.as_str()));
        }
    }
}
