//! The strata server: sockets, connections, configuration.
