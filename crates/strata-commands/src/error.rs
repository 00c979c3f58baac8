//! Command errors, displayed exactly as Redis 7 words them.
//!
//! A handler returns `Err(CmdError)` before writing any part of its reply; the
//! dispatcher then writes `-<Display>` as the reply. Clients and tests match on these
//! texts, so each one is pinned by a golden test.

use std::borrow::Cow;
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmdError {
    WrongType,
    Syntax,
    NotInteger,
    NotFloat,
    Overflow,
    /// `INCRBYFLOAT` and friends would produce NaN or an infinity.
    NanOrInfinity,
    NoSuchKey,
    DbIndexOutOfRange,
    /// A value of a positive-only argument was zero or negative.
    NotPositive,
    /// A string would grow past `proto-max-bulk-len`.
    StringTooLong,
    /// `ERR wrong number of arguments for '<name>' command`.
    WrongArity(String),
    /// `ERR unknown subcommand '<sub>'. Try <COMMAND> HELP.`
    UnknownSubcommand {
        command: String,
        sub: Vec<u8>,
    },
    /// `ERR invalid expire time in '<name>' command`.
    InvalidExpire(String),
    /// Any other error: the full text, starting with its code (`ERR ...`). The text
    /// may quote the client's bytes, which need not be UTF-8.
    Other(Cow<'static, [u8]>),
}

pub type CmdResult = Result<(), CmdError>;

impl CmdError {
    /// An `ERR` error with the given message.
    pub fn err(message: impl Into<Cow<'static, str>>) -> CmdError {
        let message = message.into();
        CmdError::Other(Cow::Owned(format!("ERR {message}").into_bytes()))
    }

    /// An error with its own code (`NOAUTH ...`, `BUSYKEY ...`).
    pub fn coded(text: impl Into<Cow<'static, str>>) -> CmdError {
        CmdError::Other(match text.into() {
            Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        })
    }

    /// An `ERR` error that quotes a client's argument as Redis's `%s` does (see
    /// [`c_str`]): `ERR <before><arg><after>`.
    pub fn quoting(before: &str, arg: &[u8], after: &str) -> CmdError {
        let mut text = format!("ERR {before}").into_bytes();
        text.extend_from_slice(c_str(arg, usize::MAX));
        text.extend_from_slice(after.as_bytes());
        CmdError::Other(Cow::Owned(text))
    }

    pub fn unknown_subcommand(command: &str, sub: &[u8]) -> CmdError {
        CmdError::UnknownSubcommand {
            command: command.to_ascii_uppercase(),
            sub: c_str(sub, 128).to_vec(),
        }
    }

    /// The error's text as sent to the client (without the leading `-`).
    pub fn to_bytes(&self) -> Cow<'_, [u8]> {
        match self {
            CmdError::Other(text) => Cow::Borrowed(text),
            CmdError::UnknownSubcommand { command, sub } => {
                let mut text = b"ERR unknown subcommand '".to_vec();
                text.extend_from_slice(sub);
                text.extend_from_slice(format!("'. Try {command} HELP.").as_bytes());
                Cow::Owned(text)
            }
            other => Cow::Owned(other.to_string().into_bytes()),
        }
    }
}

/// An argument as C's `printf("%.*s")` prints it, which is how Redis quotes
/// arguments in error messages: up to the first NUL byte, at most `max` bytes.
pub fn c_str(arg: &[u8], max: usize) -> &[u8] {
    let end = arg
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(arg.len())
        .min(max);
    &arg[..end]
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdError::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            CmdError::Syntax => f.write_str("ERR syntax error"),
            CmdError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            CmdError::NotFloat => f.write_str("ERR value is not a valid float"),
            CmdError::Overflow => f.write_str("ERR increment or decrement would overflow"),
            CmdError::NanOrInfinity => f.write_str("ERR increment would produce NaN or Infinity"),
            CmdError::NoSuchKey => f.write_str("ERR no such key"),
            CmdError::DbIndexOutOfRange => f.write_str("ERR DB index is out of range"),
            CmdError::NotPositive => f.write_str("ERR value is out of range, must be positive"),
            CmdError::StringTooLong => {
                f.write_str("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
            }
            CmdError::WrongArity(name) => {
                write!(f, "ERR wrong number of arguments for '{name}' command")
            }
            CmdError::UnknownSubcommand { .. } => {
                f.write_str(&String::from_utf8_lossy(&self.to_bytes()))
            }
            CmdError::InvalidExpire(name) => {
                write!(f, "ERR invalid expire time in '{name}' command")
            }
            CmdError::Other(text) => f.write_str(&String::from_utf8_lossy(text)),
        }
    }
}

impl std::error::Error for CmdError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_texts() {
        let cases = [
            (
                CmdError::WrongType,
                "WRONGTYPE Operation against a key holding the wrong kind of value",
            ),
            (CmdError::Syntax, "ERR syntax error"),
            (
                CmdError::NotInteger,
                "ERR value is not an integer or out of range",
            ),
            (CmdError::NotFloat, "ERR value is not a valid float"),
            (
                CmdError::Overflow,
                "ERR increment or decrement would overflow",
            ),
            (
                CmdError::WrongArity("get".into()),
                "ERR wrong number of arguments for 'get' command",
            ),
            (
                CmdError::unknown_subcommand("client", b"foo"),
                "ERR unknown subcommand 'foo'. Try CLIENT HELP.",
            ),
            (
                CmdError::InvalidExpire("set".into()),
                "ERR invalid expire time in 'set' command",
            ),
            (CmdError::err("no such key"), "ERR no such key"),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text);
            assert_eq!(e.to_bytes(), text.as_bytes());
        }
    }

    #[test]
    fn quoted_arguments_stop_at_nul() {
        assert_eq!(c_str(b"ab\0cd", 10), b"ab");
        assert_eq!(c_str(b"abcd", 2), b"ab");
        let e = CmdError::quoting("Unsupported option ", b"x\xff\0y", "");
        assert_eq!(e.to_bytes(), &b"ERR Unsupported option x\xff"[..]);
        let e = CmdError::unknown_subcommand("object", b"fo\0o");
        assert_eq!(
            e.to_bytes(),
            &b"ERR unknown subcommand 'fo'. Try OBJECT HELP."[..]
        );
    }
}
