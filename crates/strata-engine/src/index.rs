//! The index abstraction: where each live key's records are.
//!
//! The engine asks its index three things: where a key's records are
//! ([`Index::get`]), to apply a logged change ([`Index::apply`]), and, for
//! compaction, to move a key's records to their new home only if nothing
//! changed them meanwhile ([`Index::replace_prefix`], [`Index::remove_if`]).
//! The in-memory [`Keydir`](crate::Keydir) implements it today; an on-disk
//! B+tree with Bloom filters for key sets larger than RAM can implement the
//! same trait without the engine's API changing. A program that already holds
//! every key in memory can answer for its keys from there instead of the engine
//! keeping them twice: see [`Index::is_external`] and
//! [`Engine::write_located`](crate::Engine::write_located).
//!
//! A key's entry names the records that make its value, in log order: the
//! last full value (if any) followed by the merge operands written after it.
//! Invariants every implementation keeps: `apply` calls arrive in log order
//! (the engine makes them under the log's writer lock) and each call is
//! atomic with respect to the others for the same key.

use std::fmt;

use crate::segment::{Location, SegmentId};

/// The records that make a key's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// A single full value.
    Value(Location),
    /// Merge operands, after an optional full value.
    Merged(Box<Chain>),
}

/// A full value followed by merge operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The last full value, if the key had one before the operands.
    pub base: Option<Location>,
    /// The operands, oldest first; never empty.
    pub operands: Vec<Location>,
}

/// What the index holds for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEntry {
    /// Version of the key's newest record.
    pub version: u64,
    /// Expiry of the key's newest record in Unix milliseconds, 0 for never.
    pub expires_at: u64,
    /// The records making the value.
    pub slot: Slot,
}

impl KeyEntry {
    /// The locations of the key's records, oldest first.
    pub fn locations(&self) -> impl Iterator<Item = Location> + '_ {
        let (single, chain) = match &self.slot {
            Slot::Value(location) => (Some(*location), None),
            Slot::Merged(chain) => (None, Some(chain)),
        };
        single.into_iter().chain(
            chain
                .into_iter()
                .flat_map(|c| c.base.into_iter().chain(c.operands.iter().copied())),
        )
    }

    /// The oldest record of the key.
    pub fn first_location(&self) -> Option<Location> {
        self.locations().next()
    }

    /// The entry's [`Head`].
    pub fn head(&self) -> Option<Head> {
        let first = self.first_location()?;
        let chained = match &self.slot {
            Slot::Value(_) => false,
            Slot::Merged(chain) => chain.operands.len() + usize::from(chain.base.is_some()) > 1,
        };
        Some(Head {
            first,
            chained,
            expires_at: self.expires_at,
        })
    }

    /// Bytes of all the key's records.
    pub fn record_bytes(&self) -> u64 {
        self.locations().map(|l| u64::from(l.len)).sum()
    }

    /// True if the key has expired at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at != 0 && self.expires_at <= now_ms
    }
}

/// A key's oldest record and what follows it (see [`Index::for_each_head`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Where the oldest record is.
    pub first: Location,
    /// Whether merge operands follow it.
    pub chained: bool,
    /// The key's expiry, 0 for never.
    pub expires_at: u64,
}

/// A logged change to apply to the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A full value: replaces whatever the key had.
    Put {
        /// Where the record is.
        location: Location,
        /// Its version.
        version: u64,
        /// Its expiry, 0 for never.
        expires_at: u64,
    },
    /// A tombstone: the key is gone.
    Delete,
    /// A merge operand: appended to the key's records.
    Merge {
        /// Where the record is.
        location: Location,
        /// Its version.
        version: u64,
        /// Its expiry, 0 for never; becomes the key's expiry.
        expires_at: u64,
    },
}

/// One chunk of a scan over the index.
#[derive(Debug, Default)]
pub struct ScanChunk {
    /// Keys and entries, in the index's order.
    pub entries: Vec<(Box<[u8]>, KeyEntry)>,
    /// Token to pass to the next call, or `None` when the scan is complete.
    pub next: Option<Vec<u8>>,
}

/// Maps keys to the locations of their records. See the [module docs](self).
pub trait Index: Send + Sync + fmt::Debug {
    /// The key's entry, if it has one.
    fn get(&self, key: &[u8]) -> Option<KeyEntry>;

    /// The key's expiry (0 for never), if it has an entry. Unlike [`Index::get`]
    /// this need not copy a long chain of merge operands: implementations should
    /// override it.
    fn expires_at(&self, key: &[u8]) -> Option<u64> {
        self.get(key).map(|e| e.expires_at)
    }

    /// The location of the key's oldest record, if it has an entry (see
    /// [`Index::expires_at`]).
    fn first_location(&self, key: &[u8]) -> Option<Location> {
        self.get(key).and_then(|e| e.first_location())
    }

    /// The key's entry if its oldest record is at `location` (compaction's question
    /// for every record it reads: is this where a live key's value starts?).
    /// Implementations where a lookup is costly should answer with one.
    fn get_if_first(&self, key: &[u8], location: Location) -> Option<KeyEntry> {
        if self.first_location(key) != Some(location) {
            return None;
        }
        self.get(key)
            .filter(|e| e.first_location() == Some(location))
    }

    /// Pushes onto `out`, in no order, the oldest record of every key whose oldest
    /// record is in a segment up to `upto`, if the index can list them all for less
    /// than compaction's question per record costs; returns `false` if it cannot
    /// (and `out` then means nothing). Listing more records than that is harmless.
    ///
    /// A compaction whose inputs hold many more records than there are keys asks
    /// this once and reads the listed records alone, neither reading nor verifying
    /// the others: a record that is no key's oldest when the list is made never
    /// becomes one (a key's oldest record only moves to a newer segment), so it is
    /// dead. A list that lacks a live record loses it. The default cannot list.
    fn first_locations(&self, upto: SegmentId, out: &mut Vec<Location>) -> bool {
        let _ = (upto, out);
        false
    }

    /// Calls `f` with every key that has an entry and its [`Head`] (expired keys
    /// included): the plan for reading a whole store in log order.
    ///
    /// Like [`scan`](Index::scan), no consistency is promised for keys changed
    /// meanwhile.
    fn for_each_head(&self, f: &mut dyn FnMut(&[u8], Head)) {
        let mut token = Vec::new();
        loop {
            let chunk = self.scan(&token);
            for (key, entry) in &chunk.entries {
                if let Some(head) = entry.head() {
                    f(key, head);
                }
            }
            match chunk.next {
                Some(next) => token = next,
                None => break,
            }
        }
    }

    /// Applies a logged change; returns the record bytes it made dead
    /// (`None` if the key had no entry).
    fn apply(&self, key: &[u8], change: Change) -> Option<u64>;

    /// Whether the caller keeps the locations of `key`'s records itself: the
    /// engine then never calls [`Index::apply`] for it (the caller applies what
    /// [`Engine::write_located`](crate::Engine::write_located) returns), and a
    /// merge operand for it gets exactly the expiry its write gives, without the
    /// engine looking at the key's current one. The other methods still answer
    /// for such keys, from wherever the caller keeps them.
    fn is_external(&self, key: &[u8]) -> bool {
        let _ = key;
        false
    }

    /// Record bytes made dead, since the last call, by changes the caller applied
    /// itself (see [`Index::is_external`]); 0 if it applies none.
    fn take_freed(&self) -> u64 {
        0
    }

    /// If the key's records still begin with `prefix`, replaces that prefix by
    /// the single full value at `replacement`; returns the bytes freed.
    fn replace_prefix(&self, key: &[u8], prefix: &[Location], replacement: Location)
    -> Option<u64>;

    /// Removes the key's entry if it still equals `expected`; returns the bytes freed.
    fn remove_if(&self, key: &[u8], expected: &KeyEntry) -> Option<u64>;

    /// Number of keys with an entry (expired keys included until compaction removes them).
    fn len(&self) -> u64;

    /// Bytes the index holds in memory, by estimate (0 if it cannot say).
    fn memory_bytes(&self) -> u64 {
        0
    }

    /// True when no key has an entry.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many independent parts the index has (1 unless overridden).
    ///
    /// Changes to keys of different parts may be applied from different
    /// threads at the same time; opening a store uses this to rebuild the
    /// index on several cores. Changes to one part still arrive in log order.
    fn partitions(&self) -> usize {
        1
    }

    /// The part (below [`partitions`](Index::partitions)) that `key` belongs to.
    fn partition(&self, key: &[u8]) -> usize {
        let _ = key;
        0
    }

    /// Returns a chunk of entries starting at `token` (empty for the start).
    ///
    /// No lock is held between calls; a key changed during a scan may be
    /// seen in its old or new state, or not at all if it was added or
    /// removed meanwhile.
    fn scan(&self, token: &[u8]) -> ScanChunk;
}

/// Pushes onto `out` the oldest record of every key of `index` whose oldest record
/// is in a segment up to `upto`, by a walk of [`Index::for_each_head`]: how an index
/// lists them for [`Index::first_locations`] where that walk holds nothing a writer
/// waits for long (the engine's own keydir does not: its walk, shard by shard under
/// their locks, doubled a writer's longest stall during a compaction).
pub fn heads_up_to<I: Index + ?Sized>(index: &I, upto: SegmentId, out: &mut Vec<Location>) {
    index.for_each_head(&mut |_, head| {
        if head.first.segment <= upto {
            out.push(head.first);
        }
    });
}

/// A shared index is an index: the owner keeps an `Arc` to it while the engine
/// holds another (for an index the caller also reaches, see [`Index::is_external`]).
impl<T: Index + ?Sized> Index for std::sync::Arc<T> {
    fn get(&self, key: &[u8]) -> Option<KeyEntry> {
        (**self).get(key)
    }
    fn expires_at(&self, key: &[u8]) -> Option<u64> {
        (**self).expires_at(key)
    }
    fn first_location(&self, key: &[u8]) -> Option<Location> {
        (**self).first_location(key)
    }
    fn get_if_first(&self, key: &[u8], location: Location) -> Option<KeyEntry> {
        (**self).get_if_first(key, location)
    }
    fn first_locations(&self, upto: SegmentId, out: &mut Vec<Location>) -> bool {
        (**self).first_locations(upto, out)
    }
    fn for_each_head(&self, f: &mut dyn FnMut(&[u8], Head)) {
        (**self).for_each_head(f)
    }
    fn apply(&self, key: &[u8], change: Change) -> Option<u64> {
        (**self).apply(key, change)
    }
    fn is_external(&self, key: &[u8]) -> bool {
        (**self).is_external(key)
    }
    fn take_freed(&self) -> u64 {
        (**self).take_freed()
    }
    fn replace_prefix(
        &self,
        key: &[u8],
        prefix: &[Location],
        replacement: Location,
    ) -> Option<u64> {
        (**self).replace_prefix(key, prefix, replacement)
    }
    fn remove_if(&self, key: &[u8], expected: &KeyEntry) -> Option<u64> {
        (**self).remove_if(key, expected)
    }
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn memory_bytes(&self) -> u64 {
        (**self).memory_bytes()
    }
    fn is_empty(&self) -> bool {
        (**self).is_empty()
    }
    fn partitions(&self) -> usize {
        (**self).partitions()
    }
    fn partition(&self, key: &[u8]) -> usize {
        (**self).partition(key)
    }
    fn scan(&self, token: &[u8]) -> ScanChunk {
        (**self).scan(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::SegmentId;

    fn loc(offset: u32) -> Location {
        Location {
            segment: SegmentId(1),
            offset,
            len: 10,
        }
    }

    #[test]
    fn locations_are_in_log_order() {
        let entry = KeyEntry {
            version: 1,
            expires_at: 0,
            slot: Slot::Merged(Box::new(Chain {
                base: Some(loc(0)),
                operands: vec![loc(10), loc(20)],
            })),
        };
        let all: Vec<_> = entry.locations().map(|l| l.offset).collect();
        assert_eq!(all, vec![0, 10, 20]);
        assert_eq!(entry.record_bytes(), 30);
        assert!(!entry.is_expired(5));
    }
}
