//! Feeds arbitrary bytes to every decoder of on-disk data: the record and batch
//! codec, the segment header, the hint file, and a whole segment opened by
//! recovery. None may panic; a decoded record must re-encode to the same record
//! (to the same bytes, when its header is compact), and the entries of a hint to
//! the same bytes.

#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata_engine::record::{self, Kind};
use strata_engine::vfs::{OpenMode, Vfs, write_all_at};
use strata_engine::{Engine, FsyncPolicy, Options, SimVfs, hint, segment};

fuzz_target!(|data: &[u8]| {
    // Random bytes almost never carry a valid checksum; also try each input
    // with its record checksum fixed up, so the decoders behind it are reached.
    let mut fixed = data.to_vec();
    if fixed.len() >= 4 {
        let crc = crc32c::crc32c(&fixed[4..]);
        fixed[..4].copy_from_slice(&crc.to_le_bytes());
        decode_record(&fixed);
    }
    decode_record(data);
    let _ = record::Header::decode(data);
    let _ = segment::decode_header(data);
    if let Ok(entries) = hint::decode(data) {
        for entry in entries {
            let _ = entry;
        }
    }
    reencode_hint(data);

    // The same bytes as a segment (after a valid header) and as its hint file.
    let vfs = SimVfs::new();
    let dir = Path::new("/db");
    let id = segment::SegmentId(segment::ID_STRIDE);
    let write = |name: String, bytes: &[u8]| {
        let file = vfs.open(&dir.join(name), OpenMode::CreateNew).expect("create");
        write_all_at(&*file, bytes, 0).expect("write");
    };
    let mut image = segment::encode_header().to_vec();
    // Odd second bytes recover the checksum-fixed variant instead.
    let segment_bytes = if data.get(1).is_some_and(|b| b & 1 == 1) {
        &fixed[..]
    } else {
        data
    };
    image.extend_from_slice(segment_bytes);
    write(id.file_name(), &image);
    if data.first().is_some_and(|b| b & 1 == 1) {
        write(id.hint_name(), data);
    }
    let options = Options::default()
        .with_vfs(Arc::new(vfs.clone()))
        .with_fsync(FsyncPolicy::Never)
        .with_compaction(None)
        .with_repair(data.last().is_some_and(|b| b & 1 == 1));
    if let Ok(engine) = Engine::open(dir, options) {
        for key in engine.keys().take(16) {
            let _ = engine.get(&key);
        }
    }
});

fn decode_record(data: &[u8]) {
    if let Ok(rec) = record::decode(data) {
        if rec.header.kind == Kind::Batch {
            let _ = record::batch_records(rec.value, rec.header.version);
        } else {
            let mut again = Vec::new();
            record::encode_into(
                &mut again,
                rec.header.kind,
                rec.key,
                rec.value,
                rec.header.version,
                rec.header.expires_at,
            );
            // A compact header re-encodes byte for byte (a length has one
            // encoding); a wide one (format version 1) re-encodes compact, to the
            // same record.
            if data.get(5).is_some_and(|flags| flags & 1 == 1) {
                assert_eq!(again, data);
            } else {
                let back = record::decode(&again).expect("a re-encoded record decodes");
                let fields = |r: &record::RecordRef<'_>| {
                    let h = r.header;
                    (h.kind, h.version, h.expires_at, r.key.to_vec(), r.value.to_vec())
                };
                assert_eq!(fields(&back), fields(&rec));
            }
        }
    }
}

/// Reads `data` as the entries of a hint of the current version (a valid header
/// and checksum around them) and checks that the entries it decodes, up to the
/// first bad one, encode back to the bytes they were read from.
fn reencode_hint(data: &[u8]) {
    let mut image = hint::HINT_MAGIC.to_vec();
    image.extend_from_slice(&hint::HINT_VERSION.to_le_bytes());
    image.extend_from_slice(&[0; 4]);
    image.extend_from_slice(data);
    image.extend_from_slice(&0u64.to_le_bytes());
    let crc = crc32c::crc32c(&image);
    image.extend_from_slice(&crc.to_le_bytes());
    let entries = hint::decode(&image).expect("a valid header and checksum");
    let mut again = hint::HintBuilder::new();
    for entry in entries.map_while(Result::ok) {
        again.push(&entry);
    }
    let again = again.finish();
    let encoded = &again[hint::HINT_HEADER_LEN..again.len() - hint::TRAILER_LEN];
    assert_eq!(encoded, &data[..encoded.len()]);
}
