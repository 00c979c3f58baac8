//! strata-benchmark's load generator against the real server: tiny runs whose counts
//! must add up exactly, error replies reported, and the same counts as Redis for
//! the same seeded run.

use std::sync::Arc;
use std::time::Duration;

use strata_benchmark::Error;
use strata_benchmark::client::{self, RunConfig, RunResult, Stop, Target};
use strata_benchmark::keys::Distribution;
use strata_benchmark::template::Template;
use strata_benchmark::workload::{Mix, ValuePool, ValueSize, Workload, parse_ratio};

use crate::support::{free_port, redis_available, redis_server, strata};

fn config(port: u16, ratio: &str, commands: &[&str], connections: usize) -> RunConfig {
    let mut entries: Vec<(Template, u32)> = parse_ratio(ratio)
        .expect("ratio")
        .into_iter()
        .map(|(name, weight)| (Template::builtin(&name).expect("built-in"), weight))
        .collect();
    for text in commands {
        entries.push((Template::parse(text).expect("template"), 1));
    }
    RunConfig {
        target: Target {
            host: "127.0.0.1".into(),
            port,
            user: None,
            password: None,
            db: None,
        },
        connections,
        threads: 2,
        pipeline: 8,
        stop: Stop::Requests(2_000),
        workload: Workload {
            mix: Arc::new(Mix::new(entries).expect("mix")),
            distribution: Distribution::Zipf(0.99),
            keys: 500,
            value_size: ValueSize::Range(1, 100),
            pool: ValuePool::new(100, 1),
            seed: 7,
        },
        progress: false,
    }
}

fn run(config: &RunConfig) -> RunResult {
    client::check(&config.target).expect("server reachable");
    client::run(config).expect("run")
}

#[test]
fn a_tiny_run_counts_every_request() {
    let server = strata(&[]);
    let config = config(
        server.port,
        "set:get:incr:lpush:lrange_100=2:3:1:1:1",
        &[],
        5,
    );
    let result = run(&config);
    let stats = &result.stats;
    assert_eq!(stats.replies(), 2_000);
    assert_eq!(stats.errors(), 0);
    let per_command: Vec<u64> = stats.commands.iter().map(|c| c.replies).collect();
    assert_eq!(per_command.iter().sum::<u64>(), 2_000);
    // Every command was drawn, GET about 3/8 of the time.
    assert!(per_command.iter().all(|&n| n > 0), "{per_command:?}");
    assert!((600..900).contains(&per_command[1]), "{per_command:?}");
    // Every reply has a latency.
    for c in &stats.commands {
        assert_eq!(c.latency.len(), c.replies);
    }
    assert!(result.elapsed > Duration::ZERO);
    // The server saw the writes: the keys exist.
    let mut client = server.client();
    let dbsize = client.cmd(&["DBSIZE"]);
    assert!(
        matches!(dbsize, strata_resp::Value::Integer(n) if n > 100),
        "{dbsize:?}"
    );
}

#[test]
fn a_timed_run_stops_on_time() {
    let server = strata(&[]);
    let mut config = config(server.port, "get", &[], 3);
    config.stop = Stop::Duration(Duration::from_millis(300));
    let result = run(&config);
    assert!(result.stats.replies() > 0);
    assert_eq!(result.stats.commands[0].nulls, result.stats.replies());
    assert!(result.elapsed >= Duration::from_millis(300));
    assert!(
        result.elapsed < Duration::from_secs(10),
        "{:?}",
        result.elapsed
    );
}

#[test]
fn error_replies_are_counted_with_their_text() {
    let server = strata(&[]);
    // SET writes non-numeric values, so INCR on the same keys fails.
    let config = config(
        server.port,
        "set=1",
        &["INCR key:__key__", "NOSUCHCOMMAND __key__"],
        4,
    );
    let result = run(&config);
    let stats = &result.stats;
    assert_eq!(stats.replies(), 2_000);
    let unknown = &stats.commands[2];
    assert_eq!(unknown.errors, unknown.replies);
    assert!(
        unknown.error_samples[0]
            .0
            .starts_with("ERR unknown command 'NOSUCHCOMMAND'"),
        "{:?}",
        unknown.error_samples
    );
    let incr = &stats.commands[1];
    assert!(incr.errors > 0);
    assert!(
        incr.error_samples
            .iter()
            .any(|(t, _)| t == "ERR value is not an integer or out of range")
    );
    assert_eq!(stats.commands[0].errors, 0);
}

#[test]
fn unreachable_and_refusing_servers_are_clear_errors() {
    let port = free_port();
    let cfg = config(port, "get", &[], 1);
    let err = client::check(&cfg.target).expect_err("nobody listens");
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")));

    let server = strata(&["--requirepass", "secret"]);
    let mut cfg = config(server.port, "get", &[], 1);
    let err = client::check(&cfg.target).expect_err("no password");
    assert!(err.to_string().contains("NOAUTH"), "{err}");
    cfg.target.password = Some("wrong".into());
    let err = client::run(&cfg).expect_err("wrong password");
    assert!(
        err.to_string()
            .contains("answered AUTH with an error: WRONGPASS"),
        "{err}"
    );
    cfg.target.password = Some("secret".into());
    cfg.target.db = Some(3);
    let result = run(&cfg);
    assert_eq!(result.stats.replies(), 2_000);
}

/// One connection with a seeded mix sends the same requests in the same order to
/// both servers, so every count, nulls included, must be the same.
#[test]
fn the_same_seeded_run_counts_the_same_on_redis() {
    if !redis_available() {
        return;
    }
    let mix = "set:get:incr:lpush:lpop:sadd:hset:zadd:lrange_100:mset=1:1:1:1:1:1:1:1:1:1";
    let counts = |port| {
        let result = run(&config(port, mix, &["SPOP set:__key__"], 1));
        result
            .stats
            .commands
            .iter()
            .map(|c| (c.replies, c.errors, c.nulls))
            .collect::<Vec<_>>()
    };
    let ours = strata(&[]);
    let redis = redis_server(&[]);
    let (a, b) = (counts(ours.port), counts(redis.port));
    assert_eq!(a, b);
    assert!(a.iter().any(|&(_, _, nulls)| nulls > 0), "{a:?}");
}
