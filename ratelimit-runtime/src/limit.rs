//! [`Limit`]: one limit of a check, as the stores see it.

use crate::rate::Rate;

/// One limit of a check: a key (before the store's key prefix) checked against a rate. What
/// a limit will also carry (a cost, an algorithm, a shadow flag) goes here: see the store
/// contract in `store/mod.rs`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limit<'a> {
    pub(crate) key: &'a str,
    pub(crate) rate: Rate,
}
