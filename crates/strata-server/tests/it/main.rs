//! End-to-end tests: the real `strata-server` binary on a loopback port, driven by raw
//! RESP, by the `redis` crate, and side by side with a real Redis.

mod pairwise;
mod support;

mod basics;
mod diff_hash;
mod diff_set;
mod differential;
mod protocol;
