//! The limits shared through Redis, as the store keeps them (`registry/redis.rs` gives them
//! their meaning): the entries, a hash (field → value), and their change log, a stream naming
//! each changed field, under the key prefix and [`REGISTRY_TAG`] (one hash tag: one Cluster
//! slot, so one script reads or writes both). A reader keeps the id of the last log entry it
//! applied, and each read costs it the entries changed since (`registry_read.lua`); a change
//! is one script (`registry_write.lua`), waiting for replicas as a check does. The store's
//! `read_shared` and `write_shared` (`mod.rs`) run them within its timeout.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};

use super::script::exchange;
use super::target::Connection;
use crate::error::StoreError;
use crate::layout::REGISTRY_TAG;

/// Reads the changes since a reader's last, or every entry: `registry_read.lua`.
static READ: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(READ_SOURCE));

/// The text of [`READ`].
const READ_SOURCE: &str = include_str!("registry_read.lua");

/// Writes and removes entries, logging each change: `registry_write.lua`.
static WRITE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(WRITE_SOURCE));

/// The text of [`WRITE`].
const WRITE_SOURCE: &str = include_str!("registry_write.lua");

/// About how many changes the log keeps: a reader further behind (an instance cut off while
/// more changes than this were made) reads every entry again, once.
const LOG_LENGTH: u64 = 10_000;

/// At most how many log entries one read returns (the next read goes on from there).
const READ_COUNT: u64 = 1_000;

/// The entries' key and the log's, after the prefix; a write's mark's, before its id.
const ENTRIES: &str = "entries";
const LOG: &str = "changes";
const WRITE_MARK: &str = "write:";

/// What a read of the shared limits found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SharedRead {
    /// `entries` are every entry (the reader replaces what it has), not the changed ones.
    pub(crate) whole: bool,
    /// The id of the last log entry read, and its mark: the next read's `since`.
    pub(crate) last: String,
    pub(crate) mark: String,
    /// Each field read and its value; `None`: removed.
    pub(crate) entries: Vec<(String, Option<String>)>,
    /// Whether the log holds entries past `last` still to read.
    pub(crate) more: bool,
}

/// One field's change in a write of the shared limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// The field set to the value.
    Set(String, String),
    /// The field removed.
    Remove(String),
    /// The field removed while its value's expiry lies more than a second before the
    /// server's clock (an override a reader saw expired).
    RemoveExpired(String),
}

/// The Redis keys of the shared limits under `prefix`: the entries' hash and the log's stream.
pub(super) fn keys(prefix: &str) -> [String; 2] {
    [ENTRIES, LOG].map(|name| format!("{prefix}{REGISTRY_TAG}{name}"))
}

/// The key that marks the write `id` done, under `prefix` (in the shared limits' slot).
pub(super) fn write_mark(prefix: &str, id: &str) -> String {
    format!("{prefix}{REGISTRY_TAG}{WRITE_MARK}{id}")
}

/// The arguments of a read since the log entry `since` and its mark (`None`: every entry).
pub(super) fn read_arguments(since: Option<(&str, &str)>) -> Vec<String> {
    let (last, mark) = since.unwrap_or(("", ""));
    vec![last.to_owned(), READ_COUNT.to_string(), mark.to_owned()]
}

/// The arguments of the write `id` of `writes` after removing the fields `clear` matches.
pub(super) fn write_arguments(clear: Option<&str>, id: &str, writes: &[Write]) -> Vec<String> {
    let mut arguments = Vec::with_capacity(3 + 3 * writes.len());
    arguments.push(LOG_LENGTH.to_string());
    arguments.push(clear.unwrap_or("").to_owned());
    arguments.push(id.to_owned());
    for write in writes {
        let (op, field, value) = match write {
            Write::Set(field, value) => ("s", field, value.as_str()),
            Write::Remove(field) => ("d", field, ""),
            Write::RemoveExpired(field) => ("c", field, ""),
        };
        arguments.extend([op.to_owned(), field.clone(), value.to_owned()]);
    }
    arguments
}

/// Runs the read (`write`: false) or the write script on `keys` with `arguments` over
/// `connection`: by `EVALSHA`, then `EVAL` if the server lost it; sent again once after a
/// dropped connection (both scripts may run twice); a write followed by `WAIT` for
/// `wait`'s replicas. Returns the reply and how many replicas acknowledged it.
pub(super) async fn call(
    connection: &mut Connection,
    keys: &[String],
    arguments: &[String],
    write: bool,
    wait: Option<(u32, Duration)>,
) -> RedisResult<(Value, Option<u64>)> {
    let (script, source) = if write {
        (&*WRITE, WRITE_SOURCE)
    } else {
        (&*READ, READ_SOURCE)
    };
    let wait = wait.filter(|_| write);
    let command = |eval: bool| {
        let mut command = if eval {
            let mut command = redis::cmd("EVAL");
            command.arg(source);
            command
        } else {
            let mut command = redis::cmd("EVALSHA");
            command.arg(script.get_hash());
            command
        };
        command.arg(keys.len()).arg(keys).arg(arguments);
        command
    };
    let mut result = exchange(connection, command(false), wait, false).await;
    if matches!(&result, Err(error) if error.is_connection_dropped()) {
        result = exchange(connection, command(false), wait, false).await;
    }
    if matches!(&result, Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
    {
        result = exchange(connection, command(true), wait, false).await;
    }
    result
}

/// A read's reply, decoded.
///
/// # Errors
///
/// A reply of another shape.
pub(super) fn decode_read(reply: Value) -> Result<SharedRead, StoreError> {
    let mut reply = match reply {
        Value::Array(items) => items.into_iter(),
        other => return Err(malformed(&other)),
    };
    let (Some(Value::Int(whole)), Some(last), Some(Value::Int(more)), Some(mark)) =
        (reply.next(), reply.next(), reply.next(), reply.next())
    else {
        return Err(StoreError::Protocol(
            "the registry's read: a short reply".into(),
        ));
    };
    let last = text(last)?.ok_or_else(|| StoreError::Protocol("no log id".into()))?;
    let mut entries = Vec::with_capacity(reply.len() / 2);
    while let (Some(field), Some(value)) = (reply.next(), reply.next()) {
        let field = text(field)?.ok_or_else(|| StoreError::Protocol("no field".into()))?;
        entries.push((field, text(value)?));
    }
    Ok(SharedRead {
        whole: whole != 0,
        last,
        mark: text(mark)?.unwrap_or_default(),
        entries,
        more: more != 0,
    })
}

/// A write's reply, decoded: how many fields changed.
///
/// # Errors
///
/// A reply of another shape.
pub(super) fn decode_write(reply: &Value) -> Result<u64, StoreError> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(changed)] => Ok(u64::try_from(*changed).unwrap_or(0)),
            _ => Err(StoreError::Protocol(
                "the registry's write: a malformed reply".into(),
            )),
        },
        other => Err(malformed(other)),
    }
}

/// A bulk string's text (bytes that are not UTF-8 replaced, for the reader to reject as it
/// rejects any malformed entry, which a hand may have written); `None` for a nil (a removed
/// field).
fn text(value: Value) -> Result<Option<String>, StoreError> {
    match value {
        Value::Nil => Ok(None),
        Value::BulkString(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Value::SimpleString(text) => Ok(Some(text)),
        other => Err(malformed(&other)),
    }
}

/// A reply of another shape than the script's (not quoted: it may hold a caller's key).
fn malformed(value: &Value) -> StoreError {
    let kind = match value {
        Value::Array(_) => "an array",
        Value::Int(_) => "an integer",
        Value::ServerError(_) => "an error",
        _ => "a value of another type",
    };
    StoreError::Protocol(
        format!("the registry's script replied with {kind} where it sends text").into(),
    )
}
