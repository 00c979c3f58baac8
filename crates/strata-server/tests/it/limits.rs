//! Resource limits under hostile clients: thousands of half-sent requests (slowloris),
//! announced arguments that never arrive, a pipeline whose replies are never read,
//! the query-buffer and bulk-length limits, and `maxclients`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use strata_resp::value::Value;

use crate::support::{Proc, strata};

/// The server's resident memory in KiB (Linux), from `/proc`.
fn rss_kib(server: &Proc) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.pid())).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// The server's open file descriptors (Linux), from `/proc`.
fn open_fds(server: &Proc) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", server.pid()))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Raises this process's open-files limit to fit `n` more sockets; the number of
/// connections that fit.
fn room_for(n: usize) -> usize {
    let want = n as u64 + 256;
    if let Ok((soft, hard)) = rlimit::getrlimit(rlimit::Resource::NOFILE) {
        if soft < want {
            let _ = rlimit::setrlimit(rlimit::Resource::NOFILE, want.min(hard), hard);
        }
        if let Ok((soft, _)) = rlimit::getrlimit(rlimit::Resource::NOFILE) {
            return n.min(soft.saturating_sub(256) as usize);
        }
    }
    n.min(700)
}

/// Opens `n` connections that each send `prefix` and then nothing; returns them.
fn half_sent(port: u16, n: usize, prefix: &[u8]) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.write_all(prefix).expect("write");
            s
        })
        .collect()
}

fn connected_clients(c: &mut crate::support::Raw) -> usize {
    let info = c.cmd(&["INFO", "clients"]);
    let text = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("connected_clients")
}

/// Waits until `INFO`, asked on `c`, counts at least `n` clients (accepts are
/// asynchronous).
fn wait_for_clients(c: &mut crate::support::Raw, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = connected_clients(c);
        if seen >= n || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_slowloris_of_half_sent_requests_stays_small() {
    let n = room_for(2000);
    let server = strata(&[]);
    let before = rss_kib(&server);
    let fds_before = open_fds(&server);
    // Each client announces a 100 kB value, sends a little of it and stalls; half of
    // them announce the largest value allowed (512 MB) instead.
    let mut small = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$100000\r\n".to_vec();
    small.extend_from_slice(&[b'x'; 1000]);
    let mut huge = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$536870912\r\n".to_vec();
    huge.extend_from_slice(&[b'y'; 1000]);
    let mut c = server.client();
    let mut held = half_sent(server.port, n / 2, &small);
    held.extend(half_sent(server.port, n - n / 2, &huge));
    assert_eq!(wait_for_clients(&mut c, n + 1), n + 1);
    std::thread::sleep(Duration::from_millis(300));
    let after = rss_kib(&server);
    let fds = open_fds(&server);
    let per_client = (after.saturating_sub(before)) * 1024 / n as u64;
    println!(
        "slowloris: {n} half-sent requests, RSS {before} KiB -> {after} KiB ({per_client} bytes per client), fds {fds_before} -> {fds}"
    );
    // Far below what the announced lengths would cost (2,000 x 512 MB).
    assert!(
        after < before + 256 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    // The server still serves everyone else, and every stalled client can still
    // finish its request.
    assert_eq!(c.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
    let first = held.first_mut().expect("a client");
    first.write_all(&[b'x'; 99_000]).expect("write");
    first.write_all(b"\r\n").expect("write");
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut reply = [0u8; 5];
    first.read_exact(&mut reply).expect("reply");
    assert_eq!(&reply, b"+OK\r\n");
    assert_eq!(c.cmd(&["STRLEN", "key"]), Value::Integer(100_000));
    // Every descriptor comes back once they leave.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(30);
    while open_fds(&server) > fds_before + 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(open_fds(&server) <= fds_before + 1, "descriptors leaked");
    assert_eq!(connected_clients(&mut c), 1);
}

#[test]
fn maxclients_refuses_past_the_limit() {
    let server = strata(&["--maxclients", "50"]);
    // The readiness check's connection must be gone first.
    std::thread::sleep(Duration::from_millis(300));
    let mut c = server.client();
    let held = half_sent(server.port, 49, b"PI");
    assert_eq!(wait_for_clients(&mut c, 50), 50);
    let mut extra = server.client();
    assert_eq!(
        extra.read_to_close(),
        b"-ERR max number of clients reached\r\n"
    );
    drop(held);
    // Room again once they leave.
    let deadline = Instant::now() + Duration::from_secs(10);
    while connected_clients(&mut c) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut again = server.client();
    assert_eq!(again.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
}

/// Writes `requests` from another thread (the server may stop reading them) and
/// reads nothing back for `quiet`; then reads until the connection closes or stays
/// silent, returning the bytes read and whether it closed.
fn never_read(
    port: u16,
    requests: Vec<u8>,
    quiet: Duration,
) -> (TcpStream, std::thread::JoinHandle<()>) {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut w = s.try_clone().expect("clone");
    w.set_write_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&requests);
    });
    std::thread::sleep(quiet);
    (s, writer)
}

fn pipeline_of_gets(n: usize) -> Vec<u8> {
    let mut batch = Vec::new();
    for _ in 0..n {
        strata_resp::value::encode_request([b"GET".as_slice(), b"value"], &mut batch);
    }
    batch
}

/// Reads until the server closes the connection; the bytes read.
fn drain_to_close(mut s: TcpStream) -> usize {
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return total,
            Err(e) => panic!("the connection was not closed: {e}"),
        }
    }
}

#[test]
fn a_pipeline_never_read_is_closed_at_the_output_limit() {
    let server = strata(&["--client-output-buffer-limit", "normal 256kb 0 0"]);
    let mut c = server.client();
    c.cmd(&["SET", "value", &"v".repeat(1000)]);
    // 20,000 replies of 1 kB: 20 MB the client never reads.
    let (s, writer) = never_read(
        server.port,
        pipeline_of_gets(20_000),
        Duration::from_millis(500),
    );
    let read = drain_to_close(s);
    assert!(read < 20_000 * 1000, "all {read} bytes were sent");
    let _ = writer.join();
    assert_eq!(c.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
}

#[test]
fn without_an_output_limit_a_client_that_never_reads_is_held_back() {
    let server = strata(&[]);
    let mut c = server.client();
    c.cmd(&["SET", "value", &"v".repeat(1000)]);
    let before = rss_kib(&server);
    // 50 MB of replies; the server stops reading the client's requests while its
    // replies cannot be written, so memory stays bounded by the socket buffers.
    let (s, writer) = never_read(
        server.port,
        pipeline_of_gets(50_000),
        Duration::from_secs(1),
    );
    let during = rss_kib(&server);
    println!("never-reading client: RSS {before} KiB -> {during} KiB");
    assert!(
        during < before + 64 * 1024,
        "RSS grew from {before} KiB to {during} KiB"
    );
    assert_eq!(c.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
    // Once it reads, it gets every reply.
    s.shutdown(std::net::Shutdown::Write).ok();
    let _ = writer.join();
    let mut r = s;
    r.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n;
    }
    assert_eq!(total, 50_000 * (1000 + "$1000\r\n\r\n".len()));
}

#[test]
fn the_query_buffer_and_bulk_limits_close_the_connection() {
    let server = strata(&[
        "--client-query-buffer-limit",
        "1mb",
        "--proto-max-bulk-len",
        "1mb",
    ]);
    // A bulk past proto-max-bulk-len is a protocol error.
    let mut c = server.client();
    c.send_raw(b"*2\r\n$3\r\nGET\r\n$2000000\r\n");
    assert_eq!(
        c.read_to_close(),
        b"-ERR Protocol error: invalid bulk length\r\n"
    );
    // A request that never ends is closed once it passes the query-buffer limit:
    // one big argument cut short...
    let mut request = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n".to_vec();
    request.extend_from_slice(&[b'x'; 900_000]);
    let mut half = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    half.write_all(&request).expect("write");
    // ... is within the limit, but a million small arguments are not.
    let mut endless = b"*1000000\r\n".to_vec();
    for _ in 0..100_000 {
        endless.extend_from_slice(b"$10\r\n0123456789\r\n");
    }
    let mut t = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    t.set_write_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = t.write_all(&endless);
    assert_eq!(drain_to_close(t), 0);
    // The half-sent request finishes.
    half.write_all(&[b'x'; 100_000]).expect("write");
    half.write_all(b"\r\n").expect("write");
    half.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut reply = [0u8; 5];
    half.read_exact(&mut reply).expect("reply");
    assert_eq!(&reply, b"+OK\r\n");
}
