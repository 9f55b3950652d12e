//! The registry: the limits operators change while the process runs, beside the check path
//! and read by it through one call, [`Registry::resolve`].
//!
//! - `limits.rs`: the entries as a source gives them ([`Limits`], [`ScopeLimits`],
//!   [`Override`], [`Mode`]);
//! - `file.rs` (feature `limits-file`): the limits file, parsed and watched;
//! - `redis.rs`: the limits shared through Redis, written through [`SharedLimits`](crate::SharedLimits) and
//!   followed by a thread of the limiter's own;
//! - `catalog.rs`: the code's limits, which every change is judged against.
//!
//! Each source (a limits file, [`Source::File`]; the shared limits, [`Source::Redis`]; the
//! API, [`Source::Api`]) replaces its own entries
//! whole; the registry merges them into one snapshot, which every check reads without a lock
//! ([`arc_swap`]) and which a change replaces whole, so that a check sees one version of the
//! limits, never half of a change. Precedence: the most specific entry wins (a key's
//! override, then its scope's entry, then the code), and between sources of one specificity
//! the later [`Source`]. The limiter's own mode, when `shadow` or `off`, wins over every
//! scope's.
//!
//! The registry never moves a log: a check's keys come from the code's rate, whatever rate it
//! is checked against, so a new threshold reuses the log (see `guide::operating` for a changed
//! period).

pub(crate) mod catalog;
#[cfg(feature = "limits-file")]
pub(crate) mod file;
mod limits;
pub(crate) mod redis;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;

pub use self::catalog::{DeclaredLimit, declared_limits};
pub use self::limits::{Action, Limits, Mode, Override, ScopeLimits};
use self::redis::Follower;
use crate::error::StoreError;
use crate::rate::Rate;
use crate::store::redis::RedisStore;
use crate::store::redis::registry::SharedRead;

/// Where a source's entries come from, the later winning over the earlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The limits file (feature `limits-file`).
    #[cfg_attr(not(feature = "limits-file"), allow(dead_code))]
    File,
    /// The limits shared through Redis ([`SharedLimits`](crate::SharedLimits)).
    Redis,
    /// [`Limiter::set_limits`](crate::Limiter::set_limits) and
    /// [`Limiter::set_mode`](crate::Limiter::set_mode).
    Api,
}

impl Source {
    /// Every source, the earliest (the weakest) first.
    const ALL: [Source; 3] = [Source::File, Source::Redis, Source::Api];

    /// The source's name in logs and metrics.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Redis => "redis",
            Source::Api => "api",
        }
    }
}

/// What a check does, once the registry was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// A check against `rate` (the code's, or the registry's), in shadow mode when `shadow`.
    Check { rate: Rate, shadow: bool },
    /// No check: the scope or the limiter is off, or the key exempt. Admitted, recording
    /// nothing.
    Exempt,
    /// The key is blocked: denied without a check, for `retry_after` (under shadow mode,
    /// admitted as a call that would have been denied).
    Blocked {
        rate: Rate,
        retry_after: Duration,
        shadow: bool,
    },
}

/// The registry's tables: a fast hash, seeded per process (an override's key is a caller's).
type Table<V> = HashMap<Box<str>, V, foldhash::fast::RandomState>;

/// One scope's entries, merged from every source.
#[derive(Debug, Default)]
struct Entry {
    rate: Option<Entered>,
    mode: Option<Mode>,
    /// By the caller's key escaped (`E(key)`, as the attribute's key writes it: see
    /// `layout.rs`), each source's (the latest first: an expired one leaves the next in
    /// force); expiries in µs since the Unix epoch.
    overrides: Table<Vec<Overriding>>,
    /// `E(scope)/`: what the key of the attribute's one limit in this scope starts with,
    /// before its `E(key)`.
    prefix: Box<str>,
    /// Whether its rate was found ignored over a rate chosen per call (logged once).
    ignored: AtomicBool,
}

/// One source's override of a key: what it does, until when, and whether its rate's
/// algorithm is the code's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Overriding {
    action: Action,
    expires: Option<u64>,
    code_algorithm: bool,
}

/// A rate an entry sets, and whether its algorithm is the code's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entered {
    rate: Rate,
    code_algorithm: bool,
}

impl Entered {
    /// The rate a check of the code's `code` rate takes: this one, with the code's algorithm
    /// if it names none, leased if the code's is (a lease is how the code reaches the store,
    /// not a limit).
    #[inline]
    fn over(self, code: Rate) -> Rate {
        if code.is_concurrency() {
            // A concurrency limit's entry sets how many calls may be in flight; its slot time
            // stays the code's.
            let max = self
                .rate
                .threshold()
                .min(crate::concurrency::Concurrency::MAX);
            return Rate::of_slots(max as u32, code.period_us());
        }
        let rate = if self.code_algorithm {
            self.rate.with_algorithm(code.algorithm())
        } else {
            self.rate
        };
        if code.is_leased() {
            rate.leased()
        } else {
            rate
        }
    }
}

/// Every scope's merged entries: what checks read.
#[derive(Debug)]
struct Snapshot {
    /// The limiter's mode in force.
    mode: Mode,
    scopes: Table<Entry>,
}

/// The words of [`Registry`]'s filter of the scopes with an entry.
const FILTER_WORDS: usize = 16;

/// A scope's word of the filter and its two bits in it (a blocked filter: one load to test):
/// from a fingerprint of its length and its first and last 8 bytes, a few instructions
/// (scopes are the code's and the operators' names, not a caller's: a collision only costs a
/// lookup).
#[inline]
fn filter_bits(scope: &str) -> (usize, u64) {
    let bytes = scope.as_bytes();
    let (head, tail) = match (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) {
        (Some(head), Some(tail)) => (u64::from_le_bytes(*head), u64::from_le_bytes(*tail)),
        // Shorter than 8 bytes: its first and last ones (its length is mixed in below).
        _ => match (bytes.first(), bytes.last()) {
            (Some(&first), Some(&last)) => (u64::from(first) | u64::from(last) << 8, 0),
            _ => (0, 0),
        },
    };
    let mixed =
        (head ^ tail.rotate_left(29) ^ bytes.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // The product's high bits are its best mixed: 4 for the word (of 16), 6 for each bit.
    const _: () = assert!(FILTER_WORDS == 16);
    let word = (mixed >> 60) as usize;
    let bits = 1 << ((mixed >> 54) & 63) | 1 << ((mixed >> 48) & 63);
    (word, bits)
}

/// A limiter's registry: its sources' entries, and their merge.
pub(crate) struct Registry {
    /// The mode the limiter was built with (`shadow` for a shadow limiter).
    built: Mode,
    /// A sequence lock over `mode`, `any_scope` and `filter`, the words a check of one limit
    /// reads without the snapshot: odd while a change writes them, and a check that saw it
    /// change or odd reads the snapshot instead (one version of everything).
    version: AtomicU64,
    /// The limiter's mode in force: the latest source's, else `built`.
    mode: AtomicU8,
    /// Whether any scope has an entry.
    any_scope: AtomicBool,
    /// The scopes with an entry, two bits each in one word ([`filter_bits`]): a check of one limit whose scope
    /// has none reads no snapshot.
    filter: [AtomicU64; FILTER_WORDS],
    /// Every entry in force, and the limiter's mode, replaced whole by a change.
    snapshot: ArcSwap<Snapshot>,
    /// Each source's entries, in [`Source::ALL`]'s order; held while a change is applied, so
    /// that changes apply one at a time.
    sources: Mutex<Vec<Limits>>,
    /// What watches a source (the limits file's directory), dropped with the registry.
    #[cfg_attr(not(feature = "limits-file"), allow(dead_code))]
    watchers: Mutex<Vec<Box<dyn Send>>>,
    /// The changes a source gave that were rejected.
    rejected: AtomicU64,
    /// Told of each change once it is in force (the check path's state made under the
    /// limits before it: its leases and deny cache).
    applied: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Registry {
    /// A registry without entries, for a limiter built in `mode`.
    pub(crate) fn new(mode: Mode) -> Registry {
        Registry {
            built: mode,
            version: AtomicU64::new(0),
            mode: AtomicU8::new(mode as u8),
            any_scope: AtomicBool::new(false),
            filter: Default::default(),
            snapshot: ArcSwap::from_pointee(Snapshot {
                mode,
                scopes: Table::default(),
            }),
            sources: Mutex::new(vec![Limits::default(); Source::ALL.len()]),
            watchers: Mutex::new(Vec::new()),
            rejected: AtomicU64::new(0),
            applied: std::sync::OnceLock::new(),
        }
    }

    /// Applies the limits file at `path` (feature `limits-file`), and each change of it from
    /// then on (a rejected one counted, the limits in force kept), until the registry is
    /// dropped.
    ///
    /// # Errors
    ///
    /// The file's mistake, or why it cannot be read or watched.
    #[cfg(feature = "limits-file")]
    pub(crate) fn watch_file(self: &Arc<Self>, path: std::path::PathBuf) -> Result<(), String> {
        let registry = Arc::downgrade(self);
        let watcher = file::watch(path, move |change| {
            let Some(registry) = registry.upgrade() else {
                return false;
            };
            // A mistake is logged where the file is read, and the entries are judged against
            // the code's limits as they are parsed (with their lines): `set` finds nothing
            // more to reject, and would log it.
            let applied = match change {
                Ok(limits) => registry
                    .set(Source::File, limits)
                    .map_err(|error| tracing::error!(%error, "the limits file is rejected"))
                    .is_ok(),
                Err(_) => false,
            };
            if !applied {
                registry.count_rejected();
            }
            crate::telemetry::registry_load(Source::File.name(), applied);
            true
        })?;
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watcher);
        Ok(())
    }

    /// Puts a read of the limits shared through Redis in force as [`Source::Redis`]'s entries
    /// (an entry that does not parse, or that the code's limits reject, left out and logged
    /// by `redis.rs`, and counted among the rejected changes), counted as a load of that
    /// source when it changed them, or skipped an entry.
    pub(crate) fn apply_shared(&self, reads: &[SharedRead]) {
        let mut skipped = 0;
        let applied = self.update(Source::Redis, |limits| {
            skipped = redis::apply_reads(limits, reads);
        });
        for _ in 0..skipped {
            self.count_rejected();
        }
        match applied {
            Ok(changed) => {
                if changed || skipped > 0 {
                    crate::telemetry::registry_load(Source::Redis.name(), skipped == 0);
                }
            }
            Err(error) => {
                tracing::error!(
                    source = Source::Redis.name(),
                    %error,
                    "a change of the shared limits is rejected"
                );
                self.count_rejected();
                crate::telemetry::registry_load(Source::Redis.name(), false);
            }
        }
    }

    /// Reads the changes of the limits shared through Redis made since `follower` last read
    /// them from `store`, and puts them in force.
    ///
    /// # Errors
    ///
    /// The store's: the limits in force stay as they were.
    pub(crate) async fn catch_up(
        &self,
        follower: &Follower,
        store: &RedisStore,
    ) -> Result<bool, StoreError> {
        follower
            .catch_up(store, |reads| self.apply_shared(reads))
            .await
    }

    /// Has `applied` called after each change, once it is in force (set once: later calls
    /// are ignored).
    pub(crate) fn on_applied(&self, applied: Box<dyn Fn() + Send + Sync>) {
        let _ = self.applied.set(applied);
    }

    /// Counts a change a source gave that was rejected.
    pub(crate) fn count_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// The changes a source gave that were rejected.
    pub(crate) fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// The limiter's mode in force.
    #[inline]
    pub(crate) fn mode(&self) -> Mode {
        decode(self.mode.load(Ordering::Acquire))
    }

    /// Whether the limiter's mode in force is `mode` (one load, no decoding: the check path
    /// asks on every check).
    #[inline]
    pub(crate) fn is_mode(&self, mode: Mode) -> bool {
        self.mode.load(Ordering::Acquire) == mode as u8
    }

    /// Whether a check of one limit in `scope` is the code's check, as the check path makes
    /// it (the limiter's own shadow mode included): the limiter is not off, and `scope` has no
    /// entry. A few instructions and no snapshot (see `version`); `false` while a change is
    /// being written, and the snapshot is read instead.
    #[inline(always)]
    pub(crate) fn is_code(&self, scope: &str) -> bool {
        let version = self.version.load(Ordering::Acquire);
        let code = self.mode.load(Ordering::Relaxed) != Mode::Off as u8
            && (!self.any_scope.load(Ordering::Relaxed) || !self.may_have_entry(scope));
        std::sync::atomic::fence(Ordering::Acquire);
        code && version.is_multiple_of(2) && self.version.load(Ordering::Relaxed) == version
    }

    /// Whether `scope` passes the filter: it may have an entry (it has one, or shares its
    /// bits with one that has).
    #[inline]
    fn may_have_entry(&self, scope: &str) -> bool {
        let (word, bits) = filter_bits(scope);
        self.filter[word].load(Ordering::Relaxed) & bits == bits
    }

    /// What a check of `scope`'s limit of `rate` (`per_call`: chosen per call, `rate = expr`)
    /// does, for the caller's key that `key` gives (asked only when the scope has overrides;
    /// `None`: a limit without a key), at `now` (µs since the Unix epoch, asked only for an
    /// override that expires). A check of several limits asks one [`View`] of them all.
    #[inline]
    pub(crate) fn resolve<'k>(
        &self,
        scope: &str,
        rate: Rate,
        per_call: bool,
        key: impl FnOnce() -> Option<std::borrow::Cow<'k, str>>,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        if self.is_code(scope) {
            // The limiter's mode may have changed since: the check path reads it again.
            let shadow = self.mode() == Mode::Shadow;
            return Resolved::Check { rate, shadow };
        }
        self.view().resolve(scope, rate, per_call, key, now)
    }

    /// The limits in force now, one version of them (one snapshot).
    #[inline]
    pub(crate) fn view(&self) -> View {
        View {
            snapshot: self.snapshot.load(),
        }
    }

    /// `source`'s entries.
    pub(crate) fn get(&self, source: Source) -> Limits {
        let sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources[source as usize].clone()
    }

    /// Replaces `source`'s entries by `limits`, logging and counting what changed; the
    /// change is in force for every check that starts once this returns.
    ///
    /// # Errors
    ///
    /// What the code's limits reject in `limits` (see [`catalog::judge`]): nothing changed.
    pub(crate) fn set(&self, source: Source, limits: Limits) -> Result<(), String> {
        self.update(source, |entries| *entries = limits).map(|_| ())
    }

    /// Changes `source`'s entries by `change`, as [`set`](Registry::set) does, one change at
    /// a time (no concurrent change is lost between reading the entries and writing them).
    /// Returns whether they changed.
    ///
    /// # Errors
    ///
    /// What the code's limits reject in the changed entries: nothing changed.
    pub(crate) fn update(
        &self,
        source: Source,
        change: impl FnOnce(&mut Limits),
    ) -> Result<bool, String> {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = sources[source as usize].clone();
        change(&mut changed);
        catalog::judge(&changed)?;
        // The file names its misspelt scopes with their lines as it reads them.
        for scope in changed.scopes.keys().filter(|_| source != Source::File) {
            if !sources[source as usize].scopes.contains_key(scope)
                && let Some(meant) = catalog::misspelt(scope)
            {
                tracing::warn!(
                    source = source.name(),
                    scope,
                    meant,
                    "this scope names no limit of the code's `#[rate_limit]`s: a misspelling?"
                );
            }
        }
        Ok(self.commit(&mut sources, source, changed))
    }

    /// Sets `source`'s mode for the whole limiter (`None`: none, the weaker sources' in
    /// force), as [`set`](Registry::set) sets its entries; a mode is never rejected.
    pub(crate) fn set_mode(&self, source: Source, mode: Option<Mode>) {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let mut changed = sources[source as usize].clone();
        changed.mode = mode;
        let _ = self.commit(&mut sources, source, changed);
    }

    /// Puts `changed` in force as `source`'s entries (`sources`, under their lock), and
    /// returns `true`; nothing, `false`, when they are that source's entries already (a reconciling loop's, a file's comment
    /// edited): no log, and the deny cache and leases are kept. (A source that repeats
    /// another's entry, or sets the mode in force, changes its own entries: that is a
    /// change.)
    fn commit(&self, sources: &mut [Limits], source: Source, changed: Limits) -> bool {
        if sources[source as usize] == changed {
            return false;
        }
        let old_mode = self.mode();
        let old = self.snapshot.load_full();
        sources[source as usize] = changed;
        let (mode, snapshot) = merge(self.built, sources);
        report(source, old_mode, mode, &old, &snapshot);
        let any_scope = !snapshot.scopes.is_empty();
        let mut filter = [0_u64; FILTER_WORDS];
        for scope in snapshot.scopes.keys() {
            let (word, bits) = filter_bits(scope);
            filter[word] |= bits;
        }
        self.snapshot.store(Arc::new(snapshot));
        // The sequence lock's write: odd, the words, even again (changes are one at a time,
        // under `sources`' lock).
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        for (word, bits) in self.filter.iter().zip(filter) {
            word.store(bits, Ordering::Relaxed);
        }
        self.any_scope.store(any_scope, Ordering::Relaxed);
        self.mode.store(mode as u8, Ordering::Relaxed);
        self.version.store(version + 2, Ordering::Release);
        if let Some(applied) = self.applied.get() {
            applied();
        }
        true
    }
}

/// One version of the limits in force ([`Registry::view`]), which every limit of one check is
/// resolved against. Short-lived: not held across an `.await`.
pub(crate) struct View {
    snapshot: arc_swap::Guard<Arc<Snapshot>>,
}

impl View {
    /// What a check of `scope`'s limit does (see [`Registry::resolve`]).
    #[inline]
    pub(crate) fn resolve<'k>(
        &self,
        scope: &str,
        rate: Rate,
        per_call: bool,
        key: impl FnOnce() -> Option<std::borrow::Cow<'k, str>>,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        self.resolve_escaped(
            scope,
            rate,
            per_call,
            |_| key().map(crate::layout::escape_key_cow),
            now,
        )
    }

    /// What the attribute's check of its one limit in `scope`, of the key `stored` (`E(scope)`
    /// or `E(scope)/E(key)`, as `__private::scoped_key` writes it), does: as
    /// [`resolve`](View::resolve), its key's override found by the `E(key)` it holds, without
    /// reading the key back.
    #[inline]
    pub(crate) fn resolve_stored(
        &self,
        scope: &str,
        rate: Rate,
        stored: &str,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        self.resolve_escaped(
            scope,
            rate,
            false,
            |prefix| stored.strip_prefix(prefix).map(std::borrow::Cow::Borrowed),
            now,
        )
    }

    /// What a check of `scope`'s limit does, `key` giving the caller's key escaped (see
    /// [`resolve_entry`](View::resolve_entry)): without a look-up while no scope has an entry.
    #[inline(always)]
    fn resolve_escaped<'k>(
        &self,
        scope: &str,
        rate: Rate,
        per_call: bool,
        key: impl FnOnce(&str) -> Option<std::borrow::Cow<'k, str>>,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        match self.snapshot.mode {
            Mode::Off => Resolved::Exempt,
            limiter if self.snapshot.scopes.is_empty() => Resolved::Check {
                rate,
                shadow: limiter == Mode::Shadow,
            },
            _ => self.resolve_entry(scope, rate, per_call, key, now),
        }
    }

    /// What a check of `scope`'s limit does once the snapshot has entries; `key` gives the
    /// caller's key escaped, `E(key)`, from the scope's `E(scope)/` (asked only when the scope
    /// has overrides).
    #[inline(never)]
    fn resolve_entry<'k>(
        &self,
        scope: &str,
        rate: Rate,
        per_call: bool,
        key: impl FnOnce(&str) -> Option<std::borrow::Cow<'k, str>>,
        now: impl FnOnce() -> u64,
    ) -> Resolved {
        let limiter = self.snapshot.mode;
        let Some(entry) = self.snapshot.scopes.get(scope) else {
            let shadow = limiter == Mode::Shadow;
            return Resolved::Check { rate, shadow };
        };
        let mode = match limiter {
            Mode::Enforce => entry.mode.unwrap_or(Mode::Enforce),
            limiter => limiter,
        };
        let shadow = match mode {
            Mode::Off => return Resolved::Exempt,
            Mode::Shadow => true,
            Mode::Enforce => false,
        };
        let code = rate;
        let rate = match entry.rate {
            Some(_) if per_call => {
                if !entry.ignored.swap(true, Ordering::Relaxed) {
                    ignored_over_per_call(scope);
                }
                rate
            }
            Some(entered) => entered.over(code),
            None => rate,
        };
        let found = if entry.overrides.is_empty() {
            None
        } else {
            key(&entry.prefix).and_then(|key| entry.overrides.get(&*key))
        };
        let Some(overridings) = found else {
            return Resolved::Check { rate, shadow };
        };
        // The latest source's that has not expired: an expired one is as if it were not there.
        let in_force = first_in_force(overridings, now);
        let Some((
            Overriding {
                action,
                code_algorithm,
                ..
            },
            left,
        )) = in_force
        else {
            return Resolved::Check { rate, shadow };
        };
        match action {
            Action::Exempt => Resolved::Exempt,
            Action::Rate(rate) => Resolved::Check {
                rate: Entered {
                    rate,
                    code_algorithm,
                }
                .over(code),
                shadow,
            },
            Action::Block => Resolved::Blocked {
                rate,
                retry_after: left.unwrap_or_else(|| rate.period()),
                shadow,
            },
        }
    }
}

/// The first of `overridings` (the latest source's first) in force at the time `now` gives
/// (asked once, and only of one that expires), with the time left until it expires.
/// Starts the thread that keeps `owner`'s registry up to date with the limits shared through
/// Redis, every [`redis::INTERVAL`], until `owner` is dropped; `parts` finds its registry,
/// follower and store. The thread runs a runtime of its own (a current-thread Tokio runtime),
/// so that no check waits for it and it needs none of the caller's.
///
/// # Errors
///
/// The thread or its runtime could not be started.
pub(crate) fn follow<S: Send + Sync + 'static>(
    owner: &Arc<S>,
    parts: for<'a> fn(&'a S) -> Option<(&'a Registry, &'a Follower, &'a RedisStore)>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let owner = Arc::downgrade(owner);
    std::thread::Builder::new()
        .name("ratelimit-shared-limits".into())
        .spawn(move || runtime.block_on(follow_on(owner, parts)))?;
    Ok(())
}

/// [`follow`]'s loop: a read, then a pause; an outage logged when it starts and ends.
async fn follow_on<S>(
    owner: std::sync::Weak<S>,
    parts: for<'a> fn(&'a S) -> Option<(&'a Registry, &'a Follower, &'a RedisStore)>,
) {
    let source = Source::Redis.name();
    let mut failing = false;
    let mut read_once = false;
    loop {
        {
            let Some(owner) = owner.upgrade() else {
                return;
            };
            let Some((registry, follower, store)) = parts(&owner) else {
                return;
            };
            match registry.catch_up(follower, store).await {
                Ok(_) if failing => {
                    failing = false;
                    read_once = true;
                    tracing::info!(source, "the shared limits are read again");
                }
                Ok(_) => read_once = true,
                Err(error) if !failing && read_once => {
                    failing = true;
                    tracing::warn!(
                        source,
                        %error,
                        "the shared limits cannot be read: the last ones read stay in force"
                    );
                }
                Err(error) if !failing => {
                    failing = true;
                    tracing::warn!(
                        source,
                        %error,
                        "the shared limits cannot be read yet: the code's limits (and a limits \
                         file's) are in force until they are"
                    );
                }
                Err(_) => {}
            }
        }
        tokio::time::sleep(redis::INTERVAL).await;
    }
}

fn first_in_force(
    overridings: &[Overriding],
    now: impl FnOnce() -> u64,
) -> Option<(Overriding, Option<Duration>)> {
    let mut now = Some(now);
    let mut time = None;
    overridings
        .iter()
        .find_map(|overriding| match overriding.expires {
            None => Some((*overriding, None)),
            Some(expires) => {
                let now = *time.get_or_insert_with(|| now.take().map_or(0, |now| now()));
                let left = expires.checked_sub(now).filter(|&left| left > 0)?;
                Some((*overriding, Some(Duration::from_micros(left))))
            }
        })
}

/// The limiter's mode in its atomic's encoding.
fn decode(mode: u8) -> Mode {
    match mode {
        0 => Mode::Enforce,
        1 => Mode::Shadow,
        _ => Mode::Off,
    }
}

/// Logs (once per scope and change) that a scope's rate entry is ignored.
#[cold]
fn ignored_over_per_call(scope: &str) {
    tracing::warn!(
        scope,
        "the registry's rate for this scope is ignored: its limit chooses its rate per call (`rate = expr`), whose tiers stay in code; set only its mode, or override keys"
    );
}

/// The limiter's mode and the scopes' entries in force, from every source's (`sources`, the
/// weakest first) over the limiter's `built` mode.
fn merge(built: Mode, sources: &[Limits]) -> (Mode, Snapshot) {
    let mut mode = built;
    let mut snapshot = Snapshot {
        mode,
        scopes: Table::default(),
    };
    for limits in sources {
        mode = limits.mode.unwrap_or(mode);
        for (scope, given) in &limits.scopes {
            let entry = snapshot
                .scopes
                .entry(scope.as_str().into())
                .or_insert_with(|| Entry {
                    prefix: format!("{}/", crate::layout::escape_key(scope)).into(),
                    ..Entry::default()
                });
            let entered = given.rate.map(|rate| Entered {
                rate,
                code_algorithm: given.code_algorithm,
            });
            entry.rate = entered.or(entry.rate);
            entry.mode = given.mode.or(entry.mode);
            for (key, over) in &given.overrides {
                let overriding = Overriding {
                    action: over.action,
                    expires: over.expires.map(crate::clock::micros_saturating),
                    code_algorithm: over.code_algorithm,
                };
                // The later source's first.
                let escaped = crate::layout::escape_key(key);
                let overridings = entry.overrides.entry(escaped.into()).or_default();
                overridings.insert(0, overriding);
            }
        }
    }
    snapshot.mode = mode;
    (mode, snapshot)
}

/// Logs and counts what a change of `source` changed: the limiter's mode (`old_mode` to
/// `mode`), and each scope whose entry it changed (its rate, its mode, the number of its
/// overrides; their keys only at debug level).
fn report(source: Source, old_mode: Mode, mode: Mode, old: &Snapshot, new: &Snapshot) {
    let source = source.name();
    if old_mode != mode {
        tracing::info!(source, from = %old_mode, to = %mode, "the rate limiter's mode changed");
        crate::telemetry::mode_changed(None);
    }
    let empty = Entry::default();
    let scopes: std::collections::BTreeSet<&str> = old
        .scopes
        .keys()
        .chain(new.scopes.keys())
        .map(|scope| &**scope)
        .collect();
    for scope in scopes {
        let before = old.scopes.get(scope).unwrap_or(&empty);
        let after = new.scopes.get(scope).unwrap_or(&empty);
        let (from, to) = (
            before.mode.unwrap_or_default(),
            after.mode.unwrap_or_default(),
        );
        if from != to {
            tracing::info!(source, scope, %from, %to, "a rate limit's mode changed");
            crate::telemetry::mode_changed(Some(scope));
        }
        if before.rate != after.rate {
            let rate = |entered: Option<Entered>| {
                entered.map_or_else(
                    || "the code's".to_owned(),
                    |entered| entered.rate.to_string(),
                )
            };
            tracing::info!(source, scope, from = %rate(before.rate), to = %rate(after.rate), "a rate limit's rate changed");
        }
        if before.overrides != after.overrides {
            tracing::info!(
                source,
                scope,
                from = before.overrides.len(),
                to = after.overrides.len(),
                "the keys with overrides in force changed (counted across every source)"
            );
            tracing::debug!(source, scope, overrides = ?after.overrides, "the key overrides now in force");
        }
        if before.rate != after.rate || before.overrides != after.overrides {
            crate::telemetry::registry_changed(scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use std::time::SystemTime;

    const CODE: Rate = Rate::new_const(5, Duration::from_secs(60));
    const MORE: Rate = Rate::new_const(50, Duration::from_secs(60));
    const VIP: Rate = Rate::new_const(500, Duration::from_secs(60));

    fn resolve(registry: &Registry, scope: &str, key: Option<&str>, now: u64) -> Resolved {
        registry.resolve(scope, CODE, false, || key.map(Cow::Borrowed), || now)
    }

    fn at(us: u64) -> SystemTime {
        crate::clock::at_micros(us)
    }

    /// The precedence table: code, scope entry, override (rate, block, exempt, expired),
    /// scope mode, limiter mode.
    #[test]
    fn the_most_specific_entry_wins_and_the_limiters_mode_beats_all() {
        let registry = Registry::new(Mode::Enforce);
        let enforce = |rate| Resolved::Check {
            rate,
            shadow: false,
        };
        assert_eq!(resolve(&registry, "login", Some("bob"), 0), enforce(CODE));
        registry
            .set(
                Source::Api,
                Limits::new().scope(
                    "login",
                    ScopeLimits::new()
                        .rate(MORE)
                        .key("vip", Override::rate(VIP))
                        .key("evil", Override::block().until(at(2_000_000)))
                        .key("ops", Override::exempt())
                        .key("trial", Override::rate(VIP).until(at(1_000_000))),
                ),
            )
            .expect("accepted");
        assert_eq!(resolve(&registry, "login", Some("bob"), 0), enforce(MORE));
        assert_eq!(resolve(&registry, "login", None, 0), enforce(MORE));
        assert_eq!(resolve(&registry, "search", Some("vip"), 0), enforce(CODE));
        assert_eq!(resolve(&registry, "login", Some("vip"), 0), enforce(VIP));
        assert_eq!(
            resolve(&registry, "login", Some("ops"), 0),
            Resolved::Exempt
        );
        assert_eq!(
            resolve(&registry, "login", Some("evil"), 500_000),
            Resolved::Blocked {
                rate: MORE,
                retry_after: Duration::from_micros(1_500_000),
                shadow: false
            }
        );
        assert_eq!(
            resolve(&registry, "login", Some("evil"), 2_000_000),
            enforce(MORE)
        );
        assert_eq!(
            resolve(&registry, "login", Some("trial"), 999_999),
            enforce(VIP)
        );
        assert_eq!(
            resolve(&registry, "login", Some("trial"), 1_000_000),
            enforce(MORE)
        );
        // A scope's mode applies to its overrides too; the limiter's beats it.
        let mut limits = registry.get(Source::Api);
        limits.scopes.get_mut("login").unwrap().mode = Some(Mode::Shadow);
        registry.set(Source::Api, limits.clone()).expect("accepted");
        let shadow = |rate| Resolved::Check { rate, shadow: true };
        assert_eq!(resolve(&registry, "login", Some("vip"), 0), shadow(VIP));
        assert_eq!(resolve(&registry, "search", None, 0), enforce(CODE));
        registry
            .set(Source::Api, limits.clone().mode(Mode::Off))
            .expect("accepted");
        assert_eq!(resolve(&registry, "search", None, 0), Resolved::Exempt);
        registry
            .set(Source::Api, limits.clone().mode(Mode::Enforce))
            .expect("accepted");
        assert_eq!(resolve(&registry, "login", None, 0), shadow(MORE));
        limits.scopes.get_mut("login").unwrap().mode = Some(Mode::Off);
        registry
            .set(Source::Api, limits.clone().mode(Mode::Shadow))
            .expect("accepted");
        assert_eq!(resolve(&registry, "login", None, 0), shadow(MORE));
        assert_eq!(resolve(&registry, "search", None, 0), shadow(CODE));
        registry.set(Source::Api, limits).expect("accepted");
        assert_eq!(
            resolve(&registry, "login", Some("vip"), 0),
            Resolved::Exempt
        );
        // Back to the code.
        registry.set(Source::Api, Limits::new()).expect("accepted");
        assert_eq!(resolve(&registry, "login", Some("vip"), 0), enforce(CODE));
        assert_eq!(registry.mode(), Mode::Enforce);
    }

    /// Every scope with an entry passes the filter (and is resolved by its entry); most
    /// others do not, and are resolved by the code without a lookup.
    #[test]
    fn the_filter_finds_every_scope_with_an_entry() {
        let registry = Registry::new(Mode::Enforce);
        let names: Vec<String> = (0..100)
            .map(|i| format!("app::handlers::route_{i}"))
            .collect();
        let limits = names.iter().fold(Limits::new(), |limits, name| {
            limits.scope(name, ScopeLimits::new().rate(MORE))
        });
        registry.set(Source::Api, limits).expect("accepted");
        let passes = |scope: &str| registry.may_have_entry(scope);
        for name in &names {
            assert!(passes(name), "{name}");
            let resolved = resolve(&registry, name, None, 0);
            assert_eq!(
                resolved,
                Resolved::Check {
                    rate: MORE,
                    shadow: false
                }
            );
        }
        let others = (0..1_000)
            .filter(|i| passes(&format!("app::other::route_{i}")))
            .count();
        assert!(others < 150, "{others} of 1000 other scopes pass");
        for short in ["", "a", "login", "f#2"] {
            let _ = filter_bits(short);
        }
    }

    /// A check never mixes two versions of the limits: between a version that enforces the
    /// code and a dry run that blocks a key in shadow mode, no resolution is a real block
    /// (the reviewer's race: an old mode with a new snapshot).
    #[test]
    fn a_check_sees_one_version_of_a_change() {
        use std::sync::atomic::AtomicBool;
        let registry = Arc::new(Registry::new(Mode::Enforce));
        let enforce = Limits::new();
        let dry_run = Limits::new()
            .mode(Mode::Shadow)
            .scope("s", ScopeLimits::new().key("k", Override::block()));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (registry, stop) = (Arc::clone(&registry), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut resolved = 0_u64;
                    while !stop.load(Ordering::Relaxed) {
                        let answer = resolve(&registry, "s", Some("k"), 0);
                        assert!(
                            !matches!(answer, Resolved::Blocked { shadow: false, .. }),
                            "{answer:?}"
                        );
                        let view = registry.view();
                        let answer =
                            view.resolve("s", CODE, false, || Some(Cow::Borrowed("k")), || 0);
                        assert!(
                            !matches!(answer, Resolved::Blocked { shadow: false, .. }),
                            "{answer:?}"
                        );
                        resolved += 1;
                    }
                    resolved
                })
            })
            .collect();
        for round in 0..2_000 {
            let limits = if round % 2 == 0 { &dry_run } else { &enforce };
            registry.set(Source::Api, limits.clone()).expect("accepted");
        }
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().expect("a reader") > 0);
        }
    }

    #[test]
    fn a_shadow_limiter_is_shadow_until_a_source_says_otherwise() {
        let registry = Registry::new(Mode::Shadow);
        assert_eq!(
            resolve(&registry, "login", None, 0),
            Resolved::Check {
                rate: CODE,
                shadow: true
            }
        );
        registry
            .set(Source::Api, Limits::new().mode(Mode::Enforce))
            .expect("accepted");
        assert_eq!(registry.mode(), Mode::Enforce);
        registry.set(Source::Api, Limits::new()).expect("accepted");
        assert_eq!(registry.mode(), Mode::Shadow);
    }

    #[test]
    fn a_rate_over_a_rate_chosen_per_call_is_ignored_and_its_mode_kept() {
        let registry = Registry::new(Mode::Enforce);
        registry
            .set(
                Source::Api,
                Limits::new().scope("tiers", ScopeLimits::new().rate(MORE).mode(Mode::Shadow)),
            )
            .expect("accepted");
        let resolved = registry.resolve("tiers", CODE, true, || None, || 0);
        assert_eq!(
            resolved,
            Resolved::Check {
                rate: CODE,
                shadow: true
            }
        );
    }

    #[test]
    fn the_key_is_asked_only_of_a_scope_with_overrides() {
        let registry = Registry::new(Mode::Enforce);
        registry
            .set(
                Source::Api,
                Limits::new().scope("a", ScopeLimits::new().rate(MORE)),
            )
            .expect("accepted");
        let asked = |scope| {
            let mut asked = false;
            registry.resolve(
                scope,
                CODE,
                false,
                || {
                    asked = true;
                    None
                },
                || 0,
            );
            asked
        };
        assert!(!asked("a"));
        assert!(!asked("b"));
    }

    /// A key's override is found whatever special characters the scope and key hold: by the
    /// caller's key as given (a hand check, a layer) and by the attribute's key, which holds
    /// them escaped; never by another scope's key, nor by a key that is the escape's text.
    #[test]
    fn an_override_is_found_by_the_key_as_given_and_as_the_attribute_writes_it() {
        let registry = Registry::new(Mode::Enforce);
        let blocked = |scope: &str, key: &str| {
            Limits::new().scope(scope, ScopeLimits::new().key(key, Override::block()))
        };
        let limits = Limits::new()
            .scope(
                "s#1{x}",
                ScopeLimits::new()
                    .key(r"a/b\c{d}", Override::block())
                    .key("plain", Override::block()),
            )
            .scope("t", blocked("t", "k").get_scope("t").cloned().expect("t"));
        registry.set(Source::Api, limits).expect("accepted");
        let view = registry.view();
        let stored = |scope: &str, key: &str| {
            view.resolve_stored(scope, CODE, &crate::__private::scoped_key(scope, key), || 0)
        };
        for key in [r"a/b\c{d}", "plain"] {
            assert!(
                matches!(
                    resolve(&registry, "s#1{x}", Some(key), 0),
                    Resolved::Blocked { .. }
                ),
                "{key}"
            );
            assert!(
                matches!(stored("s#1{x}", key), Resolved::Blocked { .. }),
                "{key}"
            );
        }
        // The escape's text is another key; the scope's own key (no `/`) has none.
        let escaped = crate::layout::escape_key(r"a/b\c{d}").into_owned();
        assert!(matches!(
            resolve(&registry, "s#1{x}", Some(&escaped), 0),
            Resolved::Check { .. }
        ));
        assert!(matches!(stored("s#1{x}", &escaped), Resolved::Check { .. }));
        assert!(matches!(
            view.resolve_stored("s#1{x}", CODE, "s\\#1\\(x\\)", || 0),
            Resolved::Check { .. }
        ));
        // Another scope's key, even one that starts the same.
        assert!(matches!(stored("t", "k"), Resolved::Blocked { .. }));
        assert!(matches!(
            view.resolve_stored("t", CODE, "tt/k", || 0),
            Resolved::Check { .. }
        ));
        assert!(matches!(
            view.resolve_stored("t", CODE, "t/kk", || 0),
            Resolved::Check { .. }
        ));
    }
}
