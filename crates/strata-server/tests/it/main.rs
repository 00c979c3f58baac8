//! End-to-end tests: the real `strata-server` binary on a loopback port, driven by raw
//! RESP, by the `redis` crate, and side by side with a real Redis.

mod pairwise;
mod support;

mod acl;
mod basics;
mod benchmark;
mod blocking;
mod client_control;
mod clients;
mod diff_hash;
mod diff_list;
mod diff_pubsub;
mod diff_set;
mod diff_sort;
mod diff_zset;
mod differential;
mod hostile;
mod lazyfree;
mod limits;
mod memory;
mod persistence;
mod protected_mode;
mod protocol;
mod pubsub;
mod random_diff;
mod scripting;
mod tiered;
mod tls;
mod transactions;
