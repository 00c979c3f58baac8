//! Server commands: INFO, DBSIZE, FLUSHDB, FLUSHALL, TIME, CONFIG, SHUTDOWN, DEBUG,
//! and the persistence commands SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::is;
use crate::server::{KeyspaceSummary, ShutdownMode};
use crate::spec::Group;
use crate::table::Command;
use crate::{acl, flags};

const SERVER: Command = Command {
    group: Group::Server,
    ..Command::DEFAULT
};

const CONFIG_SUB: Command = Command {
    flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE),
    since: "2.0.0",
    complexity: "O(N) when path is `*` (entire config), O(1) otherwise.",
    ..SERVER
};

pub const COMMANDS: &[Command] = &[
    Command {
        name: "info",
        touches_all: true,
        arity: -1,
        flags: flags!(LOADING, STALE),
        acl: acl!(DANGEROUS),
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        summary: "Returns information and statistics about the server.",
        complexity: "O(1)",
        handler: Some(info),
        ..SERVER
    },
    Command {
        name: "dbsize",
        touches_all: true,
        arity: 1,
        flags: flags!(READONLY, FAST),
        acl: acl!(KEYSPACE),
        tips: &["request_policy:all_shards", "response_policy:agg_sum"],
        summary: "Returns the number of keys in the database.",
        complexity: "O(1)",
        handler: Some(dbsize),
        ..SERVER
    },
    Command {
        name: "flushdb",
        touches_all: true,
        arity: -1,
        flags: flags!(WRITE),
        acl: acl!(KEYSPACE, DANGEROUS),
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        summary: "Removes all keys from the current database.",
        complexity: "O(N) where N is the total number of keys in all databases",
        handler: Some(flushdb),
        ..SERVER
    },
    Command {
        name: "flushall",
        touches_all: true,
        arity: -1,
        flags: flags!(WRITE),
        acl: acl!(KEYSPACE, DANGEROUS),
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        summary: "Removes all keys from all databases.",
        complexity: "O(N) where N is the total number of keys in all databases",
        handler: Some(flushall),
        ..SERVER
    },
    Command {
        name: "time",
        arity: 1,
        flags: flags!(LOADING, STALE, FAST),
        tips: &["nondeterministic_output"],
        since: "2.6.0",
        summary: "Returns the server time.",
        complexity: "O(1)",
        handler: Some(time),
        ..SERVER
    },
    Command {
        name: "shutdown",
        arity: -1,
        flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE, NO_MULTI, ALLOW_BUSY),
        summary: "Synchronously saves the database(s) to disk and shuts down the server.",
        complexity: "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
        handler: Some(shutdown),
        ..SERVER
    },
    Command {
        name: "save",
        arity: 1,
        flags: flags!(ADMIN, NOSCRIPT, NO_ASYNC_LOADING, NO_MULTI),
        summary: "Synchronously saves the database(s) to disk.",
        complexity: "O(N) where N is the total number of keys in all databases",
        handler: Some(save),
        ..SERVER
    },
    Command {
        name: "bgsave",
        arity: -1,
        flags: flags!(ADMIN, NOSCRIPT, NO_ASYNC_LOADING),
        summary: "Asynchronously saves the database(s) to disk.",
        complexity: "O(1)",
        handler: Some(bgsave),
        ..SERVER
    },
    Command {
        name: "bgrewriteaof",
        arity: 1,
        flags: flags!(ADMIN, NOSCRIPT, NO_ASYNC_LOADING),
        summary: "Asynchronously rewrites the append-only file to disk.",
        complexity: "O(1)",
        handler: Some(bgrewriteaof),
        ..SERVER
    },
    Command {
        name: "lastsave",
        arity: 1,
        flags: flags!(LOADING, STALE, FAST),
        acl: acl!(ADMIN, DANGEROUS),
        tips: &["nondeterministic_output"],
        summary: "Returns the Unix timestamp of the last successful save to disk.",
        complexity: "O(1)",
        handler: Some(lastsave),
        ..SERVER
    },
    Command {
        name: "debug",
        arity: -2,
        flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE),
        summary: "A container for debugging commands.",
        complexity: "Depends on subcommand.",
        handler: Some(debug),
        ..SERVER
    },
    Command {
        name: "config",
        arity: -2,
        since: "2.0.0",
        summary: "A container for server configuration commands.",
        complexity: "Depends on subcommand.",
        subcommands: &[
            Command {
                name: "get",
                arity: -3,
                summary: "Returns the effective values of configuration parameters.",
                handler: Some(config_get),
                ..CONFIG_SUB
            },
            Command {
                name: "set",
                arity: -4,
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                summary: "Sets configuration parameters in-flight.",
                handler: Some(config_set),
                ..CONFIG_SUB
            },
            Command {
                name: "resetstat",
                arity: 2,
                complexity: "O(1)",
                summary: "Resets the server's statistics.",
                handler: Some(config_resetstat),
                ..CONFIG_SUB
            },
            Command {
                name: "rewrite",
                arity: 2,
                since: "2.8.0",
                complexity: "O(1)",
                summary: "Persists the effective configuration to file.",
                handler: Some(config_rewrite),
                ..CONFIG_SUB
            },
            Command {
                name: "help",
                arity: 2,
                flags: flags!(LOADING, STALE),
                since: "5.0.0",
                complexity: "O(1)",
                summary: "Returns helpful text about the different subcommands.",
                handler: Some(config_help),
                ..CONFIG_SUB
            },
        ],
        ..SERVER
    },
];

fn info(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let dbs = ctx.server.databases();
    let mut summary = KeyspaceSummary {
        keys: vec![0; dbs],
        expires: vec![0; dbs],
        table_bytes: vec![0; dbs],
        ..Default::default()
    };
    ctx.keys.for_each_shard(|shard| {
        summary.hits += shard.stats.keyspace_hits;
        summary.misses += shard.stats.keyspace_misses;
        for (i, db) in shard.dbs().iter().enumerate() {
            summary.keys[i] += db.len();
            summary.expires[i] += db.expires_len();
            summary.table_bytes[i] += db.table_bytes();
            summary.expired += db.expired;
        }
    });
    let text = ctx.server.info(&args[1..], &summary);
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

fn dbsize(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let db = ctx.keys.db;
    let mut n = 0;
    ctx.keys.for_each_shard(|shard| n += shard.db_ref(db).len());
    ctx.out.integer(n as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL's optional ASYNC or SYNC.
fn flush_mode(args: &[&[u8]]) -> Result<(), CmdError> {
    match args {
        [_] => Ok(()),
        [_, mode] if is(mode, "async") || is(mode, "sync") => Ok(()),
        _ => Err(CmdError::Syntax),
    }
}

fn flushdb(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    flush_mode(args)?;
    let db = ctx.keys.db;
    let mut detached = Vec::new();
    let mut removed = 0;
    ctx.keys.lock_all();
    ctx.keys.for_each_shard(|shard| {
        let d = shard.db(db).clear();
        removed += d.len() as u64;
        if !d.is_empty() {
            detached.push(d);
        }
    });
    ctx.server.free_later(detached);
    ctx.keys.log_special(crate::effects::RecordKind::FlushDb);
    ctx.keys.dirty += removed.max(1);
    ctx.keys.flushed();
    ctx.out.ok();
    Ok(())
}

fn flushall(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    flush_mode(args)?;
    let mut detached = Vec::new();
    ctx.keys.lock_all();
    ctx.keys
        .for_each_shard(|shard| detached.extend(shard.clear_all()));
    ctx.keys.release();
    let removed: u64 = detached.iter().map(|d| d.len() as u64).sum();
    ctx.server.free_later(detached);
    ctx.keys.log_special(crate::effects::RecordKind::FlushAll);
    ctx.keys.dirty += removed.max(1);
    ctx.keys.flushed();
    ctx.out.ok();
    Ok(())
}

fn time(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    ctx.out.array(2);
    ctx.out.bulk_i64(now.as_secs() as i64);
    ctx.out.bulk_i64(now.subsec_micros() as i64);
    Ok(())
}

fn shutdown(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (mut nosave, mut save, mut abort) = (false, false, false);
    let mut other = false;
    for a in &args[1..] {
        if is(a, "nosave") {
            nosave = true;
        } else if is(a, "save") {
            save = true;
        } else if is(a, "now") || is(a, "force") {
            other = true;
        } else if is(a, "abort") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (abort && (nosave || save || other)) || (nosave && save) {
        return Err(CmdError::Syntax);
    }
    if abort {
        return Err(CmdError::err("No shutdown in progress."));
    }
    let mode = if save {
        ShutdownMode::Save
    } else if nosave {
        ShutdownMode::NoSave
    } else {
        ShutdownMode::Default
    };
    ctx.server.shutdown(mode).map_err(CmdError::coded)?;
    // As in Redis, a successful SHUTDOWN closes the connection without a reply.
    ctx.conn.close_after_reply = true;
    Ok(())
}

fn save(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.server.save().map_err(CmdError::coded)?;
    ctx.out.ok();
    Ok(())
}

fn bgsave(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let schedule = match args {
        [_] => false,
        [_, a] if is(a, "schedule") => true,
        _ => return Err(CmdError::Syntax),
    };
    let status = ctx.server.bgsave(schedule).map_err(CmdError::coded)?;
    ctx.out.simple(status.as_bytes());
    Ok(())
}

fn bgrewriteaof(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let status = ctx.server.bgrewriteaof().map_err(CmdError::coded)?;
    ctx.out.simple(status.as_bytes());
    Ok(())
}

fn lastsave(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.out.integer(ctx.server.lastsave() as i64);
    Ok(())
}

fn debug(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if !ctx.server.debug_allowed(&ctx.conn.info) {
        return Err(CmdError::err(
            "DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.",
        ));
    }
    let sub = args[1];
    if is(sub, "help") && args.len() == 2 {
        crate::families::help(
            ctx,
            "DEBUG",
            &[
                "PROTOCOL <type>",
                "    Reply with a test value of the specified type. <type> can be: string,",
                "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
                "    true, false.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not",
                "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
                "    default.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
            ],
        );
    } else if is(sub, "sleep") && args.len() == 3 {
        let secs = crate::parse::parse_f64(args[2]).unwrap_or(0.0);
        if secs > 0.0 && secs.is_finite() {
            std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
        }
        ctx.out.ok();
    } else if is(sub, "set-active-expire") && args.len() == 3 {
        let on = std::str::from_utf8(args[2])
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(0)
            != 0;
        ctx.server.set_active_expire(on);
        ctx.out.ok();
    } else if is(sub, "protocol") && args.len() == 3 {
        debug_protocol(ctx, args[2])?;
    } else {
        return Err(CmdError::quoting(
            "unknown subcommand or wrong number of arguments for '",
            crate::error::c_str(sub, 128),
            "'. Try DEBUG HELP.",
        ));
    }
    Ok(())
}

/// DEBUG PROTOCOL: one reply of each RESP3 type, used by client libraries' tests.
fn debug_protocol(ctx: &mut Ctx, kind: &[u8]) -> CmdResult {
    let k = kind.to_ascii_lowercase();
    match k.as_slice() {
        b"string" => ctx.out.bulk(b"Hello World"),
        b"integer" => ctx.out.integer(12345),
        // The value Redis sends, not an approximation of pi.
        #[allow(clippy::approx_constant)]
        b"double" => ctx.out.double(3.141),
        b"bignum" => ctx.out.big_number(b"1234567999999999999999999999999999999"),
        b"null" => ctx.out.null(),
        b"array" | b"set" => {
            if k == b"array" {
                ctx.out.array(3);
            } else {
                ctx.out.set(3);
            }
            for j in 0..3 {
                ctx.out.integer(j);
            }
        }
        b"map" => {
            ctx.out.map(3);
            for j in 0..3 {
                ctx.out.integer(j);
                ctx.out.boolean(j == 1);
            }
        }
        b"attrib" => {
            if ctx.out.is_resp3() {
                ctx.out.raw(b"|1\r\n");
                ctx.out.bulk(b"key-popularity");
                ctx.out.array(2);
                ctx.out.bulk(b"key:123");
                ctx.out.integer(90);
            }
            ctx.out.bulk(b"Some real reply following the attribute");
        }
        b"push" => {
            if !ctx.out.is_resp3() {
                return Err(CmdError::err("RESP2 is not supported by this command"));
            }
            ctx.out.push(2);
            ctx.out.bulk(b"server-cpu-usage");
            ctx.out.integer(42);
            ctx.out.bulk(b"Some real reply following the push reply");
        }
        b"true" => ctx.out.boolean(true),
        b"false" => ctx.out.boolean(false),
        b"verbatim" => ctx.out.verbatim(b"txt", b"This is a verbatim\nstring"),
        _ => {
            return Err(CmdError::err(
                "Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ));
        }
    }
    Ok(())
}

fn config_get(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let pairs = ctx.server.config_get(&args[2..]);
    ctx.out.map(pairs.len());
    for (k, v) in &pairs {
        ctx.out.bulk(k.as_bytes());
        ctx.out.bulk(v.as_bytes());
    }
    Ok(())
}

fn config_set(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    // Directives and values come in pairs.
    if args.len() % 2 == 1 {
        return Err(CmdError::Syntax);
    }
    let pairs: Vec<(&[u8], &[u8])> = args[2..].chunks_exact(2).map(|p| (p[0], p[1])).collect();
    ctx.server.config_set(&pairs).map_err(CmdError::coded)?;
    ctx.out.ok();
    Ok(())
}

fn config_resetstat(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.server.reset_stats();
    ctx.out.ok();
    Ok(())
}

fn config_rewrite(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.server.config_rewrite().map_err(CmdError::coded)?;
    ctx.out.ok();
    Ok(())
}

fn config_help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}
