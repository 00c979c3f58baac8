//! `strata-server [path/to/strata.conf] [--directive value ...]`

use strata_server::config::{self, Invocation};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let (cfg, source) = match config::from_args(std::env::args()) {
        Ok(Invocation::Serve { config, source }) => (config, source),
        Ok(Invocation::Version) => {
            println!("{}", config::version());
            return std::process::ExitCode::SUCCESS;
        }
        Ok(Invocation::Help) => {
            println!("{}", config::usage("strata-server"));
            return std::process::ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let logfile = cfg
        .logfile
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let set_level = match strata_server::logging::init(cfg.loglevel.name(), &logfile) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("strata: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    tracing::info!(
        "strata {} starting: port={} pid={} ({source})",
        env!("CARGO_PKG_VERSION"),
        cfg.port,
        std::process::id(),
    );
    match strata_server::run(cfg, source, Some(set_level)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("strata: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
