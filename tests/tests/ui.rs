//! Compile-time behaviour of `#[rate_limit]`: what must compile, and the exact diagnostics of
//! what must not. The `.stderr` snapshots are rustc 1.95's wording (rustc's own notes change
//! between releases): after a toolchain upgrade, regenerate them with
//! `TRYBUILD=overwrite cargo test -p tests --test ui` and review the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
