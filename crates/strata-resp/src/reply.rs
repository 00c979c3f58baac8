//! Reply encoder: RESP2 and RESP3 replies, appended to a byte vector.
//!
//! A [`ReplyWriter`] appends one RESP element per call to the connection's output
//! buffer, in the protocol the client chose with `HELLO`. Aggregates are written as a
//! header (`array(3)`) followed by their elements. RESP3-only types fall back to the
//! RESP2 form Redis 7.0 sends: a map becomes an array of twice its length, a set or a
//! push an array, a double a bulk string, a boolean the integer 1 or 0, a big number
//! or a verbatim string a bulk string, and both nulls their RESP2 forms (`$-1`, `*-1`).
//!
//! Invariants:
//! - Each call appends exactly one complete element (or aggregate header) and nothing
//!   else; the only allocation is the growth of the output vector.
//! - Simple strings and errors never contain `\r` or `\n`: each is replaced by a space,
//!   so a reply can never break the framing.
//! - Doubles are formatted as C's `%.17g`, the way Redis 7.0's `addReplyDouble` does.

#![deny(clippy::indexing_slicing)]

use std::fmt::Write as _;

/// The protocol a client speaks, chosen with `HELLO`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Protocol {
    /// RESP2, the default.
    #[default]
    Resp2,
    /// RESP3.
    Resp3,
}

/// `+OK`.
pub const OK: &[u8] = b"+OK\r\n";
/// `+PONG`.
pub const PONG: &[u8] = b"+PONG\r\n";
/// `+QUEUED`, the reply to a command queued in a transaction.
pub const QUEUED: &[u8] = b"+QUEUED\r\n";
/// The integer 0.
pub const ZERO: &[u8] = b":0\r\n";
/// The integer 1.
pub const ONE: &[u8] = b":1\r\n";
/// The empty bulk string.
pub const EMPTY_BULK: &[u8] = b"$0\r\n\r\n";
/// The empty array.
pub const EMPTY_ARRAY: &[u8] = b"*0\r\n";
/// RESP2's null bulk string.
pub const NULL_BULK: &[u8] = b"$-1\r\n";
/// RESP2's null array.
pub const NULL_ARRAY: &[u8] = b"*-1\r\n";
/// RESP3's null.
pub const NULL: &[u8] = b"_\r\n";

const CRLF: &[u8] = b"\r\n";

/// The kind of an aggregate whose length is written after its elements.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Aggregate {
    /// An array.
    Array,
    /// A map: the length counts pairs.
    Map,
    /// A set.
    Set,
    /// A push message.
    Push,
}

/// The place of an aggregate header to be written once its length is known; see
/// [`ReplyWriter::deferred`].
#[derive(Debug)]
#[must_use = "a deferred header must be completed with ReplyWriter::set_deferred_len"]
pub struct Deferred {
    at: usize,
    kind: Aggregate,
}

/// Appends RESP replies to an output buffer.
#[derive(Debug)]
pub struct ReplyWriter<'a> {
    out: &'a mut Vec<u8>,
    proto: Protocol,
}

impl<'a> ReplyWriter<'a> {
    /// A writer appending to `out` in protocol `proto`.
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        ReplyWriter { out, proto }
    }

    /// The protocol replies are written in.
    pub fn protocol(&self) -> Protocol {
        self.proto
    }

    /// Switches the protocol of the replies written from now on (HELLO, RESET).
    pub fn set_protocol(&mut self, proto: Protocol) {
        self.proto = proto;
    }

    /// Whether the client speaks RESP3.
    pub fn is_resp3(&self) -> bool {
        self.proto == Protocol::Resp3
    }

    /// The output buffer.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        self.out
    }

    /// Appends pre-encoded bytes, such as [`OK`].
    pub fn raw(&mut self, encoded: &[u8]) {
        self.out.extend_from_slice(encoded);
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.raw(OK);
    }

    /// A simple string: `+text`.
    pub fn simple(&mut self, text: &[u8]) {
        self.line(b'+', text);
    }

    /// An error: `-text`, where `text` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn error(&mut self, text: &[u8]) {
        self.line(b'-', text);
    }

    /// An integer: `:n`.
    pub fn integer(&mut self, n: i64) {
        // A single digit (the counts SADD, HSET, DEL and EXISTS mostly answer) is one
        // fixed four-byte copy.
        if let Ok(d @ 0..=9) = u8::try_from(n) {
            self.out.extend_from_slice(&[b':', b'0' + d, b'\r', b'\n']);
            return;
        }
        self.header(b':', n);
    }

    /// A bulk string: `$len` and the bytes.
    pub fn bulk(&mut self, bytes: &[u8]) {
        let mut digits = itoa::Buffer::new();
        let len = digits.format(bytes.len()).as_bytes();
        self.out.reserve(1 + len.len() + 2 + bytes.len() + 2);
        self.out.push(b'$');
        self.out.extend_from_slice(len);
        self.out.extend_from_slice(CRLF);
        self.out.extend_from_slice(bytes);
        self.out.extend_from_slice(CRLF);
    }

    /// An integer written as a bulk string, as Redis's `addReplyBulkLongLong`.
    pub fn bulk_i64(&mut self, n: i64) {
        let mut digits = itoa::Buffer::new();
        self.bulk(digits.format(n).as_bytes());
    }

    /// Bulk strings in an array: a fast path for the most common aggregate.
    pub fn bulks<'b, I>(&mut self, items: I)
    where
        I: IntoIterator<Item = &'b [u8]>,
        I::IntoIter: ExactSizeIterator,
    {
        let items = items.into_iter();
        self.array(items.len());
        for item in items {
            self.bulk(item);
        }
    }

    /// The null bulk string: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        self.raw(match self.proto {
            Protocol::Resp2 => NULL_BULK,
            Protocol::Resp3 => NULL,
        });
    }

    /// The null array: `*-1` in RESP2, `_` in RESP3.
    pub fn null_array(&mut self) {
        self.raw(match self.proto {
            Protocol::Resp2 => NULL_ARRAY,
            Protocol::Resp3 => NULL,
        });
    }

    /// The header of an array of `len` elements.
    pub fn array(&mut self, len: usize) {
        self.aggregate(Aggregate::Array, len);
    }

    /// The header of a map of `len` key-value pairs (RESP2: an array of `2 * len`).
    pub fn map(&mut self, len: usize) {
        self.aggregate(Aggregate::Map, len);
    }

    /// The header of a set of `len` elements (RESP2: an array).
    pub fn set(&mut self, len: usize) {
        self.aggregate(Aggregate::Set, len);
    }

    /// The header of a push message of `len` elements (RESP2: an array).
    pub fn push(&mut self, len: usize) {
        self.aggregate(Aggregate::Push, len);
    }

    /// The header of an aggregate of `len` elements (pairs, for a map).
    pub fn aggregate(&mut self, kind: Aggregate, len: usize) {
        let (prefix, len) = self.aggregate_header(kind, len);
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(len).as_bytes();
        self.out.reserve(1 + digits.len() + 2);
        self.out.push(prefix);
        self.out.extend_from_slice(digits);
        self.out.extend_from_slice(CRLF);
    }

    /// Marks the place of an aggregate header whose length is known only after its
    /// elements are written; [`ReplyWriter::set_deferred_len`] writes it there.
    pub fn deferred(&mut self, kind: Aggregate) -> Deferred {
        Deferred {
            at: self.out.len(),
            kind,
        }
    }

    /// Writes the header marked by `deferred`, for `len` elements (pairs, for a map).
    pub fn set_deferred_len(&mut self, deferred: Deferred, len: usize) {
        let (prefix, len) = self.aggregate_header(deferred.kind, len);
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(len).as_bytes();
        let at = deferred.at.min(self.out.len());
        let header = std::iter::once(prefix)
            .chain(digits.iter().copied())
            .chain(CRLF.iter().copied());
        self.out.splice(at..at, header);
    }

    /// A double: `,text` in RESP3, a bulk string in RESP2; see [`format_double`].
    pub fn double(&mut self, value: f64) {
        let mut text = DoubleText::new();
        text.format(value);
        match self.proto {
            Protocol::Resp2 => self.bulk(text.as_bytes()),
            Protocol::Resp3 => self.line(b',', text.as_bytes()),
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, value: bool) {
        self.raw(match (self.proto, value) {
            (Protocol::Resp2, true) => ONE,
            (Protocol::Resp2, false) => ZERO,
            (Protocol::Resp3, true) => b"#t\r\n",
            (Protocol::Resp3, false) => b"#f\r\n",
        });
    }

    /// A big number, given as its decimal digits: `(digits` in RESP3, a bulk string in
    /// RESP2.
    pub fn big_number(&mut self, digits: &[u8]) {
        match self.proto {
            Protocol::Resp2 => self.bulk(digits),
            Protocol::Resp3 => self.line(b'(', digits),
        }
    }

    /// A verbatim string of a three-letter format (`txt`, `mkd`): `=len\r\nfmt:text` in
    /// RESP3, a bulk string of the text alone in RESP2.
    pub fn verbatim(&mut self, format: &[u8; 3], text: &[u8]) {
        match self.proto {
            Protocol::Resp2 => self.bulk(text),
            Protocol::Resp3 => {
                let mut digits = itoa::Buffer::new();
                let len = digits.format(text.len() + 4).as_bytes();
                self.out.reserve(1 + len.len() + 2 + 4 + text.len() + 2);
                self.out.push(b'=');
                self.out.extend_from_slice(len);
                self.out.extend_from_slice(CRLF);
                self.out.extend_from_slice(format);
                self.out.push(b':');
                self.out.extend_from_slice(text);
                self.out.extend_from_slice(CRLF);
            }
        }
    }

    /// The wire prefix and length of an aggregate header in this protocol.
    fn aggregate_header(&self, kind: Aggregate, len: usize) -> (u8, usize) {
        match (self.proto, kind) {
            (Protocol::Resp2, Aggregate::Map) => (b'*', len.saturating_mul(2)),
            (Protocol::Resp2, _) | (Protocol::Resp3, Aggregate::Array) => (b'*', len),
            (Protocol::Resp3, Aggregate::Map) => (b'%', len),
            (Protocol::Resp3, Aggregate::Set) => (b'~', len),
            (Protocol::Resp3, Aggregate::Push) => (b'>', len),
        }
    }

    /// `prefix`, a number, CRLF.
    fn header(&mut self, prefix: u8, n: i64) {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n).as_bytes();
        self.out.reserve(1 + digits.len() + 2);
        self.out.push(prefix);
        self.out.extend_from_slice(digits);
        self.out.extend_from_slice(CRLF);
    }

    /// `prefix`, `text` with `\r` and `\n` replaced by spaces, CRLF.
    fn line(&mut self, prefix: u8, text: &[u8]) {
        self.out.reserve(1 + text.len() + 2);
        self.out.push(prefix);
        if memchr::memchr2(b'\r', b'\n', text).is_none() {
            self.out.extend_from_slice(text);
        } else {
            self.out.extend(
                text.iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
        }
        self.out.extend_from_slice(CRLF);
    }
}

/// Appends `value` formatted as C's `printf("%.17g")`, the text of a double in Redis
/// 7.0 replies: `0.1` is `0.10000000000000001`, `1.0` is `1`, `1e20` is `1e+20`, `1.5e-7`
/// is `1.4999999999999999e-07`. Infinities are `inf` and `-inf`, NaN is `nan` or `-nan`
/// by its sign, as glibc prints them.
pub fn format_double(value: f64, out: &mut Vec<u8>) {
    let mut text = DoubleText::new();
    text.format(value);
    out.extend_from_slice(text.as_bytes());
}

/// The longest `%.17g` text: sign, 17 digits, point, `e-308`.
const DOUBLE_TEXT_MAX: usize = 32;

/// A stack buffer holding a formatted double.
struct DoubleText {
    buf: [u8; DOUBLE_TEXT_MAX],
    len: usize,
}

impl std::fmt::Write for DoubleText {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.push(s.as_bytes()) {
            Ok(())
        } else {
            Err(std::fmt::Error)
        }
    }
}

impl DoubleText {
    fn new() -> Self {
        DoubleText {
            buf: [0; DOUBLE_TEXT_MAX],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }

    /// Appends `bytes`, or returns false if they do not fit (no `%.17g` text is that
    /// long).
    fn push(&mut self, bytes: &[u8]) -> bool {
        let end = self.len + bytes.len();
        match self.buf.get_mut(self.len..end) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = end;
                true
            }
            None => false,
        }
    }

    /// Formats `value` as `%.17g`.
    fn format(&mut self, value: f64) {
        self.len = 0;
        if value.is_nan() {
            self.push(if value.is_sign_negative() {
                b"-nan"
            } else {
                b"nan"
            });
            return;
        }
        if value.is_infinite() {
            self.push(if value > 0.0 { b"inf" } else { b"-inf" });
            return;
        }
        // Rust's exact formatting rounds the binary value correctly, ties to even, as
        // glibc does; `{:.16e}` gives the 17 significant digits and the exponent after
        // rounding, which `%g` needs to choose its style.
        let mut sci = DoubleText::new();
        if write!(sci, "{value:.16e}").is_err() {
            return;
        }
        let sci = sci.as_bytes();
        let (negative, sci) = match sci.split_first() {
            Some((b'-', rest)) => (true, rest),
            _ => (false, sci),
        };
        let Some(e) = sci.iter().position(|&b| b == b'e') else {
            return;
        };
        let (mantissa, exponent) = sci.split_at(e);
        let exponent = parse_exponent(exponent.get(1..).unwrap_or_default());
        let mut digits = [b'0'; 17];
        for (dst, &src) in digits
            .iter_mut()
            .zip(mantissa.iter().filter(|b| b.is_ascii_digit()))
        {
            *dst = src;
        }

        if negative {
            self.push(b"-");
        }
        if (-4..17).contains(&exponent) {
            // Fixed notation with 17 significant digits, trailing zeros removed.
            if exponent >= 0 {
                let (int, frac) = digits.split_at(exponent.unsigned_abs() as usize + 1);
                self.push(int);
                self.push_fraction(frac);
            } else {
                self.push(b"0.");
                for _ in 0..exponent.unsigned_abs() - 1 {
                    self.push(b"0");
                }
                self.push(trim_zeros(&digits));
            }
        } else {
            let (first, frac) = digits.split_at(1);
            self.push(first);
            self.push_fraction(frac);
            self.push(if exponent < 0 { b"e-" } else { b"e+" });
            if exponent.unsigned_abs() < 10 {
                self.push(b"0");
            }
            let mut n = itoa::Buffer::new();
            self.push(n.format(exponent.unsigned_abs()).as_bytes());
        }
    }

    /// Appends `.` and `frac` without its trailing zeros, or nothing if that is empty.
    fn push_fraction(&mut self, frac: &[u8]) {
        let frac = trim_zeros(frac);
        if !frac.is_empty() {
            self.push(b".");
            self.push(frac);
        }
    }
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let end = digits.iter().rposition(|&b| b != b'0').map_or(0, |i| i + 1);
    digits.get(..end).unwrap_or_default()
}

/// Parses the exponent Rust writes after `e` (`20`, `-7`).
fn parse_exponent(text: &[u8]) -> i32 {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let magnitude = digits
        .iter()
        .fold(0i32, |n, &d| n * 10 + i32::from(d.wrapping_sub(b'0')));
    if negative { -magnitude } else { magnitude }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(proto: Protocol, f: impl FnOnce(&mut ReplyWriter<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut ReplyWriter::new(&mut out, proto));
        out
    }

    fn both(f: impl Fn(&mut ReplyWriter<'_>)) -> (Vec<u8>, Vec<u8>) {
        (write(Protocol::Resp2, &f), write(Protocol::Resp3, &f))
    }

    fn fmt(value: f64) -> String {
        let mut out = Vec::new();
        format_double(value, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn formats_doubles_as_percent_17g() {
        let cases: &[(f64, &str)] = &[
            (0.1, "0.10000000000000001"),
            (1.0, "1"),
            (1e20, "1e+20"),
            (1.5e-7, "1.4999999999999999e-07"),
            (-0.0, "-0"),
            (0.0, "0"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1.0000000000000001e-05"),
            (2.5, "2.5"),
            (-3.25, "-3.25"),
            (123456.789, "123456.789"),
            // An exact tie at the 18th digit rounds to even, as glibc does.
            (125_000_000_000_000.0 + 0.125, "125000000000000.12"),
            (5e-324, "4.9406564584124654e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (-f64::NAN, "-nan"),
        ];
        for &(value, text) in cases {
            assert_eq!(fmt(value), text, "{value:e}");
        }
    }

    #[test]
    fn replies_in_both_protocols() {
        assert_eq!(both(|w| w.null()), (b"$-1\r\n".to_vec(), b"_\r\n".to_vec()));
        assert_eq!(
            both(|w| w.null_array()),
            (b"*-1\r\n".to_vec(), b"_\r\n".to_vec())
        );
        assert_eq!(both(|w| w.map(2)), (b"*4\r\n".to_vec(), b"%2\r\n".to_vec()));
        assert_eq!(both(|w| w.set(2)), (b"*2\r\n".to_vec(), b"~2\r\n".to_vec()));
        assert_eq!(
            both(|w| w.push(3)),
            (b"*3\r\n".to_vec(), b">3\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.double(1.5)),
            (b"$3\r\n1.5\r\n".to_vec(), b",1.5\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.double(f64::NEG_INFINITY)),
            (b"$4\r\n-inf\r\n".to_vec(), b",-inf\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.boolean(true)),
            (b":1\r\n".to_vec(), b"#t\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.boolean(false)),
            (b":0\r\n".to_vec(), b"#f\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.big_number(b"12345")),
            (b"$5\r\n12345\r\n".to_vec(), b"(12345\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.verbatim(b"txt", b"hi")),
            (b"$2\r\nhi\r\n".to_vec(), b"=6\r\ntxt:hi\r\n".to_vec())
        );
    }

    #[test]
    fn scalars() {
        let out = write(Protocol::Resp2, |w| {
            w.simple(b"OK");
            w.error(b"ERR bad\r\nthing");
            w.integer(-42);
            w.bulk(b"foo");
            w.bulk(b"");
            w.bulk_i64(i64::MIN);
        });
        assert_eq!(
            out,
            b"+OK\r\n-ERR bad  thing\r\n:-42\r\n$3\r\nfoo\r\n$0\r\n\r\n$20\r\n-9223372036854775808\r\n"
        );
    }

    #[test]
    fn integers_around_the_single_digits() {
        for n in [i64::MIN, -10, -1, 0, 1, 9, 10, 99, i64::MAX] {
            let out = write(Protocol::Resp2, |w| w.integer(n));
            assert_eq!(out, format!(":{n}\r\n").into_bytes());
        }
    }

    #[test]
    fn deferred_headers() {
        let out = write(Protocol::Resp2, |w| {
            w.bulk(b"before");
            let d = w.deferred(Aggregate::Map);
            w.bulk(b"k");
            w.integer(1);
            w.set_deferred_len(d, 1);
        });
        assert_eq!(out, b"$6\r\nbefore\r\n*2\r\n$1\r\nk\r\n:1\r\n");
        let out = write(Protocol::Resp3, |w| {
            let d = w.deferred(Aggregate::Set);
            w.set_deferred_len(d, 0);
        });
        assert_eq!(out, b"~0\r\n");
    }

    #[test]
    fn bulks_fast_path() {
        let out = write(Protocol::Resp3, |w| w.bulks([&b"a"[..], b"bc"]));
        assert_eq!(out, b"*2\r\n$1\r\na\r\n$2\r\nbc\r\n");
    }
}
