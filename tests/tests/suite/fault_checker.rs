//! The fault checker at CI size (`tests::checker`): one server behind a fault proxy, a
//! 3-master cluster without replicas, then a Sentinel deployment, 15 s of traffic and faults
//! each. The seed is
//! `RATELIMIT_CHECKER_SEED`, or drawn and printed; a failure prints the command that replays
//! it. The full-size run is the `fault_checker` binary:
//! `cargo run --release -p tests --bin fault_checker -- --seconds 600 [--seed N]`.

use std::time::Duration;

use tests::checker::{self, Config, Topology};

// One deployment under traffic at a time, across the suite (see `main.rs`).
use crate::ONE_AT_A_TIME;

/// Traffic per topology.
const TRAFFIC: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_limit_admits_above_its_threshold_under_faults() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let seed = checker::seed_from_env();
    eprintln!(
        "fault checker seed {seed} (set {} to replay)",
        checker::SEED_VARIABLE
    );
    let report = checker::run(Config {
        seed,
        traffic: TRAFFIC,
        full: false,
        topologies: Topology::ALL.to_vec(),
        replay: format!(
            "{}={seed} cargo test -p tests --test suite -- \
             fault_checker::no_limit_admits_above_its_threshold_under_faults",
            checker::SEED_VARIABLE
        ),
    })
    .await;
    eprintln!("{report}");
    report.assert_clean();
}

/// A counter check (several-limits path, cost 5) stalled past the timeout is refunded in the
/// background once the stall ends: the refund must not take back what the check never added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_counter_check_is_not_refunded_into_an_over_full_window() {
    let report = checker::stalled_counter_refund(Config {
        seed: 0,
        traffic: Duration::ZERO,
        full: false,
        topologies: vec![Topology::Single],
        replay: "cargo test -p tests --test suite -- \
                 fault_checker::a_stalled_counter_check_is_not_refunded_into_an_over_full_window"
            .to_owned(),
    })
    .await;
    eprintln!("{report}");
    report.assert_clean();
}

/// A seed that found, on the single server, each of the crossings issue 34 fixed, on the code
/// before the fixes: two default-scoped axum layers sharing one log, a reset deleting the
/// reserve another limiter spent (`lease:log`, `lease:ctr`), and a `reset_scope` cancelled
/// after its delete while its limiter held a lease (`chk.solo`). A seed fixes the operations
/// and the faults' schedule, not the threads' timing: a replay interleaves as it comes.
const REGRESSION_SEED: u64 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_that_found_the_crossings_finds_none() {
    let _alone = ONE_AT_A_TIME.lock().await;
    let report = checker::run(Config {
        seed: REGRESSION_SEED,
        traffic: TRAFFIC,
        full: false,
        topologies: vec![Topology::Single],
        replay: "cargo test -p tests --test suite -- \
                 fault_checker::the_seed_that_found_the_crossings_finds_none"
            .to_owned(),
    })
    .await;
    eprintln!("{report}");
    report.assert_clean();
}
