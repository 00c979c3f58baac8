//! Compaction in the background, with reads and writes going on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_engine::{CompactionTrigger, Engine};

use crate::common::{disk_options, key, value};

#[test]
fn reads_and_writes_continue_during_compaction() {
    const KEYS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::open(dir.path(), disk_options()).unwrap());
    let mut expected: Vec<Vec<u8>> = Vec::new();
    for round in 0..3 {
        for i in 0..KEYS {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
    }
    for i in 0..KEYS {
        expected.push(value(i, 2));
        if i % 5 == 0 {
            engine.merge(&key(i), b"<").unwrap();
            expected[i as usize].push(b'<');
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let compactor = {
        let engine = engine.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            for _ in 0..3 {
                engine.compact().unwrap();
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    // While the compactions run, keys are overwritten, merged into and
    // deleted, and every key is read back.
    let mut round = 3;
    let mut passes = 0;
    while !done.load(Ordering::SeqCst) || passes < 2 {
        for i in 0..KEYS {
            let slot = &mut expected[i as usize];
            if i % 7 == 0 {
                *slot = value(i, round);
                engine.put(&key(i), slot).unwrap();
            } else if i % 11 == 0 {
                engine.merge(&key(i), b"+").unwrap();
                slot.push(b'+');
            } else if i % 13 == 0 && round % 2 == 0 {
                engine.delete(&key(i)).unwrap();
                slot.clear();
            } else if i % 13 == 0 {
                *slot = value(i, round);
                engine.put(&key(i), slot).unwrap();
            }
        }
        for i in 0..KEYS {
            let want = &expected[i as usize];
            let got = engine.get(&key(i)).unwrap();
            if want.is_empty() {
                assert_eq!(got, None, "key {i}");
            } else {
                assert_eq!(got.as_ref(), Some(want), "key {i}");
            }
        }
        round += 1;
        passes += 1;
    }
    compactor.join().unwrap();
    let engine = Arc::into_inner(engine).unwrap();
    assert_eq!(engine.stats().compactions, 3);
    engine.close().unwrap();

    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for i in 0..KEYS {
        let want = &expected[i as usize];
        let got = engine.get(&key(i)).unwrap();
        if want.is_empty() {
            assert_eq!(got, None, "key {i} after reopen");
        } else {
            assert_eq!(got.as_ref(), Some(want), "key {i} after reopen");
        }
    }
}

#[test]
fn the_background_thread_compacts_when_the_trigger_fires() {
    let dir = tempfile::tempdir().unwrap();
    let options = disk_options().with_compaction(Some(CompactionTrigger {
        dead_ratio: 0.5,
        min_dead_bytes: 64 << 10,
        check_interval: Duration::from_millis(20),
    }));
    let engine = Engine::open(dir.path(), options).unwrap();
    for round in 0..5 {
        for i in 0..1_000 {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
    }
    // Compactions run until dead bytes fall below the trigger's share.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = engine.stats();
        if stats.compactions > 0 && stats.dead_bytes < stats.total_bytes / 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no background compaction: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..1_000 {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 4)));
    }
}
