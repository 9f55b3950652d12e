//! The limits file (feature `limits-file`), a source of the registry: its TOML read into
//! [`Limits`], every mistake an error naming the file, the line and the entry; and its
//! directory watched, so that an edit, or a replacement by rename (an editor's save, a
//! Kubernetes ConfigMap's update), reaches the registry within moments (which applies it, or
//! keeps the limits in force when it is rejected).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use notify::Watcher as _;
use serde::Deserialize;
use toml::Spanned;

use super::catalog;
use super::limits::{Limits, Override, ScopeLimits, algorithm_named, mode_named};
use crate::rate::Rate;

/// The file as written: a limiter's mode and its scopes' entries.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    mode: Option<Spanned<String>>,
    #[serde(default)]
    scopes: BTreeMap<String, Spanned<ScopeEntry>>,
}

/// `[scopes."<scope>"]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScopeEntry {
    threshold: Option<Spanned<u64>>,
    period: Option<Spanned<toml::Value>>,
    algorithm: Option<Spanned<String>>,
    mode: Option<Spanned<String>>,
    #[serde(default)]
    /// Read as values first: a key with dots left unquoted is a nested table, whose parts a
    /// deserializer's message would quote (a caller's key may be a user identifier).
    keys: BTreeMap<String, Spanned<toml::Value>>,
}

/// `[scopes."<scope>".keys]`: `"<key>" = { ... }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    threshold: Option<u64>,
    period: Option<toml::Value>,
    algorithm: Option<String>,
    #[serde(default)]
    block: bool,
    #[serde(default)]
    exempt: bool,
    until: Option<toml::Value>,
}

/// `text`, the limits file at `path`, as the registry's [`Limits`].
///
/// # Errors
///
/// A message naming the file, the line and the entry of each mistake (TOML that does not
/// parse stops at its first): TOML that does not parse, an unknown
/// field, a threshold of 0 or above `2^32 - 1`, a period that is not a duration (`"90s"`,
/// `"1m"`, `"1500ms"`, or whole seconds) within `1 ms..=100 years`, an unknown algorithm or
/// mode, an expiry that is not a date-time with an offset, an override that is not exactly one
/// of a rate, `block` or `exempt`, a rate without both `threshold` and `period`; and what the
/// code's limits reject (a rate over a limit that chooses its rate per call, a threshold below a
/// cost the code writes: `catalog.rs`). A key is never quoted (keys may be user identifiers): its line names it.
pub(crate) fn parse(path: &Path, text: &str) -> Result<Limits, String> {
    let at = |offset: usize| format!("{}:{}", path.display(), line_of(text, offset));
    let file: File = toml::from_str(text).map_err(|error| {
        let line = error.span().map_or(String::new(), |span| {
            format!(":{}", line_of(text, span.start))
        });
        let message = error.message().trim_end();
        // toml quotes a key given twice, which may be a caller's key (a user identifier).
        const QUOTE: &str =
            "a scope named with `::`, `.`, `#` or `@` is quoted: [scopes.\"app::search\"]";
        let message = if message.starts_with("duplicate key") {
            "an entry given twice (a scope, a key's override or a field): keep one".to_owned()
        } else if message.starts_with("invalid unquoted key") {
            // A scope's name with `::` (a function's path) left unquoted.
            format!("{message}; {QUOTE}")
        } else if message.starts_with("unknown field") && has_misplaced_table(text) {
            // A table where a field goes: a key's override outside `.keys`, or a scope's name
            // with a dot left unquoted. Its name may be a caller's key: not quoted.
            format!(
                "a table where a field goes (not quoted: it may be a key): a key's override \
                 goes under [scopes.\"<scope>\".keys], and {QUOTE}"
            )
        } else {
            message.to_owned()
        };
        format!("{}{line}: {message}", path.display())
    })?;
    let mut limits = Limits::new();
    // Every mistake, in the file's order, so that an operator fixes them in one edit.
    let mut mistakes: Vec<(usize, String)> = Vec::new();
    if let Some(mode) = &file.mode {
        match mode_named(mode.get_ref()) {
            Ok(parsed) => limits.mode = Some(parsed),
            Err(e) => mistakes.push((mode.span().start, format!("mode: {e}"))),
        }
    }
    for (scope, entry) in &file.scopes {
        let header = entry.span().start;
        if let Some(meant) = catalog::misspelt(scope) {
            tracing::warn!(
                at = at(header),
                scope,
                meant,
                "this scope of the limits file names no limit of the code's `#[rate_limit]`s: a misspelling?"
            );
        }
        match scope_entry(scope, entry) {
            Ok(scoped) => {
                limits.scopes.insert(scope.clone(), scoped);
            }
            Err(found) => mistakes.extend(found),
        }
    }
    mistakes.sort_by_key(|(offset, _)| *offset);
    match mistakes.as_slice() {
        [] => Ok(limits),
        [(offset, mistake)] => Err(format!("{}: {mistake}", at(*offset))),
        several => {
            let lines: Vec<String> = several
                .iter()
                .map(|(offset, mistake)| format!("{}: {mistake}", at(*offset)))
                .collect();
            Err(format!("{} mistakes:\n{}", several.len(), lines.join("\n")))
        }
    }
}

/// Whether `text` holds a table where a field goes: at the top, anything but `scopes`; in a
/// scope, anything but `keys` (a key's override written outside `.keys`, or a scope's name
/// with a dot left unquoted: `[scopes.app.search]` is the table `search` in the scope `app`).
fn has_misplaced_table(text: &str) -> bool {
    let Ok(table) = text.parse::<toml::Table>() else {
        return false;
    };
    let misplaced = |fields: &toml::Table, allowed: &str| {
        fields
            .iter()
            .any(|(field, value)| field != allowed && value.is_table())
    };
    misplaced(&table, "scopes")
        || table
            .get("scopes")
            .and_then(toml::Value::as_table)
            .is_some_and(|scopes| {
                scopes
                    .values()
                    .filter_map(toml::Value::as_table)
                    .any(|entry| misplaced(entry, "keys"))
            })
}

/// `[scopes."<scope>"]`'s entry as the registry takes it, or each of its mistakes with the
/// offset of the field at fault (the first of a rate's), else of the entry's header.
fn scope_entry(
    scope: &str,
    entry: &Spanned<ScopeEntry>,
) -> Result<ScopeLimits, Vec<(usize, String)>> {
    let header = entry.span().start;
    let entry = entry.get_ref();
    let mut scoped = ScopeLimits::new();
    let mut mistakes = Vec::new();
    let named = |e: String| format!("scope \"{}\": {e}", scope.escape_debug());
    let rate_line = [
        entry.threshold.as_ref().map(|field| field.span().start),
        entry.period.as_ref().map(|field| field.span().start),
        entry.algorithm.as_ref().map(|field| field.span().start),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(header);
    let rate = rate_of(
        entry.threshold.as_ref().map(|field| *field.get_ref()),
        entry.period.as_ref().map(Spanned::get_ref),
        entry
            .algorithm
            .as_ref()
            .map(|field| field.get_ref().as_str()),
    )
    .and_then(|rate| match rate {
        Some((rate, code_algorithm)) => {
            catalog::judge_scope_rate(scope, rate).map(|()| Some((rate, code_algorithm)))
        }
        None => Ok(None),
    });
    match rate {
        Ok(Some((rate, code_algorithm))) => {
            scoped.rate = Some(rate);
            scoped.code_algorithm = code_algorithm;
        }
        Ok(None) => {}
        Err(e) => mistakes.push((rate_line, named(e))),
    }
    if let Some(mode) = &entry.mode {
        match mode_named(mode.get_ref()) {
            Ok(parsed) => scoped.mode = Some(parsed),
            Err(e) => mistakes.push((mode.span().start, named(format!("mode: {e}")))),
        }
    }
    for (key, over) in &entry.keys {
        match key_override(scope, over.get_ref()) {
            Ok(entered) => {
                scoped.overrides.insert(key.clone(), entered);
            }
            Err(e) => mistakes.push((
                over.span().start,
                format!(
                    "scope \"{}\", the override of the key on this line: {e}",
                    scope.escape_debug()
                ),
            )),
        }
    }
    if mistakes.is_empty() {
        Ok(scoped)
    } else {
        Err(mistakes)
    }
}

/// A key's override in `scope` from its value (the key itself is never quoted).
fn key_override(scope: &str, value: &toml::Value) -> Result<Override, String> {
    let over = key_entry(value)?;
    let rate = rate_of(
        over.threshold,
        over.period.as_ref(),
        over.algorithm.as_deref(),
    )?;
    let entered = match (rate, over.block, over.exempt) {
        (Some((rate, code_algorithm)), false, false) => {
            catalog::judge_override_rate(scope, rate)?;
            Override {
                code_algorithm,
                ..Override::rate(rate)
            }
        }
        (None, true, false) => Override::block(),
        (None, false, true) => Override::exempt(),
        (None, false, false) => {
            return Err(
                "say what it does: a rate (`threshold` and `period`), `block = true` or \
                 `exempt = true`"
                    .into(),
            );
        }
        _ => return Err("one of a rate, `block = true` and `exempt = true`, not several".into()),
    };
    match &over.until {
        Some(until) => Ok(entered.until(time_of(until).map_err(|e| format!("until: {e}"))?)),
        None => Ok(entered),
    }
}

/// The fields of a key's override.
const KEY_FIELDS: [&str; 6] = [
    "threshold",
    "period",
    "algorithm",
    "block",
    "exempt",
    "until",
];

/// A key's override from its value, without quoting anything but the known fields.
fn key_entry(value: &toml::Value) -> Result<KeyEntry, String> {
    let toml::Value::Table(table) = value else {
        return Err(format!(
            "an override is a table, {{ block = true }} or {{ threshold = 10, period = \"1m\" }}, not a {}",
            value.type_str()
        ));
    };
    if let Some((field, value)) = table
        .iter()
        .find(|(field, _)| !KEY_FIELDS.contains(&field.as_str()))
    {
        // A misspelt field, named when it is a typo of one (a key's part is never quoted: a
        // dotted key's parts are tables, and a key's text is not a typo of a field).
        let meant = KEY_FIELDS
            .iter()
            .find(|known| strsim::levenshtein(field, known) <= known.len() / 3);
        if let (Some(meant), false) = (meant, value.is_table()) {
            return Err(format!(
                "unknown field `{}`: did you mean `{meant}`? (the fields: {})",
                field.escape_debug(),
                KEY_FIELDS.join(", ")
            ));
        }
        return Err(format!(
            "a field that is not one of {}; a key with a dot (an IP address) must be quoted: \
             \"192.0.2.7\" = {{ block = true }}",
            KEY_FIELDS.join(", ")
        ));
    }
    // `until` apart: a date-time read back from a value is a string to serde.
    let mut fields = table.clone();
    let until = fields.remove("until");
    let mut entry: KeyEntry = toml::Value::Table(fields)
        .try_into()
        .map_err(|error: toml::de::Error| error.message().trim_end().to_owned())?;
    entry.until = until;
    Ok(entry)
}

/// The line (from 1) of `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A rate from its fields, and whether its algorithm is the code's (none named); `None`
/// without any.
fn rate_of(
    threshold: Option<u64>,
    period: Option<&toml::Value>,
    algorithm: Option<&str>,
) -> Result<Option<(Rate, bool)>, String> {
    let (threshold, period) = match (threshold, period) {
        (None, None) if algorithm.is_none() => return Ok(None),
        (Some(threshold), Some(period)) => (threshold, period),
        _ => {
            return Err(
                "a rate needs both `threshold` and `period` (`threshold = 10`, `period = \"1m\"`)"
                    .into(),
            );
        }
    };
    let period = duration_of(period)?;
    let rate = Rate::checked(threshold, period).map_err(|reason| {
        format!(
            "threshold {threshold} per {}: {reason}",
            humantime::format_duration(period)
        )
    })?;
    let (rate, code_algorithm) = match algorithm {
        None => (rate, true),
        Some(name) => (rate.with_algorithm(algorithm_named(name)?), false),
    };
    Ok(Some((rate, code_algorithm)))
}

/// A period: a duration (`"90s"`, `"1m"`, `"1500ms"`, `"1h 30m"`) or whole seconds.
fn duration_of(value: &toml::Value) -> Result<Duration, String> {
    match value {
        toml::Value::Integer(seconds) => u64::try_from(*seconds)
            .map(Duration::from_secs)
            .map_err(|_| format!("period {seconds}: a period is longer than zero")),
        toml::Value::String(text) => humantime::parse_duration(text).map_err(|error| {
            format!(
                "period \"{}\" is not a duration ({error}): write it as \"90s\", \"1m\", \"1500ms\" or whole seconds",
                text.escape_debug()
            )
        }),
        other => Err(format!(
            "period {}: a duration (\"90s\", \"1m\") or whole seconds, not a {}",
            shown(other),
            other.type_str()
        )),
    }
}

/// `value` as a message quotes it.
fn shown(value: &toml::Value) -> String {
    match value {
        toml::Value::String(text) => format!("\"{}\"", text.escape_debug()),
        toml::Value::Integer(integer) => integer.to_string(),
        toml::Value::Float(float) => float.to_string(),
        toml::Value::Boolean(boolean) => boolean.to_string(),
        toml::Value::Datetime(datetime) => datetime.to_string(),
        toml::Value::Array(_) => "an array".into(),
        toml::Value::Table(_) => "a table".into(),
    }
}

/// An expiry: a TOML date-time with an offset (`2027-01-31T18:00:00Z`).
fn time_of(value: &toml::Value) -> Result<SystemTime, String> {
    let toml::Value::Datetime(datetime) = value else {
        return Err(format!(
            "{} is not a time: write a date-time with its offset, 2027-01-31T18:00:00Z",
            shown(value)
        ));
    };
    let (Some(date), Some(time), Some(offset)) = (datetime.date, datetime.time, datetime.offset)
    else {
        return Err(format!(
            "{datetime} is not a point in time: give a date, a time and an offset (Z for UTC), \
             2027-01-31T18:00:00Z"
        ));
    };
    let days = days_from_civil(i64::from(date.year), date.month.into(), date.day.into());
    let offset_minutes = match offset {
        toml::value::Offset::Z => 0,
        toml::value::Offset::Custom { minutes } => i64::from(minutes),
    };
    let seconds = days * 86_400
        + i64::from(time.hour) * 3_600
        + i64::from(time.minute) * 60
        + i64::from(time.second.unwrap_or(0))
        - offset_minutes * 60;
    let nanos = time.nanosecond.unwrap_or(0);
    match u64::try_from(seconds) {
        Ok(seconds) => Ok(UNIX_EPOCH + Duration::new(seconds, nanos)),
        Err(_) => Err(format!("{datetime} is before 1970")),
    }
}

/// Days from 1970-01-01 to the proleptic Gregorian date `y-m-d` (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Reads and parses the file at `path`.
fn load(path: &Path) -> Result<(Vec<u8>, Limits), String> {
    let bytes = std::fs::read(path)
        .map_err(|error| format!("{}: cannot read the limits file: {error}", path.display()))?;
    let limits = load_bytes(path, &bytes)?;
    Ok((bytes, limits))
}

/// Parses `bytes`, the file at `path`.
fn load_bytes(path: &Path, bytes: &[u8]) -> Result<Limits, String> {
    let text = std::str::from_utf8(bytes)
        .map_err(|error| format!("{}: not UTF-8: {error}", path.display()))?;
    parse(path, text)
}

/// How long a change waits for the rest of its writes (an editor's several, a rename's two
/// events) before the file is read.
const SETTLE: Duration = Duration::from_millis(25);

/// Watches the directory of the file at `path` (and, for a symbolic link, its target's),
/// then reads the file and hands its limits to `apply`; from then on, after every change in
/// those directories, the file is read again and, when its bytes changed, parsed and handed to
/// `apply` (a mistake logged at error level first), from a thread of its own, until `apply`
/// answers `false` or the watcher returned is dropped.
///
/// # Errors
///
/// The file's mistake (see [`parse`]), or why it cannot be read or watched.
pub(crate) fn watch(
    path: PathBuf,
    mut apply: impl FnMut(Result<Limits, String>) -> bool + Send + 'static,
) -> Result<Box<dyn Send>, String> {
    // Absolute: the process may change its directory later.
    let path =
        std::path::absolute(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let (changed, changes) = mpsc::channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|event| settles(&event.kind)) {
            let _ = changed.send(());
        }
    })
    .map_err(|error| format!("{}: cannot watch the limits file: {error}", path.display()))?;
    let mut directories = vec![directory_of(&path)];
    if let Ok(target) = std::fs::canonicalize(&path)
        && directory_of(&target) != directories[0]
    {
        directories.push(directory_of(&target));
    }
    for directory in &directories {
        if !directory.is_dir() {
            return Err(format!(
                "{}: cannot read the limits file: its directory {} does not exist",
                path.display(),
                directory.display()
            ));
        }
        watcher
            .watch(directory, notify::RecursiveMode::NonRecursive)
            .map_err(|error| {
                format!(
                    "{}: cannot watch its directory {}: {error}",
                    path.display(),
                    directory.display()
                )
            })?;
    }
    // Read once watched, so that no change between the two is missed.
    let (bytes, limits) = load(&path)?;
    apply(Ok(limits));
    tracing::info!(path = %path.display(), "the limits file is in force, and watched");
    std::thread::Builder::new()
        .name("ratelimit-limits-file".into())
        .spawn(move || reload(&path, bytes, &changes, apply))
        .map_err(|error| format!("cannot start the limits file's thread: {error}"))?;
    Ok(Box::new(watcher))
}

/// The directory `path` is in.
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether an event may have changed the file: anything but a read, except the close of a
/// file opened for writing (the end of an edit in place).
fn settles(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    match kind {
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        notify::EventKind::Access(_) => false,
        _ => true,
    }
}

/// The longest a change waits for its writes to settle: a directory that never goes quiet
/// (a log written beside the file) does not keep a change from being read.
const SETTLE_AT_MOST: Duration = Duration::from_millis(250);

/// Re-reads the file after each change in its directory and hands it to `apply` when its
/// bytes changed, until `apply` answers `false` or the watcher is dropped (which ends
/// `changes`). `seen`: the bytes last handed over, so that a change is judged once.
fn reload(
    path: &Path,
    mut seen: Vec<u8>,
    changes: &mpsc::Receiver<()>,
    mut apply: impl FnMut(Result<Limits, String>) -> bool,
) {
    let mut unreadable = false;
    while changes.recv().is_ok() {
        // The rest of this change's events, for a while.
        let started = std::time::Instant::now();
        while started.elapsed() < SETTLE_AT_MOST {
            match changes.recv_timeout(SETTLE) {
                Ok(()) => {}
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        let bytes = match std::fs::read(path) {
            Ok(bytes) if bytes == seen && !unreadable => continue,
            Ok(bytes) => {
                unreadable = false;
                bytes
            }
            // Deleted, or between an editor's delete and its write: rejected once (the next
            // event reads it again).
            Err(_) if unreadable => continue,
            Err(error) => {
                unreadable = true;
                let error = format!("{}: cannot read the limits file: {error}", path.display());
                tracing::error!(%error, "the limits file's change is rejected; the limits in force stay");
                if !apply(Err(error)) {
                    return;
                }
                continue;
            }
        };
        let change = load_bytes(path, &bytes);
        seen = bytes;
        if let Err(error) = &change {
            tracing::error!(%error, "the limits file's change is rejected; the limits in force stay");
        } else {
            tracing::info!(path = %path.display(), "the limits file changed");
        }
        if !apply(change) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Algorithm;
    use crate::registry::Mode;

    fn parsed(text: &str) -> Result<Limits, String> {
        parse(Path::new("limits.toml"), text)
    }

    #[test]
    fn a_complete_file_parses() {
        let limits = parsed(
            r#"
mode = "enforce"

[scopes.login]
threshold = 10
period = "1m"
mode = "shadow"

[scopes.login.keys]
"partner-7" = { threshold = 100, period = 60, algorithm = "sliding_window_counter" }
mallory = { block = true, until = 2027-01-31T18:00:00+01:00 }
health = { exempt = true }

[scopes."app::search#2"]
mode = "off"
"#,
        )
        .unwrap();
        assert_eq!(limits.mode, Some(Mode::Enforce));
        let login = &limits.scopes["login"];
        assert_eq!(
            login.rate,
            Some(Rate::new_const(10, Duration::from_secs(60)))
        );
        assert!(login.code_algorithm);
        assert_eq!(login.mode, Some(Mode::Shadow));
        let partner = login.overrides["partner-7"];
        assert_eq!(
            partner.action,
            super::super::Action::Rate(
                Rate::new_const(100, Duration::from_secs(60))
                    .with_algorithm(Algorithm::SlidingWindowCounter)
            )
        );
        assert!(!partner.code_algorithm);
        let mallory = login.overrides["mallory"];
        assert_eq!(
            mallory.expires,
            Some(UNIX_EPOCH + Duration::from_secs(1_801_414_800))
        );
        assert_eq!(limits.scopes["app::search#2"].mode, Some(Mode::Off));
    }

    #[test]
    fn each_mistake_names_the_file_the_line_and_the_entry() {
        let cases: &[(&str, &str)] = &[
            (
                "[scopes.a]\nthreshold = 0\nperiod = \"1m\"\n",
                "limits.toml:2: scope \"a\": threshold 0",
            ),
            (
                "[scopes.a]\nthreshold = 1\nperiod = \"soon\"\n",
                "limits.toml:2: scope \"a\": period \"soon\" is not a duration",
            ),
            (
                "[scopes.a]\nthreshold = 1\n",
                "limits.toml:2: scope \"a\": a rate needs both",
            ),
            (
                "[scopes.a]\nmode = \"of\"\n",
                "limits.toml:2: scope \"a\": mode: `of` is not a mode",
            ),
            (
                "\n[scopes.a]\nlimit = 3\n",
                "limits.toml:3: unknown field `limit`",
            ),
            (
                "[scopes.a]\n[scopes.a]\n",
                "limits.toml:2: an entry given twice",
            ),
            (
                "[scopes.a.keys]\nbob = { exempt = true }\nbob = { block = true }\n",
                "limits.toml:3: an entry given twice",
            ),
            (
                "[scopes.a.keys]\nbob = { block = true, until = \"tomorrow\" }\n",
                "limits.toml:2: scope \"a\", the override of the key on this line: until: \"tomorrow\" is not a time",
            ),
            (
                "[scopes.a.keys]\nbob = { block = true, until = 2027-01-31T18:00:00 }\n",
                "is not a point in time",
            ),
            (
                "[scopes.a.keys]\nbob = { block = true, exempt = true }\n",
                "not several",
            ),
            ("[scopes.a.keys]\nbob = {}\n", "say what it does"),
            (
                "[scopes.a]\nthreshold = 1\nperiod = \"1m\"\nalgorithm = \"fixed\"\n",
                "`fixed` is not an algorithm",
            ),
            ("mode = 3\n", "limits.toml:1:"),
            ("[scopes.a\n", "limits.toml:1:"),
            // A key with dots, unquoted: nested tables, whose parts are not quoted.
            (
                "[scopes.a.keys]\n192.168.1.1 = { block = true }\n",
                "must be quoted",
            ),
            ("[scopes.a.keys]\nbob = 3\n", "an override is a table"),
            // A scope's name with `::` or `.` left unquoted: told to quote it.
            (
                "[scopes.app::search]\nmode = \"off\"\n",
                "is quoted: [scopes.\"app::search\"]",
            ),
            (
                "[scopes.app.search]\nmode = \"off\"\n",
                "limits.toml:1: a table where a field goes",
            ),
            (
                "[scopes.app.search]\nmode = \"off\"\n",
                "is quoted: [scopes.\"app::search\"]",
            ),
            // A key's override outside `.keys`, in a scope or at the top: not quoted.
            (
                "[scopes.a]\nbob = { block = true }\n",
                "goes under [scopes.\"<scope>\".keys]",
            ),
            ("bob = { block = true }\n", "a table where a field goes"),
            // A misspelt field of an override: named, with the field it meant.
            (
                "[scopes.a.keys]\nbob = { treshold = 3, period = \"1m\" }\n",
                "unknown field `treshold`: did you mean `threshold`?",
            ),
            // Every mistake, each at its line.
            (
                "mode = \"of\"\n[scopes.a]\nthreshold = 0\nperiod = \"1m\"\n",
                "2 mistakes:\nlimits.toml:1: mode: `of` is not a mode: `enforce`, `shadow` or \
                 `off`\nlimits.toml:3: scope \"a\": threshold 0",
            ),
            (
                "[scopes.a.keys]\nbob = { threshold = \"x\", period = 1 }\n",
                "limits.toml:2:",
            ),
        ];
        for (text, expected) in cases {
            let error = parsed(text).expect_err(text);
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(
                !expected.contains("unknown field `limit`") || !error.contains("is quoted"),
                "a scope's hint for a field's mistake: {error}"
            );
            assert!(
                !error.contains("bob") && !error.contains("168"),
                "a key quoted: {error}"
            );
        }
    }

    /// The guide's complete file parses, as its comments say.
    #[test]
    fn the_guides_file_parses() {
        let page = include_str!("../guide/operating.md");
        let start = page.find("```toml\n").expect("the guide's limits file") + "```toml\n".len();
        let end = start + page[start..].find("```").expect("its end");
        let limits = parsed(&page[start..end]).unwrap();
        assert_eq!(limits.mode, None, "the mode is left to the limiter");
        let login = &limits.scopes["login"];
        assert_eq!(
            login.rate,
            Some(Rate::new_const(10, Duration::from_secs(60)))
        );
        assert_eq!(login.overrides.len(), 3);
        assert_eq!(
            limits.scopes["app::reports::export"].mode,
            Some(Mode::Shadow)
        );
        assert_eq!(limits.scopes["layer@100/1m"].overrides.len(), 1);
    }

    #[test]
    fn dates_count_days_as_the_calendar_does() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 12, 5), 20_792);
    }
}
