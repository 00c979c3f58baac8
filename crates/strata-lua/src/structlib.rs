//! The `struct` library as Redis ships it (Roberto Ierusalimschy's struct 0.2 with
//! Redis's bounds checks): `struct.pack`, `struct.unpack` and `struct.size` over the
//! same format language and with the same error texts.
//!
//! Formats: `>` big-endian, `<` little-endian (the default, as on the machines
//! Redis runs on), `!n` alignment, `x` a zero byte, `b`/`B` `h`/`H` `l`/`L` `T`
//! `i[n]`/`I[n]` integers of 1, 2, 8, 8 and n (default 4, at most 32) bytes,
//! `f`/`d` floats, `s` a zero-terminated string, `c[n]` a fixed-size string (`c0`:
//! the whole string, or when unpacking the length the previous item gave).

use mlua::{Lua, MultiValue, Table, Value};

use crate::api::{check_number, typename};
use crate::error::raise;

const MAXINTSIZE: usize = 32;
const MAXALIGN: usize = 8;

/// The library's table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.raw_set("pack", lua.create_function(pack)?)?;
    t.raw_set("unpack", lua.create_function(unpack)?)?;
    t.raw_set("size", lua.create_function(size)?)?;
    Ok(t)
}

struct Header {
    big: bool,
    align: usize,
}

/// A format string being read.
struct Fmt<'a> {
    s: &'a [u8],
    i: usize,
}

impl Fmt<'_> {
    fn next(&mut self) -> Option<u8> {
        // The format ends at its first NUL, as a C string does.
        let c = *self.s.get(self.i).filter(|&&c| c != 0)?;
        self.i += 1;
        Some(c)
    }

    fn num(&mut self, lua: &Lua, default: usize) -> mlua::Result<usize> {
        if !self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: usize = 0;
        while let Some(&d) = self.s.get(self.i).filter(|d| d.is_ascii_digit()) {
            let d = usize::from(d - b'0');
            if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - d {
                return Err(raise(lua, "integral size overflow"));
            }
            a = a * 10 + d;
            self.i += 1;
        }
        Ok(a)
    }
}

fn optsize(lua: &Lua, opt: u8, fmt: &mut Fmt<'_>) -> mlua::Result<usize> {
    Ok(match opt {
        b'B' | b'b' => 1,
        b'H' | b'h' => 2,
        b'L' | b'l' | b'T' | b'd' => 8,
        b'f' | b'x' => {
            if opt == b'f' {
                4
            } else {
                1
            }
        }
        b'c' => fmt.num(lua, 1)?,
        b'i' | b'I' => {
            let sz = fmt.num(lua, 4)?;
            if sz > MAXINTSIZE {
                return Err(raise(
                    lua,
                    format!("integral size {sz} is larger than limit of {MAXINTSIZE}"),
                ));
            }
            sz
        }
        _ => 0,
    })
}

fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size.wrapping_sub(len & (size - 1))) & (size - 1)
}

fn control(lua: &Lua, opt: u8, fmt: &mut Fmt<'_>, h: &mut Header, fname: &str) -> mlua::Result<()> {
    match opt {
        b' ' => {}
        b'>' => h.big = true,
        b'<' => h.big = false,
        b'!' => {
            let a = fmt.num(lua, MAXALIGN)?;
            if a == 0 || !a.is_power_of_two() {
                return Err(raise(lua, format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
        }
        _ => {
            return Err(raise(
                lua,
                format!(
                    "bad argument #1 to '{fname}' (invalid format option '{}')",
                    opt as char
                ),
            ));
        }
    }
    Ok(())
}

fn check_string(lua: &Lua, args: &MultiValue, i: usize, fname: &str) -> mlua::Result<Vec<u8>> {
    match args.get(i) {
        Some(v) if crate::api::as_text(v).is_some() => {
            Ok(crate::api::as_text(v).unwrap_or_default())
        }
        other => Err(raise(
            lua,
            format!(
                "bad argument #{} to '{fname}' (string expected, got {})",
                i + 1,
                typename(other)
            ),
        )),
    }
}

fn pack(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let fmt_bytes = check_string(lua, &args, 0, "pack")?;
    let mut fmt = Fmt {
        s: &fmt_bytes,
        i: 0,
    };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut arg = 1;
    let mut out: Vec<u8> = Vec::new();
    while let Some(opt) = fmt.next() {
        let mut size = optsize(lua, opt, &mut fmt)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                let mut value: u64 = if n < 0.0 { (n as i64) as u64 } else { n as u64 };
                let mut buf = vec![0u8; size];
                for i in 0..size {
                    let at = if h.big { size - 1 - i } else { i };
                    buf[at] = (value & 0xff) as u8;
                    value = value.checked_shr(8).unwrap_or(0);
                }
                out.extend_from_slice(&buf);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, &args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    f.to_be_bytes()
                } else {
                    f.to_le_bytes()
                });
            }
            b'd' => {
                let d = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    d.to_be_bytes()
                } else {
                    d.to_le_bytes()
                });
            }
            b'c' | b's' => {
                let s = check_string(lua, &args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(raise(
                        lua,
                        format!("bad argument #{} to 'pack' (string too short)", arg + 1),
                    ));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(lua, opt, &mut fmt, &mut h, "pack")?,
        }
    }
    lua.create_string(&out)
}

fn get_integer(buf: &[u8], big: bool, signed: bool) -> f64 {
    let mut l: u64 = 0;
    let size = buf.len();
    for i in 0..size {
        let b = if big { buf[i] } else { buf[size - 1 - i] };
        l = l.checked_shl(8).unwrap_or(0) | u64::from(b);
    }
    if !signed {
        return l as f64;
    }
    let shift = (size * 8).saturating_sub(1);
    let mask = if shift >= 64 { 0 } else { u64::MAX << shift };
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let fmt_bytes = check_string(lua, &args, 0, "unpack")?;
    let data = check_string(lua, &args, 1, "unpack")?;
    let ld = data.len();
    let start = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        Some(_) => check_number(lua, &args, 2, "unpack")?,
    };
    if start.is_nan() || start < 1.0 {
        return Err(raise(
            lua,
            "bad argument #3 to 'unpack' (offset must be 1 or greater)",
        ));
    }
    let mut pos = start as usize - 1;
    let mut fmt = Fmt {
        s: &fmt_bytes,
        i: 0,
    };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let short = || raise(lua, "bad argument #2 to 'unpack' (data string too short)");
    let mut results: Vec<Value> = Vec::new();
    while let Some(opt) = fmt.next() {
        let mut size = optsize(lua, opt, &mut fmt)?;
        pos = pos.saturating_add(to_align(pos, &h, opt, size));
        if size > ld || pos > ld - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let v = get_integer(&data[pos..pos + size], h.big, opt.is_ascii_lowercase());
                results.push(Value::Number(v));
            }
            b'x' => {}
            b'f' => {
                let mut b = [0u8; 4];
                b.copy_from_slice(&data[pos..pos + 4]);
                let f = if h.big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                results.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&data[pos..pos + 8]);
                let d = if h.big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                results.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    let prev = match results.last() {
                        Some(Value::Number(n)) => Some(*n),
                        Some(Value::Integer(i)) => Some(*i as f64),
                        Some(Value::String(s)) => crate::fmt::parse_number(&s.as_bytes()),
                        _ => None,
                    };
                    let Some(prev) = prev else {
                        return Err(raise(lua, "format 'c0' needs a previous size"));
                    };
                    results.pop();
                    size = prev as usize;
                    if size > ld || pos > ld - size {
                        return Err(short());
                    }
                }
                results.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(raise(lua, "unfinished string in data"));
                };
                results.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            _ => control(lua, opt, &mut fmt, &mut h, "unpack")?,
        }
        pos += size;
    }
    results.push(Value::Integer(pos as i64 + 1));
    Ok(MultiValue::from_iter(results))
}

fn size(lua: &Lua, args: MultiValue) -> mlua::Result<i64> {
    let fmt_bytes = check_string(lua, &args, 0, "size")?;
    let mut fmt = Fmt {
        s: &fmt_bytes,
        i: 0,
    };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut pos = 0usize;
    while let Some(opt) = fmt.next() {
        let size = optsize(lua, opt, &mut fmt)?;
        pos += to_align(pos, &h, opt, size);
        if opt == b's' {
            return Err(raise(
                lua,
                "bad argument #1 to 'size' (options 's' has no fixed size)",
            ));
        }
        if opt == b'c' && size == 0 {
            return Err(raise(
                lua,
                "bad argument #1 to 'size' (options 'c0' has no fixed size)",
            ));
        }
        if !opt.is_ascii_alphanumeric() {
            control(lua, opt, &mut fmt, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(pos as i64)
}
