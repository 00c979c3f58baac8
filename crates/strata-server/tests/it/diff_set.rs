//! Set commands against a real Redis: fixed transcripts, encoding conversions
//! (including the results of the *STORE commands), and a seeded random command
//! stream, compared reply by reply (see `pairwise`).

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_resp::value::Value;

use crate::pairwise::{Pair, Shape, bulks, show};

const LONG: &str = "a-member-that-is-longer-than-sixty-four-bytes-just-to-have-one-of-those";

/// Whether Redis would hold `members` as an intset: all canonical integers, and no
/// more of them than the limit.
fn intset_like(members: &[Vec<u8>], limit: usize) -> bool {
    members.len() <= limit
        && members.iter().all(|m| {
            let s = String::from_utf8_lossy(m);
            s.parse::<i64>().is_ok_and(|n| n.to_string() == s)
        })
}

/// Runs a set operation, comparing its members in order only where Redis's order is
/// defined: SINTER walks its smallest input, SDIFF and SUNION build an intset when
/// they can.
fn set_op(p: &mut Pair, args: &[&[u8]], limit: usize) {
    let cmd = args[0].to_ascii_uppercase();
    let keys = &args[1..];
    let order_free = match cmd.as_slice() {
        b"SINTER" => p.any_hashtable(keys),
        b"SDIFF" => p.any_hashtable(&keys[..1]),
        _ => false,
    };
    let ((want, want_raw), (got, got_raw)) = p.send(args);
    if want_raw == got_raw {
        return;
    }
    let result_free = !intset_like(&bulks(&want), limit);
    let same = crate::pairwise::canonical(&want, Shape::Members)
        == crate::pairwise::canonical(&got, Shape::Members);
    if !(same && (order_free || result_free)) {
        p.mismatch(format!(
            "{}\n  redis:  {want:?}\n  strata: {got:?}",
            show(args)
        ));
    }
}

#[test]
fn set_transcript_matches_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    let script: &[&[&str]] = &[
        &["SET", "str", "x"],
        &["SADD", "s", "3", "1", "2"],
        &["SADD", "s", "1"],
        &["SADD", "str", "1"],
        &["SADD", "s"],
        &["SMEMBERS", "s"],
        &["SMEMBERS", "nokey"],
        &["SMEMBERS", "str"],
        &["SCARD", "s"],
        &["SCARD", "nokey"],
        &["SCARD", "str"],
        &["SISMEMBER", "s", "1"],
        &["SISMEMBER", "s", "01"],
        &["SISMEMBER", "s", "x"],
        &["SISMEMBER", "nokey", "1"],
        &["SISMEMBER", "str", "1"],
        &["SMISMEMBER", "s", "1", "2", "9", "a"],
        &["SMISMEMBER", "nokey", "1"],
        &["SMISMEMBER", "str", "1"],
        &["SMISMEMBER", "s"],
        &["SREM", "s", "9", "a"],
        &["SREM", "s", "1", "1"],
        &["SREM", "nokey", "1"],
        &["SREM", "str", "1"],
        &["SREM", "s", "2", "3", "4"],
        &["EXISTS", "s"],
        &["SADD", "i1", "1", "2", "3", "4", "5"],
        &["SADD", "i2", "3", "4", "5", "6", "7"],
        &["SADD", "i3", "-10", "5", "100000", "9223372036854775807"],
        &["SINTER", "i1", "i2"],
        &["SINTER", "i1", "i2", "i3"],
        &["SINTER", "i1"],
        &["SINTER", "i1", "i1"],
        &["SINTER", "i1", "nokey"],
        &["SINTER", "nokey", "str"],
        &["SINTER", "i1", "str"],
        &["SUNION", "i1", "i2", "i3"],
        &["SUNION", "nokey", "i1"],
        &["SUNION", "nokey"],
        &["SUNION", "i1", "str"],
        &["SDIFF", "i1", "i2"],
        &["SDIFF", "i2", "i1", "i3"],
        &["SDIFF", "i1", "i1"],
        &["SDIFF", "nokey", "i1"],
        &["SDIFF", "i1", "nokey"],
        &["SDIFF", "str", "nokey"],
        &["SINTERCARD", "2", "i1", "i2"],
        &["SINTERCARD", "2", "i1", "i2", "LIMIT", "2"],
        &["SINTERCARD", "2", "i1", "i2", "LIMIT", "0"],
        &["SINTERCARD", "2", "i1", "i2", "LIMIT", "100"],
        &["SINTERCARD", "1", "nokey"],
        &["SINTERCARD", "2", "nokey", "str"],
        &["SINTERCARD", "0", "i1"],
        &["SINTERCARD", "-1", "i1"],
        &["SINTERCARD", "abc", "i1"],
        &["SINTERCARD", "3", "i1", "i2"],
        &["SINTERCARD", "9223372036854775807", "i1"],
        &["SINTERCARD", "1", "i1", "LIMIT"],
        &["SINTERCARD", "1", "i1", "LIMIT", "-1"],
        &["SINTERCARD", "1", "i1", "LIMIT", "abc"],
        &["SINTERCARD", "1", "i1", "FOO", "1"],
        &["SINTERCARD", "1", "i1", "LIMIT", "1", "LIMIT", "3"],
        &["SINTERSTORE", "d", "i1", "i2"],
        &["SMEMBERS", "d"],
        &["OBJECT", "ENCODING", "d"],
        &["SINTERSTORE", "d", "i1", "nokey"],
        &["EXISTS", "d"],
        &["SINTERSTORE", "d", "i1", "str"],
        &["SUNIONSTORE", "d", "i1", "i2"],
        &["SMEMBERS", "d"],
        &["SDIFFSTORE", "d", "i1", "i2"],
        &["SMEMBERS", "d"],
        &["SDIFFSTORE", "d", "i1", "i1"],
        &["EXISTS", "d"],
        &["SET", "d", "x", "EX", "100"],
        &["SUNIONSTORE", "d", "i1"],
        &["TTL", "d"],
        &["TYPE", "d"],
        &["SUNIONSTORE", "i1", "i1", "i2"],
        &["SMEMBERS", "i1"],
        &["SDIFFSTORE", "nothing", "nokey"],
        &["EXISTS", "nothing"],
        &["SMOVE", "i1", "i2", "1"],
        &["SMOVE", "i1", "i2", "1"],
        &["SMOVE", "i1", "new", "2"],
        &["OBJECT", "ENCODING", "new"],
        &["SMOVE", "i1", "new2", "zz"],
        &["EXISTS", "new2"],
        &["SMOVE", "nokey", "str", "1"],
        &["SMOVE", "str", "i1", "1"],
        &["SMOVE", "i1", "str", "3"],
        &["SMOVE", "i1", "i1", "3"],
        &["SMOVE", "i1", "i1", "zz"],
        &["SMOVE", "new", "i2", "2"],
        &["EXISTS", "new"],
        &["SADD", "one", "x"],
        &["SMOVE", "one", "ints", "x"],
        &["OBJECT", "ENCODING", "ints"],
        &["SPOP", "nokey"],
        &["SPOP", "nokey", "3"],
        &["SPOP", "str"],
        &["SPOP", "str", "1"],
        &["SPOP", "i2", "-1"],
        &["SPOP", "i2", "abc"],
        &["SPOP", "i2", "9223372036854775808"],
        &["SPOP", "i2", "1", "2"],
        &["SPOP", "i2", "0"],
        &["SRANDMEMBER", "nokey"],
        &["SRANDMEMBER", "nokey", "3"],
        &["SRANDMEMBER", "nokey", "-3"],
        &["SRANDMEMBER", "str"],
        &["SRANDMEMBER", "str", "1"],
        &["SRANDMEMBER", "i2", "100"],
        &["SRANDMEMBER", "i2", "0"],
        &["SRANDMEMBER", "i2", "1", "2"],
        &["SRANDMEMBER", "i2", "abc"],
        &["SRANDMEMBER", "i2", "-9223372036854775808"],
        &["SSCAN", "i2", "0"],
        &["SSCAN", "i2", "77"],
        &["SSCAN", "i2", "0", "MATCH", "*3*"],
        &["SSCAN", "i2", "0", "COUNT", "1"],
        &["SSCAN", "i2", "0", "COUNT", "0"],
        &["SSCAN", "i2", "0", "COUNT", "abc"],
        &["SSCAN", "i2", "0", "MATCH"],
        &["SSCAN", "i2", "0", "TYPE", "set"],
        &["SSCAN", "i2", "abc"],
        &["SSCAN", "i2", "-1"],
        &["SSCAN", "nokey", "0", "BAD"],
        &["SSCAN", "str", "0"],
        &["SPOP", "i2", "100"],
        &["EXISTS", "i2"],
        &["SADD", "e", ""],
        &["SMEMBERS", "e"],
        &["SISMEMBER", "e", ""],
        &["SSCAN", "e", "0", "MATCH", "*"],
        &["SSCAN", "e", "0", "MATCH", "**"],
        &["SPOP", "e"],
        &["EXISTS", "e"],
        &["COPY", "i3", "i3copy"],
        &["SMEMBERS", "i3copy"],
        &["OBJECT", "ENCODING", "i3copy"],
    ];
    for line in script {
        p.run(line);
    }
    p.finish();
}

#[test]
fn set_encodings_match_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    let enc = |p: &mut Pair, key: &str| {
        p.run(&["OBJECT", "ENCODING", key]);
    };
    // The first member decides; integers must be canonical.
    for (key, first) in [
        ("a", "1"),
        ("b", "x"),
        ("c", "007"),
        ("d", "-0"),
        ("e", "+1"),
        ("f", "9223372036854775807"),
        ("g", "9223372036854775808"),
        ("h", "-9223372036854775808"),
        ("i", " 1"),
        ("j", ""),
    ] {
        p.run(&["SADD", key, first]);
        enc(&mut p, key);
    }
    p.run(&["SADD", "a", "x"]);
    enc(&mut p, "a");
    p.run(&["SREM", "a", "x"]);
    enc(&mut p, "a");
    // 512 integers stay an intset; the 513th converts.
    let mut args: Vec<String> = vec!["SADD".into(), "big".into()];
    args.extend((0..512).map(|i| (i * 7 - 1000).to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    p.run(&refs);
    enc(&mut p, "big");
    p.run(&["SMEMBERS", "big"]);
    p.run(&["SRANDMEMBER", "big", "600"]);
    p.run(&["SSCAN", "big", "0", "COUNT", "2"]);
    p.run(&["SADD", "big", "-1000"]);
    enc(&mut p, "big");
    p.run(&["SADD", "big", "1"]);
    enc(&mut p, "big");
    p.listing(&[b"SMEMBERS", b"big"], &[b"big"], Shape::Members);
    p.scan(&[b"SSCAN", b"big", b"0"], b"big", Shape::Members);
    p.scan(
        &[b"SSCAN", b"big", b"0", b"MATCH", b"*1*", b"COUNT", b"5"],
        b"big",
        Shape::Members,
    );
    // Results of the *STORE commands start as intsets.
    p.run(&["SADD", "m1", "1", "2", "3", "a"]);
    p.run(&["SADD", "m2", "1", "2", "a", "b"]);
    p.run(&["SADD", "m3", "a"]);
    p.run(&["SADD", "m4", "x"]);
    p.run(&["SINTERSTORE", "r", "m1", "m2"]);
    enc(&mut p, "r");
    p.run(&["SREM", "m2", "a"]);
    p.run(&["SINTERSTORE", "r", "m1", "m2"]);
    enc(&mut p, "r");
    p.run(&["SMEMBERS", "r"]);
    p.run(&["SUNIONSTORE", "r", "m1"]);
    enc(&mut p, "r");
    p.run(&["SDIFFSTORE", "r", "m1", "m3"]);
    enc(&mut p, "r");
    p.run(&["SMEMBERS", "r"]);
    // With a small set to subtract from a big first set, Redis copies the first set
    // and then removes: the result stays a hashtable.
    let mut args: Vec<String> = vec!["SADD".into(), "m5".into(), "z".into()];
    args.extend((0..10).map(|i| i.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    p.run(&refs);
    p.run(&["SDIFFSTORE", "r", "m5", "m3", "m4"]);
    enc(&mut p, "r");
    p.run(&["SREM", "m5", "z"]);
    p.run(&["SDIFFSTORE", "r", "m5", "m3", "m4"]);
    enc(&mut p, "r");
    p.run(&["SDIFFSTORE", "r", "m5", "m3"]);
    enc(&mut p, "r");
    p.run(&["SMEMBERS", "r"]);
    set_op(&mut p, &[b"SDIFF", b"m5", b"m3", b"m4"], 512);
    set_op(&mut p, &[b"SINTER", b"m5", b"m1"], 512);
    set_op(&mut p, &[b"SUNION", b"m5", b"m1"], 512);
    // SPOP that leaves few members rebuilds the set from them: with a single
    // member left, the encoding follows that member.
    for _ in 0..5 {
        p.run(&["DEL", "sp"]);
        p.run(&[
            "SADD", "sp", "a", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10",
        ]);
        let args: &[&[u8]] = &[b"SPOP", b"sp", b"10"];
        check_random(&mut p, args);
    }
    // A union of intsets past the limit is a hashtable.
    let mut args: Vec<String> = vec!["SADD".into(), "n1".into()];
    args.extend((0..300).map(|i| i.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    p.run(&refs);
    let mut args: Vec<String> = vec!["SADD".into(), "n2".into()];
    args.extend((300..600).map(|i| i.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    p.run(&refs);
    p.run(&["SUNIONSTORE", "r", "n1", "n2"]);
    enc(&mut p, "r");
    set_op(&mut p, &[b"SUNION", b"n1", b"n2"], 512);
    p.run(&["SINTERSTORE", "r", "n1", "n1"]);
    enc(&mut p, "r");
    // SMOVE creates its destination for the member it moves.
    p.run(&["SMOVE", "m1", "mv1", "a"]);
    enc(&mut p, "mv1");
    p.run(&["SMOVE", "m1", "mv2", "1"]);
    enc(&mut p, "mv2");
    // COPY keeps the encoding.
    p.run(&["COPY", "n1", "n1copy"]);
    enc(&mut p, "n1copy");
    p.run(&["COPY", "m5", "m5copy"]);
    enc(&mut p, "m5copy");
    // The limit follows CONFIG SET.
    p.run(&["CONFIG", "SET", "set-max-intset-entries", "2"]);
    p.run(&["SADD", "small", "1", "2"]);
    enc(&mut p, "small");
    p.run(&["SADD", "small", "3"]);
    enc(&mut p, "small");
    p.run(&["SINTERSTORE", "r", "n1", "n1"]);
    enc(&mut p, "r");
    p.run(&["CONFIG", "SET", "set-max-intset-entries", "0"]);
    p.run(&["SADD", "zero", "1"]);
    enc(&mut p, "zero");
    p.run(&["CONFIG", "SET", "set-max-intset-entries", "512"]);
    p.check_keys(&[
        b"a", b"big", b"r", b"m1", b"m5", b"n1copy", b"small", b"zero",
    ]);
    p.finish();
}

#[test]
fn set_resp3_replies_match_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    p.send(&[b"HELLO", b"3"]);
    let script: &[&[&str]] = &[
        &["SADD", "s", "3", "1", "2"],
        &["SMEMBERS", "s"],
        &["SMEMBERS", "nokey"],
        &["SINTER", "s", "nokey"],
        &["SINTER", "s", "s"],
        &["SUNION", "s", "nokey"],
        &["SDIFF", "nokey"],
        &["SMISMEMBER", "s", "1", "9"],
        &["SISMEMBER", "s", "1"],
        &["SRANDMEMBER", "s", "10"],
        &["SRANDMEMBER", "nokey"],
        &["SRANDMEMBER", "nokey", "2"],
        &["SRANDMEMBER", "s", "0"],
        &["SPOP", "nokey"],
        &["SPOP", "nokey", "2"],
        &["SPOP", "s", "0"],
        &["SSCAN", "s", "0"],
        &["SINTERCARD", "1", "s"],
        &["SPOP", "s", "10"],
        &["SADD", "t", "5"],
        &["SPOP", "t"],
    ];
    for line in script {
        p.run(line);
    }
    p.run(&["SADD", "s", "1", "2", "3", "4", "5"]);
    for args in [
        &["SRANDMEMBER", "s", "-5"][..],
        &["SRANDMEMBER", "s", "2"],
        &["SRANDMEMBER", "s"],
        &["SPOP", "s", "2"],
        &["SPOP", "s"],
    ] {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        check_random(&mut p, &args);
    }
    p.finish();
}

#[test]
fn set_command_info_matches_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    for name in [
        "sadd",
        "srem",
        "scard",
        "sismember",
        "smismember",
        "smembers",
        "sinter",
        "sintercard",
        "sunion",
        "sdiff",
        "sinterstore",
        "sunionstore",
        "sdiffstore",
        "smove",
        "spop",
        "srandmember",
        "sscan",
    ] {
        p.run(&["COMMAND", "INFO", name]);
    }
    p.run(&[
        "COMMAND",
        "GETKEYS",
        "SINTERCARD",
        "2",
        "a",
        "b",
        "LIMIT",
        "1",
    ]);
    p.run(&["COMMAND", "GETKEYS", "SMOVE", "a", "b", "m"]);
    p.run(&["COMMAND", "GETKEYS", "SINTERSTORE", "d", "a", "b"]);
    p.run(&["COMMAND", "GETKEYS", "SUNION", "a", "b", "c"]);
    p.finish();
}

/// The members of a reply: one bulk string, or an aggregate of them.
fn members(v: &Value) -> Vec<Vec<u8>> {
    match v {
        Value::Bulk(b) => vec![b.clone()],
        other => bulks(other),
    }
}

/// SPOP and SRANDMEMBER, checked by their properties: the shape Redis gives, members
/// of the set, distinct ones where Redis promises them. After an SPOP the two servers
/// have removed different members; Redis is then made to remove strata's instead, so
/// that the states agree again.
fn check_random(p: &mut Pair, args: &[&[u8]]) {
    let key = args[1];
    let pop = args[0].eq_ignore_ascii_case(b"SPOP");
    let before: BTreeSet<Vec<u8>> = bulks(&p.redis_only(&[b"SMEMBERS", key]))
        .into_iter()
        .collect();
    let intset = p.encoding(key) == "intset";
    let ((want, want_raw), (got, got_raw)) = p.send(args);
    if want_raw == got_raw {
        return;
    }
    let fail = |p: &mut Pair, why: &str| {
        p.mismatch(format!(
            "{} ({why})\n  redis:  {want:?}\n  strata: {got:?}",
            show(args)
        ))
    };
    let same_shape = match (&want, &got) {
        (Value::Bulk(_), Value::Bulk(_)) => true,
        (Value::Array(a), Value::Array(b)) | (Value::Set(a), Value::Set(b)) => a.len() == b.len(),
        _ => false,
    };
    if !same_shape {
        return fail(p, "shape");
    }
    let picked = members(&got);
    if !picked.iter().all(|m| before.contains(m)) {
        return fail(p, "a member that is not in the set");
    }
    let count: Option<i64> = args
        .get(2)
        .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok());
    let distinct = picked.iter().collect::<BTreeSet<_>>().len() == picked.len();
    if (pop || count.is_some_and(|c| c > 0)) && !distinct {
        return fail(p, "repeated members");
    }
    if count.is_some_and(|c| c > 0 && c as usize >= before.len()) && intset {
        return fail(p, "a whole intset must come in order");
    }
    if pop && picked.len() < before.len() {
        let remaining: Vec<&Vec<u8>> = before.iter().filter(|m| !picked.contains(m)).collect();
        if remaining.len() * 5 <= picked.len() {
            // Redis kept the few remaining members in a new set: build strata's
            // remaining members the same way.
            p.redis_only(&[b"DEL", key]);
            let mut add: Vec<&[u8]> = vec![b"SADD", key];
            add.extend(remaining.iter().map(|m| m.as_slice()));
            p.redis_only(&add);
        } else {
            let theirs = members(&want);
            let mut restore: Vec<&[u8]> = vec![b"SADD", key];
            restore.extend(theirs.iter().map(Vec::as_slice));
            p.redis_only(&restore);
            let mut remove: Vec<&[u8]> = vec![b"SREM", key];
            remove.extend(picked.iter().map(Vec::as_slice));
            p.redis_only(&remove);
        }
        p.exact(&[b"OBJECT", b"ENCODING", key]);
    }
}

/// A seeded source of arguments.
struct Gen(StdRng);

impl Gen {
    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.0.random_range(0..items.len())].clone()
    }

    fn chance(&mut self, p: f64) -> bool {
        self.0.random_bool(p)
    }

    fn key(&mut self) -> Vec<u8> {
        if self.chance(0.9) {
            self.pick(&["s0", "s1", "s2", "s3"]).into()
        } else {
            self.pick(&["str", "h0", "missing"]).into()
        }
    }

    fn keys(&mut self, min: usize) -> Vec<Vec<u8>> {
        (0..self.0.random_range(min..=3))
            .map(|_| self.key())
            .collect()
    }

    fn member(&mut self) -> Vec<u8> {
        if self.chance(0.01) {
            return LONG.into();
        }
        if self.chance(0.1) {
            return self
                .pick(&[
                    &b""[..],
                    b"007",
                    b"-0",
                    b"+1",
                    b"9223372036854775807",
                    b"-9223372036854775808",
                    b"9223372036854775808",
                    b"m\x00\xff",
                ])
                .to_vec();
        }
        if self.chance(0.75) {
            return self.0.random_range(-3..20).to_string().into_bytes();
        }
        self.pick(&["a", "b", "c", "d", "e", "f"]).into()
    }
}

/// One random set command, run on both servers and checked.
fn random_command(p: &mut Pair, g: &mut Gen, limit: usize) {
    let key = g.key();
    let k: &[u8] = &key;
    let roll = g.0.random_range(0..100);
    match roll {
        0..=17 => {
            let members: Vec<Vec<u8>> = if g.chance(0.01) {
                (0..600).map(|i| (i * 3).to_string().into_bytes()).collect()
            } else {
                (0..g.0.random_range(1..=4)).map(|_| g.member()).collect()
            };
            let mut args: Vec<&[u8]> = vec![b"SADD", k];
            args.extend(members.iter().map(Vec::as_slice));
            p.exact(&args);
        }
        18..=26 => {
            let members: Vec<Vec<u8>> = (0..g.0.random_range(1..=3)).map(|_| g.member()).collect();
            let mut args: Vec<&[u8]> = vec![b"SREM", k];
            args.extend(members.iter().map(Vec::as_slice));
            p.exact(&args);
        }
        27..=29 => {
            p.exact(&[b"SCARD", k]);
        }
        30..=33 => {
            let m = g.member();
            p.exact(&[b"SISMEMBER", k, &m]);
        }
        34..=36 => {
            let members: Vec<Vec<u8>> = (0..g.0.random_range(1..=4)).map(|_| g.member()).collect();
            let mut args: Vec<&[u8]> = vec![b"SMISMEMBER", k];
            args.extend(members.iter().map(Vec::as_slice));
            p.exact(&args);
        }
        37..=41 => {
            p.listing(&[b"SMEMBERS", k], &[k], Shape::Members);
        }
        42..=53 => {
            let cmd = g.pick(&[&b"SINTER"[..], b"SUNION", b"SDIFF"]);
            let others = g.keys(0);
            let mut args: Vec<&[u8]> = vec![cmd, k];
            args.extend(others.iter().map(Vec::as_slice));
            set_op(p, &args, limit);
        }
        54..=61 => {
            let cmd = g.pick(&[&b"SINTERSTORE"[..], b"SUNIONSTORE", b"SDIFFSTORE"]);
            let dst = if g.chance(0.7) {
                b"dst".to_vec()
            } else {
                g.key()
            };
            let others = g.keys(0);
            let mut args: Vec<&[u8]> = vec![cmd, &dst, k];
            args.extend(others.iter().map(Vec::as_slice));
            p.exact(&args);
        }
        62..=65 => {
            let others = g.keys(0);
            let n = (others.len() + 1).to_string();
            let numkeys = if g.chance(0.9) {
                n
            } else {
                g.pick(&["0", "-1", "9", "x"]).to_string()
            };
            let mut args: Vec<&[u8]> = vec![b"SINTERCARD", numkeys.as_bytes(), k];
            args.extend(others.iter().map(Vec::as_slice));
            if g.chance(0.4) {
                args.push(b"LIMIT");
                args.push(g.pick(&[&b"0"[..], b"1", b"2", b"100", b"-1", b"x"]));
            }
            p.exact(&args);
        }
        66..=71 => {
            let (dst, m) = (g.key(), g.member());
            p.exact(&[b"SMOVE", k, &dst, &m]);
        }
        72..=77 => {
            let mut args: Vec<&[u8]> = vec![b"SPOP", k];
            if g.chance(0.6) {
                args.push(g.pick(&[&b"0"[..], b"1", b"2", b"3", b"5", b"100", b"-1", b"x"]));
            }
            check_random(p, &args);
        }
        78..=84 => {
            let mut args: Vec<&[u8]> = vec![b"SRANDMEMBER", k];
            if g.chance(0.8) {
                args.push(g.pick(&[
                    &b"0"[..],
                    b"1",
                    b"2",
                    b"3",
                    b"5",
                    b"100",
                    b"-1",
                    b"-5",
                    b"-20",
                    b"x",
                ]));
            }
            if g.chance(0.03) {
                args.push(b"extra");
            }
            check_random(p, &args);
        }
        85..=91 => {
            let cursor = if g.chance(0.9) {
                "0"
            } else {
                g.pick(&["abc", "1x", ""])
            };
            let mut args: Vec<&[u8]> = vec![b"SSCAN", k, cursor.as_bytes()];
            for _ in 0..g.0.random_range(0..=2) {
                match g.0.random_range(0..6) {
                    0 | 1 => {
                        args.push(b"MATCH");
                        args.push(g.pick(&[&b"*"[..], b"1*", b"?", b"[a-c]", b"*-*", b""]));
                    }
                    2 | 3 => {
                        args.push(b"COUNT");
                        args.push(g.pick(&[&b"1"[..], b"5", b"100", b"0", b"-1", b"abc"]));
                    }
                    4 => args.push(g.pick(&[&b"TYPE"[..], b"MATCH", b"COUNT", b"FOO"])),
                    _ => {}
                }
            }
            p.scan(&args, k, Shape::Members);
        }
        92..=93 => {
            p.exact(&[b"OBJECT", b"ENCODING", k]);
        }
        94 => {
            if k.starts_with(b"s") {
                p.exact(&[b"DEL", k]);
            }
        }
        95 => {
            let cmd = g.pick(&[
                &b"SADD"[..],
                b"SREM",
                b"SISMEMBER",
                b"SMOVE",
                b"SINTERSTORE",
                b"SCARD",
            ]);
            if cmd == b"SCARD" {
                p.exact(&[cmd]);
            } else {
                p.exact(&[cmd, k]);
            }
        }
        96 => {
            let dst = g.key();
            p.exact(&[b"COPY", k, &dst, b"REPLACE"]);
        }
        _ => {
            p.exact(&[b"TYPE", k]);
        }
    }
}

fn random_stream(p: &mut Pair, seed: u64, commands: usize, limit: usize) {
    let mut g = Gen(StdRng::seed_from_u64(seed));
    p.run(&["SET", "str", "x"]);
    p.run(&["HSET", "h0", "a", "1"]);
    let all: &[&[u8]] = &[
        b"s0", b"s1", b"s2", b"s3", b"dst", b"str", b"h0", b"missing",
    ];
    for i in 0..commands {
        random_command(p, &mut g, limit);
        if i % 50 == 49 {
            p.check_keys(all);
        }
    }
    p.check_keys(all);
}

#[test]
fn set_random_stream_matches_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    // Default thresholds.
    random_stream(&mut p, 0x5e7_0001, 1500, 512);
    // A small intset limit: conversions happen all the time.
    p.run(&["FLUSHALL"]);
    p.run(&["CONFIG", "SET", "set-max-intset-entries", "6"]);
    random_stream(&mut p, 0x5e7_0002, 1500, 6);
    // RESP3.
    p.run(&["FLUSHALL"]);
    p.send(&[b"HELLO", b"3"]);
    random_stream(&mut p, 0x5e7_0003, 800, 6);
    p.finish();
}
