//! Lock names as S3 keys and SSM parameter names: a reversible encoding that
//! makes any lock name one path segment of safe characters, and the owner
//! hash that names an owner's marker folder.

use sha2::{Digest, Sha256};

/// Letters, digits and `-` stay; every other byte of the UTF-8 name becomes
/// `_` and two upper-case hex digits. The result holds only `A-Za-z0-9_-`
/// (valid in S3 keys and SSM names alike), never `/` or `.`, so a lock is one
/// level below its prefix and cannot collide with the `.owners` folder.
pub fn encode_name(name: &str) -> String {
    let mut encoded = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("_{byte:02X}"));
        }
    }
    encoded
}

/// The inverse of [`encode_name`]; `None` for text it never produces.
pub fn decode_name(encoded: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut rest = encoded.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'_' {
            let hex = tail.get(..2)?;
            if !hex
                .iter()
                .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(b))
            {
                return None;
            }
            let byte = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            // Kept characters are never escaped: one encoding per name.
            if byte.is_ascii_alphanumeric() || byte == b'-' {
                return None;
            }
            bytes.push(byte);
            rest = &tail[2..];
        } else if first.is_ascii_alphanumeric() || first == b'-' {
            bytes.push(first);
            rest = tail;
        } else {
            return None;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The length of [`owner_hash`].
pub const OWNER_HASH_DIGITS: usize = 32;

/// The folder of an owner's markers: 32 hex digits of SHA-256(owner). Owners
/// (execution ARNs, up to 2048 bytes) are too long and too free for a path
/// segment; 128 bits make a collision a non-event, and a collision would only
/// cost the sweep an owner-checked release that answers `not_held`.
pub fn owner_hash(owner: &str) -> String {
    let digest = Sha256::digest(owner.as_bytes());
    digest[..OWNER_HASH_DIGITS / 2]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_stay_one_safe_segment() {
        for name in [
            "nightly-etl",
            "customer/42",
            "with space",
            "dots.and_underscores",
            "ünïcödé ✓ 锁",
            "_41",
            ".owners",
            &"/".repeat(1024),
        ] {
            let encoded = encode_name(name);
            assert!(
                encoded
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
                "{encoded}"
            );
            assert_eq!(decode_name(&encoded).as_deref(), Some(name));
        }
        assert_eq!(encode_name("a/b c"), "a_2Fb_20c");
    }

    #[test]
    fn text_the_encoding_never_produces_is_refused() {
        for bad in ["a/b", "_4", "_zz", "_41", "a.b", "_C3"] {
            assert_eq!(decode_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn owner_hash_is_32_hex_digits_and_stable() {
        let hash = owner_hash("arn:aws:states:eu-west-1:1:execution:m:run");
        assert_eq!(hash.len(), 32);
        assert!(hash.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(
            hash,
            owner_hash("arn:aws:states:eu-west-1:1:execution:m:run")
        );
        assert_ne!(
            hash,
            owner_hash("arn:aws:states:eu-west-1:1:execution:m:run2")
        );
    }
}
