//! `CompactBytes`: a byte string that keeps up to 22 bytes inline, in 24 bytes.
//!
//! Most keys and many values are short; storing them inline saves an allocation (and
//! its allocator overhead) per key. Longer strings live in one exact-size heap slice.

use std::fmt;
use std::ops::Deref;

/// Bytes stored inline, without a heap allocation.
pub const INLINE_CAPACITY: usize = 22;

#[derive(Clone)]
pub enum CompactBytes {
    Inline {
        len: u8,
        data: [u8; INLINE_CAPACITY],
    },
    Heap(Box<[u8]>),
}

impl CompactBytes {
    pub fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_CAPACITY {
            let mut data = [0; INLINE_CAPACITY];
            data[..bytes.len()].copy_from_slice(bytes);
            CompactBytes::Inline {
                len: bytes.len() as u8,
                data,
            }
        } else {
            CompactBytes::Heap(bytes.into())
        }
    }

    pub fn from_vec(bytes: Vec<u8>) -> Self {
        if bytes.len() <= INLINE_CAPACITY {
            Self::new(&bytes)
        } else {
            CompactBytes::Heap(bytes.into_boxed_slice())
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            CompactBytes::Inline { len, data } => &data[..*len as usize],
            CompactBytes::Heap(b) => b,
        }
    }

    /// Bytes allocated on the heap for this string (0 when inline).
    pub fn heap_size(&self) -> usize {
        match self {
            CompactBytes::Inline { .. } => 0,
            CompactBytes::Heap(b) => b.len(),
        }
    }

    pub fn into_vec(self) -> Vec<u8> {
        match self {
            CompactBytes::Inline { len, data } => data[..len as usize].to_vec(),
            CompactBytes::Heap(b) => b.into_vec(),
        }
    }
}

impl Deref for CompactBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for CompactBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for CompactBytes {}

impl fmt::Debug for CompactBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl From<&[u8]> for CompactBytes {
    fn from(b: &[u8]) -> Self {
        CompactBytes::new(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_and_round_trip() {
        assert_eq!(std::mem::size_of::<CompactBytes>(), 24);
        assert_eq!(std::mem::size_of::<Option<CompactBytes>>(), 24);
        for n in [0, 1, 21, 22, 23, 100] {
            let v: Vec<u8> = (0..n as u8).collect();
            let c = CompactBytes::new(&v);
            assert_eq!(c.as_bytes(), &v[..]);
            assert_eq!(c.heap_size() > 0, n > INLINE_CAPACITY);
            assert_eq!(CompactBytes::from_vec(v.clone()).into_vec(), v);
        }
    }
}
