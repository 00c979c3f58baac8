//! An in-memory file system that injects faults and simulates crashes.
//!
//! The model: every file has *written* bytes and *durable* bytes; `sync_data`
//! makes the written bytes durable. Every directory has a *live* set of
//! names and a *durable* one; `sync_dir` makes the live set durable.
//! [`SimVfs::crash`] returns the file system a reboot would find: the durable
//! names only, each with its durable bytes plus, when the file was only
//! appended to since its last sync, a random prefix of the unsynced tail (a
//! torn write). The crashed instance fails every later call, like a dead
//! process.
//!
//! Faults: every mutating call (write, sync, create, rename, remove) can be
//! made to fail from a chosen count on, which stops a run at any step; fsync
//! calls can fail; writes can be made short, or fail with "no space" past a
//! byte budget.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{OpenMode, Vfs, VfsFile, VfsLock};

/// An in-memory, fault-injecting, crash-simulating file system for tests.
///
/// Clones share the same file system.
#[derive(Clone, Default)]
pub struct SimVfs {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimVfs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("SimVfs")
            .field("files", &state.live.len())
            .field("mutations", &state.mutations)
            .finish()
    }
}

#[derive(Default)]
struct Node {
    written: Vec<u8>,
    durable: Vec<u8>,
}

type NodeRef = Arc<Mutex<Node>>;

#[derive(Default)]
struct State {
    live: BTreeMap<PathBuf, NodeRef>,
    durable: BTreeMap<PathBuf, NodeRef>,
    dirs: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
    mutations: u64,
    syncs: u64,
    written_bytes: u64,
    stop_after_mutations: Option<u64>,
    fail_syncs_after: Option<u64>,
    space: Option<u64>,
    short_writes: bool,
    sync_delay: Option<std::time::Duration>,
    writes_held: bool,
    crashed: bool,
}

impl State {
    fn mutate(&mut self) -> io::Result<()> {
        if self.crashed {
            return Err(io::Error::other("simulated crash: the file system is gone"));
        }
        if let Some(limit) = self.stop_after_mutations
            && self.mutations >= limit
        {
            return Err(io::Error::other("simulated crash point reached"));
        }
        self.mutations += 1;
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.mutate()?;
        self.syncs += 1;
        if let Some(limit) = self.fail_syncs_after
            && self.syncs > limit
        {
            return Err(io::Error::other("simulated fsync failure"));
        }
        Ok(())
    }

    fn node(&self, path: &Path) -> io::Result<NodeRef> {
        if self.crashed {
            return Err(io::Error::other("simulated crash: the file system is gone"));
        }
        self.live
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }
}

impl SimVfs {
    /// An empty file system.
    pub fn new() -> SimVfs {
        SimVfs::default()
    }

    /// Number of mutating calls (writes, syncs, creations, renames, removals) so far.
    pub fn mutations(&self) -> u64 {
        self.state.lock().mutations
    }

    /// Makes every mutating call fail once `count` of them have succeeded.
    ///
    /// This stops whatever is running at an exact step; follow it with
    /// [`crash`](SimVfs::crash) to see what a reboot would find.
    pub fn stop_after_mutations(&self, count: Option<u64>) {
        self.state.lock().stop_after_mutations = count;
    }

    /// Makes every fsync (of a file or a directory) after the first `count` fail.
    pub fn fail_syncs_after(&self, count: Option<u64>) {
        let mut state = self.state.lock();
        state.fail_syncs_after = count.map(|c| c + state.syncs);
    }

    /// Makes writes fail with "no space left" once `bytes` more bytes have been written.
    pub fn set_space(&self, bytes: Option<u64>) {
        let mut state = self.state.lock();
        state.space = bytes.map(|b| b + state.written_bytes);
    }

    /// Number of fsyncs (of files and directories) so far.
    pub fn syncs(&self) -> u64 {
        self.state.lock().syncs
    }

    /// Makes every file fsync take this long, like a slow disk.
    pub fn set_sync_delay(&self, delay: Option<std::time::Duration>) {
        self.state.lock().sync_delay = delay;
    }

    /// While `held`, every file write waits (a write in progress, for as long
    /// as a test needs one); writes go on once it is released.
    pub fn hold_writes(&self, held: bool) {
        self.state.lock().writes_held = held;
    }

    /// Makes every write accept at most half of its bytes (at least one).
    pub fn set_short_writes(&self, short: bool) {
        self.state.lock().short_writes = short;
    }

    /// Simulates a power loss: returns the file system a reboot would find.
    ///
    /// Of each file's unsynced writes, from the first byte they changed on, a
    /// prefix survives, whose length `seed` chooses: the rest reads as it was
    /// at the last fsync (appended bytes are lost, bytes written over old ones
    /// read as the old ones). This instance fails every call afterwards.
    pub fn crash(&self, seed: u64) -> SimVfs {
        let mut state = self.state.lock();
        state.crashed = true;
        let mut rng = seed ^ 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut after = State {
            dirs: state.dirs.clone(),
            ..State::default()
        };
        for (path, node) in &state.durable {
            let node = node.lock();
            let mut bytes = node.durable.clone();
            let same = node
                .written
                .iter()
                .zip(&node.durable)
                .take_while(|(a, b)| a == b)
                .count();
            if node.written.len() > same {
                let changed = node.written.len() - same;
                let keep = usize::try_from(next() % (changed as u64 + 1)).unwrap_or(0);
                let cut = same + keep;
                bytes = node.written.get(..cut).unwrap_or_default().to_vec();
                bytes.extend_from_slice(node.durable.get(cut..).unwrap_or_default());
            }
            let fresh = Arc::new(Mutex::new(Node {
                written: bytes.clone(),
                durable: bytes,
            }));
            after.live.insert(path.clone(), fresh.clone());
            after.durable.insert(path.clone(), fresh);
        }
        SimVfs {
            state: Arc::new(Mutex::new(after)),
        }
    }

    /// A deep copy of the file system (files, durable state, faults cleared).
    ///
    /// Lets a test build a store once and then crash many copies of it.
    pub fn fork(&self) -> SimVfs {
        let state = self.state.lock();
        let mut nodes: BTreeMap<*const Mutex<Node>, NodeRef> = BTreeMap::new();
        let mut copy = |n: &NodeRef| {
            nodes
                .entry(Arc::as_ptr(n))
                .or_insert_with(|| {
                    let g = n.lock();
                    Arc::new(Mutex::new(Node {
                        written: g.written.clone(),
                        durable: g.durable.clone(),
                    }))
                })
                .clone()
        };
        let live = state
            .live
            .iter()
            .map(|(p, n)| (p.clone(), copy(n)))
            .collect();
        let durable = state
            .durable
            .iter()
            .map(|(p, n)| (p.clone(), copy(n)))
            .collect();
        SimVfs {
            state: Arc::new(Mutex::new(State {
                live,
                durable,
                dirs: state.dirs.clone(),
                ..State::default()
            })),
        }
    }

    /// Reads a whole file, for tests that inspect or damage files.
    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        let node = self.state.lock().node(path)?;
        Ok(node.lock().written.clone())
    }

    /// Replaces a file's bytes (written and durable), for tests that damage files.
    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let node = self.state.lock().node(path)?;
        let mut node = node.lock();
        node.written = bytes.to_vec();
        node.durable = bytes.to_vec();
        Ok(())
    }

    /// Names of the files in a directory, sorted.
    pub fn files(&self, dir: &Path) -> Vec<String> {
        let state = self.state.lock();
        state
            .live
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().and_then(|n| n.to_str()).map(str::to_owned))
            .collect()
    }
}

#[derive(Debug)]
struct SimLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl VfsLock for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("State").finish_non_exhaustive()
    }
}

struct SimFile {
    state: Arc<Mutex<State>>,
    node: NodeRef,
    writable: bool,
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("writable", &self.writable)
            .finish()
    }
}

impl Vfs for SimVfs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        if state.crashed {
            return Err(io::Error::other("simulated crash: the file system is gone"));
        }
        state.dirs.insert(dir.to_path_buf());
        Ok(())
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        if self.state.lock().crashed {
            return Err(io::Error::other("simulated crash: the file system is gone"));
        }
        Ok(self.files(dir))
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn VfsFile>> {
        let mut state = self.state.lock();
        let node = match mode {
            OpenMode::Read | OpenMode::ReadWrite => state.node(path)?,
            OpenMode::CreateNew => {
                if state.live.contains_key(path) {
                    return Err(io::Error::new(io::ErrorKind::AlreadyExists, "file exists"));
                }
                state.mutate()?;
                let node = NodeRef::default();
                state.live.insert(path.to_path_buf(), node.clone());
                node
            }
        };
        Ok(Arc::new(SimFile {
            state: self.state.clone(),
            node,
            writable: mode != OpenMode::Read,
        }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.node(path)?;
        state.mutate()?;
        state.live.remove(path);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        let node = state.node(from)?;
        state.mutate()?;
        state.live.remove(from);
        state.live.insert(to.to_path_buf(), node);
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.state.lock();
        state.sync()?;
        let State { live, durable, .. } = &mut *state;
        durable.retain(|p, _| p.parent() != Some(dir));
        for (path, node) in live.iter() {
            if path.parent() == Some(dir) {
                durable.insert(path.clone(), node.clone());
            }
        }
        Ok(())
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn VfsLock>> {
        let mut state = self.state.lock();
        if state.crashed {
            return Err(io::Error::other("simulated crash: the file system is gone"));
        }
        if !state.locks.insert(path.to_path_buf()) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the lock is held elsewhere",
            ));
        }
        Ok(Box::new(SimLock {
            state: self.state.clone(),
            path: path.to_path_buf(),
        }))
    }
}

impl VfsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if self.state.lock().crashed {
            return Err(io::Error::other("simulated crash: the file system is gone"));
        }
        let node = self.node.lock();
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        let available = node.written.get(start..).unwrap_or_default();
        let n = available.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), available.get(..n)) {
            dst.copy_from_slice(src);
        }
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "file opened read-only",
            ));
        }
        while self.state.lock().writes_held {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut state = self.state.lock();
        state.mutate()?;
        let mut n = buf.len();
        if state.short_writes && n > 1 {
            n /= 2;
        }
        if let Some(space) = state.space {
            let left = space.saturating_sub(state.written_bytes);
            if left == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::StorageFull,
                    "no space left on device (simulated)",
                ));
            }
            n = n.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        state.written_bytes += n as u64;
        let start = usize::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let mut node = self.node.lock();
        if node.written.len() < start + n {
            node.written.resize(start + n, 0);
        }
        if let (Some(dst), Some(src)) = (node.written.get_mut(start..start + n), buf.get(..n)) {
            dst.copy_from_slice(src);
        }
        Ok(n)
    }

    fn sync_data(&self) -> io::Result<()> {
        let delay = self.state.lock().sync_delay;
        if let Some(delay) = delay {
            std::thread::sleep(delay);
        }
        self.state.lock().sync()?;
        let mut node = self.node.lock();
        node.durable = node.written.clone();
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.node.lock().written.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.state.lock().mutate()?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        self.node.lock().written.resize(len, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{read_all, write_all_at};
    use super::*;

    #[test]
    fn only_synced_names_and_bytes_survive_a_crash() {
        let vfs = SimVfs::new();
        let dir = Path::new("/db");
        let a = vfs.open(&dir.join("a"), OpenMode::CreateNew).unwrap();
        write_all_at(&*a, b"durable", 0).unwrap();
        a.sync_data().unwrap();
        vfs.sync_dir(dir).unwrap();
        write_all_at(&*a, b"-volatile", 7).unwrap();
        let b = vfs.open(&dir.join("b"), OpenMode::CreateNew).unwrap();
        write_all_at(&*b, b"lost", 0).unwrap();
        b.sync_data().unwrap();

        for seed in 0..20 {
            let after = vfs.fork().crash(seed);
            assert_eq!(after.files(dir), vec!["a".to_owned()]);
            let a = after.open(&dir.join("a"), OpenMode::Read).unwrap();
            let bytes = read_all(&*a).unwrap();
            assert!(bytes.starts_with(b"durable"));
            assert!(b"durable-volatile".starts_with(&bytes));
        }
    }

    #[test]
    fn bytes_written_over_synced_ones_survive_a_crash_as_a_prefix() {
        let vfs = SimVfs::new();
        let dir = Path::new("/db");
        let a = vfs.open(&dir.join("a"), OpenMode::CreateNew).unwrap();
        write_all_at(&*a, &[0u8; 16], 0).unwrap();
        a.sync_data().unwrap();
        vfs.sync_dir(dir).unwrap();
        write_all_at(&*a, b"abcdef", 4).unwrap();

        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..40 {
            let after = vfs.fork().crash(seed);
            let bytes = after.read_file(&dir.join("a")).unwrap();
            assert_eq!(bytes.len(), 16, "an overwrite changes no length");
            let kept = bytes.iter().skip(4).take_while(|b| **b != 0).count();
            assert_eq!(bytes.get(4..4 + kept), b"abcdef".get(..kept));
            assert!(bytes.iter().skip(4 + kept).all(|b| *b == 0), "{bytes:?}");
            seen.insert(kept);
        }
        assert!(
            seen.len() > 2,
            "the seeds choose different prefixes: {seen:?}"
        );
    }

    #[test]
    fn renames_are_durable_only_after_a_directory_sync() {
        let vfs = SimVfs::new();
        let dir = Path::new("/db");
        let f = vfs.open(&dir.join("x.tmp"), OpenMode::CreateNew).unwrap();
        write_all_at(&*f, b"data", 0).unwrap();
        f.sync_data().unwrap();
        vfs.sync_dir(dir).unwrap();
        vfs.rename(&dir.join("x.tmp"), &dir.join("x")).unwrap();
        assert_eq!(vfs.fork().crash(1).files(dir), vec!["x.tmp"]);
        vfs.sync_dir(dir).unwrap();
        assert_eq!(vfs.crash(1).files(dir), vec!["x"]);
    }

    #[test]
    fn faults_fire() {
        let vfs = SimVfs::new();
        let f = vfs.open(Path::new("/db/f"), OpenMode::CreateNew).unwrap();
        vfs.set_short_writes(true);
        assert_eq!(f.write_at(b"abcd", 0).unwrap(), 2);
        vfs.set_short_writes(false);
        vfs.set_space(Some(3));
        let err = write_all_at(&*f, b"abcdef", 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        vfs.set_space(None);
        vfs.fail_syncs_after(Some(0));
        assert!(f.sync_data().is_err());
        vfs.fail_syncs_after(None);
        vfs.stop_after_mutations(Some(vfs.mutations()));
        assert!(f.write_at(b"x", 0).is_err());
        assert!(vfs.lock(Path::new("/db/LOCK")).is_ok());
    }
}
