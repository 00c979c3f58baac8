//! The keydir: Bitcask's in-memory index of every key.
//!
//! The keydir is a hash map from key to [`KeyEntry`], split into shards, each
//! behind its own reader-writer lock, so readers of different keys never
//! meet and a reader holds a lock only for the lookup itself (never during
//! disk I/O). Each key costs a 73-byte table slot (a control byte, the key
//! when it has at most 38 bytes, the version, the expiry and the location)
//! plus, for longer keys and keys with merge operands, their own allocation.
//! 38 bytes keep 32- to 36-byte keys (hex digests, UUIDs, the seed engine's
//! benchmark keys) inline: a lookup of a key on the heap pays a second cache
//! miss to compare its bytes, 13% of the CPU time of a random read from the
//! page cache with 32-byte keys.
//!
//! Invariant: an entry's locations are in log order and point at records
//! that the log still holds (compaction swaps an entry before it deletes the
//! records the entry used to name).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::num::NonZeroU32;

use parking_lot::RwLock;

use crate::index::{Chain, Change, Index, KeyEntry, ScanChunk, Slot};
use crate::segment::{Location, SegmentId};

const SHARDS: usize = 64;

/// Keys up to this length are stored inside the table, without an allocation.
const INLINE: usize = 38;

/// A key as the keydir stores it: short keys inline, long ones on the heap.
///
/// Inline keys save an allocation and, on lookup, a cache miss: the bytes to
/// compare sit next to the hash table slot.
#[derive(Clone)]
enum KeyBuf {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<[u8]>),
}

impl KeyBuf {
    fn new(key: &[u8]) -> KeyBuf {
        match u8::try_from(key.len()) {
            Ok(len) if key.len() <= INLINE => {
                let mut bytes = [0u8; INLINE];
                if let Some(dst) = bytes.get_mut(..key.len()) {
                    dst.copy_from_slice(key);
                }
                KeyBuf::Inline { len, bytes }
            }
            _ => KeyBuf::Heap(key.into()),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            KeyBuf::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            KeyBuf::Heap(bytes) => bytes,
        }
    }
}

impl Borrow<[u8]> for KeyBuf {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq for KeyBuf {
    fn eq(&self, other: &KeyBuf) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for KeyBuf {}

impl Hash for KeyBuf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must hash exactly like `[u8]`, so lookups by `&[u8]` find the key.
        self.as_slice().hash(state);
    }
}

impl std::fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_slice())
    }
}

/// A [`KeyEntry`] as the table stores it, in 32 bytes instead of 40.
#[derive(Debug, Clone)]
struct Stored {
    version: u64,
    expires_at: u64,
    slot: Packed,
}

/// A [`Slot`] in 16 bytes: a record's length is never zero, so the tag of the
/// enum fits in the length's unused value.
#[derive(Debug, Clone)]
enum Packed {
    Value {
        segment: u64,
        offset: u32,
        len: NonZeroU32,
    },
    /// Merge operands; or, with none, a value of length zero (which no record
    /// has, but which still round-trips).
    Merged(Box<Chain>),
}

impl Packed {
    fn value(location: Location) -> Packed {
        match NonZeroU32::new(location.len) {
            Some(len) => Packed::Value {
                segment: location.segment.0,
                offset: location.offset,
                len,
            },
            None => Packed::Merged(Box::new(Chain {
                base: Some(location),
                operands: Vec::new(),
            })),
        }
    }

    fn slot(&self) -> Slot {
        match self {
            Packed::Value {
                segment,
                offset,
                len,
            } => Slot::Value(unpacked(*segment, *offset, *len)),
            Packed::Merged(chain) => match (chain.base, chain.operands.is_empty()) {
                (Some(base), true) => Slot::Value(base),
                _ => Slot::Merged(chain.clone()),
            },
        }
    }

    /// Whether this is [`Slot::Merged`].
    fn is_merged(&self) -> bool {
        match self {
            Packed::Value { .. } => false,
            Packed::Merged(chain) => chain.base.is_none() || !chain.operands.is_empty(),
        }
    }

    /// The location of a single-record value.
    fn single(&self) -> Option<Location> {
        match self {
            Packed::Value {
                segment,
                offset,
                len,
            } => Some(unpacked(*segment, *offset, *len)),
            Packed::Merged(_) => None,
        }
    }
}

fn unpacked(segment: u64, offset: u32, len: NonZeroU32) -> Location {
    Location {
        segment: SegmentId(segment),
        offset,
        len: len.get(),
    }
}

impl Stored {
    fn new(version: u64, expires_at: u64, slot: Slot) -> Stored {
        Stored {
            version,
            expires_at,
            slot: match slot {
                Slot::Value(location) => Packed::value(location),
                Slot::Merged(chain) => Packed::Merged(chain),
            },
        }
    }

    fn entry(&self) -> KeyEntry {
        KeyEntry {
            version: self.version,
            expires_at: self.expires_at,
            slot: self.slot.slot(),
        }
    }

    /// The locations of the key's records, oldest first.
    fn locations(&self) -> impl Iterator<Item = Location> + '_ {
        let chain = match &self.slot {
            Packed::Value { .. } => None,
            Packed::Merged(chain) => Some(chain),
        };
        self.slot.single().into_iter().chain(
            chain
                .into_iter()
                .flat_map(|c| c.base.into_iter().chain(c.operands.iter().copied())),
        )
    }

    fn record_bytes(&self) -> u64 {
        self.locations().map(|l| u64::from(l.len)).sum()
    }

    fn head(&self) -> Option<crate::index::Head> {
        let first = self.locations().next()?;
        Some(crate::index::Head {
            first,
            chained: self.locations().nth(1).is_some(),
            expires_at: self.expires_at,
        })
    }

    /// Whether this is `entry`, stored.
    fn is(&self, entry: &KeyEntry) -> bool {
        self.version == entry.version
            && self.expires_at == entry.expires_at
            && matches!(entry.slot, Slot::Merged(_)) == self.slot.is_merged()
            && self.locations().eq(entry.locations())
    }
}

type Shard = HashMap<KeyBuf, Stored, foldhash::fast::RandomState>;

/// The in-memory index: a sharded hash map of every key.
#[derive(Debug)]
pub struct Keydir {
    hasher: foldhash::fast::RandomState,
    shards: Vec<RwLock<Shard>>,
}

impl Default for Keydir {
    fn default() -> Self {
        Keydir::new()
    }
}

impl Keydir {
    /// An empty keydir.
    pub fn new() -> Keydir {
        Keydir {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
        }
    }

    /// Keeps only the keys `keep` says yes to, and gives the memory of the others
    /// back (for an owner that takes over most keys, see
    /// [`Index::is_external`]).
    pub fn retain(&self, mut keep: impl FnMut(&[u8]) -> bool) {
        for shard in &self.shards {
            let mut shard = shard.write();
            shard.retain(|key, _| keep(key.as_slice()));
            shard.shrink_to_fit();
        }
    }

    fn shard_index(&self, key: &[u8]) -> usize {
        (self.hasher.hash_one(key) >> 58) as usize % SHARDS
    }

    fn shard(&self, key: &[u8]) -> &RwLock<Shard> {
        // The index is reduced modulo the shard count, so it is in range.
        #[allow(clippy::indexing_slicing)]
        &self.shards[self.shard_index(key)]
    }
}

fn starts_with(entry: &Stored, prefix: &[Location]) -> bool {
    let mut have = entry.locations();
    prefix.iter().all(|p| have.next() == Some(*p))
}

impl Index for Keydir {
    fn get(&self, key: &[u8]) -> Option<KeyEntry> {
        self.shard(key).read().get(key).map(Stored::entry)
    }

    fn expires_at(&self, key: &[u8]) -> Option<u64> {
        self.shard(key).read().get(key).map(|e| e.expires_at)
    }

    fn for_each_head(&self, f: &mut dyn FnMut(&[u8], crate::index::Head)) {
        for shard in &self.shards {
            for (key, entry) in shard.read().iter() {
                if let Some(head) = entry.head() {
                    f(key.as_slice(), head);
                }
            }
        }
    }

    fn first_location(&self, key: &[u8]) -> Option<Location> {
        self.shard(key)
            .read()
            .get(key)
            .and_then(|e| e.locations().next())
    }

    fn apply(&self, key: &[u8], change: Change) -> Option<u64> {
        let mut shard = self.shard(key).write();
        match change {
            Change::Put {
                location,
                version,
                expires_at,
            } => {
                let entry = Stored {
                    version,
                    expires_at,
                    slot: Packed::value(location),
                };
                if key.len() <= INLINE {
                    // An inline key costs no allocation: one lookup does it all.
                    shard
                        .insert(KeyBuf::new(key), entry)
                        .map(|old| old.record_bytes())
                } else {
                    match shard.get_mut(key) {
                        Some(old) => Some(std::mem::replace(old, entry).record_bytes()),
                        None => {
                            shard.insert(KeyBuf::new(key), entry);
                            None
                        }
                    }
                }
            }
            Change::Delete => shard.remove(key).map(|old| old.record_bytes()),
            Change::Merge {
                location,
                version,
                expires_at,
            } => match shard.get_mut(key) {
                Some(old) => {
                    old.version = version;
                    old.expires_at = expires_at;
                    match &mut old.slot {
                        Packed::Merged(chain) => chain.operands.push(location),
                        Packed::Value { .. } => {
                            old.slot = Packed::Merged(Box::new(Chain {
                                base: old.slot.single(),
                                operands: vec![location],
                            }));
                        }
                    }
                    Some(0)
                }
                None => {
                    shard.insert(
                        KeyBuf::new(key),
                        Stored::new(
                            version,
                            expires_at,
                            Slot::Merged(Box::new(Chain {
                                base: None,
                                operands: vec![location],
                            })),
                        ),
                    );
                    None
                }
            },
        }
    }

    fn replace_prefix(
        &self,
        key: &[u8],
        prefix: &[Location],
        replacement: Location,
    ) -> Option<u64> {
        let mut shard = self.shard(key).write();
        let entry = shard.get_mut(key)?;
        if prefix.is_empty() || !starts_with(entry, prefix) {
            return None;
        }
        let freed = prefix.iter().map(|l| u64::from(l.len)).sum();
        let rest: Vec<Location> = entry.locations().skip(prefix.len()).collect();
        entry.slot = if rest.is_empty() {
            Packed::value(replacement)
        } else {
            Packed::Merged(Box::new(Chain {
                base: Some(replacement),
                operands: rest,
            }))
        };
        Some(freed)
    }

    fn remove_if(&self, key: &[u8], expected: &KeyEntry) -> Option<u64> {
        let mut shard = self.shard(key).write();
        if shard.get(key).is_some_and(|stored| stored.is(expected)) {
            shard.remove(key).map(|old| old.record_bytes())
        } else {
            None
        }
    }

    fn len(&self) -> u64 {
        self.shards.iter().map(|s| s.read().len() as u64).sum()
    }

    /// The tables' slots (a control byte each, and the key and entry stored inline),
    /// full or not; long keys' and operand chains' own allocations are left out.
    fn memory_bytes(&self) -> u64 {
        let slot = (std::mem::size_of::<(KeyBuf, Stored)>() + 1) as u64;
        self.shards
            .iter()
            .map(|s| s.read().capacity() as u64 * slot)
            .sum()
    }

    fn partitions(&self) -> usize {
        SHARDS
    }

    fn partition(&self, key: &[u8]) -> usize {
        self.shard_index(key)
    }

    fn scan(&self, token: &[u8]) -> ScanChunk {
        let start = token
            .first_chunk::<8>()
            .map_or(0, |t| u64::from_le_bytes(*t) as usize);
        let Some(shard) = self.shards.get(start) else {
            return ScanChunk::default();
        };
        let entries = shard
            .read()
            .iter()
            .map(|(k, e)| (Box::from(k.as_slice()), e.entry()))
            .collect();
        let next = start + 1;
        ScanChunk {
            entries,
            next: (next < SHARDS).then(|| (next as u64).to_le_bytes().to_vec()),
        }
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

    fn put(offset: u32) -> Change {
        Change::Put {
            location: loc(offset),
            version: 1,
            expires_at: 0,
        }
    }

    fn merge(offset: u32) -> Change {
        Change::Merge {
            location: loc(offset),
            version: 2,
            expires_at: 0,
        }
    }

    #[test]
    fn put_merge_delete() {
        let kd = Keydir::new();
        assert_eq!(kd.apply(b"k", put(0)), None);
        assert_eq!(kd.apply(b"k", merge(10)), Some(0));
        assert_eq!(kd.apply(b"k", merge(20)), Some(0));
        let e = kd.get(b"k").unwrap();
        assert_eq!(e.locations().count(), 3);
        assert_eq!(e.version, 2);
        assert_eq!(kd.apply(b"k", put(30)), Some(30));
        assert_eq!(kd.apply(b"k", Change::Delete), Some(10));
        assert!(kd.get(b"k").is_none());
        assert_eq!(kd.len(), 0);
    }

    #[test]
    fn cheap_queries_agree_with_the_entry() {
        let kd = Keydir::new();
        assert_eq!(kd.expires_at(b"k"), None);
        assert_eq!(kd.first_location(b"k"), None);
        kd.apply(b"k", merge(10));
        kd.apply(
            b"k",
            Change::Merge {
                location: loc(20),
                version: 3,
                expires_at: 77,
            },
        );
        assert_eq!(kd.expires_at(b"k"), Some(77));
        assert_eq!(kd.first_location(b"k"), Some(loc(10)));
        let e = kd.get(b"k").unwrap();
        assert_eq!(Some(e.expires_at), kd.expires_at(b"k"));
        assert_eq!(e.first_location(), kd.first_location(b"k"));
    }

    #[test]
    fn replace_prefix_keeps_later_operands() {
        let kd = Keydir::new();
        kd.apply(b"k", put(0));
        kd.apply(b"k", merge(10));
        kd.apply(b"k", merge(20));
        let new = Location {
            segment: SegmentId(2),
            offset: 16,
            len: 12,
        };
        assert_eq!(kd.replace_prefix(b"k", &[loc(0), loc(10)], new), Some(20));
        let e = kd.get(b"k").unwrap();
        assert_eq!(e.locations().collect::<Vec<_>>(), vec![new, loc(20)]);
        assert_eq!(kd.replace_prefix(b"k", &[loc(0)], new), None);
    }

    #[test]
    fn remove_if_checks_the_entry() {
        let kd = Keydir::new();
        kd.apply(b"k", put(0));
        let e = kd.get(b"k").unwrap();
        kd.apply(b"k", put(10));
        assert_eq!(kd.remove_if(b"k", &e), None);
        let e = kd.get(b"k").unwrap();
        assert_eq!(kd.remove_if(b"k", &e), Some(10));
    }

    #[test]
    fn short_and_long_keys_are_found() {
        let kd = Keydir::new();
        let long = vec![9u8; 100];
        for key in [&b""[..], b"a", &[1u8; INLINE], &[2u8; INLINE + 1], &long] {
            kd.apply(key, put(1));
            assert!(kd.get(key).is_some(), "{} bytes", key.len());
        }
        assert_eq!(kd.len(), 5);
        assert!(kd.get(&[1u8; INLINE - 1]).is_none());
        assert_eq!(std::mem::size_of::<KeyBuf>(), 40);
        assert_eq!(std::mem::size_of::<(KeyBuf, Stored)>(), 72);
    }

    #[test]
    fn entries_round_trip_through_their_packed_form() {
        let chain =
            |base, operands: Vec<Location>| Slot::Merged(Box::new(Chain { base, operands }));
        let zero = Location {
            segment: SegmentId(u64::MAX),
            offset: u32::MAX,
            len: 0,
        };
        for slot in [
            Slot::Value(loc(7)),
            Slot::Value(zero),
            chain(None, vec![loc(1)]),
            chain(Some(loc(1)), vec![loc(2), loc(3)]),
            chain(Some(zero), vec![zero]),
        ] {
            let entry = KeyEntry {
                version: 9,
                expires_at: 11,
                slot,
            };
            let stored = Stored::new(entry.version, entry.expires_at, entry.slot.clone());
            assert_eq!(stored.entry(), entry);
            assert!(stored.is(&entry));
            assert!(stored.locations().eq(entry.locations()));
            assert_eq!(stored.head(), entry.head());
            assert_eq!(stored.record_bytes(), entry.record_bytes());
            let other = KeyEntry {
                version: 10,
                ..entry.clone()
            };
            assert!(!stored.is(&other));
        }
        let merged = Stored::new(1, 0, chain(Some(loc(1)), vec![loc(2)]));
        assert!(!merged.is(&KeyEntry {
            version: 1,
            expires_at: 0,
            slot: Slot::Value(loc(1)),
        }));
    }

    #[test]
    fn scan_visits_every_key() {
        let kd = Keydir::new();
        for i in 0..1000u32 {
            kd.apply(&i.to_le_bytes(), put(i));
        }
        let mut token = Vec::new();
        let mut seen = 0;
        loop {
            let chunk = kd.scan(&token);
            seen += chunk.entries.len();
            match chunk.next {
                Some(next) => token = next,
                None => break,
            }
        }
        assert_eq!(seen, 1000);
    }
}
