//! Differential tests: the same commands to a real Redis and to strata; every reply
//! must be byte-for-byte identical.

use strata_resp::value::Value;

use crate::support::{redis_available, redis_server, strata};

/// Sends each command to both servers and compares the raw replies.
pub fn compare(script: &[&[&str]]) {
    let script: Vec<Vec<&[u8]>> = script
        .iter()
        .map(|cmd| cmd.iter().map(|a| a.as_bytes()).collect())
        .collect();
    compare_bytes(&[], &script);
}

/// [`compare`] for arguments that are not text, on servers started with `extra`
/// directives.
fn compare_bytes(extra: &[&str], script: &[Vec<&[u8]>]) {
    if !redis_available() {
        return;
    }
    let redis = redis_server(extra);
    let ours = strata(extra);
    let (mut r, mut s) = (redis.client(), ours.client());
    let mut mismatches = Vec::new();
    for args in script {
        r.send(args);
        s.send(args);
        let (_, mut want) = r.read();
        let (_, mut got) = s.read();
        // HELLO's reply carries the client id, which differs by nature.
        if args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"hello"))
        {
            (want, got) = (mask_id(&want), mask_id(&got));
        }
        if want != got {
            let shown: Vec<String> = args
                .iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            mismatches.push(format!(
                "{shown:?}\n  redis:  {:?}\n  strata: {:?}",
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

/// A HELLO reply with the value after `id` replaced by 0.
fn mask_id(raw: &[u8]) -> Vec<u8> {
    let marker = b"$2\r\nid\r\n:";
    let Some(at) = raw.windows(marker.len()).position(|w| w == marker) else {
        return raw.to_vec();
    };
    let start = at + marker.len();
    let end = start + raw[start..].iter().position(|&b| b == b'\r').unwrap_or(0);
    [&raw[..start], b"0", &raw[end..]].concat()
}

/// The value of `field=` in a CLIENT INFO line.
fn client_field(reply: &Value, field: &str) -> Option<String> {
    let text = String::from_utf8_lossy(reply.as_bytes()?).into_owned();
    text.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{field}=")).map(str::to_string))
}

/// The section titles of an INFO reply.
fn sections(reply: &Value) -> Vec<String> {
    let text = String::from_utf8_lossy(reply.as_bytes().unwrap_or_default()).into_owned();
    text.lines()
        .filter(|l| l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

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

#[test]
fn jemalloc_bg_thread_matches_redis() {
    compare(&[
        &["CONFIG", "GET", "jemalloc-bg-thread"],
        &["CONFIG", "SET", "jemalloc-bg-thread", "no"],
        &["CONFIG", "GET", "jemalloc-bg-thread"],
        &["CONFIG", "SET", "jemalloc-bg-thread", "maybe"],
        &["CONFIG", "SET", "jemalloc-bg-thread", "yes"],
        &["CONFIG", "GET", "jemalloc-bg-*"],
    ]);
}

// Regressions found by the random differential test (`random_diff`).

#[test]
fn script_errors_with_line_breaks_match_redis() {
    let script = "return redis.error_reply(ARGV[1])";
    let mut cmds: Vec<Vec<&str>> = Vec::new();
    for text in [
        "\n co",
        "\r\nx",
        "x\r\n",
        "-\nA b",
        "a\nb",
        "-CODE a\r\nb\n",
        "\n",
    ] {
        cmds.push(vec!["EVAL", script, "0", text]);
    }
    cmds.push(vec!["EVAL", "return {err = ARGV[1]}", "0", "\n lead"]);
    let refs: Vec<&[&str]> = cmds.iter().map(Vec::as_slice).collect();
    compare(&refs);
}

#[test]
fn getkeys_with_a_numkeys_redis_does_not_parse_match_redis() {
    // A count that is not canonical, or names keys that are not all there, makes
    // Redis fall back from the key specs to `atoi` and its older extractors: keys
    // without flags, the destination after the inputs.
    let mut cmds: Vec<Vec<&str>> = Vec::new();
    for args in [
        &["fcall", "f1", "1e3", "k2", "1", "+1"][..],
        &["fcall", "f1", "+1", "k2"],
        &["eval", "x", "01", "k2"],
        &["eval", "x", "0"],
        &["eval", "x", "-1", "a"],
        &["eval", "x", "99999999999", "a"],
        &["eval", "x", "4294967297", "a"],
        &["eval", "x", "2", "a"],
        &["zunionstore", "dst", "1e3", "a", "b"],
        &["zunionstore", "dst", "3", "a", "b"],
        &["zunionstore", "dst", "0", "a"],
        &["zunionstore", "dst", "+2", "a", "b"],
        &["zinterstore", "d", " 2", "a", "b"],
        &["zunionstore", "d", "2", "a", "b"],
        &["zunion", "+2", "a", "b"],
        &["lmpop", "1x", "a", "LEFT"],
        &["blmpop", "0", "+1", "a", "LEFT"],
        &["sintercard", "01", "a"],
        &["bzmpop", "1", "2", "a", "b", "MIN"],
    ] {
        for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
            let mut cmd = vec!["COMMAND", sub];
            cmd.extend_from_slice(args);
            cmds.push(cmd);
        }
    }
    let refs: Vec<&[&str]> = cmds.iter().map(Vec::as_slice).collect();
    compare(&refs);
}

#[test]
fn help_texts_match_redis() {
    compare(&[
        &["OBJECT", "HELP"],
        &["COMMAND", "HELP"],
        &["CONFIG", "HELP"],
    ]);
}

#[test]
fn database_indexes_outside_int_match_redis() {
    compare(&[
        &["SET", "k", "v"],
        &["SELECT", "2147483648"],
        &["SELECT", "-2147483649"],
        &["MOVE", "k", "2147483648"],
        &["COPY", "k", "k2", "DB", "-2147483649"],
        &["SWAPDB", "0", "2147483648"],
        &["SELECT", "2147483647"],
    ]);
}

#[test]
fn quoted_arguments_in_errors_match_redis() {
    let long = vec![b'z'; 200];
    compare_bytes(
        &[],
        &[
            vec![b"NOSUCH".as_slice(), b"a\r\nb\0c", b"2122\0b1"],
            vec![b"NOSUCH".as_slice(), b"\xff\xfe", &long, b"x"],
            vec![b"gett".as_slice(), b"1", &long],
            vec![b"".as_slice(), &long],
            vec![b"no\0such".as_slice()],
            vec![b"CONFIG".as_slice(), b"b\0\0b  nt2m"],
            vec![b"OBJECT".as_slice(), b"\xffoo", b"k"],
            vec![b"SET".as_slice(), b"k", b"v"],
            vec![b"EXPIRE".as_slice(), b"k", b"10", b"\xff\0x"],
            vec![b"CLIENT".as_slice(), b"LIST", b"TYPE", b"\xfe"],
            vec![b"CLIENT".as_slice(), b"KILL", b"TYPE", b"a\0b"],
            vec![b"HELLO".as_slice(), b"2", b"\xff"],
        ],
    );
}

#[test]
fn client_kill_filters_match_redis() {
    compare(&[
        &["CLIENT", "KILL", "ID", "999999"],
        &["CLIENT", "KILL", "ADDR", "1.2.3.4:5"],
        &["CLIENT", "KILL", "1.2.3.4:5"],
        &["CLIENT", "KILL", "ID", "abc", "TYPE"],
        &["CLIENT", "KILL", "ID", "1", "TYPE"],
        &["CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "maybe"],
    ]);
}

#[test]
fn config_set_pairs_match_redis() {
    compare(&[
        &["CONFIG", "SET", "hz", "10", "timeout"],
        &["CONFIG", "SET", "hz"],
        &["CONFIG", "SET", "hz", "10", "hz", "11"],
    ]);
}

#[test]
fn hello_options_apply_in_order_like_redis() {
    compare(&[
        &["HELLO", "3", "AUTH", "nobody", "x", "AUTH", "default", "x"],
        &["HELLO", "3", "AUTH", "default", "x", "AUTH", "nobody", "x"],
        &["HELLO", "3", "SETNAME", "n1", "AUTH", "nobody", "x"],
        &["CLIENT", "GETNAME"],
        &["HELLO", "2", "SETNAME", "n2", "SETNAME", "bad name"],
        &["CLIENT", "GETNAME"],
        &["HELLO", "4", "SETNAME", "n3"],
        &["HELLO", "3", "AUTH", "nobody", "x", "FOO"],
        &["HELLO", "3", "FOO", "AUTH", "nobody", "x"],
        &["CLIENT", "GETNAME"],
    ]);
    let script: Vec<Vec<&[u8]>> = [
        &["HELLO", "3", "SETNAME", "early"][..],
        &["AUTH", "secret"],
        &["CLIENT", "GETNAME"],
        &["HELLO", "3", "AUTH", "default", "wrong", "SETNAME", "late"],
        &["CLIENT", "GETNAME"],
    ]
    .iter()
    .map(|cmd| cmd.iter().map(|a| a.as_bytes()).collect())
    .collect();
    compare_bytes(&["--requirepass", "secret"], &script);
}

#[test]
fn command_getkeys_checks_match_redis() {
    compare(&[
        &["COMMAND", "GETKEYS", "CONFIG", "GET"],
        &["COMMAND", "GETKEYS", "CONFIG"],
        &["COMMAND", "GETKEYS", "OBJECT", "nosuch", "k"],
        &["COMMAND", "GETKEYS", "OBJECT", "ENCODING"],
        &[
            "COMMAND",
            "GETKEYS",
            "COMMAND",
            "GETKEYSANDFLAGS",
            "persist",
        ],
        &["COMMAND", "GETKEYS", "PING"],
        &["COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "GET"],
        &["COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "EX", "get"],
        &["COMMAND", "GETKEYSANDFLAGS", "SET", "k", "v", "gets"],
    ]);
}

#[test]
fn command_info_under_resp3_matches_redis() {
    compare(&[
        &["HELLO", "3"],
        &[
            "COMMAND",
            "INFO",
            "get",
            "set",
            "object|encoding",
            "config|get",
            "nosuch",
        ],
    ]);
}

#[test]
fn encodings_and_refcounts_match_redis() {
    compare(&[
        &["APPEND", "a", "+1"],
        &["APPEND", "b", "123"],
        &[
            "APPEND",
            "c",
            "12345678901234567890123456789012345678901234567890",
        ],
        &["OBJECT", "ENCODING", "a"],
        &["OBJECT", "ENCODING", "b"],
        &["OBJECT", "ENCODING", "c"],
        &["SET", "n", "100"],
        &["COPY", "n", "m"],
        &["OBJECT", "ENCODING", "m"],
        &["OBJECT", "REFCOUNT", "n"],
        &["OBJECT", "REFCOUNT", "m"],
        &["INCR", "m"],
        &["OBJECT", "REFCOUNT", "m"],
    ]);
}

#[test]
fn client_info_names_the_running_command() {
    if !redis_available() {
        return;
    }
    let redis = redis_server(&[]);
    let ours = strata(&[]);
    let (mut r, mut s) = (redis.client(), ours.client());
    let id = |v: Value| match v {
        Value::Integer(n) => n.to_string(),
        other => panic!("CLIENT ID replied {other:?}"),
    };
    let (rid, sid) = (id(r.cmd(&["CLIENT", "ID"])), id(s.cmd(&["CLIENT", "ID"])));
    for cmd in [&["GET", "k"][..], &["NOSUCH"], &["OBJECT", "FOO"], &["GET"]] {
        r.cmd(cmd);
        s.cmd(cmd);
        // Another connection sees the command run last.
        let a = redis.client().cmd(&["CLIENT", "LIST", "ID", &rid]);
        let b = ours.client().cmd(&["CLIENT", "LIST", "ID", &sid]);
        assert_eq!(
            client_field(&b, "cmd"),
            client_field(&a, "cmd"),
            "after {cmd:?}"
        );
        // The connection itself sees the command it is running.
        let (a, b) = (r.cmd(&["CLIENT", "INFO"]), s.cmd(&["CLIENT", "INFO"]));
        assert_eq!(
            client_field(&b, "cmd"),
            client_field(&a, "cmd"),
            "CLIENT INFO"
        );
    }
}

#[test]
fn info_sections_match_redis() {
    if !redis_available() {
        return;
    }
    let redis = redis_server(&[]);
    let ours = strata(&[]);
    let (mut r, mut s) = (redis.client(), ours.client());
    for section in ["all", "everything", "default", "latencystats"] {
        let cmd = ["INFO", section];
        assert_eq!(
            sections(&s.cmd(&cmd)),
            sections(&r.cmd(&cmd)),
            "INFO {section}"
        );
    }
}
