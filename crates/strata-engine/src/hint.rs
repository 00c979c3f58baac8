//! Hint files: a sealed segment's records without their values.
//!
//! A hint file lists, in log order, every put, delete and merge record of one
//! sealed segment with its key, location, version and expiry, so opening a
//! store rebuilds the keydir by reading hints instead of every value. Hints
//! are written for compaction outputs, for segments sealed by rotation, for
//! the active segment at a clean close, and for segments that an open had to
//! scan because their hint was missing.
//!
//! An entry is written against the one before it: its offset as the gap after
//! the previous record (none, for records one after the other) and its version as
//! the step from the previous version, each a varint, as are its length, its
//! expiry (only when it has one) and its key's length. A 20-byte key's entry
//! takes 25 bytes (26 when its record is 128 bytes or longer), where format
//! version 1's fixed fields made it 49; version-1 hints are still read. Each
//! entry has one encoding (varints in their shortest form, an expiry flagged only
//! when it is not zero).
//!
//! A hint is a pure accelerator: it is written to a temporary name, fsynced
//! and renamed, and carries a CRC32C over the whole file. A hint that is
//! missing, short or damaged is ignored and its segment scanned instead.
//! Invariant: a hint exists only for a segment that will never change again.

#![deny(clippy::indexing_slicing)]

use crate::record::{DecodeError, Kind};
use crate::varint;

/// Magic bytes opening every hint file.
pub const HINT_MAGIC: [u8; 8] = *b"STRATHNT";
/// The hint format version this build writes.
pub const HINT_VERSION: u32 = 2;
/// The oldest hint format version this build reads.
pub const MIN_HINT_VERSION: u32 = 1;
/// Length of the hint file header.
pub const HINT_HEADER_LEN: usize = 16;
/// Length of an entry's fixed part in a hint of format version 1.
pub const V1_ENTRY_FIXED_LEN: usize = 29;
/// Length of the trailer: entry count and checksum.
pub const TRAILER_LEN: usize = 12;

/// The flag, in an entry's first byte, of an entry with an expiry.
const EXPIRES: u8 = 0x80;

/// One entry of a hint file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintEntry<'a> {
    /// The record's kind (put, delete or merge).
    pub kind: Kind,
    /// The record's key.
    pub key: &'a [u8],
    /// Offset of the record in its segment.
    pub offset: u32,
    /// Length of the whole record.
    pub len: u32,
    /// The record's version.
    pub version: u64,
    /// The record's expiry in Unix milliseconds, 0 for never.
    pub expires_at: u64,
}

/// What an entry is written relative to: the end of the record before it and
/// its version (both zero before the first entry).
#[derive(Debug, Clone, Copy, Default)]
struct Previous {
    end: u32,
    version: u64,
}

impl Previous {
    fn follow(&mut self, entry: &HintEntry<'_>) {
        self.end = entry.offset.wrapping_add(entry.len);
        self.version = entry.version;
    }
}

/// Builds the bytes of a hint file, one entry at a time.
///
/// The bytes can be taken out in pieces as they accumulate ([`HintBuilder::drain`]),
/// so a hint of any length is written with a bounded buffer; the checksum runs
/// over every byte, drained or not.
#[derive(Debug, Clone)]
pub struct HintBuilder {
    bytes: Vec<u8>,
    count: u64,
    /// CRC32C of the bytes already drained.
    crc: u32,
    previous: Previous,
}

impl Default for HintBuilder {
    fn default() -> Self {
        HintBuilder::new()
    }
}

impl HintBuilder {
    /// An empty hint.
    pub fn new() -> HintBuilder {
        let mut bytes = Vec::with_capacity(4096);
        bytes.extend_from_slice(&HINT_MAGIC);
        bytes.extend_from_slice(&HINT_VERSION.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        HintBuilder {
            bytes,
            count: 0,
            crc: 0,
            previous: Previous::default(),
        }
    }

    /// Adds the entry of one record.
    ///
    /// An entry is its kind (with the bit `0x80` set when it has an expiry), then as
    /// varints the gap between the end of the record before it and its offset
    /// (0 for records one after the other), its length, its version's difference
    /// from the version before it (zigzag), its expiry if it has one and its key's
    /// length, then the key: five bytes and the key for most records, where a fixed
    /// layout took 29.
    pub fn push(&mut self, entry: &HintEntry<'_>) {
        let key_len = u32::try_from(entry.key.len()).unwrap_or(u32::MAX);
        let flags = if entry.expires_at != 0 { EXPIRES } else { 0 };
        let gap = entry.offset.wrapping_sub(self.previous.end);
        let step = entry.version.wrapping_sub(self.previous.version) as i64;
        let mut fixed = [0u8; 1 + 5 * varint::MAX_LEN];
        fixed[0] = entry.kind as u8 | flags;
        let mut at = varint::write(&mut fixed, 1, u64::from(gap));
        at = varint::write(&mut fixed, at, u64::from(entry.len));
        at = varint::write(&mut fixed, at, ((step << 1) ^ (step >> 63)) as u64);
        if entry.expires_at != 0 {
            at = varint::write(&mut fixed, at, entry.expires_at);
        }
        at = varint::write(&mut fixed, at, u64::from(key_len));
        self.bytes
            .extend_from_slice(fixed.get(..at).unwrap_or_default());
        self.bytes.extend_from_slice(entry.key);
        self.previous.follow(entry);
        self.count += 1;
    }

    /// Number of entries so far.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Bytes encoded and not yet drained.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Hands the bytes encoded since the last drain to `write`, in file order, and
    /// forgets them (the checksum keeps covering them). On error nothing is forgotten.
    pub fn drain<E>(&mut self, write: impl FnOnce(&[u8]) -> Result<(), E>) -> Result<(), E> {
        write(&self.bytes)?;
        self.crc = crc32c::crc32c_append(self.crc, &self.bytes);
        self.bytes.clear();
        Ok(())
    }

    /// True when no entry was added.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends the trailer and returns the file's bytes not yet drained.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&self.count.to_le_bytes());
        let crc = crc32c::crc32c_append(self.crc, &self.bytes);
        self.bytes.extend_from_slice(&crc.to_le_bytes());
        self.bytes
    }
}

/// Verifies a hint file and returns an iterator over its entries.
///
/// The header, trailer and checksum are checked here; each entry is checked
/// as the iterator reaches it. Hints of format versions 1 and 2 are read.
pub fn decode(bytes: &[u8]) -> Result<HintIter<'_>, DecodeError> {
    if bytes.len() < HINT_HEADER_LEN + TRAILER_LEN {
        return Err(DecodeError::Truncated {
            needed: (HINT_HEADER_LEN + TRAILER_LEN) as u64,
            available: bytes.len() as u64,
        });
    }
    let (header, rest) = bytes.split_at(HINT_HEADER_LEN);
    let (magic, version) = header.split_at(8);
    if magic != HINT_MAGIC {
        return Err(DecodeError::Magic);
    }
    let (version, reserved) = version.split_at(4);
    let version = u32::from_le_bytes(array4(version));
    if !(MIN_HINT_VERSION..=HINT_VERSION).contains(&version) {
        return Err(DecodeError::Version(version));
    }
    if reserved != [0u8; 4] {
        return Err(DecodeError::Reserved);
    }
    let (covered, crc) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes(array4(crc));
    let computed = crc32c::crc32c(covered);
    if stored != computed {
        return Err(DecodeError::Checksum { stored, computed });
    }
    let (entries, count) = rest.split_at(rest.len() - TRAILER_LEN);
    let declared = u64::from_le_bytes(array8(count.get(..8).unwrap_or_default()));
    Ok(HintIter {
        rest: entries,
        declared,
        seen: 0,
        version,
        previous: Previous::default(),
    })
}

fn array4(bytes: &[u8]) -> [u8; 4] {
    bytes.try_into().unwrap_or_default()
}

fn array8(bytes: &[u8]) -> [u8; 8] {
    bytes.try_into().unwrap_or_default()
}

/// The entries of a verified hint file.
#[derive(Debug, Clone)]
pub struct HintIter<'a> {
    rest: &'a [u8],
    declared: u64,
    seen: u64,
    /// The file's format version.
    version: u32,
    previous: Previous,
}

impl HintIter<'_> {
    /// The number of entries the trailer declares.
    pub fn declared(&self) -> u64 {
        self.declared
    }
}

impl<'a> Iterator for HintIter<'a> {
    type Item = Result<HintEntry<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            if self.seen != self.declared {
                let err = DecodeError::BatchCount {
                    declared: self.declared,
                    found: self.seen,
                };
                self.seen = self.declared;
                return Some(Err(err));
            }
            return None;
        }
        let result = if self.version == 1 {
            self.entry_v1()
        } else {
            self.entry()
        };
        match &result {
            Ok(entry) => {
                self.previous.follow(entry);
                self.seen += 1;
            }
            Err(_) => {
                self.rest = &[];
                self.seen = self.declared;
            }
        }
        Some(result)
    }
}

impl<'a> HintIter<'a> {
    fn entry(&mut self) -> Result<HintEntry<'a>, DecodeError> {
        let bytes = self.rest;
        let Some(&first) = bytes.first() else {
            return Err(DecodeError::Truncated {
                needed: 1,
                available: 0,
            });
        };
        let kind = Kind::from_u8(first & !EXPIRES)?;
        if kind == Kind::Batch {
            return Err(DecodeError::NestedBatch);
        }
        let (gap, at) = varint::read(bytes, 1, 32)?;
        let (len, at) = varint::read(bytes, at, 32)?;
        let (step, at) = varint::read(bytes, at, 64)?;
        let (expires_at, at) = if first & EXPIRES != 0 {
            let (expires_at, at) = varint::read(bytes, at, 64)?;
            if expires_at == 0 {
                return Err(DecodeError::Length("an expiry flagged but absent"));
            }
            (expires_at, at)
        } else {
            (0, at)
        };
        let (key_len, at) = varint::read(bytes, at, 32)?;
        let Some(key) = bytes.get(at..).and_then(|b| b.get(..key_len as usize)) else {
            return Err(DecodeError::Truncated {
                needed: (at as u64).saturating_add(key_len),
                available: bytes.len() as u64,
            });
        };
        let step = ((step >> 1) as i64) ^ -((step & 1) as i64);
        let entry = HintEntry {
            kind,
            key,
            offset: self.previous.end.wrapping_add(gap as u32),
            len: len as u32,
            version: self.previous.version.wrapping_add(step as u64),
            expires_at,
        };
        check_len(&entry)?;
        self.rest = bytes.get(at + key.len()..).unwrap_or_default();
        Ok(entry)
    }

    /// An entry of a format-version-1 hint: 29 bytes at fixed offsets, then the key.
    fn entry_v1(&mut self) -> Result<HintEntry<'a>, DecodeError> {
        let Some((fixed, rest)) = self.rest.split_first_chunk::<V1_ENTRY_FIXED_LEN>() else {
            return Err(DecodeError::Truncated {
                needed: V1_ENTRY_FIXED_LEN as u64,
                available: self.rest.len() as u64,
            });
        };
        let [
            kind,
            k0,
            k1,
            k2,
            k3,
            o0,
            o1,
            o2,
            o3,
            l0,
            l1,
            l2,
            l3,
            v0,
            v1,
            v2,
            v3,
            v4,
            v5,
            v6,
            v7,
            e0,
            e1,
            e2,
            e3,
            e4,
            e5,
            e6,
            e7,
        ] = *fixed;
        let kind = Kind::from_u8(kind)?;
        if kind == Kind::Batch {
            return Err(DecodeError::NestedBatch);
        }
        let key_len = u32::from_le_bytes([k0, k1, k2, k3]) as usize;
        let Some((key, rest)) = rest.split_at_checked(key_len) else {
            return Err(DecodeError::Truncated {
                needed: key_len as u64,
                available: rest.len() as u64,
            });
        };
        let entry = HintEntry {
            kind,
            key,
            offset: u32::from_le_bytes([o0, o1, o2, o3]),
            len: u32::from_le_bytes([l0, l1, l2, l3]),
            version: u64::from_le_bytes([v0, v1, v2, v3, v4, v5, v6, v7]),
            expires_at: u64::from_le_bytes([e0, e1, e2, e3, e4, e5, e6, e7]),
        };
        check_len(&entry)?;
        self.rest = rest;
        Ok(entry)
    }
}

/// A record is at least a header and its key.
fn check_len(entry: &HintEntry<'_>) -> Result<(), DecodeError> {
    if u64::from(entry.len) < crate::record::MIN_HEADER_LEN as u64 + entry.key.len() as u64 {
        return Err(DecodeError::Length("hint entry shorter than its key"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        sample_drained(false)
    }

    /// The sample hint, drained to a file after each entry when `drain` is set.
    fn sample_drained(drain: bool) -> Vec<u8> {
        let mut file = Vec::new();
        let mut b = HintBuilder::new();
        let mut drain_to = |b: &mut HintBuilder| {
            if drain {
                b.drain(|bytes| {
                    file.extend_from_slice(bytes);
                    Ok::<(), ()>(())
                })
                .unwrap();
            }
        };
        b.push(&HintEntry {
            kind: Kind::Put,
            key: b"alpha",
            offset: 16,
            len: 40,
            version: 3,
            expires_at: 0,
        });
        drain_to(&mut b);
        b.push(&HintEntry {
            kind: Kind::Delete,
            key: b"beta",
            offset: 56,
            len: 36,
            version: 4,
            expires_at: 9,
        });
        drain_to(&mut b);
        file.extend_from_slice(&b.finish());
        file
    }

    #[test]
    fn a_drained_hint_is_the_same_file() {
        assert_eq!(sample_drained(true), sample());
        let mut failing = HintBuilder::new();
        assert_eq!(failing.drain(|_| Err("disk full")), Err("disk full"));
        assert_eq!(failing.finish(), HintBuilder::new().finish());
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        let entries: Vec<_> = decode(&bytes).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].key, b"alpha");
        assert_eq!(entries[1].kind, Kind::Delete);
        assert_eq!(entries[1].expires_at, 9);
    }

    #[test]
    fn any_damage_is_detected() {
        let bytes = sample();
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x40;
            let ok = decode(&damaged).map(|it| it.collect::<Result<Vec<_>, _>>().is_ok());
            assert!(!matches!(ok, Ok(true)), "byte {i} went unnoticed");
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            if let Ok(entries) = decode(&bytes) {
                for entry in entries {
                    let _ = entry;
                }
            }
        }
    }

    /// The bytes of a hint of format version 1 holding `entries`.
    fn version_1(entries: &[HintEntry<'_>]) -> Vec<u8> {
        let mut out = HINT_MAGIC.to_vec();
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        for e in entries {
            out.push(e.kind as u8);
            out.extend_from_slice(&(e.key.len() as u32).to_le_bytes());
            out.extend_from_slice(&e.offset.to_le_bytes());
            out.extend_from_slice(&e.len.to_le_bytes());
            out.extend_from_slice(&e.version.to_le_bytes());
            out.extend_from_slice(&e.expires_at.to_le_bytes());
            out.extend_from_slice(e.key);
        }
        out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    fn build(entries: &[HintEntry<'_>]) -> Vec<u8> {
        let mut b = HintBuilder::new();
        for e in entries {
            b.push(e);
        }
        b.finish()
    }

    fn entry(
        kind: Kind,
        key: &[u8],
        offset: u32,
        len: u32,
        version: u64,
        expires_at: u64,
    ) -> HintEntry<'_> {
        HintEntry {
            kind,
            key,
            offset,
            len,
            version,
            expires_at,
        }
    }

    #[test]
    fn an_entry_is_written_against_the_one_before() {
        let key = [b'k'; 20];
        // Records one after the other, versions one apart: 5 bytes and the key.
        let mut b = HintBuilder::new();
        b.push(&entry(Kind::Put, &key, 16, 100, 7, 0));
        let one = b.byte_len();
        b.push(&entry(Kind::Put, &key, 116, 100, 8, 0));
        assert_eq!(b.byte_len() - one, 25);
        // A record of 128 bytes takes a two-byte length; an expiry takes its varint.
        b.push(&entry(Kind::Put, &key, 216, 128, 9, 0));
        assert_eq!(b.byte_len() - one - 25, 26);
        let at = b.byte_len();
        b.push(&entry(Kind::Delete, &key, 344, 36, 10, 1_700_000_000_000));
        assert_eq!(b.byte_len() - at, 25 + 6);
        assert_eq!(b.bytes[at], Kind::Delete as u8 | EXPIRES);
    }

    #[test]
    fn entries_in_any_order_round_trip() {
        // Offsets going back, versions going down, the extremes of every field.
        let entries = [
            entry(Kind::Put, b"a", u32::MAX - 20, 20, u64::MAX, 0),
            entry(Kind::Merge, b"", 16, u32::MAX, 0, u64::MAX),
            entry(Kind::Delete, b"b", 0, 17, 1 << 63, 1),
            entry(Kind::Put, b"c", 5_000, 17, 3, 0),
        ];
        let bytes = build(&entries);
        let back: Vec<_> = decode(&bytes).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, entries);
    }

    #[test]
    fn version_1_hints_are_read() {
        let entries = [
            entry(Kind::Put, b"alpha", 16, 40, 3, 0),
            entry(Kind::Delete, b"beta", 88, 36, 4, 9),
        ];
        let bytes = version_1(&entries);
        let back: Vec<_> = decode(&bytes).unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(back, entries);
        // Newer than this build: refused by name.
        let mut newer = bytes.clone();
        newer[8..12].copy_from_slice(&3u32.to_le_bytes());
        let crc = crc32c::crc32c(&newer[..newer.len() - 4]);
        let at = newer.len() - 4;
        newer[at..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&newer).unwrap_err(), DecodeError::Version(3));
    }

    #[test]
    fn entries_have_one_encoding() {
        /// A hint whose only entry is `body`.
        fn with(body: &[u8]) -> Result<Vec<HintEntry<'static>>, DecodeError> {
            let mut out = HINT_MAGIC.to_vec();
            out.extend_from_slice(&HINT_VERSION.to_le_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(body);
            out.extend_from_slice(&1u64.to_le_bytes());
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
            let bytes: &'static [u8] = Vec::leak(out);
            decode(bytes)?.collect()
        }
        // kind, gap 16, len 17, step 1 (zigzag 2), key length 1, key.
        assert_eq!(with(&[1, 16, 17, 2, 1, b'k']).unwrap().len(), 1);
        // The length 17 in two bytes.
        assert!(matches!(
            with(&[1, 16, 0x91, 0, 2, 1, b'k']),
            Err(DecodeError::Length(_))
        ));
        // An expiry flagged but zero.
        assert!(matches!(
            with(&[0x81, 16, 17, 2, 0, 1, b'k']),
            Err(DecodeError::Length(_))
        ));
        // A kind byte with other bits set; a batch.
        assert!(with(&[0x41, 16, 17, 2, 1, b'k']).is_err());
        assert_eq!(
            with(&[4, 16, 17, 2, 1, b'k']).unwrap_err(),
            DecodeError::NestedBatch
        );
        // A record shorter than a header and its key; a key past the entries.
        assert!(matches!(
            with(&[1, 16, 15, 2, 1, b'k']),
            Err(DecodeError::Length(_))
        ));
        assert!(matches!(
            with(&[1, 16, 17, 2, 2, b'k']),
            Err(DecodeError::Truncated { .. })
        ));
    }

    fn any_entry() -> impl proptest::strategy::Strategy<Value = (u8, Vec<u8>, u32, u32, u64, u64)> {
        use proptest::prelude::*;
        (
            1u8..=3,
            proptest::collection::vec(any::<u8>(), 0..40),
            any::<u32>(),
            any::<u32>(),
            any::<u64>(),
            prop_oneof![Just(0u64), any::<u64>()],
        )
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn any_entries_round_trip(raw in proptest::collection::vec(any_entry(), 0..20)) {
            let entries: Vec<HintEntry<'_>> = raw
                .iter()
                .map(|(kind, key, offset, len, version, expires_at)| HintEntry {
                    kind: Kind::from_u8(*kind).unwrap(),
                    key,
                    offset: *offset,
                    // A record holds a header and its key.
                    len: (*len).max(16 + key.len() as u32),
                    version: *version,
                    expires_at: *expires_at,
                })
                .collect();
            let bytes = build(&entries);
            let back: Vec<_> = decode(&bytes).unwrap().collect::<Result<_, _>>().unwrap();
            proptest::prop_assert_eq!(&back, &entries);
            let v1 = version_1(&entries);
            let back: Vec<_> = decode(&v1).unwrap().collect::<Result<_, _>>().unwrap();
            proptest::prop_assert_eq!(&back, &entries);
        }
    }

    #[test]
    fn empty_hint_is_valid() {
        let bytes = HintBuilder::new().finish();
        assert_eq!(decode(&bytes).unwrap().count(), 0);
    }
}
