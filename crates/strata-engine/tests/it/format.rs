//! Stores written by an earlier format version.

use std::path::Path;

use strata_engine::{Engine, SegmentId};

use crate::common::{disk_options, segment_files};

/// A record with a wide header, as format version 1 laid out every record.
fn wide(kind: u8, key: &[u8], value: &[u8], version: u64, expires_at: u64) -> Vec<u8> {
    let mut out = vec![0u8; 32];
    out[4] = kind;
    out[8..12].copy_from_slice(&(key.len() as u32).to_le_bytes());
    out[12..16].copy_from_slice(&(value.len() as u32).to_le_bytes());
    out[16..24].copy_from_slice(&version.to_le_bytes());
    out[24..32].copy_from_slice(&expires_at.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32c::crc32c(&out[4..]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A segment of format version 1: a put, a batch frame (a put and a delete), and a
/// put with an expiry.
fn write_version_1(dir: &Path) {
    let mut seg = b"STRATSEG".to_vec();
    seg.extend_from_slice(&1u32.to_le_bytes());
    seg.extend_from_slice(&[0; 4]);
    seg.extend_from_slice(&wide(1, b"a", b"1", 1, 0));
    let body = [wide(1, b"b", b"2", 2, 0), wide(2, b"a", b"", 3, 0)].concat();
    // A frame's header: no key, the body as its value, the count as its version.
    seg.extend_from_slice(&wide(4, b"", &body, 2, 0));
    seg.extend_from_slice(&wide(1, b"c", b"3", 4, 4_102_444_800_000));
    std::fs::write(dir.join(SegmentId(1 << 20).file_name()), seg).unwrap();
}

fn check(engine: &Engine) {
    assert_eq!(engine.get(b"a").unwrap(), None);
    assert_eq!(engine.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    let c = engine.get_value(b"c").unwrap().unwrap();
    assert_eq!(c.expires_at, Some(4_102_444_800_000));
    assert_eq!(engine.get(b"d").unwrap().as_deref(), Some(&b"4"[..]));
}

#[test]
fn a_store_of_format_version_1_opens_reads_and_compacts() {
    let dir = tempfile::tempdir().unwrap();
    write_version_1(dir.path());
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    // New records go after the old ones, in the new layout.
    engine.put(b"d", b"4").unwrap();
    check(&engine);
    engine.close().unwrap();

    // Reopened from the hints written at close, then compacted into one segment of
    // the new version.
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    check(&engine);
    engine.compact().unwrap();
    check(&engine);
    engine.close().unwrap();
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    check(&engine);
    engine.close().unwrap();
    for seg in segment_files(dir.path()) {
        let bytes = std::fs::read(&seg).unwrap();
        assert_eq!(&bytes[8..12], &2u32.to_le_bytes(), "{}", seg.display());
    }
}

/// The bytes of a hint of format version 1 (29 fixed bytes an entry) holding the
/// entries of `hint`.
fn hint_version_1(hint: &[u8]) -> Vec<u8> {
    let mut out = b"STRATHNT".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let mut count = 0u64;
    for e in strata_engine::hint::decode(hint).unwrap() {
        let e = e.unwrap();
        out.push(e.kind as u8);
        out.extend_from_slice(&(e.key.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.version.to_le_bytes());
        out.extend_from_slice(&e.expires_at.to_le_bytes());
        out.extend_from_slice(e.key);
        count += 1;
    }
    out.extend_from_slice(&count.to_le_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn a_store_with_hints_of_format_version_1_opens_from_them() {
    let dir = tempfile::tempdir().unwrap();
    write_version_1(dir.path());
    // Opened by a scan, closed: the segment gets a hint of the current version.
    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    engine.close().unwrap();
    let id = SegmentId(1 << 20);
    let hint_path = dir.path().join(id.hint_name());
    let hint = std::fs::read(&hint_path).unwrap();
    assert_eq!(&hint[8..12], &2u32.to_le_bytes());
    // The same entries, as format version 1 spelled them.
    let old = hint_version_1(&hint);
    // Five bytes an entry now, and six more for c's expiry, against 29.
    assert_eq!(old.len() - hint.len(), 4 * 29 - (5 + 5 + 5 + 11));
    std::fs::write(&hint_path, &old).unwrap();
    // Damage b's value inside the batch frame: a scan would find the frame's
    // checksum wrong, while an open from the hint trusts the hint and finds the
    // damage only when b is read.
    let seg_path = dir.path().join(id.file_name());
    let mut seg = std::fs::read(&seg_path).unwrap();
    let b_value = 16 + 34 + 32 + 33;
    assert_eq!(&seg[b_value..b_value + 1], b"2");
    seg[b_value] = b'X';
    std::fs::write(&seg_path, &seg).unwrap();

    let engine = Engine::open(dir.path(), disk_options()).unwrap();
    assert_eq!(engine.get(b"a").unwrap(), None);
    assert!(
        engine.get(b"b").is_err(),
        "b was read from a damaged record"
    );
    let c = engine.get_value(b"c").unwrap().unwrap();
    assert_eq!(c.expires_at, Some(4_102_444_800_000));
    engine.put(b"d", b"4").unwrap();
    engine.close().unwrap();
}
