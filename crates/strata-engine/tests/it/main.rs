//! Integration tests of strata-engine: one binary, one module per concern.

#![allow(clippy::unwrap_used)]

mod api;
mod common;
mod compaction;
mod concurrency;
mod corruption;
mod crash;
mod external;
mod faults;
mod format;
mod kill9;
mod model;
mod zeros;
