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
///
/// The nonce is drawn again when the process id changes: a child `fork()`ed after the limiter
/// was built (a pre-forking server) would otherwise name its admissions as its parent does,
/// and a script would take one's admission for the other's resend (counted once).
pub(super) struct MemberSource {
    /// The nonce, drawn in the process `pid` (stored after its nonce: a reader that sees a
    /// process's id sees a nonce drawn in that process).
    nonce: AtomicU64,
    pid: std::sync::atomic::AtomicU32,
    sequence: AtomicU64,
}

/// The length of a member.
const MEMBER_LEN: usize = 22;

/// How far a lease's name moves the first character of an admission's (`A`..=`D`, the top two
/// bits of the nonce) to tell the two apart: to `E`..=`H`.
const LEASE_SHIFT: u8 = 4;

/// The name of one call's admission: the member it is recorded as (at cost 1, alone), or the
/// stem of its members (`<admission>.<j>`, several limits or another cost), by which a refund
/// finds them.
pub(crate) type Admission = [u8; MEMBER_LEN];

impl MemberSource {
    pub(super) fn new() -> MemberSource {
        let pid = std::process::id();
        let nonce = draw_nonce(pid);
        MemberSource {
            nonce: AtomicU64::new(nonce),
            pid: std::sync::atomic::AtomicU32::new(pid),
            sequence: AtomicU64::new(0),
        }
    }

    pub(super) fn next(&self) -> Admission {
        self.next_in(std::process::id())
    }

    /// The next lease's name: as [`next`](MemberSource::next)'s, with its first character, one
    /// of `A` to `D` there, moved four places on to one of `E` to `H`, so that a reset tells a
    /// lease's reserve from any admission (`reset.lua`), the names staying unique.
    pub(super) fn next_lease(&self) -> Admission {
        let mut name = self.next();
        name[0] += LEASE_SHIFT;
        name
    }

    /// The next member of the process `pid`.
    fn next_in(&self, pid: u32) -> Admission {
        let nonce = if self.pid.load(Ordering::Acquire) == pid {
            self.nonce.load(Ordering::Acquire)
        } else {
            // A forked child draws its own nonce. Threads that race here each draw one: any
            // of them is the child's own, and members stay unique whichever a caller reads.
            let nonce = draw_nonce(pid);
            self.nonce.store(nonce, Ordering::Release);
            self.pid.store(pid, Ordering::Release);
            nonce
        };
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        member(nonce, sequence)
    }
}

/// 64 random bits for the process `pid`; without OS randomness, a per-process hash seed of
/// it: still distinct per process.
fn draw_nonce(pid: u32) -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(pid)
    })
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
        // A forked child (another process id) draws a nonce of its own, once; its parent's
        // members are not its own.
        let parent = source.next_in(1);
        let child = source.next_in(2);
        let child_again = source.next_in(2);
        assert_ne!(&parent[..10], &child[..10]);
        assert_eq!(&child[..10], &child_again[..10]);
        // An admission's first character is one of A to D, a lease's one of E to H (what a
        // reset keeps of a log tells them apart by it), the rest alike.
        let lease = source.next_lease();
        assert!(matches!(first[0], b'A'..=b'D'), "{first:?}");
        assert!(matches!(lease[0], b'E'..=b'H'), "{lease:?}");
        assert_eq!(member(u64::MAX, 0)[0], b'D');
        assert_ne!(lease[1..], source.next()[1..]);
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
