//! The strata server: sockets, connections, configuration.

pub mod config;
