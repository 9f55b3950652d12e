//! [`Shared`]: what every clone of a limiter shares, and every check reads.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::deny_cache::DenyCache;
use super::lease::Leases;
use super::slot_table::Slots;
use crate::health::Health;
use crate::policy::FailurePolicy;
use crate::registry::redis::Follower;
use crate::registry::{Mode, Registry};
use crate::store::Store;
use crate::store::memory::MemoryStore;
use crate::store::redis::RedisStore;
use crate::testing::ManualClock;

/// A limiter's state, behind the `Arc` its clones share.
pub(crate) struct Shared {
    /// Where the logs are kept.
    pub(crate) store: Store,
    /// What a check answers when the store cannot.
    pub(crate) policy: FailurePolicy,
    /// The in-process store that [`FailurePolicy::Local`] falls back on.
    pub(crate) fallback: MemoryStore,
    /// The store's circuit breakers, outage log and policy-answer count.
    pub(crate) health: Health,
    /// Set once a key was found holding something other than a sorted set (logged once).
    pub(crate) foreign_key_seen: AtomicBool,
    /// Set once Redis refused a check with an error reply that is not an outage (`OOM`,
    /// `NOPERM`; logged once).
    pub(crate) refusal_seen: AtomicBool,
    /// The clock every check without an explicit time is checked at; `None`: the wall clock
    /// (in process) or the Redis server's.
    pub(crate) clock: Option<ManualClock>,
    /// The limits operators change while the process runs, and the limiter's mode: in shadow
    /// mode every limit is a shadow one, whose denials are reported and answered as
    /// admissions that would have been denied; off, nothing is checked.
    pub(crate) registry: Arc<Registry>,
    /// The full-window denials a remote store gave (`None`: in process, or switched off).
    pub(crate) deny_cache: Option<DenyCache>,
    /// The quota leases of leased rates (a remote store's only).
    pub(crate) leases: Leases,
    /// What this limiter knows of the limits shared through Redis, when it follows them
    /// ([`LimiterBuilder::shared_limits`](crate::LimiterBuilder::shared_limits)).
    pub(crate) follower: Option<Follower>,
    /// The slots this limiter's calls hold in a remote store under concurrency limits,
    /// renewed while their calls run.
    pub(crate) slots: Slots,
}

impl Shared {
    /// The state of a limiter on `store`, answering by `policy` when it cannot (falling back
    /// on `fallback` under [`FailurePolicy::Local`]).
    pub(crate) fn new(
        store: Store,
        policy: FailurePolicy,
        fallback: MemoryStore,
        clock: Option<ManualClock>,
        shadow: bool,
        deny_cache: Option<DenyCache>,
    ) -> Shared {
        let leases = Leases::new(deny_cache.as_ref().map(DenyCache::ttl));
        Shared {
            health: Health::new(store.parts()),
            store,
            policy,
            fallback,
            foreign_key_seen: AtomicBool::new(false),
            refusal_seen: AtomicBool::new(false),
            clock,
            registry: Arc::new(Registry::new(if shadow {
                Mode::Shadow
            } else {
                Mode::Enforce
            })),
            deny_cache,
            leases,
            follower: None,
            slots: Slots::new(),
        }
    }

    /// The parts the thread following the shared limits uses (`registry::redis::follow`):
    /// `None` unless the limiter follows them on Redis.
    pub(crate) fn following(&self) -> Option<(&Registry, &Follower, &RedisStore)> {
        match (&self.store, &self.follower) {
            (Store::Redis(store), Some(follower)) => Some((&self.registry, follower, store)),
            _ => None,
        }
    }

    /// Ends what checks kept under the limits before a change of the registry: every lease
    /// (nothing more is spent from a reserve installed so far, and its timer, woken now, gives
    /// the rest back) and every denial the deny cache or a lease remembers. All of them, not
    /// the changed scopes' only: a key names its scope in several forms, changes are rare,
    /// and a hot key's lease is renewed within a second anyway. Both were made under one
    /// rate, which a check against another never uses: this keeps a reserve from holding a
    /// lowered threshold back, and either from answering again should the rate come back.
    /// (A renewal on its way installs its lease afterwards, made under the rate its check
    /// resolved: exact under that rate, as any lease.)
    pub(crate) fn limits_changed(&self) {
        if let Some(cache) = &self.deny_cache {
            cache.clear();
        }
        self.leases.end_all();
    }

    /// Whether the limiter is in shadow mode now.
    #[inline]
    pub(crate) fn shadow(&self) -> bool {
        self.registry.is_mode(Mode::Shadow)
    }

    /// Whether the limiter is off now: every check admitted without one.
    #[inline]
    pub(crate) fn off(&self) -> bool {
        self.registry.is_mode(Mode::Off)
    }

    /// The policy that answers a check the store could not: the limiter's, except in shadow
    /// mode, which never fails a call: `Closed` answers as `Open` there (admitted, recording
    /// nothing).
    #[inline]
    pub(crate) fn answering_policy(&self) -> FailurePolicy {
        match self.policy {
            FailurePolicy::Closed if self.shadow() => FailurePolicy::Open,
            policy => policy,
        }
    }

    /// The time of a check: `at` when given, else the manual clock's, if any (µs since the
    /// Unix epoch; `None`: the store's own clock).
    #[inline]
    pub(crate) fn time_of(&self, at: Option<u64>) -> Option<u64> {
        match (&self.clock, at) {
            (Some(clock), None) => Some(clock.now_us()),
            (_, at) => at,
        }
    }

    /// The time now by the limiter's clock (µs since the Unix epoch): its manual clock's, or
    /// the wall clock (a Redis check's own time is the server's; a registry override's expiry
    /// is read here).
    pub(crate) fn now_us(&self) -> u64 {
        self.time_of(None).unwrap_or_else(crate::clock::now_us)
    }

    /// Drops the deny cache's entries of `keys`, once their windows changed (a reset, a
    /// refund).
    pub(crate) fn forget_denials<'k>(&self, keys: impl IntoIterator<Item = &'k str>) {
        if let Some(cache) = &self.deny_cache {
            keys.into_iter().for_each(|key| {
                cache.forget(key);
                self.leases.forget_denials(key);
            });
        }
    }
}
