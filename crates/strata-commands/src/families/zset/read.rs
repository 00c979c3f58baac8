//! Sorted-set commands that read: lookups, counts, ranks, the ZRANGE family (and
//! ZRANGESTORE, which shares its parsing), ZRANDMEMBER and ZSCAN.

use rand::Rng;
use strata_keyspace::zset::{LexRange, ScoreRange, listpack};
use strata_keyspace::{Ttl, Value, ZSet, glob};
use strata_resp::format_double;

use super::{parse_lex_range, parse_score_range, read_zset, reply_members};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::families::collection::repeated_picks;
use crate::families::keys::parse_cursor;
use crate::parse::{self, is};

pub(super) fn zscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match read_zset(ctx.keys, args[1])?.and_then(|z| z.score(args[2])) {
        Some(s) => ctx.out.double(s),
        None => ctx.out.null(),
    }
    Ok(())
}

pub(super) fn zmscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let z = read_zset(ctx.keys, args[1])?;
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        match z.and_then(|z| z.score(member)) {
            Some(s) => ctx.out.double(s),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

pub(super) fn zcard(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = read_zset(ctx.keys, args[1])?.map_or(0, ZSet::len);
    ctx.out.integer(n as i64);
    Ok(())
}

pub(super) fn zcount(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let range = parse_score_range(args[2], args[3])?;
    let n = match read_zset(ctx.keys, args[1])? {
        Some(z) => match (
            z.first_in_score_range(&range),
            z.last_in_score_range(&range),
        ) {
            (Some(first), Some(last)) => (last + 1).saturating_sub(first),
            _ => 0,
        },
        None => 0,
    };
    ctx.out.integer(n as i64);
    Ok(())
}

pub(super) fn zlexcount(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let range = parse_lex_range(args[2], args[3])?;
    let n = read_zset(ctx.keys, args[1])?.map_or(0, |z| z.lex_count(&range));
    ctx.out.integer(n as i64);
    Ok(())
}

fn rank_generic(ctx: &mut Ctx, args: &[&[u8]], rev: bool) -> CmdResult {
    let z = read_zset(ctx.keys, args[1])?;
    match z.and_then(|z| z.rank(args[2]).map(|(r, _)| (r, z.len()))) {
        Some((r, len)) => ctx.out.integer(if rev { len - 1 - r } else { r } as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

pub(super) fn zrank(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    rank_generic(ctx, args, false)
}

pub(super) fn zrevrank(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    rank_generic(ctx, args, true)
}

/// What a ZRANGE-like command selects by.
#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Rank,
    Score,
    Lex,
}

/// A parsed ZRANGE request.
struct RangeRequest {
    by: By,
    rev: bool,
    withscores: bool,
    offset: i64,
    /// Negative: no limit.
    limit: i64,
    start: i64,
    end: i64,
    scores: Option<ScoreRange>,
    lex: Option<LexRange>,
}

/// Parses the arguments from the source key on, as Redis's `zrangeGenericCommand`:
/// `by` and `rev` are fixed by the legacy commands and chosen by options in ZRANGE.
fn parse_range(
    args: &[&[u8]],
    src_at: usize,
    store: bool,
    by: Option<By>,
    rev: Option<bool>,
) -> Result<RangeRequest, CmdError> {
    // Each option may be given once, and not at all where the command fixes it.
    let (mut by_opt, mut rev_opt) = (by, rev);
    let mut withscores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut j = src_at + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let opt = args[j];
        if !store && is(opt, "withscores") {
            withscores = true;
        } else if is(opt, "limit") && left >= 2 {
            offset = parse::int(args[j + 1])?;
            limit = parse::int(args[j + 2])?;
            j += 2;
        } else if rev_opt.is_none() && is(opt, "rev") {
            rev_opt = Some(true);
        } else if by_opt.is_none() && is(opt, "bylex") {
            by_opt = Some(By::Lex);
        } else if by_opt.is_none() && is(opt, "byscore") {
            by_opt = Some(By::Score);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let by = by_opt.unwrap_or(By::Rank);
    let rev = rev_opt.unwrap_or(false);
    if limit != -1 && by == By::Rank {
        return Err(CmdError::err(
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::err(
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    // BYSCORE and BYLEX ranges are given as max, min when reversed.
    let (mut min, mut max) = (args[src_at + 1], args[src_at + 2]);
    if rev && by != By::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let mut req = RangeRequest {
        by,
        rev,
        withscores,
        offset,
        limit,
        start: 0,
        end: 0,
        scores: None,
        lex: None,
    };
    match by {
        By::Rank => {
            req.start = parse::int(min)?;
            req.end = parse::int(max)?;
        }
        By::Score => req.scores = Some(parse_score_range(min, max)?),
        By::Lex => req.lex = Some(parse_lex_range(min, max)?),
    }
    Ok(req)
}

/// The items a request selects, as a starting rank, a count and a direction; and for
/// rank ranges, the count known before walking (ZRANGESTORE sizes its result by it).
struct Selection {
    from: usize,
    count: usize,
    rev: bool,
    known: Option<usize>,
}

fn select(z: &ZSet, req: &RangeRequest) -> Selection {
    let len = z.len();
    let empty = Selection {
        from: 0,
        count: 0,
        rev: req.rev,
        known: Some(0),
    };
    if req.by == By::Rank {
        let len = len as i64;
        let (mut start, mut end) = (req.start, req.end);
        if start < 0 {
            start += len;
        }
        if end < 0 {
            end += len;
        }
        start = start.max(0);
        if start > end || start >= len {
            return empty;
        }
        end = end.min(len - 1);
        let count = (end - start + 1) as usize;
        let from = if req.rev { len - 1 - start } else { start } as usize;
        return Selection {
            from,
            count,
            rev: req.rev,
            known: Some(count),
        };
    }
    // An offset past the end selects nothing; a negative one skips everything, as
    // Redis's element-by-element skip does.
    if req.offset < 0 || (req.offset > 0 && req.offset as u64 >= len as u64) {
        return empty;
    }
    let start = match (&req.scores, &req.lex, req.rev) {
        (Some(r), _, false) => z.first_in_score_range(r),
        (Some(r), _, true) => z.last_in_score_range(r),
        (_, Some(r), false) => z.first_in_lex_range(r),
        (_, Some(r), true) => z.last_in_lex_range(r),
        _ => None,
    };
    let Some(start) = start else {
        return Selection {
            known: None,
            ..empty
        };
    };
    let offset = req.offset as usize;
    let from = if req.rev {
        start.checked_sub(offset)
    } else {
        Some(start + offset).filter(|&f| f < len)
    };
    let Some(from) = from else {
        return Selection {
            known: None,
            ..empty
        };
    };
    let limit = usize::try_from(req.limit).unwrap_or(usize::MAX);
    let within = |m: &[u8], s: f64| match (&req.scores, &req.lex, req.rev) {
        (Some(r), _, false) => r.lte_max(s),
        (Some(r), _, true) => r.gte_min(s),
        (_, Some(r), false) => r.lte_max(m),
        (_, Some(r), true) => r.gte_min(m),
        _ => false,
    };
    let count = z
        .iter_from(from, req.rev)
        .take(limit)
        .take_while(|(m, s)| within(m, *s))
        .count();
    Selection {
        from,
        count,
        rev: req.rev,
        known: None,
    }
}

fn zrange_generic(ctx: &mut Ctx, args: &[&[u8]], by: Option<By>, rev: Option<bool>) -> CmdResult {
    let req = parse_range(args, 1, false, by, rev)?;
    let Some(z) = read_zset(ctx.keys, args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    let sel = select(z, &req);
    let items = z.iter_from(sel.from, sel.rev).take(sel.count);
    reply_members(&mut ctx.out, items, req.withscores);
    Ok(())
}

pub(super) fn zrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, args, None, None)
}

pub(super) fn zrevrange(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Rank), Some(true))
}

pub(super) fn zrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Score), Some(false))
}

pub(super) fn zrevrangebyscore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Score), Some(true))
}

pub(super) fn zrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Lex), Some(false))
}

pub(super) fn zrevrangebylex(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    zrange_generic(ctx, args, Some(By::Lex), Some(true))
}

pub(super) fn zrangestore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (dst, src) = (args[1], args[2]);
    let req = parse_range(args, 2, true, None, None)?;
    let limits = ctx.server.encoding_limits();
    let result = match read_zset(ctx.keys, src)? {
        Some(z) => {
            let sel = select(z, &req);
            // Filled item by item as Redis does, so the encoding (and whether -0
            // survives) follows the same conversions.
            let mut out = ZSet::for_store(sel.known, &limits);
            for (m, s) in z.iter_from(sel.from, sel.rev).take(sel.count) {
                out.add(s, m, Default::default(), &limits);
            }
            out
        }
        None => ZSet::new_listpack(),
    };
    let n = result.len();
    if n > 0 {
        let old = ctx.keys.set(dst, Value::ZSet(result), Ttl::Persist);
        ctx.keys.free_replaced(old);
        ctx.keys.changed(dst, "zrangestore");
        ctx.keys.ready(dst);
    } else {
        let old = ctx.keys.remove(dst);
        if old.is_some() {
            ctx.keys.changed(dst, "del");
        }
        ctx.keys.free_replaced_entry(old);
    }
    ctx.out.integer(n as i64);
    Ok(())
}

pub(super) fn zrandmember(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let Some(count_arg) = args.get(2) else {
        let z = read_zset(ctx.keys, args[1])?.filter(|z| !z.is_empty());
        let Some(z) = z else {
            ctx.out.null();
            return Ok(());
        };
        let rank = rand::rng().random_range(0..z.len());
        match z.get(rank) {
            Some((m, _)) => ctx.out.bulk(m),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    let count = parse::int(count_arg)?;
    if count == i64::MIN {
        return Err(CmdError::err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let withscores = match args.get(3) {
        None if args.len() == 3 => false,
        Some(arg) if args.len() == 4 && is(arg, "withscores") => true,
        _ => return Err(CmdError::Syntax),
    };
    if withscores && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::err("value is out of range"));
    }
    let z = read_zset(ctx.keys, args[1])?.filter(|z| !z.is_empty());
    let Some(z) = z else {
        ctx.out.array(0);
        return Ok(());
    };
    let len = z.len();
    let mut rng = rand::rng();
    if count < 0 || count == 1 {
        // Repetitions allowed: each pick is independent. The reply is written as it
        // is drawn, since the count is not bounded by the set's size.
        let n = count.unsigned_abs();
        let resp3 = ctx.out.is_resp3();
        return repeated_picks(
            &mut ctx.out,
            n,
            |out| out.array(if withscores && !resp3 { n * 2 } else { n } as usize),
            |out, k| {
                for _ in 0..k {
                    let Some((m, s)) = z.get(rng.random_range(0..len)) else {
                        break;
                    };
                    if withscores && resp3 {
                        out.array(2);
                    }
                    out.bulk(m);
                    if withscores {
                        out.double(s);
                    }
                }
            },
        );
    }
    let ranks: Vec<usize> = if count == 0 {
        Vec::new()
    } else if count as u64 >= len as u64 {
        // The whole set, highest first: Redis walks a sorted set from its tail here.
        (0..len).rev().collect()
    } else {
        distinct_ranks(&mut rng, len, count as usize)
    };
    let items: Vec<(&[u8], f64)> = ranks.iter().filter_map(|&r| z.get(r)).collect();
    reply_members(&mut ctx.out, items.into_iter(), withscores);
    Ok(())
}

/// `count` distinct ranks below `len` (`count < len`), in random order.
fn distinct_ranks(rng: &mut impl Rng, len: usize, count: usize) -> Vec<usize> {
    if count.saturating_mul(3) > len {
        // Most of the set: shuffle the first `count` places of all ranks.
        let mut all: Vec<usize> = (0..len).collect();
        for i in 0..count {
            let j = rng.random_range(i..len);
            all.swap(i, j);
        }
        all.truncate(count);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(count);
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let r = rng.random_range(0..len);
            if seen.insert(r) {
                out.push(r);
            }
        }
        out
    }
}

pub(super) fn zscan(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let cursor = parse_cursor(args[2])?;
    let Some(z) = read_zset(ctx.keys, args[1])? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < args.len() {
        let more = i + 1 < args.len();
        if is(args[i], "count") && more {
            count = parse::int(args[i + 1])?;
            if count < 1 {
                return Err(CmdError::Syntax);
            }
        } else if is(args[i], "match") && more {
            pattern = Some(args[i + 1]).filter(|p| *p != b"*");
        } else {
            return Err(CmdError::Syntax);
        }
        i += 2;
    }
    let listpack = z.is_listpack();
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut next = cursor;
    let mut budget = count.saturating_mul(10);
    loop {
        next = z.scan(next, |m, s| found.push((m.to_vec(), s)));
        budget -= 1;
        // Redis counts members and scores alike against COUNT.
        if next == 0 || budget <= 0 || (found.len() as i64).saturating_mul(2) >= count {
            break;
        }
    }
    found.retain(|(m, _)| pattern.is_none_or(|p| glob::matches(p, m)));
    let out = &mut ctx.out;
    out.array(2);
    out.bulk(itoa::Buffer::new().format(next).as_bytes());
    out.array(found.len() * 2);
    let mut text = Vec::new();
    for (m, s) in &found {
        out.bulk(m);
        // Scores as the encoding holds them: a listpack's integers print as integers.
        text.clear();
        match listpack::as_integer(*s).filter(|_| listpack) {
            Some(n) => text.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
            None => format_double(*s, &mut text),
        }
        out.bulk(&text);
    }
    Ok(())
}
