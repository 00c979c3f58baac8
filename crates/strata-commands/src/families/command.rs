//! COMMAND: introspection of the command table (COUNT, INFO, DOCS, GETKEYS, LIST).

use strata_keyspace::glob;
use strata_resp::ReplyWriter;

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::exec::arity_ok;
use crate::parse::is;
use crate::spec::{Acl, BeginSearch, FindKeys, Group, KeyFlags, KeySpec};
use crate::table::{Command, Registry, key_positions, key_positions_and_source};
use crate::{acl, flags};

const SUB: Command = Command {
    flags: flags!(LOADING, STALE),
    acl: acl!(CONNECTION),
    group: Group::Server,
    since: "2.8.13",
    complexity: "O(N) where N is the number of commands to look up",
    ..Command::DEFAULT
};

pub const COMMANDS: &[Command] = &[Command {
    name: "command",
    arity: -1,
    tips: &["nondeterministic_output_order"],
    summary: "Returns detailed information about all commands.",
    complexity: "O(N) where N is the total number of Redis commands",
    handler: Some(command_all),
    subcommands: &[
        Command {
            name: "count",
            arity: 2,
            complexity: "O(1)",
            summary: "Returns a count of commands.",
            handler: Some(count),
            tips: &[],
            ..SUB
        },
        Command {
            name: "info",
            arity: -2,
            tips: &["nondeterministic_output_order"],
            summary: "Returns information about one, multiple or all commands.",
            handler: Some(info),
            ..SUB
        },
        Command {
            name: "docs",
            arity: -2,
            tips: &["nondeterministic_output_order"],
            since: "7.0.0",
            summary: "Returns documentary information about one, multiple or all commands.",
            handler: Some(docs),
            ..SUB
        },
        Command {
            name: "getkeys",
            arity: -4,
            complexity: "O(N) where N is the number of arguments to the command",
            summary: "Extracts the key names from an arbitrary command.",
            handler: Some(getkeys),
            ..SUB
        },
        Command {
            name: "getkeysandflags",
            arity: -4,
            since: "7.0.0",
            complexity: "O(N) where N is the number of arguments to the command",
            summary: "Extracts the key names and access flags for an arbitrary command.",
            handler: Some(getkeysandflags),
            ..SUB
        },
        Command {
            name: "list",
            arity: -2,
            tips: &["nondeterministic_output_order"],
            since: "7.0.0",
            complexity: "O(N) where N is the total number of Redis commands",
            summary: "Returns a list of command names.",
            handler: Some(list),
            ..SUB
        },
        Command {
            name: "help",
            arity: 2,
            since: "5.0.0",
            complexity: "O(1)",
            summary: "Returns helpful text about the different subcommands.",
            handler: Some(help),
            ..SUB
        },
    ],
    ..SUB
}];

/// Writes one command's COMMAND INFO entry.
pub fn write_info(out: &mut ReplyWriter, cmd: &Command) {
    out.array(10);
    out.bulk(cmd.full_name().as_bytes());
    out.integer(cmd.arity as i64);
    // Redis 7.0 hides `may_replicate`.
    let flags: Vec<&str> = cmd
        .info_flags()
        .names()
        .filter(|f| *f != "may_replicate")
        .collect();
    out.set(flags.len());
    for f in flags {
        out.simple(f.as_bytes());
    }
    let ((first, last, step), _) = cmd.legacy_range();
    out.integer(first as i64);
    out.integer(last as i64);
    out.integer(step as i64);
    let cats: Vec<&str> = cmd.acl_categories().names().collect();
    out.set(cats.len());
    for c in cats {
        out.simple(format!("@{c}").as_bytes());
    }
    out.set(cmd.tips.len());
    for t in cmd.tips {
        out.bulk(t.as_bytes());
    }
    // Redis 7.0 sends the key specs as a set (later versions as an array).
    out.set(cmd.key_specs.len());
    for spec in cmd.key_specs {
        write_key_spec(out, spec);
    }
    // Redis 7.0 sends "no subcommands" as an empty set, and subcommands as an array.
    if cmd.subcommands.is_empty() {
        out.set(0);
    } else {
        out.array(cmd.subcommands.len());
        for sub in cmd.subcommands {
            write_info(out, sub);
        }
    }
}

fn write_key_spec(out: &mut ReplyWriter, spec: &KeySpec) {
    let has_notes = !spec.notes.is_empty();
    out.map(3 + has_notes as usize);
    if has_notes {
        out.bulk(b"notes");
        out.bulk(spec.notes.as_bytes());
    }
    out.bulk(b"flags");
    let flags: Vec<&str> = spec.flags.names().collect();
    out.set(flags.len());
    for f in flags {
        out.simple(f.as_bytes());
    }
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    match spec.begin {
        BeginSearch::Index(i) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.integer(i as i64);
        }
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(keyword.as_bytes());
            out.bulk(b"startfrom");
            out.integer(start_from as i64);
        }
        BeginSearch::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    match spec.find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => {
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.integer(last_key as i64);
            out.bulk(b"keystep");
            out.integer(step as i64);
            out.bulk(b"limit");
            out.integer(limit as i64);
        }
        FindKeys::KeyNum {
            key_num_idx,
            first_key,
            step,
        } => {
            out.bulk(b"keynum");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"keynumidx");
            out.integer(key_num_idx as i64);
            out.bulk(b"firstkey");
            out.integer(first_key as i64);
            out.bulk(b"keystep");
            out.integer(step as i64);
        }
        FindKeys::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
}

fn write_docs(out: &mut ReplyWriter, cmd: &Command) {
    let has_subs = !cmd.subcommands.is_empty();
    out.map(4 + has_subs as usize);
    out.bulk(b"summary");
    out.bulk(cmd.summary.as_bytes());
    out.bulk(b"since");
    out.bulk(cmd.since.as_bytes());
    out.bulk(b"group");
    out.bulk(cmd.group.name().as_bytes());
    out.bulk(b"complexity");
    out.bulk(cmd.complexity.as_bytes());
    if has_subs {
        out.bulk(b"subcommands");
        out.map(cmd.subcommands.len());
        for sub in cmd.subcommands {
            out.bulk(sub.full_name().as_bytes());
            write_docs(out, sub);
        }
    }
}

fn command_all(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let registry = ctx.server.registry();
    ctx.out.array(registry.len());
    for cmd in registry.commands() {
        write_info(&mut ctx.out, cmd);
    }
    Ok(())
}

fn count(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    ctx.out.integer(ctx.server.registry().len() as i64);
    Ok(())
}

/// A command or `container|sub` by name.
fn lookup(registry: &Registry, name: &[u8]) -> Option<&'static Command> {
    match name.iter().position(|&c| c == b'|') {
        None => registry.get(name),
        Some(p) => {
            let container = registry.get(&name[..p])?;
            Registry::subcommand(container, &name[p + 1..])
        }
    }
}

fn info(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let registry = ctx.server.registry();
    if args.len() == 2 {
        return command_all(ctx, args);
    }
    ctx.out.array(args.len() - 2);
    for name in &args[2..] {
        match lookup(registry, name) {
            Some(cmd) => write_info(&mut ctx.out, cmd),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn docs(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let registry = ctx.server.registry();
    let cmds: Vec<&'static Command> = if args.len() == 2 {
        registry.commands().collect()
    } else {
        args[2..]
            .iter()
            .filter_map(|n| lookup(registry, n))
            .collect()
    };
    ctx.out.map(cmds.len());
    for cmd in cmds {
        ctx.out.bulk(cmd.full_name().as_bytes());
        write_docs(&mut ctx.out, cmd);
    }
    Ok(())
}

/// The command named by `args[2..]`, its key positions and whether they come from
/// Redis's fallback for a bad `numkeys` (see [`key_positions_and_source`]), with
/// COMMAND GETKEYS's errors in Redis's order: unknown command, no keys at all, wrong
/// arity.
fn keys_of<'a>(
    ctx: &Ctx,
    args: &'a [&'a [u8]],
) -> Result<(&'static Command, Vec<usize>, bool), CmdError> {
    let argv = &args[2..];
    let invalid = || CmdError::err("Invalid command specified");
    let base = ctx.server.registry().get(argv[0]).ok_or_else(invalid)?;
    // A container named alone is looked up as itself, as Redis's `lookupCommand` does.
    let cmd = if argv.len() == 1 || base.subcommands.is_empty() {
        base
    } else {
        Registry::subcommand(base, argv[1]).ok_or_else(invalid)?
    };
    // Key specs flagged `not_key` (shard channels) name no keys.
    let no_keys = cmd
        .key_specs
        .iter()
        .all(|s| s.flags.contains(crate::spec::KeyFlags::NOT_KEY));
    if no_keys && cmd.getkeys.is_none() {
        return Err(CmdError::err("The command has no key arguments"));
    }
    if !arity_ok(cmd.arity, argv.len()) {
        return Err(CmdError::err(
            "Invalid number of arguments specified for command",
        ));
    }
    let (keys, fallback) = key_positions_and_source(cmd, argv);
    // Commands whose keys are optional (EVAL with no keys) have none to give.
    if keys.is_empty() && !cmd.flags.contains(crate::spec::Flags::NO_MANDATORY_KEYS) {
        // A command with key specs whose arguments yield no key (a bad numkeys) has
        // invalid arguments; one without key specs has none to give.
        let text = if cmd.key_specs.is_empty() && cmd.getkeys.is_none() {
            "The command has no key arguments"
        } else {
            "Invalid arguments specified for command"
        };
        return Err(CmdError::err(text));
    }
    Ok((cmd, keys, fallback))
}

fn getkeys(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (_, keys, _) = keys_of(ctx, args)?;
    ctx.out.array(keys.len());
    for i in keys {
        ctx.out.bulk(args[2 + i]);
    }
    Ok(())
}

fn getkeysandflags(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let (cmd, keys, fallback) = keys_of(ctx, args)?;
    let argv = &args[2..];
    ctx.out.array(keys.len());
    for i in keys {
        ctx.out.array(2);
        ctx.out.bulk(argv[i]);
        // The flags of the first key spec whose keys include this position, resolved
        // from the arguments when the spec says they vary; none when Redis's fallback
        // extractor found the keys.
        let flags = if fallback {
            Default::default()
        } else {
            key_flags(cmd, argv, i)
        };
        let names: Vec<&str> = flags.names().collect();
        ctx.out.set(names.len());
        for n in names {
            ctx.out.simple(n.as_bytes());
        }
    }
    Ok(())
}

/// The flags COMMAND GETKEYSANDFLAGS gives the key at `i`, found by the key specs.
fn key_flags(cmd: &Command, argv: &[&[u8]], i: usize) -> KeyFlags {
    cmd.key_specs
        .iter()
        .find(|spec| {
            let one = Command {
                key_specs: std::slice::from_ref(*spec),
                getkeys: None,
                ..*cmd
            };
            key_positions(&one, argv).contains(&i)
        })
        .map(|s| match cmd.key_flags {
            Some(resolve) if s.flags.contains(KeyFlags::VARIABLE_FLAGS) => resolve(argv, i),
            _ => s.flags,
        })
        // A key only the command's own extractor finds (SORT's STORE destination).
        .or_else(|| cmd.key_flags.map(|resolve| resolve(argv, i)))
        .unwrap_or_default()
}

fn list(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    enum Filter<'a> {
        All,
        Module,
        AclCat(Acl),
        Pattern(&'a [u8]),
    }
    let filter = match args.len() {
        2 => Filter::All,
        5 if is(args[2], "filterby") => {
            if is(args[3], "module") {
                Filter::Module
            } else if is(args[3], "aclcat") {
                match std::str::from_utf8(args[4]).ok().and_then(Acl::from_name) {
                    Some(a) => Filter::AclCat(a),
                    None => Filter::Module,
                }
            } else if is(args[3], "pattern") {
                Filter::Pattern(args[4])
            } else {
                return Err(CmdError::Syntax);
            }
        }
        _ => return Err(CmdError::Syntax),
    };
    let registry = ctx.server.registry();
    let mut names = Vec::new();
    for cmd in registry.commands() {
        for c in std::iter::once(cmd).chain(cmd.subcommands) {
            let keep = match &filter {
                Filter::All => true,
                Filter::Module => false,
                Filter::AclCat(a) => c.acl_categories().contains(*a),
                Filter::Pattern(p) => glob::matches_nocase(p, c.full_name().as_bytes()),
            };
            if keep {
                names.push(c.full_name());
            }
        }
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}
