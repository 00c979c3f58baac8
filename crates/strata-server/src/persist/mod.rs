//! Persistence: every change logged through `strata-engine`, recovery at start-up,
//! group commit, compaction.
//!
//! # Layout in the engine
//!
//! A key of database `db` is stored under `namespace(db) ‖ key`, where the namespace
//! is a big-endian `u32` the database currently maps to. The map itself is a record
//! under the reserved namespace [`META`]. FLUSHDB gives the database a fresh
//! namespace and SWAPDB swaps two entries of the map: one small record each, however
//! many keys there are; keys left in a namespace no database maps to are dead, skipped
//! by recovery and deleted in the background.
//!
//! Values are written as the command layer's records say (`strata_commands::effects`):
//! whole values as puts, operations as merge operands that [`replay::Replay`] applies,
//! deletions as tombstones, each with an absolute expiry and a hybrid-logical-clock
//! version. One command's (or transaction's) records are one engine batch, applied all
//! or nothing after a crash.
//!
//! # Durability
//!
//! The engine never fsyncs on its own here. With `appendfsync always` a reply waits
//! (asynchronously) until a sync covers its records, and one sync covers every record
//! appended before it: group commit. The sync runs where Redis runs its own, before
//! the event loop sleeps: an I/O thread that has run every task it had syncs before
//! it waits for sockets ([`Persistence::sync_before_sleep`]), and the syncer thread
//! syncs when a batch has waited a millisecond without one. With `everysec` the
//! syncer syncs once a second; with `no` never (the OS writes back).
//!
//! # Errors
//!
//! When an append or a sync fails, the engine refuses further writes (it is
//! poisoned). Write commands then get Redis's MISCONF error while reads go on; the
//! syncer keeps trying to reopen the engine and, once it succeeds, rewrites every key
//! whose records may not have reached the disk from the in-memory state, and writes
//! resume.

pub mod control;
pub mod index;
pub mod replay;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use strata_commands::effects::{Batch, RecordKind};
use strata_engine::{Engine, FsyncPolicy, Index, Options, WriteBatch, WriteMeta, WriteOp};
use strata_keyspace::{Keyspace, Shard, Ttl};

use crate::config::Appendfsync;

/// The namespace of strata's own records.
pub const META: u32 = u32::MAX;
/// The key of the database → namespace map within [`META`].
const DBMAP_KEY: &[u8] = b"dbmap";
/// The key of the FUNCTION libraries (a FUNCTION DUMP payload) within [`META`].
const FUNCTIONS_KEY: &[u8] = b"functions";
/// Keys loaded between two progress lines at start-up.
const PROGRESS_EVERY: u64 = 1_000_000;
/// Records per engine batch when a whole shard is written out.
const DUMP_BATCH_KEYS: usize = 1024;
/// Bytes per engine batch when a whole shard is written out.
const DUMP_BATCH_BYTES: usize = 4 << 20;
/// How often the syncer looks under `always` while batches are being appended: the
/// longest a batch waits for its fsync when no I/O thread runs out of work.
const SYNCER_ALWAYS_POLL: Duration = Duration::from_millis(1);
/// The longest a thread waits for another's fsync to end before it runs the next.
const SYNC_WAIT_LIMIT: Duration = Duration::from_millis(1);
/// Polls without a batch appended after which the syncer sleeps long under `always`.
const SYNCER_QUIET_POLLS: u32 = 100;
/// How long the syncer sleeps otherwise (it is woken for errors, shutdown, policy
/// changes and, under `always`, the first wait after a quiet time).
const SYNCER_IDLE_POLL: Duration = Duration::from_millis(100);

/// Bytes of zeros the store keeps written past its log's records under
/// `appendfsync always`, where a reply waits for each fsync: the fsync of records
/// written over zeros changes no file size, which took an `fdatasync` on ext4
/// from 172–183 µs to 124 µs (see `strata_engine::LogOptions::zero_ahead`). None
/// under the other policies, whose fsyncs no reply waits for: the zeros would
/// only double what reaches the device.
fn zero_ahead(fsync: Appendfsync) -> u64 {
    match fsync {
        Appendfsync::Always => 4 << 20,
        Appendfsync::Everysec | Appendfsync::No => 0,
    }
}

/// Stores of this process that refuse writes (their `error` is set). Zero means no
/// store has an error, which write commands check before each run without finding
/// the server's current store (see [`Persistence::any_failed`]).
static FAILED_STORES: AtomicUsize = AtomicUsize::new(0);

/// Which namespace each database's keys live in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbMap {
    pub namespaces: Vec<u32>,
    pub next: u32,
}

impl DbMap {
    fn initial(databases: usize) -> DbMap {
        DbMap {
            namespaces: (0..databases as u32).collect(),
            next: databases as u32,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 4 * self.namespaces.len());
        out.extend_from_slice(&self.next.to_le_bytes());
        for ns in &self.namespaces {
            out.extend_from_slice(&ns.to_le_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<DbMap> {
        let mut words = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        if !bytes.len().is_multiple_of(4) {
            return None;
        }
        let next = words.next()?;
        Some(DbMap {
            next,
            namespaces: words.collect(),
        })
    }

    fn fresh(&mut self) -> u32 {
        let ns = self.next;
        self.next += 1;
        ns
    }

    fn db_of(&self, ns: u32) -> Option<usize> {
        self.namespaces.iter().position(|&n| n == ns)
    }
}

/// The store's directory inside `dir` (the name Redis 7 gives its append-only files'
/// directory).
pub const DATA_DIR: &str = "appendonlydir";

/// The engine key of `key` in namespace `ns`.
fn engine_key(ns: u32, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(4 + key.len());
    k.extend_from_slice(&ns.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// A hybrid logical clock: milliseconds in the high bits, a counter in the low 16,
/// never going backwards.
#[derive(Default)]
struct Hlc(AtomicU64);

impl Hlc {
    fn next(&self, now_ms: u64) -> u64 {
        let physical = now_ms << 16;
        let mut last = self.0.load(Ordering::Relaxed);
        loop {
            let next = physical.max(last + 1);
            match self
                .0
                .compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }
}

/// What INFO persistence reports of the open store.
#[derive(Default)]
pub struct PersistStats {
    /// Bytes of the log after the last compaction (or at opening): `aof_base_size`,
    /// and the base the automatic compaction trigger measures growth from.
    pub base_size: AtomicU64,
    /// Keys loaded at start-up, and keys skipped because they had expired.
    pub loaded_keys: AtomicU64,
    pub loaded_expired: AtomicU64,
}

/// Buffers [`Persistence::log`] reuses, one set per thread.
#[derive(Default)]
struct Scratch {
    /// What each record of the batch becomes.
    plan: Vec<Planned>,
    locations: Vec<strata_engine::Location>,
}

/// What a record of a batch becomes in the store's batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Planned {
    /// Nothing (a change of the database map, an old value the store sees to).
    Skip,
    /// An operation whose location nobody lists.
    Write,
    /// The store's `n`th operation, whose location the keyspace lists.
    Listed(usize),
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

/// Records of a batch's plan a thread keeps room for between two appends.
const SCRATCH_KEEP: usize = 4096;

/// How `appendfsync` is kept where the hot path reads it.
fn fsync_code(a: Appendfsync) -> u8 {
    match a {
        Appendfsync::Always => 0,
        Appendfsync::Everysec => 1,
        Appendfsync::No => 2,
    }
}

fn fsync_from_code(c: u8) -> Appendfsync {
    match c {
        0 => Appendfsync::Always,
        1 => Appendfsync::Everysec,
        _ => Appendfsync::No,
    }
}

/// The durable store behind the keyspace.
pub struct Persistence {
    dir: PathBuf,
    options: Options,
    engine: ArcSwapOption<Engine>,
    /// The engine's index (see [`index`]): replaced with the engine after a write error.
    index: ArcSwap<index::StoreIndex>,
    keyspace: Arc<Keyspace>,
    /// Read by every append; replaced (under `map_change`) by FLUSHDB, FLUSHALL and
    /// SWAPDB, which hold every shard while they log. Shared with the index.
    map: Arc<ArcSwap<DbMap>>,
    map_change: Mutex<()>,
    /// Set while the keyspace is being written to fresh namespaces: the map on disk
    /// still names the old ones until [`Persistence::commit_map`].
    map_pending: AtomicBool,
    /// The FUNCTION libraries last written (a FUNCTION DUMP payload), rewritten by
    /// the recovery after a write error like the keys.
    functions: Mutex<Option<Vec<u8>>>,
    /// The thread deleting the keys of dead namespaces, and its stop signal.
    reaper: Mutex<Option<std::thread::JoinHandle<()>>>,
    reaper_stop: Arc<AtomicBool>,
    syncer: Mutex<Option<std::thread::JoinHandle<()>>>,
    hlc: Hlc,
    /// Batches appended; a reply that must be durable waits for `synced` to reach
    /// its batch's number. Numbering continues across stores opened by one process
    /// (see [`Persistence::open`]), so a number never names two batches.
    appended: AtomicU64,
    synced: AtomicU64,
    /// Batches handed to the operating system (see [`Persistence::flush_to`]).
    flushed: AtomicU64,
    fsync: AtomicU8,
    /// Whether `error` is set (checked on every append without a lock).
    failed: AtomicBool,
    /// The error write commands get while the log cannot be written.
    error: Mutex<Option<String>>,
    /// Wakes the syncer (a write error to recover from, or shutdown).
    wake: (Mutex<bool>, Condvar),
    /// Tells waiting connections a sync completed.
    pub synced_notify: tokio::sync::Notify,
    /// Set while a thread runs an fsync under `always` (see
    /// [`Persistence::sync_before_sleep`]).
    syncing: AtomicBool,
    /// Set while a thread waits to run the next fsync. One is enough: its fsync
    /// covers every batch appended before it starts.
    sync_next: AtomicBool,
    /// Set while the syncer sleeps long under `always` (no batch appended for a
    /// while): the next connection to wait wakes it.
    syncer_idle: AtomicBool,
    /// Syncs of the log that succeeded.
    syncs: AtomicU64,
    pub stats: PersistStats,
    stop: AtomicBool,
}

impl Drop for Persistence {
    fn drop(&mut self) {
        // A store dropped with an error no longer refuses anything.
        if self.error.get_mut().is_some() {
            FAILED_STORES.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence")
            .field("dir", &self.dir)
            .finish()
    }
}

/// Closes an engine once appends in flight (which hold it for a moment) let go;
/// if they do not, it is synced and left to close when dropped.
fn close_engine(mut engine: Arc<Engine>) -> strata_engine::Result<()> {
    for _ in 0..1000 {
        match Arc::try_unwrap(engine) {
            Ok(owned) => return owned.close(),
            Err(shared) => {
                engine = shared;
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    engine.sync()
}

/// Held by the thread running an fsync under `always`: when it is done (or
/// panics) the flag goes down and the waiting connections wake.
struct Turn<'a>(&'a Persistence);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.syncing.store(false, Ordering::Release);
        self.0.synced_notify.notify_waiters();
    }
}

/// The MISCONF text Redis uses when its append-only file cannot be written.
fn misconf(e: &strata_engine::Error) -> String {
    format!("MISCONF Errors writing to the AOF file: {e}")
}

impl Persistence {
    /// Opens (or creates) the store in `dir/appendonlydir`.
    ///
    /// `first_batch` numbers the first batch appended (one past the last number a
    /// previous store of this process used). Compaction runs only when asked
    /// ([`Persistence::rewrite`]): the server triggers it by `auto-aof-rewrite-*`.
    pub fn open(
        dir: &Path,
        keyspace: Arc<Keyspace>,
        fsync: Appendfsync,
        replay: Arc<replay::Replay>,
        first_batch: u64,
    ) -> anyhow::Result<Persistence> {
        let dir = dir.join(DATA_DIR);
        std::fs::create_dir_all(&dir)
            .map_err(|e| anyhow::anyhow!("can't create {}: {e}", dir.display()))?;
        let options = Options::default()
            .with_fsync(FsyncPolicy::Never)
            .with_zero_ahead(zero_ahead(fsync))
            .with_compaction(None)
            .with_merge_operator(replay);
        let databases = keyspace.databases();
        let shared_map = Arc::new(ArcSwap::from_pointee(DbMap::initial(databases)));
        let index = Arc::new(index::StoreIndex::new(keyspace.clone(), shared_map.clone()));
        let engine = Engine::open_with_index(&dir, options.clone(), Box::new(index.clone()))
            .map_err(|e| anyhow::anyhow!("can't open the data directory {}: {e}", dir.display()))?;
        let map = match engine.get(&engine_key(META, DBMAP_KEY)) {
            Ok(Some(bytes)) => DbMap::decode(&bytes).ok_or_else(|| {
                anyhow::anyhow!("the database map in {} is damaged", dir.display())
            })?,
            Ok(None) => DbMap::initial(databases),
            Err(e) => anyhow::bail!("can't read the database map in {}: {e}", dir.display()),
        };
        if map.namespaces.len() != databases {
            anyhow::bail!(
                "the data in {} was written with databases {}; start with the same setting",
                dir.display(),
                map.namespaces.len()
            );
        }
        shared_map.store(Arc::new(map));
        let stats = PersistStats::default();
        stats
            .base_size
            .store(engine.stats().total_bytes, Ordering::Relaxed);
        let before = first_batch.saturating_sub(1);
        Ok(Persistence {
            dir,
            options,
            engine: ArcSwapOption::from_pointee(engine),
            index: ArcSwap::new(index),
            keyspace,
            map: shared_map,
            map_change: Mutex::new(()),
            map_pending: AtomicBool::new(false),
            functions: Mutex::new(None),
            reaper: Mutex::new(None),
            reaper_stop: Arc::new(AtomicBool::new(false)),
            syncer: Mutex::new(None),
            hlc: Hlc::default(),
            appended: AtomicU64::new(before),
            synced: AtomicU64::new(before),
            flushed: AtomicU64::new(before),
            fsync: AtomicU8::new(fsync_code(fsync)),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
            wake: (Mutex::new(false), Condvar::new()),
            synced_notify: tokio::sync::Notify::new(),
            syncing: AtomicBool::new(false),
            sync_next: AtomicBool::new(false),
            syncer_idle: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
            stats,
            stop: AtomicBool::new(false),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes the keyspace the index of the keys it holds (see [`index`]): once the
    /// keyspace holds everything the store does (after loading, after a store opened
    /// on a live keyspace is written, after the reconcile of a write error). Holds
    /// every shard meanwhile.
    ///
    /// With `relist`, every key's list is made from the engine's keydir; without,
    /// the caller has listed them already (loading lists each key as it loads it).
    pub fn switch_index(&self, relist: bool) {
        let started = Instant::now();
        let engine = self.engine();
        // A compaction asks the index between its reads: not while it changes hands.
        let _compaction = engine.as_ref().map(|e| e.hold_compaction());
        let mut shards = self.keyspace.lock_all();
        self.index.load().switch(&mut shards, relist);
        drop(shards);
        tracing::debug!(
            "the keyspace lists the store's records ({:.3} s)",
            started.elapsed().as_secs_f64()
        );
    }

    /// Forgets the locations the keyspace lists, when the store closes.
    fn forget_locations(&self) {
        for s in 0..self.keyspace.num_shards() {
            for db in self.keyspace.lock(s).dbs_mut() {
                db.clear_log_refs();
            }
        }
    }

    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.engine.load_full()
    }

    pub fn set_fsync(&self, fsync: Appendfsync) {
        self.fsync.store(fsync_code(fsync), Ordering::Relaxed);
        if let Some(engine) = self.engine.load().as_ref() {
            engine.set_zero_ahead(zero_ahead(fsync));
        }
        self.kick();
    }

    pub fn fsync(&self) -> Appendfsync {
        fsync_from_code(self.fsync.load(Ordering::Relaxed))
    }

    /// Whether any store of this process refuses writes: false means that none
    /// does, so a write need not ask its server's store.
    #[inline]
    pub fn any_failed() -> bool {
        FAILED_STORES.load(Ordering::Acquire) != 0
    }

    pub fn write_error(&self) -> Option<String> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.error.lock().clone()
    }

    fn set_error(&self, text: Option<String>) {
        let mut error = self.error.lock();
        match (error.is_some(), text.is_some()) {
            (false, true) => {
                FAILED_STORES.fetch_add(1, Ordering::AcqRel);
            }
            (true, false) => {
                FAILED_STORES.fetch_sub(1, Ordering::AcqRel);
            }
            _ => {}
        }
        self.failed.store(text.is_some(), Ordering::Release);
        *error = text;
    }

    /// Whether the keyspace is being written to fresh namespaces (see
    /// [`Persistence::renamespace`]): the store does not hold every key's value
    /// where reads look for it yet.
    pub fn rewriting_map(&self) -> bool {
        self.map_pending.load(Ordering::Acquire)
    }

    /// The number of the last batch appended.
    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    /// Syncs of the log that succeeded since the store was opened.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Whether the last batch appended is durable.
    pub fn fully_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire) >= self.appended()
    }

    /// Loads every live key into the keyspace, logging progress.
    ///
    /// `progress` counts the bytes of keys and values read so far (INFO's
    /// `loading_loaded_bytes`).
    ///
    /// With `tiered` (`maxmemory-policy tiered` and its `maxmemory`), string values
    /// that can leave memory are loaded as placeholders ([`strata_keyspace::value::Cold`])
    /// once the memory in use passes 90% of the limit: a data set bigger than memory
    /// loads, and the first reads of the rest bring it back.
    pub fn recover(
        &self,
        limits: &strata_keyspace::EncodingLimits,
        now_ms: u64,
        progress: &AtomicU64,
        tiered: Option<u64>,
    ) -> anyhow::Result<u64> {
        let Some(engine) = self.engine() else {
            anyhow::bail!("the store is closed")
        };
        let ks = &*self.keyspace;
        let map = self.map.load_full();
        let started = Instant::now();
        let (keys, bytes, dead) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        let damaged: Mutex<Option<String>> = Mutex::new(None);
        // Size every database's tables for what it is about to receive (keys
        // spread evenly over the shards), instead of growing them step by step.
        let shards = ks.num_shards();
        for (prefix, count) in engine.count_by_prefix(4) {
            let Some(ns) = prefix.first_chunk::<4>().map(|p| u32::from_be_bytes(*p)) else {
                continue;
            };
            let Some(db) = map.db_of(ns).filter(|_| ns != META) else {
                continue;
            };
            let per_shard = (count as usize / shards) + (count as usize / shards / 16) + 16;
            for shard in 0..shards {
                ks.lock(shard).db(db).reserve(per_shard);
            }
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let over_limit = AtomicBool::new(false);
        let check_memory = || {
            if let Some(max) = tiered {
                let used = crate::memory::allocated().saturating_sub(engine.bookkeeping_memory());
                over_limit.store(used > max / 10 * 9, Ordering::Relaxed);
            }
        };
        check_memory();
        // Two keys ahead of its insert, each key's shard lock and home slot start
        // loading (the inserts' cache misses are most of a load's time).
        let ahead = |key: &[u8]| {
            let Some((ns, user_key)) = key.split_first_chunk::<4>() else {
                return;
            };
            if let Some(db) = map.db_of(u32::from_be_bytes(*ns)) {
                ks.prefetch(db, ks.hash(user_key));
            }
        };
        let scanned = engine.for_each_live_ahead(threads, ahead, |key, value, expiry, slot| {
            let Some((ns, user_key)) = key.split_first_chunk::<4>() else {
                return Ok(());
            };
            let ns = u32::from_be_bytes(*ns);
            if ns == META {
                return Ok(());
            }
            let Some(db) = map.db_of(ns) else {
                dead.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            };
            let total = bytes.fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
            if value.is_empty() {
                return Ok(());
            }
            // Past the limit under `tiered`, a string that may leave memory is
            // loaded as a placeholder: its bytes stay in the log.
            let cold = over_limit
                .load(Ordering::Relaxed)
                .then(|| strata_keyspace::serialize::tierable_string_len(value))
                .flatten();
            let decoded = match cold {
                Some(len) => Ok(strata_keyspace::Value::Cold(
                    strata_keyspace::value::Cold::new(len),
                )),
                None => strata_keyspace::serialize::decode(value, limits),
            };
            let v = match decoded {
                Ok(v) => v,
                Err(e) => {
                    damaged.lock().get_or_insert_with(|| {
                        format!("damaged value for a key in {}: {e}", self.dir.display())
                    });
                    return Ok(());
                }
            };
            let hash = ks.hash(user_key);
            let ttl = expiry.map_or(Ttl::Persist, Ttl::At);
            let mut shard = ks.lock(ks.shard_of_hash(hash));
            let data = shard.db(db);
            data.set(hash, user_key, v, ttl, now_ms);
            // The keyspace lists where the value is: the index after the switch.
            data.set_log_refs(hash, user_key, Some(index::slot_refs(slot)));
            let n = keys.fetch_add(1, Ordering::Relaxed) + 1;
            if n % 1024 == 0 {
                progress.store(total, Ordering::Relaxed);
                check_memory();
            }
            if n % PROGRESS_EVERY == 0 {
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                tracing::info!("loading: {n} keys, {:.1} MB/s", total as f64 / 1e6 / secs);
            }
            Ok(())
        });
        scanned.map_err(|e| anyhow::anyhow!("reading {}: {e}", self.dir.display()))?;
        if let Some(e) = damaged.into_inner() {
            anyhow::bail!(e);
        }
        let (keys, bytes, dead) = (keys.into_inner(), bytes.into_inner(), dead.into_inner());
        // Index entries neither loaded nor dead are expired ones (and the map).
        let expired = engine.stats().live_keys.saturating_sub(
            keys + dead
                + u64::from(engine.contains(&engine_key(META, DBMAP_KEY)))
                + u64::from(engine.contains(&engine_key(META, FUNCTIONS_KEY))),
        );
        self.switch_index(false);
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        tracing::info!(
            "DB loaded from disk: {keys} keys in {secs:.3} seconds ({:.1} MB/s)",
            bytes as f64 / 1e6 / secs
        );
        self.stats.loaded_keys.store(keys, Ordering::Relaxed);
        self.stats.loaded_expired.store(expired, Ordering::Relaxed);
        if dead > 0 {
            self.reap_dead_namespaces();
        }
        Ok(keys)
    }

    /// The FUNCTION libraries last logged (a FUNCTION DUMP payload), if any.
    pub fn functions(&self) -> anyhow::Result<Option<Vec<u8>>> {
        let Some(engine) = self.engine() else {
            anyhow::bail!("the store is closed")
        };
        let payload = engine
            .get(&engine_key(META, FUNCTIONS_KEY))
            .map_err(|e| anyhow::anyhow!("can't read the function libraries: {e}"))?;
        self.functions.lock().clone_from(&payload);
        Ok(payload)
    }

    /// The value of `key` in database `db` as the store holds it, for a value that
    /// `maxmemory-policy tiered` moved out of memory. Expired values are read too:
    /// the keyspace's own clock decides expiry.
    ///
    /// `refs` are where the key's database listed the value's records when the
    /// caller saw it; with none, or if compaction has moved them since, the index
    /// is asked, which takes the key's shard: call without holding it then.
    pub fn read_value(
        &self,
        db: usize,
        key: &[u8],
        refs: Option<&strata_keyspace::logref::LogRefs>,
        limits: &strata_keyspace::EncodingLimits,
    ) -> Result<Option<strata_keyspace::Value>, String> {
        let Some(engine) = self.engine() else {
            return Err("ERR the log is closed: can't read the value from disk".into());
        };
        let Some(&ns) = self.map.load().namespaces.get(db) else {
            return Ok(None);
        };
        let key = engine_key(ns, key);
        let listed = refs.filter(|_| self.index.load().is_switched());
        let bytes = match listed.map(|r| engine.read_entry(&key, &index::to_entry(r), false)) {
            Some(Ok(bytes)) => Some(bytes),
            // Compaction moved the records since the caller saw them: ask the index.
            None | Some(Err(strata_engine::Error::SegmentGone { .. })) => engine
                .get_value_expired_too(&key)
                .map(|v| v.map(|v| v.bytes))
                .map_err(|e| format!("ERR can't read the value from disk: {e}"))?,
            Some(Err(e)) => return Err(format!("ERR can't read the value from disk: {e}")),
        };
        decode_stored(bytes, limits)
    }

    /// [`Persistence::read_value`] if it needs no wait for the device (the record is
    /// in the log's buffer or the operating system's cache); `None` otherwise, and
    /// on any error (the waiting read reports it).
    ///
    /// Safe with the key's shard held: with the keyspace as the index, it reads
    /// only where `refs` say.
    pub fn read_value_cached(
        &self,
        db: usize,
        key: &[u8],
        refs: Option<&strata_keyspace::logref::LogRefs>,
        limits: &strata_keyspace::EncodingLimits,
    ) -> Option<strata_keyspace::Value> {
        let engine = self.engine()?;
        let ns = *self.map.load().namespaces.get(db)?;
        let key = engine_key(ns, key);
        let bytes = if self.index.load().is_switched() {
            engine
                .read_entry(&key, &index::to_entry(refs?), true)
                .ok()?
        } else {
            engine.get_value_cached(&key).ok()??.bytes
        };
        decode_stored(Some(bytes), limits).ok().flatten()
    }
}

/// A stored value decoded for the keyspace.
fn decode_stored(
    bytes: Option<Vec<u8>>,
    limits: &strata_keyspace::EncodingLimits,
) -> Result<Option<strata_keyspace::Value>, String> {
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    strata_keyspace::serialize::decode(&bytes, limits)
        .map(Some)
        .map_err(|e| format!("ERR the value read from disk is damaged: {e}"))
}

impl Persistence {
    /// Writes the FUNCTION libraries as a whole (a store opened on a live server).
    pub fn put_functions(&self, payload: &[u8], now_ms: u64) -> Result<(), String> {
        let Some(engine) = self.engine.load_full() else {
            return Err("the store is closed".into());
        };
        let version = self.hlc.next(now_ms);
        engine
            .put_with(
                &engine_key(META, FUNCTIONS_KEY),
                payload,
                WriteMeta::new().with_version(version),
            )
            .map_err(|e| misconf(&e))?;
        *self.functions.lock() = Some(payload.to_vec());
        Ok(())
    }

    /// Appends one command's records as a batch. Returns the batch's number if the
    /// reply must wait for it to be durable.
    pub fn log(
        &self,
        records: &mut Batch,
        now_ms: u64,
        located: &mut strata_commands::effects::Located,
    ) -> Result<Option<u64>, String> {
        located.clear();
        if let Some(e) = self.write_error() {
            return Err(e);
        }
        let mut scratch = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        let result = self.log_with(&mut scratch, records, now_ms, located);
        scratch.plan.clear();
        // A big transaction's plan is not worth keeping.
        if scratch.plan.capacity() <= SCRATCH_KEEP {
            SCRATCH.with(|s| *s.borrow_mut() = scratch);
        }
        result
    }

    fn log_with(
        &self,
        scratch: &mut Scratch,
        records: &mut Batch,
        now_ms: u64,
        located: &mut strata_commands::effects::Located,
    ) -> Result<Option<u64>, String> {
        let index = self.index.load();
        // Cannot change meanwhile: switching holds every shard, and the command
        // holds its own.
        let switched = index.is_switched();
        let version = self.hlc.next(now_ms);
        let Scratch { plan, locations } = scratch;
        let map = self.map.load();
        // A copy of the map, made by the first record that changes it.
        let mut changed: Option<DbMap> = None;
        let mut dead = false;
        // A record of the server's own (not a database's key) in the batch.
        let mut functions = false;
        // The store's operations planned so far.
        let mut ops = 0;
        // Each key's engine key is `namespace ‖ key`: the namespace is written into
        // the room the batch keeps before the key, which the store then reads in
        // place.
        records.write_prefixes(|r| {
            let ns = changed
                .as_ref()
                .unwrap_or(&map)
                .namespaces
                .get(r.db)
                .copied()
                .unwrap_or(0)
                .to_be_bytes();
            let planned = match r.kind {
                // Listed by the keyspace only once it is the store's index (and
                // then, after a change of the map, only if still its key: below).
                RecordKind::Put { .. } | RecordKind::Op { .. } if switched => Planned::Listed(ops),
                RecordKind::Put { .. } | RecordKind::Op { .. } => Planned::Write,
                RecordKind::Fresh => {
                    // The engine sees to its own keys' old values; the keyspace's
                    // keys get a tombstone before their first operation. (With the
                    // map in force, the key is the keyspace's once it has switched.)
                    let external = if changed.is_none() {
                        switched
                    } else {
                        index.is_external(&[&ns, r.key].concat())
                    };
                    if external {
                        Planned::Write
                    } else {
                        Planned::Skip
                    }
                }
                RecordKind::Delete => Planned::Write,
                RecordKind::FlushDb => {
                    let m = changed.get_or_insert_with(|| DbMap::clone(&map));
                    let fresh = m.fresh();
                    if let Some(slot) = m.namespaces.get_mut(r.db) {
                        *slot = fresh;
                    }
                    dead = true;
                    Planned::Skip
                }
                RecordKind::FlushAll => {
                    let m = changed.get_or_insert_with(|| DbMap::clone(&map));
                    for i in 0..m.namespaces.len() {
                        let fresh = m.fresh();
                        m.namespaces[i] = fresh;
                    }
                    dead = true;
                    Planned::Skip
                }
                RecordKind::SwapDb { other } => {
                    let m = changed.get_or_insert_with(|| DbMap::clone(&map));
                    if r.db < m.namespaces.len() && other < m.namespaces.len() {
                        m.namespaces.swap(r.db, other);
                    }
                    Planned::Skip
                }
                RecordKind::Functions { payload } => {
                    functions = true;
                    *self.functions.lock() = Some(payload.to_vec());
                    Planned::Write
                }
            };
            if planned != Planned::Skip {
                ops += 1;
            }
            plan.push(planned);
            ns
        });
        drop(map);
        // Which records the keyspace lists: decided with the map this batch
        // installs (a key written after a FLUSHDB in the same transaction is in the
        // database's new namespace). Without a change every listed record's
        // namespace came from the map in force, which cannot change while the
        // command holds its shards: each is external once the index has switched.
        if changed.is_some() {
            for (r, planned) in records.iter_prefixed().zip(plan.iter_mut()) {
                if matches!(planned, Planned::Listed(_)) && !index.is_external(r.key) {
                    *planned = Planned::Write;
                }
            }
        }
        // Every key is a database's, in the map in force: the keyspace's own.
        let external = switched && changed.is_none() && !functions;
        let meta = WriteMeta::new().with_version(version);
        let functions_key = functions.then(|| engine_key(META, FUNCTIONS_KEY));
        let pending = self.map_pending.load(Ordering::Acquire);
        let _map_change = changed.as_ref().map(|m| {
            let guard = self.map_change.lock();
            // Installed before the write: if the write fails, the recovery after the
            // error writes this map (the keyspace has already changed).
            self.map.store(Arc::new(m.clone()));
            guard
        });
        let map_put = changed
            .as_ref()
            .filter(|_| !pending)
            .map(|m| (engine_key(META, DBMAP_KEY), m.encode()));
        // Gathered on the stack (a pipeline's batch fits), for the engine's plan
        // to read twice as a plain list rather than through the records' places.
        let mut batch: SmallVec<[WriteOp<'_>; 16]> = SmallVec::with_capacity(ops + 1);
        let planned = records
            .iter_prefixed()
            .zip(plan.iter())
            .filter(|(_, planned)| **planned != Planned::Skip)
            .map(|(r, _)| match r.kind {
                RecordKind::Put { value, expires_at } => {
                    WriteOp::put(r.key, value, meta.with_expiry(expires_at))
                }
                RecordKind::Op { op, expires_at } => {
                    WriteOp::merge(r.key, op, meta.with_expiry(expires_at))
                }
                RecordKind::Functions { payload } => {
                    WriteOp::put(functions_key.as_deref().unwrap_or_default(), payload, meta)
                }
                // A tombstone (a delete, a key's old value); the database-level
                // records were planned to nothing.
                _ => WriteOp::delete(r.key, meta),
            })
            .chain(map_put.as_ref().map(|(k, v)| WriteOp::put(k, v, meta)));
        batch.extend(planned);
        // A guard, not a clone: cloning the `Arc` writes its count, a cache line
        // every I/O thread would then take in turn on every write.
        let engine = self.engine.load();
        let Some(engine) = engine.as_ref() else {
            return Err("MISCONF the store is closed".into());
        };
        if let Err(e) = engine.write_ops_located(batch.iter().copied(), external, locations) {
            let text = misconf(&e);
            tracing::warn!(
                "Error writing to the log: {e}; refusing writes until it can be written"
            );
            self.set_error(Some(text.clone()));
            self.kick();
            return Err(text);
        }
        located.extend(plan.iter().map(|planned| match planned {
            Planned::Listed(i) => locations.get(*i).copied().map(index::to_loc),
            _ => None,
        }));
        if dead && !pending {
            self.reap_dead_namespaces();
        }
        // Under `always` the reply's wait makes the batch durable (`wait_synced`).
        // Sequentially consistent: the wait then reads `syncer_idle`, which the
        // syncer sets before it reads this (see `spawn_syncer`); with weaker
        // orderings each could miss the other's write. (The same locked
        // instruction on x86.)
        let n = self.appended.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Some(n))
    }

    /// Before replies that report batch `n` go out: hands the log's buffered
    /// records to the operating system (one write for every batch appended so far,
    /// whoever appended it), so that an acknowledged write survives the process
    /// being killed whatever `appendfsync` says, as in Redis. A failure makes the
    /// store refuse writes until it recovers.
    pub fn flush_to(&self, n: u64) -> Result<(), String> {
        if self.flushed.load(Ordering::Acquire) >= n || self.synced.load(Ordering::Acquire) >= n {
            return Ok(());
        }
        let target = self.appended.load(Ordering::Acquire);
        let engine = self.engine.load();
        let Some(engine) = engine.as_ref() else {
            return Err("MISCONF the store is closed".into());
        };
        match engine.flush() {
            Ok(()) => {
                self.flushed.fetch_max(target, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => {
                let text = misconf(&e);
                tracing::warn!(
                    "Error writing to the log: {e}; refusing writes until it can be written"
                );
                self.set_error(Some(text.clone()));
                self.kick();
                Err(text)
            }
        }
    }

    /// Writes every key of a shard as a whole value: how a store opened on a live
    /// keyspace (CONFIG SET appendonly yes, a snapshot) gets its contents. Call with
    /// the shard locked and logging on, so that the shard's records before and after
    /// this one land in the order of the changes.
    pub fn dump_shard(&self, shard: &Shard, now_ms: u64) -> Result<u64, String> {
        let Some(engine) = self.engine.load_full() else {
            return Err("the store is closed".into());
        };
        let map = self.map.load_full();
        let version = self.hlc.next(now_ms);
        let mut batch = WriteBatch::new();
        let (mut bytes, mut keys) = (0usize, 0u64);
        let mut value = Vec::new();
        for (db, ns) in map.namespaces.iter().enumerate() {
            let Some(data) = shard.dbs().get(db) else {
                continue;
            };
            for entry in data.iter(now_ms) {
                value.clear();
                strata_keyspace::serialize::encode(entry.value(), &mut value);
                let meta = WriteMeta::new()
                    .with_version(version)
                    .with_expiry(data.expire_at(entry).unwrap_or(0));
                bytes += entry.key().len() + value.len();
                batch.put_with(&engine_key(*ns, entry.key()), &value, meta);
                keys += 1;
                if batch.len() >= DUMP_BATCH_KEYS || bytes >= DUMP_BATCH_BYTES {
                    engine.write(&batch).map_err(|e| misconf(&e))?;
                    batch.clear();
                    bytes = 0;
                }
            }
        }
        if !batch.is_empty() {
            engine.write(&batch).map_err(|e| misconf(&e))?;
        }
        self.appended.fetch_add(1, Ordering::AcqRel);
        Ok(keys)
    }

    /// Moves every database to a fresh namespace, in memory only: the keyspace is
    /// then written out ([`Persistence::dump_shard`]) and [`Persistence::commit_map`]
    /// makes the new namespaces the ones on disk, the old keys becoming dead. A crash
    /// before the commit reopens the previous data.
    pub fn renamespace(&self) {
        let _guard = self.map_change.lock();
        let mut map = DbMap::clone(&self.map.load());
        for i in 0..map.namespaces.len() {
            let fresh = map.fresh();
            map.namespaces[i] = fresh;
        }
        self.map.store(Arc::new(map));
        self.map_pending.store(true, Ordering::Release);
    }

    /// Writes the database map (see [`Persistence::renamespace`]) and deletes the
    /// keys of the namespaces it no longer names, in the background.
    pub fn commit_map(&self, now_ms: u64) -> Result<(), String> {
        let Some(engine) = self.engine.load_full() else {
            return Err("the store is closed".into());
        };
        {
            let _guard = self.map_change.lock();
            let version = self.hlc.next(now_ms);
            engine
                .put_with(
                    &engine_key(META, DBMAP_KEY),
                    &self.map.load().encode(),
                    WriteMeta::new().with_version(version),
                )
                .map_err(|e| misconf(&e))?;
            self.map_pending.store(false, Ordering::Release);
        }
        self.reap_dead_namespaces();
        Ok(())
    }

    /// Takes the log's current size as the base automatic compaction measures from.
    pub fn reset_base_size(&self) {
        self.stats
            .base_size
            .store(self.current_size(), Ordering::Relaxed);
    }

    /// Whether batch `n` is durable.
    pub fn is_synced(&self, n: u64) -> bool {
        self.synced.load(Ordering::Acquire) >= n
    }

    /// Waits until batch `n` is durable (`appendfsync always`), or the store failed.
    ///
    /// The connection only waits: the fsync is run by an I/O thread before it
    /// sleeps ([`Persistence::sync_before_sleep`]), or by the syncer thread if none
    /// has for a millisecond. While the store closes, callers wait for
    /// [`Persistence::close`] to release them.
    pub async fn wait_synced(&self, n: u64) -> Result<(), String> {
        loop {
            // Registered before the checks: a release after them wakes it.
            let notified = self.synced_notify.notified();
            if self.is_synced(n) {
                return Ok(());
            }
            if let Some(e) = self.write_error() {
                return Err(e);
            }
            // A read before the swap: while the syncer is awake (under load) this
            // writes nothing the I/O threads share. Sequentially consistent with
            // the syncer's store and its read of `appended` (see `spawn_syncer`).
            if self.syncer_idle.load(Ordering::SeqCst)
                && self.syncer_idle.swap(false, Ordering::SeqCst)
            {
                self.kick();
            }
            notified.await;
        }
    }

    /// Under `appendfsync always`, makes every batch appended so far durable and
    /// wakes the connections waiting for it. The I/O threads call it before they
    /// wait for sockets, as Redis fsyncs before its event loop sleeps: by then the
    /// thread has run every connection that was ready, so one fsync covers them all
    /// and their replies go out together.
    pub fn sync_before_sleep(&self) {
        if self.fsync() == Appendfsync::Always && !self.fully_synced() {
            self.sync_in_turn();
        }
    }

    /// Hands every batch appended so far to the operating system in one write:
    /// called before an I/O thread that holds its connections' replies to the end
    /// of its turn (`crate::turn`) wakes them, so that they find their records
    /// written instead of each writing the log. Nothing to do once an fsync covered
    /// them. A failure is recorded; each connection's own flush then reports it.
    pub fn flush_before_sleep(&self) {
        let _ = self.flush_to(self.appended());
    }

    /// Makes every batch appended so far durable, then wakes the waiting
    /// connections, unless another thread will: fsyncs run one at a time, back to
    /// back. While one runs, one thread waits to run the next, which covers every
    /// batch appended before it starts; a thread that finds that place taken
    /// leaves its batches to it.
    fn sync_in_turn(&self) {
        if !self.take_turn() {
            return;
        }
        if self.fully_synced() {
            // The fsync that just ended covered it all, and woke the waiters.
            self.syncing.store(false, Ordering::Release);
            return;
        }
        let turn = Turn(self);
        // A failure is recorded in `error`, which the woken waiters read.
        let _ = self.sync_unannounced();
        drop(turn);
    }

    /// Sets `syncing` for this thread: at once if no fsync runs; otherwise, if no
    /// other thread waits to run the next, once the running one ends. The wait
    /// yields the CPU in a loop rather than sleeping on a lock: an I/O thread here
    /// has nothing else to do, and one asleep wakes too late to start its fsync as
    /// the other ends (measured: 45k SETs a second from 50 clients either way with
    /// a lock, 53k–62k with this). False if another thread waits already, or the
    /// running fsync outlasts [`SYNC_WAIT_LIMIT`] (the waiters' threads come back
    /// to their hook when its end wakes them, and the syncer covers the rest).
    fn take_turn(&self) -> bool {
        let try_take =
            || !self.syncing.load(Ordering::Relaxed) && !self.syncing.swap(true, Ordering::Acquire);
        if try_take() {
            return true;
        }
        if self.sync_next.load(Ordering::Relaxed) || self.sync_next.swap(true, Ordering::Acquire) {
            return false;
        }
        let deadline = Instant::now() + SYNC_WAIT_LIMIT;
        let took = loop {
            std::thread::yield_now();
            if try_take() {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
        };
        // Cleared before this thread's fsync reads which batches it covers: a
        // thread whose batches come after that finds the place free.
        self.sync_next.store(false, Ordering::Release);
        took
    }

    /// Wakes the syncer.
    fn kick(&self) {
        let (lock, cv) = &self.wake;
        *lock.lock() = true;
        cv.notify_one();
    }

    /// Makes everything appended so far durable.
    pub fn sync_now(&self) -> Result<(), String> {
        let result = self.sync_unannounced();
        self.synced_notify.notify_waiters();
        result
    }

    /// [`Persistence::sync_now`] without waking the connections that wait.
    fn sync_unannounced(&self) -> Result<(), String> {
        let target = self.appended.load(Ordering::Acquire);
        // A guard, not a clone (see `log_with`).
        let engine = self.engine.load();
        let Some(engine) = engine.as_ref() else {
            return Err("the store is closed".into());
        };
        match engine.sync() {
            Ok(()) => {
                self.synced.fetch_max(target, Ordering::AcqRel);
                self.syncs.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                let text = misconf(&e);
                tracing::warn!(
                    "fsync of the log failed: {e}; refusing writes until it can be written"
                );
                self.set_error(Some(text.clone()));
                Err(text)
            }
        }
    }

    /// The syncer thread: once a second for `everysec`; under `always`, the fsync of
    /// a batch that has waited a millisecond without one (the I/O threads run the
    /// others, see [`Persistence::sync_before_sleep`]: this covers threads that
    /// never run out of work); recovery from write errors.
    pub fn spawn_syncer(self: &Arc<Self>, state: Arc<crate::state::ServerState>) {
        let this = self.clone();
        let handle = std::thread::Builder::new()
            .name("strata-sync".into())
            .spawn(move || {
                let mut last_everysec = Instant::now();
                // `appended` at the previous poll, and polls since it last moved.
                let mut appended_then = this.appended();
                let mut quiet = 0u32;
                let mut was_always = false;
                while !this.stop.load(Ordering::Acquire) {
                    let always = this.fsync() == Appendfsync::Always;
                    {
                        let (lock, cv) = &this.wake;
                        let mut pending = lock.lock();
                        if !*pending {
                            let mut wait = SYNCER_IDLE_POLL;
                            if always && quiet < SYNCER_QUIET_POLLS {
                                wait = SYNCER_ALWAYS_POLL;
                            } else if always {
                                // Sleep long unless a batch came meanwhile: a
                                // connection appends, then reads the flag; this
                                // sets the flag, then reads `appended`.
                                this.syncer_idle.store(true, Ordering::SeqCst);
                                if this.appended.load(Ordering::SeqCst) != appended_then {
                                    wait = SYNCER_ALWAYS_POLL;
                                }
                            }
                            cv.wait_for(&mut pending, wait);
                            this.syncer_idle.store(false, Ordering::SeqCst);
                        }
                        *pending = false;
                    }
                    if this.failed.load(Ordering::Acquire) {
                        this.try_recover(&state.keyspace);
                        continue;
                    }
                    let appended = this.appended();
                    match this.fsync() {
                        Appendfsync::Always => {
                            if this.synced.load(Ordering::Acquire) < appended_then {
                                this.sync_in_turn();
                            }
                            was_always = true;
                        }
                        policy => {
                            // Leaving `always` releases the replies that wait.
                            let due = policy == Appendfsync::Everysec
                                && last_everysec.elapsed() >= Duration::from_secs(1);
                            if (due || was_always) && !this.fully_synced() {
                                let _ = this.sync_now();
                                last_everysec = Instant::now();
                            }
                            was_always = false;
                        }
                    }
                    quiet = if appended == appended_then {
                        quiet.saturating_add(1)
                    } else {
                        0
                    };
                    appended_then = appended;
                }
            });
        match handle {
            Ok(handle) => *self.syncer.lock() = Some(handle),
            Err(e) => {
                tracing::warn!("can't start the syncer thread: {e}");
                self.set_error(Some(format!("MISCONF can't start the syncer thread: {e}")));
            }
        }
    }

    /// After a write error: reopen the engine and make the stored data match the
    /// keyspace again, then let writes resume. Which records reached the disk is
    /// unknown (a failed write or fsync may have lost buffered ones), so every key
    /// is compared; write commands are refused meanwhile, so the keyspace only
    /// changes by expiry, which the stored expiry times mirror.
    fn try_recover(&self, ks: &Keyspace) {
        std::thread::sleep(Duration::from_millis(200));
        self.stop_reaper();
        if let Some(old) = self.engine.swap(None) {
            let _ = close_engine(old);
        }
        // A fresh index, in keydir mode until the store matches memory again.
        let index = Arc::new(index::StoreIndex::new(
            self.keyspace.clone(),
            self.map.clone(),
        ));
        let engine =
            match Engine::open_with_index(&self.dir, self.options.clone(), Box::new(index.clone()))
            {
                Ok(e) => Arc::new(e),
                Err(e) => {
                    tracing::debug!("the log is still not writable: {e}");
                    return;
                }
            };
        engine.set_zero_ahead(zero_ahead(self.fsync()));
        self.index.store(index);
        self.engine.store(Some(engine.clone()));
        let result = self.reconcile(&engine, ks).and_then(|fixed| {
            engine.sync()?;
            Ok(fixed)
        });
        match result {
            Ok(fixed) => {
                self.switch_index(true);
                self.release_waiters();
                self.set_error(None);
                tracing::warn!("the log is writable again: {fixed} keys rewritten; writes resume");
            }
            Err(e) => tracing::debug!("the log is still not writable: {e}"),
        }
    }

    /// Writes every key whose stored value or expiry differs from the keyspace's,
    /// and deletes stored keys the keyspace does not have; returns how many.
    fn reconcile(&self, engine: &Engine, ks: &Keyspace) -> strata_engine::Result<u64> {
        let map = self.map.load_full();
        let now = crate::state::unix_ms();
        let meta = WriteMeta::new().with_version(self.hlc.next(now));
        let mut batch = WriteBatch::new();
        if !self.map_pending.load(Ordering::Acquire) {
            batch.put_with(&engine_key(META, DBMAP_KEY), &map.encode(), meta);
        }
        if let Some(payload) = self.functions.lock().as_ref() {
            batch.put_with(&engine_key(META, FUNCTIONS_KEY), payload, meta);
        }
        let mut fixed = 0u64;
        let mut value = Vec::new();
        for s in 0..ks.num_shards() {
            let shard = ks.lock(s);
            for (data, ns) in shard.dbs().iter().zip(&map.namespaces) {
                for entry in data.iter(now) {
                    let key = engine_key(*ns, entry.key());
                    if entry.value().is_cold() {
                        // Its only copy is the store's: whatever the reopened store
                        // holds is the value.
                        if !engine.contains(&key) {
                            tracing::warn!(
                                "a value kept on disk by maxmemory-policy tiered was lost with the failed write"
                            );
                        }
                        continue;
                    }
                    value.clear();
                    strata_keyspace::serialize::encode(entry.value(), &mut value);
                    let stored = engine.get_value(&key)?;
                    let expires_at = data.expire_at(entry);
                    let same =
                        stored.is_some_and(|v| v.bytes == value && v.expires_at == expires_at);
                    if !same {
                        let expiry = expires_at.unwrap_or(0);
                        batch.put_with(&key, &value, meta.with_expiry(expiry));
                        fixed += 1;
                    }
                    if batch.len() >= DUMP_BATCH_KEYS {
                        engine.write(&batch)?;
                        batch.clear();
                    }
                }
            }
        }
        for key in engine.keys() {
            let Some((ns, user_key)) = key.split_first_chunk::<4>() else {
                continue;
            };
            let Some(db) = map.db_of(u32::from_be_bytes(*ns)) else {
                continue;
            };
            let hash = ks.hash(user_key);
            let present = ks
                .lock(ks.shard_of_hash(hash))
                .db_ref(db)
                .peek(hash, user_key, now)
                .is_some();
            if !present {
                batch.delete_with(&key, meta);
                fixed += 1;
            }
            if batch.len() >= DUMP_BATCH_KEYS {
                engine.write(&batch)?;
                batch.clear();
            }
        }
        if !batch.is_empty() {
            engine.write(&batch)?;
        }
        Ok(fixed)
    }

    /// Stops the thread deleting dead keys; the next start finds what is left.
    fn stop_reaper(&self) {
        self.reaper_stop.store(true, Ordering::Release);
        if let Some(reaper) = self.reaper.lock().take() {
            let _ = reaper.join();
        }
        self.reaper_stop.store(false, Ordering::Release);
    }

    /// Deletes, in the background, the keys of namespaces no database maps to.
    fn reap_dead_namespaces(&self) {
        let Some(engine) = self.engine() else { return };
        let live: HashSet<u32> = self
            .map
            .load()
            .namespaces
            .iter()
            .copied()
            .chain([META])
            .collect();
        let mut slot = self.reaper.lock();
        // One reaper at a time; a later one sees every namespace the earlier saw.
        if let Some(previous) = slot.take() {
            let _ = previous.join();
        }
        let stop = self.reaper_stop.clone();
        *slot = std::thread::Builder::new()
            .name("strata-reaper".into())
            .spawn(move || {
                let mut batch = WriteBatch::new();
                for key in engine.keys() {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let dead = key
                        .split_first_chunk::<4>()
                        .is_some_and(|(ns, _)| !live.contains(&u32::from_be_bytes(*ns)));
                    if dead {
                        batch.delete(&key);
                    }
                    if batch.len() >= 1000 {
                        if engine.write(&batch).is_err() {
                            return;
                        }
                        batch.clear();
                    }
                }
                if !batch.is_empty() {
                    let _ = engine.write(&batch);
                }
            })
            .ok();
    }

    /// Compacts the log (BGREWRITEAOF): every sealed segment is rewritten with only
    /// the live records, operations folded into whole values. Blocking; reads and
    /// writes go on meanwhile.
    pub fn rewrite(&self) -> Result<strata_engine::CompactionReport, String> {
        let Some(engine) = self.engine() else {
            return Err("the store is closed".into());
        };
        let report = engine.compact().map_err(|e| e.to_string())?;
        self.stats
            .base_size
            .store(engine.stats().total_bytes, Ordering::Relaxed);
        Ok(report)
    }

    /// Bytes in the log's files.
    pub fn current_size(&self) -> u64 {
        self.engine().map_or(0, |e| e.stats().total_bytes)
    }

    /// Stops the syncer and closes the engine after a final sync (hint files are
    /// written at close, so the next start reads hints instead of values). Every
    /// batch appended counts as durable afterwards: replies waiting for one go out.
    pub fn close(&self) -> Result<(), String> {
        self.stop.store(true, Ordering::Release);
        self.kick();
        if let Some(syncer) = self.syncer.lock().take() {
            let _ = syncer.join();
        }
        self.stop_reaper();
        let mut result = self.sync_now();
        if let Some(engine) = self.engine.swap(None)
            && let Err(e) = close_engine(engine)
        {
            tracing::warn!("closing the log: {e}");
            result = Err(misconf(&e));
        }
        if self.index.load().is_switched() {
            self.forget_locations();
        }
        self.release_waiters();
        result
    }

    fn release_waiters(&self) {
        self.synced
            .fetch_max(self.appended.load(Ordering::Acquire), Ordering::AcqRel);
        self.synced_notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_commands::effects::{Record, encode_op};
    use strata_keyspace::EncodingLimits;

    fn open(dir: &Path) -> Persistence {
        open_with(dir, Appendfsync::Everysec)
    }

    fn open_with(dir: &Path, fsync: Appendfsync) -> Persistence {
        let replay = Arc::new(replay::Replay::new(EncodingLimits::default()));
        let ks = Arc::new(Keyspace::new(16, 4));
        Persistence::open(dir, ks, fsync, replay, 1).expect("open")
    }

    /// A runtime of `workers` threads that sync before they sleep, as the
    /// server's do.
    fn hooked_runtime(p: &Arc<Persistence>, workers: usize) -> tokio::runtime::Runtime {
        let p = p.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .on_thread_park(move || p.sync_before_sleep())
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn put(db: usize, key: &str, value: &[u8]) -> Record {
        let v = strata_keyspace::serialize::to_vec(&strata_keyspace::Value::string(value));
        Record::new(
            db,
            key.as_bytes().to_vec(),
            RecordKind::Put {
                value: v,
                expires_at: 0,
            },
        )
    }

    /// Under `always`, connections on two threads wait for their batches at once:
    /// each is made durable by an fsync a thread runs before it sleeps, nobody is
    /// left waiting, and no thread holds or waits for the turn to sync afterwards.
    #[test]
    fn concurrent_waiters_share_fsyncs_and_all_return() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Arc::new(open_with(dir.path(), Appendfsync::Always));
        let runtime = hooked_runtime(&p, 2);
        let tasks = 64;
        let last = runtime.block_on(async {
            let waits: Vec<_> = (0..tasks)
                .map(|i| {
                    let p = p.clone();
                    tokio::spawn(async move {
                        let mut located = strata_commands::effects::Located::new();
                        let record = put(0, &format!("k{i}"), b"v");
                        let n = p
                            .log(&mut Batch::of(&[record]), 1, &mut located)
                            .expect("logged");
                        let n = n.expect("a batch number");
                        tokio::task::yield_now().await;
                        tokio::time::timeout(Duration::from_secs(20), p.wait_synced(n))
                            .await
                            .expect("not left waiting")
                            .expect("durable");
                        assert!(p.is_synced(n));
                        n
                    })
                })
                .collect();
            let mut last = 0;
            for w in waits {
                last = last.max(w.await.expect("task"));
            }
            last
        });
        assert_eq!(last, tasks);
        // A thread may still be in its hook, about to find nothing left to sync:
        // dropping the runtime waits for it.
        drop(runtime);
        assert!(!p.syncing.load(Ordering::Acquire));
        assert!(!p.sync_next.load(Ordering::Acquire));
        p.close().expect("closed");
        drop(p);
        let p = open(dir.path());
        let n = p
            .recover(&EncodingLimits::default(), 10, &AtomicU64::new(0), None)
            .expect("recovered");
        assert_eq!(n, tasks);
    }

    /// Group commit: the batches of every connection a thread ran in one turn are
    /// made durable by one fsync, the one it runs before it sleeps.
    #[test]
    fn one_fsync_covers_a_turn_of_connections() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Arc::new(open_with(dir.path(), Appendfsync::Always));
        let runtime = hooked_runtime(&p, 1);
        let turn = {
            let p = p.clone();
            async move {
                // Every connection appends in this turn of the thread, then waits.
                let mut waits = tokio::task::JoinSet::new();
                for i in 0..64 {
                    let mut located = strata_commands::effects::Located::new();
                    let record = put(0, &format!("k{i}"), b"v");
                    let n = p
                        .log(&mut Batch::of(&[record]), 1, &mut located)
                        .expect("logged");
                    let n = n.expect("a batch number");
                    let p = p.clone();
                    waits.spawn(async move { p.wait_synced(n).await });
                }
                while let Some(done) = waits.join_next().await {
                    done.expect("task").expect("durable");
                }
            }
        };
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), tokio::spawn(turn))
                .await
                .expect("not left waiting")
                .expect("task");
        });
        assert_eq!(p.syncs(), 1, "one fsync for the 64 batches of one turn");
        p.close().expect("closed");
    }

    /// Under `everysec` the hook before a thread sleeps writes the log once for
    /// the turn (when the thread holds replies to its end): the records of every batch appended reach the operating system,
    /// and the connections' own flushes then find nothing left to write.
    #[test]
    fn the_hook_writes_the_log_once_for_a_turn_under_everysec() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = open_with(dir.path(), Appendfsync::Everysec);
        let mut located = strata_commands::effects::Located::new();
        let mut last = 0;
        for i in 0..8 {
            let record = put(0, &format!("k{i}"), b"v");
            last = p
                .log(&mut Batch::of(&[record]), 1, &mut located)
                .expect("logged")
                .expect("n");
        }
        assert!(p.flushed.load(Ordering::Acquire) < last);
        p.sync_before_sleep();
        p.flush_before_sleep();
        assert_eq!(p.flushed.load(Ordering::Acquire), last);
        assert_eq!(p.syncs(), 0, "no fsync under everysec");
        p.close().expect("closed");
    }

    /// On a runtime whose threads do not sync before they sleep, the syncer
    /// thread makes a waiting batch durable; after a quiet time it sleeps long and
    /// the next wait wakes it.
    #[test]
    fn the_syncer_syncs_what_no_thread_did() {
        let dir = tempfile::tempdir().expect("temp dir");
        let p = Arc::new(open_with(dir.path(), Appendfsync::Always));
        p.spawn_syncer(crate::state::ServerState::for_tests());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut located = strata_commands::effects::Located::new();
        for (i, quiet) in [false, true].into_iter().enumerate() {
            if quiet {
                let deadline = Instant::now() + Duration::from_secs(20);
                while !p.syncer_idle.load(Ordering::SeqCst) {
                    assert!(Instant::now() < deadline, "the syncer goes idle");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            let record = put(0, &format!("k{i}"), b"v");
            let n = p
                .log(&mut Batch::of(&[record]), 1, &mut located)
                .expect("logged");
            let n = n.expect("a batch number");
            runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(20), p.wait_synced(n))
                    .await
                    .expect("not left waiting")
                    .expect("durable");
            });
            assert!(p.is_synced(n));
        }
        p.close().expect("closed");
    }

    #[test]
    fn records_survive_a_restart() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let p = open(dir.path());
            let mut located = strata_commands::effects::Located::new();
            p.log(
                &mut Batch::of(&[put(0, "a", b"1"), put(3, "b", b"2")]),
                1,
                &mut located,
            )
            .expect("logged");
            let op = encode_op(&["RPUSH", "l", "x", "y"]);
            p.log(
                &mut Batch::of(&[Record::new(
                    0,
                    b"l".to_vec(),
                    RecordKind::Op { op, expires_at: 0 },
                )]),
                2,
                &mut located,
            )
            .expect("logged");
            p.log(
                &mut Batch::of(&[Record::new(3, Vec::new(), RecordKind::SwapDb { other: 0 })]),
                3,
                &mut located,
            )
            .expect("logged");
            p.close().expect("closed");
        }
        let p = open(dir.path());
        let n = p
            .recover(&EncodingLimits::default(), 10, &AtomicU64::new(0), None)
            .expect("recovered");
        assert_eq!(n, 3);
        let ks = &p.keyspace;
        assert_eq!(ks.db_len(3), 2);
        assert_eq!(ks.db_len(0), 1);
        // The keyspace lists every loaded key's record; the store keeps only its own.
        let listed: usize = (0..ks.num_shards())
            .map(|s| {
                ks.lock(s)
                    .dbs()
                    .iter()
                    .map(|d| d.logged_len())
                    .sum::<usize>()
            })
            .sum();
        assert_eq!(listed, 3);
        let engine = p.engine().expect("open");
        let report = engine.compact().expect("compacted");
        assert_eq!(report.keys_kept, 4, "three keys and the database map");
        let (hash, db) = (ks.hash(b"l"), 3);
        let refs = ks.lock(ks.shard_of_hash(hash)).db(db).log_refs(hash, b"l");
        assert!(matches!(
            refs,
            Some(strata_keyspace::logref::LogRefs::Value(_))
        ));
    }

    /// Over the keyspace, the index lists each key's oldest record for compaction
    /// (and only those of the segments asked about), and a compaction of many
    /// versions of a few keys keeps the last ones.
    #[test]
    fn the_keyspace_lists_its_oldest_records_for_compaction() {
        use strata_engine::{Index, SegmentId};
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let p = open(dir.path());
            let mut located = strata_commands::effects::Located::new();
            for round in 0..300u64 {
                let v = round.to_string();
                p.log(
                    &mut Batch::of(&[put(0, "a", v.as_bytes()), put(3, "b", v.as_bytes())]),
                    round + 1,
                    &mut located,
                )
                .expect("logged");
            }
            p.close().expect("closed");
        }
        let p = open(dir.path());
        p.recover(&EncodingLimits::default(), 1_000, &AtomicU64::new(0), None)
            .expect("recovered");
        let ks = &p.keyspace;
        let first = |db: usize, key: &[u8]| {
            let hash = ks.hash(key);
            match ks.lock(ks.shard_of_hash(hash)).db(db).log_refs(hash, key) {
                Some(strata_keyspace::logref::LogRefs::Value(l)) => index::to_location(l),
                other => panic!("{other:?}"),
            }
        };
        let (a, b) = (first(0, b"a"), first(3, b"b"));
        let index = p.index.load();
        assert!(index.is_switched());
        let mut listed = Vec::new();
        assert!(index.first_locations(SegmentId(u64::MAX), &mut listed));
        assert!(listed.contains(&a) && listed.contains(&b), "{listed:?}");
        // Besides them, only the store's own keys.
        assert!(listed.len() as u64 <= 2 + index.keydir_len(), "{listed:?}");
        let mut below = Vec::new();
        let upto = SegmentId(a.segment.0.min(b.segment.0) - 1);
        assert!(index.first_locations(upto, &mut below));
        assert!(!below.contains(&a) && !below.contains(&b));
        drop(index);
        let report = p.engine().expect("open").compact().expect("compacted");
        assert_eq!(report.keys_kept, 2);
        p.close().expect("closed");
        let p = open(dir.path());
        p.recover(&EncodingLimits::default(), 1_000, &AtomicU64::new(0), None)
            .expect("recovered");
        for (db, key) in [(0, b"a"), (3, b"b")] {
            let hash = p.keyspace.hash(key);
            let mut shard = p.keyspace.lock(p.keyspace.shard_of_hash(hash));
            let value = shard
                .db(db)
                .peek(hash, key, 1_000)
                .map(|e| e.value().to_value());
            assert_eq!(
                value,
                Some(strata_keyspace::Value::string(b"299")),
                "db {db}"
            );
        }
    }
}
