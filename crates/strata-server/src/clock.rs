//! The clocks the request path reads, as integers.
//!
//! `Instant` and `SystemTime` read the same clocks, but their arithmetic normalizes
//! seconds and nanoseconds (some 30 instructions a subtraction, and `SystemTime`'s
//! `duration_since` is one): a batch of requests reads both clocks and every command
//! the monotonic one, so plain nanoseconds and milliseconds are what they keep.

/// Reads one clock.
#[allow(unsafe_code)] // clock_gettime, which std wraps only in `Instant` and `SystemTime`.
fn read(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec and the clock ids passed exist on
    // every system std supports; the call only writes `ts`.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts
}

/// Nanoseconds of the monotonic clock (the one `Instant` reads).
#[inline]
pub fn monotonic_ns() -> u64 {
    let ts = read(libc::CLOCK_MONOTONIC);
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Milliseconds since the Unix epoch (the wall clock, `SystemTime`'s); 0 before it.
#[inline]
pub fn unix_ms() -> u64 {
    let ts = read(libc::CLOCK_REALTIME);
    if ts.tv_sec < 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000)
        .wrapping_add(ts.tv_nsec as u64 / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    #[test]
    fn the_clocks_agree_with_std() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let ms = unix_ms();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        assert!(before.as_millis() as u64 <= ms && ms <= after.as_millis() as u64);

        let origin = Instant::now();
        let origin_ns = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let a = origin.elapsed().as_nanos() as u64;
        let ns = monotonic_ns() - origin_ns;
        let b = origin.elapsed().as_nanos() as u64;
        // `origin_ns` was read just after `origin`.
        assert!(ns <= b && ns + 1_000_000 >= a, "{ns} against {a}..{b}");
    }
}
