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
//! An entry only carries a flag saying whether it has a TTL; the time itself is kept
//! out of line in [`Expires`], so the many keys without one stay small (see
//! [`crate::entry`]) and never pay for a second lookup.
//!
//! # Invariants
//!
//! - An entry is flagged as having a TTL exactly when [`Expires`] holds its expiry
//!   (non-zero) and the index lists `(expire_at, hash)` for it; all changes of a TTL go
//!   through this module.
//! - A method that finds an expired entry removes it and counts it in `expired`.
//!
//! # Events
//!
//! Keyspace notifications need to know about keys removed by expiry and keys added,
//! wherever in the code that happens. When the keyspace's [`EventFlags`] ask for them,
//! the database logs such keys in order ([`Db::take_events`]); the caller publishes
//! them. When nobody listens the cost is one relaxed atomic load per insertion or
//! expiry.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use crate::KeyHasher;
use crate::access;
use crate::dict::{Dict, Pos};
use crate::entry::Entry;
use crate::evict::Policy;
use crate::expires::Expires;
use crate::logref::{self, LogChange, LogIndex, LogLoc, LogRefs, Narrow, NarrowSlot};
use crate::value::{Cold, StrRef, Value};

/// How good a candidate for eviction `entry`, which expires at `expire_at` (0 for
/// never), is under `policy`: the higher, the better (Redis's `idle` in its eviction
/// pool).
fn entry_score(entry: &Entry, policy: Policy, now_ms: u64, expire_at: u64) -> u64 {
    match policy {
        Policy::Lru => access::idle_ms(entry.lru(), now_ms),
        // Equal counters are told apart by idle time (see `access`).
        Policy::Lfu => {
            (255 - u64::from(entry.freq(now_ms))) << 32
                | u64::from(access::lfu_idle_seconds(entry.lru(), now_ms))
        }
        Policy::Ttl => u64::MAX - expire_at,
        Policy::Random => 0,
    }
}

/// A value to store: owned, or a string to copy into the entry.
enum New<'a> {
    Value(Value),
    Str(StrRef<'a>),
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
    dict: Dict<Entry, KeyHasher>,
    /// The expiry times of the keys with a TTL.
    expires: Expires,
    /// Where each logged key's records are in the store's log (see [`crate::logref`]).
    /// Boxed and made on first use: a database that lists nothing costs a pointer.
    log_index: Option<Box<LogIndex>>,
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
    /// The key found or placed last (its hash) and where: a command's change is
    /// logged right after it, and a pipeline's commands often name one key, so a
    /// lookup ([`Db::find`]) checks this place before it searches (a comparison of
    /// the key instead of a probe of the table). A hint only: the place is checked
    /// to still hold the key.
    last: Option<(u64, Pos)>,
}

/// Values waiting in any database's `expired_values`, so that a caller can skip
/// asking every database of the shards it holds after each command when none is.
static EXPIRED_VALUES: AtomicUsize = AtomicUsize::new(0);

/// Whether some database of the process may hold values of expired keys to take
/// ([`Db::take_expired_values`]); false means none does.
#[inline]
pub fn expired_values_waiting() -> bool {
    EXPIRED_VALUES.load(Ordering::Relaxed) > 0
}

impl Drop for Db {
    fn drop(&mut self) {
        EXPIRED_VALUES.fetch_sub(self.expired_values.len(), Ordering::Relaxed);
    }
}

impl Db {
    pub fn new(hasher: KeyHasher) -> Db {
        Db {
            dict: Dict::with_hasher(hasher),
            expires: Expires::default(),
            log_index: None,
            expired: 0,
            watches: HashMap::new(),
            event_flags: Arc::default(),
            events: Vec::new(),
            expired_values: Vec::new(),
            last: None,
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

    /// Keeps the big value of an expired entry for the caller to free; drops a
    /// small one.
    #[inline]
    fn expired_value(&mut self, entry: Entry) {
        if entry.value().free_lazily() {
            self.expired_values.push(entry.into_value());
            EXPIRED_VALUES.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The big values of keys expired since the last call (see [`Value::free_lazily`]).
    pub fn take_expired_values(&mut self) -> Vec<Value> {
        if self.expired_values.is_empty() {
            return Vec::new();
        }
        EXPIRED_VALUES.fetch_sub(self.expired_values.len(), Ordering::Relaxed);
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
        self.expires.len()
    }

    /// Bytes held by the table's slot arrays.
    pub fn table_bytes(&self) -> usize {
        self.dict.allocated_bytes()
    }

    /// The absolute expiry (Unix milliseconds) of an entry with hash `hash`; 0 when it
    /// has no TTL.
    #[inline]
    fn when(&self, hash: u64, entry: &Entry) -> u64 {
        if entry.has_ttl() {
            self.expires.get(hash, entry.key())
        } else {
            0
        }
    }

    /// Whether an entry with hash `hash` has expired at `now_ms`.
    #[inline]
    fn is_expired(&self, hash: u64, entry: &Entry, now_ms: u64) -> bool {
        entry.has_ttl() && self.expires.get(hash, entry.key()) <= now_ms
    }

    /// Whether an entry of this database has expired at `now_ms`.
    #[inline]
    fn entry_expired(&self, entry: &Entry, now_ms: u64) -> bool {
        entry.has_ttl() && self.is_expired(self.hash(entry.key()), entry, now_ms)
    }

    /// The absolute expiry in Unix milliseconds of an entry of this database, if it
    /// has a TTL.
    pub fn expire_at(&self, entry: &Entry) -> Option<u64> {
        if !entry.has_ttl() {
            return None;
        }
        let when = self.when(self.hash(entry.key()), entry);
        (when != 0).then_some(when)
    }

    /// How good a candidate for eviction an entry of this database is under `policy`:
    /// the higher, the better (Redis's `idle` in its eviction pool).
    pub fn eviction_score(&self, entry: &Entry, policy: Policy, now_ms: u64) -> u64 {
        let when = match policy {
            Policy::Ttl => self.expire_at(entry).unwrap_or(0),
            _ => 0,
        };
        entry_score(entry, policy, now_ms, when)
    }

    /// Changes the TTL of the entry at `pos` (0: none), keeping [`Expires`] exact.
    fn set_when(&mut self, hash: u64, pos: Pos, when: u64) {
        let entry = self.dict.at(pos);
        let old = self.when(hash, entry);
        if old != when {
            let volatile = self.expires.set(hash, entry.key(), old, when);
            self.dict.at_mut(pos).set_volatile(volatile);
        }
    }

    /// Removes the entry at `pos` from the table, forgetting its TTL and its log
    /// records; returns it with its TTL (0: none).
    #[inline]
    fn remove_pos(&mut self, hash: u64, pos: Pos) -> (Entry, u64) {
        let mut narrow = self.narrow_at(pos);
        let mut entry = self.dict.remove_at(pos);
        entry.set_log_slot(NarrowSlot::default(), 0);
        if entry.is_logged()
            && let Some(index) = &mut self.log_index
        {
            logref::add_freed(index.remove(entry.key(), &mut narrow));
        }
        let when = self.forget_when(hash, &entry);
        (entry, when)
    }

    /// Forgets the TTL of an entry that has just left the table.
    #[inline]
    fn forget_when(&mut self, hash: u64, entry: &Entry) -> u64 {
        let when = self.when(hash, entry);
        if when != 0 {
            self.expires.set(hash, entry.key(), when, 0);
        }
        when
    }

    /// Where `key` is: at the place of the key found or placed last if it is
    /// still there (a run of commands on one key: a comparison of the key instead
    /// of a search), else where a search finds it.
    #[inline]
    fn find(&self, hash: u64, key: &[u8]) -> Option<Pos> {
        if let Some((h, pos)) = self.last
            && h == hash
            && let Some(pos) = self.dict.still_at(pos, key)
        {
            return Some(pos);
        }
        self.dict.find(hash, key)
    }

    /// Finds a live entry, removing it first if it has expired.
    #[inline]
    fn find_live(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<Pos> {
        let pos = self.find(hash, key)?;
        let entry = self.dict.at(pos);
        if self.is_expired(hash, entry, now_ms) {
            let (removed, _) = self.remove_pos(hash, pos);
            self.expired += 1;
            self.touch_expired(removed.key());
            self.log(KeyEvent::Expired, removed.key());
            self.expired_value(removed);
            return None;
        }
        self.last = Some((hash, pos));
        Some(pos)
    }

    /// The live entry for `key`, if any (an expired one is removed).
    #[inline]
    pub fn get(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<&mut Entry> {
        let pos = self.find_live(hash, key, now_ms)?;
        Some(self.dict.at_mut(pos))
    }

    /// Starts loading what a lookup of `member` in the hash or set at `key` will
    /// read (see [`crate::dict::Dict::prefetch_lookup`]): a hint for a pipeline's
    /// next command, which reads nothing else and changes nothing.
    #[inline]
    pub fn prefetch_member(&self, hash: u64, key: &[u8], member: &[u8], slot_arrived: bool) {
        let Some(pos) = self.find(hash, key) else {
            return;
        };
        let value = self.dict.at(pos).value();
        if let Some(h) = value.as_hash() {
            h.prefetch_field(member, slot_arrived);
        } else if let Some(s) = value.as_set() {
            s.prefetch_member(member, slot_arrived);
        }
    }

    /// The live entry for `key` without removing an expired one.
    pub fn peek(&self, hash: u64, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.peek_at(hash, key, now_ms).map(|(_, entry)| entry)
    }

    /// [`Db::peek`], also answering where the entry is, for a later
    /// [`Db::apply_log`] on the key (which checks the place is still the key's).
    #[inline]
    pub fn peek_at(&self, hash: u64, key: &[u8], now_ms: u64) -> Option<(Pos, &Entry)> {
        let pos = self.find(hash, key)?;
        let entry = self.dict.at(pos);
        (!self.is_expired(hash, entry, now_ms)).then_some((pos, entry))
    }

    /// The TTL of a live key: `None` if the key is missing, `Some(None)` if it has no
    /// TTL (an expired key is removed).
    pub fn ttl_of(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<Option<u64>> {
        let pos = self.find_live(hash, key, now_ms)?;
        let when = self.when(hash, self.dict.at(pos));
        Some((when != 0).then_some(when))
    }

    pub fn contains(&mut self, hash: u64, key: &[u8], now_ms: u64) -> bool {
        self.find_live(hash, key, now_ms).is_some()
    }

    /// Stores `value` under `key`; returns the live value it replaced if that was
    /// not a string (a string is freed here: it is never big to free).
    pub fn set(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Value,
        ttl: Ttl,
        now_ms: u64,
    ) -> Option<Value> {
        self.store(hash, key, New::Value(value), ttl, now_ms)
    }

    /// [`Db::set`] for a string given by reference: its bytes are copied once,
    /// into the entry.
    pub fn set_str(
        &mut self,
        hash: u64,
        key: &[u8],
        value: StrRef<'_>,
        ttl: Ttl,
        now_ms: u64,
    ) -> Option<Value> {
        self.store(hash, key, New::Str(value), ttl, now_ms)
    }

    #[inline]
    fn store(
        &mut self,
        hash: u64,
        key: &[u8],
        value: New<'_>,
        ttl: Ttl,
        now_ms: u64,
    ) -> Option<Value> {
        match self.find_live(hash, key, now_ms) {
            Some(pos) => {
                match ttl {
                    Ttl::Persist => self.set_when(hash, pos, 0),
                    Ttl::Keep => {}
                    Ttl::At(t) => self.set_when(hash, pos, t),
                }
                let entry = self.dict.at_mut(pos);
                entry.touch(now_ms);
                match value {
                    New::Value(v) => entry.set_value(v),
                    New::Str(s) => entry.set_str(s),
                }
            }
            None => {
                let when = match ttl {
                    Ttl::At(t) => t,
                    Ttl::Persist | Ttl::Keep => 0,
                };
                let mut entry = match value {
                    New::Value(v) => Entry::new(key, v, now_ms),
                    New::Str(s) => Entry::new_str(key, s, now_ms),
                };
                entry.set_volatile(self.expires.set(hash, key, 0, when));
                // Absent (`find_live` found no live entry and removed an expired
                // one): placed, where the hint can find it.
                let (_, _, pos) = self.dict.get_or_insert_with(hash, key, || entry);
                self.last = Some((hash, pos));
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
        let entry = Entry::new(key, make(), now_ms);
        self.log(KeyEvent::New, key);
        let (e, _, pos) = self.dict.get_or_insert_with(hash, key, || entry);
        self.last = Some((hash, pos));
        (e, true)
    }

    /// Removes `key`, returning its entry if it was live (dropping it frees the
    /// key and value; [`Entry::into_value`] takes the value out).
    pub fn remove(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<Entry> {
        let pos = self.find_live(hash, key, now_ms)?;
        let (entry, _) = self.remove_pos(hash, pos);
        Some(entry)
    }

    /// Removes `key` and returns the whole entry (key and value) with its TTL (the
    /// absolute expiry, if any), if live.
    pub fn take(&mut self, hash: u64, key: &[u8], now_ms: u64) -> Option<(Entry, Option<u64>)> {
        let pos = self.find_live(hash, key, now_ms)?;
        let (mut entry, when) = self.remove_pos(hash, pos);
        entry.set_volatile(false);
        entry.set_logged(false);
        Some((entry, (when != 0).then_some(when)))
    }

    /// Inserts a whole entry taken from elsewhere (RENAME, MOVE...) with the TTL
    /// `expire_at`, replacing any live entry with the same key.
    pub fn put_entry(
        &mut self,
        hash: u64,
        mut entry: Entry,
        expire_at: Option<u64>,
        now_ms: u64,
    ) -> Option<Value> {
        let old = self
            .take(hash, entry.key(), now_ms)
            .map(|(e, _)| e.into_value());
        entry.set_logged(false);
        let volatile = self
            .expires
            .set(hash, entry.key(), 0, expire_at.unwrap_or(0));
        entry.set_volatile(volatile);
        self.log(KeyEvent::New, entry.key());
        self.dict.insert(hash, entry);
        old
    }

    /// Sets (or with 0, clears) the TTL of a live key; false if the key is absent.
    pub fn set_expire(&mut self, hash: u64, key: &[u8], when: u64, now_ms: u64) -> bool {
        let Some(pos) = self.find_live(hash, key, now_ms) else {
            return false;
        };
        self.set_when(hash, pos, when);
        true
    }

    /// Removes up to `budget` keys whose time has come; returns how many were removed
    /// and whether more are due.
    pub fn expire_cycle(&mut self, now_ms: u64, budget: usize) -> (usize, bool) {
        let mut removed = 0;
        while removed < budget {
            let Some((when, hash)) = self.expires.first() else {
                return (removed, false);
            };
            if when > now_ms {
                return (removed, false);
            }
            let expires = &self.expires;
            let gone = self.dict.find_hash_where_pos(hash, &mut |e| {
                e.has_ttl() && expires.get(hash, e.key()) == when
            });
            if let Some(pos) = gone {
                let (e, _) = self.remove_pos(hash, pos);
                removed += 1;
                self.expired += 1;
                self.touch_expired(e.key());
                self.log(KeyEvent::Expired, e.key());
                self.expired_value(e);
            } else {
                // No entry holds this time (the invariants rule it out): drop it from
                // the index all the same, so the cycle moves on.
                self.expires.drop_from_index(when, hash);
            }
        }
        let more = self.expires.first().is_some_and(|(w, _)| w <= now_ms);
        (removed, more)
    }

    /// The earliest expiry time in this database.
    pub fn next_expiry(&self) -> Option<u64> {
        self.expires.first().map(|(w, _)| w)
    }

    /// One SCAN step over live entries (see [`Dict::scan`]).
    pub fn scan(&self, cursor: u64, now_ms: u64, mut f: impl FnMut(&Entry)) -> u64 {
        self.dict.scan(cursor, |e| {
            if !self.entry_expired(e, now_ms) {
                f(e)
            }
        })
    }

    /// Every live entry, in table order.
    pub fn iter(&self, now_ms: u64) -> impl Iterator<Item = &Entry> {
        self.dict
            .iter()
            .filter(move |e| !self.entry_expired(e, now_ms))
    }

    /// A random live key, removing expired keys it runs into. Gives up after a number
    /// of expired picks, as Redis does when most keys are volatile.
    pub fn random_key(&mut self, now_ms: u64, mut rng: impl FnMut() -> u64) -> Option<Vec<u8>> {
        for _ in 0..100 {
            let (key, expired) = {
                let e = self.dict.random_uniform(&mut rng)?;
                (e.key().to_vec(), self.entry_expired(e, now_ms))
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
        let expires = &self.expires;
        let mut offer = |when: u64, hash: u64| {
            if let Some(e) = self.dict.find_hash_where(hash, &mut |e| {
                e.has_ttl() && expires.get(hash, e.key()) == when
            }) {
                f(entry_score(e, policy, now_ms, when), e.key());
            }
        };
        if volatile || policy == Policy::Ttl {
            let (Some((first, _)), Some((last, _))) = (expires.first(), expires.last()) else {
                return;
            };
            if policy == Policy::Ttl {
                for (when, hash) in expires.in_order().take(n) {
                    offer(when, hash);
                }
                return;
            }
            // A random point of the index: its next entry (wrapping to the first).
            for _ in 0..n {
                let span = last - first;
                let when = first + rng() % span.saturating_add(1).max(1);
                let point = (when, rng());
                let (w, h) = match expires.at_or_after(point) {
                    Some(found) => found,
                    None => match expires.first() {
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
                Some(e) => f(entry_score(e, policy, now_ms, 0), e.key()),
                None => return,
            }
        }
    }

    /// Samples up to `n` keys whose values `maxmemory-policy tiered` may move out of
    /// memory ([`crate::ValueRef::is_tierable`]) and calls `f(score, key)` for each, scored as
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
                Some(e) if e.value().is_tierable() && !self.entry_expired(e, now_ms) => {
                    f(entry_score(e, Policy::Lru, now_ms, 0), e.key())
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
        // Only a value whose record the database knows can be read back.
        if !e.value().is_tierable() || !e.is_logged() {
            return None;
        }
        let before = e.memory_usage();
        let len = e.value().as_str().map_or(0, |s| s.len());
        e.set_value(Value::Cold(Cold::new(len)));
        Some(before.saturating_sub(e.memory_usage()))
    }

    /// Puts `value`, read back from the store, in place of the placeholder with this
    /// `token`; returns whether it did (the key may have been overwritten, deleted or
    /// moved out again since the placeholder was seen). Counts as an access at
    /// `now_ms`, so that the value is not the first to leave memory again before the
    /// command that wanted it runs.
    pub fn warm(&mut self, hash: u64, key: &[u8], token: u32, value: Value, now_ms: u64) -> bool {
        match self.dict.get_mut(hash, key) {
            Some(e) if e.value().as_cold().is_some_and(|c| c.token() == token) => {
                e.set_value(value);
                e.touch(now_ms);
                true
            }
            _ => false,
        }
    }

    /// Publishes where the table of keys is to `hint` from now on (see
    /// [`crate::dict::SlotsHint`]); call once the database is where it stays.
    pub fn publish_to(&mut self, hint: crate::dict::HintRef) {
        self.dict.publish_to(hint);
    }

    /// Where the entry a lookup of `hash` reads first is (see
    /// [`crate::Keyspace::prefetch_entry`]).
    #[inline]
    pub fn candidate_addr(&self, hash: u64) -> Option<usize> {
        self.dict.candidate_addr(hash)
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
        self.log_index = None;
        Detached::Db(self.dict.take())
    }

    /// Swaps the contents (not the statistics, nor the watchers, which stay with the
    /// database number) of two databases, telling the watchers of keys that existed
    /// in either.
    pub fn swap_contents(&mut self, other: &mut Db) {
        self.touch_watched_existing_in(other);
        other.touch_watched_existing_in(self);
        self.dict.swap(&mut other.dict);
        std::mem::swap(&mut self.expires, &mut other.expires);
        std::mem::swap(&mut self.log_index, &mut other.log_index);
    }

    /// Where the records of `key` are in the store's log, if the database knows
    /// (expired or not).
    pub fn log_refs(&self, hash: u64, key: &[u8]) -> Option<LogRefs> {
        let pos = self.listed_pos(hash, key)?;
        self.log_index.as_ref()?.get(key, self.narrow_at(pos))
    }

    /// The oldest record of `key` in the store's log, if the database lists it;
    /// cheap however long the key's chain of operations is.
    pub fn first_log_location(&self, hash: u64, key: &[u8]) -> Option<LogLoc> {
        let pos = self.listed_pos(hash, key)?;
        self.log_index.as_ref()?.first(key, self.narrow_at(pos))
    }

    /// Calls `f` with the oldest record of every key whose records are listed (the
    /// store's compaction, see `strata_engine::Index::first_locations`). Reads the
    /// entries in table order, loading those ahead; a chain's first record is looked
    /// up by key.
    pub fn for_each_first_log_location(&self, mut f: impl FnMut(LogLoc)) {
        let Some(index) = self.log_index.as_ref() else {
            return;
        };
        self.dict.for_each_prefetched(|e| {
            if e.is_logged() {
                let (slot, len) = e.log_slot();
                if let Some(loc) = index.first(e.key(), Narrow::join(slot, len)) {
                    f(loc);
                }
            }
        });
    }

    /// Where `key` is in the table, if its records are listed.
    fn listed_pos(&self, hash: u64, key: &[u8]) -> Option<Pos> {
        let pos = self.dict.find(hash, key)?;
        self.dict.at(pos).is_logged().then_some(pos)
    }

    /// Calls `f` with the index, the entry at `pos`, and the entry's [`Narrow`].
    fn with_log_slot<R>(
        &mut self,
        pos: Pos,
        f: impl FnOnce(&mut LogIndex, &mut Entry, &mut Narrow) -> R,
    ) -> R {
        let index = self.log_index.get_or_insert_with(Box::default);
        let entry = self.dict.at_mut(pos);
        let (slot, len) = entry.log_slot();
        let mut narrow = Narrow::join(slot, len);
        let r = f(index, entry, &mut narrow);
        let (slot, len) = narrow.split();
        entry.set_log_slot(slot, len);
        r
    }

    /// The [`Narrow`] of the entry at `pos`.
    #[inline]
    fn narrow_at(&self, pos: Pos) -> Narrow {
        let (slot, len) = self.dict.at(pos).log_slot();
        Narrow::join(slot, len)
    }

    /// Records that the store's log holds `change` for `key`, the record the key's
    /// last change was logged as; false if the key is absent.
    /// `at`, where [`Db::peek_at`] found the key, spares the lookup if the key is
    /// still there.
    pub fn apply_log(&mut self, hash: u64, key: &[u8], at: Option<Pos>, change: LogChange) -> bool {
        let found = at.and_then(|pos| self.dict.still_at(pos, key));
        let Some(pos) = found.or_else(|| self.dict.find(hash, key)) else {
            return false;
        };
        let freed = self.with_log_slot(pos, |index, entry, narrow| {
            let listed = entry.is_logged();
            entry.set_logged(true);
            index.apply(key, listed, narrow, change)
        });
        logref::add_freed(freed);
        true
    }

    /// Sets where the records of `key` are (the store's own index says), or with
    /// `None` forgets them; false if the key is absent.
    pub fn set_log_refs(&mut self, hash: u64, key: &[u8], refs: Option<LogRefs>) -> bool {
        let Some(pos) = self.dict.find(hash, key) else {
            return false;
        };
        match refs {
            Some(refs) => self.with_log_slot(pos, |index, entry, narrow| {
                let listed = entry.is_logged();
                entry.set_logged(true);
                index.set(key, listed, narrow, refs);
            }),
            None if self.dict.at(pos).is_logged() => {
                self.with_log_slot(pos, |index, entry, narrow| {
                    entry.set_logged(false);
                    index.remove(key, narrow);
                })
            }
            None => {}
        }
        true
    }

    /// If the records of `key` still begin with `prefix`, replaces that prefix by the
    /// whole value at `replacement` (the store's compaction moved it); returns the
    /// bytes of the records replaced.
    pub fn replace_log_prefix(
        &mut self,
        hash: u64,
        key: &[u8],
        prefix: &[LogLoc],
        replacement: LogLoc,
    ) -> Option<u64> {
        let pos = self.listed_pos(hash, key)?;
        let refs = self.log_index.as_ref()?.get(key, self.narrow_at(pos))?;
        let all: Vec<LogLoc> = refs.locations().collect();
        if prefix.is_empty() || !all.starts_with(prefix) {
            return None;
        }
        let rest = all.get(prefix.len()..).unwrap_or_default();
        let new = if rest.is_empty() {
            LogRefs::Value(replacement)
        } else {
            LogRefs::Chain {
                base: Some(replacement),
                operands: rest.to_vec(),
            }
        };
        self.with_log_slot(pos, |index, _, narrow| index.set(key, true, narrow, new));
        Some(prefix.iter().map(|l| u64::from(l.len)).sum())
    }

    /// Forgets where every key's records are (the store is closed or reopened).
    pub fn clear_log_refs(&mut self) {
        if self.log_index.take().is_none() {
            return;
        }
        for e in self.dict.iter_mut() {
            e.set_logged(false);
            e.set_log_slot(NarrowSlot::default(), 0);
        }
    }

    /// Keys whose records the database knows.
    pub fn logged_len(&self) -> usize {
        self.log_index.as_ref().map_or(0, |i| i.len())
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
            .is_some_and(|e| self.is_expired(hash, e, now_ms));
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
    Db(Dict<Entry, KeyHasher>),
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
            .and_then(|e| e.value().as_str().map(crate::StrRef::to_vec))
    }

    /// A record's location in segment 3, ten bytes long.
    fn loc(offset: u32) -> LogLoc {
        LogLoc {
            segment: 3,
            offset,
            len: 10,
        }
    }

    /// The offsets of the records `d` lists for `key` (none if it lists none).
    fn offsets(d: &Db, key: &str) -> Vec<u32> {
        d.log_refs(d.hash(key.as_bytes()), key.as_bytes())
            .map(|r| r.locations().map(|l| l.offset).collect())
            .unwrap_or_default()
    }

    /// A lookup (`peek_at`, `get`) starts at the place of the key found or placed
    /// last, checked: a place that has moved on (the table grew, the key left,
    /// another key is there) sends it searching, and never answers for another key.
    #[test]
    fn a_lookup_checks_the_last_place_before_trusting_it() {
        let mut d = db();
        set(&mut d, "a", "1", Ttl::Persist, 0);
        let ha = d.hash(b"a");
        assert_eq!(d.last.map(|(h, _)| h), Some(ha));
        let (pos, _) = d.peek_at(ha, b"a", 0).expect("placed last");
        for i in 0..100 {
            set(&mut d, &format!("k{i}"), "v", Ttl::Persist, 0);
        }
        d.last = Some((ha, pos));
        let (now_at, e) = d.peek_at(ha, b"a", 0).expect("still there");
        assert_eq!(e.key(), b"a");
        let hk = d.hash(b"k5");
        let (k5, _) = d.peek_at(hk, b"k5", 0).expect("live");
        d.last = Some((ha, k5));
        assert_eq!(d.peek_at(ha, b"a", 0).map(|(p, _)| p), Some(now_at));
        d.last = Some((ha, k5));
        assert_eq!(
            d.get(ha, b"a", 0).map(|e| e.key().to_vec()),
            Some(b"a".to_vec())
        );
        assert_eq!(d.last, Some((ha, now_at)));
        assert!(d.remove(ha, b"a", 0).is_some());
        d.last = Some((ha, now_at));
        assert!(d.peek_at(ha, b"a", 0).is_none());
        d.last = Some((ha, now_at));
        assert!(d.get(ha, b"a", 0).is_none());
        // Found at the last place, an expired key is still removed.
        set(&mut d, "e", "1", Ttl::At(5), 0);
        let he = d.hash(b"e");
        assert_eq!(d.last.map(|(h, _)| h), Some(he));
        assert!(d.get(he, b"e", 10).is_none());
        assert!(d.peek(he, b"e", 0).is_none());
    }

    #[test]
    fn a_log_location_goes_to_its_key_wherever_the_kept_position_points() {
        let mut d = db();
        set(&mut d, "a", "1", Ttl::Persist, 0);
        let ha = d.hash(b"a");
        let (pos, _) = d.peek_at(ha, b"a", 0).expect("live");
        assert!(d.apply_log(ha, b"a", Some(pos), LogChange::Put(loc(0))));
        // Hundreds of keys later the table has grown (and moved "a"): whatever
        // the kept position now holds, the location goes to "a".
        for i in 0..300 {
            set(&mut d, &format!("k{i}"), "v", Ttl::Persist, 0);
        }
        assert!(d.apply_log(ha, b"a", Some(pos), LogChange::Op(loc(10))));
        let hk = d.hash(b"k7");
        assert!(d.apply_log(hk, b"k7", Some(pos), LogChange::Put(loc(20))));
        assert_eq!(offsets(&d, "a"), vec![0, 10]);
        assert_eq!(offsets(&d, "k7"), vec![20]);
        // As `peek`, `peek_at` answers only for a live key.
        set(&mut d, "e", "1", Ttl::At(5), 0);
        let he = d.hash(b"e");
        assert!(d.peek_at(he, b"e", 10).is_none());
        assert!(d.peek_at(he, b"e", 1).is_some());
    }

    #[test]
    fn log_records_are_listed_until_their_key_leaves() {
        let mut d = db();
        set(&mut d, "a", "1", Ttl::Persist, 0);
        set(&mut d, "b", "2", Ttl::At(50), 0);
        let (ha, hb) = (d.hash(b"a"), d.hash(b"b"));
        assert!(!d.apply_log(d.hash(b"zz"), b"zz", None, LogChange::Put(loc(0))));
        assert!(d.apply_log(ha, b"a", None, LogChange::Put(loc(0))));
        assert!(d.apply_log(hb, b"b", None, LogChange::Put(loc(10))));
        assert!(d.apply_log(ha, b"a", None, LogChange::Op(loc(20))));
        assert_eq!(offsets(&d, "a"), vec![0, 20]);
        // Compaction folds the chain into one record.
        assert_eq!(
            d.replace_log_prefix(ha, b"a", &[loc(0), loc(20)], loc(90)),
            Some(20)
        );
        assert_eq!(d.log_refs(ha, b"a"), Some(LogRefs::Value(loc(90))));
        assert_eq!(d.replace_log_prefix(ha, b"a", &[loc(0)], loc(95)), None);
        assert_eq!(d.logged_len(), 2);
        // An expired key leaves its list when it leaves the table.
        assert!(get(&mut d, "b", 60).is_none());
        assert_eq!(d.logged_len(), 1);
        assert_eq!(d.log_refs(hb, b"b"), None);
        // A taken entry leaves its records behind: its new home logs it anew.
        let (entry, _) = d.take(ha, b"a", 0).expect("live");
        assert!(!entry.is_logged());
        assert_eq!(d.logged_len(), 0);
        d.put_entry(ha, entry, None, 0);
        assert_eq!(d.log_refs(ha, b"a"), None);
        // Nothing of its old location follows it: an operation starts a bare chain.
        d.apply_log(ha, b"a", None, LogChange::Op(loc(99)));
        assert_eq!(
            d.log_refs(ha, b"a"),
            Some(LogRefs::Chain {
                base: None,
                operands: vec![loc(99)]
            })
        );
        d.apply_log(ha, b"a", None, LogChange::Put(loc(100)));
        let mut other = db();
        d.swap_contents(&mut other);
        assert_eq!(other.log_refs(ha, b"a"), Some(LogRefs::Value(loc(100))));
        assert_eq!(d.logged_len(), 0);
        other.clear_log_refs();
        assert_eq!(other.log_refs(ha, b"a"), None);
        assert!(other.get(ha, b"a", 0).is_some_and(|e| !e.is_logged()));
    }

    #[test]
    fn values_leave_memory_and_come_back_only_for_their_token() {
        let mut d = db();
        let long = "x".repeat(100);
        set(&mut d, "long", &long, Ttl::Persist, 0);
        set(&mut d, "short", "tiny", Ttl::Persist, 0);
        let h = d.hash(b"long");
        // Only a value whose record the database lists can leave.
        assert_eq!(d.make_cold(h, b"long", 0), None);
        let at = LogLoc {
            segment: 1,
            offset: 0,
            len: 120,
        };
        assert!(d.apply_log(h, b"long", None, LogChange::Put(at)));
        assert_eq!(
            d.make_cold(h, b"long", 0),
            // 122 bytes (lengths, key, value) become 37 (a placeholder and the key).
            Some(122 - 37)
        );
        // A short string lives in the entry: moving it out would free nothing.
        let hs = d.hash(b"short");
        assert_eq!(d.make_cold(hs, b"short", 0), None);
        let token = match d.peek(h, b"long", 0).unwrap().value().as_cold() {
            Some(c) => {
                assert_eq!(
                    (c.len(), d.peek(h, b"long", 0).unwrap().value().encoding()),
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
    fn ttls_travel_with_taken_entries_and_swaps() {
        let mut d = db();
        set(&mut d, "a", "1", Ttl::At(500), 0);
        set(&mut d, "b", "2", Ttl::Persist, 0);
        // RENAME: the entry leaves with its TTL and comes back under another key.
        let h = d.hash(b"a");
        let (mut entry, when) = d.take(h, b"a", 0).expect("live");
        assert_eq!((when, d.expires_len()), (Some(500), 0));
        entry.set_key(b"c");
        let h = d.hash(b"c");
        assert!(d.put_entry(h, entry, when, 0).is_none());
        assert_eq!(d.ttl_of(h, b"c", 0), Some(Some(500)));
        let e = d.peek(h, b"c", 0).expect("live");
        assert!(e.has_ttl());
        assert_eq!(d.expire_at(e), Some(500));
        // Replacing a key with a TTL by one without drops the old TTL.
        let hb = d.hash(b"b");
        let (entry, when) = d.take(hb, b"b", 0).expect("live");
        entry_into(&mut d, b"c", entry, when);
        assert_eq!(d.ttl_of(h, b"c", 0), Some(None));
        assert_eq!(d.expires_len(), 0);
        // SWAPDB moves the TTLs with the keys; FLUSHDB drops them.
        set(&mut d, "t", "v", Ttl::At(900), 0);
        let mut other = Db::new(d.dict.hasher().clone());
        d.swap_contents(&mut other);
        assert_eq!((d.expires_len(), other.expires_len()), (0, 1));
        let ht = other.hash(b"t");
        assert_eq!(other.ttl_of(ht, b"t", 0), Some(Some(900)));
        assert_eq!(other.ttl_of(ht, b"t", 900), None);
        assert_eq!(other.expired, 1);
        set(&mut other, "u", "v", Ttl::At(900), 0);
        drop(other.clear());
        assert_eq!(
            (other.len(), other.expires_len(), other.next_expiry()),
            (0, 0, None)
        );
    }

    fn entry_into(d: &mut Db, key: &[u8], mut entry: Entry, when: Option<u64>) {
        entry.set_key(key);
        let h = d.hash(key);
        d.put_entry(h, entry, when, 0);
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

    /// A model of lookups through the last key's place. Not under Miri, where a
    /// few short cases take many minutes: it checks safe code's logic, and the
    /// tests above take the same unsafe paths (entries, tables) under Miri.
    #[cfg(not(miri))]
    mod model {
        use super::*;

        #[derive(Clone, Debug)]
        enum Op {
            /// SET one of a few keys, maybe with a TTL this many ms from now.
            Set(u8, u8, Option<u8>),
            Get(u8),
            Peek(u8),
            Remove(u8),
            /// This many fresh keys: the table grows and migrates under the hint.
            Fill(u8),
            Prefetch(u8),
            Tick(u8),
        }

        fn op() -> impl proptest::strategy::Strategy<Value = Op> {
            use proptest::prelude::*;
            let key = 0u8..6;
            prop_oneof![
                3 => (key.clone(), any::<u8>(), proptest::option::of(0u8..20))
                    .prop_map(|(k, v, t)| Op::Set(k, v, t)),
                3 => key.clone().prop_map(Op::Get),
                2 => key.clone().prop_map(Op::Peek),
                1 => key.clone().prop_map(Op::Remove),
                1 => (0u8..64).prop_map(Op::Fill),
                1 => key.prop_map(Op::Prefetch),
                1 => (0u8..20).prop_map(Op::Tick),
            ]
        }

        proptest::proptest! {
            /// Every lookup starts at the place of the key found or placed last: over
            /// a few keys looked up again and again while fresh keys grow the table
            /// (and move the keys) and TTLs run out, each answers as a map would.
            #[test]
            fn lookups_through_the_last_place_follow_a_model(
                ops in proptest::collection::vec(op(), 1..300)
            ) {
                let mut d = db();
                let mut model: HashMap<String, (u8, Option<u64>)> = HashMap::new();
                let (mut now, mut fresh) = (1_000u64, 0u32);
                let live = |m: &HashMap<String, (u8, Option<u64>)>, k: &str, now: u64| {
                    m.get(k).filter(|(_, when)| when.is_none_or(|w| w > now)).map(|(v, _)| *v)
                };
                for op in ops {
                    match op {
                        Op::Set(k, v, ttl) => {
                            let k = format!("k{k}");
                            let when = ttl.map(|t| now + u64::from(t));
                            let ttl = when.map_or(Ttl::Persist, Ttl::At);
                            set(&mut d, &k, &v.to_string(), ttl, now);
                            model.insert(k, (v, when));
                        }
                        Op::Get(k) => {
                            let k = format!("k{k}");
                            let want = live(&model, &k, now);
                            let got = get(&mut d, &k, now);
                            proptest::prop_assert_eq!(got, want.map(|v| v.to_string().into_bytes()));
                            if want.is_none() {
                                model.remove(&k);
                            }
                        }
                        Op::Peek(k) => {
                            let k = format!("k{k}");
                            let h = d.hash(k.as_bytes());
                            let got = d.peek(h, k.as_bytes(), now).map(|e| e.key().to_vec());
                            let want = live(&model, &k, now).map(|_| k.clone().into_bytes());
                            proptest::prop_assert_eq!(got, want);
                        }
                        Op::Remove(k) => {
                            let k = format!("k{k}");
                            let h = d.hash(k.as_bytes());
                            let got = d.remove(h, k.as_bytes(), now).is_some();
                            proptest::prop_assert_eq!(got, live(&model, &k, now).is_some());
                            model.remove(&k);
                        }
                        Op::Fill(n) => {
                            for _ in 0..n {
                                set(&mut d, &format!("f{fresh}"), "v", Ttl::Persist, now);
                                fresh += 1;
                            }
                        }
                        Op::Prefetch(k) => {
                            let k = format!("k{k}");
                            let h = d.hash(k.as_bytes());
                            d.prefetch_member(h, k.as_bytes(), b"m", false);
                            d.prefetch_member(h, k.as_bytes(), b"m", true);
                        }
                        Op::Tick(ms) => now += u64::from(ms),
                    }
                }
            }
        }
    }
}
