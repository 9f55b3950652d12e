//! The fault checker at full size: a 3-master cluster with replicas and failovers, besides
//! the single server behind a fault proxy and the Sentinel deployment; prints the report, and
//! exits non-zero on a violation.
//!
//! `cargo run --release -p tests --bin fault_checker -- --seconds 600 [--seed N]`
//! (`--focused`: only the stalled counter refund scenario; `--ci-size`: the suite's
//! deployments, without the cluster's replicas and failovers, to replay a CI seed faster;
//! `--topology single|cluster|sentinel`: that one alone, as many times as given).

use std::time::Duration;

use tests::checker::{self, Config, Topology};

fn main() {
    let mut seconds = 600;
    let mut seed = None;
    let mut focused = false;
    let mut full = true;
    let mut topologies = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => seconds = number(args.next(), "--seconds"),
            "--seed" => seed = Some(number(args.next(), "--seed")),
            "--focused" => focused = true,
            "--ci-size" => full = false,
            "--topology" => topologies.push(match args.next().as_deref() {
                Some("single") => Topology::Single,
                Some("cluster") => Topology::Cluster,
                Some("sentinel") => Topology::Sentinel,
                _ => usage("--topology takes single, cluster or sentinel"),
            }),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let seed = seed.unwrap_or_else(checker::seed_from_env);
    println!("fault checker seed {seed}");
    let replay: Vec<String> = std::env::args().skip(1).collect();
    let replay = replay
        .iter()
        .position(|arg| arg == "--seed")
        .map_or(replay.join(" ") + &format!(" --seed {seed}"), |_| {
            replay.join(" ")
        });
    if topologies.is_empty() {
        topologies = Topology::ALL.to_vec();
    }
    let config = Config {
        seed,
        traffic: Duration::from_secs(seconds),
        full,
        topologies,
        replay: format!("cargo run --release -p tests --bin fault_checker -- {replay}"),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let report = runtime.block_on(async {
        if focused {
            checker::stalled_counter_refund(config).await
        } else {
            checker::run(config).await
        }
    });
    println!("{report}");
    if report.violations() > 0 {
        eprintln!(
            "{} violation(s) with seed {seed}; replay: {}",
            report.violations(),
            report.config.replay
        );
        std::process::exit(1);
    }
}

fn number(value: Option<String>, name: &str) -> u64 {
    value
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| usage(&format!("{name} takes a number")))
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "{problem}\nusage: fault_checker [--seconds N] [--seed N] [--focused] [--ci-size] \
         [--topology single|cluster|sentinel]..."
    );
    std::process::exit(2)
}
