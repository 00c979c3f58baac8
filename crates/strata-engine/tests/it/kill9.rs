//! kill -9: a child process writes with `FsyncPolicy::Always` from several
//! threads and prints every acknowledged key; the parent kills it at a random
//! moment, reopens the store and checks that every acknowledged key is there.
//! While the child runs, the parent must be refused with `Error::Locked`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use strata_engine::{Engine, FsyncPolicy, Options};

const DIR_ENV: &str = "STRATA_ENGINE_KILL9_DIR";
const ROUND_ENV: &str = "STRATA_ENGINE_KILL9_ROUND";
const ROUNDS: u64 = 5;
const THREADS: u64 = 4;

fn options() -> Options {
    Options::default()
        .with_fsync(FsyncPolicy::Always)
        .with_segment_size(256 << 10)
        .with_compaction(None)
}

fn value_of(key: &str) -> Vec<u8> {
    format!("{key}:").repeat(8).into_bytes()
}

/// The child: runs only when the parent sets the environment variables.
#[test]
fn kill9_child_writer() {
    let (Ok(dir), Ok(round)) = (std::env::var(DIR_ENV), std::env::var(ROUND_ENV)) else {
        return;
    };
    let engine = Arc::new(Engine::open(&dir, options()).unwrap());
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let deadline = Instant::now() + Duration::from_secs(30);
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let engine = engine.clone();
            let stdout = stdout.clone();
            let round = round.clone();
            std::thread::spawn(move || {
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let key = format!("r{round}-t{t}-{i}");
                    engine.put(key.as_bytes(), &value_of(&key)).unwrap();
                    let mut out = stdout.lock().unwrap();
                    out.write_all(format!("ACK {key}\n").as_bytes()).unwrap();
                    out.flush().unwrap();
                    i += 1;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// Kills the child if the test fails before it does.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn random_ms(lo: u64, hi: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    let mut x = nanos ^ 0x2545_f491_4f6c_dd1d;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    lo + x % (hi - lo)
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    if std::env::var(DIR_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acknowledged: Vec<String> = Vec::new();
    let started = Instant::now();
    for round in 0..ROUNDS {
        let child = Command::new(&exe)
            .args([
                "--exact",
                "kill9::kill9_child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(DIR_ENV, dir.path())
            .env(ROUND_ENV, round.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut guard = Guard(child);
        let stdout = guard.0.stdout.take().unwrap();
        let acks = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let acks = acks.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = Vec::new();
                loop {
                    line.clear();
                    match reader.read_until(b'\n', &mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                    // A line cut off by the kill has no newline: not acknowledged.
                    if let Some(text) = line.strip_suffix(b"\n")
                        && let Some(key) = text.strip_prefix(b"ACK ")
                    {
                        acks.lock()
                            .unwrap()
                            .push(String::from_utf8(key.to_vec()).unwrap());
                    }
                }
            })
        };
        // Wait for the first acknowledgements, then kill at a random moment.
        let wait_deadline = Instant::now() + Duration::from_secs(10);
        while acks.lock().unwrap().is_empty() {
            assert!(Instant::now() < wait_deadline, "the child never wrote");
            std::thread::sleep(Duration::from_millis(5));
        }
        // While the child runs, this process is locked out of the directory.
        match Engine::open(dir.path(), options()) {
            Err(strata_engine::Error::Locked { .. }) => {}
            other => panic!("expected Locked while another process has the store, got {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(random_ms(50, 400)));
        guard.0.kill().unwrap();
        guard.0.wait().unwrap();
        reader.join().unwrap();
        let round_acks = acks.lock().unwrap().clone();
        assert!(!round_acks.is_empty());
        acknowledged.extend(round_acks);

        let engine = Engine::open(dir.path(), options()).unwrap();
        for key in &acknowledged {
            assert_eq!(
                engine.get(key.as_bytes()).unwrap(),
                Some(value_of(key)),
                "round {round}: acknowledged key {key} lost"
            );
        }
        engine.close().unwrap();
    }
    assert!(started.elapsed() < Duration::from_secs(30));
}
