//! Client management and limits: CLIENT LIST/KILL/SETNAME, timeout, maxclients, and
//! start-up errors.

use std::process::{Command, Stdio};
use std::time::Duration;

use strata_resp::value::Value;

use crate::support::strata;

fn text(v: Value) -> String {
    match v {
        Value::Bulk(b) | Value::Verbatim { text: b, .. } => {
            String::from_utf8(b).expect("UTF-8 text")
        }
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

#[test]
fn client_list_shows_names_and_kill_disconnects() {
    let server = strata(&[]);
    let mut a = server.client();
    let mut b = server.client();
    assert_eq!(
        a.cmd(&["CLIENT", "SETNAME", "alpha"]),
        Value::Simple(b"OK".to_vec())
    );
    let Value::Integer(b_id) = b.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    let list = text(a.cmd(&["CLIENT", "LIST"]));
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains("name=alpha"), "{list}");
    assert!(list.contains("cmd=client|list"), "{list}");
    let mine = text(a.cmd(&["CLIENT", "INFO"]));
    assert!(mine.starts_with("id=") && mine.contains("name=alpha") && mine.ends_with('\n'));
    assert_eq!(
        a.cmd(&["CLIENT", "KILL", "ID", &b_id.to_string()]),
        Value::Integer(1)
    );
    assert!(b.read_to_close().is_empty());
    assert_eq!(
        a.cmd(&["CLIENT", "KILL", "ID", &b_id.to_string()]),
        Value::Integer(0)
    );
    assert_eq!(
        a.cmd(&["CLIENT", "GETNAME"]),
        Value::Bulk(b"alpha".to_vec())
    );
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let server = strata(&["--timeout", "1"]);
    let mut c = server.client();
    assert_eq!(c.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
    let started = std::time::Instant::now();
    assert!(c.read_to_close().is_empty());
    assert!(started.elapsed() >= Duration::from_millis(900));
}

#[test]
fn maxclients_refuses_the_next_client() {
    let server = strata(&["--maxclients", "2"]);
    let mut a = server.client();
    let mut b = server.client();
    a.cmd(&["PING"]);
    b.cmd(&["PING"]);
    let mut c = server.client();
    assert_eq!(c.read_to_close(), b"-ERR max number of clients reached\r\n");
    drop(a);
    std::thread::sleep(Duration::from_millis(100));
    let mut d = server.client();
    assert_eq!(d.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
}

#[test]
fn bad_configuration_stops_start_up() {
    for args in [
        &["--nosuchdirective", "1"][..],
        &["--port", "notanumber"],
        &["--maxmemory", "lots"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_strata-server"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run strata-server");
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(args[0].trim_start_matches('-')),
            "{args:?}: {err}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("strata.conf");
    std::fs::write(&conf, "# comment\nport 6390\nhz abc\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .arg(&conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn config_set_changes_behaviour_at_run_time() {
    let server = strata(&[]);
    let mut c = server.client();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "requirepass", "pw"]),
        Value::Simple(b"OK".to_vec())
    );
    let mut other = server.client();
    assert_eq!(
        other.cmd(&["GET", "x"]),
        Value::Error(b"NOAUTH Authentication required.".to_vec())
    );
    assert_eq!(other.cmd(&["AUTH", "pw"]), Value::Simple(b"OK".to_vec()));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]),
        Value::Simple(b"OK".to_vec())
    );
    let big = "x".repeat(600 * 1024);
    c.cmd(&["SET", "s", &big]);
    let err = c.cmd(&["APPEND", "s", &big]);
    assert_eq!(
        err,
        Value::Error(b"ERR string exceeds maximum allowed size (proto-max-bulk-len)".to_vec())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "loglevel", "debug"]),
        Value::Simple(b"OK".to_vec())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "loglevel"]),
        Value::Array(vec![
            Value::Bulk(b"loglevel".to_vec()),
            Value::Bulk(b"debug".to_vec())
        ])
    );
}

#[test]
fn config_rewrite_writes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("strata.conf");
    std::fs::write(&conf, "# my server\nhz 10\n").unwrap();
    let server = crate::support::strata_with_file(Some(&conf), &[]);
    let mut c = server.client();
    c.cmd(&["CONFIG", "SET", "hz", "20"]);
    c.cmd(&["CONFIG", "SET", "maxclients", "500"]);
    assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), Value::Simple(b"OK".to_vec()));
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.starts_with("# my server\nhz 20\n"), "{text}");
    assert!(text.contains("maxclients 500"), "{text}");
}
