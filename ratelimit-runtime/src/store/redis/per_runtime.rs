//! What the Redis store keeps for each runtime that checks through it, in one table: the
//! runtime's connection (whose driver task lives on that runtime), the master it reaches (a
//! Sentinel deployment's), and its replacement after a timeout (a cluster's). A runtime's
//! entry is made by its first connection and removed, whole, when the runtime shuts down:
//! a task that waits as long as the store lasts is spawned with the entry, and the runtime
//! drops it as it shuts down, which removes the entry. So the table holds the runtimes that
//! are alive, not every runtime the store served (a limiter outlives the runtimes that use it:
//! one per test, one per worker thread), and a state kept per runtime is a field of the
//! entry, gone with it.
//!
//! Only a connection makes an entry; all else (a connection forgotten, a replacement's start,
//! end and installation, the Sentinel watch) changes an entry that is there and leaves a
//! runtime without one alone. So what happens for a runtime after it shut down (its
//! replacement task dropped after its entry, the watch, a check of another thread that still
//! ends there) makes no entry again; a check that connects on a runtime that is shutting down
//! makes one, with its task, which that runtime drops at once. smol's global executor never
//! shuts down: its one entry lasts as long as the store, without a task.
//!
//! A store dropped before the runtime ends the task: the entry holds the sending end of a
//! channel the task waits on, never sent on, so the task ends when the entry goes with the
//! store (removing nothing: the table is gone). Otherwise a runtime that outlives limiter
//! after limiter (one per request, say) would keep a task, and the table's allocation, for
//! each until it shuts down.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, PoisonError, RwLock, RwLockWriteGuard, Weak};
#[cfg(feature = "cluster")]
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

#[cfg(feature = "sentinel")]
use super::sentinel::Address;
use super::target::{Connected, Connection};
use crate::runtime::{Runtime, RuntimeId};

/// Each runtime's state (see the module docs).
#[derive(Default)]
pub(crate) struct PerRuntime(Arc<Table>);

/// [`PerRuntime`] for the store's background tasks (a cluster connection's replacement, the
/// Sentinel watch), which must not keep it.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
#[derive(Clone)]
pub(crate) struct WeakPerRuntime(Weak<Table>);

type Table = RwLock<HashMap<RuntimeId, State>>;

/// What the store keeps for one runtime.
struct State {
    /// `None` once forgotten, until the next check makes one.
    connection: Option<Connection>,
    /// The master the connection reaches, for a Sentinel deployment's.
    #[cfg(feature = "sentinel")]
    master: Option<Address>,
    /// Its cluster connection's replacements (`None` before the first).
    #[cfg(feature = "cluster")]
    replacement: Option<Replacement>,
    /// The channel the runtime's task waits on, never sent on: dropped with the entry, it
    /// ends the task (`None` on a runtime that never shuts down, which has none).
    _task: Option<oneshot::Sender<()>>,
}

impl PerRuntime {
    /// `id`'s connection, if it has one.
    pub(crate) fn connection(&self, id: RuntimeId) -> Option<Connection> {
        read(&self.0).get(&id)?.connection.clone()
    }

    /// `runtime` is connected: its entry holds `connected` (made now if it had none, with the
    /// task that removes it when the runtime shuts down).
    pub(crate) fn connected(&self, runtime: &Runtime, connected: Connected) {
        let id = runtime.id();
        let made = match write(&self.0).entry(id) {
            Entry::Occupied(mut entry) => {
                let state = entry.get_mut();
                state.connection = Some(connected.connection);
                #[cfg(feature = "sentinel")]
                {
                    state.master = connected.master;
                }
                None
            }
            Entry::Vacant(entry) => {
                let (task, store_gone) = if runtime.shuts_down() {
                    let (task, store_gone) = oneshot::channel();
                    (Some(task), Some(store_gone))
                } else {
                    (None, None)
                };
                entry.insert(State {
                    connection: Some(connected.connection),
                    #[cfg(feature = "sentinel")]
                    master: connected.master,
                    #[cfg(feature = "cluster")]
                    replacement: None,
                    _task: task,
                });
                store_gone
            }
        };
        // Spawned with the lock released: on a runtime that is shutting down the task is
        // dropped at once, and removes the entry.
        if let Some(store_gone) = made {
            runtime.spawn(forget_on_shutdown(id, Arc::downgrade(&self.0), store_gone));
        }
    }

    /// Drops `id`'s connection: its next check makes a new one.
    pub(crate) fn forget(&self, id: RuntimeId) {
        if let Some(state) = write(&self.0).get_mut(&id) {
            state.forget();
        }
    }

    /// A handle that does not keep the table.
    #[cfg(any(feature = "cluster", feature = "sentinel"))]
    pub(crate) fn downgrade(&self) -> WeakPerRuntime {
        WeakPerRuntime(Arc::downgrade(&self.0))
    }
}

impl State {
    fn forget(&mut self) {
        self.connection = None;
        #[cfg(feature = "sentinel")]
        {
            self.master = None;
        }
    }
}

#[cfg(feature = "sentinel")]
impl WeakPerRuntime {
    /// `true` once the store is gone.
    pub(crate) fn is_gone(&self) -> bool {
        self.0.strong_count() == 0
    }

    /// Drops the connections that reach another master than `named` (the sentinels' master):
    /// their next checks connect to it. Returns how many, or `None` once the store is gone.
    pub(crate) fn forget_other_masters(&self, named: &Address) -> Option<usize> {
        let table = self.0.upgrade()?;
        let elsewhere = |state: &State| state.master.as_ref().is_some_and(|at| at != named);
        if !read(&table).values().any(elsewhere) {
            return Some(0);
        }
        let mut forgotten = 0;
        for state in write(&table).values_mut().filter(|state| elsewhere(state)) {
            state.forget();
            forgotten += 1;
        }
        Some(forgotten)
    }
}

fn read(table: &Table) -> std::sync::RwLockReadGuard<'_, HashMap<RuntimeId, State>> {
    table.read().unwrap_or_else(PoisonError::into_inner)
}

fn write(table: &Table) -> RwLockWriteGuard<'_, HashMap<RuntimeId, State>> {
    table.write().unwrap_or_else(PoisonError::into_inner)
}

/// A task that lasts as long as the store: when its runtime shuts down and drops it first,
/// the runtime's entry is removed (its connection's driver task is gone with the runtime).
/// `store_gone` is the entry's channel, which ends when the entry drops with the store.
async fn forget_on_shutdown(id: RuntimeId, table: Weak<Table>, store_gone: oneshot::Receiver<()>) {
    struct Forget(RuntimeId, Weak<Table>);
    impl Drop for Forget {
        fn drop(&mut self) {
            if let Some(table) = self.1.upgrade() {
                write(&table).remove(&self.0);
            }
        }
    }
    let _forget = Forget(id, table);
    let _ = store_gone.await;
}

/// The longest interval between two replacements of a runtime's cluster connection while its
/// checks keep timing out.
#[cfg(feature = "cluster")]
pub(crate) const REPLACEMENT_INTERVAL_MAX: Duration = Duration::from_secs(30);

/// A runtime's replacements of its cluster connection: whether one is under way, when the
/// last began, and the interval before the next may begin: the store's timeout at first, then
/// doubled at each replacement that follows the last within twice the interval, up to
/// [`REPLACEMENT_INTERVAL_MAX`]; back to the timeout after a quiet spell.
#[cfg(feature = "cluster")]
struct Replacement {
    under_way: bool,
    began: Instant,
    interval: Duration,
}

#[cfg(feature = "cluster")]
impl PerRuntime {
    /// Starts a replacement of `id`'s connection unless one is under way, the interval since
    /// the last has not passed, or `id` has no entry (its runtime shut down); `true` when it
    /// started (end it with [`WeakPerRuntime::end_replacement`]).
    pub(crate) fn start_replacement(&self, id: RuntimeId, timeout: Duration) -> bool {
        let now = Instant::now();
        let mut table = write(&self.0);
        let Some(state) = table.get_mut(&id) else {
            return false;
        };
        let Some(last) = &mut state.replacement else {
            state.replacement = Some(Replacement {
                under_way: true,
                began: now,
                interval: timeout,
            });
            return true;
        };
        let since = now.saturating_duration_since(last.began);
        if last.under_way || since < last.interval {
            return false;
        }
        last.interval = if since < last.interval.saturating_mul(2) {
            last.interval
                .saturating_mul(2)
                .min(REPLACEMENT_INTERVAL_MAX)
        } else {
            timeout
        };
        last.under_way = true;
        last.began = now;
        true
    }
}

#[cfg(feature = "cluster")]
impl WeakPerRuntime {
    /// Ends `id`'s replacement (if its entry is still there).
    pub(crate) fn end_replacement(&self, id: RuntimeId) {
        let Some(table) = self.0.upgrade() else {
            return;
        };
        if let Some(Replacement { under_way, .. }) = write(&table)
            .get_mut(&id)
            .and_then(|state| state.replacement.as_mut())
        {
            *under_way = false;
        }
    }

    /// Makes `new` `id`'s connection if it still is `old`; `true` when it did.
    pub(crate) fn replace(&self, id: RuntimeId, old: &Connection, new: Connection) -> bool {
        let Some(table) = self.0.upgrade() else {
            return false;
        };
        let mut table = write(&table);
        match table.get_mut(&id) {
            Some(State {
                connection: Some(current),
                ..
            }) if current.same_as(old) => {
                *current = new;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is done for a runtime without an entry (its runtime shut down): a connection
    /// forgotten, a replacement started or ended, makes no entry.
    #[test]
    fn only_a_connection_makes_an_entry() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let id = runtime.block_on(async { Runtime::current().expect("on a runtime").id() });
        let table = PerRuntime::default();
        table.forget(id);
        #[cfg(feature = "cluster")]
        {
            assert!(!table.start_replacement(id, Duration::from_millis(10)));
            table.downgrade().end_replacement(id);
        }
        assert!(read(&table.0).is_empty());
    }
}
