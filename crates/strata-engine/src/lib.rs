//! strata-engine: an embeddable, Bitcask-style, log-structured key-value store.
//!
//! Keys and values are bytes. Every write is appended to a log of segment
//! files; an in-memory index (the *keydir*) maps each key to where its
//! records are, so a read is one index lookup and one positioned read.
//! Segments are sealed at a configured size and never change again; a
//! background *compaction* (Bitcask's merge) rewrites the live records of
//! sealed segments while reads and writes go on, and writes *hint files* so
//! the next open rebuilds the keydir without reading values.
//!
//! ```
//! use std::sync::Arc;
//! use strata_engine::{AppendOperator, Engine, FsyncPolicy, Options, WriteBatch};
//!
//! # fn main() -> strata_engine::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let options = Options::default()
//!     .with_fsync(FsyncPolicy::Always)
//!     .with_merge_operator(Arc::new(AppendOperator));
//! let engine = Arc::new(Engine::open(dir.path(), options.clone())?);
//!
//! engine.put(b"greeting", b"hello")?;
//! engine.merge(b"greeting", b", world")?;
//! assert_eq!(engine.get(b"greeting")?.as_deref(), Some(&b"hello, world"[..]));
//!
//! // A batch is applied all or nothing, also across a crash.
//! let mut batch = WriteBatch::new();
//! batch.put(b"a", b"1").put(b"b", b"2").delete(b"greeting");
//! engine.write(&batch)?;
//! assert!(!engine.contains(b"greeting"));
//! assert_eq!(engine.keys().count(), 2);
//!
//! // Writers on other threads share the same engine.
//! let writer = {
//!     let engine = engine.clone();
//!     std::thread::spawn(move || engine.put(b"c", b"3"))
//! };
//! writer.join().expect("writer thread")?;
//!
//! engine.compact()?;
//! Arc::into_inner(engine).expect("sole owner").close()?;
//!
//! let engine = Engine::open(dir.path(), options)?;
//! assert_eq!(engine.get(b"c")?.as_deref(), Some(&b"3"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! # Model
//!
//! - **Records.** A put, a delete (tombstone) or a merge operand, each with a
//!   caller-supplied (or engine-assigned) 64-bit version and an optional
//!   absolute expiry in Unix milliseconds; expired keys read as absent.
//!   The on-disk layout is drawn in `docs/storage-format.md`.
//! - **Merge operands** do not replace a value: the key's value is its last
//!   full value combined with the operands after it by the
//!   [`MergeOperator`] of the [`Options`]; compaction folds them into one
//!   full value.
//! - **Batches** ([`WriteBatch`]) are one frame in the log, checksummed as a
//!   whole: recovery applies all of it or none. A caller that keeps its keys and
//!   values in buffers of its own hands them over borrowed, as [`WriteOp`]s
//!   ([`Engine::write_ops_located`]), rather than copy them into a batch.
//!
//! # Durability contract
//!
//! A write is visible to readers as soon as the call that made it returns
//! (and possibly a moment before). It is durable, surviving a crash of the
//! process or the machine, once an fsync has covered it:
//!
//! - [`FsyncPolicy::Always`]: before the write returns. Concurrent writers
//!   share fsyncs (group commit); readers never wait for them.
//! - [`FsyncPolicy::EverySecond`]: within about a second.
//! - [`FsyncPolicy::Never`]: when the operating system writes it back, at
//!   [`Engine::sync`] / [`Engine::close`], when its segment is sealed, or
//!   once the segment has grown past it by an eighth of the segment size (at
//!   most 32 MiB): the background thread then fsyncs the segment, so that
//!   sealing it finds little left to write.
//!
//! After a crash the store reopens to a prefix of the acknowledged history:
//! a torn last record is truncated (and logged), as are the unused zeros
//! past the records that [`LogOptions::zero_ahead`](options::LogOptions::zero_ahead)
//! keeps written; batches are all or nothing. Damage anywhere else is refused with [`Error::Corrupt`] naming
//! the file and offset, unless [`Options::with_repair`] asks to drop the
//! damaged tail. If a write or fsync fails, the engine is poisoned and
//! refuses writes with [`Error::Poisoned`] until it is reopened: after a
//! failed fsync nobody knows which bytes reached the disk.
//!
//! # Layers
//!
//! - [`log`]: segments, the record codec, appends with group commit
//!   returning a [`Location`], positioned reads, recovery scans, hint files
//!   and compaction outputs. It has no index: a program that keeps its own
//!   index of keys can use it alone.
//! - [`Engine`]: the log plus an [`Index`] (by default the in-memory
//!   [`Keydir`]) and background compaction.
//! - [`vfs`]: every file operation goes through a [`Vfs`], so tests inject
//!   faults and simulate crashes with [`SimVfs`].
//!
//! The engine knows nothing of any network protocol or async runtime.

pub mod batch;
pub mod clock;
pub mod compaction;
mod engine;
pub mod error;
pub mod hint;
pub mod index;
pub mod keydir;
mod lock;
pub mod log;
pub mod merge;
pub mod options;
mod rebuild;
pub mod record;
pub mod segment;
mod varint;
pub mod vfs;

pub use batch::{WriteBatch, WriteMeta, WriteOp};
pub use clock::{Clock, ManualClock, SystemClock};
pub use compaction::CompactionReport;
pub use engine::{Engine, Iter, Keys, Stats, Value};
pub use error::{Error, Result};
pub use index::{Index, KeyEntry};
pub use keydir::Keydir;
pub use log::Log;
pub use log::check::{CheckReport, check};
pub use merge::{AppendOperator, MergeOperator};
pub use options::{CompactionTrigger, FsyncPolicy, LogOptions, Options};
pub use segment::{Location, SegmentId};
pub use vfs::{OsVfs, SimVfs, Vfs};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Engine>();
        check::<Log>();
    }
}
