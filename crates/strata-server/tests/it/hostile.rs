//! Hostile input against a running server, as property tests: random byte streams and
//! random argument vectors never take it down, and every connection gets either its
//! reply or a closed connection — never silence.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use strata_resp::value::{Value, decode, encode_request};

use crate::support::{Proc, strata};

/// Cases per property: enough to reach odd corners, few enough for a debug build.
const CASES: u32 = 96;

fn runner() -> TestRunner {
    TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Commands a random vector may not name: those that wait (blocking), change what
/// the connection's next replies look like (subscriptions, MONITOR, CLIENT REPLY,
/// HELLO, MULTI), or change the server for the cases after (CONFIG, ACL, SHUTDOWN,
/// CLIENT PAUSE, DEBUG, replication).
const SKIPPED: &[&str] = &[
    "acl",
    "blpop",
    "brpop",
    "brpoplpush",
    "blmove",
    "blmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
    "client",
    "config",
    "debug",
    "exec",
    "failover",
    "hello",
    "monitor",
    "multi",
    "psubscribe",
    "psync",
    "quit",
    "replicaof",
    "reset",
    "shutdown",
    "slaveof",
    "ssubscribe",
    "subscribe",
    "sync",
    "wait",
    "xread",
    "xreadgroup",
    "auth",
];

/// Every command name the server knows, less [`SKIPPED`].
fn names(server: &Proc) -> Vec<String> {
    let mut c = server.client();
    let Value::Array(list) = c.cmd(&["COMMAND", "LIST"]) else {
        panic!("COMMAND LIST")
    };
    let mut names: Vec<String> = list
        .iter()
        .filter_map(|v| v.as_bytes())
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .filter(|n| !SKIPPED.contains(&n.as_str()))
        .collect();
    names.sort();
    names
}

/// Arguments that commands commonly parse: keys, numbers, options, junk.
fn argument() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            "k",
            "k2",
            "h",
            "z",
            "s",
            "l",
            "0",
            "1",
            "-1",
            "2",
            "10",
            "-100",
            "1.5",
            "inf",
            "-inf",
            "+inf",
            "(1",
            "[a",
            "-",
            "+",
            "nan",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551616",
            "1e308",
            "EX",
            "PX",
            "NX",
            "XX",
            "GT",
            "LT",
            "CH",
            "INCR",
            "WITHSCORES",
            "LIMIT",
            "COUNT",
            "MATCH",
            "TYPE",
            "BYSCORE",
            "BYLEX",
            "REV",
            "STORE",
            "LEFT",
            "RIGHT",
            "BEFORE",
            "AFTER",
            "*",
            "$",
            ">",
            "~",
            "GET",
            "SET",
            "INCRBY",
            "OVERFLOW",
            "SAT",
            "FAIL",
            "u8",
            "i64",
            "#1",
            "WEIGHTS",
            "AGGREGATE",
            "SUM",
            "MIN",
            "MAX",
            "KEEPTTL",
            "IDX",
            "LEN",
            "RANK",
            "MAXLEN",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..12),
        (0i64..1_000_000).prop_map(|n| n.to_string().into_bytes()),
    ]
}

fn argv(names: Vec<String>) -> impl Strategy<Value = Vec<Vec<u8>>> {
    (
        prop::sample::select(names),
        prop::collection::vec(argument(), 0..8),
    )
        .prop_map(|(name, args)| {
            let mut v = vec![name.into_bytes()];
            v.extend(args);
            v
        })
}

fn connect(server: &Proc) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    s
}

/// Reads until `done` says the bytes so far are enough or the connection closes;
/// fails after ten seconds of neither.
fn read_until(s: &mut TcpStream, done: impl Fn(&[u8]) -> bool) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if done(&got) {
            return Ok(got);
        }
        match s.read(&mut buf) {
            Ok(0) => return Ok(got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(got),
            Err(_) if Instant::now() < deadline => {}
            Err(e) => return Err(format!("neither a reply nor a close: {e}; got {got:?}")),
        }
    }
}

/// Whether the server still answers a new client.
fn alive(server: &Proc) -> bool {
    let mut c = server.client();
    c.cmd(&["PING"]) == Value::Simple(b"PONG".to_vec())
}

/// Whether `bytes` holds complete values and the last is the bulk `marker`.
fn ends_with_marker(bytes: &[u8], marker: &[u8]) -> bool {
    let mut rest = bytes;
    let mut last = None;
    while let Ok(Some((v, used))) = decode(rest) {
        rest = &rest[used..];
        last = Some(v);
    }
    rest.is_empty() && last.is_some_and(|v| v.as_bytes() == Some(marker))
}

#[test]
fn random_bytes_get_replies_or_a_close() {
    let server = strata(&[]);
    let bytes = (prop::collection::vec(any::<u8>(), 0..400), any::<bool>());
    let result = runner().run(&bytes, |(bytes, framed)| {
        let mut s = connect(&server);
        // Half the cases start like a request, so the parser goes past its first byte.
        let mut input = if framed {
            b"*3\r\n$3\r\nSET\r\n".to_vec()
        } else {
            Vec::new()
        };
        input.extend_from_slice(&bytes);
        input.extend_from_slice(b"\r\n");
        let _ = s.write_all(&input);
        let _ = s.shutdown(std::net::Shutdown::Write);
        // A half-closed client's pending replies are written, then it is closed.
        let got = read_until(&mut s, |_| false);
        prop_assert!(got.is_ok(), "{input:?}: {got:?}");
        prop_assert!(alive(&server), "{input:?}");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn random_argv_gets_a_reply() {
    let server = strata(&[]);
    let commands = prop::collection::vec(argv(names(&server)), 1..6);
    let result = runner().run(&commands, |commands| {
        let mut s = connect(&server);
        let mut request = Vec::new();
        for argv in &commands {
            encode_request(argv.iter().map(Vec::as_slice), &mut request);
        }
        // The marker's reply comes after every reply to the commands before it.
        encode_request([b"ECHO".as_slice(), b"end-of-case"], &mut request);
        let _ = s.write_all(&request);
        let got = read_until(&mut s, |b| ends_with_marker(b, b"end-of-case"));
        prop_assert!(got.is_ok(), "{commands:?}: {got:?}");
        prop_assert!(alive(&server), "{commands:?}");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
