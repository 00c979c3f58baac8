//! CLIENT PAUSE: holding clients' commands (all of them, or only those that write)
//! until a deadline or CLIENT UNPAUSE.
//!
//! A paused command is not consumed: its connection waits (still buffering input and
//! delivering pub/sub messages) and runs it once the pause ends. While a pause is in
//! force the cron does not expire keys, so the dataset stays still, as in Redis.
//! MONITOR clients (replicas, to Redis) are never paused.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use strata_commands::ConnState;
use strata_commands::spec::Flags;
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    /// Unix milliseconds.
    until_ms: u64,
    writes_only: bool,
}

pub struct Pause {
    state: Mutex<Option<State>>,
    /// Whether a pause may be in force (read on every command).
    maybe_active: AtomicBool,
    /// Bumped whenever the pause changes, to wake the waiting clients.
    changed: watch::Sender<u64>,
    /// Clients waiting for the pause to end (counted as blocked in INFO).
    pub waiting: AtomicUsize,
}

impl Default for Pause {
    fn default() -> Pause {
        Pause {
            state: Mutex::new(None),
            maybe_active: AtomicBool::new(false),
            changed: watch::channel(0).0,
            waiting: AtomicUsize::new(0),
        }
    }
}

impl Pause {
    /// Starts or extends a pause: the later deadline and the wider mode win, as in
    /// Redis's `pauseClients`.
    pub fn pause(&self, until_ms: u64, writes_only: bool, now_ms: u64) {
        let mut state = self.state.lock();
        let next = match *state {
            Some(s) if s.until_ms > now_ms => State {
                until_ms: s.until_ms.max(until_ms),
                writes_only: s.writes_only && writes_only,
            },
            _ => State {
                until_ms,
                writes_only,
            },
        };
        *state = Some(next);
        self.maybe_active.store(true, Ordering::Release);
        self.changed.send_modify(|g| *g += 1);
    }

    /// Ends the pause at once.
    pub fn unpause(&self) {
        *self.state.lock() = None;
        self.maybe_active.store(false, Ordering::Release);
        self.changed.send_modify(|g| *g += 1);
    }

    /// Whether a pause is in force now (for the cron, which then does not expire keys).
    pub fn active(&self, now_ms: u64) -> bool {
        self.maybe_active.load(Ordering::Acquire)
            && self.state.lock().is_some_and(|s| s.until_ms > now_ms)
    }

    /// If the command `argv` must wait, the deadline of the pause (Unix ms).
    pub fn holds(
        &self,
        conn: &ConnState,
        argv: &[&[u8]],
        now_ms: u64,
        registry: &strata_commands::Registry,
    ) -> Option<u64> {
        if !self.maybe_active.load(Ordering::Acquire) || conn.info.monitor.load(Ordering::Relaxed) {
            return None;
        }
        let state = (*self.state.lock())?;
        if state.until_ms <= now_ms {
            return None;
        }
        // Commands rejected before running (unknown, wrong arity) are not held.
        let cmd = strata_commands::exec::resolve(registry, argv).ok()?;
        if state.writes_only && !may_write(conn, cmd, registry) {
            return None;
        }
        Some(state.until_ms)
    }

    /// A receiver that sees every change of the pause.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// Redis's `is_may_replicate_command`: a write or a command that may replicate
/// (PUBLISH), or an EXEC whose transaction holds one.
fn may_write(
    conn: &ConnState,
    cmd: &strata_commands::Command,
    registry: &strata_commands::Registry,
) -> bool {
    let writes =
        |c: &strata_commands::Command| c.flags.intersects(Flags::WRITE | Flags::MAY_REPLICATE);
    if writes(cmd) {
        return true;
    }
    if cmd.parent.is_none()
        && cmd.name == "exec"
        && let Some(multi) = &conn.multi
    {
        return multi.queued.iter().any(|argv| {
            let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            strata_commands::exec::resolve(registry, &args).is_ok_and(writes)
        });
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_extend_and_widen() {
        let p = Pause::default();
        assert!(!p.active(0));
        p.pause(1_000, true, 0);
        assert!(p.active(500));
        p.pause(800, false, 500);
        let s = (*p.state.lock()).expect("paused");
        assert_eq!((s.until_ms, s.writes_only), (1_000, false));
        assert!(!p.active(1_000));
        // An expired pause does not carry over.
        p.pause(2_000, true, 1_500);
        let s = (*p.state.lock()).expect("paused");
        assert_eq!((s.until_ms, s.writes_only), (2_000, true));
        p.unpause();
        assert!(!p.active(1_600));
    }
}
