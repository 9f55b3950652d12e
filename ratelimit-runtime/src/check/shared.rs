//! [`Shared`]: what every clone of a limiter shares, and every check reads.

use std::sync::atomic::AtomicBool;

use crate::health::Health;
use crate::policy::FailurePolicy;
use crate::store::Store;
use crate::store::memory::MemoryStore;

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
}

impl Shared {
    /// The state of a limiter on `store`, answering by `policy` when it cannot (falling back
    /// on `fallback` under [`FailurePolicy::Local`]).
    pub(crate) fn new(store: Store, policy: FailurePolicy, fallback: MemoryStore) -> Shared {
        Shared {
            health: Health::new(store.parts()),
            store,
            policy,
            fallback,
            foreign_key_seen: AtomicBool::new(false),
        }
    }
}
