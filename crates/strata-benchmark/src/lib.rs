//! strata-benchmark: a load generator for RESP servers (strata, Redis), and the
//! in-process shard-scaling experiment.
//!
//! The network mode opens `connections` connections spread over `threads` threads,
//! each thread a current-thread Tokio runtime, and keeps up to `pipeline` requests in
//! flight on each connection until a request count or a duration is reached. Requests
//! come from command templates with key and value placeholders, keys from a uniform,
//! zipfian or sequential distribution, values from a shared pool; replies are counted
//! with `strata_resp::scan`, which measures a reply without building it. Latencies go
//! into HDR histograms; the report is a table, JSON, or an SVG chart.
//!
//! The in-process mode drives `strata_keyspace::Keyspace` directly from many threads,
//! with no sockets, to measure how throughput and tail latency change with the number
//! of shards (locks).
//!
//! - [`keys`]: key distributions; [`template`]: command templates; [`workload`]: the
//!   command mix, value sizes and each connection's request generator.
//! - [`pipeline`]: matching replies to requests in flight, without I/O.
//! - [`stats`]: histograms and counts; [`report`]: tables and JSON.
//! - [`client`]: connections, threads and the run itself.
//! - [`shards`]: the in-process experiment; [`chart`]: SVG charts; [`options`]: the
//!   command line.
//!
//! Invariants: the generator allocates nothing per request once its buffers have
//! grown (templates expand into reused buffers, values are slices of one pool, replies
//! are scanned in place); every reply is matched to the request it answers, in order;
//! connection set-up is not part of the measured time.

pub mod chart;
pub mod client;
pub mod keys;
pub mod options;
pub mod pipeline;
pub mod report;
pub mod shards;
pub mod stats;
pub mod template;
pub mod workload;

use std::io;

/// What can stop a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Options that do not make a run.
    #[error("{0}")]
    Usage(String),
    /// The server is not there.
    #[error("cannot connect to {addr}: {source} (is the server running and listening there?)")]
    Connect {
        addr: String,
        #[source]
        source: io::Error,
    },
    /// The server answered the connection's set-up (AUTH, SELECT, PING) with an error.
    #[error("{addr} answered {command} with an error: {reply}")]
    Handshake {
        addr: String,
        command: String,
        reply: String,
    },
    /// A connection failed during the run.
    #[error("connection to {addr} failed: {source}")]
    Io {
        addr: String,
        #[source]
        source: io::Error,
    },
    /// The server closed a connection that still awaited replies.
    #[error("{addr} closed a connection with {pending} replies outstanding")]
    Closed { addr: String, pending: usize },
    /// The server sent bytes that are not RESP.
    #[error("the server sent a malformed reply: {0}")]
    Protocol(#[from] strata_resp::DecodeError),
    /// The server sent a reply to no request.
    #[error("the server sent a reply with no request outstanding")]
    UnexpectedReply,
    /// A report or chart could not be read or written.
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
}
