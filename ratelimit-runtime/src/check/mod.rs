//! The path of one check, from the call to its answer, over the state a limiter's clones
//! share ([`Shared`]). It knows nothing of the public limiter above it, which hands it that
//! state, nor of the attribute or the frameworks above.
//!
//! - `deny_cache.rs`: [`DenyCache`]: the full-window denials a remote store gave, answered in
//!   process while they are exact (until the window's first unit frees, or their time to
//!   live ends);
//! - `shared.rs`: [`Shared`]: the store, the failure policy and its fallback, the health, the
//!   deny cache;
//! - `answer.rs`: the answers that need no I/O (the in-process store's; the failure policy's,
//!   when the store is unusable or its circuit breaker is open), and the route of the others;
//! - `remote.rs`: the remote leg: the store's call, with the breakers' and the cluster's
//!   bookkeeping, handed to the runtime when its caller stops waiting;
//! - `future.rs`: [`Checking`], the future of one check;
//! - `all.rs`: a check of several limits (each with its key, rate and cost), all or nothing:
//!   one step in process and on one server, reserve then refund across a cluster's slots;
//! - `lease.rs`: the quota leases of a remote store's hot keys
//!   ([`Rate::leased`](crate::Rate::leased)) a process holds, and why they stay exact;
//! - `leased.rs`: the check of a leased rate: its reserve spent without I/O, or its lease
//!   renewed one check at a time, and given back when it ends;
//! - `inspect.rs`: a key's log outside a check: a look that records nothing (the policy's
//!   when the store fails), and its reset;
//! - `permit.rs`: where a check recorded its call, and the refund that removes it again;
//! - `slot_table.rs`: the table of the slots a limiter's calls hold in a remote store, and
//!   the one thread that renews them and sends their releases;
//! - `slots.rs`: the slots a call holds under concurrency limits, renewed while it runs and
//!   released when it ends.
//!
//! A check's trip: [`Checking`] is polled; on its first poll it converts the explicit time,
//! enters its span and asks `answer.rs` what comes next ([`Next`](answer::Next)): an answer
//! of the in-process store, of the deny cache or of the policy (the check completes on that
//! poll), or the remote leg, which it boxes and polls until the store or the policy answers
//! (the store's answer then settles the deny cache's ticket).

mod all;
mod answer;
mod deny_cache;
mod future;
mod inspect;
mod lease;
mod leased;
mod permit;
mod remote;
mod shared;
mod slot_table;
mod slots;

pub(crate) use self::answer::Registered;
pub(crate) use self::deny_cache::DenyCache;
pub(crate) use self::future::Checking;
pub(crate) use self::permit::Records;
pub(crate) use self::shared::Shared;
pub(crate) use self::slots::Held;
