//! Damaged files: corruption is named by file and offset, repair keeps the
//! intact prefix, a torn tail is truncated.

use std::path::{Path, PathBuf};

use strata_engine::{Engine, Error};

use crate::common::{HEADER, RECORD, disk_options, flip, key, remove_hints, segment_files};

fn fill(dir: &Path, count: u64) {
    let engine = Engine::open(dir, disk_options()).unwrap();
    for i in 0..count {
        engine.put(&key(i), &[b'v'; 100]).unwrap();
    }
    engine.close().unwrap();
}

/// [`fill`], then the hints removed so that opening scans every segment; the
/// segment files, in order.
fn fill_unhinted(dir: &Path, count: u64) -> Vec<PathBuf> {
    fill(dir, count);
    remove_hints(dir);
    segment_files(dir)
}

#[test]
fn a_flipped_byte_mid_segment_names_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let first = fill_unhinted(dir.path(), 1_000).remove(0);
    flip(&first, HEADER + 10 * RECORD + 60);
    let err = Engine::open(dir.path(), disk_options()).unwrap_err();
    match &err {
        Error::Corrupt {
            segment, offset, ..
        } => {
            assert_eq!(segment, &first);
            assert_eq!(*offset, HEADER + 10 * RECORD);
        }
        other => panic!("expected Corrupt, got {other}"),
    }
    assert!(err.is_corruption());
    let text = err.to_string();
    assert!(
        text.contains(&first.display().to_string())
            && text.contains(&(HEADER + 10 * RECORD).to_string()),
        "{text}"
    );
}

#[test]
fn damage_in_the_last_segment_before_intact_records_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let last = fill_unhinted(dir.path(), 100).pop().unwrap();
    flip(&last, HEADER + 50 * RECORD + 40);
    let err = Engine::open(dir.path(), disk_options()).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt { offset, .. } if offset == HEADER + 50 * RECORD),
        "{err}"
    );
}

#[test]
fn repair_keeps_the_intact_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let segments = fill_unhinted(dir.path(), 1_500);
    assert!(segments.len() >= 3);
    flip(&segments[0], HEADER + 10 * RECORD + 60);
    let engine = Engine::open(dir.path(), disk_options().with_repair(true)).unwrap();
    for i in 0..10 {
        assert!(engine.contains(&key(i)), "key {i} of the prefix is lost");
    }
    for i in 10..1_000 {
        assert!(
            !engine.contains(&key(i)),
            "key {i} after the damage survived"
        );
    }
    engine.put(b"new", b"write").unwrap();
    engine.close().unwrap();
    let dropped = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".dropped")
        })
        .count();
    assert_eq!(dropped, segments.len() - 1, "later segments are set aside");
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert!(engine.contains(&key(9)));
    assert!(engine.contains(b"new"));
}

#[test]
fn a_torn_tail_is_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let last = fill_unhinted(dir.path(), 100).pop().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    assert_eq!(len, HEADER + 100 * RECORD);
    // Cut the last record short.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(len - 30)
        .unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for i in 0..99 {
        assert!(engine.contains(&key(i)));
    }
    assert!(!engine.contains(&key(99)));
    assert_eq!(
        std::fs::metadata(&last).unwrap().len(),
        HEADER + 99 * RECORD
    );
    drop(engine);

    // A garbage tail shorter than a header is torn as well.
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&last)
        .unwrap();
    use std::io::Write;
    (&file).write_all(&[0xab; 7]).unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert!(engine.contains(&key(98)));
}

#[test]
fn a_damaged_record_read_through_a_hint_is_a_checksum_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 100);
    let last = segment_files(dir.path()).last().unwrap().clone();
    flip(&last, HEADER + 5 * RECORD + 100);
    // The hint lets the store open without reading values...
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    // ...and the damage shows when the value is read.
    let err = engine.get(&key(5)).unwrap_err();
    assert!(matches!(err, Error::ChecksumMismatch { .. }), "{err}");
    assert!(engine.get(&key(6)).unwrap().is_some());
}

/// Writes `len` zeros at `offset` of the file at `path` (past its end too).
fn zero(path: &Path, offset: u64, len: usize) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&vec![0u8; len], offset).unwrap();
}

#[test]
fn zeros_after_the_last_records_are_no_damage_and_opening_trims_them() {
    let dir = tempfile::tempdir().unwrap();
    let last = fill_unhinted(dir.path(), 100).pop().unwrap();
    let len = HEADER + 100 * RECORD;
    // What a log writing zeros ahead of its records leaves when it stops.
    zero(&last, len, 10_000);
    let report = strata_engine::check(&strata_engine::OsVfs, dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
    let checked = report.segments.last().unwrap();
    assert_eq!((checked.zeros, checked.puts), (10_000, 100));

    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    for i in 0..100 {
        assert!(engine.contains(&key(i)));
    }
    assert_eq!(std::fs::metadata(&last).unwrap().len(), len);
}

#[test]
fn a_record_cut_short_by_zeros_is_a_torn_tail() {
    // The record's end, or part of its header, never replaced the zeros there.
    for cut in [RECORD - 30, 10] {
        let dir = tempfile::tempdir().unwrap();
        let last = fill_unhinted(dir.path(), 100).pop().unwrap();
        let start = HEADER + 99 * RECORD;
        zero(&last, start + cut, (RECORD - cut) as usize + 4096);
        let report = strata_engine::check(&strata_engine::OsVfs, dir.path()).unwrap();
        assert!(report.first_corruption().is_none(), "{report:?}");
        let engine = Engine::open(dir.path(), disk_options()).unwrap();
        for i in 0..99 {
            assert!(engine.contains(&key(i)));
        }
        assert!(!engine.contains(&key(99)));
        assert_eq!(std::fs::metadata(&last).unwrap().len(), start);
    }
}

#[test]
fn zeros_before_records_or_at_the_end_of_a_sealed_segment_are_corruption() {
    // A record of the last segment zeroed, intact records after it.
    let dir = tempfile::tempdir().unwrap();
    let last = fill_unhinted(dir.path(), 100).pop().unwrap();
    zero(&last, HEADER + 50 * RECORD, RECORD as usize);
    let err = Engine::open(dir.path(), disk_options()).unwrap_err();
    assert!(
        matches!(err, Error::Corrupt { offset, .. } if offset == HEADER + 50 * RECORD),
        "{err}"
    );

    // Sealing cuts a segment's zeros: zeros after a sealed segment's records
    // mean that something else wrote there.
    let dir = tempfile::tempdir().unwrap();
    let first = fill_unhinted(dir.path(), 1_000).remove(0);
    let len = std::fs::metadata(&first).unwrap().len();
    zero(&first, len, 4096);
    let err = Engine::open(dir.path(), disk_options()).unwrap_err();
    match &err {
        Error::Corrupt {
            segment, offset, ..
        } => assert_eq!((segment, *offset), (&first, len)),
        other => panic!("expected Corrupt, got {other}"),
    }
}

/// What [`cut_store`] holds after its first `steps` writes, key by key.
fn cut_store_state(steps: usize) -> Vec<(&'static [u8], Option<Vec<u8>>)> {
    let long = vec![b'c'; 200];
    let mut merged = long.clone();
    merged.extend_from_slice(b"+");
    vec![
        (b"a", (1..4).contains(&steps).then(|| b"1".to_vec())),
        (b"b", (steps >= 2).then(|| b"2".to_vec())),
        (
            b"c",
            match steps {
                0..=2 => None,
                3 => Some(long),
                _ => Some(merged),
            },
        ),
        (b"d", (steps >= 4).then(|| b"4".to_vec())),
        (b"e", (steps >= 5).then(|| b"5".to_vec())),
    ]
}

/// A store with records of every header shape after a first put: one-byte lengths,
/// an expiry, a two-byte length, a batch frame (a put, a delete, a merge), then a
/// small put again. Returns its one segment's name and bytes, and where each write
/// ended in them.
fn cut_store(dir: &Path) -> (String, Vec<u8>, Vec<u64>) {
    let engine = Engine::open(dir, disk_options()).unwrap();
    let path = segment_files(dir).pop().unwrap();
    let len = || std::fs::metadata(&path).unwrap().len();
    engine.put(b"base", b"0").unwrap();
    engine.flush().unwrap();
    let mut ends = vec![len()];
    let far = 4_102_444_800_000;
    let steps: [&dyn Fn(&Engine); 5] = [
        &|e| {
            e.put(b"a", b"1").unwrap();
        },
        &|e| {
            e.put_with_expiry(b"b", b"2", far).unwrap();
        },
        &|e| {
            e.put(b"c", &[b'c'; 200]).unwrap();
        },
        &|e| {
            let mut batch = strata_engine::WriteBatch::new();
            batch.put(b"d", b"4").delete(b"a").merge(b"c", b"+");
            e.write(&batch).unwrap();
        },
        &|e| {
            e.put(b"e", b"5").unwrap();
        },
    ];
    for step in steps {
        step(&engine);
        engine.flush().unwrap();
        ends.push(len());
    }
    engine.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, *ends.last().unwrap());
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    (name, bytes, ends)
}

/// Headers of several lengths: the end of the log cut at any byte of its last
/// records, with or without the zeros written ahead after the cut, opens with
/// exactly the writes that ended before the cut (a batch whole or not at all).
#[test]
fn a_cut_at_any_byte_keeps_the_writes_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (name, bytes, ends) = cut_store(dir.path());
    // Headers of 16, 24 (an expiry) and 17 bytes (a 200-byte value), then a frame
    // of 32 and its three records.
    let sizes: Vec<u64> = ends.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(sizes, [16 + 2, 24 + 2, 17 + 201, 32 + 18 + 17 + 18, 16 + 2]);
    for cut in ends[0]..=*ends.last().unwrap() {
        for zeros in [0usize, 64] {
            let copy = tempfile::tempdir().unwrap();
            let mut tail = bytes[..cut as usize].to_vec();
            tail.resize(tail.len() + zeros, 0);
            std::fs::write(copy.path().join(&name), &tail).unwrap();
            let engine = Engine::open(copy.path(), disk_options())
                .unwrap_or_else(|e| panic!("cut at {cut}, {zeros} zeros: {e}"));
            let steps = ends.iter().filter(|&&end| end <= cut).count() - 1;
            assert_eq!(engine.get(b"base").unwrap().as_deref(), Some(&b"0"[..]));
            for (key, want) in cut_store_state(steps) {
                assert_eq!(
                    engine.get(key).unwrap(),
                    want,
                    "cut at {cut} ({steps} writes whole), {zeros} zeros, key {}",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }
}
