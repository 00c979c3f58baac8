//! Sorted sets side by side with a real Redis: fixed transcripts (RESP2 and RESP3),
//! COMMAND INFO, encodings and their conversions, and a seeded random command stream.
//! Replies must match byte for byte, except where Redis leaves the order unspecified
//! (ZSCAN of a big set) or the content random (ZRANDMEMBER).

use strata_resp::value::{Value, decode};

use crate::support::{Proc, Raw, redis_available, redis_server, strata};

/// How two replies are compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Exact,
    /// A SCAN reply: the same cursor and the same (member, score) pairs in any order.
    ScanPairs,
    /// Random members: the same reply type and length.
    Shape,
}

/// A real Redis and strata, each with a connection.
struct Servers {
    _redis: Proc,
    _ours: Proc,
    r: Raw,
    s: Raw,
    mismatches: Vec<String>,
    sent: usize,
    /// Replies that were errors, and empty or zero ones, to keep the stream honest.
    errors: usize,
    empties: usize,
}

impl Servers {
    fn start() -> Option<Servers> {
        if !redis_available() {
            return None;
        }
        let redis = redis_server(&[]);
        let ours = strata(&[]);
        let (r, s) = (redis.client(), ours.client());
        Some(Servers {
            _redis: redis,
            _ours: ours,
            r,
            s,
            mismatches: Vec::new(),
            sent: 0,
            errors: 0,
            empties: 0,
        })
    }

    /// Sends to both and ignores the replies (HELLO, whose text names the server).
    fn both_ignore(&mut self, args: &[&[u8]]) {
        self.r.send(args);
        self.s.send(args);
        self.r.read();
        self.s.read();
    }

    /// Asks the real Redis alone (a read that changes nothing).
    fn ask_redis(&mut self, args: &[&str]) -> Value {
        self.r.cmd(args)
    }

    fn run(&mut self, args: &[&[u8]], mode: Mode) {
        self.sent += 1;
        self.r.send(args);
        self.s.send(args);
        let (want_v, want) = self.r.read();
        let (got_v, got) = self.s.read();
        match &want_v {
            Value::Error(e) => {
                self.errors += 1;
                if std::env::var("ZSET_DEBUG").is_ok() {
                    eprintln!(
                        "ERR {} <- {}",
                        String::from_utf8_lossy(e),
                        String::from_utf8_lossy(args[0])
                    );
                }
            }
            Value::Integer(0) | Value::Null | Value::NullArray => self.empties += 1,
            Value::Array(items) if items.is_empty() => self.empties += 1,
            _ => {}
        }
        let same = match mode {
            Mode::Exact => want == got,
            Mode::ScanPairs => want == got || scan_pairs(&want_v) == scan_pairs(&got_v),
            Mode::Shape => shape(&want_v) == shape(&got_v),
        };
        if !same {
            let shown: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            self.mismatches.push(format!(
                "#{} {shown:?}\n  redis:  {:?}\n  strata: {:?}",
                self.sent,
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&got)
            ));
        }
    }

    fn run_str(&mut self, args: &[&str], mode: Mode) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.run(&args, mode);
    }

    fn assert_clean(&self) {
        assert!(
            self.mismatches.is_empty(),
            "{} mismatches in {} commands:\n{}",
            self.mismatches.len(),
            self.sent,
            self.mismatches
                .iter()
                .take(40)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// A SCAN reply as its cursor and its sorted (member, score) pairs.
fn scan_pairs(v: &Value) -> Option<(Vec<u8>, Vec<String>)> {
    let Value::Array(parts) = v else { return None };
    let [Value::Bulk(cursor), Value::Array(items)] = parts.as_slice() else {
        return None;
    };
    let mut pairs: Vec<String> = items.chunks(2).map(|p| format!("{p:?}")).collect();
    pairs.sort();
    Some((cursor.clone(), pairs))
}

/// The type and length of a reply, for random ones.
fn shape(v: &Value) -> String {
    match v {
        Value::Array(items) => format!("array {}", items.len()),
        Value::Bulk(_) => "bulk".to_string(),
        other => format!("{other:?}"),
    }
}

/// Runs a transcript: exact comparisons, but ZSCAN replies in any order (a skiplist's
/// dict order is its own).
fn transcript(servers: &mut Servers, script: &[&[&str]]) {
    for cmd in script {
        let mode = if cmd[0] == "ZSCAN" {
            Mode::ScanPairs
        } else {
            Mode::Exact
        };
        servers.run_str(cmd, mode);
    }
}

const ZSET_COMMANDS: &[&str] = &[
    "zadd",
    "zincrby",
    "zrem",
    "zscore",
    "zmscore",
    "zcard",
    "zcount",
    "zlexcount",
    "zrank",
    "zrevrank",
    "zrange",
    "zrangestore",
    "zrangebyscore",
    "zrevrangebyscore",
    "zrangebylex",
    "zrevrangebylex",
    "zrevrange",
    "zpopmin",
    "zpopmax",
    "zmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
    "zremrangebyrank",
    "zremrangebyscore",
    "zremrangebylex",
    "zunion",
    "zinter",
    "zdiff",
    "zunionstore",
    "zinterstore",
    "zdiffstore",
    "zintercard",
    "zrandmember",
    "zscan",
];

#[test]
fn command_info_matches_redis() {
    let Some(mut servers) = Servers::start() else {
        return;
    };
    for name in ZSET_COMMANDS {
        servers.run_str(&["COMMAND", "INFO", name], Mode::Exact);
        servers.run_str(&["COMMAND", "GETKEYS", name, "k", "1", "a"], Mode::Exact);
    }
    for cmd in [
        &[
            "COMMAND",
            "GETKEYS",
            "ZUNIONSTORE",
            "dst",
            "2",
            "a",
            "b",
            "WEIGHTS",
            "1",
            "2",
        ][..],
        &["COMMAND", "GETKEYS", "ZMPOP", "2", "a", "b", "MIN"],
        &["COMMAND", "GETKEYS", "BZMPOP", "0", "2", "a", "b", "MIN"],
        &["COMMAND", "GETKEYS", "BZPOPMIN", "a", "b", "0"],
        &["COMMAND", "GETKEYS", "ZRANGESTORE", "dst", "src", "0", "-1"],
        &[
            "COMMAND",
            "GETKEYS",
            "ZINTERCARD",
            "2",
            "a",
            "b",
            "LIMIT",
            "1",
        ],
    ] {
        servers.run_str(cmd, Mode::Exact);
    }
    servers.assert_clean();
}

/// Edge cases of every command; run in RESP2, then again in RESP3.
const TRANSCRIPT: &[&[&str]] = &[
    // ZADD: options, errors, replies.
    &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
    &["ZADD", "z", "NX", "XX", "1", "a"],
    &["ZADD", "z", "NX", "GT", "1", "a"],
    &["ZADD", "z", "GT", "LT", "1", "a"],
    &["ZADD", "z", "LT", "NX", "1", "a"],
    &["ZADD", "z", "INCR", "1", "a", "2", "b"],
    &["ZADD", "z", "1"],
    &["ZADD", "z", "NX"],
    &["ZADD", "z", "1", "a", "2"],
    &["ZADD", "z", "x", "a"],
    &["ZADD", "z", "nan", "a"],
    &["ZADD", "z", "1e400", "a"],
    &["ZADD", "z", "1e-400", "a"],
    &["ZADD", "z", " 1", "a"],
    &["ZADD", "z", "1 ", "a"],
    &["ZADD", "z", "", "a"],
    &["ZADD", "z", "0x10", "hex"],
    &["ZADD", "z", "4.9e-324", "tiny"],
    &["ZADD", "z", "CH", "5", "a", "2", "b", "9", "new"],
    &["ZADD", "z", "GT", "CH", "1", "a", "10", "b"],
    &["ZADD", "z", "LT", "CH", "1", "a", "10", "b"],
    &["ZADD", "z", "XX", "100", "nope"],
    &["ZADD", "z", "NX", "100", "a"],
    &["ZADD", "z", "INCR", "2.5", "a"],
    &["ZADD", "z", "XX", "INCR", "1", "nope"],
    &["ZADD", "z", "NX", "INCR", "1", "a"],
    &["ZADD", "z", "GT", "INCR", "-1", "a"],
    &["ZADD", "z", "INCR", "0", "a"],
    &["ZADD", "z", "INCR", "inf", "a"],
    &["ZADD", "z", "INCR", "-inf", "a"],
    &["ZSCORE", "z", "a"],
    &["ZADD", "nokey", "XX", "1", "a"],
    &["ZADD", "nokey", "XX", "INCR", "1", "a"],
    &["EXISTS", "nokey"],
    &["ZINCRBY", "z", "0.1", "b"],
    &["ZINCRBY", "z", "0.2", "b"],
    &["ZINCRBY", "z", "x", "b"],
    &["ZINCRBY", "z", "NX", "b"],
    &["ZINCRBY", "zi", "-inf", "m"],
    &["ZINCRBY", "zi", "+inf", "m"],
    &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
    // -0 is stored as 0 in a listpack, kept in a skiplist.
    &[
        "ZADD", "negz", "-0", "a", "1e18", "b", "0.1", "c", "1e20", "d",
    ],
    &["ZSCORE", "negz", "a"],
    &["ZSCAN", "negz", "0"],
    &["CONFIG", "SET", "zset-max-listpack-entries", "0"],
    &["ZADD", "negs", "-0", "a", "1e18", "b"],
    &["OBJECT", "ENCODING", "negs"],
    &["ZSCORE", "negs", "a"],
    &["ZSCAN", "negs", "0"],
    &["ZRANGE", "negs", "0", "-1", "WITHSCORES"],
    &["CONFIG", "SET", "zset-max-listpack-entries", "128"],
    &["ZUNIONSTORE", "negu", "1", "negs"],
    &["OBJECT", "ENCODING", "negu"],
    &["ZSCORE", "negu", "a"],
    &["ZUNION", "1", "negs", "WITHSCORES"],
    &[
        "ZUNION",
        "2",
        "negs",
        "z",
        "WEIGHTS",
        "-1",
        "0",
        "WITHSCORES",
    ],
    &["ZRANGESTORE", "negr", "negs", "0", "-1"],
    &["ZSCORE", "negr", "a"],
    &["ZADD", "negs", "0", "a"],
    &["ZSCORE", "negs", "a"],
    // Reads.
    &["ZSCORE", "z", "nope"],
    &["ZSCORE", "nokey", "a"],
    &["ZMSCORE", "z", "a", "nope", "b"],
    &["ZMSCORE", "nokey", "a", "b"],
    &["ZMSCORE", "z"],
    &["ZCARD", "z"],
    &["ZCARD", "nokey"],
    &["ZRANK", "z", "b"],
    &["ZREVRANK", "z", "b"],
    &["ZRANK", "z", "nope"],
    &["ZRANK", "nokey", "a"],
    &["ZRANK", "z", "a", "WITHSCORE"],
    &["ZREVRANK", "z", "a", "WITHSCORE"],
    &["ZCOUNT", "z", "-inf", "+inf"],
    &["ZCOUNT", "z", "(1", "(10"],
    &["ZCOUNT", "z", "(", "5"],
    &["ZCOUNT", "z", "", "5"],
    &["ZCOUNT", "z", "x", "5"],
    &["ZCOUNT", "z", "5", "1"],
    &["ZCOUNT", "z", "(5", "5"],
    &["ZCOUNT", "z", " 1", "5"],
    &["ZCOUNT", "z", "1e400", "inf"],
    &["ZCOUNT", "z", "nan", "inf"],
    &["ZCOUNT", "nokey", "x", "1"],
    &["ZCOUNT", "nokey", "1", "2"],
    // Ranges.
    &["DEL", "r"],
    &[
        "ZADD", "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ],
    &["ZRANGE", "r", "0", "-1"],
    &["ZRANGE", "r", "-100", "100", "WITHSCORES"],
    &["ZRANGE", "r", "3", "1"],
    &["ZRANGE", "r", "-1", "-2"],
    &["ZRANGE", "r", "5", "10"],
    &["ZRANGE", "r", "0", "-1", "REV", "WITHSCORES"],
    &["ZRANGE", "r", "1", "3", "REV"],
    &["ZRANGE", "r", "x", "1"],
    &["ZRANGE", "r", "0", "-1", "LIMIT", "0", "1"],
    &["ZRANGE", "r", "0", "-1", "LIMIT", "x", "1"],
    &["ZRANGE", "r", "0", "-1", "LIMIT", "0"],
    &["ZRANGE", "r", "0", "-1", "REV", "REV"],
    &["ZRANGE", "r", "0", "-1", "BYSCORE", "BYLEX"],
    &["ZRANGE", "r", "0", "-1", "FOO"],
    &["ZRANGE", "r", "(1", "4", "BYSCORE", "WITHSCORES"],
    &["ZRANGE", "r", "4", "(1", "BYSCORE", "REV"],
    &["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"],
    &["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "-1"],
    &["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"],
    &["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "5", "2"],
    &["ZRANGE", "r", "-inf", "+inf", "BYSCORE", "LIMIT", "4", "0"],
    &[
        "ZRANGE",
        "r",
        "+inf",
        "-inf",
        "BYSCORE",
        "REV",
        "LIMIT",
        "1",
        "2",
        "WITHSCORES",
    ],
    &["ZRANGE", "r", "-", "+", "BYLEX"],
    &["ZRANGE", "r", "[b", "(d", "BYLEX"],
    &["ZRANGE", "r", "+", "-", "BYLEX", "REV", "LIMIT", "1", "2"],
    &["ZRANGE", "r", "-", "+", "BYLEX", "WITHSCORES"],
    &["ZRANGE", "r", "a", "+", "BYLEX"],
    &["ZRANGE", "r", "-", "+x", "BYLEX"],
    &[
        "ZRANGEBYSCORE",
        "r",
        "2",
        "4",
        "WITHSCORES",
        "LIMIT",
        "1",
        "5",
    ],
    &["ZRANGEBYSCORE", "r", "2", "4", "REV"],
    &["ZRANGEBYSCORE", "r", "2", "4", "BYSCORE"],
    &["ZRANGEBYSCORE", "r", "2"],
    &["ZREVRANGEBYSCORE", "r", "4", "2", "WITHSCORES"],
    &["ZREVRANGEBYSCORE", "r", "2", "4"],
    &["ZREVRANGEBYSCORE", "r", "(4", "(2", "LIMIT", "0", "1"],
    &["ZRANGEBYLEX", "r", "[a", "[c"],
    &["ZRANGEBYLEX", "r", "(a", "+", "LIMIT", "1", "1"],
    &["ZRANGEBYLEX", "r", "-", "+", "WITHSCORES"],
    &["ZRANGEBYLEX", "r", "[", "+"],
    &["ZRANGEBYLEX", "r", "(", "+"],
    &["ZRANGEBYLEX", "r", "+", "+"],
    &["ZRANGEBYLEX", "r", "-", "-"],
    &["ZREVRANGEBYLEX", "r", "+", "-"],
    &["ZREVRANGEBYLEX", "r", "[c", "(a"],
    &["ZREVRANGEBYLEX", "r", "-", "+"],
    &["ZREVRANGE", "r", "0", "1", "WITHSCORES"],
    &["ZREVRANGE", "r", "0", "1", "REV"],
    &["ZREVRANGE", "r", "0", "1", "LIMIT", "0", "1"],
    &["ZRANGE", "nokey", "0", "-1"],
    &["ZRANGE", "nokey", "x", "-1"],
    &["ZRANGEBYSCORE", "nokey", "x", "1"],
    &["ZLEXCOUNT", "r", "-", "+"],
    &["ZLEXCOUNT", "r", "[b", "(e"],
    &["ZLEXCOUNT", "r", "(e", "[b"],
    &["ZLEXCOUNT", "r", "b", "c"],
    &["ZLEXCOUNT", "nokey", "-", "+"],
    // Lex over mixed scores in a listpack follows Redis's walk.
    &["ZADD", "mixed", "1", "d", "2", "a", "3", "c", "4", "b"],
    &["ZRANGEBYLEX", "mixed", "[b", "+"],
    &["ZRANGEBYLEX", "mixed", "-", "[b"],
    &["ZREVRANGEBYLEX", "mixed", "+", "[b"],
    &["ZLEXCOUNT", "mixed", "[b", "[c"],
    &["ZREMRANGEBYLEX", "mixed", "[b", "[c"],
    &["ZRANGE", "mixed", "0", "-1"],
    // ZRANGESTORE.
    &["ZRANGESTORE", "dst", "r", "0", "-1"],
    &["ZRANGE", "dst", "0", "-1", "WITHSCORES"],
    &["ZRANGESTORE", "dst", "r", "0", "-1", "WITHSCORES"],
    &[
        "ZRANGESTORE",
        "dst",
        "r",
        "(1",
        "+inf",
        "BYSCORE",
        "LIMIT",
        "1",
        "2",
    ],
    &["ZRANGESTORE", "dst", "r", "[c", "-", "BYLEX", "REV"],
    &["ZRANGE", "dst", "0", "-1"],
    &["SET", "dst", "x", "EX", "100"],
    &["ZRANGESTORE", "dst", "r", "0", "1"],
    &["TTL", "dst"],
    &["TYPE", "dst"],
    &["ZRANGESTORE", "dst", "r", "5", "10"],
    &["EXISTS", "dst"],
    &["ZRANGESTORE", "dst", "nokey", "0", "-1"],
    &["ZRANGESTORE", "dst", "r", "x", "1"],
    // Removal by range.
    &["ZREMRANGEBYRANK", "r", "x", "1"],
    &["ZREMRANGEBYRANK", "r", "3", "1"],
    &["ZREMRANGEBYRANK", "r", "-1", "-1"],
    &["ZREMRANGEBYSCORE", "r", "(1", "2"],
    &["ZREMRANGEBYSCORE", "r", "x", "2"],
    &["ZREMRANGEBYLEX", "r", "[a", "[a"],
    &["ZREMRANGEBYLEX", "r", "x", "+"],
    &["ZRANGE", "r", "0", "-1", "WITHSCORES"],
    &["ZREMRANGEBYRANK", "r", "0", "-1"],
    &["EXISTS", "r"],
    &["ZREMRANGEBYSCORE", "nokey", "x", "1"],
    &["ZREMRANGEBYRANK", "nokey", "0", "1"],
    // ZREM.
    &["ZADD", "rm", "1", "a", "2", "b"],
    &["ZREM", "rm", "a", "a", "nope"],
    &["ZREM", "rm", "b", "c"],
    &["EXISTS", "rm"],
    &["ZREM", "nokey", "a"],
    // Pops.
    &[
        "ZADD", "p", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ],
    &["ZPOPMIN", "p"],
    &["ZPOPMAX", "p", "2"],
    &["ZPOPMIN", "p", "0"],
    &["ZPOPMIN", "p", "-1"],
    &["ZPOPMIN", "p", "x"],
    &["ZPOPMIN", "p", "1", "2"],
    &["ZPOPMIN", "nokey"],
    &["ZPOPMIN", "nokey", "5"],
    &["ZMPOP", "2", "nokey", "p", "MIN"],
    &["ZMPOP", "2", "nokey", "p", "max", "COUNT", "10"],
    &["EXISTS", "p"],
    &["ZMPOP", "1", "p", "MIN"],
    &["ZMPOP", "0", "p", "MIN"],
    &["ZMPOP", "x", "p", "MIN"],
    &["ZMPOP", "3", "p", "MIN"],
    &["ZMPOP", "1", "p", "FOO"],
    &["ZMPOP", "1", "p", "MIN", "COUNT", "0"],
    &["ZMPOP", "1", "p", "MIN", "COUNT", "x"],
    &["ZMPOP", "1", "p", "MIN", "COUNT", "1", "COUNT", "1"],
    &["ZMPOP", "1", "p", "MIN", "FOO"],
    &["ZADD", "p", "1", "a", "2", "b"],
    &["BZPOPMIN", "nokey", "p", "0"],
    &["BZPOPMAX", "p", "0.5"],
    &["BZPOPMIN", "p", "-1"],
    &["BZPOPMIN", "p", "x"],
    &["BZPOPMIN", "p", "inf"],
    &["ZADD", "p", "1", "a", "2", "b"],
    &["BZMPOP", "0", "1", "p", "MIN"],
    &["BZMPOP", "0", "1", "nokey", "MIN", "FOO"],
    &["BZMPOP", "-1", "1", "p", "MIN"],
    &["BZMPOP", "x", "0", "p", "MIN"],
    &["ZADD", "p", "1", "a", "2", "b", "3", "c"],
    &["BZMPOP", "1", "2", "nokey", "p", "MAX", "COUNT", "2"],
    &["BZMPOP", "1", "1", "p", "MAX", "COUNT", "5"],
    &["EXISTS", "p"],
    // Set operations.
    &["DEL", "a", "b", "c"],
    &["ZADD", "a", "1", "x", "2", "y", "3", "z"],
    &["ZADD", "b", "10", "y", "20", "z", "30", "w"],
    &["ZADD", "c", "0.5", "z", "inf", "w"],
    &["ZUNION", "2", "a", "b", "WITHSCORES"],
    &[
        "ZUNION",
        "3",
        "a",
        "b",
        "c",
        "WEIGHTS",
        "1",
        "2",
        "0",
        "WITHSCORES",
    ],
    &[
        "ZUNION",
        "3",
        "a",
        "b",
        "c",
        "AGGREGATE",
        "MIN",
        "WITHSCORES",
    ],
    &[
        "ZUNION",
        "3",
        "a",
        "b",
        "c",
        "AGGREGATE",
        "max",
        "WITHSCORES",
    ],
    &["ZUNION", "2", "a", "c", "WEIGHTS", "-1", "-1", "WITHSCORES"],
    &["ZUNION", "2", "b", "c", "WEIGHTS", "1", "-1", "WITHSCORES"],
    &["ZINTER", "2", "a", "b", "WITHSCORES"],
    &["ZINTER", "3", "a", "b", "c"],
    &["ZINTER", "2", "a", "nokey"],
    &["ZDIFF", "2", "a", "b", "WITHSCORES"],
    &["ZDIFF", "1", "a"],
    &["ZDIFF", "2", "nokey", "a"],
    &["ZDIFF", "2", "a", "b", "WEIGHTS", "1", "2"],
    &["ZDIFF", "2", "a", "b", "AGGREGATE", "SUM"],
    &["ZUNION", "0", "a"],
    &["ZUNION", "-1", "a"],
    &["ZUNION", "x", "a"],
    &["ZUNION", "3", "a", "b"],
    &["ZUNION", "2", "a", "b", "WEIGHTS", "1"],
    &["ZUNION", "2", "a", "b", "WEIGHTS", "1", "x"],
    &["ZUNION", "2", "a", "b", "AGGREGATE", "AVG"],
    &["ZUNION", "2", "a", "b", "AGGREGATE"],
    &["ZUNION", "2", "a", "b", "FOO"],
    &["ZUNIONSTORE", "u", "2", "a", "b"],
    &["ZUNIONSTORE", "u", "2", "a", "b", "WITHSCORES"],
    &["ZRANGE", "u", "0", "-1", "WITHSCORES"],
    &["ZINTERSTORE", "u", "2", "a", "b", "WEIGHTS", "2", "3"],
    &["ZRANGE", "u", "0", "-1", "WITHSCORES"],
    &["ZDIFFSTORE", "u", "2", "a", "b"],
    &["ZRANGE", "u", "0", "-1", "WITHSCORES"],
    &["ZINTERSTORE", "u", "2", "a", "nokey"],
    &["EXISTS", "u"],
    &["ZUNIONSTORE", "u", "0", "a"],
    &["ZINTERCARD", "2", "a", "b"],
    &["ZINTERCARD", "2", "a", "b", "LIMIT", "1"],
    &["ZINTERCARD", "2", "a", "b", "LIMIT", "0"],
    &["ZINTERCARD", "2", "a", "b", "LIMIT", "-1"],
    &["ZINTERCARD", "2", "a", "b", "LIMIT", "x"],
    &["ZINTERCARD", "2", "a", "b", "WITHSCORES"],
    &["ZINTERCARD", "0", "a"],
    &["ZINTERCARD", "1", "nokey"],
    // Random members.
    &["ZRANDMEMBER", "nokey"],
    &["ZRANDMEMBER", "nokey", "5"],
    &["ZRANDMEMBER", "a", "0"],
    &["ZRANDMEMBER", "a", "10"],
    &["ZRANDMEMBER", "a", "10", "WITHSCORES"],
    &["ZRANDMEMBER", "a", "x"],
    &["ZRANDMEMBER", "a", "1", "FOO"],
    &["ZRANDMEMBER", "a", "1", "WITHSCORES", "x"],
    &["ZRANDMEMBER", "a", "-9223372036854775808"],
    &["ZRANDMEMBER", "a", "9223372036854775807", "WITHSCORES"],
    &["ZRANDMEMBER", "a", "-4611686018427387904", "WITHSCORES"],
    // ZSCAN.
    &["ZSCAN", "a", "0"],
    &["ZSCAN", "a", "0", "MATCH", "x*"],
    &["ZSCAN", "a", "0", "COUNT", "0"],
    &["ZSCAN", "a", "0", "COUNT", "x"],
    &["ZSCAN", "a", "0", "FOO", "1"],
    &["ZSCAN", "a", "0", "MATCH"],
    &["ZSCAN", "a", "x"],
    &["ZSCAN", "a", "-1"],
    &["ZSCAN", "nokey", "0", "COUNT", "0"],
    &["ZSCAN", "nokey", "x"],
    // Wrong types.
    &["SET", "str", "v"],
    &["ZADD", "str", "1", "a"],
    &["ZADD", "str", "XX", "1", "a"],
    &["ZINCRBY", "str", "1", "a"],
    &["ZREM", "str", "a"],
    &["ZSCORE", "str", "a"],
    &["ZMSCORE", "str", "a"],
    &["ZCARD", "str"],
    &["ZCOUNT", "str", "0", "1"],
    &["ZCOUNT", "str", "x", "1"],
    &["ZLEXCOUNT", "str", "-", "+"],
    &["ZRANK", "str", "a"],
    &["ZRANGE", "str", "0", "-1"],
    &["ZRANGESTORE", "dst", "str", "0", "-1"],
    &["ZRANGESTORE", "str", "a", "0", "-1"],
    &["TYPE", "str"],
    &["SET", "str", "v"],
    &["ZPOPMIN", "str"],
    &["ZMPOP", "2", "nokey", "str", "MIN"],
    &["BZPOPMIN", "nokey", "str", "0"],
    &["BZMPOP", "0", "2", "nokey", "str", "MIN"],
    &["ZREMRANGEBYRANK", "str", "0", "1"],
    &["ZUNION", "2", "a", "str"],
    &["ZUNION", "2", "a", "str", "BADOPT"],
    &["ZUNIONSTORE", "dst", "2", "a", "str"],
    &["ZUNIONSTORE", "str", "1", "a"],
    &["TYPE", "str"],
    &["SET", "str", "v"],
    &["ZINTERCARD", "1", "str"],
    &["ZRANDMEMBER", "str"],
    &["ZRANDMEMBER", "str", "1"],
    &["ZSCAN", "str", "0"],
    // Arity.
    &["ZADD", "z", "1"],
    &["ZINCRBY", "z", "1"],
    &["ZREM", "z"],
    &["ZSCORE", "z"],
    &["ZCARD"],
    &["ZRANGE", "z", "0"],
    &["ZRANGESTORE", "d", "z", "0"],
    &["ZPOPMIN"],
    &["ZMPOP", "1", "z"],
    &["BZPOPMIN", "z"],
    &["BZMPOP", "0", "1", "z"],
    &["ZUNION", "1"],
    &["ZUNIONSTORE", "d", "1"],
    &["ZINTERCARD", "1"],
    &["ZRANDMEMBER"],
    &["ZSCAN", "z"],
];

#[test]
fn transcripts_match_redis_in_resp2_and_resp3() {
    let Some(mut servers) = Servers::start() else {
        return;
    };
    transcript(&mut servers, TRANSCRIPT);
    servers.run_str(&["FLUSHALL"], Mode::Exact);
    servers.both_ignore(&[b"HELLO", b"3"]);
    transcript(&mut servers, TRANSCRIPT);
    servers.assert_clean();
}

#[test]
fn encodings_convert_as_in_redis() {
    let Some(mut servers) = Servers::start() else {
        return;
    };
    let long = "x".repeat(65);
    let many: Vec<String> = (0..129)
        .flat_map(|i| [format!("{}", i % 7), format!("m{i:03}")])
        .collect();
    let mut zadd_many: Vec<&str> = vec!["ZADD", "many"];
    zadd_many.extend(many.iter().map(String::as_str));
    let mut zadd_128: Vec<&str> = vec!["ZADD", "n128"];
    zadd_128.extend(many[..256].iter().map(String::as_str));
    let script: Vec<Vec<&str>> = vec![
        zadd_128,
        vec!["OBJECT", "ENCODING", "n128"],
        vec!["ZADD", "n128", "1", "one-more"],
        vec!["OBJECT", "ENCODING", "n128"],
        zadd_many,
        vec!["OBJECT", "ENCODING", "many"],
        vec!["ZADD", "long", "1", "a"],
        vec!["ZADD", "long", "1", &long],
        vec!["OBJECT", "ENCODING", "long"],
        vec!["ZADD", "long2", "1", &long, "2", "b"],
        vec!["OBJECT", "ENCODING", "long2"],
        vec!["ZADD", "long3", "1", "a", "2", &long],
        vec!["OBJECT", "ENCODING", "long3"],
        vec!["ZREM", "long", &long],
        vec!["OBJECT", "ENCODING", "long"],
        vec!["ZREMRANGEBYRANK", "many", "0", "-3"],
        vec!["OBJECT", "ENCODING", "many"],
        vec!["ZRANGE", "many", "0", "-1", "WITHSCORES"],
        // Store results: small ones become listpacks, as in Redis.
        vec!["ZUNIONSTORE", "u", "1", "many"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZUNIONSTORE", "u", "1", "n128"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZUNIONSTORE", "u", "2", "n128", "many"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZUNIONSTORE", "u", "1", "long2"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZINTERSTORE", "u", "2", "n128", "n128"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZDIFFSTORE", "u", "2", "n128", "many"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZRANGESTORE", "rs", "n128", "0", "-1"],
        vec!["OBJECT", "ENCODING", "rs"],
        vec!["ZRANGESTORE", "rs", "n128", "0", "127"],
        vec!["OBJECT", "ENCODING", "rs"],
        vec!["ZRANGESTORE", "rs", "n128", "-inf", "+inf", "BYSCORE"],
        vec!["OBJECT", "ENCODING", "rs"],
        vec!["ZRANGESTORE", "rs", "long2", "0", "-1"],
        vec!["OBJECT", "ENCODING", "rs"],
        vec!["CONFIG", "SET", "zset-max-listpack-entries", "4"],
        vec!["CONFIG", "SET", "zset-max-listpack-value", "3"],
        vec!["ZADD", "small", "1", "a", "2", "b", "3", "c", "4", "d"],
        vec!["OBJECT", "ENCODING", "small"],
        vec!["ZADD", "small", "5", "e"],
        vec!["OBJECT", "ENCODING", "small"],
        vec!["ZADD", "small2", "1", "abcd"],
        vec!["OBJECT", "ENCODING", "small2"],
        vec!["ZINCRBY", "small3", "1", "abcd"],
        vec!["OBJECT", "ENCODING", "small3"],
        vec!["ZUNIONSTORE", "u", "1", "small"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZPOPMIN", "small"],
        vec!["ZUNIONSTORE", "u", "1", "small"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["CONFIG", "SET", "zset-max-listpack-entries", "0"],
        vec!["ZADD", "zero", "1", "a"],
        vec!["OBJECT", "ENCODING", "zero"],
        vec!["ZUNIONSTORE", "u", "1", "zero"],
        vec!["OBJECT", "ENCODING", "u"],
        vec!["ZRANGESTORE", "rs", "zero", "0", "-1"],
        vec!["OBJECT", "ENCODING", "rs"],
        // -0 kept by skiplists, including those a range store builds.
        vec!["ZADD", "negzero", "-0", "a", "-0", "b"],
        vec!["ZRANGESTORE", "rs", "negzero", "0", "-1"],
        vec!["ZSCORE", "rs", "a"],
        vec!["CONFIG", "SET", "zset-max-listpack-entries", "1"],
        vec!["CONFIG", "SET", "zset-max-listpack-value", "64"],
        vec!["ZRANGESTORE", "rs", "negzero", "0", "-1"],
        vec!["ZRANGE", "rs", "0", "-1", "WITHSCORES"],
        vec!["ZRANGESTORE", "rs", "negzero", "-inf", "+inf", "BYSCORE"],
        vec!["ZRANGE", "rs", "0", "-1", "WITHSCORES"],
        vec!["ZRANGESTORE", "rs", "negzero", "0", "0"],
        vec!["ZRANGE", "rs", "0", "-1", "WITHSCORES"],
        vec!["OBJECT", "ENCODING", "rs"],
        vec!["CONFIG", "SET", "zset-max-listpack-entries", "128"],
    ];
    for cmd in &script {
        servers.run_str(cmd, Mode::Exact);
    }
    servers.assert_clean();
}

/// SplitMix64: a small deterministic generator for the random stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const KEYS: &[&str] = &[
    "z1", "z2", "z3", "z1", "z2", "z3", "big", "big", "str", "nokey",
];
const SCORES: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1.5",
    "2.5",
    "3",
    "10",
    "-inf",
    "+inf",
    "inf",
    "1e3",
    "0.1",
    "0.2",
    "-2.75",
    "1e18",
    "4611686018427387904",
    "123456789.125",
    "1e-7",
];
const BAD_SCORES: &[&str] = &["abc", "nan", "1e400", "", "(1", " 1"];
const BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "1", "(1", "2.5", "(2.5", "10", "(10", "-1", "(-1", "abc", "(", "",
    "(inf", "1e400",
];
const LEX: &[&str] = &[
    "-", "+", "[m1", "(m1", "[m15", "(m2", "[m5", "(m9", "[", "(", "[n", "[m", "(m3",
];
const BAD_LEX: &[&str] = &["m1", "+x", "", "-a"];
const INTS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "-1",
    "-2",
    "-5",
    "10",
    "100",
    "-100",
    "x",
    "9223372036854775807",
];

fn member(rng: &mut Rng) -> String {
    match rng.below(40) {
        0 => String::new(),
        1 => "x".repeat(70),
        2 => format!("{}", rng.below(20) as i64 - 10),
        _ => format!("m{}", rng.below(30)),
    }
}

fn score(rng: &mut Rng) -> String {
    if rng.chance(30) {
        return format!("{}", rng.below(41) as i64 - 20);
    }
    if rng.chance(10) {
        return format!("{:.3}", (rng.below(20_000) as f64 - 10_000.0) / 7.0);
    }
    if rng.chance(3) {
        return rng.pick(BAD_SCORES).to_string();
    }
    rng.pick(SCORES).to_string()
}

fn lex_bound(rng: &mut Rng) -> &'static str {
    if rng.chance(4) {
        rng.pick(BAD_LEX)
    } else {
        rng.pick(LEX)
    }
}

/// One random command, whether it uses BYLEX-style ranges, and how to compare it.
fn random_command(rng: &mut Rng) -> (Vec<String>, bool, Mode) {
    let key = rng.pick(KEYS).to_string();
    let k2 = rng.pick(KEYS).to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let mut lex = false;
    let mut mode = Mode::Exact;
    let cmd: Vec<String> = match rng.below(34) {
        0..=5 => {
            let mut c = s(&["ZADD", &key]);
            let mut incr = false;
            for opt in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
                if rng.chance(if opt == "CH" { 15 } else { 7 }) {
                    incr |= opt == "INCR";
                    c.push(opt.to_string());
                }
            }
            let pairs = if rng.chance(3) {
                0
            } else if incr && rng.chance(90) {
                1
            } else {
                1 + rng.below(4)
            };
            for _ in 0..pairs {
                c.push(score(rng));
                c.push(member(rng));
            }
            if rng.chance(3) {
                c.push(score(rng));
            }
            c
        }
        6 => s(&["ZINCRBY", &key, &score(rng), &member(rng)]),
        7 => {
            let mut c = s(&["ZREM", &key]);
            for _ in 0..1 + rng.below(3) {
                c.push(member(rng));
            }
            c
        }
        8 => s(&["ZSCORE", &key, &member(rng)]),
        9 => s(&["ZMSCORE", &key, &member(rng), &member(rng)]),
        10 => s(&["ZCARD", &key]),
        11 => s(&["ZCOUNT", &key, rng.pick(BOUNDS), rng.pick(BOUNDS)]),
        12 => {
            lex = true;
            s(&["ZLEXCOUNT", &key, lex_bound(rng), lex_bound(rng)])
        }
        13 => s(&[
            if rng.chance(50) { "ZRANK" } else { "ZREVRANK" },
            &key,
            &member(rng),
        ]),
        14..=17 => {
            let by = rng.below(3);
            let mut c = match by {
                0 => s(&["ZRANGE", &key, rng.pick(INTS), rng.pick(INTS)]),
                1 => s(&[
                    "ZRANGE",
                    &key,
                    rng.pick(BOUNDS),
                    rng.pick(BOUNDS),
                    "BYSCORE",
                ]),
                _ => {
                    lex = true;
                    s(&["ZRANGE", &key, lex_bound(rng), lex_bound(rng), "BYLEX"])
                }
            };
            if rng.chance(40) {
                c.push("REV".into());
            }
            if (by == 0 && rng.chance(5)) || (by > 0 && rng.chance(50)) {
                c.extend(s(&["LIMIT", rng.pick(INTS), rng.pick(INTS)]));
            }
            if rng.chance(if by == 2 { 5 } else { 40 }) {
                c.push("WITHSCORES".into());
            }
            c
        }
        18 => {
            let name = rng.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]);
            let mut c = s(&[name, &key, rng.pick(BOUNDS), rng.pick(BOUNDS)]);
            if rng.chance(40) {
                c.push("WITHSCORES".into());
            }
            if rng.chance(40) {
                c.extend(s(&["LIMIT", rng.pick(INTS), rng.pick(INTS)]));
            }
            c
        }
        19 => {
            lex = true;
            let name = rng.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]);
            let mut c = s(&[name, &key, lex_bound(rng), lex_bound(rng)]);
            if rng.chance(40) {
                c.extend(s(&["LIMIT", rng.pick(INTS), rng.pick(INTS)]));
            }
            c
        }
        20 => {
            let mut c = s(&["ZREVRANGE", &key, rng.pick(INTS), rng.pick(INTS)]);
            if rng.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        21 => {
            let dst = rng.pick(KEYS);
            match rng.below(3) {
                0 => s(&["ZRANGESTORE", dst, &key, rng.pick(INTS), rng.pick(INTS)]),
                1 => {
                    let mut c = s(&[
                        "ZRANGESTORE",
                        dst,
                        &key,
                        rng.pick(BOUNDS),
                        rng.pick(BOUNDS),
                        "BYSCORE",
                    ]);
                    if rng.chance(50) {
                        c.extend(s(&["LIMIT", rng.pick(INTS), rng.pick(INTS)]));
                    }
                    c
                }
                _ => {
                    lex = true;
                    s(&[
                        "ZRANGESTORE",
                        dst,
                        &key,
                        lex_bound(rng),
                        lex_bound(rng),
                        "BYLEX",
                        "REV",
                    ])
                }
            }
        }
        22 => {
            let name = rng.pick(&["ZPOPMIN", "ZPOPMAX"]);
            if rng.chance(50) {
                s(&[name, &key])
            } else {
                s(&[name, &key, rng.pick(INTS)])
            }
        }
        23 => {
            let mut c = s(&[
                "ZMPOP",
                "2",
                &key,
                &k2,
                rng.pick(&["MIN", "MAX", "min", "foo"]),
            ]);
            if rng.chance(50) {
                c.extend(s(&["COUNT", rng.pick(INTS)]));
            }
            c
        }
        24 => {
            let name = rng.pick(&["BZPOPMIN", "BZPOPMAX"]);
            s(&[name, &key, &k2, rng.pick(&["0", "0.01", "1", "-1", "x"])])
        }
        25 => s(&[
            "BZMPOP",
            rng.pick(&["0", "0.5", "-1"]),
            "2",
            &key,
            &k2,
            rng.pick(&["MIN", "MAX"]),
            "COUNT",
            rng.pick(INTS),
        ]),
        26 => s(&["ZREMRANGEBYRANK", &key, rng.pick(INTS), rng.pick(INTS)]),
        27 => s(&["ZREMRANGEBYSCORE", &key, rng.pick(BOUNDS), rng.pick(BOUNDS)]),
        28 => {
            lex = true;
            s(&["ZREMRANGEBYLEX", &key, lex_bound(rng), lex_bound(rng)])
        }
        29 | 30 => {
            let op = rng.pick(&[
                "ZUNION",
                "ZINTER",
                "ZDIFF",
                "ZUNIONSTORE",
                "ZINTERSTORE",
                "ZDIFFSTORE",
                "ZINTERCARD",
            ]);
            let mut c = s(&[op]);
            if op.ends_with("STORE") {
                c.push(rng.pick(KEYS).to_string());
            }
            let n = 1 + rng.below(3);
            c.push(if rng.chance(3) {
                "0".into()
            } else {
                n.to_string()
            });
            for _ in 0..n {
                c.push(rng.pick(KEYS).to_string());
            }
            if rng.chance(30) {
                c.push("WEIGHTS".into());
                for _ in 0..n {
                    c.push(rng.pick(&["1", "2", "-1", "0", "0.5", "inf", "x"]).into());
                }
            }
            if rng.chance(30) {
                c.extend(s(&["AGGREGATE", rng.pick(&["SUM", "MIN", "MAX", "avg"])]));
            }
            if rng.chance(40) {
                c.push("WITHSCORES".into());
            }
            if op == "ZINTERCARD" && rng.chance(50) {
                c.extend(s(&["LIMIT", rng.pick(INTS)]));
            }
            c
        }
        31 => {
            mode = Mode::Shape;
            let mut c = s(&["ZRANDMEMBER", &key]);
            if rng.chance(70) {
                c.push(rng.pick(INTS).to_string());
                if rng.chance(50) {
                    c.push("WITHSCORES".into());
                }
            }
            c
        }
        32 => {
            mode = Mode::ScanPairs;
            let mut c = s(&["ZSCAN", &key, if rng.chance(5) { "x" } else { "0" }]);
            if rng.chance(30) {
                c.extend(s(&["MATCH", rng.pick(&["m1*", "*", "x*", "[m]2"])]));
            }
            c.extend(s(&["COUNT", if rng.chance(5) { "0" } else { "1000" }]));
            c
        }
        _ => match rng.below(6) {
            0 => s(&["OBJECT", "ENCODING", &key]),
            1 => s(&["DEL", &key]),
            2 => s(&["SET", "str", "v"]),
            3 => s(&["TYPE", &key]),
            4 => s(&["EXISTS", &key]),
            _ => s(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]),
        },
    };
    (cmd, lex, mode)
}

/// Whether Redis's answer to a BYLEX command on `key` is well defined: a listpack, or
/// a skiplist whose scores are all equal (a skiplist's lex walk over mixed scores
/// depends on its random levels).
fn lex_defined(servers: &mut Servers, key: &str) -> bool {
    if servers.ask_redis(&["OBJECT", "ENCODING", key]) != Value::Bulk(b"skiplist".to_vec()) {
        return true;
    }
    let first = servers.ask_redis(&["ZRANGE", key, "0", "0", "WITHSCORES"]);
    let last = servers.ask_redis(&["ZRANGE", key, "-1", "-1", "WITHSCORES"]);
    // [member, score] in RESP2, [[member, score]] in RESP3.
    let score = |v: &Value| match v {
        Value::Array(items) => match items.as_slice() {
            [Value::Array(pair)] => pair.get(1).cloned(),
            [_, score] => Some(score.clone()),
            _ => None,
        },
        _ => None,
    };
    score(&first) == score(&last)
}

/// Whether a blocking command would block (every key missing): the server-side wait is
/// not part of these tests.
fn would_block(servers: &mut Servers, cmd: &[String]) -> bool {
    let keys: Vec<&str> = match cmd[0].as_str() {
        "BZPOPMIN" | "BZPOPMAX" => cmd[1..cmd.len() - 1].iter().map(String::as_str).collect(),
        "BZMPOP" => cmd[3..5].iter().map(String::as_str).collect(),
        _ => return false,
    };
    let mut args = vec!["EXISTS"];
    args.extend(keys);
    servers.ask_redis(&args) == Value::Integer(0)
}

fn random_stream(seed: u64, resp3: bool, setup: &[&[&str]], commands: usize) {
    let Some(mut servers) = Servers::start() else {
        return;
    };
    if resp3 {
        servers.both_ignore(&[b"HELLO", b"3"]);
    }
    for cmd in setup {
        servers.run_str(cmd, Mode::Exact);
    }
    // A big set to start with, and refills now and then.
    let refill = |servers: &mut Servers, rng: &mut Rng| {
        let mut c: Vec<String> = vec!["ZADD".into(), "big".into()];
        let equal = rng.chance(50);
        for i in 0..150 + rng.below(100) {
            c.push(if equal {
                "0".into()
            } else {
                format!("{}", rng.below(50))
            });
            c.push(format!("m{i}"));
        }
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        servers.run_str(&args, Mode::Exact);
    };
    let mut rng = Rng(seed);
    refill(&mut servers, &mut rng);
    for _ in 0..commands {
        if rng.chance(2) {
            refill(&mut servers, &mut rng);
        }
        let (cmd, lex, mode) = random_command(&mut rng);
        if lex {
            let key = if cmd[0] == "ZRANGESTORE" {
                &cmd[2]
            } else {
                &cmd[1]
            };
            if !lex_defined(&mut servers, key) {
                continue;
            }
        }
        if would_block(&mut servers, &cmd) {
            continue;
        }
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        servers.run(&args, mode);
        if matches!(cmd[0].as_str(), "ZADD" | "ZUNIONSTORE" | "ZRANGESTORE") && rng.chance(30) {
            servers.run_str(&["OBJECT", "ENCODING", &cmd[1]], Mode::Exact);
        }
    }
    eprintln!(
        "seed {seed:#x}: {} commands, {} errors, {} empty replies",
        servers.sent, servers.errors, servers.empties
    );
    servers.assert_clean();
    // Most commands must do something: a stream of errors proves little.
    assert!(servers.errors * 4 < servers.sent, "too many errors");
}

#[test]
fn random_stream_matches_redis_resp2() {
    random_stream(0x5eed_0001, false, &[&["SET", "str", "v"]], 5000);
}

#[test]
fn random_stream_matches_redis_resp3() {
    random_stream(0x5eed_0002, true, &[&["SET", "str", "v"]], 5000);
}

#[test]
fn random_stream_matches_redis_small_listpacks() {
    random_stream(
        0x5eed_0003,
        false,
        &[
            &["SET", "str", "v"],
            &["CONFIG", "SET", "zset-max-listpack-entries", "5"],
            &["CONFIG", "SET", "zset-max-listpack-value", "3"],
        ],
        4000,
    );
}

#[test]
fn decode_helpers_agree() {
    let (v, _) = decode(b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n")
        .ok()
        .flatten()
        .expect("a whole reply");
    let (w, _) = decode(b"*2\r\n$1\r\n0\r\n*4\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n1\r\n")
        .ok()
        .flatten()
        .expect("a whole reply");
    assert_eq!(scan_pairs(&v), scan_pairs(&w));
    assert_eq!(shape(&v), "array 2");
}
