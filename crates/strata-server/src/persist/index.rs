//! The store's index, kept by the keyspace.
//!
//! The engine needs to know where every key's records are: for compaction (which
//! records are live), and to read a value back. A Bitcask keydir would hold every key
//! a second time; the keyspace already holds every key, so each database lists its
//! keys' records beside them ([`strata_keyspace::logref`]) and this [`Index`] answers
//! the engine from those lists: one more 16-byte slot per key instead of a keydir
//! entry, and no index update under the log's writer lock.
//!
//! # Modes
//!
//! - **Keydir**, from opening until [`StoreIndex::switch`]: the engine's own
//!   [`Keydir`] holds every key, as the engine rebuilt it from hints and segments.
//!   Loading reads the store through it; the recovery after a write error and a
//!   store opened on a live keyspace (CONFIG SET appendonly yes) run in this mode too.
//! - **Keyspace**, after the switch: a key of a namespace some database maps to is
//!   *external*: its records are listed by its database, in its entry's shard, and
//!   the commands list the locations of what they append there, under the shard
//!   locks that order their changes ([`strata_commands::ctx::Keys::apply_locations`]).
//!   The keydir keeps only the other keys: strata's own records (the META namespace)
//!   and keys of namespaces no database maps to any more, until they are deleted.
//!   Scans of the index (the engine's `keys` and `iter`) cover only these, so a
//!   scan never takes a shard.
//!
//! A key's database is read from the namespace map only while its shard is held: a
//! command that changes the map (FLUSHDB, SWAPDB...) holds every shard while it
//! changes both the databases and the map.
//!
//! Compaction asks with no lock held and takes the key's shard for each question, so
//! it never waits on the log while holding a shard; commands take a shard and then
//! the log's writer lock, never the reverse.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;
use strata_engine::index::{Chain, Change, ScanChunk, Slot};
use strata_engine::{Index, KeyEntry, Keydir, Location, SegmentId};
use strata_keyspace::Keyspace;
use strata_keyspace::logref::{LogLoc, LogRefs};

use super::{DbMap, META, engine_key};

/// See the [module docs](self).
pub struct StoreIndex {
    keyspace: Arc<Keyspace>,
    map: Arc<ArcSwap<DbMap>>,
    /// Set by [`StoreIndex::switch`]: the keyspace lists the external keys.
    external: AtomicBool,
    /// Every key before the switch; the others after it.
    keydir: Keydir,
}

impl std::fmt::Debug for StoreIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreIndex")
            .field("external", &self.external.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Converts between the engine's locations and the keyspace's.
pub fn to_loc(l: Location) -> LogLoc {
    LogLoc {
        segment: l.segment.0,
        offset: l.offset,
        len: l.len,
    }
}

pub(super) fn to_location(l: LogLoc) -> Location {
    Location {
        segment: SegmentId(l.segment),
        offset: l.offset,
        len: l.len,
    }
}

/// The engine's view of a key's records.
pub fn to_entry(refs: &LogRefs) -> KeyEntry {
    let slot = match refs {
        LogRefs::Value(l) => Slot::Value(to_location(*l)),
        LogRefs::Chain { base, operands } => Slot::Merged(Box::new(Chain {
            base: base.map(to_location),
            operands: operands.iter().copied().map(to_location).collect(),
        })),
    };
    // Expiry is the keyspace's business: a key's records stay live until its entry
    // leaves (an expired key leaves its database when it is next seen, or by the
    // expiry cycle), which forgets them.
    KeyEntry {
        version: 0,
        expires_at: 0,
        slot,
    }
}

fn to_refs(entry: &KeyEntry) -> LogRefs {
    slot_refs(&entry.slot)
}

/// The keyspace's view of the records a slot names.
pub fn slot_refs(slot: &Slot) -> LogRefs {
    match slot {
        Slot::Value(l) => LogRefs::Value(to_loc(*l)),
        Slot::Merged(chain) => LogRefs::Chain {
            base: chain.base.map(to_loc),
            operands: chain.operands.iter().copied().map(to_loc).collect(),
        },
    }
}

/// The namespace of an engine key, and the key within it.
fn split(key: &[u8]) -> Option<(u32, &[u8])> {
    let (ns, user_key) = key.split_first_chunk::<4>()?;
    Some((u32::from_be_bytes(*ns), user_key))
}

impl StoreIndex {
    /// A new index in keydir mode.
    pub fn new(keyspace: Arc<Keyspace>, map: Arc<ArcSwap<DbMap>>) -> StoreIndex {
        StoreIndex {
            keyspace,
            map,
            external: AtomicBool::new(false),
            keydir: Keydir::new(),
        }
    }

    /// Keys the keydir holds (its own, with the keyspace as the index).
    #[cfg(test)]
    pub fn keydir_len(&self) -> u64 {
        self.keydir.len()
    }

    /// Whether the keyspace lists the records of the keys of mapped namespaces.
    pub fn is_switched(&self) -> bool {
        self.external.load(Ordering::Acquire)
    }

    /// Whether `key` is a key of a namespace some database maps to.
    fn mapped(&self, key: &[u8]) -> bool {
        split(key).is_some_and(|(ns, _)| ns != META && self.map.load().db_of(ns).is_some())
    }

    /// Runs `f` on the database holding `key` (a key of a mapped namespace), with its
    /// shard held; `None` if the namespace is not mapped.
    fn with_db<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(&mut strata_keyspace::Db, u64, &[u8]) -> R,
    ) -> Option<R> {
        let (ns, user_key) = split(key)?;
        if ns == META {
            return None;
        }
        let hash = self.keyspace.hash(user_key);
        let mut shard = self.keyspace.lock(self.keyspace.shard_of_hash(hash));
        // Read under the shard: map changes happen while every shard is held.
        let db = self.map.load().db_of(ns)?;
        Some(f(shard.db(db), hash, user_key))
    }

    /// Whether the question about `key` goes to the keyspace.
    fn in_keyspace(&self, key: &[u8]) -> bool {
        self.is_switched() && self.mapped(key)
    }

    /// Makes the keyspace list the records of every key it holds, as the keydir
    /// knows them (unless `relist` is false: the caller listed them), and leaves in
    /// the keydir only the keys no database holds. Call with every shard held
    /// (`shards`, from [`Keyspace::lock_all`]), so that no command logs meanwhile;
    /// the map must not change either.
    pub fn switch(
        &self,
        shards: &mut [strata_keyspace::lock::MutexGuard<'_, strata_keyspace::Shard>],
        relist: bool,
    ) {
        let map = self.map.load_full();
        if relist {
            for shard in shards.iter_mut() {
                for (db, ns) in shard.dbs_mut().iter_mut().zip(&map.namespaces) {
                    db.clear_log_refs();
                    let keys: Vec<Vec<u8>> = db.iter(0).map(|e| e.key().to_vec()).collect();
                    for key in keys {
                        let refs = self.keydir.get(&engine_key(*ns, &key)).map(|e| to_refs(&e));
                        let hash = db.hash(&key);
                        db.set_log_refs(hash, &key, refs);
                    }
                }
            }
        }
        // What stays: keys of unmapped namespaces and strata's own.
        self.keydir.retain(|key| !self.mapped(key));
        self.external.store(true, Ordering::Release);
    }
}

impl Index for StoreIndex {
    fn get(&self, key: &[u8]) -> Option<KeyEntry> {
        if self.in_keyspace(key) {
            let refs = self.with_db(key, |db, hash, k| db.log_refs(hash, k))??;
            return Some(to_entry(&refs));
        }
        self.keydir.get(key)
    }

    fn get_if_first(&self, key: &[u8], location: Location) -> Option<KeyEntry> {
        if self.in_keyspace(key) {
            // One shard lock and one lookup; a chain is copied only when it starts
            // here (once per key and compaction).
            let want = to_loc(location);
            let refs = self.with_db(key, |db, hash, k| {
                (db.first_log_location(hash, k) == Some(want))
                    .then(|| db.log_refs(hash, k))
                    .flatten()
            })??;
            return Some(to_entry(&refs));
        }
        self.keydir.get_if_first(key, location)
    }

    /// The keydir's keys, then the keyspace's, one shard at a time (each held for a
    /// walk of its entries). The keys the keyspace lists move there from the keydir
    /// only at the switch: should it happen meanwhile, the list may lack some, and
    /// is refused.
    fn first_locations(&self, upto: SegmentId, out: &mut Vec<Location>) -> bool {
        let switched = self.is_switched();
        // Room first, so that the list does not grow (copy itself) under a shard.
        out.reserve(usize::try_from(self.len()).unwrap_or(0));
        strata_engine::index::heads_up_to(&self.keydir, upto, out);
        if switched {
            for s in 0..self.keyspace.num_shards() {
                let shard = self.keyspace.lock(s);
                for db in shard.dbs() {
                    db.for_each_first_log_location(|l| {
                        if l.segment <= upto.0 {
                            out.push(to_location(l));
                        }
                    });
                }
            }
        }
        self.is_switched() == switched
    }

    fn expires_at(&self, key: &[u8]) -> Option<u64> {
        if self.in_keyspace(key) {
            return self.get(key).map(|e| e.expires_at);
        }
        self.keydir.expires_at(key)
    }

    fn first_location(&self, key: &[u8]) -> Option<Location> {
        if self.in_keyspace(key) {
            let first = self.with_db(key, |db, hash, k| db.first_log_location(hash, k))??;
            return Some(to_location(first));
        }
        self.keydir.first_location(key)
    }

    fn apply(&self, key: &[u8], change: Change) -> Option<u64> {
        // The engine never applies external keys' changes (see `is_external`).
        self.keydir.apply(key, change)
    }

    fn is_external(&self, key: &[u8]) -> bool {
        self.in_keyspace(key)
    }

    fn take_freed(&self) -> u64 {
        if self.is_switched() {
            strata_keyspace::logref::take_freed()
        } else {
            0
        }
    }

    fn replace_prefix(
        &self,
        key: &[u8],
        prefix: &[Location],
        replacement: Location,
    ) -> Option<u64> {
        if self.in_keyspace(key) {
            let prefix: Vec<LogLoc> = prefix.iter().copied().map(to_loc).collect();
            let replacement = to_loc(replacement);
            return self
                .with_db(key, |db, hash, k| {
                    db.replace_log_prefix(hash, k, &prefix, replacement)
                })
                .flatten();
        }
        self.keydir.replace_prefix(key, prefix, replacement)
    }

    fn remove_if(&self, key: &[u8], expected: &KeyEntry) -> Option<u64> {
        if self.in_keyspace(key) {
            // Never expired in the engine's eyes (see `to_entry`): nothing to remove.
            return None;
        }
        self.keydir.remove_if(key, expected)
    }

    fn len(&self) -> u64 {
        let listed = if self.is_switched() {
            strata_keyspace::logref::listed_keys()
        } else {
            0
        };
        self.keydir.len() + listed
    }

    fn memory_bytes(&self) -> u64 {
        self.keydir.memory_bytes()
    }

    fn partitions(&self) -> usize {
        self.keydir.partitions()
    }

    fn partition(&self, key: &[u8]) -> usize {
        self.keydir.partition(key)
    }

    /// The keydir's keys only: after the switch, the keys the keyspace lists are
    /// not scanned (the engine's `keys`, `iter` and loading plan are used before the
    /// switch, and the reaper of dead namespaces needs only the keydir's), so a scan
    /// never takes a shard, and may run while a command holds them all.
    fn scan(&self, token: &[u8]) -> ScanChunk {
        self.keydir.scan(token)
    }
}
