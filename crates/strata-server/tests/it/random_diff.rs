//! Random differential test: seeded streams of random commands, sent to a real Redis
//! and to strata side by side and compared reply by reply.
//!
//! A generator draws commands over a small key space (twenty keys, some binary, so that
//! commands interact), with integer-looking and binary values, expiries, several
//! databases, every option of every command strata implements, and their error paths:
//! wrong arity, unknown commands and subcommands, bad numbers, syntax errors. Replies
//! must be byte-identical, except where Redis leaves the order unspecified (KEYS, SCAN,
//! CONFIG GET, COMMAND INFO's subcommands) or the value is inherently different
//! (CLIENT ID, TIME, INFO, RANDOMKEY, HELLO's id, TTLs read a few milliseconds apart):
//! those are compared structurally. The last third of every stream runs under RESP3.
//!
//! Timing is kept out of the comparison by construction. Every relative expiry the
//! generator sets comes from its own slot on a grid 1,000 seconds apart, and absolute
//! ones sit half-way between slots, so no GT or LT comparison depends on which
//! millisecond a server ran a command in. Keys set to expire in the past, and the few
//! short TTLs, are read right away (after a sleep for the short ones), so that both
//! servers delete them before anything counts keys.
//!
//! Replaying: a mismatch names its seed and step. `STRATA_DIFF_SEED=<n>` runs one seed
//! (any number), `STRATA_DIFF_STEPS=<n>` sets the stream length, `STRATA_DIFF_MAX=<n>`
//! reports up to n mismatches per seed instead of stopping at the first (later ones may
//! follow from the first), and `STRATA_DIFF_TRACE=1` prints every command and reply.

mod compare;
mod generator;

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use strata_commands::Registry;
use strata_resp::value::Value;

use crate::persistence::{dataset, info_field};
use crate::support::{Proc, Raw, redis_available, redis_server, strata_in};
use compare::{Cmp, Reply, compare};
use generator::{Gen, MENU, NOT_DRAWN, SEEDS, STEPS, Step, cmd};

/// The two connections of a seed.
struct Pair {
    redis: Raw,
    ours: Raw,
}

impl Pair {
    fn send(&mut self, args: &[Vec<u8>]) -> (Reply, Reply) {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        self.redis.send(&args);
        self.ours.send(&args);
        (self.redis.read(), self.ours.read())
    }

    fn send_each(&mut self, redis: &[&[u8]], ours: &[&[u8]]) -> (Reply, Reply) {
        self.redis.send(redis);
        self.ours.send(ours);
        (self.redis.read(), self.ours.read())
    }
}

/// Prints where a stream was when something panicked (a closed connection, a reply
/// that would not decode), so that the failure can be replayed.
struct Whereabouts {
    seed: u64,
    index: usize,
    command: String,
}

impl Drop for Whereabouts {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "panicked at seed {} step {}: {}",
                self.seed, self.index, self.command
            );
        }
    }
}

fn show(args: &[Vec<u8>]) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| {
            let text = String::from_utf8_lossy(&a[..a.len().min(200)]).into_owned();
            if a.len() > 200 {
                format!("{text:?}... ({} bytes)", a.len())
            } else {
                format!("{text:?}")
            }
        })
        .collect();
    parts.join(" ")
}

fn show_reply(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut s: String = text.chars().take(600).collect();
    if text.len() > 600 {
        s.push_str("...");
    }
    format!("{s:?}")
}

struct Options {
    steps: usize,
    max_mismatches: usize,
    trace: bool,
}

/// Runs one seed's stream; returns its mismatches.
fn run_seed(
    seed: u64,
    redis: &Proc,
    ours: &Proc,
    registry: &Registry,
    opts: &Options,
) -> Vec<String> {
    let mut pair = Pair {
        redis: redis.client(),
        ours: ours.client(),
    };
    let (a, b) = pair.send(&cmd(&["FLUSHALL"]));
    assert_eq!(
        (a.1.as_slice(), b.1.as_slice()),
        (&b"+OK\r\n"[..], &b"+OK\r\n"[..])
    );
    let t0 = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64;
    let mut stream = Gen::new(seed, t0, registry);
    let mut recent: VecDeque<String> = VecDeque::new();
    let mut mismatches = Vec::new();
    let resp3_from = opts.steps * 2 / 3;
    for index in 0.. {
        // The stream ends once the steps a command queued (the read after a short
        // TTL) have run, so that no key is left about to expire.
        if index >= opts.steps && !stream.has_pending() {
            break;
        }
        let step = if index == resp3_from {
            Step::Cmd(cmd(&["HELLO", "3"]), Cmp::Hello)
        } else {
            stream.next()
        };
        let mut here = Whereabouts {
            seed,
            index,
            command: format!("{step:?}"),
        };
        // Compactions run now and then under the stream (strata only): the store's
        // index is the keyspace, which every command's records must keep right.
        if index % 500 == 250 {
            pair.ours.send(&[b"BGREWRITEAOF"]);
            let _ = pair.ours.read();
        }
        let outcome = match &step {
            Step::Sleep(ms) => {
                std::thread::sleep(Duration::from_millis(*ms));
                continue;
            }
            Step::Cmd(args, cmp) => {
                here.command = show(args);
                let (r, s) = pair.send(args);
                let mut result = compare(*cmp, &r, &s);
                if *cmp == Cmp::RandomKey {
                    result = random_key(&mut pair, &r, &s);
                }
                if opts.trace {
                    eprintln!("[{seed}:{index}] {} -> {}", here.command, show_reply(&r.1));
                }
                (here.command.clone(), result, r.1, s.1)
            }
            Step::Pipeline(cmds) => {
                here.command = format!("pipeline of {}", cmds.len());
                let (shown, result, r, s) = pipeline(&mut pair, cmds);
                if opts.trace {
                    eprintln!("[{seed}:{index}] {shown} -> {}", show_reply(&r));
                }
                (shown, result, r, s)
            }
            Step::Scan {
                cursor,
                opts: scan_opts,
            } => {
                let mut args = vec![b"SCAN".to_vec(), cursor.clone()];
                args.extend(scan_opts.iter().cloned());
                here.command = format!("full iteration of {}", show(&args));
                let (result, r, s) = full_scan(&mut pair, &args);
                if opts.trace {
                    eprintln!("[{seed}:{index}] {} -> {}", here.command, show_reply(&r));
                }
                (here.command.clone(), result, r, s)
            }
        };
        let (shown, result, r, s) = outcome;
        if let Err(why) = result {
            let history: Vec<String> = recent.iter().cloned().collect();
            let (r, s) = (show_reply(&r), show_reply(&s));
            mismatches.push(format!(
                "seed {seed} step {index}: {shown}\n  {why}\n  redis:  {r}\n  strata: {s}\n  \
                 after:\n    {}",
                history.join("\n    ")
            ));
            if mismatches.len() >= opts.max_mismatches {
                return mismatches;
            }
        }
        recent.push_back(format!("{shown} -> {}", show_reply(&r)));
        if recent.len() > 12 {
            recent.pop_front();
        }
    }
    // Every seed ends with QUIT: its reply, then the connection closes.
    let (r, s) = pair.send(&cmd(&["QUIT"]));
    if r.1 != s.1 {
        mismatches.push(format!(
            "seed {seed} QUIT: redis {}, strata {}",
            show_reply(&r.1),
            show_reply(&s.1)
        ));
    } else {
        let rest = pair.ours.read_to_close();
        if !rest.is_empty() {
            mismatches.push(format!(
                "seed {seed}: strata wrote {} after QUIT",
                show_reply(&rest)
            ));
        }
    }
    mismatches
}

/// Sends the commands in one write to each server, then compares the replies in
/// order; returns the first that differs, or the last.
fn pipeline(
    pair: &mut Pair,
    cmds: &[Vec<Vec<u8>>],
) -> (String, Result<(), String>, Vec<u8>, Vec<u8>) {
    let mut bytes = Vec::new();
    for args in cmds {
        strata_resp::value::encode_request(args.iter().map(Vec::as_slice), &mut bytes);
    }
    pair.redis.send_raw(&bytes);
    pair.ours.send_raw(&bytes);
    let replies: Vec<(Reply, Reply)> = cmds
        .iter()
        .map(|_| (pair.redis.read(), pair.ours.read()))
        .collect();
    let mut last = (String::new(), Ok(()), Vec::new(), Vec::new());
    for (i, (args, (r, s))) in cmds.iter().zip(replies).enumerate() {
        let shown = format!("pipelined {}/{}: {}", i + 1, cmds.len(), show(args));
        let result = compare(Cmp::Exact, &r, &s);
        let failed = result.is_err();
        last = (shown, result, r.1, s.1);
        if failed {
            break;
        }
    }
    last
}

/// RANDOMKEY: nil on both, or each server's key exists on the other.
fn random_key(pair: &mut Pair, r: &Reply, s: &Reply) -> Result<(), String> {
    match (&r.0, &s.0) {
        (Value::Null, Value::Null) => Ok(()),
        (Value::Bulk(a), Value::Bulk(b)) => {
            let (x, y) = pair.send_each(&[b"EXISTS", b], &[b"EXISTS", a]);
            if x.0 == Value::Integer(1) && y.0 == Value::Integer(1) {
                Ok(())
            } else {
                Err("RANDOMKEY returned a key the other server lacks".to_string())
            }
        }
        _ => Err("RANDOMKEY replies differ in type".to_string()),
    }
}

/// Iterates SCAN to the end on each server and compares the keys seen. The first
/// call's reply is compared exactly when either server rejects it.
fn full_scan(pair: &mut Pair, args: &[Vec<u8>]) -> (Result<(), String>, Vec<u8>, Vec<u8>) {
    let (r, s) = pair.send(args);
    if r.0.is_error() || s.0.is_error() {
        let result = compare(Cmp::Exact, &r, &s);
        return (result, r.1, s.1);
    }
    let redis_keys = scan_rest(&mut pair.redis, args, r.0);
    let our_keys = scan_rest(&mut pair.ours, args, s.0);
    let result = match (&redis_keys, &our_keys) {
        (Ok(a), Ok(b)) if a == b => Ok(()),
        (Ok(_), Ok(_)) => Err("SCAN returned different keys".to_string()),
        (Err(e), _) => Err(format!("redis: {e}")),
        (_, Err(e)) => Err(format!("strata: {e}")),
    };
    let list = |k: &Result<BTreeSet<Vec<u8>>, String>| -> Vec<u8> {
        match k {
            Ok(keys) => {
                let keys: Vec<String> = keys
                    .iter()
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .collect();
                format!("keys {keys:?}").into_bytes()
            }
            Err(e) => e.clone().into_bytes(),
        }
    };
    (result, list(&redis_keys), list(&our_keys))
}

fn scan_rest(conn: &mut Raw, args: &[Vec<u8>], first: Value) -> Result<BTreeSet<Vec<u8>>, String> {
    let mut keys = BTreeSet::new();
    let mut reply = first;
    for _ in 0..10_000 {
        let Value::Array(parts) = &reply else {
            return Err(format!("not an array: {reply:?}"));
        };
        let [Value::Bulk(cursor), Value::Array(batch)] = parts.as_slice() else {
            return Err(format!("malformed SCAN reply: {reply:?}"));
        };
        for k in batch {
            let Value::Bulk(k) = k else {
                return Err(format!("a key that is not a bulk string: {k:?}"));
            };
            keys.insert(k.clone());
        }
        if cursor.as_slice() == b"0" {
            return Ok(keys);
        }
        let mut next: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        next[1] = cursor;
        conn.send(&next);
        reply = conn.read().0;
    }
    Err("SCAN did not finish in 10,000 calls".to_string())
}

/// Checks that the generator draws every command and subcommand strata implements,
/// so that a command added to the table is added here too.
fn check_coverage(registry: &Registry) {
    let drawn: BTreeSet<&str> = MENU
        .iter()
        .map(|(n, _)| *n)
        .chain(NOT_DRAWN.iter().map(|(n, _)| *n))
        .collect();
    let mut missing = Vec::new();
    for c in registry.commands() {
        // Collection commands have random streams of their own (diff_list.rs, ...).
        use strata_commands::spec::Group;
        if matches!(
            c.group,
            Group::List | Group::Hash | Group::Set | Group::SortedSet
        ) {
            continue;
        }
        let leaf = c.subcommands.is_empty() || c.handler.is_some();
        if leaf && !drawn.contains(c.name) {
            missing.push(c.name.to_string());
        }
        for s in c.subcommands {
            let full = s.full_name();
            if !drawn.contains(full.as_str()) {
                missing.push(full);
            }
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "the random stream draws no {missing:?}: add them to MENU"
    );
}

/// What a stream left must be there after a compaction and a `kill -9`: returns the
/// restarted server.
fn survives_restart(seed: u64, mut ours: Proc, dir: &std::path::Path) -> Proc {
    let mut conn = ours.redis();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while info_field(&mut conn, "persistence", "aof_rewrite_in_progress") == "1" {
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed}: rewrite stuck"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = dataset(&mut conn);
    drop(conn);
    ours.kill9();
    let ours = strata_in(dir, &[]);
    let after = dataset(&mut ours.redis());
    assert_eq!(
        after, before,
        "seed {seed}: the dataset changed across kill -9"
    );
    ours
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    Some(
        text.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {text:?}")),
    )
}

#[test]
fn random_streams_match_redis() {
    if !redis_available() {
        return;
    }
    let registry = strata_commands::registry();
    check_coverage(&registry);
    let seeds: Vec<u64> = match env_number("STRATA_DIFF_SEED") {
        Some(seed) => vec![seed],
        None => SEEDS.to_vec(),
    };
    let opts = Options {
        steps: env_number("STRATA_DIFF_STEPS").map_or(STEPS, |n| n as usize),
        max_mismatches: env_number("STRATA_DIFF_MAX").map_or(1, |n| n.max(1) as usize),
        trace: std::env::var("STRATA_DIFF_TRACE").as_deref() == Ok("1"),
    };
    let mut redis = redis_server(&[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut ours = strata_in(dir.path(), &[]);
    let mut report = Vec::new();
    for seed in seeds {
        report.extend(run_seed(seed, &redis, &ours, &registry, &opts));
        ours = survives_restart(seed, ours, dir.path());
        // Both start the next seed as fresh servers: Redis without what a restart
        // loses (scripts, settings), strata without its stored function libraries.
        redis = redis_server(&[]);
        ours.client().cmd(&["FUNCTION", "FLUSH"]);
    }
    assert!(
        report.is_empty(),
        "{} mismatches (replay one seed with STRATA_DIFF_SEED):\n{}",
        report.len(),
        report.join("\n\n")
    );
}
