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

/// One change for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub db: usize,
    pub key: Vec<u8>,
    pub kind: RecordKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// The key's whole value ([`serialize`] form) and absolute expiry (0: none).
    Put { value: Vec<u8>, expires_at: u64 },
    /// An operation to apply to the key's value ([`encode_op`] form), and the key's
    /// expiry after it.
    Op { op: Vec<u8>, expires_at: u64 },
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
    Functions { payload: Vec<u8> },
}

/// The first byte of an operation.
pub const OP_EXPIRY: u8 = 0x00;
pub const OP_COMMAND: u8 = 0x01;

/// Encodes a command to replay: `OP_COMMAND`, the argument count, then each
/// argument's length and bytes (LEB128 lengths).
pub fn encode_op<B: AsRef<[u8]>>(argv: &[B]) -> Vec<u8> {
    // One allocation: a length's varint takes at most 10 bytes.
    let size = 11 + argv.iter().map(|a| a.as_ref().len() + 10).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.push(OP_COMMAND);
    put_varint(&mut out, argv.len() as u64);
    for a in argv {
        let a = a.as_ref();
        put_varint(&mut out, a.len() as u64);
        out.extend_from_slice(a);
    }
    out
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads an operation written by [`encode_op`] (`None` for an expiry-only one).
/// Errors on malformed bytes; never panics.
pub fn decode_op(bytes: &[u8]) -> Result<Option<Vec<Vec<u8>>>, &'static str> {
    let (&tag, mut rest) = bytes.split_first().ok_or("empty operation")?;
    match tag {
        OP_EXPIRY => return Ok(None),
        OP_COMMAND => {}
        _ => return Err("unknown operation"),
    }
    let varint = |buf: &mut &[u8]| -> Result<usize, &'static str> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, r) = buf.split_first().ok_or("operation truncated")?;
            *buf = r;
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return usize::try_from(n).map_err(|_| "length out of range");
            }
        }
        Err("length out of range")
    };
    let count = varint(&mut rest)?;
    if count > rest.len() {
        return Err("operation truncated");
    }
    let mut argv = Vec::with_capacity(count);
    for _ in 0..count {
        let len = varint(&mut rest)?;
        if len > rest.len() {
            return Err("operation truncated");
        }
        let (arg, r) = rest.split_at(len);
        argv.push(arg.to_vec());
        rest = r;
    }
    if !rest.is_empty() {
        return Err("bytes after the operation");
    }
    Ok(Some(argv))
}

/// The records for a key changed by one command, from its state now (the key, of
/// hash `hash` in `db`, moves into the last of them).
///
/// `explicit` are the operations the handler gave for this key (in order), `argv`
/// the command and `rule` its table rule; `first` tells whether this is the key's
/// first record in its batch (asked only when it matters, which is rare, and given
/// the key).
///
/// Operations on a key whose records the database does not list follow a
/// [`RecordKind::Fresh`], so that replay never applies them to an old value the
/// store may still hold.
#[allow(clippy::too_many_arguments)]
pub fn record_for(
    db_index: usize,
    db: &mut Db,
    hash: u64,
    key: Vec<u8>,
    now_ms: u64,
    rule: LogRule,
    argv: &[&[u8]],
    explicit: &[Vec<Vec<u8>>],
    first: impl FnOnce(&[u8]) -> bool,
) -> Records {
    let kinds = match db.peek(hash, &key, now_ms) {
        None => smallvec::smallvec![RecordKind::Delete],
        Some(entry) => {
            let mut kinds = kinds_of(db, entry, &key, rule, argv, explicit);
            if !entry.is_logged()
                && matches!(kinds.first(), Some(RecordKind::Op { .. }))
                && first(&key)
            {
                kinds.insert(0, RecordKind::Fresh);
            }
            kinds
        }
    };
    let mut records: Records = kinds
        .into_iter()
        .map(|kind| Record {
            db: db_index,
            key: Vec::new(),
            kind,
        })
        .collect();
    // The key moves into the last record; the others (rare: a tombstone first, or
    // a handler's several operations) get copies.
    if let Some((last, rest)) = records.split_last_mut() {
        for r in rest {
            r.key.clone_from(&key);
        }
        last.key = key;
    }
    records
}

/// A batch of records to append (most batches hold one command's one record).
pub type Batch = smallvec::SmallVec<[Record; 2]>;

/// Where each record of a batch went, when the keyspace is to list it (see
/// [`crate::Server::log`]).
pub type Located = smallvec::SmallVec<[Option<strata_keyspace::logref::LogLoc>; 4]>;

/// The records of one key's change: one, but for a tombstone before a first
/// operation or a handler's several operations.
pub type Records = smallvec::SmallVec<[Record; 1]>;

/// What the tombstone before an unlisted key's first operation costs besides the
/// key: a record's header (the store's `HEADER_LEN`) and a namespace prefix.
const FRESH_RECORD_COST: usize = 40;

/// The kinds of record a change to `entry` logs (one for most commands).
type Kinds = smallvec::SmallVec<[RecordKind; 1]>;

fn kinds_of(
    db: &Db,
    entry: &strata_keyspace::Entry,
    key: &[u8],
    rule: LogRule,
    argv: &[&[u8]],
    explicit: &[Vec<Vec<u8>>],
) -> Kinds {
    let expires_at = db.expire_at(entry).unwrap_or(0);
    if !explicit.is_empty() {
        return explicit
            .iter()
            .map(|op| RecordKind::Op {
                op: encode_op(op),
                expires_at,
            })
            .collect();
    }
    // O(1) per command, whatever the value's size.
    let value_size = entry.value.heap_size_quick() + 1;
    // An operation on a key the database lists no records of costs a tombstone too
    // (see `record_for`), and the key's records become a chain, listed by key bytes;
    // the whole value is one record that the key's table slot lists in place.
    let fresh_cost = if entry.is_logged() {
        0
    } else {
        FRESH_RECORD_COST + key.len()
    };
    let kind = match rule {
        // A value out of memory (`maxmemory-policy tiered`) is unchanged — the
        // commands that may run on one never change it — and is already the key's
        // record in the store: only its expiry is logged.
        _ if entry.value.is_cold() => RecordKind::Op {
            op: vec![OP_EXPIRY],
            expires_at,
        },
        LogRule::Expiry => RecordKind::Op {
            op: vec![OP_EXPIRY],
            expires_at,
        },
        LogRule::Replay
            if replay_size(argv) + fresh_cost < value_size && argv.get(1) == Some(&key) =>
        {
            RecordKind::Op {
                op: encode_op(argv),
                expires_at,
            }
        }
        _ => RecordKind::Put {
            value: serialize::to_vec(&entry.value),
            expires_at,
        },
    };
    smallvec::smallvec![kind]
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
}
