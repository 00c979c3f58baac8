//! Golden tests: every protocol error text and every reply form in both protocols, as
//! Redis 7.0.15 sends them (each expectation was taken from a real `redis-server`; the
//! `live` module re-checks them against one when it is installed).

use strata_resp::reply::{self, Aggregate};
use strata_resp::{Limits, Parsed, Protocol, ProtocolError, ReplyWriter, RequestParser};

/// What a server would send for `input`: `+PONG` for each complete `PING`, `-ERR ...`
/// for a protocol error (after which it closes), nothing while the request is
/// incomplete.
pub fn server_transcript(input: &[u8], authenticated: bool) -> Vec<u8> {
    let mut parser = RequestParser::new(Limits::default());
    parser.set_authenticated(authenticated);
    let mut out = Vec::new();
    let mut buf = input;
    loop {
        match parser.parse(buf) {
            Ok(Parsed::Complete { consumed }) => {
                let args = parser.args(buf);
                assert_eq!(args.to_vec(), vec![b"PING".to_vec()], "cases only PING");
                out.extend_from_slice(reply::PONG);
                buf = buf.get(consumed..).unwrap();
            }
            Ok(Parsed::Skip { consumed }) => buf = buf.get(consumed..).unwrap(),
            Ok(Parsed::Incomplete { .. }) => return out,
            Err(error) => {
                let mut text = b"ERR ".to_vec();
                text.extend_from_slice(&error.to_bytes());
                ReplyWriter::new(&mut out, Protocol::Resp2).error(&text);
                return out;
            }
        }
    }
}

const K64: usize = 64 * 1024;

fn repeat(prefix: &[u8], byte: u8, total: usize, suffix: &[u8]) -> Vec<u8> {
    let mut v = prefix.to_vec();
    v.resize(total, byte);
    v.extend_from_slice(suffix);
    v
}

/// Requests sent by an authenticated client and Redis's exact answer.
pub fn authenticated_cases() -> Vec<(Vec<u8>, Vec<u8>)> {
    let e = |text: &str| format!("-ERR Protocol error: {text}\r\n").into_bytes();
    let pong = b"+PONG\r\n".to_vec();
    let none = Vec::new();
    vec![
        (b"*abc\r\n".to_vec(), e("invalid multibulk length")),
        (b"*\r\n".to_vec(), e("invalid multibulk length")),
        (b"*-0\r\n".to_vec(), e("invalid multibulk length")),
        (b"*+1\r\n".to_vec(), e("invalid multibulk length")),
        (b"*01\r\n".to_vec(), e("invalid multibulk length")),
        (b"*11x\r\n".to_vec(), e("invalid multibulk length")),
        (b"*2147483648\r\n".to_vec(), e("invalid multibulk length")),
        (
            b"*99999999999999999999\r\n".to_vec(),
            e("invalid multibulk length"),
        ),
        (
            b"*-9223372036854775809\r\n".to_vec(),
            e("invalid multibulk length"),
        ),
        (b"*2147483647\r\n".to_vec(), none.clone()),
        (b"*-9223372036854775808\r\nPING\r\n".to_vec(), pong.clone()),
        (b"*0\r\nPING\r\n".to_vec(), pong.clone()),
        (b"*-1\r\nPING\r\n".to_vec(), pong.clone()),
        (b"*-5\r\nPING\r\n".to_vec(), pong.clone()),
        (b"*1\r\nx3\r\nfoo\r\n".to_vec(), e("expected '$', got 'x'")),
        (b"*1\r\n\r\n".to_vec(), e("expected '$', got ' '")),
        (
            b"*1\r\n\xff\r\n".to_vec(),
            b"-ERR Protocol error: expected '$', got '\xff'\r\n".to_vec(),
        ),
        (b"*1\r\n$-1\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$-0\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$00\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$ 1\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$1 \r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$abc\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$\xff\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$536870913\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$536870912\r\n".to_vec(), none.clone()),
        (b"*1\r\n$4\r\nPING\r\n".to_vec(), pong.clone()),
        // The two bytes after a line end or after bulk data are skipped unchecked.
        (
            b"*1\r\n$4\r\nPINGxyPING\r\n".to_vec(),
            [pong.clone(), pong.clone()].concat(),
        ),
        (b"*1\rX$4\rXPINGxy".to_vec(), pong.clone()),
        (
            b"*1\r\n$4\r\nPINGxy*1\r\n$4\r\nPING\r\n".to_vec(),
            [pong.clone(), pong.clone()].concat(),
        ),
        (b"*1\r\n$4\r\nPING".to_vec(), none.clone()),
        (b"*1\r\n$4\r\nPINGx".to_vec(), none.clone()),
        (b"*1\r\n$4\r\nPING\r\n*".to_vec(), pong.clone()),
        // A NUL byte stops the search for the line end.
        (b"*1\0\r\n".to_vec(), none.clone()),
        (b"*1\r\n$4\0\r\nPING\r\n".to_vec(), none.clone()),
        (b"*1\r\n\0\r\n".to_vec(), none.clone()),
        (b"PING\0\r\n".to_vec(), none.clone()),
        (repeat(b"*1\0\r\n", b'A', K64, b""), none.clone()),
        (
            repeat(b"*1\0\r\n", b'A', K64 + 1, b""),
            e("too big mbulk count string"),
        ),
        (
            repeat(b"PING\0", b'A', K64 + 1, b""),
            e("too big inline request"),
        ),
        (
            repeat(b"PING\0", b'A', K64 + 5, b"\r\n"),
            e("too big inline request"),
        ),
        // Line length limits.
        (repeat(b"*", b'1', K64, b""), none.clone()),
        (
            repeat(b"*", b'1', K64 + 1, b""),
            e("too big mbulk count string"),
        ),
        (repeat(b"*", b'1', K64 + 5, b"\r"), none.clone()),
        (repeat(b"*1\r\n$", b'1', K64 + 4, b""), none.clone()),
        (
            repeat(b"*1\r\n$", b'1', K64 + 5, b""),
            e("too big bulk count string"),
        ),
        (
            repeat(b"*1\r\n", b'X', K64 + 5, b""),
            e("too big bulk count string"),
        ),
        (repeat(b"", b'A', K64, b""), none.clone()),
        (repeat(b"", b'A', K64 + 1, b""), e("too big inline request")),
        (
            repeat(b"", b'A', K64 + 5, b"\r"),
            e("too big inline request"),
        ),
        // Inline requests.
        (b"PING\r\n".to_vec(), pong.clone()),
        (b"PING\n".to_vec(), pong.clone()),
        (b"PING\r\r\n".to_vec(), pong.clone()),
        (b"\r\n\r\nPING\n".to_vec(), pong.clone()),
        (b"   \r\n".to_vec(), none.clone()),
        (b"\r\r\nPING\r\n".to_vec(), pong.clone()),
        (b"\x0bPING\r\n".to_vec(), pong.clone()),
        (b"\"PING\"\r\n".to_vec(), pong.clone()),
        (b"'PING'\t\r\n".to_vec(), pong.clone()),
        (b"P\"ING\"\r\n".to_vec(), pong.clone()),
        (b"\"\\x50ING\"\r\n".to_vec(), pong.clone()),
        (
            b"ECHO \"a\"b\r\n".to_vec(),
            e("unbalanced quotes in request"),
        ),
        (
            b"ECHO \"abc\r\n".to_vec(),
            e("unbalanced quotes in request"),
        ),
        (
            b"ECHO \"a\\\"\r\n".to_vec(),
            e("unbalanced quotes in request"),
        ),
        (
            b"ECHO \"a\\\r\n".to_vec(),
            e("unbalanced quotes in request"),
        ),
        (b"ECHO 'a'b\r\n".to_vec(), e("unbalanced quotes in request")),
        (
            b"ECHO a'b'c\r\n".to_vec(),
            e("unbalanced quotes in request"),
        ),
        (
            b"ECHO \"a\r\r\n".to_vec(),
            e("unbalanced quotes in request"),
        ),
    ]
}

/// Requests sent by a client that has not authenticated and Redis's exact answer.
pub fn unauthenticated_cases() -> Vec<(Vec<u8>, Vec<u8>)> {
    let e = |text: &str| format!("-ERR Protocol error: {text}\r\n").into_bytes();
    vec![
        (b"*11\r\n".to_vec(), e("unauthenticated multibulk length")),
        (b"*10\r\n".to_vec(), Vec::new()),
        (b"*-11\r\n".to_vec(), Vec::new()),
        (b"*abc\r\n".to_vec(), e("invalid multibulk length")),
        (b"*11x\r\n".to_vec(), e("invalid multibulk length")),
        (
            b"*1\r\n$16385\r\n".to_vec(),
            e("unauthenticated bulk length"),
        ),
        (b"*1\r\n$16384\r\n".to_vec(), Vec::new()),
        (b"*1\r\n$-1\r\n".to_vec(), e("invalid bulk length")),
        (b"*1\r\n$536870913\r\n".to_vec(), e("invalid bulk length")),
    ]
}

#[test]
fn protocol_errors_match_redis() {
    for (input, expected) in authenticated_cases() {
        let got = server_transcript(&input, true);
        assert_eq!(
            got.escape_ascii().to_string(),
            expected.escape_ascii().to_string(),
            "input {:.80}",
            input.escape_ascii().to_string()
        );
    }
    for (input, expected) in unauthenticated_cases() {
        let got = server_transcript(&input, false);
        assert_eq!(
            got.escape_ascii().to_string(),
            expected.escape_ascii().to_string(),
            "input {}",
            input.escape_ascii()
        );
    }
}

#[test]
fn protocol_error_display_texts() {
    let cases = [
        (
            ProtocolError::MultibulkCountTooBig,
            "Protocol error: too big mbulk count string",
        ),
        (
            ProtocolError::InvalidMultibulkLength,
            "Protocol error: invalid multibulk length",
        ),
        (
            ProtocolError::UnauthenticatedMultibulkLength,
            "Protocol error: unauthenticated multibulk length",
        ),
        (
            ProtocolError::BulkCountTooBig,
            "Protocol error: too big bulk count string",
        ),
        (
            ProtocolError::ExpectedDollar(b'x'),
            "Protocol error: expected '$', got 'x'",
        ),
        (
            ProtocolError::ExpectedDollar(b'\n'),
            "Protocol error: expected '$', got ' '",
        ),
        (
            ProtocolError::InvalidBulkLength,
            "Protocol error: invalid bulk length",
        ),
        (
            ProtocolError::UnauthenticatedBulkLength,
            "Protocol error: unauthenticated bulk length",
        ),
        (
            ProtocolError::InlineTooBig,
            "Protocol error: too big inline request",
        ),
        (
            ProtocolError::UnbalancedQuotes,
            "Protocol error: unbalanced quotes in request",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
        assert_eq!(error.to_bytes(), text.as_bytes());
    }
}

fn write(proto: Protocol, f: impl FnOnce(&mut ReplyWriter<'_>)) -> Vec<u8> {
    let mut out = Vec::new();
    f(&mut ReplyWriter::new(&mut out, proto));
    out
}

/// A `DEBUG PROTOCOL` type, the writer calls that build its reply, and Redis 7.0.15's
/// reply in RESP2 and in RESP3.
pub type DebugProtocolCase = (
    &'static str,
    fn(&mut ReplyWriter<'_>),
    &'static [u8],
    &'static [u8],
);

/// Each `DEBUG PROTOCOL <type>` reply of Redis 7.0.15 that both protocols support.
pub fn debug_protocol_cases() -> Vec<DebugProtocolCase> {
    vec![
        (
            "string",
            |w| w.bulk(b"Hello World"),
            b"$11\r\nHello World\r\n",
            b"$11\r\nHello World\r\n",
        ),
        (
            "integer",
            |w| w.integer(12345),
            b":12345\r\n",
            b":12345\r\n",
        ),
        (
            "double",
            // Redis's own constant, not PI.
            #[allow(clippy::approx_constant)]
            |w| w.double(3.141),
            b"$5\r\n3.141\r\n",
            b",3.141\r\n",
        ),
        (
            "bignum",
            |w| w.big_number(b"1234567999999999999999999999999999999"),
            b"$37\r\n1234567999999999999999999999999999999\r\n",
            b"(1234567999999999999999999999999999999\r\n",
        ),
        ("null", |w| w.null(), b"$-1\r\n", b"_\r\n"),
        (
            "array",
            |w| {
                w.array(3);
                (0..3).for_each(|i| w.integer(i));
            },
            b"*3\r\n:0\r\n:1\r\n:2\r\n",
            b"*3\r\n:0\r\n:1\r\n:2\r\n",
        ),
        (
            "set",
            |w| {
                w.set(3);
                (0..3).for_each(|i| w.integer(i));
            },
            b"*3\r\n:0\r\n:1\r\n:2\r\n",
            b"~3\r\n:0\r\n:1\r\n:2\r\n",
        ),
        (
            "map",
            |w| {
                w.map(3);
                for i in 0..3 {
                    w.integer(i);
                    w.boolean(i == 1);
                }
            },
            b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n",
            b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n",
        ),
        (
            "verbatim",
            |w| w.verbatim(b"txt", b"This is a verbatim\nstring"),
            b"$25\r\nThis is a verbatim\nstring\r\n",
            b"=29\r\ntxt:This is a verbatim\nstring\r\n",
        ),
        ("true", |w| w.boolean(true), b":1\r\n", b"#t\r\n"),
        ("false", |w| w.boolean(false), b":0\r\n", b"#f\r\n"),
    ]
}

#[test]
fn reply_forms_match_redis_debug_protocol() {
    for (name, build, resp2, resp3) in debug_protocol_cases() {
        assert_eq!(write(Protocol::Resp2, build), resp2, "{name} in RESP2");
        assert_eq!(write(Protocol::Resp3, build), resp3, "{name} in RESP3");
    }
}

#[test]
fn push_replies() {
    let build = |w: &mut ReplyWriter<'_>| {
        w.push(2);
        w.bulk(b"server-cpu-usage");
        w.integer(42);
    };
    assert_eq!(
        write(Protocol::Resp3, build),
        b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"
    );
    assert_eq!(
        write(Protocol::Resp2, build),
        b"*2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"
    );
}

/// `ZSCORE` replies of Redis 7.0.15 for scores given as text.
pub const DOUBLE_CASES: &[(f64, &str)] = &[
    (0.1, "0.10000000000000001"),
    (1.0, "1"),
    (1e20, "1e+20"),
    (1.5e-7, "1.4999999999999999e-07"),
    (f64::INFINITY, "inf"),
    (f64::NEG_INFINITY, "-inf"),
    (5e-324, "4.9406564584124654e-324"),
    (125_000_000_000_000.0 + 0.125, "125000000000000.12"),
    (1e16, "10000000000000000"),
    (1e17, "1e+17"),
    (0.0001, "0.0001"),
    (0.00001, "1.0000000000000001e-05"),
    (-3.25, "-3.25"),
    (123456.789, "123456.789"),
];

#[test]
fn doubles_match_redis() {
    for &(value, text) in DOUBLE_CASES {
        let resp2 = write(Protocol::Resp2, |w| w.double(value));
        assert_eq!(resp2, format!("${}\r\n{text}\r\n", text.len()).as_bytes());
        let resp3 = write(Protocol::Resp3, |w| w.double(value));
        assert_eq!(resp3, format!(",{text}\r\n").as_bytes());
    }
}

#[test]
fn scalar_and_aggregate_forms() {
    type Case = (fn(&mut ReplyWriter<'_>), &'static [u8], &'static [u8]);
    let cases: Vec<Case> = vec![
        (|w| w.simple(b"OK"), b"+OK\r\n", b"+OK\r\n"),
        (|w| w.ok(), b"+OK\r\n", b"+OK\r\n"),
        (|w| w.simple(b"a\r\nb"), b"+a  b\r\n", b"+a  b\r\n"),
        (
            |w| w.error(b"WRONGTYPE Operation against a key holding the wrong kind of value"),
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
        ),
        (|w| w.error(b"ERR x\ny"), b"-ERR x y\r\n", b"-ERR x y\r\n"),
        (|w| w.integer(0), b":0\r\n", b":0\r\n"),
        (
            |w| w.integer(i64::MIN),
            b":-9223372036854775808\r\n",
            b":-9223372036854775808\r\n",
        ),
        (|w| w.bulk(b""), b"$0\r\n\r\n", b"$0\r\n\r\n"),
        (|w| w.bulk_i64(-12), b"$3\r\n-12\r\n", b"$3\r\n-12\r\n"),
        (|w| w.null_array(), b"*-1\r\n", b"_\r\n"),
        (|w| w.array(0), b"*0\r\n", b"*0\r\n"),
        (|w| w.map(0), b"*0\r\n", b"%0\r\n"),
        (|w| w.set(0), b"*0\r\n", b"~0\r\n"),
        (
            |w| {
                let d = w.deferred(Aggregate::Map);
                w.bulk(b"k");
                w.null();
                w.set_deferred_len(d, 1);
            },
            b"*2\r\n$1\r\nk\r\n$-1\r\n",
            b"%1\r\n$1\r\nk\r\n_\r\n",
        ),
    ];
    for (build, resp2, resp3) in cases {
        assert_eq!(write(Protocol::Resp2, build), resp2);
        assert_eq!(write(Protocol::Resp3, build), resp3);
    }
}
