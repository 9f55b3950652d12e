//! A reset by scope: the keys of a scope's logs found with `SCAN ... MATCH` on the server (in a
//! cluster, on every master), and deleted with `UNLINK`, one key per command in a cluster
//! (keys of one node may lie in several slots). Each round trip is bounded by the store's
//! timeout; the whole reset is as long as the keyspace is (`SCAN` visits every key once, 1,000
//! per round trip): a support desk's tool, not a check's.

use std::time::Duration;

use redis::Value;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use super::target::Connection;
use crate::error::StoreError;
use crate::runtime::timeout;

/// How many keys a `SCAN` round trip asks to visit.
const SCAN_COUNT: usize = 1_000;

/// Deletes the keys under `prefix` that one of `patterns` (globs, after the escaped prefix)
/// finds and `keep` accepts (given without the prefix), on every master `connection` leads to,
/// and `plain` (the one key without a window) whatever it holds. Returns how many keys were
/// deleted.
///
/// # Errors
///
/// A round trip that failed or took longer than `limit`: the keys deleted before it stay
/// deleted.
pub(super) async fn delete_matching(
    connection: &mut Connection,
    prefix: &str,
    plain: &str,
    patterns: &[String],
    keep: impl Fn(&str) -> bool,
    limit: Duration,
) -> Result<u64, StoreError> {
    let nodes = masters(connection, limit).await?;
    let escaped = crate::layout::escape(prefix);
    let mut found: Vec<String> = vec![format!("{prefix}{plain}")];
    for node in &nodes {
        for pattern in patterns {
            let matching = format!("{escaped}{pattern}");
            let mut cursor = String::from("0");
            loop {
                let mut command = redis::cmd("SCAN");
                command
                    .arg(&cursor)
                    .arg("MATCH")
                    .arg(&matching)
                    .arg("COUNT")
                    .arg(SCAN_COUNT);
                let reply = bounded(limit, routed(connection, command, *node)).await?;
                let (next, keys) = scan_reply(reply)?;
                found.extend(keys.into_iter().filter(|key| {
                    key.strip_prefix(prefix)
                        .is_some_and(|stored| stored != plain && keep(stored))
                }));
                if next == "0" {
                    break;
                }
                cursor = next;
            }
        }
    }
    let mut deleted = 0;
    for key in found {
        let mut command = redis::cmd("UNLINK");
        command.arg(&key);
        let reply = bounded(limit, connection.query_value(&command)).await?;
        if let Value::Int(count) = reply {
            deleted += u64::try_from(count).unwrap_or(0);
        }
    }
    Ok(deleted)
}

/// A slot of each master, to route a command to it: `None` for a single server.
async fn masters(
    connection: &mut Connection,
    limit: Duration,
) -> Result<Vec<Option<u16>>, StoreError> {
    if !connection.is_cluster() {
        return Ok(vec![None]);
    }
    let mut command = redis::cmd("CLUSTER");
    command.arg("SLOTS");
    let reply = bounded(limit, routed(connection, command, None)).await?;
    let Value::Array(ranges) = reply else {
        return Err(StoreError::Protocol("CLUSTER SLOTS: not an array".into()));
    };
    let mut masters: Vec<(Value, u16)> = Vec::new();
    for range in ranges {
        let Value::Array(fields) = range else {
            continue;
        };
        let (Some(Value::Int(first)), Some(master)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        let Ok(first) = u16::try_from(*first) else {
            continue;
        };
        if !masters.iter().any(|(known, _)| known == master) {
            masters.push((master.clone(), first));
        }
    }
    Ok(masters.into_iter().map(|(_, slot)| Some(slot)).collect())
}

/// `command` sent to the master of `slot` (`None`: any node, or the single server).
async fn routed(
    connection: &mut Connection,
    command: redis::Cmd,
    slot: Option<u16>,
) -> redis::RedisResult<Value> {
    let routing = match slot {
        Some(slot) => SingleNodeRoutingInfo::SpecificNode(Route::new(slot, SlotAddr::Master)),
        None => SingleNodeRoutingInfo::Random,
    };
    connection
        .route_value(command, RoutingInfo::SingleNode(routing))
        .await
}

/// `call`, failed with [`StoreError::Timeout`] when it takes longer than `limit`.
async fn bounded(
    limit: Duration,
    call: impl Future<Output = redis::RedisResult<Value>>,
) -> Result<Value, StoreError> {
    match timeout(limit, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(StoreError::Redis(error)),
        Err(_elapsed) => Err(StoreError::Timeout(limit)),
    }
}

/// A `SCAN` reply: the next cursor and the keys found.
fn scan_reply(reply: Value) -> Result<(String, Vec<String>), StoreError> {
    let text = |value: &Value| match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    };
    let malformed = || StoreError::Protocol("SCAN: malformed reply".into());
    let Value::Array(parts) = reply else {
        return Err(malformed());
    };
    let [cursor, Value::Array(keys)] = parts.as_slice() else {
        return Err(malformed());
    };
    let cursor = text(cursor).ok_or_else(malformed)?;
    // A key that is not UTF-8 is no key of this crate's.
    Ok((cursor, keys.iter().filter_map(text).collect()))
}
