//! Integration tests of strata-resp, one binary with a module per kind of test.

// A failed expectation in a test helper is a test failure.
#![allow(clippy::unwrap_used)]

mod golden;
mod live;
mod props;
