//! Sorted-set commands that change a set: ZADD, ZINCRBY, ZREM, ZREMRANGEBY* and the
//! pops.

use strata_keyspace::zset::{AddFlags, Added};
use strata_keyspace::{Value, ZSet};

use super::{parse_lex_range, parse_score, parse_score_range, write_zset};
use crate::ctx::{Ctx, parse_timeout};
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};

pub(super) fn zadd(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, args, false)
}

pub(super) fn zincrby(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zadd_generic(ctx, args, true)
}

/// ZADD and ZINCRBY (which is ZADD INCR with one pair), as Redis's `zaddGenericCommand`.
fn zadd_generic(ctx: &mut Ctx, args: &[&[u8]], incr_command: bool) -> CmdResult {
    let key = args[1];
    let mut flags = AddFlags {
        incr: incr_command,
        ..AddFlags::default()
    };
    let mut ch = false;
    let mut i = 2;
    while let Some(opt) = args.get(i) {
        if is(opt, "nx") {
            flags.nx = true;
        } else if is(opt, "xx") {
            flags.xx = true;
        } else if is(opt, "ch") {
            ch = true;
        } else if is(opt, "incr") {
            flags.incr = true;
        } else if is(opt, "gt") {
            flags.gt = true;
        } else if is(opt, "lt") {
            flags.lt = true;
        } else {
            break;
        }
        i += 1;
    }
    let elements = args.len() - i;
    if elements == 0 || !elements.is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    if flags.nx && flags.xx {
        return Err(CmdError::err(
            "XX and NX options at the same time are not compatible",
        ));
    }
    if (flags.nx && (flags.gt || flags.lt)) || (flags.gt && flags.lt) {
        return Err(CmdError::err(
            "GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if flags.incr && elements > 2 {
        return Err(CmdError::err(
            "INCR option supports a single increment-element pair",
        ));
    }
    let pairs = args[i..]
        .chunks_exact(2)
        .map(|p| Ok((parse_score(p[0])?, p[1])))
        .collect::<Result<Vec<(f64, &[u8])>, CmdError>>()?;

    let limits = ctx.server.encoding_limits();
    let now = ctx.keys.now_ms;
    let no_touch = ctx.keys.no_touch;
    let (hash, db) = ctx.keys.db_for(key);
    let exists = match db.get(hash, key, now) {
        Some(e) if e.value().as_zset().is_none() => return Err(CmdError::WrongType),
        found => found.is_some(),
    };
    if !exists && flags.xx {
        if flags.incr {
            ctx.out.null();
        } else {
            ctx.out.integer(0);
        }
        return Ok(());
    }
    let first_len = pairs.first().map_or(0, |p| p.1.len());
    let (entry, _) = db.get_or_insert_with(hash, key, now, || {
        Value::ZSet(ZSet::for_first_member(first_len, &limits))
    });
    if !no_touch {
        entry.touch(now);
    }
    let Some(z) = entry.as_zset_mut() else {
        return Err(CmdError::WrongType);
    };
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut score = 0.0;
    let mut nan = false;
    for (s, member) in pairs {
        match z.add(s, member, flags, &limits) {
            Added::New(v) => {
                added += 1;
                processed += 1;
                score = v;
            }
            Added::Updated(v) => {
                updated += 1;
                processed += 1;
                score = v;
            }
            Added::Same(v) => {
                processed += 1;
                score = v;
            }
            Added::Refused => {}
            Added::NotANumber => {
                nan = true;
                break;
            }
        }
    }
    let empty = z.is_empty();
    if empty {
        ctx.keys.remove(key);
    }
    if added + updated > 0 {
        ctx.keys
            .changed(key, if flags.incr { "zincr" } else { "zadd" });
    }
    if added > 0 {
        ctx.keys.ready(key);
    }
    if nan {
        return Err(CmdError::err("resulting score is not a number (NaN)"));
    }
    if flags.incr {
        if processed > 0 {
            ctx.out.double(score);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out.integer(if ch { added + updated } else { added });
    }
    Ok(())
}

/// Removes `key` if the set it holds is now empty; says so with a "del" event.
fn remove_if_empty(ctx: &mut Ctx, key: &[u8], empty: bool) {
    if empty {
        ctx.keys.remove(key);
        ctx.keys.changed(key, "del");
    }
}

pub(super) fn zrem(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let key = args[1];
    let Some(z) = write_zset(ctx.keys, key)? else {
        ctx.out.integer(0);
        return Ok(());
    };
    let mut deleted = 0;
    for member in &args[2..] {
        if z.remove(member) {
            deleted += 1;
            if z.is_empty() {
                break;
            }
        }
    }
    let empty = z.is_empty();
    if deleted > 0 {
        ctx.keys.changed(key, "zrem");
        remove_if_empty(ctx, key, empty);
    }
    ctx.out.integer(deleted);
    Ok(())
}

/// Which ZREMRANGEBY* command runs.
#[derive(Clone, Copy)]
enum RemRange {
    Rank,
    Score,
    Lex,
}

fn zremrange(ctx: &mut Ctx, args: &[&[u8]], kind: RemRange) -> CmdResult {
    let key = args[1];
    // Parse the range before looking the key up, as Redis does.
    let (mut start, mut end) = (0, 0);
    let (mut scores, mut lex) = (None, None);
    match kind {
        RemRange::Rank => {
            start = parse::int(args[2])?;
            end = parse::int(args[3])?;
        }
        RemRange::Score => scores = Some(parse_score_range(args[2], args[3])?),
        RemRange::Lex => lex = Some(parse_lex_range(args[2], args[3])?),
    }
    let Some(z) = write_zset(ctx.keys, key)? else {
        ctx.out.integer(0);
        return Ok(());
    };
    let (from, count) = match (kind, scores, lex) {
        (RemRange::Rank, ..) => {
            let len = z.len() as i64;
            if start < 0 {
                start += len;
            }
            if end < 0 {
                end += len;
            }
            start = start.max(0);
            if start > end || start >= len {
                ctx.out.integer(0);
                return Ok(());
            }
            end = end.min(len - 1);
            (start as usize, (end - start + 1) as usize)
        }
        (_, Some(range), _) => match z.first_in_score_range(&range) {
            Some(first) => {
                let n = z
                    .iter_from(first, false)
                    .take_while(|(_, s)| range.lte_max(*s))
                    .count();
                (first, n)
            }
            None => (0, 0),
        },
        (_, _, Some(range)) => match z.first_in_lex_range(&range) {
            Some(first) => {
                let n = z
                    .iter_from(first, false)
                    .take_while(|(m, _)| range.lte_max(m))
                    .count();
                (first, n)
            }
            None => (0, 0),
        },
        _ => (0, 0),
    };
    let deleted = z.remove_ranks(from, count);
    let empty = z.is_empty();
    if deleted > 0 {
        let event = match kind {
            RemRange::Rank => "zremrangebyrank",
            RemRange::Score => "zremrangebyscore",
            RemRange::Lex => "zremrangebylex",
        };
        ctx.keys.changed(key, event);
        remove_if_empty(ctx, key, empty);
    }
    ctx.out.integer(deleted as i64);
    Ok(())
}

pub(super) fn zremrangebyrank(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zremrange(ctx, args, RemRange::Rank)
}

pub(super) fn zremrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zremrange(ctx, args, RemRange::Score)
}

pub(super) fn zremrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zremrange(ctx, args, RemRange::Lex)
}

/// How a pop replies (Redis's `genericZpopCommand` arguments).
#[derive(Clone, Copy)]
struct PopReply {
    /// Start with the key the items came from (blocking pops, ZMPOP).
    emit_key: bool,
    /// Each item as a [member, score] array.
    nested: bool,
    /// A null array, not an empty one, when every key is missing (ZMPOP).
    nil_when_empty: bool,
}

/// Pops up to `count` items (`None`: one, the plain ZPOPMIN form) from the first of
/// `keys` that exists.
fn pop_generic(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    max: bool,
    count: Option<usize>,
    reply: PopReply,
) -> CmdResult {
    let mut found = None;
    for key in keys {
        if let Some(z) = write_zset(ctx.keys, key)? {
            found = Some((*key, z.len()));
            break;
        }
    }
    let Some((key, len)) = found else {
        if reply.nil_when_empty {
            ctx.out.null_array();
        } else {
            ctx.out.array(0);
        }
        return Ok(());
    };
    let count = count.unwrap_or(1);
    if count == 0 {
        ctx.out.array(0);
        return Ok(());
    }
    let n = count.min(len);
    let mut popped = Vec::with_capacity(n);
    if let Some(z) = write_zset(ctx.keys, key)? {
        for _ in 0..n {
            match z.pop(max) {
                Some(item) => popped.push(item),
                None => break,
            }
        }
    }
    let empty = popped.len() == len;
    let event = if max { "zpopmax" } else { "zpopmin" };
    ctx.keys.changed(key, event);
    // Logged as the plain pop of what was taken, whatever the command (BZPOPMIN,
    // ZMPOP...), so that replay pops the same members from the same key.
    let taken = popped.len().to_string();
    ctx.keys
        .log_op(key, &[event.as_bytes(), key, taken.as_bytes()]);
    remove_if_empty(ctx, key, empty);

    let out = &mut ctx.out;
    match (reply.emit_key, reply.nested) {
        (false, false) => out.array(popped.len() * 2),
        (false, true) => out.array(popped.len()),
        (true, false) => {
            out.array(popped.len() * 2 + 1);
            out.bulk(key);
        }
        (true, true) => {
            out.array(2);
            out.bulk(key);
            out.array(popped.len());
        }
    }
    for (member, score) in &popped {
        if reply.nested {
            out.array(2);
        }
        out.bulk(member);
        out.double(*score);
    }
    Ok(())
}

fn zpop(ctx: &mut Ctx, args: &[&[u8]], max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::Syntax);
    }
    let count = match args.get(2) {
        Some(arg) => match parse::int(arg) {
            Ok(n) if n >= 0 => Some(n as usize),
            _ => return Err(CmdError::NotPositive),
        },
        None => None,
    };
    // RESP3 nests the pairs when a count is given.
    let nested = ctx.out.is_resp3() && count.is_some();
    let reply = PopReply {
        emit_key: false,
        nested,
        nil_when_empty: false,
    };
    pop_generic(ctx, &args[1..2], max, count, reply)
}

pub(super) fn zpopmin(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, false)
}

pub(super) fn zpopmax(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zpop(ctx, args, true)
}

/// The blocking pops: like the plain ones when some key has items; otherwise block,
/// or inside MULTI reply as a timeout would.
fn blocking_pop(
    ctx: &mut Ctx,
    keys: &[&[u8]],
    timeout_arg: &[u8],
    max: bool,
    count: Option<usize>,
    reply: PopReply,
) -> CmdResult {
    let timeout = parse_timeout(timeout_arg, ctx.keys.now_ms)?;
    for key in keys {
        let Some(z) = write_zset(ctx.keys, key)? else {
            continue;
        };
        if z.is_empty() {
            continue;
        }
        return pop_generic(ctx, &[key], max, count, reply);
    }
    if !ctx.may_block() {
        ctx.out.null_array();
        return Ok(());
    }
    ctx.block(keys, timeout);
    Ok(())
}

fn bzpop(ctx: &mut Ctx, args: &[&[u8]], max: bool) -> CmdResult {
    let (keys, timeout) = args[1..].split_at(args.len() - 2);
    let reply = PopReply {
        emit_key: true,
        nested: false,
        nil_when_empty: false,
    };
    blocking_pop(ctx, keys, timeout[0], max, None, reply)
}

pub(super) fn bzpopmin(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    bzpop(ctx, args, false)
}

pub(super) fn bzpopmax(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    bzpop(ctx, args, true)
}

/// A positive count argument, with Redis's error text for anything else.
fn positive(arg: &[u8], message: &'static str) -> Result<usize, CmdError> {
    match parse::int(arg) {
        Ok(n) if n >= 1 => Ok(n as usize),
        _ => Err(CmdError::err(message)),
    }
}

/// ZMPOP and BZMPOP from the numkeys argument on: the keys, MIN or MAX, the count.
fn parse_mpop<'a>(
    args: &[&'a [u8]],
    numkeys_at: usize,
) -> Result<(Vec<&'a [u8]>, bool, usize), CmdError> {
    let numkeys = positive(args[numkeys_at], "numkeys should be greater than 0")?;
    let where_at = numkeys_at
        .checked_add(numkeys)
        .and_then(|i| i.checked_add(1))
        .filter(|&i| i < args.len())
        .ok_or(CmdError::Syntax)?;
    let max = if is(args[where_at], "min") {
        false
    } else if is(args[where_at], "max") {
        true
    } else {
        return Err(CmdError::Syntax);
    };
    let mut count = None;
    let mut i = where_at + 1;
    while i < args.len() {
        if count.is_none() && is(args[i], "count") && i + 1 < args.len() {
            count = Some(positive(args[i + 1], "count should be greater than 0")?);
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let keys = args[numkeys_at + 1..where_at].to_vec();
    Ok((keys, max, count.unwrap_or(1)))
}

const MPOP_REPLY: PopReply = PopReply {
    emit_key: true,
    nested: true,
    nil_when_empty: true,
};

pub(super) fn zmpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (keys, max, count) = parse_mpop(args, 1)?;
    pop_generic(ctx, &keys, max, Some(count), MPOP_REPLY)
}

pub(super) fn bzmpop(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (keys, max, count) = parse_mpop(args, 2)?;
    blocking_pop(ctx, &keys, args[1], max, Some(count), MPOP_REPLY)
}
