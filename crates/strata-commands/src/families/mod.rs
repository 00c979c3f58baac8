//! The command families, one module per Redis group, each with its table entries
//! next to its handlers.

pub mod acl;
pub mod client;
pub mod collection;
pub mod command;
pub mod connection;
pub mod hash;
pub mod keys;
pub mod lcs;
pub mod list;
pub mod memory;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod string;
pub mod transactions;
pub mod zset;

use crate::ctx::Ctx;
use crate::table::Command;

/// Every family's table entries.
pub const ALL: &[&[Command]] = &[
    string::COMMANDS,
    keys::COMMANDS,
    connection::COMMANDS,
    server::COMMANDS,
    command::COMMANDS,
    transactions::COMMANDS,
    memory::COMMANDS,
    list::COMMANDS,
    zset::COMMANDS,
    hash::COMMANDS,
    set::COMMANDS,
    sort::COMMANDS,
    pubsub::COMMANDS,
    client::COMMANDS,
    acl::COMMANDS,
    scripting::COMMANDS,
];

/// Writes a HELP reply: a header, the given lines, and the HELP entry, as status
/// strings.
pub fn help(ctx: &mut Ctx, command: &str, lines: &[&str]) {
    ctx.out.array(lines.len() + 3);
    let header = format!("{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    ctx.out.simple(header.as_bytes());
    for line in lines {
        ctx.out.simple(line.as_bytes());
    }
    ctx.out.simple(b"HELP");
    ctx.out.simple(b"    Prints this help.");
}
