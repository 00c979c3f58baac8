//! The `cjson` library as Redis ships it (lua-cjson 2.1.0 with its default settings):
//! `cjson.encode`, `cjson.decode` and `cjson.null`, with the same output and error
//! texts.
//!
//! Encoding: a table whose keys are all positive integers is an array (holes become
//! `null`) unless it is excessively sparse (the largest index over twice the count
//! and over 10), which is an error; any other table, and the empty table, is an
//! object. Numbers print as `%.14g`; NaN and infinities are errors. Strings escape
//! `"`, `\`, `/`, control characters and DEL. Nesting beyond 1000 is an error.
//!
//! Decoding: JSON as lua-cjson reads it with `decode_invalid_numbers` on (numbers are
//! whatever C's `strtod` accepts, so hex, `inf` and `nan` pass), `null` as the
//! `cjson.null` light userdata, nesting bounded at 1000; errors name the token found
//! (`Expected value but found T_END at character 1`).

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

use crate::api::typename;
use crate::error::raise;
use crate::fmt::fmt_g;

const MAX_DEPTH: usize = 1000;
const SPARSE_RATIO: usize = 2;
const SPARSE_SAFE: usize = 10;

/// The library's table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("encode", lua.create_function(encode)?)?;
    t.raw_set("decode", lua.create_function(decode)?)?;
    t.raw_set("null", null())?;
    t.raw_set("_NAME", "cjson")?;
    t.raw_set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn encode(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    if args.len() != 1 {
        return Err(raise(
            lua,
            "bad argument #1 to 'encode' (expected 1 argument)",
        ));
    }
    let mut out = Vec::new();
    append(lua, &args[0], 0, &mut out)?;
    lua.create_string(&out)
}

fn exception(lua: &Lua, v: &Value, reason: &str) -> mlua::Error {
    raise(
        lua,
        format!("Cannot serialise {}: {reason}", typename(Some(v))),
    )
}

fn number_of(v: &Value) -> Option<f64> {
    match v {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        _ => None,
    }
}

fn append_number(lua: &Lua, v: &Value, n: f64, out: &mut Vec<u8>) -> mlua::Result<()> {
    if n.is_nan() || n.is_infinite() {
        return Err(exception(lua, v, "must not be NaN or Inf"));
    }
    out.extend_from_slice(fmt_g(n, 14).as_bytes());
    Ok(())
}

fn append_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 || c == 0x7f => {
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// lua-cjson's `lua_array_length`: the array length, or `None` for an object.
fn array_length(lua: &Lua, t: &Table, v: &Value) -> mlua::Result<Option<usize>> {
    let (mut max, mut items) = (0usize, 0usize);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        match number_of(&k) {
            Some(n) if n != 0.0 && n.floor() == n && n >= 1.0 => {
                let n = n as usize;
                max = max.max(n);
                items += 1;
            }
            _ => return Ok(None),
        }
    }
    if max > items * SPARSE_RATIO && max > SPARSE_SAFE {
        return Err(exception(lua, v, "excessively sparse array"));
    }
    Ok(Some(max))
}

fn append(lua: &Lua, v: &Value, depth: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => append_string(&s.as_bytes(), out),
        Value::Integer(_) | Value::Number(_) => {
            append_number(lua, v, number_of(v).unwrap_or(0.0), out)?
        }
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > MAX_DEPTH {
                return Err(raise(
                    lua,
                    format!("Cannot serialise, excessive nesting ({depth})"),
                ));
            }
            match array_length(lua, t, v)? {
                Some(len) if len > 0 => {
                    out.push(b'[');
                    for i in 1..=len {
                        if i > 1 {
                            out.push(b',');
                        }
                        let item: Value = t.raw_get(i)?;
                        append(lua, &item, depth, out)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.clone().pairs::<Value, Value>() {
                        let (k, item) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &k {
                            Value::Integer(_) | Value::Number(_) => {
                                out.push(b'"');
                                append_number(lua, &k, number_of(&k).unwrap_or(0.0), out)?;
                                out.extend_from_slice(b"\":");
                            }
                            Value::String(s) => {
                                append_string(&s.as_bytes(), out);
                                out.push(b':');
                            }
                            _ => {
                                return Err(exception(
                                    lua,
                                    &k,
                                    "table key must be a number or string",
                                ));
                            }
                        }
                        append(lua, &item, depth, out)?;
                    }
                    out.push(b'}');
                }
            }
        }
        _ => return Err(exception(lua, v, "type not supported")),
    }
    Ok(())
}

/// A token, as lua-cjson names them in errors.
#[derive(Clone, Debug, PartialEq)]
enum Token {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Token {
    fn name(&self) -> &'static str {
        match self {
            Token::ObjBegin => "T_OBJ_BEGIN",
            Token::ObjEnd => "T_OBJ_END",
            Token::ArrBegin => "T_ARR_BEGIN",
            Token::ArrEnd => "T_ARR_END",
            Token::Str(_) => "T_STRING",
            Token::Num(_) => "T_NUMBER",
            Token::Bool(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(e) => e,
        }
    }
}

struct Parser<'a, 'l> {
    lua: &'l Lua,
    data: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_, '_> {
    /// The byte at `i`; the text ends at its first NUL, as C's string does.
    fn at(&self, i: usize) -> u8 {
        self.data.get(i).copied().unwrap_or(0)
    }

    /// The next token and the 0-based index where it starts.
    fn next(&mut self) -> (Token, usize) {
        while matches!(self.at(self.pos), b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
        let start = self.pos;
        let ch = self.at(self.pos);
        let single = match ch {
            b'{' => Some(Token::ObjBegin),
            b'}' => Some(Token::ObjEnd),
            b'[' => Some(Token::ArrBegin),
            b']' => Some(Token::ArrEnd),
            b':' => Some(Token::Colon),
            b',' => Some(Token::Comma),
            0 => return (Token::End, start),
            _ => None,
        };
        if let Some(t) = single {
            self.pos += 1;
            return (t, start);
        }
        let rest = &self.data[self.pos.min(self.data.len())..];
        match ch {
            b'"' => self.string(start),
            b'-' | b'0'..=b'9' => self.number(start),
            b't' if rest.starts_with(b"true") => {
                self.pos += 4;
                (Token::Bool(true), start)
            }
            b'f' if rest.starts_with(b"false") => {
                self.pos += 5;
                (Token::Bool(false), start)
            }
            b'n' if rest.starts_with(b"null") => {
                self.pos += 4;
                (Token::Null, start)
            }
            b'i' | b'I' | b'n' | b'N' if is_inf_or_nan(rest) => self.number(start),
            _ => (Token::Error("invalid token"), start),
        }
    }

    fn number(&mut self, start: usize) -> (Token, usize) {
        let end = self.data[start..]
            .iter()
            .position(|&b| b == 0)
            .map_or(self.data.len(), |p| start + p);
        match strtod(&self.data[start..end]) {
            Some((n, len)) => {
                self.pos += len;
                (Token::Num(n), start)
            }
            None => (Token::Error("invalid number"), self.pos),
        }
    }

    fn string(&mut self, start: usize) -> (Token, usize) {
        self.pos += 1;
        let mut s = Vec::new();
        loop {
            let ch = self.at(self.pos);
            if ch == b'"' {
                break;
            }
            if ch == 0 {
                return (Token::Error("unexpected end of string"), self.pos);
            }
            if ch == b'\\' {
                let esc = match self.at(self.pos + 1) {
                    b'"' => b'"',
                    b'\\' => b'\\',
                    b'/' => b'/',
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'u' => {
                        if self.unicode_escape(&mut s) {
                            continue;
                        }
                        return (Token::Error("invalid unicode escape code"), self.pos);
                    }
                    _ => return (Token::Error("invalid escape code"), self.pos),
                };
                s.push(esc);
                self.pos += 2;
                continue;
            }
            s.push(ch);
            self.pos += 1;
        }
        self.pos += 1;
        (Token::Str(s), start)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for i in 0..4 {
            let d = (self.at(at + i) as char).to_digit(16)?;
            v = v * 16 + d;
        }
        Some(v)
    }

    fn unicode_escape(&mut self, s: &mut Vec<u8>) -> bool {
        let Some(mut cp) = self.hex4(self.pos + 2) else {
            return false;
        };
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            if cp & 0x400 != 0 {
                return false;
            }
            if self.at(self.pos + 6) != b'\\' || self.at(self.pos + 7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(self.pos + 8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        utf8(cp, s);
        self.pos += len;
        true
    }

    fn error(&self, expected: &str, token: &Token, index: usize) -> mlua::Error {
        raise(
            self.lua,
            format!(
                "Expected {expected} but found {} at character {}",
                token.name(),
                index + 1
            ),
        )
    }

    fn descend(&mut self) -> mlua::Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(raise(
                self.lua,
                format!(
                    "Found too many nested data structures ({}) at character {}",
                    self.depth, self.pos
                ),
            ));
        }
        Ok(())
    }

    fn value(&mut self, token: Token, index: usize) -> mlua::Result<Value> {
        Ok(match token {
            Token::Str(s) => Value::String(self.lua.create_string(&s)?),
            Token::Num(n) => Value::Number(n),
            Token::Bool(b) => Value::Boolean(b),
            Token::Null => null(),
            Token::ObjBegin => self.object()?,
            Token::ArrBegin => self.array()?,
            other => return Err(self.error("value", &other, index)),
        })
    }

    fn object(&mut self) -> mlua::Result<Value> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let (mut token, mut index) = self.next();
        if token == Token::ObjEnd {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        loop {
            let Token::Str(key) = token else {
                return Err(self.error("object key string", &token, index));
            };
            let (colon, ci) = self.next();
            if colon != Token::Colon {
                return Err(self.error("colon", &colon, ci));
            }
            let (vt, vi) = self.next();
            let v = self.value(vt, vi)?;
            t.raw_set(self.lua.create_string(&key)?, v)?;
            let (after, ai) = self.next();
            if after == Token::ObjEnd {
                self.depth -= 1;
                return Ok(Value::Table(t));
            }
            if after != Token::Comma {
                return Err(self.error("comma or object end", &after, ai));
            }
            (token, index) = self.next();
        }
    }

    fn array(&mut self) -> mlua::Result<Value> {
        self.descend()?;
        let t = self.lua.create_table()?;
        let (mut token, mut index) = self.next();
        if token == Token::ArrEnd {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        let mut i = 1;
        loop {
            let v = self.value(token, index)?;
            t.raw_set(i, v)?;
            i += 1;
            let (after, ai) = self.next();
            if after == Token::ArrEnd {
                self.depth -= 1;
                return Ok(Value::Table(t));
            }
            if after != Token::Comma {
                return Err(self.error("comma or array end", &after, ai));
            }
            (token, index) = self.next();
        }
    }
}

fn is_inf_or_nan(s: &[u8]) -> bool {
    s.len() >= 3 && (s[..3].eq_ignore_ascii_case(b"inf") || s[..3].eq_ignore_ascii_case(b"nan"))
}

fn utf8(cp: u32, out: &mut Vec<u8>) {
    match char::from_u32(cp) {
        Some(c) => {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
        // Lone low surrogates are written as their 3-byte form, as lua-cjson does.
        None => out.extend_from_slice(&[
            0xE0 | (cp >> 12) as u8,
            0x80 | ((cp >> 6) & 0x3F) as u8,
            0x80 | (cp & 0x3F) as u8,
        ]),
    }
}

/// C's `strtod` on the start of `s`: the value and how many bytes it read, or
/// `None` if no number starts there.
pub fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let mut i = 0;
    let neg = match s.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let rest = &s[i..];
    let sign = if neg { -1.0 } else { 1.0 };
    if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"inf") {
        let len = if rest.len() >= 8 && rest[..8].eq_ignore_ascii_case(b"infinity") {
            8
        } else {
            3
        };
        return Some((sign * f64::INFINITY, i + len));
    }
    if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"nan") {
        let mut len = 3;
        if rest.get(3) == Some(&b'(')
            && let Some(close) = rest[4..]
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))
            && rest[4 + close] == b')'
        {
            len = 4 + close + 1;
        }
        return Some((f64::NAN, i + len));
    }
    if rest.len() >= 2 && rest[0] == b'0' && (rest[1] | 0x20) == b'x' {
        if let Some((v, len)) = hex_float(&rest[2..]) {
            return Some((sign * v, i + 2 + len));
        }
        return Some((sign * 0.0, i + 1));
    }
    let mut j = 0;
    let digits = |j: &mut usize| {
        let start = *j;
        while rest.get(*j).is_some_and(u8::is_ascii_digit) {
            *j += 1;
        }
        *j - start
    };
    let int_digits = digits(&mut j);
    let mut frac_digits = 0;
    if rest.get(j) == Some(&b'.') {
        let mut k = j + 1;
        frac_digits = digits(&mut k);
        if int_digits + frac_digits > 0 {
            j = k;
        }
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(rest.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(rest.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        if digits(&mut k) > 0 {
            j = k;
        }
    }
    let text = std::str::from_utf8(&rest[..j]).ok()?;
    let text = text.strip_suffix('.').unwrap_or(text);
    let text = if text.starts_with('.') {
        format!("0{text}")
    } else {
        text.to_string()
    };
    let v: f64 = text.parse().ok()?;
    Some((sign * v, i + j))
}

/// The hexadecimal digits (with an optional fraction and `p` exponent) after `0x`.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let mut j = 0;
    let mut v = 0f64;
    let mut any = false;
    while let Some(d) = s.get(j).and_then(|&b| (b as char).to_digit(16)) {
        v = v * 16.0 + f64::from(d);
        j += 1;
        any = true;
    }
    if s.get(j) == Some(&b'.') {
        let mut k = j + 1;
        let mut scale = 1.0 / 16.0;
        let mut frac = false;
        while let Some(d) = s.get(k).and_then(|&b| (b as char).to_digit(16)) {
            v += f64::from(d) * scale;
            scale /= 16.0;
            k += 1;
            frac = true;
        }
        if any || frac {
            j = k;
            any = true;
        }
    }
    if !any {
        return None;
    }
    if matches!(s.get(j), Some(b'p' | b'P')) {
        let mut k = j + 1;
        let neg = match s.get(k) {
            Some(b'-') => {
                k += 1;
                true
            }
            Some(b'+') => {
                k += 1;
                false
            }
            _ => false,
        };
        let start = k;
        let mut e: i32 = 0;
        while let Some(d) = s.get(k).filter(|b| b.is_ascii_digit()) {
            e = e.saturating_mul(10).saturating_add(i32::from(d - b'0'));
            k += 1;
        }
        if k > start {
            v *= 2f64.powi(if neg { -e } else { e });
            j = k;
        }
    }
    Some((v, j))
}

fn decode(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    if args.len() != 1 {
        return Err(raise(
            lua,
            "bad argument #1 to 'decode' (expected 1 argument)",
        ));
    }
    let text: Vec<u8> = match &args[0] {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Integer(i) => i.to_string().into_bytes(),
        Value::Number(n) => crate::fmt::lua_number(*n).into_bytes(),
        other => {
            return Err(raise(
                lua,
                format!(
                    "bad argument #1 to 'decode' (string expected, got {})",
                    typename(Some(other))
                ),
            ));
        }
    };
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err(raise(lua, "JSON parser does not support UTF-16 or UTF-32"));
    }
    let mut p = Parser {
        lua,
        data: &text,
        pos: 0,
        depth: 0,
    };
    let (token, index) = p.next();
    let v = p.value(token, index)?;
    let (end, ei) = p.next();
    if end != Token::End {
        return Err(p.error("the end", &end, ei));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtod_reads_like_c() {
        assert_eq!(strtod(b"12.5x"), Some((12.5, 4)));
        assert_eq!(strtod(b"-1e3,"), Some((-1000.0, 4)));
        assert_eq!(strtod(b"1e"), Some((1.0, 1)));
        assert_eq!(strtod(b"0x10"), Some((16.0, 4)));
        assert_eq!(strtod(b"0x"), Some((0.0, 1)));
        assert_eq!(strtod(b".5"), Some((0.5, 2)));
        assert_eq!(strtod(b"5."), Some((5.0, 2)));
        assert_eq!(strtod(b"-"), None);
        assert_eq!(strtod(b"inf"), Some((f64::INFINITY, 3)));
        assert!(strtod(b"nan").is_some_and(|(v, n)| v.is_nan() && n == 3));
    }
}
