//! Integration tests of strata-resp.

mod golden;
