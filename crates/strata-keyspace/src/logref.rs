//! Where each key's records are in the store's log, kept beside the keys.
//!
//! With persistence on, the store must know, for its compaction and for values kept
//! only on disk, which records hold each key's current value. A database keeps that
//! here rather than the store keeping a second index of every key: an entry has a
//! flag saying whether it has records listed ([`crate::db::Entry::is_logged`]), and the
//! records are found by the key's hash:
//!
//! - **narrow**: a key whose value is one whole record (every string, and every
//!   collection logged whole) takes 16 bytes: 32 bits of its hash, and the record's
//!   segment, offset and length in 32 bits each.
//! - **wide**: by key bytes, the rest: keys whose records are a chain (a value and
//!   the operations logged after it), whose location does not fit 32-bit fields,
//!   and keys whose 32 hash bits another listed key already holds in `narrow`.
//!
//! # Invariants
//!
//! - A flagged key's records are `wide[key]` if listed there, else `narrow[frag]`;
//!   every slot of `narrow` and `wide` belongs to exactly one flagged key.
//! - Chains are in log order: the whole value (if the key had one), then operations.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::KeyHasher;

/// Where one record is in the log (the store's location, in the keyspace's words).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogLoc {
    pub segment: u64,
    pub offset: u32,
    pub len: u32,
}

/// The records that make a key's value, in log order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRefs {
    /// One whole value.
    Value(LogLoc),
    /// Operations after an optional whole value.
    Chain {
        base: Option<LogLoc>,
        operands: Vec<LogLoc>,
    },
}

impl LogRefs {
    /// The records, oldest first.
    pub fn locations(&self) -> impl Iterator<Item = LogLoc> + '_ {
        let (single, chain) = match self {
            LogRefs::Value(l) => (Some(*l), None),
            LogRefs::Chain { base, operands } => (None, Some((base, operands))),
        };
        single.into_iter().chain(
            chain
                .into_iter()
                .flat_map(|(b, ops)| b.iter().copied().chain(ops.iter().copied())),
        )
    }

    /// Bytes of all the records.
    pub fn bytes(&self) -> u64 {
        self.locations().map(|l| u64::from(l.len)).sum()
    }
}

/// A logged change of a key, to apply to its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogChange {
    /// A whole value: replaces the key's records.
    Put(LogLoc),
    /// An operation: appended to the key's records.
    Op(LogLoc),
}

/// Record bytes that left every database's lists since [`take_freed`] last ran.
static FREED: AtomicU64 = AtomicU64::new(0);
/// Keys with records listed, in every database of the process.
static LISTED: AtomicU64 = AtomicU64::new(0);

/// Takes the count of record bytes that stopped being any key's (overwritten,
/// deleted, expired, evicted) since the last call: what the store can reclaim.
pub fn take_freed() -> u64 {
    FREED.swap(0, Ordering::Relaxed)
}

pub(crate) fn add_freed(bytes: u64) {
    if bytes > 0 {
        FREED.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// Keys with records listed, in every database of the process.
pub fn listed_keys() -> u64 {
    LISTED.load(Ordering::Relaxed)
}

/// A `narrow` slot: segment, offset and length.
type Narrow = [u32; 3];

/// Hashes the 32 hash bits `narrow` is keyed by back into 64 well-mixed bits.
#[derive(Debug, Default, Clone, Copy)]
pub struct FragHasher;

#[derive(Debug, Default)]
pub struct FragHash(u64);

impl BuildHasher for FragHasher {
    type Hasher = FragHash;
    fn build_hasher(&self) -> FragHash {
        FragHash(0)
    }
}

impl Hasher for FragHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        // The fragment is already uniform: spread it over all 64 bits.
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(n);
    }
}

/// The 32 bits of a key's hash kept in `narrow` (the low ones: the keyspace picks a
/// key's shard with the high ones).
#[inline]
fn frag(hash: u64) -> u32 {
    hash as u32
}

fn narrow_of(refs: &LogRefs) -> Option<Narrow> {
    match refs {
        LogRefs::Value(l) if l.len != 0 => Some([u32::try_from(l.segment).ok()?, l.offset, l.len]),
        _ => None,
    }
}

fn from_narrow_loc(n: Narrow) -> LogLoc {
    LogLoc {
        segment: u64::from(n[0]),
        offset: n[1],
        len: n[2],
    }
}

fn from_narrow(n: Narrow) -> LogRefs {
    LogRefs::Value(from_narrow_loc(n))
}

/// One database's lists of records (see the module docs).
#[derive(Debug, Default)]
pub struct LogIndex {
    narrow: HashMap<u32, Narrow, FragHasher>,
    wide: HashMap<Box<[u8]>, LogRefs, KeyHasher>,
}

impl Drop for LogIndex {
    fn drop(&mut self) {
        LISTED.fetch_sub(self.len() as u64, Ordering::Relaxed);
    }
}

impl LogIndex {
    /// Keys listed.
    pub fn len(&self) -> usize {
        self.narrow.len() + self.wide.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records of the flagged key `key`.
    pub fn get(&self, hash: u64, key: &[u8]) -> Option<LogRefs> {
        if !self.wide.is_empty()
            && let Some(refs) = self.wide.get(key)
        {
            return Some(refs.clone());
        }
        self.narrow.get(&frag(hash)).copied().map(from_narrow)
    }

    /// Sets the records of `key` (flagged if `listed`); returns the bytes of the
    /// records it had.
    pub fn set(&mut self, hash: u64, key: &[u8], listed: bool, refs: LogRefs) -> u64 {
        let f = frag(hash);
        let narrow = narrow_of(&refs);
        if listed {
            if let Some(slot) = self.wide.get_mut(key) {
                let old = std::mem::replace(slot, refs);
                return old.bytes();
            }
            // The key holds `narrow[f]`.
            match narrow {
                Some(n) => {
                    let old = self.narrow.insert(f, n);
                    old.map_or(0, |o| u64::from(o[2]))
                }
                None => {
                    let old = self.narrow.remove(&f);
                    self.wide.insert(key.into(), refs);
                    old.map_or(0, |o| u64::from(o[2]))
                }
            }
        } else {
            LISTED.fetch_add(1, Ordering::Relaxed);
            match narrow {
                Some(n) => match self.narrow.entry(f) {
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(n);
                    }
                    // Another listed key has these 32 bits.
                    std::collections::hash_map::Entry::Occupied(_) => {
                        self.wide.insert(key.into(), refs);
                    }
                },
                None => {
                    self.wide.insert(key.into(), refs);
                }
            }
            0
        }
    }

    /// Applies a logged change to `key` (flagged if `listed`); returns the bytes of
    /// records it made dead. An operation is appended in place: O(1) however long
    /// the key's chain has grown.
    pub fn apply(&mut self, hash: u64, key: &[u8], listed: bool, change: LogChange) -> u64 {
        let loc = match change {
            LogChange::Put(loc) => return self.set(hash, key, listed, LogRefs::Value(loc)),
            LogChange::Op(loc) => loc,
        };
        // Nothing becomes dead: the old records are still the chain's.
        if listed {
            if let Some(refs) = self.wide.get_mut(key) {
                match refs {
                    LogRefs::Chain { operands, .. } => operands.push(loc),
                    LogRefs::Value(base) => {
                        *refs = LogRefs::Chain {
                            base: Some(*base),
                            operands: vec![loc],
                        }
                    }
                }
                return 0;
            }
            let base = self.narrow.remove(&frag(hash)).map(from_narrow_loc);
            self.wide.insert(
                key.into(),
                LogRefs::Chain {
                    base,
                    operands: vec![loc],
                },
            );
        } else {
            LISTED.fetch_add(1, Ordering::Relaxed);
            self.wide.insert(
                key.into(),
                LogRefs::Chain {
                    base: None,
                    operands: vec![loc],
                },
            );
        }
        0
    }

    /// The oldest record of the flagged key `key`, without copying a chain.
    pub fn first(&self, hash: u64, key: &[u8]) -> Option<LogLoc> {
        if !self.wide.is_empty()
            && let Some(refs) = self.wide.get(key)
        {
            return refs.locations().next();
        }
        self.narrow.get(&frag(hash)).copied().map(from_narrow_loc)
    }

    /// Forgets the records of the flagged key `key`; returns their bytes.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> u64 {
        let freed = if !self.wide.is_empty()
            && let Some(refs) = self.wide.remove(key)
        {
            refs.bytes()
        } else {
            self.narrow
                .remove(&frag(hash))
                .map_or(0, |o| u64::from(o[2]))
        };
        LISTED.fetch_sub(1, Ordering::Relaxed);
        freed
    }

    /// Makes room for `additional` more keys.
    pub fn reserve(&mut self, additional: usize) {
        self.narrow.reserve(additional);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(segment: u64, offset: u32) -> LogLoc {
        LogLoc {
            segment,
            offset,
            len: 10,
        }
    }

    #[test]
    fn keys_sharing_hash_bits_keep_their_own_records() {
        let mut idx = LogIndex::default();
        // Two keys whose hashes share the low 32 bits.
        let (ha, hb) = (0x1_0000_0007u64, 0x2_0000_0007u64);
        assert_eq!(idx.set(ha, b"a", false, LogRefs::Value(loc(1, 0))), 0);
        assert_eq!(idx.set(hb, b"b", false, LogRefs::Value(loc(1, 10))), 0);
        assert_eq!(idx.get(ha, b"a"), Some(LogRefs::Value(loc(1, 0))));
        assert_eq!(idx.get(hb, b"b"), Some(LogRefs::Value(loc(1, 10))));
        assert_eq!(idx.set(hb, b"b", true, LogRefs::Value(loc(2, 0))), 10);
        assert_eq!(idx.get(ha, b"a"), Some(LogRefs::Value(loc(1, 0))));
        assert_eq!(idx.remove(ha, b"a"), 10);
        assert_eq!(idx.get(hb, b"b"), Some(LogRefs::Value(loc(2, 0))));
        assert_eq!(idx.len(), 1);
    }

    #[test]
    fn operations_make_chains_and_puts_end_them() {
        let mut idx = LogIndex::default();
        idx.set(5, b"k", false, LogRefs::Value(loc(1, 0)));
        assert_eq!(idx.apply(5, b"k", true, LogChange::Op(loc(1, 10))), 0);
        assert_eq!(idx.apply(5, b"k", true, LogChange::Op(loc(2, 0))), 0);
        let chain = idx.get(5, b"k").expect("listed");
        let offsets: Vec<_> = chain.locations().map(|l| (l.segment, l.offset)).collect();
        assert_eq!(offsets, vec![(1, 0), (1, 10), (2, 0)]);
        assert_eq!(idx.apply(5, b"k", true, LogChange::Put(loc(3, 0))), 30);
        assert_eq!(idx.get(5, b"k"), Some(LogRefs::Value(loc(3, 0))));
        // An operation on a key with no records starts a chain without a value.
        idx.apply(6, b"n", false, LogChange::Op(loc(3, 10)));
        assert_eq!(
            idx.get(6, b"n"),
            Some(LogRefs::Chain {
                base: None,
                operands: vec![loc(3, 10)]
            })
        );
        // A segment number past 32 bits is kept whole.
        idx.set(7, b"w", false, LogRefs::Value(loc(1 << 40, 0)));
        assert_eq!(idx.get(7, b"w"), Some(LogRefs::Value(loc(1 << 40, 0))));
    }
}
