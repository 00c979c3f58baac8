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
