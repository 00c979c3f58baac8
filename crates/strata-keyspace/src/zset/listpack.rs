//! The "listpack" encoding of a small sorted set: one [`ForwardPack`] whose elements
//! are (member, score) pairs, sorted by score and then member.
//!
//! A pair is one element of the pack: the member's bytes, the score's bytes, and a tail
//! byte saying how many score bytes there are (low four bits) and whether they are a
//! double (bit 4) or an integer:
//!
//! ```text
//! | member | score (0-8 B) | tail (1 B) |
//! ```
//!
//! Scores are kept as Redis's listpack keeps them: a score that is a whole number
//! within ±2^62 is an integer (so -0 is read back as 0), in the fewest little-endian
//! bytes whose sign extension gives it back (zero takes none); any other score is the
//! double's bits, most significant byte first, without the trailing zero bytes (4.5
//! takes two). With the pack's one byte of length in front, a pair costs its member
//! and score bytes plus two.
//!
//! Every operation is a linear walk, which is why the set converts to the big encoding
//! past `zset-max-listpack-entries`.

use std::cmp::Ordering;

use crate::pack::ForwardPack;

/// Bit of the tail byte that marks a double.
const DOUBLE: u8 = 0x10;

/// The integer Redis's listpack would store for `score` (its `double2ll`).
#[inline]
pub fn as_integer(score: f64) -> Option<i64> {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if !(-LIMIT..=LIMIT).contains(&score) {
        return None;
    }
    let n = score as i64;
    (n as f64 == score).then_some(n)
}

/// The stored form of a score: up to eight bytes and the tail byte, and how many of
/// the nine are used.
pub fn encode_score(score: f64) -> ([u8; 9], usize) {
    let mut out = [0u8; 9];
    let n = match as_integer(score) {
        Some(int) => {
            let bytes = int.to_le_bytes();
            // The fewest bytes whose sign extension gives back `int`.
            let mut n = 0;
            while n < 8 && sign_extend(&bytes[..n]) != int {
                n += 1;
            }
            out[..n].copy_from_slice(&bytes[..n]);
            out[n] = n as u8;
            n
        }
        None => {
            let bytes = score.to_bits().to_be_bytes();
            let n = 8 - bytes.iter().rev().take_while(|&&b| b == 0).count();
            out[..n].copy_from_slice(&bytes[..n]);
            out[n] = n as u8 | DOUBLE;
            n
        }
    };
    (out, n + 1)
}

fn sign_extend(bytes: &[u8]) -> i64 {
    let mut buf = match bytes.last() {
        Some(&b) if b & 0x80 != 0 => [0xff; 8],
        _ => [0; 8],
    };
    buf[..bytes.len()].copy_from_slice(bytes);
    i64::from_le_bytes(buf)
}

/// Splits a stored pair into its member and score.
#[inline]
pub fn decode(pair: &[u8]) -> (&[u8], f64) {
    let (&tail, rest) = pair.split_last().expect("a pair ends with its tail byte");
    let n = (tail & 0x0f) as usize;
    let (member, bytes) = rest.split_at(rest.len() - n);
    let score = if tail & DOUBLE != 0 {
        let mut be = [0u8; 8];
        be[..n].copy_from_slice(bytes);
        f64::from_bits(u64::from_be_bytes(be))
    } else {
        sign_extend(bytes) as f64
    };
    (member, score)
}

/// The score as the pack stores it: what a read gives back after a write.
pub fn stored(score: f64) -> f64 {
    as_integer(score).map_or(score, |n| n as f64)
}

/// Number of (member, score) pairs.
#[inline]
pub fn pairs(pack: &ForwardPack) -> usize {
    pack.len()
}

/// Appends a pair (the caller keeps the order).
pub fn push(pack: &mut ForwardPack, score: f64, member: &[u8]) {
    let (bytes, len) = encode_score(score);
    pack.push_back_parts(&[member, &bytes[..len]]);
}

/// The pair index and score of `member`.
pub fn find(pack: &ForwardPack, member: &[u8]) -> Option<(usize, f64)> {
    pack.iter()
        .map(decode)
        .enumerate()
        .find_map(|(i, (m, s))| (m == member).then_some((i, s)))
}

/// Inserts a member known to be absent at its place in the order.
pub fn insert(pack: &mut ForwardPack, score: f64, member: &[u8]) {
    let (bytes, len) = encode_score(score);
    let score = stored(score);
    let at = pack
        .iter()
        .map(decode)
        .position(|(m, here)| match here.partial_cmp(&score) {
            Some(Ordering::Equal) | None => m > member,
            Some(o) => o == Ordering::Greater,
        });
    // Past the last pair (`None`) appends, without counting the pairs first.
    pack.insert_parts(at.unwrap_or(usize::MAX), &[member, &bytes[..len]]);
}

/// Removes pairs `start .. start + count`.
pub fn remove(pack: &mut ForwardPack, start: usize, count: usize) {
    pack.remove_range(start, count);
}

/// The pairs from index `start`, forwards or (with `rev`) backwards; none if there
/// is no pair `start`. One walk, as far as `start`.
pub fn iter_from(pack: &ForwardPack, start: usize, rev: bool) -> Pairs<'_> {
    if rev {
        // The pack reads forwards only: note where pairs 0..=start begin.
        let mut starts = Vec::with_capacity(start.saturating_add(1).min(pack.bytes_len()));
        let mut at = 0;
        while starts.len() <= start && at < pack.bytes_len() {
            starts.push(at as u32);
            at = pack.element_at(at).1;
        }
        if starts.len() <= start {
            starts.clear();
        }
        Pairs::Backward { pack, starts }
    } else {
        let mut inner = pack.iter();
        if start > 0 {
            inner.nth(start - 1);
        }
        Pairs::Forward(inner)
    }
}

/// (member, score) pairs of a pack.
pub enum Pairs<'a> {
    Forward(crate::pack::Iter<'a, crate::pack::Forward>),
    /// Walking towards the lowest: the starts of the pairs still to give, last first.
    Backward {
        pack: &'a ForwardPack,
        starts: Vec<u32>,
    },
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], f64);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Pairs::Forward(it) => it.next().map(decode),
            Pairs::Backward { pack, starts } => {
                let at = starts.pop()?;
                Some(decode(pack.element_at(at as usize).0))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            Pairs::Forward(it) => it.len(),
            Pairs::Backward { starts, .. } => starts.len(),
        };
        (n, Some(n))
    }
}

impl ExactSizeIterator for Pairs<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_round_trip_as_redis_stores_them() {
        for s in [
            0.0,
            1.0,
            -1.0,
            127.0,
            128.0,
            -129.0,
            1e15,
            (1i64 << 55) as f64,
            -((1i64 << 55) as f64),
            4611686018427387904.0,
            1e19,
            0.5,
            -2.25,
            1e-300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE / 4.0,
        ] {
            assert_eq!(stored(s), s, "{s}");
            let (bytes, len) = encode_score(s);
            let pair = [b"member".as_slice(), &bytes[..len]].concat();
            assert_eq!(decode(&pair), (&b"member"[..], s), "{s}");
        }
        assert!(stored(-0.0).is_sign_positive());
        // Score bytes plus the tail byte.
        assert_eq!(encode_score(0.0).1, 1);
        assert_eq!(encode_score(100.0).1, 2);
        assert_eq!(encode_score(200.0).1, 3);
        assert_eq!(encode_score(4.5).1, 3);
        assert_eq!(encode_score(0.1).1, 9);
        assert_eq!(encode_score(-1e300).1, 9);
        assert_eq!(as_integer(4611686018427387904.0), Some(1 << 62));
        assert_eq!(as_integer(9223372036854775807.0), None);
    }

    #[test]
    fn pairs_stay_sorted() {
        let mut p = ForwardPack::new();
        for (s, m) in [(2.0, "b"), (1.0, "z"), (2.0, "a"), (-1.5, "q"), (1.0, "y")] {
            insert(&mut p, s, m.as_bytes());
        }
        let got: Vec<(String, f64)> = iter_from(&p, 0, false)
            .map(|(m, s)| (String::from_utf8_lossy(m).into_owned(), s))
            .collect();
        let want = [("q", -1.5), ("y", 1.0), ("z", 1.0), ("a", 2.0), ("b", 2.0)];
        assert_eq!(got.len(), want.len());
        for ((gm, gs), (wm, ws)) in got.iter().zip(want) {
            assert_eq!((gm.as_str(), *gs), (wm, ws));
        }
        let back: Vec<&[u8]> = iter_from(&p, 3, true).map(|(m, _)| m).collect();
        assert_eq!(back, [&b"a"[..], b"z", b"y", b"q"]);
        assert_eq!(find(&p, b"z"), Some((2, 1.0)));
        remove(&mut p, 1, 2);
        assert_eq!(pairs(&p), 3);
        assert_eq!(find(&p, b"a"), Some((1, 2.0)));
        // A start past the last pair gives nothing, either way.
        assert_eq!(iter_from(&p, 3, true).len(), 0);
        assert_eq!(iter_from(&p, 3, false).count(), 0);
        assert_eq!(iter_from(&p, 2, true).count(), 3);
        assert_eq!(iter_from(&p, 2, false).count(), 1);
    }
}
