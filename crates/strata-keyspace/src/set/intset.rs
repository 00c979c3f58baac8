//! `IntSet`: a sorted array of distinct i64 values, stored at the narrowest width that
//! holds them all — Redis's intset.
//!
//! One allocation holds the width (its first byte) and the values, little-endian, 2,
//! 4 or 8 bytes each; adding a value that does not fit the current width re-encodes
//! every element at the wider one (never narrower again, as in Redis). Lookups are
//! binary searches; inserts and removals move the bytes after the change and
//! reallocate to the exact size, so a small set costs its elements, one byte, and
//! nothing more — and an `IntSet` is a single pointer and length.
//!
//! # Invariants
//!
//! - `data[0]` is the width (2, 4 or 8), the rest a multiple of it, and the values
//!   are strictly increasing.

use std::cmp::Ordering;

/// The bytes per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum Width {
    W16 = 2,
    W32 = 4,
    W64 = 8,
}

impl Width {
    fn from_byte(b: u8) -> Width {
        match b {
            4 => Width::W32,
            8 => Width::W64,
            _ => Width::W16,
        }
    }

    fn of(v: i64) -> Width {
        if i16::try_from(v).is_ok() {
            Width::W16
        } else if i32::try_from(v).is_ok() {
            Width::W32
        } else {
            Width::W64
        }
    }

    #[inline]
    fn bytes(self) -> usize {
        self as usize
    }
}

/// A sorted set of integers (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct IntSet {
    /// The width, then the values.
    data: Box<[u8]>,
}

impl Default for IntSet {
    fn default() -> Self {
        IntSet {
            data: Box::new([Width::W16 as u8]),
        }
    }
}

impl IntSet {
    pub fn new() -> IntSet {
        IntSet::default()
    }

    #[inline]
    fn width(&self) -> Width {
        Width::from_byte(self.data.first().copied().unwrap_or_default())
    }

    /// The values' bytes.
    #[inline]
    fn body(&self) -> &[u8] {
        self.data.get(1..).unwrap_or_default()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.body().len() / self.width().bytes()
    }

    pub fn is_empty(&self) -> bool {
        self.body().is_empty()
    }

    /// Bytes allocated.
    pub fn heap_size(&self) -> usize {
        self.data.len()
    }

    /// The element at `index` (in ascending order).
    #[inline]
    pub fn get(&self, index: usize) -> Option<i64> {
        let width = self.width();
        let w = width.bytes();
        let b = self.body().get(index * w..index * w + w)?;
        Some(match width {
            Width::W16 => i16::from_le_bytes([b[0], b[1]]) as i64,
            Width::W32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64,
            Width::W64 => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        })
    }

    /// `Ok(index)` of `v`, or `Err(index)` where it would go.
    fn search(&self, v: i64) -> Result<usize, usize> {
        if Width::of(v) > self.width() {
            // Wider than every element: below them all or above them all.
            return Err(if v < 0 { 0 } else { self.len() });
        }
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid).map(|m| m.cmp(&v)) {
                Some(Ordering::Less) => lo = mid + 1,
                Some(Ordering::Greater) => hi = mid,
                _ => return Ok(mid),
            }
        }
        Err(lo)
    }

    pub fn contains(&self, v: i64) -> bool {
        self.search(v).is_ok()
    }

    fn encode(width: Width, v: i64, out: &mut Vec<u8>) {
        match width {
            Width::W16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            Width::W32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            Width::W64 => out.extend_from_slice(&v.to_le_bytes()),
        }
    }

    /// Adds `v`; returns whether it was absent.
    pub fn insert(&mut self, v: i64) -> bool {
        let Err(at) = self.search(v) else {
            return false;
        };
        let width = self.width().max(Width::of(v));
        let mut out = Vec::with_capacity(1 + (self.len() + 1) * width.bytes());
        out.push(width as u8);
        if width == self.width() {
            let (before, after) = self.body().split_at(at * width.bytes());
            out.extend_from_slice(before);
            Self::encode(width, v, &mut out);
            out.extend_from_slice(after);
        } else {
            for i in 0..self.len() {
                if i == at {
                    Self::encode(width, v, &mut out);
                }
                if let Some(x) = self.get(i) {
                    Self::encode(width, x, &mut out);
                }
            }
            if at == self.len() {
                Self::encode(width, v, &mut out);
            }
        }
        self.data = out.into_boxed_slice();
        true
    }

    /// Removes `v`; returns whether it was present.
    pub fn remove(&mut self, v: i64) -> bool {
        let Ok(at) = self.search(v) else {
            return false;
        };
        let w = self.width().bytes();
        let mut data = std::mem::take(&mut self.data).into_vec();
        data.drain(1 + at * w..1 + at * w + w);
        self.data = data.into_boxed_slice();
        true
    }

    /// Keeps the elements for which `keep` is true, in one pass.
    pub fn retain(&mut self, mut keep: impl FnMut(i64) -> bool) {
        let width = self.width();
        let mut out = Vec::with_capacity(self.data.len());
        out.push(width as u8);
        for v in self.iter() {
            if keep(v) {
                Self::encode(width, v, &mut out);
            }
        }
        self.data = out.into_boxed_slice();
    }

    /// The elements in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = i64> + ExactSizeIterator + '_ {
        (0..self.len()).map(|i| self.get(i).unwrap_or_default())
    }
}

impl std::fmt::Debug for IntSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn is_one_slice() {
        assert_eq!(std::mem::size_of::<IntSet>(), 16);
    }

    #[test]
    fn widens_as_needed() {
        let mut s = IntSet::new();
        assert_eq!(s.heap_size(), 1);
        assert!(s.insert(5));
        assert!(s.insert(-3));
        assert_eq!(s.heap_size(), 1 + 4);
        assert!(s.insert(100_000));
        assert_eq!(s.heap_size(), 1 + 12);
        assert!(s.insert(i64::MIN));
        assert!(s.insert(i64::MAX));
        assert!(!s.insert(5));
        assert_eq!(s.heap_size(), 1 + 40);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            [i64::MIN, -3, 5, 100_000, i64::MAX]
        );
        assert!(s.remove(i64::MIN));
        assert!(!s.remove(i64::MIN));
        assert!(s.contains(100_000) && !s.contains(7));
    }

    fn value() -> impl Strategy<Value = i64> {
        prop_oneof![
            -40i64..40,
            any::<i16>().prop_map(i64::from),
            any::<i32>().prop_map(i64::from),
            any::<i64>(),
            Just(i64::MIN),
            Just(i64::MAX),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn behaves_like_a_btreeset(ops in proptest::collection::vec((any::<u8>(), value()), 1..200)) {
            let mut s = IntSet::new();
            let mut m = BTreeSet::new();
            for (kind, v) in ops {
                match kind % 4 {
                    0 | 1 => prop_assert_eq!(s.insert(v), m.insert(v)),
                    2 => prop_assert_eq!(s.remove(v), m.remove(&v)),
                    _ => {
                        s.retain(|x| x % 3 != 0);
                        m.retain(|x| x % 3 != 0);
                    }
                }
                prop_assert_eq!(s.len(), m.len());
                prop_assert!(s.iter().eq(m.iter().copied()));
                prop_assert!(s.iter().rev().eq(m.iter().rev().copied()));
                prop_assert_eq!(s.contains(v), m.contains(&v));
            }
        }
    }
}
