//! Redis Cluster hash slots: the part of a cluster a key belongs to, for the limiter's
//! per-slot circuit breakers.

/// The hash slots of a Redis Cluster.
pub(super) const SLOTS: usize = 16_384;

/// The hash slot of `<prefix><key>`, without joining them unless a `{` makes a hash tag
/// possible.
pub(super) fn key_slot(prefix: &str, key: &str) -> u16 {
    slot_of(&[prefix, key])
}

/// The hash slot of the key made of `parts` one after the other (`<prefix><key><suffix>`),
/// joined only when a `{` makes a hash tag possible.
pub(super) fn slot_of(parts: &[&str]) -> u16 {
    if parts.iter().any(|part| part.contains('{')) {
        return hash_slot(parts.concat().as_bytes());
    }
    let mut crc = crc16::State::<crc16::XMODEM>::new();
    for part in parts {
        crc.update(part.as_bytes());
    }
    crc.get() % 16_384
}

/// A key's hash slot: CRC16 (XMODEM) of its hash tag (the text between the first `{` and the
/// next `}`, when not empty) or of the whole key, modulo 16,384 (Redis Cluster specification,
/// "Keys distribution model"). redis-rs computes the same (`cluster_routing::Slot::for_key`)
/// but does not expose the number.
fn hash_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|&b| b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % 16_384
}

#[cfg(test)]
mod tests {
    use super::{hash_slot, key_slot, slot_of};

    /// Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    #[test]
    fn hash_slots_follow_the_cluster_specification() {
        assert_eq!(hash_slot(b"123456789"), 0x31C3);
        assert_eq!(hash_slot(b"foo"), 12_182);
        assert_eq!(hash_slot(b"{user1000}.following"), hash_slot(b"user1000"));
        // An empty tag hashes the whole key.
        let whole = crc16::State::<crc16::XMODEM>::calculate(b"foo{}{bar}") % 16_384;
        assert_eq!(hash_slot(b"foo{}{bar}"), whole);
        assert_ne!(hash_slot(b"foo{}{bar}"), hash_slot(b"bar"));
        assert_eq!(hash_slot(b"foo{{bar}}zap"), hash_slot(b"{bar"));
    }

    #[test]
    fn slots_of_parts_hash_them_as_one_key() {
        for parts in [
            ["ratelimit:", "app::login/user:1", "#swc"],
            ["p{", "u", "}#swc"],
            ["p:", "#s/{u}@1h", "#swc"],
            ["", "", ""],
        ] {
            assert_eq!(
                slot_of(&parts),
                hash_slot(parts.concat().as_bytes()),
                "{parts:?}"
            );
        }
    }

    #[test]
    fn key_slots_hash_the_prefix_and_the_key_as_one() {
        for (prefix, key) in [
            ("ratelimit:", "user:1"),
            ("", "foo"),
            ("app{", "x}y"),
            ("{tenant}:", "user"),
            ("p:", "{user1000}.following"),
        ] {
            let whole = format!("{prefix}{key}");
            assert_eq!(
                key_slot(prefix, key),
                hash_slot(whole.as_bytes()),
                "{whole}"
            );
        }
    }
}
