//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT.

use std::sync::Arc;

use strata_lua::script::parse_shebang;
use strata_lua::{Kind, NotFound, ScriptFlags, sha1hex};

use super::{Plan, SCRIPTING, engine, numkeys, run_script};
use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::flags;
use crate::parse::is;
use crate::scripting::{Script, Scripting};
use crate::table::Command;

const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";

pub const SCRIPT_SUBCOMMANDS: &[Command] = &[
    Command {
        name: "flush",
        arity: -2,
        flags: flags!(NOSCRIPT),
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        since: "2.6.0",
        summary: "Remove all the scripts from the script cache.",
        complexity: "O(N) with N being the number of scripts in cache",
        handler: Some(script_flush),
        ..SCRIPTING
    },
    Command {
        name: "help",
        arity: 2,
        flags: flags!(LOADING, STALE),
        since: "5.0.0",
        summary: "Show helpful text about the different subcommands",
        complexity: "O(1)",
        handler: Some(script_help),
        ..SCRIPTING
    },
    Command {
        name: "debug",
        arity: 3,
        flags: flags!(NOSCRIPT),
        since: "3.2.0",
        summary: "Set the debug mode for executed scripts.",
        complexity: "O(1)",
        handler: Some(script_debug),
        ..SCRIPTING
    },
    Command {
        name: "kill",
        arity: 2,
        flags: flags!(NOSCRIPT, ALLOW_BUSY),
        tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
        since: "2.6.0",
        summary: "Kill the script currently in execution.",
        complexity: "O(1)",
        handler: Some(script_kill),
        ..SCRIPTING
    },
    Command {
        name: "load",
        arity: 3,
        flags: flags!(NOSCRIPT, STALE),
        tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
        since: "2.6.0",
        summary: "Load the specified Lua script into the script cache.",
        complexity: "O(N) with N being the length in bytes of the script body.",
        handler: Some(script_load),
        ..SCRIPTING
    },
    Command {
        name: "exists",
        arity: -3,
        flags: flags!(NOSCRIPT),
        tips: &[
            "request_policy:all_shards",
            "response_policy:agg_logical_and",
        ],
        since: "2.6.0",
        summary: "Check existence of scripts in the script cache.",
        complexity: "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).",
        handler: Some(script_exists),
        ..SCRIPTING
    },
];

pub fn eval(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    generic(ctx, argv, false, false)
}

pub fn evalsha(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    generic(ctx, argv, true, false)
}

pub fn eval_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    generic(ctx, argv, false, true)
}

pub fn evalsha_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    generic(ctx, argv, true, true)
}

/// Finds (EVALSHA) or creates (EVAL, compiling it in an interpreter first, as
/// Redis's `luaCreateFunction` does) the cached script.
fn lookup_or_create(
    engine: &Scripting,
    body: &[u8],
    by_sha: bool,
) -> Result<(String, Arc<Script>), CmdError> {
    if by_sha {
        if body.len() != 40 {
            return Err(CmdError::coded(NOSCRIPT_ERR));
        }
        let sha = String::from_utf8_lossy(body).to_ascii_lowercase();
        return match engine.script(&sha) {
            Some(s) => Ok((sha, s)),
            None => Err(CmdError::coded(NOSCRIPT_ERR)),
        };
    }
    let sha = sha1hex(body);
    if let Some(s) = engine.script(&sha) {
        return Ok((sha, s));
    }
    let parsed = parse_shebang(body).map_err(CmdError::err)?;
    let mut lease = engine.checkout(Kind::Eval).map_err(CmdError::err)?;
    lease
        .vm()
        .compile_script(&sha, body, parsed.code_start)
        .map_err(CmdError::err)?;
    let script = Arc::new(Script {
        body: body.to_vec(),
        flags: parsed.flags,
        code_start: parsed.code_start,
    });
    engine.cache_script(sha.clone(), script.clone());
    Ok((sha, script))
}

/// The checks Redis's `scriptPrepareForRun` makes of a script with flags (a
/// shebang, or any function); returns whether the run is read-only.
pub(super) fn check_flags(
    ctx: &Ctx,
    flags: Option<ScriptFlags>,
    ro_command: bool,
) -> Result<bool, CmdError> {
    let Some(flags) = flags else {
        return Ok(ro_command);
    };
    if !flags.contains(ScriptFlags::NO_WRITES) {
        if let Some(e) = ctx.server.write_error() {
            let reason = e
                .strip_prefix("MISCONF Errors writing to the AOF file: ")
                .unwrap_or(&e);
            return Err(CmdError::coded(format!(
                "MISCONF Redis is configured to persist data to AOF, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts. AOF error: {reason}"
            )));
        }
        if ro_command {
            return Err(CmdError::err(
                "Can not execute a script with write flag using *_ro command.",
            ));
        }
        // A script that may write needs `allow-oom` to start while memory is over
        // `maxmemory` (`no-writes` implies it).
        if ctx.conn.oom && !flags.contains(ScriptFlags::ALLOW_OOM) {
            return Err(CmdError::coded(
                String::from_utf8_lossy(crate::evict::OOM_ERROR).into_owned(),
            ));
        }
        return Ok(false);
    }
    Ok(true)
}

fn generic(ctx: &mut Ctx, argv: &[&[u8]], by_sha: bool, ro: bool) -> CmdResult {
    let engine = engine(ctx)?;
    if by_sha && argv[1].len() != 40 {
        return Err(CmdError::coded(NOSCRIPT_ERR));
    }
    let n = numkeys(argv, "value is not an integer or out of range")?;
    let (sha, script) = lookup_or_create(engine, argv[1], by_sha)?;
    let read_only = check_flags(ctx, script.flags, ro)?;
    let plan = Plan {
        kind: Kind::Eval,
        name: &sha,
        lock_name: sha.clone(),
        read_only,
        allow_oom: script
            .flags
            .is_some_and(|f| f.contains(ScriptFlags::ALLOW_OOM)),
        numkeys: n,
    };
    run_script(ctx, argv, plan, |vm, inv, host, dog, out| {
        if !vm.has_script(&sha) {
            vm.compile_script(&sha, &script.body, script.code_start)
                .map_err(CmdError::err)?;
        }
        match vm.run_script(&sha, inv, host, dog, out) {
            Ok(()) => Ok(()),
            Err(NotFound::Script | NotFound::Function) => Err(CmdError::coded(NOSCRIPT_ERR)),
        }
    })
}

fn script_help(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

fn script_flush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    match argv.len() {
        2 => {}
        3 if is(argv[2], "sync") || is(argv[2], "async") => {}
        _ => return Err(CmdError::err("SCRIPT FLUSH only support SYNC|ASYNC option")),
    }
    engine.flush_scripts();
    ctx.out.ok();
    Ok(())
}

fn script_exists(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    ctx.out.array(argv.len() - 2);
    for sha in &argv[2..] {
        let found = engine.script(&String::from_utf8_lossy(sha)).is_some();
        ctx.out.integer(i64::from(found));
    }
    Ok(())
}

fn script_load(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    let (sha, _) = lookup_or_create(engine, argv[2], false)?;
    ctx.out.bulk(sha.as_bytes());
    Ok(())
}

fn script_kill(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    engine(ctx)?.kill(true).map_err(CmdError::coded)?;
    ctx.out.ok();
    Ok(())
}

/// SCRIPT DEBUG: the Lua debugger is not available; `NO` (leaving it off) is
/// accepted.
fn script_debug(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    if is(argv[2], "no") {
        ctx.out.ok();
        return Ok(());
    }
    if is(argv[2], "yes") || is(argv[2], "sync") {
        return Err(CmdError::err(
            "SCRIPT DEBUG is not supported by this server",
        ));
    }
    Err(CmdError::err("Use SCRIPT DEBUG YES/SYNC/NO"))
}
