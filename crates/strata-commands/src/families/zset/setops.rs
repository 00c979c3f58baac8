//! ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD (Redis's
//! `zunionInterDiffGenericCommand`).
//!
//! Inputs are read one at a time (each lives under its own shard lock guard), in the
//! order Redis processes them: union and intersection go from the smallest input to
//! the largest (a stable sort, so equal sizes keep their order), which fixes the order
//! in which weighted scores are added up.

use std::cmp::Ordering;
use std::collections::HashMap;

use strata_keyspace::{Ttl, Value, ValueRef, ZSet};

use super::reply_members;
use crate::ctx::{Ctx, Keys};
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Folds `value` into `target` (Redis's `zunionInterAggregate`): a sum of +inf and
    /// -inf is 0.
    fn fold(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// An input read as a sorted set. Any other type is WRONGTYPE here; a plain set is
/// read with every score 1 once that type exists.
enum Source<'a> {
    ZSet(&'a ZSet),
}

impl Source<'_> {
    fn len(&self) -> usize {
        match self {
            Source::ZSet(z) => z.len(),
        }
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            Source::ZSet(z) => z.score(member),
        }
    }

    fn for_each(&self, mut f: impl FnMut(&[u8], f64)) {
        match self {
            Source::ZSet(z) => z.iter().for_each(|(m, s)| f(m, s)),
        }
    }
}

fn source(value: ValueRef<'_>) -> Result<Source<'_>, CmdError> {
    match value {
        ValueRef::ZSet(z) => Ok(Source::ZSet(z)),
        _ => Err(CmdError::WrongType),
    }
}

/// Calls `f` with the input at `key`, if the key exists.
fn with_source<R>(keys: &mut Keys, key: &[u8], f: impl FnOnce(Source) -> R) -> Option<R> {
    let entry = keys.get(key)?;
    source(entry.value()).ok().map(f)
}

/// One input: its key, its weight and its size (0 when missing).
struct Input<'a> {
    key: &'a [u8],
    weight: f64,
    len: usize,
}

fn setop_generic(
    ctx: &mut Ctx,
    args: &[&[u8]],
    dst: Option<&[u8]>,
    numkeys_at: usize,
    op: Op,
    cardinality_only: bool,
) -> CmdResult {
    let setnum = parse::int(args[numkeys_at])?;
    if setnum < 1 {
        return Err(CmdError::err(format!(
            "at least 1 input key is needed for '{}' command",
            ctx.name()
        )));
    }
    let first = numkeys_at + 1;
    if setnum as u64 > (args.len() - first) as u64 {
        return Err(CmdError::Syntax);
    }
    let setnum = setnum as usize;
    // Look every input up (and check its type) before reading the options.
    let mut inputs = Vec::with_capacity(setnum);
    for &key in &args[first..first + setnum] {
        let len = match ctx.keys.read(key) {
            Some(e) => source(e.value())?.len(),
            None => 0,
        };
        inputs.push(Input {
            key,
            weight: 1.0,
            len,
        });
    }
    let mut aggregate = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0usize;
    let mut j = first + setnum;
    while j < args.len() {
        let remaining = args.len() - j;
        let opt = args[j];
        if op != Op::Diff && !cardinality_only && remaining > setnum && is(opt, "weights") {
            for (input, arg) in inputs.iter_mut().zip(&args[j + 1..]) {
                input.weight = super::parse_double(arg)
                    .ok_or_else(|| CmdError::err("weight value is not a float"))?;
            }
            j += 1 + setnum;
        } else if op != Op::Diff && !cardinality_only && remaining >= 2 && is(opt, "aggregate") {
            let a = args[j + 1];
            aggregate = if is(a, "sum") {
                Aggregate::Sum
            } else if is(a, "min") {
                Aggregate::Min
            } else if is(a, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::Syntax);
            };
            j += 2;
        } else if dst.is_none() && !cardinality_only && is(opt, "withscores") {
            withscores = true;
            j += 1;
        } else if cardinality_only && remaining >= 2 && is(opt, "limit") {
            limit = match parse::int(args[j + 1]) {
                Ok(n) if n >= 0 => n as usize,
                _ => return Err(CmdError::err("LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if op != Op::Diff {
        inputs.sort_by_key(|i| i.len);
    }
    let mut result = match op {
        Op::Inter => inter(ctx.keys, &inputs, aggregate),
        Op::Union => union(ctx.keys, &inputs, aggregate),
        Op::Diff => diff(ctx.keys, &inputs),
    };
    if cardinality_only {
        let n = if limit > 0 {
            result.len().min(limit)
        } else {
            result.len()
        };
        ctx.out.integer(n as i64);
        return Ok(());
    }
    result.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    match dst {
        Some(dst) => {
            let n = result.len();
            if n > 0 {
                let limits = ctx.server.encoding_limits();
                let z = ZSet::from_sorted(result, &limits);
                let old = ctx.keys.set(dst, Value::ZSet(z), Ttl::Persist);
                ctx.keys.free_replaced(old);
                let event = match op {
                    Op::Union => "zunionstore",
                    Op::Inter => "zinterstore",
                    Op::Diff => "zdiffstore",
                };
                ctx.keys.changed(dst, event);
                ctx.keys.ready(dst);
            } else {
                let old = ctx.keys.remove(dst);
                if old.is_some() {
                    ctx.keys.changed(dst, "del");
                }
                ctx.keys.free_replaced_entry(old);
            }
            ctx.out.integer(n as i64);
        }
        None => {
            let items = result.iter().map(|(m, s)| (m.as_slice(), *s));
            reply_members(&mut ctx.out, items, withscores);
        }
    }
    Ok(())
}

/// Weighted score of an item; 0 when the product is NaN (0 × inf).
fn weighted(weight: f64, score: f64) -> f64 {
    let v = weight * score;
    if v.is_nan() { 0.0 } else { v }
}

fn inter(keys: &mut Keys, inputs: &[Input], aggregate: Aggregate) -> Vec<(Vec<u8>, f64)> {
    let Some(smallest) = inputs.first().filter(|i| i.len > 0) else {
        return Vec::new();
    };
    let mut candidates = Vec::with_capacity(smallest.len);
    with_source(keys, smallest.key, |src| {
        src.for_each(|m, s| candidates.push((m.to_vec(), weighted(smallest.weight, s))));
    });
    for input in &inputs[1..] {
        let kept = with_source(keys, input.key, |src| {
            let mut kept = Vec::with_capacity(candidates.len());
            for (m, mut score) in std::mem::take(&mut candidates) {
                if let Some(s) = src.score(&m) {
                    aggregate.fold(&mut score, s * input.weight);
                    kept.push((m, score));
                }
            }
            kept
        });
        candidates = kept.unwrap_or_default();
        if candidates.is_empty() {
            break;
        }
    }
    candidates
}

fn union(keys: &mut Keys, inputs: &[Input], aggregate: Aggregate) -> Vec<(Vec<u8>, f64)> {
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::with_capacity(inputs.last().map_or(0, |i| i.len));
    for input in inputs.iter().filter(|i| i.len > 0) {
        with_source(keys, input.key, |src| {
            src.for_each(|m, s| {
                let score = weighted(input.weight, s);
                match acc.get_mut(m) {
                    Some(total) => aggregate.fold(total, score),
                    None => {
                        acc.insert(m.to_vec(), score);
                    }
                }
            });
        });
    }
    acc.into_iter().collect()
}

fn diff(keys: &mut Keys, inputs: &[Input]) -> Vec<(Vec<u8>, f64)> {
    let Some(first) = inputs.first().filter(|i| i.len > 0) else {
        return Vec::new();
    };
    let mut candidates = Vec::with_capacity(first.len);
    with_source(keys, first.key, |src| {
        src.for_each(|m, s| candidates.push((m.to_vec(), s)));
    });
    for input in inputs[1..].iter().filter(|i| i.len > 0) {
        with_source(keys, input.key, |src| {
            candidates.retain(|(m, _)| src.score(m).is_none());
        });
        if candidates.is_empty() {
            break;
        }
    }
    candidates
}

pub(super) fn zunion(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setop_generic(ctx, args, None, 1, Op::Union, false)
}

pub(super) fn zinter(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setop_generic(ctx, args, None, 1, Op::Inter, false)
}

pub(super) fn zdiff(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setop_generic(ctx, args, None, 1, Op::Diff, false)
}

pub(super) fn zunionstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setop_generic(ctx, args, Some(args[1]), 2, Op::Union, false)
}

pub(super) fn zinterstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setop_generic(ctx, args, Some(args[1]), 2, Op::Inter, false)
}

pub(super) fn zdiffstore(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setop_generic(ctx, args, Some(args[1]), 2, Op::Diff, false)
}

pub(super) fn zintercard(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    setop_generic(ctx, args, None, 1, Op::Inter, true)
}
