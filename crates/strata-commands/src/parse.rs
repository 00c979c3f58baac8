//! Argument parsing with Redis's rules and error texts.

use crate::error::CmdError;

/// Parses an integer as Redis's `string2ll`: canonical decimal only (no '+', no
/// leading zeros, no spaces), within i64.
pub fn int(arg: &[u8]) -> Result<i64, CmdError> {
    strata_keyspace::value::parse_canonical_i64(arg).ok_or(CmdError::NotInteger)
}

/// C's `strtol` in base 10 on the start of `s`: white space, an optional sign, then
/// every digit that follows, saturating out of `long`'s range. The value and what
/// follows the digits; `None` when no digit comes (C's 0 with nothing consumed).
pub fn c_strtol(s: &[u8]) -> Option<(i64, &[u8])> {
    let start = s
        .iter()
        .position(|&b| !matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .unwrap_or(s.len());
    let (negative, rest) = match &s[start..] {
        [b'-', tail @ ..] => (true, tail),
        [b'+', tail @ ..] => (false, tail),
        rest => (false, rest),
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let (number, after) = rest.split_at(digits);
    let value = number.iter().fold(0i64, |value, &d| {
        let d = i64::from(d - b'0');
        if negative {
            value.saturating_mul(10).saturating_sub(d)
        } else {
            value.saturating_mul(10).saturating_add(d)
        }
    });
    Some((value, after))
}

/// Parses an integer that must fit C's `int`, as Redis's `getIntFromObjectOrReply`
/// does, with its texts for each failure.
pub fn int32(arg: &[u8]) -> Result<i32, CmdError> {
    let n = int(arg)?;
    i32::try_from(n).map_err(|_| {
        CmdError::err(format!(
            "value is out of range, value must between {} and {}",
            i32::MIN,
            i32::MAX
        ))
    })
}

/// Parses a float as Redis's `getDoubleFromObject`: all of the argument, no leading
/// space, not NaN; "inf" and "-inf" are accepted.
pub fn float(arg: &[u8]) -> Result<f64, CmdError> {
    parse_f64(arg).ok_or(CmdError::NotFloat)
}

/// The `strtod`-compatible part of [`float`], returning `None` on failure.
pub fn parse_f64(arg: &[u8]) -> Option<f64> {
    if let Some(v) = plain_int_f64(arg) {
        return Some(v);
    }
    let s = std::str::from_utf8(arg).ok()?;
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    // Rust accepts "infinity" and "nan" as strtod does, but not hexadecimal floats.
    if body.starts_with("0x") {
        return parse_hex_f64(&lower);
    }
    if lower.len() - body.len() > 1 {
        return None;
    }
    let v: f64 = lower.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    Some(v)
}

/// An optional sign and 1 to 15 decimal digits, the most common score or
/// increment, read without the general path's validation, lowercased copy and
/// float parser (some 250 instructions of a ZADD): such a number is exact as an
/// `f64` (below 2^53), which is what `strtod` reads it as too ("-0" included).
#[inline]
pub(crate) fn plain_int_f64(arg: &[u8]) -> Option<f64> {
    let (neg, digits) = match arg.first()? {
        b'-' => (true, &arg[1..]),
        b'+' => (false, &arg[1..]),
        _ => (false, arg),
    };
    if digits.is_empty() || digits.len() > 15 {
        return None;
    }
    let mut n: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(b - b'0');
    }
    let v = n as f64;
    Some(if neg { -v } else { v })
}

/// Hexadecimal floats as `strtod` reads them ("0x1p3", "-0x1.8").
fn parse_hex_f64(s: &str) -> Option<f64> {
    let (neg, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let rest = rest.strip_prefix("0x")?;
    let (mantissa, exp) = match rest.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int_part.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac_part.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    let v = v * 2f64.powi(exp);
    Some(if neg { -v } else { v })
}

/// Case-insensitive comparison of an argument with an option name.
#[inline]
pub fn is(arg: &[u8], name: &str) -> bool {
    arg.eq_ignore_ascii_case(name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strtol_reads_a_prefix() {
        assert_eq!(c_strtol(b"1e3"), Some((1, &b"e3"[..])));
        assert_eq!(c_strtol(b" \t+12x"), Some((12, &b"x"[..])));
        assert_eq!(c_strtol(b"-007"), Some((-7, &b""[..])));
        assert_eq!(
            c_strtol(b"99999999999999999999"),
            Some((i64::MAX, &b""[..]))
        );
        assert_eq!(
            c_strtol(b"-99999999999999999999"),
            Some((i64::MIN, &b""[..]))
        );
        assert_eq!(c_strtol(b"x1"), None);
        assert_eq!(c_strtol(b"-"), None);
        assert_eq!(c_strtol(b""), None);
    }

    #[test]
    fn integers() {
        assert_eq!(int(b"10"), Ok(10));
        assert_eq!(int(b"-10"), Ok(-10));
        assert!(int(b"010").is_err());
        assert!(int(b"+1").is_err());
        assert!(int(b"1.0").is_err());
    }

    #[test]
    fn floats() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b".5"), Some(0.5));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"0x1p-1"), Some(0.5));
        for bad in [
            &b"nan"[..],
            b"",
            b" 1",
            b"1 ",
            b"abc",
            b"--1",
            b"1e",
            b"-",
            b"+",
            b"+-1",
        ] {
            assert_eq!(parse_f64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// The plain-integer path reads what the general one (Rust's parser) does, and
    /// leaves everything else to it.
    #[test]
    fn plain_integers_read_as_the_general_path_does() {
        let mut texts: Vec<String> = vec![
            "0".into(),
            "-0".into(),
            "+0".into(),
            "007".into(),
            "999999999999999".into(),
            "-999999999999999".into(),
            "1000000000000000".into(),
            "9007199254740993".into(),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let digits = 1 + (seed % 17) as usize;
            let n = format!("{:017}", seed % 100_000_000_000_000_000);
            let sign = ["", "-", "+"][(seed >> 60) as usize % 3];
            texts.push(format!("{sign}{}", &n[17 - digits..]));
        }
        for t in &texts {
            let general: Option<f64> = t.parse().ok();
            match plain_int_f64(t.as_bytes()) {
                Some(v) => {
                    assert_eq!(Some(v), general, "{t}");
                    assert_eq!(
                        v.is_sign_negative(),
                        general.unwrap().is_sign_negative(),
                        "{t}"
                    );
                }
                None => assert!(t.trim_start_matches(['-', '+']).len() > 15, "{t}"),
            }
            assert_eq!(parse_f64(t.as_bytes()), general, "{t}");
        }
    }
}
