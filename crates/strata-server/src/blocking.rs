//! Clients blocked on keys (BLPOP, BZPOPMIN and friends): FIFO wait lists per key,
//! and serving a blocked client as soon as a command makes one of its keys ready.
//!
//! A blocking command that finds nothing asks to block; its connection registers a
//! [`Waiter`] in the wait list of each of its keys and sleeps. When a command makes a
//! key ready (a push to a list, an add to a sorted set, a value moved onto the key),
//! the thread that ran it serves that key's waiters in arrival order *on their
//! behalf*: it runs each waiter's command against the keyspace and hands the reply to
//! the sleeping connection. So the first client to block is the first served, and an
//! element pushed for a blocked client cannot be taken by a client that did not wait.
//!
//! # Invariants
//!
//! - A waiter is served at most once: its state moves from `Waiting` to `Served` or
//!   `Cancelled` exactly once, under its own lock.
//! - No wait-list lock is held while a command runs: serving takes a waiter out of
//!   the list under the lock, then runs its command after releasing it.
//! - A registered waiter always re-checks its keys once after registering, so a push
//!   that happened between its first check and its registration is not missed.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use strata_commands::{ClientInfo, ConnState, execute};
use strata_resp::Protocol;
use tokio::sync::Notify;

use crate::state::{ServerState, unix_ms};

enum WaiterState {
    Waiting,
    /// The reply, and the log batch it must wait for to be durable.
    Served(Vec<u8>, Option<u64>),
    Cancelled,
}

/// A client waiting for one of its keys.
pub struct Waiter {
    info: Arc<ClientInfo>,
    db: usize,
    proto: Protocol,
    argv: Vec<Vec<u8>>,
    keys: Vec<Vec<u8>>,
    state: Mutex<WaiterState>,
    /// Wakes the waiting connection once the waiter is served.
    pub notify: Notify,
}

impl Waiter {
    pub fn new(
        info: Arc<ClientInfo>,
        db: usize,
        proto: Protocol,
        argv: Vec<Vec<u8>>,
        keys: Vec<Vec<u8>>,
    ) -> Arc<Waiter> {
        Arc::new(Waiter {
            info,
            db,
            proto,
            argv,
            keys,
            state: Mutex::new(WaiterState::Waiting),
            notify: Notify::new(),
        })
    }

    /// The reply (and the log batch it waits for), once served.
    pub fn take_reply(&self) -> Option<(Vec<u8>, Option<u64>)> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, WaiterState::Cancelled) {
            WaiterState::Served(reply, durable) => Some((reply, durable)),
            other => {
                *state = other;
                None
            }
        }
    }

    /// Gives up waiting; false if the waiter was served first (take its reply).
    pub fn cancel(&self) -> bool {
        let mut state = self.state.lock();
        match *state {
            WaiterState::Waiting => {
                *state = WaiterState::Cancelled;
                true
            }
            WaiterState::Cancelled => true,
            WaiterState::Served(..) => false,
        }
    }
}

/// A key of a database.
type DbKey = (usize, Vec<u8>);

/// Every blocked client, by the keys it waits for.
#[derive(Default)]
pub struct Blocking {
    lists: Mutex<HashMap<DbKey, VecDeque<Arc<Waiter>>>>,
    blocked: AtomicUsize,
}

impl Blocking {
    /// Number of blocked clients (INFO's `blocked_clients`).
    pub fn blocked(&self) -> usize {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Adds a waiter to the wait list of each of its keys.
    pub fn register(&self, w: &Arc<Waiter>) {
        let mut lists = self.lists.lock();
        for key in &w.keys {
            lists
                .entry((w.db, key.clone()))
                .or_default()
                .push_back(w.clone());
        }
        self.blocked.fetch_add(1, Ordering::Relaxed);
    }

    /// Removes a waiter from every wait list.
    pub fn unregister(&self, w: &Arc<Waiter>) {
        let mut lists = self.lists.lock();
        let mut found = false;
        for key in &w.keys {
            let k = (w.db, key.clone());
            if let Some(q) = lists.get_mut(&k) {
                let before = q.len();
                q.retain(|x| !Arc::ptr_eq(x, w));
                found |= q.len() != before;
                if q.is_empty() {
                    lists.remove(&k);
                }
            }
        }
        if found {
            self.blocked.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn first_waiter(&self, db: usize, key: &[u8]) -> Option<Arc<Waiter>> {
        let lists = self.lists.lock();
        lists
            .get(&(db, key.to_vec()))
            .and_then(|q| q.front().cloned())
    }

    /// Runs a waiter's command on its behalf. If it produced a reply (rather than
    /// blocking again or finding the key of the wrong type), the waiter is served and
    /// leaves every wait list; the keys the command made ready are returned.
    pub fn try_serve(
        &self,
        server: &ServerState,
        w: &Arc<Waiter>,
    ) -> Option<Vec<(usize, Vec<u8>)>> {
        let mut state = w.state.lock();
        if !matches!(*state, WaiterState::Waiting) {
            return None;
        }
        let mut conn = ConnState::new(w.info.clone(), true);
        conn.set_db(w.db);
        conn.set_proto(w.proto);
        // MONITOR showed the command when it blocked.
        conn.replaying = true;
        let argv: Vec<&[u8]> = w.argv.iter().map(Vec::as_slice).collect();
        let mut out = Vec::new();
        let outcome = execute(
            server,
            &server.keyspace,
            &mut conn,
            &mut out,
            &argv,
            unix_ms(),
        );
        out.append(&mut conn.after_reply);
        if conn.block.is_some() || out.starts_with(b"-WRONGTYPE") {
            // Still nothing for it (or a value it cannot take, which Redis 7.0 also
            // leaves blocked clients waiting through).
            return None;
        }
        *state = WaiterState::Served(out, outcome.durable);
        drop(state);
        self.unregister(w);
        w.notify.notify_one();
        Some(outcome.ready)
    }

    /// Serves the clients blocked on keys made ready, first come first served, and
    /// follows the chain when serving one makes another key ready (BLMOVE).
    pub fn serve_ready(&self, server: &ServerState, ready: Vec<(usize, Vec<u8>)>) {
        let mut work: VecDeque<(usize, Vec<u8>)> = ready.into();
        while let Some((db, key)) = work.pop_front() {
            while let Some(w) = self.first_waiter(db, &key) {
                match self.try_serve(server, &w) {
                    Some(more) => work.extend(more),
                    None => {
                        let cancelled = matches!(*w.state.lock(), WaiterState::Cancelled);
                        if cancelled {
                            self.unregister(&w);
                            continue;
                        }
                        break;
                    }
                }
            }
        }
    }
}

impl Blocking {
    /// CLIENT UNBLOCK: serves the blocked client `id` with its timeout reply or an
    /// UNBLOCKED error; false if it is not blocked.
    pub fn unblock(&self, id: u64, with_error: bool) -> bool {
        let found = {
            let lists = self.lists.lock();
            lists
                .values()
                .flat_map(|q| q.iter())
                .find(|w| w.info.id == id)
                .cloned()
        };
        let Some(w) = found else {
            return false;
        };
        let reply = if with_error {
            b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_vec()
        } else {
            timeout_reply(w.proto).to_vec()
        };
        {
            let mut state = w.state.lock();
            if !matches!(*state, WaiterState::Waiting) {
                return false;
            }
            *state = WaiterState::Served(reply, None);
        }
        self.unregister(&w);
        w.notify.notify_one();
        true
    }
}

/// The reply a blocked command gives on timeout.
pub fn timeout_reply(proto: Protocol) -> &'static [u8] {
    match proto {
        Protocol::Resp2 => strata_resp::reply::NULL_ARRAY,
        Protocol::Resp3 => strata_resp::reply::NULL,
    }
}
