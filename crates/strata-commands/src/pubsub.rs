//! The pub/sub hub: who is subscribed to what, and delivering published messages.
//!
//! Three kinds of subscription exist, as in Redis 7: channels (SUBSCRIBE), patterns
//! (PSUBSCRIBE, matched with Redis's glob rules) and shard channels (SSUBSCRIBE). The
//! hub maps each channel or pattern to its subscribers; each connection keeps its own
//! [`Subscriptions`] (for its counts, for UNSUBSCRIBE without arguments and for the
//! clean-up when it closes or RESETs).
//!
//! Publishing encodes a message once per protocol that some receiver speaks (and, for
//! pattern subscribers, once per matching pattern), as a [`Bytes`] frame that every
//! receiver shares; each receiver's mailbox gets a reference, and its task writes it
//! (see [`crate::mailbox`]).
//!
//! The hub also holds the other things that flow between connections: the MONITOR
//! clients, the keyspace-notification classes in force ([`crate::notify`]), the
//! output-buffer limits and the per-client subscription cap.
//!
//! # Invariants
//!
//! - A client is in the hub's map for a channel exactly when the channel is in its
//!   [`Subscriptions`], and its `ClientInfo` counts match the sets' sizes.
//! - Locks: the hub's lock may be taken while shard locks are held (keyspace events),
//!   never the other way round; a mailbox lock is taken last and held briefly.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use bytes::Bytes;
use indexmap::IndexSet;
use parking_lot::RwLock;
use strata_keyspace::glob;
use strata_resp::{Protocol, ReplyWriter};

use crate::conn::{ClientInfo, ConnState};
use crate::error::CmdError;
use crate::mailbox::OutputLimits;

type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A kind of subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// One connection's subscriptions, in the order they were made (an unsubscription
/// moves the last one into the freed place).
#[derive(Debug, Default)]
pub struct Subscriptions {
    channels: IndexSet<Vec<u8>, foldhash::fast::RandomState>,
    patterns: IndexSet<Vec<u8>, foldhash::fast::RandomState>,
    shard: IndexSet<Vec<u8>, foldhash::fast::RandomState>,
}

impl Subscriptions {
    fn set(&self, kind: Kind) -> &IndexSet<Vec<u8>, foldhash::fast::RandomState> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn set_mut(&mut self, kind: Kind) -> &mut IndexSet<Vec<u8>, foldhash::fast::RandomState> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Whether the client has any subscription (Redis's `CLIENT_PUBSUB` flag).
    pub fn any(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }

    pub fn total(&self) -> usize {
        self.channels.len() + self.patterns.len() + self.shard.len()
    }

    /// The count a (un)subscribe confirmation reports: channels and patterns
    /// together, shard channels on their own.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }
}

/// Subscribers of one channel or pattern, by client id.
type Subscribers = HashMap<u64, Arc<ClientInfo>>;

#[derive(Default)]
struct Maps {
    channels: HashMap<Vec<u8>, Subscribers>,
    patterns: HashMap<Vec<u8>, Subscribers>,
    shard: HashMap<Vec<u8>, Subscribers>,
}

impl Maps {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Vec<u8>, Subscribers> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn map_ref(&self, kind: Kind) -> &HashMap<Vec<u8>, Subscribers> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }
}

/// The server-wide pub/sub state; see the module documentation.
#[derive(Default)]
pub struct PubSub {
    maps: RwLock<Maps>,
    monitors: RwLock<Vec<Arc<ClientInfo>>>,
    monitor_count: AtomicUsize,
    /// The keyspace-notification classes in force (see [`crate::notify`]).
    notify_flags: AtomicU32,
    /// The largest number of subscriptions one client may hold; 0 = no limit.
    max_per_client: AtomicUsize,
    /// `client-output-buffer-limit`, as the server last set it.
    pub limits: OutputLimits,
    /// CLIENT TRACKING.
    pub tracking: crate::tracking::Tracker,
}

impl std::fmt::Debug for PubSub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PubSub").finish_non_exhaustive()
    }
}

/// A published message, encoded lazily per protocol and shared by its receivers.
struct Frames<'a> {
    parts: [&'a [u8]; 4],
    n: usize,
    resp2: Option<Bytes>,
    resp3: Option<Bytes>,
}

impl<'a> Frames<'a> {
    fn new(parts: &[&'a [u8]]) -> Frames<'a> {
        let mut all: [&[u8]; 4] = [b""; 4];
        for (slot, p) in all.iter_mut().zip(parts) {
            *slot = p;
        }
        Frames {
            parts: all,
            n: parts.len().min(4),
            resp2: None,
            resp3: None,
        }
    }

    fn get(&mut self, proto: Protocol) -> Bytes {
        let slot = match proto {
            Protocol::Resp2 => &mut self.resp2,
            Protocol::Resp3 => &mut self.resp3,
        };
        if let Some(b) = slot {
            return b.clone();
        }
        let parts = &self.parts[..self.n];
        let mut buf = Vec::with_capacity(16 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
        let mut w = ReplyWriter::new(&mut buf, proto);
        w.push(parts.len());
        for p in parts {
            w.bulk(p);
        }
        let b = Bytes::from(buf);
        *slot = Some(b.clone());
        b
    }
}

/// The protocol a client speaks now, from its shared info.
fn proto_of(c: &ClientInfo) -> Protocol {
    if c.resp.load(Ordering::Relaxed) == 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}

impl PubSub {
    pub fn new() -> PubSub {
        PubSub::default()
    }

    /// Sets the per-client subscription cap (0: none).
    pub fn set_max_per_client(&self, max: usize) {
        self.max_per_client.store(max, Ordering::Relaxed);
    }

    /// SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE: subscribes to each name and writes one
    /// confirmation per name. Past the per-client cap nothing is subscribed.
    pub fn subscribe(
        &self,
        conn: &mut ConnState,
        kind: Kind,
        names: &[&[u8]],
        out: &mut ReplyWriter,
    ) -> Result<(), CmdError> {
        let max = self.max_per_client.load(Ordering::Relaxed);
        if max > 0 {
            let set = conn.subs.set(kind);
            let mut fresh: Vec<&[u8]> = names
                .iter()
                .copied()
                .filter(|n| !set.contains(*n))
                .collect();
            fresh.sort_unstable();
            fresh.dedup();
            if conn.subs.total() + fresh.len() > max {
                return Err(CmdError::err(format!(
                    "this client would hold more than {max} subscriptions \
                     (pubsub-max-subscriptions-per-client)"
                )));
            }
        }
        for name in names {
            if conn.subs.set_mut(kind).insert(name.to_vec()) {
                self.maps
                    .write()
                    .map(kind)
                    .entry(name.to_vec())
                    .or_default()
                    .insert(conn.info.id, conn.info.clone());
            }
            confirm(
                out,
                kind.subscribe_word(),
                Some(name),
                conn.subs.count(kind),
            );
        }
        sync_counts(conn);
        Ok(())
    }

    /// UNSUBSCRIBE, PUNSUBSCRIBE and SUNSUBSCRIBE: with no names, from every one of
    /// that kind; one confirmation per name, or one with a null name when there was
    /// nothing to leave.
    pub fn unsubscribe(
        &self,
        conn: &mut ConnState,
        kind: Kind,
        names: &[&[u8]],
        out: &mut ReplyWriter,
    ) {
        let names: Vec<Vec<u8>> = if names.is_empty() {
            conn.subs.set(kind).iter().cloned().collect()
        } else {
            names.iter().map(|n| n.to_vec()).collect()
        };
        if names.is_empty() {
            confirm(out, kind.unsubscribe_word(), None, conn.subs.count(kind));
            return;
        }
        for name in &names {
            self.leave(conn, kind, name);
            confirm(
                out,
                kind.unsubscribe_word(),
                Some(name),
                conn.subs.count(kind),
            );
        }
        sync_counts(conn);
    }

    fn leave(&self, conn: &mut ConnState, kind: Kind, name: &[u8]) {
        if conn.subs.set_mut(kind).swap_remove(name) {
            let mut maps = self.maps.write();
            let map = maps.map(kind);
            if let Some(subs) = map.get_mut(name) {
                subs.remove(&conn.info.id);
                if subs.is_empty() {
                    map.remove(name);
                }
            }
        }
    }

    /// Forgets every subscription of a connection, silently (disconnection, RESET),
    /// and takes it off the MONITOR list.
    pub fn forget(&self, conn: &mut ConnState) {
        if conn.subs.any() {
            let mut maps = self.maps.write();
            for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
                let map = maps.map(kind);
                for name in conn.subs.set_mut(kind).drain(..) {
                    if let Some(subs) = map.get_mut(&name) {
                        subs.remove(&conn.info.id);
                        if subs.is_empty() {
                            map.remove(&name);
                        }
                    }
                }
            }
            drop(maps);
            sync_counts(conn);
        }
        if conn.info.monitor.swap(false, Ordering::Relaxed) {
            let mut monitors = self.monitors.write();
            monitors.retain(|c| c.id != conn.info.id);
            self.monitor_count.store(monitors.len(), Ordering::Relaxed);
        }
    }

    /// PUBLISH (and SPUBLISH with `shard`): delivers the message to the channel's
    /// subscribers and, for a plain channel, to every client whose pattern matches;
    /// returns the number of deliveries, as Redis counts them.
    pub fn publish(&self, channel: &[u8], message: &[u8], shard: bool, now_ms: u64) -> usize {
        let maps = self.maps.read();
        let mut delivered = 0;
        let (kind, word): (Kind, &[u8]) = if shard {
            (Kind::Shard, b"smessage")
        } else {
            (Kind::Channel, b"message")
        };
        if let Some(subs) = maps.map_ref(kind).get(channel) {
            let mut frames = Frames::new(&[word, channel, message]);
            for c in subs.values() {
                c.deliver(frames.get(proto_of(c)), &self.limits, now_ms);
                delivered += 1;
            }
        }
        if !shard {
            for (pattern, subs) in &maps.patterns {
                if !glob::matches(pattern, channel) {
                    continue;
                }
                let mut frames = Frames::new(&[b"pmessage", pattern, channel, message]);
                for c in subs.values() {
                    c.deliver(frames.get(proto_of(c)), &self.limits, now_ms);
                    delivered += 1;
                }
            }
        }
        delivered
    }

    /// Active channels (or shard channels) matching `pattern` (all without one).
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let maps = self.maps.read();
        maps.map_ref(kind)
            .keys()
            .filter(|c| pattern.is_none_or(|p| glob::matches(p, c)))
            .cloned()
            .collect()
    }

    /// Subscribers of a channel (or shard channel), patterns not counted.
    pub fn numsub(&self, kind: Kind, channel: &[u8]) -> usize {
        self.maps
            .read()
            .map_ref(kind)
            .get(channel)
            .map_or(0, |s| s.len())
    }

    /// Every channel, pattern and shard channel a client subscribes to.
    pub fn subscriptions_of(&self, client: u64) -> Vec<(Kind, Vec<u8>)> {
        let maps = self.maps.read();
        let mut found = Vec::new();
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for (name, subscribers) in maps.map_ref(kind) {
                if subscribers.contains_key(&client) {
                    found.push((kind, name.clone()));
                }
            }
        }
        found
    }

    /// Number of distinct patterns subscribed to.
    pub fn numpat(&self) -> usize {
        self.maps.read().patterns.len()
    }

    /// Makes a client a MONITOR client; false if it already was one.
    pub fn add_monitor(&self, info: &Arc<ClientInfo>) -> bool {
        if info.monitor.swap(true, Ordering::Relaxed) {
            return false;
        }
        let mut monitors = self.monitors.write();
        monitors.push(info.clone());
        self.monitor_count.store(monitors.len(), Ordering::Relaxed);
        true
    }

    /// Whether any client is in MONITOR mode.
    #[inline]
    pub fn has_monitors(&self) -> bool {
        self.monitor_count.load(Ordering::Relaxed) > 0
    }

    /// Sends a line to every MONITOR client.
    pub fn feed_monitors(&self, line: Bytes, now_ms: u64) {
        for c in self.monitors.read().iter() {
            c.deliver(line.clone(), &self.limits, now_ms);
        }
    }

    /// The keyspace-notification classes in force.
    #[inline]
    pub fn notify_flags(&self) -> u32 {
        self.notify_flags.load(Ordering::Relaxed)
    }

    pub fn set_notify_flags(&self, flags: u32) {
        self.notify_flags.store(flags, Ordering::Relaxed);
    }

    /// Tells the keyspace which of its events someone needs now: expired keys for
    /// notifications or client tracking, new keys for notifications.
    pub fn sync_event_flags(&self, ks: &strata_keyspace::Keyspace) {
        let (expired, new) = crate::notify::logged_events(self.notify_flags());
        ks.event_flags()
            .set(expired || self.tracking.active() > 0, new);
    }
}

/// Writes a (un)subscribe confirmation: a push in RESP3, an array in RESP2.
fn confirm(out: &mut ReplyWriter, word: &[u8], name: Option<&[u8]>, count: usize) {
    out.push(3);
    out.bulk(word);
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.integer(count as i64);
}

/// Mirrors a connection's subscription counts into what CLIENT LIST shows.
fn sync_counts(conn: &ConnState) {
    let info = &conn.info;
    info.sub.store(conn.subs.channels.len(), Ordering::Relaxed);
    info.psub.store(conn.subs.patterns.len(), Ordering::Relaxed);
    info.ssub.store(conn.subs.shard.len(), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(id: u64) -> ConnState {
        let info = Arc::new(ClientInfo::new(
            id,
            format!("127.0.0.1:{id}"),
            "127.0.0.1:6379".into(),
            -1,
            0,
            Box::new(|| {}),
        ));
        ConnState::new(info, true)
    }

    fn mail(c: &ConnState) -> Vec<u8> {
        let mut out = Vec::new();
        c.info.mailbox.drain_into(&mut out);
        out
    }

    #[test]
    fn subscribe_publish_and_forget() {
        let hub = PubSub::new();
        let (mut a, mut b) = (conn(1), conn(2));
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        hub.subscribe(&mut a, Kind::Channel, &[b"news", b"news"], &mut w)
            .expect("subscribed");
        hub.subscribe(&mut a, Kind::Pattern, &[b"n*"], &mut w)
            .expect("subscribed");
        b.set_proto(Protocol::Resp3);
        hub.subscribe(&mut b, Kind::Pattern, &[b"n*"], &mut w)
            .expect("subscribed");
        assert_eq!(
            out,
            b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n\
              *3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n\
              *3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n\
              *3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n"
        );
        assert_eq!(hub.publish(b"news", b"hi", false, 0), 3);
        assert_eq!(
            mail(&a),
            b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n\
              *4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!(
            mail(&b),
            b">4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        assert_eq!((hub.numsub(Kind::Channel, b"news"), hub.numpat()), (1, 1));
        assert_eq!(a.info.flags(), "P");
        hub.forget(&mut a);
        hub.forget(&mut b);
        assert_eq!((hub.numsub(Kind::Channel, b"news"), hub.numpat()), (0, 0));
        assert_eq!(hub.publish(b"news", b"hi", false, 0), 0);
        assert_eq!(a.info.flags(), "N");
    }

    #[test]
    fn the_cap_refuses_a_whole_command() {
        let hub = PubSub::new();
        hub.set_max_per_client(2);
        let mut a = conn(1);
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        hub.subscribe(&mut a, Kind::Channel, &[b"x"], &mut w)
            .expect("within the cap");
        assert!(
            hub.subscribe(&mut a, Kind::Shard, &[b"y", b"z"], &mut w)
                .is_err()
        );
        assert_eq!(a.subs.total(), 1);
        hub.subscribe(&mut a, Kind::Shard, &[b"y", b"y"], &mut w)
            .expect("within the cap");
        assert_eq!(a.subs.total(), 2);
    }

    #[test]
    fn a_receiver_past_its_limit_is_closed() {
        let hub = PubSub::new();
        hub.limits.set(
            crate::mailbox::OutputClass::Pubsub,
            crate::mailbox::ClassLimit {
                hard_bytes: 100,
                soft_bytes: 0,
                soft_seconds: 0,
            },
        );
        let mut a = conn(1);
        let mut out = Vec::new();
        let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
        hub.subscribe(&mut a, Kind::Channel, &[b"c"], &mut w)
            .expect("subscribed");
        hub.publish(b"c", &[b'x'; 40], false, 0);
        assert!(!a.info.is_killed());
        hub.publish(b"c", &[b'x'; 40], false, 0);
        assert!(a.info.is_killed());
        assert!(a.info.output_limit_reached.load(Ordering::Relaxed));
        assert_eq!(a.info.mailbox.bytes(), 0, "its backlog is dropped");
    }
}
