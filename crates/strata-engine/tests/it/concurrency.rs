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

/// Runs `f` on its own thread and returns its result, or `None` if it took more
/// than ten seconds (it is then left blocked).
fn within_ten_seconds<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(f());
    });
    receive.recv_timeout(Duration::from_secs(10)).ok()
}

#[test]
fn appends_and_buffered_reads_go_on_while_a_flush_writes() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let options = sim_options(&vfs, &clock)
        .with_fsync(strata_engine::FsyncPolicy::Never)
        .with_write_buffer_size(1 << 20);
    let engine = Arc::new(Engine::open(sim_dir(), options.clone()).unwrap());
    engine.put(b"first", b"1").unwrap();
    vfs.hold_writes(true);
    let flusher = {
        let engine = engine.clone();
        std::thread::spawn(move || engine.flush())
    };
    // Once the flush has taken the buffer, the record is being written: a read
    // that must not wait says so.
    let poller = engine.clone();
    let in_flight = within_ten_seconds(move || {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match poller.get_value_cached(b"first") {
                Err(e) if e.is_would_block() => return true,
                other => assert!(other.is_ok(), "{other:?}"),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    });
    assert_eq!(in_flight, Some(true), "the flush never took the buffer");
    // The write in progress holds up neither appends nor reads of what they buffer.
    let writer = engine.clone();
    let appended = within_ten_seconds(move || {
        writer.put(b"second", b"2").unwrap();
        writer.get(b"second").unwrap()
    });
    assert_eq!(
        appended,
        Some(Some(b"2".to_vec())),
        "an append waited for a write"
    );
    // A read of the record being written waits for the write, then finds it.
    let reader = engine.clone();
    let read = std::thread::spawn(move || reader.get(b"first"));
    vfs.hold_writes(false);
    flusher.join().unwrap().unwrap();
    assert_eq!(read.join().unwrap().unwrap().as_deref(), Some(&b"1"[..]));
    engine.flush().unwrap();
    drop(engine);
    let engine = Engine::open(sim_dir(), options).unwrap();
    assert_eq!(engine.get(b"first").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(engine.get(b"second").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn a_failed_write_leaves_the_buffered_records_readable() {
    let clock = ManualClock::new(1_000);
    let vfs = SimVfs::new();
    let options = sim_options(&vfs, &clock)
        .with_fsync(strata_engine::FsyncPolicy::Never)
        .with_write_buffer_size(1 << 20);
    let engine = Engine::open(sim_dir(), options).unwrap();
    engine.put(b"a", b"1").unwrap();
    engine.put(b"b", &[7u8; 300]).unwrap();
    // The write gets part of the bytes down, then fails.
    vfs.set_space(Some(40));
    assert!(engine.flush().is_err());
    assert_eq!(engine.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(engine.get(b"b").unwrap(), Some(vec![7u8; 300]));
    assert!(matches!(
        engine.put(b"c", b"3"),
        Err(strata_engine::Error::Poisoned { .. })
    ));
}
