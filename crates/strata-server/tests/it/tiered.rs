//! `maxmemory-policy tiered`: values beyond `maxmemory` move to disk and stay
//! readable — through every kind of command, across a kill -9, and against the same
//! commands on a server that holds everything in memory.

use std::time::Duration;

use strata_resp::value::Value;

use crate::support::{Raw, info_u64, strata, strata_in};

/// A numeric field of INFO memory.
fn info_field(c: &mut Raw, name: &str) -> u64 {
    info_u64(c, "memory", name)
}

/// The value of key `i`: distinct per key, `size` bytes.
fn value_of(i: usize, size: usize) -> Vec<u8> {
    format!("{i}:")
        .bytes()
        .cycle()
        .take(size)
        .collect::<Vec<u8>>()
}

/// Writes keys `v:0` … `v:{n-1}`, pipelined.
fn fill(c: &mut Raw, n: usize, size: usize) {
    for start in (0..n).step_by(100) {
        let end = (start + 100).min(n);
        for i in start..end {
            c.send(&[b"SET", format!("v:{i}").as_bytes(), &value_of(i, size)]);
        }
        for _ in start..end {
            assert_eq!(c.read().0, Value::Simple(b"OK".to_vec()));
        }
    }
}

/// Reads every key back, pipelined, and checks each value.
fn check_all(c: &mut Raw, n: usize, size: usize) {
    for start in (0..n).step_by(100) {
        let end = (start + 100).min(n);
        for i in start..end {
            c.send(&[b"GET", format!("v:{i}").as_bytes()]);
        }
        for i in start..end {
            assert_eq!(c.read().0, Value::Bulk(value_of(i, size)), "value of v:{i}");
        }
    }
}

const TIERED: [&str; 4] = ["--maxmemory", "8mb", "--maxmemory-policy", "tiered"];

/// A data set four times `maxmemory` stays whole: written, read back (the cold part
/// from disk), killed with kill -9, loaded again (the cold part staying on disk), and
/// read again.
#[test]
fn a_data_set_four_times_maxmemory_stays_readable_across_kill_9() {
    let (n, size) = (16_000, 2_000);
    let dir = tempfile::tempdir().expect("temp dir");
    {
        let mut server = strata_in(dir.path(), &TIERED);
        let mut c = server.client();
        fill(&mut c, n, size);
        let cold = info_field(&mut c, "tiered_keys");
        assert!(cold > (n / 2) as u64, "only {cold} values moved out");
        assert!(info_field(&mut c, "tiered_bytes") >= cold * size as u64);
        check_all(&mut c, n, size);
        assert!(info_field(&mut c, "tiered_disk_reads") > 0);
        let Value::Integer(keys) = c.cmd(&["DBSIZE"]) else {
            panic!("DBSIZE")
        };
        assert_eq!(keys, n as i64);
        server.kill9();
    }
    let mut server = strata_in(dir.path(), &TIERED);
    let mut c = server.client();
    assert!(
        info_field(&mut c, "tiered_keys") > (n / 2) as u64,
        "the restart loaded everything into memory"
    );
    check_all(&mut c, n, size);
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
}

/// Values whose records are not in the operating system's cache are read on the
/// blocking-I/O pool (a read from the cache happens at once): after the log is made
/// durable and its pages dropped from the cache, reads wait for the device, and
/// every value is still right.
#[test]
fn values_not_in_the_page_cache_are_read_off_the_event_loop() {
    let (n, size) = (12_000, 2_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = strata_in(dir.path(), &TIERED);
    let mut c = server.client();
    fill(&mut c, n, size);
    assert_eq!(c.cmd(&["SAVE"]), Value::Simple(b"OK".to_vec()));
    let data = dir.path().join("appendonlydir");
    // The store builds the hint file of a sealed segment in the background by reading
    // the segment back, which would bring its pages back into the cache: wait for
    // every sealed segment's hint first.
    let hinted = || {
        let names: Vec<String> = std::fs::read_dir(&data)
            .expect("data directory")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        let mut segments: Vec<&String> = names.iter().filter(|n| n.ends_with(".seg")).collect();
        segments.sort();
        segments.pop();
        segments
            .iter()
            .all(|s| names.contains(&s.replace(".seg", ".hint")))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !hinted() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(hinted(), "sealed segments still without hints");
    let drop_pages = || {
        let mut dropped = false;
        for entry in std::fs::read_dir(&data).expect("data directory") {
            let file = std::fs::File::open(entry.expect("entry").path()).expect("open");
            // Clean pages only are dropped: SAVE made them clean. A file system kept
            // in memory (tmpfs) has no device to wait for and keeps them.
            // (`f_type`'s integer type differs between platforms.)
            #[allow(clippy::unnecessary_cast)]
            let in_memory =
                rustix::fs::fstatfs(&file).is_ok_and(|s| s.f_type as i64 == 0x0102_1994);
            if !in_memory {
                rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).expect("fadvise");
                dropped = true;
            }
        }
        dropped
    };
    // A busy machine's other work (or the store's own background reads) may bring
    // the pages back before the reads below reach them: a few rounds at most.
    for round in 0..3 {
        let dropped = drop_pages();
        check_all(&mut c, n, size);
        if !dropped || info_field(&mut c, "tiered_deferred_reads") > 0 {
            break;
        }
        assert!(round < 2, "no read was handed to the blocking-I/O pool");
    }
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
}

/// The same commands on a tiered server, whose values are mostly on disk, and on a
/// server holding everything in memory, give the same replies: string reads and
/// writes, key commands, transactions, scripts and SORT's patterns.
#[test]
fn commands_on_values_on_disk_reply_as_in_memory() {
    let (n, size) = (6_000, 2_000);
    let tiered = strata(&TIERED);
    let plain = strata(&[]);
    let mut t = tiered.client();
    let mut p = plain.client();
    fill(&mut t, n, size);
    fill(&mut p, n, size);
    assert!(info_field(&mut t, "tiered_keys") > (n / 2) as u64);
    let reads_before = info_field(&mut t, "tiered_disk_reads");
    let scripts: Vec<Vec<String>> = (0..40)
        .map(|k| {
            // Early keys went to disk first; each step touches a different one.
            let key = |j: usize| format!("v:{}", (k * 97 + j * 13) % 2_000);
            match k % 20 {
                0 => vec!["GET".into(), key(0)],
                1 => vec!["STRLEN".into(), key(0)],
                2 => vec!["GETRANGE".into(), key(0), "5".into(), "40".into()],
                3 => vec!["APPEND".into(), key(0), "tail".into()],
                4 => vec!["INCR".into(), key(0)],
                5 => vec!["TYPE".into(), key(0)],
                6 => vec!["EXISTS".into(), key(0), key(1)],
                7 => vec!["OBJECT".into(), "ENCODING".into(), key(0)],
                8 => vec!["RENAME".into(), key(0), format!("renamed:{k}")],
                9 => vec!["COPY".into(), key(0), format!("copy:{k}")],
                10 => vec!["SET".into(), key(0), "new".into(), "GET".into()],
                11 => vec!["GETDEL".into(), key(0)],
                12 => vec!["MGET".into(), key(0), key(1), key(2)],
                13 => vec!["SETRANGE".into(), key(0), "3".into(), "xyz".into()],
                14 => vec!["EXPIRE".into(), key(0), "1000".into()],
                15 => vec![
                    "EVAL".into(),
                    "return redis.call('GET', KEYS[1])".into(),
                    "1".into(),
                    key(0),
                ],
                16 => vec!["DEL".into(), key(0)],
                17 => vec!["LCS".into(), key(0), key(1), "LEN".into()],
                18 => vec!["SET".into(), key(0), "overwritten".into()],
                _ => vec!["GETEX".into(), key(0), "PERSIST".into()],
            }
        })
        .collect();
    for cmd in &scripts {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        assert_eq!(t.cmd(&args), p.cmd(&args), "{args:?}");
    }
    // A transaction and SORT with BY/GET patterns read several values on disk.
    for c in [&mut t, &mut p] {
        c.cmd(&["RPUSH", "ids", "1500", "1501", "1502"]);
        c.cmd(&["MULTI"]);
        c.cmd(&["GET", "v:1600"]);
        c.cmd(&["APPEND", "v:1601", "!"]);
        c.cmd(&["STRLEN", "v:1601"]);
    }
    assert_eq!(t.cmd(&["EXEC"]), p.cmd(&["EXEC"]));
    let sort = ["SORT", "ids", "BY", "nosort", "GET", "v:*", "GET", "#"];
    assert_eq!(t.cmd(&sort), p.cmd(&sort));
    assert!(
        info_field(&mut t, "tiered_disk_reads") > reads_before + 10,
        "the commands did not read values from disk"
    );
    // Everything still matches, key by key.
    for i in (0..n).step_by(7) {
        let key = format!("v:{i}");
        assert_eq!(t.cmd(&["GET", &key]), p.cmd(&["GET", &key]), "{key}");
    }
}

/// The policy needs the log: refused at start-up and by CONFIG SET without it, and
/// the log cannot be turned off while values live only there.
#[test]
fn tiered_needs_the_log() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .args([
            "--port",
            "0",
            "--appendonly",
            "no",
            "--maxmemory-policy",
            "tiered",
        ])
        .output()
        .expect("run strata-server");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs appendonly yes"), "{stderr}");

    let server = strata(&["--appendonly", "no"]);
    let mut c = server.client();
    let Value::Error(e) = c.cmd(&["CONFIG", "SET", "maxmemory-policy", "tiered"]) else {
        panic!("tiered accepted without the log")
    };
    assert!(
        e.starts_with(b"ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy')")
    );

    let server = strata(&TIERED);
    let mut c = server.client();
    fill(&mut c, 8_000, 2_000);
    assert!(info_field(&mut c, "tiered_keys") > 0);
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "appendonly", "no"]),
        Value::Error(_)
    ));
    // Another policy keeps the values on disk readable.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        Value::Simple(b"OK".to_vec())
    );
    assert!(matches!(
        c.cmd(&["CONFIG", "SET", "appendonly", "no"]),
        Value::Error(_)
    ));
    assert_eq!(c.cmd(&["GET", "v:1"]), Value::Bulk(value_of(1, 2_000)));
}
