//! strata's embedded Lua 5.1: the interpreter Redis scripts run in, set up the way
//! Redis sets up its own.
//!
//! - [`vm::Vm`]: one interpreter with the sandbox (read-only globals and libraries, no
//!   file system, no `os`, no bytecode loading), the `redis` table, the error handler
//!   that gives Redis's error texts, and the watchdog hook.
//! - [`convert`]: replies to Lua values and back, by Redis's rules.
//! - [`script`]: SHA1 names, EVAL shebangs, FUNCTION library headers.
//! - the libraries Redis exposes: `bit` ([`bit`]), `cjson` ([`cjson`]), `cmsgpack`
//!   ([`cmsgpack`]), `struct` ([`structlib`]), and `math.random` on Redis's generator
//!   ([`rand`]).
//!
//! This crate knows nothing of commands or the keyspace: a run reaches the server only
//! through the [`vm::Host`] it is given.

pub mod api;
pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod convert;
pub mod error;
pub mod fmt;
pub mod rand;
pub mod script;
pub mod structlib;
pub mod vm;

pub use script::{ScriptFlags, sha1hex};
pub use vm::{FunctionMeta, Host, Invocation, Kind, NotFound, Vm, Watchdog};
