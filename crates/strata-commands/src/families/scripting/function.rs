//! FCALL, FCALL_RO and FUNCTION.
//!
//! Every change to the libraries (LOAD, DELETE, FLUSH, RESTORE) is logged as one
//! record holding the whole library set, so that functions persist with the dataset
//! and come back at start-up.

use strata_lua::script::{INVALID_NAME, ScriptFlags, parse_library_header, valid_name};
use strata_lua::{Kind, NotFound};

use super::eval::check_flags;
use super::{Plan, SCRIPTING, engine, numkeys, run_script};
use crate::ctx::Ctx;
use crate::effects::RecordKind;
use crate::error::{CmdError, CmdResult};
use crate::flags;
use crate::parse::is;
use crate::scripting::{Library, Scripting, decode_payload};
use crate::table::Command;

pub const FUNCTION_SUBCOMMANDS: &[Command] = &[
    Command {
        name: "kill",
        arity: 2,
        flags: flags!(NOSCRIPT, ALLOW_BUSY),
        tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
        since: "7.0.0",
        summary: "Kill the function currently in execution.",
        complexity: "O(1)",
        handler: Some(function_kill),
        ..SCRIPTING
    },
    Command {
        name: "flush",
        arity: -2,
        flags: flags!(WRITE, NOSCRIPT),
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        since: "7.0.0",
        summary: "Deleting all functions",
        complexity: "O(N) where N is the number of functions deleted",
        handler: Some(function_flush),
        ..SCRIPTING
    },
    Command {
        name: "delete",
        arity: 3,
        flags: flags!(WRITE, NOSCRIPT),
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        since: "7.0.0",
        summary: "Delete a function by name",
        complexity: "O(1)",
        handler: Some(function_delete),
        ..SCRIPTING
    },
    Command {
        name: "help",
        arity: 2,
        flags: flags!(LOADING, STALE),
        since: "7.0.0",
        summary: "Show helpful text about the different subcommands",
        complexity: "O(1)",
        handler: Some(function_help),
        ..SCRIPTING
    },
    Command {
        name: "load",
        arity: -3,
        flags: flags!(WRITE, DENYOOM, NOSCRIPT),
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        since: "7.0.0",
        summary: "Create a function with the given arguments (name, code, description)",
        complexity: "O(1) (considering compilation time is redundant)",
        handler: Some(function_load),
        ..SCRIPTING
    },
    Command {
        name: "list",
        arity: -2,
        flags: flags!(NOSCRIPT),
        tips: &["nondeterministic_output_order"],
        since: "7.0.0",
        summary: "List information about all the functions",
        complexity: "O(N) where N is the number of functions",
        handler: Some(function_list),
        ..SCRIPTING
    },
    Command {
        name: "stats",
        arity: 2,
        flags: flags!(NOSCRIPT, ALLOW_BUSY),
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        since: "7.0.0",
        summary: "Return information about the function currently running (name, description, duration)",
        complexity: "O(1)",
        handler: Some(function_stats),
        ..SCRIPTING
    },
    Command {
        name: "dump",
        arity: 2,
        flags: flags!(NOSCRIPT),
        since: "7.0.0",
        summary: "Dump all functions into a serialized binary payload",
        complexity: "O(N) where N is the number of functions",
        handler: Some(function_dump),
        ..SCRIPTING
    },
    Command {
        name: "restore",
        arity: -3,
        flags: flags!(WRITE, DENYOOM, NOSCRIPT),
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        since: "7.0.0",
        summary: "Restore all the functions on the given payload",
        complexity: "O(N) where N is the number of functions on the payload",
        handler: Some(function_restore),
        ..SCRIPTING
    },
];

pub fn fcall(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    generic(ctx, argv, false)
}

pub fn fcall_ro(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    generic(ctx, argv, true)
}

fn generic(ctx: &mut Ctx, argv: &[&[u8]], ro: bool) -> CmdResult {
    let engine = engine(ctx)?;
    let (name, flags) = {
        let libs = engine.libraries.read();
        let Some((_, meta)) = libs.function(argv[1]) else {
            return Err(CmdError::err("Function not found"));
        };
        (String::from_utf8_lossy(&meta.name).into_owned(), meta.flags)
    };
    let n = numkeys(argv, "Bad number of keys provided")?;
    let read_only = check_flags(ctx, Some(flags), ro)?;
    let plan = Plan {
        kind: Kind::Function,
        name: &name,
        lock_name: format!("function:{}", name.to_ascii_lowercase()),
        read_only,
        allow_oom: flags.contains(ScriptFlags::ALLOW_OOM),
        numkeys: n,
    };
    let fname = argv[1].to_vec();
    run_script(ctx, argv, plan, |vm, inv, host, dog, out| {
        match vm.call_function(&fname, inv, host, dog, out) {
            Ok(()) => Ok(()),
            Err(NotFound::Function | NotFound::Script) => Err(CmdError::err("Function not found")),
        }
    })
}

/// Logs the library set after a change, and counts the change.
fn changed(ctx: &mut Ctx, engine: &Scripting) {
    ctx.keys.dirty += 1;
    ctx.keys.read_logging_flag();
    let payload = engine.dump();
    ctx.keys
        .log_special_in(0, RecordKind::Functions { payload });
}

/// Reads a library and loads it into an interpreter to learn its functions (without
/// adding it to the set). The error is the reply text without `ERR `.
pub fn compile_library(engine: &Scripting, code: &[u8]) -> Result<Library, String> {
    let header = parse_library_header(code)?;
    if !valid_name(&header.name) {
        return Err(INVALID_NAME.to_string());
    }
    if !header.engine.eq_ignore_ascii_case(b"lua") {
        return Err(format!(
            "Engine '{}' not found",
            String::from_utf8_lossy(&header.engine)
        ));
    }
    let mut lease = engine.checkout(Kind::Function)?;
    let body = code.get(header.code_start..).unwrap_or_default();
    let functions = engine.load_library(lease.vm(), body)?;
    // The interpreter now holds these functions besides the set it had: it must
    // reload before it runs anything.
    lease.vm().library_version = u64::MAX;
    Ok(Library {
        name: header.name,
        code: code.to_vec(),
        code_start: header.code_start,
        functions,
    })
}

fn function_load(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    let mut replace = false;
    for arg in &argv[2..argv.len() - 1] {
        if is(arg, "replace") {
            replace = true;
            continue;
        }
        return Err(CmdError::quoting("Unknown option given: ", arg, ""));
    }
    let code = argv[argv.len() - 1];
    // Checked before the code runs, as Redis does.
    if let Ok(header) = parse_library_header(code)
        && valid_name(&header.name)
        && header.engine.eq_ignore_ascii_case(b"lua")
        && !replace
        && engine.libraries.read().libs.contains_key(&header.name)
    {
        return Err(CmdError::err(format!(
            "Library '{}' already exists",
            String::from_utf8_lossy(&header.name)
        )));
    }
    let lib = compile_library(engine, code).map_err(CmdError::err)?;
    {
        let mut libs = engine.libraries.write();
        if !replace && libs.libs.contains_key(&lib.name) {
            return Err(CmdError::err(format!(
                "Library '{}' already exists",
                String::from_utf8_lossy(&lib.name)
            )));
        }
        if let Some(name) = libs.collision(&lib) {
            return Err(CmdError::err(format!(
                "Function {} already exists",
                String::from_utf8_lossy(name)
            )));
        }
        libs.insert(lib.clone());
    }
    changed(ctx, engine);
    ctx.out.bulk(&lib.name);
    Ok(())
}

fn function_delete(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    if engine.libraries.write().remove(argv[2]).is_none() {
        return Err(CmdError::err("Library not found"));
    }
    changed(ctx, engine);
    ctx.out.ok();
    Ok(())
}

fn function_flush(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    match argv.len() {
        2 => {}
        3 if is(argv[2], "sync") || is(argv[2], "async") => {}
        3 => {
            return Err(CmdError::err(
                "FUNCTION FLUSH only supports SYNC|ASYNC option",
            ));
        }
        _ => return Err(wrong_args(argv[1])),
    }
    engine.libraries.write().clear();
    changed(ctx, engine);
    ctx.out.ok();
    Ok(())
}

fn function_kill(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    engine(ctx)?.kill(false).map_err(CmdError::coded)?;
    ctx.out.ok();
    Ok(())
}

fn function_list(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        let arg = argv[i];
        if !with_code && is(arg, "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(arg, "libraryname") {
            if i + 1 >= argv.len() {
                return Err(CmdError::err("library name argument was not given"));
            }
            i += 1;
            pattern = Some(argv[i]);
        } else {
            return Err(CmdError::quoting("Unknown argument ", arg, ""));
        }
        i += 1;
    }
    let libs = engine.libraries.read();
    let chosen: Vec<&Library> = libs
        .libs
        .values()
        .filter(|l| pattern.is_none_or(|p| strata_keyspace::glob::matches_nocase(p, &l.name)))
        .collect();
    ctx.out.array(chosen.len());
    for lib in chosen {
        ctx.out.map(if with_code { 4 } else { 3 });
        ctx.out.bulk(b"library_name");
        ctx.out.bulk(&lib.name);
        ctx.out.bulk(b"engine");
        ctx.out.bulk(b"LUA");
        ctx.out.bulk(b"functions");
        ctx.out.array(lib.functions.len());
        for f in &lib.functions {
            ctx.out.map(3);
            ctx.out.bulk(b"name");
            ctx.out.bulk(&f.name);
            ctx.out.bulk(b"description");
            match &f.description {
                Some(d) => ctx.out.bulk(d),
                None => ctx.out.null(),
            }
            ctx.out.bulk(b"flags");
            let names: Vec<&str> = f.flags.names().collect();
            ctx.out.set(names.len());
            for n in names {
                ctx.out.simple(n.as_bytes());
            }
        }
        if with_code {
            ctx.out.bulk(b"library_code");
            ctx.out.bulk(&lib.code);
        }
    }
    Ok(())
}

fn function_stats(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    let running = engine.oldest_run();
    if let Some(run) = &running
        && run.is_eval
    {
        return Err(CmdError::coded(crate::scripting::BUSY_EVAL));
    }
    let (libraries, functions) = {
        let libs = engine.libraries.read();
        (libs.libs.len(), libs.function_count())
    };
    ctx.out.map(2);
    ctx.out.bulk(b"running_script");
    match running {
        None => ctx.out.null(),
        Some(run) => {
            ctx.out.map(3);
            ctx.out.bulk(b"name");
            ctx.out.bulk(run.name.as_bytes());
            ctx.out.bulk(b"command");
            ctx.out.bulks(run.argv.iter().map(Vec::as_slice));
            ctx.out.bulk(b"duration_ms");
            ctx.out.integer(run.started.elapsed().as_millis() as i64);
        }
    }
    ctx.out.bulk(b"engines");
    ctx.out.map(1);
    ctx.out.bulk(b"LUA");
    ctx.out.map(2);
    ctx.out.bulk(b"libraries_count");
    ctx.out.integer(libraries as i64);
    ctx.out.bulk(b"functions_count");
    ctx.out.integer(functions as i64);
    Ok(())
}

fn function_dump(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    ctx.out.bulk(&engine.dump());
    Ok(())
}

/// How FUNCTION RESTORE treats the libraries already there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Flush,
    Append,
    Replace,
}

fn function_restore(ctx: &mut Ctx, argv: &[&[u8]]) -> CmdResult {
    let engine = engine(ctx)?;
    if argv.len() > 4 {
        return Err(wrong_args(argv[1]));
    }
    let policy = match argv.get(3) {
        None => Policy::Append,
        Some(p) if is(p, "append") => Policy::Append,
        Some(p) if is(p, "replace") => Policy::Replace,
        Some(p) if is(p, "flush") => Policy::Flush,
        Some(_) => {
            return Err(CmdError::err(
                "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ));
        }
    };
    let Some(codes) = decode_payload(argv[2]) else {
        return Err(CmdError::err("DUMP payload version or checksum are wrong"));
    };
    restore(engine, &codes, policy).map_err(CmdError::err)?;
    changed(ctx, engine);
    ctx.out.ok();
    Ok(())
}

/// Adds the libraries of a payload to the set, all or nothing.
fn restore(engine: &Scripting, codes: &[Vec<u8>], policy: Policy) -> Result<(), String> {
    let mut fresh: Vec<Library> = Vec::with_capacity(codes.len());
    for code in codes {
        let lib = compile_library(engine, code)?;
        if fresh.iter().any(|l| l.name == lib.name) {
            return Err(format!(
                "Library {} already exists",
                String::from_utf8_lossy(&lib.name)
            ));
        }
        fresh.push(lib);
    }
    let mut libs = engine.libraries.write();
    let mut next = crate::scripting::Libraries::default();
    if policy != Policy::Flush {
        for lib in libs.libs.values() {
            next.insert(lib.clone());
        }
    }
    for lib in fresh {
        if next.libs.contains_key(&lib.name) {
            if policy == Policy::Append {
                return Err(format!(
                    "Library {} already exists",
                    String::from_utf8_lossy(&lib.name)
                ));
            }
            next.remove(&lib.name.clone());
        }
        if let Some(name) = next.collision(&lib) {
            return Err(format!(
                "Function {} already exists",
                String::from_utf8_lossy(name)
            ));
        }
        next.insert(lib);
    }
    next.version = libs.version + 1;
    *libs = next;
    Ok(())
}

/// Loads the library set a log record holds (at start-up).
pub fn restore_logged(engine: &Scripting, payload: &[u8]) -> Result<usize, String> {
    let codes = decode_payload(payload).ok_or("the logged function libraries are damaged")?;
    restore(engine, &codes, Policy::Flush)?;
    Ok(codes.len())
}

/// Redis's reply to a FUNCTION subcommand given too many arguments.
fn wrong_args(sub: &[u8]) -> CmdError {
    CmdError::quoting(
        "unknown subcommand or wrong number of arguments for '",
        crate::error::c_str(sub, 128),
        "'. Try FUNCTION HELP.",
    )
}

fn function_help(ctx: &mut Ctx, _argv: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
    Ok(())
}
