//! The `bit` library (LuaBitOp 1.0, as Redis ships it): bitwise operations on 32-bit
//! integers. Arguments are numbers (or numeric strings) normalised to a signed 32-bit
//! integer by rounding and taking the low 32 bits; results are signed.

use mlua::{Lua, MultiValue, Table, Value};

use crate::api::check_number;

/// The library's table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    type Op = fn(&[i32]) -> i32;
    let unary: [(&str, Op); 3] = [
        ("tobit", |a| a[0]),
        ("bnot", |a| !a[0]),
        ("bswap", |a| a[0].swap_bytes()),
    ];
    for (name, op) in unary {
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                apply(lua, name, &args, 1, false, op)
            })?,
        )?;
    }
    let variadic: [(&str, Op); 3] = [
        ("band", |a| a.iter().fold(-1, |x, y| x & y)),
        ("bor", |a| a.iter().fold(0, |x, y| x | y)),
        ("bxor", |a| a.iter().fold(0, |x, y| x ^ y)),
    ];
    for (name, op) in variadic {
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| apply(lua, name, &args, 1, true, op))?,
        )?;
    }
    let shifts: [(&str, Op); 5] = [
        ("lshift", |a| ((a[0] as u32) << (a[1] as u32 & 31)) as i32),
        ("rshift", |a| ((a[0] as u32) >> (a[1] as u32 & 31)) as i32),
        ("arshift", |a| a[0] >> (a[1] as u32 & 31)),
        ("rol", |a| {
            (a[0] as u32).rotate_left(a[1] as u32 & 31) as i32
        }),
        ("ror", |a| {
            (a[0] as u32).rotate_right(a[1] as u32 & 31) as i32
        }),
    ];
    for (name, op) in shifts {
        t.raw_set(
            name,
            lua.create_function(move |lua, args: MultiValue| {
                apply(lua, name, &args, 2, false, op)
            })?,
        )?;
    }
    t.raw_set("tohex", lua.create_function(tohex)?)?;
    Ok(t)
}

/// LuaBitOp's normalisation of a number to a signed 32-bit integer: add 2^52 + 2^51
/// and keep the low word of the result's bits.
pub fn tobit(x: f64) -> i32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn apply(
    lua: &Lua,
    name: &str,
    args: &MultiValue,
    fixed: usize,
    variadic: bool,
    op: fn(&[i32]) -> i32,
) -> mlua::Result<f64> {
    let count = if variadic {
        args.len().max(fixed)
    } else {
        fixed
    };
    let mut values = Vec::with_capacity(count);
    for i in 0..count {
        values.push(tobit(check_number(lua, args, i, name)?));
    }
    Ok(f64::from(op(&values)))
}

fn tohex(lua: &Lua, args: MultiValue) -> mlua::Result<mlua::LuaString> {
    let x = tobit(check_number(lua, &args, 0, "tohex")?) as u32;
    let mut n = match args.get(1) {
        None | Some(Value::Nil) => 8,
        Some(_) => tobit(check_number(lua, &args, 1, "tohex")?),
    };
    let upper = n < 0;
    if upper {
        n = n.wrapping_neg();
    }
    let n = (n.clamp(0, 8)) as usize;
    let text = if upper {
        format!("{x:08X}")
    } else {
        format!("{x:08x}")
    };
    lua.create_string(&text[8 - n..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_like_luabitop() {
        assert_eq!(tobit(1.0), 1);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(4294967295.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
        assert_eq!(tobit(0.5), 0);
        assert_eq!(tobit(1.5), 2);
    }
}
