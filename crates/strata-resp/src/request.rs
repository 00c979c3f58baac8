//! Server-side request parser: RESP multibulk and inline requests, incrementally.
//!
//! A connection keeps one read buffer and one [`RequestParser`]. The server calls
//! [`RequestParser::parse`] on the front of the buffer after every read; each call
//! returns at most one request. A request that starts with `*` is a multibulk request
//! (`*<count>\r\n` then `count` times `$<len>\r\n<bytes>\r\n`); anything else is an
//! inline request, one line split by Redis's `sdssplitargs` rules (see [`crate::inline`]).
//!
//! Redis 7.0's `processMultibulkBuffer` and `processInlineBuffer` are the specification,
//! quirks included:
//! - a header line ends at the first `\r`, and the byte after it is skipped whatever it
//!   is; likewise the two bytes after a bulk's data are skipped unchecked;
//! - the search for a line end stops at a NUL byte (Redis uses `strchr`), so a line with
//!   a NUL before its end is never complete and becomes a "too big" error once more than
//!   [`Limits::max_inline_len`] bytes are buffered;
//! - the "too big" limits apply only while no line end has arrived: how much arrives in
//!   one read decides whether a long line is an error, as in Redis;
//! - counts and lengths are parsed as strictly as `string2ll` (no `+`, no leading zeros);
//! - a count of zero or less, and an inline line with no arguments, are skipped;
//! - an inline argument may be empty (`""`), and is kept.
//!
//! Invariants:
//! - Never panics and never allocates by a length read from the input before the bytes
//!   are there (capacity is reserved for at most 1024 arguments up front).
//! - Work is linear in the bytes received, however the request is split across calls:
//!   the parser keeps the position reached, how far the current line has been searched,
//!   and the ranges of the arguments read so far.
//! - Multibulk arguments are never copied: [`RequestParser::args`] returns subslices of
//!   the caller's buffer. Inline arguments, which need unescaping, live in a scratch
//!   buffer owned by the parser.

#![deny(clippy::indexing_slicing)]

use std::ops::Range;

use crate::inline;
use crate::number::parse_i64;

/// Redis's `proto-max-bulk-len` default: 512 MiB.
pub const DEFAULT_MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Redis's multibulk count limit: `INT_MAX`.
pub const DEFAULT_MAX_MULTIBULK_LEN: usize = i32::MAX as usize;
/// Redis's `PROTO_INLINE_MAX_SIZE`: 64 KiB.
pub const DEFAULT_MAX_INLINE_LEN: usize = 64 * 1024;
/// The largest multibulk count an unauthenticated client may send.
pub const UNAUTHENTICATED_MAX_MULTIBULK_LEN: usize = 10;
/// The largest bulk length an unauthenticated client may send.
pub const UNAUTHENTICATED_MAX_BULK_LEN: usize = 16 * 1024;

/// The most argument slots reserved from a multibulk count before the arguments arrive.
const MAX_PREALLOCATED_ARGS: usize = 1024;

/// Size limits on requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest bulk argument (`proto-max-bulk-len`).
    pub max_bulk_len: usize,
    /// The largest multibulk count.
    pub max_multibulk_len: usize,
    /// How many bytes may be buffered without a line end, for an inline request and for
    /// the header lines of a multibulk request (`PROTO_INLINE_MAX_SIZE`).
    pub max_inline_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bulk_len: DEFAULT_MAX_BULK_LEN,
            max_multibulk_len: DEFAULT_MAX_MULTIBULK_LEN,
            max_inline_len: DEFAULT_MAX_INLINE_LEN,
        }
    }
}

/// The outcome of one [`RequestParser::parse`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// A request was read from the first `consumed` bytes; its arguments are in
    /// [`RequestParser::args`].
    Complete { consumed: usize },
    /// The first `consumed` bytes hold nothing to run (`*0\r\n`, `*-1\r\n`, a blank
    /// inline line); drop them and parse again.
    Skip { consumed: usize },
    /// More bytes are needed. `hint`, when known, is how many bytes the buffer must hold
    /// for the request to make progress (the end of a bulk argument), so the caller can
    /// reserve once for a large argument.
    Incomplete { hint: Option<usize> },
}

/// A malformed request. The server answers `-ERR <Display>` and closes the connection.
///
/// `Display` renders exactly Redis's text after `ERR `, except for the byte in
/// [`ProtocolError::ExpectedDollar`], which Redis sends raw: [`ProtocolError::to_bytes`]
/// gives the exact bytes in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// No `\r` within [`Limits::max_inline_len`] bytes of a multibulk count.
    #[error("Protocol error: too big mbulk count string")]
    MultibulkCountTooBig,
    /// A multibulk count that is not a number or exceeds [`Limits::max_multibulk_len`].
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// A multibulk count over 10 from a client that has not authenticated.
    #[error("Protocol error: unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// No `\r` within [`Limits::max_inline_len`] bytes of a bulk length.
    #[error("Protocol error: too big bulk count string")]
    BulkCountTooBig,
    /// An element of a multibulk request that does not start with `$`; holds the byte
    /// found (`\r` and `\n` are rendered as a space, as Redis does).
    #[error("Protocol error: expected '$', got '{}'", char::from(printable(*.0)))]
    ExpectedDollar(u8),
    /// A bulk length that is not a number, is negative, or exceeds
    /// [`Limits::max_bulk_len`].
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// A bulk length over 16384 from a client that has not authenticated.
    #[error("Protocol error: unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// No `\n` within [`Limits::max_inline_len`] bytes of an inline request.
    #[error("Protocol error: too big inline request")]
    InlineTooBig,
    /// An inline request with an open quote or a closing quote not followed by a blank.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
}

impl ProtocolError {
    /// The exact bytes Redis sends after `-ERR `, without the line end.
    pub fn to_bytes(&self) -> Vec<u8> {
        match *self {
            ProtocolError::ExpectedDollar(b) => {
                let mut text = b"Protocol error: expected '$', got '".to_vec();
                text.push(printable(b));
                text.push(b'\'');
                text
            }
            ref other => other.to_string().into_bytes(),
        }
    }
}

/// Redis replaces `\r` and `\n` in an error text by spaces.
fn printable(b: u8) -> u8 {
    if b == b'\r' || b == b'\n' { b' ' } else { b }
}

/// Where the parser is within the request at the front of the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No request started: the next call looks at the first byte.
    Idle,
    /// Reading the `*<count>\r\n` line.
    MultibulkCount,
    /// Reading a `$<len>\r\n` line; `remaining` arguments are still to come.
    BulkLength { remaining: usize },
    /// Waiting for `len` bytes of argument data plus two, from `pos`.
    BulkData { remaining: usize, len: usize },
    /// Reading an inline line.
    Inline,
}

/// Which buffer the arguments of the last completed request live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArgsIn {
    None,
    Buffer,
    Scratch,
}

/// The result of searching for a line end.
enum Line {
    /// The line end is at this offset.
    Found(usize),
    /// Not yet.
    Pending,
    /// Not found within the limit.
    TooLong,
}

/// An incremental parser of client requests. See the module documentation.
#[derive(Debug, Clone)]
pub struct RequestParser {
    limits: Limits,
    authenticated: bool,
    state: State,
    /// Offset of the first byte of the request not yet parsed.
    pos: usize,
    /// Offset up to which the current line has been searched without finding its end.
    scanned: usize,
    /// A NUL byte precedes the end of the current line, which therefore never ends.
    nul: bool,
    /// Ranges of the arguments read so far, in the buffer or in `scratch`.
    ranges: Vec<Range<usize>>,
    /// The unescaped arguments of an inline request.
    scratch: Vec<u8>,
    args_in: ArgsIn,
}

impl RequestParser {
    /// A parser for a client that counts as authenticated (a server without a password).
    pub fn new(limits: Limits) -> Self {
        RequestParser {
            limits,
            authenticated: true,
            state: State::Idle,
            pos: 0,
            scanned: 0,
            nul: false,
            ranges: Vec::new(),
            scratch: Vec::new(),
            args_in: ArgsIn::None,
        }
    }

    /// Changes the limits; they apply from the next line read.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Sets whether the client has authenticated. An unauthenticated client may send at
    /// most 10 arguments of at most 16384 bytes each, as in Redis.
    pub fn set_authenticated(&mut self, yes: bool) {
        self.authenticated = yes;
    }

    /// Whether a request has been partly read.
    pub fn is_mid_request(&self) -> bool {
        self.state != State::Idle
    }

    /// Parses the request at the front of `buf`.
    ///
    /// `buf` must start with the same bytes as in the previous call until that call
    /// returned [`Parsed::Complete`] or [`Parsed::Skip`]: while [`Parsed::Incomplete`],
    /// the caller only appends; after `Complete`/`Skip`, the next call gets the bytes after
    /// `consumed`. A buffer that breaks this rule yields wrong arguments but no panic.
    ///
    /// After an error the parser is reset; the connection is expected to close.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        if self.state == State::Idle {
            // A connection keeps its parser: after an unusually large request, give the
            // argument slots back rather than hold them for the connection's life.
            if self.ranges.capacity() > 4 * MAX_PREALLOCATED_ARGS {
                self.ranges = Vec::new();
            }
            self.ranges.clear();
            self.args_in = ArgsIn::None;
            self.pos = 0;
            self.new_line();
            if let Some(consumed) = self.parse_plain(buf) {
                self.args_in = ArgsIn::Buffer;
                return Ok(Parsed::Complete { consumed });
            }
            self.state = match buf.first() {
                None => return Ok(Parsed::Incomplete { hint: None }),
                Some(b'*') => State::MultibulkCount,
                Some(_) => State::Inline,
            };
        }
        let result = if self.state == State::Inline {
            self.parse_inline(buf)
        } else {
            self.parse_multibulk(buf)
        };
        if result.is_err() {
            self.reset();
        }
        result
    }

    /// Forgets any partly read request.
    pub fn reset(&mut self) {
        self.state = State::Idle;
        self.ranges.clear();
        self.args_in = ArgsIn::None;
        self.pos = 0;
        self.new_line();
    }

    /// The arguments of the request just completed, valid until the next `parse` call.
    /// `buf` must be the buffer given to the `parse` call that returned
    /// [`Parsed::Complete`]. After any other outcome the arguments are empty.
    pub fn args<'a>(&'a self, buf: &'a [u8]) -> Args<'a> {
        let (base, ranges): (&[u8], &[Range<usize>]) = match self.args_in {
            ArgsIn::None => (&[], &[]),
            ArgsIn::Buffer => (buf, &self.ranges),
            ArgsIn::Scratch => (&self.scratch, &self.ranges),
        };
        Args { base, ranges }
    }

    /// The ranges of the arguments of the request just completed within the buffer given
    /// to `parse`, when they lie there (multibulk requests), so that a caller holding the
    /// buffer as shared bytes can keep arguments without copying them. `None` for an
    /// inline request, whose arguments live in the parser, and after any outcome other
    /// than [`Parsed::Complete`].
    pub fn buffer_ranges(&self) -> Option<&[Range<usize>]> {
        match self.args_in {
            ArgsIn::Buffer => Some(&self.ranges),
            ArgsIn::None | ArgsIn::Scratch => None,
        }
    }

    /// Reads a complete multibulk request at the front of `buf` in one pass, if it
    /// is in the plain form clients send (numbers without sign or leading zero, each
    /// line and argument ended by `\r\n`) and within every limit; its length, with
    /// its argument ranges in `ranges`. `None` (and no ranges) for anything else,
    /// which the state machine then reads as before: it accepts every request this
    /// accepts, with the same ranges, and says what is wrong with the others.
    /// It walks the request as [`peek_args`] does, written out: through that
    /// function's closure the walk cost 70 to 90 more instructions a request.
    #[inline]
    fn parse_plain(&mut self, buf: &[u8]) -> Option<usize> {
        if buf.first() != Some(&b'*') {
            return None;
        }
        let (count, mut at) = peek_number(buf, 1)?;
        let (max_count, max_len) = self.plain_limits();
        if count == 0 || count > max_count {
            return None;
        }
        self.ranges.reserve(count.min(MAX_PREALLOCATED_ARGS));
        for _ in 0..count {
            let arg = (buf.get(at) == Some(&b'$'))
                .then(|| peek_number(buf, at + 1))
                .flatten()
                .filter(|&(len, _)| len <= max_len)
                .and_then(|(len, start)| {
                    let end = start.checked_add(len)?;
                    (buf.get(end..end.checked_add(2)?) == Some(b"\r\n")).then_some(start..end)
                });
            let Some(arg) = arg else {
                self.ranges.clear();
                return None;
            };
            at = arg.end + 2;
            self.ranges.push(arg);
        }
        Some(at)
    }

    /// The most arguments, and the longest argument, a request may have now.
    #[inline]
    fn plain_limits(&self) -> (usize, usize) {
        if self.authenticated {
            (self.limits.max_multibulk_len, self.limits.max_bulk_len)
        } else {
            (
                self.limits
                    .max_multibulk_len
                    .min(UNAUTHENTICATED_MAX_MULTIBULK_LEN),
                self.limits.max_bulk_len.min(UNAUTHENTICATED_MAX_BULK_LEN),
            )
        }
    }

    /// Takes the request at the front of the buffer as [`peek_args`] read it, so
    /// that a pipeline's look-ahead and the parser read each request once: `len`
    /// bytes, whose arguments lie at `ranges` from its front. The caller vouches
    /// that these are what `peek_args` gave for the bytes now at the front of the
    /// buffer it next passes to [`RequestParser::args`]. `None`, with nothing taken,
    /// when the parser is in the middle of a request or a limit refuses the request:
    /// [`RequestParser::parse`] must then read it (and say what is wrong).
    #[inline]
    pub fn take_peeked(&mut self, len: usize, ranges: &[Range<usize>]) -> Option<Parsed> {
        if self.state != State::Idle || ranges.is_empty() {
            return None;
        }
        let (max_count, max_len) = self.plain_limits();
        if ranges.len() > max_count || ranges.iter().any(|r| r.len() > max_len) {
            return None;
        }
        if self.ranges.capacity() > 4 * MAX_PREALLOCATED_ARGS {
            self.ranges = Vec::new();
        }
        self.ranges.clear();
        self.ranges.extend_from_slice(ranges);
        self.args_in = ArgsIn::Buffer;
        self.pos = 0;
        self.new_line();
        Some(Parsed::Complete { consumed: len })
    }

    fn parse_multibulk(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        loop {
            match self.state {
                State::MultibulkCount => {
                    let Some((count, cr)) = self.header(
                        buf,
                        b'*',
                        ProtocolError::MultibulkCountTooBig,
                        ProtocolError::InvalidMultibulkLength,
                    )?
                    else {
                        return Ok(Parsed::Incomplete { hint: None });
                    };
                    if count > to_i64(self.limits.max_multibulk_len) {
                        return Err(ProtocolError::InvalidMultibulkLength);
                    }
                    if !self.authenticated && count > to_i64(UNAUTHENTICATED_MAX_MULTIBULK_LEN) {
                        return Err(ProtocolError::UnauthenticatedMultibulkLength);
                    }
                    self.pos = cr + 2;
                    self.new_line();
                    let Ok(remaining @ 1..) = usize::try_from(count) else {
                        self.state = State::Idle;
                        return Ok(Parsed::Skip { consumed: self.pos });
                    };
                    self.ranges.reserve(remaining.min(MAX_PREALLOCATED_ARGS));
                    self.state = State::BulkLength { remaining };
                }
                State::BulkLength { remaining } => {
                    let Some((len, cr)) = self.header(
                        buf,
                        b'$',
                        ProtocolError::BulkCountTooBig,
                        ProtocolError::InvalidBulkLength,
                    )?
                    else {
                        return Ok(Parsed::Incomplete { hint: None });
                    };
                    if len < 0 || len > to_i64(self.limits.max_bulk_len) {
                        return Err(ProtocolError::InvalidBulkLength);
                    }
                    if !self.authenticated && len > to_i64(UNAUTHENTICATED_MAX_BULK_LEN) {
                        return Err(ProtocolError::UnauthenticatedBulkLength);
                    }
                    let len = usize::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
                    self.pos = cr + 2;
                    self.new_line();
                    self.state = State::BulkData { remaining, len };
                }
                State::BulkData { remaining, len } => {
                    let end = self.pos.saturating_add(len);
                    let needed = end.saturating_add(2);
                    if buf.len() < needed {
                        return Ok(Parsed::Incomplete { hint: Some(needed) });
                    }
                    self.ranges.push(self.pos..end);
                    self.pos = needed;
                    self.scanned = needed;
                    if remaining > 1 {
                        self.state = State::BulkLength {
                            remaining: remaining - 1,
                        };
                    } else {
                        self.state = State::Idle;
                        self.args_in = ArgsIn::Buffer;
                        return Ok(Parsed::Complete { consumed: self.pos });
                    }
                }
                // `parse` calls this only in the states above.
                State::Idle | State::Inline => return Ok(Parsed::Incomplete { hint: None }),
            }
        }
    }

    fn parse_inline(&mut self, buf: &[u8]) -> Result<Parsed, ProtocolError> {
        let newline = match self.find_line_end(buf, b'\n') {
            Line::Found(newline) => newline,
            Line::Pending => return Ok(Parsed::Incomplete { hint: None }),
            Line::TooLong => return Err(ProtocolError::InlineTooBig),
        };
        let mut end = newline;
        if newline > 0 && buf.get(newline - 1) == Some(&b'\r') {
            end -= 1;
        }
        let line = buf.get(..end).unwrap_or_default();
        self.scratch.clear();
        self.ranges.clear();
        inline::split_into(line, &mut self.scratch, &mut self.ranges)
            .map_err(|_| ProtocolError::UnbalancedQuotes)?;
        self.state = State::Idle;
        let consumed = newline + 1;
        if self.ranges.is_empty() {
            Ok(Parsed::Skip { consumed })
        } else {
            self.args_in = ArgsIn::Scratch;
            Ok(Parsed::Complete { consumed })
        }
    }

    /// The number of the header line at `pos`, which starts with `kind` (`*` or
    /// `$`), and where its `\r` is; `None` until the line is complete. A plain line
    /// is read in one pass ([`quick_number`]); any other goes the general way: find
    /// its end (`too_long` past the limit), check its first byte (a multibulk
    /// count's is `*` by construction), parse its number (`invalid` if it is not
    /// one).
    #[inline(always)]
    fn header(
        &mut self,
        buf: &[u8],
        kind: u8,
        too_long: ProtocolError,
        invalid: ProtocolError,
    ) -> Result<Option<(i64, usize)>, ProtocolError> {
        if buf.get(self.pos) == Some(&kind)
            && let Some(found) = quick_number(buf, self.pos + 1)
        {
            return Ok(Some(found));
        }
        let cr = match self.find_line_end(buf, b'\r') {
            Line::Found(cr) => cr,
            Line::Pending => return Ok(None),
            Line::TooLong => return Err(too_long),
        };
        match buf.get(self.pos) {
            Some(&b) if b == kind => {}
            Some(&other) => return Err(ProtocolError::ExpectedDollar(other)),
            None => return Ok(None),
        }
        let n = buf
            .get(self.pos + 1..cr)
            .and_then(parse_i64)
            .ok_or(invalid)?;
        Ok(Some((n, cr)))
    }

    /// Starts the search for a new line end at `pos`.
    fn new_line(&mut self) {
        self.scanned = self.pos;
        self.nul = false;
    }

    /// Searches for the end of the line starting at `pos`, resuming where the previous
    /// call stopped. For `\r` (header lines) one more byte must follow it, as Redis
    /// requires; for `\n` (inline lines) none.
    fn find_line_end(&mut self, buf: &[u8], end: u8) -> Line {
        if !self.nul {
            let from = self.scanned.max(self.pos);
            let found = buf
                .get(from..)
                .and_then(|rest| find_end_or_nul(end, rest))
                .map(|offset| from + offset);
            match found {
                Some(at) if buf.get(at) == Some(&0) => {
                    self.nul = true;
                    self.scanned = at;
                }
                Some(at) => {
                    self.scanned = at;
                    if end == b'\n' || at + 1 < buf.len() {
                        return Line::Found(at);
                    }
                    return Line::Pending;
                }
                None => self.scanned = buf.len().max(from),
            }
        }
        if buf.len().saturating_sub(self.pos) > self.limits.max_inline_len {
            Line::TooLong
        } else {
            Line::Pending
        }
    }
}

/// The number of a header line (`*3`, `$5`) whose digits start at `from`, and where
/// its `\r` is, read in one pass when the line is plain: one to eighteen digits
/// without a leading zero, then `\r` and at least one more byte. That is what the
/// general path ([`RequestParser::find_line_end`] then [`parse_i64`]) finds for such
/// a line; `None` leaves every other line (signs, zeros, long or partial lines, bad
/// bytes) to it.
#[inline]
fn quick_number(buf: &[u8], from: usize) -> Option<(i64, usize)> {
    let digits = buf.get(from..)?;
    let mut n: i64 = 0;
    for (i, &b) in digits.iter().enumerate().take(19) {
        if b.is_ascii_digit() {
            if i == 18 {
                return None;
            }
            n = n * 10 + i64::from(b - b'0');
            continue;
        }
        let plain = b == b'\r' && i > 0 && (i == 1 || digits.first() != Some(&b'0'));
        return (plain && from + i + 1 < buf.len()).then_some((n, from + i));
    }
    None
}

/// The length of the complete multibulk request at the front of `buf`, read
/// without parsing for real, each argument given to `f` with its index: for
/// looking ahead in a pipeline. `None` when the front is not a complete request in
/// the plain form clients send (the parser says what it is when its turn comes);
/// the arguments before the point where that showed have been given to `f` too.
#[inline]
pub fn peek_args<'a>(buf: &'a [u8], mut f: impl FnMut(usize, &'a [u8])) -> Option<usize> {
    if buf.first() != Some(&b'*') {
        return None;
    }
    let (count, mut at) = peek_number(buf, 1)?;
    for i in 0..count {
        if buf.get(at) != Some(&b'$') {
            return None;
        }
        let (len, start) = peek_number(buf, at + 1)?;
        let end = start.checked_add(len)?;
        if buf.get(end..end.checked_add(2)?) != Some(b"\r\n") {
            return None;
        }
        f(i, buf.get(start..end)?);
        at = end + 2;
    }
    Some(at)
}

/// The plain decimal number (no sign, no leading zero, at most 18 digits) at
/// `from` in `buf` and where its line ends (after its `\r\n`), for
/// [`peek_args`]: a byte loop with no iterator to set up, since a header's
/// number is a digit or two.
#[inline]
fn peek_number(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut n = 0usize;
    let mut at = from;
    loop {
        let d = buf.get(at)?.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        // Wrapping: a number too long is refused below, not read.
        n = n.wrapping_mul(10).wrapping_add(usize::from(d));
        at += 1;
    }
    let digits = at - from;
    let plain = digits == 1 || (digits > 1 && digits <= 18 && buf.get(from) != Some(&b'0'));
    (plain && buf.get(at..at + 2) == Some(b"\r\n")).then_some((n, at + 2))
}

/// The offset of the first `end` or NUL byte in `rest`. Header lines (`*3`, `$5`)
/// are a few bytes long: a plain loop finds their end in a few instructions, where
/// `memchr2`'s vector setup costs some fifty per call (a pipelined GET has three
/// such lines); longer lines (inline commands) go to `memchr2`.
#[inline]
fn find_end_or_nul(end: u8, rest: &[u8]) -> Option<usize> {
    const SHORT: usize = 16;
    let head = rest.get(..SHORT).unwrap_or(rest);
    if let Some(at) = head.iter().position(|&b| b == end || b == 0) {
        return Some(at);
    }
    let tail = rest.get(SHORT..)?;
    memchr::memchr2(end, 0, tail).map(|at| SHORT + at)
}

impl Default for RequestParser {
    fn default() -> Self {
        RequestParser::new(Limits::default())
    }
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The arguments of a parsed request.
#[derive(Debug, Clone, Copy)]
pub struct Args<'a> {
    base: &'a [u8],
    ranges: &'a [Range<usize>],
}

impl<'a> Args<'a> {
    /// The number of arguments.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether there are no arguments.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The argument at `index`.
    pub fn get(&self, index: usize) -> Option<&'a [u8]> {
        let range = self.ranges.get(index)?.clone();
        self.base.get(range)
    }

    /// The arguments in order.
    pub fn iter(&self) -> ArgsIter<'a> {
        ArgsIter {
            base: self.base,
            ranges: self.ranges.iter(),
        }
    }

    /// Copies the arguments out.
    pub fn to_vec(&self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }
}

impl<'a> IntoIterator for Args<'a> {
    type Item = &'a [u8];
    type IntoIter = ArgsIter<'a>;

    fn into_iter(self) -> ArgsIter<'a> {
        self.iter()
    }
}

/// An iterator over [`Args`].
#[derive(Debug, Clone)]
pub struct ArgsIter<'a> {
    base: &'a [u8],
    ranges: std::slice::Iter<'a, Range<usize>>,
}

impl<'a> Iterator for ArgsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let range = self.ranges.next()?.clone();
        Some(self.base.get(range).unwrap_or_default())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.ranges.size_hint()
    }
}

impl DoubleEndedIterator for ArgsIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let range = self.ranges.next_back()?.clone();
        Some(self.base.get(range).unwrap_or_default())
    }
}

impl ExactSizeIterator for ArgsIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let mut parser = RequestParser::default();
        let mut requests = Vec::new();
        let mut buf = input;
        loop {
            match parser.parse(buf)? {
                Parsed::Complete { consumed } => {
                    requests.push(parser.args(buf).to_vec());
                    buf = &buf[consumed..];
                }
                Parsed::Skip { consumed } => buf = &buf[consumed..],
                Parsed::Incomplete { .. } => return Ok(requests),
            }
        }
    }

    fn v(args: &[&[u8]]) -> Vec<Vec<u8>> {
        args.iter().map(|a| a.to_vec()).collect()
    }

    /// [`peek_args`]'s length and second argument.
    fn peek_request(buf: &[u8]) -> Option<(usize, Option<&[u8]>)> {
        let mut key = None;
        let len = peek_args(buf, |i, arg| {
            if i == 1 {
                key = Some(arg);
            }
        })?;
        Some((len, key))
    }

    /// Looking ahead finds what the parser finds in a complete request (its length
    /// and second argument), and nothing in a request cut short or malformed.
    #[test]
    fn peeking_agrees_with_the_parser() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2_000 {
            let count = (next() % 5) as usize;
            let args: Vec<Vec<u8>> = (0..count)
                .map(|_| {
                    let len = (next() % 12) as usize;
                    (0..len)
                        .map(|_| b"a\r\n$*0"[(next() % 6) as usize])
                        .collect()
                })
                .collect();
            let mut wire = Vec::new();
            crate::encode_request(args.iter().map(|a| a.as_slice()), &mut wire);
            let whole = wire.len();
            wire.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
            let mut parser = RequestParser::default();
            let (consumed, key) = match parser.parse(&wire) {
                Ok(Parsed::Complete { consumed }) => (consumed, parser.args(&wire).get(1)),
                Ok(Parsed::Skip { consumed }) => (consumed, None),
                other => panic!("{other:?} for {args:?}"),
            };
            assert_eq!(consumed, whole);
            assert_eq!(peek_request(&wire), Some((whole, key)), "{args:?}");
            for cut in 0..whole {
                assert_eq!(peek_request(&wire[..cut]), None, "{args:?} cut at {cut}");
            }
        }
        for bad in [
            &b"PING\r\n"[..],
            b"*-1\r\n",
            b"*1\r\n:5\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$1\r\nab\r\n",
            b"*1\n$1\r\na\r\n",
            b"*01\r\n$1\r\na\r\n",
            b"*99999999999999999999\r\n",
            b"*1\r\n$99999999999999999\r\nab\r\n",
        ] {
            assert_eq!(
                peek_request(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// The quick path reads exactly what the general one does, or leaves the line
    /// to it.
    #[test]
    fn quick_numbers_agree_with_the_general_path() {
        let general = |line: &[u8]| -> Option<(i64, usize)> {
            let cr = line.iter().position(|&b| b == b'\r' || b == 0)?;
            (line[cr] == b'\r' && cr + 1 < line.len())
                .then(|| parse_i64(&line[1..cr]).map(|n| (n, cr)))
                .flatten()
        };
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for digits in [
            "",
            "0",
            "00",
            "01",
            "7",
            "10",
            "-1",
            "-0",
            "+1",
            "1a",
            "12 ",
            "999999999999999999",
            "1000000000000000000",
            "9223372036854775807",
            "99999999999999999999",
        ] {
            for tail in ["", "\r", "\r\n", "\n", "\0\r\n", "\rx"] {
                lines.push(format!("${digits}{tail}").into_bytes());
            }
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = 1 + (seed % 24) as usize;
            let alphabet = b"0123456789\r\n-$\0";
            let mut line: Vec<u8> = (0..len)
                .map(|i| alphabet[((seed >> (i * 2 % 60)) as usize + i) % alphabet.len()])
                .collect();
            // The parser reads a number only after its line's `$` or `*`.
            line[0] = b'$';
            lines.push(line);
        }
        let mut quick = 0;
        for line in &lines {
            if let Some(found) = quick_number(line, 1) {
                let text = String::from_utf8_lossy(line);
                assert_eq!(Some(found), general(line), "{text:?}");
                quick += 1;
            }
        }
        assert!(quick > 500, "{quick} lines took the quick path");
        assert_eq!(quick_number(b"$3\r\n", 1), Some((3, 2)));
        assert_eq!(
            quick_number(b"*999999999999999999\r\n", 1),
            Some((999_999_999_999_999_999, 19))
        );
        assert_eq!(quick_number(b"$1000000000000000000\r\n", 1), None);
        assert_eq!(
            quick_number(b"$3\r", 1),
            None,
            "the byte after \\r must be there"
        );
    }

    #[test]
    fn line_ends_are_found_on_both_sides_of_the_short_scan() {
        for len in 0..40 {
            let mut line = vec![b'7'; len];
            assert_eq!(find_end_or_nul(b'\r', &line), None, "{len}");
            line.extend_from_slice(b"\r\n\0");
            assert_eq!(find_end_or_nul(b'\r', &line), Some(len), "{len}");
            line[len] = 0;
            assert_eq!(find_end_or_nul(b'\r', &line), Some(len), "{len}");
            assert_eq!(find_end_or_nul(b'\n', &line), Some(len), "{len}");
        }
    }

    #[test]
    fn multibulk_request() {
        let buf = b"*2\r\n$4\r\nECHO\r\n$3\r\nfoo\r\n";
        let mut parser = RequestParser::default();
        assert_eq!(
            parser.parse(buf),
            Ok(Parsed::Complete {
                consumed: buf.len()
            })
        );
        let args = parser.args(buf);
        assert_eq!(args.len(), 2);
        assert_eq!(args.get(0), Some(&b"ECHO"[..]));
        assert_eq!(args.get(1), Some(&b"foo"[..]));
        assert_eq!(args.get(2), None);
        // Zero-copy: the argument is a subslice of the buffer.
        assert_eq!(args.get(1).unwrap().as_ptr(), buf[18..].as_ptr());
    }

    #[test]
    fn pipelined_requests_come_one_per_call() {
        let reqs =
            parse_all(b"*1\r\n$4\r\nPING\r\nPING\r\n*0\r\n*-1\r\n\r\n*1\r\n$0\r\n\r\n").unwrap();
        assert_eq!(reqs, vec![v(&[b"PING"]), v(&[b"PING"]), v(&[b""])]);
    }

    #[test]
    fn skips_empty_and_null_multibulk_and_blank_lines() {
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse(b"*0\r\n"), Ok(Parsed::Skip { consumed: 4 }));
        assert_eq!(parser.parse(b"*-1\r\n"), Ok(Parsed::Skip { consumed: 5 }));
        assert_eq!(parser.parse(b"   \r\n"), Ok(Parsed::Skip { consumed: 5 }));
        assert_eq!(parser.parse(b"\n"), Ok(Parsed::Skip { consumed: 1 }));
        assert!(parser.args(b"\n").is_empty());
    }

    #[test]
    fn skips_the_two_bytes_after_a_line_end_or_data_unchecked() {
        assert_eq!(parse_all(b"*1\rX$4\rXPINGxy").unwrap(), vec![v(&[b"PING"])]);
    }

    #[test]
    fn incomplete_until_the_byte_after_cr() {
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse(b"*1\r"), Ok(Parsed::Incomplete { hint: None }));
        assert_eq!(
            parser.parse(b"*1\r\n$4\r"),
            Ok(Parsed::Incomplete { hint: None })
        );
        assert_eq!(
            parser.parse(b"*1\r\n$4\r\nPING"),
            Ok(Parsed::Incomplete { hint: Some(14) })
        );
        assert_eq!(
            parser.parse(b"*1\r\n$4\r\nPING\r"),
            Ok(Parsed::Incomplete { hint: Some(14) })
        );
        assert_eq!(
            parser.parse(b"*1\r\n$4\r\nPING\r\n"),
            Ok(Parsed::Complete { consumed: 14 })
        );
    }

    #[test]
    fn inline_requests() {
        assert_eq!(
            parse_all(b"SET k \"a b\"\r\nGET k\nECHO ''\r\n").unwrap(),
            vec![
                v(&[b"SET", b"k", b"a b"]),
                v(&[b"GET", b"k"]),
                v(&[b"ECHO", b""])
            ]
        );
        // Only one trailing \r is dropped; another is a blank.
        assert_eq!(parse_all(b"PING\r\r\n").unwrap(), vec![v(&[b"PING"])]);
    }

    #[test]
    fn errors() {
        let cases: &[(&[u8], ProtocolError)] = &[
            (b"*abc\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*-0\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*2147483648\r\n", ProtocolError::InvalidMultibulkLength),
            (b"*1\r\nx3\r\n", ProtocolError::ExpectedDollar(b'x')),
            (b"*1\r\n\r\n", ProtocolError::ExpectedDollar(b'\r')),
            (b"*1\r\n$-1\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$\r\n", ProtocolError::InvalidBulkLength),
            (b"*1\r\n$536870913\r\n", ProtocolError::InvalidBulkLength),
            (b"ECHO \"a\r\n", ProtocolError::UnbalancedQuotes),
        ];
        for (input, error) in cases {
            assert_eq!(parse_all(input), Err(*error), "{}", input.escape_ascii());
        }
    }

    #[test]
    fn expected_dollar_renders_cr_as_a_space() {
        assert_eq!(
            ProtocolError::ExpectedDollar(b'\r').to_string(),
            "Protocol error: expected '$', got ' '"
        );
        assert_eq!(
            ProtocolError::ExpectedDollar(0xff).to_bytes(),
            b"Protocol error: expected '$', got '\xff'"
        );
    }

    #[test]
    fn unauthenticated_limits() {
        let mut parser = RequestParser::default();
        parser.set_authenticated(false);
        assert_eq!(
            parser.parse(b"*11\r\n"),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        assert_eq!(
            parser.parse(b"*abc\r\n"),
            Err(ProtocolError::InvalidMultibulkLength)
        );
        assert_eq!(parser.parse(b"*-11\r\n"), Ok(Parsed::Skip { consumed: 6 }));
        assert_eq!(
            parser.parse(b"*1\r\n$16385\r\n"),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        assert_eq!(
            parser.parse(b"*10\r\n$16384\r\n"),
            Ok(Parsed::Incomplete {
                hint: Some(13 + 16386)
            })
        );
    }

    #[test]
    fn line_limits() {
        let limit = DEFAULT_MAX_INLINE_LEN;
        let mut parser = RequestParser::default();
        let mut buf = vec![b'A'; limit];
        assert_eq!(parser.parse(&buf), Ok(Parsed::Incomplete { hint: None }));
        buf.push(b'A');
        assert_eq!(parser.parse(&buf), Err(ProtocolError::InlineTooBig));

        let mut buf = b"*".to_vec();
        buf.resize(limit, b'1');
        assert_eq!(parser.parse(&buf), Ok(Parsed::Incomplete { hint: None }));
        buf.push(b'1');
        assert_eq!(parser.parse(&buf), Err(ProtocolError::MultibulkCountTooBig));

        // A \r ends the search even when it is the last byte, however long the line.
        buf.push(b'\r');
        assert_eq!(parser.parse(&buf), Ok(Parsed::Incomplete { hint: None }));
        buf.push(b'\n');
        assert_eq!(
            parser.parse(&buf),
            Err(ProtocolError::InvalidMultibulkLength)
        );

        let mut buf = b"*1\r\n".to_vec();
        buf.resize(limit + 5, b'X');
        assert_eq!(parser.parse(&buf), Err(ProtocolError::BulkCountTooBig));
    }

    #[test]
    fn a_nul_byte_keeps_the_line_open() {
        let mut parser = RequestParser::default();
        assert_eq!(
            parser.parse(b"PING\0\r\n"),
            Ok(Parsed::Incomplete { hint: None })
        );
        parser.reset();
        assert_eq!(
            parser.parse(b"*1\0\r\n"),
            Ok(Parsed::Incomplete { hint: None })
        );
        let mut buf = b"*1\0\r\n".to_vec();
        buf.resize(DEFAULT_MAX_INLINE_LEN + 1, b'A');
        assert_eq!(parser.parse(&buf), Err(ProtocolError::MultibulkCountTooBig));
    }

    #[test]
    fn byte_by_byte() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nGET k\r\n";
        let mut parser = RequestParser::default();
        let mut start = 0;
        let mut got = Vec::new();
        for end in 1..=input.len() {
            let buf = &input[start..end];
            match parser.parse(buf).unwrap() {
                Parsed::Complete { consumed } => {
                    got.push(parser.args(buf).to_vec());
                    start += consumed;
                }
                Parsed::Skip { consumed } => start += consumed,
                Parsed::Incomplete { .. } => {}
            }
        }
        assert_eq!(got, vec![v(&[b"SET", b"k", b"hello"]), v(&[b"GET", b"k"])]);
    }

    #[test]
    fn a_split_request_is_scanned_once() {
        let mut inline = vec![b'A'; 60_000];
        inline.extend_from_slice(b"\r\n");
        let multibulk = b"*2\r\n$5\r\nhello\r\n$3\r\nabc\r\n".to_vec();
        for input in [inline, multibulk] {
            let mut parser = RequestParser::default();
            for end in 1..input.len() {
                let outcome = parser.parse(&input[..end]).unwrap();
                assert!(matches!(outcome, Parsed::Incomplete { .. }));
                // The search stopped at the end of the buffer (or at a final \r), so
                // the next call resumes there; bulk data is not searched at all.
                assert!(
                    parser.scanned + 1 >= end || matches!(parser.state, State::BulkData { .. })
                );
            }
            assert!(matches!(parser.parse(&input), Ok(Parsed::Complete { .. })));
        }
    }

    #[test]
    fn buffer_ranges_only_for_multibulk() {
        let buf = b"*1\r\n$4\r\nPING\r\nPING\r\n";
        let mut parser = RequestParser::default();
        let Ok(Parsed::Complete { consumed }) = parser.parse(buf) else {
            panic!("complete");
        };
        let ranges = parser.buffer_ranges().unwrap();
        assert_eq!((ranges.len(), ranges.first().cloned()), (1, Some(8..12)));
        parser.parse(&buf[consumed..]).unwrap();
        assert_eq!(parser.buffer_ranges(), None);
        assert_eq!(
            parser.args(&buf[consumed..]).to_vec(),
            vec![b"PING".to_vec()]
        );
    }

    #[test]
    fn args_iterate_both_ways() {
        let buf = b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n";
        let mut parser = RequestParser::default();
        parser.parse(buf).unwrap();
        let args = parser.args(buf);
        assert_eq!(args.iter().len(), 3);
        let back: Vec<&[u8]> = args.iter().rev().collect();
        assert_eq!(back, vec![&b"c"[..], b"b", b"a"]);
    }
}
