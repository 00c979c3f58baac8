//! Strict decimal integer parsing, as Redis's `string2ll` does it.
//!
//! Redis accepts a length or count only in canonical form: an optional `-`, then either
//! the single digit `0` or a digit `1`-`9` followed by digits, at most 20 bytes, within
//! the range of `i64`. No `+`, no spaces, no leading zeros, no `-0`. Both the request
//! parser and the value decoder use this so that what they accept matches Redis.
//!
//! Invariant: never panics, whatever the input.

#![deny(clippy::indexing_slicing)]

/// The longest text `string2ll` accepts is one byte shorter than this (`LONG_STR_SIZE`).
const LONG_STR_SIZE: usize = 21;

/// Parses `s` as Redis's `string2ll` does, or returns `None` if Redis would reject it.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= LONG_STR_SIZE {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    let (&first, rest) = digits.split_first()?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = u64::from(first - b'0');
    for &b in rest {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(v)
    } else {
        i64::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::parse_i64;

    #[test]
    fn accepts_canonical_integers() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"7"), Some(7));
        assert_eq!(parse_i64(b"-7"), Some(-7));
        assert_eq!(parse_i64(b"1234567890"), Some(1_234_567_890));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
    }

    #[test]
    fn rejects_what_redis_rejects() {
        for s in [
            &b""[..],
            b"-",
            b"+1",
            b"-0",
            b"00",
            b"01",
            b" 1",
            b"1 ",
            b"1a",
            b"abc",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"000000000000000000001",
        ] {
            assert_eq!(parse_i64(s), None, "{:?}", s.escape_ascii().to_string());
        }
    }

    #[test]
    fn agrees_with_std_on_canonical_text() {
        for v in [
            i64::MIN,
            i64::MIN + 1,
            -1_000_000,
            -1,
            0,
            1,
            42,
            i64::MAX - 1,
            i64::MAX,
        ] {
            assert_eq!(parse_i64(v.to_string().as_bytes()), Some(v));
        }
    }
}
