//! The strata-benchmark binary end to end, against a small scripted RESP server run
//! by the test (the tests against a real strata live with strata-server's tests).

// A failed expectation in a test helper is a test failure.
#![allow(clippy::unwrap_used)]

mod cli;
mod fake;
