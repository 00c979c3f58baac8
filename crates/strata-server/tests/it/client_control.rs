//! CLIENT PAUSE / UNPAUSE, CLIENT UNBLOCK, CLIENT HELP and the normal clients'
//! output-buffer limit, which need several connections and time.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use strata_resp::value::Value;

use crate::support::{Raw, redis_available, redis_server, strata};

fn ok() -> Value {
    Value::Simple(b"OK".to_vec())
}

/// Whether a reply arrives within `wait`.
fn replied_within(c: &mut Raw, wait: Duration) -> Option<Vec<u8>> {
    let got = c.read_quiet(wait);
    (!got.is_empty()).then_some(got)
}

#[test]
fn pause_write_holds_writes_until_unpause() {
    let server = strata(&[]);
    let mut admin = server.client();
    let mut writer = server.client();
    let mut reader = server.client();
    writer.cmd(&["SET", "k", "before"]);
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]), ok());
    writer.send(&[b"SET", b"k", b"during"]);
    assert_eq!(
        replied_within(&mut writer, Duration::from_millis(300)),
        None
    );
    // Reads and commands that change nothing run.
    assert_eq!(reader.cmd(&["GET", "k"]), Value::Bulk(b"before".to_vec()));
    assert_eq!(reader.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
    // PUBLISH counts as a write, and so does EXEC of a transaction that writes.
    reader.send(&[b"PUBLISH", b"c", b"m"]);
    assert_eq!(
        replied_within(&mut reader, Duration::from_millis(200)),
        None
    );
    let mut tx = server.client();
    tx.cmd(&["MULTI"]);
    tx.cmd(&["GET", "k"]);
    tx.send(&[b"EXEC"]);
    assert_eq!(
        replied_within(&mut tx, Duration::from_millis(200)),
        Some(b"*1\r\n$6\r\nbefore\r\n".to_vec())
    );
    // Paused clients count as blocked.
    let info = admin.cmd(&["INFO", "clients"]);
    let info = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
    assert!(info.contains("blocked_clients:2\r\n"), "{info}");
    assert_eq!(admin.cmd(&["CLIENT", "UNPAUSE"]), ok());
    assert_eq!(writer.read().0, ok());
    assert_eq!(reader.read().0, Value::Integer(0));
    assert_eq!(admin.cmd(&["GET", "k"]), Value::Bulk(b"during".to_vec()));
}

#[test]
fn pause_all_holds_every_command_until_it_ends() {
    let server = strata(&[]);
    let mut admin = server.client();
    let mut other = server.client();
    let started = Instant::now();
    assert_eq!(admin.cmd(&["CLIENT", "PAUSE", "500", "ALL"]), ok());
    other.send(&[b"GET", b"k"]);
    // Pipelined commands behind it wait too and then run in order.
    other.send(&[b"SET", b"k", b"v"]);
    other.send(&[b"GET", b"k"]);
    assert_eq!(other.read().0, Value::Null);
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert_eq!(other.read().0, ok());
    assert_eq!(other.read().0, Value::Bulk(b"v".to_vec()));
    // A later, shorter pause does not shorten one in force, and widens it: ALL
    // until the later deadline, as Redis's pauseClients does.
    admin.cmd(&["CLIENT", "PAUSE", "400", "WRITE"]);
    admin.cmd(&["CLIENT", "PAUSE", "100", "ALL"]);
    let t = Instant::now();
    other.cmd(&["GET", "k"]);
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    let t = Instant::now();
    assert_eq!(other.cmd(&["SET", "k", "w"]), ok());
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "the pause is over"
    );
}

#[test]
fn keys_do_not_expire_while_clients_are_paused() {
    let server = strata(&["--hz", "100"]);
    let mut admin = server.client();
    let mut c = server.client();
    c.cmd(&["SET", "k", "v", "PX", "100"]);
    admin.cmd(&["CLIENT", "PAUSE", "600", "WRITE"]);
    std::thread::sleep(Duration::from_millis(300));
    // The cron has not removed it (DBSIZE counts keys not yet removed).
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Integer(1));
    admin.cmd(&["CLIENT", "UNPAUSE"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.cmd(&["DBSIZE"]) != Value::Integer(0) {
        assert!(Instant::now() < deadline, "the key never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn unblock_ends_a_blocking_command() {
    let server = strata(&[]);
    let mut admin = server.client();
    let mut a = server.client();
    let mut b = server.client();
    let id_of = |c: &mut Raw| match c.cmd(&["CLIENT", "ID"]) {
        Value::Integer(n) => n.to_string(),
        other => panic!("CLIENT ID: {other:?}"),
    };
    let (ida, idb) = (id_of(&mut a), id_of(&mut b));
    a.send(&[b"BLPOP", b"l", b"0"]);
    b.send(&[b"BLMOVE", b"l", b"m", b"LEFT", b"LEFT", b"0"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = admin.cmd(&["INFO", "clients"]);
        if String::from_utf8_lossy(info.as_bytes().unwrap_or_default())
            .contains("blocked_clients:2\r\n")
        {
            break;
        }
        assert!(Instant::now() < deadline, "clients did not block");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &ida]), Value::Integer(1));
    assert_eq!(a.read().1, b"*-1\r\n");
    assert_eq!(
        admin.cmd(&["CLIENT", "UNBLOCK", &idb, "ERROR"]),
        Value::Integer(1)
    );
    assert_eq!(
        b.read().1,
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    );
    // Neither is blocked any more; both go on normally.
    assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &idb]), Value::Integer(0));
    assert_eq!(a.cmd(&["RPUSH", "l", "x"]), Value::Integer(1));
    assert_eq!(b.cmd(&["LPOP", "l"]), Value::Bulk(b"x".to_vec()));
    // RESP3 clients get RESP3's null on timeout.
    a.cmd(&["HELLO", "3"]);
    a.send(&[b"BLPOP", b"l", b"0"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(admin.cmd(&["CLIENT", "UNBLOCK", &ida]), Value::Integer(1));
    assert_eq!(a.read().1, b"_\r\n");
}

#[test]
fn no_evict_and_monitor_show_in_client_flags() {
    let server = strata(&[]);
    let mut c = server.client();
    let flags = |c: &mut Raw| {
        let v = c.cmd(&["CLIENT", "INFO"]);
        let text = String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
        text.split_whitespace()
            .find_map(|f| f.strip_prefix("flags=").map(str::to_string))
            .unwrap_or_default()
    };
    assert_eq!(flags(&mut c), "N");
    c.cmd(&["CLIENT", "NO-EVICT", "ON"]);
    assert_eq!(flags(&mut c), "e");
    c.cmd(&["MULTI"]);
    c.cmd(&["DISCARD"]);
    c.cmd(&["RESET"]);
    assert_eq!(flags(&mut c), "N");
    let mut m = server.client();
    m.cmd(&["MONITOR"]);
    let list = c.cmd(&["CLIENT", "LIST"]);
    let list = String::from_utf8_lossy(list.as_bytes().unwrap_or_default()).into_owned();
    assert!(list.contains("flags=O "), "{list}");
    // MONITOR clients are listed as normal ones.
    let normal = c.cmd(&["CLIENT", "LIST", "TYPE", "normal"]);
    assert!(
        String::from_utf8_lossy(normal.as_bytes().unwrap_or_default()).contains("flags=O "),
        "{normal:?}"
    );
}

#[test]
fn client_help_is_redis_text() {
    if !redis_available() {
        return;
    }
    let redis = redis_server(&[]);
    let ours = strata(&[]);
    let want = redis.client().cmd(&["CLIENT", "HELP"]);
    let got = ours.client().cmd(&["CLIENT", "HELP"]);
    assert_eq!(got, want);
}

#[test]
fn a_normal_client_past_its_output_limit_is_closed() {
    let server = strata(&["--client-output-buffer-limit", "normal 1mb 0 0"]);
    let mut c = server.client();
    let big = "v".repeat(300 * 1024);
    c.cmd(&["SET", "big", &big]);
    // Small replies within the limit are fine.
    assert_eq!(c.cmd(&["STRLEN", "big"]), Value::Integer(300 * 1024));
    // A pipeline whose replies pass 1 MB before they can be written closes it.
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let mut batch = Vec::new();
    for _ in 0..100 {
        strata_resp::value::encode_request([b"GET".as_slice(), b"big"], &mut batch);
    }
    s.write_all(&batch).expect("write");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the connection was not closed: {e}"),
        }
    }
    assert!(total < 100 * 300 * 1024, "all {total} bytes were sent");
    // Other clients carry on.
    assert_eq!(c.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
}

#[test]
fn tracked_keys_are_invalidated_when_they_expire() {
    let server = strata(&["--hz", "100"]);
    let mut c = server.client();
    c.cmd(&["HELLO", "3"]);
    c.cmd(&["CLIENT", "TRACKING", "on"]);
    let mut other = server.client();
    other.cmd(&["SET", "soon", "v", "PX", "50"]);
    assert_eq!(c.cmd(&["GET", "soon"]), Value::Bulk(b"v".to_vec()));
    let info = other.cmd(&["INFO", "clients"]);
    assert!(
        String::from_utf8_lossy(info.as_bytes().unwrap_or_default())
            .contains("tracking_clients:1\r\n")
    );
    // Nobody touches the key: the cron expires it and the reader is told.
    let got = c.read_quiet(Duration::from_secs(2));
    assert_eq!(got, b">2\r\n$10\r\ninvalidate\r\n*1\r\n$4\r\nsoon\r\n");
    let list = other.cmd(&["CLIENT", "LIST"]);
    assert!(
        String::from_utf8_lossy(list.as_bytes().unwrap_or_default()).contains("flags=t "),
        "{list:?}"
    );
}

/// CLIENT NO-TOUCH and CLIENT KILL MAXAGE come from Redis 7.2.
#[test]
fn no_touch_keeps_idle_times_and_kill_maxage_picks_old_clients() {
    let server = strata(&[]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(c.cmd(&["CLIENT", "NO-TOUCH", "ON"]), ok());
    let flags = c.cmd(&["CLIENT", "INFO"]);
    assert!(
        String::from_utf8_lossy(flags.as_bytes().unwrap_or_default()).contains("flags=T "),
        "{flags:?}"
    );
    std::thread::sleep(Duration::from_millis(2100));
    // Reads and writes leave the access time alone...
    assert_eq!(c.cmd(&["GET", "k"]), Value::Bulk(b"v".to_vec()));
    assert_eq!(c.cmd(&["APPEND", "k", "w"]), Value::Integer(2));
    let Value::Integer(idle) = c.cmd(&["OBJECT", "IDLETIME", "k"]) else {
        panic!("OBJECT IDLETIME")
    };
    assert!(idle >= 2, "idle {idle}");
    // ...but TOUCH does its job.
    assert_eq!(c.cmd(&["TOUCH", "k"]), Value::Integer(1));
    assert_eq!(c.cmd(&["OBJECT", "IDLETIME", "k"]), Value::Integer(0));
    assert_eq!(
        c.cmd(&["CLIENT", "NO-TOUCH", "MAYBE"]),
        Value::Error(b"ERR syntax error".to_vec())
    );
    assert_eq!(c.cmd(&["CLIENT", "NO-TOUCH", "OFF"]), ok());

    // `c` is over 2 seconds old; a new client is not.
    let mut young = server.client();
    assert_eq!(
        young.cmd(&["CLIENT", "KILL", "MAXAGE", "x"]),
        Value::Error(b"ERR value is not an integer or out of range".to_vec())
    );
    assert_eq!(
        young.cmd(&["CLIENT", "KILL", "MAXAGE", "2"]),
        Value::Integer(1)
    );
    assert!(c.read_to_close().is_empty());
    assert_eq!(young.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
}
