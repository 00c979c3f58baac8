//! `Pair`: a hash's field and value in one allocation behind a thin pointer that
//! carries its table slot's marks.
//!
//! # Invariants
//!
//! - `Pair::ptr`, its marks masked off (`Pair::base`), is an allocation of
//!   `PAIR_ALIGN` alignment holding the field's length and the value's (LEB128),
//!   the field and the value, and nothing else: its size is read from the lengths.
//! - The marks (see [`crate::marks`]) are the table's alone: only `DictEntry`'s
//!   methods set them, and a pair made to replace another takes them over.
//!
//! This and `entry` are the keyspace's only `unsafe` code; the tests below run under
//! Miri.

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::dict::DictEntry;
use crate::entry::read_varint;
use crate::marks::{self, Marked};
use crate::pack::{varint_len, write_varint};

/// A field and its value in one allocation: the field's length and the value's
/// (LEB128), the field, the value. The handle is one pointer, which carries the
/// table's marks for the pair's slot as a keyspace entry's does (the tag in its top
/// bits, the distance in the low bits its alignment leaves zero; see
/// [`crate::entry`]): the table needs no control bytes, a slot is 8 bytes, and a
/// lookup reads the slot and then the pair, not a control byte, a slot and the pair.
pub(crate) struct Pair {
    ptr: Marked,
}

// SAFETY: a pair owns its allocation exclusively, like a `Box<[u8]>`.
unsafe impl Send for Pair {}
// SAFETY: as above; `&Pair` only reads the bytes it owns.
unsafe impl Sync for Pair {}

/// The alignment of a pair's allocation: four low address bits for the distance
/// mark. (jemalloc aligns every size class from 16 bytes up to 16 anyway.)
const PAIR_ALIGN: usize = 16;
const _: () = assert!(PAIR_ALIGN > marks::DIST_MASK);

fn pair_layout(size: usize) -> Layout {
    // Sizes come from fields and values that exist in memory, far below isize::MAX.
    Layout::from_size_align(size, PAIR_ALIGN).expect("pair size overflows a layout")
}

impl Pair {
    pub(crate) fn new(field: &[u8], value: &[u8]) -> Pair {
        let head = varint_len(field.len()) + varint_len(value.len());
        let size = head + field.len() + value.len();
        let layout = pair_layout(size);
        // SAFETY: `size` is at least 2 (two lengths), so the layout is not
        // zero-sized.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        let mut lengths = [0u8; 20];
        let a = write_varint(&mut lengths, field.len());
        let n = a + write_varint(&mut lengths[a..], value.len());
        // SAFETY: the allocation is `size` bytes long: the `n` bytes of the
        // lengths, the field's and the value's, written one after the other.
        unsafe {
            std::ptr::copy_nonoverlapping(lengths.as_ptr(), raw, n);
            std::ptr::copy_nonoverlapping(field.as_ptr(), raw.add(n), field.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), raw.add(n + field.len()), value.len());
        }
        Pair {
            ptr: Marked::new(ptr),
        }
    }

    /// The allocation's address: the pointer without the table's marks.
    #[inline(always)]
    fn base(&self) -> *mut u8 {
        self.ptr.base()
    }

    /// Where the field starts, and the field's and the value's lengths.
    #[inline]
    fn parts(&self) -> (usize, usize, usize) {
        // SAFETY: a pair starts with its two lengths (see `Pair::new`).
        unsafe {
            let p = self.base();
            let (field, a) = read_varint(p);
            let (value, b) = read_varint(p.add(a));
            (a + b, field, value)
        }
    }

    #[inline]
    pub(crate) fn field(&self) -> &[u8] {
        let (at, field, _) = self.parts();
        // SAFETY: the field's bytes follow the lengths (see `Pair::new`).
        unsafe { std::slice::from_raw_parts(self.base().add(at), field) }
    }

    #[inline]
    pub(crate) fn value(&self) -> &[u8] {
        let (at, field, value) = self.parts();
        // SAFETY: the value's bytes follow the field's (see `Pair::new`).
        unsafe { std::slice::from_raw_parts(self.base().add(at + field), value) }
    }

    /// Replaces the value. One of the same length is written over the old one, in
    /// the allocation a lookup has just read, rather than into a new one; a new
    /// pair takes over this one's marks.
    pub(crate) fn set_value(&mut self, value: &[u8]) {
        let (at, field, old) = self.parts();
        if old == value.len() {
            // SAFETY: the value's bytes follow the field's, `old` of them, and
            // `&mut self` owns them.
            let bytes = unsafe { std::slice::from_raw_parts_mut(self.base().add(at + field), old) };
            bytes.copy_from_slice(value);
            return;
        }
        let mut new = Pair::new(self.field(), value);
        self.ptr.lend_marks(&mut new.ptr);
        *self = new;
    }

    /// Bytes of the allocation.
    pub(crate) fn heap_size(&self) -> usize {
        let (at, field, value) = self.parts();
        at + field + value
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let size = self.heap_size();
        // SAFETY: the allocation was made by `Pair::new` with this size and
        // alignment.
        unsafe { alloc::dealloc(self.base(), pair_layout(size)) };
    }
}

impl DictEntry for Pair {
    #[inline]
    fn key(&self) -> &[u8] {
        self.field()
    }

    const TAGS_INSIDE: bool = marks::TAGGED;

    #[inline]
    fn slot_tag(&self) -> u8 {
        self.ptr.tag()
    }

    #[inline]
    fn set_slot_tag(&mut self, tag: u8) {
        self.ptr.set_tag(tag);
    }

    #[inline]
    fn slot_dist(&self) -> u8 {
        self.ptr.dist()
    }

    #[inline]
    fn set_slot_dist(&mut self, mark: u8) {
        self.ptr.set_dist(mark);
    }

    #[inline]
    fn addr(&self) -> Option<usize> {
        Some(self.base().addr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KeyHasher;
    use crate::dict::Dict;

    #[test]
    fn pairs_round_trip() {
        for (f, v) in [
            (0usize, 0usize),
            (1, 0),
            (127, 3),
            (128, 1),
            (5, 200),
            (20_000, 5),
        ] {
            let field = vec![b'f'; f];
            let value = vec![b'v'; v];
            let p = Pair::new(&field, &value);
            assert_eq!(p.field(), &field[..]);
            assert_eq!(p.value(), &value[..]);
            assert_eq!(p.heap_size(), varint_len(f) + varint_len(v) + f + v);
            assert_eq!(p.base().addr() % PAIR_ALIGN, 0);
        }
    }

    /// The table's marks ride in the pointer: reads see through them, and a new
    /// value keeps them, whether written in place or into a new allocation.
    #[test]
    fn the_slot_marks_ride_along() {
        let mut p = Pair::new(b"field", b"abc");
        assert_eq!((p.slot_tag(), p.slot_dist()), (0, 0));
        p.set_slot_tag(0x5a);
        p.set_slot_dist(0xf);
        let inside = |m: u8| if Pair::TAGS_INSIDE { m } else { 0 };
        let marks = (inside(0x5a), inside(0xf));
        assert_eq!((p.slot_tag(), p.slot_dist()), marks);
        assert_eq!((p.field(), p.value()), (&b"field"[..], &b"abc"[..]));
        let at = p.base();
        p.set_value(b"xyz");
        assert_eq!(p.base(), at, "the same length is written in place");
        assert_eq!((p.slot_tag(), p.slot_dist()), marks);
        p.set_value(&[b'v'; 300]);
        assert_eq!((p.slot_tag(), p.slot_dist()), marks);
        assert_eq!((p.field(), p.value()), (&b"field"[..], &[b'v'; 300][..]));
        assert_eq!(p.heap_size(), 1 + 2 + 5 + 300);
        // Each mark is set without touching the other.
        p.set_slot_tag(0x7f);
        p.set_slot_dist(3);
        assert_eq!((p.slot_tag(), p.slot_dist()), (inside(0x7f), inside(3)));
        assert_eq!(p.key(), b"field");
    }

    /// A look-ahead's two steps aim at the right memory: once the table has
    /// settled, the entry a lookup will compare first is the field's own for all
    /// but the rare field another one's tag shadows, and the hints themselves
    /// neither fail nor change anything, resizing or not. The hasher's seed is
    /// fixed, so the count is the same on every run (198 of the 200 fields of a
    /// Miri run, 19,802 of 20,000 otherwise): with a random one, the 200 fields left
    /// 193 to 200 in their own place (3,000 seeds), under the bound about once in a
    /// hundred runs.
    #[test]
    fn lookups_are_prefetched_where_they_will_read() {
        let mut dict = Dict::with_hasher(foldhash::fast::FixedState::with_seed(0x5eed));
        let n = if cfg!(miri) { 200 } else { 20_000 };
        let field = |i: usize| format!("element:{i}").into_bytes();
        dict.prefetch_lookup(dict.hash(b"none"), false);
        dict.prefetch_lookup(dict.hash(b"none"), true);
        for i in 0..n {
            let f = field(i);
            let h = dict.hash(&f);
            dict.prefetch_lookup(h, false);
            dict.prefetch_lookup(h, true);
            dict.insert(h, Pair::new(&f, b"v"));
        }
        while dict.rehash_some(1024) {}
        let own = (0..n)
            .filter(|&i| {
                let f = field(i);
                let h = dict.hash(&f);
                let pair = dict.get(h, &f).expect("present");
                dict.candidate_addr(h) == Some(pair.base().addr())
            })
            .count();
        assert!(own * 100 >= n * 98, "{own} of {n}");
        assert_eq!(dict.len(), n);
    }

    /// Pairs in a table that grows, drains, has values replaced and fields removed:
    /// every pair is found with its value, and every allocation is freed (Miri
    /// checks the frees).
    #[test]
    fn a_table_of_pairs() {
        let mut dict: Dict<Pair, KeyHasher> = Dict::with_hasher(KeyHasher::default());
        let n = if cfg!(miri) { 300 } else { 5_000 };
        let field = |i: usize| format!("field:{i}").into_bytes();
        for i in 0..n {
            let f = field(i);
            let h = dict.hash(&f);
            dict.insert(h, Pair::new(&f, &i.to_le_bytes()));
        }
        for i in (0..n).step_by(3) {
            let f = field(i);
            let h = dict.hash(&f);
            let p = dict.get_mut(h, &f).expect("present");
            p.set_value(format!("value:{i}").as_bytes());
        }
        for i in (0..n).step_by(5) {
            let f = field(i);
            let h = dict.hash(&f);
            assert!(dict.remove(h, &f).is_some());
        }
        assert_eq!(dict.len(), n - n.div_ceil(5));
        for i in 0..n {
            let f = field(i);
            let h = dict.hash(&f);
            let got = dict.get(h, &f).map(Pair::value);
            let want = if i % 5 == 0 {
                None
            } else if i % 3 == 0 {
                Some(format!("value:{i}").into_bytes())
            } else {
                Some(i.to_le_bytes().to_vec())
            };
            assert_eq!(got.map(<[u8]>::to_vec), want, "field {i}");
        }
    }
}
