//! Replies held until the end of the I/O thread's turn.
//!
//! Redis reads and runs every client that is ready, then writes all their replies
//! before its event loop sleeps. A connection here writes its replies once its
//! requests have run; with the clients on the same machine, each such write wakes
//! a client that has gone back to sleep since the last one, which on a virtual
//! machine is an inter-processor interrupt and a VM exit: 31% of the server's CPU
//! in a `-P 16` ZADD profile, against 2.4% for Redis. Held to the end of the turn,
//! the writes go out back to back, while the client that the first one woke is
//! still reading.
//!
//! A connection with replies to write waits on [`Turn::end`], then makes sure its
//! records reached the log and writes the replies. The I/O thread's park hook,
//! which Tokio runs once the thread has run every task it had, writes the log once
//! for all of them (and under `appendfsync always` fsyncs it), then wakes every
//! waiting connection ([`Turn::finish`]). The thread polls its sockets when a turn
//! ends, not in its middle (the runtime's `event_interval`, see the server's
//! `ONE_THREAD_EVENT_INTERVAL`): a turn serves the connections one poll found
//! ready, as one pass of Redis's event loop serves the clients of one
//! `epoll_wait`. Turns are kept only with one I/O thread: with more, the tasks
//! woken from the hook go through the runtime's shared queue and wake the other
//! threads to steal them, which measured slower than writing at once. Off (the
//! wait returns at once) on a runtime that is not the server's own, whose threads
//! have no such hook.
//!
//! When a turn ends with nobody waiting (the thread has nothing left to run), the
//! hook polls the connections' sockets for a while ([`Turn::spin`], `io-spin-us`,
//! 30 µs) before the thread sleeps. A client that sends its next request within
//! that time finds the thread awake: no wake-up to pay on either side, which on a
//! virtual machine is an inter-processor interrupt and a VM exit each way (one
//! client doing SET in a loop: 17k requests a second without the spin, 31k with
//! it). The spin stops at once when a socket has bytes to read or a task was woken
//! from another thread; an idle server does not spin (nothing ends its turns), nor
//! does one whose thread other threads keep taking the CPU from (no CPU is idle: the
//! spin would keep them waiting, see `Crowding`).
//!
//! A connection that ran blocking work in `block_in_place` (a long script, a read
//! from disk) may go on, for the rest of that poll, on a thread that is no longer
//! the I/O thread (the runtime handed its place to another, which may already
//! sleep): nothing waits for the turn on such a thread ([`left_turn`]) until it
//! runs the park hook again as the I/O thread.

use std::cell::Cell;
use std::future::Future;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;
use rustix::event::{Timespec, epoll};

thread_local! {
    /// Set on a thread that ran a task's blocking work, until it next ends a turn
    /// (see [`left_turn`]).
    static LEFT: Cell<bool> = const { Cell::new(false) };
}

/// Called after `block_in_place` returns: on this thread, nothing waits for the
/// turn to end until the thread ends one itself. The runtime handed the thread's
/// place to another while the work ran; the connection goes on here for the rest
/// of its poll (it may run further requests), and a wait registered from here
/// could come after the other thread's last hook, to be woken only when some
/// other connection's traffic wakes that thread (seen: a 3-second stall).
pub fn left_turn() {
    LEFT.set(true);
}

/// How long a window of [`Crowding`] lasts: 10 ms.
const WINDOW_NS: u64 = 10_000_000;
/// A window is crowded when its thread was taken off its CPU more than this often.
const CROWDED: u64 = 10;

#[derive(Default)]
pub struct Turn {
    on: AtomicBool,
    /// The connections waiting for the turn to end.
    waiting: Mutex<Vec<Waker>>,
    /// Where [`Turn::finish`] takes them to, to wake them without the lock.
    spare: Mutex<Vec<Waker>>,
    /// How long [`Turn::spin`] polls, in microseconds.
    spin_us: AtomicU32,
    /// Whether the thread's CPU is wanted by others, for [`Turn::spin`].
    crowding: Mutex<Crowding>,
    /// An epoll instance of every connection's socket, which the spin polls; made by
    /// [`Turn::enable`] (`None` if it could not be).
    sockets: OnceLock<Option<OwnedFd>>,
}

impl Turn {
    /// Makes connections wait for the turn to end, and the thread spin for
    /// `spin_us` microseconds after a turn that woke nobody: call only when the
    /// runtime's park hook calls [`Turn::finish`] and [`Turn::spin`].
    pub fn enable(&self, spin_us: u32) {
        self.set_spin_us(spin_us);
        let _ = self.sockets.set(
            epoll::create(epoll::CreateFlags::CLOEXEC)
                .inspect_err(|e| tracing::warn!("no spin before the I/O thread sleeps: {e}"))
                .ok(),
        );
        self.on.store(true, Ordering::Relaxed);
    }

    /// Sets how long [`Turn::spin`] polls (CONFIG SET io-spin-us).
    pub fn set_spin_us(&self, us: u32) {
        self.spin_us.store(us, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Resolves once the current turn ends (at once when off).
    pub fn end(&self) -> End<'_> {
        End {
            turn: self,
            waiting: false,
        }
    }

    /// Ends the turn: wakes every connection waiting for it; false if none was.
    /// Called by the I/O thread's park hook, on the I/O thread.
    pub fn finish(&self) -> bool {
        LEFT.set(false);
        let mut spare = self.spare.lock();
        {
            let mut waiting = self.waiting.lock();
            if waiting.is_empty() {
                return false;
            }
            std::mem::swap(&mut *waiting, &mut *spare);
        }
        for waker in spare.drain(..) {
            waker.wake();
        }
        true
    }

    /// Adds a connection's socket to those [`Turn::spin`] polls (when on). A socket
    /// leaves the set by itself when it closes.
    pub fn watch(&self, socket: BorrowedFd<'_>) {
        if let Some(Some(sockets)) = self.sockets.get()
            && let Err(e) = epoll::add(
                sockets,
                socket,
                epoll::EventData::new_u64(0),
                epoll::EventFlags::IN,
            )
        {
            tracing::debug!("a socket the spin does not see: {e}");
        }
    }

    /// Polls the connections' sockets until one has bytes to read, a task is woken
    /// from another thread (the runtime's shared queue is not empty), or the spin's
    /// time is up. Called by the park hook after a turn that woke nobody, in the
    /// runtime's context (whose shared queue it watches): the thread then sleeps in
    /// the runtime's own poll, which returns at once if the spin saw something.
    /// Left out, the thread sleeping at once, while other threads want its CPU (see
    /// `Crowding`). Returns whether the time ran out (or the spin was left out).
    pub fn spin(&self) -> bool {
        let Some(Some(sockets)) = self.sockets.get() else {
            return true;
        };
        let us = self.spin_us.load(Ordering::Relaxed);
        if us == 0 {
            return true;
        }
        // One reading of the clock judges the crowding and starts the spin's time.
        let started = crate::clock::monotonic_ns();
        if self
            .crowding
            .lock()
            .leave_out(started, involuntary_switches)
        {
            return true;
        }
        // Looked up here, not kept: the runtime holds the hook that holds this.
        let runtime = tokio::runtime::Handle::try_current()
            .ok()
            .map(|h| h.metrics());
        let deadline = started + u64::from(us) * 1_000;
        let mut event = [MaybeUninit::<epoll::Event>::uninit(); 1];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        loop {
            match epoll::wait(sockets, &mut event, Some(&now)) {
                Ok(([], _)) => {}
                Ok(_) => return false,
                Err(e) if e == rustix::io::Errno::INTR => {}
                Err(_) => return true,
            }
            if runtime.as_ref().is_some_and(|r| r.global_queue_depth() > 0) {
                return false;
            }
            if crate::clock::monotonic_ns() >= deadline {
                return true;
            }
        }
    }
}

/// Whether other threads want the I/O thread's CPU, judged from how often they take
/// it: [`Turn::spin`] is left out (the thread sleeps at once) while they do. Time is
/// cut into windows of [`WINDOW_NS`]; the spins of the next window are left out when
/// in the last one the thread was taken off its CPU for another (an involuntary
/// context switch) more than [`CROWDED`] times: another thread had work and no CPU
/// was idle (clients on the same machine, busy). A spin then keeps such a thread
/// waiting and spends the I/O thread's share of the CPU, which the scheduler takes
/// out of its latency (50 clients of redis-benchmark on two threads, two CPUs: p99
/// 3.9–4.1 ms spinning, 1.4–1.7 ms with the spins left out, Redis's 1.5–2.0). With a
/// CPU to spare the thread is taken off its CPU a few hundred times a second at most
/// (170 from 50 clients); with none, thousands of times, spinning or not.
#[derive(Debug, Default)]
struct Crowding {
    /// When the window began, in monotonic nanoseconds (0: no window yet).
    since: u64,
    /// The thread's involuntary context switches then.
    switches: u64,
    /// Whether the last window was crowded: the current one's spins are left out.
    crowded: bool,
}

impl Crowding {
    /// Whether a spin at `now` (monotonic nanoseconds) is left out. `switches` reads
    /// the thread's involuntary context switches, once a window.
    fn leave_out(&mut self, now: u64, switches: impl FnOnce() -> u64) -> bool {
        let elapsed = now.saturating_sub(self.since);
        if elapsed >= WINDOW_NS {
            let count = switches();
            let before = std::mem::replace(&mut self.switches, count);
            let first = self.since == 0;
            self.since = now;
            // A window the spins left long is judged by its rate; nothing is judged
            // from the first reading or a count that went back (another thread took
            // the I/O thread's place).
            let taken = u128::from(count.saturating_sub(before)) * u128::from(WINDOW_NS);
            self.crowded = !first && taken > u128::from(CROWDED) * u128::from(elapsed);
        }
        self.crowded
    }
}

/// How many times the calling thread has been taken off its CPU for another
/// (involuntary context switches); 0 where the system cannot say.
#[allow(unsafe_code)] // getrusage, which neither std nor rustix wraps.
fn involuntary_switches() -> u64 {
    // SAFETY: a rusage is plain integers, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage, the only memory the call writes.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return 0;
    }
    u64::try_from(usage.ru_nivcsw).unwrap_or(0)
}

/// The future of [`Turn::end`].
pub struct End<'a> {
    turn: &'a Turn,
    waiting: bool,
}

impl Future for End<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Polled again once woken (or spuriously): either way the wait is over.
        if self.waiting || !self.turn.enabled() || LEFT.get() {
            return Poll::Ready(());
        }
        self.turn.waiting.lock().push(cx.waker().clone());
        self.waiting = true;
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn off_it_returns_at_once() {
        let turn = Turn::default();
        turn.end().await;
        assert!(turn.waiting.lock().is_empty());
    }

    #[test]
    fn on_it_waits_until_the_turn_ends() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let turn = std::sync::Arc::new(Turn::default());
        turn.enable(0);
        let waiter = {
            let turn = turn.clone();
            rt.spawn(async move { turn.end().await })
        };
        // Let the task run up to its wait.
        rt.block_on(tokio::task::yield_now());
        rt.block_on(tokio::task::yield_now());
        assert!(!waiter.is_finished());
        assert_eq!(turn.waiting.lock().len(), 1);
        turn.finish();
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
                .await
                .expect("woken")
                .expect("task");
        });
        assert!(turn.waiting.lock().is_empty());
    }

    #[tokio::test]
    async fn after_blocking_work_nothing_waits_until_the_thread_ends_a_turn() {
        let turn = Turn::default();
        turn.enable(0);
        left_turn();
        turn.end().await;
        turn.end().await;
        assert!(turn.waiting.lock().is_empty());
        turn.finish();
        assert!(!LEFT.get());
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    /// A connected pair of sockets: (the server's end, the client's).
    fn pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (server, client)
    }

    #[test]
    fn the_spin_ends_when_a_socket_has_bytes_to_read() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let turn = Turn::default();
        turn.enable(10_000_000);
        let (server, mut client) = pair();
        turn.watch(server.as_fd());
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            client.write_all(b"PING\r\n").expect("write");
            client
        });
        assert!(!turn.spin(), "the spin ran its time out");
        drop(writer.join());
    }

    #[test]
    fn the_spin_ends_when_a_task_is_woken_from_another_thread() {
        let rt = runtime();
        let turn = Turn::default();
        turn.enable(10_000_000);
        let handle = rt.handle().clone();
        let spawner = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(handle.spawn(async {}));
        });
        // In the runtime's context, as the park hook runs.
        assert!(
            !rt.block_on(async { turn.spin() }),
            "the spin ran its time out"
        );
        spawner.join().expect("spawner");
    }

    #[test]
    fn with_nothing_to_read_the_spin_runs_its_time() {
        use std::os::fd::AsFd;
        let turn = Turn::default();
        turn.enable(20_000);
        let (server, _client) = pair();
        turn.watch(server.as_fd());
        let started = Instant::now();
        assert!(turn.spin());
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    /// A spin at `ms` milliseconds with the thread's switch count at `count`.
    fn spin_at(c: &mut Crowding, ms: u64, count: u64) -> bool {
        c.leave_out(1_000_000_000 + ms * 1_000_000, || count)
    }

    #[test]
    fn a_thread_rarely_taken_off_its_cpu_spins() {
        let mut c = Crowding::default();
        // A switch a millisecond, ten a window: as many as a window may have.
        for ms in 0..1000 {
            assert!(!spin_at(&mut c, ms, ms + 1), "at {ms} ms");
        }
    }

    #[test]
    fn after_a_crowded_window_the_next_one_does_not_spin() {
        let mut c = Crowding::default();
        assert!(!spin_at(&mut c, 0, 100));
        // Eleven switches in the first window: the second is left out.
        assert!(!spin_at(&mut c, 9, 111), "judged only when the window ends");
        assert!(spin_at(&mut c, 10, 111));
        assert!(spin_at(&mut c, 19, 200), "the rest of the window too");
        // Judged again after 10 ms: crowded (89 more), then calm (10 more).
        assert!(spin_at(&mut c, 20, 200));
        assert!(!spin_at(&mut c, 30, 210));
        assert!(!spin_at(&mut c, 35, 300));
    }

    #[test]
    fn a_window_longer_than_10_ms_is_judged_by_its_rate() {
        let mut c = Crowding::default();
        assert!(!spin_at(&mut c, 0, 1));
        // Fifty switches in a second: five a window.
        assert!(!spin_at(&mut c, 1000, 51));
        // Twenty-five in 20 ms: twelve and a half a window.
        assert!(spin_at(&mut c, 1020, 76));
        // Twenty in 20 ms: ten.
        assert!(!spin_at(&mut c, 1040, 96));
    }

    #[test]
    fn nothing_is_judged_from_the_first_reading_or_a_count_that_went_back() {
        let mut c = Crowding::default();
        // The first reading is the thread's whole history, not a window's.
        assert!(!c.leave_out(5_000_000_000, || 1_000_000));
        // The count went back (another thread in the I/O thread's place).
        assert!(!c.leave_out(5_010_000_000, || 5));
        assert!(c.leave_out(5_020_000_000, || 500), "then judged from there");
    }

    /// A thread pinned to one CPU with another that keeps waking up to work there (as
    /// a busy client's threads do) is taken off it, and then stops spinning.
    #[test]
    fn a_thread_sharing_its_cpu_with_a_busy_one_stops_spinning() {
        use rustix::thread::{CpuSet, sched_getcpu, sched_setaffinity};
        let mut one = CpuSet::new();
        one.set(sched_getcpu());
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let busy = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                sched_setaffinity(None, &one).expect("pin the busy thread");
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_micros(20));
                    let until = Instant::now() + Duration::from_micros(30);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                }
            })
        };
        let spinner = std::thread::spawn(move || {
            sched_setaffinity(None, &one).expect("pin the spinning thread");
            let turn = Turn::default();
            turn.enable(2_000);
            let before = involuntary_switches();
            // Spins of 2 ms, for two seconds at most.
            for _ in 0..1000 {
                let started = Instant::now();
                turn.spin();
                if turn.crowding.lock().crowded && started.elapsed() < Duration::from_micros(500) {
                    return (true, involuntary_switches() - before);
                }
            }
            (false, involuntary_switches() - before)
        });
        let (stopped, switches) = spinner.join().expect("spinner");
        stop.store(true, Ordering::Relaxed);
        busy.join().expect("busy thread");
        assert!(switches > 0, "no involuntary switch counted");
        assert!(
            stopped,
            "still spinning after {switches} involuntary switches"
        );
    }
}
