//! `strata-benchmark [options]`, `strata-benchmark shards [options]`,
//! `strata-benchmark plot -o chart.svg report.json...`
//!
//! Exit status: 0 on success, 1 when the run could not be made (server unreachable,
//! bad options, I/O), 3 when the server answered errors (unless `--allow-errors`).

use std::process::ExitCode;

use clap::Parser;
use strata_benchmark::chart::{self, Bar};
use strata_benchmark::client::{self, RunConfig, Stop};
use strata_benchmark::keys::Distribution;
use strata_benchmark::options::{Cli, Mode, PlotArgs, RunArgs, ShardsArgs};
use strata_benchmark::report::Report;
use strata_benchmark::template::Template;
use strata_benchmark::workload::Mix;
use strata_benchmark::{Error, shards};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.mode {
        None => network(&cli.run),
        Some(Mode::Shards(args)) => in_process(&args),
        Some(Mode::Plot(args)) => plot(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strata-benchmark: {e}");
            ExitCode::FAILURE
        }
    }
}

fn network(args: &RunArgs) -> Result<ExitCode, Error> {
    let (config, settings) = args.to_config()?;
    client::check(&config.target)?;
    if args.prefill {
        prefill(&config)?;
    }
    let result = client::run(&config)?;
    let names: Vec<String> = config
        .workload
        .mix
        .templates()
        .iter()
        .map(|t| t.label.clone())
        .collect();
    let report = Report::new(
        &args.label,
        &args.series,
        settings,
        &names,
        &result.stats,
        result.elapsed,
    );
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
    }
    if let Some(path) = &args.svg {
        let bars: Vec<Bar> = report
            .rows
            .iter()
            .map(|row| Bar {
                group: format!("{} {}", report.label, row.name),
                series: report.series.clone(),
                ops_per_sec: row.ops_per_sec,
                p50_us: Some(row.latency.percentiles[0] as f64 / 1000.0),
                p99_us: Some(row.latency.p99() as f64 / 1000.0),
            })
            .collect();
        chart::configurations(path, &args.label, &bars)?;
    }
    let errors = result.stats.errors();
    if errors > 0 && !args.allow_errors {
        eprintln!(
            "strata-benchmark: the server answered {errors} of {} requests with errors \
             (see the table; --allow-errors to accept them)",
            result.stats.replies()
        );
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::SUCCESS)
}

/// SETs every key once, in order, with the run's value size, before the measurement.
fn prefill(config: &RunConfig) -> Result<(), Error> {
    let set = Template::builtin("set").ok_or_else(|| Error::Usage("no SET".into()))?;
    let mut fill = config.clone();
    fill.workload.mix = std::sync::Arc::new(Mix::new(vec![(set, 1)])?);
    fill.workload.distribution = Distribution::Sequential;
    fill.stop = Stop::Requests(config.workload.keys);
    fill.pipeline = config.pipeline.max(64);
    let result = client::run(&fill)?;
    let errors = result.stats.errors();
    if errors > 0 {
        let sample = result
            .stats
            .total()
            .error_samples
            .first()
            .map(|(text, _)| text.clone())
            .unwrap_or_default();
        return Err(Error::Usage(format!(
            "prefill: the server answered {errors} SETs with errors, such as: {sample}"
        )));
    }
    eprintln!(
        "prefilled {} keys in {:.1} s",
        config.workload.keys,
        result.elapsed.as_secs_f64()
    );
    Ok(())
}

fn in_process(args: &ShardsArgs) -> Result<ExitCode, Error> {
    let config = args.to_config()?;
    let rows = shards::run(&config, |row| {
        if let Some(m) = row.median() {
            eprintln!(
                "{} shards: {:.0} ops/s, p99 {} ns",
                row.shards,
                m.ops_per_sec,
                m.latency.p99()
            );
        }
    });
    if args.json {
        println!("{}", shards::to_json(&config, &rows));
    } else {
        print!("{}", shards::table(&config, &rows));
    }
    if let Some(path) = &args.svg {
        let title = format!(
            "keyspace in-process: {} threads, {}% SET, {} keys",
            config.threads, config.set_percent, config.keys
        );
        chart::shard_scaling(path, &title, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn plot(args: &PlotArgs) -> Result<ExitCode, Error> {
    let mut bars = Vec::new();
    for path in &args.files {
        let file = |reason: String| Error::File {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file(e.to_string()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| file(e.to_string()))?;
        bars.extend(Bar::from_json(&json).map_err(file)?);
    }
    chart::configurations(&args.out, &args.title, &bars)?;
    Ok(ExitCode::SUCCESS)
}
