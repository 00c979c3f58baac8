//! Differential tests against a real `redis-server`: the golden cases, the `%.17g` text
//! of random doubles, and the splitting of random inline lines.
//!
//! A server is started on a free loopback port when `redis-server` is installed; without
//! it the tests pass with a note, unless `STRATA_REQUIRE_REDIS=1` makes that a failure.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_resp::inline::split_args;
use strata_resp::{Protocol, ReplyWriter, Value, decode, encode_request};

use crate::golden;

/// A `redis-server` child process, killed on drop.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Option<Redis> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .ok()?;
        let spawned = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--enable-debug-command", "yes"])
            // Scores stay doubles rather than listpack integers.
            .args(["--zset-max-listpack-entries", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(error) => {
                assert!(
                    std::env::var("STRATA_REQUIRE_REDIS").as_deref() != Ok("1"),
                    "redis-server is required: {error}"
                );
                eprintln!("redis-server not available ({error}); skipping the live test");
                return None;
            }
        };
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        // A server still starting may refuse or reset the connection.
        while !matches!(redis.try_exchange(b"PING\r\n"), Ok(reply) if reply == b"+PONG\r\n") {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(redis)
    }

    /// Sends `input` on a new connection, closes the sending side, and returns all the
    /// server sent until it closed.
    fn exchange(&self, input: &[u8]) -> Vec<u8> {
        self.try_exchange(input)
            .expect("exchange with redis-server")
    }

    /// [`Redis::exchange`], with the connection's errors.
    fn try_exchange(&self, input: &[u8]) -> std::io::Result<Vec<u8>> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.write_all(input)?;
        stream.shutdown(Shutdown::Write)?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out)?;
        Ok(out)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_request(args.iter().copied(), &mut out);
    out
}

fn show(bytes: &[u8]) -> String {
    let text = bytes.escape_ascii().to_string();
    if text.len() > 200 {
        format!("{}...", &text[..200])
    } else {
        text
    }
}

/// Drops the first reply (such as `HELLO`'s) from `bytes`.
fn skip_reply(bytes: &[u8]) -> &[u8] {
    let (_, consumed) = decode(bytes).unwrap().unwrap();
    &bytes[consumed..]
}

#[test]
fn redis_agrees_with_the_golden_cases() {
    let Some(redis) = Redis::start() else { return };
    for (input, expected) in golden::authenticated_cases() {
        assert_eq!(
            show(&redis.exchange(&input)),
            show(&expected),
            "input {}",
            show(&input)
        );
    }

    let mut out = Vec::new();
    for (name, build, resp2, resp3) in golden::debug_protocol_cases() {
        for (proto, expected) in [("2", resp2), ("3", resp3)] {
            let mut input = command(&[b"HELLO", proto.as_bytes()]);
            input.extend(command(&[b"DEBUG", b"PROTOCOL", name.as_bytes()]));
            let got = redis.exchange(&input);
            assert_eq!(show(skip_reply(&got)), show(expected), "{name} RESP{proto}");
            out.clear();
            let protocol = if proto == "2" {
                Protocol::Resp2
            } else {
                Protocol::Resp3
            };
            build(&mut ReplyWriter::new(&mut out, protocol));
            assert_eq!(show(&out), show(expected), "{name} RESP{proto}");
        }
    }

    // Requiring a password makes new connections unauthenticated.
    let set = command(&[b"CONFIG", b"SET", b"requirepass", b"secret"]);
    assert_eq!(redis.exchange(&set), b"+OK\r\n");
    for (input, expected) in golden::unauthenticated_cases() {
        assert_eq!(
            show(&redis.exchange(&input)),
            show(&expected),
            "input {}",
            show(&input)
        );
    }
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn random_doubles(count: usize) -> Vec<f64> {
    let mut rng = Rng(0x5eed_d0b1e);
    let mut values: Vec<f64> = golden::DOUBLE_CASES.iter().map(|&(v, _)| v).collect();
    values.extend([
        -0.0,
        0.0,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        f64::EPSILON,
    ]);
    while values.len() < count {
        let value = match rng.below(4) {
            // Any bit pattern: every exponent, subnormals included.
            0 => f64::from_bits(rng.next()),
            // Short decimals, the usual scores.
            1 => (rng.below(2_000_000) as f64 - 1_000_000.0) / 10f64.powi(rng.below(8) as i32),
            // Integers around the 17-digit boundary.
            2 => (rng.next() >> rng.below(64)) as f64,
            // Powers of ten around the switch between fixed and exponent notation.
            _ => 10f64.powi(rng.below(44) as i32 - 22) * (1.0 + rng.below(9) as f64),
        };
        if !value.is_nan() {
            values.push(value);
        }
    }
    values
}

#[test]
fn redis_formats_doubles_as_we_do() {
    let Some(redis) = Redis::start() else { return };
    let values = random_doubles(3000);
    let mut zadd = Vec::new();
    let mut zscore = Vec::new();
    for (i, value) in values.iter().enumerate() {
        let member = i.to_string();
        let score = format!("{value:e}");
        zadd.extend(command(&[
            b"ZADD",
            b"z",
            score.as_bytes(),
            member.as_bytes(),
        ]));
        zscore.extend(command(&[b"ZSCORE", b"z", member.as_bytes()]));
    }
    redis.exchange(&zadd);

    let resp2 = redis.exchange(&zscore);
    let mut resp3_input = command(&[b"HELLO", b"3"]);
    resp3_input.extend(&zscore);
    let resp3 = redis.exchange(&resp3_input);
    let resp3 = skip_reply(&resp3);

    for (got, protocol) in [(&resp2[..], Protocol::Resp2), (resp3, Protocol::Resp3)] {
        let mut rest = got;
        for value in &values {
            let mut expected = Vec::new();
            ReplyWriter::new(&mut expected, protocol).double(*value);
            let (_, consumed) = decode(rest).unwrap().unwrap();
            assert_eq!(
                show(&rest[..consumed]),
                show(&expected),
                "{value:e} in {protocol:?}"
            );
            rest = &rest[consumed..];
        }
        assert!(rest.is_empty());
    }
}

/// Lines built from the bytes that matter to `sdssplitargs`.
fn random_line(rng: &mut Rng) -> Vec<u8> {
    const ALPHABET: &[u8] = b"  \t\r\x0b\x0c\"\"''\\\\xxab4F\xff";
    let len = rng.below(24) as usize;
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len() as u64) as usize])
        .collect()
}

#[test]
fn redis_splits_inline_lines_as_we_do() {
    let Some(redis) = Redis::start() else { return };
    let mut rng = Rng(0x1a1_1e5);
    for _ in 0..400 {
        let line = random_line(&mut rng);
        let mut input = b"RPUSH l ".to_vec();
        input.extend(&line);
        input.extend(b"\r\n");
        input.extend(command(&[b"LRANGE", b"l", b"0", b"-1"]));
        input.extend(command(&[b"DEL", b"l"]));
        let got = redis.exchange(&input);

        let mut expected = Vec::new();
        let mut w = ReplyWriter::new(&mut expected, Protocol::Resp2);
        match split_args(&line) {
            Err(_) => w.error(b"ERR Protocol error: unbalanced quotes in request"),
            Ok(args) if args.is_empty() => {
                w.error(b"ERR wrong number of arguments for 'rpush' command");
                w.array(0);
                w.integer(0);
            }
            Ok(args) => {
                w.integer(args.len() as i64);
                w.bulks(args.iter().map(Vec::as_slice));
                w.integer(1);
            }
        }
        assert_eq!(show(&got), show(&expected), "line {}", show(&line));
    }
}

#[test]
fn values_decode_from_redis() {
    let Some(redis) = Redis::start() else { return };
    let mut input = command(&[b"HELLO", b"3"]);
    input.extend(command(&[b"DEBUG", b"PROTOCOL", b"attrib"]));
    input.extend(command(&[b"DEBUG", b"PROTOCOL", b"push"]));
    let got = redis.exchange(&input);
    let mut rest = skip_reply(&got);
    let mut values = Vec::new();
    while let Some((value, consumed)) = decode(rest).unwrap() {
        values.push(value);
        rest = &rest[consumed..];
    }
    assert_eq!(
        values,
        vec![
            Value::Attribute {
                attributes: vec![(
                    Value::bulk("key-popularity"),
                    Value::Array(vec![Value::bulk("key:123"), Value::Integer(90)]),
                )],
                value: Box::new(Value::bulk("Some real reply following the attribute")),
            },
            Value::Push(vec![Value::bulk("server-cpu-usage"), Value::Integer(42)]),
            Value::bulk("Some real reply following the push reply"),
        ]
    );
}
