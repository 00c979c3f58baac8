//! Set commands.

use std::cmp::Reverse;
use std::collections::HashSet;

use strata_keyspace::set::{Elem, OwnedElem};
use strata_keyspace::{EncodingLimits, Set, Ttl, Value};
use strata_resp::ReplyWriter;

use crate::ctx::{Ctx, Keys};
use crate::error::{CmdError, CmdResult};
use crate::families::collection::{
    ScanOptions, parse_rand_count, repeated_picks, sample, scan_reply,
};
use crate::families::keys::parse_cursor;
use crate::parse::{self, is};
use crate::spec::{BeginSearch, FindKeys, Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const SET: Command = Command {
    group: Group::Set,
    acl: acl!(SET),
    ..Command::DEFAULT
};

const RO: &[KeySpec] = &[KeySpec::single(1, kf!(RO))];
const RO_ACCESS: &[KeySpec] = &[KeySpec::single(1, kf!(RO, ACCESS))];
const RO_ACCESS_ALL: &[KeySpec] = &[KeySpec::range(1, -1, 1, kf!(RO, ACCESS))];

/// A set operation over several keys, read-only.
const fn multi(
    name: &'static str,
    handler: crate::table::Handler,
    summary: &'static str,
    complexity: &'static str,
) -> Command {
    Command {
        name,
        arity: -2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS_ALL,
        tips: &["nondeterministic_output_order"],
        summary,
        complexity,
        handler: Some(handler),
        ..SET
    }
}

/// A set operation over several keys that stores its result at the first.
const fn store(
    name: &'static str,
    handler: crate::table::Handler,
    dst: &'static [KeySpec],
    summary: &'static str,
    complexity: &'static str,
) -> Command {
    Command {
        name,
        arity: -3,
        flags: flags!(WRITE, DENYOOM),
        key_specs: dst,
        summary,
        complexity,
        handler: Some(handler),
        ..SET
    }
}

const INTER_COMPLEXITY: &str =
    "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.";
const TOTAL_COMPLEXITY: &str = "O(N) where N is the total number of elements in all given sets.";

pub const COMMANDS: &[Command] = &[
    Command {
        name: "sadd",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, INSERT))],
        summary: "Adds one or more members to a set. Creates the key if it doesn't exist.",
        complexity: "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
        handler: Some(sadd),
        ..SET
    },
    Command {
        name: "srem",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, DELETE))],
        summary: "Removes one or more members from a set. Deletes the set if the last member was removed.",
        complexity: "O(N) where N is the number of members to be removed.",
        handler: Some(srem),
        ..SET
    },
    Command {
        name: "scard",
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: RO,
        summary: "Returns the number of members in a set.",
        complexity: "O(1)",
        handler: Some(scard),
        ..SET
    },
    Command {
        name: "sismember",
        arity: 3,
        flags: flags!(READONLY, FAST),
        key_specs: RO,
        summary: "Determines whether a member belongs to a set.",
        complexity: "O(1)",
        handler: Some(sismember),
        ..SET
    },
    Command {
        name: "smismember",
        arity: -3,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        since: "6.2.0",
        summary: "Determines whether multiple members belong to a set.",
        complexity: "O(N) where N is the number of elements being checked for membership",
        handler: Some(smismember),
        ..SET
    },
    Command {
        name: "smembers",
        arity: 2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output_order"],
        summary: "Returns all members of a set.",
        complexity: "O(N) where N is the set cardinality.",
        handler: Some(smembers),
        ..SET
    },
    multi(
        "sinter",
        sinter,
        "Returns the intersect of multiple sets.",
        INTER_COMPLEXITY,
    ),
    Command {
        name: "sintercard",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: &[KeySpec {
            flags: kf!(RO, ACCESS),
            begin: BeginSearch::Index(1),
            find: FindKeys::KeyNum {
                key_num_idx: 0,
                first_key: 1,
                step: 1,
            },
            notes: "",
        }],
        since: "7.0.0",
        summary: "Returns the number of members of the intersect of multiple sets.",
        complexity: INTER_COMPLEXITY,
        handler: Some(sintercard),
        ..SET
    },
    multi(
        "sunion",
        sunion,
        "Returns the union of multiple sets.",
        TOTAL_COMPLEXITY,
    ),
    multi(
        "sdiff",
        sdiff,
        "Returns the difference of multiple sets.",
        TOTAL_COMPLEXITY,
    ),
    store(
        "sinterstore",
        sinterstore,
        &[
            KeySpec::single(1, kf!(RW, UPDATE)),
            KeySpec::range(2, -1, 1, kf!(RO, ACCESS)),
        ],
        "Stores the intersect of multiple sets in a key.",
        INTER_COMPLEXITY,
    ),
    store(
        "sunionstore",
        sunionstore,
        &[
            KeySpec::single(1, kf!(OW, UPDATE)),
            KeySpec::range(2, -1, 1, kf!(RO, ACCESS)),
        ],
        "Stores the union of multiple sets in a key.",
        TOTAL_COMPLEXITY,
    ),
    store(
        "sdiffstore",
        sdiffstore,
        &[
            KeySpec::single(1, kf!(OW, UPDATE)),
            KeySpec::range(2, -1, 1, kf!(RO, ACCESS)),
        ],
        "Stores the difference of multiple sets in a key.",
        TOTAL_COMPLEXITY,
    ),
    Command {
        name: "smove",
        arity: 4,
        flags: flags!(WRITE, FAST),
        key_specs: &[
            KeySpec::single(1, kf!(RW, ACCESS, DELETE)),
            KeySpec::single(2, kf!(RW, INSERT)),
        ],
        summary: "Moves a member from one set to another.",
        complexity: "O(1)",
        handler: Some(smove),
        ..SET
    },
    Command {
        name: "spop",
        arity: -2,
        flags: flags!(WRITE, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, DELETE))],
        tips: &["nondeterministic_output"],
        summary: "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
        handler: Some(spop),
        ..SET
    },
    Command {
        name: "srandmember",
        arity: -2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output"],
        summary: "Get one or multiple random members from a set",
        complexity: "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
        handler: Some(srandmember),
        ..SET
    },
    Command {
        name: "sscan",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output"],
        since: "2.8.0",
        summary: "Iterates over members of a set.",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        handler: Some(sscan),
        ..SET
    },
];

/// The set at `key` for a read (counting a hit or a miss); WRONGTYPE for another type.
fn read<'a>(keys: &'a mut Keys, key: &[u8]) -> Result<Option<&'a Set>, CmdError> {
    match keys.read(key) {
        None => Ok(None),
        Some(e) => e.value().as_set().map(Some).ok_or(CmdError::WrongType),
    }
}

/// The set at `key` for a write, if it exists; WRONGTYPE for another type.
fn get<'a>(keys: &'a mut Keys, key: &[u8]) -> Result<Option<&'a mut Set>, CmdError> {
    match keys.get(key) {
        None => Ok(None),
        Some(e) => e.as_set_mut().map(Some).ok_or(CmdError::WrongType),
    }
}

/// The set at `key`, already looked up and type-checked, without touching it again.
fn peek<'a>(keys: &'a mut Keys, key: &[u8]) -> Option<&'a Set> {
    let now = keys.now_ms;
    let (hash, db) = keys.db_for(key);
    db.peek(hash, key, now).and_then(|e| e.value().as_set())
}

/// Adds `members` to the set at `key`, creating the set (in the encoding the first
/// member calls for, as Redis's `setTypeCreate`) if absent; returns how many were
/// new. WRONGTYPE if the key holds another type.
fn add(ctx: &mut Ctx, key: &[u8], members: &[&[u8]]) -> Result<usize, CmdError> {
    let limits = ctx.server.encoding_limits();
    let now = ctx.keys.now_ms;
    let no_touch = ctx.keys.no_touch;
    let (hash, db) = ctx.keys.db_for(key);
    let (entry, _) = db.get_or_insert_with(hash, key, now, || {
        Value::Set(Set::for_member(
            members.first().copied().unwrap_or_default(),
        ))
    });
    if !no_touch {
        entry.touch(now);
    }
    let set = entry.as_set_mut().ok_or(CmdError::WrongType)?;
    Ok(members.iter().filter(|m| set.insert(m, &limits)).count())
}

fn reply_elem(out: &mut ReplyWriter, e: Elem) {
    match e {
        Elem::Int(n) => out.bulk_i64(n),
        Elem::Bytes(b) => out.bulk(b),
    }
}

/// Writes `set` as a RESP3 set (an array in RESP2).
fn reply_set(out: &mut ReplyWriter, set: Option<&Set>) {
    out.set(set.map_or(0, Set::len));
    for e in set.into_iter().flat_map(Set::iter) {
        reply_elem(out, e);
    }
}

fn sadd(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let added = add(ctx, args[1], &args[2..])?;
    if added > 0 {
        ctx.keys.changed(args[1], "sadd");
    }
    ctx.out.integer(added as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let Some(set) = get(ctx.keys, key)? else {
        ctx.out.integer(0);
        return Ok(());
    };
    let mut removed = 0;
    for member in &args[2..] {
        if set.remove(member) {
            removed += 1;
            if set.is_empty() {
                break;
            }
        }
    }
    let emptied = set.is_empty();
    if removed > 0 {
        ctx.keys.changed(key, "srem");
        if emptied {
            ctx.keys.remove(key);
            ctx.keys.changed(key, "del");
        }
    }
    ctx.out.integer(removed);
    Ok(())
}

fn scard(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = read(ctx.keys, args[1])?.map_or(0, Set::len);
    ctx.out.integer(n as i64);
    Ok(())
}

fn sismember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let found = read(ctx.keys, args[1])?.is_some_and(|s| s.contains(args[2]));
    ctx.out.integer(found as i64);
    Ok(())
}

fn smismember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let set = read(ctx.keys, args[1])?;
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        let found = set.is_some_and(|s| s.contains(member));
        ctx.out.integer(found as i64);
    }
    Ok(())
}

fn smembers(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let set = read(ctx.keys, args[1])?;
    reply_set(&mut ctx.out, set);
    Ok(())
}

/// Looks every key up once, as Redis does before any set operation: the sizes of the
/// sets (`None` for a missing key), or WRONGTYPE if any key holds something else.
fn sizes(keys: &mut Keys, names: &[&[u8]]) -> Result<Vec<Option<usize>>, CmdError> {
    names
        .iter()
        .map(|k| read(keys, k).map(|s| s.map(Set::len)))
        .collect()
}

/// Where the result of a set operation goes.
#[derive(Clone, Copy)]
enum Output<'a> {
    /// Reply with the members.
    Members,
    /// Reply with the number of members, counting up to a limit (0: none).
    Card(usize),
    /// Store at this key and reply with the number of members.
    Store(&'a [u8]),
}

/// Stores a *STORE result (or deletes the destination if it is empty) and replies
/// with its size. The destination loses any TTL, as with Redis's `setKey`.
fn store_result(ctx: &mut Ctx, dst: &[u8], result: Set, event: &'static str) {
    let n = result.len();
    if n > 0 {
        let old = ctx.keys.set(dst, Value::Set(result), Ttl::Persist);
        ctx.keys.free_replaced(old);
        ctx.keys.changed(dst, event);
    } else {
        let old = ctx.keys.remove(dst);
        if old.is_some() {
            ctx.keys.changed(dst, "del");
        }
        ctx.keys.free_replaced_entry(old);
    }
    ctx.out.integer(n as i64);
}

/// SINTER, SINTERCARD and SINTERSTORE.
fn inter(ctx: &mut Ctx, names: &[&[u8]], output: Output) -> CmdResult {
    let sizes = sizes(ctx.keys, names)?;
    let mut members: Vec<OwnedElem> = Vec::new();
    if let Some(sizes) = sizes.into_iter().collect::<Option<Vec<usize>>>() {
        // Walk the smallest set and keep what every other set holds, smallest first.
        let mut order: Vec<usize> = (0..names.len()).collect();
        order.sort_by_key(|&i| sizes[i]);
        let first = names[order[0]];
        if let Some(s) = peek(ctx.keys, first) {
            members = s.iter().map(Elem::into_owned).collect();
        }
        for &i in &order[1..] {
            if members.is_empty() {
                break;
            }
            if names[i] == first {
                continue;
            }
            if let Some(s) = peek(ctx.keys, names[i]) {
                members.retain(|m| s.contains_elem(m.as_elem()));
            }
        }
    }
    match output {
        Output::Members => {
            ctx.out.set(members.len());
            for m in &members {
                reply_elem(&mut ctx.out, m.as_elem());
            }
        }
        Output::Card(limit) => {
            let n = if limit > 0 {
                members.len().min(limit)
            } else {
                members.len()
            };
            ctx.out.integer(n as i64);
        }
        Output::Store(dst) => {
            let limits = ctx.server.encoding_limits();
            let mut result = Set::new();
            for m in &members {
                result.insert_elem(m.as_elem(), &limits);
            }
            store_result(ctx, dst, result, "sinterstore");
        }
    }
    Ok(())
}

fn sinter(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    inter(ctx, &args[1..], Output::Members)
}

fn sinterstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    inter(ctx, &args[2..], Output::Store(args[1]))
}

fn sintercard(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let numkeys_error = || CmdError::err("numkeys should be greater than 0");
    let numkeys = parse::int(args[1]).map_err(|_| numkeys_error())?;
    if numkeys < 1 {
        return Err(numkeys_error());
    }
    if numkeys > (args.len() - 2) as i64 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    let numkeys = numkeys as usize;
    let mut limit = 0usize;
    let mut i = 2 + numkeys;
    while i < args.len() {
        if is(args[i], "limit") && i + 1 < args.len() {
            let n = parse::int(args[i + 1])
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| CmdError::err("LIMIT can't be negative"))?;
            limit = usize::try_from(n).unwrap_or(usize::MAX);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    inter(ctx, &args[2..2 + numkeys], Output::Card(limit))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Diff,
}

/// The union of the sets at `names` (missing keys are empty sets).
fn union(keys: &mut Keys, names: &[&[u8]], limits: &EncodingLimits) -> Set {
    let mut result = Set::new();
    for name in names {
        if let Some(s) = peek(keys, name) {
            for e in s.iter() {
                result.insert_elem(e, limits);
            }
        }
    }
    result
}

/// The members of the first set that none of the others holds, computed with the
/// algorithm Redis would choose: it decides the result's encoding, since copying the
/// whole first set (when the others are small) converts the result as the first set
/// would be converted.
fn diff(keys: &mut Keys, names: &[&[u8]], sizes: &[Option<usize>], limits: &EncodingLimits) -> Set {
    let mut result = Set::new();
    let Some(first_len) = sizes[0] else {
        return result;
    };
    let present: Vec<usize> = (0..names.len()).filter(|&i| sizes[i].is_some()).collect();
    // Walking the first set costs its size per set; removing the others' members
    // costs their sizes. The walk is favoured (halved), as in Redis.
    let walk_first = first_len * present.len() / 2;
    let remove_others: usize = sizes.iter().flatten().sum();
    if walk_first <= remove_others {
        let mut others: Vec<usize> = present[1..].to_vec();
        others.sort_by_key(|&i| Reverse(sizes[i]));
        let mut members: Vec<OwnedElem> = peek(keys, names[0])
            .map(|s| s.iter().map(Elem::into_owned).collect())
            .unwrap_or_default();
        for i in others {
            if let Some(s) = peek(keys, names[i]) {
                members.retain(|m| !s.contains_elem(m.as_elem()));
            }
        }
        for m in &members {
            result.insert_elem(m.as_elem(), limits);
        }
    } else {
        if let Some(s) = peek(keys, names[0]) {
            for e in s.iter() {
                result.insert_elem(e, limits);
            }
        }
        for name in &names[1..] {
            if result.is_empty() {
                break;
            }
            if let Some(s) = peek(keys, name) {
                for e in s.iter() {
                    result.remove_elem(e);
                }
            }
        }
    }
    result
}

/// SUNION, SDIFF and their STORE forms. The result is built as Redis builds it —
/// an intset that converts as members are added — so that it has Redis's encoding.
fn union_diff(ctx: &mut Ctx, names: &[&[u8]], output: Output, op: Op) -> CmdResult {
    let sizes = sizes(ctx.keys, names)?;
    let limits = ctx.server.encoding_limits();
    let result = match op {
        Op::Union => union(ctx.keys, names, &limits),
        Op::Diff => diff(ctx.keys, names, &sizes, &limits),
    };
    match output {
        Output::Store(dst) => {
            let event = match op {
                Op::Union => "sunionstore",
                Op::Diff => "sdiffstore",
            };
            store_result(ctx, dst, result, event);
        }
        Output::Members | Output::Card(_) => reply_set(&mut ctx.out, Some(&result)),
    }
    Ok(())
}

fn sunion(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    union_diff(ctx, &args[1..], Output::Members, Op::Union)
}

fn sunionstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    union_diff(ctx, &args[2..], Output::Store(args[1]), Op::Union)
}

fn sdiff(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    union_diff(ctx, &args[1..], Output::Members, Op::Diff)
}

fn sdiffstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    union_diff(ctx, &args[2..], Output::Store(args[1]), Op::Diff)
}

fn smove(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (src, dst, member) = (args[1], args[2], args[3]);
    if get(ctx.keys, src)?.is_none() {
        ctx.out.integer(0);
        return Ok(());
    }
    get(ctx.keys, dst)?;
    if src == dst {
        let found = get(ctx.keys, src)?.is_some_and(|s| s.contains(member));
        ctx.out.integer(found as i64);
        return Ok(());
    }
    let Some(set) = get(ctx.keys, src)? else {
        ctx.out.integer(0);
        return Ok(());
    };
    if !set.remove(member) {
        ctx.out.integer(0);
        return Ok(());
    }
    let emptied = set.is_empty();
    ctx.keys.changed(src, "srem");
    ctx.keys.log_op(src, &[&b"srem"[..], src, member]);
    if emptied {
        ctx.keys.remove(src);
        ctx.keys.changed(src, "del");
    }
    if add(ctx, dst, &[member])? > 0 {
        ctx.keys.changed(dst, "sadd");
        ctx.keys.log_op(dst, &[&b"sadd"[..], dst, member]);
    }
    ctx.out.integer(1);
    Ok(())
}

/// Logs SPOP's random removal as the SREM of the members removed.
fn log_removal(ctx: &mut Ctx, key: &[u8], members: &[Vec<u8>]) {
    if members.is_empty() {
        return;
    }
    let mut argv: Vec<&[u8]> = vec![b"srem", key];
    argv.extend(members.iter().map(Vec::as_slice));
    ctx.keys.log_op(key, &argv);
}

/// Records a pop from the set at `key`, deleting the key if it is now empty.
fn popped(ctx: &mut Ctx, key: &[u8], emptied: bool) {
    ctx.keys.changed(key, "spop");
    if emptied {
        ctx.keys.remove(key);
        ctx.keys.changed(key, "del");
    }
}

fn spop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match args.len() {
        2 => {}
        3 => return spop_count(ctx, args),
        _ => return Err(CmdError::Syntax),
    }
    let key = args[1];
    let limits = ctx.server.encoding_limits();
    let Some(set) = get(ctx.keys, key)? else {
        ctx.out.null();
        return Ok(());
    };
    let member = set.pop_random(1, rand::random::<u64>, &limits);
    let emptied = set.is_empty();
    match member.first() {
        Some(m) => reply_elem(&mut ctx.out, m.as_elem()),
        None => ctx.out.null(),
    }
    // Logged as the SREM of what was popped: SPOP's choice is random.
    let removed: Vec<Vec<u8>> = member.iter().map(|m| m.as_elem().to_vec()).collect();
    log_removal(ctx, key, &removed);
    popped(ctx, key, emptied);
    Ok(())
}

fn spop_count(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let count = parse::int(args[2])
        .ok()
        .filter(|n| *n >= 0)
        .ok_or(CmdError::NotPositive)?;
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let limits = ctx.server.encoding_limits();
    let Some(set) = get(ctx.keys, key)? else {
        ctx.out.set(0);
        return Ok(());
    };
    if count == 0 {
        ctx.out.set(0);
        return Ok(());
    }
    if count >= set.len() {
        // Everything goes: reply with the whole set, then delete it.
        reply_set(&mut ctx.out, Some(set));
        popped(ctx, key, true);
        return Ok(());
    }
    let members = set.pop_random(count, rand::random::<u64>, &limits);
    ctx.out.set(members.len());
    for m in &members {
        reply_elem(&mut ctx.out, m.as_elem());
    }
    let removed: Vec<Vec<u8>> = members.iter().map(|m| m.as_elem().to_vec()).collect();
    log_removal(ctx, key, &removed);
    popped(ctx, key, false);
    Ok(())
}

fn srandmember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match args.len() {
        2 => {
            match read(ctx.keys, args[1])?.and_then(|s| s.random(rand::random())) {
                Some(e) => reply_elem(&mut ctx.out, e),
                None => ctx.out.null(),
            }
            return Ok(());
        }
        3 => {}
        _ => return Err(CmdError::Syntax),
    }
    let count = parse_rand_count(args[2])?;
    let Some(set) = read(ctx.keys, args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let out = &mut ctx.out;
    let n = count.unsigned_abs() as usize;
    let size = set.len();
    if count == 0 {
        out.array(0);
    } else if count < 0 {
        // Members may repeat: each is picked independently.
        repeated_picks(
            out,
            n as u64,
            |out| out.array(n),
            |out, k| {
                for _ in 0..k {
                    match set.random(rand::random()) {
                        Some(e) => reply_elem(out, e),
                        None => out.null(),
                    }
                }
            },
        )?;
    } else if n >= size {
        out.array(size);
        for e in set.iter() {
            reply_elem(out, e);
        }
    } else if n * 3 > size {
        // Many of the members: sample the whole set.
        out.array(n);
        for e in sample(set.iter().collect(), n) {
            reply_elem(out, e);
        }
    } else {
        // Few of the members: draw until enough distinct ones.
        out.array(n);
        let mut seen: HashSet<Elem> = HashSet::with_capacity(n);
        while seen.len() < n {
            let Some(e) = set.random(rand::random()) else {
                break;
            };
            if seen.insert(e) {
                reply_elem(out, e);
            }
        }
    }
    Ok(())
}

fn sscan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut cursor = parse_cursor(args[2])?;
    let Some(set) = read(ctx.keys, args[1])? else {
        scan_reply(ctx, 0, std::iter::empty());
        return Ok(());
    };
    let opts = ScanOptions::parse(&args[3..])?;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let (mut seen, mut steps) = (0usize, opts.count.saturating_mul(10));
    loop {
        cursor = set.scan(cursor, |e| {
            seen += 1;
            e.with_bytes(|b| {
                if opts.matches(b) {
                    found.push(b.to_vec());
                }
            });
        });
        steps -= 1;
        if cursor == 0 || seen >= opts.count || steps == 0 {
            break;
        }
    }
    scan_reply(ctx, cursor, found.iter().map(Vec::as_slice));
    Ok(())
}
