//! The directive registry: one entry per directive, from which file loading, the command
//! line, CONFIG GET and CONFIG SET are all derived.
//!
//! An entry names a directive (and its alias, if Redis has one), says whether CONFIG SET
//! may change it, and gives its kind: yes/no, integer with a range, memory size with a
//! range, enum, string, or a multi-argument directive with its own parser. The kind
//! holds the accessors of the typed [`Config`] field, so a directive's text form, its
//! checks and its error texts (Redis's own) live only here.
//!
//! Invariants, checked by the tests below: names and aliases are lowercase and unique; a
//! value that passes an entry's checks fits its field; rendering a value and reading it
//! back gives the same configuration.

use std::path::PathBuf;

use super::parse::{
    parse_c_long, parse_integer, parse_memory, parse_yes_no, split_args, split_spaces,
};
use super::{
    Appendfsync, BindAddr, ClientClass, ClientOutputBufferLimit, Config, LogLevel, MaxmemoryPolicy,
    ProtectedAction, SavePoint, SchedPolicy,
};

/// Whether CONFIG SET may change a directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutability {
    /// CONFIG SET changes it.
    Mutable,
    /// Only the file or the command line set it (CONFIG SET answers "can't set immutable
    /// config").
    Immutable,
    /// Redis's protected configs (`dir`, `dbfilename`): changing them at run time could
    /// turn a client into a file writer, and strata, like Redis by default
    /// (`enable-protected-configs no`), refuses ("can't set protected config").
    Protected,
}

/// Where a directive is being applied: Redis treats `save` lines differently while it
/// loads (they accumulate) and splits multi-argument values differently at run time.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Reading the file and the command line; `save_seen` says whether a `save` line was
    /// already applied, after which further lines add to it.
    Loading { save_seen: bool },
    /// CONFIG SET.
    Runtime,
}

type Getter<T> = fn(&Config) -> T;
type MultiSetter = fn(&mut Config, &[&[u8]], &mut Phase) -> Result<(), String>;

/// The type of a directive's value, with the accessors of its [`Config`] field.
#[derive(Debug)]
pub(crate) enum Kind {
    /// `yes` or `no`; the setter may refuse a value.
    Bool {
        get: Getter<bool>,
        set: fn(&mut Config, bool) -> Result<(), &'static str>,
    },
    /// A decimal integer in `min..=max`; the setter may refuse or normalise a value.
    Int {
        min: i64,
        max: i64,
        get: Getter<i64>,
        set: fn(&mut Config, i64) -> Result<(), &'static str>,
    },
    /// A memory size in `min..=max` bytes, rendered as plain bytes.
    Memory {
        min: u64,
        max: u64,
        get: Getter<u64>,
        set: fn(&mut Config, u64),
    },
    /// One of `names`, ignoring case, rendered as the lowercase name.
    Enum {
        names: &'static [&'static str],
        get: Getter<&'static str>,
        set: fn(&mut Config, &[u8]) -> bool,
    },
    /// A UTF-8 string; the setter validates it.
    Str {
        get: Getter<String>,
        set: fn(&mut Config, String) -> Result<(), String>,
    },
    /// Several words with a parser of their own; `syntax` describes them.
    Multi {
        syntax: &'static str,
        get: Getter<String>,
        set: MultiSetter,
    },
}

/// One configuration directive.
#[derive(Debug)]
pub struct Directive {
    /// The name, lowercase, as CONFIG GET shows it.
    pub name: &'static str,
    /// Another name Redis accepts for it.
    pub alias: Option<&'static str>,
    /// Whether CONFIG SET may change it.
    pub mutability: Mutability,
    /// One sentence on what it means in strata.
    pub summary: &'static str,
    pub(crate) kind: Kind,
}

impl Directive {
    /// The name followed by the alias, if any.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.alias)
    }

    /// The value as CONFIG GET renders it.
    pub fn render(&self, config: &Config) -> String {
        match self.kind {
            Kind::Bool { get, .. } => if get(config) { "yes" } else { "no" }.to_owned(),
            Kind::Int { get, .. } => get(config).to_string(),
            Kind::Memory { get, .. } => get(config).to_string(),
            Kind::Enum { get, .. } => get(config).to_owned(),
            Kind::Str { get, .. } | Kind::Multi { get, .. } => get(config),
        }
    }

    /// What a value looks like, for documentation.
    pub fn syntax(&self) -> String {
        match self.kind {
            Kind::Bool { .. } => "yes|no".to_owned(),
            Kind::Int { min, max, .. } => format!("integer {min}..{max}"),
            Kind::Memory { min, max, .. } => {
                format!("memory size {min}..{max} (units: b, k, kb, m, mb, g, gb)")
            }
            Kind::Enum { names, .. } => names.join("|"),
            Kind::Str { .. } => "string".to_owned(),
            Kind::Multi { syntax, .. } => syntax.to_owned(),
        }
    }

    /// Applies the directive's arguments to `config`. Every directive but the
    /// multi-argument ones takes exactly one argument. The error is the reason alone, in
    /// Redis's words where Redis has them.
    pub(crate) fn apply(
        &self,
        config: &mut Config,
        args: &[&[u8]],
        phase: &mut Phase,
    ) -> Result<(), String> {
        if let Kind::Multi { set, .. } = self.kind {
            return match (&*phase, args) {
                (Phase::Runtime, [value]) => set(config, &split_spaces(value), phase),
                (Phase::Runtime, _) => Err("wrong number of arguments".to_owned()),
                // While loading, one non-empty argument holds all the words, so that
                // `--save "3600 1 300 100"` works.
                (Phase::Loading { .. }, [value]) if !value.is_empty() => {
                    let words = split_args(value)
                        .ok_or_else(|| "unbalanced quotes in argument".to_owned())?;
                    let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
                    set(config, &words, phase)
                }
                (Phase::Loading { .. }, _) => set(config, args, phase),
            };
        }
        let [value] = args else {
            return Err("wrong number of arguments".to_owned());
        };
        match self.kind {
            Kind::Bool { set, .. } => {
                let value = parse_yes_no(value).ok_or("argument must be 'yes' or 'no'")?;
                set(config, value)?;
            }
            Kind::Int { min, max, set, .. } => {
                let value =
                    parse_integer(value).ok_or("argument couldn't be parsed into an integer")?;
                if !(min..=max).contains(&value) {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                set(config, value)?;
            }
            Kind::Memory { min, max, set, .. } => {
                let value = parse_memory(value).ok_or("argument must be a memory value")?;
                if !(min..=max).contains(&value) {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                set(config, value);
            }
            Kind::Enum { names, set, .. } => {
                if !set(config, value) {
                    return Err(format!(
                        "argument(s) must be one of the following: {}",
                        names.join(", ")
                    ));
                }
            }
            Kind::Str { set, .. } => {
                let value = String::from_utf8(value.to_vec())
                    .map_err(|_| "argument must be valid UTF-8".to_owned())?;
                set(config, value)?;
            }
            Kind::Multi { .. } => {}
        }
        Ok(())
    }
}

/// Every directive, in the order of the documentation (the security directives of
/// [`super::security`] last).
pub fn all() -> &'static [&'static Directive] {
    static ALL: std::sync::LazyLock<Vec<&'static Directive>> = std::sync::LazyLock::new(|| {
        DIRECTIVES
            .iter()
            .chain(super::security::DIRECTIVES)
            .collect()
    });
    &ALL
}

/// The directive called `name` (or whose alias is `name`), ignoring ASCII case.
pub fn lookup(name: &[u8]) -> Option<&'static Directive> {
    all()
        .iter()
        .copied()
        .find(|d| d.names().any(|n| n.as_bytes().eq_ignore_ascii_case(name)))
}

/// The value of the directive called `name` as CONFIG GET renders it.
pub fn render(config: &Config, name: &str) -> Option<String> {
    lookup(name.as_bytes()).map(|d| d.render(config))
}

/// Stores an integer that passed its entry's range check into a narrower field.
fn narrow<T: TryFrom<i64>>(slot: &mut T, value: i64) -> Result<(), &'static str> {
    *slot = T::try_from(value).map_err(|_| "argument is out of range")?;
    Ok(())
}

/// Reads a narrower field back as an integer.
fn widen<T: TryInto<i64>>(value: T) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

const INT_MAX: i64 = i32::MAX as i64;
const UINT_MAX: i64 = u32::MAX as i64;
const LONG_MAX: u64 = i64::MAX as u64;
/// Redis clamps `hz` to this range when applying it (`CONFIG_MIN_HZ`, `CONFIG_MAX_HZ`).
const HZ_RANGE: (i64, i64) = (1, 500);
/// Redis's `CONFIG_BINDADDR_MAX`.
const MAX_BIND_ADDRESSES: usize = 16;
/// The largest number of keyspace shards.
const MAX_SHARDS: i64 = 1 << 16;

/// The text of an I/O error as C's `strerror` gives it, without Rust's "(os error N)".
fn strerror(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error ") {
        Some(end) => text[..end].to_owned(),
        None => text,
    }
}

/// The working directory: created if missing (unlike Redis, so that the built-in
/// default `./data` works on a fresh checkout); anything else there is an error.
fn set_dir(config: &mut Config, value: String) -> Result<(), String> {
    match std::fs::metadata(&value) {
        Ok(meta) if meta.is_dir() => {
            config.dir = PathBuf::from(value);
            Ok(())
        }
        Ok(_) => Err("Not a directory".to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&value).map_err(|e| strerror(&e))?;
            config.dir = PathBuf::from(value);
            Ok(())
        }
        Err(e) => Err(strerror(&e)),
    }
}

/// Redis's `pathIsBaseName`.
fn is_base_name(name: &str) -> bool {
    !name.contains(['/', '\\'])
}

fn set_appendfilename(config: &mut Config, value: String) -> Result<(), String> {
    if value.is_empty() {
        return Err("appendfilename can't be empty".to_owned());
    }
    if !is_base_name(&value) {
        return Err("appendfilename can't be a path, just a filename".to_owned());
    }
    config.appendfilename = value;
    Ok(())
}

fn set_dbfilename(config: &mut Config, value: String) -> Result<(), String> {
    // Redis 7.0 accepts an empty name and then cannot save; strata refuses it.
    if value.is_empty() {
        return Err("dbfilename can't be empty".to_owned());
    }
    if !is_base_name(&value) {
        return Err("dbfilename can't be a path, just a filename".to_owned());
    }
    config.dbfilename = value;
    Ok(())
}

fn optional_path(value: String) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

fn render_optional_path(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn set_daemonize(config: &mut Config, value: bool) -> Result<(), &'static str> {
    if value {
        return Err(
            "daemonize yes is not supported: strata always runs in the foreground; \
                    run it in the background with a service manager (systemd, launchd, a \
                    container runtime) instead",
        );
    }
    config.daemonize = false;
    Ok(())
}

fn set_shards(config: &mut Config, value: i64) -> Result<(), &'static str> {
    if value.count_ones() != 1 {
        return Err("argument must be a power of two");
    }
    narrow(&mut config.shards, value)
}

fn set_save(config: &mut Config, args: &[&[u8]], phase: &mut Phase) -> Result<(), String> {
    const INVALID: &str = "Invalid save parameters";
    // A single empty argument means no save points at all.
    let reset = matches!(args, [value] if value.is_empty());
    let args = if reset { &[][..] } else { args };
    if !args.len().is_multiple_of(2) {
        return Err(INVALID.to_owned());
    }
    let mut points = Vec::with_capacity(args.len() / 2);
    for pair in args.chunks_exact(2) {
        let seconds = parse_c_long(pair[0]).filter(|&s| s >= 1);
        let changes = parse_c_long(pair[1]).filter(|&c| c >= 0);
        let (Some(seconds), Some(changes)) = (seconds, changes) else {
            return Err(INVALID.to_owned());
        };
        points.push(SavePoint {
            seconds: seconds.unsigned_abs(),
            changes: changes.unsigned_abs(),
        });
    }
    match phase {
        Phase::Loading { save_seen } => {
            // The first `save` read replaces the defaults; later ones add to it.
            if reset || !*save_seen {
                config.save.clear();
            }
            *save_seen = true;
            config.save.extend(points);
        }
        Phase::Runtime => config.save = points,
    }
    Ok(())
}

fn render_save(config: &Config) -> String {
    let words: Vec<String> = config
        .save
        .iter()
        .map(|p| format!("{} {}", p.seconds, p.changes))
        .collect();
    words.join(" ")
}

fn set_bind(config: &mut Config, args: &[&[u8]], phase: &mut Phase) -> Result<(), String> {
    if args.len() > MAX_BIND_ADDRESSES {
        return Err("Too many bind addresses specified.".to_owned());
    }
    let args = if matches!(args, [value] if value.is_empty()) {
        &[][..]
    } else {
        args
    };
    let mut addrs = Vec::with_capacity(args.len());
    for &arg in args {
        let addr = std::str::from_utf8(arg).ok().and_then(BindAddr::parse);
        let Some(addr) = addr else {
            // At run time Redis tries to bind and reports this; an empty or non-UTF-8
            // address can never be bound.
            return Err(match phase {
                Phase::Runtime => "Failed to bind to specified addresses.",
                Phase::Loading { .. } => "bind addresses must be non-empty UTF-8 strings",
            }
            .to_owned());
        };
        addrs.push(addr);
    }
    config.bind = addrs;
    Ok(())
}

fn render_bind(config: &Config) -> String {
    let words: Vec<String> = config.bind.iter().map(ToString::to_string).collect();
    words.join(" ")
}

fn set_client_output_buffer_limit(
    config: &mut Config,
    args: &[&[u8]],
    _phase: &mut Phase,
) -> Result<(), String> {
    if !args.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".to_owned());
    }
    // Every group is checked before any is applied.
    let mut limits = Vec::with_capacity(args.len() / 4);
    for group in args.chunks_exact(4) {
        let class = ClientClass::from_name(group[0]).ok_or_else(|| {
            "Invalid client class specified in buffer limit configuration.".to_owned()
        })?;
        let hard = parse_memory(group[1]);
        let soft = parse_memory(group[2]);
        let seconds = parse_c_long(group[3]).filter(|&s| s >= 0);
        let (Some(hard_bytes), Some(soft_bytes), Some(soft_seconds)) = (hard, soft, seconds) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit \
                        configuration."
                    .to_owned(),
            );
        };
        let soft_seconds = soft_seconds.unsigned_abs();
        limits.push((
            class,
            ClientOutputBufferLimit {
                hard_bytes,
                soft_bytes,
                soft_seconds,
            },
        ));
    }
    for (class, limit) in limits {
        config.client_output_buffer_limit[class as usize] = limit;
    }
    Ok(())
}

fn render_client_output_buffer_limit(config: &Config) -> String {
    let groups: Vec<String> = ClientClass::ALL
        .iter()
        .map(|&class| {
            let l = config.client_output_buffer_limit[class as usize];
            format!(
                "{} {} {} {}",
                class.name(),
                l.hard_bytes,
                l.soft_bytes,
                l.soft_seconds
            )
        })
        .collect();
    groups.join(" ")
}

use Mutability::{Immutable, Mutable, Protected};

static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "port",
        alias: None,
        mutability: Mutable,
        summary: "The TCP port to accept clients on; 0 disables TCP.",
        kind: Kind::Int {
            min: 0,
            max: 65535,
            get: |c| widen(c.port),
            set: |c, v| narrow(&mut c.port, v),
        },
    },
    Directive {
        name: "bind",
        alias: None,
        mutability: Mutable,
        summary: "The addresses to listen on; `*` is every IPv4 address, `::*` every IPv6 \
                  address, and a leading `-` makes an address optional (skipped when it \
                  is unavailable).",
        kind: Kind::Multi {
            syntax: "address [address ...] (at most 16)",
            get: render_bind,
            set: set_bind,
        },
    },
    Directive {
        name: "protected-mode",
        alias: None,
        mutability: Mutable,
        summary: "When on and no password is set, only loopback clients are served.",
        kind: Kind::Bool {
            get: |c| c.protected_mode,
            set: |c, v| {
                c.protected_mode = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "tcp-backlog",
        alias: None,
        mutability: Immutable,
        summary: "The listen(2) backlog.",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.tcp_backlog),
            set: |c, v| narrow(&mut c.tcp_backlog, v),
        },
    },
    Directive {
        name: "tcp-keepalive",
        alias: None,
        mutability: Mutable,
        summary: "Seconds between TCP keepalive probes on client connections; 0 disables them.",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.tcp_keepalive),
            set: |c, v| narrow(&mut c.tcp_keepalive, v),
        },
    },
    Directive {
        name: "timeout",
        alias: None,
        mutability: Mutable,
        summary: "Seconds of idleness after which a client is disconnected; 0 never.",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.timeout),
            set: |c, v| narrow(&mut c.timeout, v),
        },
    },
    Directive {
        name: "dir",
        alias: None,
        mutability: Protected,
        summary: "The working directory, where data files are kept; created if missing.",
        kind: Kind::Str {
            get: |c| c.dir.to_string_lossy().into_owned(),
            set: set_dir,
        },
    },
    Directive {
        name: "databases",
        alias: None,
        mutability: Immutable,
        summary: "The number of databases (SELECT 0 to databases-1).",
        kind: Kind::Int {
            min: 1,
            max: INT_MAX,
            get: |c| widen(c.databases),
            set: |c, v| narrow(&mut c.databases, v),
        },
    },
    Directive {
        name: "maxclients",
        alias: None,
        mutability: Mutable,
        summary: "The most clients connected at once.",
        kind: Kind::Int {
            min: 1,
            max: UINT_MAX,
            get: |c| widen(c.maxclients),
            set: |c, v| narrow(&mut c.maxclients, v),
        },
    },
    Directive {
        name: "hz",
        alias: None,
        mutability: Mutable,
        summary: "How many times a second background tasks (active expiry, timeouts) run; \
                  values are clamped to 1..500.",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.hz),
            set: |c, v| narrow(&mut c.hz, v.clamp(HZ_RANGE.0, HZ_RANGE.1)),
        },
    },
    Directive {
        name: "dynamic-hz",
        alias: None,
        mutability: Mutable,
        summary: "Raise the background task rate with the number of clients.",
        kind: Kind::Bool {
            get: |c| c.dynamic_hz,
            set: |c, v| {
                c.dynamic_hz = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "loglevel",
        alias: None,
        mutability: Mutable,
        summary: "The least severe level logged; `nothing` silences the log.",
        kind: Kind::Enum {
            names: LogLevel::NAMES,
            get: |c| c.loglevel.name(),
            set: |c, v| LogLevel::from_name(v).map(|l| c.loglevel = l).is_some(),
        },
    },
    Directive {
        name: "logfile",
        alias: None,
        mutability: Immutable,
        summary: "The log file; empty logs to standard output.",
        kind: Kind::Str {
            get: |c| render_optional_path(&c.logfile),
            set: |c, v| {
                c.logfile = optional_path(v);
                Ok(())
            },
        },
    },
    Directive {
        name: "daemonize",
        alias: None,
        mutability: Immutable,
        summary: "Accepted for compatibility; only `no` is valid, strata runs in the foreground.",
        kind: Kind::Bool {
            get: |c| c.daemonize,
            set: set_daemonize,
        },
    },
    Directive {
        name: "pidfile",
        alias: None,
        mutability: Immutable,
        summary: "A file to write the process id to; empty writes none.",
        kind: Kind::Str {
            get: |c| render_optional_path(&c.pidfile),
            set: |c, v| {
                c.pidfile = optional_path(v);
                Ok(())
            },
        },
    },
    Directive {
        name: "requirepass",
        alias: None,
        mutability: Mutable,
        summary: "The password clients must AUTH with; empty requires none.",
        kind: Kind::Str {
            get: |c| c.requirepass.clone().unwrap_or_default(),
            set: |c, v| {
                c.requirepass = (!v.is_empty()).then_some(v);
                Ok(())
            },
        },
    },
    Directive {
        name: "appendonly",
        alias: None,
        mutability: Mutable,
        summary: "Log every write so that data survives a restart.",
        kind: Kind::Bool {
            get: |c| c.appendonly,
            set: |c, v| {
                c.appendonly = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "appendfilename",
        alias: None,
        mutability: Immutable,
        summary: "The base name of the append-only files, inside `dir`.",
        kind: Kind::Str {
            get: |c| c.appendfilename.clone(),
            set: set_appendfilename,
        },
    },
    Directive {
        name: "appendfsync",
        alias: None,
        mutability: Mutable,
        summary: "When the log is flushed to disk: on every write, every second, or when \
                  the operating system chooses.",
        kind: Kind::Enum {
            names: Appendfsync::NAMES,
            get: |c| c.appendfsync.name(),
            set: |c, v| {
                Appendfsync::from_name(v)
                    .map(|a| c.appendfsync = a)
                    .is_some()
            },
        },
    },
    Directive {
        name: "auto-aof-rewrite-percentage",
        alias: None,
        mutability: Mutable,
        summary: "Compact the log when it has grown by this percentage since the last \
                  compaction; 0 disables automatic compaction.",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.auto_aof_rewrite_percentage),
            set: |c, v| narrow(&mut c.auto_aof_rewrite_percentage, v),
        },
    },
    Directive {
        name: "auto-aof-rewrite-min-size",
        alias: None,
        mutability: Mutable,
        summary: "The log size below which it is never compacted automatically.",
        kind: Kind::Memory {
            min: 0,
            max: LONG_MAX,
            get: |c| c.auto_aof_rewrite_min_size,
            set: |c, v| c.auto_aof_rewrite_min_size = v,
        },
    },
    Directive {
        name: "save",
        alias: None,
        mutability: Mutable,
        summary: "Snapshot points: snapshot after `seconds` if at least `changes` writes \
                  happened; \"\" disables snapshots.",
        kind: Kind::Multi {
            syntax: "seconds changes [seconds changes ...] | \"\"",
            get: render_save,
            set: set_save,
        },
    },
    Directive {
        name: "dbfilename",
        alias: None,
        mutability: Protected,
        summary: "The base name of the snapshot file, inside `dir`.",
        kind: Kind::Str {
            get: |c| c.dbfilename.clone(),
            set: set_dbfilename,
        },
    },
    Directive {
        name: "maxmemory",
        alias: None,
        mutability: Mutable,
        summary: "The memory limit for data; 0 means no limit.",
        kind: Kind::Memory {
            min: 0,
            max: u64::MAX,
            get: |c| c.maxmemory,
            set: |c, v| c.maxmemory = v,
        },
    },
    Directive {
        name: "maxmemory-policy",
        alias: None,
        mutability: Mutable,
        summary: "What to evict when maxmemory is reached.",
        kind: Kind::Enum {
            names: MaxmemoryPolicy::NAMES,
            get: |c| c.maxmemory_policy.name(),
            set: |c, v| {
                MaxmemoryPolicy::from_name(v)
                    .map(|p| c.maxmemory_policy = p)
                    .is_some()
            },
        },
    },
    Directive {
        name: "maxmemory-samples",
        alias: None,
        mutability: Mutable,
        summary: "How many keys eviction samples to approximate LRU, LFU and TTL order.",
        kind: Kind::Int {
            min: 1,
            max: INT_MAX,
            get: |c| widen(c.maxmemory_samples),
            set: |c, v| narrow(&mut c.maxmemory_samples, v),
        },
    },
    Directive {
        name: "lfu-log-factor",
        alias: None,
        mutability: Mutable,
        summary: "How slowly the LFU access counter grows.",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.lfu_log_factor),
            set: |c, v| narrow(&mut c.lfu_log_factor, v),
        },
    },
    Directive {
        name: "lfu-decay-time",
        alias: None,
        mutability: Mutable,
        summary: "Minutes after which an idle key's LFU counter is halved.",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.lfu_decay_time),
            set: |c, v| narrow(&mut c.lfu_decay_time, v),
        },
    },
    Directive {
        name: "lazyfree-lazy-user-del",
        alias: None,
        mutability: Mutable,
        summary: "DEL frees big values in the background, as UNLINK does.",
        kind: Kind::Bool {
            get: |c| c.lazyfree_lazy.user_del,
            set: |c, v| {
                c.lazyfree_lazy.user_del = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "lazyfree-lazy-server-del",
        alias: None,
        mutability: Mutable,
        summary: "Big values a command overwrites or deletes as a side effect are freed in the background.",
        kind: Kind::Bool {
            get: |c| c.lazyfree_lazy.server_del,
            set: |c, v| {
                c.lazyfree_lazy.server_del = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "lazyfree-lazy-expire",
        alias: None,
        mutability: Mutable,
        summary: "Big values of expired keys are freed in the background.",
        kind: Kind::Bool {
            get: |c| c.lazyfree_lazy.expire,
            set: |c, v| {
                c.lazyfree_lazy.expire = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "lazyfree-lazy-eviction",
        alias: None,
        mutability: Mutable,
        summary: "Big values of keys evicted by maxmemory are freed in the background.",
        kind: Kind::Bool {
            get: |c| c.lazyfree_lazy.eviction,
            set: |c, v| {
                c.lazyfree_lazy.eviction = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "lazyfree-lazy-user-flush",
        alias: None,
        mutability: Mutable,
        summary: "FLUSHDB and FLUSHALL without SYNC or ASYNC count as ASYNC.",
        kind: Kind::Bool {
            get: |c| c.lazyfree_lazy.user_flush,
            set: |c, v| {
                c.lazyfree_lazy.user_flush = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "jemalloc-bg-thread",
        alias: None,
        mutability: Mutable,
        summary: "The allocator purges freed memory from its own background threads.",
        kind: Kind::Bool {
            get: |c| c.jemalloc_bg_thread,
            set: |c, v| {
                c.jemalloc_bg_thread = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "hash-max-listpack-entries",
        alias: Some("hash-max-ziplist-entries"),
        mutability: Mutable,
        summary: "A hash with more fields than this leaves the compact listpack encoding.",
        kind: Kind::Int {
            min: 0,
            max: LONG_MAX as i64,
            get: |c| widen(c.hash_max_listpack_entries),
            set: |c, v| narrow(&mut c.hash_max_listpack_entries, v),
        },
    },
    Directive {
        name: "hash-max-listpack-value",
        alias: Some("hash-max-ziplist-value"),
        mutability: Mutable,
        summary: "A hash with a field or value longer than this leaves the listpack encoding.",
        kind: Kind::Memory {
            min: 0,
            max: LONG_MAX,
            get: |c| c.hash_max_listpack_value,
            set: |c, v| c.hash_max_listpack_value = v,
        },
    },
    Directive {
        name: "set-max-intset-entries",
        alias: None,
        mutability: Mutable,
        summary: "A set of integers with more members than this leaves the intset encoding.",
        kind: Kind::Int {
            min: 0,
            max: LONG_MAX as i64,
            get: |c| widen(c.set_max_intset_entries),
            set: |c, v| narrow(&mut c.set_max_intset_entries, v),
        },
    },
    Directive {
        name: "zset-max-listpack-entries",
        alias: Some("zset-max-ziplist-entries"),
        mutability: Mutable,
        summary: "A sorted set with more members than this leaves the listpack encoding.",
        kind: Kind::Int {
            min: 0,
            max: LONG_MAX as i64,
            get: |c| widen(c.zset_max_listpack_entries),
            set: |c, v| narrow(&mut c.zset_max_listpack_entries, v),
        },
    },
    Directive {
        name: "zset-max-listpack-value",
        alias: Some("zset-max-ziplist-value"),
        mutability: Mutable,
        summary: "A sorted set with a member longer than this leaves the listpack encoding.",
        kind: Kind::Memory {
            min: 0,
            max: LONG_MAX,
            get: |c| c.zset_max_listpack_value,
            set: |c, v| c.zset_max_listpack_value = v,
        },
    },
    Directive {
        name: "list-max-listpack-size",
        alias: Some("list-max-ziplist-size"),
        mutability: Mutable,
        summary: "The size of a list node: entries if positive, -1..-5 for 4..64 KiB.",
        kind: Kind::Int {
            min: i32::MIN as i64,
            max: i32::MAX as i64,
            get: |c| c.list_max_listpack_size,
            set: |c, v| {
                c.list_max_listpack_size = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "list-compress-depth",
        alias: None,
        mutability: Mutable,
        summary: "List node compression; strata keeps list nodes uncompressed, so only 0 is accepted.",
        kind: Kind::Int {
            min: 0,
            max: i32::MAX as i64,
            get: |c| c.list_compress_depth,
            set: |c, v| {
                if v != 0 {
                    return Err("list node compression is not supported: only 0 is accepted");
                }
                c.list_compress_depth = v;
                Ok(())
            },
        },
    },
    Directive {
        name: "proto-max-bulk-len",
        alias: None,
        mutability: Mutable,
        summary: "The longest bulk string a client may send.",
        kind: Kind::Memory {
            min: 1 << 20,
            max: LONG_MAX,
            get: |c| c.proto_max_bulk_len,
            set: |c, v| c.proto_max_bulk_len = v,
        },
    },
    Directive {
        name: "client-query-buffer-limit",
        alias: None,
        mutability: Mutable,
        summary: "The most unparsed input buffered for one client before it is disconnected.",
        kind: Kind::Memory {
            min: 1 << 20,
            max: LONG_MAX,
            get: |c| c.client_query_buffer_limit,
            set: |c, v| c.client_query_buffer_limit = v,
        },
    },
    Directive {
        name: "client-output-buffer-limit",
        alias: None,
        mutability: Mutable,
        summary: "Per client class, the output buffered before a client is disconnected: \
                  at once past the hard limit, or after staying past the soft limit for \
                  the given seconds; 0 disables a limit.",
        kind: Kind::Multi {
            syntax: "class hard soft seconds [class hard soft seconds ...] \
                     (class: normal, replica or slave, pubsub)",
            get: render_client_output_buffer_limit,
            set: set_client_output_buffer_limit,
        },
    },
    Directive {
        name: "notify-keyspace-events",
        alias: None,
        mutability: Mutable,
        summary: "The keyspace events published on __keyspace@<db>__ / __keyevent@<db>__ \
                  channels, as Redis's class letters (K E g $ l s h z x e t m d n A); \
                  empty publishes none.",
        kind: Kind::Str {
            get: |c| strata_commands::notify::render_flags(c.notify_keyspace_events),
            set: |c, v| {
                c.notify_keyspace_events = strata_commands::notify::parse_flags(v.as_bytes())
                    .ok_or_else(|| {
                        "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_owned()
                    })?;
                Ok(())
            },
        },
    },
    Directive {
        name: "tracking-table-max-keys",
        alias: None,
        mutability: Mutable,
        summary: "The most keys CLIENT TRACKING remembers; past it keys are invalidated \
                  to make room (0 = no limit).",
        kind: Kind::Int {
            min: 0,
            max: LONG_MAX as i64,
            get: |c| widen(c.tracking_table_max_keys),
            set: |c, v| narrow(&mut c.tracking_table_max_keys, v),
        },
    },
    Directive {
        name: "busy-reply-threshold",
        alias: Some("lua-time-limit"),
        mutability: Mutable,
        summary: "Milliseconds a script may run before other clients get BUSY and SCRIPT \
                  KILL / FUNCTION KILL may stop it (0 = never).",
        kind: Kind::Int {
            min: 0,
            max: LONG_MAX as i64,
            get: |c| widen(c.busy_reply_threshold),
            set: |c, v| narrow(&mut c.busy_reply_threshold, v),
        },
    },
    Directive {
        name: "lua-memory-limit",
        alias: None,
        mutability: Mutable,
        summary: "The most memory one Lua interpreter may use; a script that needs more \
                  fails with 'not enough memory' (0 = no limit; strata-specific).",
        kind: Kind::Memory {
            min: 0,
            max: LONG_MAX,
            get: |c| c.lua_memory_limit,
            set: |c, v| c.lua_memory_limit = v,
        },
    },
    Directive {
        name: "pubsub-max-subscriptions-per-client",
        alias: None,
        mutability: Mutable,
        summary: "The most channels, patterns and shard channels one client may subscribe \
                  to, together; 0 = no limit (strata-specific).",
        kind: Kind::Int {
            min: 0,
            max: INT_MAX,
            get: |c| widen(c.pubsub_max_subscriptions_per_client),
            set: |c, v| narrow(&mut c.pubsub_max_subscriptions_per_client, v),
        },
    },
    Directive {
        name: "enable-debug-command",
        alias: None,
        mutability: Immutable,
        summary: "Whether the DEBUG command is allowed: never, always, or from loopback \
                  clients only.",
        kind: Kind::Enum {
            names: ProtectedAction::NAMES,
            get: |c| c.enable_debug_command.name(),
            set: |c, v| {
                ProtectedAction::from_name(v)
                    .map(|p| c.enable_debug_command = p)
                    .is_some()
            },
        },
    },
    Directive {
        name: "io-threads",
        alias: None,
        mutability: Immutable,
        summary: "The number of threads serving connections and running commands \
                  (strata's meaning; in Redis it only counts socket I/O threads); \
                  defaults to the number of CPUs, at most 128, or to 1 under \
                  appendonly yes with appendfsync always.",
        kind: Kind::Int {
            min: 1,
            max: 128,
            get: |c| widen(c.io_threads),
            set: |c, v| {
                c.io_threads_auto = false;
                narrow(&mut c.io_threads, v)
            },
        },
    },
    Directive {
        name: "io-spin-us",
        alias: None,
        mutability: Mutable,
        summary: "Microseconds the I/O thread goes on polling its connections once it \
                  has run everything, before it sleeps, so that a client answering \
                  within that time finds it awake (strata only; with one I/O thread, \
                  the default on two CPUs); 0 sleeps at once.",
        kind: Kind::Int {
            min: 0,
            max: 1_000_000,
            get: |c| widen(c.io_spin_us),
            set: |c, v| narrow(&mut c.io_spin_us, v),
        },
    },
    Directive {
        name: "sched-policy",
        alias: None,
        mutability: Immutable,
        summary: "The Linux scheduling policy of the server's threads: batch (a thread \
                  woken by a socket does not preempt the one running on its CPU) or \
                  normal (strata-specific).",
        kind: Kind::Enum {
            names: SchedPolicy::NAMES,
            get: |c| c.sched_policy.name(),
            set: |c, v| {
                SchedPolicy::from_name(v)
                    .map(|p| c.sched_policy = p)
                    .is_some()
            },
        },
    },
    Directive {
        name: "shards",
        alias: None,
        mutability: Immutable,
        summary: "The number of keyspace shards, each behind its own lock; a power of two \
                  (strata-specific).",
        kind: Kind::Int {
            min: 1,
            max: MAX_SHARDS,
            get: |c| widen(c.shards),
            set: set_shards,
        },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies `name value` as a CONFIG SET would, returning the reason on failure.
    fn set(config: &mut Config, name: &str, value: &str) -> Result<(), String> {
        let directive = lookup(name.as_bytes()).expect("known directive");
        directive.apply(config, &[value.as_bytes()], &mut Phase::Runtime)
    }

    fn get(config: &Config, name: &str) -> String {
        render(config, name).expect("known directive")
    }

    fn set_err(name: &str, value: &str) -> String {
        set(&mut Config::default(), name, value).expect_err("invalid value")
    }

    #[test]
    fn names_are_lowercase_unique_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for d in all() {
            for name in d.names() {
                assert_eq!(name, name.to_ascii_lowercase());
                assert!(seen.insert(name), "duplicate name {name}");
            }
            assert!(d.summary.ends_with('.'), "{}", d.name);
            assert!(!d.syntax().is_empty());
        }
        assert!(lookup(b"MaxMemory").is_some_and(|d| d.name == "maxmemory"));
        assert!(lookup(b"nosuch").is_none());
    }

    #[test]
    fn the_directive_list_is_complete() {
        // The security directives are listed by their own module's test.
        let names: Vec<&str> = DIRECTIVES.iter().map(|d| d.name).collect();
        assert_eq!(
            names,
            [
                "port",
                "bind",
                "protected-mode",
                "tcp-backlog",
                "tcp-keepalive",
                "timeout",
                "dir",
                "databases",
                "maxclients",
                "hz",
                "dynamic-hz",
                "loglevel",
                "logfile",
                "daemonize",
                "pidfile",
                "requirepass",
                "appendonly",
                "appendfilename",
                "appendfsync",
                "auto-aof-rewrite-percentage",
                "auto-aof-rewrite-min-size",
                "save",
                "dbfilename",
                "maxmemory",
                "maxmemory-policy",
                "maxmemory-samples",
                "lfu-log-factor",
                "lfu-decay-time",
                "lazyfree-lazy-user-del",
                "lazyfree-lazy-server-del",
                "lazyfree-lazy-expire",
                "lazyfree-lazy-eviction",
                "lazyfree-lazy-user-flush",
                "jemalloc-bg-thread",
                "hash-max-listpack-entries",
                "hash-max-listpack-value",
                "set-max-intset-entries",
                "zset-max-listpack-entries",
                "zset-max-listpack-value",
                "list-max-listpack-size",
                "list-compress-depth",
                "proto-max-bulk-len",
                "client-query-buffer-limit",
                "client-output-buffer-limit",
                "notify-keyspace-events",
                "tracking-table-max-keys",
                "busy-reply-threshold",
                "lua-memory-limit",
                "pubsub-max-subscriptions-per-client",
                "enable-debug-command",
                "io-threads",
                "io-spin-us",
                "sched-policy",
                "shards",
            ]
        );
    }

    /// Redis 7.0.15's mutability, as CONFIG SET of each directive to its current value
    /// reports it.
    #[test]
    fn mutability_matches_redis() {
        let immutable = [
            "tcp-backlog",
            "databases",
            "logfile",
            "daemonize",
            "pidfile",
            "appendfilename",
            "enable-debug-command",
            "io-threads",
            "sched-policy",
            "shards",
            "aclfile",
            // Mutable in Redis, which reconfigures TLS at run time; strata needs a restart.
            "tls-port",
            "tls-cert-file",
            "tls-key-file",
            "tls-ca-cert-file",
            "tls-auth-clients",
            "tls-protocols",
        ];
        let protected = ["dir", "dbfilename"];
        for d in all() {
            let want = if immutable.contains(&d.name) {
                Immutable
            } else if protected.contains(&d.name) {
                Protected
            } else {
                Mutable
            };
            assert_eq!(d.mutability, want, "{}", d.name);
        }
    }

    /// Every integer's bounds fit its field, and reading the value back gives it.
    #[test]
    fn integer_bounds_fit_their_fields() {
        for d in all() {
            // Redis's range, of which strata accepts only 0.
            if d.name == "list-compress-depth" {
                continue;
            }
            let (min, max) = match d.kind {
                Kind::Int { min, max, .. } => (min, max),
                Kind::Memory { min, max, .. } => {
                    let mut config = Config::default();
                    for bound in [min, max] {
                        set(&mut config, d.name, &bound.to_string()).expect("bound accepted");
                        assert_eq!(get(&config, d.name), bound.to_string(), "{}", d.name);
                    }
                    continue;
                }
                _ => continue,
            };
            let mut config = Config::default();
            for bound in [min, max] {
                set(&mut config, d.name, &bound.to_string()).expect("bound accepted");
                let want = match d.name {
                    "hz" => bound.clamp(HZ_RANGE.0, HZ_RANGE.1),
                    _ => bound,
                };
                assert_eq!(get(&config, d.name), want.to_string(), "{}", d.name);
            }
            for outside in [min.checked_sub(1), max.checked_add(1)]
                .into_iter()
                .flatten()
            {
                assert_eq!(
                    set(&mut config, d.name, &outside.to_string()),
                    Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    )),
                    "{}",
                    d.name
                );
            }
        }
    }

    /// Rendering every directive of the defaults and reading the text back changes
    /// nothing.
    #[test]
    fn rendering_round_trips() {
        let defaults = Config::default();
        let mut config = Config::default();
        for d in all() {
            let text = d.render(&defaults);
            if d.name == "save" {
                let words: Vec<&[u8]> = text.split(' ').map(str::as_bytes).collect();
                d.apply(
                    &mut config,
                    &words,
                    &mut Phase::Loading { save_seen: false },
                )
            } else {
                d.apply(&mut config, &[text.as_bytes()], &mut Phase::Runtime)
            }
            .unwrap_or_else(|e| panic!("{}: {e}", d.name));
        }
        // Giving `io-threads`, even its default value, keeps it whatever `appendfsync`.
        assert!(!config.io_threads_auto);
        config.io_threads_auto = true;
        assert_eq!(config, defaults);
    }

    #[test]
    fn booleans() {
        let mut config = Config::default();
        set(&mut config, "protected-mode", "NO").expect("valid");
        assert_eq!(get(&config, "protected-mode"), "no");
        set(&mut config, "protected-mode", "Yes").expect("valid");
        assert_eq!(get(&config, "protected-mode"), "yes");
        assert_eq!(
            set_err("appendonly", "maybe"),
            "argument must be 'yes' or 'no'"
        );
        assert_eq!(set_err("dynamic-hz", "1"), "argument must be 'yes' or 'no'");
        set(&mut config, "daemonize", "no").expect("valid");
        assert!(set_err("daemonize", "yes").starts_with("daemonize yes is not supported"));
    }

    #[test]
    fn integers() {
        let mut config = Config::default();
        set(&mut config, "timeout", "300").expect("valid");
        assert_eq!(config.timeout, 300);
        for bad in ["abc", "05", "+5", " 5", "-0", "", "1e3"] {
            assert_eq!(
                set_err("port", bad),
                "argument couldn't be parsed into an integer",
                "{bad:?}"
            );
        }
        assert_eq!(
            set_err("port", "70000"),
            "argument must be between 0 and 65535 inclusive"
        );
        assert_eq!(
            set_err("maxclients", "0"),
            "argument must be between 1 and 4294967295 inclusive"
        );
        assert_eq!(
            set_err("hz", "-1"),
            "argument must be between 0 and 2147483647 inclusive"
        );
        // hz is clamped, not refused, as in Redis.
        set(&mut config, "hz", "0").expect("valid");
        assert_eq!(get(&config, "hz"), "1");
        set(&mut config, "hz", "1000").expect("valid");
        assert_eq!(get(&config, "hz"), "500");
        set(&mut config, "shards", "1024").expect("valid");
        assert_eq!(config.shards, 1024);
        assert_eq!(set_err("shards", "100"), "argument must be a power of two");
        assert_eq!(
            set_err("shards", "0"),
            "argument must be between 1 and 65536 inclusive"
        );
        assert_eq!(
            set_err("io-threads", "129"),
            "argument must be between 1 and 128 inclusive"
        );
    }

    #[test]
    fn memory_sizes_render_as_bytes() {
        let mut config = Config::default();
        for (text, bytes) in [
            ("1k", "1000"),
            ("1kb", "1024"),
            ("10GB", "10737418240"),
            ("05", "5"),
            ("", "0"),
        ] {
            set(&mut config, "maxmemory", text).expect("valid");
            assert_eq!(get(&config, "maxmemory"), bytes, "{text:?}");
        }
        for bad in ["abc", "1x", "-1", " 5", "+5", "1.5gb"] {
            assert_eq!(
                set_err("maxmemory", bad),
                "argument must be a memory value",
                "{bad:?}"
            );
        }
        assert_eq!(
            set_err("proto-max-bulk-len", "1000"),
            "argument must be between 1048576 and 9223372036854775807 inclusive"
        );
        assert_eq!(
            set_err("auto-aof-rewrite-min-size", "18446744073709551615"),
            "argument must be between 0 and 9223372036854775807 inclusive"
        );
        assert_eq!(
            set_err("auto-aof-rewrite-min-size", "-1"),
            "argument must be a memory value"
        );
    }

    #[test]
    fn enums() {
        let mut config = Config::default();
        set(&mut config, "loglevel", "Debug").expect("valid");
        assert_eq!(get(&config, "loglevel"), "debug");
        set(&mut config, "loglevel", "nothing").expect("valid");
        assert_eq!(config.loglevel, LogLevel::Nothing);
        set(&mut config, "maxmemory-policy", "ALLKEYS-LRU").expect("valid");
        assert_eq!(get(&config, "maxmemory-policy"), "allkeys-lru");
        assert_eq!(
            set_err("loglevel", "loud"),
            "argument(s) must be one of the following: debug, verbose, notice, warning, nothing"
        );
        assert_eq!(
            set_err("appendfsync", "sometimes"),
            "argument(s) must be one of the following: everysec, always, no"
        );
        assert_eq!(
            set_err("maxmemory-policy", "foo"),
            "argument(s) must be one of the following: volatile-lru, volatile-lfu, \
             volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction, \
             tiered"
        );
        assert_eq!(
            set_err("enable-debug-command", "foo"),
            "argument(s) must be one of the following: no, yes, local"
        );
    }

    #[test]
    fn strings() {
        let mut config = Config::default();
        set(&mut config, "requirepass", "secret").expect("valid");
        assert_eq!(config.requirepass.as_deref(), Some("secret"));
        set(&mut config, "requirepass", "").expect("valid");
        assert_eq!(config.requirepass, None);
        assert_eq!(get(&config, "requirepass"), "");
        set(&mut config, "pidfile", "/run/strata.pid").expect("valid");
        assert_eq!(config.pidfile, Some(PathBuf::from("/run/strata.pid")));
        set(&mut config, "logfile", "").expect("valid");
        assert_eq!(get(&config, "logfile"), "");
        assert_eq!(
            set_err("appendfilename", ""),
            "appendfilename can't be empty"
        );
        assert_eq!(
            set_err("appendfilename", "a/b"),
            "appendfilename can't be a path, just a filename"
        );
        assert_eq!(
            set_err("dbfilename", "a\\b"),
            "dbfilename can't be a path, just a filename"
        );
        assert_eq!(set_err("dbfilename", ""), "dbfilename can't be empty");
        // A missing directory is created (the default ./data must work anywhere); one
        // that cannot be created is an error.
        assert_eq!(
            set_err("dir", "/proc/strata-cannot-exist/x"),
            "No such file or directory"
        );
        let file = std::env::current_exe().expect("test binary path");
        assert_eq!(set_err("dir", &file.to_string_lossy()), "Not a directory");
        let bytes = lookup(b"requirepass").expect("known").apply(
            &mut config,
            &[b"\xff"],
            &mut Phase::Runtime,
        );
        assert_eq!(bytes, Err("argument must be valid UTF-8".to_owned()));
    }

    #[test]
    fn save() {
        let mut config = Config::default();
        assert_eq!(get(&config, "save"), "");
        set(&mut config, "save", "900 1 300 10").expect("valid");
        assert_eq!(get(&config, "save"), "900 1 300 10");
        set(&mut config, "save", "").expect("valid");
        assert_eq!(get(&config, "save"), "");
        // strtoll's leniency, as in Redis: a sign, and an empty word reading as 0.
        set(&mut config, "save", "+3600 1").expect("valid");
        assert_eq!(get(&config, "save"), "3600 1");
        set(&mut config, "save", "3600 ").expect("valid");
        assert_eq!(get(&config, "save"), "3600 0");
        set(&mut config, "save", "99999999999999999999 1").expect("valid");
        assert_eq!(get(&config, "save"), "9223372036854775807 1");
        for bad in ["3600", "3600  1", " 3600 1", "0 1", "1 -1", "abc", "1x 1"] {
            assert_eq!(set_err("save", bad), "Invalid save parameters", "{bad:?}");
        }
    }

    #[test]
    fn bind() {
        let mut config = Config::default();
        assert_eq!(get(&config, "bind"), "127.0.0.1 -::1");
        assert_eq!(
            config.bind[1],
            BindAddr {
                host: "::1".into(),
                optional: true
            }
        );
        set(&mut config, "bind", "* -::*").expect("valid");
        assert_eq!(get(&config, "bind"), "* -::*");
        set(&mut config, "bind", "").expect("valid");
        assert!(config.bind.is_empty());
        assert_eq!(
            set_err("bind", "127.0.0.1  -::1"),
            "Failed to bind to specified addresses."
        );
        assert_eq!(
            set_err("bind", "-"),
            "Failed to bind to specified addresses."
        );
        let seventeen = (1..=17)
            .map(|i| format!("10.0.0.{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            set_err("bind", &seventeen),
            "Too many bind addresses specified."
        );
        let sixteen = (1..=16)
            .map(|i| format!("10.0.0.{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        set(&mut config, "bind", &sixteen).expect("valid");
        assert_eq!(config.bind.len(), 16);
    }

    #[test]
    fn client_output_buffer_limit() {
        let mut config = Config::default();
        let name = "client-output-buffer-limit";
        assert_eq!(
            get(&config, name),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        set(&mut config, name, "normal 1kb 2mb 3").expect("valid");
        assert_eq!(
            get(&config, name),
            "normal 1024 2097152 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        set(&mut config, name, "replica 1 2 3 PUBSUB 4 5 6").expect("valid");
        assert_eq!(
            get(&config, name),
            "normal 1024 2097152 3 slave 1 2 3 pubsub 4 5 6"
        );
        // The last group for a class wins; an empty seconds word reads as 0.
        set(&mut config, name, "normal 1 2 3 normal 4 5 6 slave 1 2 ").expect("valid");
        assert_eq!(get(&config, name), "normal 4 5 6 slave 1 2 0 pubsub 4 5 6");
        set(&mut config, name, "").expect("valid");
        assert_eq!(get(&config, name), "normal 4 5 6 slave 1 2 0 pubsub 4 5 6");
        assert_eq!(
            config.output_buffer_limit(ClientClass::Pubsub).soft_seconds,
            6
        );
        assert_eq!(
            set_err(name, "normal 0 0"),
            "Wrong number of arguments in buffer limit configuration."
        );
        assert_eq!(
            set_err(name, "master 0 0 0"),
            "Invalid client class specified in buffer limit configuration."
        );
        for bad in [
            "normal 0 x 0",
            "normal x 0 0",
            "slave 1 2 -3",
            "slave 1 2 x",
        ] {
            assert_eq!(
                set_err(name, bad),
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
                "{bad:?}"
            );
        }
        // Nothing is applied when a later group is wrong.
        let before = config.clone();
        assert!(set(&mut config, name, "normal 9 9 9 foo 1 1 1").is_err());
        assert_eq!(config, before);
    }
}
