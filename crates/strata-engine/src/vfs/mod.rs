//! The virtual file system: every byte the engine reads or writes goes through it.
//!
//! [`Vfs`] covers the handful of directory operations the engine needs and
//! [`VfsFile`] the positioned reads and writes on one file. [`OsVfs`] maps
//! them onto `std::fs`; [`SimVfs`] is an in-memory file system for tests that
//! injects short writes, full disks and fsync failures, and simulates crashes
//! in which only fsynced bytes and fsynced directory entries survive.
//!
//! Invariant: the engine never touches `std::fs` outside this module, so a
//! test that swaps the `Vfs` sees every I/O the engine does.

mod os;
mod sim;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use os::OsVfs;
pub use sim::SimVfs;

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Create a new, empty file for reading and writing; fails if it exists.
    CreateNew,
}

/// A file system as the engine uses it.
pub trait Vfs: Send + Sync + fmt::Debug {
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Lists the names of the entries of a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Opens a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Renames a file, replacing the target if it exists.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Takes an exclusive lock on `path` (created if missing), held until the guard drops.
    ///
    /// Fails with [`io::ErrorKind::WouldBlock`] when someone else holds it.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn VfsLock>>;
}

/// An open file.
pub trait VfsFile: Send + Sync + fmt::Debug {
    /// Reads at `offset`; returns the number of bytes read (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// [`VfsFile::read_at`] only if it needs no wait for the device: the bytes are
    /// in the operating system's cache. Fails with [`io::ErrorKind::WouldBlock`]
    /// otherwise, and where the file system cannot tell (the default).
    fn read_at_cached(&self, _buf: &mut [u8], _offset: u64) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
    /// Writes at `offset`; returns the number of bytes written, which may be short.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Makes the file's data durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// The file's current length in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
}

/// A held directory lock; dropping it releases the lock.
pub trait VfsLock: Send + Sync + fmt::Debug {}

/// Reads exactly `buf.len()` bytes at `offset`.
pub fn read_exact_at(file: &dyn VfsFile, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file ended before the requested bytes",
                ));
            }
            Ok(n) => {
                buf = buf.get_mut(n..).unwrap_or_default();
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `offset` if they are all in the operating
/// system's cache ([`VfsFile::read_at_cached`]); a short read is a
/// [`io::ErrorKind::WouldBlock`] too (part of the range is not cached).
pub fn read_exact_at_cached(file: &dyn VfsFile, buf: &mut [u8], offset: u64) -> io::Result<()> {
    loop {
        match file.read_at_cached(buf, offset) {
            Ok(n) if n == buf.len() => return Ok(()),
            Ok(_) => return Err(io::ErrorKind::WouldBlock.into()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes all of `buf` at `offset`, retrying short writes.
pub fn write_all_at(file: &dyn VfsFile, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.write_at(buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the file system accepted no bytes",
                ));
            }
            Ok(n) => {
                buf = buf.get(n..).unwrap_or_default();
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Reads a whole file into memory.
pub fn read_all(file: &dyn VfsFile) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.size()?)
        .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "file larger than memory"))?;
    let mut buf = vec![0u8; len];
    read_exact_at(file, &mut buf, 0)?;
    Ok(buf)
}
