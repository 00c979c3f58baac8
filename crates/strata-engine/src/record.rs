//! The record codec: how one put, delete or merge operand is laid out in a segment.
//!
//! A record is a header followed by the key and the value. The first four bytes
//! are a CRC32C (Castagnoli) over every following byte of the record, header
//! included, so a record read back through its location can be verified on its
//! own; byte 4 is the kind and byte 5 the flags, which say how the rest of the
//! header is laid out:
//!
//! - **compact** (what [`encode_into`] writes): the version, the expiry only when
//!   the record has one, then the key's and the value's lengths as varints. A key
//!   and a value under 128 bytes each with no expiry take a 16-byte header, 16
//!   bytes less than a wide one: a record of a 20-byte key and a 17-byte value
//!   takes 53 bytes instead of 69.
//! - **wide**: 32 bytes with every field at a fixed offset. Batch frames use it,
//!   because a frame's header is written before its body's length is known; every
//!   record of a format-version-1 segment has it, and those are still read.
//!
//! A write batch is one *frame*: a header of kind [`Kind::Batch`] whose value
//! is the concatenation of its inner records, and whose checksum covers all of
//! them. Recovery applies a batch only when the whole frame is present and
//! intact, which makes batches atomic across crashes. Inner records keep their
//! own checksums so each can still be read alone through its location.
//!
//! Invariants: decoding never panics and never trusts a length before checking
//! it against the bytes available; a length has exactly one encoding (the
//! shortest); the exact layout is drawn in `docs/storage-format.md`.

#![deny(clippy::indexing_slicing)]

use std::fmt;

use crate::varint;

/// Length of a wide header: a batch frame's, and every record's in a segment of
/// format version 1.
pub const WIDE_HEADER_LEN: usize = 32;

/// The shortest header: compact, with one-byte lengths and no expiry.
pub const MIN_HEADER_LEN: usize = 16;

/// The longest header of either layout (a compact one with an expiry and two
/// five-byte lengths is as long as a wide one).
pub const MAX_HEADER_LEN: usize = 32;

/// The flag of a compact header.
const COMPACT: u8 = 0x01;
/// The flag of a compact header that holds an expiry.
const EXPIRES: u8 = 0x02;

/// Where a compact header's fixed fields end: checksum, kind, flags, version.
const COMPACT_FIXED_LEN: usize = 14;

/// The largest encoded record or batch frame, header included.
///
/// Locations store lengths as `u32`, so no record can be larger.
pub const MAX_RECORD_LEN: u64 = u32::MAX as u64;

/// What a record means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A full value for the key; supersedes every earlier record of the key.
    Put = 1,
    /// A tombstone: the key has no value from here on.
    Delete = 2,
    /// A merge operand: combined with the value before it by the merge operator.
    Merge = 3,
    /// A batch frame: the value holds the batch's inner records.
    Batch = 4,
}

impl Kind {
    /// Decodes a kind byte.
    pub fn from_u8(byte: u8) -> Result<Kind, DecodeError> {
        match byte {
            1 => Ok(Kind::Put),
            2 => Ok(Kind::Delete),
            3 => Ok(Kind::Merge),
            4 => Ok(Kind::Batch),
            other => Err(DecodeError::UnknownKind(other)),
        }
    }
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes are present than the structure needs.
    #[error("truncated: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the structure needs.
        needed: u64,
        /// Bytes present.
        available: u64,
    },
    /// The kind byte is not a known [`Kind`].
    #[error("unknown record kind {0}")]
    UnknownKind(u8),
    /// Reserved header bits are set.
    #[error("reserved header bits are set")]
    Reserved,
    /// The stored checksum does not match the bytes.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The checksum stored in the bytes.
        stored: u32,
        /// The checksum computed over the bytes.
        computed: u32,
    },
    /// A length field is inconsistent with the structure around it.
    #[error("bad length: {0}")]
    Length(&'static str),
    /// A batch frame contains something other than put, delete or merge records.
    #[error("a batch frame may only hold put, delete and merge records")]
    NestedBatch,
    /// A batch frame's record count does not match its body.
    #[error("batch declares {declared} records but holds {found}")]
    BatchCount {
        /// The count in the batch header.
        declared: u64,
        /// The records found in the body.
        found: u64,
    },
    /// A file does not start with the expected magic bytes.
    #[error("bad magic bytes")]
    Magic,
    /// A file has a format version this build does not know.
    #[error("unsupported format version {0}")]
    Version(u32),
    /// A record does not match what the index says is there.
    #[error("record does not match its index entry: {0}")]
    Mismatch(&'static str),
}

/// The decoded header of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The stored checksum.
    pub crc: u32,
    /// What the record means.
    pub kind: Kind,
    /// Length of the header itself: where the key starts.
    pub header_len: u32,
    /// Length of the key.
    pub key_len: u32,
    /// Length of the value (for a batch: of the body of inner records).
    pub value_len: u32,
    /// The caller's version (for a batch: the number of inner records).
    pub version: u64,
    /// Absolute expiry in Unix milliseconds; 0 means never.
    pub expires_at: u64,
}

impl Header {
    /// Decodes the header at the start of `bytes`, which may run on past it.
    ///
    /// Only the header is checked here (kind, flags, reserved bits, lengths); the
    /// checksum needs the whole record, see [`decode`].
    pub fn decode(bytes: &[u8]) -> Result<Header, DecodeError> {
        let Some(&[c0, c1, c2, c3, kind, flags]) = bytes.first_chunk::<6>() else {
            return Err(truncated(6, bytes));
        };
        let crc = u32::from_le_bytes([c0, c1, c2, c3]);
        let kind = Kind::from_u8(kind)?;
        let header = if flags & COMPACT == 0 {
            decode_wide(bytes, crc, kind, flags)?
        } else {
            decode_compact(bytes, crc, kind, flags)?
        };
        if header.kind == Kind::Batch && header.key_len != 0 {
            return Err(DecodeError::Length("a batch frame has no key"));
        }
        if header.total_len() > MAX_RECORD_LEN {
            return Err(DecodeError::Length("record longer than the format allows"));
        }
        Ok(header)
    }

    /// Length of the whole record: header, key and value.
    pub fn total_len(&self) -> u64 {
        u64::from(self.header_len) + u64::from(self.key_len) + u64::from(self.value_len)
    }
}

fn truncated(needed: usize, bytes: &[u8]) -> DecodeError {
    DecodeError::Truncated {
        needed: needed as u64,
        available: bytes.len() as u64,
    }
}

fn decode_wide(bytes: &[u8], crc: u32, kind: Kind, flags: u8) -> Result<Header, DecodeError> {
    let Some(h) = bytes.first_chunk::<WIDE_HEADER_LEN>() else {
        return Err(truncated(WIDE_HEADER_LEN, bytes));
    };
    let [_, _, _, _, _, _, r0, r1, rest @ ..] = *h;
    if flags != 0 || r0 != 0 || r1 != 0 {
        return Err(DecodeError::Reserved);
    }
    let [k0, k1, k2, k3, v0, v1, v2, v3, rest @ ..] = rest;
    let (version, expires) = rest.split_at(8);
    Ok(Header {
        crc,
        kind,
        header_len: WIDE_HEADER_LEN as u32,
        key_len: u32::from_le_bytes([k0, k1, k2, k3]),
        value_len: u32::from_le_bytes([v0, v1, v2, v3]),
        version: u64_le(version),
        expires_at: u64_le(expires),
    })
}

fn decode_compact(bytes: &[u8], crc: u32, kind: Kind, flags: u8) -> Result<Header, DecodeError> {
    // Batch frames are always wide: their header is written before their length is
    // known.
    if flags & !(COMPACT | EXPIRES) != 0 || kind == Kind::Batch {
        return Err(DecodeError::Reserved);
    }
    let version = bytes
        .get(6..COMPACT_FIXED_LEN)
        .ok_or_else(|| truncated(COMPACT_FIXED_LEN, bytes))?;
    let mut at = COMPACT_FIXED_LEN;
    let mut expires_at = 0;
    if flags & EXPIRES != 0 {
        let expiry = bytes
            .get(at..at + 8)
            .ok_or_else(|| truncated(at + 8, bytes))?;
        expires_at = u64_le(expiry);
        if expires_at == 0 {
            return Err(DecodeError::Length("an expiry flagged but absent"));
        }
        at += 8;
    }
    let (key_len, at) = read_len(bytes, at)?;
    let (value_len, at) = read_len(bytes, at)?;
    Ok(Header {
        crc,
        kind,
        header_len: at as u32,
        key_len,
        value_len,
        version: u64_le(version),
        expires_at,
    })
}

/// Reads a record's length at `at`: a varint of at most 32 bits. Returns it and
/// where it ends.
fn read_len(bytes: &[u8], at: usize) -> Result<(u32, usize), DecodeError> {
    let (n, end) = varint::read(bytes, at, 32)?;
    Ok((n as u32, end))
}

fn u64_le(bytes: &[u8]) -> u64 {
    let mut out = [0u8; 8];
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = *b;
    }
    u64::from_le_bytes(out)
}

/// A decoded record borrowing its key and value from the buffer it was read from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// The record's header.
    pub header: Header,
    /// The key (empty for a batch frame).
    pub key: &'a [u8],
    /// The value (for a batch frame: the encoded inner records).
    pub value: &'a [u8],
}

impl fmt::Debug for RecordRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordRef")
            .field("kind", &self.header.kind)
            .field("version", &self.header.version)
            .field("expires_at", &self.header.expires_at)
            .field("key_len", &self.key.len())
            .field("value_len", &self.value.len())
            .finish()
    }
}

/// Decodes one whole record, which must fill `bytes` exactly, and verifies its checksum.
pub fn decode(bytes: &[u8]) -> Result<RecordRef<'_>, DecodeError> {
    let record = decode_unverified(bytes)?;
    let computed = crc32c::crc32c(bytes.get(4..).unwrap_or_default());
    if computed != record.header.crc {
        return Err(DecodeError::Checksum {
            stored: record.header.crc,
            computed,
        });
    }
    Ok(record)
}

/// [`decode`] without the checksum: for the inner records of a batch frame whose
/// own checksum, verified, covers their bytes.
fn decode_unverified(bytes: &[u8]) -> Result<RecordRef<'_>, DecodeError> {
    let header = Header::decode(bytes)?;
    let total = header.total_len();
    if (bytes.len() as u64) < total {
        return Err(DecodeError::Truncated {
            needed: total,
            available: bytes.len() as u64,
        });
    }
    if bytes.len() as u64 > total {
        return Err(DecodeError::Length("bytes follow the record"));
    }
    let body = bytes.get(header.header_len as usize..).unwrap_or_default();
    let (key, value) = body
        .split_at_checked(header.key_len as usize)
        .ok_or(DecodeError::Length("key longer than record"))?;
    Ok(RecordRef { header, key, value })
}

/// Appends a record, with a compact header, to `out` and returns its length.
///
/// The caller has checked the length against [`MAX_RECORD_LEN`] (see
/// [`encoded_len`]); lengths that do not fit are clamped, which the checksum
/// would then reject, so callers must check first.
pub fn encode_into(
    out: &mut Vec<u8>,
    kind: Kind,
    key: &[u8],
    value: &[u8],
    version: u64,
    expires_at: u64,
) -> usize {
    let start = out.len();
    // Built whole and copied once (appending field by field would check the room
    // each time).
    let mut header = [0u8; MAX_HEADER_LEN];
    header[4] = kind as u8;
    header[5] = COMPACT;
    header[6..COMPACT_FIXED_LEN].copy_from_slice(&version.to_le_bytes());
    let mut at = COMPACT_FIXED_LEN;
    if expires_at != 0 {
        header[5] |= EXPIRES;
        header[COMPACT_FIXED_LEN..COMPACT_FIXED_LEN + 8].copy_from_slice(&expires_at.to_le_bytes());
        at += 8;
    }
    at = varint::write(&mut header, at, u64::from(len_u32(key.len())));
    at = varint::write(&mut header, at, u64::from(len_u32(value.len())));
    let header = header.get(..at).unwrap_or_default();
    out.reserve(header.len() + key.len() + value.len());
    out.extend_from_slice(header);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    seal(out, start);
    out.len() - start
}

/// Writes the checksum of the record that starts at `start` and runs to the end of `out`.
pub(crate) fn seal(out: &mut [u8], start: usize) {
    if let Some(record) = out.get_mut(start..) {
        let crc = crc32c::crc32c(record.get(4..).unwrap_or_default());
        if let Some(slot) = record.get_mut(..4) {
            slot.copy_from_slice(&crc.to_le_bytes());
        }
    }
}

/// Appends a batch frame's (wide) header with placeholder checksum; returns where
/// it starts.
///
/// The caller appends the inner records, then calls [`finish_batch`].
pub(crate) fn begin_batch(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, Kind::Batch as u8, 0, 0, 0]);
    out.extend_from_slice(&[0u8; WIDE_HEADER_LEN - 8]);
    start
}

/// Fills in the body length and count of the batch frame at `start`, then seals it.
pub(crate) fn finish_batch(out: &mut [u8], start: usize, count: u64) {
    let body_len = len_u32(out.len().saturating_sub(start + WIDE_HEADER_LEN));
    if let Some(slot) = out.get_mut(start + 12..start + 16) {
        slot.copy_from_slice(&body_len.to_le_bytes());
    }
    if let Some(slot) = out.get_mut(start + 16..start + 24) {
        slot.copy_from_slice(&count.to_le_bytes());
    }
    seal(out, start);
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// The encoded length of a record with this key, value and expiry, as
/// [`encode_into`] writes it.
pub fn encoded_len(key: &[u8], value: &[u8], expires_at: u64) -> u64 {
    let (key_len, value_len) = (key.len() as u64, value.len() as u64);
    let expiry = if expires_at != 0 { 8 } else { 0 };
    COMPACT_FIXED_LEN as u64
        + expiry
        + varint::len(key_len) as u64
        + varint::len(value_len) as u64
        + key_len
        + value_len
}

/// Iterates the inner records of a verified batch frame body.
///
/// Yields each record with its offset relative to the start of the body. Their own
/// checksums are not computed again: the frame's covers every byte of them (a
/// record read later through its location is verified then).
pub fn batch_records(
    body: &[u8],
    declared: u64,
) -> Result<Vec<(usize, RecordRef<'_>)>, DecodeError> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    while offset < body.len() {
        let rest = body.get(offset..).unwrap_or_default();
        let header = Header::decode(rest)?;
        if header.kind == Kind::Batch {
            return Err(DecodeError::NestedBatch);
        }
        let len = usize::try_from(header.total_len())
            .map_err(|_| DecodeError::Length("record longer than memory"))?;
        let bytes = rest.get(..len).ok_or(DecodeError::Truncated {
            needed: len as u64,
            available: rest.len() as u64,
        })?;
        out.push((offset, decode_unverified(bytes)?));
        offset += len;
    }
    if out.len() as u64 != declared {
        return Err(DecodeError::BatchCount {
            declared,
            found: out.len() as u64,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(kind: Kind, key: &[u8], value: &[u8], version: u64, expires: u64) -> Vec<u8> {
        let mut out = Vec::new();
        let len = encode_into(&mut out, kind, key, value, version, expires);
        assert_eq!(len as u64, encoded_len(key, value, expires));
        out
    }

    /// A record with a wide header, as format version 1 wrote every record.
    fn encode_wide(kind: Kind, key: &[u8], value: &[u8], version: u64, expires: u64) -> Vec<u8> {
        let mut out = vec![0u8; WIDE_HEADER_LEN];
        out[4] = kind as u8;
        out[8..12].copy_from_slice(&(key.len() as u32).to_le_bytes());
        out[12..16].copy_from_slice(&(value.len() as u32).to_le_bytes());
        out[16..24].copy_from_slice(&version.to_le_bytes());
        out[24..32].copy_from_slice(&expires.to_le_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        seal(&mut out, 0);
        out
    }

    #[test]
    fn round_trip() {
        let bytes = encode(Kind::Put, b"key", b"value", 7, 99);
        assert_eq!(bytes.len(), MIN_HEADER_LEN + 8 + 8);
        let rec = decode(&bytes).unwrap();
        assert_eq!(rec.header.kind, Kind::Put);
        assert_eq!(rec.header.header_len as usize, MIN_HEADER_LEN + 8);
        assert_eq!(rec.key, b"key");
        assert_eq!(rec.value, b"value");
        assert_eq!(rec.header.version, 7);
        assert_eq!(rec.header.expires_at, 99);
    }

    #[test]
    fn compact_header_layout() {
        let bytes = encode(Kind::Merge, b"k", b"vv", 0x0102, 0);
        assert_eq!(bytes.len(), MIN_HEADER_LEN + 3);
        assert_eq!(bytes[4], 3);
        assert_eq!(bytes[5], COMPACT);
        assert_eq!(&bytes[6..14], &0x0102u64.to_le_bytes());
        assert_eq!(&bytes[14..16], &[1, 2]);
        assert_eq!(&bytes[0..4], &crc32c::crc32c(&bytes[4..]).to_le_bytes());

        let bytes = encode(Kind::Put, b"k", b"", 1, 0x0304);
        assert_eq!(bytes[5], COMPACT | EXPIRES);
        assert_eq!(&bytes[14..22], &0x0304u64.to_le_bytes());
        assert_eq!(&bytes[22..24], &[1, 0]);
    }

    #[test]
    fn lengths_take_the_varint_they_need() {
        for (len, header) in [(127, 16), (128, 17), (16_383, 17), (16_384, 18)] {
            let value = vec![7u8; len];
            let bytes = encode(Kind::Put, b"k", &value, 1, 0);
            let rec = decode(&bytes).unwrap();
            assert_eq!(rec.header.header_len, header, "value of {len} bytes");
            assert_eq!(rec.value, &value[..]);
        }
        let key = vec![1u8; 300];
        let rec_bytes = encode(Kind::Delete, &key, b"", 1, 5);
        let rec = decode(&rec_bytes).unwrap();
        assert_eq!(rec.header.header_len, 14 + 8 + 2 + 1);
        assert_eq!(rec.key, &key[..]);
        for n in [0u64, 1, 127, 128, 16_383, 16_384, u64::from(u32::MAX)] {
            let mut header = [0u8; MAX_HEADER_LEN];
            let end = varint::write(&mut header, 0, n);
            assert_eq!(end, varint::len(n));
            assert_eq!(read_len(&header, 0), Ok((n as u32, end)));
        }
    }

    #[test]
    fn wide_records_still_decode() {
        let bytes = encode_wide(Kind::Put, b"key", b"value", 7, 99);
        let rec = decode(&bytes).unwrap();
        assert_eq!(rec.header.header_len as usize, WIDE_HEADER_LEN);
        assert_eq!((rec.key, rec.value), (&b"key"[..], &b"value"[..]));
        assert_eq!((rec.header.version, rec.header.expires_at), (7, 99));
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        for bytes in [
            encode(Kind::Put, b"key", b"value", 1, 0),
            encode(Kind::Put, b"key", b"value", 1, 1_700_000_000_000),
            encode_wide(Kind::Put, b"key", b"value", 1, 0),
        ] {
            for i in 0..bytes.len() * 8 {
                let mut damaged = bytes.clone();
                damaged[i / 8] ^= 1 << (i % 8);
                assert!(decode(&damaged).is_err(), "bit {i} went unnoticed");
            }
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        for bytes in [
            encode(Kind::Put, b"key", b"value", 1, 0),
            encode(Kind::Put, b"key", b"value", 1, 9),
            encode_wide(Kind::Put, b"key", b"value", 1, 0),
        ] {
            for len in 0..bytes.len() {
                assert!(decode(&bytes[..len]).is_err());
            }
        }
    }

    #[test]
    fn a_header_decodes_from_its_own_bytes() {
        let bytes = encode(Kind::Put, b"key", b"value", 1, 0);
        assert!(Header::decode(&bytes[..MIN_HEADER_LEN]).is_ok());
        assert!(matches!(
            Header::decode(&bytes[..MIN_HEADER_LEN - 1]),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn batch_round_trip() {
        let mut out = Vec::new();
        let start = begin_batch(&mut out);
        encode_into(&mut out, Kind::Put, b"a", b"1", 1, 0);
        encode_into(&mut out, Kind::Delete, b"b", b"", 2, 0);
        finish_batch(&mut out, start, 2);
        let frame = decode(&out).unwrap();
        assert_eq!(frame.header.kind, Kind::Batch);
        assert_eq!(frame.header.header_len as usize, WIDE_HEADER_LEN);
        let inner = batch_records(frame.value, frame.header.version).unwrap();
        assert_eq!(inner.len(), 2);
        assert_eq!(inner[0].0, 0);
        assert_eq!(inner[1].1.key, b"b");
        assert_eq!(inner[1].0, MIN_HEADER_LEN + 2);
    }

    #[test]
    fn batch_count_must_match() {
        let mut out = Vec::new();
        let start = begin_batch(&mut out);
        encode_into(&mut out, Kind::Put, b"a", b"1", 1, 0);
        finish_batch(&mut out, start, 3);
        let frame = decode(&out).unwrap();
        assert!(matches!(
            batch_records(frame.value, frame.header.version),
            Err(DecodeError::BatchCount { .. })
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = Header::decode(&bytes);
            if let Ok(rec) = decode(&bytes) {
                let _ = batch_records(rec.value, rec.header.version);
            }
        }

        #[test]
        fn damaged_records_never_decode_to_something_else(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            expires in proptest::prop_oneof![proptest::strategy::Just(0u64), proptest::prelude::any::<u64>()],
            at in proptest::prelude::any::<usize>(),
            bit in 0u8..8,
        ) {
            let bytes = encode(Kind::Put, &key, &value, 3, expires);
            let mut damaged = bytes.clone();
            let i = at % damaged.len();
            damaged[i] ^= 1 << bit;
            proptest::prop_assert!(decode(&damaged).is_err());
            let rec = decode(&bytes).unwrap();
            proptest::prop_assert_eq!(rec.key, &key[..]);
            proptest::prop_assert_eq!(rec.value, &value[..]);
            proptest::prop_assert_eq!(rec.header.expires_at, expires);
            proptest::prop_assert_eq!(rec.header.version, 3);
        }
    }

    #[test]
    fn unknown_kind_and_reserved_bits_are_rejected() {
        let mut bytes = encode(Kind::Put, b"k", b"v", 1, 0);
        bytes[4] = 9;
        assert_eq!(Header::decode(&bytes), Err(DecodeError::UnknownKind(9)));
        for flags in [COMPACT | 0x04, COMPACT | 0x80, EXPIRES] {
            let mut bytes = encode(Kind::Put, b"k", b"v", 1, 0);
            bytes[5] = flags;
            bytes.resize(WIDE_HEADER_LEN + 2, 0);
            assert_eq!(
                Header::decode(&bytes),
                Err(DecodeError::Reserved),
                "{flags:#x}"
            );
        }
        let mut bytes = encode_wide(Kind::Put, b"k", b"v", 1, 0);
        bytes[6] = 1;
        assert_eq!(Header::decode(&bytes), Err(DecodeError::Reserved));
        // A batch frame's header is always wide.
        let mut bytes = encode(Kind::Put, b"", b"", 1, 0);
        bytes[4] = Kind::Batch as u8;
        assert_eq!(Header::decode(&bytes), Err(DecodeError::Reserved));
    }

    #[test]
    fn lengths_have_one_encoding() {
        let bytes = encode(Kind::Put, b"k", b"v", 1, 0);
        // The value's length 1 spelled in two bytes.
        let mut long = bytes[..15].to_vec();
        long.extend_from_slice(&[0x81, 0x00]);
        assert!(matches!(Header::decode(&long), Err(DecodeError::Length(_))));
        // Six bytes, or five past 32 bits.
        let mut six = bytes[..14].to_vec();
        six.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0]);
        assert!(matches!(Header::decode(&six), Err(DecodeError::Length(_))));
        let mut wide = bytes[..14].to_vec();
        wide.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x1f, 0]);
        assert!(matches!(Header::decode(&wide), Err(DecodeError::Length(_))));
        // An expiry flagged but zero.
        let mut zero = encode(Kind::Put, b"k", b"v", 1, 5);
        zero[14..22].copy_from_slice(&[0; 8]);
        assert!(matches!(Header::decode(&zero), Err(DecodeError::Length(_))));
    }
}
