//! The store's life cycle on a running server.
//!
//! - Start-up: the data directory's contents are loaded whatever `appendonly` says
//!   (as Redis loads its files); with `appendonly yes` the store then stays open and
//!   every change is logged, with `appendonly no` it is closed.
//! - `CONFIG SET appendonly yes` opens the store and writes the whole keyspace into
//!   it while clients go on (see `enable`); `no` closes it.
//! - SAVE, BGSAVE and SHUTDOWN: with the log on, the log *is* the dataset, and
//!   saving means making it durable. With the log off, a snapshot is written the way
//!   `appendonly yes` starts, then the store is closed again. `save` points trigger
//!   BGSAVE when the log is off.
//! - BGREWRITEAOF and `auto-aof-rewrite-percentage` / `auto-aof-rewrite-min-size`
//!   compact the log ([`Persistence::rewrite`]).
//!
//! All of these run one at a time on one worker thread, in the order asked.
//!
//! # Why a snapshot taken while clients write is consistent
//!
//! The switch that makes commands log ([`ServerState::logging`]) is flipped only
//! while holding every shard, and a command reads it while holding its shards (see
//! `strata_commands::ctx::Keys::logging_flag`). Once logging is on, each shard is
//! written out under its lock: a change to a key is either in the shard's copy or
//! logged after it, and a transaction spanning shards is one batch either way. The
//! copy goes to fresh namespaces, and the database map naming them is written only
//! when the copy is complete: a crash half-way through reopens the previous data.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use parking_lot::Mutex;

use super::{DATA_DIR, Persistence, replay::Replay};
use crate::config::Appendfsync;
use crate::state::{ServerState, unix_ms};

/// A background save or rewrite admitted and not finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    Save,
    Rewrite,
}

enum Job {
    /// Load the data directory at start-up.
    Load,
    /// Open the store on the live keyspace and keep logging.
    Enable,
    /// Stop logging and close the store.
    Disable,
    /// Make the dataset durable (SAVE, BGSAVE, SHUTDOWN); the result goes to `reply`.
    Save {
        reply: Option<mpsc::Sender<Result<(), String>>>,
    },
    /// Compact the log (or, with the log off, write a fresh snapshot).
    Rewrite,
}

/// Background-job bookkeeping and what INFO persistence reports of it.
pub struct Control {
    queue: Mutex<Option<mpsc::Sender<Job>>>,
    /// The BGSAVE or BGREWRITEAOF admitted, if any, and since when.
    running: Mutex<Option<(JobKind, Instant)>>,
    /// Whether the store is being opened on the live keyspace.
    pub enabling: AtomicBool,
    pub rewrite_scheduled: AtomicBool,
    bgsave_scheduled: AtomicBool,
    /// The number the next store's first batch gets.
    next_batch: AtomicU64,
    pub last_save_unix: AtomicU64,
    /// `stats.dirty` at the last save.
    pub dirty_at_save: AtomicU64,
    pub last_bgsave_ok: AtomicBool,
    pub last_bgsave_secs: AtomicI64,
    pub saves: AtomicU64,
    pub last_rewrite_ok: AtomicBool,
    pub last_rewrite_secs: AtomicI64,
    pub rewrites: AtomicU64,
    pub rewrite_failures: AtomicU64,
    /// When loading started (Unix seconds), and bytes to load and loaded, for INFO
    /// while it runs.
    pub loading_started: AtomicU64,
    pub loading_total: AtomicU64,
    pub loading_done: AtomicU64,
    /// Keys loaded at start-up, and keys skipped because they had expired.
    pub loaded_keys: AtomicU64,
    pub loaded_expired: AtomicU64,
    /// When the last automatic save was tried (Unix seconds).
    last_bgsave_try: AtomicU64,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            queue: Mutex::new(None),
            running: Mutex::new(None),
            enabling: AtomicBool::new(false),
            rewrite_scheduled: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            next_batch: AtomicU64::new(1),
            last_save_unix: AtomicU64::new(unix_ms() / 1000),
            dirty_at_save: AtomicU64::new(0),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_secs: AtomicI64::new(-1),
            saves: AtomicU64::new(0),
            last_rewrite_ok: AtomicBool::new(true),
            last_rewrite_secs: AtomicI64::new(-1),
            rewrites: AtomicU64::new(0),
            rewrite_failures: AtomicU64::new(0),
            loading_started: AtomicU64::new(0),
            loading_total: AtomicU64::new(0),
            loading_done: AtomicU64::new(0),
            loaded_keys: AtomicU64::new(0),
            loaded_expired: AtomicU64::new(0),
            last_bgsave_try: AtomicU64::new(0),
        }
    }
}

impl Control {
    /// The job admitted, and for how many seconds it has run.
    pub fn running(&self) -> Option<(JobKind, u64)> {
        self.running
            .lock()
            .map(|(kind, since)| (kind, since.elapsed().as_secs()))
    }

    fn send(&self, job: Job) -> bool {
        match self.queue.lock().as_ref() {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        }
    }

    /// Admits a background job unless one runs already.
    fn admit(&self, kind: JobKind) -> Result<(), JobKind> {
        let mut running = self.running.lock();
        match *running {
            Some((other, _)) => Err(other),
            None => {
                *running = Some((kind, Instant::now()));
                Ok(())
            }
        }
    }

    fn finish(&self) {
        *self.running.lock() = None;
    }
}

/// Starts the worker thread and, when the data directory holds data or `appendonly`
/// is on, loads it (the server answers LOADING meanwhile).
pub fn start(state: &Arc<ServerState>) -> anyhow::Result<()> {
    let (tx, rx) = mpsc::channel();
    *state.persistence.queue.lock() = Some(tx);
    let worker = state.clone();
    std::thread::Builder::new()
        .name("strata-persist".into())
        .spawn(move || {
            for job in rx {
                run(&worker, job);
            }
        })?;
    let (appendonly, dir) = {
        let cfg = state.config.read();
        (cfg.appendonly, cfg.dir.clone())
    };
    if appendonly || has_data(&dir.join(DATA_DIR)) {
        state.loading.store(true, Ordering::Release);
        state
            .persistence
            .loading_started
            .store(unix_ms() / 1000, Ordering::Relaxed);
        state.persistence.send(Job::Load);
    }
    Ok(())
}

/// Runs background work (a compaction, a BGSAVE) on a thread of its own at the
/// lowest CPU priority (`SCHED_IDLE`, see [`crate::sched::idle_current`]): a thread
/// serving clients that wakes takes the core from it at once, and on idle cores it
/// runs at full speed. The persistence worker itself keeps its priority, which a thread
/// cannot raise again once lowered, for the jobs clients wait on (loading, SAVE).
fn at_low_priority<T: Send>(work: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("strata-background".into())
            .spawn_scoped(scope, || {
                crate::sched::idle_current();
                work()
            })
            .map_err(|e| format!("can't start a background thread: {e}"))?;
        handle
            .join()
            .unwrap_or_else(|_| Err("the background job panicked".to_string()))
    })
}

/// Whether a store directory holds any file.
fn has_data(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
}

/// Stops the worker after the jobs queued, then closes the store (shutdown).
pub fn stop(state: &Arc<ServerState>) -> Result<(), String> {
    state.persistence.queue.lock().take();
    set_logging(state, false);
    match state.persist.swap(None) {
        Some(p) => p.close(),
        None => Ok(()),
    }
}

fn run(state: &Arc<ServerState>, job: Job) {
    let control = &state.persistence;
    match job {
        Job::Load => {
            let result = load(state);
            match result {
                Ok(()) => state.loading.store(false, Ordering::Release),
                Err(e) => {
                    tracing::error!("{e:#}");
                    eprintln!("strata: {e:#}");
                    state.failed.store(true, Ordering::Release);
                    state.begin_shutdown();
                }
            }
        }
        Job::Enable => {
            if state.persist.load().is_some() || !state.config.read().appendonly {
                return;
            }
            control.enabling.store(true, Ordering::Release);
            let started = Instant::now();
            let result = enable(state, true);
            record_rewrite(control, started, &result);
            control.enabling.store(false, Ordering::Release);
            match result {
                Ok(()) => {
                    tracing::info!("Background append only file rewriting terminated with success")
                }
                Err(e) => {
                    tracing::warn!("Turning the log on failed: {e}");
                    state.config.write().appendonly = false;
                }
            }
        }
        Job::Disable => {
            if state.config.read().appendonly {
                return;
            }
            disable(state);
        }
        Job::Save { reply } => {
            let started = Instant::now();
            // SAVE's client waits for it; BGSAVE yields to the clients.
            let result = match reply {
                Some(_) => save(state),
                None => at_low_priority(|| save(state)),
            };
            control
                .last_bgsave_secs
                .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
            control
                .last_bgsave_ok
                .store(result.is_ok(), Ordering::Relaxed);
            match &result {
                Ok(()) => {
                    control.saves.fetch_add(1, Ordering::Relaxed);
                    tracing::info!("DB saved on disk");
                }
                Err(e) => tracing::warn!("Saving failed: {e}"),
            }
            if reply.is_none() {
                control.finish();
            }
            if let Some(reply) = reply {
                let _ = reply.send(result);
            }
        }
        Job::Rewrite => {
            let started = Instant::now();
            let result = match state.persist.load_full() {
                Some(p) => at_low_priority(|| p.rewrite()).map(|report| {
                    tracing::info!(
                        "Log compacted: {} segments ({} bytes) into {} ({} bytes), {} keys",
                        report.inputs,
                        report.bytes_in,
                        report.outputs,
                        report.bytes_out,
                        report.keys_kept
                    );
                }),
                None => save(state),
            };
            record_rewrite(control, started, &result);
            if let Err(e) = &result {
                tracing::warn!("Background append only file rewriting failed: {e}");
            }
            control.finish();
        }
    }
}

fn record_rewrite(control: &Control, started: Instant, result: &Result<(), String>) {
    control
        .last_rewrite_secs
        .store(started.elapsed().as_secs() as i64, Ordering::Relaxed);
    control
        .last_rewrite_ok
        .store(result.is_ok(), Ordering::Relaxed);
    if result.is_ok() {
        control.rewrites.fetch_add(1, Ordering::Relaxed);
        control.rewrite_failures.store(0, Ordering::Relaxed);
    } else {
        control.rewrite_failures.fetch_add(1, Ordering::Relaxed);
    }
}

fn open(state: &ServerState, fsync: Appendfsync) -> anyhow::Result<Arc<Persistence>> {
    let (dir, limits) = {
        let cfg = state.config.read();
        (cfg.dir.clone(), cfg.encoding_limits())
    };
    let replay = Arc::new(Replay::new(limits));
    let first = state.persistence.next_batch.load(Ordering::Acquire);
    let p = Persistence::open(&dir, state.keyspace.clone(), fsync, replay, first)?;
    Ok(Arc::new(p))
}

/// Loads the data directory; keeps the store open if `appendonly` is on.
fn load(state: &Arc<ServerState>) -> anyhow::Result<()> {
    let (appendonly, fsync, limits, tiered) = {
        let cfg = state.config.read();
        let tiered = (cfg.maxmemory_policy == crate::config::MaxmemoryPolicy::Tiered
            && cfg.maxmemory > 0)
            .then_some(cfg.maxmemory);
        (
            cfg.appendonly,
            cfg.appendfsync,
            cfg.encoding_limits(),
            tiered,
        )
    };
    let p = open(state, fsync)?;
    let control = &state.persistence;
    if let Some(engine) = p.engine() {
        control
            .loading_total
            .store(engine.stats().live_bytes, Ordering::Relaxed);
    }
    p.recover(&limits, unix_ms(), &control.loading_done, tiered)?;
    if let Some(payload) = p.functions()? {
        let n = strata_commands::families::scripting::function::restore_logged(
            &state.scripting,
            &payload,
        )
        .map_err(|e| anyhow::anyhow!("loading the function libraries: {e}"))?;
        tracing::info!("{n} function libraries loaded");
    }
    for (ours, theirs) in [
        (&control.loaded_keys, &p.stats.loaded_keys),
        (&control.loaded_expired, &p.stats.loaded_expired),
    ] {
        ours.store(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    state
        .persistence
        .last_save_unix
        .store(unix_ms() / 1000, Ordering::Relaxed);
    if appendonly {
        install(state, p);
    } else {
        p.close()
            .map_err(|e| anyhow::anyhow!("closing the store: {e}"))?;
        remember_batches(state, &p);
    }
    Ok(())
}

/// Makes `p` the store commands log to.
fn install(state: &Arc<ServerState>, p: Arc<Persistence>) {
    state.persist.store(Some(p.clone()));
    set_logging(state, true);
    p.spawn_syncer(state.clone());
}

/// Flips the logging switch while holding every shard (see the module docs).
fn set_logging(state: &ServerState, on: bool) {
    let _all = state.keyspace.lock_all();
    state.logging.store(on, Ordering::Release);
}

fn remember_batches(state: &ServerState, p: &Persistence) {
    state
        .persistence
        .next_batch
        .fetch_max(p.appended() + 1, Ordering::AcqRel);
}

/// Opens the store on the live keyspace: every key is written to fresh namespaces
/// while changes are logged, then the new map is committed. With `keep`, logging
/// goes on afterwards; without, the store is closed (a snapshot).
fn enable(state: &Arc<ServerState>, keep: bool) -> Result<(), String> {
    let fsync = if keep {
        state.config.read().appendfsync
    } else {
        Appendfsync::No
    };
    let p = open(state, fsync).map_err(|e| format!("{e:#}"))?;
    let result = (|| {
        p.renamespace();
        state.persist.store(Some(p.clone()));
        set_logging(state, true);
        let ks = &state.keyspace;
        let mut keys = 0;
        for s in 0..ks.num_shards() {
            let shard = ks.lock(s);
            keys += p.dump_shard(&shard, unix_ms())?;
        }
        p.commit_map(unix_ms())?;
        p.put_functions(&state.scripting.dump(), unix_ms())?;
        p.sync_now()?;
        p.reset_base_size();
        if keep {
            p.switch_index(true);
        }
        tracing::info!("{keys} keys written to the data directory");
        Ok(())
    })();
    match result {
        Ok(()) if keep => {
            p.spawn_syncer(state.clone());
            Ok(())
        }
        Ok(()) => {
            disable(state);
            Ok(())
        }
        Err(e) => {
            disable(state);
            Err(e)
        }
    }
}

/// Stops logging and closes the store.
fn disable(state: &ServerState) {
    set_logging(state, false);
    if let Some(p) = state.persist.swap(None) {
        if let Err(e) = p.close() {
            tracing::warn!("closing the log: {e}");
        }
        remember_batches(state, &p);
    }
}

/// Makes the dataset durable: a sync when the log is on, a snapshot when it is off.
fn save(state: &Arc<ServerState>) -> Result<(), String> {
    let dirty = state.stats.dirty();
    match state.persist.load_full() {
        Some(p) => p.sync_now()?,
        None => enable(state, false)?,
    }
    let control = &state.persistence;
    control.dirty_at_save.store(dirty, Ordering::Relaxed);
    control
        .last_save_unix
        .store(unix_ms() / 1000, Ordering::Relaxed);
    Ok(())
}

/// SAVE: runs on the worker (after jobs queued before it) and waits for it.
pub fn save_now(state: &ServerState) -> Result<(), String> {
    let control = &state.persistence;
    if let Some((JobKind::Save, _)) = control.running() {
        return Err("ERR Background save already in progress".into());
    }
    let (tx, rx) = mpsc::channel();
    if !control.send(Job::Save { reply: Some(tx) }) {
        return Err("ERR the server is shutting down".into());
    }
    match rx.recv() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) | Err(_) => Err("ERR".into()),
    }
}

/// `BGSAVE [SCHEDULE]`.
pub fn bgsave(state: &ServerState, schedule: bool) -> Result<&'static str, String> {
    let control = &state.persistence;
    match control.admit(JobKind::Save) {
        Ok(()) => {
            control.send(Job::Save { reply: None });
            Ok("Background saving started")
        }
        Err(JobKind::Save) => Err("ERR Background save already in progress".into()),
        Err(JobKind::Rewrite) if schedule => {
            control.bgsave_scheduled.store(true, Ordering::Release);
            Ok("Background saving scheduled")
        }
        Err(JobKind::Rewrite) => Err("ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.".into()),
    }
}

/// BGREWRITEAOF.
pub fn bgrewriteaof(state: &ServerState) -> Result<&'static str, String> {
    let control = &state.persistence;
    if control.enabling.load(Ordering::Acquire) {
        return Err("ERR Background append only file rewriting already in progress".into());
    }
    match control.admit(JobKind::Rewrite) {
        Ok(()) => {
            control.send(Job::Rewrite);
            Ok("Background append only file rewriting started")
        }
        Err(JobKind::Rewrite) => {
            Err("ERR Background append only file rewriting already in progress".into())
        }
        Err(JobKind::Save) => {
            control.rewrite_scheduled.store(true, Ordering::Release);
            Ok("Background append only file rewriting scheduled")
        }
    }
}

/// CONFIG SET appendonly / appendfsync took effect in the configuration.
pub fn config_changed(state: &ServerState, name: &str) {
    let cfg = state.config.read();
    crate::sched::apply(
        cfg.sched_policy,
        cfg.appendonly && cfg.appendfsync == crate::config::Appendfsync::Always,
    );
    match name {
        "appendonly" => {
            let on = cfg.appendonly;
            drop(cfg);
            state
                .persistence
                .send(if on { Job::Enable } else { Job::Disable });
        }
        "appendfsync" => {
            if let Some(p) = state.persist.load().as_ref() {
                p.set_fsync(cfg.appendfsync);
            }
        }
        _ => {}
    }
}

/// SHUTDOWN: with the log on, closing it later is enough; with it off, a snapshot is
/// written first when asked (SAVE) or when `save` points are set (the default mode).
pub fn before_shutdown(state: &ServerState, save_asked: Option<bool>) -> Result<(), String> {
    if state.persist.load().is_some() || state.loading.load(Ordering::Acquire) {
        return Ok(());
    }
    let wanted = save_asked.unwrap_or_else(|| !state.config.read().save.is_empty());
    if !wanted {
        return Ok(());
    }
    tracing::warn!("Saving the final snapshot before exiting.");
    save_now(state).map_err(|_| "ERR Errors trying to SHUTDOWN. Check logs.".to_string())
}

/// Once a second: scheduled jobs, `save` points (log off), automatic compaction (log
/// on).
pub fn tick(state: &ServerState) {
    let control = &state.persistence;
    if state.loading.load(Ordering::Acquire) || control.running.lock().is_some() {
        return;
    }
    if control.rewrite_scheduled.swap(false, Ordering::AcqRel) {
        let _ = bgrewriteaof(state);
        return;
    }
    if control.bgsave_scheduled.swap(false, Ordering::AcqRel) {
        let _ = bgsave(state, false);
        return;
    }
    let cfg = state.config.read();
    match state.persist.load().as_ref() {
        Some(p) => {
            if control.enabling.load(Ordering::Acquire) || cfg.auto_aof_rewrite_percentage == 0 {
                return;
            }
            let size = p.current_size();
            let base = p.stats.base_size.load(Ordering::Relaxed).max(1);
            let growth = size.saturating_sub(base).saturating_mul(100) / base;
            if size >= cfg.auto_aof_rewrite_min_size
                && growth >= u64::from(cfg.auto_aof_rewrite_percentage)
            {
                drop(cfg);
                tracing::info!("Starting automatic rewriting of AOF on {growth}% growth");
                let _ = bgrewriteaof(state);
            }
        }
        None => {
            let dirty = state
                .stats
                .dirty()
                .saturating_sub(control.dirty_at_save.load(Ordering::Relaxed));
            let elapsed =
                (unix_ms() / 1000).saturating_sub(control.last_save_unix.load(Ordering::Relaxed));
            let due = cfg
                .save
                .iter()
                .any(|p| dirty >= p.changes && elapsed >= p.seconds);
            // After a failed save, wait a few seconds before trying again, as Redis.
            let now = unix_ms() / 1000;
            let retry_ok = control.last_bgsave_ok.load(Ordering::Relaxed)
                || now.saturating_sub(control.last_bgsave_try.load(Ordering::Relaxed)) >= 5;
            if due && dirty > 0 && retry_ok {
                drop(cfg);
                control.last_bgsave_try.store(now, Ordering::Relaxed);
                tracing::info!("{dirty} changes in {elapsed} seconds. Saving...");
                let _ = bgsave(state, false);
            }
        }
    }
}
