//! The public API, on the real file system.

use std::sync::Arc;

use strata_engine::log::{Entry, Replayed};
use strata_engine::record::Kind;
use strata_engine::{Engine, Error, Log, LogOptions, ManualClock, Options, WriteBatch, WriteMeta};

use crate::common::{disk_options, key, remove_hints, value};

#[test]
fn put_get_delete_contains() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert_eq!(engine.get(b"missing").unwrap(), None);
    engine.put(b"k", b"v1").unwrap();
    engine.put(b"k", b"v2").unwrap();
    assert_eq!(engine.get(b"k").unwrap().as_deref(), Some(&b"v2"[..]));
    assert!(engine.contains(b"k"));
    assert!(engine.delete(b"k").unwrap());
    assert!(!engine.delete(b"k").unwrap());
    assert!(!engine.contains(b"k"));
    assert_eq!(engine.get(b"k").unwrap(), None);
    engine.put(b"", b"empty key").unwrap();
    engine.put(b"empty value", b"").unwrap();
    assert_eq!(engine.get(b"").unwrap().as_deref(), Some(&b"empty key"[..]));
    assert_eq!(
        engine.get(b"empty value").unwrap().as_deref(),
        Some(&b""[..])
    );
    engine.close().unwrap();

    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert_eq!(engine.get(b"k").unwrap(), None);
    assert_eq!(engine.get(b"").unwrap().as_deref(), Some(&b"empty key"[..]));
}

#[test]
fn versions_are_stored_and_returned() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    let v1 = engine.put(b"a", b"1").unwrap();
    let v2 = engine.put(b"b", b"2").unwrap();
    assert!(v2 > v1);
    engine
        .put_with(b"c", b"3", WriteMeta::new().with_version(1_000))
        .unwrap();
    assert_eq!(engine.get_value(b"c").unwrap().unwrap().version, 1_000);
    assert!(engine.put(b"d", b"4").unwrap() > 1_000);
    engine.close().unwrap();

    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    let c = engine.get_value(b"c").unwrap().unwrap();
    assert_eq!(
        (c.bytes.as_slice(), c.version, c.expires_at),
        (&b"3"[..], 1_000, None)
    );
    assert!(engine.put(b"e", b"5").unwrap() > 1_001);
}

#[test]
fn expired_keys_are_absent() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(10_000);
    let options = disk_options().with_clock(Arc::new(clock.clone()));
    let engine = Engine::open(dir.path(), options.clone()).unwrap();
    engine.put_with_expiry(b"short", b"s", 10_500).unwrap();
    engine.put_with_expiry(b"long", b"l", 99_000).unwrap();
    engine.put(b"forever", b"f").unwrap();
    assert_eq!(
        engine.get_value(b"short").unwrap().unwrap().expires_at,
        Some(10_500)
    );
    clock.set(10_500);
    assert_eq!(engine.get(b"short").unwrap(), None);
    assert!(!engine.contains(b"short"));
    // Until compaction drops it, a caller keeping its own clock can still read it.
    let late = engine.get_value_expired_too(b"short").unwrap().unwrap();
    assert_eq!(
        (late.bytes.as_slice(), late.expires_at),
        (&b"s"[..], Some(10_500))
    );
    assert!(
        engine
            .get_value_expired_too(b"never-written")
            .unwrap()
            .is_none()
    );
    let mut keys: Vec<_> = engine.keys().collect();
    keys.sort();
    assert_eq!(keys, vec![b"forever".to_vec(), b"long".to_vec()]);
    engine.close().unwrap();

    let engine = Engine::open(dir.path(), options).unwrap();
    assert_eq!(engine.get(b"short").unwrap(), None);
    assert_eq!(engine.get(b"long").unwrap().as_deref(), Some(&b"l"[..]));
    let report = engine.compact().unwrap();
    assert_eq!(report.keys_expired, 1);
    assert_eq!(engine.stats().live_keys, 2);
}

#[test]
fn merges_fold_onto_the_last_full_value() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let options = disk_options().with_clock(Arc::new(clock.clone()));
    let engine = Engine::open(dir.path(), options.clone()).unwrap();
    engine.merge(b"list", b"a").unwrap();
    engine.merge(b"list", b"b").unwrap();
    assert_eq!(engine.get(b"list").unwrap().as_deref(), Some(&b"ab"[..]));
    engine.put(b"list", b"X").unwrap();
    engine.merge(b"list", b"c").unwrap();
    assert_eq!(engine.get(b"list").unwrap().as_deref(), Some(&b"Xc"[..]));
    engine.delete(b"list").unwrap();
    engine.merge(b"list", b"d").unwrap();
    assert_eq!(engine.get(b"list").unwrap().as_deref(), Some(&b"d"[..]));

    // A merge keeps the key's expiry unless it brings its own.
    engine.put_with_expiry(b"ttl", b"1", 5_000).unwrap();
    engine.merge(b"ttl", b"2").unwrap();
    assert_eq!(
        engine.get_value(b"ttl").unwrap().unwrap().expires_at,
        Some(5_000)
    );
    // A merge onto an expired key starts from nothing, also after a reopen.
    clock.set(6_000);
    engine.merge(b"ttl", b"3").unwrap();
    let ttl = engine.get_value(b"ttl").unwrap().unwrap();
    assert_eq!((ttl.bytes.as_slice(), ttl.expires_at), (&b"3"[..], None));
    engine.close().unwrap();

    let engine = Engine::open(dir.path(), options.clone()).unwrap();
    assert_eq!(engine.get(b"ttl").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(engine.get(b"list").unwrap().as_deref(), Some(&b"d"[..]));
    engine.compact().unwrap();
    assert_eq!(engine.get(b"list").unwrap().as_deref(), Some(&b"d"[..]));
    engine.close().unwrap();

    let no_operator = Options {
        merge_operator: None,
        ..options
    };
    let engine = Engine::open(dir.path(), no_operator).unwrap();
    engine.merge(b"list", b"e").unwrap();
    assert!(matches!(engine.get(b"list"), Err(Error::NoMergeOperator)));
}

#[test]
fn batches_apply_every_operation() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    engine.put(b"gone", b"x").unwrap();
    let mut batch = WriteBatch::new();
    batch
        .put(b"a", b"1")
        .put_with(b"b", b"2", WriteMeta::new().with_version(77))
        .merge(b"a", b"+")
        .delete(b"gone");
    assert_eq!(batch.len(), 4);
    engine.write(&batch).unwrap();
    engine.write(&WriteBatch::new()).unwrap();
    assert_eq!(engine.get(b"a").unwrap().as_deref(), Some(&b"1+"[..]));
    assert_eq!(engine.get_value(b"b").unwrap().unwrap().version, 77);
    assert_eq!(engine.get(b"gone").unwrap(), None);
    engine.close().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert_eq!(engine.get(b"a").unwrap().as_deref(), Some(&b"1+"[..]));
    assert_eq!(engine.get(b"gone").unwrap(), None);
}

#[test]
fn iteration_and_fold_see_live_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for i in 0..500 {
        engine.put(&key(i), &value(i, 0)).unwrap();
    }
    for i in 0..100 {
        engine.delete(&key(i)).unwrap();
    }
    let mut keys: Vec<_> = engine.keys().collect();
    keys.sort();
    assert_eq!(keys, (100..500).map(key).collect::<Vec<_>>());
    let bytes = engine
        .fold(0usize, |acc, _, v| acc + v.bytes.len())
        .unwrap();
    let expected: usize = (100..500).map(|i| value(i, 0).len()).sum();
    assert_eq!(bytes, expected);
    assert_eq!(engine.iter().count(), 400);
}

#[test]
fn stats_count_live_and_dead_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for round in 0..4 {
        for i in 0..1_000 {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
    }
    let before = engine.stats();
    assert_eq!(before.live_keys, 1_000);
    assert!(before.segments > 2);
    assert!(before.dead_bytes > before.live_bytes);
    assert_eq!(before.total_bytes, before.live_bytes + before.dead_bytes);
    let report = engine.compact().unwrap();
    assert_eq!(report.keys_kept, 1_000);
    let after = engine.stats();
    assert_eq!(after.compactions, 1);
    assert_eq!(after.live_keys, 1_000);
    assert_eq!(after.live_bytes, before.live_bytes);
    assert!(after.total_bytes < before.total_bytes / 2);
    assert!(after.dead_bytes < 1024);
}

#[test]
fn a_second_engine_on_the_same_directory_is_locked_out() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    let err = Engine::open(dir.path(), disk_options()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(err.to_string().contains("locked"));
    engine.close().unwrap();
    Engine::open(dir.path(), disk_options()).unwrap();
}

#[test]
fn hints_and_scans_rebuild_the_same_keydir() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for i in 0..2_000 {
        engine.put(&key(i), &value(i, 1)).unwrap();
        if i % 3 == 0 {
            engine.merge(&key(i), b"!").unwrap();
        }
        if i % 7 == 0 {
            engine.delete(&key(i)).unwrap();
        }
    }
    let stats = engine.stats();
    engine.close().unwrap();
    let hints = hint_count(dir.path());
    assert!(hints > 1, "a clean close leaves hint files");

    let check = |engine: &Engine| {
        for i in 0..2_000 {
            let mut expected = value(i, 1);
            if i % 3 == 0 {
                expected.push(b'!');
            }
            let got = engine.get(&key(i)).unwrap();
            if i % 7 == 0 {
                assert_eq!(got, None);
            } else {
                assert_eq!(got, Some(expected));
            }
        }
    };
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    check(&engine);
    assert_eq!(engine.stats().live_bytes, stats.live_bytes);
    engine.close().unwrap();
    remove_hints(dir.path());
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    check(&engine);
    assert_eq!(engine.stats().live_bytes, stats.live_bytes);
    engine.close().unwrap();
    // The scan rebuilt the missing hints.
    assert_eq!(hint_count(dir.path()), hints);
}

#[test]
fn a_hint_larger_than_its_write_buffer_reopens_the_store() {
    // Hints are built by reading a sealed segment back and written out a
    // megabyte at a time; one segment of 150,000 small records needs several.
    let dir = tempfile::tempdir().unwrap();
    let options = || disk_options().with_segment_size(64 << 20);
    let engine = Engine::open(dir.path(), options()).unwrap();
    let batch_of = |from: u64| {
        let mut batch = WriteBatch::new();
        for i in from..from + 100 {
            batch.put(&key(i), &value(i, 2));
        }
        batch
    };
    for from in (0..150_000u64).step_by(100) {
        engine.write(&batch_of(from)).unwrap();
    }
    engine.close().unwrap();
    let hint = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "hint"))
        .expect("a clean close leaves a hint");
    let bytes = std::fs::read(&hint).unwrap();
    assert!(bytes.len() > 2 << 20);
    // Intact (a damaged hint would be ignored, its segment scanned instead).
    let entries = strata_engine::hint::decode(&bytes).unwrap();
    assert_eq!(entries.map(Result::unwrap).count(), 150_000);
    let engine = Engine::open(dir.path(), options()).unwrap();
    assert_eq!(engine.stats().live_keys, 150_000);
    for i in (0..150_000u64).step_by(997) {
        assert_eq!(engine.get(&key(i)).unwrap(), Some(value(i, 2)));
    }
}

fn hint_count(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "hint")
        })
        .count()
}

#[test]
fn values_larger_than_a_segment_get_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    let big = vec![7u8; 200 << 10];
    engine.put(b"small", b"s").unwrap();
    engine.put(b"big", &big).unwrap();
    engine.put(b"after", b"a").unwrap();
    assert_eq!(engine.get(b"big").unwrap(), Some(big.clone()));
    engine.close().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert_eq!(engine.get(b"big").unwrap(), Some(big));
    assert_eq!(engine.get(b"after").unwrap().as_deref(), Some(&b"a"[..]));
}

#[test]
fn many_records_read_together_read_as_one_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let options = LogOptions {
        segment_size: 64 << 10,
        ..LogOptions::default()
    };
    let log = Log::open(dir.path(), options, &mut |_: &Replayed<'_>| {}).unwrap();
    let mut locations = Vec::new();
    for i in 0..3_000u64 {
        // Small records, now and then a big one (a gap wider than a run allows).
        let value = if i % 500 == 7 {
            vec![b'x'; 9_000]
        } else {
            value(i, 0)
        };
        let entry = Entry {
            kind: if i % 3 == 0 { Kind::Put } else { Kind::Merge },
            key: &key(i % 10),
            value: &value,
            version: i,
            expires_at: 0,
        };
        locations.push(log.append(&entry).unwrap());
        if i == 2_500 {
            // What follows stays in the write buffer for a while.
            log.flush().unwrap();
        }
    }
    let one_key: Vec<_> = locations.iter().copied().step_by(10).collect();
    let mut backwards = locations[..200].to_vec();
    backwards.reverse();
    for wanted in [
        &locations[..],
        &one_key[..],
        &backwards[..],
        &locations[2_400..2_600],
        &[][..],
    ] {
        let together = log.read_many(wanted).unwrap();
        let alone: Vec<_> = wanted.iter().map(|l| log.read(*l).unwrap()).collect();
        assert_eq!(together, alone);
    }
}

#[test]
fn compaction_folds_long_merge_chains() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    let mut hot = Vec::new();
    let mut sparse = Vec::new();
    for i in 0..5_000u64 {
        // A hot key's operands, close together; another's, far apart; values between.
        let op = format!("{i},");
        engine.merge(b"hot", op.as_bytes()).unwrap();
        hot.extend_from_slice(op.as_bytes());
        if i % 100 == 0 {
            engine.merge(b"sparse", op.as_bytes()).unwrap();
            sparse.extend_from_slice(op.as_bytes());
            engine.put(&key(i), &vec![b'v'; 8_000]).unwrap();
        }
        engine.put(&key(i % 50), &value(i, 1)).unwrap();
    }
    let report = engine.compact().unwrap();
    assert!(report.inputs > 1, "{report:?}");
    assert_eq!(engine.get(b"hot").unwrap(), Some(hot.clone()));
    assert_eq!(engine.get(b"sparse").unwrap(), Some(sparse.clone()));
    engine.close().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert_eq!(engine.get(b"hot").unwrap(), Some(hot));
    assert_eq!(engine.get(b"sparse").unwrap(), Some(sparse));
}

#[test]
fn the_log_layer_works_without_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let options = LogOptions::default();
    let mut replayed = 0;
    let log = Log::open(dir.path(), options.clone(), &mut |_: &Replayed<'_>| {
        replayed += 1
    })
    .unwrap();
    assert_eq!(replayed, 0);
    let put = Entry {
        kind: Kind::Put,
        key: b"k",
        value: b"v",
        version: 9,
        expires_at: 0,
    };
    let location = log.append(&put).unwrap();
    let record = log.read(location).unwrap();
    assert_eq!(
        (record.key(), record.value(), record.version()),
        (&b"k"[..], &b"v"[..], 9)
    );
    let batch = [
        Entry { key: b"x", ..put },
        Entry {
            kind: Kind::Delete,
            key: b"k",
            value: b"",
            ..put
        },
    ];
    let locations = log.append_with(&batch, <[_]>::to_vec).unwrap();
    assert_eq!(locations.len(), 2);
    assert_eq!(log.read(locations[0]).unwrap().key(), b"x");
    log.sync().unwrap();
    log.close().unwrap();
    drop(log);

    let mut seen = Vec::new();
    let log = Log::open(dir.path(), options, &mut |r: &Replayed<'_>| {
        seen.push((r.kind, r.key.to_vec(), r.location));
    })
    .unwrap();
    assert_eq!(
        seen,
        vec![
            (Kind::Put, b"k".to_vec(), location),
            (Kind::Put, b"x".to_vec(), locations[0]),
            (Kind::Delete, b"k".to_vec(), locations[1]),
        ]
    );
    assert_eq!(log.read(location).unwrap().value(), b"v");
}

/// What `for_each_live_ahead` passes on, sorted, having checked that on each
/// thread every key it names ahead is passed on after it, in the order named, at
/// most two keys later, and that most keys were named ahead.
fn scanned_ahead(engine: &Engine, threads: usize) -> Vec<(Vec<u8>, Vec<u8>, Option<u64>)> {
    use std::collections::VecDeque;
    // (thread, named ahead rather than passed on, key), in the order they happened.
    let events = std::sync::Mutex::new(Vec::new());
    let seen = std::sync::Mutex::new(Vec::new());
    let ahead = |k: &[u8]| {
        let id = std::thread::current().id();
        events.lock().unwrap().push((id, true, k.to_vec()));
    };
    engine
        .for_each_live_ahead(threads, ahead, |k, v, at, _| {
            let id = std::thread::current().id();
            events.lock().unwrap().push((id, false, k.to_vec()));
            seen.lock().unwrap().push((k.to_vec(), v.to_vec(), at));
            Ok(())
        })
        .unwrap();
    let events = events.into_inner().unwrap();
    let named = events.iter().filter(|e| e.1).count();
    let passed = events.len() - named;
    // Only the keys whose value is a chain of merge operands, built after the
    // scans, are passed on without being named ahead.
    assert!(named * 2 > passed, "{named} of {passed} named ahead");
    let ids: std::collections::HashSet<_> = events.iter().map(|e| e.0).collect();
    for id in ids {
        let mut waiting: VecDeque<&Vec<u8>> = VecDeque::new();
        for (_, is_ahead, k) in events.iter().filter(|e| e.0 == id) {
            if *is_ahead {
                waiting.push_back(k);
                assert!(waiting.len() <= 3, "passed on more than two keys late");
            } else if waiting.front() == Some(&k) {
                waiting.pop_front();
            } else {
                assert!(!waiting.contains(&k), "passed on out of order");
            }
        }
        assert!(waiting.is_empty(), "named ahead, never passed on");
    }
    let mut seen = seen.into_inner().unwrap();
    // Big values are passed on as read, not named ahead.
    let big: Vec<_> = seen.iter().filter(|(_, v, _)| v.len() > 4096).collect();
    assert_eq!(big.len(), 3);
    for (k, _, _) in big {
        assert!(
            !events.iter().any(|e| e.1 && e.2 == *k),
            "{k:?} named ahead"
        );
    }
    seen.sort();
    seen
}

#[test]
fn for_each_live_sees_exactly_what_iteration_sees() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000);
    let options = disk_options().with_clock(Arc::new(clock.clone()));
    let engine = Engine::open(dir.path(), options.clone()).unwrap();
    for round in 0..3 {
        for i in 0..2_000 {
            engine.put(&key(i), &value(i, round)).unwrap();
        }
    }
    for i in (0..2_000).step_by(7) {
        engine.delete(&key(i)).unwrap();
    }
    for i in (0..2_000).step_by(5) {
        engine.merge(&key(i), b"+m").unwrap();
    }
    // Values too big to be copied aside by `for_each_live_ahead`.
    for i in 0..3u8 {
        engine
            .put(&[b'B', i], &vec![i; 5_000 + usize::from(i)])
            .unwrap();
    }
    // Merge chains without a base, expired and expiring keys, a batch.
    engine.merge(b"chain", b"a").unwrap();
    engine.merge(b"chain", b"b").unwrap();
    engine.put_with_expiry(b"gone", b"x", 1_500).unwrap();
    engine.put_with_expiry(b"stays", b"y", 9_000).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"b1", b"1");
    batch.merge(b"b1", b"2");
    batch.delete(&key(3));
    engine.write(&batch).unwrap();
    clock.set(2_000);

    let expected = |engine: &Engine| {
        let mut all: Vec<(Vec<u8>, Vec<u8>, Option<u64>)> = engine
            .iter()
            .map(|r| r.unwrap())
            .map(|(k, v)| (k, v.bytes, v.expires_at))
            .collect();
        all.sort();
        all
    };
    let scanned = |engine: &Engine, threads| {
        let seen = std::sync::Mutex::new(Vec::new());
        engine
            .for_each_live(threads, |k, v, at, _| {
                seen.lock().unwrap().push((k.to_vec(), v.to_vec(), at));
                Ok(())
            })
            .unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        let with_ahead = scanned_ahead(engine, threads);
        assert_eq!(with_ahead, seen);
        seen
    };
    let want = expected(&engine);
    assert!(want.iter().any(|(k, v, _)| k == b"chain" && v == b"ab"));
    assert!(
        want.iter()
            .any(|(k, _, at)| k == b"stays" && *at == Some(9_000))
    );
    assert!(!want.iter().any(|(k, _, _)| k == b"gone"));
    assert_eq!(scanned(&engine, 1), want);
    assert_eq!(scanned(&engine, 4), want);
    // Counting by prefix sees every key with an entry, the expired one included.
    let counts = engine.count_by_prefix(2);
    assert_eq!(counts.get(&b"st"[..]), Some(&1));
    assert_eq!(counts.get(&b"go"[..]), Some(&1));
    assert_eq!(counts.values().sum::<u64>(), want.len() as u64 + 1);
    // After a reopen (hints) and after a compaction, the same.
    engine.close().unwrap();
    let engine = Engine::open(dir.path(), options).unwrap();
    assert_eq!(scanned(&engine, 3), want);
    engine.compact().unwrap();
    assert_eq!(scanned(&engine, 2), want);
    // Compaction dropped the expired key: the counts are the live keys.
    let counts = engine.count_by_prefix(2);
    assert_eq!(counts.get(&b"go"[..]), None);
    assert_eq!(counts.values().sum::<u64>(), want.len() as u64);
}

#[test]
fn cached_reads_never_wait_for_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(dir.path(), Options::default()).unwrap();
    engine.put(b"k", b"in the write buffer").unwrap();
    // Still in the engine's buffer: always readable without I/O.
    let v = engine.get_value_cached(b"k").unwrap().unwrap();
    assert_eq!(v.bytes, b"in the write buffer");
    assert!(engine.get_value_cached(b"missing").unwrap().is_none());
    engine.flush().unwrap();
    // In the file now: read from the operating system's cache, or refused where
    // the file system cannot say without waiting; never anything else.
    match engine.get_value_cached(b"k") {
        Ok(Some(v)) => assert_eq!(v.bytes, b"in the write buffer"),
        Err(e) if e.is_would_block() => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        engine.get(b"k").unwrap().as_deref(),
        Some(&b"in the write buffer"[..])
    );
}
