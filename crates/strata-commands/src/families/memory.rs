//! MEMORY: what a key costs, what the server holds, and Redis's memory doctor.
//!
//! The figures follow Redis 7.0's `getMemoryOverheadData`: the overhead is the
//! memory at start-up, the clients' buffers and each database's tables (slots and
//! per-key entries, and the expiry index); the dataset is the rest of what the
//! allocator holds. The allocator's own figures (active, resident) and the process's
//! RSS give the fragmentation ratios.

use strata_keyspace::Entry;

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};
use crate::server::{KeyspaceSummary, MemoryReport};
use crate::spec::{Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const SERVER: Command = Command {
    group: Group::Server,
    since: "4.0.0",
    ..Command::DEFAULT
};

const ALL_SHARDS_SPECIAL: &[&str] = &[
    "nondeterministic_output",
    "request_policy:all_shards",
    "response_policy:special",
];

pub const COMMANDS: &[Command] = &[Command {
    name: "memory",
    arity: -2,
    summary: "A container for memory diagnostics commands.",
    complexity: "Depends on subcommand.",
    subcommands: &[
        Command {
            name: "usage",
            arity: -3,
            flags: flags!(READONLY),
            acl: acl!(),
            key_specs: &[KeySpec::single(2, kf!(RO))],
            summary: "Estimates the memory usage of a key.",
            complexity: "O(N) where N is the number of samples.",
            handler: Some(usage),
            ..SERVER
        },
        Command {
            name: "stats",
            arity: 2,
            tips: ALL_SHARDS_SPECIAL,
            summary: "Returns details about memory usage.",
            complexity: "O(1)",
            handler: Some(stats),
            touches_all: true,
            ..SERVER
        },
        Command {
            name: "doctor",
            arity: 2,
            tips: ALL_SHARDS_SPECIAL,
            summary: "Outputs a memory problems report.",
            complexity: "O(1)",
            handler: Some(doctor),
            ..SERVER
        },
        Command {
            name: "malloc-stats",
            arity: 2,
            tips: ALL_SHARDS_SPECIAL,
            summary: "Returns the allocator statistics.",
            complexity: "Depends on how much memory is allocated, could be slow",
            handler: Some(malloc_stats),
            ..SERVER
        },
        Command {
            name: "purge",
            arity: 2,
            tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
            summary: "Asks the allocator to release memory.",
            complexity: "Depends on how much memory is allocated, could be slow",
            handler: Some(purge),
            ..SERVER
        },
        Command {
            name: "help",
            arity: 2,
            flags: flags!(LOADING, STALE),
            summary: "Returns helpful text about the different subcommands.",
            complexity: "O(1)",
            handler: Some(help),
            ..SERVER
        },
    ],
    ..SERVER
}];

/// MEMORY USAGE key [SAMPLES count]: the bytes the key holds — its entry, its key and
/// its value's allocations, and its share of the table's slots. Values keep their
/// exact size, so SAMPLES is checked but not needed.
fn usage(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        if is(args[i], "samples") && i + 1 < args.len() {
            if parse::int(args[i + 1])? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(args[2]);
    let slot_share = db.table_bytes().checked_div(db.len()).unwrap_or(0);
    match db.get(hash, args[2], now) {
        Some(e) => ctx.out.integer((e.memory_usage() + slot_share) as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

/// Bytes per key with a TTL in a database's expiry index (an ordered map entry of
/// expiry, hash and count, with its share of the tree's nodes).
const EXPIRY_INDEX_ENTRY: usize = 40;

/// The memory figures Redis's MEMORY STATS and INFO memory derive from the
/// server's report and the keyspace.
#[derive(Clone, Debug, Default)]
pub struct Overhead {
    /// Per database with keys: (index, main table bytes, expiry index bytes).
    pub dbs: Vec<(usize, u64, u64)>,
    pub total: u64,
    pub keys: u64,
    pub dataset: u64,
    pub dataset_perc: f32,
    pub bytes_per_key: u64,
}

/// Computes the overhead and dataset as Redis's `getMemoryOverheadData` does.
pub fn overhead(report: &MemoryReport, ks: &KeyspaceSummary) -> Overhead {
    let mut o = Overhead {
        total: report.startup + report.clients_normal + report.not_counted_for_evict,
        ..Default::default()
    };
    for (i, &keys) in ks.keys.iter().enumerate() {
        if keys == 0 {
            continue;
        }
        let main = ks.table_bytes.get(i).copied().unwrap_or(0) + keys * size_of::<Entry>();
        let expires = ks.expires.get(i).copied().unwrap_or(0) * EXPIRY_INDEX_ENTRY;
        o.dbs.push((i, main as u64, expires as u64));
        o.total += (main + expires) as u64;
        o.keys += keys as u64;
    }
    o.dataset = report.total.saturating_sub(o.total);
    let net = report.total.saturating_sub(report.startup).max(1);
    o.dataset_perc = (o.dataset as f64 * 100.0 / net as f64) as f32;
    o.bytes_per_key = net.checked_div(o.keys).unwrap_or(0);
    o
}

fn summary(ctx: &mut Ctx) -> KeyspaceSummary {
    let dbs = ctx.server.databases();
    let mut summary = KeyspaceSummary {
        keys: vec![0; dbs],
        expires: vec![0; dbs],
        table_bytes: vec![0; dbs],
        ..Default::default()
    };
    ctx.keys.for_each_shard(|shard| {
        for (i, db) in shard.dbs().iter().enumerate() {
            summary.keys[i] += db.len();
            summary.expires[i] += db.expires_len();
            summary.table_bytes[i] += db.table_bytes();
        }
    });
    summary
}

fn ratio(a: u64, b: u64) -> f32 {
    if b == 0 {
        0.0
    } else {
        (a as f64 / b as f64) as f32
    }
}

/// MEMORY STATS: Redis 7.0's fields, in its order.
fn stats(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let report = ctx.server.memory_report();
    let ks = summary(ctx);
    let o = overhead(&report, &ks);
    let r = &report;
    let out = &mut ctx.out;
    out.map(27 + o.dbs.len());
    let int = |out: &mut strata_resp::ReplyWriter, name: &str, v: u64| {
        out.bulk(name.as_bytes());
        out.integer(v as i64);
    };
    let float = |out: &mut strata_resp::ReplyWriter, name: &str, v: f32| {
        out.bulk(name.as_bytes());
        out.double(f64::from(v));
    };
    int(out, "peak.allocated", r.peak);
    int(out, "total.allocated", r.total);
    int(out, "startup.allocated", r.startup);
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", r.clients_normal);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", r.not_counted_for_evict);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    for &(i, main, expires) in &o.dbs {
        out.bulk(format!("db.{i}").as_bytes());
        out.map(2);
        int(out, "overhead.hashtable.main", main);
        int(out, "overhead.hashtable.expires", expires);
    }
    int(out, "overhead.total", o.total);
    int(out, "keys.count", o.keys);
    int(out, "keys.bytes-per-key", o.bytes_per_key);
    int(out, "dataset.bytes", o.dataset);
    float(out, "dataset.percentage", o.dataset_perc);
    float(out, "peak.percentage", ratio(r.total * 100, r.peak));
    int(out, "allocator.allocated", r.total);
    int(out, "allocator.active", r.allocator_active);
    int(out, "allocator.resident", r.allocator_resident);
    float(
        out,
        "allocator-fragmentation.ratio",
        ratio(r.allocator_active, r.total),
    );
    int(
        out,
        "allocator-fragmentation.bytes",
        r.allocator_active.saturating_sub(r.total),
    );
    float(
        out,
        "allocator-rss.ratio",
        ratio(r.allocator_resident, r.allocator_active),
    );
    int(
        out,
        "allocator-rss.bytes",
        r.allocator_resident.saturating_sub(r.allocator_active),
    );
    float(
        out,
        "rss-overhead.ratio",
        ratio(r.rss, r.allocator_resident),
    );
    int(
        out,
        "rss-overhead.bytes",
        r.rss.saturating_sub(r.allocator_resident),
    );
    float(out, "fragmentation", ratio(r.rss, r.total));
    int(out, "fragmentation.bytes", r.rss.saturating_sub(r.total));
    Ok(())
}

/// MEMORY DOCTOR: Redis's report, from the same figures and thresholds.
fn doctor(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let r = ctx.server.memory_report();
    let text = doctor_report(&r);
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

/// The memory doctor's text for these figures.
pub fn doctor_report(r: &MemoryReport) -> String {
    const MB10: u64 = 10 << 20;
    if r.total < 5 * 1024 * 1024 {
        return "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".into();
    }
    let big_peak = ratio(r.peak, r.total) > 1.5;
    let high_frag = ratio(r.rss, r.total) > 1.4 && r.rss.saturating_sub(r.total) > MB10;
    let high_alloc_frag = ratio(r.allocator_active, r.total) > 1.1
        && r.allocator_active.saturating_sub(r.total) > MB10;
    let high_alloc_rss = ratio(r.allocator_resident, r.allocator_active) > 1.1
        && r.allocator_resident.saturating_sub(r.allocator_active) > MB10;
    let high_proc_rss = ratio(r.rss, r.allocator_resident) > 1.1
        && r.rss.saturating_sub(r.allocator_resident) > MB10;
    let big_client_buf = r.clients_normal.checked_div(r.clients).unwrap_or(0) > 1024 * 200;
    let mut s = String::new();
    if big_peak {
        s.push_str(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
    }
    if high_frag {
        s.push_str(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"jemalloc-5.3.0\".\n\n");
    }
    if high_alloc_frag {
        s.push_str(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n");
    }
    if high_alloc_rss {
        s.push_str(" * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n");
    }
    if high_proc_rss {
        s.push_str(" * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n");
    }
    if big_client_buf {
        s.push_str(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
    }
    if s.is_empty() {
        return "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n".into();
    }
    format!(
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n{s}I'm here to keep you safe, Sam. I want to help you.\n"
    )
}

/// MEMORY MALLOC-STATS: the allocator's figures, or Redis's text when it has none.
fn malloc_stats(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let text = ctx
        .server
        .malloc_stats()
        .unwrap_or_else(|| "Stats not supported for the current allocator".into());
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

/// MEMORY PURGE: the allocator's dirty pages go back to the system now, not after
/// its decay time; Redis's error if it refuses.
fn purge(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    if !ctx.server.purge_memory() {
        return Err(CmdError::err("Error purging dirty pages"));
    }
    ctx.out.ok();
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doctor_texts_by_condition() {
        let small = MemoryReport {
            total: 1 << 20,
            ..Default::default()
        };
        assert!(doctor_report(&small).starts_with("Hi Sam, this instance is empty"));
        let healthy = MemoryReport {
            total: 100 << 20,
            peak: 110 << 20,
            allocator_active: 101 << 20,
            allocator_resident: 102 << 20,
            rss: 104 << 20,
            clients: 1,
            ..Default::default()
        };
        assert!(doctor_report(&healthy).starts_with("Hi Sam, I can't find any memory issue"));
        let peaked = MemoryReport {
            peak: 400 << 20,
            rss: 300 << 20,
            ..healthy
        };
        let text = doctor_report(&peaked);
        assert!(text.starts_with("Sam, I detected a few issues"));
        assert!(text.contains(" * Peak memory:"));
        assert!(text.contains(" * High total RSS:"));
        assert!(text.ends_with("I want to help you.\n"));
    }

    #[test]
    fn overhead_and_dataset() {
        let report = MemoryReport {
            total: 10_000_000,
            startup: 1_000_000,
            ..Default::default()
        };
        let ks = KeyspaceSummary {
            keys: vec![1000, 0],
            expires: vec![10, 0],
            table_bytes: vec![20_000, 0],
            ..Default::default()
        };
        let o = overhead(&report, &ks);
        assert_eq!(o.dbs.len(), 1);
        assert_eq!(o.keys, 1000);
        assert_eq!(o.bytes_per_key, 9000);
        assert_eq!(o.dataset, report.total - o.total);
        assert!(o.dataset_perc > 0.0 && o.dataset_perc < 100.0);
    }
}
