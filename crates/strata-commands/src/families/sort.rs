//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted numerically or
//! as strings, optionally by the values of other keys (BY), replaced by the values of
//! other keys (GET), cut to a range (LIMIT), and for SORT stored as a list (STORE).
//!
//! The steps follow Redis's `sortCommandGeneric`, because its corners are visible:
//! options are parsed (and rejected) before the key is looked up; a BY pattern without
//! `*` means "do not sort" (lists and sorted sets keep their order, DESC reverses it),
//! except that a set stored with STORE is then sorted as strings so that the result
//! is deterministic; numeric sorting reads each value as `strtod` does and breaks
//! ties by comparing the elements' bytes; string sorting compares C strings (bytes up
//! to the first NUL, as `strcoll` does in the C locale); a missing BY key weighs 0 when
//! sorting numerically and sorts first when sorting as strings; sorting a compact
//! sorted set converts it to a skiplist, as Redis does.
//!
//! **Locking.** BY and GET patterns name keys that only the data reveals, so a call
//! with such a pattern locks every shard before it reads anything (and the command is
//! marked `touches_all`, so a transaction holding it locks everything too).

use std::cmp::Ordering;

use strata_keyspace::list::NodeLimit;
use strata_keyspace::{List, Ttl, Value, ValueRef};

use crate::ctx::{Ctx, Keys};
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};
use crate::server::Server;
use crate::spec::{BeginSearch, FindKeys, KeyFlags, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const UNKNOWN: KeySpec = KeySpec {
    flags: kf!(RO, ACCESS),
    begin: BeginSearch::Unknown,
    find: FindKeys::Unknown,
    notes: "For the optional BY/GET keyword. It is marked 'unknown' because the key names derive from the content of the key we sort",
};

const STORE: KeySpec = KeySpec {
    flags: kf!(OW, UPDATE),
    begin: BeginSearch::Unknown,
    find: FindKeys::Unknown,
    notes: "For the optional STORE keyword. It is marked 'unknown' because the keyword can appear anywhere in the argument array",
};

const COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set to sort, and M the number of returned elements. When the elements are not sorted, complexity is O(N).";

pub const COMMANDS: &[Command] = &[
    Command {
        name: "sort",
        arity: -2,
        flags: flags!(WRITE, DENYOOM),
        acl: acl!(SET, SORTEDSET, LIST, DANGEROUS),
        key_specs: &[KeySpec::single(1, kf!(RO, ACCESS)), UNKNOWN, STORE],
        getkeys: Some(sort_keys),
        key_flags: Some(sort_key_flags),
        touches_all: true,
        summary: "Sort the elements in a list, set or sorted set",
        complexity: COMPLEXITY,
        handler: Some(sort),
        ..Command::DEFAULT
    },
    Command {
        name: "sort_ro",
        arity: -2,
        flags: flags!(READONLY),
        acl: acl!(SET, SORTEDSET, LIST, DANGEROUS),
        key_specs: &[KeySpec::single(1, kf!(RO, ACCESS)), UNKNOWN],
        touches_all: true,
        since: "7.0.0",
        summary: "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
        complexity: COMPLEXITY,
        handler: Some(sort_ro),
        ..Command::DEFAULT
    },
];

/// SORT's keys as Redis's `sortGetKeys` finds them: the key sorted, and the argument
/// after the last STORE (skipping the arguments of LIMIT, GET and BY).
fn sort_keys(argv: &[&[u8]]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let arg = argv[i];
        if is(arg, "limit") {
            i += 2;
        } else if is(arg, "get") || is(arg, "by") {
            i += 1;
        } else if is(arg, "store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

/// The flags of a key position of SORT that no key spec names: the STORE
/// destination, which is overwritten.
fn sort_key_flags(_argv: &[&[u8]], _pos: usize) -> KeyFlags {
    kf!(OW, UPDATE)
}

fn sort(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, args, false)
}

fn sort_ro(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    sort_generic(ctx, args, true)
}

/// The options of one call.
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    /// A BY pattern without `*`: keep the elements' own order.
    dontsort: bool,
    gets: Vec<&'a [u8]>,
}

fn parse_options<'a>(args: &[&'a [u8]], readonly: bool) -> Result<Options<'a>, CmdError> {
    let mut o = Options {
        desc: false,
        alpha: false,
        limit_start: 0,
        limit_count: -1,
        store: None,
        by: None,
        dontsort: false,
        gets: Vec::new(),
    };
    let mut j = 2;
    while j < args.len() {
        let arg = args[j];
        let left = args.len() - j - 1;
        if is(arg, "asc") {
            o.desc = false;
        } else if is(arg, "desc") {
            o.desc = true;
        } else if is(arg, "alpha") {
            o.alpha = true;
        } else if is(arg, "limit") && left >= 2 {
            o.limit_start = parse::int(args[j + 1])?;
            o.limit_count = parse::int(args[j + 2])?;
            j += 2;
        } else if !readonly && is(arg, "store") && left >= 1 {
            o.store = Some(args[j + 1]);
            j += 1;
        } else if is(arg, "by") && left >= 1 {
            let pattern = args[j + 1];
            o.by = Some(pattern);
            // Once a BY without `*` is seen, nothing is sorted, whatever BY follows.
            if !c_str(pattern).contains(&b'*') {
                o.dontsort = true;
            }
            j += 1;
        } else if is(arg, "get") && left >= 1 {
            o.gets.push(args[j + 1]);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// The bytes a C string function sees: up to the first NUL.
fn c_str(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&c| c == 0) {
        Some(end) => &bytes[..end],
        None => bytes,
    }
}

/// Whether a pattern makes SORT read keys other than the one it sorts.
fn names_keys(pattern: &[u8]) -> bool {
    !is_hash_sign(pattern) && c_str(pattern).contains(&b'*')
}

fn is_hash_sign(pattern: &[u8]) -> bool {
    c_str(pattern) == b"#"
}

/// One element to sort, with what it is sorted by.
struct Item {
    elem: Vec<u8>,
    score: f64,
    /// The BY value, when sorting as strings by a pattern (`None`: the key is missing).
    by: Option<Vec<u8>>,
}

impl Item {
    fn new(elem: Vec<u8>) -> Item {
        Item {
            elem,
            score: 0.0,
            by: None,
        }
    }
}

/// The elements to sort and the range of them to output (`start..=end`, empty when
/// `end < start`).
struct Loaded {
    items: Vec<Item>,
    start: i64,
    end: i64,
}

/// Reads the list, set or sorted set at `key` (a missing key is an empty list) into
/// elements: all of them, or, for a list or sorted set that is not to be sorted, just
/// the range LIMIT selects, in the requested direction. Adjusts the options where the
/// type decides (a set stored "by nothing" is sorted as strings).
fn load(keys: &mut Keys, key: &[u8], o: &mut Options) -> Result<Loaded, CmdError> {
    let Some(entry) = keys.read(key) else {
        let (start, end) = range(o.limit_start, o.limit_count, 0);
        return Ok(Loaded {
            items: Vec::new(),
            start,
            end,
        });
    };
    if let Some(z) = entry.as_zset_mut()
        && z.is_listpack()
    {
        // Redis converts a compact sorted set for good before sorting it.
        z.convert_to_skiplist();
    }
    let value = entry.value();
    let len = match value {
        ValueRef::List(l) => l.len(),
        ValueRef::Set(s) => s.len(),
        ValueRef::ZSet(z) => z.len(),
        _ => return Err(CmdError::WrongType),
    };
    // A set sorted "by nothing" is still sorted when stored, so that the stored
    // result does not depend on the set's internal order.
    if o.dontsort && matches!(value, ValueRef::Set(_)) && o.store.is_some() {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let (start, end) = range(o.limit_start, o.limit_count, len as i64);
    let new = |b: &[u8]| Item::new(b.to_vec());
    // The range of a list or sorted set kept in its order is read directly.
    let (first, n) = if end >= start {
        (start as usize, (end - start + 1) as usize)
    } else {
        (0, 0)
    };
    let items = match value {
        ValueRef::List(l) if o.dontsort => {
            if o.desc {
                let mut items: Vec<Item> = l.iter_from(len - first - n).take(n).map(new).collect();
                items.reverse();
                items
            } else {
                l.iter_from(first).take(n).map(new).collect()
            }
        }
        ValueRef::ZSet(z) if o.dontsort => {
            if n == 0 {
                Vec::new()
            } else {
                let from = if o.desc { len - 1 - first } else { first };
                z.iter_from(from, o.desc)
                    .take(n)
                    .map(|(m, _)| new(m))
                    .collect()
            }
        }
        ValueRef::List(l) => l.iter().map(new).collect(),
        ValueRef::Set(s) => s.iter().map(|m| Item::new(m.to_vec())).collect(),
        ValueRef::ZSet(z) => z.iter().map(|(m, _)| new(m)).collect(),
        _ => Vec::new(),
    };
    if o.dontsort && !matches!(value, ValueRef::Set(_)) {
        return Ok(Loaded {
            items,
            start: 0,
            end: end - start,
        });
    }
    Ok(Loaded { items, start, end })
}

fn sort_generic(ctx: &mut Ctx, args: &[&[u8]], readonly: bool) -> CmdResult {
    let mut o = parse_options(args, readonly)?;
    let patterns =
        o.by.is_some_and(|p| !o.dontsort && names_keys(p)) || o.gets.iter().any(|p| names_keys(p));
    if patterns {
        ctx.keys.lock_all();
    }
    let key = args[1];
    let Loaded {
        mut items,
        start,
        end,
    } = load(ctx.keys, key, &mut o)?;
    if !o.dontsort {
        let mut bad_score = false;
        for item in items.iter_mut() {
            let value = match o.by {
                Some(pattern) => match lookup(ctx.server, ctx.keys, pattern, &item.elem) {
                    Some(v) => v,
                    None => continue,
                },
                None => item.elem.clone(),
            };
            if o.alpha {
                if o.by.is_some() {
                    item.by = Some(value);
                }
            } else {
                match sort_score(&value) {
                    Some(score) => item.score = score,
                    None => bad_score = true,
                }
            }
        }
        if bad_score {
            return Err(CmdError::err(
                "One or more scores can't be converted into double",
            ));
        }
        let (by_pattern, store, desc) = (o.by.is_some(), o.store.is_some(), o.desc);
        let order = |a: &Item, b: &Item| {
            let cmp = compare(a, b, o.alpha, by_pattern, store);
            if desc { cmp.reverse() } else { cmp }
        };
        items.sort_by(order);
    }

    let count = if end >= start {
        (end - start + 1) as usize
    } else {
        0
    };
    let chosen = items.iter().skip(start.max(0) as usize).take(count);
    let output_len = if o.gets.is_empty() {
        count
    } else {
        o.gets.len() * count
    };
    match o.store {
        None => {
            let chosen: Vec<&Item> = chosen.collect();
            let mut values: Vec<Option<Vec<u8>>> = Vec::with_capacity(output_len);
            for item in &chosen {
                for pattern in &o.gets {
                    values.push(lookup(ctx.server, ctx.keys, pattern, &item.elem));
                }
            }
            ctx.out.array(output_len);
            if o.gets.is_empty() {
                for item in chosen {
                    ctx.out.bulk(&item.elem);
                }
            } else {
                for v in values {
                    match v {
                        Some(v) => ctx.out.bulk(&v),
                        None => ctx.out.null(),
                    }
                }
            }
        }
        Some(dst) => {
            let limit = NodeLimit::from_config(ctx.server.encoding_limits().list_max_listpack_size);
            let mut list = List::new(limit);
            for item in chosen.collect::<Vec<_>>() {
                if o.gets.is_empty() {
                    list.push_back(&item.elem);
                }
                for pattern in &o.gets {
                    let v = lookup(ctx.server, ctx.keys, pattern, &item.elem);
                    list.push_back(v.as_deref().unwrap_or_default());
                }
            }
            if output_len > 0 {
                let old = ctx.keys.set(dst, Value::List(Box::new(list)), Ttl::Persist);
                ctx.keys.free_replaced(old);
                ctx.keys.changed(dst, "sortstore");
                ctx.keys.dirty += output_len as u64 - 1;
                ctx.keys.ready(dst);
            } else {
                let old = ctx.keys.remove(dst);
                if old.is_some() {
                    ctx.keys.changed(dst, "del");
                }
                ctx.keys.free_replaced_entry(old);
            }
            ctx.out.integer(output_len as i64);
        }
    }
    Ok(())
}

/// The range LIMIT selects from `len` elements, as Redis computes it: `start..=end`,
/// empty when `end < start`.
fn range(limit_start: i64, limit_count: i64, len: i64) -> (i64, i64) {
    let start = limit_start.clamp(0, len);
    let count = limit_count.clamp(-1, len);
    let mut start = start;
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// Redis's `sortCompare`, before DESC reverses it.
fn compare(a: &Item, b: &Item, alpha: bool, by_pattern: bool, store: bool) -> Ordering {
    if !alpha {
        // Scores are never NaN here; equal scores fall back to the elements' bytes so
        // that the result is deterministic.
        return a
            .score
            .partial_cmp(&b.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.elem.cmp(&b.elem));
    }
    if by_pattern {
        return match (&a.by, &b.by) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => text_cmp(x, y, store),
        };
    }
    text_cmp(&a.elem, &b.elem, store)
}

/// Compares strings as SORT ... ALPHA does: binary-safe when storing, otherwise as
/// C strings (collation in the C locale is byte order).
fn text_cmp(a: &[u8], b: &[u8], store: bool) -> Ordering {
    if store {
        a.cmp(b)
    } else {
        c_str(a).cmp(c_str(b))
    }
}

/// A value read as a sort weight, as Redis reads it with `strtod`: up to the first
/// NUL, leading spaces allowed, the empty string is 0, and the rest must be a whole
/// number that is neither NaN nor out of range.
fn sort_score(value: &[u8]) -> Option<f64> {
    let text = c_str(value);
    if text.is_empty() {
        return Some(0.0);
    }
    let start = text
        .iter()
        .position(|&c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    crate::families::zset::parse_double(&text[start..])
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` of
/// the pattern is replaced by the element, and a `->field` after it reads that field
/// of a hash instead of a string. Missing keys, fields, wrong types and patterns
/// without `*` give `None`.
///
/// The keys patterns name are not known before the command runs, so a string value
/// out of memory (`maxmemory-policy tiered`) is read back here, at once.
fn lookup(server: &dyn Server, keys: &mut Keys, pattern: &[u8], elem: &[u8]) -> Option<Vec<u8>> {
    if is_hash_sign(pattern) {
        return Some(elem.to_vec());
    }
    let text = c_str(pattern);
    let star = text.iter().position(|&c| c == b'*')?;
    let arrow = text[star + 1..]
        .windows(2)
        .position(|w| w == b"->")
        .map(|i| star + 1 + i)
        .filter(|&f| f + 2 < text.len());
    let (field, postfix_end) = match arrow {
        Some(f) => (Some(&pattern[f + 2..]), f),
        None => (None, pattern.len()),
    };
    let mut key = Vec::with_capacity(pattern.len() + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(&pattern[star + 1..postfix_end]);
    let db_index = keys.db;
    let entry = keys.read(&key)?;
    if let Some(c) = entry.value().as_cold() {
        let token = c.token();
        let (hash, db) = keys.db_for(&key);
        let refs = db.log_refs(hash, &key);
        let cold = crate::tiered::ColdKey {
            db: db_index,
            key,
            token,
            refs,
        };
        let value = crate::tiered::read(server, server.tiered_stats(), &cold).ok()?;
        let bytes = value.as_str().map(|s| s.to_vec());
        crate::tiered::put_back(keys, &cold, value);
        return bytes.filter(|_| field.is_none());
    }
    match (field, entry.value()) {
        (Some(field), ValueRef::Hash(h)) => h.get(field).map(<[u8]>::to_vec),
        (None, ValueRef::Str(s)) => Some(s.to_vec()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_sort_get_keys() {
        let argv: Vec<&[u8]> = vec![b"sort", b"k", b"by", b"store", b"store", b"d"];
        assert_eq!(sort_keys(&argv), vec![1, 5]);
        let argv: Vec<&[u8]> = vec![b"sort", b"k", b"store", b"a", b"store", b"b"];
        assert_eq!(sort_keys(&argv), vec![1, 5]);
        let argv: Vec<&[u8]> = vec![b"sort", b"k", b"limit", b"store", b"x", b"store"];
        assert_eq!(sort_keys(&argv), vec![1]);
    }

    #[test]
    fn limit_ranges() {
        assert_eq!(range(0, -1, 5), (0, 4));
        assert_eq!(range(1, 2, 5), (1, 2));
        assert_eq!(range(-3, 2, 5), (0, 1));
        assert_eq!(range(7, 2, 5), (4, 3));
        assert_eq!(range(0, 0, 5), (0, -1));
        assert_eq!(range(i64::MAX, i64::MAX, 5), (4, 3));
        assert_eq!(range(2, i64::MAX, 5), (2, 4));
        assert_eq!(range(0, -1, 0), (-1, -2));
    }

    #[test]
    fn scores_read_like_strtod() {
        assert_eq!(sort_score(b""), Some(0.0));
        assert_eq!(sort_score(b"  1.5"), Some(1.5));
        assert_eq!(sort_score(b"1\0junk"), Some(1.0));
        assert_eq!(sort_score(b"0x10"), Some(16.0));
        assert_eq!(sort_score(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_score(b" "), None);
        assert_eq!(sort_score(b"1 "), None);
        assert_eq!(sort_score(b"nan"), None);
        assert_eq!(sort_score(b"1e400"), None);
        assert_eq!(sort_score(b"abc"), None);
    }
}
