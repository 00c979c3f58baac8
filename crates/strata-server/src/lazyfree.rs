//! Lazy freeing: values and databases dropped on a background thread, so that a
//! client deleting a huge collection (UNLINK, FLUSHALL ASYNC, or anything under the
//! `lazyfree-lazy-*` directives) does not stall the others.
//!
//! Commands decide *what* to hand over (a value whose free effort exceeds Redis's
//! threshold, see `strata_keyspace::Value::free_lazily`); this module owns the thread
//! and the two counters INFO reports: `lazyfree_pending_objects` (handed over, not yet
//! freed) and `lazyfreed_objects` (freed so far). A database counts as its number of
//! keys, a value as one object, as in Redis.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::mpsc::Sender;

use parking_lot::Mutex;
use strata_commands::server::LazyFree;
use strata_keyspace::Detached;

/// The background freeing thread and its counters.
pub struct LazyFreer {
    tx: Mutex<Option<Sender<Vec<Detached>>>>,
    counts: Arc<Counts>,
    /// The `lazyfree-lazy-*` switches, one bit each (see [`LazyFreer::switches`]).
    switches: AtomicU8,
}

#[derive(Default)]
struct Counts {
    pending: AtomicU64,
    freed: AtomicU64,
}

const USER_DEL: u8 = 1;
const SERVER_DEL: u8 = 2;
const EXPIRE: u8 = 4;
const USER_FLUSH: u8 = 8;
const EVICTION: u8 = 16;

impl LazyFreer {
    /// Starts the thread. If it cannot be started, data is freed by the caller.
    pub fn start() -> LazyFreer {
        let counts = Arc::new(Counts::default());
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Detached>>();
        let theirs = counts.clone();
        let started = std::thread::Builder::new()
            .name("strata-lazyfree".into())
            .spawn(move || {
                for batch in rx {
                    let n: usize = batch.iter().map(Detached::len).sum();
                    drop(batch);
                    theirs.pending.fetch_sub(n as u64, Ordering::Relaxed);
                    theirs.freed.fetch_add(n as u64, Ordering::Relaxed);
                }
            })
            .is_ok();
        LazyFreer {
            tx: Mutex::new(started.then_some(tx)),
            counts,
            switches: AtomicU8::new(0),
        }
    }

    /// Hands `data` to the thread (or frees it here if the thread is gone).
    pub fn free_later(&self, data: Vec<Detached>) {
        let n: usize = data.iter().map(Detached::len).sum();
        if n == 0 {
            return;
        }
        let tx = self.tx.lock();
        if let Some(tx) = tx.as_ref() {
            self.counts.pending.fetch_add(n as u64, Ordering::Relaxed);
            if let Err(unsent) = tx.send(data) {
                self.counts.pending.fetch_sub(n as u64, Ordering::Relaxed);
                drop(unsent);
            }
        }
    }

    /// Objects handed over and not yet freed.
    pub fn pending(&self) -> u64 {
        self.counts.pending.load(Ordering::Relaxed)
    }

    /// Objects freed in the background since the start (or CONFIG RESETSTAT).
    pub fn freed(&self) -> u64 {
        self.counts.freed.load(Ordering::Relaxed)
    }

    pub fn reset_stats(&self) {
        self.counts.freed.store(0, Ordering::Relaxed);
    }

    pub fn switches(&self) -> LazyFree {
        let bits = self.switches.load(Ordering::Relaxed);
        LazyFree {
            user_del: bits & USER_DEL != 0,
            server_del: bits & SERVER_DEL != 0,
            expire: bits & EXPIRE != 0,
            user_flush: bits & USER_FLUSH != 0,
            eviction: bits & EVICTION != 0,
        }
    }

    pub fn set_switches(&self, s: LazyFree) {
        let bits = (s.user_del as u8 * USER_DEL)
            | (s.server_del as u8 * SERVER_DEL)
            | (s.expire as u8 * EXPIRE)
            | (s.user_flush as u8 * USER_FLUSH)
            | (s.eviction as u8 * EVICTION);
        self.switches.store(bits, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_keyspace::{Keyspace, Value};

    #[test]
    fn counts_what_it_frees() {
        let f = LazyFreer::start();
        f.free_later(vec![Detached::Value(Value::string(b"x"))]);
        let ks = Keyspace::new(1, 1);
        {
            let mut shard = ks.lock(0);
            let db = shard.db(0);
            for k in [&b"a"[..], b"b"] {
                let h = db.hash(k);
                db.set(h, k, Value::string(b"1"), strata_keyspace::Ttl::Persist, 0);
            }
            f.free_later(vec![db.clear()]);
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while f.freed() < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!((f.freed(), f.pending()), (3, 0));
        let s = LazyFree {
            expire: true,
            user_flush: true,
            ..LazyFree::default()
        };
        f.set_switches(s);
        assert_eq!(f.switches(), s);
    }
}
