//! String commands.

use strata_keyspace::{Str, StrRef, Ttl, Value};

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::longdouble::LongDouble;
use crate::parse::{self, is};
use crate::spec::{Group, KeyFlags, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const STRING: Command = Command {
    group: Group::String,
    acl: acl!(STRING),
    ..Command::DEFAULT
};

pub const COMMANDS: &[Command] = &[
    Command {
        name: "get",
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::single(1, kf!(RO, ACCESS))],
        summary: "Returns the string value of a key.",
        complexity: "O(1)",
        handler: Some(get),
        ..STRING
    },
    Command {
        name: "set",
        arity: -3,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE, VARIABLE_FLAGS))
            .with_notes("RW and ACCESS due to the optional `GET` argument")],
        summary: "Sets the string value of a key, ignoring its type; optionally with an expiry.",
        complexity: "O(1)",
        handler: Some(set),
        key_flags: Some(set_key_flags),
        ..STRING
    },
    Command {
        name: "setnx",
        arity: 3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(OW, INSERT))],
        summary: "Sets the string value of a key only when the key does not exist.",
        complexity: "O(1)",
        handler: Some(setnx),
        ..STRING
    },
    Command {
        name: "setex",
        arity: 4,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[KeySpec::single(1, kf!(OW, UPDATE))],
        since: "2.0.0",
        summary: "Sets the string value and expiry time in seconds of a key.",
        complexity: "O(1)",
        handler: Some(setex),
        ..STRING
    },
    Command {
        name: "psetex",
        arity: 4,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[KeySpec::single(1, kf!(OW, UPDATE))],
        since: "2.6.0",
        summary: "Sets the string value and expiry time in milliseconds of a key.",
        complexity: "O(1)",
        handler: Some(psetex),
        ..STRING
    },
    Command {
        name: "getset",
        arity: 3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        summary: "Returns the previous string value of a key after setting it to a new value.",
        complexity: "O(1)",
        handler: Some(getset),
        ..STRING
    },
    Command {
        name: "getdel",
        arity: 2,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, DELETE))],
        since: "6.2.0",
        summary: "Returns the string value of a key after deleting the key.",
        complexity: "O(1)",
        handler: Some(getdel),
        ..STRING
    },
    Command {
        name: "getex",
        log_rule: crate::effects::LogRule::Expiry,
        arity: -2,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))
            .with_notes("RW and UPDATE because it changes the TTL")],
        since: "6.2.0",
        summary: "Returns the string value of a key after setting its expiration time.",
        complexity: "O(1)",
        handler: Some(getex),
        ..STRING
    },
    Command {
        name: "mget",
        arity: -2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::range(1, -1, 1, kf!(RO, ACCESS))],
        tips: &["request_policy:multi_shard"],
        summary: "Atomically returns the string values of one or more keys.",
        complexity: "O(N) where N is the number of keys to retrieve.",
        handler: Some(mget),
        ..STRING
    },
    Command {
        name: "mset",
        arity: -3,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[KeySpec::range(1, -1, 2, kf!(OW, UPDATE))],
        tips: &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
        since: "1.0.1",
        summary: "Atomically creates or modifies the string values of one or more keys.",
        complexity: "O(N) where N is the number of keys to set.",
        handler: Some(mset),
        ..STRING
    },
    Command {
        name: "msetnx",
        arity: -3,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[KeySpec::range(1, -1, 2, kf!(OW, INSERT))],
        tips: &["request_policy:multi_shard", "response_policy:agg_min"],
        since: "1.0.1",
        summary: "Atomically sets the string values of one or more keys only when none of the keys exist.",
        complexity: "O(N) where N is the number of keys to set.",
        handler: Some(msetnx),
        ..STRING
    },
    Command {
        name: "incr",
        arity: 2,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        summary: "Increments the integer value of a key by one.",
        complexity: "O(1)",
        handler: Some(incr),
        ..STRING
    },
    Command {
        name: "decr",
        arity: 2,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        summary: "Decrements the integer value of a key by one.",
        complexity: "O(1)",
        handler: Some(decr),
        ..STRING
    },
    Command {
        name: "incrby",
        arity: 3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        summary: "Increments the integer value of a key by a number.",
        complexity: "O(1)",
        handler: Some(incrby),
        ..STRING
    },
    Command {
        name: "decrby",
        arity: 3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        summary: "Decrements a number from the integer value of a key.",
        complexity: "O(1)",
        handler: Some(decrby),
        ..STRING
    },
    Command {
        name: "incrbyfloat",
        arity: 3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        since: "2.6.0",
        summary: "Increments the floating point value of a key by a number.",
        complexity: "O(1)",
        handler: Some(incrbyfloat),
        ..STRING
    },
    Command {
        name: "append",
        log_rule: crate::effects::LogRule::Replay,
        arity: 3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, INSERT))],
        since: "2.0.0",
        summary: "Appends a string to the value of a key; creates the key if needed.",
        complexity: "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.",
        handler: Some(append),
        ..STRING
    },
    Command {
        name: "strlen",
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::single(1, kf!(RO))],
        since: "2.2.0",
        summary: "Returns the length of a string value.",
        complexity: "O(1)",
        handler: Some(strlen),
        ..STRING
    },
    Command {
        name: "getrange",
        arity: 4,
        flags: flags!(READONLY),
        key_specs: &[KeySpec::single(1, kf!(RO, ACCESS))],
        since: "2.4.0",
        summary: "Returns a substring of the string stored at a key.",
        complexity: "O(N) where N is the length of the returned string.",
        handler: Some(getrange),
        ..STRING
    },
    Command {
        name: "substr",
        arity: 4,
        flags: flags!(READONLY),
        key_specs: &[KeySpec::single(1, kf!(RO, ACCESS))],
        since: "1.0.0",
        summary: "Returns a substring from a string value (deprecated: use GETRANGE).",
        complexity: "O(N) where N is the length of the returned string.",
        handler: Some(getrange),
        ..STRING
    },
    Command {
        name: "setrange",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[KeySpec::single(1, kf!(RW, UPDATE))],
        since: "2.2.0",
        summary: "Overwrites part of a string value at an offset; creates the key if needed.",
        complexity: "O(1), not counting the time taken to copy the new string in place.",
        handler: Some(setrange),
        ..STRING
    },
    Command {
        name: "lcs",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: &[KeySpec::range(1, 1, 1, kf!(RO, ACCESS))],
        since: "7.0.0",
        summary: "Finds the longest common substring of two string values.",
        complexity: "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        handler: Some(crate::families::lcs::lcs),
        ..STRING
    },
];

fn get(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match ctx.keys.read_str(args[1])? {
        Some(s) => s.with_bytes(|b| ctx.out.bulk(b)),
        None => ctx.out.null(),
    }
    Ok(())
}

/// SET reads the old value only with GET (Redis's `setGetKeys`, which matches the
/// option as a C string, so up to a NUL byte).
fn set_key_flags(args: &[&[u8]], _pos: usize) -> KeyFlags {
    if args
        .iter()
        .skip(3)
        .any(|a| is(crate::error::c_str(a, 4), "get"))
    {
        kf!(RW, ACCESS, UPDATE)
    } else {
        kf!(OW, UPDATE)
    }
}

/// Expiry options of SET and GETEX.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExpireUnit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// Turns an expiry argument into an absolute time in milliseconds, with Redis's
/// checks (`getExpireMillisecondsOrReply`).
fn expire_at(ctx: &Ctx, unit: ExpireUnit, arg: &[u8]) -> Result<u64, CmdError> {
    let n = parse::int(arg)?;
    let invalid = || CmdError::InvalidExpire(ctx.name());
    if n <= 0 {
        return Err(invalid());
    }
    let ms = match unit {
        ExpireUnit::Ex | ExpireUnit::ExAt => n.checked_mul(1000).ok_or_else(invalid)?,
        ExpireUnit::Px | ExpireUnit::PxAt => n,
    };
    let at = match unit {
        ExpireUnit::Ex | ExpireUnit::Px => {
            ms.checked_add(ctx.keys.now_ms as i64).ok_or_else(invalid)?
        }
        ExpireUnit::ExAt | ExpireUnit::PxAt => ms,
    };
    if at <= 0 {
        return Err(invalid());
    }
    Ok(at as u64)
}

fn set(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    let mut expire: Option<(ExpireUnit, &[u8])> = None;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i];
        let next = args.get(i + 1).copied();
        let unit = if is(opt, "ex") {
            Some(ExpireUnit::Ex)
        } else if is(opt, "px") {
            Some(ExpireUnit::Px)
        } else if is(opt, "exat") {
            Some(ExpireUnit::ExAt)
        } else if is(opt, "pxat") {
            Some(ExpireUnit::PxAt)
        } else {
            None
        };
        match unit {
            // The same expiry option may repeat (the last wins), as in Redis.
            Some(u) if !keepttl && expire.is_none_or(|(e, _)| e == u) && next.is_some() => {
                expire = Some((u, next.unwrap_or_default()));
                i += 1;
            }
            Some(_) => return Err(CmdError::Syntax),
            None if is(opt, "nx") && !xx => nx = true,
            None if is(opt, "xx") && !nx => xx = true,
            None if is(opt, "get") => get = true,
            None if is(opt, "keepttl") && expire.is_none() => keepttl = true,
            None => return Err(CmdError::Syntax),
        }
        i += 1;
    }
    let when = match expire {
        Some((unit, arg)) => Some(expire_at(ctx, unit, arg)?),
        None => None,
    };
    let key = args[1];
    let exists = if get {
        match ctx.keys.get(key) {
            Some(e) => {
                let s = e.value().as_str().ok_or(CmdError::WrongType)?;
                s.with_bytes(|b| ctx.out.bulk(b));
                true
            }
            None => {
                ctx.out.null();
                false
            }
        }
    } else if nx || xx {
        ctx.keys.exists(key)
    } else {
        // Not asked: storing looks the key up itself, removing it first if it
        // expired (with the same event and count as a lookup here), so a plain SET
        // finds its key once.
        false
    };
    if (nx && exists) || (xx && !exists) {
        if !get {
            ctx.out.null();
        }
        return Ok(());
    }
    let ttl = match (when, keepttl) {
        (Some(at), _) => Ttl::At(at),
        (None, true) => Ttl::Keep,
        (None, false) => Ttl::Persist,
    };
    let old = ctx.keys.set_string(key, args[2], ttl);
    ctx.keys.changed(key, "set");
    if when.is_some() {
        ctx.keys.notify(key, "expire");
    }
    free(ctx, old);
    if !get {
        ctx.out.ok();
    }
    Ok(())
}

/// Drops a replaced value, handing big ones to the server to free elsewhere.
fn free(ctx: &mut Ctx, old: Option<Value>) {
    ctx.keys.free_replaced(old);
}

fn setnx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if ctx.keys.exists(args[1]) {
        ctx.out.integer(0);
    } else {
        ctx.keys.set_string(args[1], args[2], Ttl::Persist);
        ctx.keys.changed(args[1], "set");
        ctx.out.integer(1);
    }
    Ok(())
}

fn setex_generic(ctx: &mut Ctx, args: &[&[u8]], unit: ExpireUnit) -> CmdResult {
    let at = expire_at(ctx, unit, args[2])?;
    let old = ctx.keys.set_string(args[1], args[3], Ttl::At(at));
    ctx.keys.changed(args[1], "set");
    ctx.keys.notify(args[1], "expire");
    free(ctx, old);
    ctx.out.ok();
    Ok(())
}

fn setex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setex_generic(ctx, args, ExpireUnit::Ex)
}

fn psetex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setex_generic(ctx, args, ExpireUnit::Px)
}

fn getset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match ctx.keys.get(args[1]) {
        Some(e) => e
            .value()
            .as_str()
            .ok_or(CmdError::WrongType)?
            .with_bytes(|b| ctx.out.bulk(b)),
        None => ctx.out.null(),
    }
    let old = ctx.keys.set_string(args[1], args[2], Ttl::Persist);
    ctx.keys.changed(args[1], "set");
    free(ctx, old);
    Ok(())
}

fn getdel(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match ctx.keys.read_str(args[1])? {
        None => ctx.out.null(),
        Some(s) => {
            s.with_bytes(|b| ctx.out.bulk(b));
            let old = ctx.keys.remove(args[1]);
            ctx.keys.changed(args[1], "del");
            ctx.keys.free_replaced_entry(old);
        }
    }
    Ok(())
}

fn getex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut expire: Option<(ExpireUnit, &[u8])> = None;
    let mut persist = false;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i];
        let next = args.get(i + 1).copied();
        let unit = if is(opt, "ex") {
            Some(ExpireUnit::Ex)
        } else if is(opt, "px") {
            Some(ExpireUnit::Px)
        } else if is(opt, "exat") {
            Some(ExpireUnit::ExAt)
        } else if is(opt, "pxat") {
            Some(ExpireUnit::PxAt)
        } else {
            None
        };
        match unit {
            Some(u) if !persist && expire.is_none_or(|(e, _)| e == u) && next.is_some() => {
                expire = Some((u, next.unwrap_or_default()));
                i += 1;
            }
            None if is(opt, "persist") && expire.is_none() => persist = true,
            _ => return Err(CmdError::Syntax),
        }
        i += 1;
    }
    let key = args[1];
    if ctx.keys.read_str(key)?.is_none() {
        ctx.out.null();
        return Ok(());
    }
    let when = match expire {
        Some((unit, arg)) => Some((unit, expire_at(ctx, unit, arg)?)),
        None => None,
    };
    let now = ctx.keys.now_ms;
    if let Some(s) = ctx.keys.get(key).and_then(|e| e.value().as_str()) {
        s.with_bytes(|b| ctx.out.bulk(b));
    }
    match when {
        Some((ExpireUnit::ExAt | ExpireUnit::PxAt, at)) if at <= now => {
            ctx.keys.remove(key);
            ctx.keys.changed(key, "del");
        }
        Some((_, at)) => {
            let (hash, db) = ctx.keys.db_for(key);
            db.set_expire(hash, key, at, now);
            ctx.keys.changed(key, "expire");
        }
        None if persist => {
            let (hash, db) = ctx.keys.db_for(key);
            let had_ttl = db.peek(hash, key, now).is_some_and(|e| e.has_ttl());
            if had_ttl {
                db.set_expire(hash, key, 0, now);
                ctx.keys.changed(key, "persist");
            }
        }
        None => {}
    }
    Ok(())
}

fn mget(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ctx.out.array(args.len() - 1);
    for key in &args[1..] {
        match ctx.keys.read(key).and_then(|e| e.value().as_str()) {
            Some(s) => s.with_bytes(|b| ctx.out.bulk(b)),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn mset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(ctx.name()));
    }
    for pair in args[1..].chunks_exact(2) {
        let old = ctx.keys.set_string(pair[0], pair[1], Ttl::Persist);
        ctx.keys.changed(pair[0], "set");
        free(ctx, old);
    }
    ctx.out.ok();
    Ok(())
}

fn msetnx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(ctx.name()));
    }
    if args[1..]
        .chunks_exact(2)
        .any(|pair| ctx.keys.exists(pair[0]))
    {
        ctx.out.integer(0);
        return Ok(());
    }
    for pair in args[1..].chunks_exact(2) {
        ctx.keys.set_string(pair[0], pair[1], Ttl::Persist);
        ctx.keys.changed(pair[0], "set");
    }
    ctx.out.integer(1);
    Ok(())
}

/// Adds `by` to the integer at `key`, keeping its TTL.
fn incr_generic(ctx: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    let now = ctx.keys.now_ms;
    let no_touch = ctx.keys.no_touch;
    let (hash, db) = ctx.keys.db_for(key);
    let (entry, _) = db.get_or_insert_with(hash, key, now, || Value::Str(Str::Int(0)));
    let s = entry.value().as_str().ok_or(CmdError::WrongType)?;
    let current = match s.as_int() {
        Some(n) => n,
        None => match s.with_bytes(strata_keyspace::value::parse_canonical_i64) {
            Some(n) => n,
            None => return Err(CmdError::NotInteger),
        },
    };
    let Some(new) = current.checked_add(by) else {
        return Err(CmdError::Overflow);
    };
    entry.set_str(StrRef::Int(new));
    if !no_touch {
        entry.touch(now);
    }
    ctx.keys.changed(key, "incrby");
    ctx.out.integer(new);
    Ok(())
}

fn incr(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    incr_generic(ctx, args[1], 1)
}

fn decr(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    incr_generic(ctx, args[1], -1)
}

fn incrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let by = parse::int(args[2])?;
    incr_generic(ctx, args[1], by)
}

fn decrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let by = parse::int(args[2])?;
    if by == i64::MIN {
        return Err(CmdError::err("decrement would overflow"));
    }
    incr_generic(ctx, args[1], -by)
}

fn incrbyfloat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let current = match ctx.keys.get(key) {
        None => LongDouble::from_i64(0),
        Some(e) => {
            let s = e.value().as_str().ok_or(CmdError::WrongType)?;
            match s.as_int() {
                Some(n) => LongDouble::from_i64(n),
                None => s.with_bytes(LongDouble::parse).ok_or(CmdError::NotFloat)?,
            }
        }
    };
    let by = LongDouble::parse(args[2]).ok_or(CmdError::NotFloat)?;
    let sum = current + by;
    if !sum.is_finite() {
        return Err(CmdError::NanOrInfinity);
    }
    let text = sum.to_human();
    let now = ctx.keys.now_ms;
    let no_touch = ctx.keys.no_touch;
    let (hash, db) = ctx.keys.db_for(key);
    let (entry, _) = db.get_or_insert_with(hash, key, now, || Value::Str(Str::Int(0)));
    entry.set_value(Value::Str(Str::plain(text.as_bytes())));
    if !no_touch {
        entry.touch(now);
    }
    ctx.keys.changed(key, "incrbyfloat");
    ctx.out.bulk(text.as_bytes());
    Ok(())
}

fn append(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let max = ctx.server.max_bulk_len();
    let now = ctx.keys.now_ms;
    let no_touch = ctx.keys.no_touch;
    let (hash, db) = ctx.keys.db_for(key);
    let len = match db.get(hash, key, now) {
        // A new key holds the argument as SET would store it ("int", "embstr").
        None => {
            db.set_str(hash, key, StrRef::new(args[2]), Ttl::Persist, now);
            args[2].len()
        }
        Some(entry) => {
            let s = entry.value().as_str().ok_or(CmdError::WrongType)?;
            let total = s.len() + args[2].len();
            if total > max {
                return Err(CmdError::StringTooLong);
            }
            if entry.append(args[2]).is_none() {
                // An integer: its digits and the argument, as a "raw" string.
                let mut bytes = entry
                    .value()
                    .as_str()
                    .map(StrRef::to_vec)
                    .unwrap_or_default();
                bytes.extend_from_slice(args[2]);
                entry.set_str(StrRef::Raw(&bytes));
            }
            if !no_touch {
                entry.touch(now);
            }
            total
        }
    };
    ctx.keys.changed(key, "append");
    ctx.out.integer(len as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let len = ctx.keys.read_str(args[1])?.map_or(0, StrRef::len);
    ctx.out.integer(len as i64);
    Ok(())
}

fn getrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut start = parse::int(args[2])?;
    let mut end = parse::int(args[3])?;
    let Some(s) = ctx.keys.read_str(args[1])? else {
        ctx.out.bulk(b"");
        return Ok(());
    };
    s.with_bytes(|b| {
        let len = b.len() as i64;
        if start < 0 && end < 0 && start > end {
            return ctx.out.bulk(b"");
        }
        if start < 0 {
            start += len;
        }
        if end < 0 {
            end += len;
        }
        start = start.max(0);
        end = end.max(0);
        if end >= len {
            end = len - 1;
        }
        if start > end || len == 0 {
            ctx.out.bulk(b"");
        } else {
            ctx.out.bulk(&b[start as usize..=end as usize]);
        }
    });
    Ok(())
}

fn setrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let offset = parse::int(args[2])?;
    if offset < 0 {
        return Err(CmdError::err("offset is out of range"));
    }
    let key = args[1];
    let value = args[3];
    // A server without a limit says usize::MAX: that must not wrap to -1.
    let max = i64::try_from(ctx.server.max_bulk_len()).unwrap_or(i64::MAX);
    let too_long = offset
        .checked_add(value.len() as i64)
        .is_none_or(|total| total > max);
    let now = ctx.keys.now_ms;
    let no_touch = ctx.keys.no_touch;
    let (hash, db) = ctx.keys.db_for(key);
    let len = match db.get(hash, key, now) {
        None => {
            if value.is_empty() {
                ctx.out.integer(0);
                return Ok(());
            }
            if too_long {
                return Err(CmdError::StringTooLong);
            }
            let mut bytes = vec![0u8; offset as usize + value.len()];
            bytes[offset as usize..].copy_from_slice(value);
            let len = bytes.len();
            db.set(hash, key, Value::Str(Str::raw(bytes)), Ttl::Persist, now);
            len
        }
        Some(entry) => {
            let s = entry.value().as_str().ok_or(CmdError::WrongType)?;
            if value.is_empty() {
                let len = s.len();
                ctx.out.integer(len as i64);
                return Ok(());
            }
            if too_long {
                return Err(CmdError::StringTooLong);
            }
            let mut bytes = s.to_vec();
            let end = offset as usize + value.len();
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[offset as usize..end].copy_from_slice(value);
            let len = bytes.len();
            entry.set_str(StrRef::Raw(&bytes));
            if !no_touch {
                entry.touch(now);
            }
            len
        }
    };
    ctx.keys.changed(key, "setrange");
    ctx.out.integer(len as i64);
    Ok(())
}
