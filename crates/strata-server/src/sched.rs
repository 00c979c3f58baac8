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
//!
//! Under `appendfsync always` the opposite holds: every reply waits for an fsync,
//! and each wake-up on that path (the thread whose fsync returned, the worker that
//! writes the replies) is latency a reply pays; waiting there for another thread's
//! time slice cost a tenth of the throughput. So `batch` applies while the log is
//! off or not fsynced for each reply, and every thread goes back to the normal
//! policy under `always`. Elsewhere than on Linux the directive changes nothing.

use crate::config::SchedPolicy;

/// The policy the threads run under `sched-policy` when `always` says whether
/// each reply waits for an fsync.
pub fn effective(policy: SchedPolicy, always: bool) -> SchedPolicy {
    if always { SchedPolicy::Normal } else { policy }
}

/// Sets the policy `policy` and `always` make effective on every thread of the
/// process; threads started afterwards inherit it. Called at start-up, before the
/// runtime and the background threads start, and again when CONFIG SET appendfsync
/// or appendonly takes effect. A policy the system refuses is reported and left as
/// it was.
pub fn apply(policy: SchedPolicy, always: bool) {
    let wanted = effective(policy, always);
    if let Err(e) = set_all(wanted) {
        tracing::warn!(
            "could not set the scheduling policy '{}': {e}",
            wanted.name()
        );
    }
}

/// Puts the calling thread under `SCHED_IDLE` (Linux): it runs only on a CPU no other
/// thread wants, and a thread of any other policy that wakes takes the CPU from it
/// at once. For compactions and snapshots: at nice 19 but under the policy of the
/// I/O threads, `SCHED_BATCH`, whose woken threads wait for the running one's time
/// slice, a compaction took 0.9 of a CPU from a SET load on two CPUs and cut its
/// throughput to 55% (docs/BENCHMARKS.md, "Throughput while compacting"). Where the
/// policy is refused, or elsewhere than on Linux, the thread is niced to 19.
pub fn idle_current() {
    #[cfg(target_os = "linux")]
    if set_raw(0, libc::SCHED_IDLE).is_ok() {
        return;
    }
    // On Linux a thread id names one thread for setpriority.
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19) {
        tracing::debug!("could not lower the background thread's priority: {e}");
    }
}

#[cfg(target_os = "linux")]
fn set_all(policy: SchedPolicy) -> std::io::Result<()> {
    for task in std::fs::read_dir("/proc/self/task")? {
        let Some(tid) = task?
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        // A background thread stays idle (see `idle_current`).
        if policy_of(tid) == libc::SCHED_IDLE {
            continue;
        }
        match set(tid, policy) {
            // A thread that ended meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            other => other?,
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn set_all(policy: SchedPolicy) -> std::io::Result<()> {
    set(0, policy)
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // One system call, which libc declares and rustix does not wrap.
fn set(tid: i32, policy: SchedPolicy) -> std::io::Result<()> {
    set_raw(
        tid,
        match policy {
            SchedPolicy::Batch => libc::SCHED_BATCH,
            SchedPolicy::Normal => libc::SCHED_OTHER,
        },
    )
}

/// The policy of thread `tid` (0: the calling one), as the kernel reports it; -1
/// for a thread that is gone.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // The read counterpart of `set_raw`'s call.
fn policy_of(tid: i32) -> i32 {
    // SAFETY: the call takes no pointers; a tid that names no thread is an error.
    unsafe { libc::sched_getscheduler(tid) }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // One system call, which libc declares and rustix does not wrap.
fn set_raw(tid: i32, policy: i32) -> std::io::Result<()> {
    // Every policy used takes priority 0.
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the duration of the call; `tid`
    // names a thread of this process (0: the calling one), or none (an error).
    let code = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    if code == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Elsewhere the threads keep the system's policy: `SCHED_BATCH` is Linux's.
#[cfg(not(target_os = "linux"))]
fn set(_tid: i32, _policy: SchedPolicy) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The policy of the calling thread, as the kernel reports it.
    fn current() -> i32 {
        policy_of(0)
    }

    /// `batch` gives way to the normal policy while each reply waits for an fsync.
    #[test]
    fn always_runs_the_normal_policy() {
        assert_eq!(effective(SchedPolicy::Batch, false), SchedPolicy::Batch);
        assert_eq!(effective(SchedPolicy::Batch, true), SchedPolicy::Normal);
        assert_eq!(effective(SchedPolicy::Normal, false), SchedPolicy::Normal);
        assert_eq!(effective(SchedPolicy::Normal, true), SchedPolicy::Normal);
    }

    /// Held by the tests that set policies, which `set_all` would otherwise change
    /// under each other.
    static POLICIES: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Each policy takes effect on the calling thread and is inherited by the
    /// threads it starts; and a thread may go back to the normal policy.
    #[test]
    fn the_policy_is_set_and_inherited() {
        let _only = POLICIES.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::spawn(|| {
            set(0, SchedPolicy::Batch).expect("SCHED_BATCH needs no privilege");
            assert_eq!(current(), libc::SCHED_BATCH);
            let child = std::thread::spawn(current).join().expect("child");
            assert_eq!(child, libc::SCHED_BATCH);
            set(0, SchedPolicy::Normal).expect("back to SCHED_OTHER");
            assert_eq!(current(), libc::SCHED_OTHER);
        })
        .join()
        .expect("thread");
    }

    /// A background thread goes idle, and setting every thread's policy leaves it
    /// there.
    #[test]
    fn a_background_thread_stays_idle() {
        let _only = POLICIES.lock().unwrap_or_else(|e| e.into_inner());
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<i32>();
        let idle = std::thread::spawn(move || {
            idle_current();
            ready_tx
                .send(rustix::thread::gettid().as_raw_nonzero().get())
                .expect("send");
            rx.recv().expect("recv");
            current()
        });
        let tid = ready_rx.recv().expect("tid");
        assert_ne!(tid, 0);
        set_all(SchedPolicy::Normal).expect("set every thread's policy");
        tx.send(()).expect("send");
        assert_eq!(idle.join().expect("idle thread"), libc::SCHED_IDLE);
    }
}
