//! The storage engine.
