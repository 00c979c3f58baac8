//! When and how often keys are used: the 32-bit access field of every entry, for
//! OBJECT IDLETIME / FREQ and for eviction.
//!
//! The field means one of two things, as Redis's 24-bit `lru` does, depending on
//! whether an LFU `maxmemory-policy` is in force:
//!
//! - **LRU**: the time of the last access, on a wrapping clock of 10 ms ticks (a full
//!   turn is about 497 days; Redis's 24-bit clock of seconds turns in 194). The finer
//!   tick lets eviction tell apart keys used within the same second, which Redis
//!   cannot.
//! - **LFU**: Redis's logarithmic access counter in the low 8 bits (new keys start at
//!   [`LFU_INIT_VAL`]; each access increments it with probability
//!   `1 / ((counter - 5) * lfu-log-factor + 1)`), and in the high 24 bits the second
//!   of the last access (Redis keeps the minute); the counter loses one per
//!   `lfu-decay-time` minutes elapsed — whole minutes of the clock, as in Redis —
//!   when next read. The second breaks ties between equal counters in eviction: of
//!   two keys as frequently used, the one idle longer goes first.
//!
//! The mode is process-wide, as Redis's policy is: the server sets it from its
//! configuration ([`set_mode`]); switching it reinterprets the fields already stored,
//! which then take a while to mean something again (Redis says the same).
//!
//! # Invariants
//!
//! - Every read of the field in LFU mode decays the counter first ([`lfu_decayed`]).
//! - The clocks only ever wrap; differences are taken with wrapping arithmetic.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// The counter a key starts with under LFU, so that new keys are not evicted at once.
pub const LFU_INIT_VAL: u8 = 5;

/// Milliseconds per tick of the LRU clock.
pub const LRU_TICK_MS: u64 = 10;

const SECONDS_MASK: u32 = (1 << 24) - 1;

static LFU: AtomicBool = AtomicBool::new(false);
static LOG_FACTOR: AtomicU32 = AtomicU32::new(10);
static DECAY_TIME: AtomicU32 = AtomicU32::new(1);

/// Selects what the access field means from now on: LFU counters (with
/// `lfu-log-factor` and `lfu-decay-time`) or LRU times.
pub fn set_mode(lfu: bool, log_factor: u32, decay_minutes: u32) {
    LOG_FACTOR.store(log_factor, Ordering::Relaxed);
    DECAY_TIME.store(decay_minutes, Ordering::Relaxed);
    LFU.store(lfu, Ordering::Relaxed);
}

/// Whether access fields are LFU counters.
#[inline]
pub fn is_lfu() -> bool {
    LFU.load(Ordering::Relaxed)
}

/// The LRU clock at `now_ms`.
#[inline]
pub fn lru_clock(now_ms: u64) -> u32 {
    (now_ms / LRU_TICK_MS) as u32
}

/// The LFU field's clock: seconds, wrapping at 2^24 (194 days).
#[inline]
fn seconds(now_ms: u64) -> u32 {
    (now_ms / 1000) as u32 & SECONDS_MASK
}

/// The field of a key created at `now_ms`.
#[inline]
pub fn initial(now_ms: u64) -> u32 {
    if is_lfu() {
        (seconds(now_ms) << 8) | LFU_INIT_VAL as u32
    } else {
        lru_clock(now_ms)
    }
}

/// The field after an access at `now_ms`.
#[inline]
pub fn accessed(field: u32, now_ms: u64) -> u32 {
    if !is_lfu() {
        return lru_clock(now_ms);
    }
    let counter = lfu_decayed(field, now_ms);
    let counter = lfu_log_incr(counter, LOG_FACTOR.load(Ordering::Relaxed), random_unit());
    (seconds(now_ms) << 8) | counter as u32
}

/// Seconds since the last access an LFU field records.
#[inline]
pub fn lfu_idle_seconds(field: u32, now_ms: u64) -> u32 {
    seconds(now_ms).wrapping_sub(field >> 8) & SECONDS_MASK
}

/// Milliseconds since the access an LRU field records.
#[inline]
pub fn idle_ms(field: u32, now_ms: u64) -> u64 {
    lru_clock(now_ms).wrapping_sub(field) as u64 * LRU_TICK_MS
}

/// The LFU counter of a field after the decay due at `now_ms` (Redis's
/// `LFUDecrAndReturn`).
#[inline]
pub fn lfu_decayed(field: u32, now_ms: u64) -> u8 {
    decay(field, now_ms, DECAY_TIME.load(Ordering::Relaxed))
}

fn decay(field: u32, now_ms: u64, decay_minutes: u32) -> u8 {
    let counter = (field & 0xff) as u8;
    if decay_minutes == 0 {
        return counter;
    }
    // Whole minutes of the clock between the access and now. The field keeps the
    // access's second modulo 2^24, which is not a multiple of a minute: the
    // access's full time is rebuilt from now, so that minutes start where the
    // clock's (and Redis's) do.
    let now_s = now_ms / 1000;
    let since = u64::from(seconds(now_ms).wrapping_sub(field >> 8) & SECONDS_MASK);
    let then_s = now_s.saturating_sub(since);
    let periods = (now_s / 60 - then_s / 60) / u64::from(decay_minutes);
    counter.saturating_sub(periods.min(255) as u8)
}

/// One probabilistic increment of a logarithmic counter, given `r` uniform in [0, 1).
fn lfu_log_incr(counter: u8, log_factor: u32, r: f64) -> u8 {
    if counter == 255 {
        return 255;
    }
    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
    let p = 1.0 / (base * log_factor as f64 + 1.0);
    if r < p { counter + 1 } else { counter }
}

/// A uniform number in [0, 1) from a per-thread xorshift generator (the increments
/// need no better randomness, and no lock).
fn random_unit() -> f64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(seed());
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    h.finish() | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_counter_grows_logarithmically() {
        // From the initial value the first increment is certain.
        assert_eq!(lfu_log_incr(LFU_INIT_VAL, 10, 0.999), LFU_INIT_VAL + 1);
        assert_eq!(lfu_log_incr(0, 10, 0.999), 1);
        // One step up it happens with probability 1/11.
        assert_eq!(lfu_log_incr(6, 10, 0.5), 6);
        assert_eq!(lfu_log_incr(6, 10, 0.05), 7);
        assert_eq!(lfu_log_incr(255, 10, 0.0), 255);
        // A million accesses with factor 10 end near Redis's documented 255 (its table
        // gives 255 for factor 10 at 1M hits) and well above 100 hits' figure.
        let mut x = 1u64;
        let mut rnd = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut c = LFU_INIT_VAL;
        for _ in 0..100 {
            c = lfu_log_incr(c, 10, rnd());
        }
        assert!((8..=14).contains(&c), "{c}");
        for _ in 0..1_000_000 {
            c = lfu_log_incr(c, 10, rnd());
        }
        assert!(c >= 200, "{c}");
    }

    #[test]
    fn counters_decay_per_period() {
        let minute = 60_000u64;
        // Accessed at 10:30 (minutes:seconds).
        let field = ((10 * 60 + 30) << 8) | 20;
        assert_eq!(decay(field, 10 * minute + 59_000, 1), 20);
        // A new minute of the clock is a period, as in Redis, however few seconds.
        assert_eq!(decay(field, 11 * minute, 1), 19);
        assert_eq!(decay(field, 13 * minute, 1), 17);
        assert_eq!(decay(field, 13 * minute, 2), 19);
        assert_eq!(decay(field, 13 * minute, 0), 20);
        assert_eq!(decay(field, 1000 * minute, 1), 0);
        // The clock wraps.
        let late = (SECONDS_MASK << 8) | 20;
        assert_eq!(decay(late, 2 * minute, 1), 18);
        assert_eq!(lfu_idle_seconds(field, 11 * minute), 30);
        // Minutes are the clock's, not those of the field's wrapped seconds: an access
        // at hh:mm:59 has decayed by one period a second later, not before.
        let at = 1_796_054_759u64;
        let field = (((at as u32) & SECONDS_MASK) << 8) | 20;
        assert_eq!(decay(field, (at + 1) * 1000, 1), 19);
        let field = ((((at + 1) as u32) & SECONDS_MASK) << 8) | 20;
        assert_eq!(decay(field, (at + 60) * 1000 + 999, 1), 20);
        assert_eq!(decay(field, (at + 61) * 1000, 1), 19);
    }

    #[test]
    fn lru_idle_wraps() {
        assert_eq!(idle_ms(lru_clock(5_000), 7_000), 2_000);
        assert_eq!(idle_ms(u32::MAX, 10 * LRU_TICK_MS), 11 * LRU_TICK_MS);
    }
}
