//! The judgement: rebuilds, from the taps' lines, what every script recorded and took back,
//! and checks it against the promise (exactness per window), the refund rules, and what the
//! application servers were told (a denied call records nothing).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use ratelimit_runtime::FailurePolicy;

use super::ops::{Kind, Outcome, Record, Subject};
use super::tap::Line;

/// The scripts the runtime sends, recognised by their SHA1 (of the very sources it compiles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Script {
    /// `sliding_window.lua`: one log at cost 1.
    One,
    /// `sliding_window_counter.lua`: one counter at cost 1.
    Counter,
    /// `sliding_window_limits.lua`: several limits, costs.
    Limits,
    /// `refund.lua` (a lease's give-back too).
    Refund,
    /// `lease.lua`: a quota lease of one limit (the call at hand, and a reserve).
    Lease,
    /// `reset.lua`: forgets keys up to the server's now, keeping what live leases reserved.
    Reset,
    /// `peek.lua` (both variants), `probe.lua` (removes an empty range): nothing to
    /// account.
    Other,
    /// `registry_read.lua`, `registry_write.lua`: the limits shared through Redis, which no
    /// limit's key holds (their changes are the changer's timeline).
    Registry,
    /// `renew.lua`: concurrency limits' slots renewed (a later score for a member still in
    /// its window, which records no admission), or removed once out of it (no take-back:
    /// its window passed). Judged by `slots.rs` from the callers' side.
    Renew,
}

macro_rules! source {
    ($name:literal) => {
        include_str!(concat!(
            "../../../ratelimit-runtime/src/store/redis/",
            $name
        ))
    };
}

fn known_scripts() -> HashMap<String, Script> {
    let counter = source!("counter.lua");
    let hash = |text: &str| redis::Script::new(text).get_hash().to_owned();
    HashMap::from([
        (hash(source!("sliding_window.lua")), Script::One),
        (
            hash(&format!(
                "{counter}{}",
                source!("sliding_window_counter.lua")
            )),
            Script::Counter,
        ),
        (
            hash(&format!(
                "{counter}{}",
                source!("sliding_window_limits.lua")
            )),
            Script::Limits,
        ),
        (
            hash(&format!("{counter}{}", source!("refund.lua"))),
            Script::Refund,
        ),
        (
            hash(&format!(
                "#!lua flags=no-writes\n{counter}{}",
                source!("peek.lua")
            )),
            Script::Other,
        ),
        (
            hash(&format!("{counter}{}", source!("peek.lua"))),
            Script::Other,
        ),
        (hash(source!("probe.lua")), Script::Other),
        (
            hash(&format!("{counter}{}", source!("lease.lua"))),
            Script::Lease,
        ),
        (
            hash(&format!("{counter}{}", source!("reset.lua"))),
            Script::Reset,
        ),
        (hash(source!("registry_read.lua")), Script::Registry),
        (hash(source!("registry_write.lua")), Script::Registry),
        (hash(source!("renew.lua")), Script::Renew),
    ])
}

/// One script run on a node: its call line and the commands it ran.
struct Run {
    micros: u64,
    node: usize,
    script: Script,
    keys: Vec<String>,
    argv: Vec<String>,
    effects: Vec<Vec<String>>,
}

/// A limit of a script run, from its arguments.
#[derive(Clone, Debug)]
struct LimitArgs {
    period: u64,
    threshold: u64,
    cost: u64,
}

impl Run {
    /// The admission name (several limits, refunds, a counter's check that may be refunded).
    fn admission(&self) -> &str {
        let at = match self.script {
            // A counter's check names the admission a refund would give last (when it may be
            // refunded: through the path of several limits).
            Script::Counter => 4,
            // A lease's name.
            Script::Lease => 2,
            _ => 0,
        };
        self.argv.get(at).map_or("", String::as_str)
    }

    /// Each key's limit, from the arguments.
    fn limits(&self) -> HashMap<&str, LimitArgs> {
        let number = |i: usize| self.argv.get(i).and_then(|a| a.parse().ok()).unwrap_or(0);
        let mut limits = HashMap::new();
        for (i, key) in self.keys.iter().enumerate() {
            let args = match self.script {
                Script::One | Script::Lease => LimitArgs {
                    period: number(0),
                    threshold: number(1),
                    cost: 1,
                },
                Script::Counter => LimitArgs {
                    period: number(0),
                    threshold: number(1),
                    cost: number(2),
                },
                Script::Limits => LimitArgs {
                    period: number(3 + 3 * i),
                    threshold: number(4 + 3 * i),
                    cost: number(5 + 3 * i),
                },
                Script::Refund => LimitArgs {
                    cost: number(2 + 3 * i),
                    period: number(3 + 3 * i),
                    threshold: number(4 + 3 * i),
                },
                Script::Reset | Script::Other | Script::Registry | Script::Renew => continue,
            };
            limits.insert(key.as_str(), args);
        }
        limits
    }
}

/// What the taps and the records showed, and what was wrong.
#[derive(Default)]
pub(crate) struct Verdict {
    pub(crate) violations: Vec<String>,
    /// Documented exceptions and notable events, counted.
    pub(crate) exceptions: BTreeMap<&'static str, u64>,
}

impl Verdict {
    pub(crate) fn violation(&mut self, text: String) {
        self.violations.push(text);
    }

    pub(crate) fn count(&mut self, what: &'static str, n: u64) {
        *self.exceptions.entry(what).or_default() += n;
    }
}

/// A log admission as the server recorded it.
struct LogAdmission {
    score: u64,
    epoch: u32,
    refunded: bool,
    /// The threshold its script checked it against, and the script run's place in the order
    /// the servers ran them.
    threshold: u64,
    run: usize,
}

#[derive(Default)]
struct LogKey {
    period: u64,
    threshold: u64,
    epoch: u32,
    /// Members in the set now (as far as the tap tells), with their scores.
    live: HashMap<String, u64>,
    admissions: Vec<LogAdmission>,
    /// The admissions of each member (a member evicted and added again is two).
    by_member: HashMap<String, Vec<usize>>,
}

/// A counter admission: which window it added to, and how much.
struct CounterAdmission {
    epoch: u32,
    window: u64,
    cost: u64,
    refunded: bool,
    /// A lease's grant.
    lease: bool,
    /// A lease's grant whose reserve a reset kept (into the epoch it started), and what is left
    /// of what it kept, which its give-back takes at most.
    carried: bool,
    kept: u64,
}

#[derive(Default)]
struct CounterKey {
    epoch: u32,
    admissions: HashMap<(u64, String), CounterAdmission>,
    /// Cost admitted and not taken back, per (epoch, period, window).
    windows: BTreeMap<(u32, u64, u64), (i64, u64)>,
}

/// A lease, as the tap saw it: the reserve it recorded beyond the call at hand, and what
/// its give-back (or its resend) took back.
#[derive(Default)]
struct LeaseSeen {
    reserved: i64,
    given_back: i64,
    /// A log's give-back ran (a second one takes nothing more).
    returned: bool,
}

/// The inputs of a judgement.
pub(crate) struct Inputs<'a> {
    /// Each node's lines.
    pub(crate) taps: Vec<(usize, Vec<Line>)>,
    /// Times (µs) at which the (single) server lost everything (a restart without disk).
    pub(crate) wipes: Vec<u64>,
    /// The server time (µs) of the records' start (their `started` counts from it).
    pub(crate) epoch_micros: u64,
    pub(crate) records: &'a [Record],
    pub(crate) subjects: &'a [Subject],
    /// Each limiter's failure policy.
    pub(crate) policies: &'a [FailurePolicy],
    /// The data nodes' ports: what a node receives from one of them is replication.
    pub(crate) servers: &'a [u16],
    pub(crate) prefix: &'a str,
    /// The changes of the limits shared through Redis made during the run.
    pub(crate) timeline: &'a super::changes::Timeline,
}

/// Judges a topology's run.
pub(crate) fn judge(inputs: &Inputs<'_>) -> Verdict {
    let mut verdict = Verdict::default();
    let runs = group(inputs, &mut verdict);
    let mut logs: HashMap<String, LogKey> = HashMap::new();
    let mut counters: HashMap<String, CounterKey> = HashMap::new();
    // Cost recorded and not refunded, per hot key, as the server shows it.
    let mut server: HashMap<String, i64> = HashMap::new();
    // Per (key, admission): members recorded, and whether a refund ran for it.
    let mut log_refunds: HashMap<(String, String), (i64, bool)> = HashMap::new();
    let mut wipes = inputs.wipes.iter().copied().peekable();
    let mut one_counter = 0_u64;
    // The (key, admission) pairs a check script of several limits ran for.
    let mut checked: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    // Per (key, lease name): its reserve and what came back of it.
    let mut leases: HashMap<(String, String), LeaseSeen> = HashMap::new();
    // Per stored key: the server times at which a reset (or a restart) forgot it.
    let mut resets: HashMap<String, Vec<u64>> = HashMap::new();
    // Per log: the rates its admissions were checked under (two limits sharing a log).
    let mut rates: HashMap<String, (u64, u64)> = HashMap::new();
    let mut shared_logs: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    // Per (counter hash, field): the last value a script wrote, `(window, prev, cur)` (a
    // lease's grant is its `cur` less the one before).
    let mut written: HashMap<(String, String), (u64, u64, u64)> = HashMap::new();
    // The registered subjects, by their stored keys (a log's, a counter's hash).
    let registered: HashMap<String, &Subject> = inputs
        .subjects
        .iter()
        .filter(|subject| subject.address.is_some())
        .flat_map(|subject| {
            let key = format!("{}{}", inputs.prefix, subject.key);
            [(format!("{key}{COUNTER_SUFFIX}"), subject), (key, subject)]
        })
        .collect();
    for (at, run) in runs.iter().enumerate() {
        if matches!(run.script, Script::Registry | Script::Renew) {
            continue;
        }
        if matches!(
            run.script,
            Script::One | Script::Counter | Script::Limits | Script::Lease
        ) {
            possible_thresholds(run, &registered, inputs, &mut verdict);
        }
        while wipes.peek().is_some_and(|&wipe| wipe <= run.micros) {
            wipes.next();
            for log in logs.values_mut() {
                log.epoch += 1;
                log.live.clear();
            }
            for counter in counters.values_mut() {
                counter.epoch += 1;
            }
            written.clear();
        }
        if run.script == Script::Reset {
            reset(
                run,
                inputs,
                &mut logs,
                &mut counters,
                &mut written,
                &mut resets,
            );
            continue;
        }
        let limits = run.limits();
        let admission = run.admission().to_owned();
        if matches!(run.script, Script::Limits | Script::Counter) && !admission.is_empty() {
            for key in &run.keys {
                checked.insert((key.clone(), admission.clone()));
            }
        }
        for effect in &run.effects {
            let command = effect[0].to_ascii_uppercase();
            let Some(key) = effect.get(1) else { continue };
            match command.as_str() {
                "DEL" | "UNLINK" => {
                    for key in &effect[1..] {
                        resets
                            .entry(hot_key(key, inputs.prefix))
                            .or_default()
                            .push(run.micros);
                        if let Some(log) = logs.get_mut(key) {
                            log.epoch += 1;
                            log.live.clear();
                        }
                        if let Some(counter) = counters.get_mut(key) {
                            counter.epoch += 1;
                        }
                        written.retain(|(hash, _), _| hash != key);
                    }
                }
                "ZREMRANGEBYSCORE" => {
                    let upto = effect
                        .get(3)
                        .and_then(|x| x.parse::<f64>().ok())
                        .unwrap_or(0.0);
                    if let Some(log) = logs.get_mut(key) {
                        log.live.retain(|_, score| (*score as f64) > upto);
                    }
                }
                "ZADD" => {
                    let log = logs.entry(key.clone()).or_default();
                    if let Some(limit) = limits.get(key.as_str()) {
                        log.period = limit.period;
                        log.threshold = limit.threshold;
                        // A registered subject's threshold changes with the shared limits:
                        // its log is another's only if the period differs.
                        let threshold = if registered.contains_key(key) {
                            0
                        } else {
                            limit.threshold
                        };
                        let rate = (limit.period, threshold);
                        if *rates.entry(key.clone()).or_insert(rate) != rate {
                            shared_logs.insert(hot_key(key, inputs.prefix));
                        }
                    }
                    for pair in effect[3..].chunks(2) {
                        let [score, member] = pair else { continue };
                        if log.live.contains_key(member) {
                            verdict.count("log calls resent and recognised (counted once)", 1);
                            continue;
                        }
                        let score: u64 = score.parse().unwrap_or(0);
                        log.live.insert(member.clone(), score);
                        log.by_member
                            .entry(member.clone())
                            .or_default()
                            .push(log.admissions.len());
                        let threshold = log.threshold;
                        log.admissions.push(LogAdmission {
                            score,
                            epoch: log.epoch,
                            refunded: false,
                            threshold,
                            run: at,
                        });
                        *server.entry(hot_key(key, inputs.prefix)).or_default() += 1;
                        verdict.count("judged: log admissions (members)", 1);
                        if let Some((base, j)) = member.rsplit_once('.') {
                            log_refunds
                                .entry((key.clone(), base.to_owned()))
                                .or_default()
                                .0 += 1;
                            if run.script == Script::Lease && j != "0" {
                                leases
                                    .entry((key.clone(), base.to_owned()))
                                    .or_default()
                                    .reserved += 1;
                            }
                        }
                    }
                }
                "ZREM" => {
                    let Some(limit) = limits.get(key.as_str()) else {
                        continue;
                    };
                    let lease = leases.get_mut(&(key.clone(), admission.clone()));
                    if run.script == Script::Lease {
                        // A resent lease takes its unspent reserve back: its own members
                        // 1.. (never .0, the call at hand).
                        let Some(lease) = lease else {
                            verdict.violation(format!(
                                "a lease removed members of a lease it did not record ({})",
                                hot_key(key, inputs.prefix)
                            ));
                            continue;
                        };
                        let log = logs.entry(key.clone()).or_default();
                        for member in &effect[2..] {
                            let own = member.rsplit_once('.').is_some_and(|(base, j)| {
                                base == admission && j.parse::<u64>().is_ok_and(|j| j >= 1)
                            });
                            if !own {
                                verdict.violation(format!(
                                    "a lease removed a member not of its reserve ({})",
                                    hot_key(key, inputs.prefix)
                                ));
                            }
                            if log.live.remove(member).is_some()
                                && let Some(&last) =
                                    log.by_member.get(member).and_then(|all| all.last())
                            {
                                log.admissions[last].refunded = true;
                                lease.given_back += 1;
                                *server.entry(hot_key(key, inputs.prefix)).or_default() -= 1;
                            }
                        }
                        verdict.count("leases resent and recognised (reserve taken back)", 1);
                        continue;
                    }
                    if run.script == Script::Refund
                        && let Some(lease) = lease
                    {
                        // A lease's give-back: members 1..=cost of its reserve, once.
                        let log = logs.entry(key.clone()).or_default();
                        for member in &effect[2..] {
                            let own = member.rsplit_once('.').is_some_and(|(base, j)| {
                                base == admission
                                    && j.parse::<u64>()
                                        .is_ok_and(|j| (1..=limit.cost).contains(&j))
                            });
                            if !own {
                                verdict.violation(format!(
                                    "a give-back removed a member not of its lease's reserve ({})",
                                    hot_key(key, inputs.prefix)
                                ));
                            }
                            if log.live.remove(member).is_some()
                                && let Some(&last) =
                                    log.by_member.get(member).and_then(|all| all.last())
                            {
                                log.admissions[last].refunded = true;
                            }
                        }
                        if lease.returned {
                            verdict.count(
                                "lease give-backs run twice (the second removes nothing)",
                                1,
                            );
                        } else {
                            lease.returned = true;
                            let cost = i64::try_from(limit.cost).unwrap_or(i64::MAX);
                            if cost > lease.reserved - lease.given_back {
                                verdict.violation(format!(
                                    "a give-back of {cost} from a lease of {} ({} back already) ({})",
                                    lease.reserved,
                                    lease.given_back,
                                    hot_key(key, inputs.prefix)
                                ));
                            }
                            lease.given_back += cost;
                            *server.entry(hot_key(key, inputs.prefix)).or_default() -= cost;
                        }
                        verdict.count("judged: lease give-backs", 1);
                        continue;
                    }
                    for member in &effect[2..] {
                        let own = member.rsplit_once('.').is_some_and(|(base, j)| {
                            base == admission
                                && j.parse::<u64>()
                                    .is_ok_and(|j| (1..=limit.cost).contains(&j))
                        });
                        if run.script != Script::Refund || !own {
                            verdict.violation(format!(
                                "refund: a script removed a member that is not its own admission's \
                                 (key {}, node {})",
                                hot_key(key, inputs.prefix),
                                run.node
                            ));
                        }
                        let log = logs.entry(key.clone()).or_default();
                        if log.live.remove(member).is_some()
                            && let Some(&last) =
                                log.by_member.get(member).and_then(|all| all.last())
                        {
                            log.admissions[last].refunded = true;
                        }
                    }
                    verdict.count("judged: log refunds", 1);
                    let entry = log_refunds
                        .entry((key.clone(), admission.clone()))
                        .or_default();
                    if entry.1 {
                        verdict.count("log refunds run twice (the second removes nothing)", 1);
                    } else {
                        entry.1 = true;
                        *server.entry(hot_key(key, inputs.prefix)).or_default() -= entry.0;
                    }
                }
                // A counter's lease record (`<period>:lease`): what a reset keeps, judged there.
                "HSET" if effect.get(2).is_some_and(|field| field.contains(':')) => {}
                "HSET" => {
                    let Some(limit) = limits.get(key.as_str()) else {
                        verdict.violation(format!(
                            "a script wrote a counter it was not given ({})",
                            hot_key(key, inputs.prefix)
                        ));
                        continue;
                    };
                    let value: Vec<u64> = effect
                        .get(3)
                        .map(|value| value.split(' ').filter_map(|n| n.parse().ok()).collect())
                        .unwrap_or_default();
                    let window = value.first().copied().unwrap_or(0);
                    let (prev, cur) = (
                        value.get(1).copied().unwrap_or(0),
                        value.get(2).copied().unwrap_or(0),
                    );
                    let field = effect.get(2).cloned().unwrap_or_default();
                    let before = written.insert((key.clone(), field), (window, prev, cur));
                    let counter = counters.entry(key.clone()).or_default();
                    let epoch = counter.epoch;
                    let hot = hot_key(key, inputs.prefix);
                    match run.script {
                        Script::Lease => {
                            // What this write added: the counts of its window less those it
                            // rolled from (the same window's, or the one before's `cur`).
                            let base = match before {
                                Some((w, p, c)) if w == window => p + c,
                                Some((w, _, c)) if w + 1 == window => c,
                                _ => 0,
                            };
                            let granted = (prev + cur).saturating_sub(base);
                            counter.admissions.insert(
                                (limit.period, admission.clone()),
                                CounterAdmission {
                                    epoch,
                                    window,
                                    cost: granted,
                                    refunded: false,
                                    lease: true,
                                    carried: false,
                                    kept: 0,
                                },
                            );
                            verdict.count("judged: counter leases", 1);
                            let entry = counter
                                .windows
                                .entry((epoch, limit.period, window))
                                .or_default();
                            entry.0 += granted as i64;
                            entry.1 = limit.threshold;
                            *server.entry(hot).or_default() += granted as i64;
                            leases
                                .entry((key.clone(), admission.clone()))
                                .or_default()
                                .reserved += granted.saturating_sub(1) as i64;
                        }
                        Script::One | Script::Counter | Script::Limits => {
                            let id = if !admission.is_empty()
                                && matches!(run.script, Script::Limits | Script::Counter)
                            {
                                admission.clone()
                            } else {
                                one_counter += 1;
                                format!("one-{one_counter}")
                            };
                            let slot = (limit.period, id);
                            if counter
                                .admissions
                                .get(&slot)
                                .is_some_and(|a| a.epoch == epoch)
                            {
                                verdict
                                    .count("counter calls counted twice after a resend (safe)", 1);
                                continue;
                            }
                            counter.admissions.insert(
                                slot,
                                CounterAdmission {
                                    epoch,
                                    window,
                                    cost: limit.cost,
                                    refunded: false,
                                    lease: false,
                                    carried: false,
                                    kept: 0,
                                },
                            );
                            verdict.count("judged: counter admissions", 1);
                            let entry = counter
                                .windows
                                .entry((epoch, limit.period, window))
                                .or_default();
                            entry.0 += limit.cost as i64;
                            entry.1 = limit.threshold;
                            *server.entry(hot).or_default() += limit.cost as i64;
                        }
                        Script::Refund => {
                            let now: u64 =
                                run.argv.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
                            let refunded_window = now / limit.period.max(1);
                            let found = counter
                                .admissions
                                .get_mut(&(limit.period, admission.clone()));
                            match found {
                                Some(own)
                                    if own.epoch == epoch
                                        && own.window == refunded_window
                                        && !own.refunded =>
                                {
                                    own.refunded = true;
                                    // A lease gives back part of its reserve; a refund takes
                                    // its whole admission.
                                    let taken =
                                        match leases.get_mut(&(key.clone(), admission.clone())) {
                                            Some(lease) => {
                                                verdict.count("judged: lease give-backs", 1);
                                                if limit.cost >= own.cost {
                                                    verdict.violation(format!(
                                                    "a give-back of {} from {hot}'s lease of {}",
                                                    limit.cost, own.cost
                                                ));
                                                }
                                                lease.given_back += limit.cost as i64;
                                                if own.carried {
                                                    // What the reset kept, at most.
                                                    let taken = limit.cost.min(own.kept);
                                                    own.kept -= taken;
                                                    taken
                                                } else {
                                                    limit.cost.min(own.cost)
                                                }
                                            }
                                            None => {
                                                verdict.count("judged: counter refunds", 1);
                                                own.cost
                                            }
                                        };
                                    let entry = counter
                                        .windows
                                        .entry((epoch, limit.period, own.window))
                                        .or_default();
                                    entry.0 -= taken as i64;
                                    *server.entry(hot).or_default() -= taken as i64;
                                }
                                other => {
                                    let why = match other {
                                        None if checked
                                            .contains(&(key.clone(), admission.clone())) =>
                                        {
                                            "its check ran there and recorded nothing (denied)"
                                        }
                                        None => "its check had not run there",
                                        Some(own) if own.refunded => {
                                            "its admission was refunded already"
                                        }
                                        Some(own) if own.epoch != epoch => {
                                            "the counter was reset since"
                                        }
                                        Some(_) => "its admission added to another window",
                                    };
                                    verdict.violation(format!(
                                        "refund: a counter refund took {} from {hot} (period {} s, \
                                         window {refunded_window}), but {why}; the key's last \
                                         runs:{}",
                                        limit.cost,
                                        limit.period / 1_000_000,
                                        history(&runs[..=at], key, inputs)
                                    ));
                                }
                            }
                        }
                        Script::Reset | Script::Other | Script::Registry | Script::Renew => {}
                    }
                }
                _ => {}
            }
        }
    }
    exactness(&logs, &counters, inputs.prefix, &mut verdict);
    for key in shared_logs {
        verdict.violation(format!(
            "two limits share a log: {key} recorded admissions checked under two rates"
        ));
    }
    // What leases reserved and did not give back: spent (and told), or left to leave the
    // window with its lease (a give-back that failed, a lease whose reply was lost).
    let mut reserves: HashMap<String, i64> = HashMap::new();
    for ((key, _), lease) in &leases {
        *reserves.entry(hot_key(key, inputs.prefix)).or_default() +=
            (lease.reserved - lease.given_back).max(0);
    }
    accounting(inputs, &server, &reserves, &mut verdict);
    super::told::judge(inputs, &resets, &mut verdict);
    verdict
}

/// A reset script's run: each of its keys forgotten (a new epoch), but for what the script
/// kept, which starts the new epoch: a log's members left after its removals (live leases'
/// reserves), counted again at their scores; a counter's fields it wrote afresh (a window's
/// kept reserve), with the leases it kept (their records it marked), whose give-backs take at
/// most what it kept of each. A key it wrote nothing to was not there, or the script failed at
/// its first write (`READONLY` on a demoted master, `OOM`): nothing was forgotten.
fn reset(
    run: &Run,
    inputs: &Inputs<'_>,
    logs: &mut HashMap<String, LogKey>,
    counters: &mut HashMap<String, CounterKey>,
    written: &mut HashMap<(String, String), (u64, u64, u64)>,
    resets: &mut HashMap<String, Vec<u64>>,
) {
    let forgotten: Vec<&String> = run
        .keys
        .iter()
        .filter(|key| {
            run.effects.iter().any(|effect| {
                let command = effect[0].to_ascii_uppercase();
                let read = matches!(
                    command.as_str(),
                    "TYPE" | "HGET" | "HGETALL" | "ZRANGEBYSCORE" | "PTTL"
                );
                !read && effect[1..].contains(key)
            })
        })
        .collect();
    for &key in &forgotten {
        resets
            .entry(hot_key(key, inputs.prefix))
            .or_default()
            .push(run.micros);
    }
    // Per counter hash: the (period, window, reserve) it kept, and the leases it kept, by
    // (period, name), with what it kept of each.
    let mut kept: HashMap<&str, Vec<(u64, u64, u64)>> = HashMap::new();
    let mut kept_leases: HashMap<&str, HashMap<(u64, String), u64>> = HashMap::new();
    for effect in &run.effects {
        let command = effect[0].to_ascii_uppercase();
        let Some(key) = effect.get(1) else { continue };
        match command.as_str() {
            "ZREMRANGEBYSCORE" => {
                let upto = effect
                    .get(3)
                    .and_then(|x| x.parse::<u64>().ok())
                    .unwrap_or(0);
                if let Some(log) = logs.get_mut(key) {
                    log.live.retain(|_, score| *score > upto);
                }
            }
            "ZREM" => {
                if let Some(log) = logs.get_mut(key) {
                    for member in &effect[2..] {
                        log.live.remove(member);
                    }
                }
            }
            "DEL" => {
                for key in &effect[1..] {
                    if let Some(log) = logs.get_mut(key) {
                        log.live.clear();
                    }
                    written.retain(|(hash, _), _| hash != key);
                }
            }
            "HSET" => {
                let (Some(field), Some(value)) = (effect.get(2), effect.get(3)) else {
                    continue;
                };
                // A lease's record, `<period>:<threshold>:<owner>` = '<w> <name> <reserved>
                // <ends> <kept>': kept.
                if let Some((period, _)) = field.split_once(':') {
                    let parts: Vec<&str> = value.split(' ').collect();
                    if let (Ok(period), [_, name, _, _, kept_of]) =
                        (period.parse::<u64>(), &parts[..])
                    {
                        kept_leases
                            .entry(key.as_str())
                            .or_default()
                            .insert((period, (*name).to_owned()), kept_of.parse().unwrap_or(0));
                    }
                    continue;
                }
                let numbers: Vec<u64> = value.split(' ').filter_map(|n| n.parse().ok()).collect();
                let (Ok(period), &[window, prev, cur, ..]) = (field.parse::<u64>(), &numbers[..])
                else {
                    continue;
                };
                written.insert((key.clone(), field.clone()), (window, prev, cur));
                kept.entry(key.as_str())
                    .or_default()
                    .push((period, window, cur));
            }
            "HDEL" => {
                for field in &effect[2..] {
                    written.remove(&(key.clone(), field.clone()));
                }
            }
            _ => {}
        }
    }
    for key in forgotten {
        if let Some(log) = logs.get_mut(key) {
            log.epoch += 1;
            let epoch = log.epoch;
            let live: Vec<(String, u64)> = log
                .live
                .iter()
                .map(|(member, &score)| (member.clone(), score))
                .collect();
            for (member, score) in live {
                // Kept as its lease recorded it: that check's threshold and place.
                let (threshold, run) = log
                    .by_member
                    .get(&member)
                    .and_then(|all| all.last())
                    .map_or((log.threshold, 0), |&at| {
                        (log.admissions[at].threshold, log.admissions[at].run)
                    });
                log.by_member
                    .entry(member)
                    .or_default()
                    .push(log.admissions.len());
                log.admissions.push(LogAdmission {
                    score,
                    epoch,
                    refunded: false,
                    threshold,
                    run,
                });
            }
        }
        if let Some(counter) = counters.get_mut(key) {
            let old = counter.epoch;
            counter.epoch += 1;
            let epoch = counter.epoch;
            for &(period, window, reserve) in kept.get(key.as_str()).into_iter().flatten() {
                let threshold = counter
                    .windows
                    .get(&(old, period, window))
                    .map_or(0, |&(_, threshold)| threshold);
                counter
                    .windows
                    .insert((epoch, period, window), (reserve as i64, threshold));
                let leases = kept_leases.get(key.as_str());
                for ((of, name), admission) in &mut counter.admissions {
                    let kept_of = leases.and_then(|leases| leases.get(&(*of, name.clone())));
                    if let Some(&kept_of) = kept_of
                        && *of == period
                        && admission.lease
                        && admission.epoch == old
                        && admission.window == window
                        && !admission.refunded
                    {
                        admission.epoch = epoch;
                        admission.carried = true;
                        admission.kept = kept_of;
                    }
                }
            }
        }
    }
}

/// The last runs of scripts on `key` in `runs`, a line each: when (run time), on which node,
/// the script, its arguments, and what it wrote to `key`.
fn history(runs: &[Run], key: &str, inputs: &Inputs<'_>) -> String {
    let touching: Vec<&Run> = runs
        .iter()
        .rev()
        .filter(|run| run.keys.iter().any(|k| k == key))
        .take(16)
        .collect();
    let mut lines = String::new();
    for run in touching.into_iter().rev() {
        let effects: Vec<String> = run
            .effects
            .iter()
            .filter(|effect| effect.get(1).is_some_and(|k| k == key))
            .map(|effect| {
                let mut shown = effect.clone();
                shown.remove(1);
                shown.join(" ")
            })
            .collect();
        lines.push_str(&format!(
            "\n        {:.6} s node {} {:?} argv [{}]: {}",
            run.micros.saturating_sub(inputs.epoch_micros) as f64 / 1e6,
            run.node,
            run.script,
            run.argv.join(" "),
            effects.join("; ")
        ));
    }
    lines
}

/// The hot key of a Redis key (the prefix and a counter's suffix taken off).
fn hot_key(key: &str, prefix: &str) -> String {
    let key = key.strip_prefix(prefix).unwrap_or(key);
    key.strip_suffix(COUNTER_SUFFIX).unwrap_or(key).to_owned()
}

/// The suffix of a counter's hash (the runtime's `layout::COUNTER_SUFFIX`, which is not
/// public). Should it change, [`accounting`] finds every counter's admissions missing from
/// what it judged, and fails the run.
const COUNTER_SUFFIX: &str = "#swc";

/// Groups each node's lines into script runs, merged across nodes in server time.
fn group(inputs: &Inputs<'_>, verdict: &mut Verdict) -> Vec<Run> {
    let known = known_scripts();
    let mut runs = Vec::new();
    for (node, lines) in &inputs.taps {
        let mut current: Option<Run> = None;
        for line in lines {
            if line.lua {
                match current.as_mut() {
                    Some(run) => run.effects.push(line.args.clone()),
                    None => verdict.count("script commands without their call line", 1),
                }
                continue;
            }
            runs.extend(current.take());
            let command = line
                .args
                .first()
                .map(|c| c.to_ascii_uppercase())
                .unwrap_or_default();
            let replicated = line.port.is_some_and(|port| inputs.servers.contains(&port));
            if matches!(command.as_str(), "DEL" | "UNLINK") && !replicated {
                // A client's own deletion (a reset by scope, by `UNLINK`).
                runs.push(Run {
                    micros: line.micros,
                    node: *node,
                    script: Script::Other,
                    keys: Vec::new(),
                    argv: Vec::new(),
                    effects: vec![line.args.clone()],
                });
                continue;
            }
            if !command.starts_with("EVAL") || line.args.len() < 3 {
                continue;
            }
            let sha = if command.starts_with("EVALSHA") {
                line.args[1].to_ascii_lowercase()
            } else {
                redis::Script::new(&line.args[1]).get_hash().to_owned()
            };
            let Some(&script) = known.get(&sha) else {
                verdict.violation(format!(
                    "a script the checker does not know ran on node {node} (sha {sha}): the \
                     checker is out of date"
                ));
                continue;
            };
            let keys: usize = line.args[2].parse().unwrap_or(0);
            let rest = &line.args[3.min(line.args.len())..];
            let keys = keys.min(rest.len());
            current = Some(Run {
                micros: line.micros,
                node: *node,
                script,
                keys: rest[..keys].to_vec(),
                argv: rest[keys..].to_vec(),
                effects: Vec::new(),
            });
        }
        runs.extend(current.take());
    }
    // Stable: a node's own order stands where times tie.
    runs.sort_by_key(|run| run.micros);
    runs
}

/// No window holds more than its threshold.
fn exactness(
    logs: &HashMap<String, LogKey>,
    counters: &HashMap<String, CounterKey>,
    prefix: &str,
    verdict: &mut Verdict,
) {
    for (key, log) in logs {
        let mut by_epoch: BTreeMap<u32, Vec<&LogAdmission>> = BTreeMap::new();
        for admission in log.admissions.iter().filter(|a| !a.refunded) {
            by_epoch.entry(admission.epoch).or_default().push(admission);
        }
        for admissions in by_epoch.values_mut() {
            admissions.sort_by_key(|a| a.score);
            // Every window's admissions were all counted by the check of the one decided
            // last among them (its window held them all): the window holds at most that
            // check's threshold, the one in force where and when it ran.
            let mut first = 0;
            let mut worst: Option<(usize, u64, u64)> = None;
            for (last, admission) in admissions.iter().enumerate() {
                while admissions[first].score + log.period <= admission.score {
                    first += 1;
                }
                let count = last + 1 - first;
                let decided_last = admissions[first..=last]
                    .iter()
                    .max_by_key(|a| a.run)
                    .map_or(0, |a| a.threshold);
                if decided_last > 0
                    && count as u64 > decided_last
                    && worst.is_none_or(|(most, _, _)| count > most)
                {
                    worst = Some((count, admission.score, decided_last));
                }
            }
            if let Some((count, score, threshold)) = worst {
                verdict.violation(format!(
                    "exactness: log {} admitted {count} in the window of {} s ending at server \
                     time {score} µs (threshold {threshold}, its last check's)",
                    hot_key(key, prefix),
                    log.period / 1_000_000,
                ));
            }
        }
    }
    for (key, counter) in counters {
        for (&(_, period, window), &(admitted, threshold)) in &counter.windows {
            if admitted > threshold as i64 {
                verdict.violation(format!(
                    "exactness: counter {} admitted {admitted} into its fixed window {window} of \
                     {} s (threshold {threshold}), refunds of its own admissions taken off",
                    hot_key(key, prefix),
                    period / 1_000_000
                ));
            }
        }
    }
}

/// A check script's run on a registered subject's key checked it against a threshold one of
/// the shared limits' versions possible then gives it (`changes.rs`): no instance applied a
/// threshold nobody set, nor one long after every instance had another.
fn possible_thresholds(
    run: &Run,
    registered: &HashMap<String, &Subject>,
    inputs: &Inputs<'_>,
    verdict: &mut Verdict,
) {
    for (key, limit) in run.limits() {
        let Some(subject) = registered.get(key) else {
            continue;
        };
        let possible = inputs.timeline.possible(
            subject,
            run.micros.saturating_sub(1_000),
            run.micros + 1_000,
            &inputs.wipes,
        );
        verdict.count(
            "judged: checks of registered subjects against the shared limits",
            1,
        );
        if !possible.contains(&limit.threshold) {
            verdict.violation(format!(
                "shared limits: {} was checked against {} at server time {} µs, where the \
                 thresholds possible were {possible:?}",
                subject.name, limit.threshold, run.micros
            ));
        }
    }
}

/// A denied call records nothing: per key, what the server holds (recorded, not refunded)
/// is at most what the application servers were told was admitted, plus what may have been
/// recorded unseen (errors, the policy's answers, denials of checks across cluster slots
/// whose reservations a failed refund may leave, the reserves of leases not given back).
/// And no admission goes unrecorded: what the callers were told was admitted is at most what
/// the server holds, plus what refunds of unknown outcome may have taken back and the calls
/// admitted across a server kill (a limiter that spent more of a lease than it reserved, or
/// spent a reserve it gave back, fails here).
fn accounting(
    inputs: &Inputs<'_>,
    server: &HashMap<String, i64>,
    reserves: &HashMap<String, i64>,
    verdict: &mut Verdict,
) {
    let mut told: HashMap<&str, i64> = HashMap::new();
    let mut admitted: HashMap<&str, i64> = HashMap::new();
    let mut unknown: HashMap<&str, i64> = HashMap::new();
    let mut unknown_refunds: HashMap<&str, i64> = HashMap::new();
    // Calls under way when the server was killed: one may have been answered (its reply
    // written, held by the stalled proxy, passed on after the restart) while the tap's copy of
    // its commands was not (Redis writes both on its way to sleep, in no set order).
    let mut across_wipe: HashMap<&str, i64> = HashMap::new();
    let under_way = |record: &Record, wipe: u64| {
        // A millisecond each way: the records' clock and the server's are not one reading.
        let started = inputs.epoch_micros + record.started.as_micros() as u64;
        let ended = started + record.took.as_micros() as u64;
        started.saturating_sub(1_000) <= wipe && wipe <= ended + 1_000
    };
    for record in inputs.records {
        let spans_wipe = inputs.wipes.iter().any(|&wipe| under_way(record, wipe));
        for &(subject, cost) in &record.limits {
            let key = inputs.subjects[subject].key.as_str();
            let cost = i64::from(cost);
            match (record.kind, record.outcome) {
                (Kind::Peek | Kind::Reset | Kind::ResetScope, _) => {}
                (Kind::Refund, Outcome::Done) => *told.entry(key).or_default() -= cost,
                (Kind::Refund, _) => *unknown_refunds.entry(key).or_default() += cost,
                (_, Outcome::Admitted) => {
                    *told.entry(key).or_default() += cost;
                    *admitted.entry(key).or_default() += cost;
                    if spans_wipe {
                        *across_wipe.entry(key).or_default() += cost;
                    }
                }
                (Kind::CheckAll, Outcome::Denied) if record.cross_slot => {
                    *unknown.entry(key).or_default() += cost;
                }
                (_, Outcome::Denied | Outcome::Done | Outcome::Unchecked) => {}
                (
                    _,
                    Outcome::Policy { .. } | Outcome::Error | Outcome::Cancelled | Outcome::Unknown,
                ) => {
                    *unknown.entry(key).or_default() += cost;
                }
            }
        }
    }
    // A key whose admissions the callers were told of, and of which the tap saw none: the
    // checker would judge nothing of it (a tap lost, a key it cannot read), and pass blind.
    for (key, &admitted) in &admitted {
        if admitted > 0 && !server.contains_key(*key) {
            verdict.violation(format!(
                "the tap saw no admission of {key}, of which the application servers were told \
                 of {admitted}: nothing of it was judged"
            ));
        }
    }
    for (key, &held) in server {
        if !inputs.subjects.iter().any(|subject| subject.key == *key) {
            continue;
        }
        let told_admitted = told.get(key.as_str()).copied().unwrap_or(0);
        let maybe = unknown.get(key.as_str()).copied().unwrap_or(0)
            + reserves.get(key.as_str()).copied().unwrap_or(0);
        if held > told_admitted + maybe {
            let mut text = format!(
                "denied calls recorded: the server holds {held} admitted (cost, refunds taken \
                 off) of {key}, the application servers were told of {told_admitted}, and at \
                 most {maybe} more may have been recorded unseen"
            );
            let _ = write!(text, " ({} calls)", inputs.records.len());
            verdict.violation(text);
        }
        // The other way: every admission a caller was told of is one the servers recorded (a
        // lease's reserve spent is one recorded at the lease), unless a refund whose outcome
        // is unknown took it back, or the tap lost it to a kill.
        let unsure = unknown_refunds.get(key.as_str()).copied().unwrap_or(0)
            + across_wipe.get(key.as_str()).copied().unwrap_or(0);
        if told_admitted > held + unsure {
            verdict.violation(format!(
                "admissions not recorded: the application servers were told of {told_admitted} \
                 admitted (cost, refunds taken off) of {key}, the servers recorded {held}, and \
                 at most {unsure} may have been taken back by refunds of unknown outcome or \
                 answered across a restart unseen ({} calls)",
                inputs.records.len()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "p:chk/alice#swc";
    const LEASE: &str = "GCSUScWAyYYwAAAAAAAAMD";
    const RECORD: &str = "2000000:40:GCSUScWAyYY";

    /// A script's call line, then its commands, as a node's tap reads them.
    fn run(micros: u64, script: Script, argv: &[&str], effects: &[&[&str]]) -> Vec<Line> {
        let sha = known_scripts()
            .into_iter()
            .find(|&(_, known)| known == script)
            .expect("a known script")
            .0;
        let call = ["EVALSHA", sha.as_str(), "1", KEY]
            .into_iter()
            .chain(argv.iter().copied());
        let mut lines = vec![Line {
            micros,
            lua: false,
            port: Some(40_000),
            args: call.map(str::to_owned).collect(),
        }];
        for effect in effects {
            let (command, rest) = effect.split_first().expect("a command");
            lines.push(Line {
                micros,
                lua: true,
                port: None,
                args: [*command, KEY]
                    .into_iter()
                    .chain(rest.iter().copied())
                    .map(str::to_owned)
                    .collect(),
            });
        }
        lines
    }

    /// In the fixed window 5 of a 2 s counter (10 s to 12 s after the epoch): a lease granted,
    /// a reset that keeps its reserve, a second reset on another node, and the
    /// lease's give-back taking what the first kept: the verdict's violations.
    fn give_back_after_resets(second: &[&[&str]]) -> Vec<String> {
        let first_node = [
            run(
                10_000_100,
                Script::Lease,
                &["2000000", "40", LEASE, "2", "125000", "c"],
                &[
                    &["HGET", "2000000"],
                    &["HSET", "2000000", "5 0 2 10000050 10000100"],
                    &["HSET", RECORD, &format!("5 {LEASE} 1 10125100 0")],
                ],
            ),
            run(
                10_000_200,
                Script::Reset,
                &[],
                &[
                    &["TYPE"],
                    &["HGETALL"],
                    &["HSET", RECORD, &format!("5 {LEASE} 1 10125100 1")],
                    &["HGET", "2000000"],
                    &["HSET", "2000000", "5 0 1 10000201 10000201"],
                ],
            ),
            run(
                10_000_300,
                Script::Refund,
                &[LEASE, "10000100", "1", "2000000", "40", "g"],
                &[
                    &["HGET", "2000000"],
                    &["HGET", RECORD],
                    &["HDEL", RECORD],
                    &["HSET", "2000000", "5 0 0 10000201 10000201"],
                    &["HGET", "2000000"],
                ],
            ),
        ]
        .concat();
        let inputs = Inputs {
            taps: vec![
                (0, run(10_000_210, Script::Reset, &[], second)),
                (1, first_node),
            ],
            wipes: Vec::new(),
            epoch_micros: 10_000_000,
            records: &[],
            subjects: &[],
            policies: &[],
            servers: &[],
            prefix: "p:",
            timeline: &crate::checker::changes::Timeline::new(10_000_000),
        };
        judge(&inputs).violations
    }

    /// A reset that failed at its first write (`READONLY` on the master a failover demoted:
    /// the checker's Sentinel runs found it) forgot nothing: the give-back of what an earlier
    /// reset kept takes it.
    #[test]
    fn a_reset_that_wrote_nothing_forgot_nothing() {
        assert_eq!(
            give_back_after_resets(&[&["TYPE"], &["HGETALL"]]),
            Vec::<String>::new()
        );
    }

    /// A reset that deleted the counter, its lease's record with it: a give-back after it that
    /// takes from the counter is a violation.
    #[test]
    fn a_give_back_after_a_reset_that_kept_nothing_takes_nothing() {
        let violations = give_back_after_resets(&[&["TYPE"], &["HGETALL"], &["DEL"]]);
        assert!(
            violations.len() == 1 && violations[0].contains("the counter was reset since"),
            "{violations:#?}"
        );
    }
}
