//! Varints as the engine's files spell them: seven bits a byte, low bits first, the
//! high bit set on every byte but the last (LEB128), and only in the shortest form,
//! so that a number has exactly one encoding and a decoded record or hint entry
//! encodes back to the same bytes.

#![deny(clippy::indexing_slicing)]

use crate::record::DecodeError;

/// The longest varint: a `u64` takes at most ten bytes.
pub(crate) const MAX_LEN: usize = 10;

/// Bytes the varint of `n` takes.
#[inline]
pub(crate) fn len(n: u64) -> usize {
    (64 - (n | 1).leading_zeros()).div_ceil(7) as usize
}

/// Writes the varint of `n` at `at` in `buf` and returns where it ends. The caller
/// makes room for it ([`len`]); bytes that would fall past the buffer's end are
/// dropped.
#[inline]
pub(crate) fn write(buf: &mut [u8], mut at: usize, mut n: u64) -> usize {
    while n >= 0x80 {
        if let Some(slot) = buf.get_mut(at) {
            *slot = n as u8 | 0x80;
        }
        n >>= 7;
        at += 1;
    }
    if let Some(slot) = buf.get_mut(at) {
        *slot = n as u8;
    }
    at + 1
}

/// Reads the varint at `at` in `bytes`, which must fit in `bits` bits (32 or 64)
/// and be in its shortest form. Returns it and where it ends.
#[inline]
pub(crate) fn read(bytes: &[u8], at: usize, bits: u32) -> Result<(u64, usize), DecodeError> {
    let mut value = 0u64;
    for i in 0..MAX_LEN {
        let Some(&byte) = bytes.get(at + i) else {
            return Err(DecodeError::Truncated {
                needed: (at + i + 1) as u64,
                available: bytes.len() as u64,
            });
        };
        let shift = 7 * i as u32;
        let low = u64::from(byte & 0x7f);
        // The bits this byte adds must fit: past bit 63 a shift would drop them.
        if shift >= bits || (bits - shift < 7 && low >> (bits - shift) != 0) {
            return Err(DecodeError::Length(if bits == 32 {
                "a varint past 32 bits"
            } else {
                "a varint past 64 bits"
            }));
        }
        value |= low << shift;
        if byte & 0x80 == 0 {
            if i > 0 && byte == 0 {
                return Err(DecodeError::Length("a varint not in its shortest form"));
            }
            return Ok((value, at + i + 1));
        }
    }
    Err(DecodeError::Length("a varint past 64 bits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(out: &mut Vec<u8>, n: u64) {
        let mut buf = [0u8; MAX_LEN];
        let end = write(&mut buf, 0, n);
        out.extend_from_slice(&buf[..end]);
    }

    #[test]
    fn every_width_round_trips() {
        let mut samples = vec![0u64, 1, u64::MAX];
        for bit in 1..64 {
            let n = 1u64 << bit;
            samples.extend([n - 1, n, n + 1]);
        }
        for n in samples {
            let mut out = Vec::new();
            push(&mut out, n);
            assert_eq!(out.len(), len(n), "{n}");
            assert_eq!(read(&out, 0, 64), Ok((n, out.len())), "{n}");
            let fits = u32::try_from(n).is_ok();
            assert_eq!(read(&out, 0, 32).is_ok(), fits, "{n}");
        }
        assert_eq!((len(127), len(128), len(16_383), len(16_384)), (1, 2, 2, 3));
        assert_eq!((len(u64::from(u32::MAX)), len(u64::MAX)), (5, 10));
    }

    #[test]
    fn only_the_shortest_form_is_read() {
        // 1 in two bytes, 0 in two bytes.
        assert!(matches!(
            read(&[0x81, 0x00], 0, 64),
            Err(DecodeError::Length(_))
        ));
        assert!(matches!(
            read(&[0x80, 0x00], 0, 64),
            Err(DecodeError::Length(_))
        ));
        // Six bytes for 32 bits; five whose last carries bits past 32.
        let six = [0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        assert!(matches!(read(&six, 0, 32), Err(DecodeError::Length(_))));
        let past = [0xff, 0xff, 0xff, 0xff, 0x1f];
        assert!(matches!(read(&past, 0, 32), Err(DecodeError::Length(_))));
        assert_eq!(
            read(&[0xff, 0xff, 0xff, 0xff, 0x0f], 0, 32),
            Ok((u64::from(u32::MAX), 5))
        );
        // Ten bytes whose last carries bits past 64; eleven bytes.
        let mut ten = [0xff; 10];
        ten[9] = 0x02;
        assert!(matches!(read(&ten, 0, 64), Err(DecodeError::Length(_))));
        let eleven = [
            0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x81, 0x01,
        ];
        assert!(matches!(read(&eleven, 0, 64), Err(DecodeError::Length(_))));
        // Cut short.
        assert!(matches!(
            read(&[0x80], 0, 64),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            read(&[], 0, 64),
            Err(DecodeError::Truncated { .. })
        ));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_that_read_write_back_the_same(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12)) {
            if let Ok((n, end)) = read(&bytes, 0, 64) {
                let mut out = Vec::new();
                push(&mut out, n);
                proptest::prop_assert_eq!(&out[..], &bytes[..end]);
            }
        }
    }
}
