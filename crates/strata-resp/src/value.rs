//! Client-side RESP values: a streaming decoder and a canonical encoder.
//!
//! [`Value`] is any RESP2 or RESP3 element as a client sees it; tests, benchmarks and
//! the differential test against Redis read replies with [`decode`] and write requests
//! with [`encode_request`] or [`Value::encode`].
//!
//! [`decode`] reads one complete element from the front of a buffer, or reports that more
//! bytes are needed; it re-reads from the start on each call, which suits tests rather
//! than servers. Its [`Display`](std::fmt::Display) renders a value as `redis-cli` does.
//! [`scan`] finds where a value ends and its type without building it, for a load
//! generator that counts replies.
//!
//! Invariants:
//! - [`decode`] and [`scan`] never panic, whatever the input; [`scan`] never allocates
//!   and agrees with [`decode`] on every input (length, incompleteness, error) except
//!   nesting deeper than [`MAX_DEPTH`], which only [`decode`] refuses. [`decode`] allocates only for bytes present in
//!   the buffer (the capacity reserved from a declared count is bounded by the bytes
//!   left), and nesting deeper than [`MAX_DEPTH`] is an error, so recursion is bounded.
//! - `decode(encode(v)) == v` for every value, except a simple string holding `\r` or
//!   `\n`, which the encoder replaces by spaces as a server does.
//! - Doubles compare by bits (any NaN of one sign equals any other), so a value equals
//!   its round trip exactly, `-0` and `0` included.

#![deny(clippy::indexing_slicing)]

use std::fmt;

use crate::number::parse_i64;
use crate::reply::format_double;

/// The deepest nesting of aggregates [`decode`] accepts.
pub const MAX_DEPTH: usize = 512;

/// A RESP2 or RESP3 value.
#[derive(Clone)]
pub enum Value {
    /// `+text`.
    Simple(Vec<u8>),
    /// `-text` or the blob error `!len`: the text starts with the error code.
    Error(Vec<u8>),
    /// `:n`.
    Integer(i64),
    /// `$len` and the bytes.
    Bulk(Vec<u8>),
    /// RESP2's `$-1` or RESP3's `_`.
    Null,
    /// RESP2's `*-1`.
    NullArray,
    /// `*len`.
    Array(Vec<Value>),
    /// `%len`: key-value pairs in order.
    Map(Vec<(Value, Value)>),
    /// `~len`.
    Set(Vec<Value>),
    /// `,text`.
    Double(f64),
    /// `#t` or `#f`.
    Boolean(bool),
    /// `(digits`.
    BigNumber(Vec<u8>),
    /// `=len` and `fmt:text`.
    Verbatim {
        /// The three-letter format, such as `txt`.
        format: [u8; 3],
        /// The text after the `fmt:` prefix.
        text: Vec<u8>,
    },
    /// `>len`: an out-of-band message.
    Push(Vec<Value>),
    /// `|len` attributes and the value they describe.
    Attribute {
        /// The attribute pairs.
        attributes: Vec<(Value, Value)>,
        /// The value that followed them.
        value: Box<Value>,
    },
}

/// A malformed RESP value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The first byte names no RESP type.
    #[error("unknown RESP type byte {0:#04x}")]
    UnknownType(u8),
    /// A line does not end in `\r\n`, or bulk data is not followed by `\r\n`.
    #[error("expected CRLF")]
    ExpectedCrlf,
    /// A length or count that is not a canonical number, or is negative other than -1.
    #[error("invalid length")]
    InvalidLength,
    /// An integer that is not one.
    #[error("invalid integer")]
    InvalidInteger,
    /// A double that is not one.
    #[error("invalid double")]
    InvalidDouble,
    /// A boolean other than `t` or `f`.
    #[error("invalid boolean")]
    InvalidBoolean,
    /// A null with content.
    #[error("invalid null")]
    InvalidNull,
    /// A verbatim string without its `fmt:` prefix.
    #[error("invalid verbatim string")]
    InvalidVerbatim,
    /// Aggregates nested deeper than [`MAX_DEPTH`].
    #[error("nesting deeper than {MAX_DEPTH}")]
    TooDeep,
}

/// Decodes one value from the front of `buf`: `Ok(Some((value, consumed)))`, or
/// `Ok(None)` if `buf` holds only part of a value.
pub fn decode(buf: &[u8]) -> Result<Option<(Value, usize)>, DecodeError> {
    let mut reader = Reader { buf, pos: 0 };
    // The aggregates opened and not yet complete, innermost last. An explicit stack
    // rather than recursion keeps deep nesting off the call stack.
    let mut open: Vec<Open> = Vec::new();
    loop {
        let mut done = match more!(reader.element()?) {
            Element::Done(value) => value,
            Element::Open(aggregate) => {
                if open.len() >= MAX_DEPTH {
                    return Err(DecodeError::TooDeep);
                }
                let capacity = reader.capacity(aggregate.remaining());
                open.push(Open::new(aggregate, capacity));
                continue;
            }
        };
        // Hand the finished value to its parent, closing every aggregate it completes.
        loop {
            let Some(parent) = open.last_mut() else {
                return Ok(Some((done, reader.pos)));
            };
            match parent.add(done) {
                None => break,
                Some(closed) => {
                    open.pop();
                    done = closed;
                }
            }
        }
    }
}

/// Where one value ends, found without building it: what a load generator needs to
/// count replies without allocating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The bytes the value takes at the front of the buffer.
    pub len: usize,
    /// The first byte of the value, its type: `b'-'` or `b'!'` for an error, `b'|'`
    /// for a value with attributes.
    pub kind: u8,
}

impl Frame {
    /// Whether the value is an error.
    pub fn is_error(&self) -> bool {
        matches!(self.kind, b'-' | b'!')
    }

    /// Whether the value is a null (`$-1`, `*-1` or `_`), given the frame's bytes.
    pub fn is_null(&self, bytes: &[u8]) -> bool {
        matches!(
            bytes.get(..self.len),
            Some(b"$-1\r\n" | b"*-1\r\n" | b"_\r\n")
        )
    }
}

/// Measures one value at the front of `buf` as [`decode`] would read it, without
/// allocating: `Ok(Some(frame))` with the same length [`decode`] consumes, `Ok(None)`
/// if the value is incomplete, or the error [`decode`] reports. It keeps no stack (a
/// count of elements still due is enough), so unlike [`decode`] it has no nesting
/// limit.
pub fn scan(buf: &[u8]) -> Result<Option<Frame>, DecodeError> {
    let kind = *more!(buf.first());
    let mut reader = Reader { buf, pos: 0 };
    // Elements still to read before the value is complete.
    let mut due: usize = 1;
    while due > 0 {
        let opened = more!(reader.skip_element()?);
        due = (due - 1).saturating_add(opened);
    }
    Ok(Some(Frame {
        len: reader.pos,
        kind,
    }))
}

/// Appends a request as a client sends it: a multibulk array of bulk strings.
pub fn encode_request<'a, I>(args: I, out: &mut Vec<u8>)
where
    I: IntoIterator<Item = &'a [u8]>,
    I::IntoIter: ExactSizeIterator,
{
    let args = args.into_iter();
    write_header(out, b'*', args.len());
    for arg in args {
        write_blob(out, b'$', arg);
    }
}

/// Returns `Ok(None)` from the enclosing function when the value is incomplete.
macro_rules! more {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(None),
        }
    };
}
use more;

/// The header of an aggregate with at least one element to come.
#[derive(Debug, Clone, Copy)]
enum Aggregate {
    Array(usize),
    Set(usize),
    Push(usize),
    Map(usize),
    /// Attribute pairs, then the value they describe.
    Attribute(usize),
}

impl Aggregate {
    /// The number of elements to come (a pair counts two; an attribute's value one).
    fn remaining(self) -> usize {
        match self {
            Aggregate::Array(n) | Aggregate::Set(n) | Aggregate::Push(n) => n,
            Aggregate::Map(n) => n.saturating_mul(2),
            Aggregate::Attribute(n) => n.saturating_mul(2).saturating_add(1),
        }
    }
}

/// One element read: a complete value, or the header of an aggregate to fill.
enum Element {
    Done(Value),
    Open(Aggregate),
}

/// An aggregate being filled.
struct Open {
    kind: Aggregate,
    /// Elements still to come.
    remaining: usize,
    items: Vec<Value>,
}

impl Open {
    fn new(kind: Aggregate, capacity: usize) -> Open {
        Open {
            kind,
            remaining: kind.remaining(),
            items: Vec::with_capacity(capacity),
        }
    }

    /// Adds an element; returns the finished aggregate once the last one is in.
    fn add(&mut self, value: Value) -> Option<Value> {
        self.items.push(value);
        self.remaining = self.remaining.saturating_sub(1);
        if self.remaining > 0 {
            return None;
        }
        let items = std::mem::take(&mut self.items);
        Some(match self.kind {
            Aggregate::Array(_) => Value::Array(items),
            Aggregate::Set(_) => Value::Set(items),
            Aggregate::Push(_) => Value::Push(items),
            Aggregate::Map(_) => Value::Map(pairs(items).0),
            Aggregate::Attribute(_) => {
                let (attributes, value) = pairs(items);
                Value::Attribute {
                    attributes,
                    value: Box::new(value.unwrap_or(Value::Null)),
                }
            }
        })
    }
}

/// Groups values two by two; an odd last one is returned apart.
fn pairs(items: Vec<Value>) -> (Vec<(Value, Value)>, Option<Value>) {
    let mut pairs = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    loop {
        match (items.next(), items.next()) {
            (Some(key), Some(value)) => pairs.push((key, value)),
            (last, _) => return (pairs, last),
        }
    }
}

/// Reads elements from a buffer; `None` means incomplete.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn element(&mut self) -> Result<Option<Element>, DecodeError> {
        let kind = *more!(self.buf.get(self.pos));
        self.pos += 1;
        let value = match kind {
            b'+' => Value::Simple(more!(self.line()?).to_vec()),
            b'-' => Value::Error(more!(self.line()?).to_vec()),
            b':' => {
                Value::Integer(parse_i64(more!(self.line()?)).ok_or(DecodeError::InvalidInteger)?)
            }
            b'$' => match more!(self.length()?) {
                None => Value::Null,
                Some(len) => Value::Bulk(more!(self.blob(len)?).to_vec()),
            },
            b'!' => {
                let len = more!(self.length()?).ok_or(DecodeError::InvalidLength)?;
                Value::Error(more!(self.blob(len)?).to_vec())
            }
            b'=' => {
                let len = more!(self.length()?).ok_or(DecodeError::InvalidLength)?;
                match more!(self.blob(len)?) {
                    [a, b, c, b':', text @ ..] => Value::Verbatim {
                        format: [*a, *b, *c],
                        text: text.to_vec(),
                    },
                    _ => return Err(DecodeError::InvalidVerbatim),
                }
            }
            b'_' => match more!(self.line()?) {
                [] => Value::Null,
                _ => return Err(DecodeError::InvalidNull),
            },
            b',' => Value::Double(parse_double(more!(self.line()?))?),
            b'#' => match more!(self.line()?) {
                b"t" => Value::Boolean(true),
                b"f" => Value::Boolean(false),
                _ => return Err(DecodeError::InvalidBoolean),
            },
            b'(' => Value::BigNumber(more!(self.line()?).to_vec()),
            b'*' => match more!(self.length()?) {
                None => Value::NullArray,
                Some(0) => Value::Array(Vec::new()),
                Some(len) => return Ok(Some(Element::Open(Aggregate::Array(len)))),
            },
            b'~' | b'>' | b'%' | b'|' => {
                let len = more!(self.length()?).ok_or(DecodeError::InvalidLength)?;
                let aggregate = match kind {
                    b'~' => Aggregate::Set(len),
                    b'>' => Aggregate::Push(len),
                    b'%' => Aggregate::Map(len),
                    _ => Aggregate::Attribute(len),
                };
                match aggregate {
                    Aggregate::Set(0) => Value::Set(Vec::new()),
                    Aggregate::Push(0) => Value::Push(Vec::new()),
                    Aggregate::Map(0) => Value::Map(Vec::new()),
                    _ => return Ok(Some(Element::Open(aggregate))),
                }
            }
            other => return Err(DecodeError::UnknownType(other)),
        };
        Ok(Some(Element::Done(value)))
    }

    /// Reads one element as [`Reader::element`] does, checking it the same way but
    /// keeping nothing: `Some(n)` where `n` is the number of elements an aggregate
    /// header opens (0 for a complete element).
    fn skip_element(&mut self) -> Result<Option<usize>, DecodeError> {
        let kind = *more!(self.buf.get(self.pos));
        self.pos += 1;
        let opened = match kind {
            b'+' | b'-' | b'(' => {
                more!(self.line()?);
                0
            }
            b':' => {
                parse_i64(more!(self.line()?)).ok_or(DecodeError::InvalidInteger)?;
                0
            }
            b'$' => {
                if let Some(len) = more!(self.length()?) {
                    more!(self.blob(len)?);
                }
                0
            }
            b'!' => {
                let len = more!(self.length()?).ok_or(DecodeError::InvalidLength)?;
                more!(self.blob(len)?);
                0
            }
            b'=' => {
                let len = more!(self.length()?).ok_or(DecodeError::InvalidLength)?;
                match more!(self.blob(len)?) {
                    [_, _, _, b':', ..] => 0,
                    _ => return Err(DecodeError::InvalidVerbatim),
                }
            }
            b'_' => match more!(self.line()?) {
                [] => 0,
                _ => return Err(DecodeError::InvalidNull),
            },
            b',' => {
                parse_double(more!(self.line()?))?;
                0
            }
            b'#' => match more!(self.line()?) {
                b"t" | b"f" => 0,
                _ => return Err(DecodeError::InvalidBoolean),
            },
            b'*' => more!(self.length()?).unwrap_or(0),
            b'~' | b'>' => more!(self.length()?).ok_or(DecodeError::InvalidLength)?,
            b'%' => more!(self.length()?)
                .ok_or(DecodeError::InvalidLength)?
                .saturating_mul(2),
            // The attribute pairs and then the value they describe.
            b'|' => more!(self.length()?)
                .ok_or(DecodeError::InvalidLength)?
                .saturating_mul(2)
                .saturating_add(1),
            other => return Err(DecodeError::UnknownType(other)),
        };
        Ok(Some(opened))
    }

    /// The rest of the current line, up to `\r\n`, which is consumed.
    fn line(&mut self) -> Result<Option<&[u8]>, DecodeError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let newline = more!(memchr::memchr(b'\n', rest));
        let line = match rest.get(..newline) {
            Some([line @ .., b'\r']) => line,
            _ => return Err(DecodeError::ExpectedCrlf),
        };
        self.pos += newline + 1;
        Ok(Some(line))
    }

    /// A length line: `Some(None)` for -1, `Some(Some(n))` for n >= 0.
    fn length(&mut self) -> Result<Option<Option<usize>>, DecodeError> {
        let line = more!(self.line()?);
        match parse_i64(line) {
            Some(-1) => Ok(Some(None)),
            Some(n) => usize::try_from(n)
                .map(|n| Some(Some(n)))
                .map_err(|_| DecodeError::InvalidLength),
            None => Err(DecodeError::InvalidLength),
        }
    }

    /// `len` bytes followed by `\r\n`.
    fn blob(&mut self, len: usize) -> Result<Option<&[u8]>, DecodeError> {
        let end = self
            .pos
            .checked_add(len)
            .ok_or(DecodeError::InvalidLength)?;
        let data = more!(self.buf.get(self.pos..end));
        match self.buf.get(end..) {
            Some([b'\r', b'\n', ..]) => {}
            Some([] | [b'\r']) => return Ok(None),
            _ => return Err(DecodeError::ExpectedCrlf),
        }
        self.pos = end + 2;
        Ok(Some(data))
    }

    /// Room to reserve for `count` elements, bounded by the bytes left (an element
    /// takes at least three).
    fn capacity(&self, count: usize) -> usize {
        count.min(self.buf.len().saturating_sub(self.pos) / 3)
    }
}

fn parse_double(text: &[u8]) -> Result<f64, DecodeError> {
    std::str::from_utf8(text)
        .ok()
        .filter(|s| !s.is_empty() && !s.starts_with('+'))
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or(DecodeError::InvalidDouble)
}

impl Value {
    /// A bulk string.
    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Value {
        Value::Bulk(bytes.into())
    }

    /// A simple string.
    pub fn simple(text: impl Into<Vec<u8>>) -> Value {
        Value::Simple(text.into())
    }

    /// An error.
    pub fn error(text: impl Into<Vec<u8>>) -> Value {
        Value::Error(text.into())
    }

    /// An array of bulk strings: a request as a client sends it.
    pub fn command<I, A>(args: I) -> Value
    where
        I: IntoIterator<Item = A>,
        A: Into<Vec<u8>>,
    {
        Value::Array(args.into_iter().map(|a| Value::Bulk(a.into())).collect())
    }

    /// The bytes of a simple string, bulk string, verbatim string or big number.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Simple(b) | Value::Bulk(b) | Value::BigNumber(b) => Some(b),
            Value::Verbatim { text, .. } => Some(text),
            _ => None,
        }
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        matches!(self, Value::Error(_))
    }

    /// Appends the value's canonical RESP encoding: RESP3 forms for RESP3 types, `$-1`
    /// for [`Value::Null`] (every client reads it), and the blob error `!` for an error
    /// holding `\r` or `\n`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Value::Simple(text) => write_line(out, b'+', text),
            Value::Error(text) => {
                if memchr::memchr2(b'\r', b'\n', text).is_some() {
                    write_blob(out, b'!', text);
                } else {
                    write_line(out, b'-', text);
                }
            }
            Value::Integer(n) => {
                let mut digits = itoa::Buffer::new();
                write_line(out, b':', digits.format(*n).as_bytes());
            }
            Value::Bulk(bytes) => write_blob(out, b'$', bytes),
            Value::Null => out.extend_from_slice(b"$-1\r\n"),
            Value::NullArray => out.extend_from_slice(b"*-1\r\n"),
            Value::Array(items) => write_values(out, b'*', items),
            Value::Set(items) => write_values(out, b'~', items),
            Value::Push(items) => write_values(out, b'>', items),
            Value::Map(pairs) => write_pairs(out, b'%', pairs),
            Value::Double(value) => {
                out.push(b',');
                format_double(*value, out);
                out.extend_from_slice(b"\r\n");
            }
            Value::Boolean(value) => {
                out.extend_from_slice(if *value { b"#t\r\n" } else { b"#f\r\n" });
            }
            Value::BigNumber(digits) => write_line(out, b'(', digits),
            Value::Verbatim { format, text } => {
                write_header(out, b'=', text.len() + 4);
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            }
            Value::Attribute { attributes, value } => {
                write_pairs(out, b'|', attributes);
                value.encode(out);
            }
        }
    }

    /// The canonical encoding as a new vector.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

fn write_header(out: &mut Vec<u8>, prefix: u8, len: usize) {
    let mut digits = itoa::Buffer::new();
    write_line(out, prefix, digits.format(len).as_bytes());
}

fn write_line(out: &mut Vec<u8>, prefix: u8, text: &[u8]) {
    out.reserve(text.len() + 3);
    out.push(prefix);
    out.extend(
        text.iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

fn write_blob(out: &mut Vec<u8>, prefix: u8, bytes: &[u8]) {
    write_header(out, prefix, bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

fn write_values(out: &mut Vec<u8>, prefix: u8, items: &[Value]) {
    write_header(out, prefix, items.len());
    for item in items {
        item.encode(out);
    }
}

fn write_pairs(out: &mut Vec<u8>, prefix: u8, pairs: &[(Value, Value)]) {
    write_header(out, prefix, pairs.len());
    for (key, value) in pairs {
        key.encode(out);
        value.encode(out);
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        use Value::*;
        match (self, other) {
            (Simple(a), Simple(b))
            | (Error(a), Error(b))
            | (Bulk(a), Bulk(b))
            | (BigNumber(a), BigNumber(b)) => a == b,
            (Integer(a), Integer(b)) => a == b,
            (Null, Null) | (NullArray, NullArray) => true,
            (Array(a), Array(b)) | (Set(a), Set(b)) | (Push(a), Push(b)) => a == b,
            (Map(a), Map(b)) => a == b,
            (Double(a), Double(b)) => {
                a.to_bits() == b.to_bits()
                    || (a.is_nan() && b.is_nan() && a.is_sign_negative() == b.is_sign_negative())
            }
            (Boolean(a), Boolean(b)) => a == b,
            (
                Verbatim {
                    format: fa,
                    text: ta,
                },
                Verbatim {
                    format: fb,
                    text: tb,
                },
            ) => fa == fb && ta == tb,
            (
                Attribute {
                    attributes: aa,
                    value: va,
                },
                Attribute {
                    attributes: ab,
                    value: vb,
                },
            ) => aa == ab && va == vb,
            _ => false,
        }
    }
}

impl Eq for Value {}

/// Writes bytes as a Rust byte string literal would show them.
struct ByteStr<'a>(&'a [u8]);

impl fmt::Debug for ByteStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Simple(b) => f.debug_tuple("Simple").field(&ByteStr(b)).finish(),
            Value::Error(b) => f.debug_tuple("Error").field(&ByteStr(b)).finish(),
            Value::Integer(n) => f.debug_tuple("Integer").field(n).finish(),
            Value::Bulk(b) => f.debug_tuple("Bulk").field(&ByteStr(b)).finish(),
            Value::Null => f.write_str("Null"),
            Value::NullArray => f.write_str("NullArray"),
            Value::Array(items) => f.debug_tuple("Array").field(items).finish(),
            Value::Map(pairs) => f.debug_tuple("Map").field(pairs).finish(),
            Value::Set(items) => f.debug_tuple("Set").field(items).finish(),
            Value::Double(d) => f.debug_tuple("Double").field(d).finish(),
            Value::Boolean(b) => f.debug_tuple("Boolean").field(b).finish(),
            Value::BigNumber(b) => f.debug_tuple("BigNumber").field(&ByteStr(b)).finish(),
            Value::Verbatim { format, text } => f
                .debug_struct("Verbatim")
                .field("format", &ByteStr(format))
                .field("text", &ByteStr(text))
                .finish(),
            Value::Push(items) => f.debug_tuple("Push").field(items).finish(),
            Value::Attribute { attributes, value } => f
                .debug_struct("Attribute")
                .field("attributes", attributes)
                .field("value", value)
                .finish(),
        }
    }
}

/// Renders the value as `redis-cli` does on a terminal, without the final newline.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        render(self, "", &mut out);
        f.write_str(out.strip_suffix('\n').unwrap_or(&out))
    }
}

/// Appends `value` as `redis-cli`'s `cliFormatReplyTTY` would, each line ending in `\n`;
/// `prefix` indents the lines after the first of a nested aggregate.
fn render(value: &Value, prefix: &str, out: &mut String) {
    use std::fmt::Write as _;
    match value {
        Value::Simple(text) => {
            out.push_str(&String::from_utf8_lossy(text));
            out.push('\n');
        }
        Value::Error(text) => {
            let _ = writeln!(out, "(error) {}", String::from_utf8_lossy(text));
        }
        Value::Integer(n) => {
            let _ = writeln!(out, "(integer) {n}");
        }
        Value::Bulk(bytes) => {
            repr(bytes, out);
            out.push('\n');
        }
        Value::Verbatim { text, .. } => {
            out.push_str(&String::from_utf8_lossy(text));
            out.push('\n');
        }
        Value::Null | Value::NullArray => out.push_str("(nil)\n"),
        Value::Double(d) => {
            let mut text = Vec::new();
            format_double(*d, &mut text);
            let _ = writeln!(out, "(double) {}", String::from_utf8_lossy(&text));
        }
        Value::Boolean(b) => out.push_str(if *b { "(true)\n" } else { "(false)\n" }),
        Value::BigNumber(digits) => {
            let _ = writeln!(out, "(big number) {}", String::from_utf8_lossy(digits));
        }
        Value::Array(items) | Value::Push(items) => {
            render_items(
                items.iter().map(|v| (v, None)),
                items.len(),
                ')',
                prefix,
                out,
            );
        }
        Value::Set(items) => {
            render_items(
                items.iter().map(|v| (v, None)),
                items.len(),
                '~',
                prefix,
                out,
            );
        }
        Value::Map(pairs) => {
            let items = pairs.iter().map(|(k, v)| (k, Some(v)));
            render_items(items, pairs.len(), '#', prefix, out);
        }
        Value::Attribute { attributes, value } => {
            let items = attributes.iter().map(|(k, v)| (k, Some(v)));
            render_items(items, attributes.len(), '|', prefix, out);
            out.push_str(prefix);
            render(value, prefix, out);
        }
    }
}

fn render_items<'a>(
    items: impl Iterator<Item = (&'a Value, Option<&'a Value>)>,
    len: usize,
    separator: char,
    prefix: &str,
    out: &mut String,
) {
    use std::fmt::Write as _;
    if len == 0 {
        out.push_str(match separator {
            '#' => "(empty hash)\n",
            '~' => "(empty set)\n",
            ')' => "(empty array)\n",
            _ => "(empty aggregate type)\n",
        });
        return;
    }
    let width = len.to_string().len();
    let nested = format!("{prefix}{}", " ".repeat(width + 2));
    for (i, (key, value)) in items.enumerate() {
        let _ = write!(
            out,
            "{}{:>width$}{separator} ",
            if i == 0 { "" } else { prefix },
            i + 1
        );
        render(key, &nested, out);
        if let Some(value) = value {
            out.pop();
            out.push_str(" => ");
            render(value, &nested, out);
        }
    }
}

/// Appends `bytes` quoted as Redis's `sdscatrepr` does.
fn repr(bytes: &[u8], out: &mut String) {
    use std::fmt::Write as _;
    out.push('"');
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(input: &[u8]) -> Value {
        let (value, consumed) = decode(input).unwrap().unwrap();
        assert_eq!(consumed, input.len(), "{}", input.escape_ascii());
        value
    }

    #[test]
    fn decodes_resp2() {
        assert_eq!(dec(b"+OK\r\n"), Value::simple("OK"));
        assert_eq!(dec(b"-ERR no\r\n"), Value::error("ERR no"));
        assert_eq!(dec(b":-5\r\n"), Value::Integer(-5));
        assert_eq!(dec(b"$3\r\nfoo\r\n"), Value::bulk("foo"));
        assert_eq!(dec(b"$0\r\n\r\n"), Value::bulk(""));
        assert_eq!(dec(b"$-1\r\n"), Value::Null);
        assert_eq!(dec(b"*-1\r\n"), Value::NullArray);
        assert_eq!(
            dec(b"*2\r\n:1\r\n*1\r\n$1\r\na\r\n"),
            Value::Array(vec![
                Value::Integer(1),
                Value::Array(vec![Value::bulk("a")])
            ])
        );
    }

    #[test]
    fn decodes_resp3() {
        assert_eq!(dec(b"_\r\n"), Value::Null);
        assert_eq!(dec(b",1.5\r\n"), Value::Double(1.5));
        assert_eq!(dec(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
        assert_eq!(dec(b"#t\r\n"), Value::Boolean(true));
        assert_eq!(dec(b"(123\r\n"), Value::BigNumber(b"123".to_vec()));
        assert_eq!(dec(b"!3\r\nE\r\n\r\n"), Value::error("E\r\n"));
        assert_eq!(
            dec(b"=8\r\ntxt:abcd\r\n"),
            Value::Verbatim {
                format: *b"txt",
                text: b"abcd".to_vec()
            }
        );
        assert_eq!(
            dec(b"%1\r\n+k\r\n:1\r\n"),
            Value::Map(vec![(Value::simple("k"), Value::Integer(1))])
        );
        assert_eq!(
            dec(b"~1\r\n#f\r\n"),
            Value::Set(vec![Value::Boolean(false)])
        );
        assert_eq!(dec(b">1\r\n+m\r\n"), Value::Push(vec![Value::simple("m")]));
        assert_eq!(
            dec(b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n"),
            Value::Attribute {
                attributes: vec![(Value::simple("ttl"), Value::Integer(3))],
                value: Box::new(Value::bulk("v")),
            }
        );
    }

    #[test]
    fn incomplete_values() {
        let full = b"*2\r\n$3\r\nfoo\r\n%1\r\n+a\r\n,2.5\r\n";
        for end in 0..full.len() {
            assert_eq!(decode(&full[..end]), Ok(None), "{end}");
        }
        assert!(decode(full).unwrap().is_some());
    }

    #[test]
    fn malformed_values() {
        let cases: &[(&[u8], DecodeError)] = &[
            (b"?\r\n", DecodeError::UnknownType(b'?')),
            (b"+OK\n", DecodeError::ExpectedCrlf),
            (b"$3\r\nfooXY", DecodeError::ExpectedCrlf),
            (b"$-2\r\n", DecodeError::InvalidLength),
            (b"$01\r\n", DecodeError::InvalidLength),
            (b"~-1\r\n", DecodeError::InvalidLength),
            (b":1.5\r\n", DecodeError::InvalidInteger),
            (b",x\r\n", DecodeError::InvalidDouble),
            (b"#x\r\n", DecodeError::InvalidBoolean),
            (b"_x\r\n", DecodeError::InvalidNull),
            (b"=3\r\ntxt\r\n", DecodeError::InvalidVerbatim),
        ];
        for (input, error) in cases {
            assert_eq!(decode(input), Err(*error), "{}", input.escape_ascii());
        }
    }

    #[test]
    fn scan_agrees_with_decode() {
        let inputs: &[&[u8]] = &[
            b"+OK\r\n",
            b"-ERR no\r\n",
            b":-5\r\n",
            b"$3\r\nfoo\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"*2\r\n:1\r\n*1\r\n$1\r\na\r\n",
            b"%1\r\n+k\r\n:1\r\n",
            b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
            b"|0\r\n:1\r\n",
            b"=8\r\ntxt:abcd\r\n",
            b"~0\r\n>1\r\n+m\r\n",
            b"!3\r\nE\r\n\r\n",
            b"_\r\n#t\r\n,1.5\r\n(12\r\n",
            b"?\r\n",
            b"+OK\n",
            b"$3\r\nfooXY",
            b"$01\r\n",
            b":1.5\r\n",
            b",x\r\n",
            b"#x\r\n",
            b"_x\r\n",
            b"=3\r\ntxt\r\n",
            b"*2147483647\r\n:1\r\n",
        ];
        for input in inputs {
            for end in 0..=input.len() {
                let part = &input[..end];
                let decoded = decode(part).map(|d| d.map(|(_, n)| n));
                let scanned = scan(part).map(|f| f.map(|f| f.len));
                assert_eq!(scanned, decoded, "{}", part.escape_ascii());
            }
        }
    }

    #[test]
    fn scan_reports_kind_and_nulls() {
        let frame = scan(b"-ERR x\r\n+OK\r\n").unwrap().unwrap();
        assert_eq!(frame.len, 8);
        assert!(frame.is_error());
        let frame = scan(b"$-1\r\n").unwrap().unwrap();
        assert!(!frame.is_error() && frame.is_null(b"$-1\r\n"));
        let frame = scan(b"$2\r\nab\r\n").unwrap().unwrap();
        assert_eq!(frame.kind, b'$');
        assert!(!frame.is_null(b"$2\r\nab\r\n"));
        // No nesting limit: a stack of counts is not needed.
        let mut deep = b"*1\r\n".repeat(MAX_DEPTH * 4);
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(scan(&deep).unwrap().unwrap().len, deep.len());
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 1);
        assert_eq!(decode(&deep), Err(DecodeError::TooDeep));
        let mut ok = b"*1\r\n".repeat(MAX_DEPTH);
        ok.extend_from_slice(b":1\r\n");
        assert!(decode(&ok).unwrap().is_some());
    }

    #[test]
    fn a_huge_declared_count_allocates_nothing_up_front() {
        assert_eq!(decode(b"*2147483647\r\n:1\r\n"), Ok(None));
        assert_eq!(decode(b"$9223372036854775807\r\n"), Ok(None));
    }

    #[test]
    fn encodes_canonically() {
        let value = Value::Array(vec![
            Value::simple("OK"),
            Value::Null,
            Value::Double(0.1),
            Value::error("ERR a\nb"),
        ]);
        assert_eq!(
            value.to_bytes(),
            b"*4\r\n+OK\r\n$-1\r\n,0.10000000000000001\r\n!7\r\nERR a\nb\r\n"
        );
        assert_eq!(dec(&value.to_bytes()), value);
    }

    #[test]
    fn encodes_requests() {
        let mut out = Vec::new();
        encode_request([&b"GET"[..], b"k"], &mut out);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
        assert_eq!(dec(&out), Value::command(["GET", "k"]));
    }

    #[test]
    fn displays_like_redis_cli() {
        let value = Value::Array(vec![
            Value::bulk("a\"b\n"),
            Value::Integer(3),
            Value::Array(vec![Value::simple("x"), Value::Null]),
            Value::Map(vec![(Value::bulk("k"), Value::Double(1.5))]),
            Value::Array(vec![]),
        ]);
        assert_eq!(
            value.to_string(),
            "1) \"a\\\"b\\n\"\n2) (integer) 3\n3) 1) x\n   2) (nil)\n4) 1# \"k\" => (double) 1.5\n5) (empty array)"
        );
    }
}
