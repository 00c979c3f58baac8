//! The engine's single error type.
//!
//! Every fallible operation returns [`Error`]. I/O failures keep their
//! `std::io::Error` source; damage found on disk names the file and the byte
//! offset so an operator can inspect it. The enum is `#[non_exhaustive]`: match
//! the variants you handle and keep a catch-all arm.

use std::io;
use std::path::PathBuf;

use crate::record::DecodeError;
use crate::segment::SegmentId;

/// The result type of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong inside the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),

    /// Recovery found damaged bytes that are not a torn last record.
    ///
    /// Opening with [`Options::with_repair`](crate::Options::with_repair) drops the log
    /// from this point on instead of failing.
    #[error("corrupt segment {} at offset {offset}: {reason}", segment.display())]
    Corrupt {
        /// The damaged file.
        segment: PathBuf,
        /// Byte offset of the first damaged record inside that file.
        offset: u64,
        /// What was wrong with the bytes.
        reason: DecodeError,
    },

    /// A record read back through its location did not match its checksum.
    #[error(
        "checksum mismatch in segment {segment} at offset {offset}: stored {stored:#010x}, computed {computed:#010x}"
    )]
    ChecksumMismatch {
        /// The segment holding the record.
        segment: SegmentId,
        /// Byte offset of the record inside the segment.
        offset: u32,
        /// The checksum stored in the record header.
        stored: u32,
        /// The checksum computed over the bytes read.
        computed: u32,
    },

    /// A record read back through its location could not be decoded.
    #[error("bad record in segment {segment} at offset {offset}: {reason}")]
    BadRecord {
        /// The segment holding the record.
        segment: SegmentId,
        /// Byte offset of the record inside the segment.
        offset: u32,
        /// What was wrong with the bytes.
        reason: DecodeError,
    },

    /// Another process (or another `Engine` in this process) holds the directory.
    #[error("directory {} is locked by another engine", dir.display())]
    Locked {
        /// The directory that is in use.
        dir: PathBuf,
    },

    /// An earlier write or fsync failed; the engine refuses writes until reopened.
    ///
    /// After a failed fsync the kernel may have dropped dirty pages, so the
    /// engine cannot know which bytes reached the disk. Reopening replays the
    /// log and starts from what is really there.
    #[error("engine is poisoned by an earlier I/O failure ({cause}); reopen it to continue")]
    Poisoned {
        /// A description of the failure that poisoned the engine.
        cause: String,
    },

    /// A location points into a segment that no longer exists (compaction removed it).
    #[error("segment {segment} no longer exists")]
    SegmentGone {
        /// The removed segment.
        segment: SegmentId,
    },

    /// A key, value or batch does not fit the record format.
    #[error("{what} of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its length.
        len: u64,
        /// The largest length allowed.
        max: u64,
    },

    /// A merge record was met but no [`MergeOperator`](crate::MergeOperator) is configured.
    #[error("a merge operand was found but no merge operator is configured")]
    NoMergeOperator,

    /// The options are inconsistent.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// The engine was closed.
    #[error("engine is closed")]
    Closed,
}

impl Error {
    /// Returns true for the error of a read that would have had to wait for the
    /// device ([`crate::Engine::get_value_cached`]).
    pub fn is_would_block(&self) -> bool {
        matches!(self, Error::Io(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Returns true for errors that mean the data on disk is damaged.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. } | Error::ChecksumMismatch { .. } | Error::BadRecord { .. }
        )
    }
}
