//! CLIENT subcommands that steer other clients or this connection's replies (PAUSE,
//! UNPAUSE, UNBLOCK, NO-EVICT, REPLY, HELP), client-side caching (TRACKING, CACHING,
//! GETREDIR, TRACKINGINFO), and MONITOR. The CLIENT container and its other
//! subcommands are in `connection`.

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

/// From Redis 7.2.
pub const NO_TOUCH: Command = Command {
    name: "no-touch",
    arity: 3,
    flags: flags!(NOSCRIPT, LOADING, STALE),
    since: "7.2.0",
    summary: "Controls whether commands sent by the client affect the LRU/LFU of accessed keys",
    complexity: "O(1)",
    handler: Some(no_touch),
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

const TRACKING_SUB: Command = Command {
    flags: flags!(NOSCRIPT, LOADING, STALE),
    since: "6.0.0",
    ..SUB
};

pub const TRACKING: Command = Command {
    name: "tracking",
    arity: -3,
    summary: "Enable or disable server assisted client side caching support",
    complexity: "O(1). Some options may introduce additional complexity.",
    handler: Some(tracking),
    ..TRACKING_SUB
};

pub const CACHING: Command = Command {
    name: "caching",
    arity: 3,
    summary: "Instruct the server about tracking or not keys in the next request",
    handler: Some(caching),
    ..TRACKING_SUB
};

pub const GETREDIR: Command = Command {
    name: "getredir",
    arity: 2,
    summary: "Get tracking notifications redirection client ID if any",
    handler: Some(getredir),
    ..TRACKING_SUB
};

pub const TRACKINGINFO: Command = Command {
    name: "trackinginfo",
    arity: 2,
    since: "6.2.0",
    summary: "Return information about server assisted client side caching for the current connection",
    handler: Some(trackinginfo),
    ..TRACKING_SUB
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

fn no_touch(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let on = if is(args[2], "on") {
        true
    } else if is(args[2], "off") {
        false
    } else {
        return Err(CmdError::Syntax);
    };
    ctx.conn.info.no_touch.store(on, Ordering::Relaxed);
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

fn tracking(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut redirect: Option<std::sync::Arc<crate::conn::ClientInfo>> = None;
    let (mut bcast, mut optin, mut optout, mut noloop) = (false, false, false, false);
    let mut prefixes: Vec<&[u8]> = Vec::new();
    let mut j = 3;
    // Options are read in order, each checked as it comes, as Redis does.
    while j < args.len() {
        let more = j + 1 < args.len();
        let opt = args[j];
        if is(opt, "redirect") && more {
            j += 1;
            if redirect.is_some() {
                return Err(CmdError::err(
                    "A client can only redirect to a single other client",
                ));
            }
            let id = parse::int(args[j]).map_err(|_| CmdError::NotInteger)?;
            let target = ctx
                .server
                .clients()
                .into_iter()
                .find(|c| c.id as i64 == id)
                .ok_or_else(|| {
                    CmdError::err("The client ID you want redirect to does not exist")
                })?;
            redirect = Some(target);
        } else if is(opt, "bcast") {
            bcast = true;
        } else if is(opt, "optin") {
            optin = true;
        } else if is(opt, "optout") {
            optout = true;
        } else if is(opt, "noloop") {
            noloop = true;
        } else if is(opt, "prefix") && more {
            j += 1;
            prefixes.push(args[j]);
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    let Some(hub) = ctx.server.pubsub() else {
        return Err(CmdError::err(
            "client tracking is not available in this server",
        ));
    };
    let info = ctx.conn.info.clone();
    if is(args[2], "off") {
        hub.tracking.disable(&info);
        hub.sync_event_flags(ctx.keys.ks);
        ctx.out.ok();
        return Ok(());
    }
    if !is(args[2], "on") {
        return Err(CmdError::Syntax);
    }
    if !bcast && !prefixes.is_empty() {
        return Err(CmdError::err(
            "PREFIX option requires BCAST mode to be enabled",
        ));
    }
    let mut state = info.tracking.lock();
    if state.on && state.bcast != bcast {
        return Err(CmdError::err(
            "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if bcast && (optin || optout) {
        return Err(CmdError::err(
            "OPTIN and OPTOUT are not compatible with BCAST",
        ));
    }
    if optin && optout {
        return Err(CmdError::err(
            "You can't specify both OPTIN mode and OPTOUT mode",
        ));
    }
    if (optin && state.optout) || (optout && state.optin) {
        return Err(CmdError::err(
            "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        ));
    }
    if bcast {
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(old) = state
                .prefixes
                .iter()
                .find(|old| crate::tracking::overlap(old, p))
            {
                let mut text = b"ERR Prefix '".to_vec();
                text.extend_from_slice(crate::error::c_str(p, usize::MAX));
                text.extend_from_slice(b"' overlaps with an existing prefix '");
                text.extend_from_slice(crate::error::c_str(old, usize::MAX));
                text.extend_from_slice(b"'. Prefixes for a single client must not overlap.");
                return Err(CmdError::Other(text.into()));
            }
            if let Some(other) = prefixes[i + 1..]
                .iter()
                .find(|q| crate::tracking::overlap(p, q))
            {
                let mut text = b"ERR Prefix '".to_vec();
                text.extend_from_slice(crate::error::c_str(p, usize::MAX));
                text.extend_from_slice(b"' overlaps with another provided prefix '");
                text.extend_from_slice(crate::error::c_str(other, usize::MAX));
                text.extend_from_slice(b"'. Prefixes for a single client must not overlap.");
                return Err(CmdError::Other(text.into()));
            }
        }
    }
    // Turning it on again resets the options and the redirection (BCAST prefixes
    // accumulate), as Redis's enableTracking does.
    state.on = true;
    state.bcast = bcast;
    state.optin = optin;
    state.optout = optout;
    state.noloop = noloop;
    state.broken = false;
    state.redirect = redirect.as_ref().map_or(0, |t| t.id);
    state.redirect_to = redirect.as_ref().map(std::sync::Arc::downgrade);
    if bcast {
        if prefixes.is_empty() {
            state.prefixes.insert(Vec::new());
        }
        state.prefixes.extend(prefixes.iter().map(|p| p.to_vec()));
    }
    drop(state);
    info.tracking_on.store(true, Ordering::Relaxed);
    hub.tracking.enable(&info, bcast);
    hub.sync_event_flags(ctx.keys.ks);
    ctx.out.ok();
    Ok(())
}

fn caching(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (on, optin, optout) = {
        let t = ctx.conn.info.tracking.lock();
        (t.on, t.optin, t.optout)
    };
    if !on {
        return Err(CmdError::err(
            "CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    }
    if is(args[2], "yes") {
        if !optin {
            return Err(CmdError::err(
                "CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if is(args[2], "no") {
        if !optout {
            return Err(CmdError::err(
                "CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(CmdError::Syntax);
    }
    ctx.conn.caching = true;
    ctx.out.ok();
    Ok(())
}

/// CLIENT GETREDIR and TRACKINGINFO's `redirect`: -1 without tracking, 0 without a
/// redirection.
pub fn redirect_of(info: &crate::conn::ClientInfo) -> i64 {
    let t = info.tracking.lock();
    if !t.on { -1 } else { t.redirect as i64 }
}

fn getredir(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.out.integer(redirect_of(&ctx.conn.info));
    Ok(())
}

fn trackinginfo(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let (flags, prefixes) = {
        let t = ctx.conn.info.tracking.lock();
        let caching = ctx.conn.caching;
        let mut flags: Vec<&str> = Vec::new();
        if !t.on {
            flags.push("off");
        } else {
            flags.push("on");
            if t.bcast {
                flags.push("bcast");
            }
            if t.optin {
                flags.push("optin");
                if caching {
                    flags.push("caching-yes");
                }
            }
            if t.optout {
                flags.push("optout");
                if caching {
                    flags.push("caching-no");
                }
            }
            if t.noloop {
                flags.push("noloop");
            }
            if t.broken {
                flags.push("broken_redirect");
            }
        }
        (flags, t.prefixes.iter().cloned().collect::<Vec<_>>())
    };
    ctx.out.map(3);
    ctx.out.bulk(b"flags");
    ctx.out.set(flags.len());
    for f in &flags {
        ctx.out.bulk(f.as_bytes());
    }
    ctx.out.bulk(b"redirect");
    ctx.out.integer(redirect_of(&ctx.conn.info));
    ctx.out.bulk(b"prefixes");
    ctx.out.array(prefixes.len());
    for p in &prefixes {
        ctx.out.bulk(p);
    }
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
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
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
    Ok(())
}
