//! Zeros written ahead of the log's records (`LogOptions::zero_ahead`): records
//! overwrite them, sealing and closing cut what is left, and a crash leaves a
//! store that opens with every synced record.

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata_engine::{Engine, FsyncPolicy, ManualClock, SimVfs, check};

use crate::common::{
    HEADER, RECORD, disk_options, key, segment_files, sim_dir, sim_options, value, wait_for,
};

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// The active segment's path and the length of its records.
fn active(engine: &Engine) -> (PathBuf, u64) {
    let info = engine
        .log()
        .segments()
        .into_iter()
        .find(|s| !s.sealed)
        .unwrap();
    (engine.log().dir().join(info.id.file_name()), info.len)
}

#[test]
fn records_overwrite_the_zeros_and_sealing_or_closing_cuts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options().with_zero_ahead(32 << 10)).unwrap();
    engine.put(&key(0), &[b'v'; 100]).unwrap();
    engine.flush().unwrap();
    let (path, _) = active(&engine);
    wait_for("the zeros", || file_len(&path) >= HEADER + (32 << 10));

    for i in 1..100 {
        engine.put(&key(i), &[b'v'; 100]).unwrap();
    }
    engine.flush().unwrap();
    let (path, len) = active(&engine);
    assert_eq!(len, HEADER + 100 * RECORD);
    assert!(file_len(&path) > len, "zeros are kept ahead of the records");
    for i in 0..100 {
        assert_eq!(engine.get(&key(i)).unwrap().unwrap(), vec![b'v'; 100]);
    }

    // Past the 64 KiB segment size: each sealed segment holds its records only.
    for i in 100..1_500 {
        engine.put(&key(i), &[b'v'; 100]).unwrap();
    }
    engine.flush().unwrap();
    let files = segment_files(dir.path());
    assert!(files.len() >= 3, "{files:?}");
    for sealed in &files[..files.len() - 1] {
        let bytes = std::fs::read(sealed).unwrap();
        let len = bytes.len() as u64;
        assert_eq!(
            (len - HEADER) % RECORD,
            0,
            "{}: {len} bytes",
            sealed.display()
        );
        assert_eq!(
            bytes.last(),
            Some(&b'v'),
            "{} ends in zeros",
            sealed.display()
        );
    }
    engine.close().unwrap();

    // Closing cut the active segment's zeros too.
    let report = check(&strata_engine::OsVfs, dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    for s in &report.segments {
        assert_eq!(s.zeros, 0, "{s:?}");
        assert_eq!(s.len, HEADER + s.puts * RECORD, "{s:?}");
    }
    assert_eq!(report.segments.iter().map(|s| s.puts).sum::<u64>(), 1_500);
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for i in 0..1_500 {
        assert!(engine.contains(&key(i)), "key {i}");
    }
}

#[test]
fn zeros_can_be_turned_on_and_off_while_the_log_runs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    engine.put(&key(0), &[b'v'; 100]).unwrap();
    engine.flush().unwrap();
    let (path, len) = active(&engine);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(file_len(&path), len, "no zeros unless asked for");

    engine.set_zero_ahead(16 << 10);
    engine.put(&key(1), &[b'v'; 100]).unwrap();
    engine.flush().unwrap();
    wait_for("the zeros", || file_len(&path) >= HEADER + (16 << 10));

    // Turned off, no more are written; those written stay until the segment ends.
    engine.set_zero_ahead(0);
    for i in 2..200 {
        engine.put(&key(i), &[b'v'; 100]).unwrap();
    }
    engine.flush().unwrap();
    let files = segment_files(dir.path());
    let (path, len) = active(&engine);
    assert_eq!(file_len(&path), len, "{files:?}");
    for i in 0..200 {
        assert!(engine.contains(&key(i)), "key {i}");
    }
}

/// A power loss while records are being written over zeros: what was synced is
/// all there, of the rest a prefix, and the store opens without complaint.
#[test]
fn a_crash_over_zeros_keeps_what_was_synced_and_a_prefix_of_the_rest() {
    let mut kept = std::collections::BTreeSet::new();
    for seed in 0..16u64 {
        let clock = ManualClock::new(1_000);
        let vfs = SimVfs::new();
        let options = sim_options(&vfs, &clock)
            .with_fsync(FsyncPolicy::Never)
            .with_segment_size(64 << 10)
            .with_zero_ahead(16 << 10);
        let engine = Engine::open(sim_dir(), options).unwrap();
        engine.put(&key(0), &value(0, seed)).unwrap();
        engine.flush().unwrap();
        let (path, _) = active(&engine);
        wait_for("the zeros", || {
            vfs.read_file(&path).unwrap().len() as u64 >= HEADER + (16 << 10)
        });
        for i in 1..100 {
            engine.put(&key(i), &value(i, seed)).unwrap();
        }
        engine.sync().unwrap();
        // Written over the zeros, not synced.
        for i in 100..200 {
            engine.put(&key(i), &value(i, seed)).unwrap();
        }
        engine.flush().unwrap();
        let (path, len) = active(&engine);
        assert!(vfs.read_file(&path).unwrap().len() as u64 > len);

        let after = vfs.crash(seed);
        drop(engine);
        let engine = Engine::open(sim_dir(), sim_options(&after, &clock)).unwrap();
        for i in 0..100 {
            assert_eq!(
                engine.get(&key(i)).unwrap(),
                Some(value(i, seed)),
                "key {i}"
            );
        }
        let present = (100..200).take_while(|i| engine.contains(&key(*i))).count() as u64;
        for i in 100 + present..200 {
            assert!(!engine.contains(&key(i)), "key {i} after a lost one");
        }
        for i in 100..100 + present {
            assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, seed)));
        }
        kept.insert(present);
    }
    assert!(
        kept.len() > 2,
        "the crashes cut in different places: {kept:?}"
    );
}
