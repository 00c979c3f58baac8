//! The functions of the `redis` table, `math.random`, the error handler and the
//! per-run bridge, implemented in Rust with Redis's argument checks and error texts.
//!
//! The functions scripts call are created once per interpreter. What depends on the
//! run in progress (the host that runs commands, the RESP version the script asked
//! for, the library being loaded) is reached through functions the run stores in the
//! Lua registry under [`CALL`], [`SETRESP`], [`ACL`] and [`REGISTER`] for its duration:
//! outside a run they are absent, and the functions answer as Redis does then.

use std::cell::{Cell, RefCell};

use mlua::{Function, Lua, MultiValue, Table, Value};

use crate::convert::{c_double_to_i64, error_text, reply_to_lua};
use crate::error::{Raised, plain_message, raise, raise_table, unwrap_error};
use crate::fmt::{fmt_g, lua_number, parse_number};
use crate::script::{INVALID_NAME, ScriptFlags, valid_name};
use crate::vm::{FunctionMeta, Host, REDIS_VERSION, REDIS_VERSION_NUM};

/// Registry names of the per-run functions.
pub const CALL: &str = "strata.call";
pub const SETRESP: &str = "strata.setresp";
pub const ACL: &str = "strata.acl";
pub const REGISTER: &str = "strata.register";

/// The table of native functions handed to the sandbox.
pub fn native_table(lua: &Lua) -> mlua::Result<Table> {
    let native = lua.create_table()?;
    native.raw_set("REDIS_VERSION", REDIS_VERSION)?;
    native.raw_set("REDIS_VERSION_NUM", REDIS_VERSION_NUM)?;
    native.raw_set(
        "call",
        lua.create_function(|lua, args| redis_call(lua, args, true))?,
    )?;
    native.raw_set(
        "pcall",
        lua.create_function(|lua, args| redis_call(lua, args, false))?,
    )?;
    native.raw_set("setresp", lua.create_function(redis_setresp)?)?;
    native.raw_set("set_repl", lua.create_function(redis_set_repl)?)?;
    native.raw_set("acl_check_cmd", lua.create_function(redis_acl_check)?)?;
    native.raw_set("log", lua.create_function(redis_log)?)?;
    native.raw_set("sha1hex", lua.create_function(redis_sha1hex)?)?;
    native.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| single_field(lua, args, "err"))?,
    )?;
    native.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| single_field(lua, args, "ok"))?,
    )?;
    native.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    native.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    native.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    native.raw_set("random", lua.create_function(math_random)?)?;
    native.raw_set("randomseed", lua.create_function(math_randomseed)?)?;
    native.raw_set("register_function", lua.create_function(register_function)?)?;
    native.raw_set("handler", lua.create_function(error_handler)?)?;
    native.raw_set("unwrap_error", lua.create_function(unwrap_error)?)?;
    native.raw_set("bit", crate::bit::library(lua)?)?;
    native.raw_set("cjson", crate::cjson::library(lua)?)?;
    native.raw_set("cmsgpack", crate::cmsgpack::library(lua)?)?;
    native.raw_set("struct", crate::structlib::library(lua)?)?;
    Ok(native)
}

/// Lua's name for the type of an argument, `no value` when it is missing.
pub fn typename(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// `luaL_checknumber`: argument `i` (from 0) as a number, or Lua's error.
pub fn check_number(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<f64> {
    let v = args.get(i);
    let n = match v {
        Some(Value::Integer(n)) => Some(*n as f64),
        Some(Value::Number(n)) => Some(*n),
        Some(Value::String(s)) => parse_number(&s.as_bytes()),
        _ => None,
    };
    n.ok_or_else(|| {
        raise(
            lua,
            format!(
                "bad argument #{} to '{fname}' (number expected, got {})",
                i + 1,
                typename(v)
            ),
        )
    })
}

/// `lua_tonumber`: a number, a numeric string, or 0.
fn to_number(v: Option<&Value>) -> f64 {
    match v {
        Some(Value::Integer(i)) => *i as f64,
        Some(Value::Number(n)) => *n,
        Some(Value::String(s)) => parse_number(&s.as_bytes()).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// `lua_isstring` + `lua_tostring`: strings, and numbers as `tostring` prints them.
pub fn as_text(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(n) => Some(lua_number(*n).into_bytes()),
        _ => None,
    }
}

/// Converts `redis.call`'s arguments to command arguments, as Redis's
/// `luaArgsToRedisArgv` does: numbers as `%.17g`, strings as they are.
pub fn command_args(args: impl Iterator<Item = Value>) -> Result<Vec<Vec<u8>>, &'static str> {
    let mut argv = Vec::new();
    for v in args {
        match v {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Integer(i) => argv.push(fmt_g(i as f64, 17).into_bytes()),
            Value::Number(n) => argv.push(fmt_g(n, 17).into_bytes()),
            _ => return Err("Lua redis lib command arguments must be strings or integers"),
        }
    }
    if argv.is_empty() {
        return Err("Please specify at least one argument for this redis lib call");
    }
    Ok(argv)
}

fn err_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(text)?)?;
    Ok(t)
}

fn per_run(lua: &Lua, name: &str) -> mlua::Result<Option<Function>> {
    lua.named_registry_value::<Option<Function>>(name)
}

fn redis_call(lua: &Lua, args: MultiValue, raise_error: bool) -> mlua::Result<Value> {
    let Some(call) = per_run(lua, CALL)? else {
        return Err(raise_table(
            "ERR redis.call/pcall can only be called inside a script invocation",
        ));
    };
    let (failed, value): (bool, Value) = call.call(args)?;
    if failed && raise_error {
        let text = match &value {
            Value::Table(t) => match t.raw_get::<Value>("err")? {
                Value::String(s) => s.as_bytes().to_vec(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        return Err(raise_table(text));
    }
    Ok(value)
}

fn redis_setresp(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let Some(setresp) = per_run(lua, SETRESP)? else {
        return Err(raise_table(
            "ERR redis.setresp can only be called inside a script invocation",
        ));
    };
    if args.len() != 1 {
        return Err(raise_table("ERR redis.setresp() requires one argument."));
    }
    match c_double_to_i64(to_number(args.front())) as i32 {
        2 => setresp.call(false),
        3 => setresp.call(true),
        _ => Err(raise_table("ERR RESP version must be 2 or 3.")),
    }
}

/// `redis.set_repl`: checked as Redis checks it, and otherwise without effect, since
/// strata always logs a script's effects.
fn redis_set_repl(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if per_run(lua, CALL)?.is_none() {
        return Err(raise_table(
            "ERR redis.set_repl can only be called inside a script invocation",
        ));
    }
    if args.len() != 1 {
        return Err(raise_table("ERR redis.set_repl() requires two arguments."));
    }
    let flags = c_double_to_i64(to_number(args.front())) as i32;
    if flags & !3 != 0 {
        return Err(raise_table(
            "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        ));
    }
    Ok(())
}

fn redis_acl_check(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    let Some(acl) = per_run(lua, ACL)? else {
        return Err(raise_table(
            "ERR redis.acl_check_cmd can only be called inside a script invocation",
        ));
    };
    if let Err(msg) = command_args(args.iter().cloned()) {
        return Err(raise_table(error_text(msg.as_bytes())));
    }
    acl.call(args)
}

/// `redis.log(level, message...)`.
fn redis_log(_: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(raise_table(
            "ERR redis.log() requires two arguments or more.",
        ));
    }
    let level = match args.front() {
        Some(Value::Integer(i)) => *i as f64,
        Some(Value::Number(n)) => *n,
        Some(Value::String(s)) => parse_number(&s.as_bytes())
            .ok_or_else(|| raise_table("ERR First argument must be a number (log level)."))?,
        _ => {
            return Err(raise_table(
                "ERR First argument must be a number (log level).",
            ));
        }
    };
    let level = c_double_to_i64(level) as i32;
    if !(0..=3).contains(&level) {
        return Err(raise_table("ERR Invalid debug level."));
    }
    let mut text = Vec::new();
    for (i, v) in args.iter().skip(1).enumerate() {
        if let Some(s) = as_text(v) {
            if i != 0 {
                text.push(b' ');
            }
            text.extend_from_slice(&s);
        }
    }
    let text = String::from_utf8_lossy(&text);
    match level {
        0 | 1 => tracing::debug!(target: "strata::script", "{text}"),
        2 => tracing::info!(target: "strata::script", "{text}"),
        _ => tracing::warn!(target: "strata::script", "{text}"),
    }
    Ok(())
}

fn redis_sha1hex(_: &Lua, args: MultiValue) -> mlua::Result<String> {
    if args.len() != 1 {
        return Err(raise_table("ERR wrong number of arguments"));
    }
    let text = args.front().and_then(as_text).unwrap_or_default();
    Ok(crate::script::sha1hex(&text))
}

/// `redis.error_reply` and `redis.status_reply`: a one-field table, or the error
/// table Redis returns (without raising it) for bad arguments.
fn single_field(lua: &Lua, args: MultiValue, field: &str) -> mlua::Result<Table> {
    let text = match (args.len(), args.front()) {
        (1, Some(Value::String(s))) => s.as_bytes().to_vec(),
        _ => return err_table(lua, b"ERR wrong number or type of arguments"),
    };
    if field == "err" {
        let raw = if text.first() == Some(&b'-') {
            text
        } else {
            let mut r = b"-".to_vec();
            r.extend_from_slice(&text);
            r
        };
        return err_table(lua, &error_text(&raw));
    }
    let t = lua.create_table()?;
    t.raw_set(field, lua.create_string(&text)?)?;
    Ok(t)
}

/// `luaL_checkint`: the argument truncated to a C int.
fn check_int(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<i32> {
    Ok(c_double_to_i64(check_number(lua, args, i, fname)?) as i32)
}

/// Redis's `math.random`: Lua's, on Redis's generator.
fn math_random(lua: &Lua, args: MultiValue) -> mlua::Result<f64> {
    let r = crate::rand::random();
    match args.len() {
        0 => Ok(r),
        1 => {
            let u = check_int(lua, &args, 0, "random")?;
            if u < 1 {
                return Err(raise(
                    lua,
                    "bad argument #1 to 'random' (interval is empty)",
                ));
            }
            Ok((r * f64::from(u)).floor() + 1.0)
        }
        2 => {
            let l = check_int(lua, &args, 0, "random")?;
            let u = check_int(lua, &args, 1, "random")?;
            if l > u {
                return Err(raise(
                    lua,
                    "bad argument #2 to 'random' (interval is empty)",
                ));
            }
            Ok((r * (f64::from(u) - f64::from(l) + 1.0)).floor() + f64::from(l))
        }
        _ => Err(raise(lua, "wrong number of arguments")),
    }
}

fn math_randomseed(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    crate::rand::srand48(check_int(lua, &args, 0, "randomseed")?);
    Ok(())
}

fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    let Some(register) = per_run(lua, REGISTER)? else {
        return Err(raise_table(
            "ERR redis.register_function can only be called on FUNCTION LOAD command",
        ));
    };
    register.call(args)
}

/// The per-run `redis.call` bridge: runs the command through the host and returns
/// `(failed, value)`, the value being the reply as Lua sees it.
pub fn bridge_call(
    lua: &Lua,
    host: &RefCell<&mut dyn Host>,
    resp3: &Cell<bool>,
    args: MultiValue,
) -> mlua::Result<(bool, Value)> {
    let argv = match command_args(args.into_iter()) {
        Ok(a) => a,
        Err(msg) => {
            return Ok((
                true,
                Value::Table(err_table(lua, &error_text(msg.as_bytes()))?),
            ));
        }
    };
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    let mut reply = Vec::new();
    let outcome = match host.try_borrow_mut() {
        Ok(mut h) => h.call(&refs, resp3.get(), &mut reply),
        Err(_) => Err(b"luaRedisGenericCommand() recursive call detected. Are you doing funny stuff with Lua debug hooks?".to_vec()),
    };
    if let Err(msg) = outcome {
        return Ok((true, Value::Table(err_table(lua, &error_text(&msg))?)));
    }
    let value = reply_to_lua(lua, &reply)?;
    Ok((reply.first() == Some(&b'-'), value))
}

/// The per-run `redis.acl_check_cmd` bridge.
pub fn bridge_acl(host: &RefCell<&mut dyn Host>, args: MultiValue) -> mlua::Result<bool> {
    let argv = command_args(args.into_iter()).map_err(|m| raise_table(error_text(m.as_bytes())))?;
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    let allowed = host
        .try_borrow_mut()
        .ok()
        .and_then(|mut h| h.acl_check(&refs));
    allowed.ok_or_else(|| raise_table("ERR Invalid command passed to redis.acl_check_cmd()"))
}

pub type Registered = RefCell<Vec<(FunctionMeta, Function)>>;

/// The per-load `redis.register_function` bridge.
pub fn bridge_register(registered: &Registered, args: MultiValue) -> mlua::Result<()> {
    let (meta, f) = read_register_args(args).map_err(|t| raise_table(format!("ERR {t}")))?;
    if !valid_name(&meta.name) {
        return Err(raise_table(format!("ERR {INVALID_NAME}")));
    }
    let mut list = registered.borrow_mut();
    if list
        .iter()
        .any(|(m, _)| m.name.eq_ignore_ascii_case(&meta.name))
    {
        return Err(raise_table("ERR Function already exists in the library"));
    }
    list.push((meta, f));
    Ok(())
}

fn read_register_args(args: MultiValue) -> Result<(FunctionMeta, Function), &'static str> {
    if args.is_empty() || args.len() > 2 {
        return Err("wrong number of arguments to redis.register_function");
    }
    let mut it = args.into_iter();
    let first = it.next().unwrap_or(Value::Nil);
    if let Some(second) = it.next() {
        let Some(name) = as_text(&first) else {
            return Err("first argument to redis.register_function must be a string");
        };
        let Value::Function(f) = second else {
            return Err("second argument to redis.register_function must be a function");
        };
        return Ok((
            FunctionMeta {
                name,
                description: None,
                flags: ScriptFlags::default(),
            },
            f,
        ));
    }
    let Value::Table(t) = first else {
        return Err(
            "calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).",
        );
    };
    let mut name = None;
    let mut description = None;
    let mut callback = None;
    let mut flags = ScriptFlags::default();
    for pair in t.pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|_| "unknown argument given to redis.register_function")?;
        let Some(key) = as_text(&k) else {
            return Err("named argument key given to redis.register_function is not a string");
        };
        if key.eq_ignore_ascii_case(b"function_name") {
            name = Some(as_text(&v).ok_or(
                "function_name argument given to redis.register_function must be a string",
            )?);
        } else if key.eq_ignore_ascii_case(b"description") {
            description =
                Some(as_text(&v).ok_or(
                    "description argument given to redis.register_function must be a string",
                )?);
        } else if key.eq_ignore_ascii_case(b"callback") {
            let Value::Function(f) = v else {
                return Err(
                    "callback argument given to redis.register_function must be a function",
                );
            };
            callback = Some(f);
        } else if key.eq_ignore_ascii_case(b"flags") {
            let Value::Table(list) = v else {
                return Err(
                    "flags argument to redis.register_function must be a table representing function flags",
                );
            };
            let mut i = 1;
            loop {
                let item: Value = list.get(i).map_err(|_| "unknown flag given")?;
                if item.is_nil() {
                    break;
                }
                let flag = as_text(&item)
                    .and_then(|s| ScriptFlags::from_name_nocase(&s))
                    .ok_or("unknown flag given")?;
                flags.insert(flag);
                i += 1;
            }
        } else {
            return Err("unknown argument given to redis.register_function");
        }
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let callback = callback.ok_or("redis.register_function must get a callback argument")?;
    Ok((
        FunctionMeta {
            name,
            description,
            flags,
        },
        callback,
    ))
}

/// The error handler every run goes through (Redis's `__redis__err__handler`): makes
/// the error a table `{err=..., source=..., line=...}`, the place being the first
/// frame of user code below the error (skipping C functions and the sandbox's own).
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Table> {
    let err = unwrap_error(lua, err)?;
    let t = lua.create_table()?;
    match &err {
        Value::Table(orig) => {
            let e: Value = orig.get("err").unwrap_or(Value::Nil);
            t.raw_set("err", e)?;
            let ignore: Value = orig.get("ignore_error_stats_update").unwrap_or(Value::Nil);
            t.raw_set("ignore_error_stats_update", ignore)?;
        }
        other => {
            let text = match other {
                Value::String(s) => {
                    let mut v = b"ERR ".to_vec();
                    v.extend_from_slice(&s.as_bytes());
                    v
                }
                Value::Nil => b"ERR nil".to_vec(),
                Value::Boolean(b) => format!("ERR {b}").into_bytes(),
                Value::Integer(i) => format!("ERR {i}").into_bytes(),
                Value::Number(n) => format!("ERR {}", lua_number(*n)).into_bytes(),
                Value::Error(e) => format!("ERR {}", plain_message(e)).into_bytes(),
                v => format!("ERR {}: {:p}", v.type_name(), v.to_pointer()).into_bytes(),
            };
            t.raw_set("err", lua.create_string(text)?)?;
        }
    }
    for level in 1..64 {
        let frame = lua.inspect_stack(level, |d| {
            let s = d.source();
            (s.what, s.source.map(|x| x.into_owned()), d.current_line())
        });
        let Some((what, source, line)) = frame else {
            break;
        };
        let Some(source) = source else { continue };
        if what == "C" || what == "tail" || source == crate::vm::SANDBOX_CHUNK {
            continue;
        }
        t.raw_set("source", source)?;
        if let Some(line) = line {
            t.raw_set("line", line)?;
        }
        break;
    }
    Ok(t)
}

/// The text of an error a library's code raised while loading, as Redis's
/// `luaExtractErrorInformation` reads it: a table's `err` field, or `ERR <text>`.
pub fn load_error_message(v: &Value) -> String {
    match v {
        Value::Table(t) => match t.get::<Value>("err") {
            Ok(v) => as_text(&v)
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default(),
            Err(_) => String::new(),
        },
        Value::String(s) => format!("ERR {}", s.to_string_lossy()),
        Value::Integer(i) => format!("ERR {i}"),
        Value::Number(n) => format!("ERR {}", lua_number(*n)),
        Value::Error(e) => match e.downcast_ref::<Raised>() {
            Some(Raised::Table(t)) => String::from_utf8_lossy(t).into_owned(),
            _ => format!("ERR {}", plain_message(e)),
        },
        _ => String::new(),
    }
}
