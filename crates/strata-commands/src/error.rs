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
        sub: String,
    },
    /// `ERR invalid expire time in '<name>' command`.
    InvalidExpire(String),
    /// Any other error: the full text, starting with its code (`ERR ...`).
    Other(Cow<'static, str>),
}

pub type CmdResult = Result<(), CmdError>;

impl CmdError {
    /// An `ERR` error with the given message.
    pub fn err(message: impl Into<Cow<'static, str>>) -> CmdError {
        let message = message.into();
        CmdError::Other(Cow::Owned(format!("ERR {message}")))
    }

    /// An error with its own code (`NOAUTH ...`, `BUSYKEY ...`).
    pub fn coded(text: impl Into<Cow<'static, str>>) -> CmdError {
        CmdError::Other(text.into())
    }

    pub fn unknown_subcommand(command: &str, sub: &[u8]) -> CmdError {
        CmdError::UnknownSubcommand {
            command: command.to_ascii_uppercase(),
            sub: String::from_utf8_lossy(sub).into_owned(),
        }
    }
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
            CmdError::UnknownSubcommand { command, sub } => {
                write!(
                    f,
                    "ERR unknown subcommand '{}'. Try {command} HELP.",
                    truncate(sub, 128)
                )
            }
            CmdError::InvalidExpire(name) => {
                write!(f, "ERR invalid expire time in '{name}' command")
            }
            CmdError::Other(text) => f.write_str(text),
        }
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
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
        }
    }
}
