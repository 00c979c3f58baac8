//! The server's shared state and its implementation of the command layer's
//! [`Server`] trait: configuration, clients, statistics, shutdown.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use strata_commands::mailbox::{ClassLimit, OutputClass};
use strata_commands::{ClientInfo, PubSub, Registry, Server, ShutdownMode};
use strata_keyspace::{Detached, Keyspace};
use tokio::sync::watch;

use crate::config::{ClientClass, Config, ConfigSource, ProtectedAction};
use crate::stats::Stats;

pub struct ServerState {
    pub keyspace: Arc<Keyspace>,
    pub registry: Registry,
    pub config: RwLock<Config>,
    pub source: ConfigSource,
    pub stats: Stats,
    clients: Mutex<BTreeMap<u64, Arc<ClientInfo>>>,
    next_client_id: AtomicU64,
    pub connected: AtomicUsize,
    active_expire: AtomicBool,
    /// Flips to true when the server must shut down.
    shutdown_tx: watch::Sender<bool>,
    /// Set once shutdown begins, before `shutdown_tx` says so (see `begin_shutdown`).
    shutting_down: AtomicBool,
    pub started: Instant,
    pub started_ms: u64,
    pub run_id: String,
    /// The background freeing thread (UNLINK, FLUSHALL ASYNC, lazyfree-lazy-*).
    pub lazyfree: crate::lazyfree::LazyFreer,
    /// Values read on the hot path, mirrored from the configuration.
    max_bulk_len: AtomicUsize,
    limits: Limits,
    /// The listening TCP port (for INFO).
    pub tcp_port: AtomicUsize,
    /// Applies a new log level (installed by the binary's logging set-up).
    pub on_loglevel: Mutex<Option<crate::LogLevelSetter>>,
    /// The highest `used_memory` seen (INFO's `used_memory_peak`).
    pub peak_memory: AtomicU64,
    /// `used_memory` once the server was set up (INFO's `used_memory_startup`).
    pub startup_memory: AtomicU64,
    /// Error replies by their first word (INFO errorstats).
    errors: Mutex<BTreeMap<String, u64>>,
    /// Clients blocked on keys.
    pub blocking: crate::blocking::Blocking,
    /// The store commands log to, while logging (`appendonly yes`, or a snapshot
    /// being written).
    pub persist: arc_swap::ArcSwapOption<crate::persist::Persistence>,
    /// Whether commands log their changes; flipped only with every shard held.
    pub logging: AtomicBool,
    /// Start-up loading, snapshots, compactions and their figures.
    pub persistence: crate::persist::control::Control,
    /// Whether the dataset is still being loaded: commands without the `loading`
    /// flag answer LOADING until it is.
    pub loading: AtomicBool,
    /// Set when start-up failed after the listeners opened: the process exits non-zero.
    pub failed: AtomicBool,
    /// Pub/sub subscriptions, MONITOR clients, keyspace notifications, output limits.
    pub pubsub: PubSub,
    /// CLIENT PAUSE.
    pub pause: crate::pause::Pause,
    /// ACL users and the ACL log.
    pub acl: strata_commands::acl::Acl,
    /// EVAL scripts, FUNCTION libraries, the Lua interpreters, the running scripts.
    pub scripting: strata_commands::scripting::Scripting,
    /// `maxmemory` and eviction.
    pub eviction: strata_commands::evict::Eviction,
    /// What `maxmemory-policy tiered` has read back and found in memory.
    pub tiered: strata_commands::tiered::TieredStats,
    /// Replies held to the end of the I/O thread's turn.
    pub turn: crate::turn::Turn,
}

pub use crate::clock::unix_ms;

impl ServerState {
    /// A server's state for unit tests: the default configuration with the log off.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Arc<ServerState> {
        let config = Config {
            appendonly: false,
            ..Config::default()
        };
        ServerState::new(
            config,
            ConfigSource {
                file: None,
                overrides: 0,
            },
        )
    }

    pub fn new(config: Config, source: ConfigSource) -> Arc<ServerState> {
        let mut registry = strata_commands::registry();
        // Checked when the configuration was read.
        for (from, to) in &config.security.renames {
            registry.rename(from, to);
        }
        let acl = strata_commands::acl::Acl::new(&registry);
        let stats = Stats::new(registry.id_count());
        let keyspace = Arc::new(Keyspace::new(config.databases, config.shards));
        let (shutdown_tx, _) = watch::channel(false);
        let lazyfree = crate::lazyfree::LazyFreer::start();
        lazyfree.set_switches(config.lazyfree());
        let run_id: String = (0..40)
            .map(|_| char::from(b"0123456789abcdef"[rand::random::<u8>() as usize % 16]))
            .collect();
        let max_bulk_len = AtomicUsize::new(config.proto_max_bulk_len as usize);
        Arc::new(ServerState {
            keyspace,
            registry,
            config: RwLock::new(config),
            source,
            stats,
            clients: Mutex::new(BTreeMap::new()),
            next_client_id: AtomicU64::new(1),
            connected: AtomicUsize::new(0),
            active_expire: AtomicBool::new(true),
            shutdown_tx,
            shutting_down: AtomicBool::new(false),
            started: Instant::now(),
            started_ms: unix_ms(),
            run_id,
            lazyfree,
            max_bulk_len,
            limits: Limits::default(),
            tcp_port: AtomicUsize::new(0),
            on_loglevel: Mutex::new(None),
            peak_memory: AtomicU64::new(0),
            startup_memory: AtomicU64::new(crate::memory::allocated()),
            errors: Mutex::new(BTreeMap::new()),
            blocking: Default::default(),
            persist: arc_swap::ArcSwapOption::empty(),
            logging: AtomicBool::new(false),
            persistence: Default::default(),
            loading: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            pubsub: PubSub::new(),
            pause: Default::default(),
            acl,
            scripting: Default::default(),
            eviction: strata_commands::evict::Eviction::new(),
            tiered: Default::default(),
            turn: Default::default(),
        })
        .with_settings_applied()
    }

    /// Mirrors the configuration the hot paths read without the lock.
    fn with_settings_applied(self: Arc<Self>) -> Arc<Self> {
        self.apply_changes(&[
            "client-output-buffer-limit",
            "notify-keyspace-events",
            "pubsub-max-subscriptions-per-client",
            "tracking-table-max-keys",
            "requirepass",
            "acllog-max-len",
            "acl-pubsub-default",
            "busy-reply-threshold",
            "lua-memory-limit",
            "maxmemory-policy",
            "jemalloc-bg-thread",
            "hash-max-listpack-entries",
        ]);
        self
    }

    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    pub fn register(&self, info: Arc<ClientInfo>) {
        self.clients.lock().insert(info.id, info);
    }

    pub fn unregister(&self, id: u64) {
        self.clients.lock().remove(&id);
    }

    /// Counts an error reply by its code ("ERR", "WRONGTYPE"...).
    pub fn count_error(&self, reply: &[u8]) {
        let text = reply.strip_prefix(b"-").unwrap_or(reply);
        let code = text
            .split(|&c| c == b' ' || c == b'\r')
            .next()
            .unwrap_or_default();
        let code = String::from_utf8_lossy(&code[..code.len().min(64)]).into_owned();
        *self.errors.lock().entry(code).or_insert(0) += 1;
    }

    /// Error counts by code, for INFO.
    pub fn error_counts(&self) -> Vec<(String, u64)> {
        self.errors
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    pub fn active_expire_enabled(&self) -> bool {
        self.active_expire.load(Ordering::Relaxed)
    }

    /// A receiver that sees `true` once shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    /// Whether shutdown has begun: one load of a flag that only changes once, which
    /// a connection reads between requests (reading the watch channel takes its
    /// lock, a cache line every I/O thread would write on every request).
    #[inline]
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Starts shutting down: stops scripts, tells the listeners and waiting clients
    /// (the watch channel), and wakes every connection, which then sees the flag.
    pub fn begin_shutdown(&self) {
        self.scripting.kill_all();
        self.shutting_down.store(true, Ordering::Release);
        self.shutdown_tx.send_replace(true);
        // A connection registered after this snapshot reads the flag before its
        // first request.
        for client in Server::clients(self) {
            client.wake();
        }
    }

    /// Reacts to configuration directives changed at run time.
    fn apply_changes(&self, changed: &[&str]) {
        let cfg = self.config.read();
        for name in changed {
            match *name {
                "lazyfree-lazy-user-del"
                | "lazyfree-lazy-server-del"
                | "lazyfree-lazy-expire"
                | "lazyfree-lazy-eviction"
                | "lazyfree-lazy-user-flush" => self.lazyfree.set_switches(cfg.lazyfree()),
                "io-spin-us" => self.turn.set_spin_us(cfg.io_spin_us),
                "proto-max-bulk-len" => self
                    .max_bulk_len
                    .store(cfg.proto_max_bulk_len as usize, Ordering::Relaxed),
                "loglevel" => {
                    if let Some(f) = self.on_loglevel.lock().as_ref() {
                        f(cfg.loglevel.name());
                    }
                }
                "client-output-buffer-limit" => {
                    for (class, ours) in [
                        (ClientClass::Normal, OutputClass::Normal),
                        (ClientClass::Replica, OutputClass::Replica),
                        (ClientClass::Pubsub, OutputClass::Pubsub),
                    ] {
                        let l = cfg.output_buffer_limit(class);
                        self.pubsub.limits.set(
                            ours,
                            ClassLimit {
                                hard_bytes: l.hard_bytes,
                                soft_bytes: l.soft_bytes,
                                soft_seconds: l.soft_seconds,
                            },
                        );
                    }
                }
                "notify-keyspace-events" => {
                    self.pubsub.set_notify_flags(cfg.notify_keyspace_events);
                    self.pubsub.sync_event_flags(&self.keyspace);
                }
                "pubsub-max-subscriptions-per-client" => self
                    .pubsub
                    .set_max_per_client(cfg.pubsub_max_subscriptions_per_client as usize),
                "requirepass" => self.acl.set_default_password(
                    &self.registry,
                    cfg.requirepass.as_deref().map(str::as_bytes),
                ),
                "acllog-max-len" => self
                    .acl
                    .log_max_len
                    .store(cfg.security.acllog_max_len as usize, Ordering::Relaxed),
                "acl-pubsub-default" => self.acl.pubsub_allchannels.store(
                    cfg.security.acl_pubsub_default
                        == crate::config::security::AclPubsubDefault::Allchannels,
                    Ordering::Relaxed,
                ),
                "busy-reply-threshold" => self
                    .scripting
                    .busy_threshold_ms
                    .store(cfg.busy_reply_threshold, Ordering::Relaxed),
                "lua-memory-limit" => self
                    .scripting
                    .memory_limit
                    .store(cfg.lua_memory_limit as usize, Ordering::Relaxed),
                "tracking-table-max-keys" => self
                    .pubsub
                    .tracking
                    .max_keys
                    .store(cfg.tracking_table_max_keys as usize, Ordering::Relaxed),
                "maxmemory" | "maxmemory-policy" | "maxmemory-samples" | "lfu-log-factor"
                | "lfu-decay-time" => {
                    let policy = crate::memory::eviction_policy(cfg.maxmemory_policy);
                    self.eviction
                        .configure(cfg.maxmemory, policy, cfg.maxmemory_samples);
                    strata_keyspace::access::set_mode(
                        policy.is_lfu(),
                        cfg.lfu_log_factor,
                        cfg.lfu_decay_time,
                    );
                    if *name == "maxmemory" && cfg.maxmemory > 0 {
                        let used = crate::memory::allocated();
                        if used > cfg.maxmemory {
                            tracing::warn!(
                                "WARNING: the new maxmemory value set via CONFIG SET ({}) is smaller than the current memory usage ({}). This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.",
                                cfg.maxmemory,
                                used
                            );
                        }
                    }
                }
                "jemalloc-bg-thread" => crate::memory::set_background_purge(cfg.jemalloc_bg_thread),
                "hash-max-listpack-entries"
                | "hash-max-listpack-value"
                | "set-max-intset-entries"
                | "zset-max-listpack-entries"
                | "zset-max-listpack-value"
                | "list-max-listpack-size" => self.limits.store(&cfg.encoding_limits()),
                "appendonly" | "appendfsync" => {
                    crate::persist::control::config_changed(self, name);
                }
                _ => {}
            }
        }
    }
}

/// The collections' encoding limits, mirrored from the configuration: read by every
/// command that adds to a collection, they must not cost it the configuration's
/// lock, whose reader count every I/O thread would write.
#[derive(Default)]
struct Limits {
    hash_entries: AtomicU64,
    hash_value: AtomicU64,
    intset_entries: AtomicU64,
    zset_entries: AtomicU64,
    zset_value: AtomicU64,
    list_size: AtomicI64,
}

impl Limits {
    fn store(&self, l: &strata_keyspace::EncodingLimits) {
        let r = Ordering::Relaxed;
        self.hash_entries.store(l.hash_max_listpack_entries, r);
        self.hash_value.store(l.hash_max_listpack_value, r);
        self.intset_entries.store(l.set_max_intset_entries, r);
        self.zset_entries.store(l.zset_max_listpack_entries, r);
        self.zset_value.store(l.zset_max_listpack_value, r);
        self.list_size.store(l.list_max_listpack_size, r);
    }

    fn load(&self) -> strata_keyspace::EncodingLimits {
        let r = Ordering::Relaxed;
        strata_keyspace::EncodingLimits {
            hash_max_listpack_entries: self.hash_entries.load(r),
            hash_max_listpack_value: self.hash_value.load(r),
            set_max_intset_entries: self.intset_entries.load(r),
            zset_max_listpack_entries: self.zset_entries.load(r),
            zset_max_listpack_value: self.zset_value.load(r),
            list_max_listpack_size: self.list_size.load(r),
        }
    }
}

impl Server for ServerState {
    fn registry(&self) -> &Registry {
        &self.registry
    }

    fn databases(&self) -> usize {
        self.keyspace.databases()
    }

    fn max_bulk_len(&self) -> usize {
        self.max_bulk_len.load(Ordering::Relaxed)
    }

    fn encoding_limits(&self) -> strata_keyspace::EncodingLimits {
        self.limits.load()
    }

    fn config_get(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        self.config.read().config_get(patterns)
    }

    fn config_set(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        let changed = self.config.write().config_set(pairs)?;
        self.apply_changes(changed.names());
        Ok(())
    }

    fn reset_stats(&self) {
        self.stats.reset();
        self.lazyfree.reset_stats();
        self.eviction.evicted_keys.store(0, Ordering::Relaxed);
        self.errors.lock().clear();
        for s in 0..self.keyspace.num_shards() {
            let mut shard = self.keyspace.lock(s);
            shard.stats = Default::default();
            for db in shard.dbs_mut() {
                db.expired = 0;
            }
        }
    }

    fn config_rewrite(&self) -> Result<(), String> {
        let Some(path) = &self.source.file else {
            return Err("ERR The server is running without a config file".to_string());
        };
        let cfg = self.config.read();
        crate::config::rewrite::rewrite(&cfg, path)
            .map_err(|e| format!("ERR Rewriting config file: {e}"))
    }

    fn info(&self, sections: &[&[u8]], keyspace: &strata_commands::KeyspaceSummary) -> String {
        crate::info::render(self, sections, keyspace)
    }

    fn clients(&self) -> Vec<Arc<ClientInfo>> {
        self.clients.lock().values().cloned().collect()
    }

    fn requirepass(&self) -> Option<String> {
        self.config.read().requirepass.clone()
    }

    fn debug_allowed(&self, client: &ClientInfo) -> bool {
        match self.config.read().enable_debug_command {
            ProtectedAction::Yes => true,
            ProtectedAction::No => false,
            ProtectedAction::Local => {
                client.addr.starts_with("127.")
                    || client.addr.starts_with("[::1]")
                    || client.addr.starts_with("/")
            }
        }
    }

    fn shutdown(&self, mode: ShutdownMode) -> Result<(), String> {
        // As in Redis: while a script is past busy-reply-threshold only SHUTDOWN
        // NOSAVE goes through; it stops the script.
        if mode != ShutdownMode::NoSave
            && let Some(busy) = self.scripting.busy_error()
        {
            return Err(busy.to_string());
        }
        self.scripting.kill_all();
        tracing::warn!("User requested shutdown...");
        let save = match mode {
            ShutdownMode::Default => None,
            ShutdownMode::Save => Some(true),
            ShutdownMode::NoSave => Some(false),
        };
        crate::persist::control::before_shutdown(self, save)?;
        self.begin_shutdown();
        Ok(())
    }

    fn save(&self) -> Result<(), String> {
        crate::persist::control::save_now(self)
    }

    fn bgsave(&self, schedule: bool) -> Result<&'static str, String> {
        crate::persist::control::bgsave(self, schedule)
    }

    fn bgrewriteaof(&self) -> Result<&'static str, String> {
        crate::persist::control::bgrewriteaof(self)
    }

    fn lastsave(&self) -> u64 {
        self.persistence.last_save_unix.load(Ordering::Relaxed)
    }

    fn free_later(&self, data: Vec<Detached>) {
        self.lazyfree.free_later(data);
    }

    fn lazyfree(&self) -> strata_commands::server::LazyFree {
        self.lazyfree.switches()
    }

    fn set_active_expire(&self, on: bool) {
        self.active_expire.store(on, Ordering::Relaxed);
    }

    fn add_dirty(&self, n: u64) {
        self.stats.add_dirty(n);
    }

    fn has_blocked_clients(&self) -> bool {
        self.blocking.blocked() > 0
    }

    fn logging_flag(&self) -> Option<&AtomicBool> {
        Some(&self.logging)
    }

    fn log(
        &self,
        records: &mut strata_commands::effects::Batch,
        now_ms: u64,
        located: &mut strata_commands::effects::Located,
    ) -> Result<Option<u64>, String> {
        match self.persist.load().as_ref() {
            Some(p) => p.log(records, now_ms, located),
            None => {
                located.clear();
                Ok(None)
            }
        }
    }

    fn write_error(&self) -> Option<String> {
        if !crate::persist::Persistence::any_failed() {
            return None;
        }
        self.persist.load().as_ref().and_then(|p| p.write_error())
    }

    fn loading(&self) -> bool {
        self.loading.load(Ordering::Acquire)
    }

    fn pubsub(&self) -> Option<&PubSub> {
        Some(&self.pubsub)
    }

    fn eviction(&self) -> Option<&strata_commands::evict::Eviction> {
        Some(&self.eviction)
    }

    fn prepare_tiering(&self) -> bool {
        let Some(p) = self.persist.load_full() else {
            return false;
        };
        self.logging.load(Ordering::Acquire)
            && p.write_error().is_none()
            && !p.rewriting_map()
            && p.flush_to(p.appended()).is_ok()
    }

    fn read_cold(
        &self,
        cold: &strata_commands::tiered::ColdKey,
    ) -> Result<Option<strata_keyspace::Value>, String> {
        let Some(p) = self.persist.load_full() else {
            return Err("ERR the log is closed: can't read the value from disk".into());
        };
        let limits = self.encoding_limits();
        blocking(|| p.read_value(cold.db, &cold.key, cold.refs.as_ref(), &limits))
    }

    fn read_cold_cached(
        &self,
        cold: &strata_commands::tiered::ColdKey,
    ) -> Option<strata_keyspace::Value> {
        let p = self.persist.load_full()?;
        p.read_value_cached(
            cold.db,
            &cold.key,
            cold.refs.as_ref(),
            &self.encoding_limits(),
        )
    }

    fn tiered_stats(&self) -> Option<&strata_commands::tiered::TieredStats> {
        Some(&self.tiered)
    }

    fn memory_report(&self) -> strata_commands::MemoryReport {
        crate::memory::report(self)
    }

    fn malloc_stats(&self) -> Option<String> {
        Some(crate::memory::malloc_stats())
    }

    fn purge_memory(&self) -> bool {
        crate::memory::purge()
    }

    fn memory_for_eviction(&self) -> u64 {
        crate::memory::allocated().saturating_sub(crate::memory::not_counted_for_evict(self))
    }

    fn thread_allocated(&self) -> Option<u64> {
        crate::memory::thread_allocated()
    }

    fn pause_clients(&self, until_ms: u64, writes_only: bool) {
        self.pause.pause(until_ms, writes_only, unix_ms());
    }

    fn unpause_clients(&self) {
        self.pause.unpause();
    }

    fn scripting(&self) -> Option<&strata_commands::scripting::Scripting> {
        Some(&self.scripting)
    }

    fn run_long(&self, f: &mut dyn FnMut()) {
        blocking(f)
    }

    fn unblock_client(&self, id: u64, with_error: bool) -> bool {
        self.blocking.unblock(id, with_error)
    }

    fn acl(&self) -> Option<&strata_commands::acl::Acl> {
        Some(&self.acl)
    }
}

/// Runs `f`, which may block (a long script, a read from disk): on a worker of the
/// multi-threaded runtime, the worker's other connections move to another thread
/// meanwhile.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            let result = tokio::task::block_in_place(f);
            crate::turn::left_turn();
            result
        }
        _ => f(),
    }
}
