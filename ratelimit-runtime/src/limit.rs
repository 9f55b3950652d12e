//! [`Limit`]: one limit of a check, as the stores see it.

use crate::rate::Rate;

/// One limit of a check: a key (before the store's key prefix) checked against a rate. (What
/// a limit is planned to carry too, a cost, an algorithm, a shadow flag, would go here: see
/// the store contract in `store/mod.rs`.) No `Debug`: the key may hold a user identifier.
#[derive(Clone, Copy)]
pub(crate) struct Limit<'a> {
    pub(crate) key: &'a str,
    pub(crate) rate: Rate,
}
