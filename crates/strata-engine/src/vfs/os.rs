//! The real file system, through `std::fs`.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::{OpenMode, Vfs, VfsFile, VfsLock};

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsVfs;

#[derive(Debug)]
struct OsFile(File);

#[derive(Debug)]
struct OsLock(#[allow(dead_code)] File);

impl VfsLock for OsLock {}

impl Vfs for OsVfs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateNew => options.read(true).write(true).create_new(true),
        };
        Ok(Arc::new(OsFile(options.open(path)?)))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn VfsLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(OsLock(file))),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the lock is held elsewhere",
            )),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }
}

impl VfsFile for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    fn read_at_cached(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut bufs = [io::IoSliceMut::new(buf)];
        match rustix::io::preadv2(
            &self.0,
            &mut bufs,
            offset,
            rustix::io::ReadWriteFlags::NOWAIT,
        ) {
            Ok(n) => Ok(n),
            // A kernel or file system without RWF_NOWAIT: the caller waits instead.
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL) => {
                Err(io::ErrorKind::WouldBlock.into())
            }
            Err(e) => Err(e.into()),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}
