//! The README's recipes, one file each, compiled and run here: `tests/tests/recipes.rs`
//! checks that each of README's "Recipes" blocks is in these files as written, and runs them;
//! the unit test at the bottom of `outbound.rs` runs with `cargo test -p examples`.

pub mod login;
pub mod outbound;
pub mod tiers;
