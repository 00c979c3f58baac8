//! What a command changed, as records for the log.
//!
//! Handlers report every key they change (`ctx.keys.changed`); after each command the
//! dispatcher turns those keys into [`Record`]s from their final state, while the
//! command's shard locks are still held, so records of one key reach the log in the
//! order the changes happened:
//!
//! - a key that no longer exists → a tombstone;
//! - otherwise, by the command's [`LogRule`] and by size: the command itself as an
//!   operation to replay (when it is deterministic and cheaper than the value), an
//!   empty operation that only carries the new expiry, or the whole value.
//!
//! Records carry absolute expiry times, never relative ones. Nondeterministic or
//! multi-key commands give explicit per-key operations (`ctx.keys.log_op`): SPOP as
//! SREM of the members popped, a blocking pop as the plain pop on the key served.

use smallvec::SmallVec;
use strata_keyspace::serialize;
use strata_keyspace::{Db, Value};

/// How a command's change to a key is best logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LogRule {
    /// The whole value (always correct; the default).
    #[default]
    Value,
    /// The command itself, replayed on the key's previous value: for deterministic
    /// commands whose only key is argument 1. Used when smaller than the value.
    Replay,
    /// Only the key's expiry changed (EXPIRE, PERSIST...).
    Expiry,
}

/// One change for the log. `B` holds its bytes (the key, and a value or an
/// operation): owned (the default), a [`Span`] of a [`Batch`]'s buffer, or
/// borrowed from one.
#[derive(Clone, Debug)]
pub struct Record<B = Vec<u8>> {
    pub db: usize,
    pub key: B,
    pub kind: RecordKind<B>,
    /// Where the key was when the record was made, if it was: spares the lookups
    /// that list where the store put the record (`Keys::apply_locations`). Not
    /// part of the change: records compare equal whatever it says.
    pub at: Option<KeyAt>,
}

impl Record {
    /// A record of `key` in database `db`, made without looking the key up.
    pub fn new(db: usize, key: Vec<u8>, kind: RecordKind) -> Self {
        Record {
            db,
            key,
            kind,
            at: None,
        }
    }

    /// This record, borrowed.
    pub fn borrowed(&self) -> Record<&[u8]> {
        Record {
            db: self.db,
            key: &self.key,
            kind: self.kind.map(|b| b.as_slice()),
            at: self.at,
        }
    }
}

impl Record<&[u8]> {
    /// This record, its bytes copied.
    pub fn owned(&self) -> Record {
        Record {
            db: self.db,
            key: self.key.to_vec(),
            kind: self.kind.map(|b| b.to_vec()),
            at: self.at,
        }
    }
}

impl<B: PartialEq> PartialEq for Record<B> {
    fn eq(&self, other: &Self) -> bool {
        self.db == other.db && self.key == other.key && self.kind == other.kind
    }
}

impl<B: Eq> Eq for Record<B> {}

/// A key's hash ([`strata_keyspace::Keyspace::hash`]) and its place in its
/// database's table ([`Db::peek_at`]), which [`Db::apply_log`] checks before it
/// uses it.
#[derive(Clone, Copy, Debug)]
pub struct KeyAt {
    pub hash: u64,
    pub pos: strata_keyspace::dict::Pos,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordKind<B = Vec<u8>> {
    /// The key's whole value ([`serialize`] form) and absolute expiry (0: none).
    Put { value: B, expires_at: u64 },
    /// An operation to apply to the key's value ([`encode_op`] form), and the key's
    /// expiry after it.
    Op { op: B, expires_at: u64 },
    /// The key is gone.
    Delete,
    /// The key's database lists no records of it (it is new, or its old value left
    /// unlogged, as an expired key does): what the store may still hold of an old
    /// value must not be built upon. Comes before the key's first operation of a
    /// batch; the store writes a tombstone for it when it relies on the keyspace's
    /// lists.
    Fresh,
    /// Every key of database `db` is gone (FLUSHDB).
    FlushDb,
    /// Every key of every database is gone (FLUSHALL).
    FlushAll,
    /// Databases `db` and `other` trade contents (SWAPDB).
    SwapDb { other: usize },
    /// The FUNCTION libraries are now these (a FUNCTION DUMP payload).
    Functions { payload: B },
}

impl<B> RecordKind<B> {
    /// The same kind, its bytes `f` of these.
    #[inline]
    pub fn map<'b, C>(&'b self, mut f: impl FnMut(&'b B) -> C) -> RecordKind<C> {
        match self {
            RecordKind::Put { value, expires_at } => RecordKind::Put {
                value: f(value),
                expires_at: *expires_at,
            },
            RecordKind::Op { op, expires_at } => RecordKind::Op {
                op: f(op),
                expires_at: *expires_at,
            },
            RecordKind::Delete => RecordKind::Delete,
            RecordKind::Fresh => RecordKind::Fresh,
            RecordKind::FlushDb => RecordKind::FlushDb,
            RecordKind::FlushAll => RecordKind::FlushAll,
            RecordKind::SwapDb { other } => RecordKind::SwapDb { other: *other },
            RecordKind::Functions { payload } => RecordKind::Functions {
                payload: f(payload),
            },
        }
    }

    /// The value or operation the record carries, if any.
    #[inline]
    fn payload(&self) -> Option<&B> {
        match self {
            RecordKind::Put { value: b, .. }
            | RecordKind::Op { op: b, .. }
            | RecordKind::Functions { payload: b } => Some(b),
            _ => None,
        }
    }
}

/// The first byte of an operation.
pub const OP_EXPIRY: u8 = 0x00;
pub const OP_COMMAND: u8 = 0x01;

/// Encodes a command to replay: `OP_COMMAND`, the argument count, then each
/// argument's length and bytes (LEB128 lengths).
pub fn encode_op<B: AsRef<[u8]>>(argv: &[B]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_op_into(&mut out, argv);
    out
}

/// [`encode_op`], appended to `out`.
fn encode_op_into<B: AsRef<[u8]>>(out: &mut Vec<u8>, argv: &[B]) {
    // Room at once: a length's varint takes at most 10 bytes.
    out.reserve(11 + argv.iter().map(|a| a.as_ref().len() + 10).sum::<usize>());
    out.push(OP_COMMAND);
    put_varint(out, argv.len() as u64);
    for a in argv {
        let a = a.as_ref();
        put_varint(out, a.len() as u64);
        out.extend_from_slice(a);
    }
}

#[inline]
fn put_varint(out: &mut Vec<u8>, n: u64) {
    // Most lengths (a field, a member, a short value) take one byte.
    if n < 0x80 {
        out.push(n as u8);
        return;
    }
    let (bytes, len) = varint(n);
    out.extend_from_slice(&bytes[..len]);
}

/// `n` as a varint (7 bits a byte, low first), and its length.
fn varint(mut n: u64) -> ([u8; 10], usize) {
    let mut bytes = [0u8; 10];
    let mut len = 0;
    while n >= 0x80 {
        bytes[len] = (n as u8 & 0x7f) | 0x80;
        n >>= 7;
        len += 1;
    }
    bytes[len] = n as u8;
    (bytes, len + 1)
}

/// Reads the varint at `*at` and moves past it.
fn read_varint(buf: &[u8], at: &mut usize) -> Result<usize, &'static str> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let &b = buf.get(*at).ok_or("operation truncated")?;
        *at += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return usize::try_from(n).map_err(|_| "length out of range");
        }
    }
    Err("length out of range")
}

/// Reads the length-prefixed argument at `*at` and moves past it.
fn read_arg<'b>(buf: &'b [u8], at: &mut usize) -> Result<&'b [u8], &'static str> {
    let len = read_varint(buf, at)?;
    let arg = at
        .checked_add(len)
        .and_then(|end| buf.get(*at..end))
        .ok_or("operation truncated")?;
    *at += len;
    Ok(arg)
}

/// The arguments of an operation written by [`encode_op`], borrowed (`None` for an
/// expiry-only one). Errors on malformed bytes; never panics.
fn op_args(bytes: &[u8]) -> Result<Option<SmallVec<[&[u8]; 4]>>, &'static str> {
    let (&tag, _) = bytes.split_first().ok_or("empty operation")?;
    match tag {
        OP_EXPIRY => return Ok(None),
        OP_COMMAND => {}
        _ => return Err("unknown operation"),
    }
    let mut at = 1;
    let count = read_varint(bytes, &mut at)?;
    if count > bytes.len() - at {
        return Err("operation truncated");
    }
    let mut argv = SmallVec::with_capacity(count);
    for _ in 0..count {
        argv.push(read_arg(bytes, &mut at)?);
    }
    if at != bytes.len() {
        return Err("bytes after the operation");
    }
    Ok(Some(argv))
}

/// Commands whose operations on one key, one after the other, make the one
/// operation with the arguments after the key of each in turn: `LPUSH k a` then
/// `LPUSH k b` is `LPUSH k a b`, and `HSET k f 1` then `HSET k f 2` is
/// `HSET k f 1 f 2`, as each applies its arguments in order; so do the removals
/// (`SREM k a` then `SREM k b` is `SREM k a b`; SPOP is logged as the SREM of what
/// it popped). ZADD joins them without options only (`ZADD k 1 a` then `ZADD k 2 b`
/// is `ZADD k 1 a 2 b`, its pairs applied in order as separate commands would be;
/// see [`plain_zadd`]).
const MERGEABLE: [&[u8]; 8] = [
    b"LPUSH", b"RPUSH", b"SADD", b"HSET", b"ZADD", b"SREM", b"ZREM", b"HDEL",
];

/// Whether a ZADD whose first argument after the key is `first` takes no options
/// (NX, XX, GT, LT, CH, INCR come before the pairs, so a command that ran without
/// error and does not start with one has none).
fn plain_zadd(first: &[u8]) -> bool {
    const OPTIONS: [&[u8]; 6] = [b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR"];
    !OPTIONS.iter().any(|o| o.eq_ignore_ascii_case(first))
}

/// The start of an operation written by [`encode_op`]: what merging into it needs,
/// read without walking its (growing) list of arguments.
struct OpHead<'a> {
    /// Its argument count.
    count: usize,
    /// Where its first argument's length is (after the count).
    args_at: usize,
    /// The command's name and the key, its first two arguments.
    name: &'a [u8],
    key: &'a [u8],
    /// Where the argument after the key starts.
    rest_at: usize,
}

fn op_head(op: &[u8]) -> Option<OpHead<'_>> {
    if op.first() != Some(&OP_COMMAND) {
        return None;
    }
    let mut at = 1;
    let count = read_varint(op, &mut at).ok()?;
    let args_at = at;
    let name = read_arg(op, &mut at).ok()?;
    let key = read_arg(op, &mut at).ok()?;
    Some(OpHead {
        count,
        args_at,
        name,
        key,
        rest_at: at,
    })
}

/// The head of `prev` if it is a mergeable command (see [`MERGEABLE`]) named `name`
/// (in any case) on `key`, which `rest`, the arguments after the key of the
/// command to merge, can continue.
fn continued_by<'p>(prev: &'p [u8], name: &[u8], key: &[u8], rest: &[&[u8]]) -> Option<OpHead<'p>> {
    let p = op_head(prev)?;
    let mergeable = p.key == key
        && p.name.eq_ignore_ascii_case(name)
        && MERGEABLE
            .iter()
            .any(|m| m.len() == p.name.len() && m.eq_ignore_ascii_case(p.name));
    if !mergeable {
        return None;
    }
    if p.name.eq_ignore_ascii_case(b"ZADD") {
        let mut at = p.rest_at;
        let prev_first = read_arg(prev, &mut at).ok()?;
        if !plain_zadd(prev_first) || !rest.first().is_some_and(|f| plain_zadd(f)) {
            return None;
        }
    }
    Some(p)
}

/// Rewrites the argument count of the operation that starts at `start` of `buf`,
/// whose arguments start at `args_at` of it.
fn set_count(buf: &mut Vec<u8>, start: usize, args_at: usize, count: usize) {
    let (bytes, len) = varint(count as u64);
    let bytes = &bytes[..len];
    let old = start + 1..start + args_at;
    match buf.get_mut(old.clone()) {
        // The usual case: the count's varint keeps its length.
        Some(old) if old.len() == bytes.len() => old.copy_from_slice(bytes),
        _ => {
            buf.splice(old, bytes.iter().copied());
        }
    }
}

/// LPOP and RPOP: a run of pops from one end of one list is one pop of their
/// summed counts (`LPOP k` twice is `LPOP k 2`), as long as the list outlives it
/// (a pop that empties it deletes the key, which is a record of another kind).
fn is_pop(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"LPOP") || name.eq_ignore_ascii_case(b"RPOP")
}

/// How many elements a pop's arguments take (`None` unless a plain positive count).
fn pop_count(argv: &[&[u8]]) -> Option<i64> {
    match argv {
        [_, _] => Some(1),
        [_, _, count] => plain_count(count),
        _ => None,
    }
}

/// `digits` as a positive count written as Redis writes it back (no sign, no
/// leading zero), parsed as the pop's replay parses it: within `i64`, so a merged
/// count never outgrows what replays.
fn plain_count(digits: &[u8]) -> Option<i64> {
    crate::parse::int(digits).ok().filter(|&n| n > 0)
}

/// How a command continues an operation (see [`merge_plan`]); places are the
/// operation's own.
#[derive(Clone, Copy)]
enum Merge {
    /// Pops: the operation becomes one pop of `total` elements, its count (or the
    /// end, for a pop of one) at `count_at`.
    Pop {
        args_at: usize,
        count_at: usize,
        total: i64,
    },
    /// The command's arguments after the key join the operation's, `count` in all.
    Args { args_at: usize, count: usize },
}

/// How the command `argv` (as it came) continues the operation `prev`, when both
/// are the same mergeable command on the same key (a pop adds its count to
/// `prev`'s); `None` otherwise. Reads only: [`apply_merge`] makes the change,
/// which cannot fail then.
fn merge_plan(prev: &[u8], argv: &[&[u8]]) -> Option<Merge> {
    let [name, key, rest @ ..] = argv else {
        return None;
    };
    if is_pop(name) {
        return pop_plan(prev, argv);
    }
    if rest.is_empty() {
        return None;
    }
    let p = continued_by(prev, name, key, rest)?;
    Some(Merge::Args {
        args_at: p.args_at,
        count: p.count + rest.len(),
    })
}

/// [`merge_plan`] for the pop `next` (a command's arguments): from the same end of
/// the same list as the pop `prev`, both counts plain.
fn pop_plan(prev: &[u8], next: &[&[u8]]) -> Option<Merge> {
    let [name, key, ..] = next else {
        return None;
    };
    let b = pop_count(next)?;
    let p = op_head(prev)?;
    if !(is_pop(p.name) && p.name.eq_ignore_ascii_case(name) && p.key == *key) {
        return None;
    }
    let (args_at, count_at) = (p.args_at, p.rest_at);
    let a = match p.count {
        2 if count_at == prev.len() => 1,
        3 => {
            let mut at = count_at;
            let count = read_arg(prev, &mut at).ok().filter(|_| at == prev.len())?;
            plain_count(count)?
        }
        _ => return None,
    };
    Some(Merge::Pop {
        args_at,
        count_at,
        total: a.checked_add(b)?,
    })
}

/// Makes the change `merge` (planned for `argv`) to the operation that is `buf`
/// from `start` on. In place, with nothing allocated once `buf` has room: a
/// pipeline's run of pushes or pops calls this once a command.
fn apply_merge(buf: &mut Vec<u8>, start: usize, argv: &[&[u8]], merge: Merge) {
    match merge {
        Merge::Pop {
            args_at,
            count_at,
            total,
        } => {
            buf.truncate(start + count_at);
            let mut digits = itoa::Buffer::new();
            let digits = digits.format(total).as_bytes();
            put_varint(buf, digits.len() as u64);
            buf.extend_from_slice(digits);
            // Two arguments or three: the count's varint is one byte either way.
            set_count(buf, start, args_at, 3);
        }
        Merge::Args { args_at, count } => {
            set_count(buf, start, args_at, count);
            let rest = argv.get(2..).unwrap_or_default();
            buf.reserve(rest.iter().map(|a| a.len() + 10).sum());
            for a in rest {
                put_varint(buf, a.len() as u64);
                buf.extend_from_slice(a);
            }
        }
    }
}

/// Reads an operation written by [`encode_op`] (`None` for an expiry-only one).
/// Errors on malformed bytes; never panics.
pub fn decode_op(bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, &'static str> {
    op_args(bytes).map(|argv| argv.map(|argv| argv.iter().map(|a| a.to_vec()).collect()))
}

/// Appends to `batch` the records for a key changed by one command, from its state
/// now; returns how many it made, those merged into the batch's last record
/// included (see [`Batch::merge_last`]). The key, of hash `hash` in `db`, is in
/// `batch`'s buffer at `key` ([`Batch::note_key`]), where its records share it.
///
/// `explicit` are the operations the handler gave for this key (in order), `argv`
/// the command and `rule` its table rule; `first` tells whether this is the key's
/// first record in `batch` (asked only when it matters, which is rare, and given
/// the batch and the key).
///
/// Operations on a key whose records the database does not list follow a
/// [`RecordKind::Fresh`], so that replay never applies them to an old value the
/// store may still hold.
#[allow(clippy::too_many_arguments)]
pub fn record_for(
    batch: &mut Batch,
    db_index: usize,
    db: &mut Db,
    hash: u64,
    key: Span,
    now_ms: u64,
    rule: LogRule,
    argv: &[&[u8]],
    explicit: &[Vec<Vec<u8>>],
    first: impl FnOnce(&Batch, &[u8]) -> bool,
) -> usize {
    let Some((pos, entry)) = db.peek_at(hash, batch.at(key), now_ms) else {
        batch.push_bare(db_index, key, None, RecordKind::Delete);
        return 1;
    };
    let at = Some(KeyAt { hash, pos });
    let fresh = !entry.is_logged();
    let expires_at = db.expire_at(entry).unwrap_or(0);
    if explicit.is_empty() {
        // Most commands: one record, written straight into the batch.
        // Read once: decoding the entry's value costs some 40 instructions.
        let value = entry.value();
        let change = change_of(entry, value, batch.at(key), rule, argv);
        let mut made = 1;
        if fresh && change != Change::Value && first(batch, batch.at(key)) {
            batch.push_bare(db_index, key, at, RecordKind::Fresh);
            made += 1;
        }
        match change {
            Change::Expiry => batch.push_expiry(db_index, key, at, expires_at),
            Change::Replay => batch.push_op(db_index, key, at, argv, expires_at, true),
            Change::Value => batch.push_value(db_index, key, at, value, expires_at),
        }
        return made;
    }
    let fresh_first = fresh && first(batch, batch.at(key));
    if fresh_first {
        batch.push_bare(db_index, key, at, RecordKind::Fresh);
    }
    let made = explicit.len() + usize::from(fresh_first);
    for op in explicit {
        let argv: SmallVec<[&[u8]; 8]> = op.iter().map(Vec::as_slice).collect();
        // Only a lone record may join the batch's last.
        batch.push_op(db_index, key, at, &argv, expires_at, made == 1);
    }
    made
}

/// Bytes a [`Batch`]'s buffer keeps before each key for the store's prefix (a
/// database's namespace, a `u32`), so that the store reads the prefixed key in
/// place rather than copy it ([`Batch::write_prefixes`]).
pub const KEY_ROOM: usize = 4;

/// A place in a [`Batch`]'s buffer: a record's key, value or operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    start: usize,
    end: usize,
}

/// Records to append as one batch (most batches hold one command's one record).
/// Their keys, values and operations are written into one buffer, as the command
/// that changed them ends: making a record copies the key once (when the command
/// notes it) and writes its value or operation once, with nothing allocated once
/// the buffers have grown (see [`spare`]).
#[derive(Debug, Default)]
pub struct Batch {
    records: SmallVec<[Record<Span>; 2]>,
    bytes: Vec<u8>,
}

impl Batch {
    pub fn new() -> Batch {
        Batch::default()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The records, in order.
    #[inline]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Record<&[u8]>> + '_ {
        self.records.iter().map(|r| self.view(r))
    }

    /// A batch of `records`, their bytes copied.
    pub fn of(records: &[Record]) -> Batch {
        let mut batch = Batch::new();
        for r in records {
            batch.push(r.borrowed());
        }
        batch
    }

    /// The records, copied out.
    pub fn to_records(&self) -> Vec<Record> {
        self.iter().map(|r| r.owned()).collect()
    }

    /// The bytes at `span`: a record's key, value or operation.
    #[inline]
    pub fn at(&self, span: Span) -> &[u8] {
        self.bytes.get(span.start..span.end).unwrap_or_default()
    }

    #[inline]
    fn view(&self, r: &Record<Span>) -> Record<&[u8]> {
        self.view_with_room(r, 0)
    }

    /// `r` borrowed, its key with the `room` bytes before it.
    #[inline]
    fn view_with_room(&self, r: &Record<Span>, room: usize) -> Record<&[u8]> {
        let key = r
            .key
            .start
            .checked_sub(room)
            .and_then(|start| self.bytes.get(start..r.key.end));
        Record {
            db: r.db,
            key: key.unwrap_or_default(),
            kind: r.kind.map(|&span| self.at(span)),
            at: r.at,
        }
    }

    /// Writes into the buffer what `write` appends to it.
    #[inline]
    fn write(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Span {
        if self.bytes.capacity() == 0 {
            self.bytes = spare::bytes();
        }
        let start = self.bytes.len();
        write(&mut self.bytes);
        Span {
            start,
            end: self.bytes.len(),
        }
    }

    /// Writes a key of records to come into the buffer, after [`KEY_ROOM`] bytes
    /// kept for the store's prefix.
    #[inline]
    pub fn note_key(&mut self, key: &[u8]) -> Span {
        let room = self.write(|b| {
            b.extend_from_slice(&[0; KEY_ROOM]);
            b.extend_from_slice(key);
        });
        Span {
            start: room.start + KEY_ROOM,
            end: room.end,
        }
    }

    /// Writes, before each record's key, the prefix `prefix` gives for it (called
    /// once a record, in order): [`Batch::iter_prefixed`] then reads each key with
    /// its prefix as one slice. Records that share a key are one command's changes
    /// to it, one after another: `prefix` is to give them the same prefix (the
    /// last one written stands).
    pub fn write_prefixes(&mut self, mut prefix: impl FnMut(Record<&[u8]>) -> [u8; KEY_ROOM]) {
        for i in 0..self.records.len() {
            let r = &self.records[i];
            let (key, bytes) = (r.key, prefix(self.view(r)));
            if let Some(room) = key
                .start
                .checked_sub(KEY_ROOM)
                .and_then(|start| self.bytes.get_mut(start..key.start))
            {
                room.copy_from_slice(&bytes);
            }
        }
    }

    /// The records, in order, each key with the prefix written before it
    /// ([`Batch::write_prefixes`]; zeros where none was).
    #[inline]
    pub fn iter_prefixed(&self) -> impl ExactSizeIterator<Item = Record<&[u8]>> + Clone + '_ {
        self.records
            .iter()
            .map(|r| self.view_with_room(r, KEY_ROOM))
    }

    /// Appends `record`, its bytes copied.
    pub fn push(&mut self, record: Record<&[u8]>) {
        let (db, at) = (record.db, record.at);
        let key = self.note_key(record.key);
        match record.kind.payload() {
            Some(payload) => self.push_written(
                db,
                key,
                at,
                |b| b.extend_from_slice(payload),
                |span| record.kind.map(|_| span),
            ),
            None => self.push_bare(db, key, at, record.kind.map(|_| Span::default())),
        }
    }

    /// Appends a record without a value or operation (a tombstone, say) of the key
    /// at `key`.
    #[inline]
    pub fn push_bare(&mut self, db: usize, key: Span, at: Option<KeyAt>, kind: RecordKind<Span>) {
        debug_assert!(kind.payload().is_none());
        self.records.push(Record { db, key, kind, at });
    }

    /// Appends a record of the key at `key` whose value or operation `write`
    /// writes into the buffer, made by `kind` from where it went.
    #[inline]
    fn push_written(
        &mut self,
        db: usize,
        key: Span,
        at: Option<KeyAt>,
        write: impl FnOnce(&mut Vec<u8>),
        kind: impl FnOnce(Span) -> RecordKind<Span>,
    ) {
        let span = self.write(write);
        self.records.push(Record {
            db,
            key,
            kind: kind(span),
            at,
        });
    }

    /// Appends the operation that replays `argv` on the key at `key`; with `merge`,
    /// it joins the batch's last record if it continues it (see
    /// [`Batch::merge_last`]).
    #[inline]
    pub fn push_op(
        &mut self,
        db: usize,
        key: Span,
        at: Option<KeyAt>,
        argv: &[&[u8]],
        expires_at: u64,
        merge: bool,
    ) {
        if merge && self.merge_last(db, key, expires_at, argv) {
            return;
        }
        let op = |op| RecordKind::Op { op, expires_at };
        self.push_written(db, key, at, |b| encode_op_into(b, argv), op);
    }

    /// Appends the operation that only sets the expiry of the key at `key`.
    #[inline]
    pub fn push_expiry(&mut self, db: usize, key: Span, at: Option<KeyAt>, expires_at: u64) {
        let op = |op| RecordKind::Op { op, expires_at };
        self.push_written(db, key, at, |b| b.push(OP_EXPIRY), op);
    }

    /// Appends the whole `value` of the key at `key`.
    #[inline]
    pub fn push_value(
        &mut self,
        db: usize,
        key: Span,
        at: Option<KeyAt>,
        value: strata_keyspace::ValueRef<'_>,
        expires_at: u64,
    ) {
        let put = |value| RecordKind::Put { value, expires_at };
        self.push_written(db, key, at, |b| serialize::encode(value, b), put);
    }

    /// Whether the batch's last record is an operation on the key at `key` (its
    /// bytes, wherever they are) of database `db`.
    pub fn last_is_op_on(&self, db: usize, key: Span) -> bool {
        matches!(
            self.records.last(),
            Some(Record { db: d, key: k, kind: RecordKind::Op { .. }, .. })
                if *d == db && self.at(*k) == self.at(key)
        )
    }

    /// Appends the arguments of the command `argv` to the batch's last record when
    /// it is an operation on the key at `key` of database `db`, with expiry
    /// `expires_at`, that `argv` continues — the same push, add or removal (a ZADD
    /// without options), or a pop from the same end, whose count adds up; false,
    /// and nothing changed, otherwise. The operation must end the buffer, or be
    /// followed only by the key at `key` and its room (noted by the command: the
    /// merge drops them, as the key's record is the one before).
    pub fn merge_last(&mut self, db: usize, key: Span, expires_at: u64, argv: &[&[u8]]) -> bool {
        let Some(Record {
            db: last_db,
            key: last_key,
            kind:
                RecordKind::Op {
                    op,
                    expires_at: last_expiry,
                },
            ..
        }) = self.records.last()
        else {
            return false;
        };
        let (op, len) = (*op, self.bytes.len());
        if *last_db != db || *last_expiry != expires_at || self.at(*last_key) != self.at(key) {
            return false;
        }
        let tail = if key.start == op.end + KEY_ROOM && key.end == len {
            op.end
        } else if op.end == len {
            len
        } else {
            return false;
        };
        let Some(merge) = merge_plan(self.at(op), argv) else {
            return false;
        };
        self.bytes.truncate(tail);
        apply_merge(&mut self.bytes, op.start, argv, merge);
        let end = self.bytes.len();
        if let Some(Record {
            kind: RecordKind::Op { op, .. },
            ..
        }) = self.records.last_mut()
        {
            op.end = end;
        }
        true
    }
}

/// Where each record of a batch went, when the keyspace is to list it (see
/// [`crate::Server::log`]). On the stack, room for a pipeline's batch over the
/// shards it may hold at once (`ctx::Held::MAX_SHARDS`) without growing.
pub type Located = smallvec::SmallVec<[Option<strata_keyspace::logref::LogLoc>; 16]>;

/// The buffers of a batch, cleared, kept for the next batch of this thread: a
/// pipeline's batch of sixteen records otherwise grew from two three times, with a
/// reallocation each (some 160 instructions a command, and as many again to free
/// it, in callgrind), and its bytes from nothing.
pub mod spare {
    use super::{Batch, Record, Span};
    use std::cell::Cell;

    /// Records' buffers above this many records are not kept (a transaction's).
    const KEEP: usize = 256;

    /// Byte buffers above this size are not kept.
    const KEEP_BYTES: usize = 64 * 1024;

    thread_local! {
        static RECORDS: Cell<Vec<Record<Span>>> = const { Cell::new(Vec::new()) };
        static BYTES: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
    }

    /// Makes room in `batch` for `more` records, in the spare buffer if the batch is
    /// still inline and would spill.
    #[inline]
    pub fn reserve(batch: &mut Batch, more: usize) {
        let records = &mut batch.records;
        if !records.spilled() && records.len() + more > records.inline_size() {
            let mut spare = RECORDS.take();
            if spare.capacity() > records.inline_size() {
                spare.extend(records.drain(..));
                *records = smallvec::SmallVec::from_vec(spare);
            }
        }
        records.reserve(more);
    }

    /// The kept byte buffer (empty), or a new one.
    pub(super) fn bytes() -> Vec<u8> {
        BYTES.take()
    }

    /// Keeps `batch`'s buffers, if not too big, for [`reserve`] and the next batch's
    /// bytes.
    pub fn recycle(batch: Batch) {
        let Batch { records, mut bytes } = batch;
        if bytes.capacity() <= KEEP_BYTES {
            bytes.clear();
            let kept = BYTES.take();
            BYTES.set(if kept.capacity() >= bytes.capacity() {
                kept
            } else {
                bytes
            });
        }
        if !records.spilled() || records.capacity() > KEEP {
            return;
        }
        let mut records = records.into_vec();
        records.clear();
        let kept = RECORDS.take();
        RECORDS.set(if kept.capacity() >= records.capacity() {
            kept
        } else {
            records
        });
    }
}

/// What the tombstone before an unlisted key's first operation costs besides the
/// key: a record's header (the store's shortest, `MIN_HEADER_LEN`: a tombstone's
/// lengths take a byte each and it has no expiry) and a namespace prefix.
const FRESH_RECORD_COST: usize = 20;

/// How a change to a key is logged, when the handler gave no operations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    /// Only the key's expiry.
    Expiry,
    /// The command, replayed.
    Replay,
    /// The whole value.
    Value,
}

/// How the change to `entry` (of key `key`, holding `value`) that the command
/// `argv` made is logged.
fn change_of(
    entry: &strata_keyspace::Entry,
    value: strata_keyspace::ValueRef<'_>,
    key: &[u8],
    rule: LogRule,
    argv: &[&[u8]],
) -> Change {
    // A value out of memory (`maxmemory-policy tiered`) is unchanged — the
    // commands that may run on one never change it — and is already the key's
    // record in the store: only its expiry is logged.
    if value.is_cold() || rule == LogRule::Expiry {
        return Change::Expiry;
    }
    if rule == LogRule::Replay && argv.get(1) == Some(&key) {
        // O(1) per command, whatever the value's size.
        let value_size = value.size_quick() + 1;
        // An operation on a key the database lists no records of costs a
        // tombstone too (see `record_for`), and the key's records become a chain,
        // listed by key bytes; the whole value is one record that the key's table
        // slot lists in place.
        let fresh_cost = if entry.is_logged() {
            0
        } else {
            FRESH_RECORD_COST + key.len()
        };
        if replay_size(argv) + fresh_cost < value_size {
            return Change::Replay;
        }
    }
    Change::Value
}

fn replay_size(argv: &[&[u8]]) -> usize {
    argv.iter().map(|a| a.len() + 2).sum::<usize>() + 2
}

/// Whether a value may be the target of a replayed operation (strings are logged
/// whole unless large: the log is a string's home on disk).
pub fn is_collection(value: &Value) -> bool {
    !matches!(value, Value::Str(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The operation `prev` with the arguments after the key of `argv` (a command
    /// as it came), when `argv` continues it (see [`merge_plan`]); false, and `prev`
    /// unchanged, otherwise.
    fn append_args(prev: &mut Vec<u8>, argv: &[&[u8]]) -> bool {
        match merge_plan(prev, argv) {
            Some(merge) => {
                apply_merge(prev, 0, argv, merge);
                true
            }
            None => false,
        }
    }

    /// [`append_args`] for an encoded operation `next`.
    fn merge_ops(prev: &mut Vec<u8>, next: &[u8]) -> bool {
        match op_args(next) {
            Ok(Some(argv)) => append_args(prev, &argv),
            _ => false,
        }
    }

    /// A change to a small hash logs the operation when it is shorter than the
    /// whole hash, whether the hash's bytes are in its entry or beside it.
    #[test]
    fn a_small_hash_logs_the_shorter_of_operation_and_value() {
        let limits = strata_keyspace::EncodingLimits::default();
        let mut db = Db::new(strata_keyspace::KeyHasher::default());
        let key = b"h".to_vec();
        let hash = db.hash(&key);
        let mut h = strata_keyspace::Hash::new();
        for i in 0..12 {
            h.insert(format!("field:{i}").as_bytes(), b"some value", &limits);
        }
        assert!(h.is_packed());
        db.set(hash, &key, Value::Hash(h), strata_keyspace::Ttl::Persist, 0);
        assert_eq!(
            db.peek(hash, &key, 0).map(|e| e.memory_usage() < 400),
            Some(true)
        );
        let argv: Vec<&[u8]> = vec![b"HSET", b"h", b"field:3", b"other"];
        let mut kinds = |argv: &[&[u8]]| {
            let mut batch = Batch::new();
            let key = batch.note_key(&key);
            let made = record_for(
                &mut batch,
                0,
                &mut db,
                hash,
                key,
                0,
                LogRule::Replay,
                argv,
                &[],
                |_, _| false,
            );
            assert_eq!(made, batch.len());
            batch
                .to_records()
                .into_iter()
                .map(|r| r.kind)
                .collect::<Vec<_>>()
        };
        assert!(matches!(kinds(&argv)[..], [RecordKind::Op { .. }]));
        let long = vec![b'x'; 400];
        let argv: Vec<&[u8]> = vec![b"HSET", b"h", b"field:3", &long];
        assert!(matches!(kinds(&argv)[..], [RecordKind::Put { .. }]));
    }

    #[test]
    fn operations_round_trip_and_reject_garbage() {
        let argv: Vec<&[u8]> = vec![b"LPUSH", b"k", b"", b"\x00\xff"];
        let op = encode_op(&argv);
        assert_eq!(
            decode_op(&op),
            Ok(Some(argv.iter().map(|a| a.to_vec()).collect()))
        );
        assert_eq!(decode_op(&[OP_EXPIRY]), Ok(None));
        assert!(decode_op(&[]).is_err());
        assert!(decode_op(&[9]).is_err());
        assert!(decode_op(&[OP_COMMAND, 5, 1]).is_err());
        assert!(decode_op(&[OP_COMMAND, 1, 3, b'a']).is_err());
        for cut in 0..op.len() {
            assert!(decode_op(&op[..cut]).is_err(), "cut at {cut}");
        }
    }

    fn op(argv: &[&str]) -> Vec<u8> {
        encode_op(argv)
    }

    fn args(op: &[u8]) -> Vec<String> {
        decode_op(op)
            .expect("decodes")
            .expect("a command")
            .into_iter()
            .map(|a| String::from_utf8(a).expect("utf-8"))
            .collect()
    }

    #[test]
    fn the_same_push_on_the_same_key_merges_into_one_operation() {
        let mut prev = op(&["LPUSH", "k", "a"]);
        assert!(merge_ops(&mut prev, &op(&["lpush", "k", "b", "c"])));
        assert_eq!(args(&prev), ["LPUSH", "k", "a", "b", "c"]);
        let mut hash = op(&["HSET", "h", "f", "1"]);
        assert!(merge_ops(&mut hash, &op(&["HSET", "h", "f", "2"])));
        assert_eq!(args(&hash), ["HSET", "h", "f", "1", "f", "2"]);

        // Another key, another command, a command that is not a plain sequence of
        // arguments, or an expiry-only operation: no merge, nothing changed.
        for next in [
            op(&["LPUSH", "other", "b"]),
            op(&["RPUSH", "k", "b"]),
            op(&["LPUSH", "k"]),
            vec![OP_EXPIRY],
        ] {
            let mut prev = op(&["LPUSH", "k", "a"]);
            assert!(!merge_ops(&mut prev, &next));
            assert_eq!(args(&prev), ["LPUSH", "k", "a"]);
        }
        for name in ["SREM", "zrem", "HDEL"] {
            let mut removal = op(&[name, "k", "a"]);
            assert!(merge_ops(&mut removal, &op(&[name, "k", "b", "a"])));
            assert_eq!(args(&removal), [name, "k", "a", "b", "a"]);
            assert!(!merge_ops(&mut removal, &op(&["SADD", "k", "c"])));
        }
        // ZADD without options only: an option applies to every pair after it.
        let mut zadd = op(&["ZADD", "z", "1", "m"]);
        assert!(merge_ops(
            &mut zadd,
            &op(&["zadd", "z", "2", "n", "+inf", "m"])
        ));
        assert_eq!(args(&zadd), ["ZADD", "z", "1", "m", "2", "n", "+inf", "m"]);
        for (first, next) in [
            (
                &["ZADD", "z", "1", "m"][..],
                &["ZADD", "z", "NX", "2", "m"][..],
            ),
            (&["ZADD", "z", "1", "m"], &["ZADD", "z", "ch", "2", "m"]),
            (&["ZADD", "z", "1", "m"], &["ZADD", "z", "INCR", "2", "m"]),
            (&["ZADD", "z", "GT", "1", "m"], &["ZADD", "z", "2", "m"]),
            (
                &["ZADD", "z", "xx", "1", "m"],
                &["ZADD", "z", "xx", "2", "m"],
            ),
            (&["ZADD", "z", "1", "m"], &["ZADD", "y", "2", "m"]),
        ] {
            let mut zadd = op(first);
            assert!(!merge_ops(&mut zadd, &op(next)), "{next:?} after {first:?}");
            assert_eq!(args(&zadd), first);
        }
        let mut expiry = vec![OP_EXPIRY];
        assert!(!merge_ops(&mut expiry, &op(&["LPUSH", "k", "a"])));
    }

    #[test]
    fn a_command_as_it_came_continues_the_same_operation() {
        let mut prev = op(&["RPUSH", "k", "a"]);
        let argv: [&[u8]; 4] = [b"rpush", b"k", b"b", b""];
        assert!(append_args(&mut prev, &argv));
        assert_eq!(args(&prev), ["RPUSH", "k", "a", "b", ""]);
        for argv in [
            [&b"RPUSH"[..], b"j", b"c"],
            [&b"LPUSH"[..], b"k", b"c"],
            [&b"SET"[..], b"k", b"c"],
        ] {
            assert!(!append_args(&mut prev, &argv));
        }
        assert!(!append_args(&mut prev, &[b"RPUSH", b"k"]));
        assert_eq!(args(&prev), ["RPUSH", "k", "a", "b", ""]);
    }

    #[test]
    fn pops_from_one_end_of_one_list_add_up() {
        let mut prev = op(&["LPOP", "k"]);
        assert!(append_args(&mut prev, &[b"lpop", b"k"]));
        assert_eq!(args(&prev), ["LPOP", "k", "2"]);
        assert!(merge_ops(&mut prev, &op(&["LPOP", "k", "3"])));
        assert_eq!(args(&prev), ["LPOP", "k", "5"]);
        // The other end, another list, or a count that is not a plain positive
        // number: no merge, nothing changed.
        for next in [
            op(&["RPOP", "k"]),
            op(&["LPOP", "j"]),
            op(&["LPOP", "k", "0"]),
            op(&["LPOP", "k", "-1"]),
            op(&["LPOP", "k", "x"]),
            op(&["LPOP", "k", "+1"]),
            op(&["LPOP", "k", "1", "2"]),
        ] {
            assert!(!merge_ops(&mut prev, &next));
        }
        assert!(!append_args(&mut prev, &[b"RPOP", b"k", b"2"]));
        assert_eq!(args(&prev), ["LPOP", "k", "5"]);
        let mut push = op(&["LPUSH", "k", "a"]);
        assert!(!append_args(&mut push, &[b"LPOP", b"k"]));
        assert!(!merge_ops(&mut prev, &op(&["LPUSH", "k", "a"])));

        // Counts rewritten in place: across a digit, up to the end of what a pop's
        // count may be when replayed (an i64) and not past it; the result is the
        // op a pop of the total encodes to.
        let mut prev = op(&["RPOP", "list", "9"]);
        assert!(append_args(&mut prev, &[b"RPOP", b"list"]));
        assert_eq!(prev, op(&["RPOP", "list", "10"]));
        let rest = (i64::MAX - 10).to_string();
        assert!(append_args(&mut prev, &[b"rpop", b"list", rest.as_bytes()]));
        let full = op(&["RPOP", "list", &i64::MAX.to_string()]);
        assert_eq!(prev, full);
        assert!(!append_args(&mut prev, &[b"RPOP", b"list"]));
        assert_eq!(prev, full);
    }

    #[test]
    fn a_merged_count_may_take_a_longer_varint() {
        let mut prev = op(&["RPUSH", "k", "0"]);
        for i in 1..300 {
            assert!(merge_ops(&mut prev, &op(&["RPUSH", "k", &i.to_string()])));
        }
        let expected: Vec<String> = ["RPUSH".to_string(), "k".to_string()]
            .into_iter()
            .chain((0..300).map(|i| i.to_string()))
            .collect();
        assert_eq!(args(&prev), expected);
    }

    /// A batch that outgrows its inline records takes the buffer the last spilled
    /// batch left, records and all kept in order; a batch that stays inline, or one
    /// too big, leaves nothing. A batch's bytes go to the next batch that writes any.
    #[test]
    fn a_spilled_batch_leaves_its_buffers_to_the_next() {
        std::thread::spawn(|| {
            let put = |i: usize| record(&format!("k{i}"), RecordKind::Delete);
            let fill = |batch: &mut Batch, n: std::ops::Range<usize>| {
                for i in n {
                    batch.push(put(i).borrowed());
                }
            };
            let mut first = Batch::new();
            spare::reserve(&mut first, 20);
            fill(&mut first, 0..20);
            let capacity = first.records.capacity();
            let bytes = first.bytes.capacity();
            assert!(capacity >= 20 && bytes >= 40);
            spare::recycle(first);
            // Inline still: no spare records taken; the bytes taken at the first
            // write.
            let mut small = Batch::new();
            spare::reserve(&mut small, 1);
            fill(&mut small, 0..1);
            assert!(!small.records.spilled());
            assert_eq!(small.bytes.capacity(), bytes);
            spare::recycle(small);
            // Full, and about to spill: the spare, with what it held.
            small = Batch::new();
            fill(&mut small, 0..2);
            spare::reserve(&mut small, 1);
            assert_eq!(small.records.capacity(), capacity);
            small.push(put(2).borrowed());
            assert_eq!(small.to_records(), (0..3).map(put).collect::<Vec<_>>());
            // The spare went with it.
            let mut next = Batch::new();
            fill(&mut next, 0..2);
            spare::reserve(&mut next, 1);
            assert!(next.records.capacity() < capacity);
            // A transaction's big buffers are not kept.
            let mut big = Batch::new();
            fill(&mut big, 0..1000);
            big.push(
                record(
                    "v",
                    RecordKind::Put {
                        value: vec![7; 100_000],
                        expires_at: 0,
                    },
                )
                .borrowed(),
            );
            spare::recycle(big);
            let mut after = Batch::new();
            fill(&mut after, 0..2);
            spare::reserve(&mut after, 1);
            assert!(after.records.capacity() < 1000);
            assert!(after.bytes.capacity() < 100_000);
        })
        .join()
        .expect("a thread of its own, for its own spare");
    }

    fn record(key: &str, kind: RecordKind) -> Record {
        Record::new(0, key.as_bytes().to_vec(), kind)
    }

    /// A command's push onto `key`, as the command logs it: the key noted in the
    /// batch, then the operation, which may continue the batch's last.
    fn push(batch: &mut Batch, name: &str, key: &str, element: &str, expires_at: u64) {
        let noted = batch.note_key(key.as_bytes());
        let argv = [name.as_bytes(), key.as_bytes(), element.as_bytes()];
        batch.push_op(0, noted, None, &argv, expires_at, true);
    }

    #[test]
    fn a_batch_merges_only_consecutive_operations_of_one_key_and_expiry() {
        let mut batch = Batch::new();
        push(&mut batch, "LPUSH", "k", "a", 0);
        push(&mut batch, "lpush", "k", "b", 0);
        assert_eq!(batch.len(), 1);
        // The key noted for the second push went with the merge: the buffer holds
        // the key once (after its room) and the one operation.
        assert_eq!(
            batch.bytes.len(),
            KEY_ROOM + 1 + op(&["LPUSH", "k", "a", "b"]).len()
        );
        // Another expiry (the key was recreated without its TTL, say): a record of
        // its own.
        push(&mut batch, "LPUSH", "k", "c", 7);
        assert_eq!(batch.len(), 2);
        // Another key between two pushes onto one key keeps them apart.
        push(&mut batch, "LPUSH", "j", "x", 0);
        push(&mut batch, "LPUSH", "k", "d", 7);
        assert_eq!(batch.len(), 4);
        // A tombstone and an operation (a key's first record) are never merged.
        let noted = batch.note_key(b"k");
        batch.push_bare(0, noted, None, RecordKind::Fresh);
        push(&mut batch, "LPUSH", "k", "e", 7);
        assert_eq!(batch.len(), 6);
        // Nor is another command: the buffer is as it was, and the noted key stays
        // the new record's.
        let before = batch.bytes.len();
        push(&mut batch, "RPUSH", "k", "f", 7);
        assert_eq!(batch.len(), 7);
        assert_eq!(
            batch.bytes.len(),
            before + KEY_ROOM + 1 + op(&["RPUSH", "k", "f"]).len()
        );
        assert_eq!(batch.to_records()[6].key, b"k");
        let ops: Vec<Vec<String>> = batch
            .iter()
            .filter_map(|r| match &r.kind {
                RecordKind::Op { op, .. } => Some(args(op)),
                _ => None,
            })
            .collect();
        assert_eq!(
            ops,
            [
                vec!["LPUSH", "k", "a", "b"],
                vec!["LPUSH", "k", "c"],
                vec!["LPUSH", "j", "x"],
                vec!["LPUSH", "k", "d"],
                vec!["LPUSH", "k", "e"],
                vec!["RPUSH", "k", "f"],
            ]
        );
    }

    /// What a batch should hold, kept the plain way: owned records, an operation
    /// that continues the last one merged into it by [`append_args`].
    #[derive(Debug, Clone)]
    enum Step {
        /// A command's operation on `key`, its key noted anew or (`again`) the
        /// last record's key taken as it is, merging if `merge`.
        Op {
            key: u8,
            name: u8,
            arg: u8,
            expires_at: u64,
            merge: bool,
            again: bool,
        },
        /// The whole value `arg` of `key`.
        Value { key: u8, arg: u8 },
        /// A record without bytes of its own.
        Bare { key: u8, fresh: bool },
        /// The expiry of `key`.
        Expiry { key: u8, expires_at: u64 },
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let key = 0u8..2;
        prop_oneof![
            4 => (key.clone(), 0u8..4, 0u8..4, prop_oneof![Just(0u64), Just(7u64)], any::<bool>(), any::<bool>())
                .prop_map(|(key, name, arg, expires_at, merge, again)| Step::Op { key, name, arg, expires_at, merge, again }),
            1 => (key.clone(), 0u8..4).prop_map(|(key, arg)| Step::Value { key, arg }),
            1 => (key.clone(), any::<bool>()).prop_map(|(key, fresh)| Step::Bare { key, fresh }),
            1 => (key, prop_oneof![Just(0u64), Just(7u64)]).prop_map(|(key, expires_at)| Step::Expiry { key, expires_at }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever a batch is given, its records are the plain model's, and its
        /// buffer holds each record's key (after its room) and bytes and nothing
        /// else.
        #[test]
        fn a_batch_holds_what_the_plain_records_would(steps in proptest::collection::vec(step(), 0..40)) {
            const KEYS: [&str; 2] = ["k", "list"];
            const NAMES: [&str; 4] = ["LPUSH", "RPUSH", "LPOP", "SADD"];
            const ARGS: [&str; 4] = ["a", "2", "", "x y"];
            let mut batch = Batch::new();
            let mut model: Vec<Record> = Vec::new();
            // Bytes the buffer holds besides the records' own: keys shared by two.
            let mut shared = 0;
            for step in steps {
                match step {
                    Step::Op { key, name, arg, expires_at, merge, again } => {
                        let last_key = batch.records.last().map(|r| r.key);
                        let reused = again && last_key.is_some();
                        let (k, key) = match last_key {
                            Some(span) if again => (span, batch.at(span).to_vec()),
                            _ => (batch.note_key(KEYS[usize::from(key)].as_bytes()), KEYS[usize::from(key)].as_bytes().to_vec()),
                        };
                        let argv: Vec<&[u8]> = vec![NAMES[usize::from(name)].as_bytes(), &key, ARGS[usize::from(arg)].as_bytes()];
                        let before = batch.len();
                        batch.push_op(0, k, None, &argv, expires_at, merge);
                        let mut merged = false;
                        if merge
                            && let Some(Record { db: 0, key: last, kind: RecordKind::Op { op, expires_at: e }, .. }) = model.last_mut()
                            && *last == key
                            && *e == expires_at
                        {
                            merged = append_args(op, &argv);
                        }
                        if !merged {
                            model.push(Record::new(0, key.clone(), RecordKind::Op { op: encode_op(&argv), expires_at }));
                        }
                        if reused && batch.len() > before {
                            shared += KEY_ROOM + batch.at(k).len();
                        }
                    }
                    Step::Value { key, arg } => {
                        let value = Value::string(ARGS[usize::from(arg)].as_bytes());
                        let k = batch.note_key(KEYS[usize::from(key)].as_bytes());
                        batch.push_value(0, k, None, (&value).into(), 3);
                        model.push(Record::new(0, KEYS[usize::from(key)].into(), RecordKind::Put { value: serialize::to_vec(&value), expires_at: 3 }));
                    }
                    Step::Bare { key, fresh } => {
                        let kind = if fresh { RecordKind::Fresh } else { RecordKind::Delete };
                        let k = batch.note_key(KEYS[usize::from(key)].as_bytes());
                        batch.push_bare(0, k, None, kind.map(|_| Span::default()));
                        model.push(Record::new(0, KEYS[usize::from(key)].into(), kind));
                    }
                    Step::Expiry { key, expires_at } => {
                        let k = batch.note_key(KEYS[usize::from(key)].as_bytes());
                        batch.push_expiry(0, k, None, expires_at);
                        model.push(Record::new(0, KEYS[usize::from(key)].into(), RecordKind::Op { op: vec![OP_EXPIRY], expires_at }));
                    }
                }
                proptest::prop_assert_eq!(batch.to_records(), model.clone());
                let own: usize = model
                    .iter()
                    .map(|r| KEY_ROOM + r.key.len() + r.kind.payload().map_or(0, Vec::len))
                    .sum();
                proptest::prop_assert_eq!(batch.bytes.len(), own - shared);
            }
            // A prefix written before every key (one a key: records that share it
            // get the same) is read with it, and changes nothing else.
            let prefix = |key: &[u8]| u32::try_from(key.len() * 7 + 1).unwrap_or(0).to_be_bytes();
            batch.write_prefixes(|r| prefix(r.key));
            let prefixed: Vec<Vec<u8>> = batch.iter_prefixed().map(|r| r.key.to_vec()).collect();
            let expected: Vec<Vec<u8>> = model.iter().map(|r| [&prefix(&r.key)[..], &r.key].concat()).collect();
            proptest::prop_assert_eq!(prefixed, expected);
            proptest::prop_assert_eq!(batch.to_records(), model);
        }
    }
}
