//! The active segment: where appends go.
//!
//! Three pieces of state, behind three locks. The [`Writer`] (the writer
//! lock) decides where records go: the active segment and its length;
//! appends, rotation and sealing hold it, so records get their locations, and
//! callers' index updates run, in log order. The [`Tail`] (the tail lock)
//! holds the write buffer of records not yet handed to the operating system
//! and the log sequence number; appends take it briefly to encode, readers of
//! buffered records take only it. The flush lock belongs to whoever hands the
//! buffer to the file: it swaps the buffer for an empty one under the tail
//! lock and writes it with only the flush lock held, so appends and readers
//! never wait for a write system call, and flushes reach the file in order.
//! Rotation fsyncs the sealed segment holding the writer lock but neither of
//! the others, so neither readers nor group-commit leaders wait for that fsync.
//!
//! Invariants: lock order is writer, then flush, then tail; `flushed` of the
//! tail's segment counts the bytes handed to the file, `in_flight` the bytes
//! after them that a flush is writing now, and the buffer holds exactly the
//! bytes after those, ending on a record boundary; `lsn` counts every byte
//! ever appended to the log and only grows; every byte below an lsn read
//! under the tail lock is in the tail's segment or in a sealed, fsynced one.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::log::{Entry, Locations, SegmentFile};
use crate::record::{self, Kind, MAX_RECORD_LEN, WIDE_HEADER_LEN};
use crate::segment::{self, Location, SEGMENT_HEADER_LEN, SegmentId};
use crate::vfs::{OpenMode, Vfs, write_all_at};

/// The state behind the writer lock.
pub(crate) struct Writer {
    pub active: Arc<SegmentFile>,
    /// Logical length of the active segment: flushed bytes plus the buffer.
    pub len: u64,
    /// Number of records in the active segment.
    pub records: u64,
    /// `len` at which the background thread is next asked to fsync the segment.
    writeback_at: u64,
    /// Growth between two such requests; `u64::MAX` for none (`Always`, whose
    /// writers fsync every record themselves).
    writeback_step: u64,
    /// `len` at which the background thread is next asked to write zeros ahead
    /// (see [`crate::options::LogOptions::zero_ahead`]).
    zero_at: u64,
}

/// The state behind the tail lock: the write buffer.
pub(crate) struct Tail {
    /// The segment the buffer belongs to (the active one, or the one being sealed).
    pub segment: Arc<SegmentFile>,
    /// Encoded records not yet written to the file.
    pub buf: Vec<u8>,
    /// Bytes a flush took from the buffer and is writing at the segment's
    /// `flushed` offset now (0 when no flush is writing).
    pub in_flight: u64,
    /// Bytes appended to the log since it was opened (the log sequence number).
    pub lsn: u64,
}

impl Tail {
    pub fn new(segment: Arc<SegmentFile>) -> Tail {
        Tail {
            segment,
            buf: Vec::new(),
            in_flight: 0,
            lsn: 0,
        }
    }

    /// Copies a record of the tail's segment that is not in the file yet.
    pub fn read_buffered(&self, location: Location) -> Buffered {
        if location.segment != self.segment.id {
            return Buffered::Flushed;
        }
        let flushed = self.segment.flushed.load(Ordering::Acquire);
        let offset = u64::from(location.offset);
        if offset < flushed {
            return Buffered::Flushed;
        }
        let Some(from) = offset.checked_sub(flushed + self.in_flight) else {
            return Buffered::InFlight;
        };
        let from = from as usize;
        match self.buf.get(from..from + location.len as usize) {
            Some(bytes) => Buffered::Copied(bytes.to_vec()),
            // Past the end: not a record of this log; the file read reports it.
            None => Buffered::Flushed,
        }
    }
}

/// Where [`Tail::read_buffered`] found a record.
pub(crate) enum Buffered {
    /// Copied from the write buffer.
    Copied(Vec<u8>),
    /// Not in the buffer: it is in the file.
    Flushed,
    /// Being written by a flush: in the file once the flush lock is free.
    InFlight,
}

impl Writer {
    pub fn new(active: Arc<SegmentFile>, writeback_step: u64) -> Writer {
        let len = active.flushed.load(Ordering::Acquire);
        Writer {
            active,
            len,
            records: 0,
            writeback_at: len.saturating_add(writeback_step),
            writeback_step,
            zero_at: 0,
        }
    }

    /// Makes `next` (new, holding only its header) the active segment; returns the
    /// one it replaces.
    pub fn start(&mut self, next: Arc<SegmentFile>) -> Arc<SegmentFile> {
        self.len = SEGMENT_HEADER_LEN as u64;
        self.records = 0;
        self.writeback_at = self.len.saturating_add(self.writeback_step);
        self.zero_at = 0;
        std::mem::replace(&mut self.active, next)
    }

    /// Whether the background thread should now write more zeros past the
    /// active segment's records, `ahead` bytes being the room to keep (0: none):
    /// at the first append of a segment, then each time it has grown by half
    /// that room since.
    pub fn zeros_due(&mut self, ahead: u64) -> bool {
        if ahead == 0 || self.len < self.zero_at {
            return false;
        }
        self.zero_at = self.len.saturating_add(ahead / 2);
        true
    }

    /// Whether the active segment has grown by a writeback step since this last
    /// said so (see [`crate::options::LogOptions::writeback_step`]).
    pub fn writeback_due(&mut self) -> bool {
        if self.len < self.writeback_at {
            return false;
        }
        self.writeback_at = self.len.saturating_add(self.writeback_step);
        true
    }

    /// The encoded length of appending `entries` (one record, or a batch frame).
    pub fn frame_len(entries: &[Entry<'_>]) -> Result<u64> {
        let inner: u64 = entries
            .iter()
            .map(|e| record::encoded_len(e.key, e.value, e.expires_at))
            .sum();
        let total = if entries.len() == 1 {
            inner
        } else {
            inner + WIDE_HEADER_LEN as u64
        };
        // The frame must also fit after a segment header with 32-bit offsets.
        if total > MAX_RECORD_LEN - SEGMENT_HEADER_LEN as u64 {
            return Err(Error::TooLarge {
                what: if entries.len() == 1 {
                    "record"
                } else {
                    "batch"
                },
                len: total,
                max: MAX_RECORD_LEN - SEGMENT_HEADER_LEN as u64,
            });
        }
        for entry in entries {
            if entry.kind == Kind::Batch {
                return Err(Error::InvalidOptions(
                    "a batch frame cannot be appended as an entry".into(),
                ));
            }
        }
        Ok(total)
    }

    /// Encodes `entries` into the tail's buffer and returns their locations.
    ///
    /// The caller has checked the frame length and rotated if needed.
    pub fn encode(
        &mut self,
        tail: &mut Tail,
        entries: &[Entry<'_>],
        frame_len: u64,
        locations: &mut Locations,
    ) {
        let segment = self.active.id;
        let base = self.len;
        let buf = &mut tail.buf;
        let start = buf.len();
        let batch = entries.len() > 1;
        let frame_start = if batch {
            Some(record::begin_batch(buf))
        } else {
            None
        };
        for entry in entries {
            let offset = base + (buf.len() - start) as u64;
            let len = record::encode_into(
                buf,
                entry.kind,
                entry.key,
                entry.value,
                entry.version,
                entry.expires_at,
            );
            let location = Location {
                segment,
                offset: offset as u32,
                len: len as u32,
            };
            locations.push(location);
        }
        if let Some(frame_start) = frame_start {
            record::finish_batch(buf, frame_start, entries.len() as u64);
        }
        // Locations and the log's length both count on the planned length.
        debug_assert_eq!((buf.len() - start) as u64, frame_len);
        self.len += frame_len;
        tail.lsn += frame_len;
        self.records += entries.len() as u64;
    }
}

/// Creates a new, empty segment file with its header, durably.
pub(crate) fn create_segment(
    vfs: &dyn Vfs,
    dir: &Path,
    id: SegmentId,
    name: &str,
) -> Result<Arc<SegmentFile>> {
    let path = dir.join(name);
    let file = vfs.open(&path, OpenMode::CreateNew)?;
    write_all_at(&*file, &segment::encode_header(), 0)?;
    file.sync_data()?;
    vfs.sync_dir(dir)?;
    Ok(Arc::new(SegmentFile::new(
        id,
        dir.join(id.file_name()),
        file,
        SEGMENT_HEADER_LEN as u64,
    )))
}
