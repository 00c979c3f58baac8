//! Redis's conversions between command replies and Lua values, both ways.
//!
//! A command run by `redis.call` replies in RESP (RESP2, or RESP3 after
//! `redis.setresp(3)`), and [`reply_to_lua`] turns those bytes into Lua values:
//! integers into numbers, bulk strings into strings, a null into `false` (RESP2) or
//! `nil` (RESP3), arrays into tables, a status into `{ok=...}`, an error into
//! `{err=...}`, and the RESP3 types into `{map=...}`, `{set=...}`, `{double=...}`,
//! `{big_number=...}`, `{verbatim_string=...}` or booleans.
//!
//! What a script returns goes the other way through [`lua_to_reply`], written for
//! the calling client's protocol: numbers are truncated to integers, an array stops
//! at its first `nil`, `{ok=...}` and `{err=...}` become a status and an error, and
//! `false` is a null unless the script asked for RESP3.
//!
//! Invariant: neither direction panics or recurses without bound, whatever the bytes
//! or the tables (a table may contain itself).

use mlua::{Lua, Table, Value};
use strata_resp::{Protocol, ReplyWriter};

/// How deep a returned value may nest before the rest is replaced by an error, as
/// Redis runs out of Lua stack ("reached lua stack limit"): Redis 7.0 writes tables
/// down to depth 7994 and fails on the next. (mlua's own reference stack runs out a
/// few levels earlier, which ends the reply the same way.)
const MAX_DEPTH: usize = 7994;

/// Turns an error reply's text into the `err` field of a Lua error table, as Redis's
/// `luaPushErrorBuff` does: the text after a leading `-`, its first word as the code
/// (`ERR` when it has none), surrounding CR/LF trimmed.
pub fn error_text(raw: &[u8]) -> Vec<u8> {
    let raw = c_string(raw);
    let (code, msg): (&[u8], &[u8]) = match raw.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&b| b == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", raw),
    };
    let msg = trim_crlf(msg);
    let mut out = Vec::with_capacity(code.len() + 1 + msg.len());
    out.extend_from_slice(code);
    out.push(b' ');
    out.extend_from_slice(msg);
    out
}

/// A Lua string as C code sees it (`lua_tostring`): up to its first NUL.
pub fn c_string(s: &[u8]) -> &[u8] {
    s.iter().position(|&b| b == 0).map_or(s, |end| &s[..end])
}

/// A status line as Redis writes a script's `{ok=...}`: up to the first NUL, CR
/// and LF turned into spaces.
pub fn status_line(s: &[u8]) -> Vec<u8> {
    c_string(s)
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

/// An error line as Redis writes a script's error, `addReplyErrorFormat("-%s")`:
/// CR and LF trimmed from the end (the leading '-' keeps the start from being
/// trimmed), the ones inside turned into spaces.
pub fn error_line(s: &[u8]) -> Vec<u8> {
    let trimmed = {
        let mut t = s;
        while let [rest @ .., b'\r' | b'\n'] = t {
            t = rest;
        }
        t
    };
    trimmed
        .iter()
        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
        .collect()
}

fn trim_crlf(mut s: &[u8]) -> &[u8] {
    while let [b'\r' | b'\n', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b'\r' | b'\n'] = s {
        s = rest;
    }
    s
}

/// Converts one complete reply to a Lua value; an error for bytes that are not one
/// (never produced by strata's own commands).
pub fn reply_to_lua(lua: &Lua, bytes: &[u8]) -> mlua::Result<Value> {
    let mut parser = Parser { lua, bytes, pos: 0 };
    parser.value(0)
}

struct Parser<'a> {
    lua: &'a Lua,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Parser<'a> {
    fn bad() -> mlua::Error {
        mlua::Error::runtime("unreadable command reply")
    }

    fn line(&mut self) -> mlua::Result<&'a [u8]> {
        let bytes = self.bytes;
        let rest = bytes.get(self.pos..).ok_or_else(Self::bad)?;
        let end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(Self::bad)?;
        self.pos += end + 2;
        Ok(&rest[..end])
    }

    fn int(&mut self) -> mlua::Result<i64> {
        let line = self.line()?;
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(Self::bad)
    }

    fn take(&mut self, n: usize) -> mlua::Result<&'a [u8]> {
        let bytes = self.bytes;
        let end = self.pos.checked_add(n).ok_or_else(Self::bad)?;
        let data = bytes.get(self.pos..end).ok_or_else(Self::bad)?;
        if bytes.get(end..end + 2) != Some(b"\r\n") {
            return Err(Self::bad());
        }
        self.pos = end + 2;
        Ok(data)
    }

    fn table_with(&self, key: &str, value: Value) -> mlua::Result<Value> {
        let t = self.lua.create_table()?;
        t.raw_set(key, value)?;
        Ok(Value::Table(t))
    }

    fn value(&mut self, depth: usize) -> mlua::Result<Value> {
        if depth > 64 {
            return Err(Self::bad());
        }
        let kind = *self.bytes.get(self.pos).ok_or_else(Self::bad)?;
        self.pos += 1;
        match kind {
            b':' => Ok(Value::Number(self.int()? as f64)),
            b'$' => {
                let n = self.int()?;
                if n < 0 {
                    return Ok(Value::Boolean(false));
                }
                let s = self.take(n as usize)?;
                Ok(Value::String(self.lua.create_string(s)?))
            }
            b'+' => {
                let s = self.line()?;
                let s = self.lua.create_string(s)?;
                self.table_with("ok", Value::String(s))
            }
            b'-' => {
                let mut raw = b"-".to_vec();
                raw.extend_from_slice(self.line()?);
                let t = self.lua.create_table()?;
                t.raw_set("err", self.lua.create_string(error_text(&raw))?)?;
                t.raw_set("ignore_error_stats_update", true)?;
                Ok(Value::Table(t))
            }
            b'*' => {
                let n = self.int()?;
                if n < 0 {
                    return Ok(Value::Boolean(false));
                }
                let t = self
                    .lua
                    .create_table_with_capacity(n.min(1 << 16) as usize, 0)?;
                for i in 1..=n {
                    let v = self.value(depth + 1)?;
                    t.raw_set(i, v)?;
                }
                Ok(Value::Table(t))
            }
            b'%' => {
                let n = self.int()?;
                let inner = self.lua.create_table()?;
                for _ in 0..n.max(0) {
                    let k = self.value(depth + 1)?;
                    let v = self.value(depth + 1)?;
                    if !k.is_nil() {
                        inner.raw_set(k, v)?;
                    }
                }
                self.table_with("map", Value::Table(inner))
            }
            b'~' => {
                let n = self.int()?;
                let inner = self.lua.create_table()?;
                for _ in 0..n.max(0) {
                    let k = self.value(depth + 1)?;
                    if !k.is_nil() {
                        inner.raw_set(k, true)?;
                    }
                }
                self.table_with("set", Value::Table(inner))
            }
            b'_' => {
                self.line()?;
                Ok(Value::Nil)
            }
            b'#' => {
                let line = self.line()?;
                Ok(Value::Boolean(line == b"t"))
            }
            b',' => {
                let line = self.line()?;
                let d = match line {
                    b"inf" => f64::INFINITY,
                    b"-inf" => f64::NEG_INFINITY,
                    b"nan" | b"-nan" => f64::NAN,
                    _ => std::str::from_utf8(line)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(Self::bad)?,
                };
                self.table_with("double", Value::Number(d))
            }
            b'(' => {
                let s = self.line()?.to_vec();
                let s = self.lua.create_string(&s)?;
                self.table_with("big_number", Value::String(s))
            }
            b'=' => {
                let n = self.int()?;
                let data = self.take(n.max(0) as usize)?;
                let (format, text) = if data.len() >= 4 {
                    (&data[..3], &data[4..])
                } else {
                    (&data[..0], data)
                };
                let inner = self.lua.create_table()?;
                inner.raw_set("string", self.lua.create_string(text)?)?;
                inner.raw_set("format", self.lua.create_string(format)?)?;
                self.table_with("verbatim_string", Value::Table(inner))
            }
            b'|' => {
                // Attributes are read and dropped; the value follows them.
                let n = self.int()?;
                for _ in 0..n.max(0) * 2 {
                    self.value(depth + 1)?;
                }
                self.value(depth)
            }
            _ => Err(Self::bad()),
        }
    }
}

/// C's cast of a double to `long long` on x86-64: truncation, and the "integer
/// indefinite" value for NaN and anything out of range.
pub fn c_double_to_i64(d: f64) -> i64 {
    if d.is_nan() || !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// Writes a script's return value as a reply, in the client's protocol. `script_resp3`
/// is whether the script switched to RESP3 (`redis.setresp(3)`), which changes how
/// booleans are sent.
pub fn lua_to_reply(out: &mut ReplyWriter<'_>, value: &Value, script_resp3: bool) {
    write_value(out, value, script_resp3, 0);
}

fn write_value(out: &mut ReplyWriter<'_>, value: &Value, resp3: bool, depth: usize) {
    if depth > MAX_DEPTH {
        out.error(b"ERR reached lua stack limit");
        return;
    }
    match value {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if resp3 {
                out.boolean(*b);
            } else if *b {
                out.integer(1);
            } else {
                out.null();
            }
        }
        Value::Integer(i) => out.integer(*i),
        Value::Number(n) => out.integer(c_double_to_i64(*n)),
        Value::Table(t) => write_table(out, t, resp3, depth),
        _ => out.null(),
    }
}

/// A raw field of `t` if it is a string (numbers do not count, as `lua_type` says).
fn string_field(t: &Table, key: &str) -> Option<Vec<u8>> {
    match t.raw_get::<Value>(key).ok()? {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn write_table(out: &mut ReplyWriter<'_>, t: &Table, resp3: bool, depth: usize) {
    if let Some(err) = string_field(t, "err") {
        out.error(&error_line(c_string(&err)));
        return;
    }
    if let Some(ok) = string_field(t, "ok") {
        out.simple(&status_line(&ok));
        return;
    }
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(d)) => {
            out.double(d);
            return;
        }
        Ok(Value::Integer(i)) => {
            out.double(i as f64);
            return;
        }
        _ => {}
    }
    if let Some(big) = string_field(t, "big_number") {
        out.big_number(&big);
        return;
    }
    if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string")
        && let (Some(format), Some(text)) = (string_field(&v, "format"), string_field(&v, "string"))
    {
        let mut f = [0u8; 3];
        for (slot, b) in f.iter_mut().zip(format.iter()) {
            *slot = *b;
        }
        out.verbatim(&f, &text);
        return;
    }
    if let Ok(Value::Table(map)) = t.raw_get::<Value>("map") {
        let header = out.deferred(strata_resp::reply::Aggregate::Map);
        let mut n = 0;
        for (k, v) in map.pairs::<Value, Value>().flatten() {
            write_value(out, &k, resp3, depth + 1);
            write_value(out, &v, resp3, depth + 1);
            n += 1;
        }
        out.set_deferred_len(header, n);
        return;
    }
    if let Ok(Value::Table(set)) = t.raw_get::<Value>("set") {
        let header = out.deferred(strata_resp::reply::Aggregate::Set);
        let mut n = 0;
        for (k, _) in set.pairs::<Value, Value>().flatten() {
            write_value(out, &k, resp3, depth + 1);
            n += 1;
        }
        out.set_deferred_len(header, n);
        return;
    }
    let header = out.deferred(strata_resp::reply::Aggregate::Array);
    let mut n = 0;
    loop {
        // Reading fails only when the interpreter's stack is exhausted by the
        // nesting, which is where Redis stops too.
        let v = match t.raw_get::<Value>(n + 1) {
            Ok(v) => v,
            Err(_) => {
                out.error(b"ERR reached lua stack limit");
                n += 1;
                break;
            }
        };
        if v.is_nil() {
            break;
        }
        write_value(out, &v, resp3, depth + 1);
        n += 1;
    }
    out.set_deferred_len(header, n);
}

/// The protocol a script's `redis.call` replies come in.
pub fn script_protocol(resp3: bool) -> Protocol {
    if resp3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_lines_keep_their_start() {
        assert_eq!(error_line(b"ERR x\r\n"), b"ERR x");
        assert_eq!(error_line(b"\n co"), b"  co");
        assert_eq!(error_line(b"a\r\nb"), b"a  b");
        assert_eq!(error_line(b"\r\n"), b"");
    }

    #[test]
    fn error_texts_get_a_code() {
        assert_eq!(error_text(b"-ERR x"), b"ERR x");
        assert_eq!(error_text(b"x"), b"ERR x");
        assert_eq!(error_text(b"-x"), b"ERR x");
        assert_eq!(error_text(b"-WRONGTYPE bad\r\n"), b"WRONGTYPE bad");
    }

    #[test]
    fn casts_like_c() {
        assert_eq!(c_double_to_i64(3.99), 3);
        assert_eq!(c_double_to_i64(-3.99), -3);
        assert_eq!(c_double_to_i64(f64::NAN), i64::MIN);
        assert_eq!(c_double_to_i64(1e19), i64::MIN);
        assert_eq!(c_double_to_i64(-1e19), i64::MIN);
    }

    #[test]
    fn replies_become_lua_values() {
        let lua = Lua::new();
        let v = reply_to_lua(&lua, b"*3\r\n:1\r\n$-1\r\n+OK\r\n").expect("parsed");
        let Value::Table(t) = v else {
            panic!("not a table")
        };
        assert_eq!(t.raw_get::<i64>(1).expect("number"), 1);
        assert!(!t.raw_get::<bool>(2).expect("false"));
        let ok: Table = t.raw_get(3).expect("status table");
        assert_eq!(ok.raw_get::<String>("ok").expect("ok"), "OK");
        assert!(reply_to_lua(&lua, b"*2\r\n:1\r\n").is_err());
        assert!(reply_to_lua(&lua, b"$5\r\nab").is_err());
        assert!(reply_to_lua(&lua, b"?").is_err());
    }
}
