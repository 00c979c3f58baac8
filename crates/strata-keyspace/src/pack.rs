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
//!   element count beside the buffer (24 bytes). Lists use it: RPOP and LINDEX -1 on
//!   a node of 8 KiB walk from the end, and index operations skip whole nodes by
//!   their counts.
//! - [`Forward`] ([`ForwardPack`]): no back sizes and no count (16 bytes). Hashes and
//!   sorted sets use it: they are read front to back, and are small (Redis's
//!   `*-max-listpack-entries`), so counting means a walk of at most a few hundred
//!   elements. An element costs one byte of framing less, which for a hash of five
//!   short fields is the difference between jemalloc's 64-byte and 48-byte size
//!   classes; and a 16-byte handle lets a hash or sorted set share the key's entry
//!   with the store's location of its record (see `db::Entry`). A forward pack
//!   still walks backwards when asked, by scanning from its front (O(n) a step).
//!
//! The buffer is always exactly as long as its contents, as Redis's listpack is: every
//! change reallocates it to its new size (in place while the allocator's size class
//! allows, which is most of the time), so a pack is 24 bytes (pointer, length, count)
//! and never holds spare capacity. Changes in the middle move the bytes after them
//! (`memmove`), which is why callers bound a pack's size (Redis's
//! `list-max-listpack-size` and friends).
//!
//! # Invariants
//!
//! - `buf` is exactly a concatenation of well-formed elements and `len` counts them.
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

/// An element count kept beside a pack's buffer, or none.
pub trait Count: Copy + Default + PartialEq + Eq {
    /// The count, if kept.
    fn get(self) -> Option<usize>;
    /// Sets the count (a no-op if none is kept).
    fn set(&mut self, n: usize);
}

/// A kept count.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept(u32);

impl Count for Kept {
    #[inline]
    fn get(self) -> Option<usize> {
        Some(self.0 as usize)
    }
    #[inline]
    fn set(&mut self, n: usize) {
        self.0 = n as u32;
    }
}

/// No count: it is found by walking the buffer.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Walked;

impl Count for Walked {
    #[inline]
    fn get(self) -> Option<usize> {
        None
    }
    #[inline]
    fn set(&mut self, _n: usize) {}
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
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Pack<F: Frame = Both> {
    buf: Box<[u8]>,
    count: F::Count,
}

/// A pack walked from its front only, without a kept count (see the module docs).
pub type ForwardPack = Pack<Forward>;

fn varint_len(mut n: usize) -> usize {
    let mut k = 1;
    while n >= 0x80 {
        n >>= 7;
        k += 1;
    }
    k
}

fn write_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
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
/// stops at the byte without the flag.
fn write_back(out: &mut Vec<u8>, n: usize) {
    let k = varint_len(n);
    for i in (0..k).rev() {
        let chunk = ((n >> (7 * i)) & 0x7f) as u8;
        out.push(if i == k - 1 { chunk } else { chunk | 0x80 });
    }
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
        let len = parts.iter().map(|p| p.len()).sum();
        write_varint(out, len);
        for p in parts {
            out.extend_from_slice(p);
        }
        if Self::BACK {
            write_back(out, varint_len(len) + len);
        }
    }

    /// Number of elements: kept, or counted by walking the pack (O(n)).
    #[inline]
    pub fn len(&self) -> usize {
        match self.count.get() {
            Some(n) => n,
            None => self.count_between(0, self.buf.len()),
        }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes of encoded data.
    pub fn bytes_len(&self) -> usize {
        self.buf.len()
    }

    /// Bytes allocated.
    pub fn heap_size(&self) -> usize {
        self.buf.len()
    }

    /// The element starting at `at` (an element start, as [`Pack::offset_of`] gives
    /// or a walk from 0 reaches), and the offset just past it.
    #[inline]
    pub fn element_at(&self, at: usize) -> (&[u8], usize) {
        let (n, h) = read_varint(&self.buf, at);
        let start = at + h;
        let end = start + n;
        if Self::BACK {
            (&self.buf[start..end], end + varint_len(h + n))
        } else {
            (&self.buf[start..end], end)
        }
    }

    /// The start of the element that ends just before `end`, for a walk that has not
    /// gone before element start `from`: read from the element's back, or found by
    /// scanning forwards from `from`.
    #[inline]
    fn start_before(&self, from: usize, end: usize) -> usize {
        if Self::BACK {
            let (size, b) = read_back(&self.buf, end);
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

    /// Applies `f` to the buffer as a vector with room for `extra` more bytes, then
    /// gives the buffer back its exact size.
    #[inline]
    fn edit<R>(&mut self, extra: usize, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let mut buf = std::mem::take(&mut self.buf).into_vec();
        buf.reserve_exact(extra);
        let r = f(&mut buf);
        self.buf = buf.into_boxed_slice();
        r
    }

    pub fn push_back(&mut self, bytes: &[u8]) {
        self.push_back_parts(&[bytes]);
    }

    /// Appends one element made of `parts`, concatenated.
    pub fn push_back_parts(&mut self, parts: &[&[u8]]) {
        self.edit(Self::encoded_len_of(parts), |buf| Self::encode(buf, parts));
        self.recount(|n| n + 1);
    }

    pub fn push_front(&mut self, bytes: &[u8]) {
        self.insert_at_offset(0, &[bytes]);
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

    pub fn pop_front(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let (e, next) = self.element_at(0);
        let v = e.to_vec();
        self.edit(0, |buf| drop(buf.drain(..next)));
        self.recount(|n| n - 1);
        Some(v)
    }

    pub fn pop_back(&mut self) -> Option<Vec<u8>> {
        if self.is_empty() {
            return None;
        }
        let start = self.start_before(0, self.buf.len());
        let (e, _) = self.element_at(start);
        let v = e.to_vec();
        self.edit(0, |buf| buf.truncate(start));
        self.recount(|n| n - 1);
        Some(v)
    }

    pub fn first(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.element_at(0).0)
    }

    pub fn last(&self) -> Option<&[u8]> {
        (!self.is_empty()).then(|| self.element_at(self.start_before(0, self.buf.len())).0)
    }

    /// The byte offset of element `index`, walking from the nearer end (from the
    /// front only, without back sizes).
    pub fn offset_of(&self, index: usize) -> Option<usize> {
        if !Self::BACK {
            let mut at = 0;
            for _ in 0..index {
                if at >= self.buf.len() {
                    return None;
                }
                at = self.element_at(at).1;
            }
            return (at < self.buf.len()).then_some(at);
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
            let mut end = self.buf.len();
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
        while removed < count && end < self.buf.len() {
            end = self.element_at(end).1;
            removed += 1;
        }
        self.edit(0, |buf| drop(buf.drain(start..end)));
        self.recount(|n| n - removed);
    }

    /// Keeps the elements for which `keep` is true, in one pass.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let mut out = Vec::with_capacity(self.buf.len());
        let mut kept = 0;
        let mut at = 0;
        while at < self.buf.len() {
            let (e, next) = self.element_at(at);
            if keep(e) {
                out.extend_from_slice(&self.buf[at..next]);
                kept += 1;
            }
            at = next;
        }
        self.buf = out.into_boxed_slice();
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
        self.edit(other.buf.len(), |buf| buf.extend_from_slice(&other.buf));
        let added = other.count.get().unwrap_or(0);
        self.recount(|n| n + added);
    }

    /// The elements, front to back (and back to front with `.rev()`: O(n) a step
    /// without back sizes).
    pub fn iter(&self) -> Iter<'_, F> {
        Iter {
            pack: self,
            front: 0,
            back: self.buf.len(),
            remaining: self.count.get(),
        }
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
