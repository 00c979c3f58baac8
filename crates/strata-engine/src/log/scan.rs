//! Sequential reading of a segment, record by record.
//!
//! The scanner reads a segment in large chunks and hands each intact record
//! to a callback, flattening batch frames into their inner records. It stops
//! at the first damaged or incomplete record and reports where and why; the
//! caller decides whether that is a torn tail, corruption, or a repair point.

#![deny(clippy::indexing_slicing)]

use std::io;

use crate::record::{self, DecodeError, Kind, MAX_HEADER_LEN, RecordRef};
use crate::segment::{Location, SegmentId};
use crate::vfs::{VfsFile, read_exact_at};

const CHUNK: usize = 1 << 20;

/// How a scan ended.
#[derive(Debug)]
pub(crate) enum ScanEnd {
    /// Every byte up to the end of the file was an intact record.
    Clean,
    /// The record at `offset` is damaged or incomplete.
    Damaged {
        /// Where the bad record starts.
        offset: u64,
        /// What is wrong with it.
        reason: DecodeError,
        /// True when nothing but zeros follows the damage: a torn write (the
        /// file ends there, or the rest is zeros the file system or the log
        /// wrote ahead of its records).
        torn: bool,
        /// True when every byte from `offset` on is zero: no record at all but
        /// the room a log that writes zeros ahead of its records left unused
        /// (see [`crate::options::LogOptions::zero_ahead`]).
        zeros: bool,
    },
}

/// One record met by the scanner.
pub(crate) struct Scanned<'a> {
    /// Where the record lives.
    pub location: Location,
    /// The decoded record.
    pub record: RecordRef<'a>,
    /// The record's encoded bytes.
    pub raw: &'a [u8],
}

/// Reads `file` from `start` to `len`, calling `visit` for every record in order.
///
/// Batch frames are checked whole before any of their records is visited, so
/// a batch is either visited entirely or reported as damaged.
pub(crate) fn scan<E>(
    file: &dyn VfsFile,
    segment: SegmentId,
    start: u64,
    len: u64,
    visit: &mut dyn FnMut(Scanned<'_>) -> Result<(), E>,
) -> Result<Result<ScanEnd, E>, io::Error> {
    let mut window = Window {
        file,
        len,
        buf: Vec::with_capacity(CHUNK),
        start,
    };
    let mut pos = start;
    while pos < len {
        // Every header fits in this many bytes; a short one decodes from its own.
        let head = window.get(pos, MAX_HEADER_LEN)?;
        let header = match record::Header::decode(head) {
            Ok(header) => header,
            Err(reason) => {
                let short = head.len() < MAX_HEADER_LEN;
                let zeros = window.zeros_to_end(pos)?;
                // A header cut short, by the end of the file or by zeros after it.
                let torn = zeros || short || window.zeros_to_end(pos + MAX_HEADER_LEN as u64)?;
                return Ok(Ok(ScanEnd::Damaged {
                    offset: pos,
                    reason,
                    torn,
                    zeros,
                }));
            }
        };
        let total = header.total_len();
        if pos + total > len {
            return Ok(Ok(ScanEnd::Damaged {
                offset: pos,
                reason: DecodeError::Truncated {
                    needed: total,
                    available: len - pos,
                },
                torn: true,
                zeros: false,
            }));
        }
        let total_usize = usize::try_from(total)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "record larger than memory"))?;
        let bytes = window.get(pos, total_usize)?;
        let frame = match record::decode(bytes) {
            Ok(frame) => frame,
            Err(reason) => {
                // The last record, or one whose unwritten rest reads as zeros.
                let torn = pos + total == len || window.zeros_to_end(pos + total)?;
                return Ok(Ok(ScanEnd::Damaged {
                    offset: pos,
                    reason,
                    torn,
                    zeros: false,
                }));
            }
        };
        let offset = u32::try_from(pos)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "segment beyond 4 GiB"))?;
        if frame.header.kind == Kind::Batch {
            let inner = match record::batch_records(frame.value, frame.header.version) {
                Ok(inner) => inner,
                Err(reason) => {
                    return Ok(Ok(ScanEnd::Damaged {
                        offset: pos,
                        reason,
                        torn: false,
                        zeros: false,
                    }));
                }
            };
            let frame_header = frame.header.header_len as usize;
            let body = bytes.get(frame_header..).unwrap_or_default();
            for (at, record) in inner {
                let len = record.header.total_len() as usize;
                let raw = body.get(at..at + len).unwrap_or_default();
                let inner_offset =
                    u32::try_from(pos + frame_header as u64 + at as u64).map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidData, "segment beyond 4 GiB")
                    })?;
                let location = Location {
                    segment,
                    offset: inner_offset,
                    len: len as u32,
                };
                if let Err(e) = visit(Scanned {
                    location,
                    record,
                    raw,
                }) {
                    return Ok(Err(e));
                }
            }
        } else {
            let location = Location {
                segment,
                offset,
                len: total as u32,
            };
            if let Err(e) = visit(Scanned {
                location,
                record: frame,
                raw: bytes,
            }) {
                return Ok(Err(e));
            }
        }
        pos += total;
    }
    Ok(Ok(ScanEnd::Clean))
}

/// A sliding window of file bytes.
struct Window<'f> {
    file: &'f dyn VfsFile,
    len: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
}

impl Window<'_> {
    /// Returns up to `n` bytes at `pos` (fewer only at the end of the file).
    fn get(&mut self, pos: u64, n: usize) -> io::Result<&[u8]> {
        let end = self.start + self.buf.len() as u64;
        let want_end = (pos + n as u64).min(self.len);
        if pos < self.start || want_end > end {
            // Keep the bytes from `pos` on and read what is missing, at least a chunk.
            if pos >= self.start && pos <= end {
                let consumed = (pos - self.start) as usize;
                self.buf.drain(..consumed);
            } else {
                self.buf.clear();
            }
            self.start = pos;
            let have = self.buf.len() as u64;
            let target = (pos + (n.max(CHUNK)) as u64).min(self.len);
            let missing = target.saturating_sub(pos + have);
            let old = self.buf.len();
            let missing = usize::try_from(missing)
                .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "read too large"))?;
            self.buf.resize(old + missing, 0);
            if let Some(dst) = self.buf.get_mut(old..) {
                read_exact_at(self.file, dst, pos + have)?;
            }
        }
        let from = (pos - self.start) as usize;
        let to = from + (want_end - pos) as usize;
        Ok(self.buf.get(from..to).unwrap_or_default())
    }

    /// True when every byte from `pos` to the end of the file is zero.
    fn zeros_to_end(&mut self, mut pos: u64) -> io::Result<bool> {
        while pos < self.len {
            let n = ((self.len - pos) as usize).min(CHUNK);
            let bytes = self.get(pos, n)?;
            if bytes.is_empty() {
                break;
            }
            if bytes.iter().any(|b| *b != 0) {
                return Ok(false);
            }
            pos += bytes.len() as u64;
        }
        Ok(true)
    }
}
