//! One client connection: read what arrives, run every complete command in it, write
//! all the replies at once.
//!
//! The loop is: read into the query buffer → parse each complete request in place
//! (arguments are slices of the buffer, never copied) → run it against the keyspace →
//! append its reply to the output buffer → after the last complete request, one write.
//! No lock is held across an `.await`: commands run synchronously between reads and
//! writes.
//!
//! Other connections reach this one only through its mailbox (pub/sub messages,
//! MONITOR lines) and its waker: a wake-up makes the task move the mailbox to its
//! output and write it, or notice that it was killed. Writes race the waker, so a
//! client that stopped reading can still be closed when it passes its output-buffer
//! limit, and its pending output is dropped with it.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use smallvec::SmallVec;
use strata_commands::ctx::Held;
use strata_commands::exec::execute_held;
use strata_commands::tiered::ColdKey;
use strata_commands::{ClientInfo, ConnState};
use strata_resp::request::{Limits, Parsed, RequestParser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::blocking::Waiter;
use crate::clock::monotonic_ns;
use crate::state::{ServerState, unix_ms};
use crate::tls::Stream;

/// Initial size of the query and output buffers.
const BUF_SIZE: usize = 16 * 1024;
/// Bulk arguments at least this big get their room reserved ahead of their bytes.
const BIG_ARG: usize = 32 * 1024;
/// The most room reserved ahead of bytes that have not arrived: a declared length
/// is only a promise, and thousands of clients each announcing a 512 MB argument
/// and sending nothing more must not reserve that much each.
const RESERVE_AHEAD: usize = 1 << 20;
/// Replies are flushed mid-batch once this much is pending.
const FLUSH_AT: usize = 1 << 20;

/// Wakes a connection's task when another client leaves it mail, kills it, or the
/// server shuts down: `tokio::sync::Notify`'s one-permit `notify_one` for the one
/// task that waits, which registers its waker once rather than queueing a waiter on
/// every wait (that cost some 270 instructions of an unpipelined request).
#[derive(Default)]
struct Wakeup {
    /// A wake-up not yet seen by a wait (the permit).
    pending: AtomicBool,
    /// The waker of the connection's task, once it has waited.
    waker: parking_lot::Mutex<Option<Waker>>,
}

impl Wakeup {
    /// Wakes the task's current or next wait.
    fn notify_one(&self) {
        self.pending.store(true, Ordering::Release);
        // Woken outside the lock, which the task's next wait takes.
        let waker = self.waker.lock().clone();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Completes once a wake-up is pending, taking it.
    fn notified(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if self.pending.swap(false, Ordering::Acquire) {
                return Poll::Ready(());
            }
            {
                let mut waker = self.waker.lock();
                match &mut *waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    slot => *slot = Some(cx.waker().clone()),
                }
            }
            // A wake-up between the check above and the waker's registration.
            if self.pending.swap(false, Ordering::Acquire) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }
}

/// Serves one accepted connection until it closes.
pub async fn serve(state: Arc<ServerState>, stream: Stream, peer: SocketAddr, local: SocketAddr) {
    let id = state.next_client_id();
    let wake = Arc::new(Wakeup::default());
    let waker = wake.clone();
    let fd = stream.fd();
    let info = Arc::new(ClientInfo::new(
        id,
        peer.to_string(),
        local.to_string(),
        fd,
        unix_ms(),
        Box::new(move || waker.notify_one()),
    ));
    state.register(info.clone());
    state.connected.fetch_add(1, Ordering::Relaxed);
    let mut stream = stream;
    let mut conn = ConnState::new(info.clone(), !state.acl.auth_required());
    conn.fetch_cold = true;
    let result = run(&state, &mut stream, &mut conn, wake).await;
    state.pubsub.forget(&mut conn);
    if info.tracking_on.load(Ordering::Relaxed) {
        state.pubsub.tracking.disable(&info);
        state.pubsub.sync_event_flags(&state.keyspace);
    }
    // Gone, for those who redirect their tracking here.
    info.killed.store(true, Ordering::Release);
    if info.output_limit_reached.load(Ordering::Relaxed) {
        let line =
            strata_commands::families::connection::client_line(&info, unix_ms(), &state.registry);
        tracing::warn!(
            "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
        );
    }
    if !conn.watched.is_empty() {
        let mut keys = strata_commands::Keys::new(&state.keyspace, conn.db, unix_ms());
        strata_commands::families::transactions::unwatch_all(&mut keys, &mut conn);
    }
    if let Err(e) = result {
        tracing::debug!("client {id} ({peer}): {e}");
    }
    // Leave the client list before the socket closes, so that a client which sees the
    // connection end no longer finds it in CLIENT LIST.
    state.connected.fetch_sub(1, Ordering::Relaxed);
    state.unregister(id);
    let _ = stream.shutdown().await;
}

async fn run(
    state: &Arc<ServerState>,
    stream: &mut Stream,
    conn: &mut ConnState,
    wake: Arc<Wakeup>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    state.turn.watch(stream.socket());
    let info = conn.info.clone();
    let (limits, query_limit, timeout) = {
        let cfg = state.config.read();
        let limits = Limits {
            max_bulk_len: cfg.proto_max_bulk_len as usize,
            ..Limits::default()
        };
        (
            limits,
            cfg.client_query_buffer_limit as usize,
            cfg.timeout as u64,
        )
    };
    let mut parser = RequestParser::new(limits);
    parser.set_authenticated(conn.authenticated);
    let mut inbuf = BytesMut::with_capacity(BUF_SIZE);
    let mut out: Vec<u8> = Vec::with_capacity(BUF_SIZE);
    let mut shutdown = state.shutdown_signal();
    let mut last_activity = monotonic_ns();
    // The last log batch whose durability the replies in `out` wait for.
    let mut durable: u64 = 0;
    loop {
        if info.is_killed() || state.is_shutting_down() {
            return Ok(());
        }
        if inbuf.capacity() - inbuf.len() < 1024 {
            inbuf.reserve(BUF_SIZE);
        }
        let idle_limit = (timeout > 0).then(|| {
            let idle = Duration::from_nanos(monotonic_ns().saturating_sub(last_activity));
            Duration::from_secs(timeout).saturating_sub(idle)
        });
        let n = tokio::select! {
            r = stream.read_buf(&mut inbuf) => r?,
            _ = wake.notified() => {
                // Messages from other clients, a kill, or shutdown.
                if !deliver_mail(state, stream, &info, &wake, &mut out).await? {
                    return Ok(());
                }
                continue;
            }
            _ = sleep_or_never(idle_limit) => {
                tracing::debug!("closing idle client {}", info.id);
                return Ok(());
            }
        };
        if n == 0 {
            return Ok(());
        }
        let clock = BatchClock::now();
        last_activity = clock.at_ns;
        state.stats.net(n as u64, 0);
        let mut close = false;
        // A request waiting for values out of memory, and how often it waited.
        let mut fetching: Option<(Vec<Vec<u8>>, Vec<ColdKey>, u32)> = None;
        loop {
            let next = match fetching.take() {
                None => run_steps(
                    state,
                    conn,
                    &mut parser,
                    &mut inbuf,
                    &mut out,
                    &mut durable,
                    &clock,
                ),
                Some((argv, cold, tries)) => {
                    if !fetch_cold(state, cold).await {
                        // The read failed: the command reads its values itself
                        // and replies with the error.
                        conn.fetch_cold = false;
                    }
                    // Other clients may keep moving its values out again: after a
                    // few rounds the command reads them under its locks.
                    if tries >= FETCH_ROUNDS {
                        conn.fetch_cold = false;
                    }
                    let refs: SmallVec<[&[u8]; 8]> = argv.iter().map(Vec::as_slice).collect();
                    conn.refetched = true;
                    clock.restart();
                    let started = clock.start();
                    let now = clock.unix_ms_at(started);
                    let mut held = Held::new(&state.keyspace);
                    let next = run_request(
                        state,
                        conn,
                        &mut out,
                        &mut durable,
                        &refs,
                        now,
                        &clock,
                        &mut held,
                    );
                    durable = durable.max(held.finish(&**state, &mut out).unwrap_or(0));
                    drop(refs);
                    conn.fetch_cold = true;
                    conn.refetched = false;
                    match next {
                        Step::Fetch(_, cold) => {
                            fetching = Some((argv, cold, tries + 1));
                            continue;
                        }
                        next => next,
                    }
                }
            };
            match next {
                Step::Fetch(argv, cold) => {
                    fetching = Some((argv, cold, 1));
                    continue;
                }
                Step::Ran => {
                    if out.len() >= FLUSH_AT {
                        wait_durable(state, &mut durable).await?;
                        if !flush(state, stream, &info, &wake, &mut out).await? {
                            return Ok(());
                        }
                        clock.restart();
                    }
                }
                Step::Overflow => return Ok(()),
                Step::NeedMore => break,
                Step::Close => {
                    close = true;
                    break;
                }
                Step::Block(waiter, timeout) => {
                    wait_durable(state, &mut durable).await?;
                    if !flush(state, stream, &info, &wake, &mut out).await? {
                        return Ok(());
                    }
                    let wait = Park {
                        state,
                        info: &info,
                        wake: &wake,
                        shutdown: &mut shutdown,
                    };
                    match wait
                        .park(stream, &mut inbuf, &mut out, &waiter, timeout, conn.proto)
                        .await?
                    {
                        Some((reply, served_durable)) => {
                            if let Some(n) = served_durable {
                                durable = durable.max(n);
                            }
                            out.extend_from_slice(&reply);
                        }
                        None => return Ok(()),
                    }
                    clock.restart();
                }
                Step::Paused(until) => {
                    if !flush(state, stream, &info, &wake, &mut out).await? {
                        return Ok(());
                    }
                    let wait = Park {
                        state,
                        info: &info,
                        wake: &wake,
                        shutdown: &mut shutdown,
                    };
                    if !wait.paused(stream, &mut inbuf, &mut out, until).await? {
                        return Ok(());
                    }
                    clock.restart();
                }
            }
        }
        if !close && inbuf.len() > query_limit {
            tracing::warn!(
                "closing client {} that reached max query buffer length",
                info.id
            );
            close = true;
        }
        info.qbuf.store(inbuf.len(), Ordering::Relaxed);
        info.qbuf_free
            .store(inbuf.capacity() - inbuf.len(), Ordering::Relaxed);
        if !out.is_empty() {
            state.turn.end().await;
        }
        wait_durable(state, &mut durable).await?;
        if !flush(state, stream, &info, &wake, &mut out).await? || close {
            return Ok(());
        }
    }
}

/// What happened to the request at the front of the query buffer.
enum Step {
    /// A command ran (or nothing needed running); try the next one.
    Ran,
    /// The client passed its output buffer limits: close it without a reply.
    Overflow,
    /// No complete request is buffered.
    NeedMore,
    /// The connection must close once the replies so far are written.
    Close,
    /// The command must wait for a key, up to a timeout.
    Block(Arc<Waiter>, Option<Duration>),
    /// Clients are paused (CLIENT PAUSE) until this Unix time in ms: the request
    /// stays buffered and runs after the pause.
    Paused(u64),
    /// The request (taken out of the buffer) needs values that are out of memory:
    /// read them back, then run it.
    Fetch(Vec<Vec<u8>>, Vec<ColdKey>),
}

/// Rounds of reading values back before a request reads them under its locks.
const FETCH_ROUNDS: u32 = 3;

/// Reads values that `maxmemory-policy tiered` moved out of memory on a thread meant
/// for blocking I/O, and puts them back; false if a read failed.
async fn fetch_cold(state: &Arc<ServerState>, cold: Vec<ColdKey>) -> bool {
    let state = state.clone();
    state
        .tiered
        .deferred_reads
        .fetch_add(cold.len() as u64, Ordering::Relaxed);
    let task = tokio::task::spawn_blocking(move || {
        let stats = &state.tiered;
        cold.iter().all(
            |c| match strata_commands::tiered::read(&*state, Some(stats), c) {
                Ok(value) => {
                    strata_commands::tiered::install(&state.keyspace, c, value, unix_ms());
                    true
                }
                Err(_) => false,
            },
        )
    });
    task.await.unwrap_or(false)
}

/// The clocks of a batch of requests read from the socket. The wall clock is read
/// once per batch and derived from the monotonic clock after that (the two cannot
/// drift apart noticeably within one), and the monotonic clock once per command: a
/// command starts where the one before it in the batch ended (or where the batch
/// began), so its duration needs only its end. Reading a clock costs about 35 ns
/// here, some 2% of a pipelined command; the time between two commands (parsing the
/// next one) counts towards the second's duration. Moments are nanoseconds of the
/// monotonic clock, so that a command's duration and time are integer arithmetic
/// (`Instant`'s subtraction normalizes seconds and nanoseconds, some 30
/// instructions each time, twice a command).
struct BatchClock {
    /// When the batch began, in nanoseconds of the monotonic clock.
    at_ns: u64,
    unix_ms: u64,
    /// The end of the last command of the batch, or its beginning.
    mark: std::cell::Cell<u64>,
}

impl BatchClock {
    fn now() -> BatchClock {
        let at_ns = monotonic_ns();
        BatchClock {
            at_ns,
            unix_ms: unix_ms(),
            mark: std::cell::Cell::new(at_ns),
        }
    }

    /// When the next command starts.
    fn start(&self) -> u64 {
        self.mark.get()
    }

    /// Marks the end of a command; returns it.
    fn end(&self) -> u64 {
        let t = monotonic_ns();
        self.mark.set(t);
        t
    }

    /// Starts afresh after a wait (a flush, a blocking command), which belongs to
    /// no command's duration.
    fn restart(&self) {
        self.mark.set(monotonic_ns());
    }

    /// Unix milliseconds at `t`, a moment of this batch (or later).
    fn unix_ms_at(&self, t: u64) -> u64 {
        self.unix_ms
            .saturating_add(t.saturating_sub(self.at_ns) / 1_000_000)
    }
}

/// Runs the complete requests at the front of `inbuf`, one after another, until one
/// needs the connection to write or wait (or its output reaches `FLUSH_AT`). A run
/// of pipelined commands on one shard keeps it locked from one to the next and logs
/// their records as one batch (see [`Held`]), released before returning.
fn run_steps(
    state: &ServerState,
    conn: &mut ConnState,
    parser: &mut RequestParser,
    inbuf: &mut BytesMut,
    out: &mut Vec<u8>,
    durable: &mut u64,
    clock: &BatchClock,
) -> Step {
    let mut held = Held::new(&state.keyspace);
    let mut ahead = LookAhead::default();
    let next = loop {
        match step(
            state, conn, parser, inbuf, out, durable, clock, &mut held, &mut ahead,
        ) {
            Step::Ran => {
                let info = &conn.info;
                info.obuf.store(out.len(), Ordering::Relaxed);
                let pending = out.len() + info.mailbox.bytes();
                let now = info.last_interaction_ms.load(Ordering::Relaxed);
                if info.check_output_limits(&state.pubsub.limits, pending, now) {
                    break Step::Overflow;
                }
                if out.len() >= FLUSH_AT {
                    break Step::Ran;
                }
            }
            next => break next,
        }
    };
    *durable = (*durable).max(held.finish(state, out).unwrap_or(0));
    next
}

/// Parses and runs the request at the front of `inbuf`, if it is complete.
#[allow(clippy::too_many_arguments)]
fn step<'a>(
    state: &'a ServerState,
    conn: &mut ConnState,
    parser: &mut RequestParser,
    inbuf: &mut BytesMut,
    out: &mut Vec<u8>,
    durable: &mut u64,
    clock: &BatchClock,
    held: &mut Held<'a>,
    ahead: &mut LookAhead,
) -> Step {
    let parsed = match ahead
        .take(parser, inbuf)
        .map_or_else(|| parser.parse(inbuf), Ok)
    {
        Ok(p) => p,
        Err(e) => {
            out.extend_from_slice(b"-ERR ");
            out.extend_from_slice(&e.to_bytes());
            out.extend_from_slice(b"\r\n");
            tracing::debug!("protocol error from client {}: {e}", conn.id());
            return Step::Close;
        }
    };
    let consumed = match parsed {
        Parsed::Complete { consumed } => consumed,
        Parsed::Skip { consumed } => {
            inbuf.advance(consumed);
            return Step::Ran;
        }
        Parsed::Incomplete { hint } => {
            if let Some(total) = hint
                && total >= BIG_ARG
                && total > inbuf.len()
            {
                // Room for the rest, or for as much again as has arrived (at least
                // RESERVE_AHEAD): a big argument still grows in a few steps, and the
                // room reserved is never far beyond the bytes received.
                let ahead = inbuf.len().max(RESERVE_AHEAD);
                inbuf.reserve((total - inbuf.len()).min(ahead));
            }
            return Step::NeedMore;
        }
    };
    let seen = ahead.step(&state.keyspace, held, conn.db, inbuf, consumed);
    let args = parser.args(inbuf);
    // The arguments as slices: on the stack for a request of up to eight (a plain
    // array filled in place costs a few instructions an argument; collecting them
    // into a `SmallVec` cost some 85 more a request).
    let mut small: [&[u8]; 8] = [&[]; 8];
    let heap: Vec<&[u8]>;
    let argv: &[&[u8]] = if args.len() <= small.len() {
        for (slot, arg) in small.iter_mut().zip(args.iter()) {
            *slot = arg;
        }
        &small[..args.len()]
    } else {
        heap = args.iter().collect();
        &heap
    };
    if !seen {
        ahead.first(&state.keyspace, conn.db, argv);
    }
    let started = clock.start();
    let now = clock.unix_ms_at(started);
    if let Some(until) = state.pause.holds(conn, argv, now, &state.registry) {
        return Step::Paused(until);
    }
    let step = run_request(state, conn, out, durable, argv, now, clock, held);
    let step = match step {
        Step::Fetch(_, cold) => Step::Fetch(argv.iter().map(|a| a.to_vec()).collect(), cold),
        step => step,
    };
    inbuf.advance(consumed);
    parser.set_authenticated(conn.authenticated);
    step
}

/// The look-ahead of a pipeline: while a request runs, the memory that the
/// lookups of the next two will wait for starts loading, so that the cache misses
/// of a pipeline's keys overlap with work instead of following one another. Two
/// steps ahead: the key's shard lock, its database's table and its home slot (see
/// [`strata_keyspace::Keyspace::prefetch`]); one step ahead, once that slot has
/// arrived: the entry a lookup will compare first, picked by the tags in the slots
/// ([`strata_keyspace::Keyspace::prefetch_entry`]).
///
/// Only requests in the plain multibulk form are seen, and a request's second
/// argument is taken for its key (wrong for some commands, which costs a wasted
/// prefetch). Without a pipeline it costs a length check a request. What it read
/// of a request (its length and its arguments' ranges) goes to the parser when
/// that request's turn comes, so that a pipelined request is read once.
#[derive(Default)]
struct LookAhead {
    /// The length of the request expected to run next, and the length and key hash
    /// of the one after it, seen while the previous request ran (no hash: no key,
    /// or the same key as the request before it).
    expect: usize,
    after: Option<(usize, Option<u64>)>,
    /// The further keys of the request `after` stands for (MSET's, MGET's, DEL's),
    /// and then of the next one, for the entry step.
    more_after: MoreKeys,
    more_next: MoreKeys,
    /// The hash of the last key seen. A run of requests on one key (a pipeline of
    /// LPUSHes onto one list) finds it in the cache already, and asking for its
    /// shard's lock line from the other thread, which may hold it, would only slow
    /// that thread down.
    last: u64,
    /// Keys seen in a row that were the same as the one before; at
    /// [`LookAhead::REPEATS`] the look-ahead stops for the rest of the pipeline,
    /// whose reading would cost more than it saves.
    repeats: u32,
    /// How the request expected to run next (`reads[next_read]`), and the one
    /// after it (the other), were read: the parser takes them rather than read
    /// them again (see [`LookAhead::take`]).
    reads: [Read; 2],
    next_read: usize,
    /// Whether a step has run: every request after the first of a batch was seen
    /// by the step before it (or is one more on the same key).
    stepped: bool,
    /// The key hash of the batch's second request, seen by the first step.
    second: Option<u64>,
}

/// A request as the look-ahead read it: where it starts (an address in the input
/// buffer, which does not move while a batch runs), its length, and its arguments'
/// ranges from its start. Empty when not read (more than [`Read::MAX`] arguments
/// are not kept).
#[derive(Default)]
struct Read {
    at: usize,
    len: usize,
    ranges: [std::ops::Range<usize>; Read::MAX],
    count: usize,
    /// The first key's hash, and which argument is a member of it to prefetch
    /// (see [`KeyArgs::Member`]; 0 for none).
    key_hash: u64,
    member: usize,
}

impl Read {
    const MAX: usize = 8;

    fn clear(&mut self) {
        self.count = 0;
    }
}

/// The hashes of a request's keys after its first, up to [`MoreKeys::MAX`].
#[derive(Default)]
struct MoreKeys {
    hashes: [u64; MoreKeys::MAX],
    len: usize,
}

impl MoreKeys {
    const MAX: usize = 16;
}

/// Which arguments of a request are keys, by its name: the first only (most
/// commands), every one (MGET, DEL...) or every other one (MSET's keys); or the
/// first, followed by a field or member of its hash or set at the position given
/// (HSET, SADD...): that lookup in a big collection misses the cache too, and the
/// look-ahead starts it early under the shard it holds
/// ([`Held::prefetch_member`]). Sorted sets are not looked into.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyArgs {
    First,
    All,
    Odd,
    Member(usize),
}

impl KeyArgs {
    fn of(name: &[u8]) -> KeyArgs {
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        match name.len() {
            3 if is(b"DEL") => KeyArgs::All,
            4 if is(b"MGET") => KeyArgs::All,
            4 if is(b"MSET") => KeyArgs::Odd,
            4 if is(b"HSET") || is(b"HGET") || is(b"HDEL") || is(b"SADD") || is(b"SREM") => {
                KeyArgs::Member(2)
            }
            5 if is(b"TOUCH") => KeyArgs::All,
            5 if is(b"HMSET") || is(b"HMGET") => KeyArgs::Member(2),
            6 if is(b"EXISTS") || is(b"UNLINK") => KeyArgs::All,
            6 if is(b"MSETNX") => KeyArgs::Odd,
            6 if is(b"HSETNX") => KeyArgs::Member(2),
            7 if is(b"HEXISTS") || is(b"HINCRBY") => KeyArgs::Member(2),
            9 if is(b"SISMEMBER") => KeyArgs::Member(2),
            12 if is(b"HINCRBYFLOAT") => KeyArgs::Member(2),
            _ => KeyArgs::First,
        }
    }

    /// The position of the member to prefetch; 0 for none.
    fn member(self) -> usize {
        match self {
            KeyArgs::Member(at) => at,
            _ => 0,
        }
    }

    /// Whether argument `i` (the name is 0) is a key.
    #[inline]
    fn is_key(self, i: usize) -> bool {
        match self {
            KeyArgs::All => i >= 1,
            KeyArgs::Odd => i % 2 == 1,
            KeyArgs::First | KeyArgs::Member(_) => i == 1,
        }
    }
}

impl LookAhead {
    const REPEATS: u32 = 2;

    /// Gives the parser the request at the front of `buf` if the look-ahead read it
    /// (see [`strata_resp::RequestParser::take_peeked`]).
    #[inline]
    fn take(&mut self, parser: &mut RequestParser, buf: &[u8]) -> Option<Parsed> {
        let read = &mut self.reads[self.next_read & 1];
        if read.count == 0 || read.at != buf.as_ptr().addr() || read.len > buf.len() {
            return None;
        }
        let count = std::mem::take(&mut read.count);
        parser.take_peeked(read.len, read.ranges.get(..count)?)
    }

    /// Before the request at the front of `buf` (`consumed` bytes) runs. Returns
    /// whether an earlier step saw that request (the first of a batch nobody saw).
    #[inline]
    fn step(
        &mut self,
        keyspace: &strata_keyspace::Keyspace,
        held: &Held<'_>,
        db: usize,
        buf: &[u8],
        consumed: usize,
    ) -> bool {
        let seen = std::mem::replace(&mut self.stepped, true);
        let rest = buf.get(consumed..).unwrap_or_default();
        if rest.is_empty() || self.repeats >= Self::REPEATS {
            self.after = None;
            self.reads[self.next_read].clear();
            return seen;
        }
        // The next request: seen a step ago (its slot has had a request's time to
        // arrive), or only now.
        let (next, ripe) = match self.after.take() {
            Some(after) if self.expect == consumed => (Some(after), true),
            _ => (self.see(keyspace, held, db, rest), false),
        };
        // What was read as the request after is now the next one.
        self.next_read ^= 1;
        if ripe {
            // Its member's slot has had a request's time to arrive too.
            let read = &self.reads[self.next_read];
            if read.member != 0 && read.member < read.count && read.at == rest.as_ptr().addr() {
                let arg = |i: usize| read.ranges.get(i).and_then(|r| rest.get(r.clone()));
                if let (Some(key), Some(member)) = (arg(1), arg(read.member)) {
                    held.prefetch_member(db, read.key_hash, key, member, true);
                }
            }
        }
        std::mem::swap(&mut self.more_next, &mut self.more_after);
        let Some((len, hash)) = next else {
            return seen;
        };
        if !seen {
            // The batch's second request, seen only now: its entry is fetched
            // together with the first's (see `LookAhead::first`).
            self.second = hash;
        }
        // The entries first: taking their shards' locks waits for the loads (and
        // maybe the prefetches) issued before it.
        if ripe {
            if let Some(hash) = hash {
                keyspace.prefetch_entry(db, hash);
            }
            for &hash in self
                .more_next
                .hashes
                .get(..self.more_next.len)
                .unwrap_or_default()
            {
                keyspace.prefetch_entry(db, hash);
            }
        }
        self.expect = len;
        self.after = rest
            .get(len..)
            .and_then(|rest| self.see(keyspace, held, db, rest));
        seen
    }

    /// For the first request of a batch, which no step saw (`argv`, after
    /// [`LookAhead::step`] returned false): starts loading its keys' home slots,
    /// then their entries, before it runs, together with the entry of the batch's
    /// second request (whose slot the step has just asked for), so that these
    /// lookups' cache misses overlap instead of each waiting for two in turn (the
    /// slot, then the entry). A lone request of several keys (MSET's ten, MGET's,
    /// DEL's, as without a pipeline) gains the most; a lone request of one key is
    /// left alone, as nothing would overlap its misses.
    #[inline]
    fn first(&mut self, keyspace: &strata_keyspace::Keyspace, db: usize, argv: &[&[u8]]) {
        let second = self.second.take();
        let Some(keys) = argv.first().map(|name| KeyArgs::of(name)) else {
            return;
        };
        let several = match keys {
            KeyArgs::All => argv.len() >= 3,
            KeyArgs::Odd => argv.len() >= 4,
            KeyArgs::First | KeyArgs::Member(_) => false,
        };
        if !several && second.is_none() {
            return;
        }
        let mut hashes = [0u64; MoreKeys::MAX + 1];
        let mut n = 0;
        for (i, key) in argv.iter().enumerate().skip(1) {
            if n == MoreKeys::MAX {
                break;
            }
            if keys.is_key(i) {
                hashes[n] = keyspace.hash(key);
                keyspace.prefetch(db, hashes[n]);
                n += 1;
            }
        }
        if let Some(second) = second
            && !hashes[..n].contains(&second)
        {
            hashes[n] = second;
            n += 1;
        }
        if n < 2 {
            return;
        }
        for &hash in &hashes[..n] {
            keyspace.prefetch_entry(db, hash);
        }
    }

    /// Reads the request at the front of `rest` and prefetches for its keys (its
    /// first one unless it is the last key seen); returns its length and its first
    /// key's hash, and leaves its further keys' hashes in `more_after`.
    #[inline]
    fn see(
        &mut self,
        keyspace: &strata_keyspace::Keyspace,
        held: &Held<'_>,
        db: usize,
        rest: &[u8],
    ) -> Option<(usize, Option<u64>)> {
        let mut keys = KeyArgs::First;
        let mut first = None;
        let mut member = None;
        let more = &mut self.more_after;
        more.len = 0;
        let read = &mut self.reads[self.next_read ^ 1];
        let base = rest.as_ptr().addr();
        read.count = 0;
        let len = strata_resp::request::peek_args(rest, |i, arg| {
            if let Some(range) = read.ranges.get_mut(i) {
                let at = arg.as_ptr().addr() - base;
                *range = at..at + arg.len();
                read.count = i + 1;
            } else {
                read.count = Read::MAX + 1;
            }
            match i {
                0 => keys = KeyArgs::of(arg),
                1 => first = Some(arg),
                _ if i == keys.member() => member = Some(arg),
                _ if keys.is_key(i) => {
                    if let Some(slot) = more.hashes.get_mut(more.len) {
                        let hash = keyspace.hash(arg);
                        keyspace.prefetch(db, hash);
                        *slot = hash;
                        more.len += 1;
                    }
                }
                _ => {}
            }
        });
        let Some(len) = len else {
            more.len = 0;
            read.clear();
            return None;
        };
        if read.count > Read::MAX {
            read.clear();
        } else {
            read.at = base;
            read.len = len;
        }
        let hash = first.map(|key| keyspace.hash(key));
        let read = &mut self.reads[self.next_read ^ 1];
        read.member = 0;
        if let (Some(key), Some(key_hash), Some(member)) = (first, hash, member) {
            held.prefetch_member(db, key_hash, key, member, false);
            read.key_hash = key_hash;
            read.member = keys.member();
        }
        if hash == Some(self.last) {
            // A run of commands on the members of one key goes on looking ahead
            // for the members.
            if member.is_none() {
                self.repeats += 1;
            }
            return Some((len, None));
        }
        self.repeats = 0;
        if let Some(hash) = hash {
            self.last = hash;
            keyspace.prefetch(db, hash);
        }
        Some((len, hash))
    }
}

/// Runs one request and does what follows its reply: statistics, messages to this
/// client, blocking, closing.
#[allow(clippy::too_many_arguments)]
fn run_request<'a>(
    state: &'a ServerState,
    conn: &mut ConnState,
    out: &mut Vec<u8>,
    durable: &mut u64,
    argv: &[&[u8]],
    now: u64,
    clock: &BatchClock,
    held: &mut Held<'a>,
) -> Step {
    let started = clock.start();
    let outcome = execute_held(state, &state.keyspace, conn, out, argv, now, held);
    let reply_at = outcome.reply_at;
    if !outcome.fetch.is_empty() {
        return Step::Fetch(Vec::new(), outcome.fetch);
    }
    if outcome.failed
        && let Some(reply) = out.get(reply_at..)
        && !reply.is_empty()
    {
        state.count_error(reply);
    }
    if conn.info.mailbox.bytes() > 0 && !conn.info.monitor.load(Ordering::Relaxed) {
        // What the command published to this very client (a RESP3 subscriber's own
        // PUBLISH, keyspace events) goes before its reply, as in Redis. A MONITOR
        // client's own command line comes after its reply.
        let mut mail = Vec::new();
        conn.info.mailbox.drain_into(&mut mail);
        held.inserted(reply_at, mail.len());
        out.splice(reply_at..reply_at, mail);
    }
    // Invalidations of keys this client changed itself follow its reply.
    out.append(&mut conn.after_reply);

    let blocked = conn.block.take().map(|req| {
        let owned: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
        let waiter = Waiter::new(conn.info.clone(), conn.db, conn.proto, owned, req.keys);
        (waiter, req.timeout)
    });
    let took = Duration::from_nanos(clock.end().saturating_sub(started));
    state.stats.record(
        outcome.cmd.map(|c| c.id),
        took,
        outcome.rejected,
        outcome.failed,
    );
    let info = &conn.info;
    info.last_interaction_ms.store(now, Ordering::Relaxed);
    if let Some(n) = outcome.durable {
        *durable = (*durable).max(n);
    }
    if !outcome.ready.is_empty() {
        state.blocking.serve_ready(state, outcome.ready);
    }
    if let Some((waiter, timeout)) = blocked {
        return Step::Block(waiter, timeout);
    }
    if conn.close_after_reply || info.is_killed() {
        return Step::Close;
    }
    Step::Ran
}

/// A connection parked on a blocking command.
struct Park<'a> {
    state: &'a ServerState,
    info: &'a ClientInfo,
    wake: &'a Wakeup,
    shutdown: &'a mut tokio::sync::watch::Receiver<bool>,
}

impl Park<'_> {
    /// Waits until the waiter is served (its reply), times out (the null reply), or
    /// the connection must close (`None`). Input that arrives meanwhile is buffered
    /// and runs after the blocking command, in order.
    async fn park(
        self,
        stream: &mut Stream,
        inbuf: &mut BytesMut,
        out: &mut Vec<u8>,
        waiter: &Arc<Waiter>,
        timeout: Option<Duration>,
        proto: strata_resp::Protocol,
    ) -> std::io::Result<Option<(Vec<u8>, Option<u64>)>> {
        let blocking = &self.state.blocking;
        blocking.register(waiter);
        self.info.blocked.store(true, Ordering::Relaxed);
        // A key may have become ready between the command's check and registering.
        let _ = blocking.try_serve(self.state, waiter);
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut eof = false;
        let result = loop {
            if let Some(reply) = waiter.take_reply() {
                break Some(reply);
            }
            if self.info.is_killed() || *self.shutdown.borrow() || eof {
                break None;
            }
            if inbuf.capacity() - inbuf.len() < 1024 {
                inbuf.reserve(BUF_SIZE);
            }
            tokio::select! {
                _ = waiter.notify.notified() => {}
                _ = sleep_until_or_never(deadline) => {
                    if waiter.cancel() {
                        break Some((crate::blocking::timeout_reply(proto).to_vec(), None));
                    }
                }
                r = stream.read_buf(inbuf), if !eof => {
                    if r? == 0 {
                        eof = true;
                    }
                }
                _ = self.wake.notified() => {
                    // A RESP3 client may hold subscriptions while it waits.
                    if !deliver_mail(self.state, stream, self.info, self.wake, out).await? {
                        break None;
                    }
                }
                _ = self.shutdown.changed() => {}
            }
        };
        if result.is_none() {
            waiter.cancel();
        }
        blocking.unregister(waiter);
        self.info.blocked.store(false, Ordering::Relaxed);
        Ok(result)
    }
}

/// Holds replies until the log batches they report are safe: handed to the
/// operating system, and under `appendfsync always` durable. A failure closes the
/// connection instead of acknowledging.
async fn wait_durable(state: &ServerState, durable: &mut u64) -> std::io::Result<()> {
    if *durable == 0 {
        return Ok(());
    }
    let n = std::mem::take(durable);
    // A guard for the common case (no clone of the `Arc`, whose count every I/O
    // thread would write in turn); the wait for an fsync holds a clone instead.
    let waits = match state.persist.load().as_ref() {
        None => return Ok(()),
        Some(p) if p.fsync() == crate::config::Appendfsync::Always => !p.is_synced(n),
        Some(p) => {
            p.flush_to(n).map_err(std::io::Error::other)?;
            false
        }
    };
    if waits && let Some(p) = state.persist.load_full() {
        // One fsync covers every connection that ran meanwhile, as Redis fsyncs
        // once per turn of its event loop (see `Persistence::sync_before_sleep`).
        p.wait_synced(n).await.map_err(std::io::Error::other)?;
    }
    Ok(())
}

impl Park<'_> {
    /// Waits while clients are paused until `until_ms` (or the pause changes);
    /// false if the connection must close. Input is buffered meanwhile.
    async fn paused(
        self,
        stream: &mut Stream,
        inbuf: &mut BytesMut,
        out: &mut Vec<u8>,
        until_ms: u64,
    ) -> std::io::Result<bool> {
        let pause = &self.state.pause;
        let mut changes = pause.subscribe();
        pause.waiting.fetch_add(1, Ordering::Relaxed);
        self.info.blocked.store(true, Ordering::Relaxed);
        let wait = Duration::from_millis(until_ms.saturating_sub(unix_ms()));
        let deadline = tokio::time::Instant::now() + wait;
        let mut eof = false;
        let open = loop {
            if self.info.is_killed() || *self.shutdown.borrow() || eof {
                break false;
            }
            if inbuf.capacity() - inbuf.len() < 1024 {
                inbuf.reserve(BUF_SIZE);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => break true,
                _ = changes.changed() => break true,
                r = stream.read_buf(inbuf), if !eof => {
                    if r? == 0 {
                        eof = true;
                    }
                }
                _ = self.wake.notified() => {
                    if !deliver_mail(self.state, stream, self.info, self.wake, out).await? {
                        break false;
                    }
                }
                _ = self.shutdown.changed() => {}
            }
        };
        pause.waiting.fetch_sub(1, Ordering::Relaxed);
        self.info.blocked.store(false, Ordering::Relaxed);
        Ok(open)
    }
}

async fn sleep_until_or_never(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn sleep_or_never(limit: Option<Duration>) {
    match limit {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Moves what other clients sent to the output and writes it; false if the client
/// was killed meanwhile (for instance for its output-buffer limits).
async fn deliver_mail(
    state: &ServerState,
    stream: &mut Stream,
    info: &ClientInfo,
    wake: &Wakeup,
    out: &mut Vec<u8>,
) -> std::io::Result<bool> {
    if info.is_killed() {
        return Ok(false);
    }
    info.mailbox.drain_into(out);
    flush(state, stream, info, wake, out).await
}

/// Writes every pending reply; false if the client was killed while the write was
/// waiting for the socket (a reader that stopped reading is closed this way once it
/// passes its output-buffer limit). Frames queued meanwhile stay in the mailbox, and
/// the task is woken again to deliver them.
async fn flush(
    state: &ServerState,
    stream: &mut Stream,
    info: &ClientInfo,
    wake: &Wakeup,
    out: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let mut written = 0;
    // Most replies fit the socket's send buffer: one direct write, without the
    // futures and waker registration of the loop below (about 400 instructions of
    // an unpipelined request), which takes over for the rest if it does not.
    if let Stream::Plain(tcp) = stream
        && !out.is_empty()
    {
        match tcp.try_write(out) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => written = n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    while written < out.len() {
        info.obuf.store(out.len() - written, Ordering::Relaxed);
        tokio::select! {
            r = stream.write(&out[written..]) => {
                let n = r?;
                if n == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                written += n;
            }
            _ = wake.notified() => {
                if info.is_killed() {
                    out.clear();
                    return Ok(false);
                }
                // New frames wait in the mailbox until this write is done (the
                // check below wakes the task again for them).
            }
        }
    }
    // TLS may hold encrypted records back until flushed; plain TCP has none.
    if matches!(stream, Stream::Tls(_)) {
        loop {
            tokio::select! {
                r = stream.flush() => {
                    r?;
                    break;
                }
                _ = wake.notified() => {
                    if info.is_killed() {
                        out.clear();
                        return Ok(false);
                    }
                }
            }
        }
    }
    state.stats.net(0, written as u64);
    out.clear();
    info.obuf.store(0, Ordering::Relaxed);
    if out.capacity() > 4 * FLUSH_AT {
        out.shrink_to(BUF_SIZE);
    }
    if info.mailbox.bytes() > 0 {
        wake.notify_one();
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    //! The steady-state hot path allocates nothing: a counting allocator (for this
    //! test binary only) watches requests go through [`step`] exactly as the
    //! connection loop runs them.
    #![allow(unsafe_code)] // A global allocator can only be written with `unsafe`.

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use super::*;

    thread_local! {
        /// Allocations made by the current thread (other tests run on other threads).
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    /// The look-ahead knows which arguments of the multi-key commands are keys,
    /// whatever their case, and takes the first argument of anything else.
    #[test]
    fn the_look_ahead_finds_the_keys_of_multi_key_commands() {
        for (name, keys) in [
            (&b"DEL"[..], KeyArgs::All),
            (b"mget", KeyArgs::All),
            (b"Exists", KeyArgs::All),
            (b"unlink", KeyArgs::All),
            (b"TOUCH", KeyArgs::All),
            (b"MSET", KeyArgs::Odd),
            (b"msetnx", KeyArgs::Odd),
            (b"SET", KeyArgs::First),
            (b"DELX", KeyArgs::First),
            (b"", KeyArgs::First),
            (b"GETDEL", KeyArgs::First),
        ] {
            assert!(
                KeyArgs::of(name) == keys,
                "{}",
                String::from_utf8_lossy(name)
            );
        }
        let keys_of = |k: KeyArgs| (0..6).filter(|&i| k.is_key(i)).collect::<Vec<_>>();
        assert_eq!(keys_of(KeyArgs::All), [1, 2, 3, 4, 5]);
        assert_eq!(keys_of(KeyArgs::Odd), [1, 3, 5]);
        assert_eq!(keys_of(KeyArgs::First), [1]);
        assert_eq!(keys_of(KeyArgs::Member(2)), [1]);
    }

    fn request(args: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        strata_resp::encode_request(args.iter().copied(), &mut out);
        out
    }

    /// Only the first request of a batch goes unseen by the look-ahead.
    #[test]
    fn the_first_request_of_a_batch_is_the_one_not_seen_ahead() {
        let state = ServerState::for_tests();
        let held = Held::new(&state.keyspace);
        let mut ahead = LookAhead::default();
        let get = request(&[b"GET", b"k"]);
        let batch = get.repeat(3);
        let mut at = 0;
        let mut seen = Vec::new();
        while at < batch.len() {
            seen.push(ahead.step(&state.keyspace, &held, 0, &batch[at..], get.len()));
            at += get.len();
        }
        assert_eq!(seen, [false, true, true]);
        // The second request's key, for the first's turn (the look-ahead does not
        // know the first's key; `LookAhead::first` skips it when it is the same).
        assert_eq!(ahead.second, Some(state.keyspace.hash(b"k")));
        let mut ahead = LookAhead::default();
        let batch = [request(&[b"GET", b"a"]), request(&[b"INCR", b"b"])].concat();
        let first = request(&[b"GET", b"a"]).len();
        assert!(!ahead.step(&state.keyspace, &held, 0, &batch, first));
        assert_eq!(ahead.second, Some(state.keyspace.hash(b"b")));
    }

    /// A lone request of many keys, whose keys are fetched before it runs (more of
    /// them than are fetched ahead, a missing one, a wrong arity, in a table that
    /// grows in between) runs as any other.
    #[test]
    fn lone_requests_of_many_keys_run_as_any_other() {
        let mut c = Client::new();
        let keys: Vec<Vec<u8>> = (0..40).map(|i| format!("key:{i}").into_bytes()).collect();
        let mut mset: Vec<&[u8]> = vec![b"MSET"];
        for k in &keys {
            mset.push(k);
            mset.push(k);
        }
        assert_eq!(c.run(&request(&mset)), 1);
        assert_eq!(c.out, b"+OK\r\n");
        c.out.clear();
        let mut mget: Vec<&[u8]> = vec![b"MGET"];
        mget.extend(keys.iter().map(|k| k.as_slice()));
        mget.push(b"missing");
        c.run(&request(&mget));
        let mut expected = b"*41\r\n".to_vec();
        for k in &keys {
            expected.extend_from_slice(format!("${}\r\n", k.len()).as_bytes());
            expected.extend_from_slice(k);
            expected.extend_from_slice(b"\r\n");
        }
        expected.extend_from_slice(b"$-1\r\n");
        assert_eq!(c.out, expected);
        c.out.clear();
        c.run(&request(&[b"MSET", b"a", b"1", b"b"]));
        assert_eq!(
            c.out,
            b"-ERR wrong number of arguments for 'mset' command\r\n"
        );
        c.out.clear();
        c.run(&request(&[b"MSETNX", b"key:0", b"x", b"fresh", b"y"]));
        assert_eq!(c.out, b":0\r\n");
        c.out.clear();
        let mut del: Vec<&[u8]> = vec![b"DEL"];
        del.extend(keys.iter().map(|k| k.as_slice()));
        c.run(&request(&del));
        assert_eq!(c.out, b":40\r\n");
    }

    struct Counting;

    fn count() {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
    }

    // SAFETY: every method forwards to the system allocator with the caller's
    // arguments, so its contract is the system allocator's.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count();
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count();
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count();
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static ALLOCATOR: Counting = Counting;

    fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }

    struct Client {
        state: Arc<ServerState>,
        conn: ConnState,
        parser: RequestParser,
        inbuf: BytesMut,
        out: Vec<u8>,
        durable: u64,
    }

    impl Client {
        fn new() -> Client {
            let state = ServerState::for_tests();
            let info = Arc::new(ClientInfo::new(
                1,
                "127.0.0.1:1".into(),
                "127.0.0.1:2".into(),
                -1,
                unix_ms(),
                Box::new(|| {}),
            ));
            Client {
                state,
                conn: ConnState::new(info, true),
                parser: RequestParser::new(Limits::default()),
                inbuf: BytesMut::with_capacity(BUF_SIZE),
                out: Vec::with_capacity(BUF_SIZE),
                durable: 0,
            }
        }

        /// Runs every request in `input` (which must fit the buffers as they are).
        fn run(&mut self, input: &[u8]) -> usize {
            self.inbuf.extend_from_slice(input);
            let clock = BatchClock::now();
            let mut ran = 0;
            let mut held = Held::new(&self.state.keyspace);
            let mut ahead = LookAhead::default();
            loop {
                match step(
                    &self.state,
                    &mut self.conn,
                    &mut self.parser,
                    &mut self.inbuf,
                    &mut self.out,
                    &mut self.durable,
                    &clock,
                    &mut held,
                    &mut ahead,
                ) {
                    Step::Ran => ran += 1,
                    Step::NeedMore => break,
                    _ => panic!("unexpected step"),
                }
            }
            held.finish(&*self.state, &mut self.out);
            ran
        }
    }

    /// Every request `KeyArgs::Member` names takes a member at that position: the
    /// command exists and its arity reaches it, and the argument there is not one
    /// of its keys.
    #[test]
    fn members_looked_ahead_are_members() {
        let registry = strata_commands::registry();
        for name in [
            "hset",
            "hget",
            "hdel",
            "sadd",
            "srem",
            "hmset",
            "hmget",
            "hsetnx",
            "hexists",
            "hincrby",
            "sismember",
            "hincrbyfloat",
        ] {
            let at = KeyArgs::of(name.to_uppercase().as_bytes()).member();
            assert!(at >= 2, "{name}");
            let cmd = registry.get(name.as_bytes()).expect(name);
            assert!(cmd.arity.unsigned_abs() as usize > at, "{name}");
            let mut argv: Vec<&[u8]> = vec![name.as_bytes(), b"key"];
            argv.extend(std::iter::repeat_n(&b"1"[..], at));
            let keys = strata_commands::table::key_positions(cmd, &argv);
            assert!(!keys.contains(&at), "{name}: {keys:?}");
        }
        for name in [
            "GET", "SET", "LPUSH", "SMEMBERS", "HGETALL", "ZADD", "ZSCORE",
        ] {
            assert_eq!(KeyArgs::of(name.as_bytes()).member(), 0, "{name}");
        }
    }

    #[test]
    fn the_batch_clock_follows_the_monotonic_clock() {
        let clock = BatchClock::now();
        assert_eq!(clock.unix_ms_at(clock.at_ns), clock.unix_ms);
        let later = clock.at_ns + 1_500_000_000;
        assert_eq!(clock.unix_ms_at(later), clock.unix_ms + 1_500);
        assert_eq!(clock.unix_ms_at(clock.at_ns - 5_000_000), clock.unix_ms);
        let wall = unix_ms();
        let derived = clock.unix_ms_at(clock.end());
        assert!(derived.abs_diff(wall) < 1_000, "{derived} against {wall}");
    }

    #[test]
    fn a_pipeline_of_get_hits_allocates_nothing() {
        let mut c = Client::new();
        c.run(b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$16\r\nsixteen-byte-val\r\n");
        assert_eq!(c.out, b"+OK\r\n");
        let get = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        let batch: Vec<u8> = get.iter().copied().cycle().take(get.len() * 100).collect();
        let reply = b"$16\r\nsixteen-byte-val\r\n";
        // Warm up: statistics, buffers and the key's first access settle.
        for _ in 0..3 {
            c.out.clear();
            assert_eq!(c.run(&batch), 100);
        }
        c.out.clear();
        let before = allocations();
        let ran = c.run(&batch);
        let allocated = allocations() - before;
        assert_eq!(ran, 100);
        assert_eq!(c.out.len(), reply.len() * 100);
        assert!(c.out.starts_with(reply));
        assert_eq!(allocated, 0, "100 GET hits made {allocated} allocations");
        // The counter does see allocations: new keys need room.
        let before = allocations();
        c.run(b"*3\r\n$3\r\nSET\r\n$8\r\nnew-key1\r\n$1\r\nv\r\n");
        assert!(allocations() > before);
    }

    /// A wake-up before the wait is kept (one, however many came), one during the
    /// wait ends it, and a wait without one stays pending.
    #[test]
    fn a_wakeup_is_kept_until_a_wait_takes_it() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let wake = Arc::new(Wakeup::default());
            wake.notify_one();
            wake.notify_one();
            wake.notified().await;
            let quiet = tokio::time::timeout(Duration::from_millis(50), wake.notified()).await;
            assert!(quiet.is_err(), "two wake-ups before a wait count once");
            for _ in 0..200 {
                let other = wake.clone();
                let thread = std::thread::spawn(move || other.notify_one());
                tokio::time::timeout(Duration::from_secs(10), wake.notified())
                    .await
                    .expect("a wake-up from another thread ends the wait");
                thread.join().unwrap();
            }
        });
    }
}
