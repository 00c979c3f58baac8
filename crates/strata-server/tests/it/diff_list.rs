//! Lists against a real Redis: fixed transcripts and a seeded random command stream,
//! every reply compared byte for byte.
//!
//! Blocking commands are sent only when they cannot block (a key has data, or an
//! argument is invalid): parking clients is tested with the server's blocking support.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::support::{Proc, Raw, redis_available, redis_server, strata};

/// A real Redis and strata side by side, one connection to each.
struct Pair {
    _redis: Proc,
    _strata: Proc,
    r: Raw,
    s: Raw,
    /// A second connection to Redis, to look at its state without disturbing the
    /// compared connection.
    peek: Raw,
    mismatches: Vec<String>,
}

impl Pair {
    fn start() -> Option<Pair> {
        if !redis_available() {
            return None;
        }
        let redis = redis_server(&[]);
        let ours = strata(&[]);
        Some(Pair {
            r: redis.client(),
            s: ours.client(),
            peek: redis.client(),
            _redis: redis,
            _strata: ours,
            mismatches: Vec::new(),
        })
    }

    /// Sends `cmd` to both servers and records any difference between the replies;
    /// returns Redis's reply.
    fn run(&mut self, cmd: &[&[u8]]) -> Vec<u8> {
        self.r.send(cmd);
        self.s.send(cmd);
        let (_, want) = self.r.read();
        let (_, got) = self.s.read();
        // HELLO describes the server itself, so only its shape is comparable.
        let hello = cmd
            .first()
            .is_some_and(|c| c.eq_ignore_ascii_case(b"hello"));
        if want != got && !hello && self.mismatches.len() < 50 {
            let shown: Vec<String> = cmd
                .iter()
                .map(|a| {
                    let text = String::from_utf8_lossy(a);
                    if text.len() > 40 {
                        format!("{}...({} bytes)", &text[..20], a.len())
                    } else {
                        text.into_owned()
                    }
                })
                .collect();
            self.mismatches.push(format!(
                "{shown:?}\n  redis:  {:?}\n  strata: {:?}",
                clip(&want),
                clip(&got)
            ));
        }
        want
    }

    fn script(&mut self, script: &[&[&str]]) {
        for cmd in script {
            let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
            self.run(&args);
        }
    }

    fn finish(self) {
        assert!(
            self.mismatches.is_empty(),
            "{} mismatches:\n{}",
            self.mismatches.len(),
            self.mismatches.join("\n")
        );
    }
}

fn clip(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    if text.len() > 300 {
        format!("{}... ({} bytes)", &text[..300], reply.len())
    } else {
        text.into_owned()
    }
}

const MIN: &str = "-9223372036854775808";
const MAX: &str = "9223372036854775807";

#[test]
fn list_command_info_matches_redis() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &[
            "COMMAND", "INFO", "lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "llen",
            "lrange", "lindex", "lset", "linsert", "lrem", "ltrim", "lpos",
        ],
        &[
            "COMMAND",
            "INFO",
            "lmove",
            "rpoplpush",
            "lmpop",
            "blpop",
            "brpop",
            "blmove",
            "brpoplpush",
            "blmpop",
        ],
        &["COMMAND", "GETKEYS", "LMPOP", "2", "a", "b", "LEFT"],
        &[
            "COMMAND", "GETKEYS", "BLMPOP", "0", "3", "a", "b", "c", "RIGHT", "COUNT", "2",
        ],
        &["COMMAND", "GETKEYS", "BLPOP", "a", "b", "c", "0"],
        &["COMMAND", "GETKEYS", "LMOVE", "a", "b", "LEFT", "RIGHT"],
    ]);
    p.finish();
}

#[test]
fn push_pop_and_reply_shapes() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &["LPUSH", "l", "a"],
        &["LPUSH", "l", "b", "c", "d"],
        &["RPUSH", "l", "e", "f"],
        &["LRANGE", "l", "0", "-1"],
        &["LPUSHX", "nokey", "a"],
        &["RPUSHX", "nokey", "a", "b"],
        &["EXISTS", "nokey"],
        &["LPUSHX", "l", "x", "y"],
        &["RPUSHX", "l", "z"],
        &["LLEN", "l"],
        &["LLEN", "nokey"],
        &["TYPE", "l"],
        &["OBJECT", "ENCODING", "l"],
        &["LPOP", "l"],
        &["RPOP", "l"],
        &["LPOP", "l", "2"],
        &["RPOP", "l", "2"],
        &["LPOP", "l", "0"],
        &["RPOP", "l", "0"],
        &["LPOP", "l", "-1"],
        &["LPOP", "l", "abc"],
        &["LPOP", "l", "1", "2"],
        &["LPOP", "nokey"],
        &["LPOP", "nokey", "1"],
        &["LPOP", "nokey", "0"],
        &["LPOP", "nokey", "-1"],
        &["RPOP", "l", MAX],
        &["EXISTS", "l"],
        &["RPUSH", "l", "a"],
        &["LPOP", "l"],
        &["EXISTS", "l"],
        &["LPUSH"],
        &["LPUSH", "l"],
        &["LPOP"],
        &["SET", "s", "string"],
        &["LPUSH", "s", "a"],
        &["RPUSHX", "s", "a"],
        &["LPOP", "s"],
        &["LPOP", "s", "0"],
        &["LPOP", "s", "x"],
        &["LLEN", "s"],
        &[
            "RPUSH",
            "n",
            "1",
            "-1",
            "100",
            "007",
            "",
            "9223372036854775808",
            "1.5",
        ],
        &["LRANGE", "n", "0", "-1"],
        &["OBJECT", "ENCODING", "n"],
        &["RPOP", "n", "3"],
        &["LPOP", "n", "100"],
        &["EXISTS", "n"],
    ]);
    p.finish();
}

#[test]
fn indexes_ranges_and_edits() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &["RPUSH", "l", "a", "b", "c", "d", "e", "a", "b", "a"],
        &["LRANGE", "l", "0", "-1"],
        &["LRANGE", "l", "-3", "-1"],
        &["LRANGE", "l", "-100", "100"],
        &["LRANGE", "l", "5", "2"],
        &["LRANGE", "l", "8", "10"],
        &["LRANGE", "l", "-1", "-2"],
        &["LRANGE", "l", MIN, MAX],
        &["LRANGE", "l", MAX, MIN],
        &["LRANGE", "l", "0", "abc"],
        &["LRANGE", "l", "1.5", "2"],
        &["LRANGE", "nokey", "0", "-1"],
        &["LRANGE", "nokey", "x", "-1"],
        &["LRANGE", "s", "0", "-1"],
        &["LINDEX", "l", "0"],
        &["LINDEX", "l", "-1"],
        &["LINDEX", "l", "7"],
        &["LINDEX", "l", "8"],
        &["LINDEX", "l", "-9"],
        &["LINDEX", "l", MIN],
        &["LINDEX", "l", "abc"],
        &["LINDEX", "nokey", "abc"],
        &["LSET", "l", "0", "A"],
        &["LSET", "l", "-1", "Z"],
        &["LSET", "l", "8", "x"],
        &["LSET", "l", "-9", "x"],
        &["LSET", "l", "abc", "x"],
        &["LSET", "nokey", "0", "x"],
        &["LSET", "nokey", "abc", "x"],
        &["LRANGE", "l", "0", "-1"],
        &["LINSERT", "l", "BEFORE", "b", "X"],
        &["LINSERT", "l", "after", "b", "Y"],
        &["LINSERT", "l", "AFTER", "Z", "end"],
        &["LINSERT", "l", "BEFORE", "nothere", "x"],
        &["LINSERT", "l", "MIDDLE", "b", "x"],
        &["LINSERT", "nokey", "BEFORE", "b", "x"],
        &["LINSERT", "nokey", "MIDDLE", "b", "x"],
        &["LRANGE", "l", "0", "-1"],
        &["LREM", "l", "1", "b"],
        &["LREM", "l", "-1", "a"],
        &["LREM", "l", "0", "nothere"],
        &["LREM", "l", "abc", "a"],
        &["LREM", "nokey", "0", "a"],
        &["LRANGE", "l", "0", "-1"],
        &["RPUSH", "r", "x", "y", "x", "y", "x", "y", "x"],
        &["LREM", "r", "-2", "x"],
        &["LRANGE", "r", "0", "-1"],
        &["LREM", "r", MIN, "y"],
        &["LRANGE", "r", "0", "-1"],
        &["LREM", "r", "0", "x"],
        &["EXISTS", "r"],
        &["LTRIM", "l", "1", "-2"],
        &["LRANGE", "l", "0", "-1"],
        &["LTRIM", "l", "-100", "100"],
        &["LTRIM", "l", "2", "1"],
        &["EXISTS", "l"],
        &["LTRIM", "nokey", "0", "1"],
        &["LTRIM", "nokey", "a", "1"],
        &["SET", "s", "x"],
        &["LTRIM", "s", "0", "1"],
        &["LREM", "s", "0", "x"],
        &["LINSERT", "s", "BEFORE", "x", "y"],
        &["LSET", "s", "0", "x"],
        &["LINDEX", "s", "abc"],
        &["RPUSH", "t", "a", "b", "c"],
        &["LTRIM", "t", "5", "10"],
        &["EXISTS", "t"],
        &["RPUSH", "t", "a", "b", "c"],
        &["LTRIM", "t", "0", "0"],
        &["LRANGE", "t", "0", "-1"],
    ]);
    p.finish();
}

#[test]
fn lpos_options() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &["RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c", "a"],
        &["LPOS", "l", "c"],
        &["LPOS", "l", "c", "RANK", "2"],
        &["LPOS", "l", "c", "RANK", "-1"],
        &["LPOS", "l", "c", "RANK", "-3"],
        &["LPOS", "l", "c", "RANK", "4"],
        &["LPOS", "l", "c", "RANK", "0"],
        &["LPOS", "l", "c", "RANK", MIN],
        &["LPOS", "l", "c", "RANK", MAX],
        &["LPOS", "l", "c", "RANK", "x"],
        &["LPOS", "l", "c", "COUNT", "0"],
        &["LPOS", "l", "c", "COUNT", "2"],
        &["LPOS", "l", "c", "COUNT", "2", "RANK", "2"],
        &["LPOS", "l", "c", "COUNT", "0", "RANK", "-1"],
        &["LPOS", "l", "c", "COUNT", "1", "RANK", MIN],
        &["LPOS", "l", "c", "COUNT", "-1"],
        &["LPOS", "l", "c", "COUNT", "x"],
        &["LPOS", "l", "c", "MAXLEN", "3"],
        &["LPOS", "l", "c", "MAXLEN", "2"],
        &["LPOS", "l", "c", "MAXLEN", "2", "COUNT", "0"],
        &["LPOS", "l", "c", "MAXLEN", "3", "RANK", "-1", "COUNT", "0"],
        &["LPOS", "l", "c", "MAXLEN", "-1"],
        &["LPOS", "l", "c", "MAXLEN", "0"],
        &["LPOS", "l", "zz"],
        &["LPOS", "l", "zz", "COUNT", "0"],
        &["LPOS", "l", "c", "RANK"],
        &["LPOS", "l", "c", "FOO", "1"],
        &["LPOS", "l", "c", "rank", "1", "count", "1", "maxlen", "1"],
        &["LPOS", "nokey", "c"],
        &["LPOS", "nokey", "c", "COUNT", "0"],
        &["LPOS", "nokey", "c", "RANK", "0"],
        &["SET", "s", "x"],
        &["LPOS", "s", "c"],
        &["LPOS", "s", "c", "COUNT", "-1"],
        &["LPOS", "l"],
    ]);
    p.finish();
}

#[test]
fn moves_and_multi_pops() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &["RPUSH", "a", "1", "2", "3"],
        &["LMOVE", "a", "b", "LEFT", "RIGHT"],
        &["LMOVE", "a", "b", "right", "left"],
        &["LRANGE", "b", "0", "-1"],
        &["LMOVE", "a", "a", "LEFT", "RIGHT"],
        &["LMOVE", "a", "a", "LEFT", "LEFT"],
        &["LRANGE", "a", "0", "-1"],
        &["LMOVE", "a", "b", "UP", "LEFT"],
        &["LMOVE", "a", "b", "LEFT", "DOWN"],
        &["LMOVE", "nokey", "b", "LEFT", "LEFT"],
        &["LMOVE", "nokey", "b", "X", "LEFT"],
        &["SET", "s", "x"],
        &["LMOVE", "a", "s", "LEFT", "LEFT"],
        &["LRANGE", "a", "0", "-1"],
        &["LMOVE", "s", "a", "LEFT", "LEFT"],
        &["LMOVE", "nokey", "s", "LEFT", "LEFT"],
        &["RPOPLPUSH", "a", "c"],
        &["EXISTS", "a"],
        &["RPOPLPUSH", "a", "c"],
        &["RPOPLPUSH", "c", "c"],
        &["RPOPLPUSH", "c", "s"],
        &["RPOPLPUSH", "s", "c"],
        &["LRANGE", "c", "0", "-1"],
        &["RPUSH", "m1", "a", "b", "c"],
        &["RPUSH", "m2", "x"],
        &["LMPOP", "2", "nokey", "m1", "LEFT"],
        &["LMPOP", "2", "nokey", "m1", "RIGHT", "COUNT", "10"],
        &["EXISTS", "m1"],
        &["LMPOP", "3", "nokey", "m1", "m2", "LEFT", "COUNT", "2"],
        &["LMPOP", "2", "nokey", "m1", "LEFT"],
        &["LMPOP", "1", "s", "LEFT"],
        &["LMPOP", "2", "nokey", "s", "LEFT"],
        &["LMPOP", "0", "a", "LEFT"],
        &["LMPOP", "-1", "a", "LEFT"],
        &["LMPOP", "x", "a", "LEFT"],
        &["LMPOP", "2", "a", "LEFT"],
        &["LMPOP", "1", "a", "MIDDLE"],
        &["LMPOP", "1", "a", "LEFT", "COUNT"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "0"],
        &["LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "1"],
        &["LMPOP", "1", "a", "LEFT", "FOO", "1"],
        &["LMPOP", MAX, "a", "LEFT"],
        &["LMPOP", "1", "a"],
    ]);
    p.finish();
}

#[test]
fn blocking_commands_with_data_or_bad_arguments() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &["RPUSH", "a", "1", "2", "3"],
        &["RPUSH", "b", "x"],
        &["BLPOP", "nokey", "a", "0"],
        &["BRPOP", "nokey", "a", "b", "0.5"],
        &["BLPOP", "b", "a", "0"],
        &["EXISTS", "b"],
        &["BLPOP", "nokey", "-1"],
        &["BLPOP", "nokey", "abc"],
        &["BLPOP", "a", "inf"],
        &["BLPOP", "a", "1e400"],
        &["BRPOP", "a", "nan"],
        &["SET", "s", "x"],
        &["BLPOP", "nokey", "s", "a", "0"],
        &["BLPOP", "a", "s", "0"],
        &["BLPOP", "a"],
        &["RPUSH", "a", "4", "5"],
        &["BLMOVE", "a", "d", "LEFT", "RIGHT", "0"],
        &["BLMOVE", "a", "d", "RIGHT", "LEFT", "0.1"],
        &["BLMOVE", "a", "d", "LEFT", "RIGHT", "-1"],
        &["BLMOVE", "a", "d", "NONE", "RIGHT", "-1"],
        &["BLMOVE", "nokey", "d", "LEFT", "RIGHT", "x"],
        &["BLMOVE", "s", "d", "LEFT", "RIGHT", "0"],
        &["BLMOVE", "d", "s", "LEFT", "RIGHT", "0"],
        &["BRPOPLPUSH", "d", "a", "0"],
        &["BRPOPLPUSH", "d", "d", "0"],
        &["BRPOPLPUSH", "nokey", "d", "-0.5"],
        &["BRPOPLPUSH", "s", "d", "0"],
        &["LRANGE", "a", "0", "-1"],
        &["LRANGE", "d", "0", "-1"],
        &["RPUSH", "m", "1", "2", "3", "4"],
        &["BLMPOP", "0", "2", "nokey", "m", "LEFT", "COUNT", "3"],
        &["BLMPOP", "0", "1", "m", "RIGHT"],
        &["BLMPOP", "-1", "1", "m", "RIGHT"],
        &["BLMPOP", "x", "1", "m", "RIGHT"],
        &["BLMPOP", "x", "0", "m", "RIGHT"],
        &["BLMPOP", "0", "1", "m", "UP"],
        &["BLMPOP", "0", "1", "m", "LEFT", "COUNT", "0"],
        &["BLMPOP", "0", "2", "nokey", "s", "LEFT"],
        &["BLMPOP", "0", "1", "m"],
        &["EXISTS", "m"],
    ]);
    p.finish();
}

#[test]
fn resp3_replies() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &["HELLO", "3"],
        &["LPOP", "nokey"],
        &["LPOP", "nokey", "1"],
        &["LPOP", "nokey", "0"],
        &["RPUSH", "l", "a", "b", "c"],
        &["LPOP", "l", "0"],
        &["LPOP", "l", "2"],
        &["LINDEX", "l", "5"],
        &["LPOS", "l", "x"],
        &["LPOS", "nokey", "x"],
        &["LRANGE", "nokey", "0", "-1"],
        &["LMOVE", "nokey", "x", "LEFT", "LEFT"],
        &["LMPOP", "1", "nokey", "LEFT"],
        &["LMPOP", "1", "l", "LEFT"],
        &["RPUSH", "l", "a"],
        &["BLPOP", "l", "0"],
        &["RPUSH", "l", "a"],
        &["BLMPOP", "0", "1", "l", "LEFT"],
        &["BLPOP", "nokey", "-1"],
    ]);
    p.finish();
}

#[test]
fn ttls_and_generic_key_commands() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    p.script(&[
        &["RPUSH", "l", "a", "b"],
        &["EXPIRE", "l", "100"],
        &["LPUSH", "l", "c"],
        &["LSET", "l", "0", "C"],
        &["LINSERT", "l", "AFTER", "C", "x"],
        &["LREM", "l", "1", "x"],
        &["LTRIM", "l", "0", "-1"],
        &["TTL", "l"],
        &["RPUSH", "d", "x"],
        &["EXPIRE", "d", "50"],
        &["LMOVE", "l", "d", "LEFT", "RIGHT"],
        &["TTL", "l"],
        &["TTL", "d"],
        &["LPOP", "l", "10"],
        &["TTL", "l"],
        &["RPUSH", "l", "z"],
        &["TTL", "l"],
        &["RENAME", "d", "l2"],
        &["LRANGE", "l2", "0", "-1"],
        &["TTL", "l2"],
        &["COPY", "l2", "l3"],
        &["LRANGE", "l3", "0", "-1"],
        &["OBJECT", "ENCODING", "l3"],
        &["TYPE", "l3"],
        &["DEL", "l", "l2"],
        &["SCAN", "0", "TYPE", "list"],
        &["SCAN", "0", "TYPE", "string"],
        &["SET", "l3", "now a string"],
        &["TYPE", "l3"],
        &["LLEN", "l3"],
        &["RPUSH", "l3", "x"],
        &["DEL", "l3"],
        &["RPUSH", "l3", "x", "y"],
        &["PEXPIRE", "l3", "1"],
    ]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    // An expired list is no list: it reads as missing and a push starts a new one.
    p.script(&[
        &["LLEN", "l3"],
        &["RPUSHX", "l3", "x"],
        &["RPUSH", "l3", "z"],
        &["LRANGE", "l3", "0", "-1"],
        &["TTL", "l3"],
    ]);
    p.finish();
}

/// Long lists with small nodes, and elements larger than a node.
#[test]
fn long_lists_and_big_elements() {
    let Some(mut p) = Pair::start() else {
        return;
    };
    let big = "x".repeat(20_000);
    let huge = "y".repeat(100_000);
    for size in ["-2", "3", "-1", "1", "0"] {
        p.script(&[
            &["CONFIG", "SET", "list-max-listpack-size", size],
            &["DEL", "l"],
        ]);
        let mut push: Vec<String> = vec!["RPUSH".into(), "l".into()];
        push.extend((0..3000).map(|i| format!("e{}", i % 97)));
        let args: Vec<&[u8]> = push.iter().map(|a| a.as_bytes()).collect();
        p.run(&args);
        p.script(&[
            &["LPUSH", "l", &big, "front"],
            &["RPUSH", "l", &huge, "back"],
            &["LINSERT", "l", "BEFORE", "e50", &big],
            &["LINSERT", "l", "AFTER", "e50", &huge],
            &["LSET", "l", "1500", &big],
            &["LSET", "l", "1501", "small"],
            &["LSET", "l", "0", "tiny"],
            &["LLEN", "l"],
            &["LINDEX", "l", "1500"],
            &["LINDEX", "l", "-1500"],
            &["LRANGE", "l", "1495", "1505"],
            &["LRANGE", "l", "-10", "-1"],
            &["LPOS", "l", "e3", "RANK", "-5", "COUNT", "3"],
            &["LPOS", "l", &big, "COUNT", "0"],
            &["LREM", "l", "5", "e7"],
            &["LREM", "l", "-5", "e8"],
            &["LREM", "l", "0", "e9"],
            &["LREM", "l", "0", &big],
            &["LTRIM", "l", "100", "-100"],
            &["LPOP", "l", "250"],
            &["RPOP", "l", "250"],
            &["LLEN", "l"],
            &["OBJECT", "ENCODING", "l"],
            &["LRANGE", "l", "0", "-1"],
        ]);
    }
    p.finish();
}

/// Random commands, valid and invalid, over a few keys.
struct Gen {
    rng: StdRng,
}

const KEYS: &[&str] = &["l1", "l2", "l3", "big", "s", "nokey"];

impl Gen {
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.rng.random_range(0..items.len())]
    }

    fn key(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..30 => "l1",
            30..50 => "l2",
            50..60 => "l3",
            60..77 => "big",
            77..83 => "s",
            _ => "nokey",
        }
        .to_string()
    }

    fn element(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..60 => self.pick(&["a", "b", "c", "a", "d"]).to_string(),
            60..75 => self.pick(&["", "1", "-1", "100", "007", "x y"]).to_string(),
            75..90 => format!("e{}", self.rng.random_range(0..97)),
            90..97 => "m".repeat(self.rng.random_range(50..300)),
            _ => "h".repeat(self.rng.random_range(5000..12000)),
        }
    }

    fn index(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..70 => self.rng.random_range(-12i64..12).to_string(),
            70..85 => self.rng.random_range(-3000i64..3000).to_string(),
            85..95 => self
                .pick(&["0", "-1", MIN, MAX, "-100", "100", "2999", "-3000"])
                .to_string(),
            _ => self.pick(&["abc", "1.5", "+1", "01", ""]).to_string(),
        }
    }

    fn count(&mut self) -> String {
        match self.rng.random_range(0..100) {
            0..70 => self.rng.random_range(0..6).to_string(),
            70..85 => self.pick(&["10", "100", "5000", MAX]).to_string(),
            _ => self.pick(&["-1", "abc", MIN, "1.0"]).to_string(),
        }
    }

    fn end(&mut self) -> String {
        if self.rng.random_ratio(1, 30) {
            return "UP".to_string();
        }
        self.pick(&["LEFT", "RIGHT", "left", "Right"]).to_string()
    }

    fn timeout(&mut self) -> String {
        self.pick(&["0", "0.01", "1", "-1", "abc"]).to_string()
    }

    fn elements(&mut self, max: usize) -> Vec<String> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.element()).collect()
    }

    fn mpop_args(&mut self) -> Vec<String> {
        let n = self.rng.random_range(1..4);
        let mut args = vec![match self.rng.random_range(0..20) {
            0 => "0".to_string(),
            1 => "x".to_string(),
            2 => (n + 1).to_string(),
            _ => n.to_string(),
        }];
        args.extend((0..n).map(|_| self.key()));
        args.push(self.end());
        match self.rng.random_range(0..10) {
            0..4 => {}
            4..9 => args.extend(["COUNT".to_string(), self.count()]),
            _ => args.push("COUNT".to_string()),
        }
        args
    }

    fn command(&mut self) -> Vec<String> {
        let mut cmd: Vec<String> = match self.rng.random_range(0..100) {
            0..10 => [vec!["LPUSH".into(), self.key()], self.elements(4)].concat(),
            10..20 => [vec!["RPUSH".into(), self.key()], self.elements(4)].concat(),
            20..23 => [vec!["LPUSHX".into(), self.key()], self.elements(2)].concat(),
            23..26 => [vec!["RPUSHX".into(), self.key()], self.elements(2)].concat(),
            26..32 => {
                let name = self.pick(&["LPOP", "RPOP"]).to_string();
                let mut c = vec![name, self.key()];
                if self.rng.random_bool(0.5) {
                    c.push(self.count());
                }
                c
            }
            32..35 => vec!["LLEN".into(), self.key()],
            35..42 => vec!["LRANGE".into(), self.key(), self.index(), self.index()],
            42..47 => vec!["LINDEX".into(), self.key(), self.index()],
            47..52 => vec!["LSET".into(), self.key(), self.index(), self.element()],
            52..57 => vec![
                "LINSERT".into(),
                self.key(),
                if self.rng.random_ratio(1, 20) {
                    "NEAR".to_string()
                } else {
                    self.pick(&["BEFORE", "AFTER", "after", "Before"])
                        .to_string()
                },
                self.element(),
                self.element(),
            ],
            57..62 => vec![
                "LREM".into(),
                self.key(),
                self.pick(&["0", "1", "-1", "2", "-2", "5", "x", MIN])
                    .to_string(),
                self.element(),
            ],
            62..64 => vec!["LTRIM".into(), self.key(), self.index(), self.index()],
            64..70 => {
                let mut c = vec!["LPOS".into(), self.key(), self.element()];
                for _ in 0..self.rng.random_range(0..3) {
                    match self.rng.random_range(0..10) {
                        0..4 => c.extend([
                            "RANK".into(),
                            self.pick(&["1", "2", "-1", "-2", "0", "3", MIN, "x"])
                                .to_string(),
                        ]),
                        4..7 => c.extend(["COUNT".into(), self.count()]),
                        7..9 => c.extend(["MAXLEN".into(), self.count()]),
                        _ => c.push(self.pick(&["RANK", "FOO"]).to_string()),
                    }
                }
                c
            }
            70..76 => vec![
                "LMOVE".into(),
                self.key(),
                self.key(),
                self.end(),
                self.end(),
            ],
            76..79 => vec!["RPOPLPUSH".into(), self.key(), self.key()],
            79..84 => [vec!["LMPOP".to_string()], self.mpop_args()].concat(),
            84..87 => {
                let name = self.pick(&["BLPOP", "BRPOP"]).to_string();
                let n = self.rng.random_range(1..4);
                let mut c = vec![name];
                c.extend((0..n).map(|_| self.key()));
                c.push(self.timeout());
                c
            }
            87..89 => vec![
                "BLMOVE".into(),
                self.key(),
                self.key(),
                self.end(),
                self.end(),
                self.timeout(),
            ],
            89..90 => vec!["BRPOPLPUSH".into(), self.key(), self.key(), self.timeout()],
            90..92 => [vec!["BLMPOP".to_string(), self.timeout()], self.mpop_args()].concat(),
            // Strings mostly go to one key, so that most commands meet lists.
            92..94 => {
                let key = if self.rng.random_ratio(1, 8) {
                    self.key()
                } else {
                    "s".to_string()
                };
                vec!["SET".into(), key, self.element()]
            }
            94..95 => vec!["DEL".into(), self.key()],
            95..97 => vec![
                self.pick(&["TYPE", "EXISTS", "LLEN"]).to_string(),
                self.key(),
            ],
            97..98 => vec!["OBJECT".into(), "ENCODING".into(), self.key()],
            _ => vec![
                self.pick(&["RENAME", "COPY"]).to_string(),
                self.key(),
                self.key(),
            ],
        };
        // Now and then, too few or too many arguments.
        match self.rng.random_range(0..100) {
            0 => {
                cmd.pop();
            }
            1 => cmd.push(self.element()),
            _ => {}
        }
        cmd
    }
}

/// The keys a blocking command would wait on, if it is one.
fn blocking_keys(cmd: &[String]) -> Option<Vec<String>> {
    let name = cmd.first()?.to_ascii_uppercase();
    match name.as_str() {
        "BLPOP" | "BRPOP" if cmd.len() >= 3 => Some(cmd[1..cmd.len() - 1].to_vec()),
        "BLMOVE" | "BRPOPLPUSH" if cmd.len() >= 3 => Some(vec![cmd[1].clone()]),
        "BLMPOP" if cmd.len() >= 4 => Some(cmd[3..].to_vec()),
        _ => None,
    }
}

/// Makes sure a blocking command cannot block: if none of its keys exists (in Redis,
/// the reference), its timeout becomes invalid so that both servers reply at once.
fn unblock(peek: &mut Raw, cmd: &mut [String]) {
    let Some(keys) = blocking_keys(cmd) else {
        return;
    };
    let any = keys.iter().any(|k| {
        peek.send(&[b"EXISTS", k.as_bytes()]);
        peek.read().1 == b":1\r\n"
    });
    if any {
        return;
    }
    let at = match cmd[0].to_ascii_uppercase().as_str() {
        "BLMPOP" => 1,
        _ => cmd.len() - 1,
    };
    cmd[at] = "-1".to_string();
}

fn random_stream(seed: u64, steps: usize, node_size: &str) {
    let Some(mut p) = Pair::start() else {
        return;
    };
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
    };
    p.script(&[&["CONFIG", "SET", "list-max-listpack-size", node_size]]);
    let mut big: Vec<String> = vec!["RPUSH".into(), "big".into()];
    big.extend((0..3000).map(|i| format!("e{}", i % 97)));
    let args: Vec<&[u8]> = big.iter().map(|a| a.as_bytes()).collect();
    p.run(&args);
    for step in 0..steps {
        if step == steps / 2 {
            p.script(&[&["HELLO", "3"]]);
        }
        let mut cmd = g.command();
        unblock(&mut p.peek, &mut cmd);
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        p.run(&args);
        if step % 100 == 99 {
            for key in KEYS {
                p.script(&[&["LRANGE", key, "0", "-1"], &["TYPE", key]]);
            }
        }
        if !p.mismatches.is_empty() {
            p.mismatches
                .push(format!("(seed {seed}, node size {node_size}, step {step})"));
            break;
        }
    }
    for key in KEYS {
        p.script(&[&["LRANGE", key, "0", "-1"]]);
    }
    p.finish();
}

#[test]
fn random_stream_default_nodes() {
    random_stream(0x5eed_0001, 4000, "-2");
}

#[test]
fn random_stream_tiny_nodes() {
    random_stream(0x5eed_0002, 4000, "2");
}

#[test]
fn random_stream_byte_limited_nodes() {
    random_stream(0x5eed_0003, 4000, "-1");
}

#[test]
fn random_stream_single_entry_nodes() {
    random_stream(0x5eed_0004, 4000, "1");
}
