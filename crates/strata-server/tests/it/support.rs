//! Test kit: start the real `strata-server` (or a real `redis-server`) on a free
//! loopback port, talk to it with raw RESP, stop it when the test ends.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_resp::value::{Value, decode, encode_request};

/// A loopback port nobody listens on right now, and never the same one twice in this
/// process. It is below the kernel's ephemeral range (32768 and up on Linux), where
/// the client sockets of the many tests running at once take their local ports: a
/// port from that range, free when checked, could be a client's by the time the
/// server binds it (seen: "Address already in use").
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Test processes run one after another but may overlap a little (a server
    // still exiting): each starts somewhere else in the span.
    let start = std::process::id().wrapping_mul(7_919) % SPAN;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(
            n < SPAN,
            "no free loopback port left below the ephemeral range"
        );
        let port = (LOW + (start + n) % SPAN) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A server process that is killed when dropped.
pub struct Proc {
    child: Child,
    pub port: u16,
    _dir: Option<tempfile::TempDir>,
}

impl Proc {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn client(&self) -> Raw {
        Raw::connect(self.port)
    }

    pub fn redis(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("client")
            .get_connection()
            .expect("connect")
    }

    /// Waits for the process to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process with SIGKILL and reaps it.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits until the server answers PING with PONG (after [`spawn_strata`]).
    pub fn wait_ready(&mut self) {
        wait_ready(&mut self.child, self.port, None);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The password a server started with these directives requires.
fn password_in<'a>(extra: &[&'a str]) -> Option<&'a str> {
    let i = extra.iter().position(|a| *a == "--requirepass")?;
    extra.get(i + 1).copied()
}

fn wait_ready(child: &mut Child, port: u16, password: Option<&str>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("server exited during start-up: {status}");
        }
        // Listening is not enough: until the dataset is loaded, PING answers LOADING.
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut reply = [0u8; 64];
            let mut req = Vec::new();
            if let Some(pw) = password {
                encode_request([b"AUTH".as_slice(), pw.as_bytes()], &mut req);
            }
            req.extend_from_slice(b"PING\r\n");
            if s.write_all(&req).is_ok() {
                let mut got = Vec::new();
                while let Ok(n) = s.read(&mut reply) {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&reply[..n]);
                    if got.ends_with(b"\r\n")
                        && (got.ends_with(b"+PONG\r\n")
                            || got.starts_with(b"-")
                            || password.is_none()
                            || got.len() > 5)
                    {
                        break;
                    }
                }
                if got.ends_with(b"+PONG\r\n") {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("server did not become ready on port {port}");
}

/// Starts strata with extra directives (`["--hz", "50"]`).
pub fn strata(extra: &[&str]) -> Proc {
    strata_with_file(None, extra)
}

/// Starts strata with a configuration file and extra directives.
pub fn strata_with_file(file: Option<&std::path::Path>, extra: &[&str]) -> Proc {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut proc = spawn_strata(file, dir.path(), extra);
    wait_ready(&mut proc.child, proc.port, password_in(extra));
    proc._dir = Some(dir);
    proc
}

/// Starts strata on a data directory the caller keeps (to restart on it).
pub fn strata_in(dir: &std::path::Path, extra: &[&str]) -> Proc {
    let mut proc = spawn_strata(None, dir, extra);
    wait_ready(&mut proc.child, proc.port, password_in(extra));
    proc
}

/// Starts strata on `dir` without waiting for it to be ready.
pub fn spawn_strata(file: Option<&std::path::Path>, dir: &std::path::Path, extra: &[&str]) -> Proc {
    let port = free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata-server"));
    if let Some(file) = file {
        cmd.arg(file);
    }
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir)
        .args(["--loglevel", "warning"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let child = cmd.spawn().expect("spawn strata-server");
    // Built before waiting, so that a failed start still stops the process.
    Proc {
        child,
        port,
        _dir: None,
    }
}

/// Whether a real redis-server is available. When `STRATA_REQUIRE_REDIS=1` (as in
/// CI) its absence is a failure rather than a skip.
pub fn redis_available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !found {
        if std::env::var("STRATA_REQUIRE_REDIS").as_deref() == Ok("1") {
            panic!("redis-server is required (STRATA_REQUIRE_REDIS=1) but not installed");
        }
        eprintln!("note: redis-server not found; skipping the comparison with Redis");
    }
    found
}

/// Starts a real redis-server with persistence off.
pub fn redis_server(extra: &[&str]) -> Proc {
    let port = free_port();
    let dir = tempfile::tempdir().expect("temp dir");
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let mut proc = Proc {
        child,
        port,
        _dir: Some(dir),
    };
    wait_ready(&mut proc.child, port, password_in(extra));
    proc
}

/// A raw RESP connection: sends requests, reads whole replies.
pub struct Raw {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = Vec::new();
        encode_request(args.iter().copied(), &mut out);
        self.send_raw(&out);
    }

    /// The next reply, decoded, and its exact bytes.
    pub fn read(&mut self) -> (Value, Vec<u8>) {
        loop {
            if let Some((v, n)) = decode(&self.buf).expect("valid RESP from server") {
                let raw: Vec<u8> = self.buf.drain(..n).collect();
                return (v, raw);
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self.stream.read(&mut chunk).expect("read reply");
            assert!(n > 0, "connection closed while waiting for a reply");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads one reply, or `None` if the connection closes (or fails) first.
    pub fn try_read(&mut self) -> Option<Value> {
        loop {
            if let Some((v, n)) = decode(&self.buf).expect("valid RESP from server") {
                self.buf.drain(..n);
                return Some(v);
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Sends one command and returns its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Value {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args);
        self.read().0
    }

    /// Reads until the server closes the connection; returns what came before.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let mut all = std::mem::take(&mut self.buf);
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return all,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
                Err(e) => panic!("expected the server to close the connection: {e}"),
            }
        }
    }
}

impl Raw {
    /// Everything that arrives until the connection stays quiet for `quiet` (bytes
    /// already buffered included), as raw bytes.
    pub fn read_quiet(&mut self, quiet: Duration) -> Vec<u8> {
        let mut all = std::mem::take(&mut self.buf);
        self.stream
            .set_read_timeout(Some(quiet))
            .expect("read timeout");
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break;
                }
                Err(e) => panic!("read: {e}"),
            }
        }
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        all
    }

    /// The next reply's exact bytes followed by whatever arrives until the connection
    /// stays quiet for `quiet` (pushes that follow a reply).
    pub fn read_with_rest(&mut self, quiet: Duration) -> Vec<u8> {
        let (_, mut first) = self.read();
        first.extend(self.read_quiet(quiet));
        first
    }
}

/// A numeric field of an INFO section, read through a raw connection.
pub fn info_u64(c: &mut Raw, section: &str, name: &str) -> u64 {
    let reply = c.cmd(&["INFO", section]);
    let text = String::from_utf8_lossy(reply.as_bytes().expect("INFO text")).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}
