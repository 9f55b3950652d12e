//! The limits file (feature `limits-file`), live: in force at `build()`, a bad or missing one a
//! build error; edits in place, replacements by rename, and a Kubernetes ConfigMap's update (a
//! symlink swapped) applied within moments; every bad edit rejected whole, counted, and the
//! limits in force kept (the old rate still applies).
//!
//! Timing: windows are an hour. A change is waited for as a state (the limiter's mode, or the
//! count of rejected changes) within [`APPLIED`]; the times it took are printed, their median
//! with them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ratelimit_runtime::{Limiter, Mode, Rate, RateLimitError, rate_limit};
use tests::wait_for;

/// How long an applied change may take here (the design's is well under a second).
const APPLIED: Duration = Duration::from_secs(3);

#[rate_limit(name = "file.login", period = 3600, threshold = 1, key = user, limiter = limiter)]
async fn login(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// A limit whose tiers are in code: its scope's entry may not set a rate.
#[rate_limit(name = "file.tiered", rate = tier(user), key = user, limiter = limiter)]
async fn tiered(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

fn tier(user: &str) -> Rate {
    let threshold = if user.starts_with("pro-") { 100 } else { 10 };
    Rate::new(threshold, Duration::from_secs(3_600)).expect("a rate")
}

/// A limit whose calls cost 10: no entry may give it a threshold below that.
#[rate_limit(name = "file.bulk", period = 3600, threshold = 100, cost = 10, key = user, limiter = limiter)]
async fn bulk(limiter: &Limiter, user: &str) -> Result<(), RateLimitError> {
    Ok(())
}

/// How many of `n` calls of `user` are admitted.
async fn admits(limiter: &Limiter, user: &str, n: usize) -> usize {
    let mut admitted = 0;
    for _ in 0..n {
        match login(limiter, user).await {
            Ok(()) => admitted += 1,
            Err(RateLimitError::Denied(_)) => {}
            Err(error) => panic!("not a decision: {error}"),
        }
    }
    admitted
}

/// A limits file of `mode` whose `file.login` scope admits `threshold` an hour.
fn limits(mode: &str, threshold: u64) -> String {
    format!(
        "mode = \"{mode}\"\n\n[scopes.\"file.login\"]\nthreshold = {threshold}\nperiod = \"1h\"\n"
    )
}

/// Replaces `path` by a file holding `text`, written beside it then renamed over it (as
/// editors and deploy tools do).
fn replace(path: &Path, text: &str) {
    let next = path.with_extension("toml.new");
    std::fs::write(&next, text).expect("write the new file");
    std::fs::rename(&next, path).expect("rename it over the old one");
}

/// Waits until `limiter`'s mode is `mode`; how long it took.
async fn mode_becomes(limiter: &Limiter, mode: Mode) -> Duration {
    let ((), took) = wait_for("the file's change to apply", APPLIED, async || {
        (limiter.mode() == mode).then_some(())
    })
    .await;
    took
}

/// Waits until `limiter` rejected `count` changes in all.
async fn rejected(limiter: &Limiter, count: u64) {
    wait_for("the bad edit to be rejected", APPLIED, async || {
        (limiter.limits_rejected() >= count).then_some(())
    })
    .await;
    assert_eq!(limiter.limits_rejected(), count);
}

fn limiter_of(path: &Path) -> Limiter {
    Limiter::builder()
        .limits_file(path)
        .build()
        .expect("a limiter with its limits file")
}

#[tokio::test]
async fn the_file_is_in_force_at_build_and_each_replacement_within_moments() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("limits.toml");
    std::fs::write(&path, limits("enforce", 3)).unwrap();
    let limiter = limiter_of(&path);
    assert_eq!(
        admits(&limiter, "ann", 4).await,
        3,
        "the file's 3, not the code's 1"
    );

    let mut took = Vec::new();
    for round in 0..8_u64 {
        // Alternately shadow and enforce, at one more each time: the log is kept.
        let mode = if round % 2 == 0 { "shadow" } else { "enforce" };
        replace(&path, &limits(mode, 4 + round));
        let expected = if round % 2 == 0 {
            Mode::Shadow
        } else {
            Mode::Enforce
        };
        took.push(mode_becomes(&limiter, expected).await);
    }
    // Enforce, at 4 + 7 = 11: ann's log holds 3 (nobody called in the shadow rounds).
    assert_eq!(admits(&limiter, "ann", 10).await, 8);
    took.sort();
    eprintln!(
        "limits file replacements in force after {took:?}; median {:?}",
        took[took.len() / 2]
    );
}

#[tokio::test]
async fn an_edit_in_place_and_a_configmap_update_are_seen() {
    // In place: truncated and written again.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("limits.toml");
    std::fs::write(&path, limits("enforce", 2)).unwrap();
    let limiter = limiter_of(&path);
    std::fs::write(&path, limits("off", 2)).unwrap();
    mode_becomes(&limiter, Mode::Off).await;

    // A ConfigMap's volume: `limits.toml -> ..data/limits.toml`, `..data -> <timestamped dir>`,
    // updated by writing a new directory and renaming a new `..data` link over the old one.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let volume = |name: &str, text: &str| -> PathBuf {
        let data = dir.path().join(name);
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("limits.toml"), text).unwrap();
        data
    };
    volume("..2026_12_05_1", &limits("enforce", 2));
    std::os::unix::fs::symlink("..2026_12_05_1", dir.path().join("..data")).unwrap();
    let path = dir.path().join("limits.toml");
    std::os::unix::fs::symlink("..data/limits.toml", &path).unwrap();
    let limiter = limiter_of(&path);
    assert_eq!(limiter.mode(), Mode::Enforce);
    volume("..2026_12_05_2", &limits("shadow", 2));
    std::os::unix::fs::symlink("..2026_12_05_2", dir.path().join("..data_tmp")).unwrap();
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    mode_becomes(&limiter, Mode::Shadow).await;
}

#[tokio::test]
async fn every_bad_edit_is_rejected_whole_and_the_limits_in_force_stay() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("limits.toml");
    std::fs::write(&path, limits("enforce", 2)).unwrap();
    let limiter = limiter_of(&path);
    let bad = [
        // Does not parse.
        "mode = \"enforce\"\n[scopes.\"file.login\"\nthreshold = 50\n".to_owned(),
        // An unknown field.
        format!("{}limit = 50\n", limits("enforce", 50)),
        // A threshold of 0.
        limits("enforce", 0),
        // A period that is not a duration.
        "[scopes.\"file.login\"]\nthreshold = 50\nperiod = \"an hour\"\n".to_owned(),
        // An expiry that is not a time.
        format!(
            "{}\n[scopes.\"file.login\".keys]\nann = {{ exempt = true, until = \"soon\" }}\n",
            limits("enforce", 50)
        ),
        // Two entries for one scope.
        format!(
            "{}{}",
            limits("enforce", 50),
            "[scopes.\"file.login\"]\nmode = \"off\"\n"
        ),
        // A mode that is not one.
        limits("disabled", 50),
        // A rate over a limit that chooses its rate per call (`rate = expr`).
        format!(
            "{}\n[scopes.\"file.tiered\"]\nthreshold = 50\nperiod = \"1h\"\n",
            limits("enforce", 50)
        ),
        // A threshold below the cost the code writes, a scope's and a key's.
        format!(
            "{}\n[scopes.\"file.bulk\"]\nthreshold = 5\nperiod = \"1h\"\n",
            limits("enforce", 50)
        ),
        format!(
            "{}\n[scopes.\"file.bulk\".keys]\nann = {{ threshold = 9, period = \"1h\" }}\n",
            limits("enforce", 50)
        ),
    ];
    let mut admitted = 0;
    for (count, text) in (1..).zip(&bad) {
        replace(&path, text);
        rejected(&limiter, count).await;
        // The old rate (2) still applies: one call more each round until the log is full.
        admitted += admits(&limiter, "ann", 1).await;
        assert_eq!(admitted, count.min(2) as usize, "after {text:?}");
        assert_eq!(limiter.mode(), Mode::Enforce);
    }
    // A good edit after them applies.
    replace(&path, &limits("off", 2));
    mode_becomes(&limiter, Mode::Off).await;
}

#[test]
fn a_missing_or_bad_file_is_a_build_error_naming_the_file_and_the_line() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("limits.toml");
    let error = Limiter::builder().limits_file(&path).build().unwrap_err();
    let RateLimitError::InvalidConfig(reason) = &error else {
        panic!("{error:?}");
    };
    assert!(
        reason.contains("limits.toml") && reason.contains("cannot read"),
        "{reason}"
    );

    let error = build_error(
        &path,
        "[scopes.a]\nthreshold = 1\nperiod = \"1h\"\n\n[scopes.b]\nthreshold = 0\nperiod = \"1h\"\n",
    );
    // The line of the field at fault.
    let expected = format!("{}:6: scope \"b\": threshold 0", path.display());
    assert!(error.contains(&expected), "{error}");

    // What the code's limits reject: at the line of the rate, naming the attribute's line
    // (that of its function's name), never the key.
    let tiered_line = line_of_fn("tiered");
    let error = build_error(
        &path,
        "[scopes.\"file.tiered\"]\nmode = \"shadow\"\nthreshold = 5\nperiod = \"1h\"\n",
    );
    let expected = format!(
        "{}:3: scope \"file.tiered\": its limit chooses its rate per call (`rate = expr`, {}:{tiered_line})",
        path.display(),
        file!()
    );
    assert!(error.contains(&expected), "{error}");
    let bulk_line = line_of_fn("bulk");
    let error = build_error(
        &path,
        "[scopes.\"file.bulk\".keys]\n\"user-4711\" = { threshold = 9, period = \"1h\" }\n",
    );
    let expected = format!(
        "{}:2: scope \"file.bulk\", the override of the key on this line: threshold 9 is below the cost 10 a call of its limit takes ({}:{bulk_line})",
        path.display(),
        file!()
    );
    assert!(error.contains(&expected), "{error}");
    assert!(!error.contains("4711"), "a key in {error}");

    // Every mistake is named, each at its line, in the file's order.
    let error = build_error(
        &path,
        "mode = \"of\"\n\n[scopes.\"file.bulk\"]\nthreshold = 5\nperiod = \"1h\"\n\n[scopes.\"file.tiered\"]\nthreshold = 50\nperiod = \"1h\"\n",
    );
    let shown = path.display();
    for expected in [
        "3 mistakes:".to_owned(),
        format!("{shown}:1: mode: `of` is not a mode"),
        format!("{shown}:4: scope \"file.bulk\": threshold 5 is below the cost 10"),
        format!("{shown}:8: scope \"file.tiered\": its limit chooses its rate per call"),
    ] {
        assert!(error.contains(&expected), "{expected} in {error}");
    }

    // A misspelt field of an override is named, with the field it meant.
    let error = build_error(
        &path,
        "[scopes.\"file.bulk\".keys]\n\"user-4711\" = { treshold = 90, period = \"1h\" }\n",
    );
    assert!(
        error.contains("unknown field `treshold`: did you mean `threshold`?")
            && !error.contains("4711"),
        "{error}"
    );

    // What the code allows: a mode over `rate = expr`, an override's rate there, a threshold
    // of the cost.
    std::fs::write(
        &path,
        "[scopes.\"file.tiered\"]\nmode = \"shadow\"\n[scopes.\"file.tiered\".keys]\nann = { threshold = 1, period = \"1h\" }\n\n[scopes.\"file.bulk\"]\nthreshold = 10\nperiod = \"1h\"\n",
    )
    .unwrap();
    Limiter::builder()
        .limits_file(&path)
        .build()
        .expect("accepted");
}

/// The line of `async fn <name>(` in this file.
fn line_of_fn(name: &str) -> u32 {
    crate::support::line_of_fn(include_str!("limits_file.rs"), name)
}

/// The build error of a limiter whose limits file at `path` holds `text`.
fn build_error(path: &Path, text: &str) -> String {
    std::fs::write(path, text).expect("write the limits file");
    Limiter::builder()
        .limits_file(path)
        .build()
        .expect_err("a bad limits file")
        .to_string()
}

/// The attributes above are in the catalog, called or not, and their limits are those a file
/// is judged against; each still runs as the code says.
#[tokio::test]
async fn the_file_is_judged_against_limits_declared_before_any_call() {
    let declared = ratelimit_runtime::declared_limits();
    let tiered_limit = declared
        .iter()
        .find(|limit| limit.scope() == "file.tiered")
        .expect("file.tiered in the catalog");
    assert_eq!(tiered_limit.rate(), None);
    let bulk_limit = declared
        .iter()
        .find(|limit| limit.scope() == "file.bulk")
        .expect("file.bulk in the catalog");
    assert_eq!(bulk_limit.cost(), Some(10));
    assert_eq!(bulk_limit.line(), line_of_fn("bulk"));
    let limiter = Limiter::memory();
    tiered(&limiter, "ann").await.expect("admitted");
    bulk(&limiter, "ann").await.expect("admitted");
}

/// A directory that never goes quiet (a file written beside the limits file every few
/// milliseconds) does not keep a change from being read.
#[tokio::test]
async fn a_busy_directory_does_not_hold_a_change_back() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("limits.toml");
    std::fs::write(&path, limits("enforce", 2)).unwrap();
    let limiter = limiter_of(&path);
    let noise = dir.path().join("app.log");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::write(&noise, "a line\n").unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    replace(&path, &limits("shadow", 2));
    mode_becomes(&limiter, Mode::Shadow).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}

/// A limits file that is a symbolic link into another directory: a replacement of its
/// target is seen.
#[tokio::test]
async fn a_link_to_a_file_elsewhere_is_followed() {
    let config = tempfile::tempdir().expect("a temporary directory");
    let app = tempfile::tempdir().expect("a temporary directory");
    let target = config.path().join("limits.toml");
    std::fs::write(&target, limits("enforce", 2)).unwrap();
    let path = app.path().join("limits.toml");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let limiter = limiter_of(&path);
    replace(&target, &limits("off", 2));
    mode_becomes(&limiter, Mode::Off).await;
}

/// The API's entries win over the file's, an expired API override gives the key back to the
/// file's, and `clear_mode` hands the mode back to the file.
#[tokio::test]
async fn the_apis_entries_win_over_the_files_until_they_expire_or_are_cleared() {
    use ratelimit_runtime::testing::ManualClock;
    use ratelimit_runtime::{Limits, Override, ScopeLimits};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("limits.toml");
    let file = format!(
        "{}\n[scopes.\"file.login\".keys]\nmallory = {{ block = true }}\n",
        limits("shadow", 2)
    );
    std::fs::write(&path, file).unwrap();
    let clock = ManualClock::new(tests::at_secs(1_800_000_000.0));
    let limiter = Limiter::builder()
        .clock(clock.clone())
        .limits_file(&path)
        .build()
        .expect("a limiter");
    assert_eq!(limiter.mode(), Mode::Shadow);
    let until = tests::at_secs(1_800_000_010.0);
    limiter
        .set_limits(Limits::new().mode(Mode::Enforce).scope(
            "file.login",
            ScopeLimits::new().key("mallory", Override::exempt().until(until)),
        ))
        .expect("limits accepted");
    assert_eq!(limiter.mode(), Mode::Enforce, "the API's mode wins");
    assert_eq!(admits(&limiter, "mallory", 5).await, 5, "exempt by the API");
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        admits(&limiter, "mallory", 1).await,
        0,
        "blocked by the file again"
    );
    limiter.clear_mode();
    assert_eq!(limiter.mode(), Mode::Shadow, "the file's mode again");
}
