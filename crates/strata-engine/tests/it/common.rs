//! Helpers shared by the integration tests.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use strata_engine::{AppendOperator, FsyncPolicy, ManualClock, Options, SimVfs};

/// A segment file's header.
pub const HEADER: u64 = 16;
/// A record of a [`key`] and a 100-byte value without an expiry: its header
/// (compact, with one-byte lengths), key and value.
pub const RECORD: u64 = 16 + 12 + 100;

/// Waits (ten seconds at most) until `done` holds.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The directory used inside simulated file systems.
pub fn sim_dir() -> PathBuf {
    PathBuf::from("/db")
}

/// Options for a small store on a simulated file system.
pub fn sim_options(vfs: &SimVfs, clock: &ManualClock) -> Options {
    Options::default()
        .with_vfs(Arc::new(vfs.clone()))
        .with_clock(Arc::new(clock.clone()))
        .with_fsync(FsyncPolicy::Always)
        .with_segment_size(4096)
        .with_write_buffer_size(0)
        .with_compaction(None)
        .with_merge_operator(Arc::new(AppendOperator))
}

/// Options for a store on the real file system.
pub fn disk_options() -> Options {
    Options::default()
        .with_segment_size(64 << 10)
        .with_compaction(None)
        .with_merge_operator(Arc::new(AppendOperator))
}

/// Names of the segment files in `dir`, sorted.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files
}

/// Removes every hint file in `dir`, so opening scans the segments.
pub fn remove_hints(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "hint") {
            std::fs::remove_file(path).expect("remove hint");
        }
    }
}

/// A key of a fixed shape.
pub fn key(i: u64) -> Vec<u8> {
    format!("key-{i:08}").into_bytes()
}

/// A value derived from a key index and a round.
pub fn value(i: u64, round: u64) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// Flips bits of the byte at `offset` of the file at `path`.
pub fn flip(path: &Path, offset: u64) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    byte[0] ^= 0x5a;
    file.write_all_at(&byte, offset).unwrap();
}
