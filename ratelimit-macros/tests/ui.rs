//! Compile-time behaviour of `#[rate_limit]`: what must compile, and the exact diagnostics of
//! what must not. It lives in this crate so that trybuild builds its cases against this
//! crate's few dev-dependencies, not against every dependency of the `tests` crate. The
//! `.stderr` snapshots are rustc 1.95's wording (rustc's own notes change between releases):
//! after a toolchain upgrade, regenerate them with
//! `TRYBUILD=overwrite cargo test -p ratelimit-macros --test ui` and review the diff.
//!
//! The cases are grouped by argument, in tokio's style: each `tests/ui/fail/<argument>.rs`
//! holds several mistakes, one function each, and each gives exactly one error, at its
//! offending token (the attribute still emits the function when its arguments are wrong, so the
//! rest of the file compiles on; rustc reports the attribute's errors and the type errors of
//! the other functions together). `unused_fn_is_dead_code.rs` stays alone: lints run only when
//! nothing else failed. `tests/ui/pass/` groups the cases that compile the same as modules of
//! one file, and keeps apart those that need the crate root (crate-level lint levels, shadowed
//! primitives, a `crate::` path).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/fail/*.rs");
}
