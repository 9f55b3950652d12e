//! The sliding window log script and its calls: the command of one check, its reply, and the
//! unique member that names each admission.

use std::io::Write as _;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::{Cmd, RedisWrite as _};

use crate::error::StoreError;
use crate::{Decision, Rate};

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
/// into the command in its two pieces, never joined into a `String` of its own, so a check
/// builds no key: the command's two buffers are its only allocations on this side.
pub(super) fn evalsha(
    prefix: &str,
    key: &str,
    rate: Rate,
    member: &[u8],
    now_us: Option<u64>,
) -> Cmd {
    call(
        "EVALSHA",
        SLIDING_WINDOW.get_hash(),
        prefix,
        key,
        rate,
        member,
        now_us,
    )
}

/// `EVAL <script> 1 ...`: the same call with the script's text, for a server that has lost the
/// script (restarted, failed over, `SCRIPT FLUSH`). Running it also caches the script there, so
/// the next `EVALSHA` finds it; in a cluster it goes to the key's node, the one that lacks it.
pub(super) fn eval(prefix: &str, key: &str, rate: Rate, member: &[u8], now_us: Option<u64>) -> Cmd {
    call("EVAL", SOURCE, prefix, key, rate, member, now_us)
}

fn call(
    verb: &str,
    script: &str,
    prefix: &str,
    key: &str,
    rate: Rate,
    member: &[u8],
    now_us: Option<u64>,
) -> Cmd {
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
    match now_us {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
    command
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

/// Makes sorted-set members unique across processes and calls: 64 random bits chosen once per
/// store, then a 64-bit counter, written as 22 characters of the URL-safe base64 alphabet,
/// 6 bits each (the first holds the top 2). (Members that collide would merge two admissions
/// into one, the bug of timestamp-as-member designs.) Each admission in the window is one
/// member, so their length is most of a key's memory in Redis: 22 characters took 28 % less
/// `MEMORY USAGE` than the 32 hex digits of earlier versions.
pub(super) struct MemberSource {
    nonce: u64,
    sequence: AtomicU64,
}

/// The length of a member.
const MEMBER_LEN: usize = 22;

impl MemberSource {
    pub(super) fn new() -> MemberSource {
        // Without OS randomness, fall back to a per-process hash seed: still distinct per process.
        let nonce = getrandom::u64().unwrap_or_else(|_| {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(std::process::id())
        });
        MemberSource {
            nonce,
            sequence: AtomicU64::new(0),
        }
    }

    pub(super) fn next(&self) -> [u8; MEMBER_LEN] {
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        member(self.nonce, sequence)
    }
}

/// The member of `nonce` and `sequence` (see [`MemberSource`]).
fn member(nonce: u64, sequence: u64) -> [u8; MEMBER_LEN] {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits = (u128::from(nonce) << 64) | u128::from(sequence);
    let mut member = [0; MEMBER_LEN];
    for (i, char) in member.iter_mut().rev().enumerate() {
        *char = ALPHABET[((bits >> (6 * i)) & 63) as usize];
    }
    member
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_unique_and_url_safe() {
        let source = MemberSource::new();
        let first = source.next();
        let second = source.next();
        assert_ne!(first, second);
        let url_safe = |c: &u8| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_';
        assert!(first.iter().chain(&second).all(url_safe));
        // The nonce's characters are shared; the counter's last 6 bits are the last one.
        assert_eq!(&first[..10], &second[..10]);
        assert_eq!(member(0, 0), *b"AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(member(0, 1), *b"AAAAAAAAAAAAAAAAAAAAAB");
        assert_eq!(member(0, 64), *b"AAAAAAAAAAAAAAAAAAAABA");
        assert_eq!(member(u64::MAX, u64::MAX), *b"D_____________________");
        // Every bit counts: members differing in one bit differ.
        let all: std::collections::HashSet<_> = (0..128)
            .map(|bit| {
                let bits = 1_u128 << bit;
                member((bits >> 64) as u64, bits as u64)
            })
            .collect();
        assert_eq!(all.len(), 128);
    }

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
        let command = evalsha(
            "app:",
            "login:ünï:42",
            rate,
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
        let command = evalsha("", "k", rate, b"m", None);
        assert_eq!(arguments(&command)[3..], ["k", "1500000", "7", "m", ""]);
        // After NOSCRIPT: the same call, with the script's text.
        let command = eval("p:", "k", rate, b"m", None);
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
