//! Generic keyspace commands: DEL, EXISTS, RENAME, KEYS, SCAN, EXPIRE and friends.

use strata_keyspace::{Ttl, ValueRef, ValueType, glob};

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};
use crate::spec::{Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const GENERIC: Command = Command {
    group: Group::Generic,
    acl: acl!(KEYSPACE),
    ..Command::DEFAULT
};

const RW_UPDATE: &[KeySpec] = &[KeySpec::single(1, kf!(RW, UPDATE))];
const RO_ACCESS: &[KeySpec] = &[KeySpec::single(1, kf!(RO, ACCESS))];

const fn expire_cmd(
    name: &'static str,
    handler: crate::table::Handler,
    summary: &'static str,
    since: &'static str,
) -> Command {
    Command {
        name,
        arity: -3,
        flags: flags!(WRITE, FAST),
        key_specs: RW_UPDATE,
        summary,
        since,
        complexity: "O(1)",
        handler: Some(handler),
        log_rule: crate::effects::LogRule::Expiry,
        ..GENERIC
    }
}

const fn ttl_cmd(
    name: &'static str,
    handler: crate::table::Handler,
    summary: &'static str,
    since: &'static str,
    tips: &'static [&'static str],
) -> Command {
    Command {
        name,
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        tips,
        summary,
        since,
        complexity: "O(1)",
        handler: Some(handler),
        ..GENERIC
    }
}

const OBJECT_SUB: Command = Command {
    arity: 3,
    flags: flags!(READONLY),
    key_specs: &[KeySpec::single(2, kf!(RO))],
    tips: &["nondeterministic_output"],
    since: "2.2.3",
    complexity: "O(1)",
    ..GENERIC
};

pub const COMMANDS: &[Command] = &[
    Command {
        name: "del",
        arity: -2,
        flags: flags!(WRITE),
        key_specs: &[KeySpec::range(1, -1, 1, kf!(RM, DELETE))],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        summary: "Deletes one or more keys.",
        complexity: "O(N) where N is the number of keys that will be removed.",
        handler: Some(del),
        ..GENERIC
    },
    Command {
        name: "unlink",
        arity: -2,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::range(1, -1, 1, kf!(RM, DELETE))],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        since: "4.0.0",
        summary: "Deletes one or more keys, freeing their memory in the background.",
        complexity: "O(1) for each key removed regardless of its size.",
        handler: Some(unlink),
        ..GENERIC
    },
    Command {
        name: "exists",
        arity: -2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::range(1, -1, 1, kf!(RO))],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        summary: "Counts how many of the given keys exist.",
        complexity: "O(N) where N is the number of keys to check.",
        handler: Some(exists),
        ..GENERIC
    },
    Command {
        name: "type",
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::single(1, kf!(RO))],
        summary: "Returns the type of value stored at a key.",
        complexity: "O(1)",
        handler: Some(type_),
        ..GENERIC
    },
    Command {
        name: "rename",
        arity: 3,
        flags: flags!(WRITE),
        key_specs: &[
            KeySpec::single(1, kf!(RW, ACCESS, DELETE)),
            KeySpec::single(2, kf!(OW, UPDATE)),
        ],
        summary: "Renames a key, overwriting the destination.",
        complexity: "O(1)",
        handler: Some(rename),
        ..GENERIC
    },
    Command {
        name: "renamenx",
        arity: 3,
        flags: flags!(WRITE, FAST),
        key_specs: &[
            KeySpec::single(1, kf!(RW, ACCESS, DELETE)),
            KeySpec::single(2, kf!(OW, INSERT)),
        ],
        summary: "Renames a key only when the destination does not exist.",
        complexity: "O(1)",
        handler: Some(renamenx),
        ..GENERIC
    },
    Command {
        name: "copy",
        arity: -3,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[
            KeySpec::single(1, kf!(RO, ACCESS)),
            KeySpec::single(2, kf!(OW, UPDATE)),
        ],
        since: "6.2.0",
        summary: "Copies the value of a key to a new key.",
        complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        handler: Some(copy),
        ..GENERIC
    },
    Command {
        name: "move",
        arity: 3,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        summary: "Moves a key to another database.",
        complexity: "O(1)",
        handler: Some(move_),
        ..GENERIC
    },
    Command {
        name: "keys",
        touches_all: true,
        arity: 2,
        flags: flags!(READONLY),
        acl: acl!(KEYSPACE, DANGEROUS),
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        summary: "Returns all key names that match a pattern.",
        complexity: "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        handler: Some(keys),
        ..GENERIC
    },
    Command {
        name: "scan",
        touches_all: true,
        arity: -2,
        flags: flags!(READONLY),
        tips: &["nondeterministic_output", "request_policy:special"],
        since: "2.8.0",
        summary: "Iterates over the key names in the database.",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        handler: Some(scan),
        ..GENERIC
    },
    Command {
        name: "randomkey",
        touches_all: true,
        arity: 1,
        flags: flags!(READONLY),
        tips: &["request_policy:all_shards", "nondeterministic_output"],
        summary: "Returns a random key name from the database.",
        complexity: "O(1)",
        handler: Some(randomkey),
        ..GENERIC
    },
    expire_cmd(
        "expire",
        expire,
        "Sets the expiration time of a key in seconds.",
        "1.0.0",
    ),
    expire_cmd(
        "pexpire",
        pexpire,
        "Sets the expiration time of a key in milliseconds.",
        "2.6.0",
    ),
    expire_cmd(
        "expireat",
        expireat,
        "Sets the expiration time of a key to a Unix timestamp.",
        "1.2.0",
    ),
    expire_cmd(
        "pexpireat",
        pexpireat,
        "Sets the expiration time of a key to a Unix milliseconds timestamp.",
        "2.6.0",
    ),
    ttl_cmd(
        "ttl",
        ttl,
        "Returns the expiration time in seconds of a key.",
        "1.0.0",
        &["nondeterministic_output"],
    ),
    ttl_cmd(
        "pttl",
        pttl,
        "Returns the expiration time in milliseconds of a key.",
        "2.6.0",
        &["nondeterministic_output"],
    ),
    ttl_cmd(
        "expiretime",
        expiretime,
        "Returns the expiration time of a key as a Unix timestamp.",
        "7.0.0",
        &[],
    ),
    ttl_cmd(
        "pexpiretime",
        pexpiretime,
        "Returns the expiration time of a key as a Unix milliseconds timestamp.",
        "7.0.0",
        &[],
    ),
    Command {
        name: "persist",
        log_rule: crate::effects::LogRule::Expiry,
        arity: 2,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, UPDATE))],
        since: "2.2.0",
        summary: "Removes the expiration time of a key.",
        complexity: "O(1)",
        handler: Some(persist),
        ..GENERIC
    },
    Command {
        name: "touch",
        arity: -2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::range(1, -1, 1, kf!(RO))],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        since: "3.2.1",
        summary: "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
        complexity: "O(N) where N is the number of keys that will be touched.",
        handler: Some(touch),
        ..GENERIC
    },
    Command {
        name: "object",
        arity: -2,
        acl: acl!(),
        since: "2.2.3",
        summary: "A container for object introspection commands.",
        complexity: "Depends on subcommand.",
        subcommands: &[
            Command {
                name: "encoding",
                summary: "Returns the internal encoding of a Redis object.",
                handler: Some(object_encoding),
                ..OBJECT_SUB
            },
            Command {
                name: "freq",
                since: "4.0.0",
                summary: "Returns the logarithmic access frequency counter of a Redis object.",
                handler: Some(object_freq),
                ..OBJECT_SUB
            },
            Command {
                name: "idletime",
                summary: "Returns the time since the last access to a Redis object.",
                handler: Some(object_idletime),
                ..OBJECT_SUB
            },
            Command {
                name: "refcount",
                summary: "Returns the reference count of a value of a key.",
                handler: Some(object_refcount),
                ..OBJECT_SUB
            },
            Command {
                name: "help",
                arity: 2,
                flags: flags!(LOADING, STALE),
                key_specs: &[],
                tips: &[],
                since: "6.2.0",
                summary: "Returns helpful text about the different subcommands.",
                handler: Some(object_help),
                ..OBJECT_SUB
            },
        ],
        ..GENERIC
    },
];

fn del(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let lazy = ctx.keys.lazyfree.user_del;
    delete(ctx, args, lazy)
}

/// UNLINK: DEL, with big values freed in the background after the reply.
fn unlink(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    delete(ctx, args, true)
}

fn delete(ctx: &mut Ctx, args: &[&[u8]], lazy: bool) -> CmdResult {
    let mut n = 0;
    for key in &args[1..] {
        let old = ctx.keys.remove(key);
        if old.is_some() {
            ctx.keys.changed(key, "del");
            n += 1;
        }
        ctx.keys.free_entry(old, lazy);
    }
    ctx.out.integer(n);
    Ok(())
}

fn exists(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = args[1..]
        .iter()
        .filter(|k| {
            let found = ctx.keys.exists(k);
            if !found {
                // A read lookup: Redis sends a key-miss event.
                ctx.keys.notify(k, "keymiss");
            }
            found
        })
        .count();
    ctx.out.integer(n as i64);
    Ok(())
}

fn type_(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(args[1]);
    let name = db
        .get(hash, args[1], now)
        .map_or("none", |e| e.value().value_type().name());
    ctx.out.simple(name.as_bytes());
    Ok(())
}

/// Moves `src` to `dst` (same database); `nx` refuses to overwrite. Returns whether
/// the move happened; errors if `src` is missing.
fn rename_generic(ctx: &mut Ctx, args: &[&[u8]], nx: bool) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    if !ctx.keys.exists(src) {
        return Err(CmdError::NoSuchKey);
    }
    if src == dst {
        if nx {
            ctx.out.integer(0)
        } else {
            ctx.out.ok()
        }
        return Ok(());
    }
    if nx && ctx.keys.exists(dst) {
        ctx.out.integer(0);
        return Ok(());
    }
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(src);
    let Some((mut entry, expire_at)) = db.take(hash, src, now) else {
        return Err(CmdError::NoSuchKey);
    };
    entry.set_key(dst);
    let wakes = wakes_blocked(entry.value());
    let (hash, db) = ctx.keys.db_for(dst);
    let old = db.put_entry(hash, entry, expire_at, now);
    ctx.keys.free_replaced(old);
    ctx.keys.changed(src, "rename_from");
    ctx.keys.changed(dst, "rename_to");
    if wakes {
        ctx.keys.ready(dst);
    }
    if nx {
        ctx.out.integer(1)
    } else {
        ctx.out.ok()
    }
    Ok(())
}

fn rename(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// Parses a database index argument, as SELECT, MOVE and COPY do.
pub(crate) fn db_index(ctx: &Ctx, arg: &[u8]) -> Result<usize, CmdError> {
    let n = parse::int32(arg)?;
    usize::try_from(n)
        .ok()
        .filter(|&n| n < ctx.server.databases())
        .ok_or(CmdError::DbIndexOutOfRange)
}

fn copy(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    let mut replace = false;
    let mut dst_db = ctx.keys.db;
    let mut i = 3;
    while i < args.len() {
        if is(args[i], "replace") {
            replace = true;
        } else if is(args[i], "db") && i + 1 < args.len() {
            dst_db = db_index(ctx, args[i + 1])?;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if dst_db == ctx.keys.db && src == dst {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let Some(entry) = ctx.keys.read(src) else {
        ctx.out.integer(0);
        return Ok(());
    };
    let value = entry.value().duplicate();
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(src);
    let expire = db.ttl_of(hash, src, now).flatten();
    let (hash, db) = ctx.keys.other_db_for(dst_db, dst);
    if db.contains(hash, dst, now) && !replace {
        ctx.out.integer(0);
        return Ok(());
    }
    let ttl = expire.map_or(Ttl::Persist, Ttl::At);
    let wakes = wakes_blocked(ValueRef::from(&value));
    // Redis deletes the old value and adds the copy, so the key counts as new.
    let old = db.remove(hash, dst, now);
    db.set(hash, dst, value, ttl, now);
    ctx.keys.free_replaced_entry(old);
    ctx.keys.changed_in(dst_db, dst, "copy_to");
    if wakes {
        ctx.keys.ready_in(dst_db, dst);
    }
    ctx.out.integer(1);
    Ok(())
}

fn move_(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let dst_db = db_index(ctx, args[2])?;
    if dst_db == ctx.keys.db {
        return Err(CmdError::err("source and destination objects are the same"));
    }
    let now = ctx.keys.now_ms;
    if !ctx.keys.exists(key) {
        ctx.out.integer(0);
        return Ok(());
    }
    let (hash, db) = ctx.keys.other_db_for(dst_db, key);
    if db.contains(hash, key, now) {
        ctx.out.integer(0);
        return Ok(());
    }
    let (hash, db) = ctx.keys.db_for(key);
    let Some((entry, expire_at)) = db.take(hash, key, now) else {
        ctx.out.integer(0);
        return Ok(());
    };
    let wakes = wakes_blocked(entry.value());
    let (hash, db) = ctx.keys.other_db_for(dst_db, key);
    db.put_entry(hash, entry, expire_at, now);
    ctx.keys.changed(key, "move_from");
    ctx.keys.changed_in(dst_db, key, "move_to");
    if wakes {
        ctx.keys.ready_in(dst_db, key);
    }
    ctx.out.integer(1);
    Ok(())
}

/// Whether a value arriving at a key can serve clients blocked on it (lists and
/// sorted sets).
fn wakes_blocked(value: ValueRef<'_>) -> bool {
    matches!(value.value_type(), ValueType::List | ValueType::ZSet)
}

fn keys(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let pattern = args[1];
    let all = pattern == b"*";
    let (db, now) = (ctx.keys.db, ctx.keys.now_ms);
    let mut found: Vec<Vec<u8>> = Vec::new();
    ctx.keys.for_each_shard(|shard| {
        for e in shard.db_ref(db).iter(now) {
            if all || glob::matches(pattern, e.key()) {
                found.push(e.key().to_vec());
            }
        }
    });
    ctx.out.array(found.len());
    for k in &found {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// Parses a SCAN cursor as `strtoul` does: optional sign, decimal digits, no
/// leading space, nothing after.
pub(crate) fn parse_cursor(arg: &[u8]) -> Result<u64, CmdError> {
    let invalid = || CmdError::err("invalid cursor");
    if arg.first().is_some_and(|c| c.is_ascii_whitespace()) {
        return Err(invalid());
    }
    let (neg, digits) = match arg.first() {
        Some(b'-') => (true, &arg[1..]),
        Some(b'+') => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() {
        // strtoul consumed nothing: the end pointer is the start, and for an empty
        // argument that is the terminator, so Redis takes it as cursor 0.
        return if arg.is_empty() {
            Ok(0)
        } else {
            Err(invalid())
        };
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(invalid());
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add((d - b'0') as u64))
            .ok_or_else(invalid)?;
    }
    Ok(if neg { v.wrapping_neg() } else { v })
}

fn scan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let cursor = parse_cursor(args[1])?;
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut type_filter: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(args[i], "count") && more {
            count = parse::int(args[i + 1])?;
            if count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if is(args[i], "match") && more {
            pattern = Some(args[i + 1]).filter(|p| *p != b"*");
        } else if is(args[i], "type") && more {
            type_filter = Some(args[i + 1]);
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let count = count as usize;
    let shards = ctx.keys.ks.num_shards() as u64;
    let bits = shards.trailing_zeros();
    let mut shard = cursor & (shards - 1);
    let mut dict_cursor = cursor.checked_shr(bits).unwrap_or(0);
    let (db, now) = (ctx.keys.db, ctx.keys.now_ms);
    let mut batch: Vec<(Vec<u8>, ValueType)> = Vec::new();
    let mut budget = count.saturating_mul(10);
    let next = loop {
        ctx.keys.with_shard(shard as usize, |guard| {
            let d = guard.db_ref(db);
            // Empty shards cost nothing towards the budget, so that a small database
            // comes back in one call, as it does in Redis.
            while !d.is_empty() {
                dict_cursor = d.scan(dict_cursor, now, |e| {
                    batch.push((e.key().to_vec(), e.value().value_type()))
                });
                budget = budget.saturating_sub(1);
                if dict_cursor == 0 || batch.len() >= count || budget == 0 {
                    break;
                }
            }
            if d.is_empty() {
                dict_cursor = 0;
            }
        });
        if dict_cursor == 0 {
            shard += 1;
            if shard == shards {
                break 0;
            }
        }
        if batch.len() >= count || budget == 0 {
            break (dict_cursor << bits) | shard;
        }
    };
    batch.retain(|(k, t)| {
        pattern.is_none_or(|p| glob::matches(p, k))
            && type_filter.is_none_or(|f| f.eq_ignore_ascii_case(t.name().as_bytes()))
    });
    ctx.out.array(2);
    ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
    ctx.out.array(batch.len());
    for (k, _) in &batch {
        ctx.out.bulk(k);
    }
    Ok(())
}

fn randomkey(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let n = ctx.keys.ks.num_shards();
    let (db, now) = (ctx.keys.db, ctx.keys.now_ms);
    let start = rand::random::<u64>() as usize;
    for k in 0..n {
        let s = (start.wrapping_add(k)) % n;
        let key = ctx
            .keys
            .with_shard(s, |shard| shard.db(db).random_key(now, rand::random::<u64>));
        if let Some(key) = key {
            ctx.out.bulk(&key);
            return Ok(());
        }
    }
    ctx.out.null();
    Ok(())
}

#[derive(Clone, Copy)]
enum Unit {
    Seconds,
    Millis,
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: `base` is added to the time given.
fn expire_generic(ctx: &mut Ctx, args: &[&[u8]], unit: Unit, relative: bool) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if is(opt, "gt") {
            gt = true;
        } else if is(opt, "lt") {
            lt = true;
        } else {
            return Err(CmdError::quoting("Unsupported option ", opt, ""));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::err(
            "NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::err(
            "GT and LT options at the same time are not compatible",
        ));
    }
    let mut when = parse::int(args[2])?;
    let invalid = || CmdError::InvalidExpire(ctx.name());
    if let Unit::Seconds = unit {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    let base = if relative { ctx.keys.now_ms as i64 } else { 0 };
    let when = when.checked_add(base).ok_or_else(invalid)?;
    let key = args[1];
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(key);
    let Some(current) = db.ttl_of(hash, key, now) else {
        ctx.out.integer(0);
        return Ok(());
    };
    let current = current.map(|t| t as i64);
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|c| when <= c))
        || (lt && current.is_some_and(|c| when >= c));
    if refused {
        ctx.out.integer(0);
        return Ok(());
    }
    if when <= now as i64 {
        db.remove(hash, key, now);
        ctx.keys.changed(key, "del");
    } else {
        db.set_expire(hash, key, when as u64, now);
        ctx.keys.changed(key, "expire");
    }
    ctx.out.integer(1);
    Ok(())
}

fn expire(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, Unit::Seconds, true)
}

fn pexpire(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, Unit::Millis, true)
}

fn expireat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, Unit::Seconds, false)
}

fn pexpireat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expire_generic(ctx, args, Unit::Millis, false)
}

/// The key's expiry: `None` if the key is missing, `Some(None)` if it has no TTL.
fn expiry_of(ctx: &mut Ctx, key: &[u8]) -> Option<Option<u64>> {
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(key);
    db.ttl_of(hash, key, now)
}

fn ttl_generic(ctx: &mut Ctx, key: &[u8], millis: bool) -> CmdResult {
    let now = ctx.keys.now_ms;
    let reply = match expiry_of(ctx, key) {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => {
            let ms = at.saturating_sub(now) as i64;
            if millis { ms } else { (ms + 500) / 1000 }
        }
    };
    ctx.out.integer(reply);
    Ok(())
}

fn ttl(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], false)
}

fn pttl(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ttl_generic(ctx, args[1], true)
}

fn expiretime_generic(ctx: &mut Ctx, key: &[u8], millis: bool) -> CmdResult {
    let reply = match expiry_of(ctx, key) {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => {
            if millis {
                at as i64
            } else {
                at as i64 / 1000
            }
        }
    };
    ctx.out.integer(reply);
    Ok(())
}

fn expiretime(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expiretime_generic(ctx, args[1], false)
}

fn pexpiretime(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    expiretime_generic(ctx, args[1], true)
}

fn persist(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(key);
    let had_ttl = db.ttl_of(hash, key, now).is_some_and(|t| t.is_some());
    if had_ttl {
        db.set_expire(hash, key, 0, now);
        ctx.keys.changed(key, "persist");
    }
    ctx.out.integer(had_ttl as i64);
    Ok(())
}

fn touch(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = args[1..]
        .iter()
        .filter(|k| ctx.keys.read(k).is_some())
        .count();
    ctx.out.integer(n as i64);
    Ok(())
}

fn object_encoding(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(args[2]);
    match db.get(hash, args[2], now) {
        Some(e) => ctx.out.bulk(e.value().encoding().as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

fn object_freq(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(args[2]);
    let Some(e) = db.get(hash, args[2], now) else {
        ctx.out.null();
        return Ok(());
    };
    if !strata_keyspace::access::is_lfu() {
        return Err(CmdError::err(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let freq = e.freq(now);
    ctx.out.integer(freq as i64);
    Ok(())
}

fn object_idletime(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(args[2]);
    let Some(e) = db.get(hash, args[2], now) else {
        ctx.out.null();
        return Ok(());
    };
    if strata_keyspace::access::is_lfu() {
        return Err(CmdError::err(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let idle = e.idle_seconds(now);
    ctx.out.integer(idle as i64);
    Ok(())
}

fn object_refcount(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(args[2]);
    match db.get(hash, args[2], now).map(|e| e.value()) {
        Some(ValueRef::Str(s)) => ctx.out.integer(s.refcount()),
        Some(_) => ctx.out.integer(1),
        None => ctx.out.null(),
    }
    Ok(())
}

fn object_help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_parse_like_strtoul() {
        assert_eq!(parse_cursor(b"0"), Ok(0));
        assert_eq!(parse_cursor(b""), Ok(0));
        assert_eq!(parse_cursor(b"007"), Ok(7));
        assert_eq!(parse_cursor(b"+7"), Ok(7));
        assert_eq!(parse_cursor(b"-1"), Ok(u64::MAX));
        assert!(parse_cursor(b" 1").is_err());
        assert!(parse_cursor(b"1x").is_err());
        assert!(parse_cursor(b"-").is_err());
        assert!(parse_cursor(b"99999999999999999999").is_err());
    }
}
