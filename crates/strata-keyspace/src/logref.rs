//! Where each key's records are in the store's log, kept beside the keys.
//!
//! With persistence on, the store must know, for its compaction and for values kept
//! only on disk, which records hold each key's current value. A database keeps that
//! here rather than the store keeping a second index of every key: an entry has a
//! flag saying whether it has records listed ([`crate::entry::Entry::is_logged`]), and the
//! records are in one of two places:
//!
//! - **narrow**: a key whose value is one whole record (every string, and every
//!   collection logged whole) of at most 64 KiB keeps its location in its entry
//!   ([`Narrow`], in [`crate::entry::Entry`]): segment and offset in 8 bytes, length in
//!   two more. No lookup of its own, nothing allocated per key.
//! - **wide**: by key bytes, in [`LogIndex`], the rest: keys whose records are a
//!   chain (a value and the operations logged after it), and values whose record is
//!   longer or whose location does not fit 32-bit fields.
//!
//! # Invariants
//!
//! - A flagged key's records are its narrow slot if that holds a location, else
//!   `wide[key]`; an unflagged key's narrow slot is empty and `wide` lacks it.
//! - Chains are in log order: the whole value (if the key had one), then operations.

use std::collections::HashMap;
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

/// Where a key's value is when it is one record whose segment and offset fit in 32
/// bits and whose length fits in 16: kept in the key's entry, so it costs no
/// lookup of its own ([`NarrowSlot`] says where). A zero length (no record is empty)
/// means nothing is held.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Narrow {
    slot: NarrowSlot,
    len: u16,
}

/// The segment and offset of a [`Narrow`] (8 bytes), kept in the key's entry
/// ([`crate::entry::Entry`]) beside its length.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NarrowSlot {
    segment: u32,
    offset: u32,
}

impl Narrow {
    /// `loc` as a `Narrow`, if it fits.
    pub fn new(loc: LogLoc) -> Option<Narrow> {
        Some(Narrow {
            slot: NarrowSlot {
                segment: u32::try_from(loc.segment).ok()?,
                offset: loc.offset,
            },
            len: u16::try_from(loc.len).ok().filter(|&l| l != 0)?,
        })
    }

    /// The location held, if any.
    #[inline]
    pub fn loc(self) -> Option<LogLoc> {
        (self.len != 0).then(|| LogLoc {
            segment: u64::from(self.slot.segment),
            offset: self.slot.offset,
            len: u32::from(self.len),
        })
    }

    /// Takes the location held, leaving nothing.
    #[inline]
    pub fn take(&mut self) -> Option<LogLoc> {
        std::mem::take(self).loc()
    }

    /// The `Narrow` kept as `slot` and `len` (nothing if `len` is 0).
    #[inline]
    pub fn join(slot: NarrowSlot, len: u16) -> Narrow {
        if len == 0 {
            return Narrow::default();
        }
        Narrow { slot, len }
    }

    /// The slot part and the length part (see [`NarrowSlot`]).
    #[inline]
    pub fn split(self) -> (NarrowSlot, u16) {
        (self.slot, self.len)
    }
}

/// One database's count of keys with records listed, and the records of those whose
/// value is not one [`Narrow`] record (see the module docs).
#[derive(Debug, Default)]
pub struct LogIndex {
    /// Keys listed (narrow or wide).
    listed: usize,
    wide: HashMap<Box<[u8]>, LogRefs, KeyHasher>,
}

impl Drop for LogIndex {
    fn drop(&mut self) {
        LISTED.fetch_sub(self.listed as u64, Ordering::Relaxed);
    }
}

impl LogIndex {
    /// Keys listed.
    pub fn len(&self) -> usize {
        self.listed
    }

    pub fn is_empty(&self) -> bool {
        self.listed == 0
    }

    /// The records of the flagged key `key`, whose narrow slot is `narrow`.
    pub fn get(&self, key: &[u8], narrow: Narrow) -> Option<LogRefs> {
        match narrow.loc() {
            Some(loc) => Some(LogRefs::Value(loc)),
            None => self.wide.get(key).cloned(),
        }
    }

    /// The oldest record of the flagged key `key`, without copying a chain.
    pub fn first(&self, key: &[u8], narrow: Narrow) -> Option<LogLoc> {
        match narrow.loc() {
            Some(loc) => Some(loc),
            None => self.wide.get(key)?.locations().next(),
        }
    }

    /// Counts a key as listed if it was not (`listed` is its flag).
    fn list(&mut self, listed: bool) {
        if !listed {
            self.listed += 1;
            LISTED.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets the records a listed key had; returns their bytes.
    fn drop_records(&mut self, key: &[u8], narrow: &mut Narrow) -> u64 {
        match narrow.take() {
            Some(loc) => u64::from(loc.len),
            None => self.wide.remove(key).map_or(0, |r| r.bytes()),
        }
    }

    /// Sets the records of `key` (flagged if `listed`, narrow slot `narrow`); returns
    /// the bytes of the records it had.
    pub fn set(&mut self, key: &[u8], listed: bool, narrow: &mut Narrow, refs: LogRefs) -> u64 {
        let freed = if listed {
            self.drop_records(key, narrow)
        } else {
            0
        };
        self.list(listed);
        match &refs {
            LogRefs::Value(loc) if let Some(n) = Narrow::new(*loc) => *narrow = n,
            _ => {
                self.wide.insert(key.into(), refs);
            }
        }
        freed
    }

    /// Applies a logged change to `key` (flagged if `listed`, narrow slot `narrow`);
    /// returns the bytes of records it made dead. An operation is appended in place:
    /// O(1) however long the key's chain has grown.
    pub fn apply(
        &mut self,
        key: &[u8],
        listed: bool,
        narrow: &mut Narrow,
        change: LogChange,
    ) -> u64 {
        let loc = match change {
            LogChange::Put(loc) => return self.set(key, listed, narrow, LogRefs::Value(loc)),
            LogChange::Op(loc) => loc,
        };
        // Nothing becomes dead: the old records are still the chain's.
        self.list(listed);
        let base = narrow.take();
        if listed
            && base.is_none()
            && let Some(refs) = self.wide.get_mut(key)
        {
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
        self.wide.insert(
            key.into(),
            LogRefs::Chain {
                base,
                operands: vec![loc],
            },
        );
        0
    }

    /// Forgets the records of the flagged key `key`; returns their bytes.
    pub fn remove(&mut self, key: &[u8], narrow: &mut Narrow) -> u64 {
        let freed = self.drop_records(key, narrow);
        self.listed -= 1;
        LISTED.fetch_sub(1, Ordering::Relaxed);
        freed
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
    fn narrow_holds_what_fits_and_nothing_else() {
        // What a table slot carries for it.
        assert_eq!(size_of::<NarrowSlot>(), 8);
        let l = LogLoc {
            segment: 0xdead_beef,
            offset: 0x1234_5678,
            len: 65_535,
        };
        assert_eq!(Narrow::new(l).and_then(Narrow::loc), Some(l));
        assert_eq!(Narrow::new(LogLoc { len: 65_536, ..l }), None);
        assert_eq!(Narrow::new(LogLoc { len: 0, ..l }), None);
        assert_eq!(
            Narrow::new(LogLoc {
                segment: 1 << 32,
                ..l
            }),
            None
        );
        assert_eq!(Narrow::default().loc(), None);
        let mut n = Narrow::new(l).expect("fits");
        let (slot, len) = n.split();
        assert_eq!(Narrow::join(slot, len), n);
        assert_eq!(Narrow::join(slot, 0), Narrow::default());
        assert_eq!(n.take(), Some(l));
        assert_eq!(n, Narrow::default());
    }

    #[test]
    fn values_that_do_not_fit_go_wide() {
        let mut idx = LogIndex::default();
        let mut n = Narrow::default();
        let big = LogLoc {
            segment: 1 << 40,
            offset: 0,
            len: 10,
        };
        assert_eq!(idx.set(b"w", false, &mut n, LogRefs::Value(big)), 0);
        assert_eq!(n, Narrow::default());
        assert_eq!(idx.get(b"w", n), Some(LogRefs::Value(big)));
        // Back to narrow: the wide records are dead.
        assert_eq!(idx.set(b"w", true, &mut n, LogRefs::Value(loc(1, 0))), 10);
        assert_eq!(idx.get(b"w", n), Some(LogRefs::Value(loc(1, 0))));
        assert!(idx.wide.is_empty());
        assert_eq!(idx.len(), 1);
        assert_eq!(idx.remove(b"w", &mut n), 10);
        assert_eq!(idx.len(), 0);
        assert_eq!(n, Narrow::default());
    }

    #[test]
    fn operations_make_chains_and_puts_end_them() {
        let mut idx = LogIndex::default();
        let mut n = Narrow::default();
        idx.set(b"k", false, &mut n, LogRefs::Value(loc(1, 0)));
        assert!(n.loc().is_some());
        assert_eq!(idx.apply(b"k", true, &mut n, LogChange::Op(loc(1, 10))), 0);
        assert_eq!(n, Narrow::default(), "a chain is wide");
        assert_eq!(idx.apply(b"k", true, &mut n, LogChange::Op(loc(2, 0))), 0);
        let chain = idx.get(b"k", n).expect("listed");
        let offsets: Vec<_> = chain.locations().map(|l| (l.segment, l.offset)).collect();
        assert_eq!(offsets, vec![(1, 0), (1, 10), (2, 0)]);
        assert_eq!(idx.first(b"k", n), Some(loc(1, 0)));
        assert_eq!(idx.apply(b"k", true, &mut n, LogChange::Put(loc(3, 0))), 30);
        assert_eq!(idx.get(b"k", n), Some(LogRefs::Value(loc(3, 0))));
        assert!(idx.wide.is_empty());
        // An operation on a key with no records starts a chain without a value.
        let mut m = Narrow::default();
        idx.apply(b"n", false, &mut m, LogChange::Op(loc(3, 10)));
        assert_eq!(
            idx.get(b"n", m),
            Some(LogRefs::Chain {
                base: None,
                operands: vec![loc(3, 10)]
            })
        );
        assert_eq!(idx.len(), 2);
    }
}
