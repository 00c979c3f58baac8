//! Pub/Sub with real clients (the `redis` crate, redis-py), slow subscribers against
//! the output-buffer limits, and keyspace events that need time to pass.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use redis::{Commands, PushKind, Value as RValue};
use strata_resp::value::Value;

use crate::support::{Raw, strata};

/// The value of `field=` in a CLIENT LIST line.
fn field(line: &str, name: &str) -> Option<String> {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")).map(str::to_string))
}

/// CLIENT LIST, one line per client.
fn client_list(c: &mut Raw) -> Vec<String> {
    let reply = c.cmd(&["CLIENT", "LIST"]);
    let text = String::from_utf8_lossy(reply.as_bytes().unwrap_or_default()).into_owned();
    text.lines().map(str::to_string).collect()
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn redis_crate_receives_messages_in_resp2_and_resp3() {
    let server = strata(&[]);
    let mut publisher = server.redis();

    // RESP2: the PubSub API of the redis crate.
    let mut con = server.redis();
    let mut ps = con.as_pubsub();
    ps.subscribe("news").expect("subscribe");
    ps.psubscribe("sp*").expect("psubscribe");
    let n: i64 = publisher.publish("news", "hello").expect("publish");
    assert_eq!(n, 1);
    let n: i64 = publisher.publish("sport", "goal").expect("publish");
    assert_eq!(n, 1);
    ps.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let msg = ps.get_message().expect("message");
    assert_eq!(msg.get_channel_name(), "news");
    assert_eq!(msg.get_payload::<String>().expect("payload"), "hello");
    let msg = ps.get_message().expect("pmessage");
    assert_eq!(msg.get_channel_name(), "sport");
    assert_eq!(msg.get_pattern::<String>().expect("pattern"), "sp*");
    drop(ps);

    // RESP3: pushes on an ordinary connection, which keeps running commands.
    let client = redis::Client::open(format!("{}?protocol=resp3", server.url())).expect("client");
    let mut con = client.get_connection().expect("connect");
    let (tx, rx) = std::sync::mpsc::channel();
    con.set_push_sender(tx);
    con.subscribe_resp3("news").expect("subscribe");
    let _: () = con.set("k", "v").expect("a command while subscribed");
    let n: i64 = publisher.publish("news", "pushed").expect("publish");
    // Dropping the RESP2 PubSub above unsubscribed it.
    assert_eq!(n, 1);
    let v: String = con.get("k").expect("get");
    assert_eq!(v, "v");
    let mut messages = Vec::new();
    while let Ok(push) = rx.recv_timeout(Duration::from_secs(2)) {
        if push.kind == PushKind::Message {
            messages.push(push.data);
            break;
        }
    }
    assert_eq!(
        messages,
        vec![vec![
            RValue::BulkString(b"news".to_vec()),
            RValue::BulkString(b"pushed".to_vec())
        ]]
    );
}

#[test]
fn redis_py_works_against_strata() {
    let require = std::env::var("STRATA_REQUIRE_REDIS").as_deref() == Ok("1");
    let usable = Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .is_ok_and(|s| s.success());
    if !usable {
        assert!(
            !require,
            "python3 with redis-py is required (STRATA_REQUIRE_REDIS=1); pip install redis"
        );
        eprintln!("note: python3 with redis-py not found; skipping the redis-py test");
        return;
    }
    let server = strata(&[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/pubsub_client.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(server.port.to_string())
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "redis-py script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn a_subscriber_that_stops_reading_is_closed_at_its_output_limit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("strata.log");
    let log_arg = log.to_string_lossy().into_owned();
    let server = strata(&[
        "--client-output-buffer-limit",
        "pubsub 4mb 1mb 60",
        "--logfile",
        &log_arg,
    ]);
    let mut admin = server.client();
    // A subscriber that never reads again.
    let mut stalled = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stalled
        .write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$5\r\nflood\r\n")
        .expect("subscribe");
    // A healthy subscriber of the same channel, reading everything.
    let mut healthy = server.client();
    healthy.cmd(&["SUBSCRIBE", "flood"]);
    wait_until("two subscribers", Duration::from_secs(5), || {
        admin.cmd(&["PUBSUB", "NUMSUB", "flood"])
            == Value::Array(vec![Value::Bulk(b"flood".to_vec()), Value::Integer(2)])
    });
    let before = rss(server.pid());
    // 200 MB of messages, sent in pipelined batches while the healthy subscriber
    // reads its copies.
    let payload = vec![b'x'; 64 * 1024];
    let mut publisher = server.client();
    let mut batch = Vec::new();
    strata_resp::value::encode_request([b"PUBLISH".as_slice(), b"flood", &payload], &mut batch);
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    healthy
        .stream
        .set_read_timeout(Some(Duration::from_millis(1)))
        .expect("timeout");
    let started = Instant::now();
    for _ in 0..100 {
        for _ in 0..32 {
            publisher.send_raw(&batch);
        }
        for _ in 0..32 {
            let _ = publisher.read();
        }
        loop {
            match healthy.stream.read(&mut buf) {
                Ok(n) if n > 0 => received += n,
                _ => break,
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the flood took too long"
        );
    }
    let after = rss(server.pid());
    // The stalled client is gone and its backlog with it.
    wait_until(
        "the stalled subscriber to be closed",
        Duration::from_secs(10),
        || client_list(&mut admin).len() == 3,
    );
    let grown = after.saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "the server grew by {grown} bytes while a subscriber stalled"
    );
    // It reads what the kernel still held, then the end of the connection.
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut total = 0usize;
    loop {
        match stalled.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the stalled subscriber was not closed: {e}"),
        }
    }
    assert!(total < 64 << 20, "the stalled subscriber got {total} bytes");
    assert!(received > 0, "the healthy subscriber got nothing");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        text.contains("scheduled to be closed ASAP for overcoming of output buffer limits"),
        "no log line about the closed client:\n{text}"
    );
    // The healthy subscriber still gets messages.
    healthy
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    healthy.read_quiet(Duration::from_millis(300));
    let n = publisher.cmd(&["PUBLISH", "flood", "last"]);
    assert_eq!(n, Value::Integer(1));
}

#[test]
fn pending_output_shows_in_client_list_and_info() {
    let server = strata(&["--client-output-buffer-limit", "pubsub 0 0 0"]);
    let mut admin = server.client();
    let mut stalled = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stalled
        .write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n")
        .expect("subscribe");
    let mut publisher = server.client();
    wait_until("the subscriber", Duration::from_secs(5), || {
        publisher.cmd(&["PUBSUB", "NUMSUB", "c"])
            == Value::Array(vec![Value::Bulk(b"c".to_vec()), Value::Integer(1)])
    });
    let payload = "y".repeat(256 * 1024);
    for _ in 0..200 {
        publisher.cmd(&["PUBLISH", "c", &payload]);
    }
    let lines = client_list(&mut admin);
    let sub = lines
        .iter()
        .find(|l| field(l, "flags").as_deref() == Some("P"))
        .expect("the subscriber in CLIENT LIST");
    let pending: u64 = ["obl", "omem"]
        .iter()
        .map(|f| {
            field(sub, f)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum();
    assert!(pending > 1 << 20, "pending output not shown: {sub}");
    assert_eq!(field(sub, "sub").as_deref(), Some("1"));
    let info = admin.cmd(&["INFO", "clients"]);
    let info = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
    let max: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("client_recent_max_output_buffer:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(max > 1 << 20, "{info}");
    drop(stalled);
}

#[test]
fn subscriptions_end_with_the_connection() {
    let server = strata(&[]);
    let mut admin = server.client();
    {
        let mut sub = server.client();
        sub.cmd(&["SUBSCRIBE", "a", "b"]);
        sub.read();
        sub.cmd(&["PSUBSCRIBE", "p*"]);
        sub.cmd(&["SSUBSCRIBE", "s"]);
        assert_eq!(admin.cmd(&["PUBSUB", "NUMPAT"]), Value::Integer(1));
    }
    wait_until("the subscriptions to go", Duration::from_secs(5), || {
        admin.cmd(&["PUBSUB", "NUMPAT"]) == Value::Integer(0)
            && admin.cmd(&["PUBSUB", "CHANNELS"]) == Value::Array(vec![])
            && admin.cmd(&["PUBSUB", "SHARDCHANNELS"]) == Value::Array(vec![])
    });
    assert_eq!(admin.cmd(&["PUBLISH", "a", "x"]), Value::Integer(0));
}

#[test]
fn the_subscription_cap_refuses_more() {
    let server = strata(&["--pubsub-max-subscriptions-per-client", "3"]);
    let mut c = server.client();
    c.cmd(&["SUBSCRIBE", "a", "b"]);
    c.read();
    let err = c.cmd(&["PSUBSCRIBE", "x*", "y*"]);
    assert_eq!(
        err,
        Value::Error(
            b"ERR this client would hold more than 3 subscriptions (pubsub-max-subscriptions-per-client)"
                .to_vec()
        )
    );
    // Nothing of the refused command was subscribed; re-subscribing costs nothing.
    c.cmd(&["SUBSCRIBE", "a", "b"]);
    c.read();
    c.cmd(&["SSUBSCRIBE", "s"]);
    let mut admin = server.client();
    assert_eq!(admin.cmd(&["PUBSUB", "NUMPAT"]), Value::Integer(0));
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "pubsub-max-subscriptions-per-client", "0"]),
        Value::Simple(b"OK".to_vec())
    );
    c.cmd(&["PSUBSCRIBE", "x*", "y*"]);
    c.read();
    assert_eq!(admin.cmd(&["PUBSUB", "NUMPAT"]), Value::Integer(2));
}

/// The frames of a RESP stream of pushes, as (channel, message) pairs.
fn messages(raw: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Ok(Some((v, n))) = strata_resp::value::decode(rest) {
        rest = &rest[n..];
        if let Value::Array(items) | Value::Push(items) = v
            && let [Value::Bulk(kind), .., Value::Bulk(chan), Value::Bulk(msg)] = items.as_slice()
            && kind.ends_with(b"message")
        {
            out.push((
                String::from_utf8_lossy(chan).into_owned(),
                String::from_utf8_lossy(msg).into_owned(),
            ));
        }
    }
    out
}

#[test]
fn active_expiry_publishes_expired_events() {
    let server = strata(&["--hz", "100", "--notify-keyspace-events", "Ex"]);
    let mut sub = server.client();
    sub.cmd(&[
        "SUBSCRIBE",
        "__keyevent@0__:expired",
        "__keyevent@3__:expired",
    ]);
    sub.read();
    let mut c = server.client();
    c.cmd(&["SET", "gone", "v", "PX", "30"]);
    c.cmd(&["SELECT", "3"]);
    c.cmd(&["SET", "gone3", "v", "PX", "30"]);
    // Nobody reads the keys: the cron finds them.
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < 2 && Instant::now() < deadline {
        got.extend(messages(&sub.read_quiet(Duration::from_millis(100))));
    }
    got.sort();
    assert_eq!(
        got,
        [
            ("__keyevent@0__:expired".to_string(), "gone".to_string()),
            ("__keyevent@3__:expired".to_string(), "gone3".to_string()),
        ]
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]),
        Value::Array(vec![
            Value::Bulk(b"notify-keyspace-events".to_vec()),
            Value::Bulk(b"xE".to_vec())
        ])
    );
}

#[test]
fn a_message_is_shared_by_many_subscribers() {
    let server = strata(&[]);
    let mut subs: Vec<Raw> = (0..50).map(|_| server.client()).collect();
    for (i, s) in subs.iter_mut().enumerate() {
        if i % 2 == 0 {
            s.cmd(&["HELLO", "3"]);
        }
        s.cmd(&["SUBSCRIBE", "all"]);
    }
    let mut publisher = server.client();
    for i in 0..20 {
        assert_eq!(
            publisher.cmd(&["PUBLISH", "all", &format!("m{i}")]),
            Value::Integer(50)
        );
    }
    for s in subs.iter_mut() {
        let mut got = Vec::new();
        while got.len() < 20 {
            got.extend(messages(&s.read_with_rest(Duration::from_millis(20))));
        }
        let want: Vec<(String, String)> = (0..20)
            .map(|i| ("all".to_string(), format!("m{i}")))
            .collect();
        assert_eq!(got, want);
    }
}
