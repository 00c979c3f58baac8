//! Compaction (Bitcask's merge): rewriting the live records of sealed segments.
//!
//! A compaction seals the active segment, then reads every sealed segment in
//! order — or, when they hold many records a key, only the records the index
//! lists as the keys' oldest
//! ([`Index::first_locations`](crate::Index::first_locations)). A record is live
//! when the key's index entry still starts at that record; the live records of a
//! key (its full value and the merge operands after it that are also in the
//! inputs) are copied, or folded by the merge operator into one full value, into
//! new output segments, with their hint files. Deleted, overwritten and expired
//! records are left behind, and so
//! are tombstones: every older record of their key is in the inputs too.
//!
//! Reads and writes go on throughout: the inputs are immutable, new writes
//! go to the fresh active segment, and the index is switched key by key with
//! a compare-and-swap ([`Index::replace_prefix`](crate::Index::replace_prefix)),
//! so a key written during the compaction keeps its newer value. The files
//! are switched as described in [`CompactionOutput`](crate::log::CompactionOutput):
//! a crash at any step reopens to the same data.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::engine::Inner;
use crate::error::{Error, Result};
use crate::index::KeyEntry;
use crate::log::Entry;
use crate::record::Kind;
use crate::record::RecordRef;
use crate::segment::{Location, SegmentId};

/// What a compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Segments compacted.
    pub inputs: usize,
    /// Segments written.
    pub outputs: usize,
    /// Bytes of the input segments.
    pub bytes_in: u64,
    /// Bytes of the output segments.
    pub bytes_out: u64,
    /// Keys whose records were copied or folded.
    pub keys_kept: u64,
    /// Expired keys removed.
    pub keys_expired: u64,
}

struct Moved {
    key: Box<[u8]>,
    prefix: Vec<Location>,
    location: Location,
}

/// Clears [`Inner::compaction_memory`] when a compaction ends, however it ends.
struct HeldMemory<'a>(&'a AtomicU64);

impl Drop for HeldMemory<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

pub(crate) fn run(inner: &Inner) -> Result<CompactionReport> {
    let _running = inner.compaction_lock.lock();
    let (inputs, sealed_now) = inner.log.seal_unhinted()?;
    let result = merge(inner, inputs);
    if result.is_err()
        && let Some(id) = sealed_now
    {
        // Still there: it gets the hint its sealing left out.
        inner.log.queue_hint(id);
    }
    result
}

/// Rewrites the live records of `inputs` (every sealed segment) and swaps the
/// outputs in.
fn merge(inner: &Inner, inputs: Vec<SegmentId>) -> Result<CompactionReport> {
    let held = HeldMemory(&inner.compaction_memory);
    // Heap bytes of the keys and locations kept for the index swap at the end.
    let mut kept_bytes = 0usize;
    let mut report = CompactionReport {
        inputs: inputs.len(),
        ..CompactionReport::default()
    };
    let Some(&last) = inputs.last() else {
        return Ok(report);
    };
    let sizes: Vec<_> = inner.log.segments();
    report.bytes_in = sizes.iter().filter(|s| s.id <= last).map(|s| s.len).sum();

    let now = inner.clock.now_ms();
    let mut output = inner.log.compaction_output(last)?;
    let mut moved: Vec<Moved> = Vec::new();
    let mut expired: Vec<(Box<[u8]>, KeyEntry)> = Vec::new();
    // The key of the last record read, and where its oldest record is once known.
    // A key's oldest record only ever moves to a segment this compaction does not
    // read (a newer write) while it runs, so a record that is not it now never
    // becomes it: the key's next records need no question to the index. Operations
    // on one key often follow each other (a hot list), and each question may take a
    // lock the key's writers want.
    let mut last_key: Vec<u8> = Vec::new();
    let mut last_first: Option<Option<Location>> = None;
    let firsts = firsts(inner, &inputs, report.bytes_in);
    let firsts_bytes = firsts
        .as_ref()
        .map_or(0, |f| f.capacity() * std::mem::size_of::<Location>());
    let mut copy = |location: Location, record: &RecordRef<'_>, raw: &[u8]| -> Result<()> {
        if record.header.kind == Kind::Delete {
            return Ok(());
        }
        if last_key == record.key {
            let first = *last_first.get_or_insert_with(|| inner.index.first_location(record.key));
            if first != Some(location) {
                return Ok(());
            }
        } else {
            last_key.clear();
            last_key.extend_from_slice(record.key);
            last_first = None;
        }
        // Only the key's oldest record starts its copy.
        let Some(entry) = inner.index.get_if_first(record.key, location) else {
            return Ok(());
        };
        last_first = Some(Some(location));
        if entry.is_expired(now) {
            expired.push((record.key.into(), entry));
            return Ok(());
        }
        let prefix: Vec<Location> = entry
            .locations()
            .take_while(|l| l.segment <= last)
            .collect();
        let new_location = if prefix.len() == 1 && record.header.kind == Kind::Put {
            output.append_raw(raw)?
        } else {
            let operator = inner
                .merge_operator
                .as_ref()
                .ok_or(Error::NoMergeOperator)?;
            let base = (record.header.kind == Kind::Put).then_some(record.value);
            let chain = prefix
                .get(usize::from(base.is_some())..)
                .unwrap_or_default();
            // The record in hand is not read again; the rest are read in runs (a
            // hot key's operands lie close together).
            let others: Vec<Location> = chain.iter().copied().filter(|l| *l != location).collect();
            let operands = inner.read_checked_many(record.key, &others, Kind::Merge)?;
            let mut newest = (record.header.version, record.header.expires_at);
            let mut read = operands.iter();
            let mut values: Vec<&[u8]> = Vec::with_capacity(chain.len());
            for l in chain {
                if *l == location {
                    values.push(record.value);
                } else if let Some(op) = read.next() {
                    newest = (op.version(), op.expires_at());
                    values.push(op.value());
                }
            }
            let value = operator.full_merge(record.key, base, &values);
            output.append(&Entry {
                kind: Kind::Put,
                key: record.key,
                value: &value,
                version: newest.0,
                expires_at: newest.1,
            })?
        };
        kept_bytes += record.key.len() + prefix.capacity() * std::mem::size_of::<Location>();
        moved.push(Moved {
            key: record.key.into(),
            prefix,
            location: new_location,
        });
        if moved.len().is_multiple_of(256) {
            let bytes = kept_bytes
                + firsts_bytes
                + moved.capacity() * std::mem::size_of::<Moved>()
                + expired.capacity() * std::mem::size_of::<(Box<[u8]>, KeyEntry)>();
            held.0.store(bytes as u64, Ordering::Relaxed);
        }
        Ok(())
    };
    match &firsts {
        // Only the listed records can be live: they are read, and nothing else.
        Some(firsts) => inner.log.visit_records(firsts, &mut copy)?,
        None => {
            for &id in &inputs {
                inner.log.scan_segment(id, &mut copy)?;
            }
        }
    }
    let outputs = output.finish()?;
    report.outputs = outputs.ids().len();
    report.bytes_out = outputs.bytes();
    report.keys_kept = moved.len() as u64;
    report.keys_expired = expired.len() as u64;
    inner.log.install(outputs, &inputs, || {
        let mut delta = 0i64;
        for m in &moved {
            if let Some(freed) = inner.index.replace_prefix(&m.key, &m.prefix, m.location) {
                delta += i64::from(m.location.len) - i64::try_from(freed).unwrap_or(0);
            }
        }
        for (key, entry) in &expired {
            if let Some(freed) = inner.index.remove_if(key, entry) {
                delta -= i64::try_from(freed).unwrap_or(0);
            }
        }
        inner.live_bytes.fetch_add(delta, Ordering::Relaxed);
    })?;
    inner.compactions.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(?report, "compaction finished");
    Ok(report)
}

/// Input bytes per key above which a compaction asks the index for the list of the
/// keys' oldest records ([`Index::first_locations`](crate::Index::first_locations))
/// rather than read every record of its inputs: listing costs about a question per
/// key, and a record takes some 40 bytes at the least.
const LIST_BYTES_PER_KEY: u64 = 128;

/// The oldest records of the keys that lie in `inputs`, in log order, listed once
/// by the index when the inputs hold many more bytes than there are keys: most of
/// what they hold is then dead. A record the list lacks is no key's oldest, and
/// never becomes one (a key's oldest record only moves to a newer segment), so a
/// compaction reads the listed records alone, and neither reads nor verifies the
/// dead ones. `None` when the index has too many keys or cannot list them.
fn firsts(inner: &Inner, inputs: &[SegmentId], bytes_in: u64) -> Option<Vec<Location>> {
    let last = *inputs.last()?;
    if inner.index.len() > bytes_in / LIST_BYTES_PER_KEY {
        return None;
    }
    let mut listed = Vec::new();
    if !inner.index.first_locations(last, &mut listed) {
        return None;
    }
    listed.retain(|l| inputs.binary_search(&l.segment).is_ok());
    listed.sort_unstable();
    listed.dedup();
    Some(listed)
}
