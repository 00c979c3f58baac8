//! Durability: restarts, `kill -9` under load, compaction, snapshots, damaged files,
//! a full disk, and switching the log on and off at run time.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::Commands;
use strata_resp::value::Value;

use crate::support::{Proc, spawn_strata, strata, strata_in};

/// Every key of every database with its type, contents and whether it has a TTL:
/// what must be the same after a restart.
pub(crate) fn dataset(conn: &mut redis::Connection) -> BTreeMap<(u8, Vec<u8>), String> {
    let mut out = BTreeMap::new();
    for db in 0..16u8 {
        redis::cmd("SELECT").arg(db).exec(conn).expect("select");
        let keys: Vec<Vec<u8>> = conn.keys("*").expect("keys");
        for key in keys {
            let kind: String = conn.key_type(&key).expect("type");
            let contents = match kind.as_str() {
                "string" => format!("{:?}", conn.get::<_, Vec<u8>>(&key).expect("get")),
                "list" => format!(
                    "{:?}",
                    conn.lrange::<_, Vec<Vec<u8>>>(&key, 0, -1).expect("lrange")
                ),
                "hash" => format!(
                    "{:?}",
                    conn.hgetall::<_, BTreeMap<Vec<u8>, Vec<u8>>>(&key)
                        .expect("hgetall")
                ),
                "set" => {
                    let mut m: Vec<Vec<u8>> = conn.smembers(&key).expect("smembers");
                    m.sort();
                    format!("{m:?}")
                }
                "zset" => format!(
                    "{:?}",
                    conn.zrange_withscores::<_, Vec<(Vec<u8>, String)>>(&key, 0, -1)
                        .expect("zrange")
                ),
                other => panic!("unexpected type {other}"),
            };
            let ttl: i64 = conn.ttl(&key).expect("ttl");
            out.insert((db, key), format!("{kind} {contents} ttl={}", ttl > 0));
        }
    }
    redis::cmd("SELECT").arg(0).exec(conn).expect("select");
    out
}

/// Writes a little of everything, through every kind of logged effect.
fn write_everything(conn: &mut redis::Connection) {
    let script: &[&[&str]] = &[
        &["SET", "s", "hello"],
        &["APPEND", "s", " world"],
        &["SETRANGE", "s", "0", "J"],
        &["SET", "f", "1.5"],
        &["INCRBYFLOAT", "f", "2.25"],
        &["INCR", "n"],
        &["INCRBY", "n", "41"],
        &["SET", "ttl", "v", "EX", "1000"],
        &["SET", "gone", "v", "PX", "1"],
        &["SET", "persisted", "v", "EX", "1000"],
        &["PERSIST", "persisted"],
        &["EXPIRE", "s", "5000"],
        &["RPUSH", "l", "a", "b", "c", "d"],
        &["LPOP", "l"],
        &["LINSERT", "l", "BEFORE", "c", "x"],
        &["LSET", "l", "0", "B"],
        &["LMOVE", "l", "l2", "RIGHT", "LEFT"],
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HDEL", "h", "b"],
        &["HINCRBY", "h", "a", "10"],
        &["SADD", "set", "1", "2", "3", "x", "y"],
        &["SREM", "set", "x"],
        &["SPOP", "set"],
        &["SMOVE", "set", "set2", "y"],
        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        &["ZINCRBY", "z", "10", "a"],
        &["ZPOPMIN", "z"],
        &["MSET", "m1", "1", "m2", "2"],
        &["RENAME", "m1", "renamed"],
        &["DEL", "m2"],
        &["SELECT", "3"],
        &["SET", "in3", "three"],
        &["RPUSH", "l3", "x"],
        &["SELECT", "5"],
        &["SET", "in5", "five"],
        &["FLUSHDB"],
        &["SET", "after-flush", "y"],
        &["SWAPDB", "3", "4"],
        &["SELECT", "0"],
        &["MULTI"],
        &["INCR", "tx"],
        &["RPUSH", "txl", "1", "2"],
        &["EXEC"],
    ];
    for args in script {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let _: redis::Value = cmd.query(conn).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }
    // Values big enough to leave the small encodings.
    for i in 0..300 {
        let _: () = conn.rpush("biglist", i).expect("rpush");
        let _: () = conn.hset("bighash", i, "x".repeat(70)).expect("hset");
        let _: () = conn.sadd("bigset", format!("m{i}")).expect("sadd");
        let _: () = conn.zadd("bigzset", i, i as f64 / 3.0).expect("zadd");
    }
    std::thread::sleep(Duration::from_millis(5));
}

pub(crate) fn info_field(conn: &mut redis::Connection, section: &str, name: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(conn).expect("info");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_owned))
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Shuts the server down with SHUTDOWN and waits for it to exit.
fn shutdown(server: &mut Proc) {
    let mut c = server.client();
    c.send(&[b"SHUTDOWN"]);
    let status = server.wait_exit(Duration::from_secs(20)).expect("exited");
    assert!(status.success(), "{status}");
}

#[test]
fn every_type_survives_clean_and_unclean_restarts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ["--appendfsync", "always"];
    let mut server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    // Under `always`, one I/O thread unless `io-threads` is given.
    let threads: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("io-threads")
        .query(&mut conn)
        .expect("config get");
    assert_eq!(threads, ["io-threads", "1"]);
    assert_eq!(info_field(&mut conn, "server", "io_threads_active"), "0");
    write_everything(&mut conn);
    let before = dataset(&mut conn);
    assert!(before.contains_key(&(4, b"in3".to_vec())), "{before:?}");
    assert!(!before.contains_key(&(5, b"in5".to_vec())));
    drop(conn);
    shutdown(&mut server);
    // A clean shutdown leaves a hint for every segment: the next start reads the
    // hints, not the whole log.
    let store = dir.path().join("appendonlydir");
    let names: Vec<String> = std::fs::read_dir(&store)
        .expect("store")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let segments = names.iter().filter(|n| n.ends_with(".seg")).count();
    let hints = names.iter().filter(|n| n.ends_with(".hint")).count();
    assert!(segments > 0 && hints >= segments - 1, "{names:?}");

    let mut server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), before, "after a clean restart");
    assert_eq!(info_field(&mut conn, "persistence", "aof_enabled"), "1");
    let loaded: usize = info_field(&mut conn, "persistence", "rdb_last_load_keys_loaded")
        .parse()
        .expect("number");
    assert_eq!(loaded, before.len());
    // More changes on top of the loaded data, then an unclean end.
    let _: () = conn.rpush("l", "after-restart").expect("rpush");
    let _: () = conn.hdel("h", "c").expect("hdel");
    let after = dataset(&mut conn);
    drop(conn);
    server.kill9();
    let server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), after, "after kill -9");
}

/// What one load thread knows was acknowledged.
#[derive(Default, Debug)]
struct Acked {
    /// Keys set to a known value.
    strings: Vec<(String, String)>,
    /// The counter's last acknowledged value, and how many INCRs were sent.
    counter: i64,
    counter_sent: i64,
    /// The list's acknowledged length and how many pushes were sent.
    list_len: i64,
    list_sent: i64,
    /// The same for a list pushed to by pipelines (whose commands on one key run
    /// under one hold of its shard and are logged as one batch).
    piped_len: i64,
    piped_sent: i64,
    /// Hash fields acknowledged.
    fields: Vec<String>,
    /// Keys set with a long TTL.
    expiring: Vec<String>,
    /// Transfers acknowledged and sent.
    transfers: i64,
    transfers_sent: i64,
}

/// Runs a mix of writes on one connection until `stop` or an error (the server was
/// killed), recording what was acknowledged.
fn load(port: u16, round: usize, t: usize, stop: &AtomicBool, strings: &AtomicUsize) -> Acked {
    let mut acked = Acked::default();
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return acked;
    };
    let Ok(mut conn) = client.get_connection() else {
        return acked;
    };
    let p = format!("r{round}:t{t}");
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let ok = match i % 7 {
            0 => {
                let (k, v) = (format!("{p}:s:{i}"), format!("v{i}"));
                conn.set::<_, _, ()>(&k, &v).map(|()| {
                    strings.fetch_add(1, Ordering::Relaxed);
                    acked.strings.push((k, v))
                })
            }
            1 => {
                acked.counter_sent += 1;
                conn.incr::<_, _, i64>(format!("{p}:counter"), 1)
                    .map(|n| acked.counter = n)
            }
            2 => {
                acked.list_sent += 1;
                conn.rpush::<_, _, i64>(format!("{p}:list"), acked.list_sent)
                    .map(|n| acked.list_len = n)
            }
            3 => {
                let f = format!("f{i}");
                conn.hset::<_, _, _, ()>(format!("{p}:hash"), &f, i)
                    .map(|()| acked.fields.push(f))
            }
            4 => {
                let k = format!("{p}:e:{i}");
                conn.set_ex::<_, _, ()>(&k, "x", 1000)
                    .map(|()| acked.expiring.push(k))
            }
            5 => {
                let mut pipe = redis::pipe();
                for _ in 0..20 {
                    acked.piped_sent += 1;
                    pipe.rpush(format!("{p}:piped"), acked.piped_sent);
                }
                pipe.query::<Vec<i64>>(&mut conn)
                    .map(|lens| acked.piped_len = lens.last().copied().unwrap_or(0))
            }
            _ => {
                acked.transfers_sent += 1;
                redis::pipe()
                    .atomic()
                    .decr(format!("{p}:a"), 1)
                    .incr(format!("{p}:b"), 1)
                    .query::<(i64, i64)>(&mut conn)
                    .map(|_| acked.transfers += 1)
            }
        };
        if ok.is_err() {
            break;
        }
    }
    acked
}

/// Checks that everything acknowledged in `acked` is in the dataset and nothing is
/// half-applied.
fn verify(conn: &mut redis::Connection, round: usize, t: usize, acked: &Acked) {
    let p = format!("r{round}:t{t}");
    for (k, v) in &acked.strings {
        let got: Option<String> = conn.get(k).expect("get");
        assert_eq!(got.as_deref(), Some(v.as_str()), "{k}");
    }
    let counter: i64 = conn
        .get::<_, Option<i64>>(format!("{p}:counter"))
        .expect("get")
        .unwrap_or(0);
    assert!(
        counter >= acked.counter && counter <= acked.counter_sent,
        "{p}: counter {counter}, acknowledged {}, sent {}",
        acked.counter,
        acked.counter_sent
    );
    check_pushes(conn, &format!("{p}:list"), acked.list_len, acked.list_sent);
    check_pushes(
        conn,
        &format!("{p}:piped"),
        acked.piped_len,
        acked.piped_sent,
    );
    for f in &acked.fields {
        let got: Option<u64> = conn.hget(format!("{p}:hash"), f).expect("hget");
        assert!(got.is_some(), "{p}: field {f}");
    }
    for k in &acked.expiring {
        let ttl: i64 = conn.ttl(k).expect("ttl");
        assert!(ttl > 0, "{k}: ttl {ttl}");
    }
    let a: i64 = conn
        .get::<_, Option<i64>>(format!("{p}:a"))
        .expect("get")
        .unwrap_or(0);
    let b: i64 = conn
        .get::<_, Option<i64>>(format!("{p}:b"))
        .expect("get")
        .unwrap_or(0);
    assert_eq!(a + b, 0, "{p}: a transaction was half applied");
    assert!(
        b >= acked.transfers && b <= acked.transfers_sent,
        "{p}: {b} transfers, acknowledged {}, sent {}",
        acked.transfers,
        acked.transfers_sent
    );
}

/// Checks that the list at `key`, pushed 1, 2, 3... in order, holds at least the
/// `acked` pushes acknowledged and at most the `sent` ones, in order, none lost in
/// between.
fn check_pushes(conn: &mut redis::Connection, key: &str, acked: i64, sent: i64) {
    let list: Vec<i64> = conn.lrange(key, 0, -1).expect("lrange");
    assert!(
        list.len() as i64 >= acked && list.len() as i64 <= sent,
        "{key}: list of {}, acknowledged {acked}, sent {sent}",
        list.len(),
    );
    let expected: Vec<i64> = (1..=list.len() as i64).collect();
    assert_eq!(
        list, expected,
        "{key}: pushes out of order or lost in between"
    );
}

/// Kill -9 under concurrent load, `rounds` times on one directory; every round's
/// acknowledged writes (and every earlier round's) must be there after each restart.
fn kill9_rounds(fsync: &str, io_threads: &str, rounds: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ["--appendfsync", fsync, "--io-threads", io_threads];
    let threads = 8;
    let mut history: Vec<Vec<Acked>> = Vec::new();
    let mut mid_compaction = 0;
    for round in 0..rounds {
        let mut server = strata_in(dir.path(), &args);
        let port = server.port;
        if round % 2 == 1 {
            // Enough overwritten data that compacting it takes a while.
            let mut c = server.redis();
            for chunk in 0..8 {
                let mut pipe = redis::pipe();
                for i in 0..2_000 {
                    pipe.set(format!("bulk:{i}"), format!("{chunk}{}", "b".repeat(1000)))
                        .ignore();
                }
                let () = pipe.query(&mut c).expect("bulk load");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let strings = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, strings) = (stop.clone(), strings.clone());
                std::thread::spawn(move || load(port, round, t, &stop, &strings))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300 + 97 * round as u64 % 400));
        // On a busy machine the clients may not have started yet: the kill must
        // land under load, so wait (bounded) for some acknowledged writes.
        let deadline = Instant::now() + Duration::from_secs(30);
        while strings.load(Ordering::Relaxed) < 20 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Every other round is killed while a compaction runs.
        if round % 2 == 1 {
            let mut c = server.redis();
            let status: String = redis::cmd("BGREWRITEAOF")
                .query(&mut c)
                .expect("bgrewriteaof");
            assert!(
                status.starts_with("Background append only file rewriting"),
                "{status}"
            );
            if info_field(&mut c, "persistence", "aof_rewrite_in_progress") == "1" {
                mid_compaction += 1;
            }
        }
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<Acked> = workers
            .into_iter()
            .map(|w| w.join().expect("load thread"))
            .collect();
        assert!(
            acked.iter().map(|a| a.strings.len()).sum::<usize>() > 0,
            "round {round}: no write was acknowledged"
        );
        history.push(acked);
        let server = strata_in(dir.path(), &args);
        let mut conn = server.redis();
        for (r, acked) in history.iter().enumerate() {
            for (t, a) in acked.iter().enumerate() {
                verify(&mut conn, r, t, a);
            }
        }
        if round % 2 == 1 {
            let bulk: usize = redis::cmd("EXISTS")
                .arg((0..2_000).map(|i| format!("bulk:{i}")).collect::<Vec<_>>())
                .query(&mut conn)
                .expect("exists");
            assert_eq!(bulk, 2_000);
        }
    }
    assert!(
        rounds < 2 || mid_compaction > 0,
        "no round was killed during a compaction"
    );
}

#[test]
fn kill9_under_load_loses_no_acknowledged_write_with_always() {
    kill9_rounds("always", "1", 6);
}

/// With `everysec` a killed process loses nothing acknowledged either: records
/// reach the operating system before the reply (only a machine crash can lose
/// the last second) — with one I/O thread, whose park hook writes the log once
/// for the turn before the replies held to its end go out, and with two, whose
/// connections write it themselves.
#[test]
fn kill9_under_load_loses_no_acknowledged_write_with_everysec() {
    kill9_rounds("everysec", "1", 3);
    kill9_rounds("everysec", "2", 2);
}

fn store_segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut segs: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .expect("store")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    segs
}

fn strata_check(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata-check"))
        .args(args)
        .output()
        .expect("run strata-check");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Under `appendfsync always` the log's active segment keeps zeros written past
/// its records (its fsyncs then change no file size); under `everysec` it grows
/// with its records. A kill -9 leaves the zeros, which start-up trims.
#[test]
fn appendfsync_always_keeps_zeros_written_past_the_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = strata_in(dir.path(), &["--appendfsync", "always"]);
    let mut conn = server.redis();
    let _: () = conn.set("a", "1").expect("set");
    let active = || store_segments(dir.path()).pop().expect("a segment");
    let len = || std::fs::metadata(active()).map_or(0, |m| m.len());
    wait_for("zeros past the records", || len() >= 1 << 20);
    server.kill9();

    let mut server = strata_in(dir.path(), &["--appendfsync", "everysec"]);
    let mut conn = server.redis();
    let v: String = conn.get("a").expect("get");
    assert_eq!(v, "1");
    let first = store_segments(dir.path()).remove(0);
    let trimmed = std::fs::metadata(&first).expect("meta").len();
    assert!(trimmed < 1 << 20, "start-up left {trimmed} bytes");
    let _: () = conn.set("b", "2").expect("set");
    // Time for zeros to be written, were they asked for.
    std::thread::sleep(Duration::from_millis(100));
    let grown = len();
    assert!(grown < 1 << 20, "{grown} bytes under everysec");
    drop(conn);
    shutdown(&mut server);
    let (ok, text) = strata_check(&[dir.path().as_os_str()]);
    assert!(ok && !text.contains("zeros"), "{text}");
}

#[test]
fn torn_tails_are_truncated_and_corruption_stops_start_up_until_repaired() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ["--appendfsync", "always"];
    let mut server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    for i in 0..200 {
        let _: () = conn.set(format!("k{i}"), "v".repeat(100)).expect("set");
    }
    drop(conn);
    server.kill9();

    // A torn write at the end: the last record's end never replaced the zeros
    // that `always` keeps written past the records.
    let last = store_segments(dir.path()).pop().expect("a segment");
    let mut bytes = std::fs::read(&last).expect("read");
    let end = bytes.iter().rposition(|b| *b != 0).expect("records") + 1;
    assert!(bytes.len() > end, "zeros follow the records");
    let key_at = bytes[..end]
        .windows(4)
        .rposition(|w| w == b"k199")
        .expect("last key");
    bytes[end - 30..].fill(0);
    std::fs::write(&last, &bytes).expect("write");
    let (ok, text) = strata_check(&[dir.path().as_os_str()]);
    assert!(ok, "{text}");
    assert!(text.contains("torn"), "{text}");
    let mut server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    let n: usize = redis::cmd("DBSIZE").query(&mut conn).expect("dbsize");
    assert_eq!(n, 199);
    drop(conn);
    shutdown(&mut server);
    assert!(std::fs::metadata(&last).expect("meta").len() as usize <= key_at);

    // Damage in the middle of a segment: start-up stops, naming file and offset.
    let seg = store_segments(dir.path())
        .into_iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 10_000))
        .expect("the segment with the records");
    let mut bytes = std::fs::read(&seg).expect("read");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&seg, &bytes).expect("write");
    // Without hints the segment is scanned at start-up; with them the damaged value
    // is met when the dataset is loaded. Either way start-up fails.
    let _ = std::fs::remove_file(seg.with_extension("hint"));
    let mut server = spawn_strata(None, dir.path(), &args);
    let status = server.wait_exit(Duration::from_secs(20)).expect("exits");
    assert!(!status.success());
    let (ok, text) = strata_check(&[dir.path().as_os_str()]);
    assert!(!ok, "{text}");
    let name = seg
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(text.contains("DAMAGED") && text.contains(&name), "{text}");

    let (ok, text) = strata_check(&["--repair".as_ref(), dir.path().as_os_str()]);
    assert!(ok, "{text}");
    let (ok, text) = strata_check(&[dir.path().as_os_str()]);
    assert!(ok, "{text}");
    let server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    let n: usize = redis::cmd("DBSIZE").query(&mut conn).expect("dbsize");
    assert!(n > 0 && n < 199, "{n} keys after cutting the log half-way");
    for i in 0..n {
        let v: String = conn.get(format!("k{i}")).expect("the prefix is intact");
        assert_eq!(v.len(), 100);
    }
}

#[test]
fn loading_answers_loading_until_the_dataset_is_in() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = strata_in(dir.path(), &[]);
    let mut conn = server.redis();
    let n = 300_000;
    for chunk in 0..30 {
        let mut pipe = redis::pipe();
        for i in chunk * 10_000..(chunk + 1) * 10_000 {
            pipe.set(format!("key:{i}"), "v".repeat(200)).ignore();
        }
        let () = pipe.query(&mut conn).expect("pipeline");
    }
    drop(conn);
    shutdown(&mut server);
    let mut server = spawn_strata(None, dir.path(), &[]);
    let mut saw_loading = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "never finished loading");
        let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", server.port)) else {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        };
        drop(stream);
        let mut c = server.client();
        // INFO first: loading only goes from 1 to 0, so a GET refused after it
        // means INFO said loading:1, and INFO saying loading:0 means GET works.
        let Value::Bulk(info) = c.cmd(&["INFO", "persistence"]) else {
            panic!("INFO is allowed while loading")
        };
        let info = String::from_utf8_lossy(&info).into_owned();
        match c.cmd(&["GET", "key:1"]) {
            Value::Error(e) => {
                assert_eq!(e, b"LOADING Redis is loading the dataset in memory");
                assert!(info.contains("loading:1"), "{info}");
                saw_loading = true;
            }
            Value::Bulk(v) => {
                assert_eq!(v.len(), 200);
                break;
            }
            other => panic!("{other:?}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(saw_loading, "300,000 keys loaded before a client could ask");
    server.wait_ready();
    let mut c = server.client();
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Integer(n));
}

#[test]
fn bgrewriteaof_compacts_the_log_and_auto_rewrite_triggers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = strata_in(dir.path(), &["--auto-aof-rewrite-percentage", "0"]);
    let mut conn = server.redis();
    for round in 0..20 {
        let mut pipe = redis::pipe();
        for i in 0..500 {
            pipe.set(format!("k{i}"), format!("{round}:{}", "x".repeat(200)))
                .ignore();
        }
        let () = pipe.query(&mut conn).expect("pipeline");
    }
    let before: u64 = info_field(&mut conn, "persistence", "aof_current_size")
        .parse()
        .expect("size");
    let status: String = redis::cmd("BGREWRITEAOF")
        .query(&mut conn)
        .expect("rewrite");
    assert_eq!(status, "Background append only file rewriting started");
    wait_for("the rewrite", || {
        info_field(&mut conn, "persistence", "aof_rewrites") == "1"
    });
    assert_eq!(
        info_field(&mut conn, "persistence", "aof_rewrite_in_progress"),
        "0"
    );
    assert_eq!(
        info_field(&mut conn, "persistence", "aof_last_bgrewrite_status"),
        "ok"
    );
    let after: u64 = info_field(&mut conn, "persistence", "aof_current_size")
        .parse()
        .expect("size");
    assert!(after * 5 < before, "{before} bytes before, {after} after");
    let base: u64 = info_field(&mut conn, "persistence", "aof_base_size")
        .parse()
        .expect("size");
    assert!(base <= after);
    let expected = dataset(&mut conn);

    // Automatic compaction: the log doubled past the minimum size.
    redis::cmd("CONFIG")
        .arg(&[
            "SET",
            "auto-aof-rewrite-percentage",
            "100",
            "auto-aof-rewrite-min-size",
            "1mb",
        ])
        .exec(&mut conn)
        .expect("config set");
    for round in 0..10 {
        let mut pipe = redis::pipe();
        for i in 0..500 {
            pipe.set(format!("k{i}"), format!("{round}:{}", "y".repeat(200)))
                .ignore();
        }
        let () = pipe.query(&mut conn).expect("pipeline");
    }
    wait_for("the automatic rewrite", || {
        info_field(&mut conn, "persistence", "aof_rewrites") == "2"
    });
    let expected_now = dataset(&mut conn);
    assert_ne!(expected, expected_now);
    drop(conn);
    server.kill9();
    let server = strata_in(dir.path(), &[]);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), expected_now);
}

/// The keyspace lists where each key's records are; compaction asks it which records
/// are live and moves them while commands keep changing keys (chains of logged
/// operations, overwrites, deletes, expiry, SWAPDB and FLUSHDB among them).
#[test]
fn compactions_under_writes_keep_every_value() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = strata_in(dir.path(), &["--auto-aof-rewrite-percentage", "0"]);
    let port = server.port;
    let mut conn = server.redis();
    write_everything(&mut conn);
    // Long lists grow by logged RPUSH operations: chains of records.
    for i in 0..40 {
        let _: () = conn
            .rpush(format!("chain{i}"), (0..200).collect::<Vec<i32>>())
            .expect("rpush");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("url");
            let mut c = client.get_connection().expect("connect");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) || n < 2_000 {
                let i = n % 400;
                let mut pipe = redis::pipe();
                pipe.set(format!("s{i}"), format!("{n}{}", "v".repeat(64)))
                    .ignore()
                    .rpush(format!("chain{}", n % 40), n)
                    .ignore()
                    .hset(format!("h{}", n % 50), format!("f{i}"), n)
                    .ignore()
                    .del(format!("s{}", (n * 7) % 400))
                    .ignore()
                    .cmd("SET")
                    .arg(format!("t{i}"))
                    .arg(n)
                    .arg("PX")
                    .arg(1 + n % 30)
                    .ignore();
                if n.is_multiple_of(500) {
                    pipe.cmd("SWAPDB").arg(8).arg(9).ignore();
                    pipe.cmd("SELECT").arg(8).ignore();
                    pipe.set(format!("in8:{n}"), n).ignore();
                    pipe.cmd("SELECT").arg(7).ignore();
                    pipe.cmd("FLUSHDB").ignore();
                    pipe.set(format!("in7:{n}"), n).ignore();
                    pipe.cmd("SELECT").arg(0).ignore();
                }
                let () = pipe.query(&mut c).expect("writes");
                n += 1;
            }
            n
        })
    };
    for rewrite in 1..=3 {
        let status: String = redis::cmd("BGREWRITEAOF")
            .query(&mut conn)
            .expect("rewrite");
        assert_eq!(status, "Background append only file rewriting started");
        wait_for("the rewrite", || {
            info_field(&mut conn, "persistence", "aof_rewrites") == rewrite.to_string()
        });
        assert_eq!(
            info_field(&mut conn, "persistence", "aof_last_bgrewrite_status"),
            "ok"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().expect("writer");
    assert!(writes >= 2_000);
    // Keys with a short TTL are gone by now, on both sides of the restart.
    std::thread::sleep(Duration::from_millis(50));
    let expected = dataset(&mut conn);
    assert!(expected.len() > 250, "{} keys", expected.len());
    drop(conn);
    server.kill9();

    let mut server = strata_in(dir.path(), &[]);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), expected);
    // Compacting what was loaded keeps it too, across a clean restart.
    let _: String = redis::cmd("BGREWRITEAOF")
        .query(&mut conn)
        .expect("rewrite");
    wait_for("the rewrite", || {
        info_field(&mut conn, "persistence", "aof_rewrites") == "1"
    });
    assert_eq!(dataset(&mut conn), expected);
    drop(conn);
    shutdown(&mut server);
    let server = strata_in(dir.path(), &[]);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), expected);
}

/// A key that expired is removed from memory without a record: its old value stays
/// in the store. A new value under that key logged as an operation (SETRANGE far
/// into a new string is cheaper to replay than to write whole) must not be replayed
/// onto the old one.
#[test]
fn an_operation_on_a_recreated_key_never_builds_on_its_expired_value() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = strata_in(dir.path(), &[]);
    let mut conn = server.redis();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("old value")
        .arg("PX")
        .arg(20)
        .query(&mut conn)
        .expect("set");
    std::thread::sleep(Duration::from_millis(50));
    let len: usize = redis::cmd("SETRANGE")
        .arg("k")
        .arg(100_000)
        .arg("x")
        .query(&mut conn)
        .expect("setrange");
    assert_eq!(len, 100_001);
    let head: Vec<u8> = conn.getrange("k", 0, 8).expect("getrange");
    assert_eq!(head, vec![0u8; 9]);
    drop(conn);
    server.kill9();
    let server = strata_in(dir.path(), &[]);
    let mut conn = server.redis();
    let head: Vec<u8> = conn.getrange("k", 0, 8).expect("getrange");
    assert_eq!(
        head,
        vec![0u8; 9],
        "the expired value came back under the new one"
    );
    let len: usize = conn.strlen("k").expect("strlen");
    assert_eq!(len, 100_001);
}

/// A pipeline's consecutive pushes, pops, removals and plain ZADDs onto one key
/// are logged as one operation (see `effects::Batch::merge_last`): replayed, they must
/// build the same values in the same order, with the expiry each had.
#[test]
fn pipelined_runs_on_one_key_replay_in_order_after_kill9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = ["--appendfsync", "always"];
    let mut server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    // Big enough that each command logs its operation rather than the whole value.
    let elements: Vec<String> = (0..300).map(|i| format!("element-{i}")).collect();
    let _: () = conn.rpush("l", &elements).expect("rpush");
    let fields: Vec<(String, usize)> = (0..100).map(|i| (format!("field-{i}"), i)).collect();
    let _: () = conn.hset_multiple("h", &fields).expect("hset");
    let _: () = conn.sadd("s", &elements[..100]).expect("sadd");
    let members: Vec<(usize, &String)> = elements.iter().enumerate().collect();
    let _: () = conn.zadd_multiple("z", &members).expect("zadd");
    let mut pipe = redis::pipe();
    for i in 0..40 {
        pipe.cmd("LPUSH").arg("l").arg(format!("a{i}")).ignore();
        pipe.cmd("lpush")
            .arg("l")
            .arg(format!("b{i}"))
            .arg(format!("c{i}"))
            .ignore();
        pipe.cmd("RPUSH").arg("l").arg(format!("d{i}")).ignore();
        pipe.cmd("RPUSH").arg("l").arg(format!("e{i}")).ignore();
        pipe.cmd("HSET")
            .arg("h")
            .arg(format!("f{}", i % 7))
            .arg(i)
            .ignore();
        pipe.cmd("HSET")
            .arg("h")
            .arg(format!("f{}", i % 5))
            .arg(i * 10)
            .ignore();
        pipe.cmd("SADD")
            .arg("s")
            .arg(format!("m{}", i % 11))
            .ignore();
        pipe.cmd("SADD").arg("s").arg(format!("n{i}")).ignore();
        // Plain ZADDs merge; one with options between them ends the run, and its
        // option must not reach the pairs after it.
        pipe.cmd("ZADD")
            .arg("z")
            .arg(i * 3)
            .arg(format!("element-{}", i % 13))
            .ignore();
        pipe.cmd("zadd")
            .arg("z")
            .arg(-(i as i64))
            .arg(format!("new-{i}"))
            .arg("+inf")
            .arg(format!("element-{}", i % 3))
            .ignore();
        let option = ["GT", "LT", "NX", "XX"][i % 4];
        pipe.cmd("ZADD")
            .arg("z")
            .arg(option)
            .arg(i * 5)
            .arg(format!("element-{}", 100 + i))
            .ignore();
        pipe.cmd("ZADD")
            .arg("z")
            .arg(i)
            .arg(format!("element-{}", 200 + i))
            .ignore();
        // Removals merge too; SPOP is logged as the SREM of what it popped.
        pipe.cmd("SREM")
            .arg("s")
            .arg(format!("element-{i}"))
            .arg(format!("m{}", (i + 3) % 11))
            .ignore();
        pipe.cmd("SPOP").arg("s").ignore();
        pipe.cmd("SPOP").arg("s").arg(2).ignore();
        pipe.cmd("srem")
            .arg("s")
            .arg(format!("n{}", i / 2))
            .ignore();
        pipe.cmd("HDEL").arg("h").arg(format!("field-{i}")).ignore();
        pipe.cmd("HDEL")
            .arg("h")
            .arg(format!("f{}", (i + 1) % 7))
            .arg("nothing")
            .ignore();
        pipe.cmd("ZREM")
            .arg("z")
            .arg(format!("element-{}", 250 - i))
            .ignore();
        pipe.cmd("ZREM")
            .arg("z")
            .arg(format!("new-{}", i / 2))
            .ignore();
        if i == 20 {
            // A TTL in the middle of a run: the pushes after it carry it.
            pipe.cmd("PEXPIRE").arg("l").arg(600_000).ignore();
        }
    }
    // Runs of pops from each end (a run is logged as one pop of the summed count).
    for _ in 0..10 {
        pipe.cmd("LPOP").arg("l").ignore();
        pipe.cmd("lpop").arg("l").arg(2).ignore();
        pipe.cmd("RPOP").arg("l").ignore();
        pipe.cmd("RPOP").arg("l").ignore();
        pipe.cmd("LPOP").arg("l").ignore();
    }
    let () = pipe.query(&mut conn).expect("pipeline");
    let before = dataset(&mut conn);
    let len: usize = conn.llen("l").expect("llen");
    assert_eq!(len, 300 + 40 * 5 - 10 * 6);
    let score: f64 = conn.zscore("z", "element-1").expect("zscore");
    assert_eq!(score, f64::INFINITY);
    drop(conn);
    server.kill9();
    let server = strata_in(dir.path(), &args);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), before, "after kill -9");
    let ttl: i64 = conn.pttl("l").expect("pttl");
    assert!(ttl > 500_000, "{ttl}");
}

#[test]
fn snapshots_with_the_log_off_and_switching_it_at_run_time() {
    let dir = tempfile::tempdir().expect("temp dir");
    let off = ["--appendonly", "no"];
    let mut server = strata_in(dir.path(), &off);
    let mut conn = server.redis();
    let _: () = conn.set("a", "1").expect("set");
    let _: () = conn.rpush("l", &[1, 2, 3]).expect("rpush");
    let before: u64 = redis::cmd("LASTSAVE").query(&mut conn).expect("lastsave");
    // One change per element pushed, as Redis counts them.
    assert_eq!(
        info_field(&mut conn, "persistence", "rdb_changes_since_last_save"),
        "4"
    );
    std::thread::sleep(Duration::from_millis(1100));
    let () = redis::cmd("SAVE").query(&mut conn).expect("save");
    let after: u64 = redis::cmd("LASTSAVE").query(&mut conn).expect("lastsave");
    assert!(after > before);
    assert_eq!(
        info_field(&mut conn, "persistence", "rdb_changes_since_last_save"),
        "0"
    );
    assert_eq!(info_field(&mut conn, "persistence", "aof_enabled"), "0");
    // Not logged: lost by kill -9, while the snapshot is loaded at the next start.
    let _: () = conn.set("unsaved", "x").expect("set");
    drop(conn);
    server.kill9();
    let mut server = strata_in(dir.path(), &off);
    let mut conn = server.redis();
    assert_eq!(
        conn.get::<_, Option<String>>("a").expect("get").as_deref(),
        Some("1")
    );
    assert_eq!(conn.get::<_, Option<String>>("unsaved").expect("get"), None);

    // BGSAVE, then switching the log on: from then on every change is logged.
    let status: String = redis::cmd("BGSAVE").query(&mut conn).expect("bgsave");
    assert_eq!(status, "Background saving started");
    wait_for("the background save", || {
        info_field(&mut conn, "persistence", "rdb_bgsave_in_progress") == "0"
            && info_field(&mut conn, "persistence", "rdb_saves") == "1"
    });
    let _: () = conn.set("b", "2").expect("set");
    redis::cmd("CONFIG")
        .arg(&["SET", "appendonly", "yes"])
        .exec(&mut conn)
        .expect("config set");
    assert_eq!(info_field(&mut conn, "persistence", "aof_enabled"), "1");
    wait_for("the log to open", || {
        info_field(&mut conn, "persistence", "aof_rewrite_in_progress") == "0"
            && info_field(&mut conn, "persistence", "aof_rewrites") == "1"
    });
    let _: () = conn.rpush("l", 4).expect("rpush");
    let _: () = conn.set("c", "3").expect("set");
    let expected = dataset(&mut conn);
    drop(conn);
    server.kill9();
    let mut server = strata_in(dir.path(), &["--appendonly", "yes"]);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), expected);

    // Switching it off again: later changes are not logged.
    redis::cmd("CONFIG")
        .arg(&["SET", "appendonly", "no"])
        .exec(&mut conn)
        .expect("config set");
    assert_eq!(info_field(&mut conn, "persistence", "aof_enabled"), "0");
    wait_for("the log to close", || {
        let text: String = redis::cmd("INFO")
            .arg("persistence")
            .query(&mut conn)
            .expect("info");
        !text.contains("aof_current_size")
    });
    let _: () = conn.set("d", "4").expect("set");
    drop(conn);
    server.kill9();
    let server = strata_in(dir.path(), &off);
    let mut conn = server.redis();
    assert_eq!(dataset(&mut conn), expected);

    // SHUTDOWN SAVE writes a snapshot with the log off; SHUTDOWN NOSAVE does not.
    let _: () = conn.set("e", "5").expect("set");
    drop(conn);
    let mut server = server;
    let mut c = server.client();
    c.send(&[b"SHUTDOWN", b"SAVE"]);
    assert!(
        server
            .wait_exit(Duration::from_secs(20))
            .expect("exit")
            .success()
    );
    let mut server = strata_in(dir.path(), &off);
    let mut conn = server.redis();
    assert_eq!(
        conn.get::<_, Option<String>>("e").expect("get").as_deref(),
        Some("5")
    );
    let _: () = conn.set("f", "6").expect("set");
    drop(conn);
    let mut c = server.client();
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(
        server
            .wait_exit(Duration::from_secs(20))
            .expect("exit")
            .success()
    );
    let server = strata_in(dir.path(), &off);
    let mut conn = server.redis();
    assert_eq!(conn.get::<_, Option<String>>("f").expect("get"), None);
}

#[test]
fn persistence_commands_answer_as_redis() {
    let server = strata(&[]);
    let mut c = server.client();
    assert_eq!(
        c.cmd(&["BGSAVE", "NOW"]),
        Value::Error(b"ERR syntax error".to_vec())
    );
    assert_eq!(
        c.cmd(&["SAVE", "x"]),
        Value::Error(b"ERR wrong number of arguments for 'save' command".to_vec())
    );
    assert!(matches!(c.cmd(&["LASTSAVE"]), Value::Integer(t) if t > 1_700_000_000));
    assert_eq!(c.cmd(&["MULTI"]), Value::Simple(b"OK".to_vec()));
    assert_eq!(
        c.cmd(&["SAVE"]),
        Value::Error(b"ERR Command not allowed inside a transaction".to_vec())
    );
    c.cmd(&["DISCARD"]);
}

/// Unmounts a test file system when dropped.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Mounts a small tmpfs (needs root: CI runs as root and sets
/// `STRATA_REQUIRE_TMPFS=1`, so there the test cannot be skipped).
fn small_disk(at: &Path, size: &str) -> Option<Mounted> {
    std::fs::create_dir_all(at).expect("mount point");
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(at)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return Some(Mounted(at.to_path_buf()));
    }
    assert!(
        std::env::var("STRATA_REQUIRE_TMPFS").as_deref() != Ok("1"),
        "cannot mount a tmpfs (run as root)"
    );
    eprintln!("skipping: mounting a tmpfs needs root");
    None
}

#[test]
fn a_full_disk_refuses_writes_keeps_reads_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mnt = dir.path().join("disk");
    let Some(_mounted) = small_disk(&mnt, "4m") else {
        return;
    };
    // Space to give back later.
    let ballast = mnt.join("ballast");
    std::fs::write(&ballast, vec![0u8; 1 << 20]).expect("ballast");
    let args = ["--appendfsync", "always"];
    let mut server = strata_in(&mnt, &args);
    let value = "v".repeat(1000);
    let mut acked = Vec::new();
    let mut c = server.client();
    let mut refused = None;
    for i in 0..10_000 {
        c.send(&[b"SET", format!("k{i}").as_bytes(), value.as_bytes()]);
        match c.try_read() {
            Some(Value::Simple(ok)) if ok == b"OK" => acked.push(i),
            Some(Value::Error(e)) => {
                refused = Some(e);
                break;
            }
            // The write that hit the full disk is not acknowledged: its connection
            // closes.
            None => {
                c = server.client();
                match c.cmd(&["SET", "after", "x"]) {
                    Value::Error(e) => refused = Some(e),
                    other => panic!("a write was accepted on a full disk: {other:?}"),
                }
                break;
            }
            Some(other) => panic!("{other:?}"),
        }
    }
    let refused = String::from_utf8(refused.expect("the disk filled up")).expect("text");
    assert!(
        refused.starts_with("MISCONF Errors writing to the AOF file"),
        "{refused}"
    );
    assert!(
        acked.len() > 100,
        "{} writes before the disk filled",
        acked.len()
    );
    // Reads go on.
    assert_eq!(
        c.cmd(&["GET", "k0"]),
        Value::Bulk(value.as_bytes().to_vec())
    );
    let Value::Bulk(info) = c.cmd(&["INFO", "persistence"]) else {
        panic!("INFO")
    };
    assert!(String::from_utf8_lossy(&info).contains("aof_last_write_status:err"));
    // Space comes back: writes resume by themselves.
    std::fs::remove_file(&ballast).expect("free space");
    wait_for("writes to resume", || {
        matches!(c.cmd(&["SET", "resumed", "yes"]), Value::Simple(_))
    });
    for i in 0..50 {
        assert_eq!(
            c.cmd(&["SET", &format!("late{i}"), "x"]),
            Value::Simple(b"OK".to_vec())
        );
    }
    drop(c);
    server.kill9();
    let server = strata_in(&mnt, &args);
    let mut conn = server.redis();
    for i in &acked {
        let v: Option<String> = conn.get(format!("k{i}")).expect("get");
        assert_eq!(v.as_deref(), Some(value.as_str()), "k{i} was acknowledged");
    }
    for i in 0..50 {
        let v: Option<String> = conn.get(format!("late{i}")).expect("get");
        assert_eq!(v.as_deref(), Some("x"));
    }
}
