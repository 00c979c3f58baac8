//! The keyspace's hash table: open addressing that grows and shrinks incrementally, by
//! less than doubling, with SCAN cursors that survive any resize.
//!
//! # Concept
//!
//! Every slot has a control byte: `EMPTY`, `DELETED` (only in a table being drained) or
//! `FULL` with seven bits of the key's hash, so most mismatches are rejected without
//! touching the entry. The bytes live in an array beside the slots', or, for an entry
//! type that keeps them itself ([`DictEntry::TAGS_INSIDE`], the keyspace's entries and
//! a hash's pairs, in spare bits of their pointer), a live table has no byte array at
//! all: a slot is `EMPTY` when it holds nothing, and a probe reads one array, not two.
//! Collisions are resolved by linear probing; deletion shifts the following entries
//! back (no tombstones in the live table), so probe sequences stay short.
//!
//! Such entries also keep their *distance*: how many slots past its home their slot
//! is (a four-bit mark in the pointer's low bits; "not known" from 15 on, or for an
//! entry written in through [`Dict::at_mut`], when the key's hash gives it). With it
//! a live table keeps each run in Robin Hood order: an insert takes the place of the
//! first entry nearer its home than the new one is to its own, which moves on in the
//! same way; a lookup stops at the first entry nearer its home than the probe, which
//! ends an unsuccessful search early; a removal moves the entries after the hole back
//! up to the first one at its home, reading their marks instead of hashing their
//! keys. Probe runs stay short near full, so these tables run fuller (below).
//!
//! A key's home slot is its *point* (the low 32 bits of its hash) scaled to the table's
//! capacity, `point * capacity >> 32`, so the capacity need not be a power of two and
//! homes follow points in order. Tables grow by less than doubling and stay between
//! two loads (from 2/3 to 7/8 full in Robin Hood order, from 4/7 to 4/5 otherwise),
//! where doubling a power of two would leave a table anywhere between 3/8 and 3/4
//! full: bytes a key pays for slots vary less and average less. Small tables (from
//! 64 slots up to 4 KiB of them) grow two of those steps at once, which moves their
//! keys in resizes half as often for a few kilobytes at most. The slot array of a
//! table with tags inside takes every slot its allocation's size class has room for,
//! since those bytes are paid for anyway.
//!
//! SCAN walks the point space upwards: a cursor is the point to continue from, each
//! step yields the keys whose points lie between it and the end of one home slot of
//! the finest table, and the next cursor is where that slot's points end. Since points
//! do not depend on capacities, a key present for the whole iteration is yielded
//! exactly once whatever resizes happen in between (Redis's reverse-binary cursors
//! give "at least once" over power-of-two tables).
//!
//! Resizing never stops the world: a new table is allocated and the old one is drained a
//! few slots per write (and by [`Dict::rehash_some`] from the background tick), as Redis
//! does with its two hash tables. While draining, a key lives in exactly one of the two
//! tables; new keys always go to the new one.
//!
//! # Invariants
//!
//! - Between a key's home slot and its actual slot (cyclically) there is no `EMPTY`
//!   control byte. SCAN relies on this: walking from home slot `b` to the end of its
//!   run finds every entry whose home is `b`.
//! - A key is present at most once across both tables.
//! - Only the draining table holds `DELETED` bytes; it never receives inserts. A
//!   draining table of an entry type with tags inside has its own array of control
//!   bytes, made when it starts draining.
//! - An entry type with tags inside may hold tag 0, "not known" (an entry written into
//!   its slot through [`Dict::at_mut`]): lookups then compare its key.
//! - In a live table with tags inside, a distance mark other than "not known" is the
//!   entry's true distance, and runs are in Robin Hood order: an entry is at most one
//!   slot further from its home than the entry before it, and at its home after an
//!   empty slot. A lookup may stop at an entry nearer its home than the probe only
//!   because of this.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::size_class;

const EMPTY: u8 = 0;
const DELETED: u8 = 1;
const MIN_CAPACITY: usize = 8;
/// Slots migrated from the draining table per write.
const MIGRATE_PER_WRITE: usize = 16;
/// Tables up to this capacity are resized in one go: it costs less than bookkeeping.
const SYNC_RESIZE_LIMIT: usize = 256;
/// How many slots ahead a migration asks for the entries it will hash.
const PREFETCH_AHEAD: usize = 8;

/// An entry stored in a [`Dict`]: anything with a byte-string key.
pub trait DictEntry {
    fn key(&self) -> &[u8];

    /// Whether the entry keeps its slot's seven bits of hash itself
    /// ([`DictEntry::slot_tag`]), so that the table needs no control bytes.
    const TAGS_INSIDE: bool = false;

    /// The seven bits of hash [`DictEntry::set_slot_tag`] stored; 0 if unknown.
    #[inline]
    fn slot_tag(&self) -> u8 {
        0
    }

    /// Stores seven bits of the key's hash (never 0) for [`DictEntry::slot_tag`].
    #[inline]
    fn set_slot_tag(&mut self, _tag: u8) {}

    /// The distance mark [`DictEntry::set_slot_dist`] stored; 0 if unknown. Only
    /// entry types with tags inside keep one.
    #[inline]
    fn slot_dist(&self) -> u8 {
        0
    }

    /// Stores a four-bit distance mark for [`DictEntry::slot_dist`]: `d + 1` for an
    /// entry `d` slots past its home, 0 for "not known".
    #[inline]
    fn set_slot_dist(&mut self, _mark: u8) {}

    /// The address of the memory [`DictEntry::key`] reads, for an entry that lives
    /// behind a pointer (to prefetch, now or later: see [`Dict::candidate_addr`]).
    #[inline]
    fn addr(&self) -> Option<usize> {
        None
    }

    /// Starts loading the memory [`DictEntry::key`] reads, if it is behind a
    /// pointer (a hint: it may do nothing).
    #[inline]
    fn prefetch(&self) {
        if let Some(addr) = self.addr() {
            crate::entry::prefetch_line(addr);
        }
    }
}

impl<T: DictEntry + ?Sized> DictEntry for Box<T> {
    fn key(&self) -> &[u8] {
        (**self).key()
    }
}

#[inline]
fn tag(hash: u64) -> u8 {
    // Bits 32..39: the shard index uses the top bits and the home slot the low ones.
    // Never 0x80 (a tag of 0 inside an entry means "not known").
    0x80 | ((hash >> 32) as u8 & 0x7f).max(1)
}

/// Whether two keys are the same. Keys of 4 to 16 bytes (most keys, fields and
/// members) are compared as two overlapping words each, in a few instructions
/// rather than a call to `memcmp`.
#[inline(always)]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_ne_bytes(w)
    };
    let half = |s: &[u8], at: usize| -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&s[at..at + 4]);
        u32::from_ne_bytes(w)
    };
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => a == b,
    }
}

/// Distances below this are kept in an entry's four-bit mark; longer ones are
/// marked "not known", and found from the key's hash when needed.
const MARKED_DIST: usize = 15;

/// The mark of an entry `d` slots past its home.
#[inline]
fn dist_mark(d: usize) -> u8 {
    if d < MARKED_DIST { d as u8 + 1 } else { 0 }
}

/// The distance an entry's mark gives, if it gives one.
#[inline]
fn marked_dist<E: DictEntry>(e: &E) -> Option<usize> {
    match e.slot_dist() {
        0 => None,
        m => Some(usize::from(m) - 1),
    }
}

/// Asks for the entries a pass over `slots[start..end]` will hash next: at its first
/// slot the first `PREFETCH_AHEAD`, then at each slot `i` the one at `i +
/// PREFETCH_AHEAD`, so that their cache misses overlap instead of following one
/// another.
#[inline]
fn prefetch_ahead<E: DictEntry>(slots: &[Option<E>], i: usize, start: usize, end: usize) {
    let from = if i == start { i } else { i + PREFETCH_AHEAD };
    let to = end.min(i + PREFETCH_AHEAD + 1);
    for e in slots[from.min(to)..to].iter().flatten() {
        e.prefetch();
    }
}

/// Where a dict's live table is, published for threads that do not hold the dict,
/// so that they can start loading a key's home slot before they take the dict's
/// lock (see [`SlotsHint::prefetch`]): a pipeline's next keys' slots load while the
/// keys before them run, instead of each lookup waiting for memory in turn.
///
/// Written by the dict whenever its live table changes, read with no order at all:
/// a stale hint (the table moved meanwhile) costs a wasted prefetch, never a wrong
/// answer, since nothing reads through it.
#[derive(Debug, Default)]
#[repr(align(32))]
pub struct SlotsHint {
    /// The live table's own fields (where its arrays are, how many items).
    table: AtomicUsize,
    slots: AtomicUsize,
    capacity: AtomicUsize,
    stride: AtomicUsize,
}

/// One hint of a shared array of them (see [`SlotsHint`]): the array stays
/// together, so that a lookahead's reads of the hints of one database hit the cache.
#[derive(Debug, Clone)]
pub struct HintRef {
    pub all: Arc<[SlotsHint]>,
    pub at: usize,
}

impl SlotsHint {
    /// Prefetches the live table's fields and the home slot of `hash` in the table
    /// last published.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        crate::entry::prefetch_line(self.table.load(Ordering::Relaxed));
        let capacity = self.capacity.load(Ordering::Relaxed);
        if capacity == 0 {
            return;
        }
        let home = ((point(hash) * capacity as u64) >> 32) as usize;
        let stride = self.stride.load(Ordering::Relaxed);
        crate::entry::prefetch_line(
            self.slots
                .load(Ordering::Relaxed)
                .wrapping_add(home.wrapping_mul(stride)),
        );
    }
}

/// Gives an entry that keeps its slot's tag the tag of `hash`.
#[inline]
fn stamp<E: DictEntry>(entry: &mut E, hash: u64) {
    if E::TAGS_INSIDE {
        entry.set_slot_tag(tag(hash) & 0x7f);
    }
}

/// The next number of the splitmix64 sequence at `state`.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Points (see the module docs) are below this.
const POINTS: u64 = 1 << 32;

/// A key's point: the low 32 bits of its hash.
#[inline]
fn point(hash: u64) -> u64 {
    hash & (POINTS - 1)
}

/// The load factors of a table of `E`, as fractions: the most it may hold before it
/// grows, the most it holds after a resize, and the most after [`Dict::reserve`]
/// (whose final count is known). Robin Hood order (tags inside) keeps probe runs
/// short nearer full than plain linear probing does.
const fn loads<E: DictEntry>() -> Loads {
    if E::TAGS_INSIDE {
        Loads {
            max: (7, 8),
            grown: (2, 3),
            reserved: (3, 4),
        }
    } else {
        Loads {
            max: (4, 5),
            grown: (4, 7),
            reserved: (7, 10),
        }
    }
}

/// See [`loads`].
struct Loads {
    max: (usize, usize),
    grown: (usize, usize),
    reserved: (usize, usize),
}

/// The capacity of a table of `E` for `items` entries at most `load` full: for
/// tables with tags inside, the slots that fill their allocation's size class; for
/// the others, a multiple of 8. (Filling the class does not lower the bytes a member
/// pays on average at their loads; it only moves where each table grows.)
fn capacity_at<E: DictEntry>(items: usize, (num, den): (usize, usize)) -> usize {
    let want = items.saturating_mul(den).div_ceil(num).max(MIN_CAPACITY);
    if !E::TAGS_INSIDE {
        return want.next_multiple_of(8);
    }
    let size = std::mem::size_of::<Option<E>>().max(1);
    size_class(want.saturating_mul(size)) / size
}

/// The capacity for `items` entries at the load a table starts at after a resize.
fn capacity_for<E: DictEntry>(items: usize) -> usize {
    capacity_at::<E>(items, loads::<E>().grown)
}

/// The most entries a table of `capacity` holds before it grows.
fn full_items<E: DictEntry>(capacity: usize) -> usize {
    let (num, den) = loads::<E>().max;
    capacity * num / den
}

/// A growing table whose next size takes up to this many bytes of slots grows by
/// two sizes at once (see [`Dict::reserve_one`]). Small tables then double rather
/// than grow by about two fifths, so their keys move in resizes half as often:
/// with 100,000 keys over 256 shards, resizes took some 630 of the 1,400
/// instructions a new key cost. Every capacity is still one that one-size steps
/// reach, so a table grown past this size has the capacity it had before.
const SKIPPING_BYTES: usize = 4096;

/// Tables skip sizes from this capacity on: the smallest ones (a set of a few
/// members) keep every size, which saves their bytes.
const SKIPPING_FROM: usize = 64;

struct Table<E> {
    /// The control bytes; empty for a live table whose entries keep their tags.
    ctrl: Box<[u8]>,
    slots: Box<[Option<E>]>,
    items: usize,
}

impl<E: DictEntry> Table<E> {
    fn empty() -> Self {
        Self::with_capacity(0)
    }

    fn with_capacity(capacity: usize) -> Self {
        let bytes = if E::TAGS_INSIDE { 0 } else { capacity };
        Table {
            ctrl: vec![EMPTY; bytes].into_boxed_slice(),
            slots: std::iter::repeat_with(|| None).take(capacity).collect(),
            items: 0,
        }
    }

    #[inline]
    fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Whether the entries' own tags stand for the control bytes.
    #[inline]
    fn tags_inside(&self) -> bool {
        E::TAGS_INSIDE && self.ctrl.is_empty()
    }

    /// The control byte of slot `i` (a tag of 0 inside an entry reads as 0x80).
    #[inline]
    fn ctrl(&self, i: usize) -> u8 {
        if self.tags_inside() {
            match &self.slots[i] {
                None => EMPTY,
                Some(e) => 0x80 | e.slot_tag(),
            }
        } else {
            self.ctrl[i]
        }
    }

    /// Whether a slot whose control byte is `c` may hold a key whose tag is `t`.
    #[inline]
    fn may_match(c: u8, t: u8) -> bool {
        c == t || (E::TAGS_INSIDE && c == 0x80)
    }

    /// Gives a table that starts draining control bytes of its own, for the
    /// tombstones its entries leave.
    fn make_ctrl(&mut self) {
        if self.tags_inside() {
            self.ctrl = self
                .slots
                .iter()
                .map(|s| s.as_ref().map_or(EMPTY, |e| 0x80 | e.slot_tag()))
                .collect();
        }
    }

    /// The home slot of a hash (or of a point: a point is its own hash's point).
    #[inline]
    fn home(&self, hash: u64) -> usize {
        ((point(hash) * self.capacity() as u64) >> 32) as usize
    }

    /// The first point whose home is after slot `b` (`POINTS` after the last slot).
    #[inline]
    fn end_of(&self, b: usize) -> u64 {
        ((b as u64 + 1) << 32).div_ceil(self.capacity() as u64)
    }

    #[inline]
    fn next(&self, i: usize) -> usize {
        if i + 1 == self.capacity() { 0 } else { i + 1 }
    }

    /// Cyclic distance from slot `from` forward to slot `to`.
    #[inline]
    fn dist(&self, from: usize, to: usize) -> usize {
        if to >= from {
            to - from
        } else {
            to + self.capacity() - from
        }
    }

    /// Whether `extra` more items would exceed the maximum load factor.
    #[inline]
    fn is_full_for(&self, extra: usize) -> bool {
        self.items + extra > full_items::<E>(self.capacity())
    }

    /// The first entry [`Table::find`] would compare `hash`'s key with, found from
    /// the slots alone (tags and distances inside the entries' pointers), without
    /// reading any entry: `None` if there is none, or if the table keeps its tags
    /// apart.
    fn candidate(&self, hash: u64) -> Option<&E> {
        if self.items == 0 || !self.tags_inside() {
            return None;
        }
        let t = tag(hash);
        let mut i = self.home(hash);
        for d in 0..self.capacity() {
            let e = self.slots[i].as_ref()?;
            if marked_dist(e).is_some_and(|rd| rd < d) {
                return None;
            }
            if Self::may_match(0x80 | e.slot_tag(), t) {
                return Some(e);
            }
            i = self.next(i);
        }
        None
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        if self.items == 0 {
            return None;
        }
        let t = tag(hash);
        let mut i = self.home(hash);
        if self.tags_inside() {
            // Robin Hood order: an entry nearer its home than we are to ours has a
            // later home, and so does everything after it in the run.
            let mut d = 0;
            loop {
                let e = self.slots[i].as_ref()?;
                if let Some(rd) = marked_dist(e)
                    && rd < d
                {
                    return None;
                }
                if Self::may_match(0x80 | e.slot_tag(), t) && same_key(e.key(), key) {
                    return Some(i);
                }
                i = self.next(i);
                d += 1;
            }
        }
        loop {
            let c = self.ctrl(i);
            if c == EMPTY {
                return None;
            }
            if Self::may_match(c, t)
                && let Some(e) = &self.slots[i]
                && same_key(e.key(), key)
            {
                return Some(i);
            }
            i = self.next(i);
        }
    }

    /// How far past its home the entry in full slot `i` of a live table with tags
    /// inside is: its mark, or its key's hash when the mark does not say.
    fn dist_at<S: BuildHasher>(&self, i: usize, hasher: &S) -> usize {
        let e = self.slots[i].as_ref().expect("a full slot");
        marked_dist(e).unwrap_or_else(|| self.dist(self.home(hasher.hash_one(e.key())), i))
    }

    /// Places an entry whose key is known to be absent, returning its slot. The
    /// table must have room.
    fn insert_new<S: BuildHasher>(&mut self, hash: u64, mut entry: E, hasher: &S) -> usize {
        let mut i = self.home(hash);
        if self.tags_inside() {
            // Robin Hood: the entry takes the place of the first one nearer its own
            // home, which moves on to take the next such place, and so on until one
            // reaches an empty slot. A run stays ordered by home slot.
            stamp(&mut entry, hash);
            let mut d = 0;
            let mut placed = None;
            loop {
                if self.slots[i].is_none() {
                    entry.set_slot_dist(dist_mark(d));
                    self.slots[i] = Some(entry);
                    self.items += 1;
                    return placed.unwrap_or(i);
                }
                let rd = self.dist_at(i, hasher);
                if rd < d {
                    entry.set_slot_dist(dist_mark(d));
                    let slot = self.slots[i].as_mut().expect("a full slot");
                    entry = std::mem::replace(slot, entry);
                    placed.get_or_insert(i);
                    d = rd;
                }
                i = self.next(i);
                d += 1;
            }
        }
        while self.ctrl(i) >= 0x80 {
            i = self.next(i);
        }
        debug_assert_eq!(self.ctrl(i), EMPTY, "inserts never go to a draining table");
        stamp(&mut entry, hash);
        if !self.tags_inside() {
            self.ctrl[i] = tag(hash);
        }
        self.slots[i] = Some(entry);
        self.items += 1;
        i
    }

    /// Removes the entry at `i` from a live table, shifting the rest of its run back.
    fn remove_shift<S: BuildHasher>(&mut self, i: usize, hasher: &S) -> Option<E> {
        let removed = self.slots[i].take();
        let mut hole = i;
        if self.tags_inside() {
            // Robin Hood: the entries after the hole move back one slot each, up to
            // the first one at its home.
            loop {
                let next = self.next(hole);
                if self.slots[next].is_none() {
                    break;
                }
                let d = self.dist_at(next, hasher);
                if d == 0 {
                    break;
                }
                let mut e = self.slots[next].take().expect("a full slot");
                e.set_slot_dist(dist_mark(d - 1));
                self.slots[hole] = Some(e);
                hole = next;
            }
            self.items -= 1;
            return removed;
        }
        let mut next = self.next(i);
        loop {
            if self.ctrl(next) == EMPTY {
                break;
            }
            let home = match &self.slots[next] {
                Some(e) => self.home(hasher.hash_one(e.key())),
                None => break,
            };
            // The entry at `next` may move to `hole` unless its home lies cyclically in
            // (hole, next].
            let dist_next = self.dist(home, next);
            let dist_hole = self.dist(hole, next);
            if dist_next >= dist_hole {
                if !self.tags_inside() {
                    self.ctrl[hole] = self.ctrl[next];
                }
                self.slots[hole] = self.slots[next].take();
                hole = next;
            }
            next = self.next(next);
        }
        if !self.tags_inside() {
            self.ctrl[hole] = EMPTY;
        }
        self.items -= 1;
        removed
    }

    /// Removes the entry at `i` from a draining table, leaving a tombstone.
    fn remove_tombstone(&mut self, i: usize) -> Option<E> {
        debug_assert!(!self.tags_inside(), "a draining table has control bytes");
        self.ctrl[i] = DELETED;
        self.items -= 1;
        self.slots[i].take()
    }

    /// Calls `f` for every entry whose point is in `from..to` (`to > from`).
    fn scan_points<S: BuildHasher>(&self, from: u64, to: u64, hasher: &S, f: &mut impl FnMut(&E)) {
        if self.items == 0 {
            return;
        }
        let first = self.home(from);
        // Every slot from the first home to the last must be seen; then the run goes
        // on to its end.
        let homes = self.home(to - 1) - first + 1;
        let mut i = first;
        for step in 0..self.capacity() {
            if step >= homes && self.ctrl(i) == EMPTY {
                return;
            }
            if let Some(e) = &self.slots[i]
                && (from..to).contains(&point(hasher.hash_one(e.key())))
            {
                f(e);
            }
            i = self.next(i);
        }
    }

    fn allocated_bytes(&self) -> usize {
        self.ctrl.len() + self.capacity() * std::mem::size_of::<Option<E>>()
    }
}

/// The location of an entry, from [`Dict::find`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    old: bool,
    index: usize,
}

/// A hash table from byte-string keys to entries (see the module docs).
pub struct Dict<E, S> {
    main: Table<E>,
    /// The table being drained into `main`, if a resize is in progress.
    old: Option<Table<E>>,
    /// Slots of `old` already migrated.
    migrated: usize,
    hasher: S,
    /// Where `main` is published, if anywhere (see [`SlotsHint`]).
    hint: Option<HintRef>,
}

impl<E: DictEntry, S: BuildHasher> Dict<E, S> {
    pub fn with_hasher(hasher: S) -> Self {
        Dict {
            main: Table::empty(),
            old: None,
            migrated: 0,
            hasher,
            hint: None,
        }
    }

    /// Where the entry that a lookup of `hash` will read first is (the key's,
    /// unless another key's tag matches before it), judged from the slots alone:
    /// for a caller that prefetched the home slot a while ago (see [`SlotsHint`])
    /// and will look the key up soon. `None` while resizing (two tables to look in).
    #[inline]
    pub fn candidate_addr(&self, hash: u64) -> Option<usize> {
        if self.old.is_some() {
            return None;
        }
        self.main.candidate(hash).and_then(DictEntry::addr)
    }

    /// Starts loading what a lookup of `hash` will read, in two steps a while
    /// apart: first its home slot (and control byte), then, once that has arrived,
    /// the entry the lookup will compare first (tables with tags inside; other
    /// tables keep their entries in the slots). Nothing while resizing. For a
    /// caller that holds the dict and will look the key up soon (a pipeline's next
    /// command on a big hash or set).
    #[inline]
    pub fn prefetch_lookup(&self, hash: u64, slot_arrived: bool) {
        if self.old.is_some() || self.main.items == 0 {
            return;
        }
        if slot_arrived {
            if let Some(addr) = self.candidate_addr(hash) {
                crate::entry::prefetch_line(addr);
            }
            return;
        }
        let home = self.main.home(hash);
        if let Some(slot) = self.main.slots.get(home) {
            crate::entry::prefetch_line(std::ptr::from_ref(slot).addr());
        }
        if let Some(ctrl) = self.main.ctrl.get(home) {
            crate::entry::prefetch_line(std::ptr::from_ref(ctrl).addr());
        }
    }

    /// Publishes where the live table is to `hint` from now on (see [`SlotsHint`]).
    /// The hint names the dict's own place: call once the dict is where it stays.
    pub fn publish_to(&mut self, hint: HintRef) {
        self.hint = Some(hint);
        self.publish();
    }

    /// Tells the hint, if any, where the live table is now.
    fn publish(&self) {
        if let Some(hint) = self.hint.as_ref().and_then(|h| h.all.get(h.at)) {
            hint.table
                .store(std::ptr::from_ref(&self.main).addr(), Ordering::Relaxed);
            hint.slots
                .store(self.main.slots.as_ptr().addr(), Ordering::Relaxed);
            hint.capacity.store(self.main.capacity(), Ordering::Relaxed);
            hint.stride
                .store(std::mem::size_of::<Option<E>>(), Ordering::Relaxed);
        }
    }

    /// Exchanges the contents of two dicts; each keeps publishing to its own hint.
    pub fn swap(&mut self, other: &mut Self) {
        std::mem::swap(self, other);
        std::mem::swap(&mut self.hint, &mut other.hint);
        self.publish();
        other.publish();
    }

    #[inline]
    fn table(&self, pos: Pos) -> &Table<E> {
        if pos.old {
            self.old.as_ref().expect("pos in old table")
        } else {
            &self.main
        }
    }

    #[inline]
    fn table_mut(&mut self, pos: Pos) -> &mut Table<E> {
        if pos.old {
            self.old.as_mut().expect("pos in old table")
        } else {
            &mut self.main
        }
    }

    pub fn hasher(&self) -> &S {
        &self.hasher
    }

    /// The hash a caller passes to the lookup methods.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub fn len(&self) -> usize {
        self.main.items + self.old.as_ref().map_or(0, |t| t.items)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_rehashing(&self) -> bool {
        self.old.is_some()
    }

    /// Bytes held by the slot arrays (not by the entries' own allocations).
    pub fn allocated_bytes(&self) -> usize {
        self.main.allocated_bytes() + self.old.as_ref().map_or(0, Table::allocated_bytes)
    }

    /// Where `key` is stored, for a later [`Dict::at_mut`] or [`Dict::remove_at`]
    /// (valid until the dict is next modified).
    #[inline]
    pub fn find(&self, hash: u64, key: &[u8]) -> Option<Pos> {
        if let Some(i) = self.main.find(hash, key) {
            return Some(Pos {
                old: false,
                index: i,
            });
        }
        let i = self.old.as_ref()?.find(hash, key)?;
        Some(Pos {
            old: true,
            index: i,
        })
    }

    /// `pos` if it still holds `key` (a position kept across changes that may have
    /// moved the entry, checked before it is used); `None` otherwise.
    #[inline]
    pub fn still_at(&self, pos: Pos, key: &[u8]) -> Option<Pos> {
        let table = if pos.old {
            self.old.as_ref()?
        } else {
            &self.main
        };
        let e = table.slots.get(pos.index)?.as_ref()?;
        same_key(e.key(), key).then_some(pos)
    }

    #[inline]
    pub fn at(&self, pos: Pos) -> &E {
        self.table(pos).slots[pos.index]
            .as_ref()
            .expect("pos names a full slot")
    }

    #[inline]
    pub fn at_mut(&mut self, pos: Pos) -> &mut E {
        self.table_mut(pos).slots[pos.index]
            .as_mut()
            .expect("pos names a full slot")
    }

    pub fn remove_at(&mut self, pos: Pos) -> E {
        let removed = if pos.old {
            self.old
                .as_mut()
                .and_then(|t| t.remove_tombstone(pos.index))
        } else {
            self.main.remove_shift(pos.index, &self.hasher)
        };
        let removed = removed.expect("pos names a full slot");
        self.migrate_step();
        self.maybe_shrink();
        removed
    }

    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&E> {
        if let Some(i) = self.main.find(hash, key) {
            return self.main.slots[i].as_ref();
        }
        let old = self.old.as_ref()?;
        let i = old.find(hash, key)?;
        old.slots[i].as_ref()
    }

    pub fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut E> {
        if let Some(i) = self.main.find(hash, key) {
            return self.main.slots[i].as_mut();
        }
        let old = self.old.as_mut()?;
        let i = old.find(hash, key)?;
        old.slots[i].as_mut()
    }

    pub fn contains(&self, hash: u64, key: &[u8]) -> bool {
        self.get(hash, key).is_some()
    }

    /// Inserts `entry`, returning the entry it replaced, if any.
    pub fn insert(&mut self, hash: u64, entry: E) -> Option<E> {
        self.migrate_step();
        if let Some(i) = self.main.find(hash, entry.key()) {
            // The entry may come from another table, with that table's marks.
            let mut entry = entry;
            stamp(&mut entry, hash);
            if self.main.tags_inside() {
                entry.set_slot_dist(dist_mark(self.main.dist(self.main.home(hash), i)));
            }
            return self.main.slots[i].replace(entry);
        }
        let replaced = self.remove_from_old(hash, entry.key());
        self.reserve_one();
        self.main.insert_new(hash, entry, &self.hasher);
        replaced
    }

    /// Returns the entry for `key`, inserting `make()` first if it is absent; the flag
    /// says whether it was inserted, and the place is where the entry is now.
    pub fn get_or_insert_with(
        &mut self,
        hash: u64,
        key: &[u8],
        make: impl FnOnce() -> E,
    ) -> (&mut E, bool, Pos) {
        self.migrate_step();
        if let Some(i) = self.main.find(hash, key) {
            return (
                self.main.slots[i].as_mut().expect("found slot is full"),
                false,
                Pos {
                    old: false,
                    index: i,
                },
            );
        }
        let (entry, inserted) = match self.remove_from_old(hash, key) {
            Some(e) => (e, false),
            None => (make(), true),
        };
        debug_assert!(entry.key() == key);
        self.reserve_one();
        let i = self.main.insert_new(hash, entry, &self.hasher);
        (
            self.main.slots[i].as_mut().expect("inserted slot is full"),
            inserted,
            Pos {
                old: false,
                index: i,
            },
        )
    }

    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<E> {
        self.migrate_step();
        let removed = match self.main.find(hash, key) {
            Some(i) => self.main.remove_shift(i, &self.hasher),
            None => self.remove_from_old(hash, key),
        };
        if removed.is_some() {
            self.maybe_shrink();
        }
        removed
    }

    /// Removes the first entry with this hash that satisfies `pred`.
    pub fn remove_hash_where(&mut self, hash: u64, mut pred: impl FnMut(&E) -> bool) -> Option<E> {
        let key: Option<Vec<u8>> = self
            .find_hash_where(hash, &mut pred)
            .map(|e| e.key().to_vec());
        key.and_then(|k| self.remove(hash, &k))
    }

    /// The first entry with this hash that satisfies `pred`.
    pub fn find_hash_where(&self, hash: u64, pred: &mut impl FnMut(&E) -> bool) -> Option<&E> {
        self.find_hash_where_pos(hash, pred).map(|pos| self.at(pos))
    }

    /// Where the first entry with this hash that satisfies `pred` is.
    pub fn find_hash_where_pos(&self, hash: u64, pred: &mut impl FnMut(&E) -> bool) -> Option<Pos> {
        let t = tag(hash);
        let tables = [(false, &self.main)]
            .into_iter()
            .chain(self.old.as_ref().map(|t| (true, t)));
        for (old, table) in tables {
            if table.items == 0 {
                continue;
            }
            let mut i = table.home(hash);
            for _ in 0..table.capacity() {
                let c = table.ctrl(i);
                if c == EMPTY {
                    break;
                }
                if Table::<E>::may_match(c, t)
                    && let Some(e) = &table.slots[i]
                    && self.hasher.hash_one(e.key()) == hash
                    && pred(e)
                {
                    return Some(Pos { old, index: i });
                }
                i = table.next(i);
            }
        }
        None
    }

    /// Removes `key` from the draining table.
    fn remove_from_old(&mut self, hash: u64, key: &[u8]) -> Option<E> {
        let old = self.old.as_mut()?;
        let i = old.find(hash, key)?;
        old.remove_tombstone(i)
    }

    /// Makes room for `additional` more entries at once, so that a bulk load
    /// (recovery) inserts into a table of its final size instead of doubling and
    /// migrating step by step. A resize in progress is finished first.
    pub fn reserve(&mut self, additional: usize) {
        self.migrate_some(usize::MAX);
        if !self.main.is_full_for(additional) {
            return;
        }
        // The final count is known: start as full as a grown table may be.
        let capacity = capacity_at::<E>(self.len() + additional, loads::<E>().reserved);
        let fresh = Table::with_capacity(capacity);
        let old = std::mem::replace(&mut self.main, fresh);
        self.publish();
        self.absorb(old);
    }

    /// Moves every entry of `table` into `main`, which has room.
    fn absorb(&mut self, table: Table<E>) {
        let mut slots = table.slots.into_vec();
        for i in 0..slots.len() {
            prefetch_ahead(&slots, i, 0, slots.len());
            let Some(e) = slots[i].take() else { continue };
            let h = self.hasher.hash_one(e.key());
            self.main.insert_new(h, e, &self.hasher);
        }
    }

    /// Makes sure `main` can take one more entry, starting a resize if needed.
    fn reserve_one(&mut self) {
        if !self.main.is_full_for(1) {
            return;
        }
        let mut capacity = capacity_for::<E>(self.len() + 1);
        if self.main.capacity() >= SKIPPING_FROM
            && capacity.saturating_mul(std::mem::size_of::<Option<E>>()) <= SKIPPING_BYTES
        {
            // A small table skips a size: it grows to the capacity its next growth
            // would reach, about twice its own.
            capacity = capacity_for::<E>(full_items::<E>(capacity) + 1);
        }
        if let Some(old) = self.old.take() {
            // The live table filled up before the previous resize finished (possible
            // only right after a steep shrink): move everything into one table big
            // enough for all of it, at once.
            let fresh = Table::with_capacity(capacity);
            let main = std::mem::replace(&mut self.main, fresh);
            self.publish();
            self.absorb(main);
            self.absorb(old);
            self.migrated = 0;
            return;
        }
        self.resize(capacity);
    }

    fn maybe_shrink(&mut self) {
        let cap = self.main.capacity();
        if self.old.is_some() || cap <= MIN_CAPACITY || self.main.items * 8 >= cap {
            return;
        }
        let target = capacity_for::<E>(self.main.items);
        if target < cap {
            self.resize(target);
        }
    }

    fn resize(&mut self, capacity: usize) {
        debug_assert!(self.old.is_none());
        let fresh = Table::with_capacity(capacity);
        let mut old = std::mem::replace(&mut self.main, fresh);
        self.publish();
        if old.items == 0 {
            return;
        }
        if capacity <= SYNC_RESIZE_LIMIT {
            self.absorb(old);
            return;
        }
        old.make_ctrl();
        self.old = Some(old);
        self.migrated = 0;
    }

    /// Migrates up to `max_slots` slots of a draining table; returns whether a resize
    /// is still in progress.
    pub fn rehash_some(&mut self, max_slots: usize) -> bool {
        self.migrate_some(max_slots);
        self.old.is_some()
    }

    /// The migration work done by one write: proportional to how much bigger the
    /// draining table is than the live one, so that a drain always ends before the
    /// live table fills up.
    fn migrate_step(&mut self) {
        if let Some(old) = &self.old {
            let ratio = (old.capacity() / self.main.capacity().max(1)).max(1);
            self.migrate_some(MIGRATE_PER_WRITE * ratio);
        }
    }

    fn migrate_some(&mut self, max_slots: usize) {
        let Some(old) = self.old.as_mut() else { return };
        let end = old.capacity().min(self.migrated.saturating_add(max_slots));
        for i in self.migrated..end {
            prefetch_ahead(&old.slots, i, self.migrated, end);
            if old.ctrl(i) >= 0x80
                && let Some(e) = old.slots[i].take()
            {
                old.ctrl[i] = DELETED;
                old.items -= 1;
                let h = self.hasher.hash_one(e.key());
                self.main.insert_new(h, e, &self.hasher);
            }
        }
        self.migrated = end;
        if end == old.capacity() || old.items == 0 {
            self.old = None;
            self.migrated = 0;
        }
    }

    /// Removes every entry, returning them as a dict that the caller may drop elsewhere
    /// (freeing a big table off the hot path).
    pub fn take(&mut self) -> Dict<E, S>
    where
        S: Clone,
    {
        let mut taken = Dict::with_hasher(self.hasher.clone());
        self.swap(&mut taken);
        taken
    }

    pub fn iter(&self) -> impl Iterator<Item = &E> {
        let old = self.old.iter().flat_map(|t| t.slots.iter());
        self.main.slots.iter().chain(old).filter_map(Option::as_ref)
    }

    /// Calls `f` on every entry, as [`Dict::iter`] visits them, loading the entries
    /// ahead while it runs: a walk of a whole table under its shard's lock (the
    /// store's compaction) then waits for memory a fraction of the time.
    pub fn for_each_prefetched(&self, mut f: impl FnMut(&E)) {
        let old = self.old.iter().map(|t| &t.slots[..]);
        for slots in std::iter::once(&self.main.slots[..]).chain(old) {
            for (i, slot) in slots.iter().enumerate() {
                prefetch_ahead(slots, i, 0, slots.len());
                if let Some(e) = slot {
                    f(e);
                }
            }
        }
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut E> {
        let old = self.old.iter_mut().flat_map(|t| t.slots.iter_mut());
        self.main
            .slots
            .iter_mut()
            .chain(old)
            .filter_map(Option::as_mut)
    }

    /// An entry chosen at random, given a random number `r`, with (nearly) equal
    /// chances for all (see [`Dict::random_uniform`]).
    pub fn random(&self, r: u64) -> Option<&E> {
        // Seeded with a mix of `r`, so that nearby numbers give unrelated sequences.
        let mut state = splitmix64(&mut { r });
        self.random_uniform(|| splitmix64(&mut state))
    }

    /// The first entry after a random slot: entries that follow a long run of empty
    /// slots are more likely.
    fn random_after(&self, r: u64) -> Option<&E> {
        let total = self.len();
        if total == 0 {
            return None;
        }
        // The slots of a draining table below `migrated` are all empty: start and
        // wrap within the rest, or each pick could walk the whole migrated prefix.
        let (table, lo) = match &self.old {
            Some(old) if (r >> 32) as usize % total < old.items => (old, self.migrated),
            _ if self.main.items > 0 => (&self.main, 0),
            Some(old) => (old, self.migrated),
            None => return None,
        };
        let span = table.capacity() - lo;
        let start = r as usize % span;
        (0..span).map(|k| lo + (start + k) % span).find_map(|i| {
            if table.ctrl(i) >= 0x80 {
                table.slots[i].as_ref()
            } else {
                None
            }
        })
    }

    /// A random entry with (nearly) equal chances for all: a few random slots are
    /// probed and the first full one taken, falling back to the first entry after a
    /// random slot, which favours entries that follow empty slots (the heads of probe
    /// runs) and rarely gives one deep in a run. Eviction samples with this, so that
    /// no key escapes it.
    pub fn random_uniform(&self, mut r: impl FnMut() -> u64) -> Option<&E> {
        let total = self.len();
        if total == 0 {
            return None;
        }
        for _ in 0..8 {
            let x = r();
            let (table, lo) = match &self.old {
                Some(old) if (x >> 32) as usize % total < old.items => (old, self.migrated),
                _ if self.main.items > 0 => (&self.main, 0),
                Some(old) => (old, self.migrated),
                None => return None,
            };
            let i = lo + (x as u32 as usize) % (table.capacity() - lo).max(1);
            if i < table.capacity()
                && table.ctrl(i) >= 0x80
                && let Some(Some(e)) = table.slots.get(i)
            {
                return Some(e);
            }
        }
        self.random_after(r())
    }

    /// One step of a SCAN: calls `f` for the entries whose points lie from `cursor`
    /// to the end of its home slot in the finest of the tables, and returns the next
    /// cursor (0 when the iteration is complete; a cursor past the point space ends
    /// it too).
    ///
    /// An entry present from the first call to the last is seen exactly once, however
    /// the table grows or shrinks in between.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&E)) -> u64 {
        if self.is_empty() || cursor >= POINTS {
            return 0;
        }
        let finest = match &self.old {
            Some(old) if old.capacity() > self.main.capacity() => old,
            _ => &self.main,
        };
        let end = finest.end_of(finest.home(cursor));
        self.main.scan_points(cursor, end, &self.hasher, &mut f);
        if let Some(old) = &self.old {
            old.scan_points(cursor, end, &self.hasher, &mut f);
        }
        if end >= POINTS { 0 } else { end }
    }
}

impl<E: DictEntry, S: BuildHasher + Default> Default for Dict<E, S> {
    fn default() -> Self {
        Dict::with_hasher(S::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};
    use std::hash::BuildHasherDefault;

    /// Keys compare as slices do, whichever way their lengths are read: every pair
    /// of keys up to 20 bytes that differ in one byte, or in length, or not at all.
    #[test]
    fn same_key_is_slice_equality() {
        for n in 0..=20usize {
            let a: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(same_key(&a, &a.clone()));
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x40;
                assert!(!same_key(&a, &b), "{n} bytes, differing at {at}");
            }
            let mut longer = a.clone();
            longer.push(0);
            assert!(!same_key(&a, &longer));
        }
    }

    /// A test entry: a key, a number, and (with `IN`) the slot's tag kept inside.
    #[derive(Debug, Clone, PartialEq)]
    /// Key, value, tag and distance mark.
    struct E<const IN: bool>(Vec<u8>, u32, u8, u8);

    impl<const IN: bool> E<IN> {
        fn new(k: impl Into<Vec<u8>>, v: u32) -> Self {
            E(k.into(), v, 0, 0)
        }
    }

    impl<const IN: bool> DictEntry for E<IN> {
        fn key(&self) -> &[u8] {
            &self.0
        }
        const TAGS_INSIDE: bool = IN;
        fn slot_tag(&self) -> u8 {
            self.2
        }
        fn set_slot_tag(&mut self, tag: u8) {
            assert!(IN, "only an entry that keeps its tag is asked to");
            assert!(tag != 0 && tag < 0x80);
            self.2 = tag;
        }
        fn slot_dist(&self) -> u8 {
            self.3
        }
        fn set_slot_dist(&mut self, mark: u8) {
            assert!(IN, "only an entry that keeps its tag is asked to");
            assert!(mark < 16);
            self.3 = mark;
        }
        /// The number stands for the address (see `Dict::candidate_addr`).
        fn addr(&self) -> Option<usize> {
            Some(self.1 as usize)
        }
    }

    type H = foldhash::fast::RandomState;

    fn dict<const IN: bool>() -> Dict<E<IN>, H> {
        Dict::with_hasher(H::default())
    }

    fn put<const IN: bool>(d: &mut Dict<E<IN>, H>, k: &[u8], v: u32) -> Option<E<IN>> {
        let h = d.hash(k);
        d.insert(h, E::new(k, v))
    }

    /// Runs a test body with control bytes beside the slots, then with the tags in
    /// the entries.
    macro_rules! both {
        ($body:ident) => {
            $body::<false>();
            $body::<true>();
        };
    }

    fn check_invariants<const IN: bool>(d: &Dict<E<IN>, H>) {
        for table in std::iter::once(&d.main).chain(d.old.as_ref()) {
            if IN && d.old.as_ref().is_none_or(|old| !std::ptr::eq(old, table)) {
                assert!(table.ctrl.is_empty(), "a live table has no control bytes");
            }
            let mut n = 0;
            for i in 0..table.capacity() {
                if table.ctrl(i) < 0x80 {
                    assert!(table.slots[i].is_none());
                    continue;
                }
                n += 1;
                let e = table.slots[i].as_ref().expect("full slot");
                let h = d.hash(e.key());
                let c = table.ctrl(i);
                assert!(c == tag(h) || (IN && c == 0x80), "tag of slot {i}");
                // No EMPTY between home and position.
                let mut j = table.home(h);
                while j != i {
                    assert_ne!(table.ctrl(j), EMPTY, "gap in probe run");
                    j = table.next(j);
                }
                if table.tags_inside() {
                    // A known mark is the true distance, and the run is in Robin
                    // Hood order: the entry before is at most one slot further
                    // from its home.
                    let dist = table.dist(table.home(h), i);
                    if let Some(m) = marked_dist(e) {
                        assert_eq!(m, dist, "mark of slot {i}");
                    }
                    let prev = (i + table.capacity() - 1) % table.capacity();
                    if let Some(p) = &table.slots[prev] {
                        let pd = table.dist(table.home(d.hash(p.key())), prev);
                        assert!(dist <= pd + 1, "slot {i} is out of Robin Hood order");
                    } else {
                        assert_eq!(dist, 0, "slot {i} follows an empty one");
                    }
                }
            }
            assert_eq!(n, table.items);
        }
    }

    #[test]
    fn insert_get_remove() {
        both!(insert_get_remove_with);
    }

    fn insert_get_remove_with<const IN: bool>() {
        let mut d = dict::<IN>();
        for i in 0..10_000u32 {
            assert!(put(&mut d, format!("k{i}").as_bytes(), i).is_none());
        }
        assert_eq!(d.len(), 10_000);
        for i in 0..10_000u32 {
            let k = format!("k{i}");
            assert_eq!(
                d.get(d.hash(k.as_bytes()), k.as_bytes()).map(|e| e.1),
                Some(i)
            );
        }
        check_invariants(&d);
        for i in 0..10_000u32 {
            let k = format!("k{i}");
            let h = d.hash(k.as_bytes());
            assert_eq!(d.remove(h, k.as_bytes()).map(|e| e.1), Some(i));
        }
        assert!(d.is_empty());
        while d.rehash_some(1000) {}
        assert!(d.main.capacity() <= MIN_CAPACITY);
    }

    #[test]
    fn a_kept_position_is_used_only_while_it_holds_its_key() {
        both!(a_kept_position_is_used_only_while_it_holds_its_key_with);
    }

    fn a_kept_position_is_used_only_while_it_holds_its_key_with<const IN: bool>() {
        let mut d = dict::<IN>();
        for i in 0..100u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        let kept: Vec<(String, Pos)> = (0..100u32)
            .map(|i| {
                let k = format!("k{i}");
                let pos = d.find(d.hash(k.as_bytes()), k.as_bytes()).expect("found");
                assert_eq!(d.still_at(pos, k.as_bytes()), Some(pos));
                assert_eq!(d.still_at(pos, b"other"), None);
                (k, pos)
            })
            .collect();
        // Inserts shift entries along their runs, resizes move them all, removals
        // empty slots: every kept position is now either its key's or refused.
        for i in 100..5000u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        for i in (0..100u32).step_by(3) {
            let k = format!("k{i}");
            d.remove(d.hash(k.as_bytes()), k.as_bytes());
        }
        let mut moved = 0;
        for (k, pos) in &kept {
            let now = d.find(d.hash(k.as_bytes()), k.as_bytes());
            match d.still_at(*pos, k.as_bytes()) {
                Some(p) => assert_eq!(Some(p), now, "{k}"),
                None => moved += 1,
            }
        }
        assert!(moved > 0, "the table grew: positions changed");
    }

    #[test]
    fn reserve_sizes_the_table_once_even_mid_resize() {
        both!(reserve_sizes_the_table_once_even_mid_resize_with);
    }

    fn reserve_sizes_the_table_once_even_mid_resize_with<const IN: bool>() {
        let mut d = dict::<IN>();
        // Past the synchronous limit: a resize may still be in progress.
        for i in 0..700u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        d.reserve(100_000);
        assert!(d.old.is_none());
        let capacity = d.main.capacity();
        for i in 700..100_700u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        assert_eq!(d.main.capacity(), capacity, "no resize after a reserve");
        assert_eq!(d.len(), 100_700);
        check_invariants(&d);
        for i in (0..100_700u32).step_by(97) {
            let k = format!("k{i}");
            assert_eq!(
                d.get(d.hash(k.as_bytes()), k.as_bytes()).map(|e| e.1),
                Some(i)
            );
        }
        // Reserving what already fits changes nothing.
        d.reserve(10);
        assert_eq!(d.main.capacity(), capacity);
    }

    /// A table grown from empty takes only capacities that growing one size at a
    /// time reaches: from `SKIPPING_FROM` on it skips every other one while its
    /// slots take up to `SKIPPING_BYTES`, and past that it has the capacity it
    /// would have had without skipping.
    #[test]
    fn small_tables_skip_sizes_and_big_ones_keep_theirs() {
        both!(small_tables_skip_sizes_and_big_ones_keep_theirs_with);
    }

    fn small_tables_skip_sizes_and_big_ones_keep_theirs_with<const IN: bool>() {
        let mut steps = vec![capacity_for::<E<IN>>(1)];
        while full_items::<E<IN>>(*steps.last().expect("a step")) < 4000 {
            let last = *steps.last().expect("a step");
            steps.push(capacity_for::<E<IN>>(full_items::<E<IN>>(last) + 1));
        }
        let mut d = dict::<IN>();
        let mut seen: Vec<usize> = Vec::new();
        for i in 0..4000u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
            if seen.last() != Some(&d.main.capacity()) {
                seen.push(d.main.capacity());
            }
        }
        check_invariants(&d);
        let size = std::mem::size_of::<Option<E<IN>>>();
        let mut skipped = 0;
        for pair in seen.windows(2) {
            let i = steps
                .iter()
                .position(|&c| c == pair[0])
                .unwrap_or_else(|| panic!("{} is not a one-size capacity", pair[0]));
            let skips = pair[0] >= SKIPPING_FROM && steps[i + 1] * size <= SKIPPING_BYTES;
            skipped += usize::from(skips);
            assert_eq!(
                pair[1],
                steps[i + 1 + usize::from(skips)],
                "from {}",
                pair[0]
            );
        }
        assert!(skipped > 0, "no size skipped: {seen:?}");
        assert_eq!(seen[0], steps[0]);
        assert_eq!(d.main.capacity(), *steps.last().expect("a step"));
    }

    #[test]
    fn scan_sees_every_key_while_growing() {
        both!(scan_sees_every_key_while_growing_with);
    }

    fn scan_sees_every_key_while_growing_with<const IN: bool>() {
        let mut d = dict::<IN>();
        for i in 0..1000u32 {
            put(&mut d, format!("base{i}").as_bytes(), i);
        }
        let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut cursor = 0;
        let mut extra = 0u32;
        loop {
            cursor = d.scan(cursor, |e| {
                *seen.entry(e.0.clone()).or_default() += 1;
            });
            // Grow the table a lot between steps.
            for _ in 0..200 {
                if extra < 60_000 {
                    put(&mut d, format!("new{extra}").as_bytes(), extra);
                    extra += 1;
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..1000u32 {
            let n = seen.get(format!("base{i}").as_bytes());
            assert_eq!(n, Some(&1), "base{i} seen once");
        }
    }

    #[test]
    fn scan_sees_every_key_while_shrinking() {
        both!(scan_sees_every_key_while_shrinking_with);
    }

    fn scan_sees_every_key_while_shrinking_with<const IN: bool>() {
        let mut d = dict::<IN>();
        for i in 0..20_000u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        let mut seen: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut cursor = 0;
        let mut next_del = 100u32;
        loop {
            cursor = d.scan(cursor, |e| {
                *seen.entry(e.0.clone()).or_default() += 1;
            });
            // Delete keys k100.. (never the first hundred) to force shrinking.
            for _ in 0..300 {
                if next_del < 20_000 {
                    let k = format!("k{next_del}");
                    let h = d.hash(k.as_bytes());
                    d.remove(h, k.as_bytes());
                    next_del += 1;
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..100u32 {
            let n = seen.get(format!("k{i}").as_bytes());
            assert_eq!(n, Some(&1), "k{i} seen once");
        }
    }

    #[test]
    fn steep_shrink_then_inserts_keep_everything() {
        both!(steep_shrink_then_inserts_keep_everything_with);
    }

    fn steep_shrink_then_inserts_keep_everything_with<const IN: bool>() {
        let mut d = dict::<IN>();
        for i in 0..100_000u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        while d.rehash_some(1 << 20) {}
        // Delete all but 1000 keys: the table shrinks steeply, draining incrementally.
        for i in 1000..100_000u32 {
            let k = format!("k{i}");
            let h = d.hash(k.as_bytes());
            assert!(d.remove(h, k.as_bytes()).is_some());
        }
        for i in 0..50_000u32 {
            put(&mut d, format!("n{i}").as_bytes(), i);
        }
        check_invariants(&d);
        assert_eq!(d.len(), 51_000);
        for i in 0..1000u32 {
            let k = format!("k{i}");
            assert!(d.contains(d.hash(k.as_bytes()), k.as_bytes()));
        }
    }

    #[test]
    fn random_finds_entries() {
        both!(random_finds_entries_with);
    }

    fn random_finds_entries_with<const IN: bool>() {
        let mut d = dict::<IN>();
        assert!(d.random(42).is_none());
        for i in 0..100u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        let mut seen = HashSet::new();
        for r in 0..2000u64 {
            let r = r.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            seen.insert(d.random(r).expect("non-empty").1);
        }
        assert!(seen.len() > 90, "only {} distinct", seen.len());
    }

    #[test]
    fn random_picks_live_entries_while_draining() {
        both!(random_picks_live_entries_while_draining_with);
    }

    fn random_picks_live_entries_while_draining_with<const IN: bool>() {
        let mut d = dict::<IN>();
        for i in 0..200_000u32 {
            put(&mut d, format!("k{i}").as_bytes(), i);
        }
        while d.rehash_some(1 << 20) {}
        // Remove keys until a shrink starts, then drain half the old table: its
        // prefix is empty, and random picks must start past it (or each would walk
        // it) and still find only live entries.
        let mut removed = 0u32;
        while !d.is_rehashing() {
            let k = format!("k{removed}");
            let h = d.hash(k.as_bytes());
            d.remove(h, k.as_bytes());
            removed += 1;
        }
        d.rehash_some(d.old.as_ref().map_or(0, |t| t.capacity() / 2));
        assert!(d.is_rehashing());
        let mut seen = HashSet::new();
        for r in 0..10_000u64 {
            let r = r.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let e = d.random(r).expect("non-empty");
            assert!(e.1 >= removed);
            seen.insert(e.1);
        }
        assert!(seen.len() > 5_000, "only {} distinct", seen.len());
    }

    #[test]
    fn colliding_hashes_are_handled() {
        both!(colliding_hashes_are_handled_with);
    }

    fn colliding_hashes_are_handled_with<const IN: bool>() {
        // A constant hasher puts every key in the same home slot.
        #[derive(Default, Clone)]
        struct Zero;
        impl std::hash::Hasher for Zero {
            fn finish(&self) -> u64 {
                0
            }
            fn write(&mut self, _: &[u8]) {}
        }
        let mut d: Dict<E<IN>, BuildHasherDefault<Zero>> = Dict::default();
        for i in 0..300u32 {
            d.insert(0, E::new(format!("k{i}"), i));
        }
        for i in (0..300u32).step_by(3) {
            assert!(d.remove(0, format!("k{i}").as_bytes()).is_some());
        }
        for i in 0..300u32 {
            assert_eq!(d.get(0, format!("k{i}").as_bytes()).is_some(), i % 3 != 0);
        }
        let mut n = 0;
        let mut c = 0;
        loop {
            c = d.scan(c, |_| n += 1);
            if c == 0 {
                break;
            }
        }
        assert_eq!(n, 200);
    }

    #[test]
    fn slot_arrays_fill_their_size_class() {
        let classes = [
            (100, 112),
            (128, 128),
            (129, 160),
            (4_097, 5_120),
            (40_960, 40_960),
            (46_976, 49_152),
        ];
        for (bytes, class) in classes {
            assert_eq!(size_class(bytes), class, "{bytes} bytes");
        }
        // 3,906 keyspace entries at most 2/3 full want 5,859 slots, 46,872 bytes: the
        // class of 49,152 bytes holds 6,144. Other tables take a multiple of 8.
        if crate::Entry::TAGS_INSIDE {
            assert_eq!(capacity_at::<crate::Entry>(3_906, (2, 3)), 6_144);
        }
        assert_eq!(capacity_at::<crate::Entry>(0, (2, 3)), MIN_CAPACITY);
        assert_eq!(capacity_at::<E<false>>(3_906, (2, 3)), 5_864);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u16, u32),
        Remove(u16),
        Upsert(u16),
        Rehash(u8),
        RemoveHash(u16),
        Overwrite(u16, u32),
        PutMarked(u16, u32, u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..2000u16, any::<u32>()).prop_map(|(k, v)| Op::Put(k, v)),
            3 => (0..2000u16).prop_map(Op::Remove),
            1 => (0..2000u16).prop_map(Op::Upsert),
            1 => any::<u8>().prop_map(Op::Rehash),
            1 => (0..2000u16).prop_map(Op::RemoveHash),
            1 => (0..2000u16, any::<u32>()).prop_map(|(k, v)| Op::Overwrite(k, v)),
            1 => (0..2000u16, any::<u32>(), 1..0x80u8, 0..16u8)
                .prop_map(|(k, v, t, m)| Op::PutMarked(k, v, t, m)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn model(ops in proptest::collection::vec(op(), 1..1500)) {
            model_with::<false>(&ops)?;
            model_with::<true>(&ops)?;
        }
    }

    fn model_with<const IN: bool>(ops: &[Op]) -> Result<(), TestCaseError> {
        let mut d = dict::<IN>();
        let mut m: HashMap<Vec<u8>, u32> = HashMap::new();
        for op in ops {
            match *op {
                Op::Put(k, v) => {
                    let k = format!("key:{k}").into_bytes();
                    let prev = put(&mut d, &k, v).map(|e| e.1);
                    prop_assert_eq!(prev, m.insert(k, v));
                }
                Op::Remove(k) => {
                    let k = format!("key:{k}").into_bytes();
                    let h = d.hash(&k);
                    prop_assert_eq!(d.remove(h, &k).map(|e| e.1), m.remove(&k));
                }
                Op::Upsert(k) => {
                    let k = format!("key:{k}").into_bytes();
                    let h = d.hash(&k);
                    let (e, inserted, _) = d.get_or_insert_with(h, &k, || E::new(k.clone(), 0));
                    e.1 = e.1.wrapping_add(1);
                    prop_assert_eq!(inserted, !m.contains_key(&k));
                    let mv = m.entry(k).or_insert(0);
                    *mv = mv.wrapping_add(1);
                }
                Op::Rehash(n) => {
                    d.rehash_some(n as usize);
                }
                Op::Overwrite(k, v) => {
                    // A new entry written over the old one in place: its tag
                    // (inside the entry) is not known, yet it must be found.
                    let k = format!("key:{k}").into_bytes();
                    let h = d.hash(&k);
                    if let Some(pos) = d.find(h, &k) {
                        *d.at_mut(pos) = E::new(k.clone(), v);
                        m.insert(k, v);
                    }
                }
                Op::PutMarked(k, v, t, mark) => {
                    // An entry that comes with another table's marks (a tag and a
                    // distance that may be wrong here) gets this table's.
                    let k = format!("key:{k}").into_bytes();
                    let h = d.hash(&k);
                    let prev = d.insert(h, E(k.clone(), v, t, mark)).map(|e| e.1);
                    prop_assert_eq!(prev, m.insert(k, v));
                }
                Op::RemoveHash(k) => {
                    let k = format!("key:{k}").into_bytes();
                    let h = d.hash(&k);
                    let got = d.remove_hash_where(h, |e| e.0 == k).map(|e| e.1);
                    prop_assert_eq!(got, m.remove(&k));
                }
            }
            prop_assert_eq!(d.len(), m.len());
        }
        check_invariants(&d);
        for (k, v) in &m {
            prop_assert_eq!(d.get(d.hash(k), k).map(|e| e.1), Some(*v));
        }
        let all: HashMap<Vec<u8>, u32> = d.iter().map(|e| (e.0.clone(), e.1)).collect();
        prop_assert_eq!(&all, &m);
        // A full scan returns every key.
        let mut seen = HashSet::new();
        let mut c = 0;
        loop {
            c = d.scan(c, |e| {
                seen.insert(e.0.clone());
            });
            if c == 0 {
                break;
            }
        }
        prop_assert_eq!(seen.len(), m.len());
        Ok(())
    }

    /// A published hint names the live table through every resize, take and swap.
    #[test]
    fn hints_follow_the_live_table() {
        fn check<const IN: bool>() {
            let all: Arc<[SlotsHint]> = (0..2).map(|_| SlotsHint::default()).collect();
            let published = |d: &Dict<E<IN>, H>, at: usize| {
                let h = &all[at];
                assert_eq!(
                    h.slots.load(Ordering::Relaxed),
                    d.main.slots.as_ptr().addr()
                );
                assert_eq!(h.capacity.load(Ordering::Relaxed), d.main.capacity());
                assert_eq!(
                    h.table.load(Ordering::Relaxed),
                    std::ptr::from_ref(&d.main).addr()
                );
            };
            let mut a = dict::<IN>();
            let mut b = dict::<IN>();
            a.publish_to(HintRef {
                all: all.clone(),
                at: 0,
            });
            b.publish_to(HintRef {
                all: all.clone(),
                at: 1,
            });
            for i in 0..5_000u32 {
                put(&mut a, format!("k{i}").as_bytes(), i);
                published(&a, 0);
            }
            for i in 0..4_900u32 {
                let k = format!("k{i}");
                let h = a.hash(k.as_bytes());
                a.remove(h, k.as_bytes());
                published(&a, 0);
            }
            a.swap(&mut b);
            published(&a, 0);
            published(&b, 1);
            assert_eq!((a.len(), b.len()), (0, 100));
            let taken = b.take();
            published(&b, 1);
            assert_eq!((taken.len(), b.len()), (100, 0));
        }
        both!(check);
    }

    /// The entry a lookahead prefetches is the one the lookup compares first: the
    /// key's own, or one with the same tag before it.
    #[test]
    fn candidates_are_what_lookups_read_first() {
        let mut d = dict::<true>();
        for i in 0..20_000u32 {
            put(&mut d, format!("key:{i}").as_bytes(), i);
        }
        while d.rehash_some(1 << 20) {}
        let mut own = 0;
        for i in 0..20_000u32 {
            let k = format!("key:{i}");
            let h = d.hash(k.as_bytes());
            let c = d.candidate_addr(h).expect("a present key has a candidate");
            if c == i as usize {
                own += 1;
            } else {
                let other = format!("key:{c}");
                assert_eq!(tag(d.hash(other.as_bytes())), tag(h));
            }
        }
        assert!(own > 19_500, "{own}");
        // A table that keeps its tags apart gives none.
        let mut apart = dict::<false>();
        put(&mut apart, b"k", 1);
        assert_eq!(apart.candidate_addr(apart.hash(b"k")), None);
    }
}
