//! Command templates: a request with placeholders, expanded once per request.
//!
//! A template is written as a command line (`HSET h:__key__ f __value__`), split into
//! arguments as `redis-cli` and Redis's inline protocol split them (double and single
//! quotes work). Inside any argument:
//! - `__key__` becomes the request's key, twelve zero-padded digits;
//! - `__value__` becomes the request's value (its size from `--data-size`);
//! - `__rand__` becomes a uniformly random number in the key space, twelve digits.
//!
//! Every placeholder of one request names the same key and value. The built-in
//! commands (`set`, `get`, `incr`, ...) are templates too, each on keys of its own
//! prefix so that types never clash (`SET key:...`, `LPUSH list:...`).
//!
//! Invariant: expanding a template allocates nothing once its scratch buffers have
//! grown to the largest request; the bytes appended are exactly what
//! [`strata_resp::encode_request`] makes of the expanded arguments.

use std::ops::Range;

use strata_resp::encode_request;
use strata_resp::inline::split_args;

use crate::Error;
use crate::keys::write_padded;

/// One piece of an argument.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    Key,
    Value,
    Rand,
}

/// A parsed command template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The name shown in reports: the command, upper case (`SET`, `LRANGE_100`).
    pub label: String,
    /// The template as written.
    pub text: String,
    args: Vec<Vec<Piece>>,
}

/// The built-in commands, by the name `--ratio` uses, with their templates. Their
/// keys follow redis-benchmark's choice of one type per key prefix.
pub const BUILTINS: &[(&str, &str)] = &[
    ("ping", "PING"),
    ("set", "SET key:__key__ __value__"),
    ("get", "GET key:__key__"),
    ("del", "DEL key:__key__"),
    ("exists", "EXISTS key:__key__"),
    ("mset", "MSET key:__key__ __value__"),
    ("incr", "INCR counter:__key__"),
    ("lpush", "LPUSH list:__key__ __value__"),
    ("rpush", "RPUSH list:__key__ __value__"),
    ("lpop", "LPOP list:__key__"),
    ("rpop", "RPOP list:__key__"),
    ("lrange_100", "LRANGE list:__key__ 0 99"),
    ("sadd", "SADD set:__key__ member:__rand__"),
    ("spop", "SPOP set:__key__"),
    ("hset", "HSET hash:__key__ field:__rand__ __value__"),
    ("zadd", "ZADD zset:__key__ __rand__ member:__rand__"),
];

/// Reusable buffers for expanding templates: the expanded arguments back to back,
/// and where each one lies.
#[derive(Debug, Default)]
pub struct Scratch {
    bytes: Vec<u8>,
    args: Vec<Range<usize>>,
}

impl Template {
    /// Parses a template written as a command line.
    pub fn parse(text: &str) -> Result<Template, Error> {
        let words = split_args(text.as_bytes())
            .map_err(|_| Error::Usage(format!("unbalanced quotes in command '{text}'")))?;
        let Some(first) = words.first() else {
            return Err(Error::Usage("an empty command template".into()));
        };
        let label = String::from_utf8_lossy(first).to_ascii_uppercase();
        Ok(Template {
            label,
            text: text.to_string(),
            args: words.iter().map(|w| pieces(w)).collect(),
        })
    }

    /// The built-in command of this name (`set`, `lrange_100`, ...), any case.
    pub fn builtin(name: &str) -> Option<Template> {
        let name = name.to_ascii_lowercase();
        let (_, text) = BUILTINS.iter().find(|(n, _)| *n == name)?;
        let mut template = Template::parse(text).ok()?;
        template.label = name.to_ascii_uppercase();
        Some(template)
    }

    /// Whether any argument names `__value__`.
    pub fn uses_value(&self) -> bool {
        self.args.iter().flatten().any(|p| *p == Piece::Value)
    }

    /// Appends one request to `out`: the template with `key`, `value` and `rand` put in.
    #[inline]
    pub fn expand(
        &self,
        key: u64,
        value: &[u8],
        rand: u64,
        scratch: &mut Scratch,
        out: &mut Vec<u8>,
    ) {
        scratch.bytes.clear();
        scratch.args.clear();
        for arg in &self.args {
            let start = scratch.bytes.len();
            for piece in arg {
                match piece {
                    Piece::Text(text) => scratch.bytes.extend_from_slice(text),
                    Piece::Key => write_padded(key, &mut scratch.bytes),
                    Piece::Value => scratch.bytes.extend_from_slice(value),
                    Piece::Rand => write_padded(rand, &mut scratch.bytes),
                }
            }
            scratch.args.push(start..scratch.bytes.len());
        }
        let bytes = &scratch.bytes;
        encode_request(
            scratch
                .args
                .iter()
                .map(|range| bytes.get(range.clone()).unwrap_or_default()),
            out,
        );
    }
}

/// Cuts one argument into text and placeholders.
fn pieces(word: &[u8]) -> Vec<Piece> {
    const PLACEHOLDERS: [(&[u8], Piece); 3] = [
        (b"__key__", Piece::Key),
        (b"__value__", Piece::Value),
        (b"__rand__", Piece::Rand),
    ];
    let mut out = Vec::new();
    let mut text = Vec::new();
    let mut rest = word;
    'scan: while let Some((&first, tail)) = rest.split_first() {
        for (name, piece) in &PLACEHOLDERS {
            if let Some(after) = rest.strip_prefix(*name) {
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(piece.clone());
                rest = after;
                continue 'scan;
            }
        }
        text.push(first);
        rest = tail;
    }
    if !text.is_empty() || out.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(t: &Template, key: u64, value: &[u8], rand: u64) -> Vec<u8> {
        let mut out = Vec::new();
        t.expand(key, value, rand, &mut Scratch::default(), &mut out);
        out
    }

    fn request(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_request(args.iter().map(|a| a.as_bytes()), &mut out);
        out
    }

    #[test]
    fn expands_placeholders_anywhere_in_an_argument() {
        let t = Template::parse("HSET h:__key__ f __value__").unwrap();
        assert_eq!(t.label, "HSET");
        assert!(t.uses_value());
        assert_eq!(
            expand(&t, 42, b"xyz", 0),
            request(&["HSET", "h:000000000042", "f", "xyz"])
        );
        let t = Template::parse("SET __key__:__rand__:__key__ a__value__b").unwrap();
        assert_eq!(
            expand(&t, 1, b"V", 2),
            request(&["SET", "000000000001:000000000002:000000000001", "aVb"])
        );
    }

    #[test]
    fn quotes_and_empty_arguments_follow_redis_cli() {
        let t = Template::parse(r#"SET "a key __key__" '' "#).unwrap();
        assert!(!t.uses_value());
        assert_eq!(
            expand(&t, 7, b"", 0),
            request(&["SET", "a key 000000000007", ""])
        );
        let t = Template::parse("SET k __value__").unwrap();
        assert_eq!(expand(&t, 0, b"", 0), request(&["SET", "k", ""]));
    }

    #[test]
    fn near_misses_stay_text() {
        let t = Template::parse("GET __key_ _key__ __KEY__ ____key__").unwrap();
        assert_eq!(
            expand(&t, 3, b"", 0),
            request(&["GET", "__key_", "_key__", "__KEY__", "__000000000003"])
        );
    }

    #[test]
    fn bad_templates_are_refused() {
        assert!(Template::parse("").is_err());
        assert!(Template::parse("   ").is_err());
        assert!(Template::parse("SET \"open").is_err());
    }

    #[test]
    fn builtins_parse_and_name_themselves() {
        for (name, _) in BUILTINS {
            let t = Template::builtin(name).unwrap();
            assert_eq!(t.label, name.to_ascii_uppercase());
        }
        assert_eq!(Template::builtin("LRANGE_100").unwrap().label, "LRANGE_100");
        assert!(Template::builtin("nosuch").is_none());
        let set = Template::builtin("set").unwrap();
        assert_eq!(
            expand(&set, 5, b"abc", 0),
            request(&["SET", "key:000000000005", "abc"])
        );
    }

    #[test]
    fn scratch_is_reused_across_requests() {
        let t = Template::builtin("hset").unwrap();
        let mut scratch = Scratch::default();
        let mut out = Vec::new();
        t.expand(1, b"0123456789", 2, &mut scratch, &mut out);
        let capacity = (scratch.bytes.capacity(), scratch.args.capacity());
        out.clear();
        for k in 0..100 {
            t.expand(k, b"0123456789", k, &mut scratch, &mut out);
        }
        assert_eq!(
            (scratch.bytes.capacity(), scratch.args.capacity()),
            capacity
        );
        assert_eq!(out.len(), 100 * expand(&t, 0, b"0123456789", 0).len());
    }
}
