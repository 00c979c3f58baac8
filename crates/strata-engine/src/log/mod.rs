//! The log layer: segments, appends with group commit, positioned reads, recovery.
//!
//! [`Log`] is the engine's storage without its index. It appends records (or
//! atomic batches of records) to the active segment and returns where each
//! landed as a [`Location`]; it reads any record back from its location; on
//! open it replays every record (or, for segments that have one, its hint
//! file) in log order to a callback, which is how an index is rebuilt. A
//! caller that keeps its own in-memory index can use the log directly:
//! replay into the index on open, call [`Log::append_with`] to update the
//! index in log order, and [`Log::read`] to fetch values. [`Engine`](crate::Engine)
//! is exactly that, plus compaction.
//!
//! Durability contract: a record is *appended* when `append` returns; it is
//! *durable* once an fsync covering it has succeeded, which under
//! [`FsyncPolicy::Always`] happens before `append` returns, under
//! `EverySecond` within about a second, and under
//! `Never` whenever the operating system decides (or at [`Log::sync`]).
//! Appended records are readable at once, durable or not.
//!
//! Group commit: under `Always` the first writer to need an fsync becomes the
//! leader, flushes the buffer and fsyncs; writers that append meanwhile wait
//! and are covered by the next fsync, so many writers share each one.
//! Readers never take part: a record already handed to the file is read
//! with a positioned read under a shared lock of the segment map; one still
//! in the write buffer is copied under the tail lock, which is never held
//! during a write or an fsync (see the `writer` module for the locks of the
//! append path).
//!
//! Compaction with the log alone: [`Log::seal`] returns the sealed segments,
//! [`Log::scan_segment`] reads one record by record, a [`CompactionOutput`]
//! from [`Log::compaction_output`] writes the records to keep, and
//! [`Log::install`] swaps the outputs in, calling back while the caller moves
//! its index to the new locations.
//!
//! Poisoning: when a write or fsync fails the log can no longer tell what is
//! on disk, so it refuses every later append with [`Error::Poisoned`] until it
//! is reopened. Reads keep working.

mod background;
pub mod check;
mod output;
mod recovery;
mod scan;
mod writer;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::hint::HintBuilder;
use crate::lock::Lock;
use crate::options::{FsyncPolicy, LogOptions};
use crate::record::{self, DecodeError, Kind};
use crate::segment::{Location, SEGMENT_HEADER_LEN, SegmentId};
use crate::vfs::{Vfs, VfsFile, VfsLock, read_exact_at, read_exact_at_cached, write_all_at};

pub use output::{CompactionOutput, OutputSegments};
pub use recovery::Replayed;
pub(crate) use scan::Scanned;
use writer::{Buffered, Tail, Writer};

/// The callback of [`Log::scan_segment`]: location, decoded record, encoded bytes.
pub type ScanVisitor<'a> = dyn FnMut(Location, &record::RecordRef<'_>, &[u8]) -> Result<()> + 'a;

/// A record's bytes as [`Shared::visit_many`] hands them over: a slice of a run read
/// at once, unverified, or a record read (and verified) on its own.
enum Raw<'a> {
    Span(&'a [u8]),
    Record(Record),
}

/// Decodes and verifies the record in `bytes`, read from `location`.
fn decode_at(location: Location, bytes: &[u8]) -> Result<record::RecordRef<'_>> {
    record::decode(bytes).map_err(|reason| match reason {
        DecodeError::Checksum { stored, computed } => Error::ChecksumMismatch {
            segment: location.segment,
            offset: location.offset,
            stored,
            computed,
        },
        reason => Error::BadRecord {
            segment: location.segment,
            offset: location.offset,
            reason,
        },
    })
}

/// One record to append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Put, delete or merge.
    pub kind: Kind,
    /// The key.
    pub key: &'a [u8],
    /// The value or merge operand (empty for a delete).
    pub value: &'a [u8],
    /// The caller's version, stored as is.
    pub version: u64,
    /// Absolute expiry in Unix milliseconds, 0 for never.
    pub expires_at: u64,
}

/// The records of one append, as [`Log::append_planned`] gathers them: up to 16
/// inline (on the stack), the batch of a pipeline over the shards a server
/// connection holds at once, which grew twice with a reallocation each from 4.
pub type Entries<'a> = smallvec::SmallVec<[Entry<'a>; 16]>;

/// The locations of one append's records (inline for as many).
pub type Locations = smallvec::SmallVec<[Location; 16]>;

/// A record read back from the log, owning its bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Record {
    header: record::Header,
    bytes: Vec<u8>,
}

impl fmt::Debug for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Record")
            .field("kind", &self.header.kind)
            .field("version", &self.header.version)
            .field("expires_at", &self.header.expires_at)
            .field("key_len", &self.header.key_len)
            .field("value_len", &self.header.value_len)
            .finish()
    }
}

impl Record {
    /// Put, delete or merge.
    pub fn kind(&self) -> Kind {
        self.header.kind
    }

    /// The stored version.
    pub fn version(&self) -> u64 {
        self.header.version
    }

    /// The stored expiry in Unix milliseconds, 0 for never.
    pub fn expires_at(&self) -> u64 {
        self.header.expires_at
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        let start = self.header.header_len as usize;
        self.bytes
            .get(start..start + self.header.key_len as usize)
            .unwrap_or_default()
    }

    /// The value or merge operand.
    pub fn value(&self) -> &[u8] {
        let start = self.header.header_len as usize + self.header.key_len as usize;
        self.bytes.get(start..).unwrap_or_default()
    }

    /// Takes the value out of the record.
    pub fn into_value(mut self) -> Vec<u8> {
        let start =
            (self.header.header_len as usize + self.header.key_len as usize).min(self.bytes.len());
        self.bytes.drain(..start);
        self.bytes
    }
}

/// A segment file as the log tracks it.
#[derive(Debug)]
pub(crate) struct SegmentFile {
    pub id: SegmentId,
    pub path: PathBuf,
    pub file: Arc<dyn VfsFile>,
    /// Bytes handed to the file (for sealed segments, the file's length).
    pub flushed: AtomicU64,
    /// Where the zeros written ahead of the records end (see
    /// [`LogOptions::zero_ahead`]); at most `flushed` when there are none.
    /// Changed under the flush lock.
    pub zeroed: AtomicU64,
    /// The segment is being sealed: no more zeros are written past its records.
    /// Set under the flush lock.
    pub sealing: AtomicBool,
}

impl SegmentFile {
    pub fn new(id: SegmentId, path: PathBuf, file: Arc<dyn VfsFile>, len: u64) -> SegmentFile {
        SegmentFile {
            id,
            path,
            file,
            flushed: AtomicU64::new(len),
            zeroed: AtomicU64::new(len),
            sealing: AtomicBool::new(false),
        }
    }
}

/// What the log knows about one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentInfo {
    /// The segment's id.
    pub id: SegmentId,
    /// Its length in bytes, header included.
    pub len: u64,
    /// False only for the active segment.
    pub sealed: bool,
}

#[derive(Debug, Default)]
struct SyncState {
    /// Every byte below this log sequence number is durable.
    synced: u64,
    /// A writer is flushing and fsyncing right now.
    leader: bool,
}

/// Why the background thread was woken before its interval ran out.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    /// The log is closing: the thread exits.
    pub stop: bool,
    /// The active segment has grown by a writeback step since the last
    /// request: the thread fsyncs it now (see [`LogOptions::writeback_step`]).
    pub writeback: bool,
    /// The zeros written ahead of the active segment's records run short: the
    /// thread writes more (see [`LogOptions::zero_ahead`]).
    pub zeros: bool,
}

pub(crate) struct Shared {
    dir: PathBuf,
    options: LogOptions,
    vfs: Arc<dyn Vfs>,
    segments: RwLock<BTreeMap<SegmentId, Arc<SegmentFile>>>,
    writer: Lock<Writer>,
    tail: Lock<Tail>,
    /// The flush lock (see the `writer` module), with the buffer its holder writes
    /// out: kept between flushes so that swapping buffers allocates nothing.
    flush: Lock<Vec<u8>>,
    /// Every byte below this log sequence number has been handed to the file.
    flushed_lsn: AtomicU64,
    /// Id of the active segment, readable without the writer lock.
    active_id: AtomicU64,
    sync: Mutex<SyncState>,
    synced: Condvar,
    poisoned: AtomicBool,
    poison_cause: Mutex<Option<String>>,
    closed: AtomicBool,
    /// Sum of the lengths of all segments (buffered bytes included).
    total_bytes: AtomicU64,
    /// Sealed segments whose hint files are still to be written.
    pending_hints: Mutex<Vec<SegmentId>>,
    /// Bytes of zeros to keep past the active segment's records
    /// ([`LogOptions::zero_ahead`], changeable at run time).
    zero_ahead: AtomicU64,
    /// Wakes the background thread early (shutdown, writeback, zeros).
    wake: Condvar,
    wake_lock: Mutex<Wake>,
    _lock: Box<dyn VfsLock>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The segmented, append-only log. See the [module docs](self).
#[derive(Debug)]
pub struct Log {
    shared: Arc<Shared>,
    background: Mutex<Option<JoinHandle<()>>>,
}

impl Log {
    /// Opens (or creates) the log in `dir`, replaying every record to `replay`.
    ///
    /// Records are replayed in log order. For a segment with a valid hint
    /// file the hint's entries are replayed instead of reading the segment.
    /// Batches are replayed only when complete. A torn last record is
    /// truncated; other damage fails with [`Error::Corrupt`] unless
    /// [`LogOptions::repair`] is set. A new active segment is started.
    pub fn open(
        dir: impl AsRef<Path>,
        options: LogOptions,
        replay: &mut dyn FnMut(&Replayed<'_>),
    ) -> Result<Log> {
        options.validate()?;
        let shared = recovery::open(dir.as_ref(), options, replay)?;
        let shared = Arc::new(shared);
        let background = background::spawn(shared.clone())?;
        Ok(Log {
            shared,
            background: Mutex::new(Some(background)),
        })
    }

    /// The directory of the log.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The log's options.
    pub fn options(&self) -> &LogOptions {
        &self.shared.options
    }

    /// Sets how many bytes of zeros to keep written past the active segment's
    /// records from now on (see [`LogOptions::zero_ahead`]); 0 stops writing
    /// more. Zeros already written stay until the segment is sealed.
    pub fn set_zero_ahead(&self, bytes: u64) {
        self.shared.zero_ahead.store(bytes, Ordering::Relaxed);
    }

    /// Appends one record and returns its location (after it is durable under `Always`).
    pub fn append(&self, entry: &Entry<'_>) -> Result<Location> {
        self.append_with(std::slice::from_ref(entry), |locations| {
            locations.first().copied()
        })?
        .ok_or_else(|| Error::InvalidOptions("an append produced no location".into()))
    }

    /// Appends `entries` as one unit and runs `apply` on their locations under the writer lock.
    ///
    /// One entry is written as a plain record; several are written as one
    /// batch frame that recovery replays all or nothing. `apply` runs while
    /// no other append can happen, so updates it makes to an index happen in
    /// log order; it must not call back into the log. Under
    /// [`FsyncPolicy::Always`] this returns only once the records are durable.
    pub fn append_with<R>(
        &self,
        entries: &[Entry<'_>],
        apply: impl FnOnce(&[Location]) -> R,
    ) -> Result<R> {
        self.append_planned(
            |planned| planned.extend_from_slice(entries),
            |_, locations| apply(locations),
        )
    }

    /// Like [`append_with`](Log::append_with), but the entries are chosen by
    /// `plan` under the writer lock, so the choice can depend on state that
    /// only changes under that lock (such as an index updated by `apply`).
    pub fn append_planned<'e, R>(
        &self,
        plan: impl FnOnce(&mut Entries<'e>),
        apply: impl FnOnce(&[Entry<'e>], &[Location]) -> R,
    ) -> Result<R> {
        // On the stack for the usual few records: an append allocates nothing of
        // its own.
        let mut entries = Entries::new();
        let mut locations = Locations::new();
        let (result, lsn) = {
            let mut writer = self.shared.writer.lock();
            self.shared.check_writable()?;
            plan(&mut entries);
            if entries.is_empty() {
                return Ok(apply(&[], &[]));
            }
            let frame_len = Writer::frame_len(&entries)?;
            let size = self.shared.options.segment_size;
            if writer.len > SEGMENT_HEADER_LEN as u64 && writer.len + frame_len > size {
                self.shared.rotate(&mut writer, true)?;
            }
            locations.reserve(entries.len());
            let (lsn, full) = {
                let mut tail = self.shared.tail.lock();
                writer.encode(&mut tail, &entries, frame_len, &mut locations);
                let full = tail.buf.len() >= self.shared.options.write_buffer_size;
                (tail.lsn, full)
            };
            if writer.writeback_due() {
                self.shared.request_writeback();
            }
            if writer.zeros_due(self.shared.zero_ahead.load(Ordering::Relaxed)) {
                self.shared.request_zeros();
            }
            self.shared
                .total_bytes
                .fetch_add(frame_len, Ordering::Relaxed);
            (apply(&entries, &locations), (lsn, full))
        };
        let (lsn, full) = lsn;
        if self.shared.options.fsync == FsyncPolicy::Always {
            self.shared.wait_durable(lsn)?;
        } else if full {
            // Written with no lock of the append path held.
            self.shared.flush_to(lsn)?;
        }
        Ok(result)
    }

    /// Reads the record at `location` and verifies its checksum.
    pub fn read(&self, location: Location) -> Result<Record> {
        self.shared.read(location, false)
    }

    /// [`Log::read`] only if no wait for the device is needed (the record is in the
    /// write buffer or the operating system's cache); an [`std::io::ErrorKind::WouldBlock`]
    /// I/O error otherwise.
    pub fn read_cached(&self, location: Location) -> Result<Record> {
        self.shared.read(location, true)
    }

    /// [`Log::read`] for many records, in the order given. A run of them in one
    /// segment, in order and close together (a key's merge operands written one
    /// after another), is read with one positioned read.
    pub fn read_many(&self, locations: &[Location]) -> Result<Vec<Record>> {
        self.shared.read_many(locations)
    }

    /// Calls `visit` with each record at `locations`, verified, in the order given,
    /// with its encoded bytes: [`Log::read_many`] without a copy of each record. What
    /// a compaction that knows where the live records are reads instead of whole
    /// segments. A location must name a record, not a batch frame.
    pub fn visit_records(&self, locations: &[Location], visit: &mut ScanVisitor<'_>) -> Result<()> {
        self.shared.visit_many(locations, &mut |location, raw| {
            let owned;
            let bytes = match raw {
                Raw::Span(bytes) => bytes,
                Raw::Record(record) => {
                    owned = record;
                    owned.bytes.as_slice()
                }
            };
            let record = decode_at(location, bytes)?;
            if record.header.kind == Kind::Batch {
                return Err(Error::BadRecord {
                    segment: location.segment,
                    offset: location.offset,
                    reason: DecodeError::Mismatch("a batch frame where a record was expected"),
                });
            }
            visit(location, &record, bytes)
        })
    }

    /// Makes every record appended so far durable.
    pub fn sync(&self) -> Result<()> {
        self.shared.sync()
    }

    /// Hands every record appended so far to the operating system, without an
    /// fsync: they then survive the process being killed, not the machine failing.
    ///
    /// Concurrent callers share writes: one whose records a flush running
    /// meanwhile wrote returns once that flush is done.
    pub fn flush(&self) -> Result<()> {
        let lsn = self.shared.tail.lock().lsn;
        self.shared.flush_to(lsn).map(drop)
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let active = SegmentId(self.shared.active_id.load(Ordering::Acquire));
        self.shared
            .segments
            .read()
            .values()
            .map(|s| SegmentInfo {
                id: s.id,
                len: s.flushed.load(Ordering::Acquire),
                sealed: s.id != active,
            })
            .collect()
    }

    /// Total bytes in all segments.
    pub fn total_bytes(&self) -> u64 {
        self.shared.total_bytes.load(Ordering::Relaxed)
    }

    /// The failure that poisoned the log, if any.
    pub fn poisoned(&self) -> Option<String> {
        if self.shared.poisoned.load(Ordering::Acquire) {
            self.shared.poison_cause.lock().clone()
        } else {
            None
        }
    }

    /// Seals the active segment (if it holds records) and returns the ids of
    /// all sealed segments, oldest first.
    ///
    /// A compaction takes these as its inputs: they will never change again.
    pub fn seal(&self) -> Result<Vec<SegmentId>> {
        self.seal_with(true).map(|(sealed, _)| sealed)
    }

    /// [`Log::seal`] for a compaction of every sealed segment: the segment it seals
    /// gets no hint file, which the compaction would delete with the segment (and
    /// building it would read the segment a second time meanwhile); the compaction
    /// queues it with [`Log::queue_hint`] if it fails. Also returns that segment.
    pub(crate) fn seal_unhinted(&self) -> Result<(Vec<SegmentId>, Option<SegmentId>)> {
        self.seal_with(false)
    }

    fn seal_with(&self, hint: bool) -> Result<(Vec<SegmentId>, Option<SegmentId>)> {
        let mut writer = self.shared.writer.lock();
        self.shared.check_writable()?;
        let mut sealed_now = None;
        if writer.records > 0 {
            sealed_now = Some(writer.active.id);
            self.shared.rotate(&mut writer, hint)?;
        }
        let active = writer.active.id;
        drop(writer);
        let sealed = self
            .shared
            .segments
            .read()
            .keys()
            .copied()
            .filter(|id| *id != active)
            .collect();
        Ok((sealed, sealed_now))
    }

    /// Has the background thread write the hint file of sealed segment `id`.
    pub(crate) fn queue_hint(&self, id: SegmentId) {
        if self.shared.options.write_hints {
            self.shared.pending_hints.lock().push(id);
        }
    }

    /// Reads every record of a sealed segment in order.
    ///
    /// Batch frames are flattened into their records. Damage is reported as
    /// [`Error::Corrupt`].
    pub fn scan_segment(&self, id: SegmentId, visit: &mut ScanVisitor<'_>) -> Result<()> {
        let segment = self
            .shared
            .segments
            .read()
            .get(&id)
            .cloned()
            .ok_or(Error::SegmentGone { segment: id })?;
        let len = segment.flushed.load(Ordering::Acquire);
        let end = scan::scan(
            &*segment.file,
            id,
            SEGMENT_HEADER_LEN as u64,
            len,
            &mut |s: Scanned<'_>| visit(s.location, &s.record, s.raw),
        )??;
        match end {
            scan::ScanEnd::Clean => Ok(()),
            scan::ScanEnd::Damaged { offset, reason, .. } => Err(Error::Corrupt {
                segment: segment.path.clone(),
                offset,
                reason,
            }),
        }
    }

    /// Starts writing compaction outputs that will replace sealed segments up to `last_input`.
    pub fn compaction_output(&self, last_input: SegmentId) -> Result<CompactionOutput> {
        self.shared.check_writable()?;
        let active = SegmentId(self.shared.active_id.load(Ordering::Acquire));
        CompactionOutput::new(self.shared.clone(), last_input, active)
    }

    /// Atomically replaces `inputs` by finished compaction outputs.
    ///
    /// The outputs are renamed into place and the directory fsynced; then
    /// `swap` runs (the caller points its index at the outputs); then the
    /// inputs are deleted, oldest first, with a directory fsync after each,
    /// so that a crash at any step leaves a directory that replays to the
    /// same data. A failure after the first rename poisons the log.
    pub fn install(
        &self,
        outputs: OutputSegments,
        inputs: &[SegmentId],
        swap: impl FnOnce(),
    ) -> Result<()> {
        output::install(&self.shared, outputs, inputs, swap)
    }

    /// Flushes, fsyncs, writes hint files and stops the background thread.
    ///
    /// Further appends fail with [`Error::Closed`]. Dropping the log does the
    /// same but ignores errors.
    pub fn close(&self) -> Result<()> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            self.shared.wake_lock.lock().stop = true;
            self.shared.wake.notify_all();
        }
        if let Some(handle) = self.background.lock().take() {
            let _ = handle.join();
        }
        if self.shared.poisoned.load(Ordering::Acquire) {
            return Err(self.shared.poisoned_error());
        }
        self.shared.sync_now()?;
        self.shared.write_pending_hints();
        background::finish_active(&self.shared)
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!(dir = %self.shared.dir.display(), error = %e, "closing the log failed");
        }
    }
}

impl Shared {
    fn check_writable(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(self.poisoned_error());
        }
        Ok(())
    }

    fn poisoned_error(&self) -> Error {
        Error::Poisoned {
            cause: self
                .poison_cause
                .lock()
                .clone()
                .unwrap_or_else(|| "unknown failure".into()),
        }
    }

    /// Marks the log poisoned by `err` and wakes every waiting writer.
    pub(crate) fn poison(&self, err: std::io::Error, during: &str) -> Error {
        let cause = format!("{during} failed: {err}");
        tracing::error!(dir = %self.dir.display(), %cause, "log poisoned");
        {
            let mut slot = self.poison_cause.lock();
            if slot.is_none() {
                *slot = Some(cause);
            }
        }
        self.poisoned.store(true, Ordering::Release);
        let _guard = self.sync.lock();
        self.synced.notify_all();
        Error::Io(err)
    }

    /// Seals the active segment and starts the next one. Runs under the writer lock.
    ///
    /// The fsync of the sealed segment holds only the writer lock, so readers
    /// and fsync leaders go on.
    fn rotate(&self, writer: &mut Writer, hint: bool) -> Result<()> {
        // Appends wait for the writer lock: this flush leaves the buffer empty.
        let lsn = self.flush_to(u64::MAX)?;
        if let Err(e) = self.trim_zeros(&writer.active) {
            return Err(self.poison(e, "truncating the zeros past a segment's records"));
        }
        if let Err(e) = writer.active.file.sync_data() {
            return Err(self.poison(e, "fsync"));
        }
        {
            let mut sync = self.sync.lock();
            sync.synced = sync.synced.max(lsn);
        }
        let id = SegmentId::next_active(Some(writer.active.id));
        let next = match writer::create_segment(&*self.vfs, &self.dir, id, &id.file_name()) {
            Ok(next) => next,
            Err(Error::Io(e)) => return Err(self.poison(e, "creating a segment")),
            Err(other) => return Err(other),
        };
        self.total_bytes
            .fetch_add(SEGMENT_HEADER_LEN as u64, Ordering::Relaxed);
        self.segments.write().insert(id, next.clone());
        self.tail.lock().segment = next.clone();
        self.active_id.store(id.0, Ordering::Release);
        let sealed = writer.start(next);
        if hint && self.options.write_hints {
            self.pending_hints.lock().push(sealed.id);
        }
        Ok(())
    }

    /// Reads bytes `from..to` of `segment` into `buf` if they have reached the
    /// file; false if some are still in the write buffer.
    fn read_flushed(
        &self,
        segment: SegmentId,
        from: u64,
        to: u64,
        buf: &mut Vec<u8>,
        cached: bool,
    ) -> Result<bool> {
        // The map's read lock is held across the positioned read instead of
        // cloning the segment's `Arc`: one shared atomic operation fewer per
        // read. Writers of the map (rotation, compaction) wait for it briefly.
        let segments = self.segments.read();
        let file = segments
            .get(&segment)
            .ok_or(Error::SegmentGone { segment })?;
        if to > file.flushed.load(Ordering::Acquire) {
            return Ok(false);
        }
        buf.resize((to - from) as usize, 0);
        if cached {
            read_exact_at_cached(&*file.file, buf, from)?;
        } else {
            read_exact_at(&*file.file, buf, from)?;
        }
        Ok(true)
    }

    fn read(&self, location: Location, cached: bool) -> Result<Record> {
        let mut bytes = Vec::new();
        let from = u64::from(location.offset);
        if !self.read_flushed(location.segment, from, location.end(), &mut bytes, cached)? {
            loop {
                let found = self.tail.lock().read_buffered(location);
                match found {
                    Buffered::Copied(copy) => bytes = copy,
                    Buffered::InFlight if cached => {
                        return Err(Error::Io(std::io::ErrorKind::WouldBlock.into()));
                    }
                    Buffered::InFlight => {
                        // In the file (or, had the write failed, back in the buffer)
                        // once the flush writing it lets go.
                        drop(self.flush.lock());
                        continue;
                    }
                    Buffered::Flushed => {
                        // Flushed since the check: read it from the file.
                        if !self.read_flushed(
                            location.segment,
                            from,
                            location.end(),
                            &mut bytes,
                            cached,
                        )? {
                            continue;
                        }
                    }
                }
                break;
            }
        }
        Self::decoded(location, bytes)
    }

    /// The most bytes one read of [`Shared::read_many`] covers.
    const RUN_SPAN: u64 = 256 << 10;

    /// The widest gap between two records of one run of [`Shared::read_many`]:
    /// wider, and two reads cost less than reading the bytes between.
    const RUN_GAP: u64 = 4 << 10;

    fn read_many(&self, locations: &[Location]) -> Result<Vec<Record>> {
        let mut records = Vec::with_capacity(locations.len());
        self.visit_many(locations, &mut |location, bytes| {
            let record = match bytes {
                Raw::Span(bytes) => Self::decoded(location, bytes.to_vec())?,
                Raw::Record(record) => record,
            };
            records.push(record);
            Ok(())
        })?;
        Ok(records)
    }

    /// Calls `visit` with the bytes of each record at `locations`, in the order given,
    /// unverified. A run of them in one segment, in order and close together, is read
    /// with one positioned read into one buffer; a record of a run reaching into the
    /// write buffer comes read (and verified) on its own.
    fn visit_many(
        &self,
        locations: &[Location],
        visit: &mut dyn FnMut(Location, Raw<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut span = Vec::new();
        let mut rest = locations;
        while let Some((&first, after)) = rest.split_first() {
            let mut end = first.end();
            let mut count = 1;
            for next in after {
                let start = u64::from(next.offset);
                if next.segment != first.segment
                    || start < end
                    || start - end > Self::RUN_GAP
                    || next.end() - u64::from(first.offset) > Self::RUN_SPAN
                {
                    break;
                }
                end = next.end();
                count += 1;
            }
            let (run, after) = rest.split_at(count);
            rest = after;
            // Into the one buffer, a lone record too (handed over without a copy of
            // its own); a run reaching into the write buffer is read a record at a
            // time.
            let read = self.read_flushed(
                first.segment,
                u64::from(first.offset),
                end,
                &mut span,
                false,
            )?;
            for &location in run {
                if read {
                    let at = (location.offset - first.offset) as usize;
                    let bytes =
                        span.get(at..at + location.len as usize)
                            .ok_or(Error::BadRecord {
                                segment: location.segment,
                                offset: location.offset,
                                reason: DecodeError::Truncated {
                                    needed: location.end(),
                                    available: end,
                                },
                            })?;
                    visit(location, Raw::Span(bytes))?;
                } else {
                    visit(location, Raw::Record(self.read(location, false)?))?;
                }
            }
        }
        Ok(())
    }

    /// The record in `bytes`, read from `location`.
    fn decoded(location: Location, bytes: Vec<u8>) -> Result<Record> {
        let header = decode_at(location, &bytes)?.header;
        Ok(Record { header, bytes })
    }

    /// Flushes and fsyncs the active segment; returns the lsn now durable.
    fn flush_and_sync(&self) -> Result<u64> {
        let lsn = self.flush_to(u64::MAX)?;
        // A rotation since the flush fsynced the segment it wrote, and all below
        // `lsn` with it: fsyncing the segment active now is then merely early.
        let file = self.tail.lock().segment.file.clone();
        if let Err(e) = file.sync_data() {
            return Err(self.poison(e, "fsync"));
        }
        Ok(lsn)
    }

    /// Hands the buffer to the file unless every byte below `target` is there
    /// already; returns the lsn below which every byte is.
    ///
    /// Under the flush lock: the buffer is swapped for the spare one under the
    /// tail lock and written with the tail lock free, so appends go on meanwhile;
    /// a caller that waited for the flush lock finds its bytes written by the
    /// flush before it and writes nothing. After a failed write the bytes go back
    /// in front of the buffer and the log is poisoned.
    fn flush_to(&self, target: u64) -> Result<u64> {
        let flushed = self.flushed_lsn.load(Ordering::Acquire);
        if flushed >= target {
            return Ok(flushed);
        }
        let mut spare = self.flush.lock();
        let flushed = self.flushed_lsn.load(Ordering::Acquire);
        if flushed >= target {
            return Ok(flushed);
        }
        let (segment, at, lsn) = {
            let mut tail = self.tail.lock();
            if self.poisoned.load(Ordering::Acquire) {
                return Err(self.poisoned_error());
            }
            if tail.buf.is_empty() {
                self.flushed_lsn.fetch_max(tail.lsn, Ordering::AcqRel);
                return Ok(tail.lsn);
            }
            std::mem::swap(&mut tail.buf, &mut *spare);
            tail.in_flight = spare.len() as u64;
            let at = tail.segment.flushed.load(Ordering::Acquire);
            (tail.segment.clone(), at, tail.lsn)
        };
        // The segment cannot change meanwhile: rotation flushes under this lock
        // first, and appends, which are needed to fill the buffer again, wait for
        // the rotation.
        let written = write_all_at(&*segment.file, &spare, at);
        let mut tail = self.tail.lock();
        tail.in_flight = 0;
        match written {
            Ok(()) => {
                segment
                    .flushed
                    .store(at + spare.len() as u64, Ordering::Release);
                drop(tail);
                spare.clear();
                self.flushed_lsn.fetch_max(lsn, Ordering::AcqRel);
                Ok(lsn)
            }
            Err(e) => {
                spare.extend_from_slice(&tail.buf);
                std::mem::swap(&mut tail.buf, &mut *spare);
                drop(tail);
                spare.clear();
                Err(self.poison(e, "write"))
            }
        }
    }

    /// Waits until every byte below `target` is durable, leading an fsync if nobody is.
    fn wait_durable(&self, target: u64) -> Result<()> {
        let mut state = self.sync.lock();
        loop {
            if self.poisoned.load(Ordering::Acquire) {
                return Err(self.poisoned_error());
            }
            if state.synced >= target {
                return Ok(());
            }
            if state.leader {
                self.synced.wait(&mut state);
                continue;
            }
            state.leader = true;
            drop(state);
            let result = self.flush_and_sync();
            state = self.sync.lock();
            state.leader = false;
            if let Ok(lsn) = result {
                state.synced = state.synced.max(lsn);
            }
            self.synced.notify_all();
            result?;
        }
    }

    fn sync(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.sync_now()
    }

    /// Wakes the background thread to fsync the active segment.
    fn request_writeback(&self) {
        self.wake_lock.lock().writeback = true;
        self.wake.notify_one();
    }

    fn request_zeros(&self) {
        self.wake_lock.lock().zeros = true;
        self.wake.notify_one();
    }

    /// Writes zeros past the active segment's records until [`Shared::zero_ahead`]
    /// bytes follow what has been handed to the file (never past the segment
    /// size), then fsyncs them, so that the fsyncs of the records that will
    /// overwrite them change no file size. Runs on the background thread. The
    /// zeros are written under the flush lock, a piece at a time: no record is
    /// written meanwhile, so none is overwritten, and a flush waits for one piece
    /// at most.
    pub(crate) fn write_zeros_ahead(&self) -> Result<()> {
        /// The zeros written in one hold of the flush lock.
        const PIECE: usize = 256 << 10;
        let zeros = vec![0u8; PIECE];
        let ahead = self.zero_ahead.load(Ordering::Relaxed);
        let mut wrote = None;
        loop {
            let _flush = self.flush.lock();
            if self.poisoned.load(Ordering::Acquire) || self.closed.load(Ordering::Acquire) {
                break;
            }
            let segment = self.tail.lock().segment.clone();
            if segment.sealing.load(Ordering::Acquire) {
                break;
            }
            let flushed = segment.flushed.load(Ordering::Acquire);
            let want = flushed.saturating_add(ahead).min(self.options.segment_size);
            let from = segment.zeroed.load(Ordering::Acquire).max(flushed);
            if from >= want {
                break;
            }
            let n = (want - from).min(PIECE as u64);
            let piece = zeros.get(..n as usize).unwrap_or_default();
            if let Err(e) = write_all_at(&*segment.file, piece, from) {
                // Nothing is lost: the records are written where the zeros were
                // not, growing the file as without them.
                tracing::warn!(dir = %self.dir.display(), error = %e, "writing zeros ahead of the log failed");
                break;
            }
            segment.zeroed.store(from + n, Ordering::Release);
            wrote = Some(segment);
        }
        if let Some(segment) = wrote
            && let Err(e) = segment.file.sync_data()
        {
            // The file's dirty pages, records included, may be lost: as for any
            // failed fsync of the log.
            return Err(self.poison(e, "fsync"));
        }
        Ok(())
    }

    /// Cuts the zeros written past `segment`'s records (see
    /// [`LogOptions::zero_ahead`]), for good: called before it is sealed or the
    /// log closes, after its last flush. True if there were some: the caller
    /// then fsyncs the segment. The file's size decides, not `zeroed`: a write of
    /// zeros that failed half-way (a full disk) may have left some past it.
    pub(crate) fn trim_zeros(&self, segment: &SegmentFile) -> std::io::Result<bool> {
        let _flush = self.flush.lock();
        segment.sealing.store(true, Ordering::Release);
        let flushed = segment.flushed.load(Ordering::Acquire);
        if segment.zeroed.load(Ordering::Acquire) <= flushed && segment.file.size()? <= flushed {
            return Ok(false);
        }
        segment.file.set_len(flushed)?;
        segment.zeroed.store(flushed, Ordering::Release);
        Ok(true)
    }

    fn sync_now(&self) -> Result<()> {
        let lsn = self.tail.lock().lsn;
        self.wait_durable(lsn)
    }

    /// Writes the hint files queued for sealed segments; failures only cost speed.
    pub(crate) fn write_pending_hints(&self) {
        let pending = std::mem::take(&mut *self.pending_hints.lock());
        for id in pending {
            // A segment compacted away meanwhile needs no hint.
            let Some(segment) = self.segments.read().get(&id).cloned() else {
                continue;
            };
            if let Err(e) = self.write_hint(&segment) {
                tracing::warn!(segment = %id, error = %e, "writing a hint file failed");
            }
        }
    }

    /// Writes the hint file of a segment that will not change again, durably:
    /// built under a temporary name, fsynced, renamed, directory fsynced.
    pub(crate) fn write_hint(&self, segment: &SegmentFile) -> std::io::Result<()> {
        let tmp = self.dir.join(format!(
            "{}{}",
            segment.id.hint_name(),
            crate::segment::TMP_SUFFIX
        ));
        let _ = self.vfs.remove(&tmp);
        let len = segment.flushed.load(Ordering::Acquire);
        if let Err(e) = build_hint(&*self.vfs, &*segment.file, segment.id, len, &tmp) {
            let _ = self.vfs.remove(&tmp);
            return Err(e);
        }
        self.vfs
            .rename(&tmp, &self.dir.join(segment.id.hint_name()))?;
        self.vfs.sync_dir(&self.dir)
    }
}

/// Hint bytes buffered before they are written out.
const HINT_BUFFER: usize = 1 << 20;

/// Writes and fsyncs at `dest` the hint of the first `len` bytes of a segment,
/// read back record by record: a hint costs no memory while its segment is
/// written, and a segment that does not scan clean gets none.
pub(crate) fn build_hint(
    vfs: &dyn Vfs,
    file: &dyn VfsFile,
    id: SegmentId,
    len: u64,
    dest: &Path,
) -> std::io::Result<()> {
    let out = vfs.open(dest, crate::vfs::OpenMode::CreateNew)?;
    let mut hints = HintBuilder::new();
    let mut written = 0u64;
    let mut drain = |hints: &mut HintBuilder| {
        hints.drain(|bytes| {
            write_all_at(&*out, bytes, written)?;
            written += bytes.len() as u64;
            Ok::<(), std::io::Error>(())
        })
    };
    let end = scan::scan::<std::io::Error>(
        file,
        id,
        SEGMENT_HEADER_LEN as u64,
        len,
        &mut |s: scan::Scanned<'_>| {
            hints.push(&crate::hint::HintEntry {
                kind: s.record.header.kind,
                key: s.record.key,
                offset: s.location.offset,
                len: s.location.len,
                version: s.record.header.version,
                expires_at: s.record.header.expires_at,
            });
            if hints.byte_len() >= HINT_BUFFER {
                drain(&mut hints)?;
            }
            Ok(())
        },
    )??;
    if let scan::ScanEnd::Damaged { offset, reason, .. } = end {
        return Err(std::io::Error::other(format!(
            "segment {id} does not scan clean at offset {offset}: {reason}"
        )));
    }
    drain(&mut hints)?;
    write_all_at(&*out, &hints.finish(), written)?;
    out.sync_data()
}
