//! One Lua interpreter, set up as Redis sets up its own: the sandbox, the `redis`
//! table, the libraries, the error handler and the watchdog hook.
//!
//! An interpreter serves one kind of work: EVAL scripts ([`Kind::Eval`], compiled once
//! each and kept by SHA1) or FUNCTION libraries ([`Kind::Function`], whose code is
//! run to register their functions). It runs one script at a time; the server keeps a
//! pool of them so that scripts on different keys run in parallel.
//!
//! A run lends the interpreter a [`Host`] (how `redis.call` reaches the server) and a
//! [`Watchdog`] (asked every 100,000 instructions whether to stop), and writes the
//! script's reply, or its error in Redis's words, to the client's reply buffer.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mlua::{
    Function, HookTriggers, Lua, LuaOptions, MultiValue, RegistryKey, StdLib, Table, Value, VmState,
};
use strata_resp::ReplyWriter;

use crate::api::{self, ACL, CALL, REGISTER, SETRESP};
use crate::convert::lua_to_reply;
use crate::error::{Stopped, plain_message};
use crate::fmt::lua_number;
use crate::script::ScriptFlags;

/// The Redis version scripts see (`redis.REDIS_VERSION`).
pub const REDIS_VERSION: &str = "7.0.15";
/// The same as a number, `0x00MMmmpp` (`redis.REDIS_VERSION_NUM`).
pub const REDIS_VERSION_NUM: u32 = 0x07_00_0f;

/// The chunk name of the sandbox's own code, which error positions skip.
pub const SANDBOX_CHUNK: &str = "=[sandbox]";

/// How often the watchdog is asked, in Lua instructions (Redis's figure).
const HOOK_EVERY: u32 = 100_000;

/// What an interpreter is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Eval,
    Function,
}

/// How a script reaches the server.
pub trait Host {
    /// Runs a command for `redis.call`/`redis.pcall`, writing its reply (RESP3 when
    /// `resp3`) to `reply`. An `Err` is a refusal before the command ran, as Redis
    /// words it: a message (`Unknown Redis command called from script`) or a coded
    /// error (`-MISCONF ...`).
    fn call(&mut self, argv: &[&[u8]], resp3: bool, reply: &mut Vec<u8>) -> Result<(), Vec<u8>>;

    /// `redis.acl_check_cmd`: whether the caller may run the command; `None` if
    /// there is no such command.
    fn acl_check(&mut self, argv: &[&[u8]]) -> Option<bool>;
}

/// Asked every 100,000 instructions while a script runs: `Some(message)` stops it
/// with that error (SCRIPT KILL, a FUNCTION LOAD timeout).
pub trait Watchdog: Send + Sync {
    fn check(&self) -> Option<String>;
}

#[derive(Default)]
struct WatchSlot {
    dog: Mutex<Option<Arc<dyn Watchdog>>>,
    /// Set once the watchdog stopped the run: the hook then fires on every
    /// instruction, so that a script cannot catch the error and go on.
    stopping: std::sync::atomic::AtomicBool,
    /// The watchdog's message.
    message: Mutex<String>,
}

fn make_hook(
    slot: Arc<WatchSlot>,
) -> impl Fn(&Lua, &mlua::debug::Debug) -> mlua::Result<VmState> + Send + 'static {
    move |lua, _| {
        use std::sync::atomic::Ordering;
        let stopping = slot.stopping.load(Ordering::Acquire);
        let stop = if stopping {
            None
        } else {
            let dog = slot.dog.lock().map(|d| d.clone()).unwrap_or(None);
            dog.and_then(|d| d.check())
        };
        if let Some(msg) = &stop {
            if let Ok(mut m) = slot.message.lock() {
                *m = msg.clone();
            }
            slot.stopping.store(true, Ordering::Release);
            let _ = lua.set_global_hook(
                HookTriggers::new().every_nth_instruction(1),
                make_hook(slot.clone()),
            );
        }
        if stopping || stop.is_some() {
            // Raised only in the script's own code, so that the sandbox's code around
            // it (which cannot loop) always completes.
            let in_user = lua
                .inspect_stack(0, |d| {
                    let s = d.source();
                    s.what != "C" && s.source.is_some_and(|s| s != SANDBOX_CHUNK)
                })
                .unwrap_or(false);
            if in_user {
                let msg = slot.message.lock().map(|m| m.clone()).unwrap_or_default();
                return Err(mlua::Error::external(Stopped(msg)));
            }
        }
        Ok(VmState::Continue)
    }
}

/// A function a library registered, as FUNCTION LIST shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionMeta {
    pub name: Vec<u8>,
    pub description: Option<Vec<u8>>,
    pub flags: ScriptFlags,
}

/// One script invocation.
#[derive(Clone, Copy, Debug)]
pub struct Invocation<'a> {
    pub keys: &'a [&'a [u8]],
    pub args: &'a [&'a [u8]],
    /// The name errors give after `script:` (the SHA1 for EVAL, the function's name
    /// for FCALL).
    pub name: &'a str,
}

/// Why a run could not start.
#[derive(Debug, PartialEq, Eq)]
pub enum NotFound {
    Script,
    Function,
}

/// A Lua interpreter (see the module docs).
pub struct Vm {
    lua: Lua,
    kind: Kind,
    globals: Table,
    invoke: Function,
    run_library: Function,
    scrub: Function,
    env: Table,
    scripts: HashMap<String, RegistryKey>,
    functions: HashMap<Vec<u8>, RegistryKey>,
    /// The version of the library set whose functions are loaded.
    pub library_version: u64,
    slot: Arc<WatchSlot>,
}

impl std::fmt::Debug for Vm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vm")
            .field("kind", &self.kind)
            .field("scripts", &self.scripts.len())
            .field("functions", &self.functions.len())
            .finish()
    }
}

impl Vm {
    /// A fresh interpreter of this kind, its memory bounded by `memory_limit` bytes
    /// (0: no bound).
    pub fn new(kind: Kind, memory_limit: usize) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let native = api::native_table(&lua)?;
        let setup: Table = lua
            .load(include_str!("sandbox.lua"))
            .set_name(SANDBOX_CHUNK)
            .call((
                match kind {
                    Kind::Eval => "eval",
                    Kind::Function => "function",
                },
                native,
            ))?;
        let slot = Arc::new(WatchSlot::default());
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            make_hook(slot.clone()),
        )?;
        if memory_limit > 0 {
            lua.set_memory_limit(memory_limit)?;
        }
        Ok(Vm {
            globals: setup.raw_get("globals")?,
            invoke: setup.raw_get("invoke")?,
            run_library: setup.raw_get("run_library")?,
            scrub: setup.raw_get("scrub")?,
            env: setup.raw_get("env")?,
            lua,
            kind,
            scripts: HashMap::new(),
            functions: HashMap::new(),
            library_version: 0,
            slot,
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Bytes the interpreter uses.
    pub fn used_memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// Changes the memory bound (0: none).
    pub fn set_memory_limit(&self, limit: usize) {
        let _ = self.lua.set_memory_limit(limit);
    }

    /// Whether the script with this SHA1 is compiled here.
    pub fn has_script(&self, sha: &str) -> bool {
        self.scripts.contains_key(sha)
    }

    /// Forgets every compiled script (SCRIPT FLUSH).
    pub fn clear_scripts(&mut self) {
        for (_, key) in self.scripts.drain() {
            let _ = self.lua.remove_registry_value(key);
        }
        let _ = self.lua.gc_collect();
    }

    /// Compiles an EVAL script as Redis 7.0 does: its body after any shebang line
    /// (whose newline is kept, so that line numbers count from the shebang) loaded as
    /// a chunk named `@user_script`. The error is the reply text without `ERR `.
    pub fn compile_script(
        &mut self,
        sha: &str,
        body: &[u8],
        code_start: usize,
    ) -> Result<(), String> {
        if self.scripts.contains_key(sha) {
            return Ok(());
        }
        let code = body.get(code_start..).unwrap_or_default();
        let chunk = self
            .lua
            .load(code)
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function();
        let f = match chunk {
            Ok(f) => f,
            Err(mlua::Error::SyntaxError { message, .. }) => {
                return Err(format!("Error compiling script (new function): {message}"));
            }
            Err(e) => {
                return Err(format!(
                    "Error compiling script (new function): {}",
                    plain_message(&e)
                ));
            }
        };
        let key = self
            .lua
            .create_registry_value(f)
            .map_err(|e| plain_message(&e))?;
        self.scripts.insert(sha.to_string(), key);
        Ok(())
    }

    /// Runs a compiled EVAL script, writing its reply (or error) to `out`.
    pub fn run_script(
        &mut self,
        sha: &str,
        inv: Invocation<'_>,
        host: &mut dyn Host,
        dog: Arc<dyn Watchdog>,
        out: &mut ReplyWriter<'_>,
    ) -> Result<(), NotFound> {
        let Some(key) = self.scripts.get(sha) else {
            return Err(NotFound::Script);
        };
        let f: Function = match self.lua.registry_value(key) {
            Ok(f) => f,
            Err(_) => return Err(NotFound::Script),
        };
        let set_globals = (|| -> mlua::Result<()> {
            self.globals.raw_set(
                "KEYS",
                self.lua.create_sequence_from(
                    inv.keys
                        .iter()
                        .map(|k| self.lua.create_string(k))
                        .collect::<mlua::Result<Vec<_>>>()?,
                )?,
            )?;
            self.globals.raw_set(
                "ARGV",
                self.lua.create_sequence_from(
                    inv.args
                        .iter()
                        .map(|a| self.lua.create_string(a))
                        .collect::<mlua::Result<Vec<_>>>()?,
                )?,
            )?;
            Ok(())
        })();
        if let Err(e) = set_globals {
            out.error(
                format!(
                    "ERR Error running script {}, {}",
                    inv.name,
                    plain_message(&e)
                )
                .as_bytes(),
            );
            return Ok(());
        }
        self.run(f, None, inv, host, dog, out);
        Ok(())
    }

    /// Calls a registered function (its name in lower case), writing its reply (or
    /// error) to `out`.
    pub fn call_function(
        &mut self,
        name: &[u8],
        inv: Invocation<'_>,
        host: &mut dyn Host,
        dog: Arc<dyn Watchdog>,
        out: &mut ReplyWriter<'_>,
    ) -> Result<(), NotFound> {
        let Some(key) = self.functions.get(&name.to_ascii_lowercase()) else {
            return Err(NotFound::Function);
        };
        let f: Function = match self.lua.registry_value(key) {
            Ok(f) => f,
            Err(_) => return Err(NotFound::Function),
        };
        let args = (|| -> mlua::Result<(Table, Table)> {
            let keys = self.lua.create_sequence_from(
                inv.keys
                    .iter()
                    .map(|k| self.lua.create_string(k))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?;
            let args = self.lua.create_sequence_from(
                inv.args
                    .iter()
                    .map(|a| self.lua.create_string(a))
                    .collect::<mlua::Result<Vec<_>>>()?,
            )?;
            Ok((keys, args))
        })();
        match args {
            Ok(args) => self.run(f, Some(args), inv, host, dog, out),
            Err(e) => out.error(
                format!(
                    "ERR Error running script {}, {}",
                    inv.name,
                    plain_message(&e)
                )
                .as_bytes(),
            ),
        }
        Ok(())
    }

    fn run(
        &mut self,
        f: Function,
        args: Option<(Table, Table)>,
        inv: Invocation<'_>,
        host: &mut dyn Host,
        dog: Arc<dyn Watchdog>,
        out: &mut ReplyWriter<'_>,
    ) {
        if let Ok(mut slot) = self.slot.dog.lock() {
            *slot = Some(dog);
        }
        let resp3 = Cell::new(false);
        let host = RefCell::new(host);
        let invoke = self.invoke.clone();
        let lua = &self.lua;
        let result = lua.scope(|scope| {
            let call = scope.create_function(|lua, args: MultiValue| {
                api::bridge_call(lua, &host, &resp3, args)
            })?;
            let setresp = scope.create_function(|_, v: bool| {
                resp3.set(v);
                Ok(())
            })?;
            let acl = scope.create_function(|_, args: MultiValue| api::bridge_acl(&host, args))?;
            lua.set_named_registry_value(CALL, call)?;
            lua.set_named_registry_value(SETRESP, setresp)?;
            lua.set_named_registry_value(ACL, acl)?;
            let results: mlua::Result<MultiValue> = match args {
                Some((keys, args)) => invoke.call((f, keys, args)),
                None => invoke.call(f),
            };
            lua.unset_named_registry_value(CALL)?;
            lua.unset_named_registry_value(SETRESP)?;
            lua.unset_named_registry_value(ACL)?;
            let results = results?;
            let mut it = results.into_iter();
            let ok = matches!(it.next(), Some(Value::Boolean(true)));
            let value = it.next().unwrap_or(Value::Nil);
            if ok {
                lua_to_reply(out, &value, resp3.get());
            } else {
                write_error(out, &value, inv.name);
            }
            Ok(())
        });
        let _ = self.scrub.call::<()>(());
        if let Err(e) = result {
            out.error(
                format!(
                    "ERR Error running script {}, {}",
                    inv.name,
                    truncate(&plain_message(&e), 100)
                )
                .as_bytes(),
            );
            let _ = self.lua.gc_collect();
        }
        if let Ok(mut slot) = self.slot.dog.lock() {
            *slot = None;
        }
        self.reset_hook();
    }

    /// Puts the hook back to its normal pace after a stop.
    fn reset_hook(&self) {
        use std::sync::atomic::Ordering;
        if self.slot.stopping.swap(false, Ordering::AcqRel) {
            let _ = self.lua.set_global_hook(
                HookTriggers::new().every_nth_instruction(HOOK_EVERY),
                make_hook(self.slot.clone()),
            );
        }
    }

    /// Forgets every registered function (before loading a new set of libraries).
    pub fn clear_functions(&mut self) {
        for (_, key) in self.functions.drain() {
            let _ = self.lua.remove_registry_value(key);
        }
        let _ = self.lua.gc_collect();
    }

    /// Runs a library's code (after its header line) to register its functions,
    /// under `dog` (FUNCTION LOAD's timeout). On success the functions are callable
    /// here and their descriptions are returned; the error is the reply text without
    /// `ERR `. Functions already registered here under the same names are replaced.
    pub fn load_library(
        &mut self,
        code: &[u8],
        dog: Arc<dyn Watchdog>,
    ) -> Result<Vec<FunctionMeta>, String> {
        if let Ok(mut slot) = self.slot.dog.lock() {
            *slot = Some(dog);
        }
        let registered: api::Registered = RefCell::new(Vec::new());
        let run_library = self.run_library.clone();
        let env = self.env.clone();
        let lua = &self.lua;
        let result = lua.scope(|scope| {
            let chunk = match lua
                .load(code)
                .set_name("@user_function")
                .set_environment(env)
                .into_function()
            {
                Ok(f) => f,
                Err(mlua::Error::SyntaxError { message, .. }) => {
                    return Ok(Err(format!("Error compiling function: {message}")));
                }
                Err(e) => return Err(e),
            };
            let register = scope
                .create_function(|_, args: MultiValue| api::bridge_register(&registered, args))?;
            lua.set_named_registry_value(REGISTER, register)?;
            let outcome: mlua::Result<(bool, Value)> = run_library.call(chunk);
            lua.unset_named_registry_value(REGISTER)?;
            let (ok, err) = outcome?;
            if ok {
                Ok(Ok(()))
            } else {
                Ok(Err(format!(
                    "Error registering functions: {}",
                    api::load_error_message(&err)
                )))
            }
        });
        let _ = self.scrub.call::<()>(());
        if let Ok(mut slot) = self.slot.dog.lock() {
            *slot = None;
        }
        self.reset_hook();
        match result {
            Ok(Ok(())) => {}
            Ok(Err(text)) => return Err(text),
            Err(e) => {
                return Err(format!(
                    "Error registering functions: {}",
                    plain_message(&e)
                ));
            }
        }
        let registered = registered.into_inner();
        if registered.is_empty() {
            return Err("No functions registered".to_string());
        }
        let mut metas = Vec::with_capacity(registered.len());
        for (meta, f) in registered {
            let key = self
                .lua
                .create_registry_value(f)
                .map_err(|e| format!("Error registering functions: {}", plain_message(&e)))?;
            if let Some(old) = self.functions.insert(meta.name.to_ascii_lowercase(), key) {
                let _ = self.lua.remove_registry_value(old);
            }
            metas.push(meta);
        }
        Ok(metas)
    }

    /// Forgets the functions with these names (a library replaced or deleted).
    pub fn remove_functions<'n>(&mut self, names: impl Iterator<Item = &'n [u8]>) {
        for name in names {
            if let Some(key) = self.functions.remove(&name.to_ascii_lowercase()) {
                let _ = self.lua.remove_registry_value(key);
            }
        }
    }

    /// Runs a full garbage collection.
    pub fn collect_garbage(&self) {
        let _ = self.lua.gc_collect();
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Writes the error a script raised, as Redis's `luaCallFunction` does.
fn write_error(out: &mut ReplyWriter<'_>, err: &Value, name: &str) {
    let Value::Table(t) = err else {
        let msg = match err {
            Value::String(s) => s.to_string_lossy(),
            Value::Error(e) => plain_message(e),
            _ => "execution failure".to_string(),
        };
        out.error(format!("ERR Error running script {name}, {}", truncate(&msg, 100)).as_bytes());
        return;
    };
    let mut text: Vec<u8> = Vec::new();
    match t.get::<Value>("err") {
        Ok(Value::String(s)) => text.extend_from_slice(crate::convert::c_string(&s.as_bytes())),
        Ok(Value::Integer(i)) => text.extend_from_slice(i.to_string().as_bytes()),
        Ok(Value::Number(n)) => text.extend_from_slice(lua_number(n).as_bytes()),
        _ => {}
    }
    let field = |k: &str| -> Option<Vec<u8>> {
        match t.get::<Value>(k).ok()? {
            Value::String(s) => Some(crate::convert::c_string(&s.as_bytes()).to_vec()),
            Value::Integer(i) => Some(i.to_string().into_bytes()),
            Value::Number(n) => Some(lua_number(n).into_bytes()),
            _ => None,
        }
    };
    if let (Some(source), Some(line)) = (field("source"), field("line")) {
        text.extend_from_slice(b" script: ");
        text.extend_from_slice(name.as_bytes());
        text.extend_from_slice(b", on ");
        text.extend_from_slice(&source);
        text.push(b':');
        text.extend_from_slice(&line);
        text.push(b'.');
    }
    out.error(&crate::convert::error_line(&text));
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_resp::Protocol;

    struct FakeHost;

    impl Host for FakeHost {
        fn call(
            &mut self,
            argv: &[&[u8]],
            _resp3: bool,
            reply: &mut Vec<u8>,
        ) -> Result<(), Vec<u8>> {
            match argv[0] {
                b"ping" => reply.extend_from_slice(b"+PONG\r\n"),
                b"get" => reply.extend_from_slice(b"$1\r\nv\r\n"),
                b"bad" => reply.extend_from_slice(b"-WRONGTYPE no\r\n"),
                _ => return Err(b"Unknown Redis command called from script".to_vec()),
            }
            Ok(())
        }

        fn acl_check(&mut self, _argv: &[&[u8]]) -> Option<bool> {
            Some(true)
        }
    }

    struct Never;

    impl Watchdog for Never {
        fn check(&self) -> Option<String> {
            None
        }
    }

    struct Always;

    impl Watchdog for Always {
        fn check(&self) -> Option<String> {
            Some("Script killed by user with SCRIPT KILL...".to_string())
        }
    }

    fn eval_with(vm: &mut Vm, body: &str, dog: Arc<dyn Watchdog>) -> String {
        let sha = crate::script::sha1hex(body.as_bytes());
        let start = crate::script::parse_shebang(body.as_bytes())
            .map(|s| s.code_start)
            .unwrap_or(0);
        if let Err(e) = vm.compile_script(&sha, body.as_bytes(), start) {
            return format!("-ERR {e}\r\n");
        }
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        let inv = Invocation {
            keys: &[b"k1"],
            args: &[b"a1", b"a2"],
            name: &sha,
        };
        vm.run_script(&sha, inv, &mut FakeHost, dog, &mut w)
            .expect("compiled");
        String::from_utf8_lossy(&out).replace(&sha, "SHA")
    }

    fn eval(vm: &mut Vm, body: &str) -> String {
        eval_with(vm, body, Arc::new(Never))
    }

    #[test]
    fn replies_and_errors_read_as_in_redis() {
        let mut vm = Vm::new(Kind::Eval, 0).expect("vm");
        let cases = [
            ("return 1", ":1\r\n"),
            ("return 3.99", ":3\r\n"),
            ("return {1,2,nil,3}", "*2\r\n:1\r\n:2\r\n"),
            ("return {ok='fine'}", "+fine\r\n"),
            ("return {err='bad'}", "-bad\r\n"),
            ("return true", ":1\r\n"),
            ("return false", "$-1\r\n"),
            ("return KEYS[1] .. ARGV[2]", "$4\r\nk1a2\r\n"),
            ("return redis.call('ping')", "+PONG\r\n"),
            ("return redis.call('get', 'x')", "$1\r\nv\r\n"),
            (
                "x = 1",
                "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
            ),
            (
                "return y",
                "-ERR user_script:1: Script attempted to access nonexistent global variable 'y' script: SHA, on @user_script:1.\r\n",
            ),
            (
                "return redis.call('nosuch')",
                "-ERR Unknown Redis command called from script script: SHA, on @user_script:1.\r\n",
            ),
            (
                "return redis.call('bad')",
                "-WRONGTYPE no script: SHA, on @user_script:1.\r\n",
            ),
            ("return redis.pcall('bad')", "-WRONGTYPE no\r\n"),
            (
                "return redis.call()",
                "-ERR Please specify at least one argument for this redis lib call script: SHA, on @user_script:1.\r\n",
            ),
            (
                "error('boom')",
                "-ERR user_script:1: boom script: SHA, on @user_script:1.\r\n",
            ),
            (
                "return {pcall(redis.call, 'nosuch')}",
                "*2\r\n$-1\r\n$44\r\nERR Unknown Redis command called from script\r\n",
            ),
            (
                "rawset(_G, 'x', 1)",
                "-ERR Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
            ),
            (
                "\n\nreturn bit.band('x')",
                "-ERR user_script:3: bad argument #1 to 'band' (number expected, got string) script: SHA, on @user_script:3.\r\n",
            ),
            ("return bit.tohex(255)", "$8\r\n000000ff\r\n"),
            (
                "return redis.sha1hex('')",
                "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n",
            ),
            ("return redis.error_reply('x')", "-ERR x\r\n"),
            (
                "return type(os)",
                "-ERR user_script:1: Script attempted to access nonexistent global variable 'os' script: SHA, on @user_script:1.\r\n",
            ),
            (
                "string.x = 1",
                "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
            ),
            (
                "getmetatable('').__index.upper = nil",
                "-ERR user_script:1: Attempt to modify a readonly table script: SHA, on @user_script:1.\r\n",
            ),
            ("return ('x'):upper()", "$1\r\nX\r\n"),
            (
                "return {select(2, loadstring(string.dump(function() end)))}",
                "*1\r\n$53\r\n[string \"\x1bLuaQ\"]:1: unexpected symbol near 'char(27)'\r\n",
            ),
            ("return loadstring('return 1 + 1')()", ":2\r\n"),
            (
                "loadstring('x = 1')()",
                "-ERR [string \"x = 1\"]:1: Attempt to modify a readonly table script: SHA, on x = 1:1.\r\n",
            ),
        ];
        let mut failures = Vec::new();
        for (script, want) in cases {
            let got = eval(&mut vm, script);
            if got != want {
                failures.push(format!("{script}\n  want {want:?}\n  got  {got:?}"));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn a_stopped_script_cannot_catch_the_stop() {
        let mut vm = Vm::new(Kind::Eval, 0).expect("vm");
        let got = eval_with(
            &mut vm,
            "while true do pcall(function() while true do end end) end",
            Arc::new(Always),
        );
        assert!(
            got.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
            "{got}"
        );
        // The interpreter is usable afterwards, at the normal pace.
        assert_eq!(eval(&mut vm, "return 2"), ":2\r\n");
    }

    #[test]
    fn memory_is_bounded() {
        let mut vm = Vm::new(Kind::Eval, 4 << 20).expect("vm");
        let got = eval(
            &mut vm,
            "local t = {} for i = 1, 1e7 do t[i] = i end return 1",
        );
        assert!(got.contains("not enough memory"), "{got}");
        assert_eq!(eval(&mut vm, "return 2"), ":2\r\n");
    }

    #[test]
    fn libraries_register_functions() {
        let mut vm = Vm::new(Kind::Function, 0).expect("vm");
        let code = b"\nredis.register_function{function_name='f', callback=function(keys, args) return {keys[1], args[1]} end, flags={'no-writes'}, description='d'}";
        let metas = vm.load_library(code, Arc::new(Never)).expect("loaded");
        assert_eq!(metas.len(), 1);
        assert_eq!(metas[0].flags, ScriptFlags::NO_WRITES);
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        let inv = Invocation {
            keys: &[b"k"],
            args: &[b"a"],
            name: "f",
        };
        vm.call_function(b"F", inv, &mut FakeHost, Arc::new(Never), &mut w)
            .expect("found");
        assert_eq!(out, b"*2\r\n$1\r\nk\r\n$1\r\na\r\n");
        assert_eq!(
            vm.load_library(b"\nlocal x = string", Arc::new(Never)),
            Err("Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'string'".to_string())
        );
        assert_eq!(
            vm.load_library(b"\nreturn 1", Arc::new(Never)),
            Err("No functions registered".to_string())
        );
    }
}
