//! strata's command table and the handlers of Redis's commands.
//!
//! A handler is a plain function of (context, arguments): it reads and changes the
//! keyspace through [`ctx::Keys`] (whose shards the dispatcher has already locked),
//! writes its reply through the context's [`strata_resp::ReplyWriter`], and never
//! touches a socket or awaits. Server-wide matters (configuration, other clients,
//! INFO) go through the [`server::Server`] trait that the server crate implements.
//!
//! - [`table`]: the [`table::Command`] entries and the [`table::Registry`].
//! - [`exec`]: dispatch — lookup, arity, authentication, locking, the call.
//! - [`families`]: the handlers, one module per Redis group.
//! - [`mod@acl`]: users, permissions, the ACL log and the ACL file.

pub mod acl;
pub mod conn;
pub mod ctx;
pub mod effects;
pub mod error;
pub mod evict;
pub mod exec;
#[cfg(test)]
mod fake;
pub mod families;
pub mod longdouble;
pub mod mailbox;
pub mod monitor;
pub mod notify;
pub mod parse;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod spec;
pub mod table;
pub mod tiered;
pub mod tracking;

pub use conn::{BlockRequest, ClientInfo, ConnState};
pub use ctx::{Ctx, Keys};
pub use error::{CmdError, CmdResult};
pub use exec::{Outcome, execute};
pub use pubsub::PubSub;
pub use server::{KeyspaceSummary, MemoryReport, Server, ShutdownMode};
pub use table::{Command, Registry};

/// The registry of every command strata implements.
pub fn registry() -> Registry {
    Registry::new(families::ALL)
}
