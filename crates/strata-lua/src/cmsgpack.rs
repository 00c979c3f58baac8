//! The `cmsgpack` library as Redis ships it (lua-cmsgpack 0.4.0): `pack`, `unpack`,
//! `unpack_one` and `unpack_limit`, byte for byte.
//!
//! Packing: integral numbers in the smallest integer form, other numbers as a
//! float when a float holds them exactly and as a double otherwise, strings as
//! str (fixstr, str8, str16, str32), a table whose keys are exactly 1..n as an
//! array and any other as a map, nil and anything else as nil; tables nested 16 deep
//! are packed as nil. Unpacking reads the same forms (and arrays and maps of any
//! length form).

use mlua::{Lua, MultiValue, Table, Value};

use crate::api::typename;
use crate::error::raise;

const MAX_NESTING: usize = 16;

/// The library's table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("unpack_one", lua.create_function(unpack_one)?)?;
    t.raw_set("unpack_limit", lua.create_function(unpack_limit)?)?;
    t.raw_set("_NAME", "cmsgpack")?;
    t.raw_set("_VERSION", "lua-cmsgpack 0.4.0")?;
    t.raw_set(
        "_COPYRIGHT",
        "Copyright (C) 2012, Salvatore Sanfilippo; Copyright (C) 2014, Matt Stancliff",
    )?;
    t.raw_set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    Ok(t)
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    if args.is_empty() {
        return Err(raise(
            lua,
            "bad argument #0 to 'pack' (MessagePack pack needs input.)",
        ));
    }
    let mut out = Vec::new();
    for v in args.iter() {
        encode(v, 0, &mut out)?;
    }
    lua.create_string(&out)
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    // `(int64_t)n == n` in C; the cast saturates here, which only matters at the
    // edges where C's result is undefined anyway.
    if !n.is_infinite() && (n as i64) as f64 == n {
        encode_int(n as i64, out);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn header(len: usize, fix: u8, b16: u8, b32: u8, out: &mut Vec<u8>) {
    if len < 16 {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// lua-cmsgpack's `table_is_an_array`: the keys are exactly 1..n.
fn is_array(t: &Table) -> mlua::Result<bool> {
    let (mut count, mut max) = (0i64, 0i64);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || (n as i32) as f64 != n {
            return Ok(false);
        }
        max = max.max(n as i64);
        count += 1;
    }
    Ok(max == count)
}

fn encode(v: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::Table(t) if level < MAX_NESTING => {
            if is_array(t)? {
                let len = t.raw_len();
                header(len, 0x90, 0xdc, 0xdd, out);
                for i in 1..=len {
                    let item: Value = t.raw_get(i)?;
                    encode(&item, level + 1, out)?;
                }
            } else {
                let len = t.clone().pairs::<Value, Value>().count();
                header(len, 0x80, 0xde, 0xdf, out);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, item) = pair?;
                    encode(&k, level + 1, out)?;
                    encode(&item, level + 1, out)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

/// How deep unpacked arrays and maps may nest (Redis runs out of Lua stack
/// around there; here the bound keeps the recursion's own stack small).
const MAX_UNPACK_DEPTH: usize = 1000;

/// Why decoding stopped.
enum Bad {
    Eof,
    Format,
    Deep,
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Bad> {
        if self.left() < n {
            return Err(Bad::Eof);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Bad> {
        let s = self.take(N)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn value(&mut self, lua: &Lua) -> Result<mlua::Result<Value>, Bad> {
        let [b] = self.array::<1>()?;
        let num = |n: f64| Ok(Ok(Value::Number(n)));
        match b {
            0x00..=0x7f => num(f64::from(b)),
            0xe0..=0xff => num(f64::from(b as i8)),
            0xcc => num(f64::from(self.array::<1>()?[0])),
            0xcd => num(f64::from(u16::from_be_bytes(self.array()?))),
            0xce => num(f64::from(u32::from_be_bytes(self.array()?))),
            0xcf => num(u64::from_be_bytes(self.array()?) as f64),
            0xd0 => num(f64::from(self.array::<1>()?[0] as i8)),
            0xd1 => num(f64::from(i16::from_be_bytes(self.array()?))),
            0xd2 => num(f64::from(i32::from_be_bytes(self.array()?))),
            0xd3 => num(i64::from_be_bytes(self.array()?) as f64),
            0xc0 => Ok(Ok(Value::Nil)),
            0xc2 => Ok(Ok(Value::Boolean(false))),
            0xc3 => Ok(Ok(Value::Boolean(true))),
            0xca => num(f64::from(f32::from_be_bytes(self.array()?))),
            0xcb => num(f64::from_be_bytes(self.array()?)),
            0xa0..=0xbf => self.string(lua, usize::from(b & 0x1f)),
            0xd9 => {
                let n = usize::from(self.array::<1>()?[0]);
                self.string(lua, n)
            }
            0xda => {
                let n = usize::from(u16::from_be_bytes(self.array()?));
                self.string(lua, n)
            }
            0xdb => {
                let n = u32::from_be_bytes(self.array()?) as usize;
                self.string(lua, n)
            }
            0x90..=0x9f => self.list(lua, usize::from(b & 0x0f)),
            0xdc => {
                let n = usize::from(u16::from_be_bytes(self.array()?));
                self.list(lua, n)
            }
            0xdd => {
                let n = u32::from_be_bytes(self.array()?) as usize;
                self.list(lua, n)
            }
            0x80..=0x8f => self.map(lua, usize::from(b & 0x0f)),
            0xde => {
                let n = usize::from(u16::from_be_bytes(self.array()?));
                self.map(lua, n)
            }
            0xdf => {
                let n = u32::from_be_bytes(self.array()?) as usize;
                self.map(lua, n)
            }
            _ => Err(Bad::Format),
        }
    }

    fn string(&mut self, lua: &Lua, n: usize) -> Result<mlua::Result<Value>, Bad> {
        let s = self.take(n)?;
        Ok(lua.create_string(s).map(Value::String))
    }

    fn list(&mut self, lua: &Lua, n: usize) -> Result<mlua::Result<Value>, Bad> {
        self.depth += 1;
        if self.depth > MAX_UNPACK_DEPTH {
            return Err(Bad::Deep);
        }
        let t = match lua.create_table() {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        for i in 1..=n {
            let v = match self.value(lua)? {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            };
            if let Err(e) = t.raw_set(i, v) {
                return Ok(Err(e));
            }
        }
        self.depth -= 1;
        Ok(Ok(Value::Table(t)))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> Result<mlua::Result<Value>, Bad> {
        self.depth += 1;
        if self.depth > MAX_UNPACK_DEPTH {
            return Err(Bad::Deep);
        }
        let t = match lua.create_table() {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        for _ in 0..n {
            let k = match self.value(lua)? {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            };
            let v = match self.value(lua)? {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            };
            // Lua refuses nil (and NaN) keys; lua-cmsgpack would raise too.
            if let Err(e) = t.raw_set(k, v) {
                return Ok(Err(e));
            }
        }
        self.depth -= 1;
        Ok(Ok(Value::Table(t)))
    }
}

fn unpack_full(lua: &Lua, data: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(raise(
            lua,
            format!(
                "Invalid request to unpack with offset of {offset} and limit of {}.",
                data.len()
            ),
        ));
    }
    if offset as usize > data.len() {
        return Err(raise(
            lua,
            format!(
                "Start offset {offset} greater than input length {}.",
                data.len()
            ),
        ));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut c = Cursor {
        data,
        pos: offset as usize,
        depth: 0,
    };
    let mut values = Vec::new();
    let mut count = 0;
    while c.left() > 0 && count < limit {
        match c.value(lua) {
            Ok(v) => values.push(v?),
            Err(Bad::Eof) => return Err(raise(lua, "Missing bytes in input.")),
            Err(Bad::Format) => return Err(raise(lua, "Bad data format in input.")),
            Err(Bad::Deep) => {
                return Err(raise(
                    lua,
                    "stack overflow (in function mp_decode_to_lua_array)",
                ));
            }
        }
        count += 1;
    }
    if !decode_all {
        let next = if c.left() == 0 { -1 } else { c.pos as i64 };
        values.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(values))
}

fn check_string(lua: &Lua, args: &MultiValue, fname: &str) -> mlua::Result<Vec<u8>> {
    match args.front() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(Value::Integer(i)) => Ok(i.to_string().into_bytes()),
        Some(Value::Number(n)) => Ok(crate::fmt::lua_number(*n).into_bytes()),
        other => Err(raise(
            lua,
            format!(
                "bad argument #1 to '{fname}' (string expected, got {})",
                typename(other)
            ),
        )),
    }
}

fn opt_int(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<i64> {
    match args.get(i) {
        None | Some(Value::Nil) => Ok(0),
        Some(_) => Ok(crate::api::check_number(lua, args, i, fname)? as i64),
    }
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let data = check_string(lua, &args, "unpack")?;
    unpack_full(lua, &data, 0, 0)
}

fn unpack_one(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let offset = opt_int(lua, &args, 1, "unpack_one")?;
    let data = check_string(lua, &args, "unpack_one")?;
    unpack_full(lua, &data, 1, offset)
}

fn unpack_limit(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let limit = crate::api::check_number(lua, &args, 1, "unpack_limit")? as i64;
    let offset = opt_int(lua, &args, 2, "unpack_limit")?;
    let data = check_string(lua, &args, "unpack_limit")?;
    unpack_full(lua, &data, limit, offset)
}
