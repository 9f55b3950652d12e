//! The integration tests of the `tests` crate, in one binary (as cargo's own test suite): one
//! module per area, so that the dependencies (axum, actix-web, reqwest, rustls, redis, smol)
//! are linked once instead of once per file. Run one area with
//! `cargo test -p tests --test suite -- <module>::`.
//!
//! What stays a binary of its own owns process-wide state, or must be alone in its process:
//! `KEPT_APART.md` lists each with its reason. A module added here must not install anything
//! process-wide (a default limiter, an environment variable, a global `tracing` subscriber or
//! `metrics` recorder): the other modules run in the same process, several tests at a time.

// The allocation tests (`allocations`, `deny_cache`, `memory_bounds`, `per_runtime`) count
// what a call allocates, or by how much it grows the live heap, with this allocator: per
// thread, and only inside `count_allocations` or `heap_growth`, so the other tests, running on
// other threads, are neither counted nor slowed beyond a thread-local read.
#[global_allocator]
static ALLOCATOR: tests::counting_alloc::CountingAllocator =
    tests::counting_alloc::CountingAllocator;

/// One deployment under traffic at a time: a cluster or a Sentinel failover under 50 callers,
/// or the fault checker's topologies, are each about what a 2-core machine serves within the
/// limiters' timeouts. Their own binaries ran them apart; in one process, they share this lock.
pub(crate) static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

mod support;

mod accuracy;
mod allocations;
mod attribute;
mod breakers;
mod cluster;
mod cluster_failover;
mod concurrency;
mod counter;
mod deny_cache;
mod exact_under_faults;
mod fault_checker;
mod faults;
mod grpc;
mod harness;
mod http_actix;
mod http_axum;
mod hygiene;
mod inspect;
mod key_layout;
mod leases;
mod limits_file;
mod lints;
mod manual_clock;
mod memory_bounds;
mod metrics;
mod other_runtimes;
mod outcomes;
mod paths;
mod per_runtime;
mod redis_store;
mod registry;
mod router_layer;
mod semantics;
mod sentinel;
mod several_limits;
mod shadow;
mod shapes;
mod shared_limits;
mod stacked;
mod store_conformance;
mod wait;
