//! The sliding window log script and the whole exchange of one check with Redis: the command,
//! the ladder of resends that gets it run, and the reply.

use std::io::Write as _;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{Cmd, ErrorKind, RedisResult, RedisWrite as _, ServerErrorKind};

use super::target::Connection;
use crate::decision::Decision;
use crate::error::StoreError;
use crate::layout::COUNTER_SUFFIX;
use crate::limit::{Grant, LimitRef, LimitsAnswer};

/// The sliding window log script, run through `EVALSHA` (see [`run`]), or `EVAL` when the
/// server has lost it.
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

/// The same log over several limits of one call, each with its cost, admitted in all or
/// recorded in none: `sliding_window_limits.lua`, whose header holds its contract. Used for
/// every call but the one of a single limit at cost 1, which [`SLIDING_WINDOW`] serves with
/// fewer Redis calls.
static SLIDING_WINDOW_COUNTER: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(COUNTER_SOURCE));

const COUNTER_SOURCE: &str = concat!(
    include_str!("counter.lua"),
    include_str!("sliding_window_counter.lua")
);

static SLIDING_WINDOW_LIMITS: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(LIMITS_SOURCE));

/// The text of [`SLIDING_WINDOW_LIMITS`].
const LIMITS_SOURCE: &str = concat!(
    include_str!("counter.lua"),
    include_str!("sliding_window_limits.lua")
);

/// A quota lease of one limit: the call at hand checked, and a reserve for the process to
/// spend without a round trip: `lease.lua`, whose header holds its contract.
static LEASE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(LEASE_SOURCE));

/// The text of [`LEASE`].
const LEASE_SOURCE: &str = concat!(include_str!("counter.lua"), include_str!("lease.lua"));

/// Removes one call's admission from its limits' sets: `refund.lua`.
static REFUND: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(REFUND_SOURCE));

/// The text of [`REFUND`].
const REFUND_SOURCE: &str = concat!(include_str!("counter.lua"), include_str!("refund.lua"));

/// Renews the slots a process holds, those of one node (one cluster slot): `renew.lua`.
static RENEW: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(RENEW_SOURCE));

/// The text of [`RENEW`].
const RENEW_SOURCE: &str = include_str!("renew.lua");

/// What a check would answer, writing nothing: `peek.lua`, flagged `no-writes` and sent with
/// `EVALSHA_RO` / `EVAL_RO` (Redis 7 and later), so that a user allowed to read only (and
/// those two commands) can look. Redis 5 and 6 know neither the flag nor the commands: they
/// run [`PEEK`] instead.
static PEEK_NO_WRITES: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(PEEK_NO_WRITES_SOURCE));

/// The text of [`PEEK_NO_WRITES`].
const PEEK_NO_WRITES_SOURCE: &str = concat!(
    "#!lua flags=no-writes\n",
    include_str!("counter.lua"),
    include_str!("peek.lua")
);

/// `peek.lua` without flags, for Redis 5 and 6.
static PEEK: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(PEEK_SOURCE));

/// The text of [`PEEK`].
const PEEK_SOURCE: &str = concat!(include_str!("counter.lua"), include_str!("peek.lua"));

/// Whether `error` is a server's refusal of the flagged look: Redis before 7 knows neither
/// `EVALSHA_RO` nor a script's flags line (`#!lua flags=...`).
pub(super) fn is_flags_refused(error: &redis::RedisError) -> bool {
    let text = error.to_string().to_ascii_lowercase();
    (text.contains("unknown command") && text.contains("_ro"))
        || (text.contains("error compiling script") && text.contains("'#'"))
}

/// Forgets keys up to the server's now, keeping what live leases reserved: `reset.lua`.
static RESET: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(RESET_SOURCE));

/// The text of [`RESET`].
const RESET_SOURCE: &str = concat!(include_str!("counter.lua"), include_str!("reset.lua"));

/// The probe of an open circuit breaker: a write that changes nothing (an empty range of
/// scores removed), which fails where a check would (`probe.lua`).
static PROBE: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(PROBE_SOURCE));

/// The text of [`PROBE`].
const PROBE_SOURCE: &str = include_str!("probe.lua");

/// One exchange with Redis: a script and its arguments.
#[derive(Clone, Copy)]
pub(super) enum Call<'a> {
    /// One limit at cost 1, admitted as `member`, at `at` (µs since the Unix epoch; `None`:
    /// the server's `TIME`): [`SLIDING_WINDOW`].
    One {
        limit: LimitRef<'a>,
        member: &'a [u8],
        at: Option<u64>,
    },
    /// Several limits (distinct keys in one slot), or one at another cost, admitted as
    /// `admission`: [`SLIDING_WINDOW_LIMITS`].
    Several {
        limits: &'a [LimitRef<'a>],
        admission: &'a [u8],
        at: Option<u64>,
    },
    /// One sliding window counter (any cost) at `at`: [`SLIDING_WINDOW_COUNTER`]. With
    /// `admission`, the name a refund of the call would give: sent (the script has no use
    /// for it) so that what Redis ran (`MONITOR`, the fault checker) ties the refund to it.
    Counter {
        limit: LimitRef<'a>,
        admission: Option<&'a [u8]>,
        at: Option<u64>,
    },
    /// A lease of `limit` named `lease`: the call at hand and up to `wanted − 1` admissions
    /// reserved until `lasts` µs after the server's now: [`LEASE`]. Its give-back is a
    /// [`Refund`](Call::Refund) of the unused ones.
    Lease {
        limit: LimitRef<'a>,
        lease: &'a [u8],
        wanted: u32,
        lasts: u64,
    },
    /// The refund of `admission`, recorded at `now`, from `limits`' sets: [`REFUND`]. With
    /// `give_back`, a lease's give-back of its unspent reserve (`admission` names the lease),
    /// which takes from a counter what a reset since kept of its lease record.
    Refund {
        limits: &'a [LimitRef<'a>],
        admission: &'a [u8],
        now: u64,
        give_back: bool,
    },
    /// The renewal of slots (concurrency limits' admissions, `limits[i]` held as
    /// `admissions[i]`) at `at` (`None`: the server's `TIME`): [`RENEW`].
    Renew {
        limits: &'a [LimitRef<'a>],
        admissions: &'a [super::member::Admission],
        at: Option<u64>,
    },
    /// A look at one limit's log at `at` (`None`: the server's `TIME`): [`PEEK_NO_WRITES`],
    /// or [`PEEK`] without `flagged`.
    Peek {
        limit: LimitRef<'a>,
        at: Option<u64>,
        flagged: bool,
    },
    /// The reset of `limits`' keys (their rates unused but for naming a counter's hash),
    /// keeping what live leases reserved: [`RESET`].
    Reset { limits: &'a [LimitRef<'a>] },
    /// The probe of the node that holds `limit`'s state, standing for a check of it (its
    /// rate unused but for naming a counter's hash): [`PROBE`].
    Probe { limit: LimitRef<'a> },
}

impl Call<'_> {
    /// Whether the call may record admissions (or take them back): what replicas must have
    /// before a failover; or stands for a check that may (a probe, which is answered as the
    /// check would be).
    fn records(&self) -> bool {
        matches!(
            self,
            Call::One { .. }
                | Call::Several { .. }
                | Call::Counter { .. }
                | Call::Lease { .. }
                | Call::Refund { .. }
                | Call::Renew { .. }
                | Call::Probe { .. }
        )
    }

    /// Whether `reply`, this call's, says it recorded something: an admission (the scripts'
    /// first field is 1), or any refund; a probe stands for an admission.
    pub(super) fn recorded(&self, reply: &[i64]) -> bool {
        match self {
            Call::One { .. } | Call::Several { .. } | Call::Counter { .. } => {
                reply.first() == Some(&1)
            }
            Call::Lease { .. } => reply.first().is_some_and(|&granted| granted > 0),
            Call::Refund { .. } | Call::Renew { .. } | Call::Probe { .. } => true,
            Call::Peek { .. } | Call::Reset { .. } => false,
        }
    }

    /// Whether the call must never run twice, so is never resent (by this module, or by
    /// redis-rs's cluster client): a refund that holds a sliding window counter, which takes
    /// a cost back without a member to tell that it already did. Every other call may be
    /// resent: the check scripts recognise their own members, a log's refund removes only
    /// them, a look and a reset change nothing the second time. A counter's lease is not
    /// resent either: it would reserve again, and its process would never give that back.
    fn runs_once(&self) -> bool {
        match self {
            Call::Refund { limits, .. } => limits.iter().any(|limit| limit.rate.is_counter()),
            Call::Lease { limit, .. } => limit.rate.is_counter(),
            _ => false,
        }
    }

    fn script(&self) -> (&'static redis::Script, &'static str) {
        match self {
            Call::One { .. } => (&SLIDING_WINDOW, SOURCE),
            Call::Several { .. } => (&SLIDING_WINDOW_LIMITS, LIMITS_SOURCE),
            Call::Counter { .. } => (&SLIDING_WINDOW_COUNTER, COUNTER_SOURCE),
            Call::Lease { .. } => (&LEASE, LEASE_SOURCE),
            Call::Refund { .. } => (&REFUND, REFUND_SOURCE),
            Call::Renew { .. } => (&RENEW, RENEW_SOURCE),
            Call::Peek { flagged: true, .. } => (&PEEK_NO_WRITES, PEEK_NO_WRITES_SOURCE),
            Call::Peek { flagged: false, .. } => (&PEEK, PEEK_SOURCE),
            Call::Reset { .. } => (&RESET, RESET_SOURCE),
            Call::Probe { .. } => (&PROBE, PROBE_SOURCE),
        }
    }
}

/// Digits of a `u64`, the most a number argument takes.
const NUMBER: usize = 20;

/// `EVALSHA <sha1> <keys> <prefix><key>... <args>...` for `call` (`EVAL <script> ...` when
/// `eval`: for a server that has lost the script, restarted, failed over or `SCRIPT FLUSH`ed;
/// running it also caches the script there, so the next `EVALSHA` finds it; in a cluster it
/// goes to the key's node, the one that lacks it), in a buffer sized for it up front. Each key
/// is written into the command in its two pieces, never joined into a `String` of its own:
/// building the command allocates its two buffers and nothing else (a Redis check's other
/// allocations, the key's copy and two boxes, are the check path's: `check/remote.rs`,
/// `check/future.rs` and `runtime::HandOff`).
fn command(prefix: &str, call: &Call<'_>, eval: bool, resend: bool) -> Cmd {
    let (script, source) = call.script();
    // The flagged look goes by the read-only variants, which a user allowed to read only may
    // be granted (`+evalsha_ro +eval_ro`).
    let read_only = matches!(call, Call::Peek { flagged: true, .. });
    let (verb, text) = match (eval, read_only) {
        (true, false) => ("EVAL", source),
        (true, true) => ("EVAL_RO", source),
        (false, false) => ("EVALSHA", script.get_hash()),
        (false, true) => ("EVALSHA_RO", script.get_hash()),
    };
    let limits: &[LimitRef<'_>] = match call {
        Call::One { limit, .. }
        | Call::Peek { limit, .. }
        | Call::Counter { limit, .. }
        | Call::Lease { limit, .. }
        | Call::Probe { limit } => std::slice::from_ref(limit),
        Call::Several { limits, .. }
        | Call::Refund { limits, .. }
        | Call::Renew { limits, .. }
        | Call::Reset { limits } => limits,
    };
    let keys: usize = limits
        .iter()
        .map(|limit| prefix.len() + limit.key.len() + COUNTER_SUFFIX.len())
        .sum();
    let arguments = 6 + 4 * limits.len();
    let mut command = Cmd::with_capacity(
        arguments,
        verb.len() + text.len() + NUMBER + keys + 22 + arguments * NUMBER,
    );
    command.arg(verb).arg(text).arg(limits.len());
    for limit in limits {
        let mut full_key = command.writer_for_next_arg();
        // Writing into the command's own `Vec<u8>` cannot fail.
        let _ = full_key.write_all(prefix.as_bytes());
        let _ = full_key.write_all(limit.key.as_bytes());
        if limit.rate.is_counter() {
            let _ = full_key.write_all(COUNTER_SUFFIX.as_bytes());
        }
    }
    let at = match *call {
        Call::One { limit, member, at } => {
            command
                .arg(limit.rate.period_us())
                .arg(limit.rate.threshold())
                .arg(member);
            at
        }
        Call::Several {
            limits,
            admission,
            at,
        } => {
            command.arg(admission);
            time(&mut command, at);
            command.arg(if resend { "1" } else { "" });
            for limit in limits {
                command
                    .arg(limit.rate.period_us())
                    .arg(limit.rate.threshold())
                    .arg(limit.cost);
            }
            kinds(&mut command, limits);
            return command;
        }
        Call::Refund {
            limits,
            admission,
            now,
            give_back,
        } => {
            command.arg(admission).arg(now);
            for limit in limits {
                command
                    .arg(limit.cost)
                    .arg(limit.rate.period_us())
                    .arg(limit.rate.threshold());
            }
            if give_back && limits.iter().any(|limit| limit.rate.is_counter()) {
                // A lease's give-back: its counter's letter says so.
                let kinds: String = limits
                    .iter()
                    .map(|limit| if limit.rate.is_counter() { 'g' } else { 'l' })
                    .collect();
                command.arg(kinds);
            } else {
                kinds(&mut command, limits);
            }
            return command;
        }
        Call::Counter {
            limit,
            admission,
            at,
        } => {
            command
                .arg(limit.rate.period_us())
                .arg(limit.rate.threshold())
                .arg(limit.cost);
            time(&mut command, at);
            if let Some(admission) = admission {
                command.arg(admission);
            }
            return command;
        }
        Call::Lease {
            limit,
            lease,
            wanted,
            lasts,
        } => {
            command
                .arg(limit.rate.period_us())
                .arg(limit.rate.threshold())
                .arg(lease)
                .arg(wanted)
                .arg(lasts)
                .arg(if limit.rate.is_counter() { "c" } else { "l" })
                .arg(if resend { "1" } else { "" });
            return command;
        }
        Call::Peek { limit, at, .. } => {
            command
                .arg(limit.rate.period_us())
                .arg(limit.rate.threshold());
            time(&mut command, at);
            if limit.rate.is_counter() {
                command.arg("c");
            }
            return command;
        }
        Call::Renew {
            limits,
            admissions,
            at,
        } => {
            time(&mut command, at);
            for (limit, admission) in limits.iter().zip(admissions) {
                // A slot is its admission's only member, `<admission>.1`.
                let mut member = command.writer_for_next_arg();
                let _ = member.write_all(admission);
                let _ = member.write_all(b".1");
                drop(member);
                command.arg(limit.rate.period_us());
            }
            return command;
        }
        Call::Reset { .. } => return command,
        Call::Probe { .. } => return command,
    };
    time(&mut command, at);
    command
}

/// Which of `limits` are sliding window counters, when any is: one letter each, `c` for a
/// counter, `l` for a log (no argument at all for logs only, which the scripts take for all
/// logs).
fn kinds(command: &mut Cmd, limits: &[LimitRef<'_>]) {
    if limits.iter().any(|limit| limit.rate.is_counter()) {
        let kinds: String = limits
            .iter()
            .map(|limit| if limit.rate.is_counter() { 'c' } else { 'l' })
            .collect();
        command.arg(kinds);
    }
}

/// The time argument: µs since the Unix epoch, or empty for the server's `TIME`.
fn time(command: &mut Cmd, at: Option<u64>) {
    match at {
        Some(now) => command.arg(now),
        None => command.arg(""),
    };
}

/// Runs the script of `call` on `connection`: `EVALSHA`, sent once more when the connection
/// was found closed, and `EVAL` when the server answers `NOSCRIPT`. The call's member or
/// admission names what it records (one per call: a resend carries the same, which the
/// scripts count once, and a refund removes only it).
///
/// # Errors
///
/// The last attempt's error: the connection's, or the server's.
pub(super) async fn run(
    connection: &mut Connection,
    prefix: &str,
    call: Call<'_>,
    wait: Option<(u32, Duration)>,
) -> RedisResult<(Vec<i64>, Option<u64>)> {
    // A call that records waits for replicas when asked to: `WAIT` right behind the script,
    // on the same connection (the key's master), in one round trip. It cannot run inside a
    // script.
    let wait = wait.filter(|_| call.records());
    let once = call.runs_once();
    let evalsha = command(prefix, &call, false, false);
    let mut result = exchange(connection, evalsha, wait, once).await;
    // A call that must run once fails instead: it may have run.
    let resent = !once && matches!(&result, Err(err) if err.is_connection_dropped());
    // A marked lease takes back the reserve an earlier run of it recorded: it goes on the
    // connection that never resends, so that no copy of it (redis-rs's cluster client resends
    // a call whose connection dropped) can run after another copy's grant is being spent.
    let marked_once = once || (resent && matches!(call, Call::Lease { .. }));
    if resent {
        // The connection was found closed (the server's idle timeout, a restart, a load
        // balancer): the call may or may not have reached Redis. The script counts a member
        // once, so the same call is sent once more, on the connection the manager makes again
        // (marked as a resend for the script of several limits, which then looks for it in
        // every limit before counting, and for a lease's, which then takes back the reserve
        // the first send may have recorded).
        result = exchange(
            connection,
            command(prefix, &call, false, true),
            wait,
            marked_once,
        )
        .await;
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
        result = exchange(
            connection,
            command(prefix, &call, true, resent),
            wait,
            marked_once,
        )
        .await;
    }
    result
}

/// Sends `command` (`once`: on a connection that never resends it), then, with `wait`
/// (replicas, time limit), `WAIT` for those replicas in the same round trip; returns the
/// script's reply, and how many replicas acknowledged.
pub(super) async fn exchange<T: redis::FromRedisValue>(
    connection: &mut Connection,
    command: Cmd,
    wait: Option<(u32, Duration)>,
    once: bool,
) -> RedisResult<(T, Option<u64>)> {
    let Some((replicas, limit)) = wait else {
        return connection
            .query(&command, once)
            .await
            .map(|reply| (reply, None));
    };
    // Whole milliseconds, rounded up (`WAIT 0` would wait for ever).
    let millis = u64::try_from(limit.as_micros().div_ceil(1_000))
        .unwrap_or(u64::MAX)
        .max(1);
    let mut pipeline = redis::pipe();
    pipeline
        .add_command(command)
        .cmd("WAIT")
        .arg(replicas)
        .arg(millis);
    let (reply, acknowledged): (T, u64) = connection
        .query_pipeline(&pipeline, once)
        .await
        .map_err(first_failure)?;
    Ok((reply, Some(acknowledged)))
}

/// A pipeline's error as the error of its first command that failed (the script's, whose
/// code and detail tell a key's fault from the server's), else as it came.
fn first_failure(error: redis::RedisError) -> redis::RedisError {
    match error.clone().into_server_errors() {
        Some(failures) if !failures.is_empty() => redis::RedisError::from(failures[0].1.clone()),
        _ => error,
    }
}

/// Turns `peek.lua`'s reply `{count, retry_after_us, reset_after_us}` into the [`Decision`] of
/// a look at a log under a rate of `threshold`: admitted iff a call fits, `remaining` what is
/// left now (no call counted).
pub(super) fn decode_peek(reply: &[i64], threshold: u64) -> Result<Decision, StoreError> {
    let &[count, retry_after, reset_after] = reply else {
        return Err(StoreError::Protocol(
            format!("expected 3 integers, got {}", reply.len()).into(),
        ));
    };
    let (Ok(count), Ok(retry_after), Ok(reset_after)) = (
        u64::try_from(count),
        u64::try_from(retry_after),
        u64::try_from(reset_after),
    ) else {
        return Err(StoreError::Protocol("a negative count or time".into()));
    };
    let reset_after = Duration::from_micros(reset_after);
    Ok(if count < threshold {
        Decision::admitted(threshold, threshold - count, reset_after)
    } else {
        Decision::denied(threshold, Duration::from_micros(retry_after), reset_after)
    })
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

/// Turns the reply of [`SLIDING_WINDOW_LIMITS`] (`{admitted, now_us, then count,
/// retry_after_us, reset_after_us per limit}`) into whether the call was admitted, each
/// limit's [`Decision`] (on a denial, a limit that would have admitted the call says so, with
/// its count unchanged), and the check's time.
pub(super) fn decode_limits(
    reply: &[i64],
    limits: &[LimitRef<'_>],
) -> Result<LimitsAnswer, StoreError> {
    let numbers = non_negative(reply, 2 + 3 * limits.len())?;
    let admitted = match numbers[0] {
        1 => true,
        0 => false,
        other => {
            return Err(StoreError::Protocol(
                format!("admitted flag {other} is neither 0 nor 1").into(),
            ));
        }
    };
    let decisions = numbers[2..]
        .chunks_exact(3)
        .zip(limits)
        .map(|(answer, limit)| {
            let &[count, retry_after, reset_after] = answer else {
                unreachable!("chunks of 3")
            };
            let threshold = limit.rate.threshold();
            let left = threshold.saturating_sub(count);
            let reset_after = Duration::from_micros(reset_after);
            if admitted {
                let cost = u64::from(limit.cost);
                Decision::admitted(threshold, left.saturating_sub(cost), reset_after)
            } else if retry_after == 0 {
                Decision::admitted(threshold, left, reset_after)
            } else {
                // What is left: a smaller call may fit (0 at a cost of 1).
                Decision {
                    remaining: left,
                    ..Decision::denied(threshold, Duration::from_micros(retry_after), reset_after)
                }
            }
        })
        .collect();
    Ok(LimitsAnswer {
        admitted,
        decisions,
        now: numbers[1],
    })
}

/// Turns the reply of [`LEASE`] (`{granted, now_us, count, retry_after_us, reset_after_us,
/// lasts_us}`) into its [`Grant`].
pub(super) fn decode_lease(reply: &[i64], threshold: u64) -> Result<Grant, StoreError> {
    let numbers = non_negative(reply, 6)?;
    let &[granted, now, count, retry_after, reset_after, lasts] = numbers.as_slice() else {
        unreachable!("six numbers")
    };
    let reset_after = Duration::from_micros(reset_after);
    let Ok(granted) = u32::try_from(granted) else {
        return Err(StoreError::Protocol("a lease larger than asked for".into()));
    };
    let reserved = granted.saturating_sub(1);
    let decision = if granted == 0 {
        Decision::denied(threshold, Duration::from_micros(retry_after), reset_after)
    } else {
        let left = threshold.saturating_sub(count) + u64::from(reserved);
        Decision::admitted(threshold, left, reset_after)
    };
    Ok(Grant {
        decision,
        count,
        reserved,
        now,
        lasts: Duration::from_micros(lasts),
    })
}

/// Turns the reply of [`REFUND`] (`{count, reset_after_us}` per limit) into each limit's
/// decision without the refunded call.
pub(super) fn decode_refund(
    reply: &[i64],
    limits: &[LimitRef<'_>],
) -> Result<Vec<Decision>, StoreError> {
    let numbers = non_negative(reply, 2 * limits.len())?;
    Ok(numbers
        .chunks_exact(2)
        .zip(limits)
        .map(|(answer, limit)| {
            let threshold = limit.rate.threshold();
            Decision::admitted(
                threshold,
                threshold.saturating_sub(answer[0]),
                Duration::from_micros(answer[1]),
            )
        })
        .collect())
}

/// Turns `renew.lua`'s reply (1 or 0 per slot) into whether each slot is still held.
pub(super) fn decode_renew(reply: &[i64], slots: usize) -> Result<Vec<bool>, StoreError> {
    let numbers = non_negative(reply, slots)?;
    Ok(numbers.into_iter().map(|held| held == 1).collect())
}

/// `reply` as `len` non-negative integers.
fn non_negative(reply: &[i64], len: usize) -> Result<Vec<u64>, StoreError> {
    if reply.len() != len {
        return Err(StoreError::Protocol(
            format!("expected {len} integers, got {}", reply.len()).into(),
        ));
    }
    reply
        .iter()
        .map(|&n| u64::try_from(n))
        .collect::<Result<_, _>>()
        .map_err(|_| StoreError::Protocol("negative count, time or duration".into()))
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
        let limit = |key| LimitRef { key, rate, cost: 1 };
        let evalsha = |prefix, limit, member, at| {
            command(prefix, &Call::One { limit, member, at }, false, false)
        };
        let eval = |prefix, limit, member, at| {
            command(prefix, &Call::One { limit, member, at }, true, false)
        };
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
        assert_eq!(arguments(&command)[2], "1");
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
    fn several_limits_are_one_call_with_their_keys_then_their_arguments() {
        let burst = Rate::new(5, Duration::from_secs(1)).unwrap();
        let daily = Rate::new(1_000, Duration::from_secs(86_400)).unwrap();
        let limits = [
            LimitRef {
                key: "{u}:burst",
                rate: burst,
                cost: 1,
            },
            LimitRef {
                key: "{u}:daily",
                rate: daily,
                cost: 3,
            },
        ];
        let call = Call::Several {
            limits: &limits,
            admission: b"adm",
            at: Some(7),
        };
        assert_eq!(
            arguments(&command("p:", &call, false, false)),
            [
                "EVALSHA",
                SLIDING_WINDOW_LIMITS.get_hash(),
                "2",
                "p:{u}:burst",
                "p:{u}:daily",
                "adm",
                "7",
                "",
                "1000000",
                "5",
                "1",
                "86400000000",
                "1000",
                "3",
            ]
        );
        let refund = Call::Refund {
            limits: &limits,
            admission: b"adm",
            now: 7,
            give_back: false,
        };
        assert_eq!(
            arguments(&command("p:", &refund, true, false))[2..],
            [
                "2",
                "p:{u}:burst",
                "p:{u}:daily",
                "adm",
                "7",
                "1",
                "1000000",
                "5",
                "3",
                "86400000000",
                "1000"
            ]
        );
        // Counters get their hash's key, and one letter per limit says which limits they are.
        let counted = [
            limits[0],
            LimitRef {
                rate: daily.with_algorithm(crate::rate::Algorithm::SlidingWindowCounter),
                ..limits[1]
            },
        ];
        let call = Call::Several {
            limits: &counted,
            admission: b"adm",
            at: None,
        };
        let sent = arguments(&command("p:", &call, false, false));
        assert_eq!(sent[3..5], ["p:{u}:burst", "p:{u}:daily#swc"]);
        assert_eq!(sent.last().map(String::as_str), Some("lc"));
        assert_eq!(sent.len(), 15);
        // One counter: its own script, its hash's key, period, threshold, cost and time.
        let one = Call::Counter {
            limit: counted[1],
            admission: None,
            at: Some(7),
        };
        assert_eq!(
            arguments(&command("p:", &one, false, false)),
            [
                "EVALSHA",
                SLIDING_WINDOW_COUNTER.get_hash(),
                "1",
                "p:{u}:daily#swc",
                "86400000000",
                "1000",
                "3",
                "7"
            ]
        );
        let denied = decode_limits(&[0, 9, 5, 200, 900, 10, 0, 5_000], &limits).unwrap();
        assert!(!denied.admitted);
        assert_eq!(denied.now, 9);
        assert_eq!(
            denied.decisions,
            [
                Decision::denied(5, Duration::from_micros(200), Duration::from_micros(900)),
                Decision::admitted(1_000, 990, Duration::from_micros(5_000)),
            ]
        );
        let admitted =
            decode_limits(&[1, 9, 2, 0, 1_000_000, 10, 0, 86_400_000_000], &limits).unwrap();
        assert!(admitted.admitted);
        assert_eq!(
            admitted.decisions,
            [
                Decision::admitted(5, 2, Duration::from_secs(1)),
                Decision::admitted(1_000, 987, Duration::from_secs(86_400)),
            ]
        );
        assert_eq!(
            decode_refund(&[2, 900, 10, 0], &limits).unwrap(),
            [
                Decision::admitted(5, 3, Duration::from_micros(900)),
                Decision::admitted(1_000, 990, Duration::ZERO),
            ]
        );
        assert_eq!(
            arguments(&command("p:", &call, false, true))[7],
            "1",
            "a resend"
        );
        assert!(decode_limits(&[1, 1, 0, 0], &limits).is_err());
        assert!(decode_limits(&[], &limits).is_err());
        assert!(decode_limits(&[1, 9, 1, 0, -1, 0, 1, 0], &limits).is_err());
        assert!(decode_refund(&[1], &limits).is_err());
    }

    #[test]
    fn decodes_looks() {
        let empty = decode_peek(&[0, 0, 0], 5).unwrap();
        assert_eq!(empty, Decision::admitted(5, 5, Duration::ZERO));
        let two = decode_peek(&[2, 0, 9_000], 5).unwrap();
        assert_eq!(two, Decision::admitted(5, 3, Duration::from_micros(9_000)));
        let full = decode_peek(&[6, 1_500, 9_000], 5).unwrap();
        assert_eq!(
            full,
            Decision::denied(
                5,
                Duration::from_micros(1_500),
                Duration::from_micros(9_000)
            )
        );
        assert!(decode_peek(&[1, 2], 5).is_err());
        assert!(decode_peek(&[-1, 0, 0], 5).is_err());
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
