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
//! waiting connection ([`Turn::finish`]). Only with one I/O thread: with more, the tasks
//! woken from the hook go through the runtime's shared queue and wake the other
//! threads to steal them, which measured slower than writing at once. Off (the
//! wait returns at once) on a runtime that is not the server's own, whose threads
//! have no such hook.
//!
//! A connection that ran blocking work in `block_in_place` (a long script, a read
//! from disk) may go on, for the rest of that poll, on a thread that is no longer
//! the I/O thread (the runtime handed its place to another, which may already
//! sleep): nothing waits for the turn on such a thread ([`left_turn`]) until it
//! runs the park hook again as the I/O thread.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

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

#[derive(Default)]
pub struct Turn {
    on: AtomicBool,
    /// The connections waiting for the turn to end.
    waiting: Mutex<Vec<Waker>>,
    /// Where [`Turn::finish`] takes them to, to wake them without the lock.
    spare: Mutex<Vec<Waker>>,
}

impl Turn {
    /// Makes connections wait for the turn to end: call only when the runtime's
    /// park hook calls [`Turn::finish`].
    pub fn enable(&self) {
        self.on.store(true, Ordering::Relaxed);
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

    /// Ends the turn: wakes every connection waiting for it. Called by the I/O
    /// thread's park hook, on the I/O thread.
    pub fn finish(&self) {
        LEFT.set(false);
        let mut spare = self.spare.lock();
        {
            let mut waiting = self.waiting.lock();
            if waiting.is_empty() {
                return;
            }
            std::mem::swap(&mut *waiting, &mut *spare);
        }
        for waker in spare.drain(..) {
            waker.wake();
        }
    }
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
        turn.enable();
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
        turn.enable();
        left_turn();
        turn.end().await;
        turn.end().await;
        assert!(turn.waiting.lock().is_empty());
        turn.finish();
        assert!(!LEFT.get());
    }
}
