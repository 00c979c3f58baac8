//! Reading configuration text: Redis's argument splitting and number syntax, the
//! configuration file, and the command line.
//!
//! The lexical helpers reproduce Redis's C helpers so that a file or a CONFIG SET value
//! means the same thing to strata as to Redis: [`split_args`] is `sdssplitargs`,
//! [`split_spaces`] is the `sdssplitlen(" ")` that CONFIG SET applies to multi-argument
//! directives, [`parse_integer`] is `string2ll`, [`parse_c_long`] is `strtoll` with a
//! full-match check, and [`parse_memory`] is `memtoull`. None of them panics.
//!
//! A file is read line by line: a line is trimmed, skipped when blank or when it starts
//! with `#`, split into words, and its first word, lowercased, names a directive. The
//! command line is turned into the same (name, arguments) directives and applied after
//! the file, in order, so a later directive overrides an earlier one; the one exception
//! is `save`, whose lines accumulate across both (the first `save` read discards the
//! defaults), as in Redis.

use std::path::{Path, PathBuf};

use super::directives::{self, Phase};
use super::{Config, ConfigError};

/// Whether `b` is a space in C's `isspace` sense.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Splits a line into words as Redis's `sdssplitargs` does, or returns `None` when a
/// quote is unbalanced or a closing quote is followed by something other than a space.
///
/// Words are separated by spaces, tabs, CR and LF. `"..."` understands `\n`, `\r`, `\t`,
/// `\b`, `\a`, `\xHH` and `\` before any other character; `'...'` understands only
/// `\'`. A quote may open in the middle of a word (`ab"cd"` is `abcd`). As in C, a NUL
/// byte ends the line.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let end = line.iter().position(|&b| b == 0).unwrap_or(line.len());
    let line = &line[..end];
    // Bytes past the end read as 0, as the C version reads the terminator.
    let at = |k: usize| line.get(k).copied().unwrap_or(0);
    let mut words = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_space(at(p)) {
            p += 1;
        }
        if p >= line.len() {
            return Some(words);
        }
        let mut word = Vec::new();
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if in_double {
                match (c, hex_value(at(p + 2)), hex_value(at(p + 3))) {
                    (b'\\', Some(hi), Some(lo)) if at(p + 1) == b'x' => {
                        word.push(hi * 16 + lo);
                        p += 3;
                    }
                    (b'\\', _, _) if at(p + 1) != 0 => {
                        p += 1;
                        word.push(match at(p) {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    (b'"', _, _) => {
                        if at(p + 1) != 0 && !is_space(at(p + 1)) {
                            return None;
                        }
                        done = true;
                    }
                    (0, _, _) => return None,
                    _ => word.push(c),
                }
            } else if in_single {
                match c {
                    b'\\' if at(p + 1) == b'\'' => {
                        p += 1;
                        word.push(b'\'');
                    }
                    b'\'' => {
                        if at(p + 1) != 0 && !is_space(at(p + 1)) {
                            return None;
                        }
                        done = true;
                    }
                    0 => return None,
                    _ => word.push(c),
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => word.push(c),
                }
            }
            if p < line.len() {
                p += 1;
            }
        }
        words.push(word);
    }
}

/// Splits a CONFIG SET value of a multi-argument directive on single spaces, keeping
/// empty pieces between adjacent spaces (Redis's `sdssplitlen(value, " ")`). An empty
/// value has no words.
pub(crate) fn split_spaces(value: &[u8]) -> Vec<&[u8]> {
    if value.is_empty() {
        return Vec::new();
    }
    value.split(|&b| b == b' ').collect()
}

/// Parses a whole word as a signed 64-bit integer with Redis's strict `string2ll`
/// rules: no sign but `-`, no spaces, no leading zeros, no `-0`.
pub(crate) fn parse_integer(s: &[u8]) -> Option<i64> {
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut magnitude: u64 = 0;
    for &d in digits {
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Parses a word as C's `strtoll` does and accepts it only when nothing follows the
/// number: leading spaces and a `+` or `-` sign are allowed, out-of-range values
/// saturate, and an empty word reads as 0 (`strtoll` stops at once and the end pointer
/// is at the terminator). This is how Redis reads `save` and the seconds of
/// `client-output-buffer-limit`.
pub(crate) fn parse_c_long(s: &[u8]) -> Option<i64> {
    match strata_commands::parse::c_strtol(s) {
        Some((value, rest)) => rest.is_empty().then_some(value),
        None => s.is_empty().then_some(0),
    }
}

/// Parses a memory size as Redis's `memtoull`: decimal digits followed by an optional
/// unit, case-insensitive: `b` (1), `k` (1000), `kb` (1024), `m` (1000²), `mb` (1024²),
/// `g` (1000³), `gb` (1024³).
///
/// Like `memtoull`, it accepts leading zeros, reads missing digits as 0 (`""` and `"kb"`
/// are 0), rejects signs and spaces, and saturates a digit string beyond 2⁶⁴−1. Unlike
/// Redis 7.0, which silently wraps when the unit multiplies past 2⁶⁴−1, it rejects such
/// values.
pub(crate) fn parse_memory(s: &[u8]) -> Option<u64> {
    if s.first() == Some(&b'-') {
        return None;
    }
    let digits = s.iter().take_while(|b| b.is_ascii_digit()).count();
    let (number, unit) = s.split_at(digits);
    let multiplier: u64 = match unit.to_ascii_lowercase().as_slice() {
        b"" | b"b" => 1,
        b"k" => 1000,
        b"kb" => 1024,
        b"m" => 1000 * 1000,
        b"mb" => 1024 * 1024,
        b"g" => 1000 * 1000 * 1000,
        b"gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    // Redis copies the digits into a 128-byte buffer and refuses longer numbers.
    if number.len() >= 128 {
        return None;
    }
    let mut value: u64 = 0;
    for &d in number {
        value = value.saturating_mul(10).saturating_add(u64::from(d - b'0'));
    }
    value.checked_mul(multiplier)
}

/// Parses `yes` or `no`, ignoring case.
pub(crate) fn parse_yes_no(s: &[u8]) -> Option<bool> {
    if s.eq_ignore_ascii_case(b"yes") {
        Some(true)
    } else if s.eq_ignore_ascii_case(b"no") {
        Some(false)
    } else {
        None
    }
}

/// Applies directives in order, remembering what Redis remembers while it loads: whether
/// a `save` line was already read.
pub(crate) struct Loader {
    config: Config,
    phase: Phase,
}

impl Loader {
    pub(crate) fn new() -> Loader {
        Loader {
            config: Config::default(),
            phase: Phase::Loading { save_seen: false },
        }
    }

    /// Applies one directive given as its name and arguments; the error is the reason
    /// only, for the caller to place.
    pub(crate) fn apply(&mut self, name: &[u8], args: &[&[u8]]) -> Result<(), String> {
        if let Some(result) = super::security::apply_statement(&mut self.config, name, args) {
            return result;
        }
        let directive = directives::lookup(name)
            .ok_or_else(|| format!("unknown directive '{}'", String::from_utf8_lossy(name)))?;
        directive.apply(&mut self.config, args, &mut self.phase)
    }

    /// Applies every line of a configuration file's text.
    pub(crate) fn apply_file(&mut self, path: &Path, text: &[u8]) -> Result<(), ConfigError> {
        for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = raw.trim_ascii();
            if line.is_empty() || line.first() == Some(&b'#') {
                continue;
            }
            let error = |reason: String| ConfigError::File {
                path: path.to_path_buf(),
                line: index + 1,
                text: String::from_utf8_lossy(line).into_owned(),
                reason,
            };
            let words = split_args(line)
                .ok_or_else(|| error("unbalanced quotes in configuration line".to_owned()))?;
            let Some((name, args)) = words.split_first() else {
                continue;
            };
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            self.apply(&name.to_ascii_lowercase(), &args)
                .map_err(error)?;
        }
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Config {
        self.config.resolve_io_threads();
        self.config
    }
}

/// Where a configuration came from, for the start-up log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigSource {
    /// The configuration file, made absolute, if one was given.
    pub file: Option<PathBuf>,
    /// How many directives the command line gave.
    pub overrides: usize,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(path) => write!(f, "configuration loaded from {}", path.display())?,
            None => f.write_str("no configuration file given, using the defaults")?,
        }
        match self.overrides {
            0 => Ok(()),
            1 => f.write_str(" and 1 command-line directive"),
            n => write!(f, " and {n} command-line directives"),
        }
    }
}

/// What the command line asks the binary to do.
#[derive(Debug)]
#[allow(clippy::large_enum_variant, reason = "built once, at start-up")]
pub enum Invocation {
    /// Run the server with this configuration.
    Serve {
        config: Config,
        source: ConfigSource,
    },
    /// Print [`version`] and exit successfully.
    Version,
    /// Print [`usage`] and exit successfully.
    Help,
}

/// The line `--version` prints.
pub fn version() -> String {
    format!(
        "strata server v={} bits={} (speaks the protocol of Redis 7.0)",
        env!("CARGO_PKG_VERSION"),
        usize::BITS
    )
}

/// The text `--help` prints; `program` is the name the binary was started with.
pub fn usage(program: &str) -> String {
    format!(
        "Usage: {program} [/path/to/strata.conf] [--directive value ...]\n\
         \x20      {program} -v or --version\n\
         \x20      {program} -h or --help\n\
         \n\
         Directives given on the command line apply after the configuration file.\n\
         A directive takes every following word up to the next --directive, and always\n\
         its first word, so `--requirepass --secret` sets the password to \"--secret\".\n\
         \n\
         Examples:\n\
         \x20      {program}                      (run with the default configuration)\n\
         \x20      {program} /etc/strata/strata.conf\n\
         \x20      {program} --port 7777\n\
         \x20      {program} --save \"\" --bind 127.0.0.1 ::1\n\
         \x20      {program} /etc/strata/strata.conf --loglevel verbose\n"
    )
}

/// One directive from the command line, with the text shown when it is rejected.
struct ArgDirective {
    words: Vec<Vec<u8>>,
    shown: String,
}

/// Shows one command-line word, quoted when it would otherwise be ambiguous.
fn show_word(word: &str) -> String {
    if word.is_empty() || word.bytes().any(|b| is_space(b) || b == b'"' || b == b'\'') {
        format!("{word:?}")
    } else {
        word.to_owned()
    }
}

/// Groups command-line words into directives following redis-server's `main`: a word
/// starting with `--` opens a directive (it may itself hold words, as in
/// `"--port 7000"`); the first word after a bare `--name` is its argument whatever it
/// looks like; later words are arguments until the next `--` word. A bare `--save`
/// followed by another `--` word or by nothing means `--save ""`.
fn group_directives(words: &[String]) -> Result<Vec<ArgDirective>, ConfigError> {
    let mut out: Vec<ArgDirective> = Vec::new();
    // Whether the directive being built already has what a bare name needs.
    let mut has_first_arg = true;
    for (i, word) in words.iter().enumerate() {
        let opens = has_first_arg && word.starts_with("--");
        if opens {
            let bad = |reason: &str| ConfigError::CommandLine {
                text: show_word(word),
                reason: reason.to_owned(),
            };
            let parts = split_args(&word.as_bytes()[2..])
                .ok_or_else(|| bad("unbalanced quotes in directive"))?;
            if parts.is_empty() {
                return Err(bad("a directive name must follow '--'"));
            }
            let mut directive = ArgDirective {
                shown: show_word(word),
                words: parts,
            };
            has_first_arg = directive.words.len() > 1;
            if !has_first_arg && word.eq_ignore_ascii_case("--save") {
                let next_opens = words.get(i + 1).is_none_or(|next| next.starts_with("--"));
                if next_opens {
                    directive.words.push(Vec::new());
                    directive.shown.push_str(" \"\"");
                    has_first_arg = true;
                }
            }
            out.push(directive);
        } else {
            let Some(directive) = out.last_mut() else {
                let reason = if word == "-" {
                    "reading the configuration from standard input is not supported"
                } else {
                    "expected a --directive (only the first argument may name a configuration file)"
                };
                return Err(ConfigError::CommandLine {
                    text: show_word(word),
                    reason: reason.to_owned(),
                });
            };
            directive.words.push(word.as_bytes().to_vec());
            directive.shown.push(' ');
            directive.shown.push_str(&show_word(word));
            has_first_arg = true;
        }
    }
    Ok(out)
}

/// Reads the command line of `strata-server`, program name included (pass
/// `std::env::args()` as it is): an optional configuration file first, then
/// `--directive value ...` overrides; `-v`/`--version` or `-h`/`--help` as the first
/// argument ask for the version or the usage instead.
///
/// The first argument is a configuration file unless it starts with `-`. Unknown
/// directives, bad values and unreadable files are errors whose Display is the message
/// to print before exiting.
pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Invocation, ConfigError> {
    let args: Vec<String> = args.into_iter().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => return Ok(Invocation::Version),
        Some("-h" | "--help") => return Ok(Invocation::Help),
        _ => {}
    }
    let (file, rest) = match args.split_first() {
        Some((first, rest)) if !first.starts_with('-') => (Some(PathBuf::from(first)), rest),
        _ => (None, &args[..]),
    };
    let overrides = group_directives(rest)?;
    let mut loader = Loader::new();
    let file = match file {
        Some(path) => {
            let text = std::fs::read(&path).map_err(|source| ConfigError::Open {
                path: path.clone(),
                source,
            })?;
            loader.apply_file(&path, &text)?;
            Some(std::path::absolute(&path).unwrap_or(path))
        }
        None => None,
    };
    for directive in &overrides {
        let Some((name, args)) = directive.words.split_first() else {
            continue;
        };
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        loader
            .apply(&name.to_ascii_lowercase(), &args)
            .map_err(|reason| ConfigError::CommandLine {
                text: directive.shown.clone(),
                reason,
            })?;
    }
    let source = ConfigSource {
        file,
        overrides: overrides.len(),
    };
    let config = loader.finish();
    if let Some(reason) = config.conflict() {
        return Err(ConfigError::Conflict(reason.to_string()));
    }
    Ok(Invocation::Serve { config, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Appendfsync, LogLevel, SavePoint};

    fn words(line: &str) -> Option<Vec<String>> {
        split_args(line.as_bytes()).map(|ws| {
            ws.into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect()
        })
    }

    #[test]
    fn split_args_follows_sdssplitargs() {
        assert_eq!(
            words("  port   6379 \t"),
            Some(vec!["port".into(), "6379".into()])
        );
        assert_eq!(words(""), Some(vec![]));
        assert_eq!(words("   "), Some(vec![]));
        assert_eq!(
            words(r#"a "b c" 'd e'"#),
            Some(vec!["a".into(), "b c".into(), "d e".into()])
        );
        assert_eq!(words(r#"x """#), Some(vec!["x".into(), "".into()]));
        assert_eq!(words("x ''"), Some(vec!["x".into(), "".into()]));
        assert_eq!(words(r#"ab"cd""#), Some(vec!["abcd".into()]));
        assert_eq!(words(r"'it\'s'"), Some(vec!["it's".into()]));
        assert_eq!(words(r"'a\nb'"), Some(vec![r"a\nb".into()]));
        assert_eq!(words(r#""\"q\" \\""#), Some(vec![r#""q" \"#.into()]));
        // A vertical tab separates words before a token but not inside one.
        assert_eq!(words("\x0ba\x0bb"), Some(vec!["a\x0bb".into()]));
    }

    #[test]
    fn split_args_escapes() {
        let got = split_args(br#""\n\r\t\b\a\x41\x7a\xZZ\q""#);
        assert_eq!(got, Some(vec![b"\n\r\t\x08\x07AzxZZq".to_vec()]));
        // An incomplete \x escape is a literal x after the backslash is dropped.
        assert_eq!(split_args(br#""\x4""#), Some(vec![b"x4".to_vec()]));
        assert_eq!(split_args(br#""\xff""#), Some(vec![vec![0xff]]));
        // A NUL byte ends the line, as in C.
        assert_eq!(
            split_args(b"a b\0c d"),
            Some(vec![b"a".to_vec(), b"b".to_vec()])
        );
    }

    #[test]
    fn split_args_rejects_unbalanced_quotes() {
        for line in [
            r#"a "b"#,
            r#"a "b"c"#,
            "a 'b",
            "a 'b'c",
            r#"a "b\""#,
            r#""\"#,
        ] {
            assert_eq!(words(line), None, "{line}");
        }
    }

    #[test]
    fn split_spaces_keeps_empty_pieces() {
        assert!(split_spaces(b"").is_empty());
        assert_eq!(split_spaces(b"3600 1"), vec![&b"3600"[..], b"1"]);
        assert_eq!(split_spaces(b"3600  1"), vec![&b"3600"[..], b"", b"1"]);
        assert_eq!(split_spaces(b"3600 "), vec![&b"3600"[..], b""]);
        assert_eq!(split_spaces(b" "), vec![&b""[..], b""]);
    }

    #[test]
    fn parse_integer_is_strict() {
        assert_eq!(parse_integer(b"0"), Some(0));
        assert_eq!(parse_integer(b"6379"), Some(6379));
        assert_eq!(parse_integer(b"-1"), Some(-1));
        assert_eq!(parse_integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_integer(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            "", "-", "+5", " 5", "5 ", "05", "-0", "00", "1e3", "abc", "5.0",
        ] {
            assert_eq!(parse_integer(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_integer(b"9223372036854775808"), None);
        assert_eq!(parse_integer(b"-9223372036854775809"), None);
        assert_eq!(parse_integer(b"99999999999999999999999"), None);
    }

    #[test]
    fn parse_c_long_is_strtoll() {
        assert_eq!(parse_c_long(b"3600"), Some(3600));
        assert_eq!(parse_c_long(b"+3600"), Some(3600));
        assert_eq!(parse_c_long(b" 3600"), Some(3600));
        assert_eq!(parse_c_long(b"-3"), Some(-3));
        assert_eq!(parse_c_long(b"007"), Some(7));
        assert_eq!(parse_c_long(b""), Some(0));
        assert_eq!(parse_c_long(b"99999999999999999999"), Some(i64::MAX));
        assert_eq!(parse_c_long(b"-99999999999999999999"), Some(i64::MIN));
        for bad in [" ", "-", "+", "3600 ", "1x", "x", "1.5"] {
            assert_eq!(parse_c_long(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn parse_memory_is_memtoull() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("100", 100),
            ("05", 5),
            ("5b", 5),
            ("5B", 5),
            ("1k", 1000),
            ("1K", 1000),
            ("1kb", 1024),
            ("1KB", 1024),
            ("1kB", 1024),
            ("1m", 1_000_000),
            ("1mb", 1 << 20),
            ("1g", 1_000_000_000),
            ("1gb", 1 << 30),
            ("10GB", 10 << 30),
            ("512mb", 512 << 20),
            ("", 0),
            ("kb", 0),
            ("18446744073709551615", u64::MAX),
            // Redis saturates a digit string that does not fit.
            ("18446744073709551616", u64::MAX),
            ("99999999999999999999999", u64::MAX),
        ];
        for &(text, want) in cases {
            assert_eq!(parse_memory(text.as_bytes()), Some(want), "{text:?}");
        }
        for bad in [
            "-1", "+5", " 5", "5 ", "1x", "1.5gb", "1tb", "1 kb", "abc", "1bb",
        ] {
            assert_eq!(parse_memory(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_memory("1".repeat(128).as_bytes()), None);
        // Redis 7.0 wraps here (18446744073709551615kb reads as 18446744073709550592);
        // strata refuses.
        assert_eq!(parse_memory(b"18446744073709551615kb"), None);
        assert_eq!(parse_memory(b"20000000000gb"), None);
    }

    #[test]
    fn parse_yes_no_ignores_case() {
        assert_eq!(parse_yes_no(b"yes"), Some(true));
        assert_eq!(parse_yes_no(b"YES"), Some(true));
        assert_eq!(parse_yes_no(b"No"), Some(false));
        for bad in ["", "y", "true", "1", "on", "yes "] {
            assert_eq!(parse_yes_no(bad.as_bytes()), None, "{bad:?}");
        }
    }

    fn load(text: &str) -> Result<Config, ConfigError> {
        let mut loader = Loader::new();
        loader.apply_file(Path::new("strata.conf"), text.as_bytes())?;
        Ok(loader.finish())
    }

    fn file_error(text: &str) -> (usize, String, String) {
        match load(text) {
            Err(ConfigError::File {
                line, text, reason, ..
            }) => (line, text, reason),
            other => panic!("expected a file error, got {other:?}"),
        }
    }

    #[test]
    fn file_comments_blank_lines_and_case() {
        let config = load(
            "# a comment\n\n   \t\n  # indented comment\r\nPORT 7000\r\n  maxmemory   1gb  \n\
             LogLevel WARNING\nrequirepass \"a b\\x41\"\nappendfsync 'always'\n",
        )
        .expect("valid file");
        assert_eq!(config.port, 7000);
        assert_eq!(config.maxmemory, 1 << 30);
        assert_eq!(config.loglevel, LogLevel::Warning);
        assert_eq!(config.requirepass.as_deref(), Some("a bA"));
        assert_eq!(config.appendfsync, Appendfsync::Always);
        // Later lines override earlier ones.
        assert_eq!(load("port 1\nport 2\n").expect("valid").port, 2);
    }

    #[test]
    fn file_errors_name_the_line() {
        assert_eq!(
            file_error("port 6379\nport abc\n"),
            (
                2,
                "port abc".into(),
                "argument couldn't be parsed into an integer".into()
            )
        );
        // A comment is only a comment at the start of a line, as in Redis.
        assert_eq!(
            file_error("\n\n\n\n  PORT 7000 # trailing"),
            (
                5,
                "PORT 7000 # trailing".into(),
                "wrong number of arguments".into()
            )
        );
        assert_eq!(
            file_error("requirepass \"abc\n"),
            (
                1,
                "requirepass \"abc".into(),
                "unbalanced quotes in configuration line".into()
            )
        );
        assert_eq!(file_error("foo bar").2, "unknown directive 'foo'");
        assert_eq!(file_error("port").2, "wrong number of arguments");
        assert_eq!(file_error("port 1 2").2, "wrong number of arguments");
        assert_eq!(file_error("save 3600").2, "Invalid save parameters");
        assert!(file_error("daemonize yes").2.contains("foreground"));
        let err = load("# x\nmaxmemory lots\n").expect_err("bad memory");
        assert_eq!(
            err.to_string(),
            "strata: bad configuration in strata.conf, line 2 ('maxmemory lots'): \
             argument must be a memory value"
        );
    }

    #[test]
    fn file_save_lines_accumulate() {
        let points = |pairs: &[(u64, u64)]| -> Vec<SavePoint> {
            pairs
                .iter()
                .map(|&(seconds, changes)| SavePoint { seconds, changes })
                .collect()
        };
        assert_eq!(load("port 1").expect("valid").save, Config::default().save);
        assert_eq!(
            load("save 900 1\nsave 300 10").expect("valid").save,
            points(&[(900, 1), (300, 10)])
        );
        assert_eq!(
            load("save \"900 1 300 10\"").expect("valid").save,
            points(&[(900, 1), (300, 10)])
        );
        assert_eq!(
            load("save 900 1\nsave \"\"").expect("valid").save,
            points(&[])
        );
        assert_eq!(
            load("save 900 1\nsave ''\nsave 60 5").expect("valid").save,
            points(&[(60, 5)])
        );
        // A bare `save` clears the defaults and adds nothing.
        assert_eq!(load("save").expect("valid").save, points(&[]));
    }

    #[test]
    fn file_multi_argument_directives_split_a_single_word() {
        let config = load("bind \"10.0.0.1 -::1\"\nclient-output-buffer-limit 'pubsub 1mb 2mb 3'")
            .expect("valid");
        assert_eq!(
            crate::config::directives::render(&config, "bind"),
            Some("10.0.0.1 -::1".into())
        );
        assert_eq!(config.client_output_buffer_limit[2].hard_bytes, 1 << 20);
        assert_eq!(load("bind").expect("valid").bind, vec![]);
        assert_eq!(load("bind \"\"").expect("valid").bind, vec![]);
    }

    fn run(args: &[&str]) -> Result<Invocation, ConfigError> {
        from_args(
            std::iter::once("strata-server")
                .chain(args.iter().copied())
                .map(String::from),
        )
    }

    fn serve(args: &[&str]) -> (Config, ConfigSource) {
        match run(args) {
            Ok(Invocation::Serve { config, source }) => (config, source),
            other => panic!("expected a configuration, got {other:?}"),
        }
    }

    fn arg_error(args: &[&str]) -> String {
        match run(args) {
            Err(e) => e.to_string(),
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn command_line_without_file() {
        let (config, source) = serve(&[]);
        assert_eq!(config, Config::default());
        assert_eq!(
            source,
            ConfigSource {
                file: None,
                overrides: 0
            }
        );
        let (config, source) =
            serve(&["--port", "7000", "--save", "", "--bind", "127.0.0.1", "::1"]);
        assert_eq!(config.port, 7000);
        assert!(config.save.is_empty());
        assert_eq!(
            crate::config::directives::render(&config, "bind"),
            Some("127.0.0.1 ::1".into())
        );
        assert_eq!(source.overrides, 3);
        assert_eq!(
            source.to_string(),
            "no configuration file given, using the defaults and 3 command-line directives"
        );
    }

    #[test]
    fn io_threads_default_to_one_under_appendfsync_always() {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let default = crate::config::default_io_threads(cpus);
        let threads = |args: &[&str]| serve(args).0.io_threads;
        assert_eq!(threads(&[]), default);
        assert_eq!(threads(&["--appendfsync", "always"]), 1);
        assert_eq!(threads(&["--appendfsync", "everysec"]), default);
        // Without the log, `always` makes no fsync.
        assert_eq!(
            threads(&["--appendonly", "no", "--appendfsync", "always"]),
            default
        );
        // A count given is kept, before or after the directive.
        assert_eq!(
            threads(&["--io-threads", "3", "--appendfsync", "always"]),
            3
        );
        assert_eq!(
            threads(&["--appendfsync", "always", "--io-threads", "2"]),
            2
        );
        let (config, _) = serve(&["--appendfsync", "always"]);
        assert!(config.io_threads_auto);
        assert_eq!(config.get("io-threads").as_deref(), Some("1"));
        assert!(!serve(&["--io-threads", "1"]).0.io_threads_auto);
    }

    #[test]
    fn command_line_follows_redis_grouping() {
        // `--save` alone, before another directive or at the end, means `--save ""`.
        assert!(serve(&["--save", "--port", "7000"]).0.save.is_empty());
        assert!(serve(&["--port", "7000", "--save"]).0.save.is_empty());
        // The first word after a bare name is its argument even if it starts with `--`.
        assert_eq!(
            serve(&["--requirepass", "--x", "--port", "1"])
                .0
                .requirepass
                .as_deref(),
            Some("--x")
        );
        // A directive and its value may come as one word; several words then follow.
        let (config, _) = serve(&["--port 7001", "--save 10 1", "20", "2"]);
        assert_eq!(config.port, 7001);
        assert_eq!(
            config.save,
            vec![
                SavePoint {
                    seconds: 10,
                    changes: 1
                },
                SavePoint {
                    seconds: 20,
                    changes: 2
                }
            ]
        );
        // Names are case-insensitive.
        assert_eq!(serve(&["--PORT", "7002"]).0.port, 7002);
        assert_eq!(serve(&["--hz", "1000"]).0.hz, 500);
    }

    #[test]
    fn command_line_errors() {
        assert_eq!(
            arg_error(&["--port", "abc"]),
            "strata: bad command-line directive '--port abc': argument couldn't be parsed into an integer"
        );
        assert_eq!(
            arg_error(&["--port", "6379", "6380"]),
            "strata: bad command-line directive '--port 6379 6380': wrong number of arguments"
        );
        assert_eq!(
            arg_error(&["--port"]),
            "strata: bad command-line directive '--port': wrong number of arguments"
        );
        assert_eq!(
            arg_error(&["--foo", "bar"]),
            "strata: bad command-line directive '--foo bar': unknown directive 'foo'"
        );
        assert_eq!(
            arg_error(&["--requirepass", "a b", ""]),
            "strata: bad command-line directive '--requirepass \"a b\" \"\"': wrong number of arguments"
        );
        assert!(
            arg_error(&["--port", "1", "--", "x"]).contains("a directive name must follow '--'")
        );
        assert!(arg_error(&["-"]).contains("standard input"));
        assert!(arg_error(&["-x"]).contains("expected a --directive"));
        // A second file name is not a directive.
        let dir = TempDir::new("second-file");
        let path = dir.write("a.conf", "port 1\n");
        assert!(arg_error(&[&path, "b.conf"]).contains("expected a --directive"));
        // --version only counts as the first argument.
        assert_eq!(
            arg_error(&["--port", "1", "--version"]),
            "strata: bad command-line directive '--version': unknown directive 'version'"
        );
    }

    #[test]
    fn version_and_help() {
        assert!(matches!(run(&["-v"]), Ok(Invocation::Version)));
        assert!(matches!(
            run(&["--version", "--port", "x"]),
            Ok(Invocation::Version)
        ));
        assert!(matches!(run(&["-h"]), Ok(Invocation::Help)));
        assert!(matches!(run(&["--help"]), Ok(Invocation::Help)));
        assert!(version().starts_with("strata server v="));
        assert!(usage("strata-server").starts_with("Usage: strata-server [/path/to/strata.conf]"));
    }

    /// A directory removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("strata-config-{tag}-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).expect("create temp dir");
            TempDir(path)
        }

        fn write(&self, name: &str, text: &str) -> String {
            let path = self.0.join(name);
            std::fs::write(&path, text).expect("write temp file");
            path.to_string_lossy().into_owned()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn command_line_applies_after_the_file() {
        let dir = TempDir::new("merge");
        let path = dir.write("strata.conf", "port 7000\nmaxmemory 1mb\nsave 900 1\n");
        let (config, source) = serve(&[&path, "--port", "7001", "--save", "60 100"]);
        assert_eq!(config.port, 7001);
        assert_eq!(config.maxmemory, 1 << 20);
        // As in Redis, save lines from the file and the command line accumulate.
        assert_eq!(
            config.save,
            vec![
                SavePoint {
                    seconds: 900,
                    changes: 1
                },
                SavePoint {
                    seconds: 60,
                    changes: 100
                }
            ]
        );
        assert_eq!(source.file.as_deref(), Some(Path::new(&path)));
        assert_eq!(source.overrides, 2);
        assert!(source.to_string().starts_with("configuration loaded from "));

        // A relative file name is reported as an absolute path.
        let relative = Path::new(&path).strip_prefix(std::env::current_dir().expect("cwd"));
        if let Ok(relative) = relative {
            let (_, source) = serve(&[&relative.to_string_lossy()]);
            assert!(source.file.is_some_and(|f| f.is_absolute()));
        }
    }

    #[test]
    fn command_line_file_errors() {
        let dir = TempDir::new("errors");
        let path = dir.write("strata.conf", "port 7000\n\nhz many\n");
        assert_eq!(
            arg_error(&[&path]),
            format!(
                "strata: bad configuration in {path}, line 3 ('hz many'): argument couldn't be parsed into an integer"
            )
        );
        let missing = dir.0.join("missing.conf").to_string_lossy().into_owned();
        let message = arg_error(&[&missing]);
        assert!(
            message.starts_with(&format!("strata: can't open config file {missing}: ")),
            "{message}"
        );
        // Command-line errors are found before the file is read.
        assert!(arg_error(&[&missing, "--", "x"]).contains("a directive name must follow"));
    }
}
