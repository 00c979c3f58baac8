//! What other connections send a client (pub/sub messages, MONITOR lines), and the
//! output-buffer limits that keep a slow reader from growing the server's memory.
//!
//! A publisher never writes to another client's socket: it appends an already encoded
//! frame (shared by every receiver, see [`crate::pubsub`]) to the receiver's
//! [`Mailbox`] and wakes the receiver's task, which moves the frames to its output and
//! writes them. The bytes waiting in the mailbox plus the replies not yet written are
//! the client's pending output; when they pass its class's limit
//! (`client-output-buffer-limit`) the client is closed, as Redis does.
//!
//! # Invariants
//!
//! - `Mailbox::bytes` equals the total length of the queued frames.
//! - A client closed for its limits has an empty mailbox: its frames are dropped at
//!   once, so the memory returns before its task even runs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;

/// Frames waiting for a connection's task to write them.
#[derive(Debug, Default)]
pub struct Mailbox {
    frames: Mutex<VecDeque<Bytes>>,
    /// Total bytes queued, readable without the lock.
    bytes: AtomicUsize,
}

impl Mailbox {
    /// Appends a frame; returns the bytes now queued.
    pub fn push(&self, frame: Bytes) -> usize {
        let mut frames = self.frames.lock();
        let len = frame.len();
        frames.push_back(frame);
        self.bytes.fetch_add(len, Ordering::Relaxed) + len
    }

    /// Bytes queued.
    #[inline]
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of frames queued (CLIENT LIST's `oll`).
    pub fn len(&self) -> usize {
        self.frames.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes() == 0 && self.frames.lock().is_empty()
    }

    /// Moves every queued frame to the end of `out`.
    pub fn drain_into(&self, out: &mut Vec<u8>) {
        if self.bytes() == 0 {
            return;
        }
        let mut frames = self.frames.lock();
        let total: usize = frames.iter().map(Bytes::len).sum();
        out.reserve(total);
        for f in frames.drain(..) {
            out.extend_from_slice(&f);
        }
        self.bytes.fetch_sub(total, Ordering::Relaxed);
    }

    /// Drops every queued frame.
    pub fn clear(&self) {
        let mut frames = self.frames.lock();
        let total: usize = frames.iter().map(Bytes::len).sum();
        frames.clear();
        self.bytes.fetch_sub(total, Ordering::Relaxed);
    }
}

/// The client classes of `client-output-buffer-limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputClass {
    Normal = 0,
    Replica = 1,
    Pubsub = 2,
}

/// One class's limits; 0 disables a limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassLimit {
    pub hard_bytes: u64,
    pub soft_bytes: u64,
    pub soft_seconds: u64,
}

#[derive(Debug, Default)]
struct AtomicLimit {
    hard_bytes: AtomicU64,
    soft_bytes: AtomicU64,
    soft_seconds: AtomicU64,
}

/// The output-buffer limits in force, readable on the hot path without a lock; the
/// server mirrors `client-output-buffer-limit` here.
#[derive(Debug, Default)]
pub struct OutputLimits {
    classes: [AtomicLimit; 3],
}

impl OutputLimits {
    pub fn set(&self, class: OutputClass, limit: ClassLimit) {
        let a = &self.classes[class as usize];
        a.hard_bytes.store(limit.hard_bytes, Ordering::Relaxed);
        a.soft_bytes.store(limit.soft_bytes, Ordering::Relaxed);
        a.soft_seconds.store(limit.soft_seconds, Ordering::Relaxed);
    }

    pub fn get(&self, class: OutputClass) -> ClassLimit {
        let a = &self.classes[class as usize];
        ClassLimit {
            hard_bytes: a.hard_bytes.load(Ordering::Relaxed),
            soft_bytes: a.soft_bytes.load(Ordering::Relaxed),
            soft_seconds: a.soft_seconds.load(Ordering::Relaxed),
        }
    }
}

/// When a client's pending output first reached its soft limit (Unix milliseconds,
/// 0 when below it): the state behind the soft limit's "for so many seconds".
#[derive(Debug, Default)]
pub struct SoftLimitClock(AtomicU64);

impl SoftLimitClock {
    /// Redis's `checkClientOutputBufferLimits`: whether `pending` bytes break `limit`
    /// now, at once past the hard limit, or past the soft limit continuously for more
    /// than its seconds.
    pub fn exceeded(&self, limit: ClassLimit, pending: usize, now_ms: u64) -> bool {
        let pending = pending as u64;
        let hard = limit.hard_bytes != 0 && pending >= limit.hard_bytes;
        let soft_now = limit.soft_bytes != 0 && pending >= limit.soft_bytes;
        let mut soft = false;
        if soft_now {
            let since = self.0.load(Ordering::Relaxed);
            if since == 0 {
                self.0.store(now_ms.max(1), Ordering::Relaxed);
            } else {
                soft = now_ms.saturating_sub(since) / 1000 > limit.soft_seconds;
            }
        } else if self.0.load(Ordering::Relaxed) != 0 {
            self.0.store(0, Ordering::Relaxed);
        }
        hard || soft
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_counts_bytes() {
        let m = Mailbox::default();
        assert_eq!(m.push(Bytes::from_static(b"abc")), 3);
        assert_eq!(m.push(Bytes::from_static(b"de")), 5);
        assert_eq!(m.len(), 2);
        let mut out = b"x".to_vec();
        m.drain_into(&mut out);
        assert_eq!(out, b"xabcde");
        assert_eq!(m.bytes(), 0);
        assert!(m.is_empty());
        m.push(Bytes::from_static(b"zz"));
        m.clear();
        assert_eq!(m.bytes(), 0);
    }

    #[test]
    fn hard_and_soft_limits() {
        let clock = SoftLimitClock::default();
        let limit = ClassLimit {
            hard_bytes: 100,
            soft_bytes: 50,
            soft_seconds: 2,
        };
        assert!(!clock.exceeded(limit, 10, 1_000));
        assert!(clock.exceeded(limit, 100, 1_000));
        // Past the soft limit: counted from the first time it is seen.
        assert!(!clock.exceeded(limit, 60, 1_000));
        assert!(!clock.exceeded(limit, 60, 3_000));
        assert!(clock.exceeded(limit, 60, 4_000));
        // Dropping below resets the clock.
        assert!(!clock.exceeded(limit, 10, 4_100));
        assert!(!clock.exceeded(limit, 60, 9_000));
        let off = ClassLimit::default();
        assert!(!clock.exceeded(off, usize::MAX, 10_000));
    }
}
