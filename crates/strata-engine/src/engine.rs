//! The engine: the log plus an index, with background compaction.
//!
//! Writes go through [`Log::append_planned`]: the records are chosen and
//! encoded under the log's writer lock and the index is updated under the
//! same lock, so the index always reflects the log in log order. Under
//! `Always` the writer then waits for the group commit outside that lock.
//! Reads take an index entry (a short shard lock), then read the records by
//! position without any engine lock; if compaction removed the segment in
//! between, the read retries with the fresh entry.
//!
//! Invariants: every live key's entry names records the log holds; the
//! engine's live-byte count equals the sum of the record lengths the index
//! names; a merge written onto an expired key is preceded by a tombstone in
//! the same frame, so replay never revives an expired value.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;

use crate::batch::{WriteBatch, WriteMeta, WriteOp};
use crate::clock::Clock;
use crate::compaction::{self, CompactionReport};
use crate::error::{Error, Result};
use crate::index::{Change, Index, KeyEntry, Slot};
use crate::keydir::Keydir;
use crate::log::{Entries, Entry, Log, Record};
use crate::merge::MergeOperator;
use crate::options::{CompactionTrigger, Options};
use crate::rebuild;
use crate::record::{DecodeError, Kind};
use crate::segment::{Location, SegmentId};

/// How many times a read retries when compaction moved a key under it.
const READ_RETRIES: usize = 16;

/// A value with the version and expiry stored with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The value's bytes (for a merged key: the merged value).
    pub bytes: Vec<u8>,
    /// Version of the key's newest record.
    pub version: u64,
    /// Absolute expiry in Unix milliseconds, if any.
    pub expires_at: Option<u64>,
}

/// A snapshot of the engine's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Keys in the index (expired keys count until compaction removes them).
    pub live_keys: u64,
    /// Bytes of the records the index names.
    pub live_bytes: u64,
    /// Bytes in segments that no key needs any more (reclaimable by compaction).
    pub dead_bytes: u64,
    /// Bytes in all segments.
    pub total_bytes: u64,
    /// Number of segment files.
    pub segments: u64,
    /// Compactions completed since the engine was opened.
    pub compactions: u64,
    /// True once a write or fsync failed; writes are refused until reopened.
    pub poisoned: bool,
}

pub(crate) struct Inner {
    pub log: Log,
    pub index: Box<dyn Index>,
    pub clock: Arc<dyn Clock>,
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    pub live_bytes: AtomicI64,
    next_version: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_lock: Mutex<()>,
    /// Bytes a running compaction holds for its work (what it moved, for the
    /// index swap at its end); 0 when none runs.
    pub compaction_memory: AtomicU64,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("log", &self.log)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

/// An embeddable Bitcask-style key-value store. See the [crate docs](crate).
///
/// `Engine` is `Send + Sync`: share it between threads with an `Arc`.
#[derive(Debug)]
pub struct Engine {
    inner: Arc<Inner>,
    compactor: Mutex<Option<JoinHandle<()>>>,
}

/// The operations of `batch`, read in place (collecting them would copy each).
fn batch_ops(batch: &WriteBatch) -> impl Ops<'_> {
    batch.ops.iter().map(|op| WriteOp {
        kind: op.kind,
        key: batch.key_of(op),
        value: batch.value_of(op),
        meta: op.meta,
    })
}

/// Operations for the planner, which reads them twice.
trait Ops<'a>: Iterator<Item = WriteOp<'a>> + Clone {}

impl<'a, I: Iterator<Item = WriteOp<'a>> + Clone> Ops<'a> for I {}

/// The expiry stored for a write: 0 ("never" on disk) when none is given or when the
/// caller asks for none ([`WriteMeta::without_expiry`]).
fn expiry(meta: Option<u64>) -> u64 {
    meta.unwrap_or(0)
}

impl Engine {
    /// Opens (or creates) the store in `dir` with the in-memory [`Keydir`].
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<Engine> {
        Engine::open_with_index(dir, options, Box::new(Keydir::new()))
    }

    /// Opens (or creates) the store in `dir`, rebuilding the given (empty) index.
    pub fn open_with_index(
        dir: impl AsRef<Path>,
        options: Options,
        index: Box<dyn Index>,
    ) -> Result<Engine> {
        options.validate()?;
        let (log, totals) = rebuild::open(dir.as_ref(), &options.log, &*index)?;
        let (live, max_version) = (totals.live, totals.max_version);
        let inner = Arc::new(Inner {
            log,
            index,
            clock: options.clock.clone(),
            merge_operator: options.merge_operator.clone(),
            live_bytes: AtomicI64::new(live),
            next_version: AtomicU64::new(max_version.saturating_add(1)),
            compactions: AtomicU64::new(0),
            compaction_lock: Mutex::new(()),
            compaction_memory: AtomicU64::new(0),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let compactor = match options.compaction {
            Some(trigger) => {
                let inner = inner.clone();
                Some(
                    std::thread::Builder::new()
                        .name("strata-compactor".into())
                        .spawn(move || compactor(&inner, trigger))?,
                )
            }
            None => None,
        };
        Ok(Engine {
            inner,
            compactor: Mutex::new(compactor),
        })
    }

    /// Stores `value` under `key`; returns the version assigned.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<u64> {
        self.put_with(key, value, WriteMeta::default())
    }

    /// Stores `value` under `key`, expiring at `expires_at_ms` (Unix milliseconds).
    pub fn put_with_expiry(&self, key: &[u8], value: &[u8], expires_at_ms: u64) -> Result<u64> {
        self.put_with(key, value, WriteMeta::new().with_expiry(expires_at_ms))
    }

    /// Stores `value` under `key` with an explicit version and/or expiry.
    pub fn put_with(&self, key: &[u8], value: &[u8], meta: WriteMeta) -> Result<u64> {
        self.inner
            .write_ops(std::iter::once(WriteOp::put(key, value, meta)), false, None)
    }

    /// Appends a merge operand to `key`; returns the version assigned.
    ///
    /// Reading the key then needs the [`MergeOperator`] of the options.
    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<u64> {
        self.merge_with(key, operand, WriteMeta::default())
    }

    /// Appends a merge operand with an explicit version and/or expiry.
    ///
    /// Without an expiry the key keeps its current one.
    pub fn merge_with(&self, key: &[u8], operand: &[u8], meta: WriteMeta) -> Result<u64> {
        self.inner.write_ops(
            std::iter::once(WriteOp::merge(key, operand, meta)),
            false,
            None,
        )
    }

    /// Deletes `key`; returns whether it had a live value.
    ///
    /// Nothing is written when the key has no entry at all.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.delete_with(key, WriteMeta::default())
    }

    /// Deletes `key`, storing `meta.version` in the tombstone.
    pub fn delete_with(&self, key: &[u8], meta: WriteMeta) -> Result<bool> {
        let inner = &*self.inner;
        let now = inner.clock.now_ms();
        let mut was_live = false;
        inner.log.append_planned(
            |out| {
                if let Some(expires_at) = inner.index.expires_at(key) {
                    was_live = expires_at == 0 || expires_at > now;
                    out.push(Entry {
                        kind: Kind::Delete,
                        key,
                        value: &[],
                        version: inner.version_for(meta.version),
                        expires_at: 0,
                    });
                }
            },
            |entries, locations| inner.apply(entries, locations, false),
        )?;
        Ok(was_live)
    }

    /// Applies every operation of `batch`, all or nothing, also across crashes.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.inner
            .write_ops(batch_ops(batch), batch.external, None)
            .map(|_| ())
    }

    /// [`Engine::write`], also giving where each operation's record went, in the
    /// batch's order (a delete's tombstone too), in `locations` (cleared first).
    ///
    /// For the caller that keeps the locations of some keys itself (see
    /// [`Index::is_external`]): the records of those keys are appended as given —
    /// a merge's expiry is the one it carries (none: no expiry), and no tombstone
    /// goes before it, whatever the batch wrote of its key earlier — and the
    /// caller applies their locations, in the order of its writes to each key.
    pub fn write_located(&self, batch: &WriteBatch, locations: &mut Vec<Location>) -> Result<()> {
        locations.clear();
        self.inner
            .write_ops(batch_ops(batch), batch.external, Some(locations))
            .map(|_| ())
    }

    /// [`Engine::write_located`] for operations whose keys and values the caller
    /// keeps (a buffer of its own), borrowed where a [`WriteBatch`] would copy
    /// them: one batch of `ops`, in order, all or nothing. `ops` is read twice,
    /// through clones of the iterator, so it must give the same operations each
    /// time. `external` says of every key what [`WriteBatch::set_external`] does.
    pub fn write_ops_located<'a, I>(
        &self,
        ops: I,
        external: bool,
        locations: &mut Vec<Location>,
    ) -> Result<()>
    where
        I: IntoIterator<Item = WriteOp<'a>>,
        I::IntoIter: Clone,
    {
        locations.clear();
        self.inner
            .write_ops(ops.into_iter(), external, Some(locations))
            .map(|_| ())
    }

    /// The value of `key`, or `None` if it has none or has expired.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.get_value(key)?.map(|v| v.bytes))
    }

    /// The value of `key` with its version and expiry.
    pub fn get_value(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.get_value(key, false, false)
    }

    /// [`Engine::get_value`], also for a value whose expiry has passed as long as
    /// the index still holds it (a caller keeping its own clock decides).
    pub fn get_value_expired_too(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.get_value(key, true, false)
    }

    /// [`Engine::get_value_expired_too`] without waiting for the device: it fails
    /// with an [`std::io::ErrorKind::WouldBlock`] I/O error ([`Error::is_would_block`])
    /// unless every record of the value is in the write buffer or the operating
    /// system's cache. For callers that must not block, such as an event loop, and
    /// hand the read to another thread when it would.
    pub fn get_value_cached(&self, key: &[u8]) -> Result<Option<Value>> {
        self.inner.get_value(key, true, true)
    }

    /// Reads the value made of the records `entry` names (found by the caller in
    /// its own index, see [`Index::is_external`]), whatever its expiry. With
    /// `cached`, fails as [`Engine::get_value_cached`] does unless no wait for the
    /// device is needed.
    pub fn read_entry(&self, key: &[u8], entry: &KeyEntry, cached: bool) -> Result<Vec<u8>> {
        self.inner.materialize(key, entry, cached)
    }

    /// True if `key` has a live value. Reads only the index.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.inner
            .index
            .expires_at(key)
            .is_some_and(|at| at == 0 || at > self.inner.clock.now_ms())
    }

    /// Iterates over the live keys, in no particular order.
    ///
    /// The iteration holds no lock: keys written or deleted meanwhile may or
    /// may not be seen.
    pub fn keys(&self) -> Keys<'_> {
        Keys {
            engine: self,
            chunk: Vec::new().into_iter(),
            token: Some(Vec::new()),
            now: self.inner.clock.now_ms(),
        }
    }

    /// Iterates over the live key-value pairs, reading each value.
    pub fn iter(&self) -> Iter<'_> {
        Iter { keys: self.keys() }
    }

    /// How many keys the index holds per key prefix of `len` bytes (a shorter key
    /// counts under itself), expired keys not yet removed included: one pass over
    /// the index, so that a loader can size its tables before
    /// [`Engine::for_each_live`].
    pub fn count_by_prefix(&self, len: usize) -> HashMap<Vec<u8>, u64> {
        let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
        self.inner.index.for_each_head(&mut |key, _| {
            let prefix = key.get(..len).unwrap_or(key);
            match counts.get_mut(prefix) {
                Some(n) => *n += 1,
                None => {
                    counts.insert(prefix.to_vec(), 1);
                }
            }
        });
        counts
    }

    /// Calls `f` with every live key, its value and its expiry, reading the
    /// segments sequentially on up to `threads` threads (one segment per thread at
    /// a time) instead of one read per key as [`Engine::iter`] does: the way to
    /// load a whole store. A first pass over the index lists, per segment, the
    /// offsets of the records that hold live values, so the scan recognises them
    /// by position without a lookup per record. Keys whose value is a chain of
    /// merge operands are built with the merge operator after the scan. `f` runs
    /// on several threads at once, in no particular order of keys, and is also told
    /// which records make each value (for a caller keeping its own index).
    ///
    /// Keys written during the call may be passed with an older value, or not at
    /// all; it is meant for a store nobody writes meanwhile. A damaged record stops
    /// it with [`Error::Corrupt`].
    pub fn for_each_live<F>(&self, threads: usize, f: F) -> Result<()>
    where
        F: Fn(&[u8], &[u8], Option<u64>, &Slot) -> Result<()> + Sync,
    {
        self.scan_live(threads, None, f)
    }

    /// [`Engine::for_each_live`], telling `ahead` each key read from a segment two
    /// keys before `f` is called with it (the records in between are copied
    /// aside): time for a loader to start fetching what inserting the key will
    /// read, as its cache misses are what a load waits for. Keys whose value is
    /// over 4 KiB (passed on at once) or built from merge operands after the scan
    /// are not named ahead.
    pub fn for_each_live_ahead<A, F>(&self, threads: usize, ahead: A, f: F) -> Result<()>
    where
        A: Fn(&[u8]) + Sync,
        F: Fn(&[u8], &[u8], Option<u64>, &Slot) -> Result<()> + Sync,
    {
        self.scan_live(threads, Some(&ahead), f)
    }

    fn scan_live<F>(&self, threads: usize, ahead: Option<&AheadFn<'_>>, f: F) -> Result<()>
    where
        F: Fn(&[u8], &[u8], Option<u64>, &Slot) -> Result<()> + Sync,
    {
        let inner = &*self.inner;
        // Buffered records are scanned too.
        inner.log.flush()?;
        let now = inner.clock.now_ms();
        // Per segment: (offset, expiry) of each live full value, in log order.
        let mut plan: HashMap<SegmentId, Vec<(u32, u64)>> = HashMap::new();
        let mut chained = Vec::new();
        inner.index.for_each_head(&mut |key, head| {
            if head.expires_at != 0 && head.expires_at <= now {
                return;
            }
            if head.chained {
                chained.push(key.to_vec());
            } else {
                plan.entry(head.first.segment)
                    .or_default()
                    .push((head.first.offset, head.expires_at));
            }
        });
        let mut work_list: Vec<(SegmentId, Vec<(u32, u64)>)> = plan.into_iter().collect();
        // Biggest first, so that no thread is left with a big segment at the end.
        work_list.sort_unstable_by_key(|(_, wanted)| std::cmp::Reverse(wanted.len()));
        let queue = Mutex::new(work_list);
        let chained = Mutex::new(chained);
        let first_error = Mutex::new(None);
        let work = || {
            let mut later = Vec::new();
            let mut waiting = Waiting::default();
            loop {
                let Some((id, mut wanted)) = queue.lock().pop() else {
                    break;
                };
                if first_error.lock().is_some() {
                    break;
                }
                wanted.sort_unstable_by_key(|&(offset, _)| offset);
                let mut next = wanted.iter().peekable();
                let result = inner.log.scan_segment(id, &mut |location, record, _raw| {
                    while next
                        .next_if(|&&(offset, _)| offset < location.offset)
                        .is_some()
                    {}
                    let Some(&(_, expires_at)) = next.next_if(|&&(o, _)| o == location.offset)
                    else {
                        return Ok(());
                    };
                    if record.header.kind != Kind::Put {
                        later.push(record.key.to_vec());
                        return Ok(());
                    }
                    let expires_at = (expires_at != 0).then_some(expires_at);
                    // A big value is passed on at once: copying it would cost more
                    // than the cache misses saved, and keep its size in a buffer.
                    let Some(ahead) = ahead.filter(|_| record.value.len() <= MAX_WAITING_VALUE)
                    else {
                        return f(record.key, record.value, expires_at, &Slot::Value(location));
                    };
                    ahead(record.key);
                    waiting.push(record.key, record.value, expires_at, location);
                    if waiting.len() > LIVE_AHEAD {
                        waiting.pass_oldest(&f)?;
                    }
                    Ok(())
                });
                let result = result.and_then(|()| waiting.pass_all(&f));
                waiting.clear();
                if let Err(e) = result {
                    first_error.lock().get_or_insert(e);
                    break;
                }
            }
            chained.lock().append(&mut later);
        };
        std::thread::scope(|scope| {
            for _ in 1..threads.max(1) {
                scope.spawn(work);
            }
            work();
        });
        if let Some(e) = first_error.into_inner() {
            return Err(e);
        }
        for key in chained.into_inner() {
            let Some(entry) = inner.index.get(&key) else {
                continue;
            };
            if entry.is_expired(now) {
                continue;
            }
            let bytes = inner.materialize(&key, &entry, false)?;
            let expires_at = (entry.expires_at != 0).then_some(entry.expires_at);
            f(&key, &bytes, expires_at, &entry.slot)?;
        }
        Ok(())
    }

    /// Folds `f` over every live key-value pair.
    pub fn fold<B>(&self, init: B, mut f: impl FnMut(B, &[u8], &Value) -> B) -> Result<B> {
        let mut acc = init;
        for item in self.iter() {
            let (key, value) = item?;
            acc = f(acc, &key, &value);
        }
        Ok(acc)
    }

    /// Sets how many bytes of zeros the log keeps written past its records from
    /// now on (see [`LogOptions::zero_ahead`](crate::options::LogOptions::zero_ahead)):
    /// for a caller that starts or stops fsyncing after most writes.
    pub fn set_zero_ahead(&self, bytes: u64) {
        self.inner.log.set_zero_ahead(bytes);
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        self.inner.log.sync()
    }

    /// Hands every write so far to the operating system without waiting for the
    /// disk: the writes survive a crash of the process (not of the machine).
    /// Buffered writes are otherwise handed over when the write buffer fills and at
    /// least once a second.
    pub fn flush(&self) -> Result<()> {
        self.inner.log.flush()
    }

    /// Compacts every sealed segment now (the active one is sealed first).
    ///
    /// Reads and writes continue while it runs.
    pub fn compact(&self) -> Result<CompactionReport> {
        compaction::run(&self.inner)
    }

    /// Waits for a running compaction to finish and keeps any other from starting
    /// until the guard drops: for a caller changing its own index (see
    /// [`Index::is_external`]) under compaction's feet.
    pub fn hold_compaction(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.inner.compaction_lock.lock()
    }

    /// The engine's counters.
    pub fn stats(&self) -> Stats {
        let inner = &*self.inner;
        inner.drain_freed();
        let total = inner.log.total_bytes();
        let live = u64::try_from(inner.live_bytes.load(Ordering::Relaxed)).unwrap_or(0);
        Stats {
            live_keys: inner.index.len(),
            live_bytes: live,
            dead_bytes: total.saturating_sub(live),
            total_bytes: total,
            segments: inner.log.segments().len() as u64,
            compactions: inner.compactions.load(Ordering::Relaxed),
            poisoned: inner.log.poisoned().is_some(),
        }
    }

    /// Bytes the engine holds in memory for its own bookkeeping, which deleting
    /// keys does not free: the index, by estimate (one slot per key, and per
    /// deleted key until compaction drops its tombstone), and what a running
    /// compaction holds for its work (an entry per live key it moves, for the
    /// index update at its end). Hints cost none: a segment's hint file is built
    /// by reading the segment back once it is sealed.
    pub fn bookkeeping_memory(&self) -> u64 {
        self.inner.index.memory_bytes() + self.inner.compaction_memory.load(Ordering::Relaxed)
    }

    /// The log beneath the engine, to inspect its segments.
    ///
    /// Records appended through it directly bypass the engine's index: they
    /// become visible only after a reopen.
    pub fn log(&self) -> &Log {
        &self.inner.log
    }

    /// Stops background work, makes every write durable and writes hint files.
    ///
    /// Dropping the engine does the same but cannot report errors.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        {
            let mut stop = self.inner.stop.lock();
            *stop = true;
            self.inner.wake.notify_all();
        }
        if let Some(handle) = self.compactor.lock().take() {
            let _ = handle.join();
        }
        self.inner.log.close()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "closing the engine failed");
        }
    }
}

fn compactor(inner: &Inner, trigger: CompactionTrigger) {
    loop {
        {
            let mut stop = inner.stop.lock();
            if !*stop {
                inner.wake.wait_for(&mut stop, trigger.check_interval);
            }
            if *stop {
                return;
            }
        }
        if inner.should_compact(&trigger)
            && let Err(e) = compaction::run(inner)
        {
            tracing::warn!(error = %e, "background compaction failed");
        }
    }
}

impl Inner {
    fn should_compact(&self, trigger: &CompactionTrigger) -> bool {
        self.drain_freed();
        if self.log.poisoned().is_some() {
            return false;
        }
        let total = self.log.total_bytes();
        let live = u64::try_from(self.live_bytes.load(Ordering::Relaxed)).unwrap_or(0);
        let dead = total.saturating_sub(live);
        dead >= trigger.min_dead_bytes && dead as f64 >= trigger.dead_ratio * total as f64
    }

    fn version_for(&self, explicit: Option<u64>) -> u64 {
        match explicit {
            Some(version) => {
                self.next_version
                    .fetch_max(version.saturating_add(1), Ordering::Relaxed);
                version
            }
            None => self.next_version.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Writes `ops` as one unit; returns the version of the last record. With
    /// `located`, the location of each op's record is pushed there.
    /// With `external`, every op's key is external ([`WriteBatch::set_external`]).
    fn write_ops<'a>(
        &self,
        ops: impl Ops<'a>,
        external: bool,
        located: Option<&mut Vec<Location>>,
    ) -> Result<u64> {
        // Which entry is each op's own record (a merge may follow a tombstone the
        // caller did not ask for).
        let own = std::cell::RefCell::new(SmallVec::<[usize; 4]>::new());
        let want = located.is_some();
        self.log.append_planned(
            |out| {
                let mut own = want.then(|| own.borrow_mut());
                self.plan(ops, external, out, own.as_deref_mut())
            },
            |entries, locations| {
                self.apply(entries, locations, external);
                if let Some(located) = located {
                    located.extend(own.borrow().iter().filter_map(|&i| locations.get(i)));
                }
                entries.last().map_or(0, |e| e.version)
            },
        )
    }

    /// Takes into account the record bytes the caller's own index made dead.
    fn drain_freed(&self) {
        let freed = self.index.take_freed();
        if freed > 0 {
            self.live_bytes
                .fetch_sub(i64::try_from(freed).unwrap_or(i64::MAX), Ordering::Relaxed);
        }
    }

    /// Chooses the records for `ops`. Runs under the log's writer lock.
    /// With `own`, pushes there the index in `out` of each op's own record.
    fn plan<'a>(
        &self,
        ops: impl Ops<'a>,
        external: bool,
        out: &mut Entries<'a>,
        mut own: Option<&mut SmallVec<[usize; 4]>>,
    ) {
        let len = ops.size_hint().0;
        out.reserve(len);
        if let Some(own) = own.as_deref_mut() {
            own.reserve(len);
        }
        // Only merges need the time; puts and deletes never read the clock.
        let mut now = None;
        // The expiry of keys written earlier in this batch (`None`: deleted), kept
        // only when a merge of a key the engine indexes will read it (the count
        // counted, not taken from the size hint: a caller's iterator may not know
        // its length).
        let mut touched: Option<HashMap<&[u8], Option<u64>, foldhash::fast::RandomState>> =
            (!external
                && ops.clone().nth(1).is_some()
                && ops.clone().any(|op| op.kind == Kind::Merge))
            .then(HashMap::default);
        for op in ops {
            let version = self.version_for(op.meta.version);
            let expires_at = match op.kind {
                Kind::Merge => {
                    // The key's expiry as of this operation (`None`: no value). The
                    // caller sees to the keys it indexes itself, also after their
                    // writes earlier in the batch.
                    let current = if external || self.index.is_external(op.key) {
                        None
                    } else {
                        match touched.as_ref().and_then(|t| t.get(op.key)) {
                            Some(state) => *state,
                            None => self.index.expires_at(op.key),
                        }
                    };
                    let current = match current {
                        Some(at)
                            if at != 0 && at <= *now.get_or_insert_with(|| self.clock.now_ms()) =>
                        {
                            // The old value has expired; replay must not revive it.
                            out.push(Entry {
                                kind: Kind::Delete,
                                key: op.key,
                                value: &[],
                                version,
                                expires_at: 0,
                            });
                            None
                        }
                        other => other,
                    };
                    match op.meta.expires_at {
                        Some(_) => expiry(op.meta.expires_at),
                        None => current.unwrap_or(0),
                    }
                }
                Kind::Put => expiry(op.meta.expires_at),
                Kind::Delete | Kind::Batch => 0,
            };
            let kind = if op.kind == Kind::Batch {
                Kind::Delete
            } else {
                op.kind
            };
            out.push(Entry {
                kind,
                key: op.key,
                value: if kind == Kind::Delete { &[] } else { op.value },
                version,
                expires_at,
            });
            if let Some(own) = own.as_deref_mut() {
                own.push(out.len() - 1);
            }
            if let Some(touched) = touched.as_mut() {
                touched.insert(op.key, (kind != Kind::Delete).then_some(expires_at));
            }
        }
    }

    /// Applies appended records to the index. Runs under the log's writer lock.
    /// With `external`, every entry's key is external ([`WriteBatch::set_external`]).
    fn apply(&self, entries: &[Entry<'_>], locations: &[Location], external: bool) {
        let mut delta = 0i64;
        for (entry, location) in entries.iter().zip(locations) {
            let change = match entry.kind {
                Kind::Put => Change::Put {
                    location: *location,
                    version: entry.version,
                    expires_at: entry.expires_at,
                },
                Kind::Merge => Change::Merge {
                    location: *location,
                    version: entry.version,
                    expires_at: entry.expires_at,
                },
                Kind::Delete | Kind::Batch => Change::Delete,
            };
            let freed = if external || self.index.is_external(entry.key) {
                0
            } else {
                self.index.apply(entry.key, change).unwrap_or(0)
            };
            if entry.kind != Kind::Delete {
                delta += i64::from(location.len);
            }
            delta -= i64::try_from(freed).unwrap_or(i64::MAX);
        }
        self.live_bytes.fetch_add(delta, Ordering::Relaxed);
    }

    fn get_value(&self, key: &[u8], expired_too: bool, cached: bool) -> Result<Option<Value>> {
        let mut last_error = None;
        for _ in 0..READ_RETRIES {
            let Some(entry) = self.index.get(key) else {
                return Ok(None);
            };
            if !expired_too && entry.expires_at != 0 && entry.is_expired(self.clock.now_ms()) {
                return Ok(None);
            }
            match self.materialize(key, &entry, cached) {
                Ok(bytes) => {
                    return Ok(Some(Value {
                        bytes,
                        version: entry.version,
                        expires_at: (entry.expires_at != 0).then_some(entry.expires_at),
                    }));
                }
                Err(e @ Error::SegmentGone { .. }) => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or(Error::Closed))
    }

    /// Reads the records an entry names and builds the value.
    pub(crate) fn materialize(
        &self,
        key: &[u8],
        entry: &KeyEntry,
        cached: bool,
    ) -> Result<Vec<u8>> {
        let read_checked = |location, kind| self.read_checked_with(key, location, kind, cached);
        match &entry.slot {
            Slot::Value(location) => Ok(read_checked(*location, Kind::Put)?.into_value()),
            Slot::Merged(chain) => {
                let operator = self.merge_operator.as_ref().ok_or(Error::NoMergeOperator)?;
                let base = chain.base.map(|l| read_checked(l, Kind::Put)).transpose()?;
                let operands = if cached {
                    chain
                        .operands
                        .iter()
                        .map(|l| read_checked(*l, Kind::Merge))
                        .collect::<Result<Vec<_>>>()?
                } else {
                    self.read_checked_many(key, &chain.operands, Kind::Merge)?
                };
                let refs: Vec<&[u8]> = operands.iter().map(Record::value).collect();
                Ok(operator.full_merge(key, base.as_ref().map(Record::value), &refs))
            }
        }
    }

    /// Reads records of `key` of `kind`, in the order given, nearby ones with one
    /// read ([`Log::read_many`]), and checks that each is what it should be.
    pub(crate) fn read_checked_many(
        &self,
        key: &[u8],
        locations: &[Location],
        kind: Kind,
    ) -> Result<Vec<Record>> {
        let records = self.log.read_many(locations)?;
        for (record, location) in records.iter().zip(locations) {
            Self::check(key, kind, record, *location)?;
        }
        Ok(records)
    }

    /// Reads a record and checks that it is the key's record of the expected kind;
    /// with `cached` only from the write buffer or the operating system's cache
    /// ([`Log::read_cached`]).
    fn read_checked_with(
        &self,
        key: &[u8],
        location: Location,
        kind: Kind,
        cached: bool,
    ) -> Result<Record> {
        let record = if cached {
            self.log.read_cached(location)?
        } else {
            self.log.read(location)?
        };
        Self::check(key, kind, &record, location)?;
        Ok(record)
    }

    /// Whether `record`, read from `location`, is a record of `key` of `kind`.
    fn check(key: &[u8], kind: Kind, record: &Record, location: Location) -> Result<()> {
        let reason = if record.key() != key {
            Some("the key differs")
        } else if record.kind() != kind {
            Some("the record kind differs")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(Error::BadRecord {
                segment: location.segment,
                offset: location.offset,
                reason: DecodeError::Mismatch(reason),
            }),
            None => Ok(()),
        }
    }
}

/// Iterator over live keys; see [`Engine::keys`].
#[derive(Debug)]
pub struct Keys<'e> {
    engine: &'e Engine,
    chunk: std::vec::IntoIter<(Box<[u8]>, KeyEntry)>,
    token: Option<Vec<u8>>,
    now: u64,
}

impl Iterator for Keys<'_> {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some((key, entry)) = self.chunk.next() {
                if !entry.is_expired(self.now) {
                    return Some(key.into_vec());
                }
                continue;
            }
            let token = self.token.take()?;
            let chunk = self.engine.inner.index.scan(&token);
            self.chunk = chunk.entries.into_iter();
            self.token = chunk.next;
        }
    }
}

/// Iterator over live key-value pairs; see [`Engine::iter`].
#[derive(Debug)]
pub struct Iter<'e> {
    keys: Keys<'e>,
}

impl Iterator for Iter<'_> {
    type Item = Result<(Vec<u8>, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let key = self.keys.next()?;
            match self.keys.engine.get_value(&key) {
                Ok(Some(value)) => return Some(Ok((key, value))),
                Ok(None) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// How many keys ahead of a loader's inserts [`Engine::for_each_live_ahead`] names
/// them: two, as the server's pipeline look-ahead fetches a key's slot two
/// requests before its lookup.
const LIVE_AHEAD: usize = 2;

/// The largest value [`Engine::for_each_live_ahead`] copies aside; a bigger one is
/// passed on as soon as it is read, without being named ahead (keys are passed on
/// in no particular order).
const MAX_WAITING_VALUE: usize = 4096;

/// What [`Engine::for_each_live_ahead`] tells of each key ahead of its turn.
type AheadFn<'a> = dyn Fn(&[u8]) + Sync + 'a;

/// The records of one segment scan read and not yet passed on, copied out of the
/// scan's buffer into buffers kept from one record to the next.
#[derive(Default)]
struct Waiting {
    records: std::collections::VecDeque<WaitingRecord>,
    spare: Vec<WaitingRecord>,
}

struct WaitingRecord {
    key: Vec<u8>,
    value: Vec<u8>,
    expires_at: Option<u64>,
    location: Location,
}

impl Waiting {
    fn len(&self) -> usize {
        self.records.len()
    }

    fn push(&mut self, key: &[u8], value: &[u8], expires_at: Option<u64>, location: Location) {
        let mut r = self.spare.pop().unwrap_or_else(|| WaitingRecord {
            key: Vec::new(),
            value: Vec::new(),
            expires_at,
            location,
        });
        r.key.clear();
        r.key.extend_from_slice(key);
        r.value.clear();
        r.value.extend_from_slice(value);
        r.expires_at = expires_at;
        r.location = location;
        self.records.push_back(r);
    }

    fn pass_oldest<F>(&mut self, f: &F) -> Result<()>
    where
        F: Fn(&[u8], &[u8], Option<u64>, &Slot) -> Result<()>,
    {
        let Some(r) = self.records.pop_front() else {
            return Ok(());
        };
        let result = f(&r.key, &r.value, r.expires_at, &Slot::Value(r.location));
        self.spare.push(r);
        result
    }

    fn pass_all<F>(&mut self, f: &F) -> Result<()>
    where
        F: Fn(&[u8], &[u8], Option<u64>, &Slot) -> Result<()>,
    {
        while !self.records.is_empty() {
            self.pass_oldest(f)?;
        }
        Ok(())
    }

    /// Drops what a failed scan left waiting.
    fn clear(&mut self) {
        while let Some(r) = self.records.pop_front() {
            self.spare.push(r);
        }
    }
}
