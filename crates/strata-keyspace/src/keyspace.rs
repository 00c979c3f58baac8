//! The sharded keyspace: many shards, each behind its own lock, each holding every
//! logical database's entries for the keys that hash to it.
//!
//! A key's shard depends only on the key (the top bits of its hash), not on the
//! database, so commands that move a key between databases (MOVE, COPY ... DB) stay
//! within one shard, and SWAPDB / FLUSHALL take every shard in index order.
//!
//! # Invariants
//!
//! - Shards are locked in ascending index order whenever more than one is held; no
//!   lock is held across I/O (there is no I/O here).
//! - A hash computed with [`Keyspace::hash`] is valid in every shard and database.

use crate::lock::{Mutex, MutexGuard};

use crate::KeyHasher;
use std::sync::Arc;

use crate::db::{Db, Detached, EventFlags};
use crate::dict::{HintRef, SlotsHint};

/// Counters kept per shard (under its lock, so no atomics on the hot path).
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardStats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
}

pub struct Shard {
    dbs: Box<[Db]>,
    pub stats: ShardStats,
}

impl Shard {
    /// A shard whose database `i` publishes where its table is to `hints(i)`.
    fn new(
        databases: usize,
        hasher: &KeyHasher,
        events: &Arc<EventFlags>,
        hints: impl Fn(usize) -> HintRef,
    ) -> Shard {
        let mut dbs: Box<[Db]> = (0..databases)
            .map(|_| {
                let mut db = Db::new(hasher.clone());
                db.set_event_flags(events.clone());
                db
            })
            .collect();
        // In place: a hint names its database's address.
        for (i, db) in dbs.iter_mut().enumerate() {
            db.publish_to(hints(i));
        }
        Shard {
            dbs,
            stats: ShardStats::default(),
        }
    }

    #[inline]
    pub fn db(&mut self, index: usize) -> &mut Db {
        &mut self.dbs[index]
    }

    /// A database and the shard's statistics, borrowed together.
    #[inline]
    pub fn db_and_stats(&mut self, index: usize) -> (&mut Db, &mut ShardStats) {
        (&mut self.dbs[index], &mut self.stats)
    }

    #[inline]
    pub fn db_ref(&self, index: usize) -> &Db {
        &self.dbs[index]
    }

    pub fn dbs(&self) -> &[Db] {
        &self.dbs
    }

    pub fn dbs_mut(&mut self) -> &mut [Db] {
        &mut self.dbs
    }

    /// Swaps the contents of two databases of this shard.
    pub fn swap_dbs(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        let (lo, hi) = (a.min(b), a.max(b));
        let (left, right) = self.dbs.split_at_mut(hi);
        left[lo].swap_contents(&mut right[0]);
    }

    /// Empties every database of this shard.
    pub fn clear_all(&mut self) -> Vec<Detached> {
        self.dbs
            .iter_mut()
            .map(Db::clear)
            .filter(|d| !d.is_empty())
            .collect()
    }
}

/// Keeps each shard's lock on its own cache lines, away from its neighbours'.
#[repr(align(128))]
struct Padded(Mutex<Shard>);

pub struct Keyspace {
    shards: Box<[Padded]>,
    /// Where each database's table of keys is in each shard, database by database
    /// (see [`Keyspace::prefetch`]).
    hints: Arc<[SlotsHint]>,
    /// Right shift taking a hash to its shard index.
    shift: u32,
    hasher: KeyHasher,
    databases: usize,
    events: Arc<EventFlags>,
}

impl Keyspace {
    /// A keyspace of `databases` databases over `shards` shards (rounded up to a power
    /// of two).
    pub fn new(databases: usize, shards: usize) -> Keyspace {
        let shards = shards.max(1).next_power_of_two();
        let hasher = KeyHasher::default();
        let events = Arc::new(EventFlags::default());
        let hints: Arc<[SlotsHint]> = (0..databases * shards)
            .map(|_| SlotsHint::default())
            .collect();
        Keyspace {
            shards: (0..shards)
                .map(|s| {
                    let hint = |db: usize| HintRef {
                        all: hints.clone(),
                        at: db * shards + s,
                    };
                    Padded(Mutex::new(Shard::new(databases, &hasher, &events, hint)))
                })
                .collect(),
            hints,
            shift: 64 - shards.trailing_zeros(),
            hasher,
            databases,
            events,
        }
    }

    /// Which key events the databases log for keyspace notifications (see
    /// [`Db::take_events`]).
    pub fn event_flags(&self) -> &EventFlags {
        &self.events
    }

    pub fn databases(&self) -> usize {
        self.databases
    }

    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(key)
    }

    /// Starts loading what a lookup of a key in database `db` will read first (its
    /// shard's lock, its table's fields and its home slot), without taking any
    /// lock: for a caller about to run several commands, so that their keys' cache
    /// misses overlap instead of following one another. Only a hint; it changes
    /// nothing. `hash` is the key's [`Keyspace::hash`]; [`Keyspace::prefetch_entry`]
    /// takes the next step.
    #[inline]
    pub fn prefetch(&self, db: usize, hash: u64) {
        let shard = self.shard_of_hash(hash);
        if let Some(lock) = self.shards.get(shard) {
            crate::entry::prefetch_line(std::ptr::from_ref(lock).addr());
        }
        if let Some(hint) = self.hints.get(db * self.shards.len() + shard) {
            hint.prefetch(hash);
        }
    }

    /// The second step of [`Keyspace::prefetch`], a while after it (once the home
    /// slot has arrived): starts loading the entry a lookup of `hash` in database
    /// `db` will compare first (found by the tags in the slots), if the shard is
    /// free this instant (it is never waited for).
    #[inline]
    pub fn prefetch_entry(&self, db: usize, hash: u64) {
        let addr = self
            .shards
            .get(self.shard_of_hash(hash))
            .and_then(|shard| shard.0.try_lock())
            .and_then(|shard| shard.dbs.get(db)?.candidate_addr(hash));
        // After the unlock: a locked instruction waits for the loads before it,
        // and a prefetch may count as one.
        if let Some(addr) = addr {
            crate::entry::prefetch_line(addr);
        }
    }

    #[inline]
    pub fn shard_of_hash(&self, hash: u64) -> usize {
        hash.checked_shr(self.shift).unwrap_or(0) as usize
    }

    #[inline]
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.shard_of_hash(self.hash(key))
    }

    #[inline]
    pub fn lock(&self, shard: usize) -> MutexGuard<'_, Shard> {
        self.shards[shard].0.lock()
    }

    /// Locks a shard if it is free now or within `spins` busy-wait rounds (a
    /// processor pause each), without a system call; `None` otherwise. A shard is
    /// held for a few microseconds at a time (one command, or a pipeline's run on
    /// one key and its log append): a short spin takes it where the mutex's own wait
    /// would yield the processor and sleep, which costs system calls and context
    /// switches on both threads.
    pub fn try_lock_spin(&self, shard: usize, spins: u32) -> Option<MutexGuard<'_, Shard>> {
        let m = &self.shards[shard].0;
        for _ in 0..spins {
            // Read before trying, so that waiting does not write the lock's line.
            if !m.is_locked()
                && let Some(g) = m.try_lock()
            {
                return Some(g);
            }
            std::hint::spin_loop();
        }
        m.try_lock()
    }

    /// Locks a shard unless another holder keeps it for longer than `wait`.
    pub fn try_lock_for(
        &self,
        shard: usize,
        wait: std::time::Duration,
    ) -> Option<MutexGuard<'_, Shard>> {
        self.shards[shard].0.try_lock_for(wait)
    }

    /// Locks every shard, in index order.
    pub fn lock_all(&self) -> Vec<MutexGuard<'_, Shard>> {
        self.shards.iter().map(|s| s.0.lock()).collect()
    }

    /// Number of keys in database `db` (including expired keys not yet removed).
    pub fn db_len(&self, db: usize) -> usize {
        self.shards
            .iter()
            .map(|s| s.0.lock().db_ref(db).len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Ttl;
    use crate::value::Value;

    #[test]
    fn keys_spread_over_shards() {
        let ks = Keyspace::new(16, 64);
        let mut counts = vec![0usize; 64];
        for i in 0..64_000 {
            counts[ks.shard_of(format!("key:{i}").as_bytes())] += 1;
        }
        assert!(counts.iter().all(|&c| c > 500), "{counts:?}");
        let one = Keyspace::new(1, 1);
        assert_eq!(one.shard_of(b"x"), 0);
    }

    #[test]
    fn swap_and_clear() {
        let ks = Keyspace::new(4, 8);
        let key = b"k";
        let h = ks.hash(key);
        let s = ks.shard_of_hash(h);
        let mut shard = ks.lock(s);
        shard
            .db(1)
            .set(h, key, Value::string(b"v"), Ttl::Persist, 0);
        shard.swap_dbs(1, 3);
        assert!(shard.db(1).is_empty());
        assert!(shard.db(3).contains(h, key, 0));
        assert_eq!(shard.clear_all().len(), 1);
        assert!(shard.db(3).is_empty());
    }
}
