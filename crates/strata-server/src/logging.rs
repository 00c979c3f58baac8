//! Logging through `tracing`: Redis's log levels and `logfile` ("" = standard output).

use std::sync::Arc;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::reload;

/// The `tracing` filter for a Redis log level.
pub fn filter_for(level: &str) -> EnvFilter {
    let directive = match level {
        "debug" => "debug",
        "verbose" => "debug",
        "notice" => "info",
        "warning" => "warn",
        "nothing" => "off",
        _ => "info",
    };
    EnvFilter::new(directive)
}

/// Installs the global subscriber; returns a function that changes the level later
/// (CONFIG SET loglevel).
pub fn init(level: &str, logfile: &str) -> anyhow::Result<crate::LogLevelSetter> {
    let writer = if logfile.is_empty() {
        BoxMakeWriter::new(std::io::stdout)
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
            .map_err(|e| anyhow::anyhow!("can't open the log file '{logfile}': {e}"))?;
        BoxMakeWriter::new(Arc::new(file))
    };
    let (filter, handle) = reload::Layer::new(filter_for(level));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(logfile.is_empty())
        .with_target(false);
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .try_init()?;
    Ok(Box::new(move |level: &str| {
        let _ = handle.reload(filter_for(level));
    }))
}
