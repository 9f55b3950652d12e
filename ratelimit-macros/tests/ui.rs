//! Compile-time behaviour of `#[rate_limit]`: what must compile, and the exact diagnostics of
//! what must not. The `.stderr` snapshots are rustc 1.95's wording (rustc's own notes change
//! between releases): after a toolchain upgrade, regenerate them with
//! `TRYBUILD=overwrite cargo test -p tests --test ui` and review the diff.
//!
//! The cases are grouped by argument, in tokio's style: each `ui/fail/<argument>.rs` holds
//! several mistakes, one function each, and each gives exactly one error, at its offending
//! token (the attribute still emits the function when its arguments are wrong, so the rest of
//! the file compiles on; rustc reports the attribute's errors and the type errors of the other
//! functions together). `unused_fn_is_dead_code.rs` stays alone: lints run only when nothing
//! else failed. `ui/pass/` groups the cases that compile the same as modules of one file, and
//! keeps apart those that need the crate root (crate-level lint levels, shadowed primitives, a
//! `crate::` path).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
