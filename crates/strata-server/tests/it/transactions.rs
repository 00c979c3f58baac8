//! MULTI/EXEC/WATCH: Redis's replies, atomicity across shards, no deadlocks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::Commands;

use crate::differential::compare;
use crate::support::strata;

#[test]
fn transaction_replies_match_redis() {
    compare(&[
        &["MULTI"],
        &["SET", "a", "1"],
        &["NOSUCH"],
        &["GET", "a", "b"],
        &["EXEC"],
        &["EXEC"],
        &["DISCARD"],
        &["MULTI"],
        &["MULTI"],
        &["WATCH", "x"],
        &["SET", "a", "1"],
        &["INCR", "a"],
        &["GET", "a"],
        &["EXEC"],
        &["MULTI"],
        &["SHUTDOWN"],
        &["PING"],
        &["EXEC"],
        &["WATCH", "w"],
        &["SET", "w", "1"],
        &["MULTI"],
        &["PING"],
        &["EXEC"],
        &["WATCH", "w"],
        &["MULTI"],
        &["GET", "w"],
        &["EXEC"],
        &["WATCH", "w2"],
        &["UNWATCH"],
        &["SET", "w2", "x"],
        &["MULTI"],
        &["SELECT", "1"],
        &["SET", "in1", "x"],
        &["EXEC"],
        &["GET", "in1"],
        &["SELECT", "1"],
        &["GET", "in1"],
        &["SELECT", "0"],
        &["WATCH"],
        &["MULTI"],
        &["DISCARD"],
        &["WATCH", "f"],
        &["SET", "f", "1"],
        &["FLUSHALL"],
        &["MULTI"],
        &["EXEC"],
        &["SET", "g", "1"],
        &["WATCH", "g"],
        &["SWAPDB", "0", "1"],
        &["MULTI"],
        &["EXEC"],
        &["MULTI"],
        &["KEYS", "*"],
        &["DBSIZE"],
        &["EXEC"],
    ]);
}

#[test]
fn watch_sees_expiry_and_rename() {
    let server = strata(&[]);
    let mut c = server.client();
    let mut other = server.client();
    c.cmd(&["SET", "e", "v", "PX", "100"]);
    c.cmd(&["WATCH", "e"]);
    std::thread::sleep(Duration::from_millis(200));
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), strata_resp::value::Value::NullArray);
    c.cmd(&["SET", "r", "v"]);
    c.cmd(&["WATCH", "r2"]);
    other.cmd(&["RENAME", "r", "r2"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert_eq!(c.cmd(&["EXEC"]), strata_resp::value::Value::NullArray);
    // Untouched keys do not abort.
    c.cmd(&["WATCH", "quiet"]);
    other.cmd(&["SET", "noisy", "1"]);
    c.cmd(&["MULTI"]);
    c.cmd(&["PING"]);
    assert!(matches!(
        c.cmd(&["EXEC"]),
        strata_resp::value::Value::Array(_)
    ));
}

/// 50 clients each complete 200 optimistic increments with WATCH/MULTI/EXEC retries:
/// the totals are exact.
#[test]
fn concurrent_watch_loops_keep_exact_totals() {
    let server = Arc::new(strata(&[]));
    let retries = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..50)
        .map(|t| {
            let server = server.clone();
            let retries = retries.clone();
            std::thread::spawn(move || {
                let mut con = server.redis();
                for i in 0..200 {
                    let key = format!("counter{}", (t + i) % 4);
                    loop {
                        let _: () = redis::cmd("WATCH").arg(&key).query(&mut con).unwrap();
                        let v: Option<i64> = con.get(&key).unwrap();
                        let result: Option<(i64,)> = redis::pipe()
                            .atomic()
                            .set(&key, v.unwrap_or(0) + 1)
                            .ignore()
                            .incr("total", 1)
                            .query(&mut con)
                            .unwrap();
                        if result.is_some() {
                            break;
                        }
                        retries.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut con = server.redis();
    let sum: i64 = (0..4)
        .map(|k| con.get::<_, i64>(format!("counter{k}")).unwrap())
        .sum();
    assert_eq!(sum, 50 * 200);
    assert_eq!(con.get::<_, i64>("total").unwrap(), 50 * 200);
    eprintln!("retries: {}", retries.load(Ordering::Relaxed));
}

/// Transactions and multi-key commands over overlapping shards, from many clients at
/// once, finish (no deadlock) and leave consistent pairs.
#[test]
fn overlapping_transactions_do_not_deadlock() {
    let server = Arc::new(strata(&["--shards", "4"]));
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let server = server.clone();
            std::thread::spawn(move || {
                let mut con = server.redis();
                for i in 0..300u64 {
                    let (a, b) = (
                        format!("k{}", (t + i) % 13),
                        format!("k{}", (t * 7 + i) % 13),
                    );
                    match i % 4 {
                        0 => {
                            let _: () = redis::pipe()
                                .atomic()
                                .set(&a, i)
                                .set(&b, i)
                                .query(&mut con)
                                .unwrap();
                        }
                        1 => {
                            let _: () = con.mset(&[(&b, i), (&a, i)]).unwrap();
                        }
                        2 => {
                            let _: Vec<Option<u64>> = con.mget(&[&a, &b]).unwrap();
                        }
                        _ => {
                            let _: () = redis::pipe()
                                .atomic()
                                .cmd("KEYS")
                                .arg("k1*")
                                .cmd("DEL")
                                .arg(&a)
                                .query(&mut con)
                                .unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    for t in threads {
        assert!(
            std::time::Instant::now() < deadline,
            "transactions took too long"
        );
        t.join().unwrap();
    }
}

#[test]
fn rejected_exec_aborts_with_the_reason() {
    compare(&[
        &["EXEC", "x"],
        &["MULTI"],
        &["SET", "a", "1"],
        &["EXEC", "extra"],
        &["EXEC"],
        &["GET", "a"],
        &["WATCH", "a"],
        &["SET", "a", "2"],
        &["MULTI"],
        &["EXEC"],
    ]);
}
