//! The wire protocol: pipelining, fragmentation, inline commands, protocol errors.

use std::time::Duration;

use strata_resp::value::Value;

use crate::support::{Raw, strata};

fn bulk(s: &str) -> Value {
    Value::Bulk(s.as_bytes().to_vec())
}

#[test]
fn pipelined_commands_get_replies_in_order_in_one_write() {
    let server = strata(&[]);
    let mut c = server.client();
    let mut req = Vec::new();
    for i in 0..1000 {
        strata_resp::value::encode_request(
            [
                b"SET".as_slice(),
                format!("k{i}").as_bytes(),
                format!("v{i}").as_bytes(),
            ],
            &mut req,
        );
        strata_resp::value::encode_request(
            [b"GET".as_slice(), format!("k{i}").as_bytes()],
            &mut req,
        );
    }
    c.send_raw(&req);
    for i in 0..1000 {
        assert_eq!(c.read().0, Value::Simple(b"OK".to_vec()));
        assert_eq!(c.read().0, bulk(&format!("v{i}")));
    }
}

#[test]
fn requests_split_byte_by_byte_work() {
    let server = strata(&[]);
    let mut c = server.client();
    let value = "x".repeat(300);
    let mut req = Vec::new();
    strata_resp::value::encode_request([b"SET".as_slice(), b"frag", value.as_bytes()], &mut req);
    strata_resp::value::encode_request([b"GET".as_slice(), b"frag"], &mut req);
    req.extend_from_slice(b"PING\r\n");
    for b in &req {
        c.send_raw(std::slice::from_ref(b));
    }
    assert_eq!(c.read().0, Value::Simple(b"OK".to_vec()));
    assert_eq!(c.read().0, bulk(&value));
    assert_eq!(c.read().0, Value::Simple(b"PONG".to_vec()));
}

#[test]
fn binary_safe_keys_and_values() {
    let server = strata(&[]);
    let mut c = server.client();
    let key: Vec<u8> = (0..=255u8).collect();
    let value: Vec<u8> = (0..=255u8).rev().cycle().take(5000).collect();
    c.send(&[b"SET", &key, &value]);
    assert_eq!(c.read().0, Value::Simple(b"OK".to_vec()));
    c.send(&[b"GET", &key]);
    assert_eq!(c.read().0, Value::Bulk(value));
}

#[test]
fn inline_commands_with_quotes() {
    let server = strata(&[]);
    let mut c = server.client();
    c.send_raw(b"SET \"a key\" 'it''s'\r\n");
    // Redis rejects a closing quote followed directly by another character.
    assert_eq!(
        c.read_to_close(),
        b"-ERR Protocol error: unbalanced quotes in request\r\n"
    );
    let mut c = server.client();
    c.send_raw(b"SET \"a key\" \"x\\x41\\n\"\r\nGET \"a key\"\r\n");
    assert_eq!(c.read().0, Value::Simple(b"OK".to_vec()));
    assert_eq!(c.read().0, bulk("xA\n"));
}

#[test]
fn protocol_errors_reply_then_close() {
    let server = strata(&[]);
    for (req, reply) in [
        (
            &b"*abc\r\n"[..],
            &b"-ERR Protocol error: invalid multibulk length\r\n"[..],
        ),
        (
            b"*1\r\n$x\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n+PING\r\n",
            b"-ERR Protocol error: expected '$', got '+'\r\n",
        ),
        (
            b"*1\r\n$600000000\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
    ] {
        let mut c = server.client();
        c.send_raw(req);
        assert_eq!(
            c.read_to_close(),
            reply,
            "for {:?}",
            String::from_utf8_lossy(req)
        );
    }
}

#[test]
fn oversized_inline_request_is_refused() {
    let server = strata(&[]);
    let mut c = server.client();
    c.send_raw(&vec![b'a'; 70 * 1024]);
    assert_eq!(
        c.read_to_close(),
        b"-ERR Protocol error: too big inline request\r\n"
    );
}

#[test]
fn many_connections_at_once() {
    let server = strata(&[]);
    let mut clients: Vec<Raw> = (0..200).map(|_| server.client()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&[b"SET", format!("c{i}").as_bytes(), b"1"]);
    }
    for c in clients.iter_mut() {
        assert_eq!(c.read().0, Value::Simple(b"OK".to_vec()));
    }
    let mut c = server.client();
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Integer(200));
}

/// Clients pipelining onto the same keys from both I/O threads, which take turns
/// on the keys' shards (a command that finds its shard held spins, then waits in
/// the mutex), and from one, which holds every connection's replies to the end of
/// its turn. Nothing may be lost, run twice, or answered out of order.
#[test]
fn pipelines_onto_one_key_from_many_clients_run_in_order() {
    pipelines_onto_one_key_run_in_order("2");
    pipelines_onto_one_key_run_in_order("1");
}

fn pipelines_onto_one_key_run_in_order(io_threads: &str) {
    const CLIENTS: usize = 8;
    const ROUNDS: usize = 40;
    const DEPTH: usize = 25;
    let server = strata(&["--io-threads", io_threads]);
    let workers: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let mut c = server.client();
            std::thread::spawn(move || {
                let mut counts = Vec::new();
                let mut lens = Vec::new();
                for round in 0..ROUNDS {
                    let mut req = Vec::new();
                    for i in 0..DEPTH {
                        let item = format!("{t}:{round}:{i}");
                        let member = format!("m{t}-{round}-{i}");
                        let reqs: [&[&[u8]]; 3] = [
                            &[b"INCR", b"counter"],
                            &[b"RPUSH", b"list", item.as_bytes()],
                            &[b"ZADD", b"zset", b"1", member.as_bytes()],
                        ];
                        for args in reqs {
                            strata_resp::value::encode_request(args.iter().copied(), &mut req);
                        }
                    }
                    c.send_raw(&req);
                    for _ in 0..DEPTH {
                        let Value::Integer(n) = c.read().0 else {
                            panic!("INCR");
                        };
                        counts.push(n);
                        let Value::Integer(n) = c.read().0 else {
                            panic!("RPUSH");
                        };
                        lens.push(n);
                        assert_eq!(c.read().0, Value::Integer(1));
                    }
                }
                (counts, lens)
            })
        })
        .collect();
    for w in workers {
        let (counts, lens) = w.join().expect("client");
        assert!(counts.windows(2).all(|w| w[0] < w[1]), "{counts:?}");
        assert!(lens.windows(2).all(|w| w[0] < w[1]), "{lens:?}");
    }
    let total = (CLIENTS * ROUNDS * DEPTH) as i64;
    let mut c = server.client();
    assert_eq!(c.cmd(&["GET", "counter"]), bulk(&total.to_string()));
    assert_eq!(c.cmd(&["ZCARD", "zset"]), Value::Integer(total));
    let Value::Array(items) = c.cmd(&["LRANGE", "list", "0", "-1"]) else {
        panic!("LRANGE");
    };
    assert_eq!(items.len() as i64, total);
    // Each client's items appear in the order it sent them.
    let mut next = [0usize; CLIENTS];
    for item in items {
        let Value::Bulk(item) = item else {
            panic!("item");
        };
        let item = String::from_utf8(item).expect("utf-8");
        let mut parts = item.split(':').map(|p| p.parse::<usize>().expect("number"));
        let (t, round, i) = (
            parts.next().expect("t"),
            parts.next().expect("round"),
            parts.next().expect("i"),
        );
        assert_eq!(round * DEPTH + i, next[t], "{item}");
        next[t] += 1;
    }
}

#[test]
fn quit_closes_after_ok() {
    let server = strata(&[]);
    let mut c = server.client();
    c.send_raw(b"QUIT\r\nPING\r\n");
    assert_eq!(c.read_to_close(), b"+OK\r\n");
    let _ = Duration::from_secs(0);
}

/// One I/O thread spinning a long while (50 ms) between turns: requests, a client
/// blocked in BLPOP and served by another's push, a new connection, a timeout and
/// CONFIG SET of the spin all go on as without it (the spin ends on a readable
/// socket or a task woken from elsewhere; the rest waits at most its time).
#[test]
fn with_a_long_spin_between_turns_everything_is_served() {
    let server = strata(&["--io-threads", "1", "--io-spin-us", "50000"]);
    let mut a = server.client();
    let mut b = server.client();
    assert_eq!(
        a.cmd(&["CONFIG", "GET", "io-spin-us"]),
        Value::Array(vec![bulk("io-spin-us"), bulk("50000")])
    );
    for i in 0..200 {
        let n = i.to_string();
        assert_eq!(a.cmd(&["SET", "k", &n]), Value::Simple("OK".into()));
        assert_eq!(b.cmd(&["GET", "k"]), bulk(&n));
    }
    // A's BLPOP blocks; B's push, once A has surely blocked, wakes it.
    a.send(&[b"BLPOP", b"list", b"0"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(b.cmd(&["LPUSH", "list", "x"]), Value::Integer(1));
    assert_eq!(a.read().0, Value::Array(vec![bulk("list"), bulk("x")]));
    // A timeout fires while nothing else happens.
    assert_eq!(a.cmd(&["BLPOP", "none", "0.1"]), Value::NullArray);
    let mut c = server.client();
    assert_eq!(c.cmd(&["PING"]), Value::Simple("PONG".into()));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "io-spin-us", "0"]),
        Value::Simple("OK".into())
    );
    assert_eq!(c.cmd(&["GET", "k"]), bulk("199"));
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "io-spin-us", "-1"]),
        Value::Error(_)
    ));
}
