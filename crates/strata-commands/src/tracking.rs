//! Client-side caching (CLIENT TRACKING): remembering which keys each client read,
//! and telling it when they change.
//!
//! In the default mode the server remembers, for every key a tracking client read
//! with a read-only command, the ids of the clients that read it; the first change
//! of the key (a write, its expiry, a flush) sends each of them one invalidation
//! and forgets the key. In BCAST mode nothing is remembered: every change of a key
//! under one of the client's prefixes is announced, batched per prefix at the end
//! of the command. Invalidations are RESP3 pushes (`>2 invalidate [keys]`), or, with
//! REDIRECT, `message`s on `__redis__:invalidate` to another client subscribed to
//! anything, as in Redis 7.0. An invalidation meant for the client that caused it
//! goes after that command's reply.
//!
//! # Invariants
//!
//! - The table's key count stays within `tracking-table-max-keys` (when non-zero):
//!   past it, keys are invalidated and forgotten to make room, as Redis does.
//! - A client leaves the tracker when it turns tracking off, RESETs or disconnects;
//!   table entries naming it are dropped lazily when their key changes.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use strata_resp::{Protocol, ReplyWriter};

use crate::conn::ClientInfo;
use crate::mailbox::OutputLimits;

/// The channel invalidations go to when redirected.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// One client's CLIENT TRACKING settings.
#[derive(Debug, Default)]
pub struct TrackingState {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// The client id invalidations go to (0: this client).
    pub redirect: u64,
    pub redirect_to: Option<Weak<ClientInfo>>,
    /// The redirection target went away (flag `R`, "broken_redirect").
    pub broken: bool,
    /// BCAST prefixes, in order.
    pub prefixes: BTreeSet<Vec<u8>>,
}

/// Invalidations a command produced that are not sent at once: those for the
/// client running it (sent after its reply) and BCAST ones (batched per prefix).
#[derive(Debug, Default)]
pub struct Pending {
    /// Frames for the client running the command, to follow its reply.
    pub after_reply: Vec<u8>,
    bcast: Vec<(Arc<ClientInfo>, Vec<u8>, Vec<u8>)>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.after_reply.is_empty() && self.bcast.is_empty()
    }
}

/// The server-wide tracking state.
#[derive(Default)]
pub struct Tracker {
    /// Key → ids of the clients that read it.
    table: Mutex<HashMap<Vec<u8>, HashSet<u64>>>,
    /// Clients with tracking on, by id.
    clients: RwLock<HashMap<u64, Arc<ClientInfo>>>,
    /// Clients in BCAST mode.
    bcast: RwLock<Vec<Arc<ClientInfo>>>,
    active: AtomicUsize,
    /// `tracking-table-max-keys` (0: no limit).
    pub max_keys: AtomicUsize,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").finish_non_exhaustive()
    }
}

/// Whether two prefixes overlap (one starts with the other).
pub fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

fn proto_of(c: &ClientInfo) -> Protocol {
    if c.resp.load(Ordering::Relaxed) == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}

impl Tracker {
    /// Number of clients with tracking on (INFO's `tracking_clients`).
    #[inline]
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Keys in the table (INFO's `tracking_total_keys`).
    pub fn keys(&self) -> usize {
        self.table.lock().len()
    }

    /// (Client, key) pairs in the table (INFO's `tracking_total_items`).
    pub fn items(&self) -> usize {
        self.table.lock().values().map(HashSet::len).sum()
    }

    /// BCAST prefixes over all clients (INFO's `tracking_total_prefixes`).
    pub fn prefixes(&self) -> usize {
        self.bcast
            .read()
            .iter()
            .map(|c| c.tracking.lock().prefixes.len())
            .sum()
    }

    /// Registers a client whose tracking was just turned on.
    pub fn enable(&self, info: &Arc<ClientInfo>, bcast: bool) {
        let mut clients = self.clients.write();
        if clients.insert(info.id, info.clone()).is_none() {
            self.active.fetch_add(1, Ordering::Relaxed);
        }
        if bcast {
            let mut list = self.bcast.write();
            if !list.iter().any(|c| c.id == info.id) {
                list.push(info.clone());
            }
        }
    }

    /// Turns a client's tracking off (CLIENT TRACKING OFF, RESET, disconnection).
    pub fn disable(&self, info: &ClientInfo) {
        *info.tracking.lock() = TrackingState::default();
        info.tracking_on.store(false, Ordering::Relaxed);
        if self.clients.write().remove(&info.id).is_some() {
            self.active.fetch_sub(1, Ordering::Relaxed);
        }
        self.bcast.write().retain(|c| c.id != info.id);
    }

    /// Remembers that a client read these keys.
    pub fn remember<'k>(
        &self,
        client: u64,
        keys: impl Iterator<Item = &'k [u8]>,
        limits: &OutputLimits,
        pending: &mut Pending,
        now_ms: u64,
    ) {
        let mut table = self.table.lock();
        for key in keys {
            table.entry(key.to_vec()).or_default().insert(client);
        }
        let max = self.max_keys.load(Ordering::Relaxed);
        if max == 0 || table.len() <= max {
            return;
        }
        // Past the limit: invalidate keys to make room (Redis picks them at random;
        // here the table's own order).
        let excess = table.len() - max;
        let victims: Vec<Vec<u8>> = table.keys().take(excess).cloned().collect();
        let mut ids = Vec::with_capacity(victims.len());
        for key in victims {
            if let Some(set) = table.remove(&key) {
                ids.push((key, set));
            }
        }
        drop(table);
        for (key, set) in ids {
            self.send_to_readers(&key, set, 0, limits, pending, now_ms);
        }
    }

    /// A key changed (written by client `modifier`, 0 for the server itself): its
    /// readers are told, and BCAST clients whose prefix matches are queued.
    pub fn invalidate(
        &self,
        key: &[u8],
        modifier: u64,
        limits: &OutputLimits,
        pending: &mut Pending,
        now_ms: u64,
    ) {
        if self.active() == 0 {
            return;
        }
        let readers = self.table.lock().remove(key);
        if let Some(set) = readers {
            self.send_to_readers(key, set, modifier, limits, pending, now_ms);
        }
        for c in self.bcast.read().iter() {
            let state = c.tracking.lock();
            if !state.on || (state.noloop && c.id == modifier) {
                continue;
            }
            for prefix in &state.prefixes {
                if key.starts_with(prefix) {
                    pending
                        .bcast
                        .push((c.clone(), prefix.clone(), key.to_vec()));
                }
            }
        }
    }

    fn send_to_readers(
        &self,
        key: &[u8],
        readers: HashSet<u64>,
        modifier: u64,
        limits: &OutputLimits,
        pending: &mut Pending,
        now_ms: u64,
    ) {
        let clients = self.clients.read();
        for id in readers {
            let Some(c) = clients.get(&id) else {
                continue;
            };
            {
                let state = c.tracking.lock();
                if !state.on || state.bcast || (state.noloop && id == modifier) {
                    continue;
                }
            }
            send(c, Some(&[key]), modifier, limits, pending, now_ms);
        }
    }

    /// Sends the BCAST invalidations a command queued, one message per client and
    /// prefix, keys in the order they changed.
    pub fn flush_bcast(
        &self,
        modifier: u64,
        limits: &OutputLimits,
        pending: &mut Pending,
        now_ms: u64,
    ) {
        if pending.bcast.is_empty() {
            return;
        }
        let queued = std::mem::take(&mut pending.bcast);
        // (client, prefix, keys), in the order first seen.
        type Group = (Arc<ClientInfo>, Vec<u8>, Vec<Vec<u8>>);
        let mut groups: Vec<Group> = Vec::new();
        for (c, prefix, key) in queued {
            match groups
                .iter_mut()
                .find(|(g, p, _)| g.id == c.id && *p == prefix)
            {
                Some((_, _, keys)) => keys.push(key),
                None => groups.push((c, prefix, vec![key])),
            }
        }
        for (c, _, keys) in groups {
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            send(&c, Some(&keys), modifier, limits, pending, now_ms);
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client is told that everything changed
    /// (a null invalidation), and the table is emptied.
    pub fn flushed(
        &self,
        modifier: u64,
        limits: &OutputLimits,
        pending: &mut Pending,
        now_ms: u64,
    ) {
        if self.active() == 0 {
            return;
        }
        self.table.lock().clear();
        let clients: Vec<Arc<ClientInfo>> = self.clients.read().values().cloned().collect();
        for c in &clients {
            send(c, None, modifier, limits, pending, now_ms);
        }
    }
}

/// Sends one invalidation (`keys`, or null for "everything") to a tracking client,
/// through its redirection if it has one.
fn send(
    client: &Arc<ClientInfo>,
    keys: Option<&[&[u8]]>,
    modifier: u64,
    limits: &OutputLimits,
    pending: &mut Pending,
    now_ms: u64,
) {
    let own_proto = proto_of(client);
    let mut state = client.tracking.lock();
    let (target, frame) = if state.redirect != 0 {
        let target = state
            .redirect_to
            .as_ref()
            .and_then(Weak::upgrade)
            .filter(|t| !t.is_killed());
        let Some(target) = target else {
            // The redirection is gone: say so, each time (RESP3 only, as Redis).
            state.broken = true;
            if own_proto == Protocol::Resp3 {
                let mut buf = Vec::new();
                let mut w = ReplyWriter::new(&mut buf, own_proto);
                w.push(2);
                w.bulk(b"tracking-redir-broken");
                w.integer(state.redirect as i64);
                drop(state);
                route(client, buf, modifier, limits, pending, now_ms);
            }
            return;
        };
        // A redirection target must be subscribed to something to get messages.
        if !target.is_pubsub() {
            return;
        }
        let mut buf = Vec::new();
        let mut w = ReplyWriter::new(&mut buf, proto_of(&target));
        w.push(3);
        w.bulk(b"message");
        w.bulk(CHANNEL);
        write_payload(&mut buf, keys, own_proto);
        (target, buf)
    } else if own_proto == Protocol::Resp3 {
        let mut buf = Vec::new();
        let mut w = ReplyWriter::new(&mut buf, own_proto);
        w.push(2);
        w.bulk(b"invalidate");
        write_payload(&mut buf, keys, own_proto);
        (client.clone(), buf)
    } else {
        // RESP2 has no pushes: without a redirection nothing can be sent.
        return;
    };
    drop(state);
    route(&target, frame, modifier, limits, pending, now_ms);
}

/// The keys invalidated, or the null meaning all of them (encoded, as Redis does,
/// in the tracking client's protocol).
fn write_payload(buf: &mut Vec<u8>, keys: Option<&[&[u8]]>, proto: Protocol) {
    let mut w = ReplyWriter::new(buf, proto);
    match keys {
        Some(keys) => {
            w.array(keys.len());
            for k in keys {
                w.bulk(k);
            }
        }
        None => w.null(),
    }
}

/// Hands a frame to its client: after the reply if that client runs the command.
fn route(
    target: &ClientInfo,
    frame: Vec<u8>,
    modifier: u64,
    limits: &OutputLimits,
    pending: &mut Pending,
    now_ms: u64,
) {
    if target.id == modifier {
        pending.after_reply.extend_from_slice(&frame);
    } else {
        target.deliver(Bytes::from(frame), limits, now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64, resp: u8) -> Arc<ClientInfo> {
        let c = Arc::new(ClientInfo::new(
            id,
            String::new(),
            String::new(),
            -1,
            0,
            Box::new(|| {}),
        ));
        c.resp.store(resp, Ordering::Relaxed);
        c.tracking.lock().on = true;
        c
    }

    fn mail(c: &ClientInfo) -> Vec<u8> {
        let mut out = Vec::new();
        c.mailbox.drain_into(&mut out);
        out
    }

    #[test]
    fn default_mode_invalidates_once() {
        let t = Tracker::default();
        let limits = OutputLimits::default();
        let mut pending = Pending::default();
        let a = client(1, 3);
        t.enable(&a, false);
        t.remember(1, [b"k".as_slice()].into_iter(), &limits, &mut pending, 0);
        t.invalidate(b"k", 2, &limits, &mut pending, 0);
        assert_eq!(mail(&a), b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
        t.invalidate(b"k", 2, &limits, &mut pending, 0);
        assert!(mail(&a).is_empty(), "only the first change is announced");
        // The client's own change goes after its reply.
        t.remember(1, [b"k".as_slice()].into_iter(), &limits, &mut pending, 0);
        t.invalidate(b"k", 1, &limits, &mut pending, 0);
        assert!(mail(&a).is_empty());
        assert_eq!(
            pending.after_reply,
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        );
        t.disable(&a);
        assert_eq!(t.active(), 0);
    }

    #[test]
    fn bcast_batches_per_prefix() {
        let t = Tracker::default();
        let limits = OutputLimits::default();
        let mut pending = Pending::default();
        let a = client(1, 3);
        {
            let mut s = a.tracking.lock();
            s.bcast = true;
            s.prefixes = [b"p".to_vec(), b"q".to_vec()].into_iter().collect();
        }
        t.enable(&a, true);
        for k in [b"p1".as_slice(), b"z", b"q1", b"p2"] {
            t.invalidate(k, 2, &limits, &mut pending, 0);
        }
        t.flush_bcast(2, &limits, &mut pending, 0);
        assert_eq!(
            mail(&a),
            b">2\r\n$10\r\ninvalidate\r\n*2\r\n$2\r\np1\r\n$2\r\np2\r\n\
              >2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nq1\r\n"
        );
    }

    #[test]
    fn the_table_stays_within_its_limit() {
        let t = Tracker::default();
        t.max_keys.store(10, Ordering::Relaxed);
        let limits = OutputLimits::default();
        let mut pending = Pending::default();
        let a = client(1, 3);
        t.enable(&a, false);
        let keys: Vec<Vec<u8>> = (0..25).map(|i| format!("k{i}").into_bytes()).collect();
        t.remember(1, keys.iter().map(Vec::as_slice), &limits, &mut pending, 0);
        assert_eq!(t.keys(), 10);
        assert_eq!(pending.after_reply, b"");
        assert_eq!(
            mail(&a).windows(10).filter(|w| w == b"invalidate").count(),
            15
        );
    }

    #[test]
    fn prefixes_overlap() {
        assert!(overlap(b"ab", b"a"));
        assert!(overlap(b"", b"x"));
        assert!(!overlap(b"ab", b"ac"));
    }
}
