//! `strata-check`: inspects a strata data directory and, when asked, repairs it.
//!
//! ```text
//! strata-check [--repair] DIR
//! ```
//!
//! DIR is the server's `dir` (holding `appendonlydir`) or the store directory
//! itself. Without `--repair` nothing is changed: every segment is read record by
//! record and every hint file decoded, and the first damage is reported with its
//! file and offset. With `--repair` the log is cut at the first damaged record; the
//! segments after it are set aside (renamed `*.dropped`, not deleted). The server
//! must not be running on the directory.
//!
//! Exit status: 0 when the store opens as it is (a torn write at the very end is
//! truncated by the server itself), 1 when it is damaged, 2 on usage or I/O errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use strata_engine::log::check::{HintCheck, SegmentCheck};
use strata_engine::{Engine, Options, OsVfs};

const USAGE: &str = "usage: strata-check [--repair] DIR";

fn main() -> ExitCode {
    let mut repair = false;
    let mut dir = None;
    for arg in std::env::args_os().skip(1) {
        match arg.to_str() {
            Some("--repair") => repair = true,
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            Some(flag) if flag.starts_with('-') => {
                eprintln!("strata-check: unknown option {flag}\n{USAGE}");
                return ExitCode::from(2);
            }
            _ if dir.is_none() => dir = Some(PathBuf::from(arg)),
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(dir) = dir else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let store = store_dir(&dir);
    match run(&store, repair) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("strata-check: {}: {e}", store.display());
            ExitCode::from(2)
        }
    }
}

/// The store directory: DIR itself, or DIR/appendonlydir when DIR is a server's `dir`.
fn store_dir(dir: &Path) -> PathBuf {
    let inner = dir.join(strata_server::persist::DATA_DIR);
    if inner.is_dir() {
        inner
    } else {
        dir.to_path_buf()
    }
}

fn run(store: &Path, repair: bool) -> Result<ExitCode, strata_engine::Error> {
    if !store.is_dir() {
        return Err(strata_engine::Error::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such directory",
        )));
    }
    println!("Checking {}", store.display());
    let report = strata_engine::check(&OsVfs, store)?;
    for s in &report.segments {
        print_segment(s);
    }
    for name in &report.other_files {
        println!("  {name}: not part of the store (left alone)");
    }
    let records: u64 = report
        .segments
        .iter()
        .map(|s| s.puts + s.merges + s.deletes)
        .sum();
    let Some((segment, damage)) = report.first_corruption() else {
        let torn = report
            .segments
            .iter()
            .any(|s| s.damage.as_ref().is_some_and(|d| d.torn_tail));
        if torn {
            println!(
                "OK: {} segments, {records} records; a torn write at the end is truncated when the server starts",
                report.segments.len()
            );
        } else {
            println!("OK: {} segments, {records} records", report.segments.len());
        }
        return Ok(ExitCode::SUCCESS);
    };
    println!(
        "DAMAGED: {} at offset {}: {}",
        segment.path.display(),
        damage.offset,
        damage.reason
    );
    if !repair {
        println!(
            "The server refuses to start on this directory. `strata-check --repair {}` cuts the log at that offset; the segments after it are set aside as *.dropped.",
            store.display()
        );
        return Ok(ExitCode::from(1));
    }
    let lost: u64 = report
        .segments
        .iter()
        .filter(|s| s.id > segment.id)
        .map(|s| s.puts + s.merges + s.deletes)
        .sum();
    println!(
        "Repairing: cutting {} at offset {}; {lost} records in later segments are set aside",
        segment.path.display(),
        damage.offset
    );
    let options = Options::default().with_repair(true).with_compaction(None);
    Engine::open(store, options)?.close()?;
    let after = strata_engine::check(&OsVfs, store)?;
    if after.first_corruption().is_some() {
        println!("Repair failed: the store is still damaged");
        return Ok(ExitCode::from(1));
    }
    println!("Repaired: the store opens cleanly");
    Ok(ExitCode::SUCCESS)
}

fn print_segment(s: &SegmentCheck) {
    let name = s
        .path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let hint = match &s.hint {
        HintCheck::Missing => "no hint".to_string(),
        HintCheck::Valid(n) => format!("hint with {n} entries"),
        HintCheck::Damaged(why) => format!("damaged hint ({why}; the segment is scanned instead)"),
    };
    println!(
        "  {name}: {} bytes, {} puts, {} merges, {} deletes, {hint}",
        s.len, s.puts, s.merges, s.deletes
    );
    if s.zeros > 0 {
        println!(
            "    {} bytes of zeros after the records (written ahead of them; trimmed on start-up)",
            s.zeros
        );
    }
    if let Some(d) = &s.damage {
        let what = if d.torn_tail { "torn write" } else { "damage" };
        println!("    {what} at offset {}: {}", d.offset, d.reason);
    }
}
