//! The "listpack" encoding of a small sorted set: one [`Pack`] of member, score,
//! member, score ..., sorted by score and then member.
//!
//! Scores are stored as Redis's listpack stores them: a score that is a whole number
//! within ±2^62 is stored as an integer (so -0 is read back as 0), any other as the
//! double. Integers below 2^55 in magnitude take one to seven bytes (little-endian, sign
//! extended, zero takes none); every other score takes the eight bytes of the double.
//! Readers tell the two apart by length alone.
//!
//! Every operation is a linear walk, which is why the set converts to the big encoding
//! past `zset-max-listpack-entries`.

use std::cmp::Ordering;

use crate::pack::Pack;

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

/// The stored form of a score: up to eight bytes and how many are used.
pub fn encode_score(score: f64) -> ([u8; 8], usize) {
    if let Some(n) = as_integer(score)
        && (-(1i64 << 55)..(1i64 << 55)).contains(&n)
    {
        let bytes = n.to_le_bytes();
        let mut len = 0;
        // The fewest bytes whose sign extension gives back `n`.
        while len < 7 && sign_extend(&bytes[..len]) != n {
            len += 1;
        }
        return (bytes, len);
    }
    let normalized = as_integer(score).map_or(score, |n| n as f64);
    (normalized.to_le_bytes(), 8)
}

fn sign_extend(bytes: &[u8]) -> i64 {
    let mut buf = match bytes.last() {
        Some(&b) if b & 0x80 != 0 => [0xff; 8],
        _ => [0; 8],
    };
    buf[..bytes.len()].copy_from_slice(bytes);
    i64::from_le_bytes(buf)
}

/// Reads a stored score.
#[inline]
pub fn decode_score(bytes: &[u8]) -> f64 {
    match <[u8; 8]>::try_from(bytes) {
        Ok(b) => f64::from_le_bytes(b),
        Err(_) => sign_extend(&bytes[..bytes.len().min(8)]) as f64,
    }
}

/// The score as the pack stores it: what a read gives back after a write.
pub fn stored(score: f64) -> f64 {
    let (bytes, len) = encode_score(score);
    decode_score(&bytes[..len])
}

/// Number of (member, score) pairs.
#[inline]
pub fn pairs(pack: &Pack) -> usize {
    pack.len() / 2
}

/// The pair index and score of `member`.
pub fn find(pack: &Pack, member: &[u8]) -> Option<(usize, f64)> {
    let mut it = pack.iter();
    let mut i = 0;
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        if m == member {
            return Some((i, decode_score(s)));
        }
        i += 1;
    }
    None
}

/// Inserts a member known to be absent at its place in the order.
pub fn insert(pack: &mut Pack, score: f64, member: &[u8]) {
    let (bytes, len) = encode_score(score);
    let score = decode_score(&bytes[..len]);
    let mut it = pack.iter();
    let mut at = 0;
    while let (Some(m), Some(s)) = (it.next(), it.next()) {
        let here = decode_score(s);
        let after = match here.partial_cmp(&score) {
            Some(Ordering::Equal) | None => m > member,
            Some(o) => o == Ordering::Greater,
        };
        if after {
            break;
        }
        at += 1;
    }
    pack.insert(2 * at, member);
    pack.insert(2 * at + 1, &bytes[..len]);
}

/// Removes pairs `start .. start + count`.
pub fn remove(pack: &mut Pack, start: usize, count: usize) {
    pack.remove_range(2 * start, 2 * count);
}

/// The pairs from index `start`, forwards or (with `rev`) backwards.
pub fn iter_from(pack: &Pack, start: usize, rev: bool) -> Pairs<'_> {
    let total = pairs(pack);
    let mut inner = pack.iter();
    let remaining = if start >= total {
        0
    } else if rev {
        // Skip the pairs after `start` from the back.
        for _ in 0..2 * (total - 1 - start) {
            inner.next_back();
        }
        start + 1
    } else {
        for _ in 0..2 * start {
            inner.next();
        }
        total - start
    };
    Pairs {
        inner,
        remaining,
        rev,
    }
}

/// (member, score) pairs of a pack.
pub struct Pairs<'a> {
    inner: crate::pack::Iter<'a>,
    remaining: usize,
    rev: bool,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a [u8], f64);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        if self.rev {
            let s = self.inner.next_back()?;
            let m = self.inner.next_back()?;
            Some((m, decode_score(s)))
        } else {
            let m = self.inner.next()?;
            let s = self.inner.next()?;
            Some((m, decode_score(s)))
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
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
        }
        assert!(stored(-0.0).is_sign_positive());
        assert_eq!(encode_score(0.0).1, 0);
        assert_eq!(encode_score(100.0).1, 1);
        assert_eq!(encode_score(200.0).1, 2);
        assert_eq!(encode_score(0.5).1, 8);
        assert_eq!(as_integer(4611686018427387904.0), Some(1 << 62));
        assert_eq!(as_integer(9223372036854775807.0), None);
    }

    #[test]
    fn pairs_stay_sorted() {
        let mut p = Pack::new();
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
    }
}
