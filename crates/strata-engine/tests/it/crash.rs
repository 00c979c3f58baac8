//! Simulated crashes: only fsynced bytes and directory entries survive.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_engine::{Engine, FsyncPolicy, ManualClock, SimVfs, WriteBatch};

use crate::common::{key, sim_dir, sim_options, value};

#[test]
fn acknowledged_writes_survive_a_crash() {
    for seed in 0..8u64 {
        let clock = ManualClock::new(1_000);
        let vfs = SimVfs::new();
        let engine = Arc::new(Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let engine = engine.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let k = t * 1_000 + i;
                        engine.put(&key(k), &value(k, seed)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // Unacknowledged, unsynced bytes may be cut anywhere.
        let after = vfs.crash(seed);
        drop(engine);
        let engine = Engine::open(sim_dir(), sim_options(&after, &clock)).unwrap();
        for t in 0..4u64 {
            for i in 0..50 {
                let k = t * 1_000 + i;
                assert_eq!(engine.get(&key(k)).unwrap(), Some(value(k, seed)));
            }
        }
    }
}

#[test]
fn batches_are_all_or_nothing_after_a_crash() {
    for seed in 0..40u64 {
        let clock = ManualClock::new(1_000);
        let vfs = SimVfs::new();
        let options = sim_options(&vfs, &clock).with_fsync(FsyncPolicy::Never);
        let engine = Engine::open(sim_dir(), options.clone()).unwrap();
        for b in 0..30u64 {
            let mut batch = WriteBatch::new();
            for i in 0..5 {
                batch.put(&key(b * 10 + i), &value(b, i));
            }
            engine.write(&batch).unwrap();
            if b == 10 {
                engine.sync().unwrap();
            }
        }
        let after = vfs.crash(seed);
        drop(engine);
        let engine = Engine::open(sim_dir(), options.with_vfs(Arc::new(after))).unwrap();
        let mut complete = 0;
        for b in 0..30u64 {
            let present: Vec<bool> = (0..5).map(|i| engine.contains(&key(b * 10 + i))).collect();
            assert!(
                present.iter().all(|p| *p) || present.iter().all(|p| !*p),
                "seed {seed}: batch {b} is partly there: {present:?}"
            );
            if present[0] {
                complete += 1;
            }
            if b <= 10 {
                assert!(present[0], "seed {seed}: synced batch {b} lost");
            }
        }
        // What survives is a prefix of the batches.
        for b in 0..complete {
            assert!(
                engine.contains(&key(b * 10)),
                "seed {seed}: hole at batch {b}"
            );
        }
    }
}

fn build_store(vfs: &SimVfs, clock: &ManualClock) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let engine = Engine::open(sim_dir(), sim_options(vfs, clock)).unwrap();
    for round in 0..3 {
        for i in 0..60 {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
    }
    for i in 0..20 {
        engine.delete(&key(i * 3)).unwrap();
    }
    for i in 0..10 {
        engine.merge(&key(i * 5), b"+m").unwrap();
    }
    engine.put_with_expiry(b"expiring", b"soon", 1_500).unwrap();
    clock.set(2_000);
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = engine
        .iter()
        .map(|item| item.unwrap())
        .map(|(k, v)| (k, v.bytes))
        .collect();
    assert!(expected.len() > 30);
    engine.close().unwrap();
    expected
}

fn check_store(
    vfs: &SimVfs,
    clock: &ManualClock,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
    step: u64,
) {
    let engine = Engine::open(sim_dir(), sim_options(vfs, clock))
        .unwrap_or_else(|e| panic!("step {step}: reopen failed: {e}"));
    let got: BTreeMap<Vec<u8>, Vec<u8>> = engine
        .iter()
        .map(|item| item.unwrap())
        .map(|(k, v)| (k, v.bytes))
        .collect();
    assert_eq!(&got, expected, "step {step}: data differs after the crash");
}

#[test]
fn a_crash_at_any_step_of_compaction_keeps_the_data() {
    let clock = ManualClock::new(1_000);
    let base = SimVfs::new();
    let expected = build_store(&base, &clock);
    let mut finished = false;
    for step in 0..2_000u64 {
        let vfs = base.fork();
        let engine = Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap();
        vfs.stop_after_mutations(Some(vfs.mutations() + step));
        let result = engine.compact();
        let after = vfs.crash(step);
        drop(engine);
        check_store(&after, &clock, &expected, step);
        // The crashed store must also compact and reopen cleanly.
        if step % 16 == 0 {
            let engine = Engine::open(sim_dir(), sim_options(&after, &clock)).unwrap();
            engine.compact().unwrap();
            engine.close().unwrap();
            check_store(&after, &clock, &expected, step);
        }
        if result.is_ok() {
            finished = true;
            break;
        }
    }
    assert!(finished, "compaction never completed");
}

/// Under `Never` nobody asks for an fsync, but a segment's bytes do not all wait
/// for its rotation: each time the active segment grows by a writeback step (an
/// eighth of a segment) the background thread fsyncs it, and what it synced
/// survives a crash.
#[test]
fn never_writes_back_a_growing_segment_in_the_background() {
    use std::time::{Duration, Instant};
    let clock = ManualClock::new(1_000);
    let options = |vfs: &SimVfs| {
        sim_options(vfs, &clock)
            .with_fsync(FsyncPolicy::Never)
            .with_segment_size(1 << 20)
    };
    let vfs = SimVfs::new();
    let engine = Engine::open(sim_dir(), options(&vfs)).unwrap();
    let synced_at_open = vfs.syncs();
    // 400 records of about 1 KiB: three steps of 128 KiB, no rotation.
    let big = |i: u64| {
        let mut v = value(i, 0);
        v.resize(1_000, b'.');
        v
    };
    for i in 0..400 {
        engine.put(&key(i), &big(i)).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while vfs.syncs() == synced_at_open {
        assert!(
            Instant::now() < deadline,
            "no fsync after three writeback steps"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Once that fsync has finished, a crash keeps at least the first step's
    // records (128 KiB), whatever it cuts from the unsynced rest.
    let first_step_survives = |seed: u64| {
        let after = vfs.fork().crash(seed);
        let engine = Engine::open(sim_dir(), options(&after)).unwrap();
        (0..100).all(|i| engine.get(&key(i)).unwrap() == Some(big(i)))
    };
    while !(0..8).all(first_step_survives) {
        assert!(
            Instant::now() < deadline,
            "the fsynced records did not survive"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(engine);
}
