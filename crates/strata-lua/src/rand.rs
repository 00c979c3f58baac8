//! The generator behind `math.random`: the 48-bit linear congruential generator of
//! POSIX `lrand48`, as Redis implements it (`redisLrand48`), so that scripts draw the
//! numbers Redis would give them.
//!
//! There is one generator per process, shared by every interpreter, like Redis's
//! single global state: a sequence of scripts (EVAL or FCALL, on any connection) sees
//! one sequence of numbers. `math.randomseed` reseeds it for everyone.

use std::sync::atomic::{AtomicU64, Ordering};

const A: u64 = 0x5_DEEC_E66D;
const C: u64 = 0xB;
const MASK: u64 = (1 << 48) - 1;
/// `srand48`'s fixed low 16 bits, and the state before any seeding.
const LOW: u64 = 0x330E;
const INITIAL: u64 = 0x1234_ABCD_330E;
/// Redis's `REDIS_LRAND48_MAX`.
pub const LRAND48_MAX: u64 = i32::MAX as u64;

static STATE: AtomicU64 = AtomicU64::new(INITIAL);

/// The next 31-bit number.
pub fn lrand48() -> u64 {
    let mut x = STATE.load(Ordering::Relaxed);
    loop {
        let next = (A.wrapping_mul(x).wrapping_add(C)) & MASK;
        match STATE.compare_exchange_weak(x, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next >> 17,
            Err(seen) => x = seen,
        }
    }
}

/// Reseeds the generator (`srand48(seed)`: the seed's low 32 bits above 0x330E).
pub fn srand48(seed: i32) {
    let seed = u64::from(seed as u32);
    STATE.store((seed << 16) | LOW, Ordering::Relaxed);
}

/// A number in [0, 1), as Redis's `math.random()` computes it.
pub fn random() -> f64 {
    (lrand48() % LRAND48_MAX) as f64 / LRAND48_MAX as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_posix_lrand48() {
        // The first numbers of glibc's lrand48 after srand48(0).
        srand48(0);
        assert_eq!(lrand48(), 366850414);
        assert_eq!(lrand48(), 1610402240);
        srand48(0);
        assert!(random() < 1.0);
    }
}
