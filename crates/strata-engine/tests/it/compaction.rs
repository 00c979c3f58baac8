//! Compaction in the background, with reads and writes going on.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use strata_engine::{CompactionTrigger, Engine};

use crate::common::{disk_options, flip, key, segment_files, value};

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

/// A keydir that counts compaction's questions and may list the keys' oldest
/// records (`index::heads_up_to`, which the keydir itself does not use), so that a
/// compaction skips the records it lacks.
#[derive(Debug, Default)]
struct Counted {
    keydir: strata_engine::Keydir,
    lists: bool,
    questions: std::sync::atomic::AtomicU64,
}

impl strata_engine::Index for Counted {
    fn get(&self, key: &[u8]) -> Option<strata_engine::KeyEntry> {
        self.keydir.get(key)
    }
    fn get_if_first(
        &self,
        key: &[u8],
        location: strata_engine::Location,
    ) -> Option<strata_engine::KeyEntry> {
        self.questions.fetch_add(1, Ordering::Relaxed);
        self.keydir.get_if_first(key, location)
    }
    fn first_locations(
        &self,
        upto: strata_engine::SegmentId,
        out: &mut Vec<strata_engine::Location>,
    ) -> bool {
        if self.lists {
            strata_engine::index::heads_up_to(&self.keydir, upto, out);
        }
        self.lists
    }
    fn for_each_head(&self, f: &mut dyn FnMut(&[u8], strata_engine::index::Head)) {
        self.keydir.for_each_head(f)
    }
    fn apply(&self, key: &[u8], change: strata_engine::index::Change) -> Option<u64> {
        self.keydir.apply(key, change)
    }
    fn take_freed(&self) -> u64 {
        self.keydir.take_freed()
    }
    fn replace_prefix(
        &self,
        key: &[u8],
        prefix: &[strata_engine::Location],
        replacement: strata_engine::Location,
    ) -> Option<u64> {
        self.keydir.replace_prefix(key, prefix, replacement)
    }
    fn remove_if(&self, key: &[u8], expected: &strata_engine::KeyEntry) -> Option<u64> {
        self.keydir.remove_if(key, expected)
    }
    fn len(&self) -> u64 {
        self.keydir.len()
    }
    fn scan(&self, token: &[u8]) -> strata_engine::index::ScanChunk {
        self.keydir.scan(token)
    }
}

#[test]
fn listing_the_oldest_records_keeps_what_asking_per_record_keeps() {
    use strata_engine::{ManualClock, WriteBatch, WriteMeta};
    const KEYS: u64 = 50;
    let run = |lists: bool| {
        let clock = ManualClock::new(1_000_000);
        let dir = tempfile::tempdir().unwrap();
        let index = Arc::new(Counted {
            lists,
            ..Counted::default()
        });
        let options = disk_options().with_clock(Arc::new(clock.clone()));
        let engine = Engine::open_with_index(dir.path(), options, Box::new(index.clone())).unwrap();
        // Many records a key: overwrites, chains of operations, deletes, keys that
        // expire, batches; then a compaction with writes after it, and another.
        for round in 0..40u64 {
            for i in 0..KEYS {
                match (i + round) % 6 {
                    0 | 1 => drop(engine.put(&key(i), &value(i, round)).unwrap()),
                    2 => drop(engine.merge(&key(i), b"+").unwrap()),
                    3 if i % 4 == 0 => drop(engine.delete(&key(i)).unwrap()),
                    4 => {
                        let mut batch = WriteBatch::new();
                        let meta = WriteMeta::new().with_expiry(1_000_000 + 500 * (i % 3));
                        batch.put_with(&key(i), &value(i, round), meta);
                        batch.merge(&key(i + KEYS), b"*");
                        engine.write(&batch).unwrap();
                    }
                    _ => drop(engine.merge(&key(i + KEYS), b"-").unwrap()),
                }
            }
            if round == 25 {
                engine.compact().unwrap();
            }
        }
        clock.set(1_000_600);
        let report = engine.compact().unwrap();
        let contents: Vec<_> = (0..2 * KEYS)
            .map(|i| engine.get(&key(i)).unwrap())
            .collect();
        engine.close().unwrap();
        let options = disk_options().with_clock(Arc::new(clock.clone()));
        let reopened = Engine::open(dir.path(), options).unwrap();
        for (i, want) in contents.iter().enumerate() {
            assert_eq!(
                &reopened.get(&key(i as u64)).unwrap(),
                want,
                "key {i} reopened"
            );
        }
        (report, contents, index.questions.load(Ordering::Relaxed))
    };
    let (asked, asked_contents, asked_questions) = run(false);
    let (listed, listed_contents, listed_questions) = run(true);
    assert_eq!(listed_contents, asked_contents);
    assert_eq!(listed, asked);
    assert!(asked.keys_expired > 0 && asked.keys_kept > 0, "{asked:?}");
    // Asking per record questions every key's run of records; the list leaves only
    // the keys' oldest records to ask about.
    assert!(
        asked_questions > 10 * listed_questions,
        "{asked_questions} vs {listed_questions}"
    );
    assert!(listed_questions <= 2 * 2 * KEYS, "{listed_questions}");
}

#[test]
fn a_compaction_that_lists_the_oldest_records_reads_no_other() {
    // Many versions of a few keys: the first segment holds only dead records by
    // the end, and a byte flipped in its first record is in no live record.
    const KEYS: u64 = 20;
    const ROUNDS: u64 = 200;
    let run = |lists: bool| {
        let dir = tempfile::tempdir().unwrap();
        let index = Arc::new(Counted {
            lists,
            ..Counted::default()
        });
        let engine =
            Engine::open_with_index(dir.path(), disk_options(), Box::new(index.clone())).unwrap();
        for round in 0..ROUNDS {
            for i in 0..KEYS {
                engine.put(&key(i), &value(i, round)).unwrap();
            }
        }
        engine.flush().unwrap();
        let segments = segment_files(dir.path());
        assert!(segments.len() > 2, "{segments:?}");
        // The first record's key, past the segment's and the record's headers.
        flip(&segments[0], 16 + 32 + 2);
        let result = engine.compact();
        let contents: Vec<_> = (0..KEYS).map(|i| engine.get(&key(i)).unwrap()).collect();
        engine.close().unwrap();
        (dir, result, contents)
    };
    let latest: Vec<_> = (0..KEYS).map(|i| Some(value(i, ROUNDS - 1))).collect();
    let (dir, listed, contents) = run(true);
    let report = listed.unwrap();
    assert!(report.inputs > 2 && report.keys_kept == KEYS, "{report:?}");
    assert_eq!(contents, latest);
    let reopened = Engine::open(dir.path(), disk_options()).unwrap();
    let reread: Vec<_> = (0..KEYS).map(|i| reopened.get(&key(i)).unwrap()).collect();
    assert_eq!(reread, latest);
    // Reading every record, the same compaction stops at the damage, and keeps
    // every value where it was.
    let (_dir, scanned, contents) = run(false);
    assert!(scanned.unwrap_err().is_corruption());
    assert_eq!(contents, latest);
}
