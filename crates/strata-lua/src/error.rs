//! Errors raised by the functions implemented in Rust, carried through Lua the way
//! Redis's C functions raise theirs.
//!
//! mlua raises a Rust function's error as an opaque value; the sandbox turns it back
//! ([`unwrap_error`]) wherever a script could see it (`pcall`, `xpcall`,
//! `coroutine.resume`, the error handler), so that scripts catch the string or the
//! `{err=...}` table Redis would give them.

use mlua::{Lua, Value};

/// What a native function raised.
#[derive(Debug)]
pub enum Raised {
    /// A string error, already prefixed with the caller's position as Lua's
    /// `luaL_error` does (`user_script:1: bad argument #1 to 'band' ...`).
    Message(String),
    /// A Redis error table: `{err = <text>}`.
    Table(Vec<u8>),
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Raised::Message(m) => f.write_str(m),
            Raised::Table(t) => f.write_str(&String::from_utf8_lossy(t)),
        }
    }
}

impl std::error::Error for Raised {}

/// The stop a watchdog asked for (SCRIPT KILL, a FUNCTION LOAD timeout).
#[derive(Debug)]
pub struct Stopped(pub String);

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Stopped {}

/// The position of the Lua code that called the running native function, as
/// `luaL_where(L, 1)` gives it (`user_script:3: `), or nothing.
pub fn caller_position(lua: &Lua) -> String {
    lua.inspect_stack(1, |d| {
        let line = d.current_line()?;
        let src = d.source().short_src.map(|s| s.into_owned())?;
        Some(format!("{src}:{line}: "))
    })
    .flatten()
    .unwrap_or_default()
}

/// A string error from a native function, positioned at its caller.
pub fn raise(lua: &Lua, msg: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::external(Raised::Message(format!("{}{msg}", caller_position(lua))))
}

/// A string error without a position (Lua's own errors raised in C).
pub fn raise_plain(msg: impl std::fmt::Display) -> mlua::Error {
    mlua::Error::external(Raised::Message(msg.to_string()))
}

/// A Redis error table (`{err = text}`), as `luaPushError` + `luaError` raise it.
pub fn raise_table(text: impl Into<Vec<u8>>) -> mlua::Error {
    mlua::Error::external(Raised::Table(text.into()))
}

/// An mlua error as a one-line message, without mlua's wrapping.
pub fn plain_message(e: &mlua::Error) -> String {
    if let Some(s) = e.downcast_ref::<Stopped>() {
        return s.0.clone();
    }
    if let Some(r) = e.downcast_ref::<Raised>() {
        return r.to_string();
    }
    match e {
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::CallbackError { cause, .. } => plain_message(cause),
        other => other.to_string(),
    }
}

/// What a script sees of an error: a raised native error becomes the string or the
/// `{err=...}` table it stands for; anything else is left as it is.
pub fn unwrap_error(lua: &Lua, v: Value) -> mlua::Result<Value> {
    let Value::Error(e) = &v else {
        return Ok(v);
    };
    if let Some(s) = e.downcast_ref::<Stopped>() {
        let t = lua.create_table()?;
        t.raw_set("err", format!("ERR {}", s.0))?;
        return Ok(Value::Table(t));
    }
    match e.downcast_ref::<Raised>() {
        Some(Raised::Message(m)) => Ok(Value::String(lua.create_string(m)?)),
        Some(Raised::Table(text)) => {
            let t = lua.create_table()?;
            t.raw_set("err", lua.create_string(text)?)?;
            Ok(Value::Table(t))
        }
        None => Ok(Value::String(lua.create_string(plain_message(e))?)),
    }
}
