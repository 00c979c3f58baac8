//! The `command_args` fuzz target's seed corpus, replayed, and named regression
//! inputs.

use std::path::Path;

use crate::argv_harness::run;

#[test]
fn every_seed_of_the_corpus_runs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/command_args");
    let mut seeds = 0;
    for entry in std::fs::read_dir(&dir).expect("the seed corpus") {
        let path = entry.expect("a corpus entry").path();
        let is_seed = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("seed-"));
        if is_seed {
            run(&std::fs::read(&path).expect("a seed"));
            seeds += 1;
        }
    }
    assert!(seeds > 300, "only {seeds} seeds");
}

#[test]
fn commands_by_index_reach_the_whole_table() {
    // A one-byte first argument picks a command by index.
    for b in 0u8..=255 {
        if !b.is_ascii_alphabetic() {
            run(&[b, b' ', b'k', b' ', b'1']);
            run(&[b]);
        }
    }
}
