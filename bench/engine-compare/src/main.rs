//! The seed engine's workload against strata-engine and redb, in one run.
//!
//! Sections (run all by default, or name some on the command line):
//!
//! - `writes`: 32-byte keys, 1,024-byte values, for each fsync policy, with
//!   one writer thread and with many; redb with `Durability::None` and
//!   `Durability::Immediate` (one transaction per write) for comparison.
//! - `reads`: random point reads of the keys written: a first pass on one
//!   thread, then one and two threads.
//! - `open`: time to open a store of 10,000,000 small keys, with and without
//!   hint files.
//! - `latency`: put and get p50/p99/p99.9 with and without a compaction running.
//!
//! For profiling, `writes write-only` and `writes write-many-only` run only the
//! one-writer or the many-writer write without fsync.
//!
//! Every phase starts after a `sync` of the machine, so that one phase's
//! writeback does not run in the next.
//!
//! Flags: `--quick` divides every count by 10; `--dir PATH` chooses where the
//! stores are created (default: a temporary directory).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use redb::{Database, Durability, ReadableDatabase, TableDefinition};
use strata_engine::{Engine, FsyncPolicy, Options};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");
const VALUE_LEN: usize = 1024;
const SEGMENT: u64 = 64 << 20;

struct Config {
    scale: u64,
    root: PathBuf,
    sections: Vec<String>,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut quick = false;
    let mut keep = false;
    let mut dir = None;
    let mut sections = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--keep" => keep = true,
            "--dir" => dir = args.next().map(PathBuf::from),
            "--bench" => {}
            other => sections.push(other.to_owned()),
        }
    }
    if sections.is_empty() {
        sections = ["writes", "reads", "open", "latency"]
            .map(String::from)
            .to_vec();
    }
    let tmp = tempfile::Builder::new()
        .prefix("engine-compare")
        .tempdir_in(dir.unwrap_or_else(std::env::temp_dir))
        .expect("temporary directory");
    let config = Config {
        scale: if quick { 10 } else { 1 },
        root: tmp.path().to_path_buf(),
        sections,
    };
    let want = |s: &str| config.sections.iter().any(|x| x == s);
    if want("writes") || want("reads") {
        writes_and_reads(&config, want("writes"), want("reads"));
    }
    if want("open") {
        open_time(&config);
    }
    if want("latency") {
        latency(&config);
    }
    if want("reopen") {
        // Opens the store a previous `open --keep` run left, for profiling.
        let dir = PathBuf::from(std::env::var("STORE").expect("STORE names the store to reopen"));
        let start = Instant::now();
        let engine = Engine::open(&dir, strata_options(FsyncPolicy::Never)).expect("open");
        println!(
            "reopen: {} keys in {:.2} s",
            engine.stats().live_keys,
            start.elapsed().as_secs_f64()
        );
    }
    if keep {
        println!("kept {}", tmp.keep().display());
    }
}

/// A 32-byte key: a scrambled prefix so that keys arrive in no order.
fn key(i: u64) -> [u8; 32] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mixed = i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17);
    let mut out = [0u8; 32];
    for (n, word) in [mixed, i].into_iter().enumerate() {
        for d in 0..16 {
            out[n * 16 + d] = HEX[((word >> (60 - 4 * d)) & 0xf) as usize];
        }
    }
    out
}

fn value(i: u64) -> Vec<u8> {
    let mut v = vec![0u8; VALUE_LEN];
    for (j, b) in v.iter_mut().enumerate() {
        *b = (i as usize).wrapping_add(j) as u8;
    }
    v
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn rate(ops: u64, elapsed: Duration) -> f64 {
    ops as f64 / elapsed.as_secs_f64()
}

/// A new empty directory for one phase, on a settled machine: what the phases
/// before it left dirty is written back first, so that the kernel's writeback
/// of their bytes does not run during (and slow down) this phase.
fn fresh(config: &Config, name: &str) -> PathBuf {
    let dir = config.root.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create dir");
    settle();
    dir
}

/// Writes every dirty page of the machine back (the `sync` command).
fn settle() {
    let _ = std::process::Command::new("sync").status();
}

fn strata_options(policy: FsyncPolicy) -> Options {
    Options::default()
        .with_fsync(policy)
        .with_segment_size(256 << 20)
        .with_compaction(None)
}

/// Writes keys `0..count` from `threads` threads; returns the elapsed time.
fn strata_write(engine: &Arc<Engine>, count: u64, threads: u64) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut i = t;
                let v = value(t);
                while i < count {
                    engine.put(&key(i), &v).expect("put");
                    i += threads;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
    start.elapsed()
}

fn redb_write(db: &Arc<Database>, count: u64, threads: u64, durability: Durability) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut i = t;
                let v = value(t);
                while i < count {
                    let mut txn = db.begin_write().expect("begin");
                    txn.set_durability(durability).expect("durability");
                    {
                        let mut table = txn.open_table(TABLE).expect("table");
                        table.insert(&key(i)[..], &v[..]).expect("insert");
                    }
                    txn.commit().expect("commit");
                    i += threads;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer");
    }
    start.elapsed()
}

fn strata_reads(engine: &Arc<Engine>, keys: u64, reads: u64, threads: u64) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x1234_5678 + t);
                for _ in 0..reads / threads {
                    let i = rng.next() % keys;
                    let v = engine.get(&key(i)).expect("get").expect("present");
                    assert_eq!(v.len(), VALUE_LEN);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("reader");
    }
    start.elapsed()
}

/// Length of one record of the workload: header, key and value.
const RECORD_LEN: u64 = 32 + 32 + VALUE_LEN as u64;

/// `reads` positioned reads of one record's length at random record-aligned
/// offsets of the segment files in `dir` (the kernel's share of a read).
fn bare_preads(dir: &Path, reads: u64) -> Duration {
    use std::os::unix::fs::FileExt;
    let files: Vec<(std::fs::File, u64)> = std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| {
            let path = e.expect("entry").path();
            (path.extension()? == "seg").then_some(path)
        })
        .map(|path| {
            let file = std::fs::File::open(&path).expect("open segment");
            let records = file.metadata().expect("metadata").len() / RECORD_LEN;
            (file, records)
        })
        .filter(|(_, records)| *records > 0)
        .collect();
    assert!(!files.is_empty(), "no segment files in {}", dir.display());
    let mut buf = vec![0u8; RECORD_LEN as usize];
    let mut rng = Rng(0x1234_5678);
    let start = Instant::now();
    for _ in 0..reads {
        let (file, records) = &files[(rng.next() % files.len() as u64) as usize];
        let at = rng.next() % records * RECORD_LEN;
        file.read_exact_at(&mut buf, at).expect("pread");
    }
    start.elapsed()
}

/// `count` records' bytes appended to one file by 64 KiB positioned writes,
/// without fsync (the kernel's share of the `Never` writes).
fn bare_appends(dir: &Path, count: u64) -> Duration {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::create(dir.join("appends")).expect("create");
    let chunk = vec![0x5au8; 64 << 10];
    let total = count * RECORD_LEN;
    let start = Instant::now();
    let mut at = 0;
    while at < total {
        let len = chunk.len().min((total - at) as usize);
        file.write_all_at(&chunk[..len], at).expect("pwrite");
        at += len as u64;
    }
    start.elapsed()
}

fn redb_reads(db: &Arc<Database>, keys: u64, reads: u64, threads: u64) -> Duration {
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = Rng(0x1234_5678 + t);
                let txn = db.begin_read().expect("begin read");
                let table = txn.open_table(TABLE).expect("table");
                for _ in 0..reads / threads {
                    let i = rng.next() % keys;
                    let v = table.get(&key(i)[..]).expect("get").expect("present");
                    assert_eq!(v.value().len(), VALUE_LEN);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("reader");
    }
    start.elapsed()
}

fn row(store: &str, what: &str, threads: u64, ops: u64, elapsed: Duration) {
    println!(
        "| {store} | {what} | {threads} | {ops} | {:.2} | {:.0} |",
        elapsed.as_secs_f64(),
        rate(ops, elapsed)
    );
}

fn writes_and_reads(config: &Config, writes: bool, reads: bool) {
    let n = 1_000_000 / config.scale;
    let always_one = 2_000 / config.scale.min(4);
    let always_many = 100_000 / config.scale;
    let many = 4u64;
    let many_always = 64u64;
    println!("| store | workload | threads | ops | seconds | ops/s |");
    println!("|---|---|---|---|---|---|");

    if config.sections.iter().any(|s| s == "write-many-only") {
        // For profiling: only the many-writer run without fsync.
        let dir = fresh(config, "strata-never-many");
        let engine =
            Arc::new(Engine::open(&dir, strata_options(FsyncPolicy::Never)).expect("open"));
        let elapsed = strata_write(&engine, n, many);
        row("strata", "write, fsync never", many, n, elapsed);
        return;
    }
    // strata, fsync never: the store the read phase uses.
    let dir = fresh(config, "strata-never");
    let engine = Arc::new(Engine::open(&dir, strata_options(FsyncPolicy::Never)).expect("open"));
    let elapsed = strata_write(&engine, n, 1);
    row("strata", "write, fsync never", 1, n, elapsed);
    if config.sections.iter().any(|s| s == "write-only") {
        return;
    }
    if reads {
        // Let the kernel write the dirty pages back first, so that the reads
        // are measured from the page cache without writeback competing.
        engine.sync().expect("sync");
        // The first pass over pages just written also pays the kernel's
        // bookkeeping of their first reads (moving them to the active list);
        // the passes after it read from a settled page cache.
        let elapsed = strata_reads(&engine, n, n, 1);
        row("strata", "random read, first pass", 1, n, elapsed);
        let elapsed = strata_reads(&engine, n, n, 1);
        row("strata", "random read", 1, n, elapsed);
        let elapsed = strata_reads(&engine, n, n, 2);
        row("strata", "random read", 2, n, elapsed);
        // The floor: the same number of record-sized positioned reads at random
        // places in the same files, with nothing else around them.
        let elapsed = bare_preads(&dir, n);
        row("bare pread", "random read", 1, n, elapsed);
    }
    drop(engine);

    if writes {
        let elapsed = bare_appends(&fresh(config, "bare-appends"), n);
        row("bare pwrite", "64 KiB appends", 1, n, elapsed);
        let dir = fresh(config, "strata-never-many");
        let engine =
            Arc::new(Engine::open(&dir, strata_options(FsyncPolicy::Never)).expect("open"));
        let elapsed = strata_write(&engine, n, many);
        row("strata", "write, fsync never", many, n, elapsed);
        drop(engine);

        for threads in [1, many] {
            let dir = fresh(config, "strata-everysec");
            let engine = Arc::new(
                Engine::open(&dir, strata_options(FsyncPolicy::EverySecond)).expect("open"),
            );
            let elapsed = strata_write(&engine, n, threads);
            row("strata", "write, fsync every second", threads, n, elapsed);
            drop(engine);
        }

        for (threads, count) in [(1, always_one), (many_always, always_many)] {
            let dir = fresh(config, "strata-always");
            let engine =
                Arc::new(Engine::open(&dir, strata_options(FsyncPolicy::Always)).expect("open"));
            let elapsed = strata_write(&engine, count, threads);
            row("strata", "write, fsync always", threads, count, elapsed);
            drop(engine);
        }
    }

    if config.sections.iter().any(|s| s == "no-redb") {
        return;
    }
    // redb.
    let dir = fresh(config, "redb-none");
    let db = Arc::new(Database::create(dir.join("db.redb")).expect("redb"));
    let elapsed = redb_write(&db, n, 1, Durability::None);
    row("redb", "write, durability none", 1, n, elapsed);
    if reads {
        let mut txn = db.begin_write().expect("begin");
        txn.set_durability(Durability::Immediate)
            .expect("durability");
        txn.commit().expect("commit");
        let elapsed = redb_reads(&db, n, n, 1);
        row("redb", "random read, first pass", 1, n, elapsed);
        let elapsed = redb_reads(&db, n, n, 1);
        row("redb", "random read", 1, n, elapsed);
        let elapsed = redb_reads(&db, n, n, 2);
        row("redb", "random read", 2, n, elapsed);
    }
    drop(db);
    if writes {
        for (threads, count) in [(1, always_one), (many_always, always_many / 10)] {
            let dir = fresh(config, "redb-immediate");
            let db = Arc::new(Database::create(dir.join("db.redb")).expect("redb"));
            let elapsed = redb_write(&db, count, threads, Durability::Immediate);
            row(
                "redb",
                "write, durability immediate",
                threads,
                count,
                elapsed,
            );
        }
    }
}

fn open_time(config: &Config) {
    println!("| open | keys | value bytes | data on disk | time |");
    println!("|---|---|---|---|---|");
    for value_len in [16usize, 256] {
        open_store(config, value_len);
    }
}

fn open_store(config: &Config, value_len: usize) {
    let n = 10_000_000 / config.scale;
    let dir = fresh(config, "strata-open");
    let small = vec![7u8; value_len];
    let options = strata_options(FsyncPolicy::Never);
    {
        let engine = Engine::open(&dir, options.clone()).expect("open");
        for i in 0..n {
            engine.put(&key(i), &small).expect("put");
        }
        engine.close().expect("close");
    }
    let size = |ext: &str| -> u64 {
        std::fs::read_dir(&dir)
            .expect("dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .map(|p| std::fs::metadata(p).expect("meta").len())
            .sum()
    };
    let segments = size("seg") >> 20;
    let hints = size("hint") >> 20;
    let timed_open = |label: &str| {
        settle();
        let start = Instant::now();
        let engine = Engine::open(&dir, options.clone()).expect("open");
        let elapsed = start.elapsed();
        assert_eq!(engine.stats().live_keys, n);
        println!(
            "| {label} | {n} | {value_len} | {segments} MiB segments, {hints} MiB hints | {:.2} s |",
            elapsed.as_secs_f64()
        );
        drop(engine);
    };
    timed_open("with hint files");
    remove_hints(&dir);
    timed_open("without hint files (scan)");
    let _ = std::fs::remove_dir_all(&dir);
}

fn remove_hints(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "hint") {
            std::fs::remove_file(path).expect("remove");
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram")
}

fn latency(config: &Config) {
    let n = 300_000 / config.scale;
    let dir = fresh(config, "strata-latency");
    let engine = Arc::new(
        Engine::open(
            &dir,
            strata_options(FsyncPolicy::EverySecond).with_segment_size(SEGMENT),
        )
        .expect("open"),
    );
    // Two full rounds leave half the bytes dead: plenty for compaction to do.
    strata_write(&engine, n, 1);
    strata_write(&engine, n, 1);
    println!("| phase | op | p50 µs | p99 µs | p99.9 µs | max µs | ops |");
    println!("|---|---|---|---|---|---|---|");
    let measure = |label: &str, engine: &Arc<Engine>, stop: Option<&AtomicBool>| {
        let mut puts = histogram();
        let mut gets = histogram();
        let mut rng = Rng(99);
        let v = value(1);
        let mut ops = 0u64;
        let start = Instant::now();
        loop {
            let i = rng.next() % n;
            let t = Instant::now();
            engine.put(&key(i), &v).expect("put");
            puts.record(t.elapsed().as_nanos() as u64).expect("record");
            let j = rng.next() % n;
            let t = Instant::now();
            engine.get(&key(j)).expect("get");
            gets.record(t.elapsed().as_nanos() as u64).expect("record");
            ops += 1;
            let done = match stop {
                Some(stop) => stop.load(Ordering::Acquire),
                None => ops >= n,
            };
            if done || start.elapsed() > Duration::from_secs(120) {
                break;
            }
        }
        for (op, h) in [("put", &puts), ("get", &gets)] {
            println!(
                "| {label} | {op} | {:.1} | {:.1} | {:.1} | {:.0} | {} |",
                h.value_at_quantile(0.5) as f64 / 1e3,
                h.value_at_quantile(0.99) as f64 / 1e3,
                h.value_at_quantile(0.999) as f64 / 1e3,
                h.max() as f64 / 1e3,
                h.len()
            );
        }
    };
    measure("no compaction", &engine, None);
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = {
        let engine = engine.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            let report = engine.compact().expect("compact");
            stop.store(true, Ordering::Release);
            (report, start.elapsed())
        })
    };
    measure("during compaction", &engine, Some(&stop));
    let (report, took) = compactor.join().expect("compactor");
    println!(
        "compaction: {} segments ({} MiB) -> {} segments ({} MiB) in {:.2} s",
        report.inputs,
        report.bytes_in >> 20,
        report.outputs,
        report.bytes_out >> 20,
        took.as_secs_f64()
    );
}
