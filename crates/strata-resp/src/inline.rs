//! Inline argument splitting and quoting, by Redis's `sdssplitargs` rules.
//!
//! An inline request (`SET k "a b"\r\n`) and a line of `redis.conf` are split the same
//! way. Arguments are separated by blanks (space, `\t`, `\n`, `\v`, `\f`, `\r`); an
//! unquoted argument ends only at space, `\t`, `\n` or `\r`, so `\v` and `\f` inside it
//! are kept. A `"` anywhere starts a double-quoted part with the escapes `\n` `\r` `\t`
//! `\b` `\a` `\xHH` and `\<any>` (that byte); a `'` starts a single-quoted part where
//! only `\'` is an escape. A closing quote must be followed by a blank or the end of the
//! line, and a quote left open is an error. The line is read as a C string would be: a
//! NUL byte ends it.
//!
//! [`quote_arg`] is the inverse: any argument, quoted, splits back to itself.
//!
//! Invariant: never panics, whatever the input.

#![deny(clippy::indexing_slicing)]

use std::ops::Range;

/// A quote was left open, or a closing quote was followed by something other than a
/// blank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unbalanced quotes")]
pub struct UnbalancedQuotes;

/// Splits `line` into arguments as Redis's `sdssplitargs` does.
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, UnbalancedQuotes> {
    let mut bytes = Vec::with_capacity(line.len());
    let mut ranges = Vec::new();
    split_into(line, &mut bytes, &mut ranges)?;
    Ok(ranges
        .into_iter()
        .map(|r| bytes.get(r).unwrap_or_default().to_vec())
        .collect())
}

/// Splits `line`, appending each argument's bytes to `out` and its range in `out` to
/// `ranges`. On error, `out` and `ranges` hold a partial result.
pub(crate) fn split_into(
    line: &[u8],
    out: &mut Vec<u8>,
    ranges: &mut Vec<Range<usize>>,
) -> Result<(), UnbalancedQuotes> {
    // The byte at `i`, with the end of the line read as the NUL of a C string.
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut i = 0;
    loop {
        while at(i) != 0 && is_blank(at(i)) {
            i += 1;
        }
        if at(i) == 0 {
            return Ok(());
        }
        let start = out.len();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            let c = at(i);
            if in_double {
                if c == b'\\' && at(i + 1) == b'x' && is_hex(at(i + 2)) && is_hex(at(i + 3)) {
                    out.push(hex_value(at(i + 2)) << 4 | hex_value(at(i + 3)));
                    i += 3;
                } else if c == b'\\' && at(i + 1) != 0 {
                    i += 1;
                    out.push(match at(i) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(i + 1) != 0 && !is_blank(at(i + 1)) {
                        return Err(UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else if c == 0 {
                    return Err(UnbalancedQuotes);
                } else {
                    out.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(i + 1) == b'\'' {
                    i += 1;
                    out.push(b'\'');
                } else if c == b'\'' {
                    if at(i + 1) != 0 && !is_blank(at(i + 1)) {
                        return Err(UnbalancedQuotes);
                    }
                    i += 1;
                    break;
                } else if c == 0 {
                    return Err(UnbalancedQuotes);
                } else {
                    out.push(c);
                }
            } else {
                match c {
                    0 => break,
                    b' ' | b'\n' | b'\r' | b'\t' => {
                        i += 1;
                        break;
                    }
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => out.push(c),
                }
            }
            i += 1;
        }
        ranges.push(start..out.len());
    }
}

/// Appends `arg` to `out` double-quoted, so that [`split_args`] reads it back unchanged:
/// `"` and `\` are escaped, `\n` `\r` `\t` `\a` `\b` use their short escapes, other
/// bytes outside printable ASCII are written as `\xHH`. This is the form of Redis's
/// `sdscatrepr`.
pub fn quote_arg(arg: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(arg.len() + 2);
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' | b'"' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => {
                let hi = HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0');
                let lo = HEX.get(usize::from(b & 0x0f)).copied().unwrap_or(b'0');
                out.extend_from_slice(&[b'\\', b'x', hi, lo]);
            }
        }
    }
    out.push(b'"');
}

/// Appends `args` to `out` as one inline line: each argument quoted, separated by
/// spaces, ended by `\r\n`.
pub fn encode_inline<'a, I>(args: I, out: &mut Vec<u8>)
where
    I: IntoIterator<Item = &'a [u8]>,
{
    for (n, arg) in args.into_iter().enumerate() {
        if n > 0 {
            out.push(b' ');
        }
        quote_arg(arg, out);
    }
    out.extend_from_slice(b"\r\n");
}

/// C's `isspace` in the "C" locale.
fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, UnbalancedQuotes> {
        split_args(line)
    }

    fn v(args: &[&[u8]]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.to_vec()).collect()
    }

    #[test]
    fn splits_on_blanks() {
        assert_eq!(split(b"SET  k\tv").unwrap(), v(&[b"SET", b"k", b"v"]));
        assert_eq!(split(b"  \x0b ").unwrap(), v(&[]));
        assert_eq!(split(b"").unwrap(), v(&[]));
        assert_eq!(split(b"\x0bECHO a").unwrap(), v(&[b"ECHO", b"a"]));
    }

    #[test]
    fn keeps_vertical_tab_and_form_feed_inside_an_unquoted_argument() {
        assert_eq!(split(b"ECHO a\x0bb").unwrap(), v(&[b"ECHO", b"a\x0bb"]));
        assert_eq!(split(b"ECHO a\x0cb").unwrap(), v(&[b"ECHO", b"a\x0cb"]));
    }

    #[test]
    fn double_quotes_and_escapes() {
        assert_eq!(
            split(br#"ECHO "\x4A\xfF\q\t\b\a\n\r\\\"""#).unwrap(),
            v(&[b"ECHO", b"J\xffq\t\x08\x07\n\r\\\""])
        );
        assert_eq!(
            split(br#"ECHO "\x41\x4g\n""#).unwrap(),
            v(&[b"ECHO", b"Ax4g\n"])
        );
        assert_eq!(split(br#"ECHO """#).unwrap(), v(&[b"ECHO", b""]));
        assert_eq!(split(b"ECHO \"a\"\t").unwrap(), v(&[b"ECHO", b"a"]));
        assert_eq!(
            split(b"ECHO \"a\"\x0bb").unwrap(),
            v(&[b"ECHO", b"a", b"b"])
        );
    }

    #[test]
    fn single_quotes() {
        assert_eq!(split(br"ECHO 'a\'b'").unwrap(), v(&[b"ECHO", b"a'b"]));
        assert_eq!(split(br"ECHO 'a\nb'").unwrap(), v(&[b"ECHO", br"a\nb"]));
    }

    #[test]
    fn a_quote_inside_an_unquoted_argument_opens_a_quoted_part() {
        assert_eq!(split(br#"ECHO a"b c""#).unwrap(), v(&[b"ECHO", b"ab c"]));
    }

    #[test]
    fn unbalanced_quotes() {
        for line in [
            &br#"ECHO "a"b"#[..],
            br#"ECHO "abc"#,
            br#"ECHO "a\""#,
            br#"ECHO "a\"#,
            br"ECHO 'a'b",
            br"ECHO a'b'c",
            b"ECHO \"a\r",
        ] {
            assert_eq!(
                split(line),
                Err(UnbalancedQuotes),
                "{}",
                line.escape_ascii()
            );
        }
    }

    #[test]
    fn a_nul_byte_ends_the_line() {
        assert_eq!(split(b"ECHO a\0b c").unwrap(), v(&[b"ECHO", b"a"]));
        assert_eq!(split(b"ECHO \"a\0b\""), Err(UnbalancedQuotes));
    }

    #[test]
    fn quoting_round_trips() {
        let args: Vec<&[u8]> = vec![
            b"",
            b"plain",
            b"a b",
            b"\"'\\",
            b"\0\x01\x7f\xff",
            b"\r\n\t",
        ];
        let mut line = Vec::new();
        encode_inline(args.iter().copied(), &mut line);
        assert_eq!(line.last(), Some(&b'\n'));
        let body = line.strip_suffix(b"\r\n").unwrap();
        assert_eq!(
            split(body).unwrap(),
            args.iter().map(|a| a.to_vec()).collect::<Vec<_>>()
        );
    }
}
