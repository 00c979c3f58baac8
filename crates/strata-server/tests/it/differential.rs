//! Differential tests: the same commands to a real Redis and to strata; every reply
//! must be byte-for-byte identical.

use crate::support::{Raw, redis_available, redis_server, strata};

/// Sends each command to both servers and compares the raw replies.
pub fn compare(script: &[&[&str]]) {
    if !redis_available() {
        return;
    }
    let redis = redis_server(&[]);
    let ours = strata(&[]);
    let (mut r, mut s) = (redis.client(), ours.client());
    let mut mismatches = Vec::new();
    for cmd in script {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        r.send(&args);
        s.send(&args);
        let (_, want) = r.read();
        let (_, got) = s.read();
        if want != got {
            mismatches.push(format!(
                "{cmd:?}\n  redis:  {:?}\n  strata: {:?}",
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&got)
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

fn _unused(_: Raw) {}

#[test]
fn string_commands_match_redis() {
    compare(&[
        &["SET", "s", "hello"],
        &["GET", "s"],
        &["SET", "s", "v", "NX"],
        &["SET", "s", "v2", "XX", "GET"],
        &["SET", "s", "v", "EX", "10", "PX", "100"],
        &["SET", "s", "v", "EX", "0"],
        &["SET", "s", "v", "EX", "abc"],
        &["SET", "s", "v", "KEEPTTL", "EX", "5"],
        &["SET", "s", "v", "NX", "XX"],
        &["SETNX", "s", "x"],
        &["SETEX", "e", "0", "v"],
        &["PSETEX", "e", "-5", "v"],
        &["GETSET", "s", "new"],
        &["GETDEL", "s"],
        &["GETDEL", "s"],
        &["MSET", "a", "1", "b"],
        &["MSET", "a", "1", "b", "2"],
        &["MSETNX", "a", "1", "c", "3"],
        &["MGET", "a", "b", "c"],
        &["INCR", "a"],
        &["INCRBY", "a", "-10"],
        &["INCRBY", "a", "010"],
        &["DECRBY", "a", "-9223372036854775808"],
        &["SET", "big", "9223372036854775807"],
        &["INCR", "big"],
        &["INCRBYFLOAT", "f", "10.5"],
        &["INCRBYFLOAT", "f", "0.1"],
        &["INCRBYFLOAT", "f", "abc"],
        &["INCRBYFLOAT", "f", "inf"],
        &["APPEND", "ap", "abc"],
        &["APPEND", "ap", "def"],
        &["STRLEN", "ap"],
        &["GETRANGE", "ap", "1", "-2"],
        &["GETRANGE", "ap", "-100", "100"],
        &["GETRANGE", "ap", "5", "1"],
        &["SUBSTR", "ap", "0", "0"],
        &["SETRANGE", "ap", "10", "xyz"],
        &["GET", "ap"],
        &["SETRANGE", "ap", "-1", "x"],
        &["SETRANGE", "nokey", "0", ""],
        &["OBJECT", "ENCODING", "ap"],
        &["OBJECT", "ENCODING", "a"],
        &["OBJECT", "ENCODING", "f"],
        &["SET", "l1", "ohmytext"],
        &["SET", "l2", "mynewtext"],
        &["LCS", "l1", "l2"],
        &["LCS", "l1", "l2", "LEN"],
        &["LCS", "l1", "l2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
        &["LCS", "l1", "l2", "IDX", "LEN"],
        &["GETEX", "l1", "PX", "100000"],
        &["GETEX", "l1", "PERSIST"],
        &["TTL", "l1"],
        &["GET"],
        &["GET", "a", "b"],
    ]);
}

#[test]
fn key_commands_match_redis() {
    compare(&[
        &["MSET", "k1", "a", "k2", "b", "k3", "c"],
        &["EXISTS", "k1", "k1", "nokey"],
        &["DEL", "k1", "nokey"],
        &["TYPE", "k2"],
        &["TYPE", "nokey"],
        &["RENAME", "nokey", "x"],
        &["RENAME", "k2", "k2"],
        &["RENAME", "k2", "k4"],
        &["RENAMENX", "k4", "k3"],
        &["COPY", "k3", "k5"],
        &["COPY", "k3", "k5"],
        &["COPY", "k3", "k5", "REPLACE"],
        &["COPY", "k3", "k3"],
        &["COPY", "k3", "k6", "DB", "99"],
        &["MOVE", "k3", "1"],
        &["MOVE", "k5", "0"],
        &["EXPIRE", "k5", "100"],
        &["EXPIRE", "k5", "50", "GT"],
        &["EXPIRE", "k5", "50", "LT"],
        &["EXPIRE", "k5", "50", "NX", "XX"],
        &["EXPIRE", "k5", "50", "FOO"],
        &["PEXPIRE", "k5", "100000", "XX"],
        &["TTL", "k5"],
        &["PERSIST", "k5"],
        &["PERSIST", "k5"],
        &["TTL", "k5"],
        &["TTL", "nokey"],
        &["PTTL", "k5"],
        &["EXPIRETIME", "k5"],
        &["EXPIREAT", "k5", "1"],
        &["EXISTS", "k5"],
        &["TOUCH", "k4", "nokey"],
        &["SELECT", "1"],
        &["GET", "k3"],
        &["SELECT", "16"],
        &["SELECT", "x"],
        &["SWAPDB", "0", "1"],
        &["GET", "k3"],
        &["FLUSHDB"],
        &["DBSIZE"],
        &["FLUSHALL", "FOO"],
        &["OBJECT", "HELLO", "x"],
        &["OBJECT", "REFCOUNT", "nokey"],
        &["KEYS", "*"],
        &["SCAN", "abc"],
        &["SCAN", "0", "COUNT", "0"],
        &["RANDOMKEY"],
        &["PING"],
        &["PING", "hi"],
        &["PING", "a", "b"],
        &["ECHO", "x"],
        &["NOSUCHCOMMAND", "a", "b"],
        &["CLIENT", "NOSUCH"],
        &["CLIENT", "SETNAME", "bad name"],
        &["CLIENT", "GETNAME"],
        &["COMMAND", "GETKEYS", "MSET", "a", "1", "b", "2"],
        &["COMMAND", "GETKEYS", "GET"],
        &["COMMAND", "GETKEYS", "PING", "x"],
        &[
            "COMMAND",
            "INFO",
            "get",
            "set",
            "mset",
            "rename",
            "del",
            "object|encoding",
            "nosuch",
        ],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "maxmemory"],
        &["DEBUG", "PROTOCOL", "map"],
    ]);
}
