//! ACL commands (SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG, GENPASS,
//! DRYRUN, LOAD, SAVE, HELP), and the authentication and permission checks the
//! dispatcher, AUTH, HELLO and EXEC call.

use crate::acl::check::{Denied, channel_allowed, check};
use crate::acl::describe::{channels_text, command_rules, flags, keys_text, user_line};
use crate::acl::user::{User, all_commands, has_spaces, merge_selector_args};
use crate::acl::{Acl, Context, Entry, Reason};
use crate::conn::ConnState;
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::families::connection::client_line;
use crate::parse::{self, is};
use crate::pubsub::Kind;
use crate::server::Server;
use crate::spec::{Acl as Category, Group};
use crate::table::Command;
use crate::{acl, flags};

const ACL_SUB: Command = Command {
    flags: flags!(ADMIN, NOSCRIPT, LOADING, STALE),
    group: Group::Server,
    since: "6.0.0",
    complexity: "O(1)",
    ..Command::DEFAULT
};

/// The ACL container and its subcommands.
pub const COMMANDS: &[Command] = &[Command {
    name: "acl",
    arity: -2,
    acl: acl!(),
    group: Group::Server,
    since: "6.0.0",
    summary: "A container for Access List Control commands ",
    complexity: "Depends on subcommand.",
    subcommands: &[
        Command {
            name: "cat",
            arity: -2,
            flags: flags!(NOSCRIPT, LOADING, STALE),
            summary: "List the ACL categories or the commands inside a category",
            complexity: "O(1) since the categories and commands are a fixed set.",
            handler: Some(cat),
            ..ACL_SUB
        },
        Command {
            name: "deluser",
            arity: -3,
            summary: "Remove the specified ACL users and the associated rules",
            complexity: "O(1) amortized time considering the typical user.",
            handler: Some(deluser),
            ..ACL_SUB
        },
        Command {
            name: "dryrun",
            arity: -4,
            since: "7.0.0",
            summary: "Returns whether the user can execute the given command without executing the command.",
            complexity: "O(1).",
            handler: Some(dryrun),
            ..ACL_SUB
        },
        Command {
            name: "genpass",
            arity: -2,
            flags: flags!(NOSCRIPT, LOADING, STALE),
            summary: "Generate a pseudorandom secure password to use for ACL users",
            handler: Some(genpass),
            ..ACL_SUB
        },
        Command {
            name: "getuser",
            arity: 3,
            summary: "Get the rules for a specific ACL user",
            complexity: "O(N). Where N is the number of password, command and pattern rules that the user has.",
            handler: Some(getuser),
            ..ACL_SUB
        },
        Command {
            name: "help",
            arity: 2,
            flags: flags!(LOADING, STALE),
            summary: "Show helpful text about the different subcommands",
            handler: Some(help),
            ..ACL_SUB
        },
        Command {
            name: "list",
            arity: 2,
            summary: "List the current ACL rules in ACL config file format",
            complexity: "O(N). Where N is the number of configured users.",
            handler: Some(list),
            ..ACL_SUB
        },
        Command {
            name: "load",
            arity: 2,
            summary: "Reload the ACLs from the configured ACL file",
            complexity: "O(N). Where N is the number of configured users.",
            handler: Some(load),
            ..ACL_SUB
        },
        Command {
            name: "log",
            arity: -2,
            summary: "List latest events denied because of ACLs in place",
            complexity: "O(N) with N being the number of entries shown.",
            handler: Some(log),
            ..ACL_SUB
        },
        Command {
            name: "save",
            arity: 2,
            summary: "Save the current ACL rules in the configured ACL file",
            complexity: "O(N). Where N is the number of configured users.",
            handler: Some(save),
            ..ACL_SUB
        },
        Command {
            name: "setuser",
            arity: -3,
            summary: "Modify or create the rules for a specific ACL user",
            complexity: "O(N). Where N is the number of rules provided.",
            handler: Some(setuser),
            ..ACL_SUB
        },
        Command {
            name: "users",
            arity: 2,
            summary: "List the username of all the configured ACL rules",
            complexity: "O(N). Where N is the number of configured users.",
            handler: Some(users),
            ..ACL_SUB
        },
        Command {
            name: "whoami",
            arity: 2,
            flags: flags!(NOSCRIPT, LOADING, STALE),
            summary: "Return the name of the user associated to the current connection",
            handler: Some(whoami),
            ..ACL_SUB
        },
    ],
    ..Command::DEFAULT
}];

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// The server's ACL table; a server without one (a test's fake) has no users.
fn table<'a>(ctx: &Ctx<'a, '_>) -> Result<&'a Acl, CmdError> {
    ctx.server
        .acl()
        .ok_or_else(|| CmdError::err("this server has no access control"))
}

/// Whether the connection must authenticate before running `cmd`'s kind of command:
/// it has not, and the `default` user is off or has passwords.
pub fn auth_required(server: &dyn Server, conn: &ConnState) -> bool {
    !conn.authenticated && server.acl().is_none_or(Acl::auth_required)
}

/// Whether a new (or RESET) connection starts authenticated.
pub fn starts_authenticated(server: &dyn Server) -> bool {
    server.acl().is_none_or(|acl| !acl.auth_required())
}

/// Checks the connection's permission to run `argv`, logging a denial; the error
/// text to reject it with.
pub fn check_command(
    server: &dyn Server,
    conn: &mut ConnState,
    cmd: &'static Command,
    argv: &[&[u8]],
    now_ms: u64,
) -> Result<(), String> {
    let context = if conn.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    };
    checked(server, conn, cmd, argv, context, now_ms).map_err(|denied| match denied {
        None => "NOAUTH Authentication required.".to_string(),
        Some(denied) => denied.error(cmd),
    })
}

/// EXEC's check of a queued command, logged in the `multi` context.
pub fn check_queued(ctx: &mut Ctx, cmd: &'static Command, argv: &[&[u8]]) -> CmdResult {
    let now = ctx.keys.now_ms;
    checked(ctx.server, ctx.conn, cmd, argv, Context::Multi, now).map_err(|denied| match denied {
        None => CmdError::coded("NOAUTH Authentication required."),
        Some(denied) => CmdError::coded(denied.exec_error()),
    })
}

/// The check of a command a script calls (`redis.call`), logged in the `lua`
/// context, with the texts Redis 7.0 raises in the script.
pub fn check_script_call(
    server: &dyn Server,
    conn: &mut ConnState,
    cmd: &'static Command,
    argv: &[&[u8]],
    now_ms: u64,
) -> Result<(), &'static str> {
    checked(server, conn, cmd, argv, Context::Lua, now_ms).map_err(|denied| match denied {
        None => "The user executing the script is lacking the permissions for the command",
        Some(Denied::Command) => {
            "The user executing the script can't run this command or subcommand"
        }
        Some(Denied::Key(_)) => {
            "The user executing the script can't access at least one of the keys mentioned in the command arguments"
        }
        Some(Denied::Channel(_)) => {
            "The user executing the script can't publish to the channel mentioned in the command"
        }
    })
}

/// The connection's [`verdict`] on `argv`, a denial logged in `context`: what
/// the three checks above share (they differ in context and error texts).
fn checked(
    server: &dyn Server,
    conn: &mut ConnState,
    cmd: &'static Command,
    argv: &[&[u8]],
    context: Context,
    now_ms: u64,
) -> Result<(), Option<Denied>> {
    let Some(acl) = server.acl() else {
        return Ok(());
    };
    let result = verdict(acl, conn, cmd, argv);
    if let Err(Some(denied)) = result {
        log_denial(server, acl, conn, cmd, argv, denied, context, now_ms);
    }
    result
}

/// Whether the connection's user may run the command (`redis.acl_check_cmd`),
/// without logging anything.
pub fn may_run(
    server: &dyn Server,
    conn: &mut ConnState,
    cmd: &'static Command,
    argv: &[&[u8]],
) -> bool {
    server
        .acl()
        .is_none_or(|acl| verdict(acl, conn, cmd, argv).is_ok())
}

/// `Err(None)` when the connection's user no longer exists.
fn verdict(
    acl: &Acl,
    conn: &mut ConnState,
    cmd: &'static Command,
    argv: &[&[u8]],
) -> Result<(), Option<Denied>> {
    let user = conn.user.current(acl).ok_or(None)?;
    let root = user.root();
    if root.allcommands && root.allkeys && root.allchannels {
        return Ok(());
    }
    check(user, cmd, argv).map_err(Some)
}

#[allow(clippy::too_many_arguments)]
fn log_denial(
    server: &dyn Server,
    acl: &Acl,
    conn: &ConnState,
    cmd: &'static Command,
    argv: &[&[u8]],
    denied: Denied,
    context: Context,
    now_ms: u64,
) {
    let (reason, object) = match denied {
        Denied::Command => (Reason::Command, cmd.full_name().into_bytes()),
        Denied::Key(i) => (
            Reason::Key,
            argv.get(i).map(|a| a.to_vec()).unwrap_or_default(),
        ),
        Denied::Channel(i) => (
            Reason::Channel,
            argv.get(i).map(|a| a.to_vec()).unwrap_or_default(),
        ),
    };
    acl.log(Entry {
        count: 1,
        reason,
        context,
        object,
        username: conn.user.name().to_vec(),
        time_ms: now_ms,
        client_info: client_line(&conn.info, now_ms, server.registry()),
    });
}

/// AUTH and HELLO AUTH: authenticates the connection as `user`, or logs the failure
/// (its object is the command as the client wrote it) and answers WRONGPASS.
pub fn authenticate(ctx: &mut Ctx, command: &[u8], user: &[u8], pass: &[u8]) -> CmdResult {
    let Some(acl) = ctx.server.acl() else {
        // Without access control there is only the default user, and no password.
        if user != b"default" {
            return Err(CmdError::coded(WRONGPASS));
        }
        ctx.conn.authenticated = true;
        return Ok(());
    };
    match acl.authenticate(user, pass) {
        Some(u) => {
            *ctx.conn.info.user.lock() = u.name.clone();
            ctx.conn.user.set(acl, u);
            ctx.conn.authenticated = true;
            Ok(())
        }
        None => {
            let now = ctx.keys.now_ms;
            acl.log(Entry {
                count: 1,
                reason: Reason::Auth,
                context: if ctx.conn.multi.is_some() {
                    Context::Multi
                } else {
                    Context::Toplevel
                },
                object: command.to_vec(),
                username: user.to_vec(),
                time_ms: now,
                client_info: client_line(&ctx.conn.info, now, ctx.server.registry()),
            });
            Err(CmdError::coded(WRONGPASS))
        }
    }
}

/// Closes the connections authenticated as one of `names` (the caller's own after
/// its reply), as Redis does for deleted users.
fn close_clients_of(ctx: &mut Ctx, names: &[Vec<u8>]) {
    let me = ctx.conn.info.id;
    for c in ctx.server.clients() {
        if !names.iter().any(|n| *n == *c.user.lock()) {
            continue;
        }
        if c.id == me {
            ctx.conn.authenticated = false;
            ctx.conn.close_after_reply = true;
        } else {
            c.kill();
        }
    }
}

/// Closes the pub/sub clients of a user whose channel permissions shrank and who hold
/// a subscription the new rules deny (Redis's `ACLKillPubsubClientsIfNeeded`).
fn close_denied_subscribers(ctx: &mut Ctx, old: &User, new: &User) {
    if new.selectors.iter().any(|s| s.allchannels) {
        return;
    }
    let upcoming: Vec<Vec<u8>> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    let superset = old
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter())
        .all(|c| upcoming.contains(c));
    if superset && !old.selectors.iter().any(|s| s.allchannels) {
        return;
    }
    let Some(hub) = ctx.server.pubsub() else {
        return;
    };
    let me = ctx.conn.info.id;
    for c in ctx.server.clients() {
        if *c.user.lock() != old.name || !c.is_pubsub() {
            continue;
        }
        let denied = hub
            .subscriptions_of(c.id)
            .iter()
            .any(|(kind, name)| !channel_allowed(&upcoming, name, *kind == Kind::Pattern));
        if denied {
            if c.id == me {
                ctx.conn.close_after_reply = true;
            } else {
                c.kill();
            }
        }
    }
}

fn setuser(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    let name = args[2];
    if has_spaces(name) {
        return Err(CmdError::err(
            "Usernames can't contain spaces or null characters",
        ));
    }
    let rules = merge_selector_args(&args[3..]).map_err(|i| {
        CmdError::quoting(
            "Unmatched parenthesis in acl selector starting at '",
            args[i + 3],
            "'.",
        )
    })?;
    let registry = ctx.server.registry();
    let (old, new) = acl.set_user(registry, name, &rules).map_err(|(rule, e)| {
        CmdError::quoting("Error in ACL SETUSER modifier '", &rule, &format!("': {e}"))
    })?;
    if let Some(old) = old {
        close_denied_subscribers(ctx, &old, &new);
    }
    ctx.out.ok();
    Ok(())
}

fn deluser(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    if args[2..].iter().any(|n| *n == b"default") {
        return Err(CmdError::err("The 'default' user cannot be removed"));
    }
    let deleted = acl.delete_users(&args[2..]);
    close_clients_of(ctx, &deleted);
    ctx.out.integer(deleted.len() as i64);
    Ok(())
}

fn getuser(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    // Redis 7.0 answers a null for a user that does not exist.
    let Some(user) = acl.user(args[2]) else {
        ctx.out.null();
        return Ok(());
    };
    let registry = ctx.server.registry();
    ctx.out.map(6);
    ctx.out.bulk(b"flags");
    let flags = flags(&user);
    ctx.out.set(flags.len());
    for f in flags {
        ctx.out.bulk(f.as_bytes());
    }
    ctx.out.bulk(b"passwords");
    ctx.out.array(user.passwords.len());
    for p in &user.passwords {
        ctx.out.bulk(p.as_bytes());
    }
    let describe = |ctx: &mut Ctx, s: &crate::acl::user::Selector| {
        ctx.out.bulk(b"commands");
        ctx.out.bulk(command_rules(s, registry).as_bytes());
        ctx.out.bulk(b"keys");
        ctx.out.bulk(&keys_text(s));
        ctx.out.bulk(b"channels");
        ctx.out.bulk(&channels_text(s));
    };
    describe(ctx, user.root());
    ctx.out.bulk(b"selectors");
    ctx.out.array(user.selectors.len() - 1);
    for s in &user.selectors[1..] {
        ctx.out.map(3);
        describe(ctx, s);
    }
    Ok(())
}

fn list(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    let users = acl.users();
    let registry = ctx.server.registry();
    ctx.out.array(users.len());
    for u in &users {
        ctx.out.bulk(&user_line(u, registry));
    }
    Ok(())
}

fn users(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    let users = acl.users();
    ctx.out.array(users.len());
    for u in &users {
        ctx.out.bulk(&u.name);
    }
    Ok(())
}

fn whoami(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let name = ctx.conn.user.name().to_vec();
    ctx.out.bulk(&name);
    Ok(())
}

fn no_file() -> CmdError {
    CmdError::err(
        "This Redis instance is not configured to use an ACL file. You may want to specify \
         users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you \
         have a Redis configuration file set) in order to store users in the Redis \
         configuration.",
    )
}

fn load(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    let path = acl.file().ok_or_else(no_file)?;
    let registry = ctx.server.registry();
    let users = crate::acl::file::load(&path, registry, acl.allchannels_default())
        .map_err(CmdError::err)?;
    let replaced = acl.replace_all(users);
    close_clients_of(ctx, &replaced);
    ctx.out.ok();
    Ok(())
}

fn save(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    let path = acl.file().ok_or_else(no_file)?;
    let users = acl.users();
    crate::acl::file::save(&path, users.iter().map(|u| &**u), ctx.server.registry()).map_err(
        |_| {
            CmdError::err(
                "There was an error trying to save the ACLs. Please check the server logs \
                 for more information",
            )
        },
    )?;
    ctx.out.ok();
    Ok(())
}

fn cat(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    match args {
        [_, _] => {
            ctx.out.array(Category::NAMED.len());
            for (_, name) in Category::NAMED {
                ctx.out.bulk(name.as_bytes());
            }
        }
        [_, _, name] => {
            let category = std::str::from_utf8(name)
                .ok()
                .and_then(Category::from_name)
                .ok_or_else(|| {
                    CmdError::quoting("Unknown category '", crate::error::c_str(name, 128), "'")
                })?;
            let names: Vec<String> = all_commands(ctx.server.registry())
                .filter(|c| c.acl_categories().intersects(category))
                .map(|c| c.full_name())
                .collect();
            ctx.out.array(names.len());
            for n in names {
                ctx.out.bulk(n.as_bytes());
            }
        }
        _ => return Err(unknown_subcommand(args)),
    }
    Ok(())
}

fn unknown_subcommand(args: &[&[u8]]) -> CmdError {
    CmdError::unknown_subcommand("acl", args[1])
}

fn genpass(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    const MAX_BITS: i64 = 4096;
    let bits = match args {
        [_, _] => 256,
        [_, _, bits] => parse::int(bits)?,
        _ => return Err(unknown_subcommand(args)),
    };
    if bits <= 0 || bits > MAX_BITS {
        return Err(CmdError::err(format!(
            "ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to {MAX_BITS}"
        )));
    }
    let chars = (bits as usize).div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::fill(&mut bytes[..]);
    let hex: Vec<u8> = bytes
        .iter()
        .flat_map(|b| [b >> 4, b & 0xf])
        .take(chars)
        .map(|n| b"0123456789abcdef"[usize::from(n)])
        .collect();
    ctx.out.bulk(&hex);
    Ok(())
}

fn log(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    let count = match args {
        [_, _] => 10,
        [_, _, arg] if is(arg, "reset") => {
            acl.with_log(|l| l.clear());
            ctx.out.ok();
            return Ok(());
        }
        [_, _, arg] => parse::int(arg)?.max(0) as usize,
        _ => return Err(unknown_subcommand(args)),
    };
    let now = ctx.keys.now_ms;
    let entries: Vec<Entry> = acl.with_log(|l| l.newest(count).cloned().collect());
    ctx.out.array(entries.len());
    for e in entries {
        ctx.out.map(7);
        ctx.out.bulk(b"count");
        ctx.out.integer(e.count as i64);
        ctx.out.bulk(b"reason");
        ctx.out.bulk(e.reason.name().as_bytes());
        ctx.out.bulk(b"context");
        ctx.out.bulk(e.context.name().as_bytes());
        ctx.out.bulk(b"object");
        ctx.out.bulk(&e.object);
        ctx.out.bulk(b"username");
        ctx.out.bulk(&e.username);
        ctx.out.bulk(b"age-seconds");
        ctx.out
            .double(now.saturating_sub(e.time_ms) as f64 / 1000.0);
        ctx.out.bulk(b"client-info");
        ctx.out.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

fn dryrun(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let acl = table(ctx)?;
    let Some(user) = acl.user(args[2]) else {
        return Err(CmdError::quoting("User '", args[2], "' not found"));
    };
    let argv = &args[3..];
    let registry = ctx.server.registry();
    let cmd = match crate::exec::resolve(registry, argv) {
        Ok(cmd) => cmd,
        Err((_, CmdError::WrongArity(name))) => return Err(CmdError::WrongArity(name)),
        Err(_) => return Err(CmdError::quoting("Command '", argv[0], "' not found")),
    };
    match check(&user, cmd, argv) {
        Ok(()) => ctx.out.ok(),
        Err(denied) => {
            let text = match denied {
                Denied::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    cmd.full_name()
                ),
                Denied::Key(i) => format!(
                    "This user has no permissions to access the '{}' key",
                    String::from_utf8_lossy(argv[i])
                ),
                Denied::Channel(i) => format!(
                    "This user has no permissions to access the '{}' channel",
                    String::from_utf8_lossy(argv[i])
                ),
            };
            ctx.out.bulk(text.as_bytes());
        }
    }
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}
