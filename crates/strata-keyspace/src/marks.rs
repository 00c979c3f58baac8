//! The marks a table with tags inside ([`crate::dict::DictEntry::TAGS_INSIDE`])
//! keeps in its entries' pointers: the slot's tag in the pointer's top seven bits,
//! and its distance mark in the four low bits a 16-byte alignment leaves zero; on
//! 64-bit x86 and ARM, where user-space addresses are below 2^57. The keyspace's
//! entries and a hash's pairs are such pointers ([`Marked`]); every access to
//! what they point at masks the marks off ([`Marked::base`]).

use std::num::NonZeroUsize;
use std::ptr::NonNull;

/// Whether pointers carry the marks.
pub(crate) const TAGGED: bool = cfg!(all(
    target_pointer_width = "64",
    any(target_arch = "x86_64", target_arch = "aarch64")
));
/// Where the tag starts, and the address bits: those below it and above the mark.
const TAG_SHIFT: u32 = if TAGGED { 57 } else { 0 };
pub(crate) const DIST_MASK: usize = if TAGGED { 15 } else { 0 };
const ADDRESS: usize = if TAGGED {
    ((1 << TAG_SHIFT) - 1) & !DIST_MASK
} else {
    usize::MAX
};

/// A pointer to an allocation aligned to more than [`DIST_MASK`], carrying its
/// table slot's marks. Owns nothing itself: its holder owns the allocation.
pub(crate) struct Marked(NonNull<u8>);

impl Marked {
    /// A fresh allocation's pointer, without marks.
    #[inline]
    pub(crate) fn new(ptr: NonNull<u8>) -> Marked {
        debug_assert_eq!(
            ptr.as_ptr().addr() & !ADDRESS,
            0,
            "an address with its top or low bits set"
        );
        Marked(ptr)
    }

    /// The allocation's address: the pointer without the marks.
    #[inline(always)]
    pub(crate) fn base(&self) -> *mut u8 {
        self.0.as_ptr().map_addr(|a| a & ADDRESS)
    }

    /// Points at `ptr` (the same allocation moved, or one that takes its place),
    /// keeping the marks.
    #[inline]
    pub(crate) fn move_to(&mut self, ptr: NonNull<u8>) {
        let marks = self.marks();
        *self = Marked::new(ptr);
        self.set_marks(marks);
    }

    /// Gives `other` this pointer's marks (for what takes its place in the table).
    #[inline]
    pub(crate) fn lend_marks(&self, other: &mut Marked) {
        other.set_marks(self.marks());
    }

    /// The seven bits of hash [`Marked::set_tag`] stored; 0 if none.
    #[inline]
    pub(crate) fn tag(&self) -> u8 {
        if TAGGED {
            (self.0.as_ptr().addr() >> TAG_SHIFT) as u8
        } else {
            0
        }
    }

    #[inline]
    pub(crate) fn set_tag(&mut self, tag: u8) {
        if TAGGED {
            let bits = usize::from(tag & 0x7f) << TAG_SHIFT;
            self.set_marks(self.marks() & DIST_MASK | bits);
        }
    }

    /// The distance mark [`Marked::set_dist`] stored; 0 if none.
    #[inline]
    pub(crate) fn dist(&self) -> u8 {
        (self.0.as_ptr().addr() & DIST_MASK) as u8
    }

    #[inline]
    pub(crate) fn set_dist(&mut self, mark: u8) {
        if TAGGED {
            let bits = usize::from(mark) & DIST_MASK;
            self.set_marks(self.marks() & !DIST_MASK | bits);
        }
    }

    /// The marks (tag and distance): the pointer's bits outside `ADDRESS`.
    #[inline]
    fn marks(&self) -> usize {
        self.0.as_ptr().addr() & !ADDRESS
    }

    /// Replaces the marks with `marks` (bits outside `ADDRESS` only).
    #[inline]
    fn set_marks(&mut self, marks: usize) {
        debug_assert_eq!(marks & ADDRESS, 0);
        // The address is not 0, so neither is the result (the fallback is never
        // taken).
        self.0 = self
            .0
            .map_addr(|a| NonZeroUsize::new(a.get() & ADDRESS | marks).unwrap_or(a));
    }
}
