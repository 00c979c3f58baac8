//! The data model.
