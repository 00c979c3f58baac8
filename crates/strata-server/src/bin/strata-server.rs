//! `strata-server [path/to/strata.conf] [--directive value ...]`

use strata_server::config::{self, Invocation};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (`_RJEM_MALLOC_CONF` in the
/// environment is read after them, so it can still override any):
///
/// - `cache_oblivious:false`: a large allocation (16 KiB and up, such as a keyspace
///   table's slot array) is not given an extra page to start at a random cache line.
///   The page costs more than the cache-set aliasing it avoids could: 4 KiB on each
///   shard's 40 KiB table at 1,000,000 keys.
/// - `tcache_max:8192`: threads cache freed allocations up to 8 KiB only (32 KiB by
///   default), so the slot arrays a finished resize frees go back to the arena
///   instead of sitting, counted as allocated, in the cache of a thread that may not
///   allocate again for a long time.
/// - `slab_sizes`: the small classes that fill one page exactly take two-page slabs,
///   which halves jemalloc's 128-byte records of slabs (one per 32 entries of 128
///   bytes by default). Larger slabs save more records but cannot reuse the holes
///   freed slot arrays leave, which then stay resident until jemalloc's decay.
///
/// Together they take 5 to 6 bytes a key off the resident set at 1,000,000 keys with
/// 100-byte values (docs/BENCHMARKS.md, "jemalloc's options").
#[allow(unsafe_code)] // jemalloc looks this symbol up by name; nothing else names it.
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf = MallocConf(
    c"cache_oblivious:false,tcache_max:8192,slab_sizes:16-16:2|32-32:2|64-64:2|128-128:2|256-256:2"
        .as_ptr(),
);

/// A pointer to a static C string, which jemalloc only reads.
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, immutable and alive for the program.
#[allow(unsafe_code)]
unsafe impl Sync for MallocConf {}

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
