//! Listening sockets and the accept loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::config::BindAddr;
use crate::state::ServerState;
use crate::tls::Stream;

/// Binds every address of the `bind` directive on `port`. An address with a leading
/// `-` is optional: failing to bind it is not an error, as in Redis.
pub fn bind(
    addrs: &[BindAddr],
    port: u16,
    backlog: u32,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let mut listeners = Vec::new();
    let mut last_err = None;
    for addr in addrs {
        let optional = addr.optional;
        let host = match addr.host.as_str() {
            "*" => "0.0.0.0",
            "::*" => "::",
            h => h,
        };
        let ip: std::net::IpAddr = match host.parse() {
            Ok(ip) => ip,
            Err(_) => {
                let e = std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("invalid bind address '{host}'"),
                );
                if optional {
                    continue;
                }
                return Err(e);
            }
        };
        match bind_one(SocketAddr::new(ip, port), backlog) {
            Ok(l) => listeners.push(l),
            Err(e) if optional => {
                tracing::warn!("could not bind {ip}:{port}: {e}");
                last_err = Some(e);
            }
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("could not bind {ip}:{port}: {e}"),
                ));
            }
        }
    }
    if listeners.is_empty() {
        return Err(last_err.unwrap_or_else(|| std::io::Error::other("no address to listen on")));
    }
    Ok(listeners)
}

fn bind_one(addr: SocketAddr, backlog: u32) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog.min(i32::MAX as u32) as i32)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Accepts connections until shutdown, spawning a task for each; with an acceptor,
/// each connection first completes a TLS handshake (in its own task). Connections
/// still in their handshake count as connected clients (as in Redis, where the client
/// exists from the accept), so clients that open TLS connections and stall cannot
/// take more descriptors than `maxclients` allows.
pub async fn accept_loop(
    state: Arc<ServerState>,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let mut shutdown = state.shutdown_signal();
    let local = listener.local_addr().ok();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            // The value, not a change of it: a shutdown begun before this loop
            // started is not missed.
            _ = shutdown.wait_for(|down| *down) => return,
        };
        let (mut stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off briefly.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        state
            .stats
            .connections_received
            .fetch_add(1, Ordering::Relaxed);
        let maxclients = state.config.read().maxclients as usize;
        if state.connected.load(Ordering::Relaxed) >= maxclients {
            state
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = stream
                    .write_all(b"-ERR max number of clients reached\r\n")
                    .await;
            });
            continue;
        }
        if crate::access::protected_refusal(&state, peer) {
            state
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                let _ = stream.write_all(crate::access::PROTECTED_MODE_DENIED).await;
            });
            continue;
        }
        let local = stream
            .local_addr()
            .ok()
            .or(local)
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let state = state.clone();
        match tls.clone() {
            None => {
                tokio::spawn(crate::connection::serve(
                    state,
                    Stream::Plain(stream),
                    peer,
                    local,
                ));
            }
            Some(acceptor) => {
                state.connected.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let shaken = crate::tls::handshake(&acceptor, stream).await;
                    // `serve` counts the client from here on.
                    state.connected.fetch_sub(1, Ordering::Relaxed);
                    match shaken {
                        Ok(stream) => crate::connection::serve(state, stream, peer, local).await,
                        Err(e) => tracing::debug!("TLS handshake with {peer} failed: {e}"),
                    }
                });
            }
        }
    }
}
