//! The strata server: configuration, listeners, connections, background work.
//!
//! This is the only crate with sockets, tasks and signals. It wires the keyspace and
//! the command table together behind a Tokio runtime and implements the command
//! layer's [`strata_commands::Server`] trait for server-wide commands.

pub mod access;
pub mod blocking;
pub mod clock;
pub mod config;
pub mod connection;
pub mod cron;
pub mod info;
pub mod lazyfree;
pub mod limits;
pub mod listener;
pub mod logging;
pub mod memory;
pub mod pause;
pub mod persist;
pub mod sched;
pub mod state;
pub mod stats;
pub mod tls;
pub mod turn;

use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::net::TcpListener;

pub use config::ConfigSource;
pub use state::ServerState;

/// How long shutdown waits for connections to finish their replies.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The stack of each worker thread. Scripts run on the workers, and the script
/// libraries recurse as deep as Redis's allow (cjson nests 1000 levels): 2 MiB, the
/// default, is not enough for that; the memory is only reserved, not used.
const WORKER_STACK: usize = 64 << 20;

/// The most sockets one poll of the I/O driver wakes. A worker polls the driver
/// when it runs out of tasks, and while it has tasks every `event_interval` tasks
/// it runs (61 by default; [`ONE_THREAD_EVENT_INTERVAL`]), and queues the tasks
/// the poll wakes on its own run queue, which holds 256: with tokio's default of
/// 1024 events a poll, a thousand busy clients overflow it, and the overflow waits
/// in the shared queue, served one task in dozens, while later wake-ups run first —
/// p99 at 1000 clients was 50–60 ms against Redis's 11 (log on). Waking no more
/// than a poll's interval runs keeps the queue short and the order first come,
/// first served, as Redis's event loop serves the clients of one `epoll_wait`;
/// sockets left over stay ready in the kernel for the next poll.
const IO_EVENTS_PER_TICK: usize = 48;

/// How many tasks the one I/O thread runs between polls of the sockets while it
/// still has tasks to run (tokio's `event_interval`, 61 by default): more than a
/// turn's tasks when each connection's requests came in one read (up to
/// [`IO_EVENTS_PER_TICK`] connections a poll woke, and as many woken again to write
/// their replies), so that the sockets are polled when the turn ends, as Redis's
/// event loop calls `epoll_wait` once it has written the replies of the clients the
/// last one returned. With 61, a poll in the middle of a turn added the connections
/// it woke to that turn, and from a thousand clients with pipelines the turn grew
/// until most of them waited in it (four of the first ten turns of 800,000 INCRs
/// with `-P 99` held 512 connections or more; with 128, none of the first 130 held
/// more than 127). The park hook then woke them all at once, into the shared queue
/// (it runs outside the worker), and their replies went out among the new requests
/// that polls read meanwhile, those of the clients answered first read first again,
/// while the others waited up to another round: p99 142 ms under `everysec`, 84 ms
/// with 128, Redis's 186. Requests that take several reads (MSET's ten keys, 99 to
/// a pipeline) still make a turn's tasks outnumber this, and their turns grow as
/// before: p99 446 ms against 391 with 61 and 511 with 1024 (Redis's 828). The
/// bound also keeps the sockets polled while tasks keep coming.
const ONE_THREAD_EVENT_INTERVAL: u32 = 128;

// A turn's tasks when each connection's requests came in one read: the interval
// must stay above them, or polls land in the middle of turns again.
const _: () = assert!(ONE_THREAD_EVENT_INTERVAL as usize > 2 * IO_EVENTS_PER_TICK);

/// Whether the server's own runtime keeps turns: with one I/O thread (see [`turn`]
/// for why not with more).
fn keeps_turns(config: &config::Config) -> bool {
    config.io_threads <= 1
}

/// Runs a server with this configuration until it is shut down (SIGINT, SIGTERM or
/// SHUTDOWN). Returns an error if it cannot start.
pub fn run(
    config: config::Config,
    source: ConfigSource,
    on_loglevel: Option<LogLevelSetter>,
) -> anyhow::Result<()> {
    let threads = config.io_threads.max(1);
    // Before the runtime and the background threads start: they inherit it.
    sched::apply(
        config.sched_policy,
        config.appendonly && config.appendfsync == config::Appendfsync::Always,
    );
    let started = Arc::new(OnceLock::<Arc<ServerState>>::new());
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(threads)
        .thread_name("strata-io")
        .thread_stack_size(WORKER_STACK)
        .max_io_events_per_tick(IO_EVENTS_PER_TICK)
        .on_thread_park({
            let started = started.clone();
            move || {
                if let Some(state) = started.get() {
                    before_sleep(state);
                }
            }
        })
        .enable_all();
    if keeps_turns(&config) {
        builder.event_interval(ONE_THREAD_EVENT_INTERVAL);
    }
    let runtime = builder.build()?;
    runtime.block_on(serve_started(config, source, on_loglevel, Some(&started)))
}

/// What an I/O thread does when it has run every task it had, before it waits for
/// sockets (Redis's `beforeSleep`): the log's write (and under `appendfsync always`
/// the fsync) for the connections it served, then the end of the turn, which lets
/// their replies go out, or, if there were none, the spin (see [`turn`]).
fn before_sleep(state: &ServerState) {
    if let Some(p) = state.persist.load().as_ref() {
        p.sync_before_sleep();
        if state.turn.enabled() {
            p.flush_before_sleep();
        }
    }
    // A turn that woke nobody left the thread with nothing to run: it polls its
    // connections a while before it sleeps.
    if !state.turn.finish() {
        state.turn.spin();
    }
}

/// Applies a new log level name at run time (CONFIG SET loglevel).
pub type LogLevelSetter = Box<dyn Fn(&str) + Send + Sync>;

/// The body of [`run`], for callers that already have a runtime. Their runtime's
/// threads do not sync before they sleep, so under `appendfsync always` replies wait
/// for the syncer thread (up to a millisecond more each).
pub async fn serve(
    config: config::Config,
    source: ConfigSource,
    on_loglevel: Option<LogLevelSetter>,
) -> anyhow::Result<()> {
    serve_started(config, source, on_loglevel, None).await
}

/// [`serve`], publishing the server's state in `started` for the runtime's hooks.
async fn serve_started(
    config: config::Config,
    source: ConfigSource,
    on_loglevel: Option<LogLevelSetter>,
    started: Option<&OnceLock<Arc<ServerState>>>,
) -> anyhow::Result<()> {
    let mut config = config;
    config.maxclients = limits::fit_maxclients(config.maxclients)?;
    // Port 0 opens no plain listener; tls-port 0 no TLS one.
    let listeners = if config.port == 0 {
        Vec::new()
    } else {
        listener::bind(&config.bind, config.port, config.tcp_backlog)?
    };
    let tls = tls::acceptor(&config.tls)?;
    let tls_listeners = match &tls {
        Some(_) => listener::bind(&config.bind, config.tls.port, config.tcp_backlog)?,
        None => Vec::new(),
    };
    if listeners.is_empty() && tls_listeners.is_empty() {
        anyhow::bail!("Configured to not listen anywhere, exiting.");
    }
    let port = config.port;
    let turns = keeps_turns(&config);
    let spin_us = config.io_spin_us;
    let state = ServerState::new(config, source);
    if let Some(started) = started {
        let _ = started.set(state.clone());
        // The hook that ends the turns is this runtime's (see `turn`).
        if turns {
            state.turn.enable(spin_us);
        }
    }
    access::load_users(&state)?;
    *state.on_loglevel.lock() = on_loglevel;
    state
        .tcp_port
        .store(port as usize, std::sync::atomic::Ordering::Relaxed);
    let cron = cron::spawn(state.clone());
    // Listen at once; until the dataset is loaded commands answer LOADING.
    persist::control::start(&state)?;
    let mut accepts = Vec::new();
    for l in listeners {
        let l = TcpListener::from_std(l)?;
        tracing::info!("Ready to accept connections on {}", l.local_addr()?);
        accepts.push(tokio::spawn(listener::accept_loop(state.clone(), l, None)));
    }
    for l in tls_listeners {
        let l = TcpListener::from_std(l)?;
        tracing::info!("Ready to accept TLS connections on {}", l.local_addr()?);
        accepts.push(tokio::spawn(listener::accept_loop(
            state.clone(),
            l,
            tls.clone(),
        )));
    }
    wait_for_shutdown(&state).await;
    tracing::warn!("Shutting down: no new connections; finishing replies in flight");
    for a in accepts {
        let _ = a.await;
    }
    let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    while state.connected.load(std::sync::atomic::Ordering::Relaxed) > 0
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = tokio::task::spawn_blocking(move || cron.join()).await;
    if state.persist.load().is_some() {
        tracing::warn!("Syncing the log before exit...");
    }
    let closing = state.clone();
    match tokio::task::spawn_blocking(move || persist::control::stop(&closing)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("closing the log: {e}"),
        Err(e) => tracing::warn!("closing the log: {e}"),
    }
    if state.failed.load(std::sync::atomic::Ordering::Acquire) {
        anyhow::bail!("could not load the dataset");
    }
    tracing::warn!("strata is now ready to exit, bye bye...");
    Ok(())
}

async fn wait_for_shutdown(state: &Arc<ServerState>) {
    let mut signal = state.shutdown_signal();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal as unix_signal};
        let mut term = unix_signal(SignalKind::terminate()).ok();
        let mut int = unix_signal(SignalKind::interrupt()).ok();
        let term_fut = async {
            match term.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        let int_fut = async {
            match int.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = term_fut => tracing::warn!("Received SIGTERM scheduling shutdown..."),
            _ = int_fut => tracing::warn!("Received SIGINT scheduling shutdown..."),
            // The value, not a change of it: a shutdown begun before this point
            // (a dataset that failed to load at once) is not missed.
            _ = signal.wait_for(|down| *down) => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = signal.wait_for(|down| *down).await;
    }
    state.begin_shutdown();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shutdown begun before anything waits for it (a dataset that failed to load
    /// at once, while the listeners were still being set up) is not missed: the
    /// server exits instead of waiting for a signal that was already given.
    #[tokio::test]
    async fn a_shutdown_begun_before_the_wait_is_not_missed() {
        let state = ServerState::for_tests();
        state.begin_shutdown();
        let waited = tokio::time::timeout(Duration::from_secs(5), wait_for_shutdown(&state)).await;
        assert!(waited.is_ok(), "the shutdown was missed");

        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let accepting = tokio::spawn(listener::accept_loop(state.clone(), listener, None));
        let stopped = tokio::time::timeout(Duration::from_secs(5), accepting).await;
        assert!(stopped.is_ok(), "the accept loop missed the shutdown");
    }
}
