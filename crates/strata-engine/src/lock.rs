//! `Lock`: the mutex of the log's append path.
//!
//! The standard library's mutex, whose contended path spins briefly and then waits
//! in the kernel (a futex), without `sched_yield`. `parking_lot`'s, used elsewhere,
//! yields the processor up to seven times before it sleeps; on a machine whose
//! CPUs are shared (the server's I/O threads beside their clients), each yield
//! hands the CPU to another thread for a context switch, and the log's locks are
//! taken by every I/O thread for every pipelined batch. With the log's writer,
//! tail and flush locks under it, pipelined writes under `appendfsync everysec`
//! from 50 clients (`-P 16`, two I/O threads) to random keys ran faster (SET by
//! 16%, INCR by 13%); those onto one key gained once the shards' lock stopped
//! yielding too (docs/BENCHMARKS.md, "The locks without yields").
//!
//! A panic while the lock is held does not poison it for the others, as with
//! `parking_lot`: the log's own state records a failed write (it is poisoned
//! explicitly, see `Shared::poison`).

use std::sync::{MutexGuard, PoisonError};

/// A mutual-exclusion lock that never yields the processor while it waits.
pub(crate) struct Lock<T>(std::sync::Mutex<T>);

impl<T> Lock<T> {
    pub(crate) fn new(value: T) -> Lock<T> {
        Lock(std::sync::Mutex::new(value))
    }

    /// Takes the lock, waiting in the kernel after a short spin if it is held.
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_panic_under_the_lock_does_not_poison_it() {
        let lock = Arc::new(Lock::new(1));
        let held = lock.clone();
        let joined = std::thread::spawn(move || {
            let _guard = held.lock();
            panic!("while holding the lock");
        })
        .join();
        assert!(joined.is_err());
        *lock.lock() += 1;
        assert_eq!(*lock.lock(), 2);
    }

    #[test]
    fn threads_take_turns() {
        let lock = Arc::new(Lock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert_eq!(*lock.lock(), 40_000);
    }
}
