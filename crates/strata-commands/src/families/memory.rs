//! MEMORY: what a key costs.

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};
use crate::spec::{Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const SERVER: Command = Command {
    group: Group::Server,
    since: "4.0.0",
    ..Command::DEFAULT
};

pub const COMMANDS: &[Command] = &[Command {
    name: "memory",
    arity: -2,
    summary: "A container for memory diagnostics commands.",
    complexity: "Depends on subcommand.",
    subcommands: &[
        Command {
            name: "usage",
            arity: -3,
            flags: flags!(READONLY),
            acl: acl!(),
            key_specs: &[KeySpec::single(2, kf!(RO))],
            summary: "Estimates the memory usage of a key.",
            complexity: "O(N) where N is the number of samples.",
            handler: Some(usage),
            ..SERVER
        },
        Command {
            name: "help",
            arity: 2,
            flags: flags!(LOADING, STALE),
            summary: "Returns helpful text about the different subcommands.",
            complexity: "O(1)",
            handler: Some(help),
            ..SERVER
        },
    ],
    ..SERVER
}];

/// MEMORY USAGE key [SAMPLES count]: the bytes the key holds — its entry, its key and
/// its value's allocations, and its share of the table's slots. Values keep their
/// exact size, so SAMPLES is checked but not needed.
fn usage(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut i = 3;
    while i < args.len() {
        if is(args[i], "samples") && i + 1 < args.len() {
            if parse::int(args[i + 1])? < 0 {
                return Err(CmdError::Syntax);
            }
            i += 2;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let now = ctx.keys.now_ms;
    let (hash, db) = ctx.keys.db_for(args[2]);
    let slot_share = db.table_bytes().checked_div(db.len()).unwrap_or(0);
    match db.get(hash, args[2], now) {
        Some(e) => ctx.out.integer((e.memory_usage() + slot_share) as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "MEMORY",
        &[
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. SAMPLES is accepted",
            "    for compatibility: strata keeps exact sizes.",
        ],
    );
    Ok(())
}
