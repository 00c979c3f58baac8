//! The context a handler runs in: the shards it holds, its reply buffer, its
//! connection and the server.
//!
//! The dispatcher locks the shards of a command's keys (from the command table's key
//! specs) in ascending order before the handler runs, so a multi-key command is atomic.
//! A handler may touch other shards only in ascending order; [`Keys`] enforces that by
//! locking a higher shard on demand, and by re-locking everything in order otherwise
//! (which a correct key spec never causes).

use std::sync::atomic::{AtomicBool, Ordering};

use smallvec::SmallVec;
use strata_keyspace::lock::MutexGuard;
use strata_keyspace::{Db, Entry, Keyspace, Shard, StrRef, Ttl, Value};
use strata_resp::ReplyWriter;

use crate::conn::ConnState;
use crate::effects::{LogRule, Record, RecordKind};
use crate::error::CmdError;
use crate::notify;
use crate::pubsub::PubSub;
use crate::server::Server;
use crate::table::Command;

/// Busy-wait rounds for a shard another thread holds before the mutex's own
/// waiting (a shorter spin, then a sleep in the kernel; it never yields the
/// processor, see `strata_keyspace::lock`): about 5 µs, longer than a shard is
/// usually held. With two I/O threads pipelining LPUSHes onto one list
/// under `everysec`, 79,267 `sched_yield`s, 20,083 futex calls and 33,132 context
/// switches in three seconds fell to 3,833, 852 and 3,898 (docs/BENCHMARKS.md).
const SHARD_SPINS: u32 = 200;

/// A handler's view of the keyspace: one database, the shards it holds, the time.
pub struct Keys<'a> {
    pub ks: &'a Keyspace,
    /// The selected database.
    pub db: usize,
    /// The time of this command, in Unix milliseconds (fixed for the command).
    pub now_ms: u64,
    /// Number of changes made (Redis's `server.dirty` increments).
    pub dirty: u64,
    guards: SmallVec<[(usize, MutexGuard<'a, Shard>); 4]>,
    /// Where in `guards` the last shard looked up was (a hint, checked before use).
    near: usize,
    /// Whether `guards` holds every shard, in index order.
    all: bool,
    /// Keys that may now satisfy blocked clients, as (database, key); collected only
    /// when some client is blocked.
    pub ready: Vec<(usize, Vec<u8>)>,
    /// Whether to collect `ready` keys at all.
    pub track_ready: bool,
    /// Whether changes are logged (persistence on): then `changed` keys become
    /// [`Record`]s after each command. Read from `logging_flag` once a shard is held.
    pub logging: bool,
    /// The server's switch for `logging`. The server flips it only while holding
    /// every shard, so the value read while holding any shard stays in force for as
    /// long as that shard is held: a command never half-logs across a switch.
    pub logging_flag: Option<&'a AtomicBool>,
    /// Keys changed by the command running, as (database, key's hash, key, where
    /// in `guards` its shard was when noted — a hint, checked before use), in
    /// first-change order.
    changed_keys: SmallVec<[(usize, u64, crate::effects::Span, usize); 1]>,
    /// Operations a handler gave explicitly, as (database, key, argv).
    explicit_ops: Vec<(usize, Vec<u8>, Vec<Vec<u8>>)>,
    /// Records of the commands run so far, for the log.
    pub records: crate::effects::Batch,
    /// Records made since this view was created, those merged into an earlier
    /// one included (see [`crate::effects::Batch::merge_last`]).
    made: usize,
    /// The keys `records` has records of, built only when a key's database lists
    /// no records of it (see [`crate::effects::record_for`]) and kept up to date
    /// from then on, so that a long transaction asks in O(1).
    recorded_keys: Option<RecordedKeys>,
    /// Where keyspace notifications and tracking invalidations go, if anywhere.
    pub notify: Option<&'a PubSub>,
    /// The client running the command (0 for the server itself).
    pub client_id: u64,
    /// CLIENT NO-TOUCH: lookups leave access times alone.
    pub no_touch: bool,
    /// Tracking invalidations not sent yet (see [`crate::tracking::Pending`]).
    pub tracking: crate::tracking::Pending,
    /// The lazy-free switches in force for this command.
    pub lazyfree: crate::server::LazyFree,
    /// Values to free in the background once the command is done (see
    /// [`Keys::free`]).
    pub freed: Vec<Value>,
}

impl<'a> Keys<'a> {
    pub fn new(ks: &'a Keyspace, db: usize, now_ms: u64) -> Keys<'a> {
        Keys {
            ks,
            db,
            now_ms,
            dirty: 0,
            guards: SmallVec::new(),
            near: 0,
            all: false,
            ready: Vec::new(),
            track_ready: false,
            logging: false,
            logging_flag: None,
            changed_keys: SmallVec::new(),
            explicit_ops: Vec::new(),
            records: crate::effects::Batch::new(),
            made: 0,
            recorded_keys: None,
            notify: None,
            client_id: 0,
            no_touch: false,
            tracking: Default::default(),
            lazyfree: Default::default(),
            freed: Vec::new(),
        }
    }

    /// Readies the view a held run's commands share (see [`Held`]) for the next
    /// one: the database, the time and the count of changes become that command's,
    /// as in a new view; the shards, the records not logged yet and the switches
    /// read when the first shard was locked stay.
    #[inline]
    pub(crate) fn begin_command(&mut self, db: usize, now_ms: u64) {
        debug_assert!(
            self.ready.is_empty()
                && self.changed_keys.is_empty()
                && self.explicit_ops.is_empty()
                && self.freed.is_empty()
        );
        self.db = db;
        self.now_ms = now_ms;
        self.dirty = 0;
        if !self.tracking.is_empty() {
            self.tracking = Default::default();
        }
    }

    /// Records made so far by the commands run with this view (an operation
    /// merged into an earlier record counts too).
    pub(crate) fn records_made(&self) -> usize {
        self.made
    }

    /// Locks these shards (ascending, distinct) as [`Keys::lock_keys_unless`] does.
    pub fn lock_shards_unless(&mut self, shards: &[usize], give_up: &dyn Fn() -> bool) -> bool {
        debug_assert!(self.guards.is_empty());
        debug_assert!(shards.windows(2).all(|w| w[0] < w[1]));
        self.guards.reserve(shards.len());
        for &s in shards {
            if let Some(g) = self.ks.try_lock_spin(s, SHARD_SPINS) {
                self.guards.push((s, g));
                continue;
            }
            loop {
                if let Some(g) = self.ks.try_lock_for(s, std::time::Duration::from_millis(5)) {
                    self.guards.push((s, g));
                    break;
                }
                if give_up() {
                    self.guards.clear();
                    return false;
                }
            }
        }
        self.read_logging_flag();
        true
    }

    /// Locks the shards of these keys, in ascending order. Nothing may be held yet.
    pub fn lock_keys<'k>(&mut self, keys: impl Iterator<Item = &'k [u8]>) {
        debug_assert!(self.guards.is_empty());
        let mut shards: SmallVec<[usize; 8]> = keys.map(|k| self.ks.shard_of(k)).collect();
        shards.sort_unstable();
        shards.dedup();
        for s in shards {
            self.guards.push((s, self.ks.lock(s)));
        }
        self.read_logging_flag();
    }

    /// Refreshes `logging` from the server's switch; call with a shard held, or
    /// after a change made outside the keyspace (FUNCTION LOAD) that the store
    /// opening later reads as it is.
    pub fn read_logging_flag(&mut self) {
        if let Some(flag) = self.logging_flag {
            self.logging = flag.load(Ordering::Acquire);
        }
    }

    /// [`Keys::lock_keys`] for a time when a script may hold shards for long: waits
    /// for each shard in short slices and gives up, holding nothing, as soon as
    /// `give_up` says so (the script passed `busy-reply-threshold`: the command must
    /// be refused with BUSY, as Redis refuses it).
    pub fn lock_keys_unless<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k [u8]>,
        give_up: &dyn Fn() -> bool,
    ) -> bool {
        let mut shards: SmallVec<[usize; 8]> = keys.map(|k| self.ks.shard_of(k)).collect();
        shards.sort_unstable();
        shards.dedup();
        self.lock_shards_unless(&shards, give_up)
    }

    /// Adds shard `idx` to those held while others are held (a script reaching a key
    /// it did not declare). A shard above every held one is waited for, which keeps
    /// the ascending lock order; one below is only tried for up to `wait`, since
    /// waiting for it could deadlock. Returns whether the shard is held.
    pub fn acquire(&mut self, idx: usize, wait: std::time::Duration) -> bool {
        if self.all {
            return true;
        }
        let pos = match self.guards.binary_search_by_key(&idx, |g| g.0) {
            Ok(_) => return true,
            Err(pos) => pos,
        };
        let guard = if pos == self.guards.len() {
            self.ks.lock(idx)
        } else {
            match self.ks.try_lock_for(idx, wait) {
                Some(g) => g,
                None => return false,
            }
        };
        self.guards.insert(pos, (idx, guard));
        self.all = self.guards.len() == self.ks.num_shards();
        self.read_logging_flag();
        true
    }

    /// [`Keys::acquire`] for every shard. Returns whether all are held.
    pub fn acquire_all(&mut self, wait: std::time::Duration) -> bool {
        for s in 0..self.ks.num_shards() {
            if !self.acquire(s, wait) {
                return false;
            }
        }
        self.all = true;
        true
    }

    /// Locks every shard (commands that touch the whole keyspace atomically).
    pub fn lock_all(&mut self) {
        if self.all {
            return;
        }
        self.guards.clear();
        for s in 0..self.ks.num_shards() {
            self.guards.push((s, self.ks.lock(s)));
        }
        self.all = true;
        self.read_logging_flag();
    }

    /// Releases every shard held.
    pub fn release(&mut self) {
        self.guards.clear();
        self.all = false;
    }

    /// Ends a [`Held`] run's view: its shards released, its records logged (or
    /// none made).
    pub(crate) fn end_hold(&mut self) {
        debug_assert!(self.records.is_empty() && !self.all);
        self.guards.clear();
        self.recorded_keys = None;
    }

    pub fn holds_all(&self) -> bool {
        self.all
    }

    /// Whether no shard is held.
    pub fn holds_none(&self) -> bool {
        self.guards.is_empty()
    }

    /// The shard with this index, locking it if needed (see the module docs).
    #[inline]
    pub fn shard(&mut self, idx: usize) -> &mut Shard {
        let i = self.guard_pos(idx);
        &mut self.guards[i].1
    }

    /// Where in `guards` the shard with this index is, locking it if needed.
    #[inline]
    fn guard_pos(&mut self, idx: usize) -> usize {
        // Most lookups: the shard found last (a one-key command's only one, or its
        // own among those a pipeline holds). At first, position 0: with every shard
        // held, shard 0.
        self.guard_pos_hinted(idx, self.near)
    }

    /// [`Keys::guard_pos`], trying first `hint`, a place the shard was at (the
    /// shard found last; or a key's when it was noted as changed: a multi-key
    /// command's records are made after it looked up its other keys' shards).
    #[inline]
    fn guard_pos_hinted(&mut self, idx: usize, hint: usize) -> usize {
        if self.guards.get(hint).is_some_and(|g| g.0 == idx) {
            self.near = hint;
            return hint;
        }
        let at = self.find_guard(idx);
        self.near = at;
        at
    }

    /// [`Keys::guard_pos`] past its first shard.
    #[inline(never)]
    fn find_guard(&mut self, idx: usize) -> usize {
        if self.all {
            return idx;
        }
        // Held shards are few and in index order: up to 16, a scan finds the place
        // sooner than a binary search's branches (MSET of ten keys with the log on:
        // 1,400 instructions fewer, callgrind); more, and the search wins.
        let guards = self.guards.as_slice();
        let found = if guards.len() <= 16 {
            match guards.iter().position(|g| g.0 >= idx) {
                Some(i) if guards[i].0 == idx => return i,
                Some(i) => Err(i),
                None => Err(guards.len()),
            }
        } else {
            guards.binary_search_by_key(&idx, |g| g.0)
        };
        match found {
            Ok(i) => i,
            Err(pos) if pos == self.guards.len() => {
                self.guards.push((idx, self.ks.lock(idx)));
                if pos == 0 {
                    self.read_logging_flag();
                }
                pos
            }
            Err(pos) => {
                debug_assert!(false, "shard {idx} needed out of lock order");
                let mut held: SmallVec<[usize; 8]> = self.guards.iter().map(|g| g.0).collect();
                held.insert(pos, idx);
                self.guards.clear();
                for s in held {
                    self.guards.push((s, self.ks.lock(s)));
                }
                pos
            }
        }
    }

    /// Calls `f` on every shard in turn. Shards already held stay held; otherwise
    /// each is locked only for its call (so nothing else may be held).
    pub fn for_each_shard(&mut self, mut f: impl FnMut(&mut Shard)) {
        if self.all {
            for (_, g) in self.guards.iter_mut() {
                f(g);
            }
            return;
        }
        debug_assert!(self.guards.is_empty(), "for_each_shard with shards held");
        for s in 0..self.ks.num_shards() {
            let mut shard = self.ks.lock(s);
            self.read_logging_flag();
            f(&mut shard);
        }
    }

    /// The selected database of the shard holding `key`, and the key's hash.
    #[inline]
    pub fn db_for(&mut self, key: &[u8]) -> (u64, &mut Db) {
        self.other_db_for(self.db, key)
    }

    /// Database `db` (not necessarily the selected one) of the shard holding `key`.
    #[inline]
    pub fn other_db_for(&mut self, db: usize, key: &[u8]) -> (u64, &mut Db) {
        let hash = self.ks.hash(key);
        (hash, self.db_of_hash(db, hash))
    }

    /// Database `db` of the shard holding the key whose hash ([`Keyspace::hash`]) is
    /// `hash`.
    #[inline]
    fn db_of_hash(&mut self, db: usize, hash: u64) -> &mut Db {
        let s = self.ks.shard_of_hash(hash);
        self.shard(s).db(db)
    }

    /// Looks a key up for reading: counts a hit or a miss and records the access.
    #[inline]
    pub fn read(&mut self, key: &[u8]) -> Option<&mut Entry> {
        if self
            .notify
            .is_some_and(|h| notify::wanted(h.notify_flags(), notify::KEY_MISS))
            && !self.exists(key)
        {
            let hash = self.ks.hash(key);
            let s = self.ks.shard_of_hash(hash);
            self.shard(s).stats.keyspace_misses += 1;
            self.event(self.db, key, "keymiss");
            return None;
        }
        let hash = self.ks.hash(key);
        let s = self.ks.shard_of_hash(hash);
        let (db, now, no_touch) = (self.db, self.now_ms, self.no_touch);
        let (db, stats) = self.shard(s).db_and_stats(db);
        match db.get(hash, key, now) {
            Some(e) => {
                stats.keyspace_hits += 1;
                if !no_touch {
                    e.touch(now);
                }
                Some(e)
            }
            None => {
                stats.keyspace_misses += 1;
                None
            }
        }
    }

    /// Looks a key up for writing (no hit/miss statistics).
    #[inline]
    pub fn get(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let (now, no_touch) = (self.now_ms, self.no_touch);
        let (hash, db) = self.db_for(key);
        let e = db.get(hash, key, now)?;
        if !no_touch {
            e.touch(now);
        }
        Some(e)
    }

    /// Reads a string value: `Ok(None)` if absent, WRONGTYPE if not a string.
    #[inline]
    pub fn read_str(&mut self, key: &[u8]) -> Result<Option<StrRef<'_>>, CmdError> {
        match self.read(key) {
            None => Ok(None),
            Some(e) => e.value().as_str().map(Some).ok_or(CmdError::WrongType),
        }
    }

    /// Whether `key` exists (without touching it).
    pub fn exists(&mut self, key: &[u8]) -> bool {
        let now = self.now_ms;
        let (hash, db) = self.db_for(key);
        db.contains(hash, key, now)
    }

    /// Stores a value; returns the live value replaced.
    pub fn set(&mut self, key: &[u8], value: Value, ttl: Ttl) -> Option<Value> {
        let now = self.now_ms;
        let (hash, db) = self.db_for(key);
        db.set(hash, key, value, ttl, now)
    }

    /// Stores a string as SET does (see [`StrRef::new`]); returns the live value
    /// replaced if it was not a string.
    #[inline]
    pub fn set_string(&mut self, key: &[u8], bytes: &[u8], ttl: Ttl) -> Option<Value> {
        let now = self.now_ms;
        let (hash, db) = self.db_for(key);
        db.set_str(hash, key, StrRef::new(bytes), ttl, now)
    }

    /// Removes a key; returns its entry if it was live (see [`Keys::free_entry`]).
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let now = self.now_ms;
        let (hash, db) = self.db_for(key);
        db.remove(hash, key, now)
    }

    /// Disposes of a value a command removed or replaced: with `lazy`, one whose
    /// freeing takes real work is kept for the background (Redis's `freeObjAsync`);
    /// anything else is dropped here.
    #[inline]
    pub fn free(&mut self, value: Option<Value>, lazy: bool) {
        if let Some(v) = value
            && lazy
            && v.free_lazily()
        {
            self.freed.push(v);
        }
    }

    /// [`Keys::free`] for a removed entry: its value is taken out only to go to the
    /// background; anything else (every string) is freed here, in place.
    pub fn free_entry(&mut self, entry: Option<Entry>, lazy: bool) {
        let value = entry
            .filter(|e| lazy && e.value().free_lazily())
            .map(Entry::into_value);
        self.free(value, lazy);
    }

    /// [`Keys::free_entry`] for what a command deletes as a side effect
    /// (`lazyfree-lazy-server-del`).
    #[inline]
    pub fn free_replaced_entry(&mut self, entry: Option<Entry>) {
        let lazy = self.lazyfree.server_del;
        self.free_entry(entry, lazy);
    }

    /// [`Keys::free`] for what a command deletes or overwrites as a side effect
    /// (`lazyfree-lazy-server-del`).
    #[inline]
    pub fn free_replaced(&mut self, value: Option<Value>) {
        let lazy = self.lazyfree.server_del;
        self.free(value, lazy);
    }

    /// Takes the big values of the keys that expired in the shards held (see
    /// [`Db::take_expired_values`]): kept for the background with
    /// `lazyfree-lazy-expire`, dropped here otherwise.
    #[inline]
    pub fn collect_expired_values(&mut self) {
        if strata_keyspace::db::expired_values_waiting() {
            self.collect_expired_values_now();
        }
    }

    /// The body of [`Keys::collect_expired_values`], out of the common path (as
    /// are the other after-command steps' that rarely have work: a call to a
    /// function of large frame costs some 20 instructions before its first check).
    #[inline(never)]
    fn collect_expired_values_now(&mut self) {
        let lazy = self.lazyfree.expire;
        for (_, shard) in self.guards.iter_mut() {
            for db in shard.dbs_mut() {
                let values = db.take_expired_values();
                if lazy {
                    self.freed.extend(values);
                }
            }
        }
    }

    /// Says that a list or sorted set at `key` (selected database) may have become
    /// non-empty, so clients blocked on it can be served. Call it after every push or
    /// add, and when a command moves such a value to a key (RENAME, MOVE, COPY...).
    #[inline]
    pub fn ready(&mut self, key: &[u8]) {
        if self.track_ready {
            self.ready.push((self.db, key.to_vec()));
        }
    }

    /// [`Keys::ready`] for a key of another database.
    pub fn ready_in(&mut self, db: usize, key: &[u8]) {
        if self.track_ready {
            self.ready.push((db, key.to_vec()));
        }
    }

    /// Records a change to `key` (Redis's `signalModifiedKey` plus a keyspace event):
    /// counts it, tells the clients WATCHing the key and publishes the event (Redis's
    /// name for it, such as "set" or "lpush") if notifications of its class are on.
    #[inline]
    pub fn changed(&mut self, key: &[u8], event: &'static str) {
        self.dirty += 1;
        let (hash, db) = self.db_for(key);
        db.touch(key);
        self.note_changed(self.db, hash, key);
        self.event(self.db, key, event);
        self.invalidate(key);
    }

    /// [`Keys::changed`] for a key of another database (COPY ... DB, MOVE).
    pub fn changed_in(&mut self, db: usize, key: &[u8], event: &'static str) {
        self.dirty += 1;
        let (hash, d) = self.other_db_for(db, key);
        d.touch(key);
        self.note_changed(db, hash, key);
        self.event(db, key, event);
        self.invalidate(key);
    }

    /// Makes room for the `n` keys a command about to run may change, so that
    /// noting them grows nothing on the way (MSET's ten keys).
    pub fn expect_changes(&mut self, n: usize) {
        if self.logging {
            self.changed_keys.reserve(n);
        }
    }

    /// `hash` is the key's ([`Keyspace::hash`]): compared first, and kept for the
    /// lookups that build the key's record.
    fn note_changed(&mut self, db: usize, hash: u64, key: &[u8]) {
        if self.logging
            && !self
                .changed_keys
                .iter()
                .any(|(d, h, k, _)| *h == hash && *d == db && self.records.at(*k) == key)
        {
            // Into the batch, where its records will find it, with the place of
            // the shard looked up last: as a rule the key's own (not for a key
            // noted without a lookup; the place is checked before use).
            let key = self.records.note_key(key);
            self.changed_keys.push((db, hash, key, self.near));
        }
    }

    /// Logs this change to `key` as the replay of `argv` (a deterministic command on
    /// that key alone) instead of what the table's rule would give: for commands
    /// whose own arguments do not replay (SPOP as SREM of the members popped, a
    /// blocking pop as the plain pop on the key served, a move as pop and push).
    pub fn log_op<B: AsRef<[u8]>>(&mut self, key: &[u8], argv: &[B]) {
        if self.logging {
            let argv = argv.iter().map(|a| a.as_ref().to_vec()).collect();
            self.explicit_ops.push((self.db, key.to_vec(), argv));
            let hash = self.ks.hash(key);
            self.note_changed(self.db, hash, key);
        }
    }

    /// Logs a change to a whole database (FLUSHDB, FLUSHALL, SWAPDB).
    pub fn log_special(&mut self, kind: RecordKind) {
        self.log_special_in(self.db, kind);
    }

    /// [`Keys::log_special`] for database `db`.
    pub fn log_special_in(&mut self, db: usize, kind: RecordKind) {
        if self.logging {
            self.made += 1;
            self.records
                .push(Record::new(db, Vec::new(), kind).borrowed());
        }
    }

    /// Turns the keys the last command changed into records (see
    /// [`crate::effects`]); called after each command, with its locks still held.
    #[inline]
    pub fn finish_command(&mut self, rule: LogRule, argv: &[&[u8]]) {
        if !self.changed_keys.is_empty() {
            self.make_records(rule, argv);
        }
    }

    /// The body of [`Keys::finish_command`] (see [`Keys::collect_expired_values_now`]).
    #[inline(never)]
    fn make_records(&mut self, rule: LogRule, argv: &[&[u8]]) {
        let now = self.now_ms;
        let changed = std::mem::take(&mut self.changed_keys);
        let mut explicit = std::mem::take(&mut self.explicit_ops);
        crate::effects::spare::reserve(&mut self.records, changed.len());
        for (db_index, hash, key, near) in changed {
            if explicit.is_empty()
                && rule == LogRule::Replay
                && self.continue_last_op(db_index, hash, key, near, argv)
            {
                self.made += 1;
                continue;
            }
            let mut ops: Vec<Vec<Vec<u8>>> = Vec::new();
            if !explicit.is_empty() {
                let key = self.records.at(key);
                ops = explicit
                    .iter()
                    .filter(|(d, k, _)| *d == db_index && k == key)
                    .map(|(_, _, op)| op.clone())
                    .collect();
                explicit.retain(|(d, k, _)| !(*d == db_index && k == key));
            }
            let pos = self.guard_pos_hinted(self.ks.shard_of_hash(hash), near);
            // The key's database and the batch, borrowed side by side.
            let Keys {
                guards,
                records: batch,
                recorded_keys: recorded,
                made,
                ..
            } = self;
            let db = guards[pos].1.db(db_index);
            // Only the key's first record in this batch can follow records of an
            // old value the store still holds.
            let first = |batch: &crate::effects::Batch, key: &[u8]| {
                let set = recorded.get_or_insert_with(|| {
                    let mut set = RecordedKeys::default();
                    for r in batch.iter() {
                        set.insert(r.db, r.key);
                    }
                    set
                });
                !set.contains(db_index, key)
            };
            let before = batch.len();
            *made += crate::effects::record_for(
                batch, db_index, db, hash, key, now, rule, argv, &ops, first,
            );
            if let Some(set) = recorded {
                for r in batch.iter().skip(before) {
                    set.insert(r.db, r.key);
                }
            }
        }
    }

    /// The shortcut of [`crate::effects::Batch::push_op`]'s merge: when the batch's
    /// last record is this same mergeable command on `key` (noted in the batch) with
    /// the expiry the key has now, appends the command's arguments to it, with no
    /// record of its own built first (a pipeline's run of LPUSHes onto one list).
    /// False, and nothing changed, otherwise.
    fn continue_last_op(
        &mut self,
        db_index: usize,
        hash: u64,
        key: crate::effects::Span,
        near: usize,
        argv: &[&[u8]],
    ) -> bool {
        if argv.get(1).copied() != Some(self.records.at(key))
            || !self.records.last_is_op_on(db_index, key)
        {
            return false;
        }
        let now = self.now_ms;
        let pos = self.guard_pos_hinted(self.ks.shard_of_hash(hash), near);
        let Keys {
            guards, records, ..
        } = self;
        let db = guards[pos].1.db(db_index);
        // The key's expiry now (a value out of memory logs its expiry only).
        let Some(now_expiry) = db
            .peek(hash, records.at(key), now)
            .filter(|e| !e.value().is_cold())
            .map(|e| db.expire_at(e).unwrap_or(0))
        else {
            return false;
        };
        records.merge_last(db_index, key, now_expiry, argv)
    }

    /// Takes the records built so far (the batch to append), starting a new batch.
    pub fn take_records(&mut self) -> crate::effects::Batch {
        debug_assert!(self.changed_keys.is_empty(), "keys noted in the batch");
        self.recorded_keys = None;
        std::mem::take(&mut self.records)
    }

    /// After the store appended `records`: lists in each key's database where the
    /// records that the store left to the keyspace went (`located`, one per record,
    /// see [`crate::Server::log`]). Runs under the command's shard locks, so a key's
    /// records are listed in the order they were appended.
    pub fn apply_locations(
        &mut self,
        records: &crate::effects::Batch,
        located: &[Option<strata_keyspace::logref::LogLoc>],
    ) {
        use crate::effects::RecordKind;
        use strata_keyspace::logref::LogChange;
        // Where each held shard is among the view's, for a batch over several: a
        // pipeline's records each in a shard of their own missed the nearest one
        // and scanned the held shards (`find_guard`, ~70 instructions a record).
        const NONE: u8 = u8::MAX;
        let places = (records.len() > 2
            && !self.all
            && self.guards.len() < usize::from(NONE)
            && self.ks.num_shards() <= 256)
            .then(|| {
                let mut places = [NONE; 256];
                for (i, (shard, _)) in self.guards.iter().enumerate() {
                    places[*shard] = i as u8;
                }
                places
            });
        for (record, location) in records.iter().zip(located) {
            let Some(location) = *location else {
                continue;
            };
            let change = match record.kind {
                RecordKind::Put { .. } => LogChange::Put(location),
                RecordKind::Op { .. } => LogChange::Op(location),
                _ => continue,
            };
            let (hash, at) = match record.at {
                Some(at) => (at.hash, Some(at.pos)),
                None => (self.ks.hash(record.key), None),
            };
            let shard = self.ks.shard_of_hash(hash);
            let db = match places.as_ref().map(|p| p[shard]) {
                Some(i) if i != NONE => self.guards[usize::from(i)].1.db(record.db),
                _ => self.db_of_hash(record.db, hash),
            };
            db.apply_log(hash, record.key, at, change);
        }
    }

    /// Tells the clients tracking `key` that it changed.
    #[inline]
    fn invalidate(&mut self, key: &[u8]) {
        if let Some(hub) = self.notify
            && hub.tracking.active() > 0
        {
            hub.tracking.invalidate(
                key,
                self.client_id,
                &hub.limits,
                &mut self.tracking,
                self.now_ms,
            );
        }
    }

    /// The databases were flushed: every tracking client must drop its cache.
    pub fn flushed(&mut self) {
        if let Some(hub) = self.notify {
            hub.tracking
                .flushed(self.client_id, &hub.limits, &mut self.tracking, self.now_ms);
        }
    }

    /// Publishes a keyspace event without counting a change: the second event of a
    /// command that changes a key once (SET ... EX sends "set" then "expire").
    pub fn notify(&mut self, key: &[u8], event: &'static str) {
        self.event(self.db, key, event);
    }

    /// Publishes a keyspace event about `key` of database `db`, after the events the
    /// databases logged before it (an expiry or a new key the same command caused),
    /// so that they come out in the order Redis sends them.
    #[inline]
    fn event(&mut self, db: usize, key: &[u8], event: &'static str) {
        let Some(hub) = self.notify else {
            return;
        };
        if hub.notify_flags() == 0 {
            return;
        }
        self.flush_events();
        notify::publish(hub, notify::class_of(event), event, key, db, self.now_ms);
    }

    /// Publishes the events the databases of the held shards logged and nobody
    /// published yet (expiries found by lookups, keys added). Called before each
    /// event a command sends and after each command.
    #[inline]
    pub fn flush_events(&mut self) {
        if let Some(hub) = self.notify
            && (hub.notify_flags() != 0 || hub.tracking.active() > 0)
        {
            self.publish_events(hub);
        }
    }

    /// The body of [`Keys::flush_events`] (see [`Keys::collect_expired_values_now`]).
    #[inline(never)]
    fn publish_events(&mut self, hub: &PubSub) {
        let tracking = hub.tracking.active() > 0;
        let now = self.now_ms;
        for (_, shard) in self.guards.iter_mut() {
            for (i, db) in shard.dbs_mut().iter_mut().enumerate() {
                if !db.has_events() {
                    continue;
                }
                let events = db.take_events();
                if tracking {
                    for (event, key) in &events {
                        if *event == strata_keyspace::KeyEvent::Expired {
                            hub.tracking
                                .invalidate(key, 0, &hub.limits, &mut self.tracking, now);
                        }
                    }
                }
                notify::publish_logged(hub, events, i, now);
            }
        }
    }

    /// Runs `f` on one shard: a shard already held is used as is; otherwise it is
    /// locked just for the call (so nothing else may be held).
    pub fn with_shard<R>(&mut self, idx: usize, f: impl FnOnce(&mut Shard) -> R) -> R {
        if self.all {
            return f(&mut self.guards[idx].1);
        }
        if let Ok(i) = self.guards.binary_search_by_key(&idx, |g| g.0) {
            return f(&mut self.guards[i].1);
        }
        debug_assert!(
            self.guards.is_empty(),
            "with_shard({idx}) with other shards held"
        );
        f(&mut self.ks.lock(idx))
    }
}

/// The shards a connection keeps locked between consecutive pipelined commands on
/// them, with the records of those commands that are not logged yet.
///
/// A pipelined run of commands on one key (LPUSH after LPUSH onto redis-benchmark's
/// list) would otherwise take and release the shard's lock once per command, and
/// with two I/O threads hand it back and forth between them, and append one batch to
/// the log per command. Held, the shard is locked once, and the run's records go to
/// the log as one batch when it is released: before the next command that needs
/// anything else, and before the connection writes its replies or waits for
/// anything (so no reply leaves, and no other client sees the changes, before their
/// records are appended, as with one batch per command).
///
/// With the log on, a write on another shard joins the hold if that shard is free
/// (up to [`Held::MAX_SHARDS`]), so that a pipeline of writes to random keys appends
/// one batch rather than one per command: per batch, the log's work (its lock, the
/// store's maps, the plan) cost some 1,000 instructions a SET with `-P 16`. A shard
/// joins only by `try_lock`: waiting for one while holding others taken in no order
/// could deadlock, so a busy shard ends the hold (its batch is appended), and the
/// command then waits holding nothing.
pub struct Held<'a> {
    /// The view the run's commands share, one after another: the shards held (in
    /// index order), the records not logged yet, and [`Keys::logging`] as read when
    /// the first shard was locked (it stays in force while any shard is held). One
    /// view for the run, rather than one per command handed the shards and records
    /// of the one before: setting up, handing over and dropping a view cost some
    /// 200 instructions a command.
    pub(crate) keys: Keys<'a>,
    pub(crate) run: Run,
}

/// What a [`Held`] run counts besides its view.
#[derive(Default)]
pub(crate) struct Run {
    /// The replies (ranges of the connection's output) of the commands whose records
    /// wait in the view: should the log refuse them, each becomes the error. Room
    /// for a `-P 16` pipeline's inline (its spill cost some 140 instructions a
    /// pipeline; an allocation for all [`Held::MAX_COMMANDS`] at once cost more).
    replies: SmallVec<[std::ops::Range<usize>; 16]>,
    /// Commands run since the first shard was locked.
    commands: usize,
    /// The highest log sequence a reply must wait for, from the batches appended.
    durable: Option<u64>,
}

impl Run {
    /// Notes that a command ran; `reply` is its reply if it made records.
    pub(crate) fn ran(&mut self, reply: Option<std::ops::Range<usize>>) {
        self.commands += 1;
        // A push, not `extend`: extending by an `Option` cost some 40 instructions
        // even when it held nothing.
        if let Some(reply) = reply {
            self.replies.push(reply);
        }
    }

    /// The replies of the commands whose records wait (see [`Run::ran`]).
    pub(crate) fn replies(&self) -> &[std::ops::Range<usize>] {
        &self.replies
    }

    /// Forgets the replies and the commands counted, once their records are logged.
    pub(crate) fn clear_replies(&mut self) {
        self.commands = 0;
        self.replies.clear();
    }
}

impl<'a> Held<'a> {
    /// Commands run under one hold at most, so that a long pipeline does not keep
    /// the shards' other clients waiting for long.
    pub const MAX_COMMANDS: usize = 256;

    /// Shards held at once at most (see [`Held`]).
    pub const MAX_SHARDS: usize = 16;

    pub fn new(ks: &'a Keyspace) -> Held<'a> {
        Held {
            keys: Keys::new(ks, 0, 0),
            run: Run::default(),
        }
    }

    /// Starts loading what a coming command's lookup of `member` in the hash or set
    /// at `key` (whose hash is `key_hash`) will read, if that key's shard is held
    /// (see [`strata_keyspace::db::Db::prefetch_member`]): a pipeline's look-ahead,
    /// on the thread that holds the shard, the only one that may look into it.
    #[inline]
    pub fn prefetch_member(
        &self,
        db: usize,
        key_hash: u64,
        key: &[u8],
        member: &[u8],
        slot_arrived: bool,
    ) {
        let shard = self.keys.ks.shard_of_hash(key_hash);
        if let Some((_, guard)) = self.keys.guards.iter().find(|(s, _)| *s == shard)
            && let Some(d) = guard.dbs().get(db)
        {
            d.prefetch_member(key_hash, key, member, slot_arrived);
        }
    }

    /// Whether no shard is held.
    pub fn is_empty(&self) -> bool {
        self.keys.guards.is_empty()
    }

    /// Whether the shard with this index is held.
    pub fn holds(&self, shard: usize) -> bool {
        self.keys.guards.iter().any(|g| g.0 == shard)
    }

    /// The indexes of the shards held, in order.
    pub fn shards(&self) -> impl Iterator<Item = usize> + '_ {
        self.keys.guards.iter().map(|g| g.0)
    }

    /// Adds a shard to those held if the log is on, the hold has room for it and
    /// the shard is free now: never waits, since waiting while holding shards
    /// taken out of order could deadlock. Returns whether it is held.
    pub(crate) fn try_hold(&mut self, shard: usize) -> bool {
        let keys = &mut self.keys;
        if !keys.logging || keys.guards.len() >= Self::MAX_SHARDS {
            return false;
        }
        let Some(guard) = keys.ks.try_lock_spin(shard, 0) else {
            return false;
        };
        if keys.guards.len() == keys.guards.inline_size() {
            // Spilling: room for every shard a hold may take, at once (growing
            // 4 → 8 → 16 cost an allocation and a reallocation, some 500
            // instructions a pipeline of writes to random keys). Not inline: a
            // bigger view costs the commands that come alone, whose views move.
            keys.guards
                .reserve_exact(Self::MAX_SHARDS - keys.guards.len());
        }
        let at = keys.guards.partition_point(|g| g.0 < shard);
        keys.guards.insert(at, (shard, guard));
        // The command about to run asks for this shard next.
        keys.near = at;
        true
    }

    /// Whether another command may run under this hold.
    pub(crate) fn has_room(&self) -> bool {
        self.run.commands < Self::MAX_COMMANDS
    }

    /// `n` bytes were inserted into the output at `at` (messages a command sent its
    /// own client, which go before its reply): the replies after it moved.
    pub fn inserted(&mut self, at: usize, n: usize) {
        for r in self.run.replies.iter_mut().filter(|r| r.start >= at) {
            r.start += n;
            r.end += n;
        }
    }

    /// Appends the records waiting to the log and unlocks the shard; returns the
    /// log sequence the replies in `out` must wait for, from every batch this hold
    /// appended. Should the log refuse the records, the replies of the commands that
    /// made them become its error. The hold is then empty, as a new one. (By
    /// reference: the hold is some 850 bytes, which a call taking it by value
    /// copied.)
    pub fn finish(&mut self, server: &dyn Server, out: &mut Vec<u8>) -> Option<u64> {
        let mut end = out.len();
        self.release_at(server, out, &mut end);
        self.run.durable.take()
    }

    /// [`Held::finish`] without taking the log sequence, keeping `anchor` at the
    /// same place of the output (see [`log_records`]).
    pub(crate) fn release_at(
        &mut self,
        server: &dyn Server,
        out: &mut Vec<u8>,
        anchor: &mut usize,
    ) {
        if self.keys.guards.is_empty() {
            return;
        }
        self.run.commands = 0;
        if self.keys.records.is_empty() {
            // Reads only: nothing to log.
            debug_assert!(self.run.replies.is_empty());
            self.keys.end_hold();
            return;
        }
        let logged = log_records(server, &mut self.keys, &self.run.replies, out, anchor);
        self.keys.end_hold();
        self.run.replies.clear();
        self.run.durable = self.run.durable.max(logged.ok().flatten());
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        debug_assert!(
            self.keys.guards.is_empty() || self.keys.records.is_empty(),
            "a held shard dropped with records not logged"
        );
    }
}

/// The keys a batch of records has records of, as (database, key), for
/// [`Keys::finish_command`]'s question whether a record is its key's first in the
/// batch. A run of commands on one key asks it once per command: the key is copied
/// only the first time.
#[derive(Default)]
struct RecordedKeys(
    std::collections::HashMap<Vec<u8>, SmallVec<[usize; 1]>, strata_keyspace::KeyHasher>,
);

impl RecordedKeys {
    fn contains(&self, db: usize, key: &[u8]) -> bool {
        self.0.get(key).is_some_and(|dbs| dbs.contains(&db))
    }

    fn insert(&mut self, db: usize, key: &[u8]) {
        match self.0.get_mut(key) {
            Some(dbs) => {
                if !dbs.contains(&db) {
                    dbs.push(db);
                }
            }
            None => {
                self.0.insert(key.to_vec(), smallvec::smallvec![db]);
            }
        }
    }
}

/// Appends the records `keys` gathered to the log, its shards still held (so that
/// the log's order of changes to a key is the order in which they happened), and
/// lists where they went. If the log refuses them, each of `replies` (ranges of
/// `out`: the replies of the commands that made them) becomes the error, and
/// `anchor`, a place in `out` (where the running command's reply begins), moves with
/// the bytes before it. Returns the sequence the replies must wait for to be
/// durable.
#[inline]
pub(crate) fn log_records(
    server: &dyn Server,
    keys: &mut Keys,
    replies: &[std::ops::Range<usize>],
    out: &mut Vec<u8>,
    anchor: &mut usize,
) -> Result<Option<u64>, ()> {
    if keys.records.is_empty() {
        // Most commands: no batch to take (a move of its inline records).
        keys.recorded_keys = None;
        return Ok(None);
    }
    append_records(server, keys, replies, out, anchor)
}

/// The body of [`log_records`] (see [`Keys::collect_expired_values_now`]).
#[inline(never)]
fn append_records(
    server: &dyn Server,
    keys: &mut Keys,
    replies: &[std::ops::Range<usize>],
    out: &mut Vec<u8>,
    anchor: &mut usize,
) -> Result<Option<u64>, ()> {
    let mut records = keys.take_records();
    let mut located = crate::effects::Located::new();
    let logged = server.log(&mut records, keys.now_ms, &mut located);
    if logged.is_ok() {
        keys.apply_locations(&records, &located);
    }
    crate::effects::spare::recycle(records);
    match logged {
        Ok(durable) => Ok(durable),
        Err(e) => {
            let error = CmdError::coded(e);
            let text = error.to_bytes();
            let mut rebuilt = Vec::with_capacity(out.len());
            let mut at = 0;
            let mut moved = *anchor;
            for r in replies {
                rebuilt.extend_from_slice(&out[at..r.start]);
                let before = rebuilt.len();
                // An error reads the same in RESP2 and RESP3.
                ReplyWriter::new(&mut rebuilt, strata_resp::Protocol::Resp2).error(&text);
                if r.start < *anchor {
                    moved = moved + (rebuilt.len() - before) - r.len();
                }
                at = r.end;
            }
            rebuilt.extend_from_slice(&out[at..]);
            *out = rebuilt;
            *anchor = moved;
            Err(())
        }
    }
}

/// Everything a handler gets. Its keys are borrowed (moving them in and out would
/// copy a few hundred bytes per command) and may outlive it (see [`Held`]).
pub struct Ctx<'a, 'k> {
    pub keys: &'a mut Keys<'k>,
    pub out: ReplyWriter<'a>,
    pub conn: &'a mut ConnState,
    pub server: &'a dyn Server,
    /// The command (or subcommand) being run.
    pub cmd: &'static Command,
}

impl Ctx<'_, '_> {
    /// The command's full name, as error messages show it.
    pub fn name(&self) -> String {
        self.cmd.full_name()
    }

    /// Whether a blocking command may block (see [`ConnState::may_block`]).
    pub fn may_block(&self) -> bool {
        self.conn.may_block
    }

    /// Parks the client until one of `keys` is ready or `timeout` passes (`None`:
    /// forever). The handler returns `Ok(())` without writing a reply; the server runs
    /// the command again when woken, and replies with a null array on timeout.
    pub fn block(&mut self, keys: &[&[u8]], timeout: Option<std::time::Duration>) {
        self.conn.block = Some(crate::conn::BlockRequest {
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            timeout,
        });
    }
}

/// Parses a blocking command's timeout as Redis does: seconds (fractions allowed)
/// turned into whole milliseconds by truncation; 0 means forever. Values whose
/// millisecond count does not fit an i64 (including "inf") read as negative, as the C
/// cast does.
pub fn parse_timeout(arg: &[u8], now_ms: u64) -> Result<Option<std::time::Duration>, CmdError> {
    let secs = crate::parse::parse_f64(arg)
        .ok_or_else(|| CmdError::err("timeout is not a float or out of range"))?;
    let ms = secs * 1000.0;
    let ms = if ms.is_finite() && ms.abs() < i64::MAX as f64 {
        ms.trunc() as i64
    } else {
        i64::MIN
    };
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms == 0 {
        return Ok(None);
    }
    if ms > i64::MAX - now_ms as i64 {
        return Err(CmdError::err("timeout is out of range"));
    }
    Ok(Some(std::time::Duration::from_millis(ms as u64)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use strata_keyspace::{Keyspace, Ttl};

    use super::*;

    /// A key noted as changed with no lookup of its own (an operation a handler
    /// gives) right after a key of another shard was looked up is logged from its
    /// own shard: the place noted with it is checked before it is used.
    #[test]
    fn a_key_noted_after_another_shards_lookup_is_logged_from_its_own() {
        let ks = Keyspace::new(16, 8);
        // Two keys of two shards, the lower shard's first (the keyspace's hash is
        // seeded per process, so which shards is not known in advance).
        let first = "k0".to_string();
        let other = (1..1_000)
            .map(|i| format!("k{i}"))
            .find(|k| ks.shard_of(k.as_bytes()) != ks.shard_of(first.as_bytes()))
            .expect("a key of another shard");
        let (a, b) = if ks.shard_of(first.as_bytes()) < ks.shard_of(other.as_bytes()) {
            (first, other)
        } else {
            (other, first)
        };
        let flag = AtomicBool::new(true);
        let mut keys = Keys::new(&ks, 0, 1_000);
        keys.logging_flag = Some(&flag);
        keys.set_string(a.as_bytes(), b"1", Ttl::At(5_000));
        keys.set_string(b.as_bytes(), b"2", Ttl::Persist);
        assert_eq!(keys.guards.len(), 2);
        // The place kept with `a` is `b`'s, the shard looked up last.
        keys.log_op(a.as_bytes(), &["INCR", &a]);
        keys.finish_command(LogRule::Replay, &[b"INCR", a.as_bytes()]);
        let records = keys.take_records().to_records();
        let ops: Vec<(&[u8], u64)> = records
            .iter()
            .filter_map(|r| match r.kind {
                RecordKind::Op { expires_at, .. } => Some((r.key.as_slice(), expires_at)),
                _ => None,
            })
            .collect();
        // `a`'s expiry, found in `a`'s shard.
        assert_eq!(ops, vec![(a.as_bytes(), 5_000)]);
    }
}
