//! What several modules share: the HTTP end-to-end modules' (`http_axum`, `http_actix`,
//! `router_layer`) servers and clients, and where a module's functions are written.

pub mod hello;
pub mod http;

/// The line (from 1) of `async fn <name>(` at the start of a line of `source` (a module's
/// text, `include_str!` of its file): where `#[rate_limit]` says its limit is declared.
///
/// # Panics
///
/// When `source` has no such line.
pub fn line_of_fn(source: &str, name: &str) -> u32 {
    let needle = format!("async fn {name}(");
    let index = source
        .lines()
        .position(|line| line.starts_with(&needle))
        .unwrap_or_else(|| panic!("no `{needle}` in the module"));
    u32::try_from(index + 1).expect("a line number")
}
