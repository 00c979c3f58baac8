//! The command line: a network run by default, `shards` for the in-process
//! experiment, `plot` for charts of saved JSON reports.
//!
//! Short options follow redis-benchmark where it has one (`-h` host, `-p` port, `-a`
//! password, `-c` clients, `-n` requests, `-P` pipeline, `-d` data size, `-r` key-space
//! size); `--help` is long only, since `-h` is the host.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

use crate::Error;
use crate::client::{RunConfig, Stop, Target};
use crate::keys::Distribution;
use crate::shards::ShardsConfig;
use crate::template::{BUILTINS, Template};
use crate::workload::{Mix, ValuePool, ValueSize, Workload, parse_ratio, parse_weights};

/// The request count of a run given neither `--requests` nor `--duration`.
pub const DEFAULT_REQUESTS: u64 = 100_000;

/// The mix of a run given neither `--ratio` nor `--command`.
pub const DEFAULT_RATIO: &str = "set:get=1:10";

#[derive(Debug, Parser)]
#[command(
    name = "strata-benchmark",
    version,
    about = "Load generator for strata and other RESP servers",
    long_about = "Load generator for strata and other RESP servers.\n\n\
        Without a subcommand it loads a server: connections over threads, pipelined \
        requests from built-in commands or templates with __key__, __value__ and \
        __rand__ placeholders, keys drawn uniformly, zipfian or in sequence, and \
        prints throughput and latency percentiles per command.",
    args_conflicts_with_subcommands = true,
    disable_help_flag = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub mode: Option<Mode>,
    #[command(flatten)]
    pub run: RunArgs,
    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}

#[derive(Debug, Subcommand)]
pub enum Mode {
    /// Drive the keyspace in-process from many threads, for each shard count (no
    /// server, no sockets): throughput and latency percentiles per shard count.
    Shards(ShardsArgs),
    /// Draw an SVG chart of throughput, p50 and p99 from saved JSON reports.
    Plot(PlotArgs),
}

/// Options of a network run.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Server host.
    #[arg(short = 'h', long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(short, long, default_value_t = 6379)]
    pub port: u16,
    /// Password: each connection sends AUTH first.
    #[arg(short = 'a', long)]
    pub password: Option<String>,
    /// User name for AUTH (with --password).
    #[arg(long, requires = "password")]
    pub user: Option<String>,
    /// Database: each connection sends SELECT first.
    #[arg(long)]
    pub db: Option<u32>,
    /// Connections (clients).
    #[arg(
        short = 'c',
        long = "connections",
        visible_alias = "clients",
        default_value_t = 50
    )]
    pub connections: usize,
    /// Threads the connections are spread over.
    #[arg(short = 't', long, default_value_t = 1)]
    pub threads: usize,
    /// Requests in flight per connection.
    #[arg(short = 'P', long, default_value_t = 1)]
    pub pipeline: usize,
    /// Requests in all [default: 100000 unless --duration is given].
    #[arg(short = 'n', long, conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// Run for this long instead of a request count: 30s, 500ms, 2m.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Key-space size: keys are drawn from 0..KEYS.
    #[arg(short = 'r', long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Key distribution: uniform, zipf, zipf:S (exponent S, 0.99 by default) or
    /// sequential.
    #[arg(long, default_value = "uniform")]
    pub distribution: Distribution,
    /// Value size in bytes: fixed (100) or a range (32-512) drawn uniformly.
    #[arg(short = 'd', long = "data-size", default_value = "3")]
    pub data_size: ValueSize,
    /// Built-in commands and their weights, as NAME:NAME=W:W (default
    /// set:get=1:10). Names: ping set get del exists mset incr lpush rpush lpop rpop
    /// lrange_100 sadd spop hset zadd.
    #[arg(long, value_parser = parse_ratio_arg)]
    pub ratio: Option<Ratio>,
    /// A command template, such as "HSET h:__key__ f __value__"; may be repeated.
    /// Placeholders: __key__ (the drawn key), __value__, __rand__ (a random number).
    #[arg(long = "command", value_name = "TEMPLATE")]
    pub commands: Vec<String>,
    /// Weights of the --command templates, in order, as W:W:... (default all 1).
    #[arg(long, value_parser = parse_weights_arg, requires = "commands")]
    pub command_ratio: Option<Weights>,
    /// SET every key (key:N, with the run's value size) once before measuring, so
    /// that GETs hit.
    #[arg(long)]
    pub prefill: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also draw the report as an SVG chart at this path.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// The configuration's name in JSON and charts.
    #[arg(long, default_value = "run")]
    pub label: String,
    /// What is measured, in JSON and charts (such as strata or redis).
    #[arg(long, default_value = "server")]
    pub series: String,
    /// Seed of the key, command and value choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Never show a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Exit with success even if the server answered errors.
    #[arg(long)]
    pub allow_errors: bool,
}

/// `--ratio`'s names and weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ratio(pub Vec<(String, u32)>);

/// `--command-ratio`'s weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weights(pub Vec<u32>);

fn parse_ratio_arg(text: &str) -> Result<Ratio, String> {
    let ratio = parse_ratio(text)?;
    for (name, _) in &ratio {
        if Template::builtin(name).is_none() {
            let names: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "unknown command '{name}' (built-ins: {}; use --command for others)",
                names.join(" ")
            ));
        }
    }
    Ok(Ratio(ratio))
}

fn parse_weights_arg(text: &str) -> Result<Weights, String> {
    parse_weights(text).map(Weights)
}

/// Parses a duration: a number with `ms`, `s`, `m` or `h` (seconds without a unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{text}' (ms, s, m or h)"
            ));
        }
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (such as 30s or 500ms)"))?;
    Duration::try_from_secs_f64(value * scale)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("'{text}' is not a positive duration"))
}

impl RunArgs {
    /// The run these options describe, and its settings as the report shows them.
    pub fn to_config(&self) -> Result<(RunConfig, Vec<(String, String)>), Error> {
        if self.connections == 0 || self.threads == 0 || self.pipeline == 0 {
            return Err(Error::Usage(
                "--connections, --threads and --pipeline must be at least 1".into(),
            ));
        }
        if self.keys == 0 {
            return Err(Error::Usage("--keys must be at least 1".into()));
        }
        let mix = Arc::new(self.mix()?);
        let stop = match (self.requests, self.duration) {
            (_, Some(d)) => Stop::Duration(d),
            (Some(n), None) => Stop::Requests(n),
            (None, None) => Stop::Requests(DEFAULT_REQUESTS),
        };
        let threads = self.threads.min(self.connections);
        let mut settings = vec![
            ("server".to_string(), format!("{}:{}", self.host, self.port)),
            ("connections".to_string(), self.connections.to_string()),
            ("threads".to_string(), threads.to_string()),
            ("pipeline".to_string(), self.pipeline.to_string()),
        ];
        settings.push(match stop {
            Stop::Requests(n) => ("requests".to_string(), n.to_string()),
            Stop::Duration(d) => ("duration".to_string(), format!("{:?}", d)),
        });
        settings.extend([
            ("keys".to_string(), self.keys.to_string()),
            ("distribution".to_string(), self.distribution.to_string()),
            ("data size".to_string(), self.data_size.to_string()),
            ("mix".to_string(), mix.describe()),
        ]);
        let config = RunConfig {
            target: Target {
                host: self.host.clone(),
                port: self.port,
                user: self.user.clone(),
                password: self.password.clone(),
                db: self.db,
            },
            connections: self.connections,
            threads,
            pipeline: self.pipeline,
            stop,
            workload: Workload {
                mix,
                distribution: self.distribution,
                keys: self.keys,
                value_size: self.data_size,
                pool: ValuePool::new(self.data_size.max(), self.seed),
                seed: self.seed,
            },
            progress: !self.no_progress,
        };
        Ok((config, settings))
    }

    /// The command mix: `--ratio`'s built-ins, then `--command`'s templates.
    pub fn mix(&self) -> Result<Mix, Error> {
        let mut entries = Vec::new();
        let ratio = match (&self.ratio, self.commands.is_empty()) {
            (Some(r), _) => r.0.clone(),
            (None, true) => parse_ratio(DEFAULT_RATIO).map_err(Error::Usage)?,
            (None, false) => Vec::new(),
        };
        for (name, weight) in ratio {
            let template = Template::builtin(&name)
                .ok_or_else(|| Error::Usage(format!("unknown command '{name}'")))?;
            entries.push((template, weight));
        }
        let weights = match &self.command_ratio {
            Some(w) if w.0.len() != self.commands.len() => {
                return Err(Error::Usage(format!(
                    "--command-ratio gives {} weights for {} --command templates",
                    w.0.len(),
                    self.commands.len()
                )));
            }
            Some(w) => w.0.clone(),
            None => vec![1; self.commands.len()],
        };
        for (text, weight) in self.commands.iter().zip(weights) {
            entries.push((Template::parse(text)?, weight));
        }
        Mix::new(entries)
    }
}

/// Options of the in-process experiment.
#[derive(Debug, Args)]
pub struct ShardsArgs {
    /// Shard counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64,128")]
    pub shards: Vec<usize>,
    /// Threads running operations at once.
    #[arg(short = 't', long, default_value_t = 30)]
    pub threads: usize,
    /// Operations per run, over all threads.
    #[arg(short = 'n', long, default_value_t = 300_000)]
    pub requests: u64,
    /// Key-space size (every key is set before the run).
    #[arg(short = 'r', long, default_value_t = 20_000)]
    pub keys: u64,
    /// Percentage of SETs (the rest are GETs).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub set_percent: u32,
    /// Value size in bytes.
    #[arg(short = 'd', long = "data-size", default_value_t = 16)]
    pub data_size: usize,
    /// Runs per shard count; the table shows the median and the spread.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Seed of the key and operation choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also draw an SVG chart at this path.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}

impl ShardsArgs {
    pub fn to_config(&self) -> Result<ShardsConfig, Error> {
        if self.shards.is_empty() || self.shards.contains(&0) {
            return Err(Error::Usage("--shards takes counts of at least 1".into()));
        }
        if let Some(odd) = self.shards.iter().find(|s| !s.is_power_of_two()) {
            return Err(Error::Usage(format!(
                "--shards: {odd} is not a power of two (the keyspace rounds shard counts up to one)"
            )));
        }
        if self.threads == 0 || self.keys == 0 {
            return Err(Error::Usage(
                "--threads and --keys must be at least 1".into(),
            ));
        }
        Ok(ShardsConfig {
            shard_counts: self.shards.clone(),
            threads: self.threads,
            requests: self.requests,
            keys: self.keys,
            set_percent: self.set_percent,
            value_size: self.data_size,
            repeat: self.repeat.max(1),
            seed: self.seed,
        })
    }
}

/// Options of `plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Where to write the SVG chart.
    #[arg(short, long, value_name = "PATH")]
    pub out: PathBuf,
    /// The chart's title.
    #[arg(long, default_value = "strata-benchmark")]
    pub title: String,
    /// JSON files: reports printed by --json, or arrays of {group, series,
    /// ops_per_sec, latency_us: {p50, p99}}.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("strata-benchmark").chain(args.iter().copied()))
    }

    fn run_args(args: &[&str]) -> RunArgs {
        parse(args).unwrap().run
    }

    #[test]
    fn defaults_follow_redis_benchmark() {
        let cli = parse(&[]).unwrap();
        assert!(cli.mode.is_none());
        let (config, settings) = cli.run.to_config().unwrap();
        assert_eq!(config.target.addr(), "127.0.0.1:6379");
        assert_eq!(
            (config.connections, config.threads, config.pipeline),
            (50, 1, 1)
        );
        assert_eq!(config.stop, Stop::Requests(DEFAULT_REQUESTS));
        assert_eq!(config.workload.keys, 1_000_000);
        assert_eq!(config.workload.value_size, ValueSize::Fixed(3));
        assert_eq!(config.workload.distribution, Distribution::Uniform);
        assert_eq!(config.workload.mix.describe(), "SET:GET=1:10");
        assert!(
            settings
                .iter()
                .any(|(k, v)| k == "mix" && v == "SET:GET=1:10")
        );
    }

    #[test]
    fn short_options_follow_redis_benchmark() {
        let a = run_args(&[
            "-h", "::1", "-p", "7000", "-a", "pw", "-c", "8", "-n", "500", "-P", "16", "-d",
            "32-64", "-r", "100", "-t", "2",
        ]);
        let (config, _) = a.to_config().unwrap();
        assert_eq!(config.target.addr(), "[::1]:7000");
        assert_eq!(config.target.password.as_deref(), Some("pw"));
        assert_eq!(
            (config.connections, config.threads, config.pipeline),
            (8, 2, 16)
        );
        assert_eq!(config.stop, Stop::Requests(500));
        assert_eq!(config.workload.value_size, ValueSize::Range(32, 64));
        assert_eq!(config.workload.keys, 100);
        // --clients is an alias; threads never exceed connections.
        let (config, _) = run_args(&["--clients", "2", "--threads", "8"])
            .to_config()
            .unwrap();
        assert_eq!((config.connections, config.threads), (2, 2));
    }

    #[test]
    fn mixes_from_ratio_and_templates() {
        let mix = run_args(&["--ratio", "incr:lpush:lrange_100=1:2:3"])
            .mix()
            .unwrap();
        assert_eq!(mix.describe(), "INCR:LPUSH:LRANGE_100=1:2:3");
        let mix = run_args(&["--command", "HSET h:__key__ f __value__"])
            .mix()
            .unwrap();
        assert_eq!(mix.describe(), "HSET=1");
        let mix = run_args(&[
            "--ratio",
            "get=5",
            "--command",
            "SADD s __rand__",
            "--command",
            "SCARD s",
            "--command-ratio",
            "2:3",
        ])
        .mix()
        .unwrap();
        assert_eq!(mix.describe(), "GET:SADD:SCARD=5:2:3");
        let bad = run_args(&["--command", "A", "--command", "B", "--command-ratio", "1"]);
        assert!(bad.mix().is_err());
        assert!(parse(&["--ratio", "set:nosuch=1:1"]).is_err());
        assert!(parse(&["--ratio", "set:get=1"]).is_err());
        assert!(parse(&["--command-ratio", "1"]).is_err());
        assert!(run_args(&["--ratio", "set=0"]).mix().is_err());
    }

    #[test]
    fn stops_by_count_or_duration() {
        let (config, settings) = run_args(&["--duration", "1.5s"]).to_config().unwrap();
        assert_eq!(config.stop, Stop::Duration(Duration::from_millis(1500)));
        assert!(settings.iter().any(|(k, _)| k == "duration"));
        assert!(parse(&["-n", "10", "--duration", "1s"]).is_err());
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("5 days").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn distributions_and_sizes_parse() {
        let a = run_args(&["--distribution", "zipf:1.1", "-d", "100"]);
        assert_eq!(a.distribution, Distribution::Zipf(1.1));
        assert_eq!(a.data_size, ValueSize::Fixed(100));
        assert!(parse(&["--distribution", "normal"]).is_err());
        assert!(parse(&["-d", "9-1"]).is_err());
    }

    #[test]
    fn zero_counts_are_refused() {
        for args in [["-c", "0"], ["-P", "0"], ["-t", "0"], ["-r", "0"]] {
            assert!(run_args(&args).to_config().is_err(), "{args:?}");
        }
        assert!(parse(&["--user", "u"]).is_err(), "--user needs --password");
    }

    #[test]
    fn subcommands() {
        let cli = parse(&["shards", "--shards", "1,4,16", "--repeat", "2"]).unwrap();
        let Some(Mode::Shards(args)) = cli.mode else {
            panic!("not shards")
        };
        let config = args.to_config().unwrap();
        assert_eq!(config.shard_counts, [1, 4, 16]);
        assert_eq!(
            (config.threads, config.requests, config.keys),
            (30, 300_000, 20_000)
        );
        assert_eq!((config.set_percent, config.repeat), (50, 2));
        let Some(Mode::Shards(args)) = parse(&["shards", "--shards", "3"]).unwrap().mode else {
            panic!("not shards")
        };
        assert!(args.to_config().is_err());
        assert!(parse(&["shards", "--set-percent", "101"]).is_err());
        let cli = parse(&["plot", "-o", "x.svg", "a.json", "b.json"]).unwrap();
        let Some(Mode::Plot(args)) = cli.mode else {
            panic!("not plot")
        };
        assert_eq!(args.files.len(), 2);
        assert!(parse(&["plot", "-o", "x.svg"]).is_err());
        // Run options do not mix with a subcommand.
        assert!(parse(&["-c", "5", "shards"]).is_err());
    }

    #[test]
    fn help_is_long_only() {
        let err = parse(&["--help"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
        assert_eq!(run_args(&["-h", "localhost"]).host, "localhost");
        for sub in ["shards", "plot"] {
            let err = parse(&[sub, "--help"]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{sub}");
        }
    }
}
