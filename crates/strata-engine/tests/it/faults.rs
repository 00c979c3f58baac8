//! Injected I/O faults: fsync failures, full disks, short writes.

use std::io;
use std::time::Duration;

use strata_engine::{Engine, Error, FsyncPolicy, ManualClock, SimVfs};

use crate::common::{key, sim_dir, sim_options, value};

#[test]
fn a_failed_fsync_poisons_the_engine_until_reopened() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
    engine.put(b"before", b"1").unwrap();
    vfs.fail_syncs_after(Some(0));
    let err = engine.put(b"during", b"2").unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
    let err = engine.put(b"after", b"3").unwrap_err();
    assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    assert!(err.to_string().contains("fsync failed"), "{err}");
    assert!(matches!(
        engine.delete(b"before"),
        Err(Error::Poisoned { .. })
    ));
    assert!(matches!(engine.compact(), Err(Error::Poisoned { .. })));
    assert!(engine.stats().poisoned);
    // Reads keep working.
    assert_eq!(engine.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    assert!(engine.close().is_err());

    vfs.fail_syncs_after(None);
    let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
    assert_eq!(engine.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    engine.put(b"after", b"3").unwrap();
    assert!(!engine.stats().poisoned);
}

#[test]
fn a_background_fsync_failure_poisons_too() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let options = sim_options(&vfs, &clock).with_fsync(FsyncPolicy::EverySecond);
    let engine = Engine::open(sim_dir(), options).unwrap();
    engine.put(b"k", b"v").unwrap();
    vfs.fail_syncs_after(Some(0));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !engine.stats().poisoned {
        assert!(std::time::Instant::now() < deadline, "never poisoned");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(matches!(
        engine.put(b"k", b"w"),
        Err(Error::Poisoned { .. })
    ));
}

#[test]
fn a_full_disk_fails_writes_and_a_reopen_recovers() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
    for i in 0..20 {
        engine.put(&key(i), &value(i, 0)).unwrap();
    }
    vfs.set_space(Some(100));
    let mut failed = None;
    for i in 20..40 {
        if let Err(e) = engine.put(&key(i), &value(i, 0)) {
            failed = Some(e);
            break;
        }
    }
    let Some(Error::Io(e)) = failed else {
        panic!("expected an I/O error, got {failed:?}");
    };
    assert_eq!(e.kind(), io::ErrorKind::StorageFull);
    assert!(matches!(
        engine.put(b"x", b"y"),
        Err(Error::Poisoned { .. })
    ));
    drop(engine);

    vfs.set_space(None);
    let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
    for i in 0..20 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 0)));
    }
    engine.put(b"x", b"y").unwrap();
}

#[test]
fn short_writes_are_completed() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    vfs.set_short_writes(true);
    let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
    for i in 0..200 {
        engine.put(&key(i), &value(i, 1)).unwrap();
    }
    engine.compact().unwrap();
    engine.close().unwrap();
    let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
    for i in 0..200 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 1)));
    }
}

#[test]
fn a_compaction_that_runs_out_of_space_changes_nothing() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
    for round in 0..3 {
        for i in 0..100 {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
    }
    let before = engine.stats();
    vfs.set_space(Some(2_000));
    assert!(engine.compact().is_err());
    vfs.set_space(None);
    assert!(
        !vfs.files(&sim_dir()).iter().any(|f| f.ends_with(".tmp")),
        "temporary outputs are removed"
    );
    for i in 0..100 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 2)));
    }
    engine.compact().unwrap();
    assert!(engine.stats().total_bytes < before.total_bytes);
    engine.put(b"still", b"writable").unwrap();
}

#[test]
fn a_failed_compaction_leaves_the_segment_it_sealed_a_hint() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    // One segment until the compaction seals it.
    let options = sim_options(&vfs, &clock).with_segment_size(1 << 20);
    let engine = Engine::open(sim_dir(), options).unwrap();
    for round in 0..2 {
        for i in 0..50 {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
    }
    let hints = || {
        vfs.files(&sim_dir())
            .iter()
            .filter(|f| f.ends_with(".hint"))
            .count()
    };
    assert_eq!(hints(), 0);
    vfs.set_space(Some(200));
    assert!(engine.compact().is_err());
    vfs.set_space(None);
    // A compaction seals without a hint (it deletes what it seals); this one
    // failed, so the segment stays and the background thread writes its hint.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while hints() == 0 {
        assert!(std::time::Instant::now() < deadline, "no hint written");
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..50 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 1)));
    }
}
