//! Hostile command arguments: the fuzz seeds and every input a fuzz run found
//! crashing, replayed through the dispatcher in the normal test run.

mod argv_harness;
mod fuzz_regressions;
