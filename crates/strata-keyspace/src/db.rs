//! One logical database (`SELECT n`) within one shard: entries by key, plus an index of
//! expiry times.
//!
//! # Expiry
//!
//! Redis samples random keys with a TTL to find expired ones. Here every key with a TTL
//! is also listed, by expiry time, in an ordered index of `(expire_at, key hash)`, so
//! the active expiry cycle removes exactly the keys that are due, oldest first, with no
//! wasted samples: expired keys cannot pile up however few of the keys have a TTL.
//! Lookups still expire lazily, so no command ever sees an expired key.
//!
//! # Invariants
//!
//! - An entry's `expire_at` is non-zero exactly when the index lists `(expire_at, hash)`
//!   for it; all changes of `expire_at` go through this module.
//! - A method that finds an expired entry removes it and counts it in `expired`.
//!
//! # Events
//!
//! Keyspace notifications need to know about keys removed by expiry and keys added,
//! wherever in the code that happens. When the keyspace's [`EventFlags`] ask for them,
//! the database logs such keys in order ([`Db::take_events`]); the caller publishes
//! them. When nobody listens the cost is one relaxed atomic load per insertion or
//! expiry.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::KeyHasher;
use crate::access;
use crate::compact::CompactBytes;
use crate::dict::{Dict, DictEntry, Pos};
use crate::evict::Policy;
use crate::value::{Cold, Str, Value};

/// A key and what it holds.
#[derive(Debug)]
pub struct Entry {
    key: CompactBytes,
    pub value: Value,
    /// Absolute expiry in Unix milliseconds; 0 when the key has no TTL.
    expire_at: u64,
    /// Last access (LRU) or access frequency (LFU): see [`crate::access`].
    lru: u32,
}

impl DictEntry for Entry {
    #[inline]
    fn key(&self) -> &[u8] {
        &self.key
    }
}

impl Entry {
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The absolute expiry in Unix milliseconds, if the key has a TTL.
    pub fn expire_at(&self) -> Option<u64> {
        (self.expire_at != 0).then_some(self.expire_at)
    }

    #[inline]
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expire_at != 0 && self.expire_at <= now_ms
    }

    /// Gives the entry another key (RENAME, MOVE): it must then be inserted under it.
    pub fn set_key(&mut self, key: &[u8]) {
        self.key = CompactBytes::new(key);
    }

    /// Records an access at `now_ms` (a new time under LRU, a counter increment under
    /// LFU).
    #[inline]
    pub fn touch(&mut self, now_ms: u64) {
        self.lru = access::accessed(self.lru, now_ms);
    }

    /// Seconds since the last access (meaningful under LRU).
    pub fn idle_seconds(&self, now_ms: u64) -> u64 {
        access::idle_ms(self.lru, now_ms) / 1000
    }

    /// The LFU counter after its decay (meaningful under LFU).
    pub fn freq(&self, now_ms: u64) -> u8 {
        access::lfu_decayed(self.lru, now_ms)
    }

    /// How good a candidate for eviction the entry is under `policy`: the higher,
    /// the better (Redis's `idle` in its eviction pool).
    pub fn eviction_score(&self, policy: Policy, now_ms: u64) -> u64 {
        match policy {
            Policy::Lru => access::idle_ms(self.lru, now_ms),
            // Equal counters are told apart by idle time (see `access`).
            Policy::Lfu => {
                (255 - u64::from(self.freq(now_ms))) << 32
                    | u64::from(access::lfu_idle_seconds(self.lru, now_ms))
            }
            Policy::Ttl => u64::MAX - self.expire_at,
            Policy::Random => 0,
        }
    }

    /// Bytes this entry holds: the entry itself, its key and its value.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Entry>() + self.key.heap_size() + self.value.heap_size()
    }
}

/// What happens to a key's TTL when its value is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// No TTL (a plain SET).
    Persist,
    /// Keep the current TTL (SET KEEPTTL, and in-place updates such as APPEND).
    Keep,
    /// Expire at this absolute Unix time in milliseconds.
    At(u64),
}

/// A client's WATCH of one key: its "something changed" flag, and whether the key was
/// already expired when watched (its deletion by expiry then changes nothing).
struct Watch {
    dirty: Arc<AtomicBool>,
    expired_at_watch: bool,
}

/// Something that happened to a key inside the database, for keyspace notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEvent {
    /// The key was removed because its time had come (lazily or actively).
    Expired,
    /// The key was added (it did not exist before).
    New,
}

/// Which [`KeyEvent`]s the databases log, shared by every database of a keyspace.
#[derive(Debug, Default)]
pub struct EventFlags(AtomicU8);

impl EventFlags {
    const EXPIRED: u8 = 1;
    const NEW: u8 = 2;

    /// Turns the logging of each kind of event on or off.
    pub fn set(&self, expired: bool, new: bool) {
        let bits = if expired { Self::EXPIRED } else { 0 } | if new { Self::NEW } else { 0 };
        self.0.store(bits, Ordering::Relaxed);
    }

    #[inline]
    fn wants(&self, event: KeyEvent) -> bool {
        let bit = match event {
            KeyEvent::Expired => Self::EXPIRED,
            KeyEvent::New => Self::NEW,
        };
        self.0.load(Ordering::Relaxed) & bit != 0
    }
}

/// One database of one shard.
pub struct Db {
    dict: Dict<Box<Entry>, KeyHasher>,
    /// `(expire_at, hash)` → number of keys with that pair (hash collisions aside, 1).
    expires: BTreeMap<(u64, u64), u32>,
    expires_len: usize,
    /// Keys removed because they expired, lazily or actively.
    pub expired: u64,
    /// WATCHed keys and their watchers (empty unless someone watches).
    watches: HashMap<Vec<u8>, Vec<Watch>>,
    /// Which events to log, and the events logged and not yet taken.
    event_flags: Arc<EventFlags>,
    events: Vec<(KeyEvent, Vec<u8>)>,
    /// Values of expired keys big enough to free lazily (see
    /// [`Value::free_lazily`]), waiting for the caller to take them
    /// ([`Db::take_expired_values`]) and drop them here or in the background.
    expired_values: Vec<Value>,
}

impl Db {
    pub fn new(hasher: KeyHasher) -> Db {
        Db {
            dict: Dict::with_hasher(hasher),
            expires: BTreeMap::new(),
            expires_len: 0,
            expired: 0,
            watches: HashMap::new(),
            event_flags: Arc::default(),
            events: Vec::new(),
            expired_values: Vec::new(),
        }
    }

    /// Shares the keyspace's event flags with this database.
    pub(crate) fn set_event_flags(&mut self, flags: Arc<EventFlags>) {
        self.event_flags = flags;
    }

    #[inline]
    fn log(&mut self, event: KeyEvent, key: &[u8]) {
        if self.event_flags.wants(event) {
            self.events.push((event, key.to_vec()));
        }
    }

    /// Keeps a big expired value for the caller to free; drops a small one.
    #[inline]
    fn expired_value(&mut self, value: Value) {
        if value.free_lazily() {
            self.expired_values.push(value);
        }
    }

    /// The big values of keys expired since the last call (see [`Value::free_lazily`]).
    pub fn take_expired_values(&mut self) -> Vec<Value> {
        if self.expired_values.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut self.expired_values)
    }

    /// Whether events are waiting to be taken.
    #[inline]
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The events logged since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<(KeyEvent, Vec<u8>)> {
        std::mem::take(&mut self.events)
    }

    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.dict.hash(key)
    }

    /// Number of keys, including expired ones not yet removed.
    /// Makes room for `additional` more keys at once (see [`Dict::reserve`]).
    pub fn reserve(&mut self, additional: usize) {
        self.dict.reserve(additional);
    }

    pub fn len(&self) -> usize {
        self.dict.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }

    /// Number of keys with a TTL.
    pub fn expires_len(&self) -> usize {
        self.expires_len
    }

    /// Bytes held by the table's slot arrays.
    pub fn table_bytes(&self) -> usize {
        self.dict.allocated_bytes()
    }

    fn index_add(&mut self, when: u64, hash: u64) {
        if when != 0 {
            *self.expires.entry((when, hash)).or_insert(0) += 1;
            self.expires_len += 1;
        }
    }

    fn index_remove(&mut self, when: u64, hash: u64) {
        if when == 0 {
            return;
        }
        if let Some(n) = self.expires.get_mut(&(when, hash)) {
            *n -= 1;
            if *n == 0 {
                self.expires.remove(&(when, hash));
            }
            self.expires_len -= 1;
        }
    }

    /// Finds a live entry, removing it first if it has expired.
    #[inline]
    fn find_live(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<Pos> {
        let pos = self.dict.find(hash, key)?;
        let entry = self.dict.at(pos);
        if entry.is_expired(now_ms) {
            let when = entry.expire_at;
            let removed = self.dict.remove_at(pos);
            self.index_remove(when, hash);
            self.expired += 1;
            self.touch_expired(removed.key());
            self.log(KeyEvent::Expired, removed.key());
            self.expired_value(removed.value);
            return None;
        }
        Some(pos)
    }

    /// The live entry for `key`, if any (an expired one is removed).
    #[inline]
    pub fn get(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let pos = self.find_live(hash, key, now_ms)?;
        Some(self.dict.at_mut(pos))
    }

    /// The live entry for `key` without removing an expired one.
    pub fn peek(&self, hash: u64, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.dict
            .get(hash, key)
            .map(|e| &**e)
            .filter(|e| !e.is_expired(now_ms))
    }

    pub fn contains(&mut self, hash: u64, key: &[u8], now_ms: u64) -> bool {
        self.find_live(hash, key, now_ms).is_some()
    }

    /// Stores `value` under `key`; returns the live value it replaced.
    pub fn set(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Value,
        ttl: Ttl,
        now_ms: u64,
    ) -> Option<Value> {
        match self.find_live(hash, key, now_ms) {
            Some(pos) => {
                let entry = self.dict.at_mut(pos);
                let old_when = entry.expire_at;
                let new_when = match ttl {
                    Ttl::Persist => 0,
                    Ttl::Keep => old_when,
                    Ttl::At(t) => t,
                };
                entry.expire_at = new_when;
                entry.touch(now_ms);
                let old = std::mem::replace(&mut entry.value, value);
                if old_when != new_when {
                    self.index_remove(old_when, hash);
                    self.index_add(new_when, hash);
                }
                Some(old)
            }
            None => {
                let when = match ttl {
                    Ttl::At(t) => t,
                    Ttl::Persist | Ttl::Keep => 0,
                };
                let entry = Entry {
                    key: CompactBytes::new(key),
                    value,
                    expire_at: when,
                    lru: access::initial(now_ms),
                };
                self.dict.insert(hash, Box::new(entry));
                self.index_add(when, hash);
                self.log(KeyEvent::New, key);
                None
            }
        }
    }

    /// Inserts an entry for an absent key, or returns the live one; the flag says
    /// whether `make` was called.
    pub fn get_or_insert_with(
        &mut self,
        hash: u64,
        key: &[u8],
        now_ms: u64,
        make: impl FnOnce() -> Value,
    ) -> (&mut Entry, bool) {
        if let Some(pos) = self.find_live(hash, key, now_ms) {
            return (self.dict.at_mut(pos), false);
        }
        let entry = Entry {
            key: CompactBytes::new(key),
            value: make(),
            expire_at: 0,
            lru: access::initial(now_ms),
        };
        self.log(KeyEvent::New, key);
        let (e, _) = self.dict.get_or_insert_with(hash, key, || Box::new(entry));
        (e, true)
    }

    /// Removes `key`, returning its value if it was live.
    pub fn remove(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<Value> {
        let pos = self.find_live(hash, key, now_ms)?;
        let entry = self.dict.remove_at(pos);
        self.index_remove(entry.expire_at, hash);
        Some(entry.value)
    }

    /// Removes `key` and returns the whole entry (key, value and TTL), if live.
    pub fn take(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<Box<Entry>> {
        let pos = self.find_live(hash, key, now_ms)?;
        let entry = self.dict.remove_at(pos);
        self.index_remove(entry.expire_at, hash);
        Some(entry)
    }

    /// Inserts a whole entry taken from elsewhere (RENAME, MOVE, SWAPDB...), replacing
    /// any live entry with the same key; its TTL is kept unless `ttl` says otherwise.
    pub fn put_entry(
        &mut self,
        hash: u64,
        mut entry: Box<Entry>,
        ttl: Ttl,
        now_ms: u64,
    ) -> Option<Value> {
        let when = match ttl {
            Ttl::Keep => entry.expire_at,
            Ttl::Persist => 0,
            Ttl::At(t) => t,
        };
        let old = self.take(hash, &entry.key, now_ms).map(|e| e.value);
        entry.expire_at = when;
        self.index_add(when, hash);
        self.log(KeyEvent::New, &entry.key);
        self.dict.insert(hash, entry);
        old
    }

    /// Sets (or with 0, clears) the TTL of a live key; false if the key is absent.
    pub fn set_expire(&mut self, hash: u64, key: &[u8], when: u64, now_ms: u64) -> bool {
        let Some(pos) = self.find_live(hash, key, now_ms) else {
            return false;
        };
        let entry = self.dict.at_mut(pos);
        let old = std::mem::replace(&mut entry.expire_at, when);
        if old != when {
            self.index_remove(old, hash);
            self.index_add(when, hash);
        }
        true
    }

    /// Removes up to `budget` keys whose time has come; returns how many were removed
    /// and whether more are due.
    pub fn expire_cycle(&mut self, now_ms: u64, budget: usize) -> (usize, bool) {
        let mut removed = 0;
        while removed < budget {
            let Some((&(when, hash), _)) = self.expires.first_key_value() else {
                return (removed, false);
            };
            if when > now_ms {
                return (removed, false);
            }
            let gone = self.dict.remove_hash_where(hash, |e| e.expire_at == when);
            self.index_remove(when, hash);
            if let Some(e) = gone {
                removed += 1;
                self.expired += 1;
                self.touch_expired(e.key());
                self.log(KeyEvent::Expired, e.key());
                self.expired_value(e.value);
            }
        }
        let more = self
            .expires
            .first_key_value()
            .is_some_and(|(&(w, _), _)| w <= now_ms);
        (removed, more)
    }

    /// The earliest expiry time in this database.
    pub fn next_expiry(&self) -> Option<u64> {
        self.expires.first_key_value().map(|(&(w, _), _)| w)
    }

    /// One SCAN step over live entries (see [`Dict::scan`]).
    pub fn scan(&self, cursor: u64, now_ms: u64, mut f: impl FnMut(&Entry)) -> u64 {
        self.dict.scan(cursor, |e| {
            if !e.is_expired(now_ms) {
                f(e)
            }
        })
    }

    /// Every live entry, in table order.
    pub fn iter(&self, now_ms: u64) -> impl Iterator<Item = &Entry> {
        self.dict
            .iter()
            .map(|e| &**e)
            .filter(move |e| !e.is_expired(now_ms))
    }

    /// A random live key, removing expired keys it runs into. Gives up after a number
    /// of expired picks, as Redis does when most keys are volatile.
    pub fn random_key(&mut self, now_ms: u64, mut rng: impl FnMut() -> u64) -> Option<Vec<u8>> {
        for _ in 0..100 {
            let (key, expired) = {
                let e = self.dict.random(rng())?;
                (e.key.to_vec(), e.is_expired(now_ms))
            };
            if !expired {
                return Some(key);
            }
            let hash = self.hash(&key);
            self.find_live(hash, &key, now_ms);
        }
        None
    }

    /// Samples up to `n` keys for eviction under `policy` — only keys with a TTL
    /// when `volatile` — and calls `f(score, key)` for each (see [`crate::evict`]).
    /// Under the TTL policy the keys nearest their expiry are taken in order rather
    /// than sampled: the expiry index gives them for free.
    pub fn eviction_sample(
        &self,
        policy: Policy,
        volatile: bool,
        n: usize,
        now_ms: u64,
        rng: &mut impl FnMut() -> u64,
        mut f: impl FnMut(u64, &[u8]),
    ) {
        let mut offer = |when: u64, hash: u64| {
            if let Some(e) = self
                .dict
                .find_hash_where(hash, &mut |e| e.expire_at == when)
            {
                f(e.eviction_score(policy, now_ms), &e.key);
            }
        };
        if volatile || policy == Policy::Ttl {
            let (Some((&(first, _), _)), Some((&(last, _), _))) = (
                self.expires.first_key_value(),
                self.expires.last_key_value(),
            ) else {
                return;
            };
            if policy == Policy::Ttl {
                for &(when, hash) in self.expires.keys().take(n) {
                    offer(when, hash);
                }
                return;
            }
            // A random point of the index: its next entry (wrapping to the first).
            for _ in 0..n {
                let span = last - first;
                let when = first + rng() % span.saturating_add(1).max(1);
                let point = (when, rng());
                let (&(w, h), _) = match self.expires.range(point..).next() {
                    Some(found) => found,
                    None => match self.expires.first_key_value() {
                        Some(found) => found,
                        None => return,
                    },
                };
                offer(w, h);
            }
            return;
        }
        for _ in 0..n {
            match self.dict.random_uniform(&mut *rng) {
                Some(e) => f(e.eviction_score(policy, now_ms), &e.key),
                None => return,
            }
        }
    }

    /// Samples up to `n` keys whose values `maxmemory-policy tiered` may move out of
    /// memory ([`Value::is_tierable`]) and calls `f(score, key)` for each, scored as
    /// LRU (the least recently used first). Picks that find a value already out, or
    /// one that cannot go, are spent: a mostly cold table yields few candidates.
    pub fn tier_sample(
        &self,
        n: usize,
        now_ms: u64,
        rng: &mut impl FnMut() -> u64,
        mut f: impl FnMut(u64, &[u8]),
    ) {
        for _ in 0..n {
            match self.dict.random_uniform(&mut *rng) {
                Some(e) if e.value.is_tierable() && !e.is_expired(now_ms) => {
                    f(e.eviction_score(Policy::Lru, now_ms), &e.key)
                }
                Some(_) => {}
                None => return,
            }
        }
    }

    /// Moves the value of `key` out of memory, leaving a [`Cold`] placeholder: the
    /// caller has made sure the store holds it as the key's live record. Returns the
    /// bytes freed, or `None` if the key is gone or its value cannot go.
    pub fn make_cold(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<usize> {
        let e = self.get(hash, key, now_ms)?;
        if !e.value.is_tierable() {
            return None;
        }
        let freed = e.value.heap_size();
        let len = e.value.as_str().map_or(0, Str::len);
        e.value = Value::Cold(Cold::new(len));
        Some(freed)
    }

    /// Puts `value`, read back from the store, in place of the placeholder with this
    /// `token`; returns whether it did (the key may have been overwritten, deleted or
    /// moved out again since the placeholder was seen). Counts as an access at
    /// `now_ms`, so that the value is not the first to leave memory again before the
    /// command that wanted it runs.
    pub fn warm(&mut self, hash: u64, key: &[u8], token: u32, value: Value, now_ms: u64) -> bool {
        match self.dict.get_mut(hash, key) {
            Some(e) if matches!(&e.value, Value::Cold(c) if c.token() == token) => {
                e.value = value;
                e.touch(now_ms);
                true
            }
            _ => false,
        }
    }

    /// Advances an incremental resize, if any; returns whether one is in progress.
    pub fn rehash_some(&mut self, max_slots: usize) -> bool {
        self.dict.rehash_some(max_slots)
    }

    /// Empties the database, returning its contents so the caller can free them
    /// off the hot path. Every watcher of a key that existed is told.
    pub fn clear(&mut self) -> Detached {
        self.touch_all_existing();
        self.expires.clear();
        self.expires_len = 0;
        Detached::Db(self.dict.take())
    }

    /// Swaps the contents (not the statistics, nor the watchers, which stay with the
    /// database number) of two databases, telling the watchers of keys that existed
    /// in either.
    pub fn swap_contents(&mut self, other: &mut Db) {
        self.touch_watched_existing_in(other);
        other.touch_watched_existing_in(self);
        std::mem::swap(&mut self.dict, &mut other.dict);
        std::mem::swap(&mut self.expires, &mut other.expires);
        std::mem::swap(&mut self.expires_len, &mut other.expires_len);
    }

    /// Touches this database's watched keys that exist here or in `other`.
    fn touch_watched_existing_in(&mut self, other: &Db) {
        if self.watches.is_empty() {
            return;
        }
        let keys: Vec<Vec<u8>> = self.watches.keys().cloned().collect();
        for key in keys {
            let hash = self.hash(&key);
            if self.dict.contains(hash, &key) || other.dict.contains(hash, &key) {
                self.touch(&key);
            }
        }
    }

    /// Starts watching `key` for a client whose flag is `dirty`.
    pub fn watch(&mut self, hash: u64, key: &[u8], dirty: &Arc<AtomicBool>, now_ms: u64) {
        let expired_at_watch = self
            .dict
            .get(hash, key)
            .is_some_and(|e| e.is_expired(now_ms));
        let list = self.watches.entry(key.to_vec()).or_default();
        if !list.iter().any(|w| Arc::ptr_eq(&w.dirty, dirty)) {
            list.push(Watch {
                dirty: dirty.clone(),
                expired_at_watch,
            });
        }
    }

    /// Stops a client's watch of `key`.
    pub fn unwatch(&mut self, key: &[u8], dirty: &Arc<AtomicBool>) {
        if let Some(list) = self.watches.get_mut(key) {
            list.retain(|w| !Arc::ptr_eq(&w.dirty, dirty));
            if list.is_empty() {
                self.watches.remove(key);
            }
        }
    }

    /// Tells the watchers of `key` that it changed.
    #[inline]
    pub fn touch(&mut self, key: &[u8]) {
        if self.watches.is_empty() {
            return;
        }
        if let Some(list) = self.watches.get_mut(key) {
            for w in list.iter_mut() {
                w.dirty.store(true, Ordering::Release);
                w.expired_at_watch = false;
            }
        }
    }

    /// The deletion of an expired key: a change, except for watchers that watched it
    /// when it had already expired (for them it was already gone).
    fn touch_expired(&mut self, key: &[u8]) {
        if self.watches.is_empty() {
            return;
        }
        if let Some(list) = self.watches.get_mut(key) {
            for w in list.iter_mut() {
                if w.expired_at_watch {
                    w.expired_at_watch = false;
                } else {
                    w.dirty.store(true, Ordering::Release);
                }
            }
        }
    }

    /// Tells the watchers of every existing watched key that it changed (FLUSHDB).
    fn touch_all_existing(&mut self) {
        if self.watches.is_empty() {
            return;
        }
        let keys: Vec<Vec<u8>> = self.watches.keys().cloned().collect();
        for key in keys {
            let hash = self.hash(&key);
            if self.dict.contains(hash, &key) {
                self.touch(&key);
            }
        }
    }
}

/// What is to be freed off the client threads (Redis's lazy free): the contents of a
/// cleared database, or one value too big to drop while a client waits.
pub enum Detached {
    Db(Dict<Box<Entry>, KeyHasher>),
    Value(Value),
}

impl Detached {
    /// The number of objects it counts for in `lazyfree_pending_objects`: the keys of
    /// a database, or 1 for a value.
    pub fn len(&self) -> usize {
        match self {
            Detached::Db(d) => d.len(),
            Detached::Value(_) => 1,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Db {
        Db::new(KeyHasher::default())
    }

    fn set(db: &mut Db, k: &str, v: &str, ttl: Ttl, now: u64) -> Option<Value> {
        let h = db.hash(k.as_bytes());
        db.set(h, k.as_bytes(), Value::string(v.as_bytes()), ttl, now)
    }

    fn get(db: &mut Db, k: &str, now: u64) -> Option<Vec<u8>> {
        let h = db.hash(k.as_bytes());
        db.get(h, k.as_bytes(), now)
            .and_then(|e| e.value.as_str().map(crate::Str::to_vec))
    }

    #[test]
    fn values_leave_memory_and_come_back_only_for_their_token() {
        let mut d = db();
        let long = "x".repeat(100);
        set(&mut d, "long", &long, Ttl::Persist, 0);
        set(&mut d, "short", "tiny", Ttl::Persist, 0);
        let h = d.hash(b"long");
        assert_eq!(
            d.make_cold(h, b"long", 0),
            Some(Value::string(long.as_bytes()).heap_size())
        );
        // A short string lives in the entry: moving it out would free nothing.
        let hs = d.hash(b"short");
        assert_eq!(d.make_cold(hs, b"short", 0), None);
        let token = match &d.peek(h, b"long", 0).unwrap().value {
            Value::Cold(c) => {
                assert_eq!(
                    (c.len(), d.peek(h, b"long", 0).unwrap().value.encoding()),
                    (100, "raw")
                );
                c.token()
            }
            other => panic!("still in memory: {other:?}"),
        };
        assert_eq!(d.make_cold(h, b"long", 0), None, "already out");
        // A read made for an earlier placeholder installs nothing.
        assert!(!d.warm(
            h,
            b"long",
            token.wrapping_add(1),
            Value::string(b"stale"),
            0
        ));
        assert!(d.warm(h, b"long", token, Value::string(long.as_bytes()), 0));
        assert_eq!(get(&mut d, "long", 0), Some(long.into_bytes()));
        assert!(!d.warm(h, b"long", token, Value::string(b"again"), 0));
    }

    #[test]
    fn placeholders_are_counted_until_dropped() {
        use crate::value::{Cold, cold_bytes};
        // The counters are process-wide and other tests move small values in and
        // out meanwhile: a billion bytes stands out from them.
        const BIG: usize = 1_000_000_000;
        let before = cold_bytes();
        let a = Cold::new(BIG);
        let b = a.clone();
        assert_eq!(a.token(), b.token());
        assert!(cold_bytes() >= before + 2 * BIG as u64 - 1_000_000);
        drop(a);
        assert!(cold_bytes() < before + 3 * BIG as u64 / 2);
        drop(b);
        assert!(cold_bytes() < before + BIG as u64 / 2);
        assert_ne!(Cold::new(5).token(), Cold::new(5).token());
    }

    #[test]
    fn lazy_expiry() {
        let mut d = db();
        set(&mut d, "a", "1", Ttl::At(1000), 0);
        set(&mut d, "b", "2", Ttl::Persist, 0);
        assert_eq!(d.expires_len(), 1);
        assert_eq!(get(&mut d, "a", 999), Some(b"1".to_vec()));
        assert_eq!(get(&mut d, "a", 1000), None);
        assert_eq!(d.expired, 1);
        assert_eq!(d.expires_len(), 0);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn active_expiry_removes_due_keys_in_order() {
        let mut d = db();
        for i in 0..100u64 {
            set(&mut d, &format!("k{i}"), "v", Ttl::At(1000 + i), 0);
        }
        for i in 0..100u64 {
            set(&mut d, &format!("p{i}"), "v", Ttl::Persist, 0);
        }
        let (n, more) = d.expire_cycle(1049, 10);
        assert_eq!((n, more), (10, true));
        let (n, more) = d.expire_cycle(1049, 1000);
        assert_eq!((n, more), (40, false));
        assert_eq!(d.len(), 150);
        assert_eq!(d.expires_len(), 50);
        assert_eq!(d.next_expiry(), Some(1050));
    }

    #[test]
    fn ttl_updates_keep_the_index_exact() {
        let mut d = db();
        set(&mut d, "k", "v", Ttl::At(500), 0);
        set(&mut d, "k", "v2", Ttl::Keep, 0);
        assert_eq!(d.expires_len(), 1);
        set(&mut d, "k", "v3", Ttl::At(700), 0);
        assert_eq!(d.expires_len(), 1);
        assert_eq!(d.expire_cycle(600, 10), (0, false));
        set(&mut d, "k", "v4", Ttl::Persist, 0);
        assert_eq!(d.expires_len(), 0);
        assert_eq!(d.expire_cycle(10_000, 10), (0, false));
        assert_eq!(get(&mut d, "k", 10_000), Some(b"v4".to_vec()));
        let h = d.hash(b"k");
        assert!(d.set_expire(h, b"k", 20_000, 10_000));
        assert!(d.remove(h, b"k", 10_000).is_some());
        assert_eq!(d.expires_len(), 0);
        assert!(d.expires.is_empty());
    }

    #[test]
    fn random_key_skips_expired() {
        let mut d = db();
        for i in 0..50 {
            set(&mut d, &format!("e{i}"), "v", Ttl::At(10), 0);
        }
        set(&mut d, "live", "v", Ttl::Persist, 0);
        let mut x = 1u64;
        let mut rng = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x
        };
        assert_eq!(d.random_key(100, &mut rng), Some(b"live".to_vec()));
    }

    #[test]
    fn eviction_samples_follow_the_policy() {
        let mut d = db();
        for i in 0..100u64 {
            set(&mut d, &format!("t{i}"), "v", Ttl::At(10_000 + i), 0);
            set(&mut d, &format!("p{i}"), "v", Ttl::Persist, 0);
        }
        let mut x = 7u64;
        let mut rng = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x
        };
        // TTL order: the nearest expiries, in order.
        let mut seen = Vec::new();
        d.eviction_sample(Policy::Ttl, true, 3, 0, &mut rng, |score, key| {
            seen.push((score, key.to_vec()))
        });
        assert_eq!(
            seen,
            vec![
                (u64::MAX - 10_000, b"t0".to_vec()),
                (u64::MAX - 10_001, b"t1".to_vec()),
                (u64::MAX - 10_002, b"t2".to_vec()),
            ]
        );
        // Volatile sampling only ever yields keys with a TTL.
        let mut volatile = 0;
        d.eviction_sample(Policy::Lru, true, 200, 0, &mut rng, |_, key| {
            assert!(key.starts_with(b"t"));
            volatile += 1;
        });
        assert_eq!(volatile, 200);
        // All keys: both kinds turn up; idle time is the LRU score.
        let (mut t, mut p) = (0, 0);
        d.eviction_sample(Policy::Lru, false, 200, 5_000, &mut rng, |score, key| {
            assert_eq!(score, 5_000);
            if key.starts_with(b"t") {
                t += 1
            } else {
                p += 1
            }
        });
        assert!(t > 20 && p > 20, "{t} {p}");
    }

    #[test]
    fn events_are_logged_only_when_asked() {
        let mut d = db();
        set(&mut d, "a", "1", Ttl::At(10), 0);
        get(&mut d, "a", 20);
        assert!(!d.has_events());
        let flags = Arc::new(EventFlags::default());
        d.set_event_flags(flags.clone());
        flags.set(true, true);
        set(&mut d, "b", "1", Ttl::At(10), 0);
        set(&mut d, "b", "2", Ttl::Keep, 0);
        set(&mut d, "c", "1", Ttl::At(5), 0);
        assert_eq!(d.expire_cycle(7, 10), (1, false));
        get(&mut d, "b", 20);
        assert_eq!(
            d.take_events(),
            vec![
                (KeyEvent::New, b"b".to_vec()),
                (KeyEvent::New, b"c".to_vec()),
                (KeyEvent::Expired, b"c".to_vec()),
                (KeyEvent::Expired, b"b".to_vec()),
            ]
        );
        assert!(!d.has_events());
    }
}
