//! Per-connection state the handlers read and change, and the part of it other
//! connections can see (CLIENT LIST, CLIENT KILL).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_resp::Protocol;

use crate::mailbox::{Mailbox, OutputClass, OutputLimits, SoftLimitClock};
use crate::pubsub::Subscriptions;
use crate::tracking::TrackingState;

/// What CLIENT LIST shows of a connection; shared between the connection and the
/// server's client registry. Fields are atomics updated by the connection's own task.
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub fd: i32,
    pub created_ms: u64,
    pub name: Mutex<Option<Vec<u8>>>,
    pub db: AtomicUsize,
    /// Id of the command running, or run last (see `Registry::by_id`); `usize::MAX`
    /// when that was an unknown command.
    pub last_cmd: AtomicUsize,
    pub last_interaction_ms: AtomicU64,
    /// 2 or 3.
    pub resp: AtomicU8,
    /// Bytes in the query buffer (its length and spare capacity).
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
    /// Bytes of replies not yet written to the socket.
    pub obuf: AtomicUsize,
    /// Set when the client must be disconnected (CLIENT KILL, SHUTDOWN).
    pub killed: AtomicBool,
    /// Raised when a WATCHed key changes (CLIENT LIST's `d` flag).
    pub watch_dirty: Arc<AtomicBool>,
    /// Commands queued since MULTI, or -1 outside a transaction (`multi=`, flag `x`).
    pub multi: std::sync::atomic::AtomicI64,
    /// Whether the client waits in a blocking command (flag `b`).
    pub blocked: AtomicBool,
    /// Frames other connections sent it (pub/sub messages, MONITOR lines).
    pub mailbox: Mailbox,
    /// Since when its pending output has been past its soft limit.
    pub soft_limit: SoftLimitClock,
    /// Its channel, pattern and shard-channel subscriptions (`sub=`, `psub=`, `ssub=`).
    pub sub: AtomicUsize,
    pub psub: AtomicUsize,
    pub ssub: AtomicUsize,
    /// In MONITOR mode (flag `O`).
    pub monitor: AtomicBool,
    /// CLIENT NO-EVICT ON (flag `e`).
    pub no_evict: AtomicBool,
    /// CLIENT NO-TOUCH: its commands (but TOUCH) leave keys' access times alone.
    pub no_touch: AtomicBool,
    /// Closed for passing its output-buffer limit.
    pub output_limit_reached: AtomicBool,
    /// CLIENT TRACKING settings (flags `t`, `R`, `B`; `redir=`).
    pub tracking: Mutex<TrackingState>,
    /// Whether tracking is on, readable without the lock.
    pub tracking_on: AtomicBool,
    /// The ACL user it is authenticated as (`user=`; CLIENT KILL USER).
    pub user: Mutex<Vec<u8>>,
    /// Wakes the connection's task so it notices `killed` or its mailbox.
    waker: Box<dyn Fn() + Send + Sync>,
}

impl ClientInfo {
    pub fn new(
        id: u64,
        addr: String,
        laddr: String,
        fd: i32,
        now_ms: u64,
        waker: Box<dyn Fn() + Send + Sync>,
    ) -> Self {
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            created_ms: now_ms,
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            last_cmd: AtomicUsize::new(usize::MAX),
            last_interaction_ms: AtomicU64::new(now_ms),
            resp: AtomicU8::new(2),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            obuf: AtomicUsize::new(0),
            killed: AtomicBool::new(false),
            watch_dirty: Arc::new(AtomicBool::new(false)),
            multi: std::sync::atomic::AtomicI64::new(-1),
            blocked: AtomicBool::new(false),
            mailbox: Mailbox::default(),
            soft_limit: SoftLimitClock::default(),
            sub: AtomicUsize::new(0),
            psub: AtomicUsize::new(0),
            ssub: AtomicUsize::new(0),
            monitor: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            no_touch: AtomicBool::new(false),
            output_limit_reached: AtomicBool::new(false),
            tracking: Mutex::new(TrackingState::default()),
            tracking_on: AtomicBool::new(false),
            user: Mutex::new(b"default".to_vec()),
            waker,
        }
    }

    /// Wakes the connection's task.
    pub fn wake(&self) {
        (self.waker)();
    }

    /// Whether it holds any subscription (flag `P`; pub/sub output class).
    pub fn is_pubsub(&self) -> bool {
        self.sub.load(Ordering::Relaxed)
            + self.psub.load(Ordering::Relaxed)
            + self.ssub.load(Ordering::Relaxed)
            > 0
    }

    /// The `client-output-buffer-limit` class it falls in (MONITOR clients count as
    /// normal clients, as in Redis).
    pub fn output_class(&self) -> OutputClass {
        if self.is_pubsub() {
            OutputClass::Pubsub
        } else {
            OutputClass::Normal
        }
    }

    /// Bytes waiting to be written to it: its mailbox and its unwritten replies.
    pub fn pending_output(&self) -> usize {
        self.mailbox.bytes() + self.obuf.load(Ordering::Relaxed)
    }

    /// Checks the pending output against the limits of its class; past them the
    /// client is closed (and its mailbox emptied). Returns whether it was closed.
    pub fn check_output_limits(&self, limits: &OutputLimits, pending: usize, now_ms: u64) -> bool {
        let limit = limits.get(self.output_class());
        if !self.soft_limit.exceeded(limit, pending, now_ms) {
            return false;
        }
        self.output_limit_reached.store(true, Ordering::Relaxed);
        self.mailbox.clear();
        self.kill();
        true
    }

    /// Queues a frame for it and wakes it, closing it instead if that takes it past
    /// its output-buffer limits.
    pub fn deliver(&self, frame: Bytes, limits: &OutputLimits, now_ms: u64) {
        if self.is_killed() {
            return;
        }
        let queued = self.mailbox.push(frame);
        let pending = queued + self.obuf.load(Ordering::Relaxed);
        if !self.check_output_limits(limits, pending, now_ms) {
            self.wake();
        }
    }

    /// Asks the connection to close (it does so before running another command).
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
        (self.waker)();
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    pub fn name(&self) -> Option<Vec<u8>> {
        self.name.lock().clone()
    }

    /// CLIENT LIST's `flags=` letters, in Redis's order (`N` when none apply).
    pub fn flags(&self) -> String {
        let mut f = String::new();
        if self.monitor.load(Ordering::Relaxed) {
            f.push('O');
        }
        if self.is_pubsub() {
            f.push('P');
        }
        if self.multi.load(Ordering::Relaxed) >= 0 {
            f.push('x');
        }
        if self.blocked.load(Ordering::Relaxed) {
            f.push('b');
        }
        if self.tracking_on.load(Ordering::Relaxed) {
            let t = self.tracking.lock();
            f.push('t');
            if t.broken {
                f.push('R');
            }
            if t.bcast {
                f.push('B');
            }
        }
        if self.watch_dirty.load(Ordering::Relaxed) {
            f.push('d');
        }
        if self.no_evict.load(Ordering::Relaxed) {
            f.push('e');
        }
        if self.no_touch.load(Ordering::Relaxed) {
            f.push('T');
        }
        if f.is_empty() {
            f.push('N');
        }
        f
    }
}

impl std::fmt::Debug for ClientInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInfo")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .finish()
    }
}

/// What a blocking command asks for when it has nothing to return yet: wait until one
/// of `keys` (in the selected database) may have data, or until the timeout.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockRequest {
    pub keys: Vec<Vec<u8>>,
    /// `None` waits forever (a timeout of 0).
    pub timeout: Option<std::time::Duration>,
}

/// A transaction being queued (between MULTI and EXEC).
#[derive(Debug, Default)]
pub struct Multi {
    pub queued: Vec<Vec<Vec<u8>>>,
    /// A command was refused while queueing: EXEC must fail with EXECABORT.
    pub aborted: bool,
}

/// A key the client WATCHes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub db: usize,
    pub key: Vec<u8>,
    /// Whether the key existed (and had not expired) when watched.
    pub existed: bool,
}

/// The connection's own state, owned by its task and lent to each command.
#[derive(Debug)]
pub struct ConnState {
    pub db: usize,
    pub proto: Protocol,
    pub authenticated: bool,
    /// The ACL user it runs commands as.
    pub user: crate::acl::Session,
    pub info: Arc<ClientInfo>,
    /// Close the connection once the pending replies are written (QUIT, protocol
    /// errors).
    pub close_after_reply: bool,
    /// Whether memory was over `maxmemory`, with nothing left to evict, when the
    /// current command was dispatched (Redis's `pre_command_oom_state`): scripts
    /// refuse the commands that need memory by it.
    pub oom: bool,
    /// Whether a blocking command may block now: false inside MULTI/EXEC and scripts,
    /// and when the command runs on behalf of a client already woken up.
    pub may_block: bool,
    /// Whether a command that finds values out of memory (`maxmemory-policy
    /// tiered`) may hand its keys back to the connection to be read off the event
    /// loop and run again ([`crate::tiered`]); when false they are read at once.
    pub fetch_cold: bool,
    /// The command is running again after its values were read back (its keys were
    /// counted for INFO's `tiered_ram_hit_ratio` the first time).
    pub refetched: bool,
    /// Set by a blocking command that found nothing and must wait; the server parks
    /// the client and runs the command again when a key is ready or times out.
    pub block: Option<BlockRequest>,
    /// The transaction being queued, after MULTI.
    pub multi: Option<Multi>,
    /// The keys WATCHed, and the flag any change to them raises.
    pub watched: Vec<Watched>,
    pub watch_dirty: Arc<AtomicBool>,
    /// Its pub/sub subscriptions.
    pub subs: Subscriptions,
    /// CLIENT REPLY: how replies are suppressed.
    pub reply: ReplyMode,
    /// The command runs again on behalf of a blocked client (MONITOR showed it
    /// already).
    pub replaying: bool,
    /// CLIENT CACHING YES/NO, for the next command.
    pub caching: bool,
    /// Frames that must follow the reply of the command just run (invalidations of
    /// keys this client changed itself).
    pub after_reply: Vec<u8>,
}

/// CLIENT REPLY's state, as Redis's `CLIENT_REPLY_OFF`, `CLIENT_REPLY_SKIP` and
/// `CLIENT_REPLY_SKIP_NEXT` flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplyMode {
    /// CLIENT REPLY OFF.
    pub off: bool,
    /// The reply of the command running now is dropped.
    pub skip: bool,
    /// The reply of the next command is dropped (CLIENT REPLY SKIP).
    pub skip_next: bool,
}

impl ReplyMode {
    /// Whether replies are being dropped.
    pub fn silent(self) -> bool {
        self.off || self.skip
    }
}

impl ConnState {
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> ConnState {
        let watch_dirty = info.watch_dirty.clone();
        ConnState {
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            user: crate::acl::Session::default(),
            info,
            close_after_reply: false,
            oom: false,
            may_block: true,
            fetch_cold: false,
            refetched: false,
            block: None,
            multi: None,
            watched: Vec::new(),
            watch_dirty,
            subs: Subscriptions::default(),
            reply: ReplyMode::default(),
            replaying: false,
            caching: false,
            after_reply: Vec::new(),
        }
    }

    /// Whether the client is in RESP2's subscribed mode, where only a few commands
    /// are allowed.
    pub fn in_subscribed_mode(&self) -> bool {
        self.proto == Protocol::Resp2 && self.subs.any()
    }

    /// Starts (`Some`) or ends (`None`) a transaction, keeping CLIENT LIST's view in
    /// step.
    pub fn set_multi(&mut self, multi: Option<Multi>) {
        let queued = multi.as_ref().map_or(-1, |m| m.queued.len() as i64);
        self.info.multi.store(queued, Ordering::Relaxed);
        self.multi = multi;
    }

    pub fn id(&self) -> u64 {
        self.info.id
    }

    pub fn set_db(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db, Ordering::Relaxed);
    }

    pub fn set_proto(&mut self, proto: Protocol) {
        self.proto = proto;
        let n = if proto == Protocol::Resp3 { 3 } else { 2 };
        self.info.resp.store(n, Ordering::Relaxed);
    }
}
