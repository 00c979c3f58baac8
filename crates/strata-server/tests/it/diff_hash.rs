//! Hash commands against a real Redis: fixed transcripts, encoding conversions, and a
//! seeded random command stream, compared reply by reply (see `pairwise`).

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_resp::value::Value;

use crate::pairwise::{Pair, Shape, bulks, elements, show};

const LONG: &str = "a-value-that-is-longer-than-sixty-four-bytes-so-the-hash-converts!";

#[test]
fn hash_transcript_matches_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    let script: &[&[&str]] = &[
        &["SET", "str", "x"],
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HGETALL", "h"],
        &["HKEYS", "h"],
        &["HVALS", "h"],
        &["HSET", "h", "a", "10", "d", "4"],
        &["HGETALL", "h"],
        &["HSET", "h", "a"],
        &["HSET", "h", "a", "1", "b"],
        &["HMSET", "h", "a"],
        &["HMSET", "h", "e", "5", "f", "6"],
        &["HSET", "str", "a", "1"],
        &["HGET", "h", "a"],
        &["HGET", "h", "zz"],
        &["HGET", "nokey", "a"],
        &["HGET", "str", "a"],
        &["HGET", "h"],
        &["HMGET", "h", "a", "zz", "b"],
        &["HMGET", "nokey", "a", "b"],
        &["HMGET", "str", "a"],
        &["HLEN", "h"],
        &["HLEN", "nokey"],
        &["HLEN", "str"],
        &["HSTRLEN", "h", "a"],
        &["HSTRLEN", "h", "zz"],
        &["HSTRLEN", "nokey", "a"],
        &["HSTRLEN", "str", "a"],
        &["HEXISTS", "h", "a"],
        &["HEXISTS", "h", "zz"],
        &["HEXISTS", "nokey", "a"],
        &["HEXISTS", "str", "a"],
        &["HSETNX", "h", "a", "100"],
        &["HSETNX", "h", "g", "7"],
        &["HSETNX", "str", "g", "7"],
        &["HSETNX", "new", "f", "v"],
        &["HGETALL", "new"],
        &["HGETALL", "nokey"],
        &["HKEYS", "nokey"],
        &["HVALS", "str"],
        &["HDEL", "h", "a", "a", "zz", "b"],
        &["HDEL", "nokey", "a"],
        &["HDEL", "str", "a"],
        &["HDEL", "new", "f"],
        &["EXISTS", "new"],
        &["HINCRBY", "n", "f", "5"],
        &["HINCRBY", "n", "f", "-10"],
        &["HINCRBY", "n", "f", "abc"],
        &["HINCRBY", "n", "f", "1.5"],
        &["HINCRBY", "n", "f", "9223372036854775807"],
        &["HINCRBY", "n", "g", "9223372036854775807"],
        &["HINCRBY", "n", "g", "1"],
        &["HINCRBY", "n", "m", "-9223372036854775808"],
        &["HINCRBY", "n", "m", "-1"],
        &["HSET", "n", "s", "abc", "sp", " 1", "z", "007"],
        &["HINCRBY", "n", "s", "1"],
        &["HINCRBY", "n", "sp", "1"],
        &["HINCRBY", "n", "z", "1"],
        &["HINCRBY", "str", "f", "1"],
        &["HINCRBYFLOAT", "n", "fl", "10.5"],
        &["HINCRBYFLOAT", "n", "fl", "0.1"],
        &["HINCRBYFLOAT", "n", "fl", "-5e-1"],
        &["HINCRBYFLOAT", "n", "fl", "0x10"],
        &["HINCRBYFLOAT", "n", "fl", "inf"],
        &["HINCRBYFLOAT", "n", "fl", "-inf"],
        &["HINCRBYFLOAT", "n", "fl", "nan"],
        &["HINCRBYFLOAT", "n", "fl", "abc"],
        &["HINCRBYFLOAT", "n", "fl", " 1"],
        &["HINCRBYFLOAT", "n", "s", "1"],
        &["HINCRBYFLOAT", "n", "f", "1"],
        &["HINCRBYFLOAT", "n", "big", "1e308"],
        &["HINCRBYFLOAT", "n", "big", "1e308"],
        &["HINCRBYFLOAT", "str", "f", "1"],
        &["HINCRBYFLOAT", "str", "f", "inf"],
        &["HINCRBYFLOAT", "nokey", "f", "inf"],
        &["EXISTS", "nokey"],
        &["HGETALL", "n"],
        &["OBJECT", "ENCODING", "n"],
        &["HRANDFIELD", "nokey"],
        &["HRANDFIELD", "nokey", "5"],
        &["HRANDFIELD", "nokey", "-5", "WITHVALUES"],
        &["HRANDFIELD", "str"],
        &["HRANDFIELD", "str", "1"],
        &["HRANDFIELD", "h", "0"],
        &["HRANDFIELD", "h", "0", "WITHVALUES"],
        &["HRANDFIELD", "h", "100"],
        &["HRANDFIELD", "h", "100", "WITHVALUES"],
        &["HRANDFIELD", "h", "100", "withvalues", "x"],
        &["HRANDFIELD", "h", "100", "foo"],
        &["HRANDFIELD", "h", "abc"],
        &["HRANDFIELD", "h", "abc", "foo"],
        &["HRANDFIELD", "h", "-9223372036854775808"],
        &["HRANDFIELD", "h", "9223372036854775807"],
        &["HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"],
        &["HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"],
        &["HRANDFIELD", "h", "4611686018427387903", "WITHVALUES"],
        &["HSCAN", "h", "0"],
        &["HSCAN", "h", "123"],
        &["HSCAN", "h", "0", "MATCH", "[c-e]"],
        &["HSCAN", "h", "0", "MATCH", "*", "COUNT", "1"],
        &["HSCAN", "h", "0", "COUNT", "0"],
        &["HSCAN", "h", "0", "COUNT", "-1"],
        &["HSCAN", "h", "0", "COUNT", "abc"],
        &["HSCAN", "h", "0", "COUNT"],
        &["HSCAN", "h", "0", "MATCH"],
        &["HSCAN", "h", "0", "TYPE", "string"],
        &["HSCAN", "h", "0", "NOVALUES"],
        &["HSCAN", "h", "abc"],
        &["HSCAN", "h", "18446744073709551616"],
        &["HSCAN", "h", "-1"],
        &["HSCAN", "nokey", "0", "FOO"],
        &["HSCAN", "nokey", "x"],
        &["HSCAN", "str", "0"],
        &["HSET", "e", "", ""],
        &["HGETALL", "e"],
        &["HSTRLEN", "e", ""],
        &["HSCAN", "e", "0", "MATCH", "*"],
        &["HSCAN", "e", "0", "MATCH", "**"],
        &["TYPE", "h"],
        &["COPY", "h", "hcopy"],
        &["HGETALL", "hcopy"],
        &["RENAME", "hcopy", "hcopy2"],
        &["HGETALL", "hcopy2"],
        &["SCAN", "0", "TYPE", "hash", "COUNT", "1000"],
    ];
    for line in script {
        // SCAN's key order is the keyspace's: compare it as a set of keys.
        if line[0] == "SCAN" {
            let args: Vec<&[u8]> = line.iter().map(|a| a.as_bytes()).collect();
            let ((want, _), (got, _)) = p.send(&args);
            let keys = |v: &Value| {
                elements(v)
                    .and_then(|e| e.get(1).map(bulks))
                    .map(|k| k.into_iter().collect::<BTreeSet<_>>())
            };
            if keys(&want) != keys(&got) {
                p.mismatch(format!("{line:?}: {want:?} vs {got:?}"));
            }
            continue;
        }
        // HGETALL and friends list a hashtable in its own order.
        let shape = match line[0] {
            "HGETALL" => Some(Shape::Pairs),
            "HKEYS" | "HVALS" => Some(Shape::Members),
            _ => None,
        };
        match shape {
            Some(shape) => {
                let key = line[1].as_bytes();
                p.listing(&[line[0].as_bytes(), key], &[key], shape);
            }
            None => {
                p.run(line);
            }
        }
    }
    p.finish();
}

#[test]
fn hash_encodings_match_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    let enc = |p: &mut Pair, key: &str| {
        p.run(&["OBJECT", "ENCODING", key]);
    };
    // 512 fields stay a listpack; the 513th converts.
    let mut args: Vec<String> = vec!["HSET".into(), "big".into()];
    for i in 0..512 {
        args.push(format!("f{i}"));
        args.push(format!("{i}"));
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    p.run(&refs);
    enc(&mut p, "big");
    p.run(&["HRANDFIELD", "big", "1000", "WITHVALUES"]);
    p.run(&["HSCAN", "big", "0", "COUNT", "1"]);
    p.run(&["HSET", "big", "f0", "again"]);
    enc(&mut p, "big");
    p.run(&["HSET", "big", "f512", "x"]);
    enc(&mut p, "big");
    p.run(&["HDEL", "big", "f512", "f511", "f510"]);
    enc(&mut p, "big");
    p.listing(&[b"HGETALL", b"big"], &[b"big"], Shape::Pairs);
    p.scan(&[b"HSCAN", b"big", b"0"], b"big", Shape::Pairs);
    p.scan(
        &[b"HSCAN", b"big", b"0", b"MATCH", b"f1*", b"COUNT", b"3"],
        b"big",
        Shape::Pairs,
    );

    // 64-byte values and fields fit; 65 bytes convert.
    let v64 = "v".repeat(64);
    let long = LONG;
    p.run(&["HSET", "v", "a", &v64, &v64, "b"]);
    enc(&mut p, "v");
    p.run(&["HSET", "v", "c", long]);
    enc(&mut p, "v");
    p.run(&["HSET", "f", long, "1"]);
    enc(&mut p, "f");
    // HSETNX converts only when it sets.
    p.run(&["HSET", "nx", "a", "1"]);
    p.run(&["HSETNX", "nx", "a", long]);
    enc(&mut p, "nx");
    p.run(&["HSETNX", "nx", "b", long]);
    enc(&mut p, "nx");
    // A long argument converts even when its field is only updated.
    p.run(&["HSET", "up", "a", "1"]);
    p.run(&["HSET", "up", "a", long]);
    enc(&mut p, "up");
    p.run(&["HSET", "up2", "a", "1", "b", "2"]);
    p.run(&["HMSET", "up2", long, "1"]);
    enc(&mut p, "up2");
    // HINCRBY with a long field, HINCRBYFLOAT with a long result.
    p.run(&["HSET", "inc", "a", "1"]);
    p.run(&["HINCRBY", "inc", long, "1"]);
    enc(&mut p, "inc");
    p.run(&["HSET", "fl", "a", "1"]);
    p.run(&["HINCRBYFLOAT", "fl", "a", "1e60"]);
    enc(&mut p, "fl");
    p.run(&["HINCRBYFLOAT", "fl", "a", "1e70"]);
    enc(&mut p, "fl");
    p.run(&["HGET", "fl", "a"]);
    // COPY and RENAME keep the encoding.
    p.run(&["COPY", "v", "vcopy"]);
    enc(&mut p, "vcopy");
    p.run(&["COPY", "nx", "nxcopy"]);
    enc(&mut p, "nxcopy");
    p.run(&["RENAME", "nxcopy", "nxcopy2"]);
    enc(&mut p, "nxcopy2");
    p.run(&["TYPE", "nxcopy2"]);
    // The thresholds follow CONFIG SET, including the old ziplist names.
    p.run(&["HSET", "lowered", "a", "1", "b", "2", "c", "3"]);
    p.run(&["CONFIG", "SET", "hash-max-listpack-entries", "2"]);
    p.run(&["CONFIG", "SET", "hash-max-listpack-value", "4"]);
    // Updating a field of a listpack over the lowered limit converts it, as adding does.
    enc(&mut p, "lowered");
    p.run(&["HSET", "lowered", "a", "9"]);
    enc(&mut p, "lowered");
    p.run(&["HSET", "small", "a", "1", "b", "2"]);
    enc(&mut p, "small");
    p.run(&["HSET", "small", "c", "3"]);
    enc(&mut p, "small");
    p.run(&["HSET", "small2", "abcde", "1"]);
    enc(&mut p, "small2");
    p.run(&["HSET", "small3", "a", "1234"]);
    enc(&mut p, "small3");
    p.run(&["CONFIG", "SET", "hash-max-ziplist-entries", "0"]);
    p.run(&["HSET", "zero", "a", "1"]);
    enc(&mut p, "zero");
    p.run(&["CONFIG", "SET", "hash-max-listpack-entries", "512"]);
    p.run(&["CONFIG", "SET", "hash-max-listpack-value", "64"]);
    p.check_keys(&[
        b"big", b"v", b"f", b"nx", b"up", b"up2", b"inc", b"fl", b"small", b"zero",
    ]);
    p.finish();
}

#[test]
fn hash_resp3_replies_match_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    p.send(&[b"HELLO", b"3"]);
    let script: &[&[&str]] = &[
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HGETALL", "h"],
        &["HGETALL", "nokey"],
        &["HKEYS", "h"],
        &["HVALS", "nokey"],
        &["HGET", "h", "zz"],
        &["HMGET", "h", "a", "zz"],
        &["HRANDFIELD", "nokey"],
        &["HRANDFIELD", "nokey", "2"],
        &["HRANDFIELD", "h", "5", "WITHVALUES"],
        &["HRANDFIELD", "h", "3"],
        &["HRANDFIELD", "h", "0", "WITHVALUES"],
        &["HSCAN", "h", "0"],
        &["HSCAN", "nokey", "0"],
        &["HINCRBYFLOAT", "h", "a", "1.5"],
        &["HINCRBY", "h", "b", "1"],
    ];
    for line in script {
        p.run(line);
    }
    // Random picks: same shapes, fields that exist.
    for args in [
        &["HRANDFIELD", "h", "-5", "WITHVALUES"][..],
        &["HRANDFIELD", "h", "2", "WITHVALUES"],
        &["HRANDFIELD", "h", "1", "WITHVALUES"],
        &["HRANDFIELD", "h"],
    ] {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        check_hrandfield(&mut p, &args);
    }
    p.finish();
}

#[test]
fn hash_command_info_matches_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    for name in [
        "hset",
        "hsetnx",
        "hget",
        "hmget",
        "hmset",
        "hdel",
        "hlen",
        "hexists",
        "hgetall",
        "hkeys",
        "hvals",
        "hincrby",
        "hincrbyfloat",
        "hstrlen",
        "hrandfield",
        "hscan",
    ] {
        p.run(&["COMMAND", "INFO", name]);
    }
    p.run(&["COMMAND", "GETKEYS", "HSET", "k", "f", "v"]);
    p.run(&["COMMAND", "GETKEYS", "HMGET", "k", "a", "b"]);
    p.finish();
}

/// The shape of a reply with its strings blanked: two replies of random picks must
/// agree on it.
fn skeleton(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "*[{}]",
            items.iter().map(skeleton).collect::<Vec<_>>().join(",")
        ),
        Value::Set(items) => format!(
            "~[{}]",
            items.iter().map(skeleton).collect::<Vec<_>>().join(",")
        ),
        Value::Bulk(_) => "$".into(),
        other => format!("{other:?}"),
    }
}

/// HRANDFIELD's reply, checked by its properties: the shape Redis gives, fields that
/// exist with their values, distinct fields for a positive count.
fn check_hrandfield(p: &mut Pair, args: &[&[u8]]) {
    let key = args[1];
    let state: BTreeMap<Vec<u8>, Vec<u8>> = {
        let all = bulks(&p.redis_only(&[b"HGETALL", key]));
        all.chunks(2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect()
    };
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
    if skeleton(&want) != skeleton(&got) {
        return fail(p, "shape");
    }
    let with_values = args.len() == 4;
    let picks: Vec<(Vec<u8>, Option<Vec<u8>>)> = match &got {
        Value::Bulk(f) => vec![(f.clone(), None)],
        Value::Array(items) if with_values => {
            let flat: Vec<Vec<u8>> = if items.iter().all(|i| matches!(i, Value::Array(_))) {
                items.iter().flat_map(bulks).collect()
            } else {
                bulks(&got)
            };
            flat.chunks(2)
                .map(|c| (c[0].clone(), c.get(1).cloned()))
                .collect()
        }
        Value::Array(_) => bulks(&got).into_iter().map(|f| (f, None)).collect(),
        _ => return fail(p, "unexpected reply"),
    };
    for (field, value) in &picks {
        match state.get(field) {
            None => return fail(p, "a field that is not in the hash"),
            Some(v) if value.as_ref().is_some_and(|x| x != v) => {
                return fail(p, "a field with another value");
            }
            _ => {}
        }
    }
    let count: i64 = args
        .get(2)
        .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok())
        .unwrap_or(0);
    if count > 0 {
        let distinct: BTreeSet<&Vec<u8>> = picks.iter().map(|(f, _)| f).collect();
        if distinct.len() != picks.len() {
            fail(p, "repeated fields for a positive count");
        } else if count as usize >= state.len() && p.encoding(key) != "hashtable" {
            fail(p, "a whole listpack hash must come in order");
        }
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
            self.pick(&["h0", "h1", "h2"]).into()
        } else {
            self.pick(&["str", "s0", "missing"]).into()
        }
    }

    fn field(&mut self) -> Vec<u8> {
        if self.chance(0.02) {
            return LONG.into();
        }
        if self.chance(0.03) {
            return self
                .pick(&[&b""[..], b"f\x00\xff", b"007", b"9223372036854775807", b"*"])
                .to_vec();
        }
        self.pick(&[
            "a", "b", "c", "d", "e", "f", "g", "h", "1", "2", "-3", "10", "ab", "ba",
        ])
        .into()
    }

    fn value(&mut self) -> Vec<u8> {
        if self.chance(0.02) {
            return LONG.repeat(3).into();
        }
        self.pick(&[
            "1",
            "-1",
            "0",
            "10",
            "abc",
            "1.5",
            "3e2",
            "-0",
            " 5",
            "9223372036854775807",
            "-9223372036854775808",
            "",
            "0x1p3",
        ])
        .into()
    }

    fn increment(&mut self) -> Vec<u8> {
        self.pick(&[
            "1",
            "-1",
            "5",
            "100",
            "-100",
            "0",
            "9223372036854775807",
            "-9223372036854775808",
            "abc",
            "1.5",
            "",
            "007",
        ])
        .into()
    }

    fn float(&mut self) -> Vec<u8> {
        self.pick(&[
            "1", "-1", "0.1", "1.5", "-2.5e3", "1e308", "inf", "-inf", "nan", "abc", "0x10",
            "1e-310", " 1", "",
        ])
        .into()
    }
}

/// One random hash command, run on both servers and checked.
fn random_command(p: &mut Pair, g: &mut Gen) {
    let key = g.key();
    let k: &[u8] = &key;
    let roll = g.0.random_range(0..100);
    match roll {
        0..=17 => {
            let mut args: Vec<Vec<u8>> =
                vec![g.pick(&[&b"HSET"[..], b"HMSET"]).to_vec(), key.clone()];
            let pairs = if g.chance(0.01) {
                600
            } else {
                g.0.random_range(1..=4)
            };
            for i in 0..pairs {
                if pairs > 4 {
                    args.push(format!("bulk{i}").into_bytes());
                } else {
                    args.push(g.field());
                }
                args.push(g.value());
            }
            if g.chance(0.03) {
                args.pop();
            }
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            p.exact(&refs);
        }
        18..=22 => {
            let (f, v) = (g.field(), g.value());
            p.exact(&[b"HSETNX", k, &f, &v]);
        }
        23..=30 => {
            let f = g.field();
            p.exact(&[b"HGET", k, &f]);
        }
        31..=34 => {
            let fields: Vec<Vec<u8>> = (0..g.0.random_range(1..=4)).map(|_| g.field()).collect();
            let mut args: Vec<&[u8]> = vec![b"HMGET", k];
            args.extend(fields.iter().map(Vec::as_slice));
            p.exact(&args);
        }
        35..=42 => {
            let fields: Vec<Vec<u8>> = (0..g.0.random_range(1..=3)).map(|_| g.field()).collect();
            let mut args: Vec<&[u8]> = vec![b"HDEL", k];
            args.extend(fields.iter().map(Vec::as_slice));
            p.exact(&args);
        }
        43..=45 => {
            p.exact(&[b"HLEN", k]);
        }
        46..=48 => {
            let f = g.field();
            p.exact(&[b"HEXISTS", k, &f]);
        }
        49..=51 => {
            let f = g.field();
            p.exact(&[b"HSTRLEN", k, &f]);
        }
        52..=57 => {
            let (cmd, shape) = g.pick(&[
                (&b"HGETALL"[..], Shape::Pairs),
                (b"HKEYS", Shape::Members),
                (b"HVALS", Shape::Members),
            ]);
            p.listing(&[cmd, k], &[k], shape);
        }
        58..=65 => {
            let (f, by) = (g.field(), g.increment());
            p.exact(&[b"HINCRBY", k, &f, &by]);
        }
        66..=71 => {
            let (f, by) = (g.field(), g.float());
            p.exact(&[b"HINCRBYFLOAT", k, &f, &by]);
        }
        72..=81 => {
            let count = g.pick(&[
                "-5", "-3", "-1", "0", "1", "2", "3", "5", "10", "1000", "-20", "abc", "", "1.5",
            ]);
            let mut args: Vec<&[u8]> = vec![b"HRANDFIELD", k];
            if g.chance(0.85) {
                args.push(count.as_bytes());
                if g.chance(0.5) {
                    args.push(g.pick(&[&b"WITHVALUES"[..], b"withvalues", b"WITHVALUE"]));
                }
                if g.chance(0.03) {
                    args.push(b"extra");
                }
            }
            check_hrandfield(p, &args);
        }
        82..=89 => {
            let cursor = if g.chance(0.9) {
                "0"
            } else {
                g.pick(&["abc", "1x", " 1", ""])
            };
            let mut args: Vec<&[u8]> = vec![b"HSCAN", k, cursor.as_bytes()];
            for _ in 0..g.0.random_range(0..=2) {
                match g.0.random_range(0..6) {
                    0 | 1 => {
                        args.push(b"MATCH");
                        args.push(g.pick(&[&b"*"[..], b"a*", b"?", b"[a-c]*", b"*1*", b""]));
                    }
                    2 | 3 => {
                        args.push(b"COUNT");
                        args.push(g.pick(&[&b"1"[..], b"5", b"100", b"0", b"-1", b"abc"]));
                    }
                    4 => args.push(g.pick(&[&b"NOVALUES"[..], b"TYPE", b"MATCH", b"COUNT"])),
                    _ => {}
                }
            }
            p.scan(&args, k, Shape::Pairs);
        }
        90..=92 => {
            p.exact(&[b"OBJECT", b"ENCODING", k]);
        }
        93 => {
            if k.starts_with(b"h") {
                p.exact(&[b"DEL", k]);
            }
        }
        94 => {
            // Arity errors.
            let cmd = g.pick(&[
                &b"HGET"[..],
                b"HSETNX",
                b"HLEN",
                b"HINCRBY",
                b"HSTRLEN",
                b"HEXISTS",
            ]);
            p.exact(&[cmd, k]);
        }
        95 => {
            let dst = g.key();
            p.exact(&[b"COPY", k, &dst, b"REPLACE"]);
        }
        _ => {
            p.exact(&[b"TYPE", k]);
        }
    }
}

fn random_stream(p: &mut Pair, seed: u64, commands: usize) {
    let mut g = Gen(StdRng::seed_from_u64(seed));
    p.run(&["SET", "str", "x"]);
    p.run(&["SADD", "s0", "1", "2"]);
    for i in 0..commands {
        random_command(p, &mut g);
        if i % 50 == 49 {
            p.check_keys(&[b"h0", b"h1", b"h2", b"str", b"s0"]);
        }
    }
    p.check_keys(&[b"h0", b"h1", b"h2", b"str", b"s0"]);
}

#[test]
fn hash_random_stream_matches_redis() {
    let Some(mut p) = Pair::start(&[]) else {
        return;
    };
    // Default thresholds.
    random_stream(&mut p, 0x5eed_0001, 1500);
    // Small thresholds: conversions happen all the time.
    p.run(&["FLUSHALL"]);
    p.run(&["CONFIG", "SET", "hash-max-listpack-entries", "6"]);
    p.run(&["CONFIG", "SET", "hash-max-listpack-value", "8"]);
    random_stream(&mut p, 0x5eed_0002, 1500);
    // RESP3.
    p.run(&["FLUSHALL"]);
    p.send(&[b"HELLO", b"3"]);
    random_stream(&mut p, 0x5eed_0003, 800);
    p.finish();
}
