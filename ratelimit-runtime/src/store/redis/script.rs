//! The sliding window log script and the whole exchange of one check with Redis: the command,
//! the ladder of resends that gets it run, and the reply.

use std::io::Write as _;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{Cmd, ErrorKind, RedisResult, RedisWrite as _, ServerErrorKind};

use super::target::Connection;
use crate::decision::Decision;
use crate::error::StoreError;
use crate::limit::Limit;

/// The sliding window log script, run through `EVALSHA` (see [`evalsha`]), or `EVAL` when the
/// server has lost it (see [`eval`]).
///
/// `KEYS[1]`: the key's sorted set (scores: integer microseconds since the Unix epoch).
/// `ARGV`: period (µs), threshold, a unique member, now (µs since the Unix epoch, or empty for
/// the server's `TIME`). Replies `{admitted, count, retry_after_us, reset_after_us}`; the TTL it
/// sets is in milliseconds. A call resent with the same member is counted once. The full
/// contract heads `sliding_window.lua`.
///
/// The algorithm is the sliding window log (Figma, "An alternative approach to rate limiting",
/// 2017; the Redis sorted-set form of the seeds' articles), made atomic by running in one script.
pub(super) static SLIDING_WINDOW: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(SOURCE));

/// The text of [`SLIDING_WINDOW`].
const SOURCE: &str = include_str!("sliding_window.lua");

/// `EVALSHA <sha1> 1 <prefix><key> <period_us> <threshold> <member> <now_us or "">`: the
/// [`SLIDING_WINDOW`] call for one check, in a buffer sized for it up front. The key is written
/// into the command in its two pieces, never joined into a `String` of its own: building the
/// command allocates its two buffers and nothing else (a Redis check's other allocations, the
/// key's copy and two boxes, are the check path's: `check/remote.rs`, `check/future.rs` and
/// `runtime::HandOff`).
fn evalsha(prefix: &str, limit: Limit<'_>, member: &[u8], at: Option<u64>) -> Cmd {
    command(
        "EVALSHA",
        SLIDING_WINDOW.get_hash(),
        prefix,
        limit,
        member,
        at,
    )
}

/// `EVAL <script> 1 ...`: the same call with the script's text, for a server that has lost the
/// script (restarted, failed over, `SCRIPT FLUSH`). Running it also caches the script there, so
/// the next `EVALSHA` finds it; in a cluster it goes to the key's node, the one that lacks it.
fn eval(prefix: &str, limit: Limit<'_>, member: &[u8], at: Option<u64>) -> Cmd {
    command("EVAL", SOURCE, prefix, limit, member, at)
}

fn command(
    verb: &str,
    script: &str,
    prefix: &str,
    limit: Limit<'_>,
    member: &[u8],
    at: Option<u64>,
) -> Cmd {
    let Limit { key, rate } = limit;
    /// Digits of a `u64`, the most a number argument takes.
    const NUMBER: usize = 20;
    let bytes = verb.len() + script.len() + 1 + prefix.len() + key.len() + member.len();
    let mut command = Cmd::with_capacity(8, bytes + 3 * NUMBER);
    command.arg(verb).arg(script).arg(1);
    {
        let mut full_key = command.writer_for_next_arg();
        // Writing into the command's own `Vec<u8>` cannot fail.
        let _ = full_key.write_all(prefix.as_bytes());
        let _ = full_key.write_all(key.as_bytes());
    }
    command
        .arg(rate.period_us())
        .arg(rate.threshold())
        .arg(member);
    match at {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
    command
}

/// Runs the script for one check on `connection`: `EVALSHA`, sent once more when the
/// connection was found closed, and `EVAL` when the server answers `NOSCRIPT`. `member` names
/// the admission (one per check: a resend carries the same, which the script counts once);
/// `at` is the check's time (µs since the Unix epoch; `None`: the server's `TIME`).
///
/// # Errors
///
/// The last attempt's error: the connection's, or the server's.
pub(super) async fn run(
    connection: &mut Connection,
    prefix: &str,
    limit: Limit<'_>,
    member: &[u8],
    at: Option<u64>,
) -> RedisResult<Vec<i64>> {
    let command = evalsha(prefix, limit, member, at);
    let mut result = connection.query(&command).await;
    if matches!(&result, Err(err) if err.is_connection_dropped()) {
        // The connection was found closed (the server's idle timeout, a restart, a load
        // balancer): the call may or may not have reached Redis. The script counts a member
        // once, so the same call is sent once more, on the connection the manager makes again.
        result = connection.query(&command).await;
    }
    if matches!(&result, Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)) {
        // The server lost its scripts (restarted, failed over, `SCRIPT FLUSH`), so the call did
        // not run: it is sent once more with the script's text, which runs it and caches the
        // script, in one round trip, on the node that lacks it (routed by the key, as
        // `EVALSHA` was). Not redis-rs's `Script::invoke_async`, which answers `NOSCRIPT` with
        // `SCRIPT LOAD` and `EVALSHA` again: in a cluster it sends `SCRIPT LOAD` to every
        // master and succeeds only if all of them answer, so one dead master would keep the
        // live masters' keys from recovering after a restart or a failover, and each check
        // that met `NOSCRIPT` would cost a round trip to every master plus two to its own.
        // The other masters reload the script when their own checks meet `NOSCRIPT`.
        result = connection.query(&eval(prefix, limit, member, at)).await;
    }
    result
}

/// Turns the script's reply `{admitted, count, retry_after_us, reset_after_us}` into a
/// [`Decision`].
pub(super) fn decode(reply: &[i64], threshold: u64) -> Result<Decision, StoreError> {
    let &[admitted, count, retry_after, reset_after] = reply else {
        return Err(StoreError::Protocol(
            format!("expected 4 integers, got {}", reply.len()).into(),
        ));
    };
    let (Ok(count), Ok(retry_after), Ok(reset_after)) = (
        u64::try_from(count),
        u64::try_from(retry_after),
        u64::try_from(reset_after),
    ) else {
        return Err(StoreError::Protocol("negative count or duration".into()));
    };
    let reset_after = Duration::from_micros(reset_after);
    match admitted {
        1 => Ok(Decision::admitted(
            threshold,
            threshold.saturating_sub(count),
            reset_after,
        )),
        0 => Ok(Decision::denied(
            threshold,
            Duration::from_micros(retry_after),
            reset_after,
        )),
        other => Err(StoreError::Protocol(
            format!("admitted flag {other} is neither 0 nor 1").into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rate::Rate;

    /// The arguments of a command, as text.
    fn arguments(command: &Cmd) -> Vec<String> {
        command
            .args_iter()
            .map(|arg| match arg {
                redis::Arg::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                other => format!("<{other:?}>"),
            })
            .collect()
    }

    #[test]
    fn the_key_is_one_argument_made_of_the_prefix_and_the_key() {
        let rate = Rate::new(7, Duration::from_millis(1_500)).unwrap();
        let limit = |key| Limit { key, rate };
        let command = evalsha(
            "app:",
            limit("login:ünï:42"),
            b"00000000000000000000000000000001",
            Some(1_700_000_000_000_001),
        );
        assert_eq!(
            arguments(&command),
            [
                "EVALSHA",
                SLIDING_WINDOW.get_hash(),
                "1",
                "app:login:ünï:42",
                "1500000",
                "7",
                "00000000000000000000000000000001",
                "1700000000000001",
            ]
        );
        // Without a time, the script reads the server's clock; an empty prefix adds nothing.
        let command = evalsha("", limit("k"), b"m", None);
        assert_eq!(arguments(&command)[3..], ["k", "1500000", "7", "m", ""]);
        // After NOSCRIPT: the same call, with the script's text.
        let command = eval("p:", limit("k"), b"m", None);
        assert_eq!(arguments(&command)[0], "EVAL");
        assert_eq!(arguments(&command)[1], SOURCE);
        assert_eq!(
            arguments(&command)[2..],
            ["1", "p:k", "1500000", "7", "m", ""]
        );
    }

    #[test]
    fn decodes_replies() {
        let admitted = decode(&[1, 2, 0, 30_000_000], 5).unwrap();
        assert_eq!(admitted, Decision::admitted(5, 3, Duration::from_secs(30)));
        let denied = decode(&[0, 5, 1_500, 9_000], 5).unwrap();
        assert_eq!(
            denied,
            Decision::denied(
                5,
                Duration::from_micros(1_500),
                Duration::from_micros(9_000)
            )
        );
        assert!(decode(&[1, 2], 5).is_err());
        assert!(decode(&[2, 2, 0, 0], 5).is_err());
        assert!(decode(&[0, 2, -1, 0], 5).is_err());
    }
}
