//! A value's on-disk form: what a full-value log record holds.
//!
//! ```text
//! | tag (1 B) | body |
//! string  0x01  the bytes
//! list    0x02  count (LEB128), then count × (len LEB128, bytes)
//! hash    0x03  count, then count × (field, value), each (len, bytes)
//! set     0x04  count, then count × (len, bytes)
//! zset    0x05  count, then count × (len, bytes, score f64 little-endian), in order
//! ```
//!
//! Encodings are not stored: a value read back takes the encoding Redis would give it
//! when loading a snapshot (an integer-looking string becomes "int", a small hash a
//! "listpack"...), under the thresholds in force.
//!
//! Decoding never panics: any malformed input is an error.
#![deny(clippy::indexing_slicing)]

use crate::EncodingLimits;
use crate::hash::Hash;
use crate::list::{List, NodeLimit};
use crate::set::Set;
use crate::value::{Str, Value, ValueRef};
use crate::zset::ZSet;

pub const TAG_STRING: u8 = 0x01;
pub const TAG_LIST: u8 = 0x02;
pub const TAG_HASH: u8 = 0x03;
pub const TAG_SET: u8 = 0x04;
pub const TAG_ZSET: u8 = 0x05;
/// Never stored: what a cold placeholder would serialize to (see [`encode`]).
pub const TAG_COLD: u8 = 0xc0;

/// A malformed serialized value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("empty value")]
    Empty,
    #[error("unknown value tag {0:#04x}")]
    UnknownTag(u8),
    #[error("value truncated")]
    Truncated,
    #[error("length out of range")]
    BadLength,
    #[error("{0} bytes after the value")]
    Trailing(usize),
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends the serialized form of `value` (a [`Value`] or an entry's
/// [`ValueRef`]) to `out`.
pub fn encode<'a>(value: impl Into<ValueRef<'a>>, out: &mut Vec<u8>) {
    match value.into() {
        ValueRef::Str(s) => s.with_bytes(|b| encode_str(b, out)),
        // A placeholder's bytes are in the store, never serialized from memory:
        // callers read them back first. Should one get here, the tag makes decoding
        // fail loudly rather than store an empty string.
        ValueRef::Cold(_) => {
            debug_assert!(false, "a cold value was serialized");
            out.push(TAG_COLD);
        }
        ValueRef::List(l) => {
            out.push(TAG_LIST);
            put_varint(out, l.len() as u64);
            for item in l.iter() {
                put_bytes(out, item);
            }
        }
        ValueRef::Hash(h) => {
            out.push(TAG_HASH);
            put_varint(out, h.len() as u64);
            for (field, value) in h.iter() {
                put_bytes(out, field);
                put_bytes(out, value);
            }
        }
        ValueRef::Set(set) => {
            out.push(TAG_SET);
            put_varint(out, set.len() as u64);
            for member in set.iter() {
                member.with_bytes(|m| put_bytes(out, m));
            }
        }
        ValueRef::ZSet(z) => {
            out.push(TAG_ZSET);
            put_varint(out, z.len() as u64);
            for (member, score) in z.iter() {
                put_bytes(out, member);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
    }
}

/// The length of the string `bytes` serializes, if it is one that
/// `maxmemory-policy tiered` may keep out of memory ([`crate::ValueRef::is_tierable`]):
/// too long to live inside an entry (and so never an integer).
pub fn tierable_string_len(bytes: &[u8]) -> Option<usize> {
    match bytes.split_first() {
        Some((&TAG_STRING, body)) if body.len() > crate::compact::INLINE_CAPACITY => {
            Some(body.len())
        }
        _ => None,
    }
}

/// The serialized form of `value` (a [`Value`] or an entry's [`ValueRef`]).
pub fn to_vec<'a>(value: impl Into<ValueRef<'a>>) -> Vec<u8> {
    match value.into() {
        // A string (most records) in one exact allocation, not grown from its tag.
        ValueRef::Str(s) => s.with_bytes(|b| {
            let mut out = Vec::with_capacity(1 + b.len());
            encode_str(b, &mut out);
            out
        }),
        value => {
            let mut out = Vec::new();
            encode(value, &mut out);
            out
        }
    }
}

/// A string's serialized form: its tag, then its bytes.
fn encode_str(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(TAG_STRING);
    out.extend_from_slice(bytes);
}

/// A cursor over serialized bytes.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.buf.split_first().ok_or(DecodeError::Truncated)?;
            self.buf = rest;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError::BadLength)
    }

    /// A count of items, each at least `min_item` bytes: bounded by what is left, so
    /// a corrupt count cannot make the decoder reserve memory it will never fill.
    fn count(&mut self, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| DecodeError::BadLength)?;
        if n.saturating_mul(min_item) > self.buf.len() {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(self.varint()?).map_err(|_| DecodeError::BadLength)?;
        if len > self.buf.len() {
            return Err(DecodeError::Truncated);
        }
        let (b, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(b)
    }

    fn f64(&mut self) -> Result<f64, DecodeError> {
        let Some((b, rest)) = self.buf.split_first_chunk::<8>() else {
            return Err(DecodeError::Truncated);
        };
        self.buf = rest;
        Ok(f64::from_le_bytes(*b))
    }

    fn finish(self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::Trailing(self.buf.len()))
        }
    }
}

/// Reads a value written by [`encode`], giving it the encoding Redis would under
/// `limits`.
pub fn decode(bytes: &[u8], limits: &EncodingLimits) -> Result<Value, DecodeError> {
    let (&tag, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
    let mut r = Reader { buf: body };
    let value = match tag {
        TAG_STRING => return Ok(Value::Str(Str::new(body))),
        TAG_LIST => {
            let n = r.count(1)?;
            let mut list = List::new(NodeLimit::from_config(limits.list_max_listpack_size));
            for _ in 0..n {
                list.push_back(r.bytes()?);
            }
            Value::List(Box::new(list))
        }
        TAG_HASH => {
            let n = r.count(2)?;
            let mut hash = Hash::new();
            for _ in 0..n {
                let field = r.bytes()?;
                let value = r.bytes()?;
                hash.insert(field, value, limits);
            }
            Value::Hash(hash)
        }
        TAG_SET => {
            let n = r.count(1)?;
            let mut set: Option<Set> = None;
            for _ in 0..n {
                let member = r.bytes()?;
                set.get_or_insert_with(|| Set::for_member(member))
                    .insert(member, limits);
            }
            Value::Set(set.unwrap_or_default())
        }
        TAG_ZSET => {
            let n = r.count(9)?;
            let mut pairs = Vec::with_capacity(n);
            for _ in 0..n {
                let member = r.bytes()?.to_vec();
                let score = r.f64()?;
                if score.is_nan() {
                    return Err(DecodeError::BadLength);
                }
                pairs.push((member, score));
            }
            Value::ZSet(ZSet::from_sorted(pairs, limits))
        }
        other => return Err(DecodeError::UnknownTag(other)),
    };
    r.finish()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(v: &Value) -> Value {
        decode(&to_vec(v), &EncodingLimits::default()).expect("decodes")
    }

    /// `to_vec`'s shortcut for strings writes what `encode` writes.
    #[test]
    fn a_string_serializes_the_same_either_way() {
        for s in [&b""[..], b"x", b"12345", b"-0", &[0xff; 100], &[b'a'; 40]] {
            let v = Value::Str(Str::new(s));
            let mut encoded = Vec::new();
            encode(&v, &mut encoded);
            assert_eq!(to_vec(&v), encoded);
            assert_eq!(to_vec(&v).capacity(), 1 + s.len());
        }
    }

    #[test]
    fn strings_lists_and_zsets_round_trip() {
        for s in [&b""[..], b"hello", b"12345", b"-0", &[0xff; 100]] {
            let v = Value::Str(Str::new(s));
            assert_eq!(round_trip(&v), v);
        }
        let list = List::from_items(NodeLimit::from_config(-2), ["a", "", "c"]);
        let Value::List(back) = round_trip(&Value::List(Box::new(list))) else {
            panic!("a list")
        };
        assert_eq!(back.iter().collect::<Vec<_>>(), [&b"a"[..], b"", b"c"]);
        let z = ZSet::from_sorted(
            vec![(b"a".to_vec(), -1.5), (b"b".to_vec(), 2.0)],
            &EncodingLimits::default(),
        );
        let Value::ZSet(back) = round_trip(&Value::ZSet(z)) else {
            panic!("a zset")
        };
        assert_eq!(
            back.iter()
                .map(|(m, s)| (m.to_vec(), s))
                .collect::<Vec<_>>(),
            [(b"a".to_vec(), -1.5), (b"b".to_vec(), 2.0)]
        );
    }

    #[test]
    fn hashes_and_sets_round_trip_with_redis_encodings() {
        let limits = EncodingLimits::default();
        let mut h = Hash::new();
        h.insert(b"f1", b"v1", &limits);
        h.insert(b"f2", b"", &limits);
        let Value::Hash(back) = round_trip(&Value::Hash(h)) else {
            panic!("a hash")
        };
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            [(&b"f1"[..], &b"v1"[..]), (b"f2", b"")]
        );
        assert_eq!(back.encoding(), "listpack");
        let mut s = Set::for_member(b"3");
        for m in [&b"3"[..], b"1", b"2"] {
            s.insert(m, &limits);
        }
        let Value::Set(back) = round_trip(&Value::Set(s)) else {
            panic!("a set")
        };
        assert_eq!(back.encoding(), "intset");
        assert_eq!(back.len(), 3);
        let mut s = Set::for_member(b"x");
        s.insert(b"x", &limits);
        let Value::Set(back) = round_trip(&Value::Set(s)) else {
            panic!("a set")
        };
        assert_eq!(back.encoding(), "hashtable");
    }

    #[test]
    fn malformed_input_is_an_error() {
        let limits = EncodingLimits::default();
        assert_eq!(decode(b"", &limits), Err(DecodeError::Empty));
        assert_eq!(decode(b"\x09", &limits), Err(DecodeError::UnknownTag(9)));
        assert_eq!(
            decode(b"\x02\xff\xff\xff\xff\x0f", &limits),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            decode(b"\x02\x01\x05ab", &limits),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            decode(b"\x02\x01\x01ab", &limits),
            Err(DecodeError::Trailing(1))
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&bytes, &EncodingLimits::default());
        }
    }
}
