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
//! The engine never fsyncs on its own here: the syncer thread does. With
//! `appendfsync always` a reply waits (asynchronously) until a sync covers its
//! records, and one sync covers every record appended before it: group commit. With
//! `everysec` the syncer syncs once a second; with `no` never (the OS writes back).
//!
//! # Errors
//!
//! When an append or a sync fails, the engine refuses further writes (it is
//! poisoned). Write commands then get Redis's MISCONF error while reads go on; the
//! syncer keeps trying to reopen the engine and, once it succeeds, rewrites every key
//! whose records may not have reached the disk from the in-memory state, and writes
//! resume.

pub mod replay;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use strata_commands::effects::{Record, RecordKind};
use strata_engine::{Engine, FsyncPolicy, Options, WriteBatch, WriteMeta};
use strata_keyspace::{Keyspace, Ttl};

use crate::config::Appendfsync;

/// The namespace of strata's own records.
pub const META: u32 = u32::MAX;
/// The key of the database → namespace map within [`META`].
const DBMAP_KEY: &[u8] = b"dbmap";
/// The key of the FUNCTION libraries (a FUNCTION DUMP payload) within [`META`].
const FUNCTIONS_KEY: &[u8] = b"functions";
/// Keys loaded between two progress lines at start-up.
const PROGRESS_EVERY: u64 = 1_000_000;

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

/// Counters and states INFO persistence reports.
#[derive(Default)]
pub struct PersistStats {
    pub rewrite_in_progress: AtomicBool,
    pub last_rewrite_ok: AtomicBool,
    pub last_rewrite_ms: AtomicU64,
    pub base_size: AtomicU64,
    pub last_save_unix: AtomicU64,
    pub changes_since_save: AtomicU64,
}

/// The durable store behind the keyspace.
pub struct Persistence {
    dir: PathBuf,
    options: Options,
    engine: Mutex<Option<Arc<Engine>>>,
    map: Mutex<DbMap>,
    hlc: Hlc,
    /// Batches appended; a reply that must be durable waits for `synced` to reach
    /// its batch's number.
    appended: AtomicU64,
    synced: AtomicU64,
    fsync: Mutex<Appendfsync>,
    /// The error write commands get while the log cannot be written.
    error: Mutex<Option<String>>,
    /// Keys whose records may not have reached the log (appended into a failing
    /// engine): rewritten from memory once the engine is back.
    unsure: Mutex<HashSet<(usize, Vec<u8>)>>,
    /// Wakes the syncer (a durable reply is waiting, or shutdown).
    wake: (Mutex<bool>, Condvar),
    /// Tells waiting connections a sync completed.
    pub synced_notify: tokio::sync::Notify,
    pub stats: PersistStats,
    stop: AtomicBool,
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence")
            .field("dir", &self.dir)
            .finish()
    }
}

/// The MISCONF text Redis uses when its append-only file cannot be written.
fn misconf(e: &strata_engine::Error) -> String {
    format!("MISCONF Errors writing to the AOF file: {e}")
}

impl Persistence {
    /// Opens (or creates) the store in `dir/appendonlydir`.
    pub fn open(
        dir: &Path,
        databases: usize,
        fsync: Appendfsync,
        replay: Arc<replay::Replay>,
    ) -> anyhow::Result<Persistence> {
        let dir = dir.join("appendonlydir");
        std::fs::create_dir_all(&dir)?;
        let options = Options::default()
            .with_fsync(FsyncPolicy::Never)
            .with_merge_operator(replay);
        let engine = Engine::open(&dir, options.clone())
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
        let stats = PersistStats::default();
        stats.last_rewrite_ok.store(true, Ordering::Relaxed);
        stats
            .base_size
            .store(engine.stats().total_bytes, Ordering::Relaxed);
        Ok(Persistence {
            dir,
            options,
            engine: Mutex::new(Some(Arc::new(engine))),
            map: Mutex::new(map),
            hlc: Hlc::default(),
            appended: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            fsync: Mutex::new(fsync),
            error: Mutex::new(None),
            unsure: Mutex::new(HashSet::new()),
            wake: (Mutex::new(false), Condvar::new()),
            synced_notify: tokio::sync::Notify::new(),
            stats,
            stop: AtomicBool::new(false),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.engine.lock().clone()
    }

    pub fn set_fsync(&self, fsync: Appendfsync) {
        *self.fsync.lock() = fsync;
    }

    pub fn write_error(&self) -> Option<String> {
        self.error.lock().clone()
    }

    /// Loads every live key into the keyspace, logging progress.
    pub fn recover(
        &self,
        ks: &Keyspace,
        limits: &strata_keyspace::EncodingLimits,
        now_ms: u64,
    ) -> anyhow::Result<u64> {
        let Some(engine) = self.engine() else {
            anyhow::bail!("the store is closed")
        };
        let map = self.map.lock().clone();
        let started = Instant::now();
        let (mut keys, mut bytes, mut dead) = (0u64, 0u64, 0u64);
        for item in engine.iter() {
            let (key, value) =
                item.map_err(|e| anyhow::anyhow!("reading {}: {e}", self.dir.display()))?;
            let Some((ns, user_key)) = key.split_first_chunk::<4>() else {
                continue;
            };
            let ns = u32::from_be_bytes(*ns);
            if ns == META {
                continue;
            }
            let Some(db) = map.db_of(ns) else {
                dead += 1;
                continue;
            };
            let expires = value.expires_at.unwrap_or(0);
            if expires != 0 && expires <= now_ms {
                continue;
            }
            bytes += value.bytes.len() as u64;
            if value.bytes.is_empty() {
                continue;
            }
            let v = strata_keyspace::serialize::decode(&value.bytes, limits).map_err(|e| {
                anyhow::anyhow!("damaged value for a key in {}: {e}", self.dir.display())
            })?;
            let hash = ks.hash(user_key);
            let ttl = if expires == 0 {
                Ttl::Persist
            } else {
                Ttl::At(expires)
            };
            ks.lock(ks.shard_of_hash(hash))
                .db(db)
                .set(hash, user_key, v, ttl, now_ms);
            keys += 1;
            if keys % PROGRESS_EVERY == 0 {
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                tracing::info!(
                    "loading: {keys} keys, {:.1} MB/s",
                    bytes as f64 / 1e6 / secs
                );
            }
        }
        let secs = started.elapsed().as_secs_f64().max(1e-3);
        tracing::info!(
            "DB loaded from disk: {keys} keys in {secs:.3} seconds ({:.1} MB/s)",
            bytes as f64 / 1e6 / secs
        );
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
        engine
            .get(&engine_key(META, FUNCTIONS_KEY))
            .map_err(|e| anyhow::anyhow!("can't read the function libraries: {e}"))
    }

    /// Appends one command's records as a batch. Returns the batch's number if the
    /// reply must wait for it to be durable.
    pub fn log(&self, records: &[Record], now_ms: u64) -> Result<Option<u64>, String> {
        if let Some(e) = self.error.lock().clone() {
            self.note_unsure(records);
            return Err(e);
        }
        let version = self.hlc.next(now_ms);
        let mut batch = WriteBatch::new();
        let mut dead = Vec::new();
        {
            let mut map = self.map.lock();
            let mut map_changed = false;
            for r in records {
                let ns = map.namespaces.get(r.db).copied().unwrap_or(0);
                match &r.kind {
                    RecordKind::Put { value, expires_at } => {
                        let meta = WriteMeta::new()
                            .with_version(version)
                            .with_expiry(*expires_at);
                        batch.put_with(&engine_key(ns, &r.key), value, meta);
                    }
                    RecordKind::Op { op, expires_at } => {
                        let meta = WriteMeta::new()
                            .with_version(version)
                            .with_expiry(*expires_at);
                        batch.merge_with(&engine_key(ns, &r.key), op, meta);
                    }
                    RecordKind::Delete => {
                        batch.delete_with(
                            &engine_key(ns, &r.key),
                            WriteMeta::new().with_version(version),
                        );
                    }
                    RecordKind::FlushDb => {
                        dead.push(ns);
                        let fresh = map.fresh();
                        if let Some(slot) = map.namespaces.get_mut(r.db) {
                            *slot = fresh;
                        }
                        map_changed = true;
                    }
                    RecordKind::FlushAll => {
                        dead.extend(map.namespaces.iter().copied());
                        for i in 0..map.namespaces.len() {
                            let fresh = map.fresh();
                            map.namespaces[i] = fresh;
                        }
                        map_changed = true;
                    }
                    RecordKind::SwapDb { other } => {
                        if r.db < map.namespaces.len() && *other < map.namespaces.len() {
                            map.namespaces.swap(r.db, *other);
                        }
                        map_changed = true;
                    }
                    RecordKind::Functions { payload } => {
                        batch.put_with(
                            &engine_key(META, FUNCTIONS_KEY),
                            payload,
                            WriteMeta::new().with_version(version),
                        );
                    }
                }
            }
            if map_changed {
                batch.put_with(
                    &engine_key(META, DBMAP_KEY),
                    &map.encode(),
                    WriteMeta::new().with_version(version),
                );
            }
        }
        let Some(engine) = self.engine() else {
            return Err("MISCONF the store is closed".into());
        };
        if let Err(e) = engine.write(&batch) {
            let text = misconf(&e);
            tracing::warn!(
                "Error writing to the log: {e}; refusing writes until it can be written"
            );
            *self.error.lock() = Some(text.clone());
            self.note_unsure(records);
            self.kick();
            return Err(text);
        }
        if !dead.is_empty() {
            self.reap_dead_namespaces();
        }
        self.stats
            .changes_since_save
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        let n = self.appended.fetch_add(1, Ordering::AcqRel) + 1;
        if *self.fsync.lock() == Appendfsync::Always {
            self.kick();
            Ok(Some(n))
        } else {
            Ok(None)
        }
    }

    fn note_unsure(&self, records: &[Record]) {
        let mut unsure = self.unsure.lock();
        for r in records {
            if !r.key.is_empty() {
                unsure.insert((r.db, r.key.clone()));
            }
        }
    }

    /// Whether batch `n` is durable.
    pub fn is_synced(&self, n: u64) -> bool {
        self.synced.load(Ordering::Acquire) >= n
    }

    /// Waits (asynchronously) until batch `n` is durable, or the store failed.
    pub async fn wait_synced(&self, n: u64) -> Result<(), String> {
        loop {
            let notified = self.synced_notify.notified();
            if self.is_synced(n) {
                return Ok(());
            }
            if let Some(e) = self.write_error() {
                return Err(e);
            }
            self.kick();
            notified.await;
        }
    }

    /// Wakes the syncer.
    fn kick(&self) {
        let (lock, cv) = &self.wake;
        *lock.lock() = true;
        cv.notify_one();
    }

    /// Makes everything appended so far durable.
    pub fn sync_now(&self) -> Result<(), String> {
        let target = self.appended.load(Ordering::Acquire);
        let Some(engine) = self.engine() else {
            return Err("the store is closed".into());
        };
        match engine.sync() {
            Ok(()) => {
                self.synced.fetch_max(target, Ordering::AcqRel);
                self.synced_notify.notify_waiters();
                Ok(())
            }
            Err(e) => {
                let text = misconf(&e);
                tracing::warn!(
                    "fsync of the log failed: {e}; refusing writes until it can be written"
                );
                *self.error.lock() = Some(text.clone());
                self.synced_notify.notify_waiters();
                Err(text)
            }
        }
    }

    /// The syncer thread: group commit for `always`, once a second for `everysec`,
    /// and recovery from write errors.
    pub fn spawn_syncer(
        self: &Arc<Self>,
        state: Arc<crate::state::ServerState>,
    ) -> std::thread::JoinHandle<()> {
        let this = self.clone();
        std::thread::Builder::new()
            .name("strata-sync".into())
            .spawn(move || {
                let mut last_everysec = Instant::now();
                while !this.stop.load(Ordering::Acquire) {
                    {
                        let (lock, cv) = &this.wake;
                        let mut pending = lock.lock();
                        if !*pending {
                            cv.wait_for(&mut pending, Duration::from_millis(100));
                        }
                        *pending = false;
                    }
                    if this.error.lock().is_some() {
                        this.try_recover(&state.keyspace);
                        continue;
                    }
                    let behind =
                        this.appended.load(Ordering::Acquire) > this.synced.load(Ordering::Acquire);
                    let policy = *this.fsync.lock();
                    let due = match policy {
                        Appendfsync::Always => behind,
                        Appendfsync::Everysec => {
                            behind && last_everysec.elapsed() >= Duration::from_secs(1)
                        }
                        Appendfsync::No => false,
                    };
                    if due {
                        let _ = this.sync_now();
                        last_everysec = Instant::now();
                    }
                }
            })
            .expect("spawn the syncer thread")
    }

    /// After a write error: reopen the engine and rewrite the keys whose records may
    /// be missing, from memory. Writes resume when that succeeds.
    fn try_recover(&self, ks: &Keyspace) {
        std::thread::sleep(Duration::from_millis(200));
        let old = self.engine.lock().take();
        drop(old);
        let engine = match Engine::open(&self.dir, self.options.clone()) {
            Ok(e) => Arc::new(e),
            Err(e) => {
                tracing::debug!("the log is still not writable: {e}");
                return;
            }
        };
        *self.engine.lock() = Some(engine.clone());
        let unsure: Vec<(usize, Vec<u8>)> = self.unsure.lock().drain().collect();
        let map = self.map.lock().clone();
        let now = crate::state::unix_ms();
        let version = self.hlc.next(now);
        let mut batch = WriteBatch::new();
        batch.put_with(
            &engine_key(META, DBMAP_KEY),
            &map.encode(),
            WriteMeta::new().with_version(version),
        );
        for (db, key) in &unsure {
            let ns = map.namespaces.get(*db).copied().unwrap_or(0);
            let hash = ks.hash(key);
            let mut shard = ks.lock(ks.shard_of_hash(hash));
            let ekey = engine_key(ns, key);
            match shard.db(*db).peek(hash, key, now) {
                Some(e) => {
                    let meta = WriteMeta::new()
                        .with_version(version)
                        .with_expiry(e.expire_at().unwrap_or(0));
                    batch.put_with(&ekey, &strata_keyspace::serialize::to_vec(&e.value), meta);
                }
                None => {
                    batch.delete_with(&ekey, WriteMeta::new().with_version(version));
                }
            }
        }
        let result = engine.write(&batch).and_then(|()| engine.sync());
        match result {
            Ok(()) => {
                self.synced
                    .store(self.appended.load(Ordering::Acquire), Ordering::Release);
                *self.error.lock() = None;
                self.synced_notify.notify_waiters();
                tracing::warn!(
                    "the log is writable again: {} keys rewritten; writes resume",
                    unsure.len()
                );
            }
            Err(e) => {
                tracing::debug!("the log is still not writable: {e}");
                self.unsure.lock().extend(unsure);
            }
        }
    }

    /// Deletes, in the background, the keys of namespaces no database maps to.
    fn reap_dead_namespaces(&self) {
        let Some(engine) = self.engine() else { return };
        let live: HashSet<u32> = self
            .map
            .lock()
            .namespaces
            .iter()
            .copied()
            .chain([META])
            .collect();
        std::thread::Builder::new()
            .name("strata-reaper".into())
            .spawn(move || {
                let mut batch = WriteBatch::new();
                for key in engine.keys() {
                    let dead = key
                        .split_first_chunk::<4>()
                        .is_some_and(|(ns, _)| !live.contains(&u32::from_be_bytes(*ns)));
                    if dead {
                        batch.delete(&key);
                    }
                    if batch.len() >= 1000 && engine.write(&batch).is_ok() {
                        batch.clear();
                    }
                }
                if !batch.is_empty() {
                    let _ = engine.write(&batch);
                }
            })
            .ok();
    }

    /// Compacts the log (BGREWRITEAOF); blocking, run it off the event loop.
    pub fn rewrite(&self) -> Result<(), String> {
        let Some(engine) = self.engine() else {
            return Err("the store is closed".into());
        };
        self.stats
            .rewrite_in_progress
            .store(true, Ordering::Release);
        let started = Instant::now();
        let result = engine.compact().map(|_| ()).map_err(|e| e.to_string());
        self.stats
            .rewrite_in_progress
            .store(false, Ordering::Release);
        self.stats
            .last_rewrite_ok
            .store(result.is_ok(), Ordering::Relaxed);
        self.stats
            .last_rewrite_ms
            .store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.stats
            .base_size
            .store(engine.stats().total_bytes, Ordering::Relaxed);
        result
    }

    /// Makes the dataset durable now (SAVE, shutdown).
    pub fn save(&self) -> Result<(), String> {
        self.sync_now()?;
        self.stats.changes_since_save.store(0, Ordering::Relaxed);
        self.stats
            .last_save_unix
            .store(crate::state::unix_ms() / 1000, Ordering::Relaxed);
        Ok(())
    }

    /// Bytes in the log's files.
    pub fn current_size(&self) -> u64 {
        self.engine().map_or(0, |e| e.stats().total_bytes)
    }

    /// Stops the syncer and closes the engine after a final sync (hint files are
    /// written at close, so the next start reads hints instead of values).
    pub fn close(&self) {
        self.stop.store(true, Ordering::Release);
        self.kick();
        let _ = self.sync_now();
        if let Some(engine) = self.engine.lock().take() {
            match Arc::try_unwrap(engine) {
                Ok(engine) => {
                    if let Err(e) = engine.close() {
                        tracing::warn!("closing the log: {e}");
                    }
                }
                Err(shared) => {
                    let _ = shared.sync();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_commands::effects::encode_op;
    use strata_keyspace::EncodingLimits;

    fn open(dir: &Path) -> Persistence {
        let replay = Arc::new(replay::Replay::new(EncodingLimits::default()));
        Persistence::open(dir, 16, Appendfsync::Everysec, replay).expect("open")
    }

    fn put(db: usize, key: &str, value: &[u8]) -> Record {
        let v = strata_keyspace::serialize::to_vec(&strata_keyspace::Value::string(value));
        Record {
            db,
            key: key.as_bytes().to_vec(),
            kind: RecordKind::Put {
                value: v,
                expires_at: 0,
            },
        }
    }

    #[test]
    fn records_survive_a_restart() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let p = open(dir.path());
            p.log(&[put(0, "a", b"1"), put(3, "b", b"2")], 1)
                .expect("logged");
            let op = encode_op(&["RPUSH", "l", "x", "y"]);
            p.log(
                &[Record {
                    db: 0,
                    key: b"l".to_vec(),
                    kind: RecordKind::Op { op, expires_at: 0 },
                }],
                2,
            )
            .expect("logged");
            p.log(
                &[Record {
                    db: 3,
                    key: Vec::new(),
                    kind: RecordKind::SwapDb { other: 0 },
                }],
                3,
            )
            .expect("logged");
            p.close();
        }
        let p = open(dir.path());
        let ks = Keyspace::new(16, 4);
        let n = p
            .recover(&ks, &EncodingLimits::default(), 10)
            .expect("recovered");
        assert_eq!(n, 3);
        assert_eq!(ks.db_len(3), 2);
        assert_eq!(ks.db_len(0), 1);
    }
}
