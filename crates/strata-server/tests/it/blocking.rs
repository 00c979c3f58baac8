//! Blocking pops: wake-ups, first-come first-served order, timeouts, clean-up.

use std::time::{Duration, Instant};

use strata_resp::value::Value;

use crate::support::{Raw, strata};

fn bulk(s: &str) -> Value {
    Value::Bulk(s.as_bytes().to_vec())
}

fn pair(k: &str, v: &str) -> Value {
    Value::Array(vec![bulk(k), bulk(v)])
}

/// Waits until the server reports `n` blocked clients.
fn wait_blocked(c: &mut Raw, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let Value::Bulk(info) = c.cmd(&["INFO", "clients"]) else {
            panic!("INFO is a bulk string")
        };
        let text = String::from_utf8_lossy(&info).into_owned();
        if text.contains(&format!("blocked_clients:{n}\r")) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never saw {n} blocked clients:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn blpop_wakes_on_push_and_serves_waiters_in_order() {
    let server = strata(&[]);
    let mut ctl = server.client();
    let mut waiters: Vec<Raw> = Vec::new();
    for i in 0..3 {
        let mut w = server.client();
        w.send(&[b"BLPOP", b"q", b"0"]);
        wait_blocked(&mut ctl, i + 1);
        waiters.push(w);
    }
    assert_eq!(
        ctl.cmd(&["RPUSH", "q", "a", "b", "c", "d"]),
        Value::Integer(4)
    );
    for (w, want) in waiters.iter_mut().zip(["a", "b", "c"]) {
        assert_eq!(w.read().0, pair("q", want));
    }
    // The element nobody waited for stays.
    assert_eq!(
        ctl.cmd(&["LRANGE", "q", "0", "-1"]),
        Value::Array(vec![bulk("d")])
    );
    wait_blocked(&mut ctl, 0);
}

#[test]
fn fractional_timeouts_reply_null() {
    let server = strata(&[]);
    let mut c = server.client();
    let started = Instant::now();
    assert_eq!(c.cmd(&["BLPOP", "nothing", "0.2"]), Value::NullArray);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(190) && took < Duration::from_secs(3),
        "{took:?}"
    );
    c.cmd(&["HELLO", "3"]);
    assert_eq!(c.cmd(&["BRPOP", "nothing", "0.05"]), Value::Null);
    assert_eq!(
        c.cmd(&["BLPOP", "nothing", "-1"]),
        Value::Error(b"ERR timeout is negative".to_vec())
    );
}

#[test]
fn several_keys_and_the_first_with_data_wins() {
    let server = strata(&[]);
    let mut ctl = server.client();
    let mut w = server.client();
    w.send(&[b"BRPOP", b"k1", b"k2", b"k3", b"5"]);
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&["LPUSH", "k2", "x"]);
    assert_eq!(w.read().0, pair("k2", "x"));
}

#[test]
fn a_disconnected_waiter_takes_nothing() {
    let server = strata(&[]);
    let mut ctl = server.client();
    {
        let mut w = server.client();
        w.send(&[b"BLPOP", b"gone", b"0"]);
        wait_blocked(&mut ctl, 1);
    }
    wait_blocked(&mut ctl, 0);
    ctl.cmd(&["RPUSH", "gone", "kept"]);
    assert_eq!(ctl.cmd(&["LLEN", "gone"]), Value::Integer(1));
}

#[test]
fn exec_and_rename_wake_waiters() {
    let server = strata(&[]);
    let mut ctl = server.client();
    let mut w = server.client();
    w.send(&[b"BLPOP", b"tx", b"0"]);
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&["MULTI"]);
    ctl.cmd(&["RPUSH", "tx", "one"]);
    ctl.cmd(&["RPUSH", "tx", "two"]);
    assert!(matches!(ctl.cmd(&["EXEC"]), Value::Array(_)));
    assert_eq!(w.read().0, pair("tx", "one"));
    assert_eq!(
        ctl.cmd(&["LRANGE", "tx", "0", "-1"]),
        Value::Array(vec![bulk("two")])
    );

    w.send(&[b"BLPOP", b"renamed", b"0"]);
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&["RPUSH", "tmp", "moved"]);
    ctl.cmd(&["RENAME", "tmp", "renamed"]);
    assert_eq!(w.read().0, pair("renamed", "moved"));
}

#[test]
fn blocking_commands_do_not_block_inside_multi() {
    let server = strata(&[]);
    let mut c = server.client();
    c.cmd(&["MULTI"]);
    c.cmd(&["BLPOP", "empty", "0"]);
    c.cmd(&["BLMOVE", "empty", "d", "LEFT", "RIGHT", "0"]);
    assert_eq!(
        c.cmd(&["EXEC"]),
        Value::Array(vec![Value::NullArray, Value::Null])
    );
}

#[test]
fn blmove_chains_to_the_next_waiter() {
    let server = strata(&[]);
    let mut ctl = server.client();
    let mut mover = server.client();
    let mut popper = server.client();
    mover.send(&[b"BLMOVE", b"src", b"dst", b"LEFT", b"RIGHT", b"0"]);
    wait_blocked(&mut ctl, 1);
    popper.send(&[b"BLPOP", b"dst", b"0"]);
    wait_blocked(&mut ctl, 2);
    ctl.cmd(&["RPUSH", "src", "hop"]);
    assert_eq!(mover.read().0, bulk("hop"));
    assert_eq!(popper.read().0, pair("dst", "hop"));
    assert_eq!(ctl.cmd(&["EXISTS", "src", "dst"]), Value::Integer(0));
}

#[test]
fn pipelined_commands_wait_behind_a_blocked_one() {
    let server = strata(&[]);
    let mut ctl = server.client();
    let mut w = server.client();
    w.send_raw(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nz\r\n$1\r\n0\r\nPING\r\n");
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&["RPUSH", "z", "v"]);
    assert_eq!(w.read().0, pair("z", "v"));
    assert_eq!(w.read().0, Value::Simple(b"PONG".to_vec()));
}

#[test]
fn a_killed_waiter_is_released() {
    let server = strata(&[]);
    let mut ctl = server.client();
    let mut w = server.client();
    let Value::Integer(id) = w.cmd(&["CLIENT", "ID"]) else {
        panic!()
    };
    w.send(&[b"BLPOP", b"k", b"0"]);
    wait_blocked(&mut ctl, 1);
    assert_eq!(
        ctl.cmd(&["CLIENT", "KILL", "ID", &id.to_string()]),
        Value::Integer(1)
    );
    assert!(w.read_to_close().is_empty());
    wait_blocked(&mut ctl, 0);
}

#[test]
fn bzpopmin_wakes_on_zadd() {
    let server = strata(&[]);
    let mut ctl = server.client();
    let mut w = server.client();
    w.send(&[b"BZPOPMIN", b"z", b"0"]);
    wait_blocked(&mut ctl, 1);
    ctl.cmd(&["ZADD", "z", "2", "b", "1", "a"]);
    assert_eq!(
        w.read().0,
        Value::Array(vec![bulk("z"), bulk("a"), bulk("1")])
    );
    assert_eq!(ctl.cmd(&["ZCARD", "z"]), Value::Integer(1));
}
