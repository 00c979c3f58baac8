//! Lazy freeing: UNLINK and the `lazyfree-lazy-*` directives hand big values to the
//! background thread, which INFO's `lazyfree_pending_objects` and `lazyfreed_objects`
//! count; small values and the directives' defaults free in place.

use std::time::{Duration, Instant};

use strata_resp::value::Value;

use crate::support::{Raw, info_u64, strata};

/// `lazyfreed_objects` from INFO memory.
fn lazyfreed(c: &mut Raw) -> u64 {
    info_u64(c, "memory", "lazyfreed_objects")
}

/// Waits (bounded) until `lazyfreed_objects` reaches `n`; returns the last value seen.
fn wait_lazyfreed(c: &mut Raw, n: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = lazyfreed(c);
        if seen >= n || Instant::now() >= deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Fills `key` with `n` elements by `cmd` (RPUSH, SADD...), 1,000 per call, pipelined.
fn fill(c: &mut Raw, cmd: &str, key: &str, n: usize) {
    let calls = n.div_ceil(1000);
    for call in 0..calls {
        let members: Vec<String> = (call * 1000..((call + 1) * 1000).min(n))
            .map(|i| format!("member:{i}"))
            .collect();
        let mut args: Vec<&[u8]> = vec![cmd.as_bytes(), key.as_bytes()];
        args.extend(members.iter().map(|m| m.as_bytes()));
        c.send(&args);
    }
    for _ in 0..calls {
        let (v, _) = c.read();
        assert!(matches!(v, Value::Integer(_)), "{v:?}");
    }
}

#[test]
fn unlink_frees_a_million_elements_in_the_background() {
    let server = strata(&[]);
    let mut a = server.client();
    let mut b = server.client();
    fill(&mut a, "RPUSH", "big", 1_000_000);
    assert_eq!(a.cmd(&["LLEN", "big"]), Value::Integer(1_000_000));
    let before = lazyfreed(&mut a);
    a.send(&[b"UNLINK", b"big"]);
    // Another client is served meanwhile.
    assert_eq!(b.cmd(&["PING"]), Value::Simple(b"PONG".to_vec()));
    assert_eq!(a.read().0, Value::Integer(1));
    assert_eq!(b.cmd(&["EXISTS", "big"]), Value::Integer(0));
    assert_eq!(wait_lazyfreed(&mut b, before + 1), before + 1);
    // A small value is freed in place.
    a.cmd(&["RPUSH", "small", "x"]);
    assert_eq!(a.cmd(&["UNLINK", "small"]), Value::Integer(1));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(lazyfreed(&mut a), before + 1);
}

#[test]
fn lazyfree_directives_choose_what_is_freed_in_the_background() {
    let server = strata(&["--hz", "100"]);
    let mut c = server.client();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "lazyfree-lazy-user-del"]),
        Value::Array(vec![
            Value::Bulk(b"lazyfree-lazy-user-del".to_vec()),
            Value::Bulk(b"no".to_vec()),
        ])
    );
    // DEL frees in place by default, in the background with lazyfree-lazy-user-del.
    fill(&mut c, "SADD", "s", 1000);
    assert_eq!(c.cmd(&["DEL", "s"]), Value::Integer(1));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(lazyfreed(&mut c), 0);
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]);
    fill(&mut c, "SADD", "s", 1000);
    assert_eq!(c.cmd(&["DEL", "s"]), Value::Integer(1));
    assert_eq!(wait_lazyfreed(&mut c, 1), 1);
    // Overwriting a big value: lazyfree-lazy-server-del.
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-server-del", "yes"]);
    fill(&mut c, "SADD", "s", 1000);
    assert_eq!(c.cmd(&["SET", "s", "x"]), Value::Simple(b"OK".to_vec()));
    assert_eq!(wait_lazyfreed(&mut c, 2), 2);
    // Expiry, found by a lookup and by the active cycle: lazyfree-lazy-expire.
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-expire", "yes"]);
    fill(&mut c, "SADD", "e1", 1000);
    fill(&mut c, "SADD", "e2", 1000);
    c.cmd(&["PEXPIRE", "e1", "1"]);
    c.cmd(&["PEXPIRE", "e2", "1"]);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd(&["EXISTS", "e1"]), Value::Integer(0));
    assert_eq!(wait_lazyfreed(&mut c, 4), 4);
    // A big value evicted by maxmemory: lazyfree-lazy-eviction.
    c.cmd(&["CONFIG", "SET", "lazyfree-lazy-eviction", "yes"]);
    c.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    fill(&mut c, "SADD", "victim", 1000);
    let Value::Integer(size) = c.cmd(&["MEMORY", "USAGE", "victim"]) else {
        panic!("MEMORY USAGE")
    };
    // A limit no amount of eviction can meet: the victim (the only big key; "s" is
    // one small string, freed in place) goes whatever the allocator's own noise
    // (thread caches, buffers of background work) does to the figure meanwhile.
    // Half the victim's size under the figure read here was not always passed on a
    // loaded machine: the figure fell first.
    assert!(size > 10_000, "{size}");
    c.cmd(&["CONFIG", "SET", "maxmemory", "1"]);
    // Commands (and the cron) evict once the memory figure shows the limit passed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.cmd(&["EXISTS", "victim"]) != Value::Integer(0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(c.cmd(&["EXISTS", "victim"]), Value::Integer(0));
    c.cmd(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(wait_lazyfreed(&mut c, 5), 5);
    // CONFIG RESETSTAT clears the count.
    c.cmd(&["CONFIG", "RESETSTAT"]);
    assert_eq!(lazyfreed(&mut c), 0);
}
