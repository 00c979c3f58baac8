//! `Pack`: a sequence of byte strings packed into one allocation — strata's listpack.
//!
//! Small collections (short lists and the nodes of long ones, small hashes and sorted
//! sets) live in a `Pack` instead of one allocation per element. Each element costs
//! its bytes plus one to ten bytes of framing:
//!
//! ```text
//! | len (LEB128, 1-5 B) | bytes (len B) | back (1-5 B, framing `Both` only) |
//! ```
//!
//! `back` is the size of `len` + `bytes` written so that it reads backwards (the last
//! byte holds the lowest seven bits; every byte but the first carries a continuation
//! flag), so a reader at the end of an element can find its start.
//!
//! Two framings ([`Frame`]):
//!
//! - [`Both`] (`Pack`): elements end with their back size and the pack keeps its
//!   element count and the sizes of its free room beside the buffer (24 bytes).
//!   Lists use it: RPOP and LINDEX -1 on a node of 8 KiB walk from the end, and
//!   index operations skip whole nodes by their counts.
//! - [`Forward`] ([`ForwardPack`]): no back sizes and no count (16 bytes). Hashes and
//!   sorted sets use it: they are read front to back, and are small (Redis's
//!   `*-max-listpack-entries`), so counting means a walk of at most a few hundred
//!   elements. An element costs one byte of framing less, which for a hash of five
//!   short fields is the difference between jemalloc's 64-byte and 48-byte size
//!   classes; and a 16-byte handle lets a hash or sorted set share the key's entry
//!   with the store's location of its record (see `db::Entry`). A forward pack
//!   still walks backwards when asked, by scanning from its front (O(n) a step).
//!
//! The buffer is as long as its contents, as Redis's listpack is: every change
//! reallocates it to its new size (in place while the allocator's size class allows,
//! which is most of the time). Changes in the middle move the bytes after them
//! (`memmove`), which is why callers bound a pack's size (Redis's
//! `list-max-listpack-size` and friends). One exception, for lists (framing `Both`):
//! a pack of [`ROOM_MIN`] bytes or more keeps free room before its first element
//! while elements are pushed or popped there, and after its last one likewise, so
//! that a hot list's head node is not moved whole by every LPUSH or LPOP, nor its
//! tail node reallocated by every RPUSH (see [`Pack::push_front`],
//! [`Pack::pop_front`]). Any other change gives the room up; a list gives it up
//! too when a node stops being its head or tail.
//!
//! # Invariants
//!
//! - `buf` is free room (`count.front()` bytes), exactly a concatenation of
//!   well-formed elements, and free room (`count.back()` bytes); `len` counts the
//!   elements. Only framing `Both` has room.
//! - Room is at most [`ROOM_LIMIT`] bytes at each end: at most what one push needed
//!   plus [`ROOM_MAX`], or, after pops, at most the size of the elements left.
//! - Offsets handed out by [`Pack::offset_of`] are element starts, valid until the
//!   next change.

/// How a pack frames its elements and whether it keeps their count.
pub trait Frame: Clone + Default + PartialEq + Eq {
    /// Whether each element also ends with its size, so that the pack can be walked
    /// from its end.
    const BACK: bool;
    /// The element count kept beside the buffer, if any.
    type Count: Count;
}

/// What a pack keeps beside its buffer: the element count and the free room at
/// either end of the buffer, or none of them.
pub trait Count: Copy + Default + PartialEq + Eq {
    /// Whether the buffer may have free room at its ends (see [`Pack::push_front`]).
    const ROOM: bool;
    /// The count, if kept.
    fn get(self) -> Option<usize>;
    /// Sets the count (a no-op if none is kept).
    fn set(&mut self, n: usize);
    /// Free bytes before the first element (0 without room).
    fn front(self) -> usize;
    /// Free bytes after the last element (0 without room).
    fn back(self) -> usize;
    /// Sets the free bytes before the first element: at most [`ROOM_LIMIT`]
    /// (a no-op without room, where there are none).
    fn set_front(&mut self, n: usize);
    /// Sets the free bytes after the last element, as `set_front`.
    fn set_back(&mut self, n: usize);
}

/// The most free room a pack keeps at either end.
pub const ROOM_LIMIT: usize = u16::MAX as usize;

/// A kept count, and the free room at each end of the buffer.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept {
    n: u32,
    front: u16,
    back: u16,
}

impl Count for Kept {
    const ROOM: bool = true;
    #[inline]
    fn get(self) -> Option<usize> {
        Some(self.n as usize)
    }
    #[inline]
    fn set(&mut self, n: usize) {
        self.n = n as u32;
    }
    #[inline]
    fn front(self) -> usize {
        self.front as usize
    }
    #[inline]
    fn back(self) -> usize {
        self.back as usize
    }
    #[inline]
    fn set_front(&mut self, n: usize) {
        debug_assert!(n <= ROOM_LIMIT);
        self.front = n as u16;
    }
    #[inline]
    fn set_back(&mut self, n: usize) {
        debug_assert!(n <= ROOM_LIMIT);
        self.back = n as u16;
    }
}

/// No count: it is found by walking the buffer.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Walked;

impl Count for Walked {
    const ROOM: bool = false;
    #[inline]
    fn get(self) -> Option<usize> {
        None
    }
    #[inline]
    fn set(&mut self, _n: usize) {}
    #[inline]
    fn front(self) -> usize {
        0
    }
    #[inline]
    fn back(self) -> usize {
        0
    }
    #[inline]
    fn set_front(&mut self, _n: usize) {}
    #[inline]
    fn set_back(&mut self, _n: usize) {}
}

/// Back sizes and a kept count (lists).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Both;

impl Frame for Both {
    const BACK: bool = true;
    type Count = Kept;
}

/// Front to back only, no count (hashes, sorted sets).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Forward;

impl Frame for Forward {
    const BACK: bool = false;
    type Count = Walked;
}

/// A packed sequence of byte strings, framed as `F` says.
#[derive(Clone, Default)]
pub struct Pack<F: Frame = Both> {
    /// Free room (`count.front()` bytes, framing `Both` only), the elements, free
    /// room (`count.back()` bytes).
    buf: Box<[u8]>,
    count: F::Count,
}

/// Packs are equal when their elements are, whatever room they keep.
impl<F: Frame> PartialEq for Pack<F> {
    fn eq(&self, other: &Self) -> bool {
        self.data() == other.data() && self.count.get() == other.count.get()
    }
}

impl<F: Frame> Eq for Pack<F> {}

/// Below this many bytes a pack keeps no free room: moving or reallocating its
/// bytes costs less than the room would.
pub const ROOM_MIN: usize = 512;

/// At most this much room is made at an end beyond what one push needs.
pub const ROOM_MAX: usize = 2048;

/// A pack walked from its front only, without a kept count (see the module docs).
pub type ForwardPack = Pack<Forward>;

/// The bytes `n` takes as LEB128.
pub(crate) fn varint_len(mut n: usize) -> usize {
    let mut k = 1;
    while n >= 0x80 {
        n >>= 7;
        k += 1;
    }
    k
}

/// Writes `n` as a LEB128 varint at the start of `out`; returns the bytes used.
pub(crate) fn write_varint(out: &mut [u8], mut n: usize) -> usize {
    let mut at = 0;
    while n >= 0x80 {
        out[at] = (n as u8 & 0x7f) | 0x80;
        n >>= 7;
        at += 1;
    }
    out[at] = n as u8;
    at + 1
}

/// The element of `data` whose length starts at `at`, and the offset just past its
/// bytes (its back size, with framing `Both`, follows).
#[inline]
pub(crate) fn element_at(data: &[u8], at: usize) -> (&[u8], usize) {
    let (n, h) = read_varint(data, at);
    let start = at + h;
    (&data[start..start + n], start + n)
}

/// Reads a LEB128 varint at `at`; returns (value, bytes used).
fn read_varint(buf: &[u8], at: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = at;
    loop {
        let b = buf[i];
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b & 0x80 == 0 {
            return (n, i - at);
        }
        shift += 7;
    }
}

/// Writes `n` so that it can be read backwards from its last byte: most significant
/// seven bits first, and every byte but the first flagged, so a reader walking back
/// stops at the byte without the flag. Writes at the start of `out`; returns the
/// bytes used.
fn write_back(out: &mut [u8], n: usize) -> usize {
    let k = varint_len(n);
    for (at, i) in (0..k).rev().enumerate() {
        let chunk = ((n >> (7 * i)) & 0x7f) as u8;
        out[at] = if i == k - 1 { chunk } else { chunk | 0x80 };
    }
    k
}

/// Reads a backwards varint ending just before `end`; returns (value, bytes used).
fn read_back(buf: &[u8], end: usize) -> (usize, usize) {
    let mut n = 0usize;
    let mut shift = 0;
    let mut i = end;
    loop {
        i -= 1;
        let b = buf[i];
        n |= ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return (n, end - i);
        }
    }
}

impl<F: Frame> Pack<F> {
    const BACK: bool = F::BACK;

    pub fn new() -> Self {
        Self::default()
    }

    /// The elements' bytes (the buffer without its free room).
    #[inline]
    fn data(&self) -> &[u8] {
        &self.buf[self.count.front()..self.buf.len() - self.count.back()]
    }

    /// Applies `f` to the kept count, if there is one.
    #[inline]
    fn recount(&mut self, f: impl FnOnce(usize) -> usize) {
        if let Some(n) = self.count.get() {
            self.count.set(f(n));
        }
    }

    /// The number of elements between byte offsets `from` and `to` (element starts
    /// or the end), by walking.
    fn count_between(&self, from: usize, to: usize) -> usize {
        let (mut at, mut n) = (from, 0);
        while at < to {
            at = self.element_at(at).1;
            n += 1;
        }
        n
    }

    /// Size of the encoded element holding `len` bytes.
    pub fn encoded_len(len: usize) -> usize {
        let h = varint_len(len) + len;
        if Self::BACK { h + varint_len(h) } else { h }
    }

    /// Size of the encoded element made of `parts`, concatenated.
    fn encoded_len_of(parts: &[&[u8]]) -> usize {
        Self::encoded_len(parts.iter().map(|p| p.len()).sum())
    }

    /// Appends to `out` one element made of `parts`, concatenated.
    fn encode(out: &mut Vec<u8>, parts: &[&[u8]]) {
        let start = out.len();
        out.resize(start + Self::encoded_len_of(parts), 0);
        Self::encode_into(&mut out[start..], parts);
    }

    /// Number of elements: kept, or counted by walking the pack (O(n)).
    #[inline]
    pub fn len(&self) -> usize {
        match self.count.get() {
            Some(n) => n,
            None => self.count_between(0, self.bytes_len()),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bytes_len() == 0
    }

    /// Bytes of encoded data.
    #[inline]
    pub fn bytes_len(&self) -> usize {
        self.buf.len() - self.count.front() - self.count.back()
    }

    /// Bytes allocated (with the free room).
    pub fn heap_size(&self) -> usize {
        self.buf.len()
    }

    /// The element starting at `at` (an element start, as [`Pack::offset_of`] gives
    /// or a walk from 0 reaches), and the offset just past it.
    #[inline]
    pub fn element_at(&self, at: usize) -> (&[u8], usize) {
        let (bytes, end) = element_at(self.data(), at);
        if Self::BACK {
            (bytes, end + varint_len(end - at))
        } else {
            (bytes, end)
        }
    }

    /// The start of the element that ends just before `end`, for a walk that has not
    /// gone before element start `from`: read from the element's back, or found by
    /// scanning forwards from `from`.
    #[inline]
    fn start_before(&self, from: usize, end: usize) -> usize {
        if Self::BACK {
            let (size, b) = read_back(self.data(), end);
            return end - b - size;
        }
        let mut at = from;
        loop {
            let next = self.element_at(at).1;
            if next >= end {
                return at;
            }
            at = next;
        }
    }

    /// Applies `f` to the elements' bytes as a vector with room for `extra` more
    /// bytes, then gives the buffer back its exact size (without free room).
    #[inline]
    fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        self.edit_with(false, extra, f)
    }

    /// Like [`Pack::edit`] for a change at the end, which keeps the free room at
    /// the front: `f` sees the buffer up to the last element, that room included.
    #[inline]
    fn edit_back<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        self.edit_with(true, extra, f)
    }

    /// [`Pack::edit`] and [`Pack::edit_back`]: the room at the back is always given
    /// up, the room at the front unless `keep_front`.
    #[inline]
    fn edit_with<R>(
        &mut self,
        keep_front: bool,
        extra: usize,
        f: impl FnOnce(&mut Vec<u8>) -> R,
    ) -> R {
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        buf.truncate(buf.len() - self.count.back());
        self.count.set_back(0);
        if !keep_front {
            buf.drain(..self.count.front());
            self.count.set_front(0);
        }
        buf.reserve_exact(extra);
        let r = f(&mut buf);
        self.buf = buf.into_boxed_slice();
        r
    }

    /// Gives up the free room, if any: the buffer becomes exactly as long as its
    /// elements.
    pub fn trim(&mut self) {
        if self.count.front() > 0 || self.count.back() > 0 {
            self.edit(0, |_| ());
        }
    }

    /// The room to make for a push of `size` bytes at an end that has too little:
    /// none for a small pack (its bytes move, as a listpack's do), else the push
    /// and a quarter of the elements' size (at most [`ROOM_MAX`]); none if that
    /// would pass [`ROOM_LIMIT`].
    #[inline]
    fn room_for(&self, size: usize) -> Option<usize> {
        if !F::Count::ROOM || self.bytes_len() < ROOM_MIN {
            return None;
        }
        let room = size + (self.bytes_len() / 4).min(ROOM_MAX);
        (room <= ROOM_LIMIT).then_some(room)
    }

    /// Moves the elements into a new buffer with `front` free bytes before them
    /// and `back` after them (each at most [`ROOM_LIMIT`]).
    fn regrow(&mut self, front: usize, back: usize) {
        let mut buf = Vec::with_capacity(front + self.bytes_len() + back);
        buf.resize(front, 0);
        buf.extend_from_slice(self.data());
        buf.resize(buf.len() + back, 0);
        self.buf = buf.into_boxed_slice();
        self.count.set_front(front);
        self.count.set_back(back);
    }

    pub fn push_back(&mut self, bytes: &[u8]) {
        self.push_back_parts(&[bytes]);
    }

    /// Appends one element made of `parts`, concatenated. Like
    /// [`Pack::push_front`], a big pack writes it into free room kept after its
    /// last element, so a run of RPUSHes reallocates only when that runs out.
    pub fn push_back_parts(&mut self, parts: &[&[u8]]) {
        let size = Self::encoded_len_of(parts);
        let back = self.count.back();
        if back < size {
            let Some(room) = self.room_for(size) else {
                self.edit_back(size, |buf| Self::encode(buf, parts));
                self.recount(|n| n + 1);
                return;
            };
            self.regrow(self.count.front(), room);
        }
        let back = self.count.back();
        let at = self.buf.len() - back;
        Self::encode_into(&mut self.buf[at..at + size], parts);
        self.count.set_back(back - size);
        self.recount(|n| n + 1);
    }

    /// Puts `bytes` first. A small pack moves its bytes up, as Redis's listpack
    /// does; a pack of [`ROOM_MIN`] bytes or more (a long list's head node) keeps
    /// free room before its first element and writes the new one there, so a run
    /// of LPUSHes moves the node's bytes only when the room runs out: it is then
    /// made a quarter of the node's size (at most [`ROOM_MAX`]), so the bytes moved
    /// per push stay a few times the element's size instead of the whole node.
    pub fn push_front(&mut self, bytes: &[u8]) {
        let size = Self::encoded_len(bytes.len());
        if self.count.front() < size {
            let Some(room) = self.room_for(size) else {
                self.insert_at_offset(0, &[bytes]);
                return;
            };
            self.regrow(room, self.count.back());
        }
        let at = self.count.front() - size;
        Self::encode_into(&mut self.buf[at..at + size], &[bytes]);
        self.count.set_front(at);
        self.recount(|n| n + 1);
    }

    /// Writes the element made of `parts` into `out`, exactly its encoded size.
    fn encode_into(out: &mut [u8], parts: &[&[u8]]) {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut at = write_varint(out, len);
        for p in parts {
            out[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        if Self::BACK {
            at += write_back(&mut out[at..], varint_len(len) + len);
        }
        debug_assert_eq!(at, out.len());
    }

    /// Inserts an element made of `parts` at byte offset `at` (an element start or
    /// the end): encoded at the end of the buffer and rotated into place, which
    /// moves the bytes after `at` once and needs no buffer of its own (LPUSH's path).
    fn insert_at_offset(&mut self, at: usize, parts: &[&[u8]]) {
        let size = Self::encoded_len_of(parts);
        self.edit(size, |buf| {
            Self::encode(buf, parts);
            buf[at..].rotate_right(size);
        });
        self.recount(|n| n + 1);
    }

    /// Whether a pop may leave `room` free bytes at one end of a buffer with
    /// `left` bytes of elements: a big pack keeps room up to the size of what is
    /// left, so the bytes it moves stay proportional to the bytes popped.
    #[inline]
    fn keeps_room(&self, room: usize, left: usize) -> bool {
        F::Count::ROOM && self.buf.len() >= ROOM_MIN && room <= left && room <= ROOM_LIMIT
    }

    /// Takes the first element. A pack of [`ROOM_MIN`] bytes or more (with its free
    /// room) only moves its front past it, until the room outgrows the elements
    /// left; the pack is then cut back to its elements.
    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let (e, next) = self.element_at(0);
        let v = e.to_vec();
        let front = self.count.front() + next;
        if self.keeps_room(front, self.bytes_len() - next) {
            self.count.set_front(front);
        } else {
            self.edit(0, |buf| drop(buf.drain(..next)));
        }
        self.recount(|n| n - 1);
        Some(v)
    }

    /// Takes the last element, keeping free room after the elements as
    /// [`Pack::pop_front`] keeps it before them.
    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let start = self.start_before(0, self.bytes_len());
        let (e, _) = self.element_at(start);
        let v = e.to_vec();
        let back = self.count.back() + self.bytes_len() - start;
        if start == 0 {
            // The last element: give the whole buffer back.
            self.buf = Box::default();
            self.count.set_front(0);
            self.count.set_back(0);
        } else if self.keeps_room(back, start) {
            self.count.set_back(back);
        } else {
            let cut = self.count.front() + start;
            self.edit_back(0, |buf| buf.truncate(cut));
        }
        self.recount(|n| n - 1);
        Some(v)
    }

    pub fn first(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.element_at(0).0)
    }

    pub fn last(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.element_at(self.start_before(0, self.bytes_len())).0)
    }

    /// The byte offset of element `index`, walking from the nearer end (from the
    /// front only, without back sizes).
    pub fn offset_of(&self, index: usize) -> Option<usize> {
        if !Self::BACK {
            let mut at = 0;
            for _ in 0..index {
                if at >= self.bytes_len() {
                    return None;
                }
                at = self.element_at(at).1;
            }
            return (at < self.bytes_len()).then_some(at);
        }
        let len = self.len();
        if index >= len {
            return None;
        }
        if index <= len / 2 {
            let mut at = 0;
            for _ in 0..index {
                at = self.element_at(at).1;
            }
            Some(at)
        } else {
            let mut end = self.bytes_len();
            for _ in 0..(len - index) {
                end = self.start_before(0, end);
            }
            Some(end)
        }
    }

    pub fn get(&self, index: usize) -> Option<&[u8]> {
        self.offset_of(index).map(|at| self.element_at(at).0)
    }

    /// Inserts `bytes` so that it becomes element `index` (at or past the end appends).
    pub fn insert(&mut self, index: usize, bytes: &[u8]) {
        self.insert_parts(index, &[bytes]);
    }

    /// Inserts one element made of `parts`, concatenated, so that it becomes element
    /// `index` (at or past the end appends).
    pub fn insert_parts(&mut self, index: usize, parts: &[&[u8]]) {
        match self.offset_of(index) {
            Some(at) => self.insert_at_offset(at, parts),
            None => self.push_back_parts(parts),
        }
    }

    /// Removes element `index`, returning it.
    pub fn remove(&mut self, index: usize) -> Option<Vec<u8>> {
        let at = self.offset_of(index)?;
        let (e, next) = self.element_at(at);
        let v = e.to_vec();
        self.edit(0, |buf| drop(buf.drain(at..next)));
        self.recount(|n| n - 1);
        Some(v)
    }

    /// Replaces element `index`.
    pub fn replace(&mut self, index: usize, bytes: &[u8]) -> bool {
        let Some(at) = self.offset_of(index) else {
            return false;
        };
        let (_, next) = self.element_at(at);
        let mut enc = Vec::with_capacity(Self::encoded_len(bytes.len()));
        Self::encode(&mut enc, &[bytes]);
        let extra = enc.len().saturating_sub(next - at);
        self.edit(extra, |buf| drop(buf.splice(at..next, enc)));
        true
    }

    /// Removes `count` elements starting at `index`.
    pub fn remove_range(&mut self, index: usize, count: usize) {
        if count == 0 {
            return;
        }
        let Some(start) = self.offset_of(index) else {
            return;
        };
        let (mut end, mut removed) = (start, 0);
        while removed < count && end < self.bytes_len() {
            end = self.element_at(end).1;
            removed += 1;
        }
        self.edit(0, |buf| drop(buf.drain(start..end)));
        self.recount(|n| n - removed);
    }

    /// Keeps the elements for which `keep` is true, in one pass.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let mut out = Vec::with_capacity(self.bytes_len());
        let mut kept = 0;
        let mut at = 0;
        while at < self.bytes_len() {
            let (e, next) = self.element_at(at);
            if keep(e) {
                out.extend_from_slice(&self.data()[at..next]);
                kept += 1;
            }
            at = next;
        }
        self.buf = out.into_boxed_slice();
        self.count.set_front(0);
        self.count.set_back(0);
        self.count.set(kept);
    }

    /// Moves the elements from `index` on into a new pack.
    pub fn split_off(&mut self, index: usize) -> Self {
        match self.offset_of(index) {
            None => Pack::new(),
            Some(at) => {
                let tail = self.edit(0, |buf| buf.split_off(at)).into_boxed_slice();
                let mut moved = F::Count::default();
                if let Some(n) = self.count.get() {
                    moved.set(n - index);
                    self.count.set(index);
                }
                Pack {
                    buf: tail,
                    count: moved,
                }
            }
        }
    }

    /// Appends every element of `other`.
    pub fn append(&mut self, other: &Self) {
        self.edit_back(other.bytes_len(), |buf| buf.extend_from_slice(other.data()));
        let added = other.count.get().unwrap_or(0);
        self.recount(|n| n + added);
    }

    /// The elements, front to back (and back to front with `.rev()`: O(n) a step
    /// without back sizes).
    pub fn iter(&self) -> Iter<'_, F> {
        Iter {
            pack: self,
            front: 0,
            back: self.bytes_len(),
            remaining: self.count.get(),
        }
    }
}

impl ForwardPack {
    /// The encoded elements, which [`ForwardPack::from_bytes`] takes back.
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// A pack holding `bytes`, elements encoded as [`ForwardPack::as_bytes`] gives
    /// them (the framing is trusted: the bytes come from a pack).
    pub fn from_bytes(bytes: &[u8]) -> ForwardPack {
        Pack {
            buf: bytes.into(),
            count: Walked,
        }
    }
}

/// The elements of a forward pack's bytes ([`ForwardPack::as_bytes`]), front to
/// back, read where they lie (a hash's entry holds them, see `entry::Entry`).
#[derive(Clone)]
pub struct Elements<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Elements<'a> {
    #[inline]
    pub fn new(data: &'a [u8]) -> Elements<'a> {
        Elements { data, at: 0 }
    }
}

impl<'a> Iterator for Elements<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.at >= self.data.len() {
            return None;
        }
        let (bytes, end) = element_at(self.data, self.at);
        self.at = end;
        Some(bytes)
    }
}

impl<F: Frame> std::fmt::Debug for Pack<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

impl<'a, F: Frame> IntoIterator for &'a Pack<F> {
    type Item = &'a [u8];
    type IntoIter = Iter<'a, F>;
    fn into_iter(self) -> Iter<'a, F> {
        self.iter()
    }
}

impl<B: AsRef<[u8]>, F: Frame> FromIterator<B> for Pack<F> {
    fn from_iter<I: IntoIterator<Item = B>>(iter: I) -> Self {
        let (mut buf, mut len) = (Vec::new(), 0);
        for b in iter {
            Self::encode(&mut buf, &[b.as_ref()]);
            len += 1;
        }
        let mut count = F::Count::default();
        count.set(len);
        Pack {
            buf: buf.into_boxed_slice(),
            count,
        }
    }
}

/// Iterator over a [`Pack`]'s elements: those between byte offsets `front` and
/// `back`.
pub struct Iter<'a, F: Frame = Both> {
    pack: &'a Pack<F>,
    front: usize,
    back: usize,
    /// How many are left, when the pack keeps its count.
    remaining: Option<usize>,
}

impl<'a, F: Frame> Iterator for Iter<'a, F> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.front >= self.back {
            return None;
        }
        let (e, next) = self.pack.element_at(self.front);
        self.front = next;
        if let Some(n) = &mut self.remaining {
            *n -= 1;
        }
        Some(e)
    }

    /// Exact; without a kept count, found by walking what is left.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self
            .remaining
            .unwrap_or_else(|| self.pack.count_between(self.front, self.back));
        (n, Some(n))
    }
}

impl<F: Frame> DoubleEndedIterator for Iter<'_, F> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        let start = self.pack.start_before(self.front, self.back);
        self.back = start;
        if let Some(n) = &mut self.remaining {
            *n -= 1;
        }
        Some(self.pack.element_at(start).0)
    }
}

impl<F: Frame> ExactSizeIterator for Iter<'_, F> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn framing_round_trips_at_size_boundaries() {
        round_trips_at_size_boundaries::<Both>();
        round_trips_at_size_boundaries::<Forward>();
    }

    fn round_trips_at_size_boundaries<F: Frame>() {
        let mut p = Pack::<F>::new();
        let sizes = [
            0usize, 1, 125, 126, 127, 128, 129, 16_380, 16_383, 16_384, 16_385, 200_000,
        ];
        for &n in &sizes {
            p.push_back(&vec![n as u8; n]);
        }
        let got: Vec<usize> = p.iter().map(|e| e.len()).collect();
        assert_eq!(got, sizes);
        let back: Vec<usize> = p.iter().rev().map(|e| e.len()).collect();
        assert_eq!(back, sizes.iter().rev().copied().collect::<Vec<_>>());
        for (i, &n) in sizes.iter().enumerate() {
            assert_eq!(p.get(i).map(<[u8]>::len), Some(n));
        }
        assert_eq!(
            p.bytes_len(),
            sizes
                .iter()
                .map(|&n| Pack::<F>::encoded_len(n))
                .sum::<usize>()
        );
    }

    #[test]
    fn a_forward_pack_spends_one_byte_an_element_on_framing() {
        // The five-field hash of the memory benchmark: 38 bytes of fields and values
        // fit jemalloc's 48-byte class forward only, its 64-byte one with backs.
        let hash = [
            "name", "alice", "age", "30", "city", "paris", "zip", "75001", "id", "12345",
        ];
        let fwd: ForwardPack = hash.iter().collect();
        let both: Pack = hash.iter().collect();
        assert_eq!(fwd.bytes_len(), 48);
        assert_eq!(both.bytes_len(), 58);
        assert_eq!(std::mem::size_of::<ForwardPack>(), 16);
        assert_eq!(std::mem::size_of::<Pack>(), 24);
        assert_eq!(
            (fwd.len(), fwd.iter().len(), fwd.iter().rev().len()),
            (10, 10, 10)
        );
        let mut parts = ForwardPack::new();
        parts.push_back_parts(&[b"ab", b"", b"cde"]);
        parts.insert_parts(0, &[b"x", b"y"]);
        assert_eq!(parts.iter().collect::<Vec<_>>(), [&b"xy"[..], b"abcde"]);
    }

    #[test]
    fn room_at_either_end_stays_bounded_and_invisible() {
        let mut p = Pack::<Both>::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        let check = |p: &Pack<Both>, m: &VecDeque<Vec<u8>>| {
            let got: Vec<&[u8]> = p.iter().collect();
            let want: Vec<&[u8]> = m.iter().map(Vec::as_slice).collect();
            assert_eq!(got, want);
            assert_eq!(p.len(), m.len());
            let room = p.heap_size() - p.bytes_len();
            assert!(room <= 2 * ROOM_LIMIT, "room {room}");
            let exact: Pack<Both> = m.iter().collect();
            assert_eq!(p, &exact);
        };
        for i in 0..200u32 {
            let e = vec![i as u8; 40 + i as usize % 7];
            if i % 2 == 0 {
                p.push_front(&e);
                m.push_front(e);
            } else {
                p.push_back(&e);
                m.push_back(e);
            }
        }
        assert!(p.heap_size() > p.bytes_len(), "a big pack keeps room");
        check(&p, &m);
        // Elements bigger than the room can ever be go through the exact paths.
        let big = vec![7u8; ROOM_LIMIT + 10];
        p.push_front(&big);
        m.push_front(big.clone());
        p.push_back(&big);
        m.push_back(big);
        check(&p, &m);
        while !m.is_empty() {
            assert_eq!(p.pop_front(), m.pop_front());
            check(&p, &m);
            assert_eq!(p.pop_back(), m.pop_back());
            check(&p, &m);
        }
        assert_eq!(p.heap_size(), 0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        PushBack(Vec<u8>),
        PushFront(Vec<u8>),
        PopBack,
        PopFront,
        Insert(usize, Vec<u8>),
        Remove(usize),
        Replace(usize, Vec<u8>),
        RemoveRange(usize, usize),
        RetainOdd,
        SplitAppend(usize),
    }

    fn bytes() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => proptest::collection::vec(any::<u8>(), 0..20),
            1 => proptest::collection::vec(any::<u8>(), 100..300),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            bytes().prop_map(Op::PushBack),
            bytes().prop_map(Op::PushFront),
            Just(Op::PopBack),
            Just(Op::PopFront),
            (0..40usize, bytes()).prop_map(|(i, b)| Op::Insert(i, b)),
            (0..40usize).prop_map(Op::Remove),
            (0..40usize, bytes()).prop_map(|(i, b)| Op::Replace(i, b)),
            (0..40usize, 0..10usize).prop_map(|(i, n)| Op::RemoveRange(i, n)),
            Just(Op::RetainOdd),
            (0..40usize).prop_map(Op::SplitAppend),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn behaves_like_a_deque(ops in proptest::collection::vec(op(), 1..120)) {
            behaves_like_a_deque_with::<Both>(ops.clone())?;
            behaves_like_a_deque_with::<Forward>(ops)?;
        }
    }

    fn behaves_like_a_deque_with<F: Frame>(
        ops: Vec<Op>,
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        {
            let mut p = Pack::<F>::new();
            let mut m: VecDeque<Vec<u8>> = VecDeque::new();
            for op in ops {
                match op {
                    Op::PushBack(b) => {
                        p.push_back(&b);
                        m.push_back(b);
                    }
                    Op::PushFront(b) => {
                        p.push_front(&b);
                        m.push_front(b);
                    }
                    Op::PopBack => prop_assert_eq!(p.pop_back(), m.pop_back()),
                    Op::PopFront => prop_assert_eq!(p.pop_front(), m.pop_front()),
                    Op::Insert(i, b) => {
                        let i = i.min(m.len());
                        p.insert(i, &b);
                        m.insert(i, b);
                    }
                    Op::Remove(i) => prop_assert_eq!(p.remove(i), m.remove(i)),
                    Op::Replace(i, b) => {
                        let ok = i < m.len();
                        prop_assert_eq!(p.replace(i, &b), ok);
                        if ok {
                            m[i] = b;
                        }
                    }
                    Op::RemoveRange(i, n) => {
                        p.remove_range(i, n);
                        let end = (i + n).min(m.len());
                        if i < end {
                            m.drain(i..end);
                        }
                    }
                    Op::RetainOdd => {
                        p.retain(|e| e.len() % 2 == 1);
                        m.retain(|e| e.len() % 2 == 1);
                    }
                    Op::SplitAppend(i) => {
                        let tail = p.split_off(i);
                        p.append(&tail);
                    }
                }
                prop_assert_eq!(p.len(), m.len());
                let fwd: Vec<&[u8]> = p.iter().collect();
                let want: Vec<&[u8]> = m.iter().map(Vec::as_slice).collect();
                prop_assert_eq!(&fwd, &want);
                let mut rev: Vec<&[u8]> = p.iter().rev().collect();
                rev.reverse();
                prop_assert_eq!(rev, want);
                prop_assert_eq!(p.first(), m.front().map(Vec::as_slice));
                prop_assert_eq!(p.last(), m.back().map(Vec::as_slice));
                for (i, want) in m.iter().enumerate() {
                    prop_assert_eq!(p.get(i), Some(want.as_slice()));
                }
            }
        }
        Ok(())
    }
}
