//! The in-process shard-scaling experiment: many threads on one keyspace, no sockets.
//!
//! For each shard count, a fresh `strata_keyspace::Keyspace` with that many shards is
//! filled with every key, then `threads` threads pass a barrier together and each runs
//! its share of `requests` operations: a uniformly random key, GET or SET by the given
//! proportion, each under its shard's lock exactly as a command runs (hash, lock, look
//! up or store, unlock). Each operation's latency, lock wait included, goes into the
//! thread's histogram. Throughput is all operations over the time from the barrier to
//! the last thread's end. Repeating a shard count gives the spread between runs.
//!
//! This isolates lock contention from the network and the protocol: with one shard
//! every operation takes the same lock; with many, threads rarely meet.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use strata_keyspace::{Keyspace, Ttl};

use crate::keys::write_padded;
use crate::stats::{Latency, histogram};

/// The experiment's parameters.
#[derive(Debug, Clone)]
pub struct ShardsConfig {
    pub shard_counts: Vec<usize>,
    pub threads: usize,
    /// Operations per run, over all threads.
    pub requests: u64,
    pub keys: u64,
    /// Percentage of operations that are SETs; the rest are GETs.
    pub set_percent: u32,
    pub value_size: usize,
    pub repeat: usize,
    pub seed: u64,
}

/// One run at one shard count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShardRun {
    pub ops_per_sec: f64,
    pub latency: Latency,
}

/// Every run at one shard count.
#[derive(Debug, Clone)]
pub struct ShardRow {
    pub shards: usize,
    pub runs: Vec<ShardRun>,
}

impl ShardRow {
    /// The run with the median throughput (the lower middle for an even count).
    pub fn median(&self) -> Option<&ShardRun> {
        let mut order: Vec<&ShardRun> = self.runs.iter().collect();
        order.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
        order.get(order.len().saturating_sub(1) / 2).copied()
    }

    /// The lowest and highest throughput of the runs.
    pub fn spread(&self) -> (f64, f64) {
        self.runs.iter().fold((f64::INFINITY, 0f64), |(lo, hi), r| {
            (lo.min(r.ops_per_sec), hi.max(r.ops_per_sec))
        })
    }
}

/// Runs the experiment; `on_row` sees each shard count's runs as they finish.
pub fn run(config: &ShardsConfig, mut on_row: impl FnMut(&ShardRow)) -> Vec<ShardRow> {
    let keys: Vec<Vec<u8>> = (0..config.keys.max(1))
        .map(|k| {
            let mut key = b"key:".to_vec();
            write_padded(k, &mut key);
            key
        })
        .collect();
    let value = vec![b'v'; config.value_size];
    let mut rows = Vec::new();
    for &shards in &config.shard_counts {
        let runs = (0..config.repeat.max(1))
            .map(|r| once(config, shards, &keys, &value, config.seed ^ r as u64))
            .collect();
        let row = ShardRow { shards, runs };
        on_row(&row);
        rows.push(row);
    }
    rows
}

/// One run at one shard count.
fn once(
    config: &ShardsConfig,
    shards: usize,
    keys: &[Vec<u8>],
    value: &[u8],
    seed: u64,
) -> ShardRun {
    let keyspace = Keyspace::new(1, shards);
    // The keyspace reads no clock; nothing here expires.
    let now = 0;
    for key in keys {
        let hash = keyspace.hash(key);
        let mut shard = keyspace.lock(keyspace.shard_of_hash(hash));
        shard.db(0).set(
            hash,
            key,
            strata_keyspace::Value::string(value),
            Ttl::Persist,
            now,
        );
    }
    let threads = config.threads.max(1);
    let barrier = Barrier::new(threads + 1);
    let (hist, elapsed) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let ops = config.requests / threads as u64
                    + u64::from((t as u64) < config.requests % threads as u64);
                let (keyspace, barrier) = (&keyspace, &barrier);
                scope.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(
                        seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    let mut hist = histogram();
                    barrier.wait();
                    for _ in 0..ops {
                        let key = &keys[rng.random_range(0..keys.len())];
                        let set = rng.random_range(0..100) < config.set_percent;
                        let began = Instant::now();
                        // As a server does: the new value is made before the lock is
                        // taken, and the old one freed after it is released.
                        let new = set.then(|| strata_keyspace::Value::string(value));
                        let hash = keyspace.hash(key);
                        let mut shard = keyspace.lock(keyspace.shard_of_hash(hash));
                        let db = shard.db(0);
                        let old = match new {
                            Some(new) => db.set(hash, key, new, Ttl::Persist, now),
                            None => {
                                let len = db
                                    .get(hash, key, now)
                                    .and_then(|e| e.value().as_str().map(|s| s.len()));
                                std::hint::black_box(len);
                                None
                            }
                        };
                        drop(shard);
                        drop(old);
                        let ns = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        hist.saturating_record(ns.max(1));
                    }
                    (hist, Instant::now())
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut all = histogram();
        let mut end = start;
        for handle in handles {
            if let Ok((h, finished)) = handle.join() {
                let _ = all.add(&h);
                end = end.max(finished);
            }
        }
        (all, end.saturating_duration_since(start))
    });
    ShardRun {
        ops_per_sec: hist.len() as f64 / elapsed.max(Duration::from_nanos(1)).as_secs_f64(),
        latency: Latency::of(&hist),
    }
}

/// The experiment as a table: median run per shard count, the spread of throughput,
/// and the speed-up over the first shard count.
pub fn table(config: &ShardsConfig, rows: &[ShardRow]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} threads, {} operations per run ({}% SET), {} keys, {}-byte values, median of {}",
        config.threads,
        config.requests,
        config.set_percent,
        config.keys,
        config.value_size,
        config.repeat
    );
    let _ = writeln!(
        out,
        "{:>6} {:>12} {:>25} {:>9} {:>9} {:>10} {:>10} {:>11} {:>8}",
        "shards",
        "ops/s",
        "spread (min-max)",
        "p50 ns",
        "p90 ns",
        "p99 ns",
        "p99.9 ns",
        "max ns",
        "speedup"
    );
    let base = rows
        .first()
        .and_then(ShardRow::median)
        .map(|r| r.ops_per_sec);
    for row in rows {
        let Some(m) = row.median() else { continue };
        let (lo, hi) = row.spread();
        let speedup = base.map(|b| m.ops_per_sec / b).unwrap_or(1.0);
        let p = m.latency.percentiles;
        let _ = writeln!(
            out,
            "{:>6} {:>12.0} {:>25} {:>9} {:>9} {:>10} {:>10} {:>11} {:>7.2}x",
            row.shards,
            m.ops_per_sec,
            format!("{lo:.0}-{hi:.0}"),
            p[0],
            p[1],
            p[2],
            p[3],
            m.latency.max,
            speedup
        );
    }
    out
}

/// The experiment as JSON: every run of every shard count.
pub fn to_json(config: &ShardsConfig, rows: &[ShardRow]) -> Value {
    let run = |r: &ShardRun| {
        json!({
            "ops_per_sec": r.ops_per_sec,
            "latency_ns": {
                "mean": r.latency.mean,
                "p50": r.latency.percentiles[0],
                "p90": r.latency.percentiles[1],
                "p99": r.latency.percentiles[2],
                "p99.9": r.latency.percentiles[3],
                "max": r.latency.max,
            },
        })
    };
    json!({
        "threads": config.threads,
        "requests": config.requests,
        "keys": config.keys,
        "set_percent": config.set_percent,
        "value_size": config.value_size,
        "rows": rows.iter().map(|row| json!({
            "shards": row.shards,
            "median": row.median().map(run),
            "runs": row.runs.iter().map(run).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_experiment_counts_every_operation() {
        let config = ShardsConfig {
            shard_counts: vec![1, 4],
            threads: 3,
            requests: 3_001,
            keys: 100,
            set_percent: 50,
            value_size: 8,
            repeat: 2,
            seed: 1,
        };
        let mut seen = Vec::new();
        let rows = run(&config, |row| seen.push(row.shards));
        assert_eq!(seen, [1, 4]);
        for row in &rows {
            assert_eq!(row.runs.len(), 2);
            for r in &row.runs {
                assert!(r.ops_per_sec > 0.0);
                assert!(r.latency.percentiles[0] <= r.latency.p99());
            }
            let (lo, hi) = row.spread();
            assert!(lo <= hi);
        }
        let table = table(&config, &rows);
        assert_eq!(table.lines().count(), 4, "{table}");
        let json = to_json(&config, &rows);
        assert_eq!(json["rows"][1]["shards"], 4);
        assert_eq!(json["rows"][0]["runs"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn median_is_the_middle_run() {
        let latency = Latency {
            mean: 0.0,
            percentiles: [0; 4],
            max: 0,
        };
        let row = ShardRow {
            shards: 1,
            runs: [3.0, 1.0, 2.0]
                .map(|ops_per_sec| ShardRun {
                    ops_per_sec,
                    latency,
                })
                .to_vec(),
        };
        assert_eq!(row.median().unwrap().ops_per_sec, 2.0);
        assert_eq!(row.spread(), (1.0, 3.0));
    }
}
