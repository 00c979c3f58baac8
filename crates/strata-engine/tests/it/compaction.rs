//! Compaction in the background, with reads and writes going on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_engine::{CompactionTrigger, Engine};

use crate::common::{disk_options, key, value};

#[test]
fn reads_and_writes_continue_during_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(Engine::open(dir.path(), disk_options()).unwrap());
    for round in 0..3 {
        for i in 0..3_000 {
            engine.put(&key(i), &value(i, round)).unwrap();
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
    // Writers overwrite keys while the compactions run; readers check them.
    let mut round = 3;
    let mut passes = 0;
    while !done.load(Ordering::SeqCst) || passes < 2 {
        for i in (0..3_000).step_by(7) {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
        for i in 0..3_000 {
            let expected = if i % 7 == 0 {
                value(i, round)
            } else {
                value(i, 2)
            };
            assert_eq!(engine.get(&key(i)).unwrap(), Some(expected), "key {i}");
        }
        round += 1;
        passes += 1;
    }
    compactor.join().unwrap();
    let engine = Arc::into_inner(engine).unwrap();
    let stats = engine.stats();
    assert_eq!(stats.live_keys, 3_000);
    assert_eq!(stats.compactions, 3);
    engine.close().unwrap();

    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for i in 0..3_000 {
        let expected = if i % 7 == 0 {
            value(i, round - 1)
        } else {
            value(i, 2)
        };
        assert_eq!(engine.get(&key(i)).unwrap(), Some(expected));
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
