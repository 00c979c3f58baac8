//! INFO: the server's state as Redis's sections and field names, so that tools
//! which parse INFO work unchanged.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use strata_commands::{KeyspaceSummary, Server};

use crate::state::{ServerState, unix_ms};

const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Renders the requested sections (Redis 7.0's selection rules: none means the
/// default sections, "all" adds commandstats and latencystats, "everything" is all of
/// them).
pub fn render(state: &ServerState, requested: &[&[u8]], ks: &KeyspaceSummary) -> String {
    let mut wanted: Vec<&str> = Vec::new();
    if requested.is_empty() {
        wanted.extend(DEFAULT_SECTIONS);
    }
    for r in requested {
        let r = String::from_utf8_lossy(r).to_ascii_lowercase();
        match r.as_str() {
            "default" => wanted.extend(DEFAULT_SECTIONS),
            "all" | "everything" => {
                wanted.extend(DEFAULT_SECTIONS);
                wanted.push("commandstats");
                wanted.push("latencystats");
            }
            other => {
                if let Some(s) = SECTIONS.iter().find(|s| **s == other) {
                    wanted.push(s);
                }
            }
        }
    }
    let mut out = String::new();
    for name in SECTIONS {
        if !wanted.contains(name) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        section(state, ks, name, &mut out);
    }
    out
}

const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
];

macro_rules! field {
    ($out:expr, $name:expr, $($arg:tt)*) => {{
        let _ = write!($out, "{}:", $name);
        let _ = write!($out, $($arg)*);
        $out.push_str("\r\n");
    }};
}

fn title(out: &mut String, title: &str) {
    let _ = write!(out, "# {title}\r\n");
}

fn section(state: &ServerState, ks: &KeyspaceSummary, name: &str, out: &mut String) {
    match name {
        "server" => server(state, out),
        "clients" => clients(state, out),
        "memory" => memory(state, out, ks),
        "persistence" => persistence(state, out),
        "stats" => stats(state, ks, out),
        "replication" => replication(state, out),
        "cpu" => cpu(out),
        "modules" => title(out, "Modules"),
        "errorstats" => errorstats(state, out),
        "cluster" => {
            title(out, "Cluster");
            field!(out, "cluster_enabled", "0");
        }
        "keyspace" => keyspace(ks, out),
        "commandstats" => commandstats(state, out),
        "latencystats" => latencystats(state, out),
        _ => {}
    }
}

fn server(state: &ServerState, out: &mut String) {
    let cfg = state.config.read();
    let now = unix_ms();
    let uptime = state.started.elapsed().as_secs();
    title(out, "Server");
    field!(
        out,
        "redis_version",
        "{}",
        strata_commands::families::connection::REDIS_VERSION
    );
    field!(out, "strata_version", "{}", env!("CARGO_PKG_VERSION"));
    field!(out, "redis_git_sha1", "00000000");
    field!(out, "redis_git_dirty", "0");
    field!(out, "redis_mode", "standalone");
    field!(
        out,
        "os",
        "{} {}",
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    field!(out, "arch_bits", "{}", usize::BITS);
    field!(out, "multiplexing_api", "epoll");
    field!(out, "process_id", "{}", std::process::id());
    field!(out, "process_supervised", "no");
    field!(out, "run_id", "{}", state.run_id);
    field!(
        out,
        "tcp_port",
        "{}",
        state.tcp_port.load(Ordering::Relaxed)
    );
    field!(out, "server_time_usec", "{}", now * 1000);
    field!(out, "uptime_in_seconds", "{uptime}");
    field!(out, "uptime_in_days", "{}", uptime / 86400);
    field!(out, "hz", "{}", cfg.hz);
    field!(out, "configured_hz", "{}", cfg.hz);
    field!(out, "lru_clock", "{}", (now / 1000) & ((1 << 24) - 1));
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    field!(out, "executable", "{exe}");
    let file = state
        .source
        .file
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    field!(out, "config_file", "{file}");
    field!(out, "io_threads_active", "{}", (cfg.io_threads > 1) as u8);
}

fn clients(state: &ServerState, out: &mut String) {
    let cfg = state.config.read();
    title(out, "Clients");
    field!(
        out,
        "connected_clients",
        "{}",
        state.connected.load(Ordering::Relaxed)
    );
    field!(out, "cluster_connections", "0");
    field!(out, "maxclients", "{}", cfg.maxclients);
    field!(out, "client_recent_max_input_buffer", "0");
    let max_output = state
        .clients()
        .iter()
        .map(|c| c.pending_output())
        .max()
        .unwrap_or(0);
    field!(out, "client_recent_max_output_buffer", "{max_output}");
    field!(
        out,
        "blocked_clients",
        "{}",
        state.blocking.blocked() + state.pause.waiting.load(Ordering::Relaxed)
    );
    field!(
        out,
        "tracking_clients",
        "{}",
        state.pubsub.tracking.active()
    );
    field!(out, "clients_in_timeout_table", "0");
}

/// Bytes with Redis's human-readable suffixes (B, K, M, G, T, P).
pub fn human_bytes(n: u64) -> String {
    let n = n as f64;
    let units = ["K", "M", "G", "T", "P"];
    if n < 1024.0 {
        return format!("{}B", n as u64);
    }
    let mut v = n / 1024.0;
    for u in units {
        if v < 1024.0 || u == "P" {
            return format!("{v:.2}{u}");
        }
        v /= 1024.0;
    }
    format!("{v:.2}P")
}

/// Resident set size of this process, from /proc.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn total_system_memory() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// strata's own fields for `maxmemory-policy tiered`: values kept only on disk and
/// their bytes, values moved out since start, values read back (and those of them
/// handed to the blocking-I/O pool because they were not cached) and their bytes, and the share of the keys commands touched that were found in memory while
/// values were out.
fn tiered(state: &ServerState, out: &mut String) {
    let t = &state.tiered;
    let reads = t.disk_reads.load(Ordering::Relaxed);
    let hits = t.ram_hits.load(Ordering::Relaxed);
    field!(
        out,
        "tiered_keys",
        "{}",
        strata_keyspace::value::cold_keys()
    );
    field!(
        out,
        "tiered_bytes",
        "{}",
        strata_keyspace::value::cold_bytes()
    );
    field!(
        out,
        "tiered_moved_out",
        "{}",
        state.eviction.tiered_out.load(Ordering::Relaxed)
    );
    field!(out, "tiered_disk_reads", "{reads}");
    field!(
        out,
        "tiered_deferred_reads",
        "{}",
        t.deferred_reads.load(Ordering::Relaxed)
    );
    field!(
        out,
        "tiered_disk_read_bytes",
        "{}",
        t.disk_read_bytes.load(Ordering::Relaxed)
    );
    let seen = hits + reads;
    let hit_ratio = if seen == 0 {
        1.0
    } else {
        hits as f64 / seen as f64
    };
    field!(out, "tiered_ram_hit_ratio", "{hit_ratio:.4}");
}

fn memory(state: &ServerState, out: &mut String, ks: &KeyspaceSummary) {
    let r = crate::memory::report(state);
    let o = strata_commands::families::memory::overhead(&r, ks);
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let (used, rss, peak) = (r.total, r.rss, r.peak);
    let cfg = state.config.read();
    title(out, "Memory");
    field!(out, "used_memory", "{used}");
    field!(out, "used_memory_human", "{}", human_bytes(used));
    field!(out, "used_memory_rss", "{rss}");
    field!(out, "used_memory_rss_human", "{}", human_bytes(rss));
    field!(out, "used_memory_peak", "{peak}");
    field!(out, "used_memory_peak_human", "{}", human_bytes(peak));
    let perc = if peak > 0 {
        ratio(used * 100, peak)
    } else {
        100.0
    };
    field!(out, "used_memory_peak_perc", "{perc:.2}%");
    field!(out, "used_memory_overhead", "{}", o.total);
    field!(out, "used_memory_startup", "{}", r.startup);
    field!(out, "used_memory_dataset", "{}", o.dataset);
    field!(out, "used_memory_dataset_perc", "{:.2}%", o.dataset_perc);
    field!(out, "allocator_allocated", "{used}");
    field!(out, "allocator_active", "{}", r.allocator_active);
    field!(out, "allocator_resident", "{}", r.allocator_resident);
    let total = total_system_memory();
    field!(out, "total_system_memory", "{total}");
    field!(out, "total_system_memory_human", "{}", human_bytes(total));
    scripting_memory(state, out);
    field!(out, "maxmemory", "{}", cfg.maxmemory);
    field!(out, "maxmemory_human", "{}", human_bytes(cfg.maxmemory));
    field!(out, "maxmemory_policy", "{}", cfg.maxmemory_policy.name());
    tiered(state, out);
    field!(
        out,
        "allocator_frag_ratio",
        "{:.2}",
        ratio(r.allocator_active, used)
    );
    field!(
        out,
        "allocator_frag_bytes",
        "{}",
        r.allocator_active.saturating_sub(used)
    );
    field!(
        out,
        "allocator_rss_ratio",
        "{:.2}",
        ratio(r.allocator_resident, r.allocator_active)
    );
    field!(
        out,
        "allocator_rss_bytes",
        "{}",
        r.allocator_resident.saturating_sub(r.allocator_active)
    );
    field!(
        out,
        "rss_overhead_ratio",
        "{:.2}",
        ratio(rss, r.allocator_resident)
    );
    field!(
        out,
        "rss_overhead_bytes",
        "{}",
        rss.saturating_sub(r.allocator_resident)
    );
    field!(out, "mem_fragmentation_ratio", "{:.2}", ratio(rss, used));
    field!(
        out,
        "mem_fragmentation_bytes",
        "{}",
        rss as i64 - used as i64
    );
    field!(
        out,
        "mem_not_counted_for_evict",
        "{}",
        r.not_counted_for_evict
    );
    field!(out, "mem_replication_backlog", "0");
    field!(out, "mem_total_replication_buffers", "0");
    field!(out, "mem_clients_slaves", "0");
    field!(out, "mem_clients_normal", "{}", r.clients_normal);
    field!(out, "mem_cluster_links", "0");
    field!(out, "mem_aof_buffer", "0");
    field!(out, "mem_allocator", "{}", crate::memory::ALLOCATOR);
    field!(out, "active_defrag_running", "0");
    field!(
        out,
        "lazyfree_pending_objects",
        "{}",
        state.lazyfree.pending()
    );
    field!(out, "lazyfreed_objects", "{}", state.lazyfree.freed());
}

/// The scripting figures of INFO memory, in Redis 7.0's names and order: the Lua
/// interpreters' memory (EVAL and FUNCTION ones), the cached scripts and the
/// function libraries.
fn scripting_memory(state: &ServerState, out: &mut String) {
    let engine = &state.scripting;
    let (vm_eval, vm_functions) = engine.vm_memory();
    let scripts_eval = engine.scripts_memory();
    let (functions, libraries, functions_memory) = {
        let libs = engine.libraries.read();
        let bytes: usize = libs.libs.values().map(|l| l.code.len() + 64).sum();
        (libs.function_count(), libs.libs.len(), bytes)
    };
    field!(out, "used_memory_lua", "{vm_eval}");
    field!(out, "used_memory_vm_eval", "{vm_eval}");
    field!(
        out,
        "used_memory_lua_human",
        "{}",
        human_bytes(vm_eval as u64)
    );
    field!(out, "used_memory_scripts_eval", "{scripts_eval}");
    field!(out, "number_of_cached_scripts", "{}", engine.script_count());
    field!(out, "number_of_functions", "{functions}");
    field!(out, "number_of_libraries", "{libraries}");
    field!(out, "used_memory_vm_functions", "{vm_functions}");
    let vm_total = vm_eval + vm_functions;
    field!(out, "used_memory_vm_total", "{vm_total}");
    field!(
        out,
        "used_memory_vm_total_human",
        "{}",
        human_bytes(vm_total as u64)
    );
    field!(out, "used_memory_functions", "{functions_memory}");
    let scripts = scripts_eval + functions_memory;
    field!(out, "used_memory_scripts", "{scripts}");
    field!(
        out,
        "used_memory_scripts_human",
        "{}",
        human_bytes(scripts as u64)
    );
}

fn persistence(state: &ServerState, out: &mut String) {
    use crate::persist::control::JobKind;
    let control = &state.persistence;
    let loading = state.loading.load(Ordering::Acquire);
    let running = control.running();
    let saving = matches!(running, Some((JobKind::Save, _)));
    let rewriting =
        matches!(running, Some((JobKind::Rewrite, _))) || control.enabling.load(Ordering::Acquire);
    let store = state.persist.load_full();
    let ok = |b: bool| if b { "ok" } else { "err" };
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let load_i = |a: &std::sync::atomic::AtomicI64| a.load(Ordering::Relaxed);
    title(out, "Persistence");
    field!(out, "loading", "{}", u8::from(loading));
    field!(out, "async_loading", "0");
    field!(out, "current_cow_peak", "0");
    field!(out, "current_cow_size", "0");
    field!(out, "current_cow_size_age", "0");
    field!(out, "current_fork_perc", "0.00");
    field!(out, "current_save_keys_processed", "0");
    field!(out, "current_save_keys_total", "0");
    field!(
        out,
        "rdb_changes_since_last_save",
        "{}",
        state
            .stats
            .dirty()
            .saturating_sub(load(&control.dirty_at_save))
    );
    field!(out, "rdb_bgsave_in_progress", "{}", u8::from(saving));
    field!(
        out,
        "rdb_last_save_time",
        "{}",
        load(&control.last_save_unix)
    );
    field!(
        out,
        "rdb_last_bgsave_status",
        "{}",
        ok(control.last_bgsave_ok.load(Ordering::Relaxed))
    );
    field!(
        out,
        "rdb_last_bgsave_time_sec",
        "{}",
        load_i(&control.last_bgsave_secs)
    );
    let current = |kind: JobKind| match running {
        Some((k, secs)) if k == kind => secs as i64,
        _ => -1,
    };
    field!(
        out,
        "rdb_current_bgsave_time_sec",
        "{}",
        current(JobKind::Save)
    );
    field!(out, "rdb_saves", "{}", load(&control.saves));
    field!(out, "rdb_last_cow_size", "0");
    field!(
        out,
        "rdb_last_load_keys_expired",
        "{}",
        load(&control.loaded_expired)
    );
    field!(
        out,
        "rdb_last_load_keys_loaded",
        "{}",
        load(&control.loaded_keys)
    );
    field!(
        out,
        "aof_enabled",
        "{}",
        u8::from(state.config.read().appendonly)
    );
    field!(out, "aof_rewrite_in_progress", "{}", u8::from(rewriting));
    field!(
        out,
        "aof_rewrite_scheduled",
        "{}",
        u8::from(control.rewrite_scheduled.load(Ordering::Relaxed))
    );
    field!(
        out,
        "aof_last_rewrite_time_sec",
        "{}",
        load_i(&control.last_rewrite_secs)
    );
    field!(
        out,
        "aof_current_rewrite_time_sec",
        "{}",
        current(JobKind::Rewrite)
    );
    field!(
        out,
        "aof_last_bgrewrite_status",
        "{}",
        ok(control.last_rewrite_ok.load(Ordering::Relaxed))
    );
    field!(out, "aof_rewrites", "{}", load(&control.rewrites));
    field!(
        out,
        "aof_rewrites_consecutive_failures",
        "{}",
        load(&control.rewrite_failures)
    );
    let write_ok = store.as_ref().is_none_or(|p| p.write_error().is_none());
    field!(out, "aof_last_write_status", "{}", ok(write_ok));
    field!(out, "aof_last_cow_size", "0");
    field!(out, "module_fork_in_progress", "0");
    field!(out, "module_fork_last_cow_size", "0");
    if let Some(p) = &store {
        field!(out, "aof_current_size", "{}", p.current_size());
        field!(out, "aof_base_size", "{}", load(&p.stats.base_size));
        field!(out, "aof_pending_rewrite", "0");
        field!(out, "aof_buffer_length", "0");
        field!(
            out,
            "aof_pending_bio_fsync",
            "{}",
            u8::from(!p.fully_synced())
        );
        field!(out, "aof_delayed_fsync", "0");
    }
    if loading {
        let started = load(&control.loading_started);
        let total = load(&control.loading_total);
        let done = load(&control.loading_done).min(total);
        let perc = if total == 0 {
            0.0
        } else {
            done as f64 * 100.0 / total as f64
        };
        let elapsed = (crate::state::unix_ms() / 1000).saturating_sub(started);
        let eta = if done == 0 {
            1
        } else {
            ((total - done) as f64 / (done as f64 / elapsed.max(1) as f64)) as u64
        };
        field!(out, "loading_start_time", "{started}");
        field!(out, "loading_total_bytes", "{total}");
        field!(out, "loading_rdb_used_mem", "0");
        field!(out, "loading_loaded_bytes", "{done}");
        field!(out, "loading_loaded_perc", "{perc:.2}");
        field!(out, "loading_eta_seconds", "{eta}");
    }
}

fn stats(state: &ServerState, ks: &KeyspaceSummary, out: &mut String) {
    let st = &state.stats;
    let (hits, misses, expired) = (ks.hits, ks.misses, ks.expired);
    title(out, "Stats");
    field!(
        out,
        "total_connections_received",
        "{}",
        st.connections_received.load(Ordering::Relaxed)
    );
    field!(
        out,
        "total_commands_processed",
        "{}",
        st.commands_processed()
    );
    field!(
        out,
        "instantaneous_ops_per_sec",
        "{}",
        st.instantaneous_ops()
    );
    field!(out, "total_net_input_bytes", "{}", st.net_input());
    field!(out, "total_net_output_bytes", "{}", st.net_output());
    field!(
        out,
        "rejected_connections",
        "{}",
        st.rejected_connections.load(Ordering::Relaxed)
    );
    field!(out, "sync_full", "0");
    field!(out, "sync_partial_ok", "0");
    field!(out, "sync_partial_err", "0");
    field!(out, "expired_keys", "{expired}");
    field!(
        out,
        "evicted_keys",
        "{}",
        state.eviction.evicted_keys.load(Ordering::Relaxed)
    );
    field!(out, "evicted_clients", "0");
    field!(out, "keyspace_hits", "{hits}");
    field!(out, "keyspace_misses", "{misses}");
    field!(out, "pubsub_channels", "0");
    field!(out, "pubsub_patterns", "0");
    field!(out, "latest_fork_usec", "0");
    field!(out, "total_forks", "0");
    field!(out, "total_error_replies", "{}", st.error_replies());
}

fn replication(state: &ServerState, out: &mut String) {
    title(out, "Replication");
    field!(out, "role", "master");
    field!(out, "connected_slaves", "0");
    field!(out, "master_failover_state", "no-failover");
    field!(out, "master_replid", "{}", state.run_id);
    field!(
        out,
        "master_replid2",
        "0000000000000000000000000000000000000000"
    );
    field!(out, "master_repl_offset", "0");
    field!(out, "second_repl_offset", "-1");
    field!(out, "repl_backlog_active", "0");
    field!(out, "repl_backlog_size", "1048576");
    field!(out, "repl_backlog_first_byte_offset", "0");
    field!(out, "repl_backlog_histlen", "0");
}

/// User and system CPU seconds of this process, from /proc (clock ticks of 1/100 s).
fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 100.0
    };
    // utime and stime are the 14th and 15th fields; `rest` starts at the 3rd.
    (ticks(11), ticks(12))
}

fn cpu(out: &mut String) {
    let (user, sys) = cpu_seconds();
    title(out, "CPU");
    field!(out, "used_cpu_sys", "{sys:.6}");
    field!(out, "used_cpu_user", "{user:.6}");
    field!(out, "used_cpu_sys_children", "0.000000");
    field!(out, "used_cpu_user_children", "0.000000");
}

fn errorstats(state: &ServerState, out: &mut String) {
    title(out, "Errorstats");
    for (prefix, count) in state.error_counts() {
        field!(out, format!("errorstat_{prefix}"), "count={count}");
    }
}

fn keyspace(ks: &KeyspaceSummary, out: &mut String) {
    title(out, "Keyspace");
    for (i, (&keys, &expires)) in ks.keys.iter().zip(&ks.expires).enumerate() {
        if keys > 0 {
            field!(
                out,
                format!("db{i}"),
                "keys={keys},expires={expires},avg_ttl=0"
            );
        }
    }
}

fn commandstats(state: &ServerState, out: &mut String) {
    title(out, "Commandstats");
    let registry = state.registry();
    let mut rows: Vec<(String, crate::stats::CommandTotals)> = (0..registry.id_count())
        .filter_map(|id| {
            let t = state.stats.command(id);
            let cmd = registry.by_id(id)?;
            (t.calls > 0 || t.rejected > 0 || t.failed > 0).then(|| (cmd.full_name(), t))
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, t) in rows {
        let per_call = if t.calls > 0 {
            t.usec as f64 / t.calls as f64
        } else {
            0.0
        };
        field!(
            out,
            format!("cmdstat_{name}"),
            "calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}",
            t.calls,
            t.usec,
            t.rejected,
            t.failed
        );
    }
}

/// The percentiles INFO latencystats reports (Redis's default
/// `latency-tracking-info-percentiles`).
const LATENCY_PERCENTILES: &[(f64, &str)] = &[(50.0, "p50"), (99.0, "p99"), (99.9, "p99.9")];

fn latencystats(state: &ServerState, out: &mut String) {
    title(out, "Latencystats");
    let registry = state.registry();
    let wanted: Vec<f64> = LATENCY_PERCENTILES.iter().map(|(p, _)| *p).collect();
    let mut rows: Vec<(String, Vec<f64>)> = (0..registry.id_count())
        .filter_map(|id| {
            let values = state.stats.latency_percentiles(id, &wanted)?;
            Some((registry.by_id(id)?.full_name(), values))
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, values) in rows {
        let parts: Vec<String> = LATENCY_PERCENTILES
            .iter()
            .zip(values)
            .map(|((_, label), v)| format!("{label}={v:.3}"))
            .collect();
        field!(
            out,
            format!("latency_percentiles_usec_{name}"),
            "{}",
            parts.join(",")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(0), "0B");
        assert_eq!(human_bytes(1023), "1023B");
        assert_eq!(human_bytes(1024), "1.00K");
        assert_eq!(human_bytes(1536 * 1024), "1.50M");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024), "3.00G");
    }
}
