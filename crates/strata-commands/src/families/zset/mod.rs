//! Sorted-set commands: their table entries and the helpers they share.
//!
//! - `write`: ZADD, ZINCRBY, ZREM, ZREMRANGEBY*, and the pops (blocking or not).
//! - `read`: lookups, counts, ranks, the ZRANGE family, ZRANDMEMBER, ZSCAN.
//! - `setops`: ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD.

mod read;
mod setops;
mod write;

use strata_keyspace::ZSet;
use strata_keyspace::zset::{LexBound, LexRange, ScoreRange};
use strata_resp::ReplyWriter;

use crate::ctx::Keys;
use crate::error::CmdError;
use crate::spec::{BeginSearch, FindKeys, Group, KeyFlags, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const ZSET: Command = Command {
    group: Group::SortedSet,
    acl: acl!(SORTEDSET),
    ..Command::DEFAULT
};

const RO_ACCESS: &[KeySpec] = &[KeySpec::single(1, kf!(RO, ACCESS))];
const RW_DELETE: &[KeySpec] = &[KeySpec::single(1, kf!(RW, DELETE))];
const POP_SPEC: &[KeySpec] = &[KeySpec::single(1, kf!(RW, ACCESS, DELETE))];

/// Keys counted by the argument at `index`, starting right after it.
const fn keynum(index: i32, flags: KeyFlags) -> KeySpec {
    KeySpec {
        flags,
        begin: BeginSearch::Index(index),
        find: FindKeys::KeyNum {
            key_num_idx: 0,
            first_key: 1,
            step: 1,
        },
        notes: "",
    }
}

const SOURCES: &[KeySpec] = &[keynum(1, kf!(RO, ACCESS))];
const STORE_SPECS: &[KeySpec] = &[
    KeySpec::single(1, kf!(OW, UPDATE)),
    keynum(2, kf!(RO, ACCESS)),
];

const RANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.";
const RANGE_BY_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).";
const REMRANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.";
const POP_COMPLEXITY: &str = "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.";
const MPOP_COMPLEXITY: &str = "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.";
const UNION_COMPLEXITY: &str = "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.";
const INTER_COMPLEXITY: &str = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.";
const DIFF_COMPLEXITY: &str = "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.";

pub const COMMANDS: &[Command] = &[
    Command {
        name: "zadd",
        log_rule: crate::effects::LogRule::Replay,
        arity: -4,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, UPDATE))],
        since: "1.2.0",
        summary: "Adds members to a sorted set, or updates the scores of existing ones.",
        complexity: "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
        handler: Some(write::zadd),
        ..ZSET
    },
    Command {
        name: "zincrby",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE, DENYOOM, FAST),
        key_specs: &[KeySpec::single(1, kf!(RW, ACCESS, UPDATE))],
        since: "1.2.0",
        summary: "Increments the score of a member in a sorted set.",
        complexity: "O(log(N)) where N is the number of elements in the sorted set.",
        handler: Some(write::zincrby),
        ..ZSET
    },
    Command {
        name: "zrem",
        log_rule: crate::effects::LogRule::Replay,
        arity: -3,
        flags: flags!(WRITE, FAST),
        key_specs: RW_DELETE,
        since: "1.2.0",
        summary: "Removes members from a sorted set; deletes it when it becomes empty.",
        complexity: "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
        handler: Some(write::zrem),
        ..ZSET
    },
    Command {
        name: "zscore",
        arity: 3,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        since: "1.2.0",
        summary: "Returns the score of a member in a sorted set.",
        complexity: "O(1)",
        handler: Some(read::zscore),
        ..ZSET
    },
    Command {
        name: "zmscore",
        arity: -3,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        since: "6.2.0",
        summary: "Returns the scores of members in a sorted set.",
        complexity: "O(N) where N is the number of members being requested.",
        handler: Some(read::zmscore),
        ..ZSET
    },
    Command {
        name: "zcard",
        arity: 2,
        flags: flags!(READONLY, FAST),
        key_specs: &[KeySpec::single(1, kf!(RO))],
        since: "1.2.0",
        summary: "Returns the number of members in a sorted set.",
        complexity: "O(1)",
        handler: Some(read::zcard),
        ..ZSET
    },
    Command {
        name: "zcount",
        arity: 4,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        since: "2.0.0",
        summary: "Counts the members of a sorted set with scores within a range.",
        complexity: "O(log(N)) with N being the number of elements in the sorted set.",
        handler: Some(read::zcount),
        ..ZSET
    },
    Command {
        name: "zlexcount",
        arity: 4,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        since: "2.8.9",
        summary: "Counts the members of a sorted set within a lexicographical range.",
        complexity: "O(log(N)) with N being the number of elements in the sorted set.",
        handler: Some(read::zlexcount),
        ..ZSET
    },
    Command {
        name: "zrank",
        arity: 3,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        since: "2.0.0",
        summary: "Returns the index of a member in a sorted set ordered by ascending scores.",
        complexity: "O(log(N))",
        handler: Some(read::zrank),
        ..ZSET
    },
    Command {
        name: "zrevrank",
        arity: 3,
        flags: flags!(READONLY, FAST),
        key_specs: RO_ACCESS,
        since: "2.0.0",
        summary: "Returns the index of a member in a sorted set ordered by descending scores.",
        complexity: "O(log(N))",
        handler: Some(read::zrevrank),
        ..ZSET
    },
    Command {
        name: "zrange",
        arity: -4,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        since: "1.2.0",
        summary: "Returns members of a sorted set within a range of indexes, scores or members.",
        complexity: RANGE_COMPLEXITY,
        handler: Some(read::zrange),
        ..ZSET
    },
    Command {
        name: "zrangestore",
        arity: -5,
        flags: flags!(WRITE, DENYOOM),
        key_specs: &[
            KeySpec::single(1, kf!(OW, UPDATE)),
            KeySpec::single(2, kf!(RO, ACCESS)),
        ],
        since: "6.2.0",
        summary: "Stores a range of members of a sorted set in a key.",
        complexity: "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.",
        handler: Some(read::zrangestore),
        ..ZSET
    },
    Command {
        name: "zrangebyscore",
        arity: -4,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        since: "1.0.5",
        summary: "Returns members of a sorted set within a range of scores.",
        complexity: RANGE_BY_COMPLEXITY,
        handler: Some(read::zrangebyscore),
        ..ZSET
    },
    Command {
        name: "zrevrangebyscore",
        arity: -4,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        since: "2.2.0",
        summary: "Returns members of a sorted set within a range of scores, highest first.",
        complexity: RANGE_BY_COMPLEXITY,
        handler: Some(read::zrevrangebyscore),
        ..ZSET
    },
    Command {
        name: "zrangebylex",
        arity: -4,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        since: "2.8.9",
        summary: "Returns members of a sorted set within a lexicographical range.",
        complexity: RANGE_BY_COMPLEXITY,
        handler: Some(read::zrangebylex),
        ..ZSET
    },
    Command {
        name: "zrevrangebylex",
        arity: -4,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        since: "2.8.9",
        summary: "Returns members of a sorted set within a lexicographical range, highest first.",
        complexity: RANGE_BY_COMPLEXITY,
        handler: Some(read::zrevrangebylex),
        ..ZSET
    },
    Command {
        name: "zrevrange",
        arity: -4,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        since: "1.2.0",
        summary: "Returns members of a sorted set within a range of indexes, highest first.",
        complexity: RANGE_COMPLEXITY,
        handler: Some(read::zrevrange),
        ..ZSET
    },
    Command {
        name: "zpopmin",
        log_rule: crate::effects::LogRule::Replay,
        arity: -2,
        flags: flags!(WRITE, FAST),
        key_specs: POP_SPEC,
        since: "5.0.0",
        summary: "Removes and returns the members with the lowest scores of a sorted set.",
        complexity: POP_COMPLEXITY,
        handler: Some(write::zpopmin),
        ..ZSET
    },
    Command {
        name: "zpopmax",
        log_rule: crate::effects::LogRule::Replay,
        arity: -2,
        flags: flags!(WRITE, FAST),
        key_specs: POP_SPEC,
        since: "5.0.0",
        summary: "Removes and returns the members with the highest scores of a sorted set.",
        complexity: POP_COMPLEXITY,
        handler: Some(write::zpopmax),
        ..ZSET
    },
    Command {
        name: "zmpop",
        arity: -4,
        flags: flags!(WRITE),
        key_specs: &[keynum(1, kf!(RW, ACCESS, DELETE))],
        since: "7.0.0",
        summary: "Removes and returns members of the first non-empty sorted set among several.",
        complexity: MPOP_COMPLEXITY,
        handler: Some(write::zmpop),
        ..ZSET
    },
    Command {
        name: "bzpopmin",
        arity: -3,
        flags: flags!(WRITE, NOSCRIPT, BLOCKING, FAST),
        key_specs: &[KeySpec::range(1, -2, 1, kf!(RW, ACCESS, DELETE))],
        since: "5.0.0",
        summary: "Removes and returns the member with the lowest score of the first non-empty sorted set, or blocks until one is available.",
        complexity: "O(log(N)) with N being the number of elements in the sorted set.",
        handler: Some(write::bzpopmin),
        ..ZSET
    },
    Command {
        name: "bzpopmax",
        arity: -3,
        flags: flags!(WRITE, NOSCRIPT, BLOCKING, FAST),
        key_specs: &[KeySpec::range(1, -2, 1, kf!(RW, ACCESS, DELETE))],
        since: "5.0.0",
        summary: "Removes and returns the member with the highest score of the first non-empty sorted set, or blocks until one is available.",
        complexity: "O(log(N)) with N being the number of elements in the sorted set.",
        handler: Some(write::bzpopmax),
        ..ZSET
    },
    Command {
        name: "bzmpop",
        arity: -5,
        flags: flags!(WRITE, BLOCKING),
        key_specs: &[keynum(2, kf!(RW, ACCESS, DELETE))],
        since: "7.0.0",
        summary: "Removes and returns members of the first non-empty sorted set among several, or blocks until one is available.",
        complexity: MPOP_COMPLEXITY,
        handler: Some(write::bzmpop),
        ..ZSET
    },
    Command {
        name: "zremrangebyrank",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE),
        key_specs: RW_DELETE,
        since: "2.0.0",
        summary: "Removes the members of a sorted set within a range of indexes.",
        complexity: REMRANGE_COMPLEXITY,
        handler: Some(write::zremrangebyrank),
        ..ZSET
    },
    Command {
        name: "zremrangebyscore",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE),
        key_specs: RW_DELETE,
        since: "1.2.0",
        summary: "Removes the members of a sorted set within a range of scores.",
        complexity: REMRANGE_COMPLEXITY,
        handler: Some(write::zremrangebyscore),
        ..ZSET
    },
    Command {
        name: "zremrangebylex",
        log_rule: crate::effects::LogRule::Replay,
        arity: 4,
        flags: flags!(WRITE),
        key_specs: RW_DELETE,
        since: "2.8.9",
        summary: "Removes the members of a sorted set within a lexicographical range.",
        complexity: REMRANGE_COMPLEXITY,
        handler: Some(write::zremrangebylex),
        ..ZSET
    },
    Command {
        name: "zunion",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: SOURCES,
        since: "6.2.0",
        summary: "Returns the union of sorted sets.",
        complexity: UNION_COMPLEXITY,
        handler: Some(setops::zunion),
        ..ZSET
    },
    Command {
        name: "zinter",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: SOURCES,
        since: "6.2.0",
        summary: "Returns the intersection of sorted sets.",
        complexity: INTER_COMPLEXITY,
        handler: Some(setops::zinter),
        ..ZSET
    },
    Command {
        name: "zdiff",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: SOURCES,
        since: "6.2.0",
        summary: "Returns the difference between sorted sets.",
        complexity: DIFF_COMPLEXITY,
        handler: Some(setops::zdiff),
        ..ZSET
    },
    Command {
        name: "zunionstore",
        arity: -4,
        flags: flags!(WRITE, DENYOOM),
        key_specs: STORE_SPECS,
        since: "2.0.0",
        summary: "Stores the union of sorted sets in a key.",
        complexity: "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
        handler: Some(setops::zunionstore),
        ..ZSET
    },
    Command {
        name: "zinterstore",
        arity: -4,
        flags: flags!(WRITE, DENYOOM),
        key_specs: STORE_SPECS,
        since: "2.0.0",
        summary: "Stores the intersection of sorted sets in a key.",
        complexity: INTER_COMPLEXITY,
        handler: Some(setops::zinterstore),
        ..ZSET
    },
    Command {
        name: "zdiffstore",
        arity: -4,
        flags: flags!(WRITE, DENYOOM),
        key_specs: STORE_SPECS,
        since: "6.2.0",
        summary: "Stores the difference between sorted sets in a key.",
        complexity: DIFF_COMPLEXITY,
        handler: Some(setops::zdiffstore),
        ..ZSET
    },
    Command {
        name: "zintercard",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: SOURCES,
        since: "7.0.0",
        summary: "Returns the number of members in the intersection of sorted sets.",
        complexity: "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
        handler: Some(setops::zintercard),
        ..ZSET
    },
    Command {
        name: "zrandmember",
        arity: -2,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output"],
        since: "6.2.0",
        summary: "Returns random members of a sorted set.",
        complexity: "O(N) where N is the number of elements returned",
        handler: Some(read::zrandmember),
        ..ZSET
    },
    Command {
        name: "zscan",
        arity: -3,
        flags: flags!(READONLY),
        key_specs: RO_ACCESS,
        tips: &["nondeterministic_output"],
        since: "2.8.0",
        summary: "Iterates over the members and scores of a sorted set.",
        complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        handler: Some(read::zscan),
        ..ZSET
    },
];

/// The sorted set at `key` for reading (counting a hit or a miss): `Ok(None)` if the
/// key is missing, WRONGTYPE if it holds something else.
fn read_zset<'k>(keys: &'k mut Keys, key: &[u8]) -> Result<Option<&'k ZSet>, CmdError> {
    match keys.read(key) {
        None => Ok(None),
        Some(e) => match e.value().as_zset() {
            Some(z) => Ok(Some(z)),
            _ => Err(CmdError::WrongType),
        },
    }
}

/// The sorted set at `key` for writing.
fn write_zset<'k>(keys: &'k mut Keys, key: &[u8]) -> Result<Option<&'k mut ZSet>, CmdError> {
    match keys.get(key) {
        None => Ok(None),
        Some(e) => e.as_zset_mut().map(Some).ok_or(CmdError::WrongType),
    }
}

/// Parses a score or increment as Redis's `getDoubleFromObject`: the whole argument,
/// no leading space, not NaN, and not out of range ("1e400" and "1e-400" are refused,
/// "inf" is not).
fn parse_score(arg: &[u8]) -> Result<f64, CmdError> {
    parse_double(arg).ok_or(CmdError::NotFloat)
}

pub(crate) fn parse_double(arg: &[u8]) -> Option<f64> {
    // Never infinite nor an underflow: the checks below do not apply.
    if let Some(v) = crate::parse::plain_int_f64(arg) {
        return Some(v);
    }
    let v = crate::parse::parse_f64(arg)?;
    let text = arg.to_ascii_lowercase();
    let body = text
        .strip_prefix(b"-")
        .or(text.strip_prefix(b"+"))
        .unwrap_or(&text);
    if v.is_infinite() && !body.starts_with(b"inf") {
        return None;
    }
    if v == 0.0 {
        // Underflow: a mantissa with a non-zero digit that came out as zero.
        let (digits, hex) = match body.strip_prefix(b"0x") {
            Some(rest) => (rest, true),
            None => (body, false),
        };
        let exp = if hex { b'p' } else { b'e' };
        let mantissa = digits.split(|&c| c == exp).next().unwrap_or_default();
        if mantissa
            .iter()
            .any(|c| c.is_ascii_alphanumeric() && *c != b'0')
        {
            return None;
        }
    }
    Some(v)
}

/// Parses one end of a score range as Redis's `zslParseRange` does, with `strtod`:
/// leading spaces are allowed, an empty string reads as 0, NaN is refused, and the
/// argument ends at its first NUL byte.
fn parse_range_bound(arg: &[u8]) -> Option<(f64, bool)> {
    let (arg, exclusive) = match arg.first() {
        Some(b'(') => (&arg[1..], true),
        _ => (arg, false),
    };
    let arg = arg.split(|&c| c == 0).next().unwrap_or_default();
    if arg.is_empty() {
        return Some((0.0, exclusive));
    }
    // strtod skips what C's isspace() calls space, and reads nothing from spaces alone.
    let start = arg
        .iter()
        .position(|&c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let v = crate::parse::parse_f64(&arg[start..])?;
    Some((v, exclusive))
}

/// Parses `min` and `max` of a score range ("ERR min or max is not a float").
fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
    let bad = || CmdError::err("min or max is not a float");
    let (min, min_exclusive) = parse_range_bound(min).ok_or_else(bad)?;
    let (max, max_exclusive) = parse_range_bound(max).ok_or_else(bad)?;
    Ok(ScoreRange {
        min,
        max,
        min_exclusive,
        max_exclusive,
    })
}

/// Parses one end of a lexicographical range: `-`, `+`, `[member` or `(member`.
fn parse_lex_bound(arg: &[u8]) -> Option<LexBound> {
    let rest = arg.get(1..).unwrap_or_default();
    // Redis reads the argument as a C string here: "+" and "-" may be followed by a NUL.
    let alone = rest.first().is_none_or(|&c| c == 0);
    match arg.first()? {
        b'+' if alone => Some(LexBound::Max),
        b'-' if alone => Some(LexBound::Min),
        b'(' => Some(LexBound::Exclusive(rest.to_vec())),
        b'[' => Some(LexBound::Inclusive(rest.to_vec())),
        _ => None,
    }
}

fn parse_lex_range(min: &[u8], max: &[u8]) -> Result<LexRange, CmdError> {
    let bad = || CmdError::err("min or max not valid string range item");
    Ok(LexRange {
        min: parse_lex_bound(min).ok_or_else(bad)?,
        max: parse_lex_bound(max).ok_or_else(bad)?,
    })
}

/// Writes members, with their scores if asked: a flat array in RESP2, an array of
/// [member, score] pairs in RESP3 (Redis keeps the order, so not a map).
fn reply_members<'a>(
    out: &mut ReplyWriter,
    items: impl ExactSizeIterator<Item = (&'a [u8], f64)>,
    withscores: bool,
) {
    let n = items.len();
    let resp3 = out.is_resp3();
    out.array(if withscores && !resp3 { n * 2 } else { n });
    for (m, s) in items {
        if withscores && resp3 {
            out.array(2);
        }
        out.bulk(m);
        if withscores {
            out.double(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_like_get_double_from_object() {
        assert_eq!(parse_double(b"1.5"), Some(1.5));
        assert_eq!(parse_double(b"inf"), Some(f64::INFINITY));
        assert_eq!(parse_double(b"-Infinity"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_double(b"4.9e-324"), Some(4.9e-324));
        assert_eq!(parse_double(b"0e-999"), Some(0.0));
        for bad in [
            &b"1e400"[..],
            b"-1e400",
            b"1e-400",
            b"0x1p-2000",
            b"nan",
            b" 1",
            b"",
            b"1x",
        ] {
            assert_eq!(parse_double(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn range_bounds_parse_like_strtod() {
        assert_eq!(parse_range_bound(b"("), Some((0.0, true)));
        assert_eq!(parse_range_bound(b""), Some((0.0, false)));
        assert_eq!(parse_range_bound(b" 5"), Some((5.0, false)));
        assert_eq!(parse_range_bound(b"(1e400"), Some((f64::INFINITY, true)));
        assert_eq!(parse_range_bound(b"1\0junk"), Some((1.0, false)));
        assert_eq!(parse_range_bound(b" "), None);
        assert_eq!(parse_range_bound(b"nan"), None);
        assert_eq!(parse_range_bound(b"[1"), None);
        assert_eq!(parse_lex_bound(b"+"), Some(LexBound::Max));
        assert_eq!(parse_lex_bound(b"+a"), None);
        assert_eq!(parse_lex_bound(b"("), Some(LexBound::Exclusive(vec![])));
        assert_eq!(parse_lex_bound(b""), None);
    }
}
