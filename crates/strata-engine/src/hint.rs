//! Hint files: a sealed segment's records without their values.
//!
//! A hint file lists, in log order, every put, delete and merge record of one
//! sealed segment with its key, location, version and expiry, so opening a
//! store rebuilds the keydir by reading hints instead of every value. Hints
//! are written for compaction outputs, for segments sealed by rotation, for
//! the active segment at a clean close, and for segments that an open had to
//! scan because their hint was missing.
//!
//! A hint is a pure accelerator: it is written to a temporary name, fsynced
//! and renamed, and carries a CRC32C over the whole file. A hint that is
//! missing, short or damaged is ignored and its segment scanned instead.
//! Invariant: a hint exists only for a segment that will never change again.

#![deny(clippy::indexing_slicing)]

use crate::record::{DecodeError, Kind};

/// Magic bytes opening every hint file.
pub const HINT_MAGIC: [u8; 8] = *b"STRATHNT";
/// The hint format version this build writes and reads.
pub const HINT_VERSION: u32 = 1;
/// Length of the hint file header.
pub const HINT_HEADER_LEN: usize = 16;
/// Length of the fixed part of one entry.
pub const ENTRY_FIXED_LEN: usize = 29;
/// Length of the trailer: entry count and checksum.
pub const TRAILER_LEN: usize = 12;

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
        }
    }

    /// Adds the entry of one record.
    pub fn push(&mut self, entry: &HintEntry<'_>) {
        let key_len = u32::try_from(entry.key.len()).unwrap_or(u32::MAX);
        self.bytes.push(entry.kind as u8);
        self.bytes.extend_from_slice(&key_len.to_le_bytes());
        self.bytes.extend_from_slice(&entry.offset.to_le_bytes());
        self.bytes.extend_from_slice(&entry.len.to_le_bytes());
        self.bytes.extend_from_slice(&entry.version.to_le_bytes());
        self.bytes
            .extend_from_slice(&entry.expires_at.to_le_bytes());
        self.bytes.extend_from_slice(entry.key);
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
/// as the iterator reaches it.
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
    if version != HINT_VERSION {
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
        let result = self.entry();
        if result.is_err() {
            self.rest = &[];
            self.seen = self.declared;
        }
        Some(result)
    }
}

impl<'a> HintIter<'a> {
    fn entry(&mut self) -> Result<HintEntry<'a>, DecodeError> {
        let Some((fixed, rest)) = self.rest.split_first_chunk::<ENTRY_FIXED_LEN>() else {
            return Err(DecodeError::Truncated {
                needed: ENTRY_FIXED_LEN as u64,
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
        if u64::from(entry.len) < crate::record::MIN_HEADER_LEN as u64 + key_len as u64 {
            return Err(DecodeError::Length("hint entry shorter than its key"));
        }
        self.rest = rest;
        self.seen += 1;
        Ok(entry)
    }
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

    #[test]
    fn empty_hint_is_valid() {
        let bytes = HintBuilder::new().finish();
        assert_eq!(decode(&bytes).unwrap().count(), 0);
    }
}
