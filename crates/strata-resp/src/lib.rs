//! RESP2/RESP3/inline codec for strata: streaming, zero-copy, sans-I/O.
//!
//! The crate turns bytes into requests and replies into bytes, and knows nothing of
//! sockets, runtimes or commands:
//! - [`request`]: the server's incremental parser of client requests (RESP multibulk
//!   and inline), with Redis 7.0's limits and exact protocol error texts;
//! - [`reply`]: the server's reply encoder, RESP2 or RESP3 per client, including the
//!   RESP2 fallbacks of RESP3 types and Redis's `%.17g` doubles;
//! - [`value`]: a client-side [`Value`] with a streaming decoder and an encoder, for
//!   tests, benchmarks and differential testing against Redis;
//! - [`inline`]: Redis's `sdssplitargs` argument splitting and its inverse quoting.
//!
//! Invariant: no decoder panics on any input; each module that reads untrusted bytes
//! denies `clippy::indexing_slicing`.

pub mod inline;
mod number;
pub mod reply;
pub mod request;
pub mod value;

pub use reply::{Protocol, ReplyWriter, format_double};
pub use request::{Args, Limits, Parsed, ProtocolError, RequestParser};
pub use value::{DecodeError, Frame, Value, decode, encode_request, scan};
