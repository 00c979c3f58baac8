//! Key distributions: which key of the key space each request names.
//!
//! Keys are numbers in `0..keys`, written into requests as twelve zero-padded digits
//! (as redis-benchmark writes `__rand_int__`), so every key of a run has the same
//! length. Three distributions:
//! - uniform: every key equally likely;
//! - zipfian with exponent `s`: key `k` (0-based) drawn with probability proportional
//!   to `1 / (k + 1)^s`, so key 0 is the hottest; `s = 0` is uniform;
//! - sequential: connection `i` of `n` names keys `i, i + n, i + 2n, ...` modulo the
//!   key space, so together the connections walk every key in order (a fill).
//!
//! Invariant: a picker draws only keys in `0..keys`, from its own seeded generator, so
//! a run with a fixed seed names the same keys in the same order per connection.

use std::fmt;
use std::str::FromStr;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::Error;

/// How keys are drawn from the key space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    Uniform,
    /// Zipf's law with this exponent (0.99 unless given).
    Zipf(f64),
    Sequential,
}

/// The exponent used by `zipf` without one: YCSB's classic constant.
pub const DEFAULT_ZIPF_EXPONENT: f64 = 0.99;

impl FromStr for Distribution {
    type Err = String;

    /// `uniform`, `sequential`, `zipf` or `zipf:S` with a finite `S >= 0`.
    fn from_str(text: &str) -> Result<Distribution, String> {
        let lower = text.to_ascii_lowercase();
        match lower.split_once(':') {
            None if lower == "uniform" => Ok(Distribution::Uniform),
            None if lower == "sequential" => Ok(Distribution::Sequential),
            None if lower == "zipf" || lower == "zipfian" => {
                Ok(Distribution::Zipf(DEFAULT_ZIPF_EXPONENT))
            }
            Some(("zipf" | "zipfian", exponent)) => match exponent.parse::<f64>() {
                Ok(s) if s.is_finite() && s >= 0.0 => Ok(Distribution::Zipf(s)),
                _ => Err(format!(
                    "the zipf exponent must be a number >= 0, not '{exponent}'"
                )),
            },
            _ => Err(format!(
                "unknown distribution '{text}' (expected uniform, zipf, zipf:S or sequential)"
            )),
        }
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Uniform => f.write_str("uniform"),
            Distribution::Zipf(s) => write!(f, "zipf:{s}"),
            Distribution::Sequential => f.write_str("sequential"),
        }
    }
}

/// One connection's source of keys (and of the random numbers `__rand__` names).
#[derive(Debug)]
pub struct KeyPicker {
    keys: u64,
    rng: SmallRng,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Uniform,
    Zipf(rand_distr::Zipf<f64>),
    Sequential { next: u64, stride: u64 },
}

impl KeyPicker {
    /// The picker of connection `index` of `connections`, over `keys` keys.
    pub fn new(
        distribution: Distribution,
        keys: u64,
        seed: u64,
        index: u64,
        connections: u64,
    ) -> Result<KeyPicker, Error> {
        if keys == 0 {
            return Err(Error::Usage(
                "the key space must hold at least one key".into(),
            ));
        }
        let kind = match distribution {
            Distribution::Uniform => Kind::Uniform,
            Distribution::Zipf(s) => Kind::Zipf(
                // Key counts beyond 2^53 lose precision as a float; that is far beyond
                // any key space a run can fill.
                rand_distr::Zipf::new(keys as f64, s)
                    .map_err(|e| Error::Usage(format!("zipf distribution: {e}")))?,
            ),
            Distribution::Sequential => Kind::Sequential {
                next: index % keys,
                stride: connections.max(1) % keys,
            },
        };
        // Each connection gets its own stream, derived from the run's seed.
        let stream = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Ok(KeyPicker {
            keys,
            rng: SmallRng::seed_from_u64(stream),
            kind,
        })
    }

    /// The next key, in `0..keys`.
    #[inline]
    pub fn next_key(&mut self) -> u64 {
        match &mut self.kind {
            Kind::Uniform => self.rng.random_range(0..self.keys),
            Kind::Zipf(zipf) => {
                // Zipf draws ranks 1..=keys as floats; rank 1 is key 0.
                let rank = self.rng.sample(*zipf) as u64;
                rank.saturating_sub(1).min(self.keys - 1)
            }
            Kind::Sequential { next, stride } => {
                let key = *next;
                *next = (*next + *stride) % self.keys;
                key
            }
        }
    }

    /// A uniformly random number in `0..keys`, for `__rand__`.
    #[inline]
    pub fn random(&mut self) -> u64 {
        self.rng.random_range(0..self.keys)
    }

    /// A uniformly random number in `0..bound` (`bound > 0`), for choices that are not
    /// keys: the command of a mix, the size of a value.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        self.rng.random_range(0..bound.max(1))
    }
}

/// The width of a number written by [`write_padded`].
pub const KEY_DIGITS: usize = 12;

/// Appends `n` as at least [`KEY_DIGITS`] digits, zero-padded.
#[inline]
pub fn write_padded(n: u64, out: &mut Vec<u8>) {
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    let mut rest = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let start = i.min(digits.len() - KEY_DIGITS);
    out.extend_from_slice(&digits[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(distribution: Distribution, keys: u64, draws: usize) -> Vec<u64> {
        let mut picker = KeyPicker::new(distribution, keys, 7, 0, 1).unwrap();
        let mut counts = vec![0u64; keys as usize];
        for _ in 0..draws {
            counts[picker.next_key() as usize] += 1;
        }
        counts
    }

    #[test]
    fn parses_distributions() {
        assert_eq!("uniform".parse(), Ok(Distribution::Uniform));
        assert_eq!("Sequential".parse(), Ok(Distribution::Sequential));
        assert_eq!("zipf".parse(), Ok(Distribution::Zipf(0.99)));
        assert_eq!("zipf:1.2".parse(), Ok(Distribution::Zipf(1.2)));
        assert_eq!("zipfian:0".parse(), Ok(Distribution::Zipf(0.0)));
        assert!("zipf:-1".parse::<Distribution>().is_err());
        assert!("zipf:x".parse::<Distribution>().is_err());
        assert!("gauss".parse::<Distribution>().is_err());
        assert_eq!(Distribution::Zipf(0.5).to_string(), "zipf:0.5");
    }

    #[test]
    fn uniform_covers_the_range_evenly() {
        let c = counts(Distribution::Uniform, 10, 100_000);
        // Each of 10 keys expects 10,000 draws; 5 standard deviations is about 475.
        assert!(c.iter().all(|&n| (9_500..=10_500).contains(&n)), "{c:?}");
        let mut picker = KeyPicker::new(Distribution::Uniform, 1, 1, 0, 1).unwrap();
        assert!((0..100).all(|_| picker.next_key() == 0));
    }

    #[test]
    fn zipf_is_skewed_towards_the_first_keys() {
        let draws = 200_000;
        let c = counts(Distribution::Zipf(0.99), 1_000, draws);
        // With s = 0.99 over 1,000 keys, key 0 has probability 1 / H(1000, 0.99), about
        // 0.13, and the ten hottest keys together about 0.39.
        let share = |n: u64| n as f64 / draws as f64;
        assert!((0.11..0.15).contains(&share(c[0])), "{}", share(c[0]));
        let top10: u64 = c[..10].iter().sum();
        assert!((0.35..0.43).contains(&share(top10)), "{}", share(top10));
        // Popularity falls with rank: key 0 about twice key 1, ten times key 9.
        assert!(c[0] > c[1] && c[1] > c[9] && c[9] > c[500]);
        let ratio = c[0] as f64 / c[9] as f64;
        assert!((7.0..13.0).contains(&ratio), "{ratio}");
        // s = 0 is uniform.
        let flat = counts(Distribution::Zipf(0.0), 10, 100_000);
        assert!(
            flat.iter().all(|&n| (9_500..=10_500).contains(&n)),
            "{flat:?}"
        );
    }

    #[test]
    fn sequential_connections_interleave_over_the_key_space() {
        let walk = |index| {
            let mut p = KeyPicker::new(Distribution::Sequential, 7, 1, index, 3).unwrap();
            (0..5).map(|_| p.next_key()).collect::<Vec<_>>()
        };
        assert_eq!(walk(0), [0, 3, 6, 2, 5]);
        assert_eq!(walk(1), [1, 4, 0, 3, 6]);
        assert_eq!(walk(2), [2, 5, 1, 4, 0]);
    }

    #[test]
    fn an_empty_key_space_is_refused() {
        assert!(KeyPicker::new(Distribution::Uniform, 0, 1, 0, 1).is_err());
    }

    #[test]
    fn pads_to_twelve_digits() {
        let mut out = Vec::new();
        write_padded(42, &mut out);
        assert_eq!(out, b"000000000042");
        out.clear();
        write_padded(0, &mut out);
        assert_eq!(out, b"000000000000");
        out.clear();
        write_padded(u64::MAX, &mut out);
        assert_eq!(out, u64::MAX.to_string().as_bytes());
    }
}
