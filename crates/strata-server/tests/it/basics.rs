//! Commands through a real client library, expiry, HELLO 3, AUTH, SHUTDOWN.

use std::time::Duration;

use redis::Commands;
use strata_resp::value::Value;

use crate::support::strata;

#[test]
fn redis_crate_round_trip() {
    let server = strata(&[]);
    let mut con = server.redis();
    let _: () = con.set("a", 1).unwrap();
    let v: i64 = con.incr("a", 41).unwrap();
    assert_eq!(v, 42);
    let v: Option<String> = con.get("missing").unwrap();
    assert_eq!(v, None);
    let _: () = redis::cmd("MSET")
        .arg("x")
        .arg("1")
        .arg("y")
        .arg("2")
        .query(&mut con)
        .unwrap();
    let v: Vec<String> = con.mget(&["x", "y"]).unwrap();
    assert_eq!(v, vec!["1", "2"]);
    let err = redis::cmd("LPUSH")
        .arg("x")
        .arg("1")
        .query::<()>(&mut con)
        .unwrap_err();
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
}

#[test]
fn keys_expire_lazily_and_actively() {
    let server = strata(&["--hz", "100"]);
    let mut c = server.client();
    // One pipelined batch, so that the keys exist together before any expires.
    let mut batch = Vec::new();
    for i in 0..200 {
        let key = format!("t{i}");
        strata_resp::value::encode_request(
            [b"SET".as_slice(), key.as_bytes(), b"v", b"PX", b"1000"],
            &mut batch,
        );
    }
    strata_resp::value::encode_request([b"SET".as_slice(), b"keep", b"v"], &mut batch);
    strata_resp::value::encode_request([b"DBSIZE".as_slice()], &mut batch);
    c.send_raw(&batch);
    for _ in 0..201 {
        c.read();
    }
    assert_eq!(c.read().0, Value::Integer(201));
    std::thread::sleep(Duration::from_millis(1600));
    // Nobody touched the keys: the active cycle removed them.
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Integer(1));
    c.cmd(&["SET", "lazy", "v", "PX", "30"]);
    c.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd(&["GET", "lazy"]), Value::Null);
    assert_eq!(c.cmd(&["EXISTS", "lazy"]), Value::Integer(0));
}

#[test]
fn hello_3_switches_to_resp3() {
    let server = strata(&[]);
    let mut c = server.client();
    let Value::Map(fields) = c.cmd(&["HELLO", "3"]) else {
        panic!("HELLO 3 must reply with a map")
    };
    assert!(fields.contains(&(Value::Bulk(b"proto".to_vec()), Value::Integer(3))));
    assert_eq!(c.cmd(&["GET", "nothing"]), Value::Null);
    c.cmd(&["SET", "n", "1.5"]);
    assert_eq!(
        c.cmd(&["INCRBYFLOAT", "n", "1"]),
        Value::Bulk(b"2.5".to_vec())
    );
    assert!(matches!(c.cmd(&["CONFIG", "GET", "port"]), Value::Map(_)));
}

#[test]
fn requirepass_gates_commands() {
    let server = strata(&["--requirepass", "s3cret"]);
    let mut c = server.client();
    assert_eq!(
        c.cmd(&["GET", "x"]),
        Value::Error(b"NOAUTH Authentication required.".to_vec())
    );
    assert_eq!(
        c.cmd(&["AUTH", "wrong"]),
        Value::Error(b"WRONGPASS invalid username-password pair or user is disabled.".to_vec())
    );
    assert_eq!(c.cmd(&["AUTH", "s3cret"]), Value::Simple(b"OK".to_vec()));
    assert_eq!(c.cmd(&["GET", "x"]), Value::Null);
}

#[test]
fn shutdown_command_stops_the_server() {
    let mut server = strata(&[]);
    let mut c = server.client();
    c.cmd(&["SET", "a", "b"]);
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(c.read_to_close().is_empty());
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("server exits after SHUTDOWN");
    assert!(status.success());
}

#[test]
fn sigterm_stops_the_server_gracefully() {
    let mut server = strata(&[]);
    let mut c = server.client();
    c.cmd(&["PING"]);
    // Idle connections are woken and closed at once: the server does not wait out
    // its 5-second drain for them.
    let mut idle = server.client();
    idle.cmd(&["PING"]);
    let _silent = server.client();
    let status = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(server.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let status = server
        .wait_exit(Duration::from_secs(4))
        .expect("server exits on SIGTERM, before the drain times out");
    assert!(status.success());
    assert!(c.read_to_close().is_empty());
}

#[test]
fn info_has_redis_fields() {
    let server = strata(&[]);
    let mut c = server.client();
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["GET", "k"]);
    c.cmd(&["GET", "nope"]);
    let Value::Bulk(text) = c.cmd(&["INFO"]) else {
        panic!("INFO is a bulk string in RESP2")
    };
    let text = String::from_utf8(text).unwrap();
    for field in [
        "redis_version:",
        "tcp_port:",
        "connected_clients:",
        "used_memory:",
        "keyspace_hits:1",
        "keyspace_misses:1",
        "db0:keys=1,expires=0",
    ] {
        assert!(text.contains(field), "INFO lacks {field}:\n{text}");
    }
    let Value::Bulk(text) = c.cmd(&["INFO", "commandstats"]) else {
        panic!()
    };
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("cmdstat_get:calls=2"), "{text}");
}

#[test]
fn memory_usage_counts_the_value() {
    let server = strata(&[]);
    let mut c = server.client();
    c.cmd(&["SET", "small", "v"]);
    c.cmd(&["SET", "big", &"x".repeat(10_000)]);
    let Value::Integer(small) = c.cmd(&["MEMORY", "USAGE", "small"]) else {
        panic!()
    };
    let Value::Integer(big) = c.cmd(&["MEMORY", "USAGE", "big", "SAMPLES", "0"]) else {
        panic!()
    };
    // The entry and its share of its table's slots (a near-empty table here, whose
    // slots also list where the key is in the log).
    assert!((1..300).contains(&small), "{small}");
    assert!((10_000..10_300).contains(&big), "{big}");
    assert_eq!(c.cmd(&["MEMORY", "USAGE", "nokey"]), Value::Null);
    assert_eq!(
        c.cmd(&["MEMORY", "USAGE", "big", "SAMPLES", "-1"]),
        Value::Error(b"ERR syntax error".to_vec())
    );
}

/// The policy field (the 41st) of each of the process's threads, from /proc.
#[cfg(target_os = "linux")]
fn thread_policies(pid: u32) -> Vec<(String, u32)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let path = task.expect("task").path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue; // a thread that ended meanwhile
        };
        // The name in parentheses may hold spaces: count the fields after it.
        let (name, rest) = stat.split_once(") ").expect("stat");
        let name = name.split_once(" (").expect("stat").1.to_owned();
        let policy = rest.split(' ').nth(41 - 3).expect("policy field");
        found.push((name, policy.parse().expect("policy")));
    }
    found
}

/// Every thread of the server runs under `sched-policy`: SCHED_BATCH (3) by
/// default, SCHED_OTHER (0) with `normal`; the directive cannot change at run time.
#[cfg(target_os = "linux")]
#[test]
fn sched_policy_covers_every_thread() {
    for (args, want) in [(&[][..], 3), (&["--sched-policy", "normal"][..], 0)] {
        let server = strata(args);
        let mut c = server.client();
        assert_eq!(c.cmd(&["PING"]), Value::Simple("PONG".into()));
        let threads = thread_policies(server.pid());
        assert!(
            threads
                .iter()
                .filter(|(n, _)| n.starts_with("strata-io"))
                .count()
                >= 1,
            "{threads:?}"
        );
        for (name, policy) in &threads {
            assert_eq!(*policy, want, "thread {name} under {args:?}: {threads:?}");
        }
    }
    let server = strata(&[]);
    let mut c = server.client();
    let Value::Error(e) = c.cmd(&["CONFIG", "SET", "sched-policy", "normal"]) else {
        panic!("sched-policy changed at run time");
    };
    assert!(e.ends_with(b"can't set immutable config"), "{e:?}");
}

/// Under `appendfsync always` the threads run the normal policy (every reply waits
/// for an fsync, and their wake-ups are on its path); CONFIG SET appendfsync moves
/// every thread from one policy to the other before it replies.
#[cfg(target_os = "linux")]
#[test]
fn appendfsync_always_runs_the_normal_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = crate::support::strata_in(dir.path(), &["--appendfsync", "always"]);
    let mut c = server.client();
    let check = |c: &mut crate::support::Raw, want: u32| {
        assert_eq!(c.cmd(&["SET", "k", "v"]), Value::Simple("OK".into()));
        let threads = thread_policies(server.pid());
        assert!(threads.len() >= 4, "{threads:?}");
        assert!(
            threads.iter().all(|(_, p)| *p == want),
            "want {want}: {threads:?}"
        );
    };
    check(&mut c, 0);
    for (fsync, want) in [("everysec", 3), ("always", 0), ("no", 3)] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "appendfsync", fsync]),
            Value::Simple("OK".into())
        );
        check(&mut c, want);
    }
}
