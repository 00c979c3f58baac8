//! Fuzzes command argument parsing through the dispatcher; the harness (input format,
//! fake server, checks) is shared with strata-commands' regression tests.

#![no_main]

#[path = "../../crates/strata-commands/tests/it/argv_harness.rs"]
mod argv_harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| argv_harness::run(data));
