//! A change of the registry is logged at info with its source, scope and what changed; the
//! keys of overrides appear at debug level only; a scope within a typo of an attribute's is
//! logged at warn, naming the scope it likely meant. One test in its own binary: a subscriber set
//! for one thread does not see callsites that other threads, without one, have cached as
//! disabled.

use ratelimit_runtime::{Limiter, Limits, Mode, Override, RateLimitError, ScopeLimits, rate_limit};
use tests::journal::Journal;

#[rate_limit(name = "login", period = 60, threshold = 5)]
async fn login() -> Result<(), RateLimitError> {
    Ok(())
}

#[test]
fn changes_are_logged_at_info_without_keys() {
    let journal = Journal::default();
    let _guard = tracing::subscriber::set_default(journal.clone());
    let limiter = Limiter::memory();
    let entry = ScopeLimits::new()
        .mode(Mode::Shadow)
        .key("user-secret-42", Override::block());
    limiter
        .set_limits(Limits::new().scope("login", entry))
        .expect("limits accepted");
    limiter.set_mode(Mode::Off);
    let lines = journal.lines();
    let logged = |words: &[&str]| {
        lines
            .iter()
            .any(|line| line.starts_with("INFO") && words.iter().all(|word| line.contains(word)))
    };
    assert!(
        logged(&[
            "mode changed",
            "source=\"api\"",
            "scope=\"login\"",
            "from=Enforce",
            "to=Shadow"
        ]) || logged(&[
            "mode changed",
            "source=\"api\"",
            "scope=\"login\"",
            "shadow"
        ]),
        "{lines:#?}"
    );
    assert!(
        logged(&["overrides in force changed", "scope=\"login\"", "to=1"]),
        "{lines:#?}"
    );
    assert!(logged(&["limiter's mode changed", "off"]), "{lines:#?}");
    assert!(
        lines.iter().all(|line| !line.contains("user-secret-42")),
        "a key logged above debug: {lines:#?}"
    );

    // A scope a typo away from the attribute's, and one far from any (a hand check's, most
    // likely): only the first is warned about.
    let _ = login;
    let typo = ScopeLimits::new().mode(Mode::Off);
    limiter
        .set_limits(
            Limits::new()
                .scope("logn", typo.clone())
                .scope("exports-by-hand", typo),
        )
        .expect("limits accepted");
    let lines = journal.lines();
    let warned: Vec<_> = lines
        .iter()
        .filter(|line| line.starts_with("WARN"))
        .collect();
    assert!(
        warned.len() == 1
            && warned[0].contains("scope=\"logn\"")
            && warned[0].contains("meant=\"login\""),
        "{lines:#?}"
    );
}
