//! Server configuration: redis.conf syntax, the redis-server command line, and CONFIG
//! GET/SET.
//!
//! A [`Config`] holds one typed field per directive. It is built once at start-up by
//! [`from_args`] (defaults, then the configuration file, then `--directive` overrides)
//! and changed afterwards only by [`Config::config_set`]. Every directive is one entry
//! of the registry in [`directives`]: its name, its type and checks, whether CONFIG SET
//! may change it, and how CONFIG GET renders it. Loading, CONFIG GET and CONFIG SET are
//! all driven by that table, so they agree with each other by construction.
//!
//! Redis 7.0 is the specification: the same syntax, the same defaults (except where a
//! field's documentation says otherwise), the same renderings and the same CONFIG SET
//! error texts. Invariants:
//! - CONFIG SET is all-or-nothing: every name is checked, then every value is applied
//!   to a copy, and the copy replaces the configuration only if all succeeded.
//! - A `Config` built by this module always satisfies every directive's checks.
//!
//! CONFIG RESETSTAT touches no configuration: the statistics it resets belong to the
//! server. [`CONFIG_HELP`] is the text of CONFIG HELP.

pub mod directives;
mod parse;
pub mod rewrite;

use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;

use strata_keyspace::glob;

pub use directives::{Directive, Mutability};
pub use parse::{ConfigSource, Invocation, from_args, usage, version};

use directives::Phase;

/// Whether `appendonly` is on by default: it is, so that a plain start keeps its data
/// (`appendonly no` gives a purely in-memory server).
pub const DEFAULT_APPENDONLY: bool = true;

/// Defines an enum directive's value type with its Redis names, in Redis's order (the
/// order its "must be one of the following" error lists them).
macro_rules! config_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// The names accepted in configuration, in Redis's order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The name CONFIG GET shows.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            /// The value called `name`, ignoring ASCII case.
            pub fn from_name(name: &[u8]) -> Option<Self> {
                $(if name.eq_ignore_ascii_case($text.as_bytes()) {
                    return Some(Self::$variant);
                })+
                None
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

pub mod security;

config_enum! {
    /// How much the server logs (`loglevel`).
    LogLevel {
        /// Everything, for development.
        Debug = "debug",
        /// Much information that is rarely useful.
        Verbose = "verbose",
        /// What production needs.
        Notice = "notice",
        /// Only what is important or critical.
        Warning = "warning",
        /// Nothing at all (accepted by Redis from 7.2 on).
        Nothing = "nothing",
    }
}

impl LogLevel {
    /// Whether a message of `level` is logged at this level.
    pub fn logs(self, level: LogLevel) -> bool {
        self != LogLevel::Nothing && level as u8 >= self as u8
    }
}

config_enum! {
    /// When the append-only log is flushed to disk (`appendfsync`).
    Appendfsync {
        /// Once a second, in the background.
        Everysec = "everysec",
        /// Before each write is acknowledged.
        Always = "always",
        /// When the operating system chooses.
        No = "no",
    }
}

config_enum! {
    /// What to evict when `maxmemory` is reached (`maxmemory-policy`).
    MaxmemoryPolicy {
        /// Least recently used among keys with an expiry.
        VolatileLru = "volatile-lru",
        /// Least frequently used among keys with an expiry.
        VolatileLfu = "volatile-lfu",
        /// Any key with an expiry.
        VolatileRandom = "volatile-random",
        /// The key with the nearest expiry.
        VolatileTtl = "volatile-ttl",
        /// Least recently used among all keys.
        AllkeysLru = "allkeys-lru",
        /// Least frequently used among all keys.
        AllkeysLfu = "allkeys-lfu",
        /// Any key.
        AllkeysRandom = "allkeys-random",
        /// Nothing: writes that need memory fail.
        Noeviction = "noeviction",
        /// strata's own: no key is deleted; the least recently used string values
        /// move out of memory to the log on disk and come back when read. Needs
        /// `appendonly yes`.
        Tiered = "tiered",
    }
}

config_enum! {
    /// The Linux scheduling policy of the server's threads (`sched-policy`,
    /// strata-specific).
    SchedPolicy {
        /// `SCHED_BATCH`: a thread that wakes (a socket became readable) waits for
        /// the running one's turn to end instead of preempting it.
        Batch = "batch",
        /// `SCHED_OTHER`, the default of every Linux process.
        Normal = "normal",
    }
}

config_enum! {
    /// Who may use a dangerous feature such as DEBUG (Redis's protected action).
    ProtectedAction {
        /// Nobody.
        No = "no",
        /// Every client.
        Yes = "yes",
        /// Clients connected over loopback or a Unix socket.
        Local = "local",
    }
}

/// One `save` point: snapshot after `seconds` if at least `changes` writes happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavePoint {
    pub seconds: u64,
    pub changes: u64,
}

/// One `bind` address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindAddr {
    /// A host name or address; `*` means every IPv4 address and `::*` every IPv6 one.
    pub host: String,
    /// Written with a leading `-`: failing to bind it is not an error.
    pub optional: bool,
}

impl BindAddr {
    /// Reads one address as written after `bind`; an empty host is refused.
    pub fn parse(text: &str) -> Option<BindAddr> {
        let (host, optional) = match text.strip_prefix('-') {
            Some(host) => (host, true),
            None => (text, false),
        };
        (!host.is_empty()).then(|| BindAddr {
            host: host.to_owned(),
            optional,
        })
    }
}

impl fmt::Display for BindAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.optional {
            f.write_str("-")?;
        }
        f.write_str(&self.host)
    }
}

/// The client classes that `client-output-buffer-limit` distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientClass {
    Normal = 0,
    Replica = 1,
    Pubsub = 2,
}

impl ClientClass {
    /// Every class, in the order of [`Config::client_output_buffer_limit`].
    pub const ALL: [ClientClass; 3] = [
        ClientClass::Normal,
        ClientClass::Replica,
        ClientClass::Pubsub,
    ];

    /// The name CONFIG GET shows; Redis 7.0 still shows replicas as `slave`.
    pub fn name(self) -> &'static str {
        match self {
            ClientClass::Normal => "normal",
            ClientClass::Replica => "slave",
            ClientClass::Pubsub => "pubsub",
        }
    }

    /// The class called `name`, ignoring case; `replica` and `slave` are the same class.
    pub fn from_name(name: &[u8]) -> Option<ClientClass> {
        let name = name.to_ascii_lowercase();
        match name.as_slice() {
            b"normal" => Some(ClientClass::Normal),
            b"replica" | b"slave" => Some(ClientClass::Replica),
            b"pubsub" => Some(ClientClass::Pubsub),
            _ => None,
        }
    }
}

/// The output-buffer limits of one client class; 0 disables a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientOutputBufferLimit {
    /// Past this many bytes the client is disconnected at once.
    pub hard_bytes: u64,
    /// Past this many bytes for `soft_seconds` the client is disconnected.
    pub soft_bytes: u64,
    pub soft_seconds: u64,
}

/// The server's configuration, one field per directive. Field documentation gives the
/// directive's name and, where it differs from Redis 7.0's, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `port`: 6379.
    pub port: u16,
    /// `bind`: `127.0.0.1 -::1`, the line in Redis's shipped redis.conf (Redis started
    /// without a file binds `* -::*`): strata listens on loopback unless told otherwise.
    pub bind: Vec<BindAddr>,
    /// `protected-mode`: yes.
    pub protected_mode: bool,
    /// `tcp-backlog`: 511.
    pub tcp_backlog: u32,
    /// `tcp-keepalive`, in seconds: 300.
    pub tcp_keepalive: u32,
    /// `timeout`, idle seconds before a client is closed: 0 (never).
    pub timeout: u32,
    /// `dir`: `.`, the directory strata was started in. Redis shows the absolute working
    /// directory; strata shows the path as configured.
    pub dir: PathBuf,
    /// `databases`: 16.
    pub databases: usize,
    /// `maxclients`: 10000.
    pub maxclients: u32,
    /// `hz`: 10, always within 1..=500.
    pub hz: u32,
    /// `dynamic-hz`: yes.
    pub dynamic_hz: bool,
    /// `lazyfree-lazy-user-del`, `-server-del`, `-expire`, `-user-flush`: all no.
    pub lazyfree_lazy: strata_commands::server::LazyFree,
    /// `jemalloc-bg-thread`: yes. The allocator returns freed memory to the
    /// operating system from its own threads, so the RSS of an idle server falls.
    pub jemalloc_bg_thread: bool,
    /// `loglevel`: notice.
    pub loglevel: LogLevel,
    /// `logfile`: none, meaning standard output.
    pub logfile: Option<PathBuf>,
    /// `daemonize`: always no; strata does not fork into the background.
    pub daemonize: bool,
    /// `pidfile`: none.
    pub pidfile: Option<PathBuf>,
    /// `requirepass`: none.
    pub requirepass: Option<String>,
    /// `appendonly`: [`DEFAULT_APPENDONLY`].
    pub appendonly: bool,
    /// `appendfilename`: `appendonly.aof`, a base name inside `dir`.
    pub appendfilename: String,
    /// `appendfsync`: everysec.
    pub appendfsync: Appendfsync,
    /// `auto-aof-rewrite-percentage`: 100.
    pub auto_aof_rewrite_percentage: u32,
    /// `auto-aof-rewrite-min-size`, in bytes: 64 MiB.
    pub auto_aof_rewrite_min_size: u64,
    /// `save`: none. Redis snapshots after 3600 s with 1 change, 300 s with 100 and
    /// 60 s with 10000; strata's log makes those snapshots redundant when
    /// `appendonly` is on, and `appendonly no` is meant as a pure in-memory server.
    pub save: Vec<SavePoint>,
    /// `dbfilename`: `dump.rdb`, a base name inside `dir`.
    pub dbfilename: String,
    /// `maxmemory`, in bytes: 0 (no limit).
    pub maxmemory: u64,
    /// `maxmemory-policy`: noeviction.
    pub maxmemory_policy: MaxmemoryPolicy,
    /// `maxmemory-samples`: 5.
    pub maxmemory_samples: u32,
    /// `lfu-log-factor`: 10.
    pub lfu_log_factor: u32,
    /// `lfu-decay-time`, in minutes: 1.
    pub lfu_decay_time: u32,
    /// `proto-max-bulk-len`, in bytes: 512 MiB.
    pub proto_max_bulk_len: u64,
    /// `client-query-buffer-limit`, in bytes: 1 GiB.
    pub client_query_buffer_limit: u64,
    /// `client-output-buffer-limit`, indexed by [`ClientClass`]: normal unlimited,
    /// replica 256 MiB hard and 64 MiB for 60 s soft, pubsub 32 MiB hard and 8 MiB for
    /// 60 s soft.
    pub client_output_buffer_limit: [ClientOutputBufferLimit; 3],
    /// `notify-keyspace-events`: none (the classes as `strata_commands::notify` flags).
    pub notify_keyspace_events: u32,
    /// `tracking-table-max-keys`: 1,000,000.
    pub tracking_table_max_keys: u64,
    /// `busy-reply-threshold` (alias `lua-time-limit`), in milliseconds: 5000. Past it
    /// a running script makes other clients get BUSY; 0 never does.
    pub busy_reply_threshold: u64,
    /// `lua-memory-limit`, in bytes: 256 MiB per Lua interpreter, 0 = no limit
    /// (strata-specific).
    pub lua_memory_limit: u64,
    /// `pubsub-max-subscriptions-per-client`: 0, no limit (strata-specific).
    pub pubsub_max_subscriptions_per_client: u32,
    /// `enable-debug-command`: no.
    pub enable_debug_command: ProtectedAction,
    /// `io-threads`: the number of threads serving connections and running commands,
    /// by default the number of CPUs (at most 128) but 1 on a machine of one or two
    /// (see [`default_io_threads`]), and 1 when the server starts with `appendonly
    /// yes` and `appendfsync always` (see [`Config::resolve_io_threads`]). Redis's
    /// default is 1 and its threads only move socket bytes.
    pub io_threads: usize,
    /// Whether `io_threads` is the default, not given by a directive.
    pub io_threads_auto: bool,
    /// `io-spin-us` (strata only): how long, in microseconds, the I/O thread goes on
    /// polling its connections once it has run everything, before it sleeps; 30.
    /// Only with one I/O thread, and not while other threads keep taking its CPU
    /// (see `turn`); 0 sleeps at once.
    pub io_spin_us: u32,
    /// `sched-policy` (strata only): `batch` — the threads' wake-ups do not
    /// preempt the thread running on their CPU, so fewer context switches where the
    /// server shares its CPUs (see [`SchedPolicy`]). Applied at start-up, on Linux.
    pub sched_policy: SchedPolicy,
    /// `shards` (strata only): the number of keyspace shards, a power of two; 256.
    pub shards: usize,
    /// `hash-max-listpack-entries`: a hash with more fields leaves the compact encoding.
    pub hash_max_listpack_entries: u64,
    /// `hash-max-listpack-value`: ... or with a longer field or value.
    pub hash_max_listpack_value: u64,
    /// `set-max-intset-entries`: an all-integer set with more members leaves the intset.
    pub set_max_intset_entries: u64,
    /// `zset-max-listpack-entries`: a sorted set with more members leaves the listpack.
    pub zset_max_listpack_entries: u64,
    /// `zset-max-listpack-value`: ... or with a longer member.
    pub zset_max_listpack_value: u64,
    /// `list-max-listpack-size`: a list node's limit, in entries (> 0) or in bytes
    /// (-1 .. -5: 4, 8, 16, 32, 64 KiB).
    pub list_max_listpack_size: i64,
    /// `list-compress-depth`: only 0 (no compression of list nodes) is supported.
    pub list_compress_depth: i64,
    /// ACL directives, `rename-command` and `user` statements.
    pub security: security::Security,
    /// TLS directives.
    pub tls: security::Tls,
}

impl Config {
    /// The `lazyfree-lazy-*` switches.
    pub fn lazyfree(&self) -> strata_commands::server::LazyFree {
        self.lazyfree_lazy
    }

    /// The thresholds at which collections change encoding.
    pub fn encoding_limits(&self) -> strata_keyspace::EncodingLimits {
        strata_keyspace::EncodingLimits {
            hash_max_listpack_entries: self.hash_max_listpack_entries,
            hash_max_listpack_value: self.hash_max_listpack_value,
            set_max_intset_entries: self.set_max_intset_entries,
            zset_max_listpack_entries: self.zset_max_listpack_entries,
            zset_max_listpack_value: self.zset_max_listpack_value,
            list_max_listpack_size: self.list_max_listpack_size,
        }
    }
}

/// The default `io-threads` on a machine of `cpus` CPUs: one each, at most 128, but
/// one on a machine of two. There the clients (a benchmark on the same host), the
/// syncer and compaction need the other CPU, and one thread holds every
/// connection's replies to the end of its turn (`crate::turn`), which it can only
/// do alone: measured on two CPUs beside redis-benchmark (docs/BENCHMARKS.md,
/// "Replies at the end of the turn"), one thread served 50 clients with `-P 16`
/// at 1.19–1.81 of Redis against two threads' 1.09–1.51, and unpipelined clients
/// as well as two did.
pub fn default_io_threads(cpus: usize) -> usize {
    if cpus <= 2 { 1 } else { cpus.min(128) }
}

impl Default for Config {
    fn default() -> Config {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Config {
            port: 6379,
            bind: vec![
                BindAddr {
                    host: "127.0.0.1".to_owned(),
                    optional: false,
                },
                BindAddr {
                    host: "::1".to_owned(),
                    optional: true,
                },
            ],
            protected_mode: true,
            tcp_backlog: 511,
            tcp_keepalive: 300,
            timeout: 0,
            dir: PathBuf::from("./data"),
            databases: 16,
            maxclients: 10_000,
            hz: 10,
            dynamic_hz: true,
            lazyfree_lazy: Default::default(),
            jemalloc_bg_thread: true,
            loglevel: LogLevel::Notice,
            logfile: None,
            daemonize: false,
            pidfile: None,
            requirepass: None,
            appendonly: DEFAULT_APPENDONLY,
            appendfilename: "appendonly.aof".to_owned(),
            appendfsync: Appendfsync::Everysec,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 << 20,
            save: Vec::new(),
            dbfilename: "dump.rdb".to_owned(),
            maxmemory: 0,
            maxmemory_policy: MaxmemoryPolicy::Noeviction,
            maxmemory_samples: 5,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            proto_max_bulk_len: 512 << 20,
            client_query_buffer_limit: 1 << 30,
            client_output_buffer_limit: [
                ClientOutputBufferLimit::default(),
                ClientOutputBufferLimit {
                    hard_bytes: 256 << 20,
                    soft_bytes: 64 << 20,
                    soft_seconds: 60,
                },
                ClientOutputBufferLimit {
                    hard_bytes: 32 << 20,
                    soft_bytes: 8 << 20,
                    soft_seconds: 60,
                },
            ],
            notify_keyspace_events: 0,
            tracking_table_max_keys: 1_000_000,
            busy_reply_threshold: 5000,
            lua_memory_limit: 256 << 20,
            pubsub_max_subscriptions_per_client: 0,
            enable_debug_command: ProtectedAction::No,
            io_threads: default_io_threads(cpus),
            io_threads_auto: true,
            io_spin_us: 30,
            sched_policy: SchedPolicy::Batch,
            shards: 256,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            security: security::Security::default(),
            tls: security::Tls::default(),
        }
    }
}

/// The text of CONFIG HELP, one reply line per element, as Redis 7.0 gives it.
pub const CONFIG_HELP: &[&str] = &[
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Prints this help.",
];

/// The directives a successful CONFIG SET changed, so the server can react (new
/// loglevel, maxclients, timeout, hz, requirepass, listeners, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changed {
    names: Vec<&'static str>,
}

impl Changed {
    /// Whether the directive called `name` (its canonical name) changed value.
    pub fn contains(&self, name: &str) -> bool {
        debug_assert!(
            directives::all().iter().any(|d| d.name == name),
            "no directive is called {name}"
        );
        self.names.contains(&name)
    }

    /// The canonical names of the changed directives, in the order they were given.
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Why a configuration could not be loaded. The Display text is the message to print
/// before exiting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration file could not be read.
    #[error("strata: can't open config file {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line of the configuration file is wrong.
    #[error("strata: bad configuration in {}, line {line} ('{text}'): {reason}", path.display())]
    File {
        path: PathBuf,
        line: usize,
        text: String,
        reason: String,
    },
    /// A command-line directive is wrong.
    #[error("strata: bad command-line directive '{text}': {reason}")]
    CommandLine { text: String, reason: String },
    /// Directives that are each valid but cannot go together.
    #[error("strata: {0}")]
    Conflict(String),
}

/// Whether a CONFIG GET pattern uses glob syntax; Redis looks other patterns up by name.
fn is_glob(pattern: &[u8]) -> bool {
    pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?'))
}

/// Why `maxmemory-policy tiered` cannot go with `appendonly no`.
pub const TIERED_NEEDS_LOG: &str =
    "maxmemory-policy tiered keeps values in the log on disk: it needs appendonly yes";

impl Config {
    /// Why these settings cannot go together, if they cannot.
    pub fn conflict(&self) -> Option<&'static str> {
        (self.maxmemory_policy == MaxmemoryPolicy::Tiered && !self.appendonly)
            .then_some(TIERED_NEEDS_LOG)
    }

    /// Settles a default `io-threads` once the configuration is read: one thread when
    /// the server starts with `appendonly yes` and `appendfsync always`. There the
    /// fsync, not the CPU, bounds throughput, and one thread serves every ready
    /// connection before it sleeps, so one fsync covers them all, as in Redis's
    /// event loop; with two, each woken connection moves to whichever thread is
    /// free, and the idle worker is woken over and over to steal. Measured on two
    /// CPUs beside the client (docs/BENCHMARKS.md, "One I/O thread under
    /// `appendfsync always`"), SET, INCR and LPUSH: one client 0.77–0.85 → 0.98–1.02
    /// of Redis, 50 clients 0.77–0.88 → 0.91–1.03, `-P 16` 1.09–1.27 → 1.13–1.31. A
    /// given `io-threads` is kept, and CONFIG SET appendfsync later does not change
    /// the count.
    pub fn resolve_io_threads(&mut self) {
        if self.io_threads_auto && self.appendonly && self.appendfsync == Appendfsync::Always {
            self.io_threads = 1;
        }
    }

    /// The value of the directive called `name` (or its alias, ignoring case) as CONFIG
    /// GET renders it.
    pub fn get(&self, name: &str) -> Option<String> {
        directives::render(self, name)
    }

    /// The output-buffer limits of a client class.
    pub fn output_buffer_limit(&self, class: ClientClass) -> ClientOutputBufferLimit {
        self.client_output_buffer_limit[class as usize]
    }

    /// CONFIG GET: the (name, value) pairs of every directive matching any of
    /// `patterns`, each directive once.
    ///
    /// As in Redis 7.0, a pattern without `*`, `?` or `[` is looked up by name ignoring
    /// case and answered under the name as the client wrote it; a glob pattern is
    /// matched ignoring case against every name and alias. Duplicates are dropped by
    /// name, ignoring case. Redis's order is its dictionary's; strata's is the order of
    /// the patterns, then of the registry.
    pub fn config_get(&self, patterns: &[&[u8]]) -> Vec<(String, String)> {
        let mut seen: HashSet<String> = HashSet::new();
        let mut out = Vec::new();
        for &pattern in patterns {
            if !is_glob(pattern) {
                if let Some(directive) = directives::lookup(pattern) {
                    let shown = String::from_utf8_lossy(pattern).into_owned();
                    if seen.insert(shown.to_ascii_lowercase()) {
                        out.push((shown, directive.render(self)));
                    }
                }
                continue;
            }
            for directive in directives::all() {
                for name in directive.names() {
                    if glob::matches_nocase(pattern, name.as_bytes())
                        && seen.insert(name.to_owned())
                    {
                        out.push((name.to_owned(), directive.render(self)));
                    }
                }
            }
        }
        out
    }

    /// CONFIG SET of several (name, value) pairs, all or nothing. The error is the
    /// complete error reply in Redis 7.0's words, `ERR` included.
    ///
    /// Checks run in Redis's order: an unknown name anywhere is reported first; then,
    /// pair by pair, an immutable or protected directive or a repeated one; then each
    /// value, applied to a copy that replaces `self` only if all succeed. The caller
    /// has already refused an odd number of arguments ("ERR syntax error") and too few
    /// ("ERR wrong number of arguments for 'config|set' command").
    ///
    /// Applying some changes can still fail in the server (binding new addresses); the
    /// server then restores its copy of the previous configuration and replies with
    /// [`Config::set_failed`]`("bind", "Failed to bind to specified addresses.")`.
    pub fn config_set(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<Changed, String> {
        let mut targets: Vec<&'static Directive> = Vec::with_capacity(pairs.len());
        for &(name, _) in pairs {
            match directives::lookup(name) {
                Some(directive) => targets.push(directive),
                None => {
                    return Err(format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                        String::from_utf8_lossy(name)
                    ));
                }
            }
        }
        for (i, (&(name, _), &directive)) in pairs.iter().zip(&targets).enumerate() {
            let name = String::from_utf8_lossy(name);
            match directive.mutability {
                Mutability::Immutable => {
                    return Err(Config::set_failed(&name, "can't set immutable config"));
                }
                Mutability::Protected => {
                    return Err(Config::set_failed(&name, "can't set protected config"));
                }
                Mutability::Mutable => {}
            }
            if targets[..i]
                .iter()
                .any(|&earlier| std::ptr::eq(earlier, directive))
            {
                return Err(Config::set_failed(&name, "duplicate parameter"));
            }
        }
        let mut next = self.clone();
        for (&(name, value), directive) in pairs.iter().zip(&targets) {
            directive
                .apply(&mut next, &[value], &mut Phase::Runtime)
                .map_err(|reason| Config::set_failed(&String::from_utf8_lossy(name), &reason))?;
        }
        if let Some(reason) = next.conflict() {
            let name = pairs
                .iter()
                .map(|(n, _)| String::from_utf8_lossy(n))
                .find(|n| {
                    n.eq_ignore_ascii_case("appendonly")
                        || n.eq_ignore_ascii_case("maxmemory-policy")
                })
                .unwrap_or_default();
            return Err(Config::set_failed(&name, reason));
        }
        if self.appendonly && !next.appendonly && strata_keyspace::value::cold_keys() > 0 {
            return Err(Config::set_failed(
                "appendonly",
                "values moved out of memory by maxmemory-policy tiered are in the log: read or delete them first",
            ));
        }
        let names = targets
            .iter()
            .filter(|d| d.render(self) != d.render(&next))
            .map(|d| d.name)
            .collect();
        *self = next;
        Ok(Changed { names })
    }

    /// Redis's reply when CONFIG SET of `name` fails for `reason`.
    pub fn set_failed(name: &str, reason: &str) -> String {
        format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(config: &Config, patterns: &[&str]) -> Vec<(String, String)> {
        let patterns: Vec<&[u8]> = patterns.iter().map(|p| p.as_bytes()).collect();
        config.config_get(&patterns)
    }

    fn names(pairs: &[(String, String)]) -> Vec<&str> {
        pairs.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn set(config: &mut Config, pairs: &[(&str, &str)]) -> Result<Changed, String> {
        let pairs: Vec<(&[u8], &[u8])> = pairs
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        config.config_set(&pairs)
    }

    #[test]
    fn defaults_render_as_redis() {
        let config = Config::default();
        let expected = [
            ("port", "6379"),
            ("bind", "127.0.0.1 -::1"),
            ("protected-mode", "yes"),
            ("tcp-backlog", "511"),
            ("tcp-keepalive", "300"),
            ("timeout", "0"),
            ("dir", "./data"),
            ("databases", "16"),
            ("maxclients", "10000"),
            ("hz", "10"),
            ("dynamic-hz", "yes"),
            ("loglevel", "notice"),
            ("logfile", ""),
            ("daemonize", "no"),
            ("pidfile", ""),
            ("requirepass", ""),
            ("appendonly", "yes"),
            ("appendfilename", "appendonly.aof"),
            ("appendfsync", "everysec"),
            ("auto-aof-rewrite-percentage", "100"),
            ("auto-aof-rewrite-min-size", "67108864"),
            ("save", ""),
            ("dbfilename", "dump.rdb"),
            ("maxmemory", "0"),
            ("maxmemory-policy", "noeviction"),
            ("maxmemory-samples", "5"),
            ("lfu-log-factor", "10"),
            ("lfu-decay-time", "1"),
            ("hash-max-listpack-entries", "512"),
            ("hash-max-listpack-value", "64"),
            ("set-max-intset-entries", "512"),
            ("zset-max-listpack-entries", "128"),
            ("zset-max-listpack-value", "64"),
            ("list-max-listpack-size", "-2"),
            ("list-compress-depth", "0"),
            ("proto-max-bulk-len", "536870912"),
            ("client-query-buffer-limit", "1073741824"),
            (
                "client-output-buffer-limit",
                "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
            ),
            ("enable-debug-command", "no"),
            ("io-spin-us", "30"),
            ("shards", "256"),
        ];
        for (name, value) in expected {
            assert_eq!(config.get(name).as_deref(), Some(value), "{name}");
        }
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(config.io_threads, default_io_threads(cpus));
        assert_eq!([1, 2, 3, 8, 500].map(default_io_threads), [1, 1, 3, 8, 128]);
        // CONFIG GET * lists aliases too, as Redis 7.0 does.
        let names: usize = directives::all().iter().map(|d| d.names().count()).sum();
        assert_eq!(get(&config, &["*"]).len(), names);
    }

    #[test]
    fn config_get_patterns() {
        let config = Config::default();
        assert_eq!(
            names(&get(&config, &["*max*mem*"])),
            ["maxmemory", "maxmemory-policy", "maxmemory-samples"]
        );
        // A plain name is answered under the name as written.
        assert_eq!(
            get(&config, &["MAXMEMORY"]),
            [("MAXMEMORY".to_owned(), "0".to_owned())]
        );
        // Glob matching ignores case too.
        assert_eq!(
            names(&get(&config, &["MAXMEM*"])),
            ["maxmemory", "maxmemory-policy", "maxmemory-samples"]
        );
        assert_eq!(names(&get(&config, &["[pb]ort"])), ["port"]);
        assert_eq!(names(&get(&config, &["p?rt"])), ["port"]);
        assert!(get(&config, &["nosuch"]).is_empty());
        assert!(get(&config, &["nosuch*"]).is_empty());
        assert!(get(&config, &[""]).is_empty());
        // Several patterns, each directive once.
        assert_eq!(
            names(&get(
                &config,
                &["maxmemory", "maxmemory", "maxmemory*", "MAXMEMORY"]
            )),
            ["maxmemory", "maxmemory-policy", "maxmemory-samples"]
        );
        assert_eq!(
            names(&get(&config, &["port", "maxmemory", "hz"])),
            ["port", "maxmemory", "hz"]
        );
        assert_eq!(
            names(&get(&config, &["maxmemory-p*", "*-policy"])),
            ["maxmemory-policy", "sched-policy"]
        );
    }

    #[test]
    fn config_set_applies_and_reports_changes() {
        let mut config = Config::default();
        let changed = set(
            &mut config,
            &[
                ("maxmemory", "1gb"),
                ("LogLevel", "debug"),
                ("timeout", "0"),
            ],
        )
        .expect("valid");
        assert_eq!(config.maxmemory, 1 << 30);
        assert_eq!(config.loglevel, LogLevel::Debug);
        // timeout was set to the value it had: not a change.
        assert_eq!(changed.names(), ["maxmemory", "loglevel"]);
        assert!(changed.contains("loglevel"));
        assert!(!changed.contains("timeout"));
        assert!(
            set(&mut config, &[("maxmemory", "1073741824")])
                .expect("valid")
                .is_empty()
        );
        let changed = set(
            &mut config,
            &[
                ("requirepass", "s3cret"),
                ("save", "60 1"),
                ("bind", "0.0.0.0"),
            ],
        )
        .expect("valid");
        assert_eq!(changed.names(), ["requirepass", "save", "bind"]);
        assert_eq!(
            config.bind,
            [BindAddr {
                host: "0.0.0.0".into(),
                optional: false
            }]
        );
    }

    /// Error texts pinned from Redis 7.0.15.
    #[test]
    fn config_set_errors_match_redis() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("foo", "bar")],
                "ERR Unknown option or number of arguments for CONFIG SET - 'foo'",
            ),
            (
                &[("maxmemory", "1"), ("foo", "bar")],
                "ERR Unknown option or number of arguments for CONFIG SET - 'foo'",
            ),
            // An unknown name wins over every other error, wherever it is.
            (
                &[("maxmemory", "abc"), ("foo", "bar")],
                "ERR Unknown option or number of arguments for CONFIG SET - 'foo'",
            ),
            (
                &[("databases", "5"), ("foo", "bar")],
                "ERR Unknown option or number of arguments for CONFIG SET - 'foo'",
            ),
            (
                &[("maxmemory", "abc")],
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
            ),
            (
                &[("port", "abc")],
                "ERR CONFIG SET failed (possibly related to argument 'port') - argument couldn't be parsed into an integer",
            ),
            (
                &[("port", "70000")],
                "ERR CONFIG SET failed (possibly related to argument 'port') - argument must be between 0 and 65535 inclusive",
            ),
            (
                &[("databases", "10")],
                "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config",
            ),
            (
                &[("io-threads", "2")],
                "ERR CONFIG SET failed (possibly related to argument 'io-threads') - can't set immutable config",
            ),
            (
                &[("dir", "/tmp")],
                "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config",
            ),
            (
                &[("dbfilename", "x.rdb")],
                "ERR CONFIG SET failed (possibly related to argument 'dbfilename') - can't set protected config",
            ),
            // Names are checked before values.
            (
                &[("maxmemory", "abc"), ("databases", "5")],
                "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config",
            ),
            (
                &[("maxmemory", "10"), ("maxmemory", "20")],
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter",
            ),
            (
                &[("maxmemory", "10"), ("MAXMEMORY", "20")],
                "ERR CONFIG SET failed (possibly related to argument 'MAXMEMORY') - duplicate parameter",
            ),
            // Values are checked in order.
            (
                &[("maxmemory", "abc"), ("port", "abc")],
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
            ),
            (
                &[("port", "abc"), ("maxmemory", "abc")],
                "ERR CONFIG SET failed (possibly related to argument 'port') - argument couldn't be parsed into an integer",
            ),
            (
                &[("protected-mode", "maybe")],
                "ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'",
            ),
            (
                &[("appendfsync", "sometimes")],
                "ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: everysec, always, no",
            ),
            (
                &[("maxclients", "0")],
                "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive",
            ),
            (
                &[("proto-max-bulk-len", "1000")],
                "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive",
            ),
            (
                &[("save", "3600")],
                "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters",
            ),
            (
                &[("bind", "127.0.0.1  -::1")],
                "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.",
            ),
            (
                &[("client-output-buffer-limit", "master 0 0 0")],
                "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - Invalid client class specified in buffer limit configuration.",
            ),
        ];
        for &(pairs, want) in cases {
            let mut config = Config::default();
            assert_eq!(set(&mut config, pairs), Err(want.to_owned()), "{pairs:?}");
            assert_eq!(
                config,
                Config::default(),
                "{pairs:?} changed the configuration"
            );
        }
    }

    #[test]
    fn config_set_is_all_or_nothing() {
        let mut config = Config::default();
        let err = set(
            &mut config,
            &[("maxmemory", "1mb"), ("appendonly", "yes"), ("hz", "x")],
        );
        assert!(err.is_err());
        assert_eq!(config, Config::default());
        set(
            &mut config,
            &[("maxmemory", "1mb"), ("appendonly", "yes"), ("hz", "20")],
        )
        .expect("valid");
        assert_eq!(
            (config.maxmemory, config.appendonly, config.hz),
            (1 << 20, true, 20)
        );
    }

    #[test]
    fn set_values_read_back_through_get() {
        let mut config = Config::default();
        set(
            &mut config,
            &[
                ("save", "900 1 300 10"),
                ("client-output-buffer-limit", "pubsub 1mb 2mb 3"),
            ],
        )
        .expect("valid");
        assert_eq!(
            get(&config, &["save", "client-output-buffer-limit"]),
            [
                ("save".to_owned(), "900 1 300 10".to_owned()),
                (
                    "client-output-buffer-limit".to_owned(),
                    "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 2097152 3".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn loglevel_order() {
        assert!(LogLevel::Notice.logs(LogLevel::Warning));
        assert!(LogLevel::Notice.logs(LogLevel::Notice));
        assert!(!LogLevel::Notice.logs(LogLevel::Verbose));
        assert!(LogLevel::Debug.logs(LogLevel::Debug));
        assert!(!LogLevel::Nothing.logs(LogLevel::Warning));
    }

    #[test]
    fn help_text() {
        assert_eq!(CONFIG_HELP.len(), 11);
        assert!(CONFIG_HELP.iter().all(|line| !line.is_empty()));
    }

    /// Differential tests against a real redis-server, when one is installed.
    mod against_redis {
        use super::*;
        use std::io::{BufRead, BufReader, Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::process::{Child, Command, Stdio};
        use std::time::{Duration, Instant};

        #[derive(Debug, PartialEq)]
        enum Reply {
            Status(String),
            Error(String),
            Int(i64),
            Bulk(Option<Vec<u8>>),
            Array(Vec<Reply>),
        }

        /// A redis-server child process and one connection to it; killed when dropped.
        struct Redis {
            child: Child,
            conn: BufReader<TcpStream>,
            /// Its working directory, so that nothing it might write lands elsewhere.
            dir: std::path::PathBuf,
        }

        impl Drop for Redis {
            fn drop(&mut self) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let _ = std::fs::remove_dir_all(&self.dir);
            }
        }

        fn free_port() -> u16 {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
            listener.local_addr().expect("local address").port()
        }

        /// Whether redis-server can be run; when it cannot, the test passes with a
        /// notice unless STRATA_REQUIRE_REDIS=1.
        fn redis_available() -> bool {
            let found = Command::new("redis-server")
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !found {
                if std::env::var("STRATA_REQUIRE_REDIS").as_deref() == Ok("1") {
                    panic!("redis-server is not on PATH and STRATA_REQUIRE_REDIS=1");
                }
                eprintln!(
                    "notice: redis-server is not on PATH; skipping the comparison with Redis"
                );
            }
            found
        }

        impl Redis {
            /// Starts redis-server on a free loopback port with `args` after `--port`.
            fn start(args: &[&str]) -> Redis {
                Redis::start_with_file(None, args)
            }

            /// Starts redis-server with a configuration file, then `--port` and `args`.
            fn start_with_file(file: Option<&str>, args: &[&str]) -> Redis {
                let port = free_port();
                let dir = std::env::temp_dir()
                    .join(format!("strata-config-redis-{}-{port}", std::process::id()));
                std::fs::create_dir_all(&dir).expect("create a directory for redis-server");
                let mut child = Command::new("redis-server")
                    .args(file)
                    .args(["--port", &port.to_string()])
                    .args(args)
                    .current_dir(&dir)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("start redis-server");
                let deadline = Instant::now() + Duration::from_secs(10);
                let stream = loop {
                    match TcpStream::connect(("127.0.0.1", port)) {
                        Ok(stream) => break stream,
                        Err(e) if Instant::now() > deadline => {
                            panic!("redis-server did not start: {e}")
                        }
                        Err(_) => {}
                    }
                    // A configuration Redis refuses makes it exit with the reason.
                    if let Ok(Some(status)) = child.try_wait() {
                        let mut stderr = String::new();
                        if let Some(mut pipe) = child.stderr.take() {
                            let _ = pipe.read_to_string(&mut stderr);
                        }
                        panic!("redis-server {args:?} exited ({status}): {stderr}");
                    }
                    std::thread::sleep(Duration::from_millis(20));
                };
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("set timeout");
                Redis {
                    child,
                    conn: BufReader::new(stream),
                    dir,
                }
            }

            fn command(&mut self, args: &[&[u8]]) -> Reply {
                let mut out = format!("*{}\r\n", args.len()).into_bytes();
                for arg in args {
                    out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                    out.extend_from_slice(arg);
                    out.extend_from_slice(b"\r\n");
                }
                self.conn.get_mut().write_all(&out).expect("send command");
                self.read_reply()
            }

            fn read_reply(&mut self) -> Reply {
                let mut line = String::new();
                self.conn.read_line(&mut line).expect("read reply");
                let line = line.trim_end_matches("\r\n");
                let (kind, rest) = line.split_at(1);
                let number = || rest.parse::<i64>().expect("length");
                match kind {
                    "+" => Reply::Status(rest.to_owned()),
                    "-" => Reply::Error(rest.to_owned()),
                    ":" => Reply::Int(number()),
                    "$" if number() < 0 => Reply::Bulk(None),
                    "$" => {
                        let len = usize::try_from(number()).expect("length");
                        let mut buf = vec![0; len + 2];
                        self.conn.read_exact(&mut buf).expect("read bulk");
                        buf.truncate(len);
                        Reply::Bulk(Some(buf))
                    }
                    "*" => Reply::Array((0..number()).map(|_| self.read_reply()).collect()),
                    _ => panic!("unexpected reply line {line:?}"),
                }
            }

            fn config_get(&mut self, name: &str) -> String {
                match self.command(&[b"CONFIG", b"GET", name.as_bytes()]) {
                    Reply::Array(items) => match items.as_slice() {
                        [_, Reply::Bulk(Some(value))] => {
                            String::from_utf8_lossy(value).into_owned()
                        }
                        other => panic!("CONFIG GET {name}: {other:?}"),
                    },
                    other => panic!("CONFIG GET {name}: {other:?}"),
                }
            }

            /// CONFIG SET as our API reports it: Ok, or the error reply with "ERR".
            fn config_set(&mut self, pairs: &[(&str, &str)]) -> Result<(), String> {
                let mut args: Vec<&[u8]> = vec![b"CONFIG", b"SET"];
                for (name, value) in pairs {
                    args.push(name.as_bytes());
                    args.push(value.as_bytes());
                }
                match self.command(&args) {
                    Reply::Status(s) if s == "OK" => Ok(()),
                    Reply::Error(e) => Err(e),
                    other => panic!("CONFIG SET: {other:?}"),
                }
            }
        }

        /// Directives whose value in strata differs from Redis's on purpose: the port
        /// (a free one is used), dir (Redis shows its absolute working directory),
        /// io-threads (strata's default is the CPU count), and io-spin-us,
        /// sched-policy, shards, pubsub-max-subscriptions-per-client and
        /// lua-memory-limit (strata only).
        const DIFFERENT: &[&str] = &[
            "port",
            "dir",
            "io-threads",
            "io-spin-us",
            "sched-policy",
            "shards",
            "pubsub-max-subscriptions-per-client",
            "lua-memory-limit",
        ];

        fn comparable() -> impl Iterator<Item = &'static Directive> {
            directives::all()
                .iter()
                .copied()
                .filter(|d| !DIFFERENT.contains(&d.name))
        }

        #[test]
        fn defaults_match_redis() {
            if !redis_available() {
                return;
            }
            let mut redis = Redis::start(&["--save", "", "--appendonly", "no"]);
            // Persistence is on by default in strata, off in the Redis under test.
            let mut ours = Config {
                appendonly: false,
                ..Config::default()
            };
            // Started with --save '' and without a file, Redis binds "* -::*"; strata's
            // default bind and save are checked against Redis's own defaults in
            // `defaults_render_as_redis`.
            assert_eq!(redis.config_get("bind"), "* -::*");
            assert_eq!(redis.config_get("save"), "");
            ours.save.clear();
            ours.bind = vec![
                BindAddr::parse("*").expect("valid"),
                BindAddr::parse("-::*").expect("valid"),
            ];
            for d in comparable() {
                assert_eq!(d.render(&ours), redis.config_get(d.name), "{}", d.name);
            }
        }

        /// The same command line gives the same configuration.
        #[test]
        fn command_line_matches_redis() {
            if !redis_available() {
                return;
            }
            let args = [
                "--save",
                "10",
                "1",
                "20",
                "2",
                "--SAVE",
                "30 3",
                "--hz",
                "1000",
                "--maxmemory",
                "1kb",
                "--client-output-buffer-limit",
                "pubsub 1mb 2mb 3",
                "--dbfilename",
                "--x.rdb",
                "--bind",
                "127.0.0.1",
                "-::1",
                "--appendonly",
                "no",
                "--maxmemory-policy",
                "ALLKEYS-LFU",
                "--requirepass",
                "a b",
            ];
            let mut redis = Redis::start(&args);
            assert_eq!(
                redis.command(&[b"AUTH", b"a b"]),
                Reply::Status("OK".to_owned())
            );
            let argv = std::iter::once("strata-server")
                .chain(args)
                .map(String::from);
            let Ok(Invocation::Serve { config, .. }) = from_args(argv) else {
                panic!("the command line is valid");
            };
            for d in comparable() {
                assert_eq!(d.render(&config), redis.config_get(d.name), "{}", d.name);
            }
        }

        /// The same file and command line give the same configuration.
        #[test]
        fn file_matches_redis() {
            if !redis_available() {
                return;
            }
            let path = std::env::temp_dir()
                .join(format!("strata-config-file-{}.conf", std::process::id()));
            let text = "# a comment\n\
                        save 900 1\n\
                        \n   \t\n\
                        \x20 SAVE \"300 10\"  \r\n\
                        maxmemory 2mb\n\
                        requirepass 'it\\'s'\n\
                        appendfsync \"ALWAYS\"\n\
                        client-output-buffer-limit normal 1kb 2kb 3\n\
                        bind \"127.0.0.1 -::1\"\n\
                        dbfilename \"d\\x41ta\\t.rdb\"\n\
                        loglevel Warning\n\
                        hz 0\n\
                        protected-mode No\n";
            std::fs::write(&path, text).expect("write the configuration file");
            let file = path.to_string_lossy().into_owned();
            let args = [
                "--save",
                "60",
                "100",
                "--maxmemory",
                "3mb",
                "--appendonly",
                "no",
            ];
            let mut redis = Redis::start_with_file(Some(&file), &args);
            assert_eq!(
                redis.command(&[b"AUTH", b"it's"]),
                Reply::Status("OK".to_owned())
            );
            let argv = ["strata-server", &file]
                .into_iter()
                .chain(args)
                .map(String::from);
            let result = from_args(argv);
            let _ = std::fs::remove_file(&path);
            let Ok(Invocation::Serve { config, .. }) = result else {
                panic!("the file is valid: {result:?}");
            };
            assert_eq!(config.get("save").as_deref(), Some("900 1 300 10 60 100"));
            assert_eq!(config.dbfilename, "dAta\t.rdb");
            for d in comparable() {
                assert_eq!(d.render(&config), redis.config_get(d.name), "{}", d.name);
            }
        }

        /// The same sequence of CONFIG SETs gives the same replies and values.
        #[test]
        fn config_set_matches_redis() {
            if !redis_available() {
                return;
            }
            let mut redis = Redis::start(&["--save", "", "--appendonly", "no"]);
            // Persistence is on by default in strata, off in the Redis under test.
            let mut ours = Config {
                appendonly: false,
                ..Config::default()
            };
            ours.save.clear();
            ours.bind = vec![
                BindAddr::parse("*").expect("valid"),
                BindAddr::parse("-::*").expect("valid"),
            ];
            let cases: &[&[(&str, &str)]] = &[
                &[("maxmemory", "10GB")],
                &[("maxmemory", "1k")],
                &[("maxmemory", "1KB")],
                &[("maxmemory", "05")],
                &[("maxmemory", "")],
                &[("maxmemory", "kb")],
                &[("maxmemory", "18446744073709551615")],
                &[("maxmemory", "18446744073709551616")],
                &[("maxmemory", "abc")],
                &[("maxmemory", "-1")],
                &[("maxmemory", " 5")],
                &[("maxmemory", "+5")],
                &[("maxmemory", "1.5gb")],
                &[("maxmemory", "0")],
                &[("port", "abc")],
                &[("port", "05")],
                &[("port", "+5")],
                &[("port", "-0")],
                &[("port", "")],
                &[("port", "70000")],
                &[("port", "-1")],
                &[("databases", "10")],
                &[("daemonize", "yes")],
                &[("daemonize", "no")],
                &[("io-threads", "1")],
                &[("tcp-backlog", "511")],
                &[("logfile", "")],
                &[("pidfile", "")],
                &[("appendfilename", "appendonly.aof")],
                &[("enable-debug-command", "yes")],
                &[("dir", "/")],
                &[("dbfilename", "dump.rdb")],
                &[("maxmemory", "10"), ("maxmemory", "20")],
                &[("maxmemory", "10"), ("MAXMEMORY", "20")],
                &[("hz", "5"), ("hz", "6")],
                &[("foo", "bar")],
                &[("foo", "bar"), ("maxmemory", "1")],
                &[("maxmemory", "abc"), ("foo", "bar")],
                &[("databases", "5"), ("maxmemory", "abc")],
                &[("maxmemory", "abc"), ("databases", "5")],
                &[("dir", "/tmp"), ("maxmemory", "abc")],
                &[("maxmemory", "abc"), ("port", "abc")],
                &[("appendonly", "yes"), ("maxmemory", "abc")],
                &[("protected-mode", "maybe")],
                &[("protected-mode", "NO")],
                &[("protected-mode", "YES")],
                &[("dynamic-hz", "no")],
                &[("appendonly", "yes"), ("appendonly", "no")],
                &[("appendfsync", "sometimes")],
                &[("appendfsync", "ALWAYS")],
                &[("appendfsync", "everysec")],
                &[("maxmemory-policy", "foo")],
                &[("maxmemory-policy", "Volatile-TTL")],
                &[("loglevel", "Debug")],
                &[("loglevel", "warning")],
                &[("hz", "0")],
                &[("hz", "1000")],
                &[("hz", "-1")],
                &[("hz", "10")],
                &[("timeout", "-1")],
                &[("timeout", "60")],
                &[("tcp-keepalive", "-1")],
                &[("tcp-keepalive", "60")],
                &[("maxclients", "0")],
                &[("maxclients", "4294967296")],
                &[("maxclients", "1000")],
                &[("maxmemory-samples", "0")],
                &[("maxmemory-samples", "10")],
                &[("lfu-log-factor", "-1")],
                &[("lfu-log-factor", "20")],
                &[("lfu-decay-time", "5")],
                &[("auto-aof-rewrite-percentage", "-1")],
                &[("auto-aof-rewrite-percentage", "50")],
                &[("auto-aof-rewrite-min-size", "-1")],
                &[("auto-aof-rewrite-min-size", "18446744073709551615")],
                &[("auto-aof-rewrite-min-size", "9223372036854775807")],
                &[("auto-aof-rewrite-min-size", "32mb")],
                &[("proto-max-bulk-len", "1000")],
                &[("proto-max-bulk-len", "9223372036854775808")],
                &[("proto-max-bulk-len", "1gb")],
                &[("client-query-buffer-limit", "1000")],
                &[("client-query-buffer-limit", "2gb")],
                &[("save", "3600 1 300 100")],
                &[("save", "3600  1")],
                &[("save", "3600 ")],
                &[("save", " 3600 1")],
                &[("save", "+3600 1")],
                &[("save", "0 1")],
                &[("save", "1 -1")],
                &[("save", "1 0")],
                &[("save", "3600 1 3600 1")],
                &[("save", "abc")],
                &[("save", "1x 1")],
                &[("save", "99999999999999999999 1")],
                &[("save", "")],
                &[("client-output-buffer-limit", "normal 1kb 2mb 3")],
                &[("client-output-buffer-limit", "replica 1 2 3 PUBSUB 4 5 6")],
                &[("client-output-buffer-limit", "slave 1 2 -3")],
                &[("client-output-buffer-limit", "slave 1 2 +3")],
                &[("client-output-buffer-limit", "slave 1 2 ")],
                &[("client-output-buffer-limit", "slave 1 2 x")],
                &[("client-output-buffer-limit", "normal 1 2 3 normal 4 5 6")],
                &[("client-output-buffer-limit", "normal 1 2 3 foo 4 5 6")],
                &[("client-output-buffer-limit", "normal 0 0")],
                &[("client-output-buffer-limit", "master 0 0 0")],
                &[("client-output-buffer-limit", "")],
                &[("requirepass", "")],
                &[
                    ("maxmemory", "100mb"),
                    ("maxmemory-policy", "allkeys-lru"),
                    ("hz", "20"),
                ],
            ];
            for &pairs in cases {
                let mut want = redis.config_set(pairs);
                // strata's one policy of its own is among those an error lists.
                if let Err(text) = &mut want
                    && text.ends_with(", noeviction")
                {
                    text.push_str(", tiered");
                }
                let got = set(&mut ours, pairs).map(|_| ());
                assert_eq!(got, want, "{pairs:?}");
                for d in comparable() {
                    assert_eq!(
                        d.render(&ours),
                        redis.config_get(d.name),
                        "{} after {pairs:?}",
                        d.name
                    );
                }
            }
        }
    }
}
