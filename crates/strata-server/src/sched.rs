//! The scheduling policy of the server's threads (`sched-policy`).
//!
//! Under Linux's default policy a thread woken by an event preempts the thread
//! running on its CPU when the scheduler judges it has waited longer. An I/O thread
//! is woken for every batch of ready sockets, and the runtime wakes a second one to
//! share the work; on CPUs the server shares (with its clients, or a benchmark's),
//! each such wake-up can preempt the very client whose next request it would serve.
//! Under `SCHED_BATCH` a woken thread waits for the running one to block or use up
//! its time slice instead: on the 2-CPU machine of docs/BENCHMARKS.md that cut the
//! server's context switches on a 50-connection load eightfold and raised its
//! throughput by a quarter ("The threads under `SCHED_BATCH`").

use crate::config::SchedPolicy;

/// Sets the calling thread's policy; threads it starts afterwards inherit it, so
/// called before the runtime and the background threads start, it covers them all.
/// A policy the system refuses is reported and left as it was.
pub fn apply(policy: SchedPolicy) {
    if let Err(e) = set(policy) {
        tracing::warn!(
            "could not set the scheduling policy '{}': {e}",
            policy.name()
        );
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // One system call, which libc declares and rustix does not wrap.
fn set(policy: SchedPolicy) -> std::io::Result<()> {
    let policy = match policy {
        SchedPolicy::Batch => libc::SCHED_BATCH,
        SchedPolicy::Normal => libc::SCHED_OTHER,
    };
    // Both policies take priority 0.
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the duration of the call, and pid
    // 0 names the calling thread.
    let code = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if code == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn set(policy: SchedPolicy) -> std::io::Result<()> {
    match policy {
        SchedPolicy::Normal => Ok(()),
        SchedPolicy::Batch => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "SCHED_BATCH is Linux's",
        )),
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The policy of the calling thread, as the kernel reports it.
    #[allow(unsafe_code)] // The read counterpart of `set`'s call.
    fn current() -> i32 {
        // SAFETY: pid 0 names the calling thread; the call takes no pointers.
        unsafe { libc::sched_getscheduler(0) }
    }

    /// Each policy takes effect on the calling thread and is inherited by the
    /// threads it starts; and a thread may go back to the normal policy.
    #[test]
    fn the_policy_is_set_and_inherited() {
        std::thread::spawn(|| {
            set(SchedPolicy::Batch).expect("SCHED_BATCH needs no privilege");
            assert_eq!(current(), libc::SCHED_BATCH);
            let child = std::thread::spawn(current).join().expect("child");
            assert_eq!(child, libc::SCHED_BATCH);
            set(SchedPolicy::Normal).expect("back to SCHED_OTHER");
            assert_eq!(current(), libc::SCHED_OTHER);
        })
        .join()
        .expect("thread");
    }
}
