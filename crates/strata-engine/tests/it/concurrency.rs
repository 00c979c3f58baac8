//! Group commit and readers that never wait for an fsync.

use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_engine::{Engine, ManualClock, SimVfs};

use crate::common::{key, sim_dir, sim_options, value};

#[test]
fn concurrent_writers_share_fsyncs() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let engine = Arc::new(Engine::open(sim_dir(), sim_options(&vfs, &clock)).unwrap());
    vfs.set_sync_delay(Some(Duration::from_millis(5)));
    let syncs_before = vfs.syncs();
    let (threads, per_thread) = (8u64, 25u64);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let k = t * 1_000 + i;
                    engine.put(&key(k), &value(k, 0)).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let writes = threads * per_thread;
    let syncs = vfs.syncs() - syncs_before;
    assert!(
        syncs * 2 < writes,
        "{writes} writes needed {syncs} fsyncs: no group commit"
    );
    for t in 0..threads {
        for i in 0..per_thread {
            assert!(engine.contains(&key(t * 1_000 + i)));
        }
    }
}

#[test]
fn readers_never_wait_for_an_fsync() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let options = sim_options(&vfs, &clock).with_write_buffer_size(64 << 10);
    let engine = Arc::new(Engine::open(sim_dir(), options).unwrap());
    engine.put(b"stable", b"value").unwrap();
    let fsync = Duration::from_millis(400);
    vfs.set_sync_delay(Some(fsync));
    let writer = {
        let engine = engine.clone();
        std::thread::spawn(move || {
            for i in 0..3 {
                engine.put(&key(i), &value(i, 0)).unwrap();
            }
        })
    };
    std::thread::sleep(Duration::from_millis(20));
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    while !writer.is_finished() {
        let t = Instant::now();
        assert_eq!(
            engine.get(b"stable").unwrap().as_deref(),
            Some(&b"value"[..])
        );
        // A key whose record is still in the write buffer, waiting for its fsync.
        let _ = engine.get(&key(0)).unwrap();
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(5));
    }
    writer.join().unwrap();
    assert!(
        started.elapsed() >= fsync,
        "the writer waited for its fsyncs"
    );
    assert!(
        slowest < fsync / 2,
        "a read took {slowest:?} while fsyncs took {fsync:?}"
    );
}
