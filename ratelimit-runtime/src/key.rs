//! A check's key: borrowed from the caller, or owned (the attribute's and the layer's
//! `E(scope)/E(key)`, built per call by `__private::scoped_key`; see `crate::layout`).

use std::borrow::Cow;

/// The key a check is made for, as the stores see it (before the Redis key prefix).
pub(crate) type Key<'a> = Cow<'a, str>;

/// A random key for a keyed hash of keys (the in-process store's tables, the deny cache),
/// so that a client cannot choose keys that collide: from the OS, else from std's own
/// per-process random keys (which `RandomState` draws from the OS too, once).
pub(crate) fn random_hash_key() -> [u8; 16] {
    let mut key = [0; 16];
    if getrandom::fill(&mut key).is_err() {
        use std::hash::BuildHasher;
        let state = std::collections::hash_map::RandomState::new();
        key[..8].copy_from_slice(&state.hash_one(0_u8).to_le_bytes());
        key[8..].copy_from_slice(&state.hash_one(1_u8).to_le_bytes());
    }
    key
}
