//! What handlers may ask of the server they run in: configuration, other clients,
//! INFO, shutdown. The server crate implements [`Server`]; tests use a small fake.

use std::sync::Arc;

use strata_keyspace::Detached;

use crate::conn::ClientInfo;
use crate::table::Registry;

/// Figures of the keyspace for INFO, gathered shard by shard.
#[derive(Clone, Debug, Default)]
pub struct KeyspaceSummary {
    /// Keys per database (expired ones not yet removed included, as in Redis).
    pub keys: Vec<usize>,
    /// Keys with a TTL per database.
    pub expires: Vec<usize>,
    pub hits: u64,
    pub misses: u64,
    pub expired: u64,
    /// Bytes of the tables' slot arrays per database.
    pub table_bytes: Vec<usize>,
}

/// The server's memory figures for MEMORY STATS / DOCTOR and INFO memory, in bytes.
#[derive(Clone, Debug, Default)]
pub struct MemoryReport {
    /// What the allocator says the application holds (`used_memory`).
    pub total: u64,
    /// The highest `total` seen.
    pub peak: u64,
    /// `total` when the server had just started.
    pub startup: u64,
    /// Clients' query and output buffers.
    pub clients_normal: u64,
    /// Connected clients.
    pub clients: u64,
    /// The allocator's active and resident bytes.
    pub allocator_active: u64,
    pub allocator_resident: u64,
    /// The process's resident set.
    pub rss: u64,
    /// What eviction leaves out (`mem_not_counted_for_evict`).
    pub not_counted_for_evict: u64,
}

/// How SHUTDOWN was asked to treat the dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownMode {
    Default,
    Save,
    NoSave,
}

pub trait Server: Send + Sync {
    fn registry(&self) -> &Registry;

    /// Number of logical databases (`databases`).
    fn databases(&self) -> usize;

    /// The largest string a command may build (`proto-max-bulk-len`).
    fn max_bulk_len(&self) -> usize;

    /// The thresholds at which collections change encoding.
    fn encoding_limits(&self) -> strata_keyspace::EncodingLimits;

    /// CONFIG GET: name/value pairs matching any of the patterns.
    fn config_get(&self, patterns: &[&[u8]]) -> Vec<(String, String)>;

    /// CONFIG SET, all or nothing. The error is the whole reply text ("ERR ...").
    fn config_set(&self, pairs: &[(&[u8], &[u8])]) -> Result<(), String>;

    /// CONFIG RESETSTAT.
    fn reset_stats(&self);

    /// CONFIG REWRITE.
    fn config_rewrite(&self) -> Result<(), String>;

    /// The INFO text for the requested sections (empty: the default sections), given
    /// the keyspace's figures (gathered by the caller through its locks).
    fn info(&self, sections: &[&[u8]], keyspace: &KeyspaceSummary) -> String;

    /// Every connected client.
    fn clients(&self) -> Vec<Arc<ClientInfo>>;

    /// The password clients must give (`requirepass`), if any.
    fn requirepass(&self) -> Option<String>;

    /// Whether DEBUG may run for a client (`enable-debug-command`).
    fn debug_allowed(&self, client: &ClientInfo) -> bool;

    /// Begins a shutdown; the error is the whole reply text.
    fn shutdown(&self, mode: ShutdownMode) -> Result<(), String>;

    /// SAVE: makes the whole dataset durable now, blocking the caller. The error is
    /// the whole reply text.
    fn save(&self) -> Result<(), String> {
        Err("ERR this server has no data directory".into())
    }

    /// `BGSAVE [SCHEDULE]`: the status reply ("Background saving started", or
    /// "...scheduled"), or the whole error text.
    fn bgsave(&self, schedule: bool) -> Result<&'static str, String> {
        let _ = schedule;
        Err("ERR this server has no data directory".into())
    }

    /// BGREWRITEAOF: the status reply, or the whole error text.
    fn bgrewriteaof(&self) -> Result<&'static str, String> {
        Err("ERR this server has no data directory".into())
    }

    /// LASTSAVE: Unix time (seconds) of the last successful save.
    fn lastsave(&self) -> u64 {
        0
    }

    /// Frees detached data somewhere other than the caller's thread.
    fn free_later(&self, data: Vec<Detached>);

    /// The `lazyfree-lazy-*` switches in force.
    fn lazyfree(&self) -> LazyFree {
        LazyFree::default()
    }

    /// Turns active expiry on or off (DEBUG SET-ACTIVE-EXPIRE).
    fn set_active_expire(&self, on: bool);

    /// Called after a command that changed `n` keys (for statistics and persistence).
    fn add_dirty(&self, n: u64);

    /// Whether any client is blocked waiting for a key (so commands report the keys
    /// they make ready).
    fn has_blocked_clients(&self) -> bool;

    /// The switch saying whether changes are logged (persistence on and the dataset
    /// loaded); `None` when they never are. The server flips it only while holding
    /// every shard (see [`crate::ctx::Keys::logging_flag`]).
    fn logging_flag(&self) -> Option<&std::sync::atomic::AtomicBool> {
        None
    }

    /// Appends one command's (or transaction's) records to the log, as one atomic
    /// batch. Called with the command's shard locks held, so it must not wait for
    /// the disk. Returns the sequence number a reply must wait for to be durable
    /// (`appendfsync always`), or the error text to reply with (MISCONF ...).
    ///
    /// `located` is filled, one per record, with where each record went when the
    /// keyspace is to list it ([`crate::ctx::Keys::apply_locations`]): the store then
    /// keeps no index of those keys of its own. `now_ms` is the command's time
    /// (Unix milliseconds), which the records' versions follow. The store may write
    /// its prefix before the records' keys ([`crate::effects::Batch::write_prefixes`]).
    fn log(
        &self,
        records: &mut crate::effects::Batch,
        now_ms: u64,
        located: &mut crate::effects::Located,
    ) -> Result<Option<u64>, String> {
        let _ = (records, now_ms);
        located.clear();
        Ok(None)
    }

    /// The error write commands get while the log cannot be written (Redis's MISCONF).
    fn write_error(&self) -> Option<String> {
        None
    }

    /// Whether the dataset is still being loaded (commands without the `loading` flag
    /// answer LOADING).
    fn loading(&self) -> bool {
        false
    }

    /// The pub/sub hub (subscriptions, MONITOR clients, keyspace notifications);
    /// `None` for a server without one, such as a test's fake.
    fn pubsub(&self) -> Option<&crate::pubsub::PubSub> {
        None
    }

    /// The `maxmemory` state (limit, policy, pool, counters); `None` for a server
    /// that never evicts, such as a test's fake.
    fn eviction(&self) -> Option<&crate::evict::Eviction> {
        None
    }

    /// The memory eviction compares with `maxmemory`: what the allocator holds, less
    /// what deleting keys cannot free (Redis's `mem_not_counted_for_evict`).
    /// Expensive enough to be read only every few commands.
    fn memory_for_eviction(&self) -> u64 {
        0
    }

    /// Net bytes the calling thread has allocated (allocated less freed, wrapping),
    /// if the allocator counts per thread cheaply: eviction follows memory between
    /// its readings of [`Server::memory_for_eviction`] with it.
    fn thread_allocated(&self) -> Option<u64> {
        None
    }

    /// `maxmemory-policy tiered`: makes what the log has buffered reach the operating
    /// system, so that values about to leave memory can be read back whatever
    /// happens to this process; false if values cannot leave memory now (no log, or
    /// the log cannot be written).
    fn prepare_tiering(&self) -> bool {
        false
    }

    /// Reads the value of `key` in database `db` back from the store, blocking
    /// (see [`crate::tiered`]); `Ok(None)` if the store has no live value for it.
    fn read_cold(
        &self,
        _cold: &crate::tiered::ColdKey,
    ) -> Result<Option<strata_keyspace::Value>, String> {
        Err("ERR no store to read values from".into())
    }

    /// [`Server::read_cold`] if it needs no wait for the device (the value is in a
    /// buffer or the operating system's cache): safe on an event-loop thread.
    /// `None` if it would wait, or on any error (the waiting read reports it).
    fn read_cold_cached(&self, _cold: &crate::tiered::ColdKey) -> Option<strata_keyspace::Value> {
        None
    }

    /// The tiered policy's counters, if the server keeps them.
    fn tiered_stats(&self) -> Option<&crate::tiered::TieredStats> {
        None
    }

    /// The memory figures of MEMORY STATS and DOCTOR.
    fn memory_report(&self) -> MemoryReport {
        MemoryReport::default()
    }

    /// MEMORY MALLOC-STATS: the allocator's report, if it gives one.
    fn malloc_stats(&self) -> Option<String> {
        None
    }

    /// MEMORY PURGE: returns the allocator's unused dirty pages to the system now;
    /// false if the allocator refused. An allocator without such pages has nothing
    /// to do.
    fn purge_memory(&self) -> bool {
        true
    }

    /// CLIENT PAUSE: holds clients' commands (only those that write, with
    /// `writes_only`) until `until_ms` (Unix milliseconds). A pause already in force
    /// is only ever extended and widened, as in Redis.
    fn pause_clients(&self, _until_ms: u64, _writes_only: bool) {}

    /// CLIENT UNPAUSE.
    fn unpause_clients(&self) {}

    /// The scripting engine (EVAL, FUNCTION), if the server has one.
    fn scripting(&self) -> Option<&crate::scripting::Scripting> {
        None
    }

    /// Runs `f`, a script that may run for long, so that the server goes on serving
    /// other clients on other threads meanwhile.
    fn run_long(&self, f: &mut dyn FnMut()) {
        f()
    }

    /// CLIENT UNBLOCK: ends the wait of a client blocked in a command, as on timeout or
    /// with an error; false if that client is not blocked.
    fn unblock_client(&self, _id: u64, _with_error: bool) -> bool {
        false
    }

    /// The ACL users and log; `None` for a server without access control (a test's
    /// fake), where every command is allowed.
    fn acl(&self) -> Option<&crate::acl::Acl> {
        None
    }
}

/// When values are freed in the background rather than by the command that dropped
/// them (Redis's `lazyfree-lazy-*` directives; UNLINK and FLUSHALL ASYNC always are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LazyFree {
    /// `lazyfree-lazy-user-del`: DEL behaves as UNLINK.
    pub user_del: bool,
    /// `lazyfree-lazy-server-del`: values a command overwrites or deletes as a side
    /// effect (SET over a list, RENAME onto a key, a *STORE destination).
    pub server_del: bool,
    /// `lazyfree-lazy-expire`: values of expired keys.
    pub expire: bool,
    /// `lazyfree-lazy-user-flush`: FLUSHDB/FLUSHALL without SYNC or ASYNC.
    pub user_flush: bool,
    /// `lazyfree-lazy-eviction`: values of keys evicted by `maxmemory`.
    pub eviction: bool,
}
