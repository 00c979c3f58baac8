//! Keys whose locations the caller keeps itself ([`Index::is_external`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use strata_engine::index::{Chain, Change, ScanChunk, Slot};
use strata_engine::{
    AppendOperator, Engine, Index, KeyEntry, Keydir, Location, Options, WriteBatch, WriteMeta,
    WriteOp,
};

use crate::common::disk_options;

/// Keys starting with `ext:` are the caller's: a map it updates from
/// `write_located`, as a program keeping its own index would. Compaction's
/// questions about the key `hot` are counted.
#[derive(Debug, Default)]
struct Split {
    keydir: Keydir,
    external: Mutex<HashMap<Vec<u8>, Vec<Location>>>,
    freed: AtomicU64,
    hot_questions: AtomicU64,
    external_questions: AtomicU64,
}

fn is_ext(key: &[u8]) -> bool {
    key.starts_with(b"ext:")
}

fn entry_of(locations: &[Location]) -> KeyEntry {
    let slot = match locations {
        [one] => Slot::Value(*one),
        [base, operands @ ..] => Slot::Merged(Box::new(Chain {
            base: Some(*base),
            operands: operands.to_vec(),
        })),
        [] => unreachable!("no empty lists"),
    };
    KeyEntry {
        version: 0,
        expires_at: 0,
        slot,
    }
}

impl Index for Split {
    fn get(&self, key: &[u8]) -> Option<KeyEntry> {
        if is_ext(key) {
            return self.external.lock().get(key).map(|l| entry_of(l));
        }
        self.keydir.get(key)
    }
    fn apply(&self, key: &[u8], change: Change) -> Option<u64> {
        assert!(!is_ext(key), "the engine applied an external key's change");
        self.keydir.apply(key, change)
    }
    fn is_external(&self, key: &[u8]) -> bool {
        self.external_questions.fetch_add(1, Ordering::Relaxed);
        is_ext(key)
    }
    fn first_location(&self, key: &[u8]) -> Option<Location> {
        if key == b"hot" {
            self.hot_questions.fetch_add(1, Ordering::Relaxed);
        }
        self.get(key).and_then(|e| e.first_location())
    }
    fn take_freed(&self) -> u64 {
        self.freed.swap(0, Ordering::Relaxed)
    }
    fn replace_prefix(
        &self,
        key: &[u8],
        prefix: &[Location],
        replacement: Location,
    ) -> Option<u64> {
        if !is_ext(key) {
            return self.keydir.replace_prefix(key, prefix, replacement);
        }
        let mut map = self.external.lock();
        let list = map.get_mut(key)?;
        if !list.starts_with(prefix) {
            return None;
        }
        let freed = prefix.iter().map(|l| u64::from(l.len)).sum();
        list.splice(..prefix.len(), [replacement]);
        Some(freed)
    }
    fn remove_if(&self, key: &[u8], expected: &KeyEntry) -> Option<u64> {
        self.keydir.remove_if(key, expected)
    }
    fn len(&self) -> u64 {
        self.keydir.len() + self.external.lock().len() as u64
    }
    fn scan(&self, token: &[u8]) -> ScanChunk {
        self.keydir.scan(token)
    }
}

/// An engine in `dir` over a [`Split`] index, with an appending merge operator.
fn open_split(dir: &std::path::Path) -> (Arc<Split>, Engine) {
    let options: Options = disk_options().with_merge_operator(Arc::new(AppendOperator));
    let index = Arc::new(Split::default());
    let engine = Engine::open_with_index(dir, options, Box::new(index.clone())).unwrap();
    (index, engine)
}

#[test]
fn a_batch_declared_external_is_written_without_a_question_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let (index, engine) = open_split(dir.path());
    let questions = || index.external_questions.load(Ordering::Relaxed);
    let mut batch = WriteBatch::new();
    batch
        .put(b"ext:a", b"1")
        .merge(b"ext:a", b"2")
        .delete(b"ext:b");
    batch.set_external(true);
    let mut locations = Vec::new();
    let before = questions();
    engine.write_located(&batch, &mut locations).unwrap();
    // Nothing asked, nothing applied to the index (`Split::apply` would panic),
    // and the records are where the locations say.
    assert_eq!(questions(), before);
    assert_eq!(locations.len(), 3);
    assert_eq!(index.keydir.len(), 0);
    let value = engine
        .read_entry(b"ext:a", &entry_of(&locations[..2]), false)
        .unwrap();
    assert_eq!(value, b"12");

    // Cleared, a batch is asked about again, key by key.
    batch.clear();
    batch.put(b"plain", b"x").merge(b"plain", b"y");
    engine.write_located(&batch, &mut locations).unwrap();
    assert!(questions() >= before + 2);
    assert_eq!(engine.get(b"plain").unwrap().as_deref(), Some(&b"xy"[..]));
}

#[test]
fn borrowed_operations_are_written_as_the_same_batch_would_be() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ((_, by_batch), (index, by_ops)) = (open_split(dir_a.path()), open_split(dir_b.path()));
    let at = |v| WriteMeta::new().with_version(v);
    // Keys and values in one buffer of the caller's, as a server keeps them.
    let buffer = b"plainxext:ay!".to_vec();
    let (plain, x, ext_a, y) = (&buffer[..5], &buffer[5..6], &buffer[6..11], &buffer[11..12]);
    let ops = [
        WriteOp::put(plain, x, at(3).with_expiry(u64::MAX)),
        WriteOp::merge(plain, y, at(4)),
        WriteOp::delete(b"gone", at(5)),
    ];
    let mut batch = WriteBatch::new();
    batch
        .put_with(plain, x, at(3).with_expiry(u64::MAX))
        .merge_with(plain, y, at(4))
        .delete_with(b"gone", at(5));
    let (mut from_batch, mut from_ops) = (Vec::new(), Vec::new());
    by_batch.write_located(&batch, &mut from_batch).unwrap();
    by_ops.write_ops_located(ops, false, &mut from_ops).unwrap();
    // The same records, at the same places: one frame, byte for byte as long.
    assert_eq!(from_ops, from_batch);
    assert_eq!(from_ops.len(), 3);
    for engine in [&by_batch, &by_ops] {
        let value = engine.get_value(plain).unwrap().unwrap();
        assert_eq!((value.bytes.as_slice(), value.version), (&b"xy"[..], 4));
    }
    // Declared external, a key is the caller's: nothing reaches the index
    // (`Split::apply` would panic), and the locations read back the value.
    let ops = [
        WriteOp::put(ext_a, x, at(6)),
        WriteOp::merge(ext_a, y, at(7)),
    ];
    by_ops.write_ops_located(ops, true, &mut from_ops).unwrap();
    assert_eq!(from_ops.len(), 2);
    assert_eq!(index.keydir.len(), 1);
    let entry = entry_of(&from_ops);
    assert_eq!(by_ops.read_entry(ext_a, &entry, false).unwrap(), b"xy");
}

/// Operations from an iterator that does not know its length (a filtered one) are
/// planned as a batch's are: a merge after a put of the same key follows the put,
/// not the key's older, expired value.
#[test]
fn a_merge_after_a_put_among_borrowed_operations_follows_the_put() {
    let dir = tempfile::tempdir().unwrap();
    let (_, engine) = open_split(dir.path());
    engine
        .put_with(b"k", b"old", WriteMeta::new().with_expiry(1))
        .unwrap();
    let ops = [
        WriteOp::put(b"k", b"new", WriteMeta::new()),
        WriteOp::merge(b"k", b"!", WriteMeta::new().without_expiry()),
    ];
    let mut locations = Vec::new();
    engine
        .write_ops_located(ops.into_iter().filter(|_| true), false, &mut locations)
        .unwrap();
    assert_eq!(engine.get(b"k").unwrap().as_deref(), Some(&b"new!"[..]));
    drop(engine);
    let (_, engine) = open_split(dir.path());
    assert_eq!(engine.get(b"k").unwrap().as_deref(), Some(&b"new!"[..]));
}

/// A merge of a key the caller indexes itself goes as given, also after a write
/// of it earlier in the batch whose expiry has passed: no tombstone before it,
/// and its own expiry (none).
#[test]
fn a_merge_of_an_external_key_goes_as_given_after_its_expired_put() {
    let dir = tempfile::tempdir().unwrap();
    let (_, engine) = open_split(dir.path());
    let write = |key: &[u8], expires_at| {
        let ops = [
            WriteOp::put(key, b"old", WriteMeta::new().with_expiry(expires_at)),
            WriteOp::merge(key, b"!", WriteMeta::new()),
        ];
        let before = engine.stats().total_bytes;
        let mut locations = Vec::new();
        engine.write_ops_located(ops, true, &mut locations).unwrap();
        (engine.stats().total_bytes - before, locations)
    };
    // Both with an expiry (a far one, and one long past), which a header holds
    // only when there is one.
    let (live, _) = write(b"ext:a", 4_102_444_800_000);
    let (expired, locations) = write(b"ext:b", 1);
    // Keys of one length: the same bytes, no record added.
    assert_eq!(expired, live);
    let entry = entry_of(&locations);
    assert_eq!(engine.read_entry(b"ext:b", &entry, false).unwrap(), b"old!");
}

#[test]
fn external_keys_get_their_locations_back_and_survive_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let (index, engine) = open_split(dir.path());
    let apply = |batch: &WriteBatch, locations: &[Location], kinds: &[&str]| {
        let mut map = index.external.lock();
        for (i, kind) in kinds.iter().enumerate() {
            let key = batch.key(i).unwrap();
            if !is_ext(key) {
                continue;
            }
            match *kind {
                "put" => {
                    if let Some(old) = map.insert(key.to_vec(), vec![locations[i]]) {
                        let bytes: u64 = old.iter().map(|l| u64::from(l.len)).sum();
                        index.freed.fetch_add(bytes, Ordering::Relaxed);
                    }
                }
                "merge" => map.entry(key.to_vec()).or_default().push(locations[i]),
                _ => {
                    if let Some(old) = map.remove(key) {
                        let bytes: u64 = old.iter().map(|l| u64::from(l.len)).sum();
                        index.freed.fetch_add(bytes, Ordering::Relaxed);
                    }
                }
            }
        }
    };

    // Expired values under an external key and a plain one. A merge onto the
    // plain one follows a tombstone the engine adds; onto the external one, none:
    // the caller decides. Either way one location comes back per operation.
    let mut batch = WriteBatch::new();
    batch
        .put_with(b"ext:b", b"old", WriteMeta::new().with_expiry(1))
        .put_with(b"plainb", b"old", WriteMeta::new().with_expiry(1));
    let mut locations = Vec::new();
    engine.write_located(&batch, &mut locations).unwrap();
    apply(&batch, &locations, &["put", "put"]);
    let mut batch = WriteBatch::new();
    batch
        .merge_with(b"ext:b", b"!", WriteMeta::new().with_expiry(0))
        .merge_with(b"plainb", b"!", WriteMeta::new().with_expiry(0))
        .put(b"ext:a", b"hello")
        .merge_with(b"ext:a", b", world", WriteMeta::new().with_expiry(0))
        .put(b"plain", b"p")
        .put(b"ext:gone", b"x")
        .delete(b"ext:gone");
    engine.write_located(&batch, &mut locations).unwrap();
    assert_eq!(locations.len(), batch.len());
    apply(
        &batch,
        &locations,
        &["merge", "merge", "put", "merge", "put", "put", "delete"],
    );
    assert_eq!(engine.get(b"plainb").unwrap().as_deref(), Some(&b"!"[..]));
    let entry = index.get(b"ext:b").unwrap();
    assert_eq!(engine.read_entry(b"ext:b", &entry, false).unwrap(), b"old!");
    assert!(index.keydir.get(b"ext:a").is_none());
    assert!(index.keydir.get(b"plain").is_some());
    let entry = index.get(b"ext:a").unwrap();
    assert_eq!(
        engine.read_entry(b"ext:a", &entry, false).unwrap(),
        b"hello, world"
    );
    assert_eq!(engine.get(b"plain").unwrap().as_deref(), Some(&b"p"[..]));
    let dead_before = engine.stats().dead_bytes;
    assert!(dead_before > 0, "the caller's freed bytes count as dead");

    // Compaction asks the caller's index which records are live and moves them.
    let report = engine.compact().unwrap();
    assert_eq!(
        report.keys_kept, 4,
        "ext:a and ext:b folded, plain and plainb"
    );
    let moved = index.external.lock().get(&b"ext:a"[..]).cloned().unwrap();
    assert_eq!(moved.len(), 1, "the chain became one record");
    assert_ne!(Some(moved[0]), entry.first_location());
    let entry = index.get(b"ext:a").unwrap();
    assert_eq!(
        engine.read_entry(b"ext:a", &entry, true).unwrap(),
        b"hello, world"
    );
    assert!(engine.stats().dead_bytes < dead_before);
}

#[test]
fn compaction_asks_about_a_run_of_one_keys_records_only_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (index, engine) = open_split(dir.path());
    // A dead value, then a value and a run of operations on it, then other keys.
    engine.put(b"hot", b"dead").unwrap();
    engine.put(b"hot", b"x").unwrap();
    for _ in 0..500 {
        engine.merge(b"hot", b"y").unwrap();
    }
    engine.put(b"cold", b"c").unwrap();
    engine.merge(b"hot", b"z").unwrap();
    let report = engine.compact().unwrap();
    assert_eq!(report.keys_kept, 2);
    let want = [&b"x"[..], &b"y".repeat(500), b"z"].concat();
    assert_eq!(engine.get(b"hot").unwrap().as_deref(), Some(&want[..]));
    assert_eq!(engine.get(b"cold").unwrap().as_deref(), Some(&b"c"[..]));
    // "dead" (asked), "x" (asked, first: the rest of the run is known), "z" after
    // another key (asked again).
    let asked = index.hot_questions.load(Ordering::Relaxed);
    assert!(asked <= 4, "{asked} questions about one key's 503 records");
}
