//! A reset by scope: the keys of a scope's logs found with `SCAN ... MATCH` on the server (in a
//! cluster, on the master that owns a pattern's hash tag, or on every master), and forgotten
//! by the reset script (`reset.lua`, which keeps what live leases reserved: 500 keys per call
//! on one server; one key per call in a cluster, whose keys of one node may lie in several
//! slots). Each round trip is bounded by the store's timeout; a pattern without a tag costs a
//! pass over the keyspace (`SCAN` visits every key once, 1,000 per round trip): a support
//! desk's tool, not a check's.

use std::time::Duration;

use redis::Value;
#[cfg(feature = "cluster")]
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use super::script::{self, Call};
use super::target::Connection;
use crate::error::StoreError;
use crate::limit::LimitRef;
use crate::rate::Rate;
use crate::runtime::timeout;

/// How many keys a `SCAN` round trip asks to visit.
const SCAN_COUNT: usize = 1_000;

/// How many keys one reset forgets on a single server.
const RESET_BATCH: usize = 500;

/// How many times the scan is made again when the cluster's masters changed meanwhile.
const ATTEMPTS: usize = 3;

/// A glob pattern (after the escaped key prefix), and the hash slot every key it can find
/// lies in, when one does (a tagged pattern, in a cluster).
pub(super) struct Pattern {
    pub(super) glob: String,
    pub(super) slot: Option<u16>,
}

/// A master of a cluster, or the single server (`address` `None`).
#[derive(PartialEq, Eq, Debug)]
struct Node {
    address: Option<(String, u16)>,
    ranges: Vec<(u16, u16)>,
}

/// Forgets `plain` (the one key without a window) whatever it holds, and the keys under
/// `prefix` that one of `patterns` finds and `keep` accepts (given without the prefix), on the
/// masters `connection` leads to, as a reset does. When a cluster's masters (or their slots)
/// changed during the scan, it is made again, up to [`ATTEMPTS`] times. Returns how many keys
/// were forgotten.
///
/// # Errors
///
/// A round trip that failed or took longer than `limit`; the cluster's masters still changing
/// after the last attempt. The keys forgotten before stay forgotten.
pub(super) async fn forget_matching(
    connection: &mut Connection,
    prefix: &str,
    plain: &str,
    patterns: &[Pattern],
    keep: impl Fn(&str) -> bool,
    limit: Duration,
) -> Result<u64, StoreError> {
    let escaped = crate::layout::escape(prefix);
    let mut forgotten = forget(connection, prefix, vec![plain.to_owned()], limit).await?;
    let mut nodes = masters(connection, limit).await?;
    for _ in 0..ATTEMPTS {
        let mut found = Vec::new();
        for pattern in patterns {
            let glob = format!("{escaped}{}", pattern.glob);
            for node in nodes.iter().filter(|node| owns(node, pattern.slot)) {
                scan(connection, node, &glob, limit, |key| {
                    if let Some(stored) = key.strip_prefix(prefix)
                        && stored != plain
                        && keep(stored)
                    {
                        found.push(stored.to_owned());
                    }
                })
                .await?;
            }
        }
        forgotten += forget(connection, prefix, found, limit).await?;
        let now = masters(connection, limit).await?;
        if now == nodes {
            return Ok(forgotten);
        }
        nodes = now;
    }
    Err(StoreError::Protocol(
        "the cluster's slots kept moving during the reset; try again".into(),
    ))
}

/// Whether `node` is to be scanned for a pattern whose keys lie in `slot` (`None`: anywhere).
fn owns(node: &Node, slot: Option<u16>) -> bool {
    match (slot, &node.address) {
        (Some(slot), Some(_)) => node
            .ranges
            .iter()
            .any(|&(first, last)| (first..=last).contains(&slot)),
        _ => true,
    }
}

/// Every key `glob` finds on `node`, handed to `found`.
async fn scan(
    connection: &mut Connection,
    node: &Node,
    glob: &str,
    limit: Duration,
    mut found: impl FnMut(String),
) -> Result<(), StoreError> {
    let mut cursor = String::from("0");
    loop {
        let mut command = redis::cmd("SCAN");
        command
            .arg(&cursor)
            .arg("MATCH")
            .arg(glob)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let reply = bounded(limit, routed(connection, command, node)).await?;
        let (next, keys) = scan_reply(reply)?;
        keys.into_iter().for_each(&mut found);
        if next == "0" {
            return Ok(());
        }
        cursor = next;
    }
}

/// Forgets `keys` (without the prefix) with the reset script; returns how many existed.
async fn forget(
    connection: &mut Connection,
    prefix: &str,
    keys: Vec<String>,
    limit: Duration,
) -> Result<u64, StoreError> {
    let batch = if connection.is_cluster() {
        1
    } else {
        RESET_BATCH
    };
    // The script takes each key as it finds it (a counter's hash with its suffix): as logs,
    // whose keys are sent as named.
    let rate = Rate::new_const(1, Duration::from_secs(1));
    let mut forgotten = 0;
    for keys in keys.chunks(batch) {
        let limits: Vec<LimitRef<'_>> = keys
            .iter()
            .map(|key| LimitRef { key, rate, cost: 0 })
            .collect();
        let call = Call::Reset { limits: &limits };
        let reply = match timeout(limit, script::run(connection, prefix, call, None)).await {
            Ok(Ok((reply, _))) => reply,
            Ok(Err(error)) => return Err(StoreError::Redis(error)),
            Err(_elapsed) => return Err(StoreError::Timeout(limit)),
        };
        if let [count] = reply.as_slice() {
            forgotten += u64::try_from(*count).unwrap_or(0);
        }
    }
    Ok(forgotten)
}

/// The masters of a cluster, by address, with their slot ranges, from `CLUSTER SLOTS`; the
/// server itself for a single server.
#[cfg(feature = "cluster")]
async fn masters(connection: &mut Connection, limit: Duration) -> Result<Vec<Node>, StoreError> {
    if !connection.is_cluster() {
        return Ok(vec![Node {
            address: None,
            ranges: Vec::new(),
        }]);
    }
    let mut command = redis::cmd("CLUSTER");
    command.arg("SLOTS");
    let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
    let reply = bounded(limit, connection.route_value(command, routing)).await?;
    let Value::Array(ranges) = reply else {
        return Err(StoreError::Protocol("CLUSTER SLOTS: not an array".into()));
    };
    let mut nodes: Vec<Node> = Vec::new();
    for range in ranges {
        let Value::Array(fields) = range else {
            continue;
        };
        let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            continue;
        };
        let (Ok(first), Ok(last)) = (u16::try_from(*first), u16::try_from(*last)) else {
            continue;
        };
        let host = match master.first() {
            Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
            Some(Value::SimpleString(text)) => text.clone(),
            _ => continue,
        };
        let Some(Value::Int(port)) = master.get(1) else {
            continue;
        };
        let Ok(port) = u16::try_from(*port) else {
            continue;
        };
        let address = Some((host, port));
        match nodes.iter_mut().find(|node| node.address == address) {
            Some(node) => node.ranges.push((first, last)),
            None => nodes.push(Node {
                address,
                ranges: vec![(first, last)],
            }),
        }
    }
    for node in &mut nodes {
        node.ranges.sort_unstable();
    }
    nodes.sort_by(|a, b| a.address.cmp(&b.address));
    Ok(nodes)
}

/// `command` sent to `node`: by its address in a cluster (redis-rs's own slot map may be older
/// than the `CLUSTER SLOTS` just read, and a `SCAN` names no key that a `MOVED` could correct);
/// by its first slot's master when it has no usable address.
#[cfg(feature = "cluster")]
async fn routed(
    connection: &mut Connection,
    command: redis::Cmd,
    node: &Node,
) -> redis::RedisResult<Value> {
    let routing = match &node.address {
        Some((host, port)) if !host.is_empty() && host != "?" => SingleNodeRoutingInfo::ByAddress {
            host: host.clone(),
            port: *port,
        },
        _ => match node.ranges.first() {
            Some(&(first, _)) => {
                SingleNodeRoutingInfo::SpecificNode(Route::new(first, SlotAddr::Master))
            }
            None => SingleNodeRoutingInfo::Random,
        },
    };
    connection
        .route_value(command, RoutingInfo::SingleNode(routing))
        .await
}

/// Without the `cluster` feature, the one server.
#[cfg(not(feature = "cluster"))]
#[allow(clippy::unused_async)] // the cluster's version asks the cluster
async fn masters(_: &mut Connection, _: Duration) -> Result<Vec<Node>, StoreError> {
    Ok(vec![Node {
        address: None,
        ranges: Vec::new(),
    }])
}

/// Without the `cluster` feature, `command` sent to the one server.
#[cfg(not(feature = "cluster"))]
async fn routed(
    connection: &mut Connection,
    command: redis::Cmd,
    _: &Node,
) -> redis::RedisResult<Value> {
    connection.query_value(&command).await
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
