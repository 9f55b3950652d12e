//! A check's key: borrowed from the caller, or owned (the attribute's and the layer's
//! `scope:key`, built per call by `__private::scoped_key`), and its scope prefix.

use std::borrow::Cow;

/// The key a check is made for, as the stores see it (before the Redis key prefix).
pub(crate) type Key<'a> = Cow<'a, str>;

/// The key of a scoped check without its `scope:` prefix (`None`: it has none, as the key of
/// an attribute without `key`, which is the scope itself).
pub(crate) fn unscoped<'k>(scope: &str, key: &'k str) -> Option<&'k str> {
    key.strip_prefix(scope)?.strip_prefix(':')
}
