//! The `command_args` fuzz target's seed corpus, replayed, and named regression
//! inputs.

use std::path::Path;

use crate::argv_harness::{replies, run};

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

const TOO_LARGE: &[u8] =
    b"-ERR reply too large: a negative count may ask for at most 512mb of repeated elements\r\n";

/// Found by `command_args`: a negative count asks for that many picks with
/// repetitions, so the reply's size follows the count, not the data. ZRANDMEMBER of
/// a three-member set asked for ten trillion picks allocated until memory ran out.
#[test]
fn a_huge_negative_random_count_is_refused_not_built() {
    let out = replies(
        b"ZADD z 1 a 2 b 3 c\nZRANDMEMBER z -9999999999993 WITHSCORES\nZRANDMEMBER z -9999999999993\n\
          SADD s a\nSRANDMEMBER s -4611686018427387903\n\
          HSET h f v\nHRANDFIELD h -4611686018427387903 WITHVALUES\nHRANDFIELD h -89478486",
    );
    for i in [1, 2, 4, 6, 7] {
        assert_eq!(out[i], TOO_LARGE, "reply {i}");
    }
    // Small negative counts still repeat as Redis's do.
    let out = replies(
        b"SADD s a\nSRANDMEMBER s -3\nHSET h f v\nHRANDFIELD h -2\nZADD z 1 a\nZRANDMEMBER z -2",
    );
    assert_eq!(out[1], b"*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n");
    assert_eq!(out[3], b"*2\r\n$1\r\nf\r\n$1\r\nf\r\n");
    assert_eq!(out[5], b"*2\r\n$1\r\na\r\n$1\r\na\r\n");
}

/// A count the smallest picks would fit, but whose picks are big: the reply is
/// checked as it grows, and what was written of it is taken back with the error.
#[test]
fn a_random_reply_that_outgrows_the_limit_is_taken_back() {
    let member = "m".repeat(200);
    // 200-byte members, 3,000,000 picks: 612 MB, past the 512 MB limit.
    let script = format!(
        "SADD s {member}\nSRANDMEMBER s -3000000\nHSET h {member} v\nHRANDFIELD h -3000000\n\
         ZADD z 1 {member}\nZRANDMEMBER z -3000000\nSRANDMEMBER s -2"
    );
    let out = replies(script.as_bytes());
    for i in [1, 3, 5] {
        assert_eq!(out[i], TOO_LARGE, "reply {i}");
    }
    assert!(out[6].starts_with(b"*2\r\n$200\r\n"));
}
