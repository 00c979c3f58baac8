//! C's `%.<N>g` number formatting, which Lua (`tostring`: `%.14g`), `redis.call`'s
//! argument conversion (`%.17g`) and cjson (`%.14g`) use, so that numbers print as
//! they do in Redis.

/// `value` formatted as C's `printf("%.<precision>g")`.
pub fn fmt_g(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan"
        } else {
            "nan"
        }
        .to_string();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    let p = precision.max(1);
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // The digits rounded to `p` significant ones, and the exponent after rounding.
    let sci = format!("{:.*e}", p - 1, value);
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    if exp < -4 || exp >= p as i32 {
        let mantissa = strip_zeros(&mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{value:.decimals$}"))
    }
}

fn strip_zeros(s: &str) -> String {
    if !s.contains('.') {
        return s.to_string();
    }
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Lua 5.1's `tostring` of a number (`%.14g`).
pub fn lua_number(value: f64) -> String {
    fmt_g(value, 14)
}

/// Lua 5.1's conversion of a string to a number (`lua_tonumber`): C's `strtod` on
/// the trimmed text, or a hexadecimal integer after `0x`.
pub fn parse_number(text: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(text).ok()?;
    let s = s.trim_matches(|c: char| c.is_ascii_whitespace());
    if s.is_empty() {
        return None;
    }
    let (neg, digits) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        let v = u64::from_str_radix(hex, 16).ok()? as u32 as f64;
        return Some(if neg { -v } else { v });
    }
    let lower = digits.to_ascii_lowercase();
    if lower.starts_with("in") || lower.starts_with("na") {
        return match lower.as_str() {
            "inf" | "infinity" => Some(if neg {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }),
            "nan" => Some(f64::NAN),
            _ => None,
        };
    }
    if !digits
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    s.parse::<f64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_printf() {
        assert_eq!(fmt_g(0.1, 17), "0.10000000000000001");
        assert_eq!(fmt_g(3.0, 17), "3");
        assert_eq!(fmt_g(1.0 / 3.0, 14), "0.33333333333333");
        assert_eq!(fmt_g(1e15, 14), "1e+15");
        assert_eq!(fmt_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(fmt_g(1e-5, 14), "1e-05");
        assert_eq!(fmt_g(0.0001, 14), "0.0001");
        assert_eq!(fmt_g(-2.5, 14), "-2.5");
        assert_eq!(fmt_g(100.0, 14), "100");
        assert_eq!(fmt_g(f64::INFINITY, 14), "inf");
        assert_eq!(fmt_g(9007199254740993.0, 17), "9007199254740992");
        assert_eq!(fmt_g(1e100, 17), "1e+100");
    }
}
