//! The limits shared through Redis, as the store keeps them (`registry/redis.rs` gives them
//! their meaning): the entries, a hash (field → value), and their change log, a stream naming
//! each changed field, under the key prefix and [`REGISTRY_TAG`] (one hash tag: one Cluster
//! slot, so one script reads or writes both). A reader keeps the id of the last log entry it
//! applied, and each read costs it the entries changed since (`registry_read.lua`); a change
//! is one script (`registry_write.lua`), waiting for replicas as a check does. The store's
//! `read_shared` and `write_shared` (`mod.rs`) run them within its timeout.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Cmd, ErrorKind, RedisResult, ServerErrorKind, Value};

use super::script::first_failure;
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

/// The entries' key and the log's, after the prefix.
const ENTRIES: &str = "entries";
const LOG: &str = "changes";

/// What a read of the shared limits found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SharedRead {
    /// `entries` are every entry (the reader replaces what it has), not the changed ones.
    pub(crate) whole: bool,
    /// The id of the last log entry read: the next read's `since`.
    pub(crate) last: String,
    /// Each field read and its value; `None`: removed.
    pub(crate) entries: Vec<(String, Option<String>)>,
    /// Whether the log holds entries past `last` still to read.
    pub(crate) more: bool,
}

/// The Redis keys of the shared limits under `prefix`: the entries' hash and the log's stream.
pub(super) fn keys(prefix: &str) -> [String; 2] {
    [ENTRIES, LOG].map(|name| format!("{prefix}{REGISTRY_TAG}{name}"))
}

/// The arguments of a read since the log entry `since` (`None`: every entry).
pub(super) fn read_arguments(since: Option<&str>) -> Vec<String> {
    vec![since.unwrap_or("").to_owned(), READ_COUNT.to_string()]
}

/// The arguments of a write of `entries` after removing the fields `clear` matches.
pub(super) fn write_arguments(
    clear: Option<&str>,
    entries: &[(String, Option<String>)],
) -> Vec<String> {
    let mut arguments = Vec::with_capacity(2 + 2 * entries.len());
    arguments.push(LOG_LENGTH.to_string());
    arguments.push(clear.unwrap_or("").to_owned());
    for (field, value) in entries {
        arguments.push(field.clone());
        arguments.push(value.clone().unwrap_or_default());
    }
    arguments
}

/// Runs the read (`write`: false) or the write script on `keys` with `arguments` over
/// `connection`: by `EVALSHA`, then `EVAL` if the server lost it; sent again once after a
/// dropped connection (both scripts may run twice); a write followed by `WAIT` for
/// `wait`'s replicas. Returns the reply and how many replicas acknowledged it.
pub(super) async fn call(
    connection: &mut Connection,
    keys: &[String; 2],
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
        command.arg(keys.len()).arg(&keys[..]).arg(arguments);
        command
    };
    let mut result = send(connection, &command(false), wait).await;
    if matches!(&result, Err(error) if error.is_connection_dropped()) {
        result = send(connection, &command(false), wait).await;
    }
    if matches!(&result, Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
    {
        result = send(connection, &command(true), wait).await;
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
    let (Some(Value::Int(whole)), Some(last), Some(Value::Int(more))) =
        (reply.next(), reply.next(), reply.next())
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

/// Sends `command`, then with `wait` (replicas, time limit) `WAIT` for them on the same
/// connection; returns the reply and how many replicas acknowledged it.
async fn send(
    connection: &mut Connection,
    command: &Cmd,
    wait: Option<(u32, Duration)>,
) -> RedisResult<(Value, Option<u64>)> {
    let Some((replicas, limit)) = wait else {
        return connection
            .query_as(command)
            .await
            .map(|reply| (reply, None));
    };
    let millis = u64::try_from(limit.as_micros().div_ceil(1_000))
        .unwrap_or(u64::MAX)
        .max(1);
    let mut pipeline = redis::pipe();
    pipeline
        .add_command(command.clone())
        .cmd("WAIT")
        .arg(replicas)
        .arg(millis);
    let (reply, acknowledged): (Value, u64) = connection
        .query_pipeline(&pipeline, false)
        .await
        .map_err(first_failure)?;
    Ok((reply, Some(acknowledged)))
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
