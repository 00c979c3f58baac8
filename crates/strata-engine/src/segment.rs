//! Segments: the append-only files that hold the log, and how they are named.
//!
//! A segment starts with a 16-byte header (magic and format version) followed
//! by records. Exactly one segment is *active* (appended to); all others are
//! *sealed* and never change again until compaction deletes them.
//!
//! Segment ids order the log: replaying segments by ascending id replays the
//! history in order. Active segments get ids that are multiples of
//! [`ID_STRIDE`]; the outputs of a compaction take the ids just above the last
//! segment they replace, so they sort after their inputs and before every
//! segment written later. Invariant: an id is never reused in a directory.

#![deny(clippy::indexing_slicing)]

use std::fmt;

use crate::record::DecodeError;

/// Identifies a segment file; ids order the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentId(pub u64);

impl fmt::Display for SegmentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl SegmentId {
    /// The id of the first active segment after `last` (a multiple of [`ID_STRIDE`]).
    pub fn next_active(last: Option<SegmentId>) -> SegmentId {
        match last {
            None => SegmentId(ID_STRIDE),
            Some(SegmentId(id)) => SegmentId((id / ID_STRIDE + 1) * ID_STRIDE),
        }
    }

    /// The segment's file name.
    pub fn file_name(self) -> String {
        format!("{self}.{SEGMENT_EXT}")
    }

    /// The name of the segment's hint file.
    pub fn hint_name(self) -> String {
        format!("{self}.{HINT_EXT}")
    }
}

/// The spacing between the ids of successive active segments.
pub const ID_STRIDE: u64 = 1 << 20;

/// File extension of segments.
pub const SEGMENT_EXT: &str = "seg";
/// File extension of hint files.
pub const HINT_EXT: &str = "hint";
/// Suffix of files being written that are not yet part of the store.
pub const TMP_SUFFIX: &str = ".tmp";
/// Suffix given to segments set aside by a repair.
pub const DROPPED_SUFFIX: &str = ".dropped";
/// Name of the lock file.
pub const LOCK_NAME: &str = "LOCK";

/// What a file in the directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A segment.
    Segment(SegmentId),
    /// A hint file of a segment.
    Hint(SegmentId),
    /// An unfinished file from an interrupted write; safe to delete.
    Temporary,
    /// Anything else (left alone).
    Other,
}

/// Classifies a file name found in the directory.
pub fn classify(name: &str) -> FileKind {
    if name.ends_with(TMP_SUFFIX) {
        return FileKind::Temporary;
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return FileKind::Other;
    };
    if stem.len() != 16 {
        return FileKind::Other;
    }
    let Ok(id) = u64::from_str_radix(stem, 16) else {
        return FileKind::Other;
    };
    match ext {
        SEGMENT_EXT => FileKind::Segment(SegmentId(id)),
        HINT_EXT => FileKind::Hint(SegmentId(id)),
        _ => FileKind::Other,
    }
}

/// Where a record lives: segment, byte offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    /// The segment holding the record.
    pub segment: SegmentId,
    /// Byte offset of the record's header inside the segment.
    pub offset: u32,
    /// Length of the whole record, header included.
    pub len: u32,
}

impl Location {
    /// The offset just past the record.
    pub fn end(&self) -> u64 {
        u64::from(self.offset) + u64::from(self.len)
    }
}

/// Length of the segment file header.
pub const SEGMENT_HEADER_LEN: usize = 16;
/// Magic bytes opening every segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"STRATSEG";
/// The segment format version this build writes: 2, whose records have compact
/// headers (see [`crate::record`]).
pub const FORMAT_VERSION: u32 = 2;
/// The oldest segment format version this build reads: 1, whose records all have
/// wide headers, which version 2 still reads.
pub const MIN_FORMAT_VERSION: u32 = 1;

/// The header written at the start of every segment.
pub fn encode_header() -> [u8; SEGMENT_HEADER_LEN] {
    let mut out = [0u8; SEGMENT_HEADER_LEN];
    let (magic, rest) = out.split_at_mut(8);
    magic.copy_from_slice(&SEGMENT_MAGIC);
    let (version, _reserved) = rest.split_at_mut(4);
    version.copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    out
}

/// Checks a segment header.
pub fn decode_header(bytes: &[u8]) -> Result<(), DecodeError> {
    let Some(header) = bytes.first_chunk::<SEGMENT_HEADER_LEN>() else {
        return Err(DecodeError::Truncated {
            needed: SEGMENT_HEADER_LEN as u64,
            available: bytes.len() as u64,
        });
    };
    let [
        m0,
        m1,
        m2,
        m3,
        m4,
        m5,
        m6,
        m7,
        v0,
        v1,
        v2,
        v3,
        r0,
        r1,
        r2,
        r3,
    ] = *header;
    if [m0, m1, m2, m3, m4, m5, m6, m7] != SEGMENT_MAGIC {
        return Err(DecodeError::Magic);
    }
    let version = u32::from_le_bytes([v0, v1, v2, v3]);
    if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(DecodeError::Version(version));
    }
    if [r0, r1, r2, r3] != [0; 4] {
        return Err(DecodeError::Reserved);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let id = SegmentId(0x1234);
        assert_eq!(id.file_name(), "0000000000001234.seg");
        assert_eq!(classify(&id.file_name()), FileKind::Segment(id));
        assert_eq!(classify(&id.hint_name()), FileKind::Hint(id));
        assert_eq!(classify("0000000000001234.seg.tmp"), FileKind::Temporary);
        assert_eq!(classify("LOCK"), FileKind::Other);
        assert_eq!(classify("zz00000000001234.seg"), FileKind::Other);
    }

    #[test]
    fn active_ids_leave_room_for_compaction_outputs() {
        assert_eq!(SegmentId::next_active(None), SegmentId(ID_STRIDE));
        assert_eq!(
            SegmentId::next_active(Some(SegmentId(ID_STRIDE))),
            SegmentId(2 * ID_STRIDE)
        );
        assert_eq!(
            SegmentId::next_active(Some(SegmentId(ID_STRIDE + 5))),
            SegmentId(2 * ID_STRIDE)
        );
    }

    #[test]
    fn header_round_trip() {
        let header = encode_header();
        decode_header(&header).unwrap();
        let mut bad = header;
        bad[0] ^= 1;
        assert_eq!(decode_header(&bad), Err(DecodeError::Magic));
        assert!(decode_header(&header[..3]).is_err());
        // Version 1 is still read; versions outside the range are refused by name.
        for (version, ok) in [(0u32, false), (1, true), (2, true), (3, false)] {
            let mut h = header;
            h[8..12].copy_from_slice(&version.to_le_bytes());
            let result = decode_header(&h);
            if ok {
                assert_eq!(result, Ok(()));
            } else {
                assert_eq!(result, Err(DecodeError::Version(version)));
            }
        }
    }
}
