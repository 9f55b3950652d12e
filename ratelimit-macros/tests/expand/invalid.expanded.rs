// The expansion of the fixture beside this file, pretty-printed; regenerate with
// `RATELIMIT_BLESS=1 cargo test -p ratelimit-macros snapshots` and review the diff.

#[allow(unused_variables)]
async fn f() -> Result<(), AppError> {
    Ok(())
}
::core::compile_error! {
    "`period` must be at least 1 ms"
}
::core::compile_error! {
    "unknown argument `thresold`; did you mean `threshold`?"
}
