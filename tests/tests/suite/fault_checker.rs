//! The fault checker at CI size (`tests::checker`): one server behind a fault proxy, then a
//! 3-master cluster without replicas, 20 s of traffic and faults each. The seed is
//! `RATELIMIT_CHECKER_SEED`, or drawn and printed; a failure prints the command that replays
//! it. The full-size run is the `fault_checker` binary:
//! `cargo run --release -p tests --bin fault_checker -- --seconds 600 [--seed N]`.

use std::time::Duration;

use tests::checker::{self, Config};

// One deployment under traffic at a time, across the suite (see `main.rs`).
use crate::ONE_AT_A_TIME;

/// Traffic per topology.
const TRAFFIC: Duration = Duration::from_secs(20);

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
        replay: "cargo test -p tests --test suite -- \
                 fault_checker::a_stalled_counter_check_is_not_refunded_into_an_over_full_window"
            .to_owned(),
    })
    .await;
    eprintln!("{report}");
    report.assert_clean();
}
