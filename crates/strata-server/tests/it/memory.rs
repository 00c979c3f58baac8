//! `maxmemory`: eviction under each policy, the OOM refusal, eviction through the
//! normal deletion paths (events, WATCH, the log), LFU counters, and MEMORY — with
//! Redis 7.0's replies where they can be compared.

use std::time::{Duration, Instant};

use strata_resp::value::Value;

use crate::diff_pubsub::Duo;
use crate::differential::compare;
use crate::support::{Raw, info_u64, strata, strata_in};

const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

fn used(c: &mut Raw) -> u64 {
    info_u64(c, "memory", "used_memory")
}

fn evicted(c: &mut Raw) -> u64 {
    info_u64(c, "stats", "evicted_keys")
}

fn ok(c: &mut Raw, args: &[&str]) {
    assert_eq!(c.cmd(args), Value::Simple(b"OK".to_vec()), "{args:?}");
}

/// Writes `n` keys `{prefix}{i}` of `size` bytes, pipelined 100 at a time, with a TTL
/// of `ttl_base + i` seconds when given; calls `each_batch` after every batch.
fn fill(
    c: &mut Raw,
    prefix: &str,
    n: usize,
    size: usize,
    ttl_base: Option<u64>,
    mut each_batch: impl FnMut(&mut Raw),
) {
    let value = vec![b'v'; size];
    for start in (0..n).step_by(100) {
        let end = (start + 100).min(n);
        for i in start..end {
            let key = format!("{prefix}{i}");
            match ttl_base {
                Some(t) => {
                    let ttl = (t + i as u64).to_string();
                    c.send(&[b"SET", key.as_bytes(), &value, b"EX", ttl.as_bytes()]);
                }
                None => c.send(&[b"SET", key.as_bytes(), &value]),
            }
        }
        for _ in start..end {
            let (reply, _) = c.read();
            assert!(!reply.is_error(), "{reply:?}");
        }
        each_batch(c);
    }
}

/// Polls until `done` holds, for at most `limit`.
fn wait_for(c: &mut Raw, limit: Duration, mut done: impl FnMut(&mut Raw) -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done(c) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done(c)
}

#[test]
fn eviction_holds_the_limit_under_writes_for_each_policy() {
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        let server = strata(&["--appendonly", "no", "--maxmemory-policy", policy]);
        let mut c = server.client();
        let limit = used(&mut c) + (2 << 20);
        ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        let ttl = policy.starts_with("volatile").then_some(3600);
        // Three times the room the limit leaves, checked as it goes: over by at
        // most what a few batches allocate before the allocator's figure is read.
        let tolerance = limit / 20;
        let mut worst = 0;
        fill(&mut c, "k:", 6000, 1000, ttl, |c| {
            worst = worst.max(used(c));
        });
        assert!(
            worst <= limit + tolerance,
            "{policy}: used {worst} > limit {limit}"
        );
        assert!(evicted(&mut c) > 1000, "{policy}: too few evictions");
        let Value::Integer(keys) = c.cmd(&["DBSIZE"]) else {
            panic!("DBSIZE")
        };
        assert!((500..6000).contains(&keys), "{policy}: {keys} keys left");
    }
}

#[test]
fn volatile_policies_spare_keys_without_ttl_then_refuse() {
    let server = strata(&["--appendonly", "no", "--maxmemory-policy", "volatile-lru"]);
    let mut c = server.client();
    fill(&mut c, "p:", 200, 100, None, |_| {});
    let limit = used(&mut c) + (1 << 20);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    fill(&mut c, "v:", 3000, 1000, Some(3600), |_| {});
    assert!(evicted(&mut c) > 500);
    let keys: Vec<String> = (0..200).map(|i| format!("p:{i}")).collect();
    let mut exists = vec!["EXISTS"];
    exists.extend(keys.iter().map(String::as_str));
    assert_eq!(c.cmd(&exists), Value::Integer(200));
    // With no volatile key left to evict, writes are refused and reads go on.
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    let refused = wait_for(&mut c, Duration::from_secs(10), |c| {
        c.cmd(&["SET", "x", "y"]) == Value::Error(OOM.as_bytes().to_vec())
    });
    assert!(refused, "SET never refused");
    // While evictions were still under way (each command's share is time-bound)
    // the SET may have gone through; DEL needs no memory.
    c.cmd(&["DEL", "x"]);
    assert_eq!(c.cmd(&["DBSIZE"]), Value::Integer(200));
    assert_eq!(c.cmd(&exists), Value::Integer(200));
    assert!(matches!(c.cmd(&["GET", "p:7"]), Value::Bulk(_)));
}

#[test]
fn volatile_ttl_evicts_the_nearest_expiries_first() {
    let server = strata(&["--appendonly", "no", "--maxmemory-policy", "volatile-ttl"]);
    let mut c = server.client();
    let n = 2000;
    fill(&mut c, "t:", n, 1000, Some(10_000), |_| {});
    let limit = used(&mut c) - (1 << 20);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    assert!(wait_for(&mut c, Duration::from_secs(10), |c| used(c) <= limit));
    let gone: Vec<usize> = (0..n)
        .filter(|i| c.cmd(&["EXISTS", &format!("t:{i}")]) == Value::Integer(0))
        .collect();
    assert!(gone.len() > 300, "only {} evicted", gone.len());
    // Nearly all of the evicted keys are among the ones with the shortest TTLs.
    let nearest = gone.iter().filter(|&&i| i < gone.len() * 3 / 2).count();
    assert!(
        nearest * 100 >= gone.len() * 90,
        "{nearest} of {} evicted keys were among the nearest expiries",
        gone.len()
    );
}

#[test]
fn lowering_maxmemory_at_run_time_evicts_down() {
    let server = strata(&["--appendonly", "no", "--maxmemory-policy", "allkeys-lru"]);
    let mut c = server.client();
    fill(&mut c, "k:", 3000, 1000, None, |_| {});
    let limit = used(&mut c) - (3 << 19);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    // No command needs the memory: the cron evicts.
    std::thread::sleep(Duration::from_millis(500));
    assert!(evicted(&mut c) > 0);
    assert!(wait_for(&mut c, Duration::from_secs(5), |c| used(c) <= limit));
}

#[test]
fn eviction_sends_the_evicted_event_and_dirties_watchers() {
    let server = strata(&[
        "--appendonly",
        "no",
        "--maxmemory-policy",
        "allkeys-random",
        "--notify-keyspace-events",
        "Ee",
    ]);
    let mut sub = server.client();
    sub.cmd(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    let mut watcher = server.client();
    let mut c = server.client();
    ok(&mut c, &["SET", "victim", "v"]);
    ok(&mut watcher, &["WATCH", "victim"]);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    assert!(wait_for(&mut c, Duration::from_secs(5), |c| {
        c.cmd(&["DBSIZE"]) == Value::Integer(0)
    }));
    ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let message = sub.read().0;
    assert_eq!(
        message,
        Value::Array(vec![
            Value::Bulk(b"message".to_vec()),
            Value::Bulk(b"__keyevent@0__:evicted".to_vec()),
            Value::Bulk(b"victim".to_vec()),
        ])
    );
    ok(&mut watcher, &["MULTI"]);
    assert_eq!(
        watcher.cmd(&["SET", "victim", "again"]),
        Value::Simple(b"QUEUED".to_vec())
    );
    assert_eq!(watcher.cmd(&["EXEC"]), Value::NullArray);
    assert_eq!(c.cmd(&["EXISTS", "victim"]), Value::Integer(0));
}

/// Evictions happen before a command takes its shards, and EXEC is one command: a
/// transaction whose own writes push memory over the limit, while another client
/// keeps memory there, reads back what it wrote. A key space of about forty values
/// makes each random eviction likely to hit the transaction's keys, were it to run
/// between the queued commands.
#[test]
fn evictions_never_split_a_transaction() {
    let server = strata(&["--appendonly", "no", "--maxmemory-policy", "allkeys-random"]);
    let mut c = server.client();
    let limit = used(&mut c) + (2 << 20);
    ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    let mut writer = server.client();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let load = std::thread::spawn(move || {
        let mut round = 0;
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            fill(
                &mut writer,
                &format!("w{round}:"),
                100,
                50_000,
                None,
                |_| {},
            );
            round += 1;
        }
    });
    let big = vec![b'x'; 50_000];
    let before = evicted(&mut c);
    for i in 0..200 {
        let small = i.to_string();
        ok(&mut c, &["MULTI"]);
        for args in [
            &[&b"SET"[..], b"t:a", &big][..],
            &[b"SET", b"t:b", small.as_bytes()],
            &[b"GET", b"t:a"],
            &[b"GET", b"t:b"],
        ] {
            c.send(args);
            assert_eq!(c.read().0, Value::Simple(b"QUEUED".to_vec()));
        }
        assert_eq!(
            c.cmd(&["EXEC"]),
            Value::Array(vec![
                Value::Simple(b"OK".to_vec()),
                Value::Simple(b"OK".to_vec()),
                Value::Bulk(big.clone()),
                Value::Bulk(small.into_bytes()),
            ]),
            "transaction {i}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.join().expect("writer");
    assert!(
        evicted(&mut c) > before + 200,
        "too few evictions to test anything"
    );
}

#[test]
fn evictions_are_logged_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let before: Vec<Vec<u8>> = {
        let mut server = strata_in(dir.path(), &["--maxmemory-policy", "allkeys-lru"]);
        let mut c = server.client();
        fill(&mut c, "k:", 3000, 2000, None, |_| {});
        let limit = used(&mut c) - (2 << 20);
        ok(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        assert!(wait_for(&mut c, Duration::from_secs(10), |c| evicted(c) > 0));
        ok(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
        let keys = sorted_keys(&mut c);
        assert!(keys.len() < 3000, "nothing evicted");
        assert!(keys.len() > 1000, "only {} keys left", keys.len());
        c.send(&[b"SHUTDOWN"]);
        assert!(server.wait_exit(Duration::from_secs(20)).is_some());
        keys
    };
    let server = strata_in(dir.path(), &[]);
    let mut c = server.client();
    assert_eq!(sorted_keys(&mut c), before);
}

/// With the log on, the memory the store holds for its own bookkeeping (the index,
/// with a tombstone for every evicted key until the next compaction) is left out of
/// the eviction figure, as Redis leaves out its AOF
/// buffers: a sustained write load keeps the dataset near the limit instead of
/// evicting everything.
#[test]
fn with_the_log_on_a_write_load_keeps_a_full_dataset() {
    let dir = tempfile::tempdir().expect("temp dir");
    let limit: u64 = 24 << 20;
    let mut server = strata_in(
        dir.path(),
        &[
            "--maxmemory",
            &limit.to_string(),
            "--maxmemory-policy",
            "allkeys-lru",
        ],
    );
    let mut c = server.client();
    fill(&mut c, "w:", 150_000, 100, None, |_| {});
    let counted = used(&mut c) - info_u64(&mut c, "memory", "mem_not_counted_for_evict");
    assert!(counted <= limit + limit / 20, "{counted} bytes counted");
    assert!(evicted(&mut c) > 0, "the load did not reach the limit");
    let Value::Integer(held) = c.cmd(&["DBSIZE"]) else {
        panic!("DBSIZE answers an integer")
    };
    assert!(
        held >= 20_000,
        "only {held} keys held under a {limit}-byte limit"
    );
    c.send(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
}

fn sorted_keys(c: &mut Raw) -> Vec<Vec<u8>> {
    let Value::Array(keys) = c.cmd(&["KEYS", "*"]) else {
        panic!("KEYS")
    };
    let mut keys: Vec<Vec<u8>> = keys
        .into_iter()
        .filter_map(|k| k.as_bytes().map(<[u8]>::to_vec))
        .collect();
    keys.sort();
    keys
}

#[test]
fn oom_replies_match_redis() {
    compare(&[
        &["SET", "a", "1"],
        &["CONFIG", "SET", "maxmemory", "1"],
        &["SET", "b", "1"],
        &["APPEND", "a", "x"],
        &["GET", "a"],
        &["DEL", "a"],
        &["MULTI"],
        &["GET", "a"],
        &["SET", "a", "1"],
        &["EXEC"],
        &["MULTI"],
        &["DISCARD"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["SET", "b", "1"],
    ]);
}

#[test]
fn scripts_over_the_limit_match_redis() {
    compare(&[
        &["SET", "x", "1"],
        &["CONFIG", "SET", "maxmemory", "1"],
        &["EVAL", "return redis.call('set', 'x', 'y')", "0"],
        &["EVAL", "return redis.pcall('set', 'x', 'y')", "0"],
        &["EVAL", "return redis.call('get', 'x')", "0"],
        &["EVAL", "#!lua\nreturn redis.call('set', 'x', 'y')", "0"],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get', 'x')",
            "0",
        ],
        &[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set', 'x', 'z')",
            "0",
        ],
        &["CONFIG", "SET", "maxmemory", "0"],
        &["GET", "x"],
    ]);
}

#[test]
fn exec_of_a_denyoom_queue_over_the_limit_matches_redis() {
    let Some(mut d) = Duo::start(&[], 2) else {
        return;
    };
    d.script(&[
        (0, &["MULTI"]),
        (0, &["SET", "k", "v"]),
        (1, &["CONFIG", "SET", "maxmemory", "1"]),
        (0, &["EXEC"]),
        (0, &["MULTI"]),
        (1, &["CONFIG", "SET", "maxmemory", "0"]),
        (0, &["GET", "k"]),
        (1, &["CONFIG", "SET", "maxmemory", "1"]),
        (0, &["EXEC"]),
        (1, &["CONFIG", "SET", "maxmemory", "0"]),
    ]);
    d.finish();
}

#[test]
fn lfu_counters_and_object_match_redis() {
    let Some(mut d) = Duo::start(&["--maxmemory-policy", "allkeys-lfu"], 1) else {
        return;
    };
    d.script(&[
        (0, &["SET", "k", "v"]),
        (0, &["OBJECT", "FREQ", "k"]),
        (0, &["GET", "k"]),
        (0, &["OBJECT", "FREQ", "k"]),
        (0, &["OBJECT", "FREQ", "missing"]),
        (0, &["OBJECT", "IDLETIME", "k"]),
        (0, &["OBJECT", "IDLETIME", "missing"]),
        (0, &["CONFIG", "SET", "maxmemory-policy", "volatile-lfu"]),
        (0, &["OBJECT", "FREQ", "k"]),
        (0, &["CONFIG", "SET", "lfu-log-factor", "0"]),
        // Not integers: Redis shares the objects of small ones between keys.
        (0, &["SET", "n", "a"]),
        (0, &["APPEND", "n", "b"]),
        (0, &["APPEND", "n", "c"]),
        (0, &["OBJECT", "FREQ", "n"]),
        (0, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        (0, &["OBJECT", "FREQ", "k"]),
        // (OBJECT IDLETIME of a key just set is 0 or 1 in Redis, whose LRU clock
        // is a cached second: not compared.)
        (0, &["SET", "k", "v"]),
    ]);
    d.finish();
}

/// MEMORY PURGE gives freed pages back at once: after 60 MB of values are
/// deleted, the resident set shrinks by most of them without waiting for the
/// allocator's decay (ten seconds by default).
#[test]
fn memory_purge_returns_freed_pages() {
    let server = strata(&["--appendonly", "no", "--jemalloc-bg-thread", "no"]);
    let mut c = server.client();
    let before = info_u64(&mut c, "memory", "used_memory_rss");
    let n = 60_000;
    fill(&mut c, "p:", n, 1000, None, |_| {});
    let loaded = info_u64(&mut c, "memory", "used_memory_rss");
    assert!(loaded > before + 50_000_000, "{before} -> {loaded}");
    for start in (0..n).step_by(1000) {
        let keys: Vec<String> = (start..start + 1000).map(|i| format!("p:{i}")).collect();
        let mut args = vec!["DEL"];
        args.extend(keys.iter().map(String::as_str));
        assert_eq!(c.cmd(&args), Value::Integer(1000));
    }
    ok(&mut c, &["MEMORY", "PURGE"]);
    let purged = info_u64(&mut c, "memory", "used_memory_rss");
    let freed = loaded - before;
    assert!(
        purged < loaded - freed / 2,
        "rss {before} -> {loaded} -> {purged} after PURGE"
    );
}

#[test]
fn memory_subcommand_errors_and_help_match_redis() {
    compare(&[
        &["MEMORY"],
        &["MEMORY", "FOO"],
        &["MEMORY", "HELP"],
        &["MEMORY", "HELP", "x"],
        &["MEMORY", "USAGE"],
        &["MEMORY", "USAGE", "nokey"],
        &["MEMORY", "USAGE", "nokey", "SAMPLES"],
        &["MEMORY", "USAGE", "nokey", "SAMPLES", "-1"],
        &["MEMORY", "STATS", "x"],
        &["MEMORY", "DOCTOR", "x"],
        &["MEMORY", "MALLOC-STATS", "x"],
        &["MEMORY", "PURGE", "x"],
        &["MEMORY", "PURGE"],
        &["COMMAND", "INFO", "memory|stats", "memory|doctor"],
        &["COMMAND", "INFO", "memory|malloc-stats", "memory|purge"],
        &["COMMAND", "INFO", "memory|usage", "memory|help"],
    ]);
}

/// The names (not the figures) of MEMORY STATS, and the doctor's verdict on an
/// empty instance, as Redis gives them.
#[test]
fn memory_stats_shape_and_doctor_match_redis() {
    if !crate::support::redis_available() {
        return;
    }
    let redis = crate::support::redis_server(&[]);
    let ours = strata(&[]);
    let names = |c: &mut Raw| -> Vec<String> {
        c.cmd(&["SET", "k", "v"]);
        let Value::Array(items) = c.cmd(&["MEMORY", "STATS"]) else {
            panic!("MEMORY STATS")
        };
        items
            .iter()
            .step_by(2)
            .map(|v| String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned())
            .collect()
    };
    let (mut r, mut s) = (redis.client(), ours.client());
    assert_eq!(names(&mut s), names(&mut r));
    assert_eq!(
        s.cmd(&["MEMORY", "DOCTOR"]),
        r.cmd(&["MEMORY", "DOCTOR"]),
        "an almost empty instance"
    );
    let Value::Array(stats) = s.cmd(&["MEMORY", "STATS"]) else {
        panic!("MEMORY STATS")
    };
    let field = |name: &str| {
        stats
            .iter()
            .position(|v| v.as_bytes() == Some(name.as_bytes()))
            .and_then(|i| stats.get(i + 1).cloned())
    };
    assert_eq!(field("keys.count"), Some(Value::Integer(1)));
    assert!(matches!(field("total.allocated"), Some(Value::Integer(n)) if n > 0));
    let Value::Bulk(text) = s.cmd(&["MEMORY", "MALLOC-STATS"]) else {
        panic!("MALLOC-STATS")
    };
    assert!(text.starts_with(b"___ Begin jemalloc statistics ___"));
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("\nAllocated: "), "{text}");
    assert!(text.contains("bins:"), "{text}");
    assert!(
        text.trim_end().ends_with("--- End jemalloc statistics ---"),
        "{text}"
    );
    // The options the server binary exports to jemalloc are in force.
    assert!(text.contains("opt.cache_oblivious: false"), "{text}");
    assert!(text.contains("opt.tcache_max: 8192"), "{text}");
}
