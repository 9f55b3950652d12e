//! The fault checker at full size: a 3-master cluster with replicas and failovers, besides
//! the single server behind a fault proxy and the Sentinel deployment; prints the report, and
//! exits non-zero on a violation.
//!
//! `cargo run --release -p tests --bin fault_checker -- --seconds 600 [--seed N]`
//! (`--focused`: only the stalled counter refund scenario).

use std::time::Duration;

use tests::checker::{self, Config, Topology};

fn main() {
    let mut seconds = 600;
    let mut seed = None;
    let mut focused = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => seconds = number(args.next(), "--seconds"),
            "--seed" => seed = Some(number(args.next(), "--seed")),
            "--focused" => focused = true,
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    let seed = seed.unwrap_or_else(checker::seed_from_env);
    println!("fault checker seed {seed}");
    let config = Config {
        seed,
        traffic: Duration::from_secs(seconds),
        full: true,
        topologies: Topology::ALL.to_vec(),
        replay: format!(
            "cargo run --release -p tests --bin fault_checker -- --seconds {seconds} --seed \
             {seed}{}",
            if focused { " --focused" } else { "" }
        ),
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
    eprintln!("{problem}\nusage: fault_checker [--seconds N] [--seed N] [--focused]");
    std::process::exit(2)
}
