//! The expiry times of one database's keys with a TTL, kept out of their entries.
//!
//! Most keys have no TTL, so an entry keeps only a flag saying whether it has one
//! (eight bytes less in every entry); the time itself lives
//! here, as Redis keeps it in a second table. It is found two ways:
//!
//! - **by key**, for lookups: a map from the key's hash to its expiry. Two keys with a
//!   TTL may share a 64-bit hash; the first keeps the map's slot and the others are
//!   listed by key bytes in `collided` (almost always empty, and then never consulted).
//! - **by time**, for the active expiry cycle and eviction: an ordered index of
//!   `(expire_at, hash)` with the number of keys holding each pair.
//!
//! Only entries flagged as having a TTL are ever looked up, so a key without one never
//! pays for a second lookup.
//!
//! # Invariants
//!
//! - A flagged key's expiry is `collided[key]` if listed there, else `by_hash[hash]`;
//!   every slot of `by_hash` and `collided` belongs to exactly one flagged key.
//! - The index lists `(expire_at, hash)` exactly once per flagged key (counted), and
//!   `len` is the number of flagged keys.
//! - Expiry times are never 0 (0 means "no TTL" in the callers' words).

use std::collections::{BTreeMap, HashMap};

use crate::KeyHasher;

/// Where the expiry times of a database's keys with a TTL live.
#[derive(Debug, Default)]
pub struct Expires {
    by_hash: HashMap<u64, u64, KeyHasher>,
    collided: HashMap<Box<[u8]>, u64, KeyHasher>,
    /// `(expire_at, hash)` → number of keys with that pair (hash collisions aside, 1).
    index: BTreeMap<(u64, u64), u32>,
    len: usize,
}

impl Expires {
    /// Number of keys with a TTL.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The expiry of the flagged key `key`; 0 if none is recorded.
    #[inline]
    pub fn get(&self, hash: u64, key: &[u8]) -> u64 {
        if !self.collided.is_empty()
            && let Some(&when) = self.collided.get(key)
        {
            return when;
        }
        self.by_hash.get(&hash).copied().unwrap_or(0)
    }

    /// Changes the expiry of `key` from `old` (0: the key had no TTL, i.e. was not
    /// flagged) to `when` (0: no TTL any more). Returns whether the key is flagged
    /// from now on.
    pub fn set(&mut self, hash: u64, key: &[u8], old: u64, when: u64) -> bool {
        if old == when {
            return when != 0;
        }
        if old != 0 {
            self.index_remove(old, hash);
        }
        if when != 0 {
            self.index_add(when, hash);
        }
        if old != 0 {
            // The key holds a slot already: update it where it is.
            if let Some(slot) = self.collided.get_mut(key) {
                if when == 0 {
                    self.collided.remove(key);
                } else {
                    *slot = when;
                }
            } else if when == 0 {
                self.by_hash.remove(&hash);
            } else {
                self.by_hash.insert(hash, when);
            }
        } else {
            match self.by_hash.entry(hash) {
                // Another key with a TTL has this hash.
                std::collections::hash_map::Entry::Occupied(_) => {
                    self.collided.insert(key.into(), when);
                }
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(when);
                }
            }
        }
        when != 0
    }

    fn index_add(&mut self, when: u64, hash: u64) {
        *self.index.entry((when, hash)).or_insert(0) += 1;
        self.len += 1;
    }

    fn index_remove(&mut self, when: u64, hash: u64) {
        if let Some(n) = self.index.get_mut(&(when, hash)) {
            *n -= 1;
            if *n == 0 {
                self.index.remove(&(when, hash));
            }
            self.len -= 1;
        }
    }

    /// Removes one listing of `(when, hash)` from the index only: for a listing no
    /// entry answers to, which the invariants rule out.
    pub fn drop_from_index(&mut self, when: u64, hash: u64) {
        self.index_remove(when, hash);
    }

    /// The earliest `(expire_at, hash)`.
    #[inline]
    pub fn first(&self) -> Option<(u64, u64)> {
        self.index.first_key_value().map(|(&k, _)| k)
    }

    /// The latest `(expire_at, hash)`.
    pub fn last(&self) -> Option<(u64, u64)> {
        self.index.last_key_value().map(|(&k, _)| k)
    }

    /// The first `(expire_at, hash)` at or after `point`.
    pub fn at_or_after(&self, point: (u64, u64)) -> Option<(u64, u64)> {
        self.index.range(point..).next().map(|(&k, _)| k)
    }

    /// The `(expire_at, hash)` pairs, earliest first.
    pub fn in_order(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.index.keys().copied()
    }

    pub fn clear(&mut self) {
        *self = Expires::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colliding_hashes_keep_their_own_times() {
        let mut e = Expires::default();
        assert!(e.set(7, b"a", 0, 100));
        assert!(e.set(7, b"b", 0, 200));
        assert_eq!((e.get(7, b"a"), e.get(7, b"b")), (100, 200));
        assert_eq!(e.len(), 2);
        assert_eq!(e.first(), Some((100, 7)));
        // The owner of the slot goes; the other keeps its time.
        assert!(!e.set(7, b"a", 100, 0));
        assert_eq!(e.get(7, b"b"), 200);
        // A third key takes the free slot without disturbing the listed one.
        assert!(e.set(7, b"c", 0, 300));
        assert_eq!((e.get(7, b"b"), e.get(7, b"c")), (200, 300));
        assert!(e.set(7, b"b", 200, 250));
        assert_eq!((e.get(7, b"b"), e.get(7, b"c")), (250, 300));
        assert!(!e.set(7, b"b", 250, 0));
        assert!(!e.set(7, b"c", 300, 0));
        assert!(e.is_empty());
        assert!(e.by_hash.is_empty() && e.collided.is_empty() && e.index.is_empty());
    }

    #[test]
    fn same_time_same_hash_is_counted() {
        let mut e = Expires::default();
        e.set(1, b"a", 0, 50);
        e.set(1, b"b", 0, 50);
        assert_eq!(e.in_order().collect::<Vec<_>>(), vec![(50, 1)]);
        e.set(1, b"a", 50, 0);
        assert_eq!(e.first(), Some((50, 1)));
        e.set(1, b"b", 50, 0);
        assert_eq!(e.first(), None);
    }
}
