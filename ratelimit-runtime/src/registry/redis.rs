//! The limits shared through Redis (`Source::Redis`): the registry's entries kept in the
//! limiter's Redis, written through [`SharedLimits`](crate::SharedLimits) by any instance (or
//! by hand), and followed by every instance built with
//! [`LimiterBuilder::shared_limits`](crate::LimiterBuilder::shared_limits): a thread of its own
//! (`Registry::follow`) reads the changes every [`INTERVAL`] and puts them in force, so that no
//! check waits for them. The store keeps them (`store/redis/registry.rs`); this module gives
//! them their form, and keeps what an instance last read ([`Follower`]).
//!
//! Each entry is one field of a hash, its value a line of words:
//!
//! | field | value |
//! |---|---|
//! | `mode` | `enforce`, `shadow` or `off` |
//! | `scope:E(scope)` | `threshold=<n> period=<window> [algorithm=<name>] [mode=<mode>]`, or `mode=<mode>` |
//! | `key:E(scope)/E(key)` | `threshold=<n> period=<window> [algorithm=<name>]`, `block` or `exempt`, then `[until=<time>]` |
//!
//! `E` is the key layout's escape (`layout.rs`: `\`, `/`, `@`, `#`, `{`, `}` escaped by a
//! backslash), so that the first raw `/` of a key's field ends its scope. A `<window>` is a
//! number and a unit (`us`, `ms`, `s`, `m`, `h`, `d`: `60s`, `1500ms`); a `<time>`, a number of
//! `s`, `ms` or `us` since the Unix epoch. A rate without `algorithm` takes the code's.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use super::catalog;
use super::limits::{Action, Limits, Mode, Override, ScopeLimits, algorithm_named, mode_named};
use crate::error::StoreError;
use crate::layout::{escape_key, unescape};
use crate::rate::Rate;
use crate::store::redis::RedisStore;
use crate::store::redis::registry::{SharedRead, Write};

/// The source's name in logs and metrics.
const SOURCE: &str = "redis";

/// How often an instance reads the changes of the shared limits: a change made through one
/// instance is in force on every other within this and a round trip.
pub(crate) const INTERVAL: Duration = Duration::from_millis(250);

/// The field of the limiter's mode.
const MODE: &str = "mode";
/// What a scope's field starts with, before `E(scope)`.
const SCOPE: &str = "scope:";
/// What a key's field starts with, before `E(scope)/E(key)`.
const KEY: &str = "key:";

/// What a field addresses.
#[derive(Debug, PartialEq, Eq)]
enum Field {
    Mode,
    Scope(String),
    Key { scope: String, key: String },
}

impl Field {
    /// The field's name in Redis.
    fn name(&self) -> String {
        match self {
            Field::Mode => MODE.to_owned(),
            Field::Scope(scope) => format!("{SCOPE}{}", escape_key(scope)),
            Field::Key { scope, key } => {
                format!("{KEY}{}/{}", escape_key(scope), escape_key(key))
            }
        }
    }

    /// The field `name` names, written as [`name`](Field::name) writes it (another spelling
    /// of it, a backslash before a character that needs none, would name it twice).
    fn parse(name: &str) -> Result<Field, String> {
        let field = Field::parse_any(name)?;
        if field.name() != name {
            return Err(
                "a field in another spelling than its own: a backslash only before `\\`, \
                 `/`, `@` or `#`, `\\(` for `{` and `\\)` for `}`"
                    .into(),
            );
        }
        Ok(field)
    }

    /// The field `name` names, however it spells it.
    fn parse_any(name: &str) -> Result<Field, String> {
        if name == MODE {
            return Ok(Field::Mode);
        }
        if let Some(scope) = name.strip_prefix(SCOPE) {
            return Ok(Field::Scope(unescape(scope).into_owned()));
        }
        if let Some(rest) = name.strip_prefix(KEY) {
            // The first `/` after an even run of backslashes (an escaped one follows an odd run).
            let mut backslashes = 0;
            for (at, byte) in rest.bytes().enumerate() {
                match byte {
                    b'\\' => backslashes += 1,
                    b'/' if backslashes % 2 == 0 => {
                        return Ok(Field::Key {
                            scope: unescape(&rest[..at]).into_owned(),
                            key: unescape(&rest[at + 1..]).into_owned(),
                        });
                    }
                    _ => backslashes = 0,
                }
            }
            return Err("a key's field is `key:<scope>/<key>`, and this one has no `/`".into());
        }
        Err("an unknown field: `mode`, `scope:<scope>` or `key:<scope>/<key>`".into())
    }

    /// The field as a log names it: a key's by its scope only (a key may be a user
    /// identifier).
    fn shown(&self) -> String {
        match self {
            Field::Mode => "the mode".to_owned(),
            Field::Scope(scope) => format!("scope \"{}\"", scope.escape_debug()),
            Field::Key { scope, .. } => {
                format!("a key's override in scope \"{}\"", scope.escape_debug())
            }
        }
    }
}

/// A rate's words: `threshold=<n> period=<window>`, and `algorithm=<name>` unless the code's.
fn write_rate(out: &mut String, rate: Rate, code_algorithm: bool) {
    let _ = write!(out, "threshold={} period=", rate.threshold());
    crate::decisions::write_window(out, rate.period());
    if !code_algorithm {
        let _ = write!(out, " algorithm={}", rate.algorithm().name());
    }
}

/// A scope entry's value: its rate and its mode (`None`: neither, no entry).
fn scope_value(entry: &ScopeLimits) -> Option<String> {
    let mut out = String::new();
    if let Some(rate) = entry.rate {
        write_rate(&mut out, rate, entry.code_algorithm);
    }
    if let Some(mode) = entry.mode {
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = write!(out, "mode={mode}");
    }
    (!out.is_empty()).then_some(out)
}

/// An override's value.
fn override_value(over: &Override) -> String {
    let mut out = String::new();
    match over.action {
        Action::Rate(rate) => write_rate(&mut out, rate, over.code_algorithm),
        Action::Block => out.push_str("block"),
        Action::Exempt => out.push_str("exempt"),
    }
    if let Some(expires) = over.expires {
        let micros = crate::clock::micros_saturating(expires);
        let (count, unit) = if micros.is_multiple_of(1_000_000) {
            (micros / 1_000_000, "s")
        } else if micros.is_multiple_of(1_000) {
            (micros / 1_000, "ms")
        } else {
            (micros, "us")
        };
        let _ = write!(out, " until={count}{unit}");
    }
    out
}

/// A value's words, each `name=value` or a bare word, every name once.
fn words(value: &str) -> Result<HashMap<&str, Option<&str>>, String> {
    let mut words = HashMap::new();
    for word in value.split_ascii_whitespace() {
        let (name, given) = match word.split_once('=') {
            Some((name, given)) => (name, Some(given)),
            None => (word, None),
        };
        if words.insert(name, given).is_some() {
            return Err(format!("`{}` given twice", name.escape_debug()));
        }
    }
    Ok(words)
}

/// The value of word `name` (given as `name=value`), if given.
fn valued<'v>(
    words: &mut HashMap<&str, Option<&'v str>>,
    name: &str,
) -> Result<Option<&'v str>, String> {
    match words.remove(name) {
        None => Ok(None),
        Some(Some(value)) => Ok(Some(value)),
        Some(None) => Err(format!("`{name}` needs a value: `{name}=...`")),
    }
}

/// The rate of a value's `threshold`, `period` and `algorithm` words, and whether its
/// algorithm is the code's; `None` without them.
fn rate_of(words: &mut HashMap<&str, Option<&str>>) -> Result<Option<(Rate, bool)>, String> {
    let threshold = valued(words, "threshold")?;
    let period = valued(words, "period")?;
    let algorithm = valued(words, "algorithm")?;
    let (threshold, period) = match (threshold, period) {
        (None, None) if algorithm.is_none() => return Ok(None),
        (Some(threshold), Some(period)) => (threshold, period),
        _ => return Err("a rate needs both `threshold=<n>` and `period=<window>`".into()),
    };
    let threshold: u64 = threshold.parse().map_err(|_| {
        format!(
            "threshold `{}` is not a whole number",
            threshold.escape_debug()
        )
    })?;
    let period = crate::decisions::read_window(period).ok_or_else(|| {
        format!(
            "period `{}` is not a window: a number and a unit, `us`, `ms`, `s`, `m`, `h` or `d` (`60s`)",
            period.escape_debug()
        )
    })?;
    let rate = Rate::checked(threshold, period).map_err(str::to_owned)?;
    Ok(Some(match algorithm {
        None => (rate, true),
        Some(name) => (rate.with_algorithm(algorithm_named(name)?), false),
    }))
}

/// What is left of a value's words once read: none may be.
fn nothing_left(words: &HashMap<&str, Option<&str>>) -> Result<(), String> {
    match words.keys().min() {
        None => Ok(()),
        Some(name) => Err(format!("an unknown word `{}`", name.escape_debug())),
    }
}

/// A scope entry's value (without overrides).
fn parse_scope(value: &str) -> Result<ScopeLimits, String> {
    let mut words = words(value)?;
    let mut entry = ScopeLimits::new();
    if let Some((rate, code_algorithm)) = rate_of(&mut words)? {
        entry.rate = Some(rate);
        entry.code_algorithm = code_algorithm;
    }
    if let Some(mode) = valued(&mut words, "mode")? {
        entry.mode = Some(mode_named(mode)?);
    }
    nothing_left(&words)?;
    if entry.rate.is_none() && entry.mode.is_none() {
        return Err("a scope's entry sets a rate, a mode, or both".into());
    }
    Ok(entry)
}

/// An override's value.
fn parse_override(value: &str) -> Result<Override, String> {
    let mut words = words(value)?;
    let rate = rate_of(&mut words)?;
    let block = words.remove("block");
    let exempt = words.remove("exempt");
    if [block, exempt]
        .iter()
        .any(|word| matches!(word, Some(Some(_))))
    {
        return Err("`block` and `exempt` take no value".into());
    }
    let mut over = match (rate, block.is_some(), exempt.is_some()) {
        (Some((rate, code_algorithm)), false, false) => Override {
            code_algorithm,
            ..Override::rate(rate)
        },
        (None, true, false) => Override::block(),
        (None, false, true) => Override::exempt(),
        _ => return Err("an override is exactly one of a rate, `block` or `exempt`".into()),
    };
    if let Some(until) = valued(&mut words, "until")? {
        // A time since the epoch: a window in `s`, `ms` or `us` (every unit ending in `s`).
        let since = until
            .ends_with('s')
            .then(|| crate::decisions::read_window(until))
            .flatten()
            .ok_or_else(|| {
                format!(
                    "until `{}` is not a time: a number of `s`, `ms` or `us` since the Unix epoch",
                    until.escape_debug()
                )
            })?;
        over.expires = Some(UNIX_EPOCH + since);
    }
    nothing_left(&words)?;
    Ok(over)
}

/// Puts `value` (`None`: removed) of `field` into `limits`, as one source's entries; a value
/// that does not parse, or that the code's limits reject, leaves the entry out, logged.
/// Returns whether it was left out so.
fn apply(limits: &mut Limits, name: &str, value: Option<&str>) -> bool {
    let field = match Field::parse(name) {
        Ok(field) => field,
        Err(error) => {
            tracing::error!(
                source = SOURCE,
                %error,
                "an entry of the shared limits is skipped"
            );
            tracing::debug!(field = name, "the skipped entry's field");
            return true;
        }
    };
    let mut skipped = false;
    let parsed = value.map(|value| parsed(&field, value)).transpose();
    let parsed = parsed.unwrap_or_else(|error| {
        tracing::error!(
            source = SOURCE,
            entry = %field.shown(),
            %error,
            "an entry of the shared limits is skipped (not in force until it is fixed)"
        );
        if let Field::Key { key, .. } = &field {
            tracing::debug!(key, "the skipped override's key");
        }
        skipped = true;
        None
    });
    match (field, parsed) {
        (Field::Mode, parsed) => {
            limits.mode = parsed.and_then(|parsed| match parsed {
                Parsed::Mode(mode) => Some(mode),
                _ => None,
            });
        }
        (Field::Scope(scope), parsed) => {
            let entry = limits.scopes.entry(scope.clone()).or_default();
            let given = match parsed {
                Some(Parsed::Scope(given)) => given,
                _ => ScopeLimits::new(),
            };
            entry.rate = given.rate;
            entry.code_algorithm = given.code_algorithm;
            entry.mode = given.mode;
            forget_if_empty(limits, &scope);
        }
        (Field::Key { scope, key }, parsed) => {
            let entry = limits.scopes.entry(scope.clone()).or_default();
            match parsed {
                Some(Parsed::Override(over)) => {
                    entry.overrides.insert(key, over);
                }
                _ => {
                    entry.overrides.remove(&key);
                }
            }
            forget_if_empty(limits, &scope);
        }
    }
    skipped
}

/// A field's value, parsed.
enum Parsed {
    Mode(Mode),
    Scope(ScopeLimits),
    Override(Override),
}

/// `value` as `field`'s, judged against the code's limits.
fn parsed(field: &Field, value: &str) -> Result<Parsed, String> {
    match field {
        Field::Mode => mode_named(value.trim()).map(Parsed::Mode),
        Field::Scope(scope) => {
            let entry = parse_scope(value)?;
            if let Some(rate) = entry.rate {
                catalog::judge_scope_rate(scope, rate)?;
            }
            Ok(Parsed::Scope(entry))
        }
        Field::Key { scope, .. } => {
            let over = parse_override(value)?;
            if let Action::Rate(rate) = over.action {
                catalog::judge_override_rate(scope, rate)?;
            }
            Ok(Parsed::Override(over))
        }
    }
}

fn forget_if_empty(limits: &mut Limits, scope: &str) {
    if limits.scopes.get(scope).is_some_and(ScopeLimits::is_empty) {
        limits.scopes.remove(scope);
    }
}

/// What an instance knows of the shared limits: the last change it applied.
#[derive(Default)]
pub(crate) struct Follower {
    /// Held while reads are applied, so that they apply one at a time and in order.
    last: async_lock::Mutex<Followed>,
}

/// What a [`Follower`] read last.
#[derive(Default)]
struct Followed {
    /// The last log entry applied: its id and mark (`None`: nothing read yet).
    entry: Option<(String, String)>,
    /// A fingerprint of the last whole read, when nothing was read since (the same whole read
    /// again is not applied again).
    whole: Option<u64>,
}

impl Follower {
    /// Reads the changes since the last one applied from `store`, every page of them, and has
    /// `apply` put them in force at once (never a part of a change); every entry, the first
    /// time or when the log no longer holds the last one. Returns whether anything was read.
    ///
    /// # Errors
    ///
    /// The store's: nothing more is applied.
    pub(crate) async fn catch_up(
        &self,
        store: &RedisStore,
        apply: impl FnOnce(&[SharedRead]),
    ) -> Result<bool, StoreError> {
        let mut guard = self.last.lock().await;
        let Followed {
            entry: last,
            whole: whole_read,
        } = &mut *guard;
        let mut reads: Vec<SharedRead> = Vec::new();
        let mut read_last = last.clone();
        loop {
            let since = read_last
                .as_ref()
                .map(|(id, mark)| (id.as_str(), mark.as_str()));
            let read = store.read_shared(since).await?;
            read_last = Some((read.last.clone(), read.mark.clone()));
            let more = read.more;
            if read.whole {
                // Every entry: what was read before it is replaced.
                reads.clear();
            }
            if read.whole || !read.entries.is_empty() {
                reads.push(read);
            }
            if !more {
                break;
            }
        }
        *last = read_last;
        let seen = match reads.as_slice() {
            [only] if only.whole => Some(fingerprint(&only.entries)),
            _ => None,
        };
        if reads.is_empty() || (seen.is_some() && seen == *whole_read) {
            return Ok(false);
        }
        *whole_read = seen;
        apply(&reads);
        Ok(true)
    }
}

/// The writes of `scope`'s entry: its rate and mode (removed when it sets neither), and each
/// of its overrides.
pub(crate) fn scope_writes(scope: &str, entry: &ScopeLimits) -> Vec<Write> {
    let field = Field::Scope(scope.to_owned()).name();
    let mut writes = vec![match scope_value(entry) {
        Some(value) => Write::Set(field, value),
        None => Write::Remove(field),
    }];
    for (key, over) in &entry.overrides {
        writes.push(override_write(scope, key, over));
    }
    writes
}

/// The field of `key`'s override in `scope`.
pub(crate) fn key_field(scope: &str, key: &str) -> String {
    Field::Key {
        scope: scope.to_owned(),
        key: key.to_owned(),
    }
    .name()
}

/// The write of `over`, the override of `key` in `scope`.
pub(crate) fn override_write(scope: &str, key: &str, over: &Override) -> Write {
    Write::Set(key_field(scope, key), override_value(over))
}

/// The write of the limiter's mode (`None`: removed).
pub(crate) fn mode_write(mode: Option<Mode>) -> Write {
    match mode {
        Some(mode) => Write::Set(Field::Mode.name(), mode.name().to_owned()),
        None => Write::Remove(Field::Mode.name()),
    }
}

/// The writes and the glob of the fields that remove `scope`'s whole entry.
pub(crate) fn scope_removal(scope: &str) -> (String, [Write; 1]) {
    let keys = crate::layout::escape(&format!("{KEY}{}/", escape_key(scope)));
    (
        format!("{keys}*"),
        [Write::Remove(Field::Scope(scope.to_owned()).name())],
    )
}

/// The removals of the overrides in `limits` that expired more than a second before `now`
/// (µs since the Unix epoch, this process's clock), each made only if Redis's clock says so
/// too, whatever this process's says: what a write takes along, so that expired overrides do
/// not pile up.
pub(crate) fn expired(limits: &Limits, now: u64) -> Vec<Write> {
    let mut writes = Vec::new();
    for (scope, entry) in &limits.scopes {
        for (key, over) in &entry.overrides {
            let gone = over
                .expires
                .is_some_and(|at| crate::clock::micros_saturating(at) + 1_000_000 < now);
            if gone {
                writes.push(Write::RemoveExpired(key_field(scope, key)));
            }
        }
    }
    writes
}

/// A fingerprint of a whole read's entries (in the order the hash gave them).
fn fingerprint(entries: &[(String, Option<String>)]) -> u64 {
    use std::hash::BuildHasher as _;
    foldhash::fast::FixedState::default().hash_one(entries)
}

/// `reads`' entries put into `limits`, in order (replacing them at a whole read); returns how
/// many were skipped (malformed, or contradicting the code).
pub(crate) fn apply_reads(limits: &mut Limits, reads: &[SharedRead]) -> u64 {
    let mut skipped = 0;
    for read in reads {
        if read.whole {
            *limits = Limits::new();
        }
        for (field, value) in &read.entries {
            skipped += u64::from(apply(limits, field, value.as_deref()));
        }
    }
    skipped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_split_at_the_first_raw_slash() {
        for field in [
            Field::Mode,
            Field::Scope("app::search".into()),
            Field::Scope(r"a/b\c{d}".into()),
            Field::Key {
                scope: "login".into(),
                key: "alice".into(),
            },
            Field::Key {
                scope: r"a/b\".into(),
                key: r"/x\/y{}".into(),
            },
            Field::Key {
                scope: String::new(),
                key: String::new(),
            },
        ] {
            assert_eq!(Field::parse(&field.name()), Ok(field));
        }
        assert_eq!(
            Field::Key {
                scope: "login".into(),
                key: "alice".into()
            }
            .name(),
            "key:login/alice"
        );
        assert!(Field::parse("key:nokey").is_err());
        assert!(Field::parse("scopes:x").is_err());
        // One spelling per field: a backslash where none is needed would name it twice.
        assert!(Field::parse(r"key:login/al\ice").is_err());
        assert!(Field::parse(r"scope:log\in").is_err());
        assert!(Field::parse(r"key:a\/b/c").is_ok());
    }

    #[test]
    fn values_round_trip() {
        let minute = Duration::from_secs(60);
        let rate = Rate::new(10, minute).unwrap();
        let counter = rate.with_algorithm(crate::Algorithm::SlidingWindowCounter);
        for entry in [
            ScopeLimits::new().rate(rate),
            ScopeLimits::new().rate(counter).mode(Mode::Shadow),
            ScopeLimits::new().mode(Mode::Off),
        ] {
            let value = scope_value(&entry).unwrap();
            assert_eq!(parse_scope(&value), Ok(entry), "{value}");
        }
        assert_eq!(scope_value(&ScopeLimits::new()), None);
        let at = UNIX_EPOCH + Duration::from_micros(1_767_225_600_123_456);
        for over in [
            Override::rate(rate),
            Override::block(),
            Override::exempt().until(at),
            Override::block().until(UNIX_EPOCH + Duration::from_secs(1_767_225_600)),
            Override::rate(counter).until(UNIX_EPOCH + Duration::from_millis(1_767_225_600_500)),
        ] {
            let value = override_value(&over);
            assert_eq!(parse_override(&value), Ok(over), "{value}");
        }
        assert_eq!(
            override_value(&Override::block().until(UNIX_EPOCH + Duration::from_secs(90))),
            "block until=90s"
        );
        assert_eq!(
            scope_value(&ScopeLimits::new().rate(rate).mode(Mode::Shadow)).unwrap(),
            "threshold=10 period=1m algorithm=sliding_window_log mode=shadow"
        );
        // Without `algorithm`, the code's.
        let code = parse_scope("threshold=10 period=60s").unwrap();
        assert!(code.code_algorithm);
        assert_eq!(code.rate, Some(rate));
    }

    #[test]
    fn malformed_values_say_what_is_wrong() {
        for (value, error) in [
            ("threshold=10", "both"),
            ("threshold=ten period=1m", "not a whole number"),
            ("threshold=10 period=1y", "not a window"),
            ("threshold=0 period=1m", "at least 1"),
            ("threshold=10 period=1m mode=loud", "not a mode"),
            ("threshold=10 period=1m colour=red", "unknown word `colour`"),
            ("", "a rate, a mode"),
            ("mode=shadow mode=off", "twice"),
            ("threshold=10 period=1m algorithm=leaky", "not an algorithm"),
        ] {
            let found = parse_scope(value).unwrap_err();
            assert!(found.contains(error), "{value}: {found}");
        }
        for (value, error) in [
            ("block exempt", "exactly one"),
            ("", "exactly one"),
            ("block=yes", "no value"),
            ("block until=tomorrow", "not a time"),
            ("exempt until", "needs a value"),
            ("threshold=5 period=1s block", "exactly one"),
        ] {
            let found = parse_override(value).unwrap_err();
            assert!(found.contains(error), "{value}: {found}");
        }
    }

    #[test]
    fn applied_entries_build_one_sources_limits() {
        let mut limits = Limits::new();
        let _ = apply(&mut limits, "mode", Some("shadow"));
        let _ = apply(&mut limits, "scope:login", Some("threshold=3 period=1m"));
        let _ = apply(&mut limits, "key:login/vip", Some("exempt"));
        let _ = apply(&mut limits, "key:login/bad", Some("block until=soon"));
        let _ = apply(&mut limits, "nonsense", Some("block"));
        assert_eq!(limits.mode, Some(Mode::Shadow));
        let login = limits.get_scope("login").unwrap();
        assert_eq!(
            login.get_rate(),
            Some(Rate::new(3, Duration::from_secs(60)).unwrap())
        );
        assert_eq!(login.overrides().count(), 1);
        // A removed scope entry keeps the scope while it has overrides, and not after.
        let _ = apply(&mut limits, "scope:login", None);
        assert!(limits.get_scope("login").is_some());
        let _ = apply(&mut limits, "key:login/vip", None);
        assert!(limits.get_scope("login").is_none());
        let _ = apply(&mut limits, "mode", None);
        assert!(limits.is_empty());
    }
}
