//! Per-connection state the handlers read and change, and the part of it other
//! connections can see (CLIENT LIST, CLIENT KILL).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;
use strata_resp::Protocol;

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
    /// Wakes the connection's task so it notices `killed`.
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
            waker,
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
}

impl std::fmt::Debug for ClientInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInfo")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .finish()
    }
}

/// The connection's own state, owned by its task and lent to each command.
#[derive(Debug)]
pub struct ConnState {
    pub db: usize,
    pub proto: Protocol,
    pub authenticated: bool,
    pub user: String,
    pub info: Arc<ClientInfo>,
    /// Close the connection once the pending replies are written (QUIT, protocol
    /// errors).
    pub close_after_reply: bool,
}

impl ConnState {
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> ConnState {
        ConnState {
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            user: "default".to_string(),
            info,
            close_after_reply: false,
        }
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
