//! Hash commands.

use std::collections::HashSet;

use strata_keyspace::{HashMut, HashRef, Value};
use strata_resp::ReplyWriter;

use crate::ctx::{Ctx, Keys};
use crate::error::{CmdError, CmdResult};
use crate::families::collection::{
    ScanOptions, parse_rand_count, repeated_picks, sample, scan_reply,
};
use crate::families::keys::parse_cursor;
use crate::longdouble::LongDouble;
use crate::parse::{self, is};
use crate::spec::{Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const HASH: Command = Command {
    group: Group::Hash,
    acl: acl!(HASH),
    since: "2.0.0",
    ..Command::DEFAULT
};

const RO: &[KeySpec] = &[KeySpec::single(1, kf!(RO))];
const RO_ACCESS: &[KeySpec] = &[KeySpec::single(1, kf!(RO, ACCESS))];
const RW_UPDATE: &[KeySpec] = &[KeySpec::single(1, kf!(RW, UPDATE))];
const RW_ACCESS_UPDATE: &[KeySpec] = &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))];

pub const COMMANDS: &[Command] = &[
    Command {
        name: "hset",
        log_rule: crate::effects::LogRule::Replay,
        arity: -4,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: RW_UPDATE,
        summary: "Creates or modifies the value of a field in a hash.",
        complexity: "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
        handler: Some(hset),
        ..HASH
    },
    Command {
        name: "hmset",
        log_rule: crate::effects::LogRule::Replay,
        arity: -4,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: RW_UPDATE,
        summary: "Sets the values of multiple fields (deprecated: use HSET).",
        complexity: "O(N) where N is the number of fields being set.",
        handler: Some(hset),
        ..HASH
    },
    Command {
        name: "hsetnx",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, INSERT))],
        summary: "Sets the value of a field in a hash only when the field doesn't exist.",
        complexity: "O(1)",
        handler: Some(hsetnx),
        ..HASH
    },
    Command {
        name: "hget",
        arity: 3,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        summary: "Returns the value of a field in a hash.",
        complexity: "O(1)",
        handler: Some(hget),
        ..HASH
    },
    Command {
        name: "hmget",
        arity: -3,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        summary: "Returns the values of all fields in a hash.",
        complexity: "O(N) where N is the number of fields being requested.",
        handler: Some(hmget),
        ..HASH
    },
    Command {
        name: "hdel",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, DELETE))],
        summary: "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.",
        complexity: "O(N) where N is the number of fields to be removed.",
        handler: Some(hdel),
        ..HASH
    },
    Command {
        name: "hlen",
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: RO,
        summary: "Returns the number of fields in a hash.",
        complexity: "O(1)",
        handler: Some(hlen),
        ..HASH
    },
    Command {
        name: "hstrlen",
        arity: 3,
        flags: flags!(READONLY, FAST),
        key_specs: RO,
        since: "3.2.0",
        summary: "Returns the length of the value of a field.",
        complexity: "O(1)",
        handler: Some(hstrlen),
        ..HASH
    },
    Command {
        name: "hexists",
        arity: 3,
        flags: flags!(READONLY, FAST),
        key_specs: RO,
        summary: "Determines whether a field exists in a hash.",
        complexity: "O(1)",
        handler: Some(hexists),
        ..HASH
    },
    Command {
        name: "hgetall",
        arity: 2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output_order"],
        summary: "Returns all fields and values in a hash.",
        complexity: "O(N) where N is the size of the hash.",
        handler: Some(hgetall),
        ..HASH
    },
    Command {
        name: "hkeys",
        arity: 2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output_order"],
        summary: "Returns all fields in a hash.",
        complexity: "O(N) where N is the size of the hash.",
        handler: Some(hkeys),
        ..HASH
    },
    Command {
        name: "hvals",
        arity: 2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output_order"],
        summary: "Returns all values in a hash.",
        complexity: "O(N) where N is the size of the hash.",
        handler: Some(hvals),
        ..HASH
    },
    Command {
        name: "hincrby",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: RW_ACCESS_UPDATE,
        summary: "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.",
        complexity: "O(1)",
        handler: Some(hincrby),
        ..HASH
    },
    Command {
        name: "hincrbyfloat",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: RW_ACCESS_UPDATE,
        since: "2.6.0",
        summary: "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.",
        complexity: "O(1)",
        handler: Some(hincrbyfloat),
        ..HASH
    },
    Command {
        name: "hrandfield",
        arity: -2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output"],
        since: "6.2.0",
        summary: "Returns one or more random fields from a hash.",
        complexity: "O(N) where N is the number of fields returned",
        handler: Some(hrandfield),
        ..HASH
    },
    Command {
        name: "hscan",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output"],
        since: "2.8.0",
        summary: "Iterates over fields and values of a hash.",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        handler: Some(hscan),
        ..HASH
    },
];

/// The hash at `key` for a read (counting a hit or a miss); WRONGTYPE for another type.
fn read<'a>(keys: &'a mut Keys, key: &[u8]) -> Result<Option<HashRef<'a>>, CmdError> {
    match keys.read(key) {
        None => Ok(None),
        Some(e) => e.value().as_hash().map(Some).ok_or(CmdError::WrongType),
    }
}

/// The hash at `key`, if it exists, read on the way to a write (not counted as a
/// hit or a miss); WRONGTYPE for another type.
fn peek<'a>(keys: &'a mut Keys, key: &[u8]) -> Result<Option<HashRef<'a>>, CmdError> {
    match keys.get(key) {
        None => Ok(None),
        Some(e) => {
            let e: &'a _ = e;
            e.value().as_hash().map(Some).ok_or(CmdError::WrongType)
        }
    }
}

/// The hash at `key` for a write, if it exists; WRONGTYPE for another type.
fn get<'a>(keys: &'a mut Keys, key: &[u8]) -> Result<Option<HashMut<'a>>, CmdError> {
    match keys.get(key) {
        None => Ok(None),
        Some(e) => e.as_hash_mut().map(Some).ok_or(CmdError::WrongType),
    }
}

/// The hash at `key` for a write, created empty if absent: the caller must add a
/// field before it returns.
fn get_or_create<'a>(keys: &'a mut Keys, key: &[u8]) -> Result<HashMut<'a>, CmdError> {
    let now = keys.now_ms;
    let no_touch = keys.no_touch;
    let (hash, db) = keys.db_for(key);
    let (entry, _) = db.get_or_insert_with(hash, key, now, || Value::Hash(Default::default()));
    if !no_touch {
        entry.touch(now);
    }
    entry.as_hash_mut().ok_or(CmdError::WrongType)
}

/// HSET and HMSET (which differ only in their reply).
fn hset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(ctx.name()));
    }
    let key = args[1];
    let limits = ctx.server.encoding_limits();
    let mut h = get_or_create(ctx.keys, key)?;
    h.fit(&args[2..], &limits);
    let created = args[2..]
        .chunks_exact(2)
        .filter(|pair| h.insert(pair[0], pair[1], &limits))
        .count();
    drop(h);
    ctx.keys.changed(key, "hset");
    if ctx.cmd.name == "hmset" {
        ctx.out.ok();
    } else {
        ctx.out.integer(created as i64);
    }
    Ok(())
}

fn hsetnx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (key, field, value) = (args[1], args[2], args[3]);
    let limits = ctx.server.encoding_limits();
    if peek(ctx.keys, key)?.is_some_and(|h| h.contains(field)) {
        ctx.out.integer(0);
        return Ok(());
    }
    let mut h = get_or_create(ctx.keys, key)?;
    h.fit(&[field, value], &limits);
    h.insert(field, value, &limits);
    drop(h);
    ctx.keys.changed(key, "hset");
    ctx.out.integer(1);
    Ok(())
}

fn hget(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match read(ctx.keys, args[1])?.and_then(|h| h.get(args[2])) {
        Some(v) => ctx.out.bulk(v),
        None => ctx.out.null(),
    }
    Ok(())
}

fn hmget(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let h = read(ctx.keys, args[1])?;
    ctx.out.array(args.len() - 2);
    for field in &args[2..] {
        match h.and_then(|h| h.get(field)) {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn hdel(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let Some(mut h) = get(ctx.keys, key)? else {
        ctx.out.integer(0);
        return Ok(());
    };
    let mut deleted = 0;
    for field in &args[2..] {
        if h.remove(field) {
            deleted += 1;
            if h.is_empty() {
                break;
            }
        }
    }
    let emptied = h.is_empty();
    drop(h);
    if deleted > 0 {
        ctx.keys.changed(key, "hdel");
        if emptied {
            ctx.keys.remove(key);
            ctx.keys.changed(key, "del");
        }
    }
    ctx.out.integer(deleted);
    Ok(())
}

fn hlen(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = read(ctx.keys, args[1])?.map_or(0, HashRef::len);
    ctx.out.integer(n as i64);
    Ok(())
}

fn hstrlen(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = read(ctx.keys, args[1])?
        .and_then(|h| h.get(args[2]))
        .map_or(0, <[u8]>::len);
    ctx.out.integer(n as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let found = read(ctx.keys, args[1])?.is_some_and(|h| h.contains(args[2]));
    ctx.out.integer(found as i64);
    Ok(())
}

/// What HGETALL, HKEYS and HVALS return of each pair.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Both,
    Fields,
    Values,
}

fn getall_generic(ctx: &mut Ctx, key: &[u8], parts: Parts) -> CmdResult {
    let h = read(ctx.keys, key)?;
    let len = h.map_or(0, HashRef::len);
    if parts == Parts::Both {
        ctx.out.map(len);
    } else {
        ctx.out.array(len);
    }
    for (field, value) in h.into_iter().flat_map(HashRef::iter) {
        if parts != Parts::Values {
            ctx.out.bulk(field);
        }
        if parts != Parts::Fields {
            ctx.out.bulk(value);
        }
    }
    Ok(())
}

fn hgetall(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    getall_generic(ctx, args[1], Parts::Both)
}

fn hkeys(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    getall_generic(ctx, args[1], Parts::Fields)
}

fn hvals(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    getall_generic(ctx, args[1], Parts::Values)
}

fn hincrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (key, field) = (args[1], args[2]);
    let by = parse::int(args[3])?;
    let current = match peek(ctx.keys, key)?.and_then(|h| h.get(field)) {
        None => 0,
        Some(v) => strata_keyspace::value::parse_canonical_i64(v)
            .ok_or_else(|| CmdError::err("hash value is not an integer"))?,
    };
    let new = current.checked_add(by).ok_or(CmdError::Overflow)?;
    let limits = ctx.server.encoding_limits();
    let text = itoa::Buffer::new().format(new).as_bytes().to_vec();
    get_or_create(ctx.keys, key)?.insert(field, &text, &limits);
    ctx.keys.changed(key, "hincrby");
    ctx.out.integer(new);
    Ok(())
}

fn hincrbyfloat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (key, field) = (args[1], args[2]);
    let by = LongDouble::parse(args[3]).ok_or(CmdError::NotFloat)?;
    if !by.is_finite() {
        return Err(CmdError::err("value is NaN or Infinity"));
    }
    let current = match peek(ctx.keys, key)?.and_then(|h| h.get(field)) {
        None => LongDouble::from_i64(0),
        Some(v) => {
            LongDouble::parse(v).ok_or_else(|| CmdError::err("hash value is not a float"))?
        }
    };
    let sum = current + by;
    if !sum.is_finite() {
        return Err(CmdError::NanOrInfinity);
    }
    let text = sum.to_human();
    let limits = ctx.server.encoding_limits();
    get_or_create(ctx.keys, key)?.insert(field, text.as_bytes(), &limits);
    ctx.keys.changed(key, "hincrbyfloat");
    ctx.out.bulk(text.as_bytes());
    Ok(())
}

/// How HRANDFIELD writes its fields: with or without values, and in which protocol.
struct PairWriter {
    with_values: bool,
    resp3: bool,
}

impl PairWriter {
    /// The header of a reply of `n` fields.
    fn header(&self, out: &mut ReplyWriter, n: usize) {
        out.array(if self.with_values && !self.resp3 {
            n * 2
        } else {
            n
        });
    }

    /// One field (RESP3 pairs a field with its value in an array of two).
    fn pair(&self, out: &mut ReplyWriter, field: &[u8], value: &[u8]) {
        if self.with_values && self.resp3 {
            out.array(2);
        }
        out.bulk(field);
        if self.with_values {
            out.bulk(value);
        }
    }
}

fn hrandfield(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len() == 2 {
        match read(ctx.keys, args[1])?.and_then(|h| h.random(rand::random())) {
            Some((field, _)) => ctx.out.bulk(field),
            None => ctx.out.null(),
        }
        return Ok(());
    }
    let count = parse_rand_count(args[2])?;
    let with_values = match args.get(3) {
        None => false,
        Some(opt) if args.len() == 4 && is(opt, "withvalues") => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    if with_values && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::err("value is out of range"));
    }
    let w = PairWriter {
        with_values,
        resp3: ctx.out.is_resp3(),
    };
    let Some(h) = read(ctx.keys, args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let out = &mut ctx.out;
    let size = h.len();
    let n = count.unsigned_abs() as usize;
    if count == 0 {
        out.array(0);
    } else if count < 0 || count == 1 {
        // Fields may repeat: each is picked independently.
        repeated_picks(
            out,
            n as u64,
            |out| w.header(out, n),
            |out, k| h.random_pairs(k, rand::random::<u64>, |f, v| w.pair(out, f, v)),
        )?;
    } else if n >= size {
        w.header(out, size);
        for (f, v) in h.iter() {
            w.pair(out, f, v);
        }
    } else if h.is_packed() || n * 3 > size {
        // Many of the fields: sample the whole hash.
        w.header(out, n);
        for (f, v) in sample(h.iter().collect(), n) {
            w.pair(out, f, v);
        }
    } else {
        // Few of the fields: draw until enough distinct ones.
        w.header(out, n);
        let mut seen: HashSet<&[u8]> = HashSet::with_capacity(n);
        while seen.len() < n {
            let Some((f, v)) = h.random(rand::random()) else {
                break;
            };
            if seen.insert(f) {
                w.pair(out, f, v);
            }
        }
    }
    Ok(())
}

fn hscan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut cursor = parse_cursor(args[2])?;
    let Some(h) = read(ctx.keys, args[1])? else {
        scan_reply(ctx, 0, std::iter::empty());
        return Ok(());
    };
    let opts = ScanOptions::parse(&args[3..])?;
    let mut found: Vec<Vec<u8>> = Vec::new();
    // As in Redis: stop after COUNT pairs (matching or not), or after ten times COUNT
    // steps over a sparse table.
    let (mut seen, mut steps) = (0usize, opts.count.saturating_mul(10));
    loop {
        cursor = h.scan(cursor, |f, v| {
            seen += 1;
            if opts.matches(f) {
                found.push(f.to_vec());
                found.push(v.to_vec());
            }
        });
        steps -= 1;
        if cursor == 0 || seen >= opts.count || steps == 0 {
            break;
        }
    }
    scan_reply(ctx, cursor, found.iter().map(Vec::as_slice));
    Ok(())
}
