//! Connection commands: PING, ECHO, QUIT, HELLO, AUTH, SELECT, SWAPDB, RESET, CLIENT.

use std::sync::atomic::Ordering;

use strata_resp::Protocol;

use crate::conn::ClientInfo;
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::families::keys::db_index;
use crate::parse::{self, is};
use crate::spec::Group;
use crate::table::Command;
use crate::{acl, flags};

const CONNECTION: Command = Command {
    group: Group::Connection,
    acl: acl!(CONNECTION),
    ..Command::DEFAULT
};

const CLIENT_SUB: Command = Command {
    flags: flags!(NOSCRIPT, LOADING, STALE),
    complexity: "O(1)",
    ..CONNECTION
};

/// The Redis version reported to clients that check it (HELLO, INFO): strata
/// implements this version's commands and replies.
pub const REDIS_VERSION: &str = "7.0.15";

pub const COMMANDS: &[Command] = &[
    Command {
        name: "ping",
        arity: -1,
        flags: flags!(FAST),
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        summary: "Returns the server's liveliness response.",
        complexity: "O(1)",
        handler: Some(ping),
        ..CONNECTION
    },
    Command {
        name: "echo",
        arity: 2,
        flags: flags!(LOADING, STALE, FAST),
        summary: "Returns the given string.",
        complexity: "O(1)",
        handler: Some(echo),
        ..CONNECTION
    },
    Command {
        name: "quit",
        arity: -1,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY),
        summary: "Closes the connection.",
        complexity: "O(1)",
        handler: Some(quit),
        ..CONNECTION
    },
    Command {
        name: "hello",
        arity: -1,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY),
        since: "6.0.0",
        summary: "Handshakes with the server: protocol version, authentication, client name.",
        complexity: "O(1)",
        handler: Some(hello),
        ..CONNECTION
    },
    Command {
        name: "auth",
        arity: -2,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY),
        summary: "Authenticates the connection.",
        complexity: "O(N) where N is the number of passwords defined for the user",
        handler: Some(auth),
        ..CONNECTION
    },
    Command {
        name: "select",
        arity: 2,
        flags: flags!(LOADING, STALE, FAST),
        summary: "Changes the selected database.",
        complexity: "O(1)",
        handler: Some(select),
        ..CONNECTION
    },
    Command {
        name: "swapdb",
        touches_all: true,
        arity: 3,
        flags: flags!(WRITE, FAST),
        acl: acl!(KEYSPACE, DANGEROUS),
        group: Group::Server,
        since: "4.0.0",
        summary: "Swaps two databases.",
        complexity: "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        handler: Some(swapdb),
        ..CONNECTION
    },
    Command {
        name: "reset",
        arity: 1,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, NO_AUTH, ALLOW_BUSY),
        since: "6.2.0",
        summary: "Resets the connection.",
        complexity: "O(1)",
        handler: Some(reset),
        ..CONNECTION
    },
    Command {
        name: "client",
        arity: -2,
        acl: acl!(),
        since: "2.4.0",
        summary: "A container for client connection commands.",
        complexity: "Depends on subcommand.",
        subcommands: &[
            Command {
                name: "id",
                arity: 2,
                since: "5.0.0",
                summary: "Returns the unique client ID of the connection.",
                handler: Some(client_id),
                ..CLIENT_SUB
            },
            Command {
                name: "getname",
                arity: 2,
                since: "2.6.9",
                summary: "Returns the name of the connection.",
                handler: Some(client_getname),
                ..CLIENT_SUB
            },
            Command {
                name: "setname",
                arity: 3,
                since: "2.6.9",
                summary: "Sets the connection name.",
                handler: Some(client_setname),
                ..CLIENT_SUB
            },
            Command {
                name: "info",
                arity: 2,
                tips: &["nondeterministic_output"],
                since: "6.2.0",
                summary: "Returns information about the connection.",
                handler: Some(client_info),
                ..CLIENT_SUB
            },
            Command {
                name: "list",
                arity: -2,
                flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE),
                tips: &["nondeterministic_output"],
                since: "2.4.0",
                summary: "Lists open connections.",
                complexity: "O(N) where N is the number of client connections",
                handler: Some(client_list),
                ..CLIENT_SUB
            },
            Command {
                name: "kill",
                arity: -3,
                flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE),
                since: "2.4.0",
                summary: "Terminates open connections.",
                complexity: "O(N) where N is the number of client connections",
                handler: Some(client_kill),
                ..CLIENT_SUB
            },
            crate::families::client::PAUSE,
            crate::families::client::UNPAUSE,
            crate::families::client::UNBLOCK,
            crate::families::client::NO_EVICT,
            crate::families::client::NO_TOUCH,
            crate::families::client::REPLY,
            crate::families::client::TRACKING,
            crate::families::client::CACHING,
            crate::families::client::GETREDIR,
            crate::families::client::TRACKINGINFO,
            crate::families::client::HELP,
        ],
        ..CONNECTION
    },
];

fn ping(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if ctx.conn.in_subscribed_mode() {
        // RESP2's subscribed mode answers in the shape of a message.
        if args.len() > 2 {
            return Err(CmdError::WrongArity(ctx.name()));
        }
        ctx.out.array(2);
        ctx.out.bulk(b"pong");
        ctx.out.bulk(args.get(1).copied().unwrap_or_default());
        return Ok(());
    }
    match args {
        [_] => ctx.out.simple(b"PONG"),
        [_, msg] => ctx.out.bulk(msg),
        _ => return Err(CmdError::WrongArity(ctx.name())),
    }
    Ok(())
}

fn echo(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    ctx.out.bulk(args[1]);
    Ok(())
}

fn quit(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.conn.close_after_reply = true;
    ctx.out.ok();
    Ok(())
}

fn auth(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (user, pass): (&[u8], &[u8]) = match args {
        [_, pass] => {
            if crate::families::acl::starts_authenticated(ctx.server) {
                return Err(CmdError::err(
                    "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                ));
            }
            (b"default", pass)
        }
        [_, user, pass] => (user, pass),
        _ => return Err(CmdError::Syntax),
    };
    crate::families::acl::authenticate(ctx, args[0], user, pass)?;
    ctx.out.ok();
    Ok(())
}

/// Validates a client name as Redis does: printable ASCII without spaces.
fn valid_name(name: &[u8]) -> Result<(), CmdError> {
    if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::err(
            "Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

fn set_name(ctx: &mut Ctx, name: &[u8]) {
    *ctx.conn.info.name.lock() = if name.is_empty() {
        None
    } else {
        Some(name.to_vec())
    };
}

fn hello(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut version = None;
    let mut i = 1;
    if let Some(v) = args.get(1) {
        let v = parse::int(v)
            .map_err(|_| CmdError::err("Protocol version is not an integer or out of range"))?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::coded("NOPROTO unsupported protocol version"));
        }
        version = Some(v);
        i = 2;
    }
    // As in Redis, each option takes effect as it is read: a bad option later on
    // does not undo an earlier AUTH or SETNAME.
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(args[i], "auth") && more >= 2 {
            crate::families::acl::authenticate(ctx, args[0], args[i + 1], args[i + 2])?;
            i += 3;
        } else if is(args[i], "setname") && more >= 1 {
            valid_name(args[i + 1])?;
            set_name(ctx, args[i + 1]);
            i += 2;
        } else {
            return Err(CmdError::quoting(
                "Syntax error in HELLO option '",
                args[i],
                "'",
            ));
        }
    }
    if !ctx.conn.authenticated {
        return Err(CmdError::coded(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if let Some(v) = version {
        let proto = if v == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        ctx.conn.set_proto(proto);
        // The reply itself is already in the new protocol.
        ctx.out.set_protocol(proto);
    }
    let proto = if ctx.conn.proto == Protocol::Resp3 {
        3
    } else {
        2
    };
    ctx.out.map(7);
    ctx.out.bulk(b"server");
    ctx.out.bulk(b"redis");
    ctx.out.bulk(b"version");
    ctx.out.bulk(REDIS_VERSION.as_bytes());
    ctx.out.bulk(b"proto");
    ctx.out.integer(proto);
    ctx.out.bulk(b"id");
    ctx.out.integer(ctx.conn.id() as i64);
    ctx.out.bulk(b"mode");
    ctx.out.bulk(b"standalone");
    ctx.out.bulk(b"role");
    ctx.out.bulk(b"master");
    ctx.out.bulk(b"modules");
    ctx.out.array(0);
    Ok(())
}

fn select(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let db = db_index(ctx, args[1])?;
    ctx.conn.set_db(db);
    ctx.keys.db = db;
    ctx.out.ok();
    Ok(())
}

fn swapdb(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let parse_index = |arg: &[u8], what: &'static str| -> Result<i64, CmdError> {
        let n = parse::int(arg).map_err(|_| CmdError::err(what))?;
        if n < i32::MIN as i64 || n > i32::MAX as i64 {
            return Err(CmdError::err(what));
        }
        Ok(n)
    };
    let a = parse_index(args[1], "invalid first DB index")?;
    let b = parse_index(args[2], "invalid second DB index")?;
    let dbs = ctx.server.databases() as i64;
    if a < 0 || a >= dbs || b < 0 || b >= dbs {
        return Err(CmdError::DbIndexOutOfRange);
    }
    ctx.keys.lock_all();
    ctx.keys
        .for_each_shard(|shard| shard.swap_dbs(a as usize, b as usize));
    ctx.keys.log_special_in(
        a as usize,
        crate::effects::RecordKind::SwapDb { other: b as usize },
    );
    ctx.keys.dirty += 1;
    ctx.out.ok();
    Ok(())
}

fn reset(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    if let Some(hub) = ctx.server.pubsub() {
        hub.forget(ctx.conn);
        hub.tracking.disable(&ctx.conn.info);
        hub.sync_event_flags(ctx.keys.ks);
    }
    ctx.conn.caching = false;
    ctx.conn.reply = Default::default();
    ctx.conn.info.no_evict.store(false, Ordering::Relaxed);
    ctx.conn.info.no_touch.store(false, Ordering::Relaxed);
    ctx.conn.set_multi(None);
    crate::families::transactions::unwatch_all(ctx.keys, ctx.conn);
    ctx.conn.set_db(0);
    ctx.conn.set_proto(Protocol::Resp2);
    ctx.conn.authenticated = crate::families::acl::starts_authenticated(ctx.server);
    ctx.conn.user.reset();
    *ctx.conn.info.user.lock() = b"default".to_vec();
    *ctx.conn.info.name.lock() = None;
    ctx.out.set_protocol(Protocol::Resp2);
    ctx.out.simple(b"RESET");
    Ok(())
}

fn client_id(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.out.integer(ctx.conn.id() as i64);
    Ok(())
}

fn client_getname(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    match ctx.conn.info.name() {
        Some(n) => ctx.out.bulk(&n),
        None => ctx.out.null(),
    }
    Ok(())
}

fn client_setname(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    valid_name(args[2])?;
    set_name(ctx, args[2]);
    ctx.out.ok();
    Ok(())
}

/// One CLIENT LIST line, with Redis's fields.
pub fn client_line(c: &ClientInfo, now_ms: u64, registry: &crate::table::Registry) -> String {
    let name = c
        .name()
        .map(|n| String::from_utf8_lossy(&n).into_owned())
        .unwrap_or_default();
    let cmd = registry
        .by_id(c.last_cmd.load(Ordering::Relaxed))
        .map_or("NULL".to_string(), |c| c.full_name());
    let age = now_ms.saturating_sub(c.created_ms) / 1000;
    let idle = now_ms.saturating_sub(c.last_interaction_ms.load(Ordering::Relaxed)) / 1000;
    let qbuf = c.qbuf.load(Ordering::Relaxed);
    let qbuf_free = c.qbuf_free.load(Ordering::Relaxed);
    // Replies not yet written count as the reply buffer (`obl`); frames other
    // clients queued for it as the reply list (`oll`, `omem`).
    let obl = c.obuf.load(Ordering::Relaxed);
    let oll = c.mailbox.len();
    let omem = c.mailbox.bytes();
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem=0 rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events=r cmd={} user={} redir={} resp={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        name,
        age,
        idle,
        c.flags(),
        c.db.load(Ordering::Relaxed),
        c.sub.load(Ordering::Relaxed),
        c.psub.load(Ordering::Relaxed),
        c.ssub.load(Ordering::Relaxed),
        c.multi.load(Ordering::Relaxed),
        qbuf,
        qbuf_free,
        qbuf + qbuf_free,
        qbuf,
        obl,
        oll,
        omem,
        qbuf + qbuf_free + obl + omem,
        cmd,
        String::from_utf8_lossy(&c.user.lock()),
        crate::families::client::redirect_of(c),
        c.resp.load(Ordering::Relaxed),
    )
}

fn client_info(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let mut line = client_line(&ctx.conn.info, ctx.keys.now_ms, ctx.server.registry());
    line.push('\n');
    ctx.out.verbatim(b"txt", line.as_bytes());
    Ok(())
}

fn client_list(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let mut clients = ctx.server.clients();
    clients.sort_by_key(|c| c.id);
    if args.len() == 4 && is(args[2], "type") {
        let t = args[3];
        match client_type(t) {
            Some(kind) => clients.retain(|c| type_of(c) == kind),
            None => {
                return Err(CmdError::quoting("Unknown client type '", t, "'"));
            }
        }
    } else if args.len() > 3 && is(args[2], "id") {
        let mut ids = Vec::new();
        for a in &args[3..] {
            ids.push(parse::int(a).map_err(|_| CmdError::err("Invalid client ID"))?);
        }
        clients.retain(|c| ids.contains(&(c.id as i64)));
        // Redis lists them in the order the ids were given.
        clients.sort_by_key(|c| ids.iter().position(|&i| i == c.id as i64));
    } else if args.len() != 2 {
        return Err(CmdError::Syntax);
    }
    let now = ctx.keys.now_ms;
    let registry = ctx.server.registry();
    let mut text = String::new();
    for c in &clients {
        text.push_str(&client_line(c, now, registry));
        text.push('\n');
    }
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

/// The type CLIENT LIST and KILL filter on (MONITOR clients count as normal).
fn type_of(c: &ClientInfo) -> &'static str {
    if c.is_pubsub() { "pubsub" } else { "normal" }
}

fn client_type(name: &[u8]) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    match name.as_slice() {
        b"normal" => Some("normal"),
        b"slave" | b"replica" => Some("replica"),
        b"master" => Some("master"),
        b"pubsub" => Some("pubsub"),
        _ => None,
    }
}

fn client_kill(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let me = ctx.conn.id();
    let clients = ctx.server.clients();
    if args.len() == 3 {
        let addr = args[2];
        let Some(c) = clients.iter().find(|c| c.addr.as_bytes() == addr) else {
            return Err(CmdError::err("No such client"));
        };
        if c.id == me {
            ctx.conn.close_after_reply = true;
        } else {
            c.kill();
        }
        ctx.out.ok();
        return Ok(());
    }
    let mut id = None;
    let mut kind: Option<&'static str> = None;
    let mut addr = None;
    let mut laddr = None;
    let mut user = None;
    let mut skipme = true;
    let mut max_age = None;
    // Filters come in pairs, read in order: a dangling last filter is a syntax error
    // only once the ones before it are valid.
    for pair in args[2..].chunks(2) {
        let [opt, val] = *pair else {
            return Err(CmdError::Syntax);
        };
        if is(opt, "id") {
            let n = parse::int(val).ok().filter(|&n| n > 0);
            id = Some(n.ok_or_else(|| CmdError::err("client-id should be greater than 0"))? as u64);
        } else if is(opt, "type") {
            kind = Some(
                client_type(val)
                    .ok_or_else(|| CmdError::quoting("Unknown client type '", val, "'"))?,
            );
        } else if is(opt, "addr") {
            addr = Some(val);
        } else if is(opt, "laddr") {
            laddr = Some(val);
        } else if is(opt, "user") {
            let exists = match ctx.server.acl() {
                Some(acl) => acl.user(val).is_some(),
                None => val == b"default",
            };
            if !exists {
                return Err(CmdError::quoting("No such user '", val, "'"));
            }
            user = Some(val);
        } else if is(opt, "maxage") {
            // From Redis 7.2: connections at least this many seconds old.
            max_age = Some(parse::int(val).map_err(|_| CmdError::NotInteger)?);
        } else if is(opt, "skipme") {
            skipme = if is(val, "yes") {
                true
            } else if is(val, "no") {
                false
            } else {
                return Err(CmdError::Syntax);
            };
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut killed = 0;
    for c in &clients {
        let matches = id.is_none_or(|i| c.id == i)
            && kind.is_none_or(|k| k == type_of(c))
            && addr.is_none_or(|a| c.addr.as_bytes() == a)
            && laddr.is_none_or(|a| c.laddr.as_bytes() == a)
            && user.is_none_or(|u| *c.user.lock() == u)
            && max_age.is_none_or(|age| {
                let lived = ctx.keys.now_ms.saturating_sub(c.created_ms) / 1000;
                i64::try_from(lived).unwrap_or(i64::MAX) >= age
            });
        if !matches || (skipme && c.id == me) {
            continue;
        }
        if c.id == me {
            ctx.conn.close_after_reply = true;
        } else {
            c.kill();
        }
        killed += 1;
    }
    ctx.out.integer(killed);
    Ok(())
}
