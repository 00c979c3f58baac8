//! Write batches: several puts, deletes and merges applied all or nothing.
//!
//! A batch is written to the log as one frame (see [`record`](crate::record)),
//! so after a crash either every operation of the batch is there or none is.
//! Readers may observe the operations of a batch one after another while it
//! is applied to the index.

use crate::record::Kind;

/// Version and expiry of a write.
///
/// Without a version the engine assigns the next number of its own sequence
/// (one more than the highest version it has seen). A put without an expiry
/// never expires; a merge without one keeps the key's current expiry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteMeta {
    /// The version stored with the record.
    pub version: Option<u64>,
    /// Absolute expiry in Unix milliseconds (`Some(0)`: none); `None` on a merge keeps
    /// the key's current expiry.
    pub expires_at: Option<u64>,
}

impl WriteMeta {
    /// No explicit version or expiry.
    pub fn new() -> WriteMeta {
        WriteMeta::default()
    }

    /// Sets the version.
    pub fn with_version(mut self, version: u64) -> WriteMeta {
        self.version = Some(version);
        self
    }

    /// Sets the absolute expiry in Unix milliseconds; 0 means none, which on a merge
    /// removes the key's current expiry (see [`WriteMeta::without_expiry`]).
    pub fn with_expiry(mut self, expires_at_ms: u64) -> WriteMeta {
        self.expires_at = Some(expires_at_ms);
        self
    }

    /// No expiry: on a put the same as giving none; on a merge it removes the key's
    /// current expiry, where giving none would keep it.
    pub fn without_expiry(self) -> WriteMeta {
        self.with_expiry(0)
    }
}

/// One operation, its key and value borrowed: a [`WriteBatch`]'s, read in place, or
/// one of the caller's own for [`Engine::write_ops_located`](crate::Engine::write_ops_located).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOp<'a> {
    pub(crate) kind: Kind,
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
    pub(crate) meta: WriteMeta,
}

impl<'a> WriteOp<'a> {
    /// A put of `value` at `key`.
    pub fn put(key: &'a [u8], value: &'a [u8], meta: WriteMeta) -> WriteOp<'a> {
        WriteOp {
            kind: Kind::Put,
            key,
            value,
            meta,
        }
    }

    /// A delete of `key` (its version, if given, is the one stored with the
    /// tombstone).
    pub fn delete(key: &'a [u8], meta: WriteMeta) -> WriteOp<'a> {
        WriteOp {
            kind: Kind::Delete,
            key,
            value: &[],
            meta,
        }
    }

    /// A merge operand for `key`.
    pub fn merge(key: &'a [u8], operand: &'a [u8], meta: WriteMeta) -> WriteOp<'a> {
        WriteOp {
            kind: Kind::Merge,
            key,
            value: operand,
            meta,
        }
    }
}

/// One operation of a batch: its key and value are ranges of the batch's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchOp {
    pub kind: Kind,
    key: std::ops::Range<usize>,
    value: std::ops::Range<usize>,
    pub meta: WriteMeta,
}

/// Operations to apply atomically with [`Engine::write`](crate::Engine::write).
///
/// Keys and values are copied into one buffer, so a batch costs no allocation per
/// operation once its buffers have grown (see [`WriteBatch::clear`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    pub(crate) ops: Vec<BatchOp>,
    data: Vec<u8>,
    /// Every key is one the caller indexes itself ([`WriteBatch::set_external`]).
    pub(crate) external: bool,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Adds a put.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> &mut WriteBatch {
        self.put_with(key, value, WriteMeta::default())
    }

    /// Adds a put with a version and/or expiry.
    pub fn put_with(&mut self, key: &[u8], value: &[u8], meta: WriteMeta) -> &mut WriteBatch {
        self.push(Kind::Put, key, value, meta)
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) -> &mut WriteBatch {
        self.delete_with(key, WriteMeta::default())
    }

    /// Adds a delete with a version.
    pub fn delete_with(&mut self, key: &[u8], meta: WriteMeta) -> &mut WriteBatch {
        self.push(Kind::Delete, key, &[], meta)
    }

    /// Adds a merge operand.
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> &mut WriteBatch {
        self.merge_with(key, operand, WriteMeta::default())
    }

    /// Adds a merge operand with a version and/or expiry.
    pub fn merge_with(&mut self, key: &[u8], operand: &[u8], meta: WriteMeta) -> &mut WriteBatch {
        self.push(Kind::Merge, key, operand, meta)
    }

    fn push(&mut self, kind: Kind, key: &[u8], value: &[u8], meta: WriteMeta) -> &mut WriteBatch {
        let start = self.data.len();
        self.data.extend_from_slice(key);
        let key_end = self.data.len();
        self.data.extend_from_slice(value);
        self.ops.push(BatchOp {
            kind,
            key: start..key_end,
            value: key_end..self.data.len(),
            meta,
        });
        self
    }

    /// The key of the `i`th operation.
    pub fn key(&self, i: usize) -> Option<&[u8]> {
        self.ops.get(i).map(|op| self.key_of(op))
    }

    pub(crate) fn key_of(&self, op: &BatchOp) -> &[u8] {
        self.data.get(op.key.clone()).unwrap_or_default()
    }

    pub(crate) fn value_of(&self, op: &BatchOp) -> &[u8] {
        self.data.get(op.value.clone()).unwrap_or_default()
    }

    /// Bytes of keys and values the batch's buffer can hold without growing.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch has no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Declares that the index would call every key of the batch external
    /// ([`Index::is_external`](crate::Index::is_external)), so that the engine
    /// need not ask it about each: the caller that knows it of a whole batch (its
    /// keys all of its own) spares a question per operation. The caller's word is
    /// taken: a key declared so is never applied to the index. Cleared by
    /// [`WriteBatch::clear`].
    pub fn set_external(&mut self, external: bool) {
        self.external = external;
    }

    /// Removes every operation, keeping the buffers for the next ones.
    pub fn clear(&mut self) {
        self.ops.clear();
        self.data.clear();
        self.external = false;
    }
}
