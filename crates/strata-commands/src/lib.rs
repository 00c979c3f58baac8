//! The command table and handlers.
