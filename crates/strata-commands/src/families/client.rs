//! CLIENT subcommands that steer other clients or this connection's replies (PAUSE,
//! UNPAUSE, UNBLOCK, NO-EVICT, REPLY, HELP), and MONITOR. The CLIENT container and
//! its other subcommands are in `connection`.

use std::sync::atomic::Ordering;

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::parse::{self, is};
use crate::spec::Group;
use crate::table::Command;
use crate::{acl, flags};

const SUB: Command = Command {
    group: Group::Connection,
    acl: acl!(CONNECTION),
    flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE),
    complexity: "O(1)",
    ..Command::DEFAULT
};

pub const PAUSE: Command = Command {
    name: "pause",
    arity: -3,
    since: "2.9.50",
    summary: "Stop processing commands from clients for some time",
    handler: Some(pause),
    ..SUB
};

pub const UNPAUSE: Command = Command {
    name: "unpause",
    arity: 2,
    since: "6.2.0",
    summary: "Resume processing of clients that were paused",
    complexity: "O(N) Where N is the number of paused clients",
    handler: Some(unpause),
    ..SUB
};

pub const UNBLOCK: Command = Command {
    name: "unblock",
    arity: -3,
    since: "5.0.0",
    summary: "Unblock a client blocked in a blocking command from a different connection",
    complexity: "O(log N) where N is the number of client connections",
    handler: Some(unblock),
    ..SUB
};

pub const NO_EVICT: Command = Command {
    name: "no-evict",
    arity: 3,
    since: "7.0.0",
    summary: "Set client eviction mode for the current connection",
    handler: Some(no_evict),
    ..SUB
};

pub const REPLY: Command = Command {
    name: "reply",
    arity: 3,
    flags: flags!(NOSCRIPT, LOADING, STALE),
    since: "3.2.0",
    summary: "Instruct the server whether to reply to commands",
    handler: Some(reply),
    ..SUB
};

pub const HELP: Command = Command {
    name: "help",
    arity: 2,
    flags: flags!(LOADING, STALE),
    since: "5.0.0",
    summary: "Show helpful text about the different subcommands",
    handler: Some(help),
    ..SUB
};

pub const COMMANDS: &[Command] = &[Command {
    name: "monitor",
    arity: 1,
    flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE),
    acl: acl!(),
    group: Group::Server,
    since: "1.0.0",
    summary: "Listen for all requests received by the server in real time",
    complexity: "",
    handler: Some(monitor),
    ..SUB
}];

/// Redis's reply to a CLIENT subcommand given the wrong number of arguments.
fn wrong_args(sub: &[u8]) -> CmdError {
    CmdError::quoting(
        "unknown subcommand or wrong number of arguments for '",
        crate::error::c_str(sub, 128),
        "'. Try CLIENT HELP.",
    )
}

fn pause(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len() > 4 {
        return Err(wrong_args(args[1]));
    }
    let timeout = parse::int(args[2])
        .map_err(|_| CmdError::err("timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    let writes_only = match args.get(3) {
        None => false,
        Some(m) if is(m, "write") => true,
        Some(m) if is(m, "all") => false,
        Some(_) => return Err(CmdError::err("CLIENT PAUSE mode must be WRITE or ALL")),
    };
    let until = ctx.keys.now_ms.saturating_add(timeout as u64);
    ctx.server.pause_clients(until, writes_only);
    ctx.out.ok();
    Ok(())
}

fn unpause(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.server.unpause_clients();
    ctx.out.ok();
    Ok(())
}

fn unblock(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if args.len() > 4 {
        return Err(wrong_args(args[1]));
    }
    let with_error = match args.get(3) {
        None => false,
        Some(m) if is(m, "timeout") => false,
        Some(m) if is(m, "error") => true,
        Some(_) => {
            return Err(CmdError::err(
                "CLIENT UNBLOCK reason should be TIMEOUT or ERROR",
            ));
        }
    };
    let id = parse::int(args[2]).map_err(|_| CmdError::NotInteger)?;
    let done =
        id > 0 && id as u64 != ctx.conn.id() && ctx.server.unblock_client(id as u64, with_error);
    ctx.out.integer(done as i64);
    Ok(())
}

fn no_evict(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let on = if is(args[2], "on") {
        true
    } else if is(args[2], "off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.conn.info.no_evict.store(on, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

fn reply(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mode = &mut ctx.conn.reply;
    if is(args[2], "on") {
        *mode = Default::default();
        ctx.out.ok();
    } else if is(args[2], "off") {
        mode.off = true;
    } else if is(args[2], "skip") {
        if !mode.off {
            mode.skip_next = true;
        }
    } else {
        return Err(CmdError::Syntax);
    }
    Ok(())
}

fn monitor(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    if !ctx.conn.may_block {
        // Inside MULTI/EXEC the client expects one reply per command.
        return Err(CmdError::err(
            "MONITOR isn't allowed for DENY BLOCKING client",
        ));
    }
    let Some(hub) = ctx.server.pubsub() else {
        return Err(CmdError::err("MONITOR is not available in this server"));
    };
    // A client already monitoring gets no reply, as in Redis.
    if hub.add_monitor(&ctx.conn.info) {
        ctx.out.ok();
    }
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "CLIENT",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
    Ok(())
}
