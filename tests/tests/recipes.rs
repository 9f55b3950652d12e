//! README's "Recipes": each block is in `examples/src/recipes/` as written, and each recipe
//! does what its text says (on the embedded default limiter, or one on a manual clock).

use std::time::{Duration, SystemTime};

use examples::recipes::login::{LoginError, login};
use examples::recipes::outbound::Partner;
use examples::recipes::tiers::{Account, Plan, export};
use ratelimit_runtime::Limiter;
use ratelimit_runtime::testing::ManualClock;

fn workspace_file(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate is in the workspace");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_recipe_in_the_readme_is_the_code_that_runs() {
    let readme = workspace_file("README.md");
    let source: String = ["login", "outbound", "tiers"]
        .iter()
        .map(|file| workspace_file(&format!("examples/src/recipes/{file}.rs")))
        .collect();
    let (_, section) = readme
        .split_once("\n## Recipes\n")
        .expect("README.md has a Recipes section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let blocks: Vec<&str> = section
        .split("```rust\n")
        .skip(1)
        .map(|rest| rest.split_once("\n```").expect("a closed block").0)
        .collect();
    assert_eq!(blocks.len(), 4, "login, outbound, tiers, unit test");
    for block in blocks {
        assert!(
            source.contains(&format!("\n{block}\n// [end]")),
            "README's recipe is not in examples/src/recipes/ as written:\n{block}"
        );
    }
}

#[tokio::test]
async fn the_login_recipe_counts_failures_only() {
    for _ in 0..10 {
        assert!(login("192.0.2.1", "ada", "opensesame").await.is_ok());
    }
    for _ in 0..5 {
        let err = login("192.0.2.1", "ada", "guess").await.unwrap_err();
        assert!(matches!(err, LoginError::WrongPassword), "{err:?}");
    }
    let err = login("192.0.2.1", "ada", "opensesame").await.unwrap_err();
    assert!(
        matches!(&err, LoginError::Limited(e) if e.is_denied()),
        "{err:?}"
    );
    assert!(
        login("192.0.2.2", "ada", "opensesame").await.is_ok(),
        "another address"
    );
}

#[tokio::test]
async fn the_partner_client_waits_for_its_second_and_stops_at_its_hour() {
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    let partner = Partner::new(
        Limiter::builder()
            .clock(clock.clone())
            .build()
            .expect("an in-process limiter"),
    );
    let start = clock.now();
    for _ in 0..1_000 {
        partner.fetch("/orders").await.expect("waits for a slot");
    }
    let took = clock.now().duration_since(start).unwrap();
    // 10 a second: the 1,000th call is in the 100th second.
    assert!(
        took >= Duration::from_secs(99) && took < Duration::from_secs(101),
        "{took:?}"
    );
    // The hourly quota is spent, and its slot is an hour away: past the 30 s wait.
    let err = partner.fetch("/orders").await.unwrap_err();
    assert!(err.is_denied(), "{err}");
}

#[tokio::test]
async fn exports_follow_the_plan_cost_rows_and_exempt_staff() {
    let free = Account {
        id: 1,
        plan: Plan::Free,
        staff: false,
    };
    // 10 a day, an export of 2,500 rows costing 3.
    for _ in 0..3 {
        assert!(export(&free, 2_500).await.is_ok());
    }
    assert!(export(&free, 1).await.is_ok(), "cost 1: the 10th unit");
    assert!(export(&free, 1).await.unwrap_err().is_denied());
    // Upgraded: the same day's log, under the larger quota.
    let pro = Account {
        id: 1,
        plan: Plan::Pro,
        staff: false,
    };
    assert!(export(&pro, 1).await.is_ok());
    let staff = Account {
        id: 2,
        plan: Plan::Free,
        staff: true,
    };
    for _ in 0..20 {
        assert!(export(&staff, 10_000).await.is_ok(), "staff are exempt");
    }
}
