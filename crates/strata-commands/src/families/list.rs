//! List commands, including the blocking pops.
//!
//! Lists are [`List`]s: quicklists of bounded packs whose node size comes from
//! `list-max-listpack-size` when the list is created. A list that loses its last
//! element is removed with its key, as in Redis. Every push that may make a list
//! non-empty says so with [`crate::ctx::Keys::ready`], so that clients blocked on the
//! key can be served.
//!
//! The blocking commands behave as their non-blocking forms when there is data (with
//! their own reply shapes); otherwise they ask to block (see [`Ctx::block`]), or, where
//! blocking is not allowed (MULTI), reply as Redis does on a timeout.

use strata_keyspace::list::NodeLimit;
use strata_keyspace::{List, Value};
use strata_resp::ReplyWriter;

use crate::ctx::{self, Ctx, Keys};
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};
use crate::spec::{BeginSearch, FindKeys, Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const LIST: Command = Command {
    group: Group::List,
    acl: acl!(LIST),
    ..Command::DEFAULT
};

const KEY_INSERT: &[KeySpec] = &[KeySpec::single(1, kf!(RW, INSERT))];
const KEY_POP: &[KeySpec] = &[KeySpec::single(1, kf!(RW, ACCESS, DELETE))];
const KEY_READ: &[KeySpec] = &[KeySpec::single(1, kf!(RO, ACCESS))];
const KEYS_MOVE: &[KeySpec] = &[
    KeySpec::single(1, kf!(RW, ACCESS, DELETE)),
    KeySpec::single(2, kf!(RW, INSERT)),
];

/// The keys of LMPOP and BLMPOP: a count at `index`, then that many keys.
const fn keynum_spec(index: i32) -> KeySpec {
    KeySpec {
        flags: kf!(RW, ACCESS, DELETE),
        begin: BeginSearch::Index(index),
        find: FindKeys::KeyNum {
            key_num_idx: 0,
            first_key: 1,
            step: 1,
        },
        notes: "",
    }
}

const PUSH_COMPLEXITY: &str = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.";

pub const COMMANDS: &[Command] = &[
    Command {
        name: "lpush",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: KEY_INSERT,
        summary: "Prepend one or multiple elements to a list",
        complexity: PUSH_COMPLEXITY,
        handler: Some(lpush),
        ..LIST
    },
    Command {
        name: "rpush",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: KEY_INSERT,
        summary: "Append one or multiple elements to a list",
        complexity: PUSH_COMPLEXITY,
        handler: Some(rpush),
        ..LIST
    },
    Command {
        name: "lpushx",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: KEY_INSERT,
        since: "2.2.0",
        summary: "Prepend an element to a list, only if the list exists",
        complexity: PUSH_COMPLEXITY,
        handler: Some(lpushx),
        ..LIST
    },
    Command {
        name: "rpushx",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: KEY_INSERT,
        since: "2.2.0",
        summary: "Append an element to a list, only if the list exists",
        complexity: PUSH_COMPLEXITY,
        handler: Some(rpushx),
        ..LIST
    },
    Command {
        name: "lpop",
        log_rule: crate::effects::LogRule::Replay,
        arity: -2,
        flags: flags!(WRITE, FAST),
        key_specs: KEY_POP,
        summary: "Remove and get the first elements in a list",
        complexity: "O(N) where N is the number of elements returned",
        handler: Some(lpop),
        ..LIST
    },
    Command {
        name: "rpop",
        log_rule: crate::effects::LogRule::Replay,
        arity: -2,
        flags: flags!(WRITE, FAST),
        key_specs: KEY_POP,
        summary: "Remove and get the last elements in a list",
        complexity: "O(N) where N is the number of elements returned",
        handler: Some(rpop),
        ..LIST
    },
    Command {
        name: "llen",
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::single(1, kf!(RO))],
        summary: "Get the length of a list",
        complexity: "O(1)",
        handler: Some(llen),
        ..LIST
    },
    Command {
        name: "lrange",
        arity: 4,
        flags: flags!(READONLY),
        key_specs: KEY_READ,
        summary: "Get a range of elements from a list",
        complexity: "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
        handler: Some(lrange),
        ..LIST
    },
    Command {
        name: "lindex",
        arity: 3,
        flags: flags!(READONLY),
        key_specs: KEY_READ,
        summary: "Get an element from a list by its index",
        complexity: "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
        handler: Some(lindex),
        ..LIST
    },
    Command {
        name: "lset",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[KeySpec::single(1, kf!(RW, UPDATE))],
        summary: "Set the value of an element in a list by its index",
        complexity: "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
        handler: Some(lset),
        ..LIST
    },
    Command {
        name: "linsert",
        log_rule: crate::effects::LogRule::Replay,
        arity: 5,
        flags: flags!(WRITE, DENYOOM),
        key_specs: KEY_INSERT,
        since: "2.2.0",
        summary: "Insert an element before or after another element in a list",
        complexity: "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
        handler: Some(linsert),
        ..LIST
    },
    Command {
        name: "lrem",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE),
        key_specs: &[KeySpec::single(1, kf!(RW, DELETE))],
        summary: "Remove elements from a list",
        complexity: "O(N+M) where N is the length of the list and M is the number of elements removed.",
        handler: Some(lrem),
        ..LIST
    },
    Command {
        name: "ltrim",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE),
        key_specs: &[KeySpec::single(1, kf!(RW, DELETE))],
        summary: "Trim a list to the specified range",
        complexity: "O(N) where N is the number of elements to be removed by the operation.",
        handler: Some(ltrim),
        ..LIST
    },
    Command {
        name: "lpos",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: KEY_READ,
        since: "6.0.6",
        summary: "Return the index of matching elements on a list",
        complexity: "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
        handler: Some(lpos),
        ..LIST
    },
    Command {
        name: "lmove",
        arity: 5,
        flags: flags!(WRITE, DENYOOM),
        key_specs: KEYS_MOVE,
        since: "6.2.0",
        summary: "Pop an element from a list, push it to another list and return it",
        complexity: "O(1)",
        handler: Some(lmove),
        ..LIST
    },
    Command {
        name: "rpoplpush",
        arity: 3,
        flags: flags!(WRITE, DENYOOM),
        key_specs: KEYS_MOVE,
        since: "1.2.0",
        summary: "Remove the last element in a list, prepend it to another list and return it",
        complexity: "O(1)",
        handler: Some(rpoplpush),
        ..LIST
    },
    Command {
        name: "lmpop",
        arity: -4,
        flags: flags!(WRITE),
        key_specs: &[keynum_spec(1)],
        since: "7.0.0",
        summary: "Pop elements from a list",
        complexity: "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        handler: Some(lmpop),
        ..LIST
    },
    Command {
        name: "blpop",
        arity: -3,
        flags: flags!(WRITE, NOSCRIPT, BLOCKING),
        key_specs: &[KeySpec::range(1, -2, 1, kf!(RW, ACCESS, DELETE))],
        since: "2.0.0",
        summary: "Remove and get the first element in a list, or block until one is available",
        complexity: "O(N) where N is the number of provided keys.",
        handler: Some(blpop),
        ..LIST
    },
    Command {
        name: "brpop",
        arity: -3,
        flags: flags!(WRITE, NOSCRIPT, BLOCKING),
        key_specs: &[KeySpec::range(1, -2, 1, kf!(RW, ACCESS, DELETE))],
        since: "2.0.0",
        summary: "Remove and get the last element in a list, or block until one is available",
        complexity: "O(N) where N is the number of provided keys.",
        handler: Some(brpop),
        ..LIST
    },
    Command {
        name: "blmove",
        arity: 6,
        flags: flags!(WRITE, DENYOOM, NOSCRIPT, BLOCKING),
        key_specs: KEYS_MOVE,
        since: "6.2.0",
        summary: "Pop an element from a list, push it to another list and return it; or block until one is available",
        complexity: "O(1)",
        handler: Some(blmove),
        ..LIST
    },
    Command {
        name: "brpoplpush",
        arity: 4,
        flags: flags!(WRITE, DENYOOM, NOSCRIPT, BLOCKING),
        key_specs: KEYS_MOVE,
        since: "2.2.0",
        summary: "Pop an element from a list, push it to another list and return it; or block until one is available",
        complexity: "O(1)",
        handler: Some(brpoplpush),
        ..LIST
    },
    Command {
        name: "blmpop",
        arity: -5,
        flags: flags!(WRITE, BLOCKING),
        key_specs: &[keynum_spec(2)],
        since: "7.0.0",
        summary: "Pop elements from a list, or block until one is available",
        complexity: "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
        handler: Some(blmpop),
        ..LIST
    },
];

/// An end of a list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    /// LEFT or RIGHT, in any case.
    fn parse(arg: &[u8]) -> Result<End, CmdError> {
        if is(arg, "left") {
            Ok(End::Left)
        } else if is(arg, "right") {
            Ok(End::Right)
        } else {
            Err(CmdError::Syntax)
        }
    }

    fn push_event(self) -> &'static str {
        match self {
            End::Left => "lpush",
            End::Right => "rpush",
        }
    }

    fn pop_event(self) -> &'static str {
        match self {
            End::Left => "lpop",
            End::Right => "rpop",
        }
    }

    fn push(self, list: &mut List, value: &[u8]) {
        match self {
            End::Left => list.push_front(value),
            End::Right => list.push_back(value),
        }
    }

    fn pop(self, list: &mut List) -> Option<Vec<u8>> {
        match self {
            End::Left => list.pop_front(),
            End::Right => list.pop_back(),
        }
    }

    /// Replies with the `n` elements at this end, outermost first, and removes them.
    fn pop_many(self, out: &mut ReplyWriter, list: &mut List, n: usize) {
        out.array(n);
        match self {
            End::Left => {
                for e in list.iter().take(n) {
                    out.bulk(e);
                }
                list.drain_front(n);
            }
            End::Right => {
                for e in list.iter().rev().take(n) {
                    out.bulk(e);
                }
                list.drain_back(n);
            }
        }
    }
}

/// The node size for new lists, from `list-max-listpack-size`.
fn node_limit(ctx: &Ctx) -> NodeLimit {
    NodeLimit::from_config(ctx.server.encoding_limits().list_max_listpack_size)
}

/// The list at `key` for reading (counted as a hit or a miss): `Ok(None)` if there is
/// none, WRONGTYPE if the key holds another type.
fn read_list<'k>(keys: &'k mut Keys, key: &[u8]) -> Result<Option<&'k List>, CmdError> {
    match keys.read(key) {
        None => Ok(None),
        Some(e) => e.value().as_list().map(Some).ok_or(CmdError::WrongType),
    }
}

/// The list at `key` for writing: `Ok(None)` if there is none, WRONGTYPE if the key
/// holds another type.
fn write_list<'k>(keys: &'k mut Keys, key: &[u8]) -> Result<Option<&'k mut List>, CmdError> {
    match keys.get(key) {
        None => Ok(None),
        Some(e) => e.as_list_mut().map(Some).ok_or(CmdError::WrongType),
    }
}

/// The list at `key`, created empty if there is none.
fn list_or_new<'k>(
    keys: &'k mut Keys,
    key: &[u8],
    limit: NodeLimit,
) -> Result<&'k mut List, CmdError> {
    let now = keys.now_ms;
    let no_touch = keys.no_touch;
    let (hash, db) = keys.db_for(key);
    let (entry, _) =
        db.get_or_insert_with(hash, key, now, || Value::List(Box::new(List::new(limit))));
    if !no_touch {
        entry.touch(now);
    }
    entry.as_list_mut().ok_or(CmdError::WrongType)
}

/// Removes `key` if its list has just lost its last element.
fn remove_if_empty(ctx: &mut Ctx, key: &[u8], empty: bool) {
    if empty {
        ctx.keys.remove(key);
        ctx.keys.changed(key, "del");
    }
}

/// Records `n` elements changed under one event: Redis counts every element pushed
/// or removed as a change.
fn changed_elements(ctx: &mut Ctx, key: &[u8], event: &'static str, n: usize) {
    ctx.keys.changed(key, event);
    ctx.keys.dirty += n.saturating_sub(1) as u64;
}

/// Parses a count that must not be negative, with Redis's error text for both a
/// malformed and a negative value.
fn non_negative(arg: &[u8], error: impl FnOnce() -> CmdError) -> Result<u64, CmdError> {
    match parse::int(arg) {
        Ok(n) if n >= 0 => Ok(n as u64),
        _ => Err(error()),
    }
}

/// Parses a count that must be at least 1.
fn at_least_one(arg: &[u8], what: &'static str) -> Result<u64, CmdError> {
    match parse::int(arg) {
        Ok(n) if n >= 1 => Ok(n as u64),
        _ => Err(CmdError::err(format!("{what} should be greater than 0"))),
    }
}

/// An index as Redis reads it (negative counts from the end), if within `len`.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = len as i64;
    let index = if index < 0 { len + index } else { index };
    (0..len).contains(&index).then_some(index as usize)
}

/// Redis's reading of an inclusive range of indexes over `len` elements, as LRANGE and
/// LTRIM use it: the first and last index, or `None` if the range is empty.
fn clamp_range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let end = if end < 0 { len + end } else { end };
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

fn push_generic(ctx: &mut Ctx, args: &[&[u8]], end: End, existing_only: bool) -> CmdResult {
    let key = args[1];
    let list = if existing_only {
        match write_list(ctx.keys, key)? {
            Some(list) => list,
            None => {
                ctx.out.integer(0);
                return Ok(());
            }
        }
    } else {
        let limit = node_limit(ctx);
        list_or_new(ctx.keys, key, limit)?
    };
    for value in &args[2..] {
        end.push(list, value);
    }
    let len = list.len();
    changed_elements(ctx, key, end.push_event(), args.len() - 2);
    if !existing_only {
        ctx.keys.ready(key);
    }
    ctx.out.integer(len as i64);
    Ok(())
}

fn lpush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push_generic(ctx, args, End::Left, false)
}

fn rpush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push_generic(ctx, args, End::Right, false)
}

fn lpushx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push_generic(ctx, args, End::Left, true)
}

fn rpushx(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    push_generic(ctx, args, End::Right, true)
}

/// LPOP and RPOP: one element as a bulk string, or with a count an array (empty for a
/// count of 0, null for a missing key).
fn pop_generic(ctx: &mut Ctx, args: &[&[u8]], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::WrongArity(ctx.name()));
    }
    let count = match args.get(2) {
        Some(arg) => Some(non_negative(arg, || CmdError::NotPositive)?),
        None => None,
    };
    let key = args[1];
    let Some(list) = write_list(ctx.keys, key)? else {
        if count.is_some() {
            ctx.out.null_array();
        } else {
            ctx.out.null();
        }
        return Ok(());
    };
    let popped = match count {
        None => match end.pop(list) {
            Some(value) => {
                ctx.out.bulk(&value);
                1
            }
            None => {
                ctx.out.null();
                return Ok(());
            }
        },
        Some(0) => {
            ctx.out.array(0);
            return Ok(());
        }
        Some(n) => {
            let n = list.len().min(n.try_into().unwrap_or(usize::MAX));
            end.pop_many(&mut ctx.out, list, n);
            n
        }
    };
    let empty = list.is_empty();
    changed_elements(ctx, key, end.pop_event(), popped);
    remove_if_empty(ctx, key, empty);
    Ok(())
}

fn lpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    pop_generic(ctx, args, End::Left)
}

fn rpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    pop_generic(ctx, args, End::Right)
}

fn llen(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let len = read_list(ctx.keys, args[1])?.map_or(0, List::len);
    ctx.out.integer(len as i64);
    Ok(())
}

fn lrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let start = parse::int(args[2])?;
    let end = parse::int(args[3])?;
    let Some(list) = read_list(ctx.keys, args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    match clamp_range(list.len(), start, end) {
        None => ctx.out.array(0),
        Some((first, last)) => {
            let n = last - first + 1;
            ctx.out.array(n);
            for e in list.iter_from(first).take(n) {
                ctx.out.bulk(e);
            }
        }
    }
    Ok(())
}

fn lindex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let Some(list) = read_list(ctx.keys, args[1])? else {
        ctx.out.null();
        return Ok(());
    };
    let index = parse::int(args[2])?;
    match resolve_index(index, list.len()).and_then(|i| list.get(i)) {
        Some(e) => ctx.out.bulk(e),
        None => ctx.out.null(),
    }
    Ok(())
}

fn lset(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let Some(list) = write_list(ctx.keys, key)? else {
        return Err(CmdError::NoSuchKey);
    };
    let index = parse::int(args[2])?;
    match resolve_index(index, list.len()) {
        Some(i) if list.set(i, args[3]) => {}
        _ => return Err(CmdError::err("index out of range")),
    }
    ctx.keys.changed(key, "lset");
    ctx.out.ok();
    Ok(())
}

fn linsert(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let before = if is(args[2], "after") {
        false
    } else if is(args[2], "before") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let key = args[1];
    let Some(list) = write_list(ctx.keys, key)? else {
        ctx.out.integer(0);
        return Ok(());
    };
    let Some(at) = list.iter().position(|e| e == args[3]) else {
        ctx.out.integer(-1);
        return Ok(());
    };
    list.insert(if before { at } else { at + 1 }, args[4]);
    let len = list.len();
    ctx.keys.changed(key, "linsert");
    ctx.keys.ready(key);
    ctx.out.integer(len as i64);
    Ok(())
}

fn lrem(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let count = parse::int(args[2])?;
    let key = args[1];
    let Some(list) = write_list(ctx.keys, key)? else {
        ctx.out.integer(0);
        return Ok(());
    };
    // A negative count removes from the tail; 0 removes every match.
    let limit = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
    let removed = list.remove_matching(args[3], limit, count < 0);
    let empty = list.is_empty();
    if removed > 0 {
        changed_elements(ctx, key, "lrem", removed);
    }
    remove_if_empty(ctx, key, empty);
    ctx.out.integer(removed as i64);
    Ok(())
}

fn ltrim(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let start = parse::int(args[2])?;
    let end = parse::int(args[3])?;
    let key = args[1];
    let Some(list) = write_list(ctx.keys, key)? else {
        ctx.out.ok();
        return Ok(());
    };
    let len = list.len();
    let (front, back) = match clamp_range(len, start, end) {
        Some((first, last)) => (first, len - last - 1),
        None => (len, 0),
    };
    list.trim(front, back);
    let empty = list.is_empty();
    changed_elements(ctx, key, "ltrim", front + back);
    remove_if_empty(ctx, key, empty);
    ctx.out.ok();
    Ok(())
}

/// What LPOS looks for: RANK, COUNT (`None` when not given) and MAXLEN.
struct LposQuery {
    rank: i64,
    count: Option<u64>,
    maxlen: u64,
}

fn lpos(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut q = LposQuery {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let mut j = 3;
    while j < args.len() {
        let value = args.get(j + 1).copied();
        match value {
            Some(v) if is(args[j], "rank") => {
                q.rank = parse::int(v)?;
                if q.rank == 0 {
                    return Err(CmdError::err(
                        "RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    ));
                }
            }
            Some(v) if is(args[j], "count") => {
                q.count = Some(non_negative(v, || {
                    CmdError::err("COUNT can't be negative")
                })?);
            }
            Some(v) if is(args[j], "maxlen") => {
                q.maxlen = non_negative(v, || CmdError::err("MAXLEN can't be negative"))?;
            }
            _ => return Err(CmdError::Syntax),
        }
        j += 2;
    }
    let Some(list) = read_list(ctx.keys, args[1])? else {
        if q.count.is_some() {
            ctx.out.array(0);
        } else {
            ctx.out.null();
        }
        return Ok(());
    };
    let element = args[2];
    let len = list.len();
    let found = if q.rank < 0 {
        // Redis negates the rank in a C long: the most negative one stays negative,
        // and then every match qualifies.
        q.rank = q.rank.wrapping_neg();
        lpos_scan(list.iter().rev(), element, &q, |i| len - 1 - i)
    } else {
        lpos_scan(list.iter(), element, &q, |i| i)
    };
    match q.count {
        Some(_) => {
            ctx.out.array(found.len());
            for i in found {
                ctx.out.integer(i as i64);
            }
        }
        None => match found.first() {
            Some(&i) => ctx.out.integer(i as i64),
            None => ctx.out.null(),
        },
    }
    Ok(())
}

/// The indexes LPOS reports, scanning `elements` in order; `position` turns a scan
/// step into a list index.
fn lpos_scan<'a>(
    elements: impl Iterator<Item = &'a [u8]>,
    element: &[u8],
    q: &LposQuery,
    position: impl Fn(usize) -> usize,
) -> Vec<usize> {
    let mut found = Vec::new();
    let mut matches: i64 = 0;
    for (step, e) in elements.enumerate() {
        if q.maxlen != 0 && step as u64 >= q.maxlen {
            break;
        }
        if e != element {
            continue;
        }
        matches += 1;
        if matches < q.rank {
            continue;
        }
        found.push(position(step));
        match q.count {
            None => break,
            Some(0) => {}
            Some(count) => {
                let got = matches.wrapping_sub(q.rank).wrapping_add(1);
                if got >= 0 && got as u64 >= count {
                    break;
                }
            }
        }
    }
    found
}

/// LMOVE and its relatives once the source is known to hold a list (or to be absent):
/// pops at `from` of `src`, pushes at `to` of `dst`, replies with the element.
fn move_generic(ctx: &mut Ctx, src: &[u8], dst: &[u8], from: End, to: End) -> CmdResult {
    let Some(list) = write_list(ctx.keys, src)? else {
        ctx.out.null();
        return Ok(());
    };
    if src == dst {
        let Some(value) = from.pop(list) else {
            ctx.out.null();
            return Ok(());
        };
        to.push(list, &value);
        ctx.keys.changed(dst, to.push_event());
        ctx.keys.changed(src, from.pop_event());
        ctx.keys.log_op(src, &[from.pop_event().as_bytes(), src]);
        ctx.keys
            .log_op(src, &[to.push_event().as_bytes(), src, &value]);
        ctx.keys.ready(dst);
        ctx.out.bulk(&value);
        return Ok(());
    }
    // Nothing moves if the destination holds another type.
    if ctx
        .keys
        .get(dst)
        .is_some_and(|e| e.value().as_list().is_none())
    {
        return Err(CmdError::WrongType);
    }
    let Some(list) = write_list(ctx.keys, src)? else {
        ctx.out.null();
        return Ok(());
    };
    let Some(value) = from.pop(list) else {
        ctx.out.null();
        return Ok(());
    };
    let empty = list.is_empty();
    let limit = node_limit(ctx);
    to.push(list_or_new(ctx.keys, dst, limit)?, &value);
    ctx.keys.changed(dst, to.push_event());
    ctx.keys.ready(dst);
    ctx.keys.changed(src, from.pop_event());
    ctx.keys.log_op(src, &[from.pop_event().as_bytes(), src]);
    ctx.keys
        .log_op(dst, &[to.push_event().as_bytes(), dst, &value]);
    remove_if_empty(ctx, src, empty);
    ctx.out.bulk(&value);
    Ok(())
}

fn lmove(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let from = End::parse(args[3])?;
    let to = End::parse(args[4])?;
    move_generic(ctx, args[1], args[2], from, to)
}

fn rpoplpush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    move_generic(ctx, args[1], args[2], End::Right, End::Left)
}

/// The arguments of LMPOP and BLMPOP after the timeout.
struct Mpop<'a> {
    keys: &'a [&'a [u8]],
    end: End,
    count: u64,
}

/// Parses `numkeys key... LEFT|RIGHT [COUNT count]`, `numkeys` being at `at`.
fn parse_mpop<'a>(args: &'a [&'a [u8]], at: usize) -> Result<Mpop<'a>, CmdError> {
    let numkeys = at_least_one(args[at], "numkeys")?;
    let end_at = (at as u64).saturating_add(numkeys).saturating_add(1);
    if end_at >= args.len() as u64 {
        return Err(CmdError::Syntax);
    }
    let end_at = end_at as usize;
    let end = End::parse(args[end_at])?;
    let mut count = None;
    let mut j = end_at + 1;
    while j < args.len() {
        match args.get(j + 1) {
            Some(v) if count.is_none() && is(args[j], "count") => {
                count = Some(at_least_one(v, "count")?);
            }
            _ => return Err(CmdError::Syntax),
        }
        j += 2;
    }
    Ok(Mpop {
        keys: &args[at + 1..end_at],
        end,
        count: count.unwrap_or(1),
    })
}

/// Pops up to `count` elements from the first non-empty list of `keys`, replying with
/// `[key, [elements]]`; false (and no reply) if every list is empty.
fn mpop(ctx: &mut Ctx, m: &Mpop) -> Result<bool, CmdError> {
    for &key in m.keys {
        let Some(list) = write_list(ctx.keys, key)? else {
            continue;
        };
        if list.is_empty() {
            continue;
        }
        let n = list.len().min(m.count.try_into().unwrap_or(usize::MAX));
        ctx.out.array(2);
        ctx.out.bulk(key);
        m.end.pop_many(&mut ctx.out, list, n);
        let empty = list.is_empty();
        changed_elements(ctx, key, m.end.pop_event(), n);
        let count = n.to_string();
        ctx.keys
            .log_op(key, &[m.end.pop_event().as_bytes(), key, count.as_bytes()]);
        remove_if_empty(ctx, key, empty);
        return Ok(true);
    }
    Ok(false)
}

fn lmpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let m = parse_mpop(args, 1)?;
    if !mpop(ctx, &m)? {
        ctx.out.null_array();
    }
    Ok(())
}

/// BLPOP and BRPOP: `[key, element]` from the first non-empty list.
fn bpop_generic(ctx: &mut Ctx, args: &[&[u8]], end: End) -> CmdResult {
    let last = args.len() - 1;
    let timeout = ctx::parse_timeout(args[last], ctx.keys.now_ms)?;
    let keys = &args[1..last];
    for &key in keys {
        let Some(list) = write_list(ctx.keys, key)? else {
            continue;
        };
        let Some(value) = end.pop(list) else {
            continue;
        };
        let empty = list.is_empty();
        ctx.out.array(2);
        ctx.out.bulk(key);
        ctx.out.bulk(&value);
        ctx.keys.changed(key, end.pop_event());
        ctx.keys.log_op(key, &[end.pop_event().as_bytes(), key]);
        remove_if_empty(ctx, key, empty);
        return Ok(());
    }
    if ctx.may_block() {
        ctx.block(keys, timeout);
    } else {
        ctx.out.null_array();
    }
    Ok(())
}

fn blpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    bpop_generic(ctx, args, End::Left)
}

fn brpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    bpop_generic(ctx, args, End::Right)
}

/// BLMOVE and BRPOPLPUSH: LMOVE if the source has data; otherwise block, or reply
/// with a null (not a null array, unlike a timeout) where blocking is not allowed.
fn bmove_generic(
    ctx: &mut Ctx,
    args: &[&[u8]],
    from: End,
    to: End,
    timeout: Option<std::time::Duration>,
) -> CmdResult {
    let (src, dst) = (args[1], args[2]);
    if write_list(ctx.keys, src)?.is_some() {
        return move_generic(ctx, src, dst, from, to);
    }
    if ctx.may_block() {
        ctx.block(&[src], timeout);
    } else {
        ctx.out.null();
    }
    Ok(())
}

fn blmove(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let from = End::parse(args[3])?;
    let to = End::parse(args[4])?;
    let timeout = ctx::parse_timeout(args[5], ctx.keys.now_ms)?;
    bmove_generic(ctx, args, from, to, timeout)
}

fn brpoplpush(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let timeout = ctx::parse_timeout(args[3], ctx.keys.now_ms)?;
    bmove_generic(ctx, args, End::Right, End::Left, timeout)
}

fn blmpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let m = parse_mpop(args, 2)?;
    let timeout = ctx::parse_timeout(args[1], ctx.keys.now_ms)?;
    if mpop(ctx, &m)? {
        return Ok(());
    }
    if ctx.may_block() {
        ctx.block(m.keys, timeout);
    } else {
        ctx.out.null_array();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use strata_keyspace::{EncodingLimits, Keyspace};
    use strata_resp::Protocol;

    use super::*;
    use crate::conn::{BlockRequest, ClientInfo, ConnState};
    use crate::fake::Fake;

    struct Kit {
        server: Fake,
        ks: Keyspace,
        conn: ConnState,
    }

    impl Kit {
        fn new() -> Kit {
            let info = ClientInfo::new(1, String::new(), String::new(), -1, 0, Box::new(|| {}));
            Kit {
                server: Fake {
                    limits: EncodingLimits {
                        list_max_listpack_size: 2,
                        ..EncodingLimits::default()
                    },
                    ..Fake::new()
                },
                ks: Keyspace::new(16, 4),
                conn: ConnState::new(Arc::new(info), true),
            }
        }

        /// Runs a command as the dispatcher would; returns the raw reply.
        fn run(&mut self, args: &[&str]) -> String {
            let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let mut out = Vec::new();
            crate::execute(
                &self.server,
                &self.ks,
                &mut self.conn,
                &mut out,
                &argv,
                1_000,
            );
            String::from_utf8_lossy(&out).into_owned()
        }

        /// Runs a command with ready keys tracked; returns the reply and the keys.
        fn run_tracking(&mut self, args: &[&str]) -> (String, Vec<Vec<u8>>) {
            let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let cmd = self.server.registry.get(argv[0]).expect("known command");
            let mut out = Vec::new();
            let mut keys = Keys::new(&self.ks, 0, 1_000);
            let positions = crate::table::key_positions(cmd, &argv);
            keys.lock_keys(positions.iter().map(|&i| argv[i]));
            keys.track_ready = true;
            let mut ctx = Ctx {
                keys: &mut keys,
                out: ReplyWriter::new(&mut out, Protocol::Resp2),
                conn: &mut self.conn,
                server: &self.server,
                cmd,
            };
            let result = (cmd.handler.expect("a handler"))(&mut ctx, &argv);
            let ready = ctx.keys.ready.iter().map(|(_, k)| k.clone()).collect();
            if let Err(e) = result {
                out = format!("-{e}\r\n").into_bytes();
            }
            (String::from_utf8_lossy(&out).into_owned(), ready)
        }
    }

    #[test]
    fn blocking_commands_block_only_when_allowed() {
        let mut k = Kit::new();
        assert_eq!(k.run(&["BLPOP", "a", "b", "1.5"]), "");
        assert_eq!(
            k.conn.block.take(),
            Some(BlockRequest {
                keys: vec![b"a".to_vec(), b"b".to_vec()],
                timeout: Some(Duration::from_millis(1500)),
            })
        );
        assert_eq!(k.run(&["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"]), "");
        assert_eq!(
            k.conn.block.take(),
            Some(BlockRequest {
                keys: vec![b"a".to_vec()],
                timeout: None,
            })
        );
        assert_eq!(k.run(&["BLMPOP", "0.001", "2", "x", "y", "LEFT"]), "");
        assert_eq!(
            k.conn.block.take().map(|b| (b.keys, b.timeout)),
            Some((
                vec![b"x".to_vec(), b"y".to_vec()],
                Some(Duration::from_millis(1))
            ))
        );
        assert_eq!(k.run(&["BRPOPLPUSH", "a", "b", "2"]), "");
        assert!(k.conn.block.take().is_some());

        // Inside MULTI: the reply of a timeout, except for the moves (a null bulk).
        k.conn.may_block = false;
        assert_eq!(k.run(&["BLPOP", "a", "b", "0"]), "*-1\r\n");
        assert_eq!(k.run(&["BRPOP", "a", "0"]), "*-1\r\n");
        assert_eq!(k.run(&["BLMPOP", "0", "1", "a", "LEFT"]), "*-1\r\n");
        assert_eq!(k.run(&["BLMOVE", "a", "b", "LEFT", "LEFT", "0"]), "$-1\r\n");
        assert_eq!(k.run(&["BRPOPLPUSH", "a", "b", "0"]), "$-1\r\n");
        k.conn.set_proto(Protocol::Resp3);
        assert_eq!(k.run(&["BLPOP", "a", "0"]), "_\r\n");
        assert_eq!(k.run(&["BLMOVE", "a", "b", "LEFT", "LEFT", "0"]), "_\r\n");
        assert!(k.conn.block.is_none());

        // With data, whether or not blocking is allowed, no block is asked for.
        k.conn.set_proto(Protocol::Resp2);
        k.conn.may_block = true;
        k.run(&["RPUSH", "b", "1", "2"]);
        assert_eq!(
            k.run(&["BLPOP", "a", "b", "0"]),
            "*2\r\n$1\r\nb\r\n$1\r\n1\r\n"
        );
        assert_eq!(
            k.run(&["BLMOVE", "b", "c", "LEFT", "RIGHT", "0"]),
            "$1\r\n2\r\n"
        );
        assert_eq!(k.run(&["EXISTS", "b"]), ":0\r\n");
        assert!(k.conn.block.is_none());
        // Errors come before blocking.
        assert_eq!(k.run(&["BLPOP", "a", "-1"]), "-ERR timeout is negative\r\n");
        assert!(k.conn.block.is_none());
    }

    #[test]
    fn pushes_mark_keys_ready() {
        let mut k = Kit::new();
        let (reply, ready) = k.run_tracking(&["LPUSH", "l", "a", "b"]);
        assert_eq!((reply.as_str(), ready), (":2\r\n", vec![b"l".to_vec()]));
        let (_, ready) = k.run_tracking(&["RPUSH", "l", "c"]);
        assert_eq!(ready, vec![b"l".to_vec()]);
        let (_, ready) = k.run_tracking(&["LINSERT", "l", "BEFORE", "a", "x"]);
        assert_eq!(ready, vec![b"l".to_vec()]);
        let (_, ready) = k.run_tracking(&["LMOVE", "l", "m", "LEFT", "LEFT"]);
        assert_eq!(ready, vec![b"m".to_vec()]);
        let (_, ready) = k.run_tracking(&["RPOPLPUSH", "l", "n"]);
        assert_eq!(ready, vec![b"n".to_vec()]);
        let (_, ready) = k.run_tracking(&["BLMOVE", "l", "o", "LEFT", "LEFT", "0"]);
        assert_eq!(ready, vec![b"o".to_vec()]);
        // Pops, and pushes that fail, make nothing ready.
        let (_, ready) = k.run_tracking(&["LPOP", "l"]);
        assert!(ready.is_empty());
        let (_, ready) = k.run_tracking(&["LINSERT", "m", "BEFORE", "nothere", "x"]);
        assert!(ready.is_empty());
        k.run(&["SET", "s", "x"]);
        let (reply, ready) = k.run_tracking(&["RPUSH", "s", "x"]);
        assert!(reply.starts_with("-WRONGTYPE"));
        assert!(ready.is_empty());
        let (reply, ready) = k.run_tracking(&["LMOVE", "m", "s", "LEFT", "LEFT"]);
        assert!(reply.starts_with("-WRONGTYPE"));
        assert!(ready.is_empty());
    }

    #[test]
    fn new_lists_take_the_configured_node_size() {
        let mut k = Kit::new();
        k.run(&["RPUSH", "l", "1", "2", "3", "4", "5"]);
        let (hash, shard) = (k.ks.hash(b"l"), k.ks.shard_of(b"l"));
        let mut guard = k.ks.lock(shard);
        let list = guard
            .db(0)
            .get(hash, b"l", 1_000)
            .and_then(|e| e.value().as_list())
            .expect("a list");
        assert_eq!(list.limit(), NodeLimit::Entries(2));
        assert_eq!(list.node_lens().collect::<Vec<_>>(), [2, 2, 1]);
    }

    #[test]
    fn ranges_and_indexes() {
        assert_eq!(clamp_range(5, 0, -1), Some((0, 4)));
        assert_eq!(clamp_range(5, -100, 100), Some((0, 4)));
        assert_eq!(clamp_range(5, 3, 2), None);
        assert_eq!(clamp_range(5, 5, 10), None);
        assert_eq!(clamp_range(5, i64::MIN, i64::MAX), Some((0, 4)));
        assert_eq!(clamp_range(0, 0, -1), None);
        assert_eq!(resolve_index(-1, 5), Some(4));
        assert_eq!(resolve_index(-6, 5), None);
        assert_eq!(resolve_index(i64::MIN, 5), None);
        assert_eq!(resolve_index(5, 5), None);
    }
}
