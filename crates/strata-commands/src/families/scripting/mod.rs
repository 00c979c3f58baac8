//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FCALL, FCALL_RO, FUNCTION.
//!
//! The handlers parse and check their arguments as Redis does, then run the script
//! through `run_script`: an interpreter from the engine's pool
//! ([`crate::scripting`]), the shard locks of the declared keys (or every shard), and
//! [`host::ScriptHost`] for what the script's `redis.call`s run. The reply is the
//! script's return value converted by Redis's rules (`strata_lua::convert`).

mod eval;
pub mod function;
pub mod host;

use std::sync::Arc;

use strata_lua::{Invocation, Kind, Vm, Watchdog};
use strata_resp::ReplyWriter;

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::scripting::Scripting;
use crate::spec::{BeginSearch, FindKeys, Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const SCRIPTING: Command = Command {
    group: Group::Scripting,
    acl: acl!(SCRIPTING),
    ..Command::DEFAULT
};

const fn keynum_spec(flags: crate::spec::KeyFlags, notes: &'static str) -> KeySpec {
    KeySpec {
        flags,
        begin: BeginSearch::Index(2),
        find: FindKeys::KeyNum {
            key_num_idx: 0,
            first_key: 1,
            step: 1,
        },
        notes,
    }
}

const RW_NOTES: &str =
    "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE";
const RO_NOTES: &str =
    "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS";

const RUN: Command = Command {
    arity: -3,
    flags: flags!(NOSCRIPT, STALE, SKIP_MONITOR, NO_MANDATORY_KEYS),
    // A transaction that runs a script locks every shard: which keys it reaches is
    // only known as it runs.
    touches_all: true,
    ..SCRIPTING
};

const RUN_RO: Command = Command {
    flags: flags!(READONLY, NOSCRIPT, STALE, SKIP_MONITOR, NO_MANDATORY_KEYS),
    ..RUN
};

pub const COMMANDS: &[Command] = &[
    Command {
        name: "eval",
        key_specs: &[keynum_spec(kf!(RW, ACCESS, UPDATE), RW_NOTES)],
        since: "2.6.0",
        summary: "Execute a Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: Some(eval::eval),
        ..RUN
    },
    Command {
        name: "evalsha",
        key_specs: &[keynum_spec(kf!(RW, ACCESS, UPDATE), "")],
        since: "2.6.0",
        summary: "Execute a Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: Some(eval::evalsha),
        ..RUN
    },
    Command {
        name: "eval_ro",
        key_specs: &[keynum_spec(kf!(RO, ACCESS), RO_NOTES)],
        since: "7.0.0",
        summary: "Execute a read-only Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: Some(eval::eval_ro),
        ..RUN_RO
    },
    Command {
        name: "evalsha_ro",
        key_specs: &[keynum_spec(kf!(RO, ACCESS), "")],
        since: "7.0.0",
        summary: "Execute a read-only Lua script server side",
        complexity: "Depends on the script that is executed.",
        handler: Some(eval::evalsha_ro),
        ..RUN_RO
    },
    Command {
        name: "fcall",
        key_specs: &[keynum_spec(kf!(RW, ACCESS, UPDATE), RW_NOTES)],
        since: "7.0.0",
        summary: "Invoke a function",
        complexity: "Depends on the function that is executed.",
        handler: Some(function::fcall),
        ..RUN
    },
    Command {
        name: "fcall_ro",
        key_specs: &[keynum_spec(kf!(RO, ACCESS), RO_NOTES)],
        since: "7.0.0",
        summary: "Invoke a read-only function",
        complexity: "Depends on the function that is executed.",
        handler: Some(function::fcall_ro),
        ..RUN_RO
    },
    Command {
        name: "script",
        arity: -2,
        group: Group::Scripting,
        since: "2.6.0",
        summary: "A container for Lua scripts management commands",
        complexity: "Depends on subcommand.",
        subcommands: eval::SCRIPT_SUBCOMMANDS,
        ..Command::DEFAULT
    },
    Command {
        name: "function",
        arity: -2,
        group: Group::Scripting,
        since: "7.0.0",
        summary: "A container for function commands",
        complexity: "Depends on subcommand.",
        subcommands: function::FUNCTION_SUBCOMMANDS,
        ..Command::DEFAULT
    },
];

/// The engine, or the error a server without one gives.
fn engine<'a>(ctx: &Ctx<'a, '_>) -> Result<&'a Scripting, CmdError> {
    ctx.server
        .scripting()
        .ok_or_else(|| CmdError::err("scripting is not available here"))
}

/// EVAL's and FCALL's `numkeys`, checked against the arguments.
fn numkeys(argv: &[&[u8]], not_int: &'static str) -> Result<usize, CmdError> {
    let n = crate::parse::int(argv[2]).map_err(|_| CmdError::err(not_int))?;
    if n > argv.len() as i64 - 3 {
        return Err(CmdError::err(
            "Number of keys can't be greater than number of args",
        ));
    }
    if n < 0 {
        return Err(CmdError::err("Number of keys can't be negative"));
    }
    Ok(n as usize)
}

/// What to run and how.
struct Plan<'p> {
    kind: Kind,
    /// The SHA1 or the function's name, as errors show it.
    name: &'p str,
    /// Under which name undeclared-key use is remembered.
    lock_name: String,
    read_only: bool,
    /// A script flagged `allow-oom` may run commands that need memory when memory
    /// is over `maxmemory`.
    allow_oom: bool,
    numkeys: usize,
}

/// Runs a script (see the module docs and [`host`]): `call` runs it in the
/// interpreter given.
fn run_script(
    ctx: &mut Ctx,
    argv: &[&[u8]],
    plan: Plan<'_>,
    mut call: impl FnMut(
        &mut Vm,
        Invocation<'_>,
        &mut host::ScriptHost<'_, '_, '_>,
        Arc<dyn Watchdog>,
        &mut ReplyWriter<'_>,
    ) -> Result<(), CmdError>,
) -> CmdResult {
    let engine = engine(ctx)?;
    if let Some(hub) = ctx.server.pubsub()
        && hub.has_monitors()
    {
        // Shown before the commands it runs, as in Redis.
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        let line = crate::monitor::line(micros, ctx.conn.db, &ctx.conn.info.addr, argv);
        hub.feed_monitors(bytes::Bytes::from(line), ctx.keys.now_ms);
    }
    let keys = &argv[3..3 + plan.numkeys];
    let args = &argv[3 + plan.numkeys..];
    if plan.numkeys == 0 || engine.needs_all_shards(&plan.lock_name) {
        ctx.keys.lock_all();
    }
    let may_block = ctx.conn.may_block;
    ctx.conn.may_block = false;
    let proto = ctx.out.protocol();
    let result = loop {
        let mut lease = match engine.checkout(plan.kind) {
            Ok(l) => l,
            Err(e) => break Err(CmdError::err(e)),
        };
        let run = engine.start(plan.kind == Kind::Eval, plan.name.to_string(), argv);
        let mut reply = Vec::new();
        let db = ctx.conn.db;
        let server = ctx.server;
        let mut host = host::ScriptHost {
            ctx,
            run: run.clone(),
            read_only: plan.read_only,
            allow_oom: plan.allow_oom,
            db,
            restart: false,
            name: plan.lock_name.clone(),
        };
        let inv = Invocation {
            keys,
            args,
            name: plan.name,
        };
        let mut outcome = Ok(());
        {
            let mut w = ReplyWriter::new(&mut reply, proto);
            let dog: Arc<dyn Watchdog> = run.clone();
            server.run_long(&mut || {
                outcome = call(lease.vm(), inv, &mut host, dog.clone(), &mut w);
            });
        }
        engine.finish(&run);
        let restart = host.restart;
        if restart {
            ctx.keys.release();
            ctx.keys.lock_all();
            continue;
        }
        if outcome.is_ok() {
            ctx.out.raw(&reply);
        }
        break outcome;
    };
    ctx.conn.may_block = may_block;
    result
}
