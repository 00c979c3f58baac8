//! Options of the engine and of the log layer beneath it.
//!
//! [`Options`] configures an [`Engine`](crate::Engine); the parts that concern
//! only the log (segment size, fsync policy, write buffer, repair, the file
//! system) are passed down as [`LogOptions`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::merge::MergeOperator;
use crate::vfs::{OsVfs, Vfs};

/// When appended records are made durable with fsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// No writer waits for an fsync. Records reach the OS when the write
    /// buffer fills and at least every second; the background thread fsyncs
    /// the active segment each time it grows by an eighth of the segment size
    /// (at most 32 MiB), and a sealed segment is fsynced. A crash of the
    /// machine may lose recent writes.
    Never,
    /// A background thread fsyncs once a second: a crash loses at most about
    /// a second of writes.
    #[default]
    EverySecond,
    /// Every write returns only after its record is durable. Concurrent
    /// writers share fsyncs (group commit).
    Always,
}

/// When the background thread starts a compaction on its own.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionTrigger {
    /// Compact when dead bytes make up at least this share of all bytes (0.0–1.0).
    pub dead_ratio: f64,
    /// ...and there are at least this many dead bytes.
    pub min_dead_bytes: u64,
    /// How often the background thread checks the trigger.
    pub check_interval: Duration,
}

impl Default for CompactionTrigger {
    fn default() -> Self {
        CompactionTrigger {
            dead_ratio: 0.5,
            min_dead_bytes: 64 << 20,
            check_interval: Duration::from_secs(1),
        }
    }
}

/// Options of the log layer.
#[derive(Clone)]
pub struct LogOptions {
    /// A segment is sealed and a new one started once it reaches this size.
    /// At most 4 GiB − 1, because locations store offsets as `u32`.
    pub segment_size: u64,
    /// When appended records are fsynced.
    pub fsync: FsyncPolicy,
    /// Records are gathered in memory up to this many bytes before being
    /// written to the segment file in one call (0 writes every record at once).
    pub write_buffer_size: usize,
    /// On corruption, drop the damaged record and everything after it instead
    /// of failing to open.
    pub repair: bool,
    /// Write hint files for sealed segments and at clean close.
    pub write_hints: bool,
    /// Bytes of zeros the background thread keeps written (and fsynced) past the
    /// end of the active segment's records; 0 for none (the default). Records
    /// then overwrite blocks the file already has instead of growing it, so an
    /// fsync of them writes no new file size: on ext4 an appending `fdatasync`,
    /// which also writes the inode with the file's new length, took 172–183 µs
    /// against 124 µs for one within written zeros. Worth it
    /// for a caller that fsyncs after most writes; it writes each segment's
    /// bytes to the device twice. A segment is cut back to its records when it
    /// is sealed or the log closes; after a crash, opening trims the zeros.
    /// Can be changed while the log runs ([`crate::Engine::set_zero_ahead`]).
    pub zero_ahead: u64,
    /// The file system.
    pub vfs: Arc<dyn Vfs>,
}

impl fmt::Debug for LogOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogOptions")
            .field("segment_size", &self.segment_size)
            .field("fsync", &self.fsync)
            .field("write_buffer_size", &self.write_buffer_size)
            .field("repair", &self.repair)
            .field("write_hints", &self.write_hints)
            .field("zero_ahead", &self.zero_ahead)
            .finish_non_exhaustive()
    }
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            segment_size: 128 << 20,
            fsync: FsyncPolicy::default(),
            write_buffer_size: 64 << 10,
            repair: false,
            write_hints: true,
            zero_ahead: 0,
            vfs: Arc::new(OsVfs),
        }
    }
}

impl LogOptions {
    /// Bytes appended to the active segment between two fsyncs the background
    /// thread makes on its own under `Never` and `EverySecond` (an eighth of a
    /// segment, 64 KiB to 32 MiB); `u64::MAX` under `Always`. Without them a
    /// segment's bytes would wait in the page cache until it is sealed, whose
    /// fsync then stalls every writer while the whole segment goes to the device.
    pub(crate) fn writeback_step(&self) -> u64 {
        match self.fsync {
            FsyncPolicy::Always => u64::MAX,
            FsyncPolicy::Never | FsyncPolicy::EverySecond => {
                (self.segment_size / 8).clamp(64 << 10, 32 << 20)
            }
        }
    }

    /// Checks the options for consistency.
    pub fn validate(&self) -> Result<()> {
        if self.segment_size < 4096 || self.segment_size > u64::from(u32::MAX) {
            return Err(Error::InvalidOptions(format!(
                "segment_size must be between 4096 and {} bytes, not {}",
                u32::MAX,
                self.segment_size
            )));
        }
        Ok(())
    }
}

/// Options of an [`Engine`](crate::Engine).
///
/// Build them from [`Options::default`] and the `with_*` methods.
#[derive(Clone)]
pub struct Options {
    /// Options of the log beneath the engine.
    pub log: LogOptions,
    /// When the background thread compacts on its own; `None` disables
    /// automatic compaction (explicit [`compact`](crate::Engine::compact) still works).
    pub compaction: Option<CompactionTrigger>,
    /// Combines merge operands; required to read keys that have merge records.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// The clock that decides expiry.
    pub clock: Arc<dyn Clock>,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("log", &self.log)
            .field("compaction", &self.compaction)
            .field("merge_operator", &self.merge_operator)
            .field("clock", &self.clock)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            log: LogOptions::default(),
            compaction: Some(CompactionTrigger::default()),
            merge_operator: None,
            clock: Arc::new(SystemClock),
        }
    }
}

impl Options {
    /// Sets the fsync policy.
    pub fn with_fsync(mut self, policy: FsyncPolicy) -> Self {
        self.log.fsync = policy;
        self
    }

    /// Sets the segment size at which the active segment is sealed.
    pub fn with_segment_size(mut self, bytes: u64) -> Self {
        self.log.segment_size = bytes;
        self
    }

    /// Sets the size of the in-memory write buffer.
    pub fn with_write_buffer_size(mut self, bytes: usize) -> Self {
        self.log.write_buffer_size = bytes;
        self
    }

    /// Drops damaged log tails on open instead of failing.
    pub fn with_repair(mut self, repair: bool) -> Self {
        self.log.repair = repair;
        self
    }

    /// Turns hint files on or off.
    pub fn with_hints(mut self, write_hints: bool) -> Self {
        self.log.write_hints = write_hints;
        self
    }

    /// Sets how many bytes of zeros are kept written past the active segment's
    /// records (see [`LogOptions::zero_ahead`]).
    pub fn with_zero_ahead(mut self, bytes: u64) -> Self {
        self.log.zero_ahead = bytes;
        self
    }

    /// Sets (or, with `None`, disables) automatic background compaction.
    pub fn with_compaction(mut self, trigger: Option<CompactionTrigger>) -> Self {
        self.compaction = trigger;
        self
    }

    /// Sets the merge operator.
    pub fn with_merge_operator(mut self, operator: Arc<dyn MergeOperator>) -> Self {
        self.merge_operator = Some(operator);
        self
    }

    /// Sets the clock used for expiry.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets the file system.
    pub fn with_vfs(mut self, vfs: Arc<dyn Vfs>) -> Self {
        self.log.vfs = vfs;
        self
    }

    /// Checks the options for consistency.
    pub fn validate(&self) -> Result<()> {
        self.log.validate()?;
        if let Some(trigger) = &self.compaction
            && !(0.0..=1.0).contains(&trigger.dead_ratio)
        {
            return Err(Error::InvalidOptions(format!(
                "compaction dead_ratio must be within 0.0..=1.0, not {}",
                trigger.dead_ratio
            )));
        }
        Ok(())
    }
}
