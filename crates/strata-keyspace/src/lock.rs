//! The shards' mutex: a futex lock that never yields the processor.
//!
//! `parking_lot`'s mutex, which the shards used before, spins and then calls
//! `sched_yield` up to seven times before it sleeps. Where the server's I/O threads
//! share their CPUs with other work (a benchmark's client on a 2-CPU machine), each
//! yield is a context switch that hands the CPU away for a time slice, and two
//! threads pipelining onto one key meet at its shard on nearly every batch. This
//! lock spins for a while as long as the holder has nobody waiting, then sleeps in
//! the kernel (`futex`); its release wakes one sleeper. Pipelined runs on one key
//! from 50 clients with two I/O threads ran faster with it (docs/BENCHMARKS.md,
//! "The locks without yields").
//!
//! The state is one word: unlocked, locked, or locked with sleepers (the release
//! then makes the wake-up call). A thread that starts to wait marks the lock
//! contended, so a release never leaves a sleeper behind; a thread that times out
//! leaves the mark, which costs at most one needless wake-up. This is the classic
//! three-state futex mutex, as the standard library's is on Linux; it is written
//! here because the shards need what `lock_api` builds on a raw lock (guards that
//! name the lock's type, and a timed lock: a connection waiting for a shard wakes
//! every few milliseconds to see whether it was killed).
//!
//! On other systems the shards keep `parking_lot`'s raw mutex.

#[cfg(target_os = "linux")]
pub use futex::RawLock;
#[cfg(not(target_os = "linux"))]
pub use parking_lot::RawMutex as RawLock;

#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // `lock_api`'s raw-lock traits and the futex system call.
mod futex {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    use lock_api::RawMutex as _;

    const UNLOCKED: u32 = 0;
    const LOCKED: u32 = 1;
    /// Locked, and a thread may be asleep waiting for it.
    const CONTENDED: u32 = 2;

    /// Rounds of spinning while the holder has no sleepers, before sleeping.
    const SPINS: u32 = 100;

    /// A mutex in one word, for `lock_api::Mutex` (see the module docs).
    pub struct RawLock {
        state: AtomicU32,
    }

    impl RawLock {
        /// Waits until the lock is taken (true) or `deadline` passes (false).
        #[cold]
        fn lock_contended(&self, deadline: Option<Instant>) -> bool {
            let mut state = self.spin();
            if state == UNLOCKED
                && self
                    .state
                    .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return true;
            }
            loop {
                // Marked contended before sleeping, so that the release wakes us;
                // taken if it was free meanwhile (then marked contended, which at
                // worst costs our release one needless wake-up).
                if state != CONTENDED && self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                    return true;
                }
                let timeout = match deadline {
                    None => None,
                    Some(deadline) => {
                        let now = Instant::now();
                        if now >= deadline {
                            return false;
                        }
                        Some(deadline - now)
                    }
                };
                wait(&self.state, CONTENDED, timeout);
                state = self.spin();
            }
        }

        /// Spins while the lock is held without sleepers; returns the state seen.
        fn spin(&self) -> u32 {
            let mut spins = SPINS;
            loop {
                let state = self.state.load(Ordering::Relaxed);
                if state != LOCKED || spins == 0 {
                    return state;
                }
                std::hint::spin_loop();
                spins -= 1;
            }
        }
    }

    // SAFETY: the lock is held from a successful `compare_exchange` or `swap` from
    // UNLOCKED (with Acquire) to the `swap` to UNLOCKED in `unlock` (with Release),
    // so at most one thread holds it and each holder sees what the one before wrote.
    unsafe impl lock_api::RawMutex for RawLock {
        #[allow(
            clippy::declare_interior_mutable_const,
            reason = "lock_api's initializer"
        )]
        const INIT: RawLock = RawLock {
            state: AtomicU32::new(UNLOCKED),
        };

        type GuardMarker = lock_api::GuardNoSend;

        #[inline]
        fn lock(&self) {
            if !self.try_lock() {
                self.lock_contended(None);
            }
        }

        #[inline]
        fn try_lock(&self) -> bool {
            self.state
                .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }

        #[inline]
        unsafe fn unlock(&self) {
            if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
                wake_one(&self.state);
            }
        }

        #[inline]
        fn is_locked(&self) -> bool {
            self.state.load(Ordering::Relaxed) != UNLOCKED
        }
    }

    // SAFETY: as for `RawMutex`; a timed-out attempt holds nothing.
    unsafe impl lock_api::RawMutexTimed for RawLock {
        type Duration = Duration;
        type Instant = Instant;

        fn try_lock_for(&self, timeout: Duration) -> bool {
            self.try_lock() || self.lock_contended(Some(Instant::now() + timeout))
        }

        fn try_lock_until(&self, deadline: Instant) -> bool {
            self.try_lock() || self.lock_contended(Some(deadline))
        }
    }

    /// Sleeps while `state` holds `expected`, up to `timeout`; returns early on a
    /// wake-up, a signal, or a changed value (the caller looks again either way).
    fn wait(state: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `state` is a live, aligned u32 for the duration of the call and
        // `ts_ptr` is null or points to a timespec that outlives it. The kernel
        // only reads both.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                state.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                ts_ptr,
            );
        }
    }

    /// Wakes one thread asleep in [`wait`] on `state`.
    fn wake_one(state: &AtomicU32) {
        // SAFETY: `state` is a live, aligned u32; the kernel only uses its address.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                state.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                1,
            );
        }
    }
}

/// A mutex over [`RawLock`].
pub type Mutex<T> = lock_api::Mutex<RawLock, T>;
/// A held [`Mutex`].
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawLock, T>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn threads_take_turns_and_see_each_others_writes() {
        let lock = Arc::new(Mutex::new((0u64, 0u64)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = lock.lock();
                        // Two fields written apart: a second holder would break
                        // their equality.
                        g.0 += 1;
                        std::hint::spin_loop();
                        g.1 += 1;
                        assert_eq!(g.0, g.1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(*lock.lock(), (80_000, 80_000));
    }

    #[test]
    fn a_timed_lock_gives_up_and_a_release_wakes_a_sleeper() {
        let lock = Arc::new(Mutex::new(0));
        let held = lock.lock();
        let started = Instant::now();
        assert!(lock.try_lock_for(Duration::from_millis(30)).is_none());
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert!(lock.is_locked());
        // A thread asleep in the lock is woken by the release.
        let waiter = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                *lock.lock() += 1;
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(held);
        waiter.join().expect("waiter");
        assert_eq!(*lock.lock(), 1);
        assert!(!lock.is_locked());
        assert!(lock.try_lock_for(Duration::from_millis(1)).is_some());
    }
}
