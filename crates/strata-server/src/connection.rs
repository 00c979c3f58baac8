//! One client connection: read what arrives, run every complete command in it, write
//! all the replies at once.
//!
//! The loop is: read into the query buffer → parse each complete request in place
//! (arguments are slices of the buffer, never copied) → run it against the keyspace →
//! append its reply to the output buffer → after the last complete request, one write.
//! No lock is held across an `.await`: commands run synchronously between reads and
//! writes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use smallvec::SmallVec;
use strata_commands::{ClientInfo, ConnState, execute};
use strata_resp::request::{Limits, Parsed, RequestParser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::state::{ServerState, unix_ms};

/// Initial size of the query and output buffers.
const BUF_SIZE: usize = 16 * 1024;
/// Bulk arguments at least this big get their room reserved in one go.
const BIG_ARG: usize = 32 * 1024;
/// Replies are flushed mid-batch once this much is pending.
const FLUSH_AT: usize = 1 << 20;

/// Serves one accepted connection until it closes.
pub async fn serve(
    state: Arc<ServerState>,
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
) {
    let id = state.next_client_id();
    let wake = Arc::new(Notify::new());
    let waker = wake.clone();
    let fd = fd_of(&stream);
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
    let result = run(&state, stream, info, wake).await;
    if let Err(e) = result {
        tracing::debug!("client {id} ({peer}): {e}");
    }
    state.connected.fetch_sub(1, Ordering::Relaxed);
    state.unregister(id);
}

#[cfg(unix)]
fn fd_of(stream: &TcpStream) -> i32 {
    use std::os::fd::AsRawFd;
    stream.as_raw_fd()
}

#[cfg(not(unix))]
fn fd_of(_: &TcpStream) -> i32 {
    -1
}

async fn run(
    state: &ServerState,
    mut stream: TcpStream,
    info: Arc<ClientInfo>,
    wake: Arc<Notify>,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let (requirepass, limits, query_limit, timeout) = {
        let cfg = state.config.read();
        let limits = Limits {
            max_bulk_len: cfg.proto_max_bulk_len as usize,
            ..Limits::default()
        };
        (
            cfg.requirepass.is_some(),
            limits,
            cfg.client_query_buffer_limit as usize,
            cfg.timeout as u64,
        )
    };
    let mut conn = ConnState::new(info.clone(), !requirepass);
    let mut parser = RequestParser::new(limits);
    parser.set_authenticated(conn.authenticated);
    let mut inbuf = BytesMut::with_capacity(BUF_SIZE);
    let mut out: Vec<u8> = Vec::with_capacity(BUF_SIZE);
    let mut shutdown = state.shutdown_signal();
    let mut last_activity = Instant::now();
    loop {
        if info.is_killed() || *shutdown.borrow() {
            return Ok(());
        }
        if inbuf.capacity() - inbuf.len() < 1024 {
            inbuf.reserve(BUF_SIZE);
        }
        let idle_limit = (timeout > 0)
            .then(|| Duration::from_secs(timeout).saturating_sub(last_activity.elapsed()));
        let n = tokio::select! {
            r = stream.read_buf(&mut inbuf) => r?,
            _ = wake.notified() => continue,
            _ = shutdown.changed() => return Ok(()),
            _ = sleep_or_never(idle_limit) => {
                tracing::debug!("closing idle client {}", info.id);
                return Ok(());
            }
        };
        if n == 0 {
            return Ok(());
        }
        last_activity = Instant::now();
        state.stats.net(n as u64, 0);
        let mut close = false;
        loop {
            let parsed = match parser.parse(&inbuf) {
                Ok(p) => p,
                Err(e) => {
                    out.extend_from_slice(b"-ERR ");
                    out.extend_from_slice(&e.to_bytes());
                    out.extend_from_slice(b"\r\n");
                    tracing::debug!("protocol error from client {}: {e}", info.id);
                    close = true;
                    break;
                }
            };
            match parsed {
                Parsed::Complete { consumed } => {
                    let args = parser.args(&inbuf);
                    let argv: SmallVec<[&[u8]; 8]> = args.iter().collect();
                    let started = Instant::now();
                    let now = unix_ms();
                    let reply_at = out.len();
                    let outcome = execute(state, &state.keyspace, &mut conn, &mut out, &argv, now);
                    if outcome.failed {
                        state.count_error(&out[reply_at..]);
                    }
                    let took = started.elapsed();
                    drop(argv);
                    inbuf.advance(consumed);
                    state.stats.record(
                        outcome.cmd.map(|c| c.id),
                        took,
                        outcome.rejected,
                        outcome.failed,
                    );
                    info.last_interaction_ms.store(now, Ordering::Relaxed);
                    parser.set_authenticated(conn.authenticated);
                    if conn.close_after_reply || info.is_killed() {
                        close = true;
                        break;
                    }
                    if out.len() >= FLUSH_AT {
                        flush(state, &mut stream, &mut out).await?;
                    }
                }
                Parsed::Skip { consumed } => inbuf.advance(consumed),
                Parsed::Incomplete { hint } => {
                    if let Some(total) = hint
                        && total >= BIG_ARG
                        && total > inbuf.len()
                    {
                        inbuf.reserve(total - inbuf.len());
                    }
                    break;
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
        flush(state, &mut stream, &mut out).await?;
        if close {
            let _ = stream.shutdown().await;
            return Ok(());
        }
    }
}

async fn sleep_or_never(limit: Option<Duration>) {
    match limit {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Writes every pending reply in one go.
async fn flush(
    state: &ServerState,
    stream: &mut TcpStream,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_all(out).await?;
    state.stats.net(0, out.len() as u64);
    out.clear();
    if out.capacity() > 4 * FLUSH_AT {
        out.shrink_to(BUF_SIZE);
    }
    Ok(())
}
