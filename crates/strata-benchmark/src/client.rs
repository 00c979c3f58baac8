//! The network run: connections spread over threads, pipelined requests, and the
//! clock.
//!
//! Each thread runs a current-thread Tokio runtime with its share of the connections
//! as local tasks; they record into one [`Stats`] per thread, merged at the end. A run
//! has two phases: every connection connects and authenticates (not timed), then all
//! threads pass a barrier together and the clock starts. Each connection keeps up to
//! `pipeline` requests in flight: whenever replies arrive it writes as many new
//! requests as were answered, in one write (a window, as memtier keeps it, rather
//! than redis-benchmark's wait for the whole batch). It reads while it writes, so a
//! server blocked on writing replies never deadlocks a connection blocked on writing
//! requests.
//!
//! Invariants: a count-bounded run sends exactly its request count, split as evenly
//! as possible over the connections; the first failing connection stops the others at
//! their next batch, and its error is the run's.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::Error;
use crate::pipeline::Pipeline;
use crate::stats::Stats;
use crate::workload::{RequestGen, Workload};

/// The server to load.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// `AUTH [user] password` after connecting.
    pub user: Option<String>,
    pub password: Option<String>,
    /// `SELECT db` after connecting.
    pub db: Option<u32>,
}

impl Target {
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many requests in all.
    Requests(u64),
    /// When this much time has passed (requests in flight still get their replies).
    Duration(Duration),
}

/// Everything a network run needs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub target: Target,
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    pub stop: Stop,
    pub workload: Workload,
    /// Show a progress bar on standard error (when it is a terminal and the run lasts).
    pub progress: bool,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub stats: Stats,
    /// From the first thread's start after the barrier to the last reply.
    pub elapsed: Duration,
}

/// Connects once, sets the connection up and sends PING: a clear error before any
/// load when the server is not there or refuses us.
pub fn check(target: &Target) -> Result<(), Error> {
    let runtime = runtime(target)?;
    runtime.block_on(async {
        let mut stream = connect(target).await?;
        setup(&mut stream, target).await?;
        command(&mut stream, target, &[b"PING"]).await
    })
}

/// Runs the load and returns what it measured.
pub fn run(config: &RunConfig) -> Result<RunResult, Error> {
    if config.connections == 0 || config.pipeline == 0 || config.threads == 0 {
        return Err(Error::Usage(
            "connections, threads and pipeline depth must be at least 1".into(),
        ));
    }
    let threads = config.threads.min(config.connections);
    let shared = Arc::new(Shared {
        replies: AtomicU64::new(0),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
    });
    let barrier = Barrier::new(threads + 1);
    let commands = config.workload.mix.templates().len();
    let outcome = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let first = t * config.connections / threads;
                let last = (t + 1) * config.connections / threads;
                let (shared, barrier) = (shared.clone(), &barrier);
                scope.spawn(move || thread_main(config, first..last, &shared, barrier))
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        watch(config, &shared, start, || {
            handles.iter().all(|h| h.is_finished())
        });
        let mut stats = Stats::new(commands);
        // Each thread's own clock: the main thread may wake from the barrier late.
        let (mut first, mut last) = (None::<Instant>, None::<Instant>);
        for handle in handles {
            match handle.join() {
                Ok(Some((s, started, finished))) => {
                    stats.merge(&s);
                    first = Some(first.map_or(started, |f| f.min(started)));
                    last = Some(last.map_or(finished, |l| l.max(finished)));
                }
                Ok(None) => {}
                Err(_) => shared.fail(Error::Usage("a load thread panicked".into())),
            }
        }
        let elapsed = match (first, last) {
            (Some(first), Some(last)) => last.saturating_duration_since(first),
            _ => Duration::ZERO,
        };
        (stats, elapsed)
    });
    if let Some(error) = shared.take_error() {
        return Err(error);
    }
    Ok(RunResult {
        stats: outcome.0,
        elapsed: outcome.1,
    })
}

/// What the threads share: the reply count for the progress bar, and the first error.
struct Shared {
    replies: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<Error>>,
}

impl Shared {
    fn fail(&self, error: Error) {
        self.failed.store(true, Ordering::Relaxed);
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(error);
        }
    }

    fn take_error(&self) -> Option<Error> {
        self.error.lock().ok().and_then(|mut e| e.take())
    }
}

/// Shows progress until `done` says the threads have finished. The bar appears only
/// once the run has lasted a second, so short runs print nothing.
fn watch(config: &RunConfig, shared: &Shared, start: Instant, done: impl Fn() -> bool) {
    let bar = match config.stop {
        Stop::Requests(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::hidden()),
        Stop::Duration(d) => ProgressBar::with_draw_target(
            Some(d.as_millis().try_into().unwrap_or(u64::MAX)),
            ProgressDrawTarget::hidden(),
        ),
    };
    let template = match config.stop {
        Stop::Requests(_) => "{bar:40} {pos}/{len} requests, {per_sec}, {eta} left",
        Stop::Duration(_) => "{bar:40} {msg}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    let mut shown = false;
    while !done() {
        std::thread::sleep(Duration::from_millis(50));
        let elapsed = start.elapsed();
        if config.progress && !shown && elapsed >= Duration::from_secs(1) {
            bar.set_draw_target(ProgressDrawTarget::stderr());
            shown = true;
        }
        let replies = shared.replies.load(Ordering::Relaxed);
        match config.stop {
            Stop::Requests(_) => bar.set_position(replies),
            Stop::Duration(_) => {
                bar.set_position(elapsed.as_millis().try_into().unwrap_or(u64::MAX));
                let rate = replies as f64 / elapsed.as_secs_f64().max(1e-9);
                bar.set_message(format!("{replies} replies, {rate:.0}/s"));
            }
        }
    }
    bar.finish_and_clear();
}

/// One thread: connect its connections, wait at the barrier, run them to the end.
/// Returns its statistics and when it started and finished, or `None` if the run
/// failed.
fn thread_main(
    config: &RunConfig,
    connections: std::ops::Range<usize>,
    shared: &Arc<Shared>,
    barrier: &Barrier,
) -> Option<(Stats, Instant, Instant)> {
    let runtime = match runtime(&config.target) {
        Ok(r) => r,
        Err(e) => {
            shared.fail(e);
            barrier.wait();
            return None;
        }
    };
    let commands = config.workload.mix.templates().len();
    let total = config.connections as u64;
    let prepared = runtime.block_on(async {
        let mut prepared = Vec::with_capacity(connections.len());
        for i in connections.clone() {
            let mut stream = connect(&config.target).await?;
            setup(&mut stream, &config.target).await?;
            let generator = RequestGen::new(&config.workload, i as u64, total)?;
            prepared.push((stream, generator, quota(config.stop, i as u64, total)));
        }
        Ok::<_, Error>(prepared)
    });
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            shared.fail(e);
            barrier.wait();
            return None;
        }
    };
    barrier.wait();
    if shared.failed.load(Ordering::Relaxed) {
        return None;
    }
    let started = Instant::now();
    let deadline = match config.stop {
        Stop::Duration(d) => Some(started + d),
        Stop::Requests(_) => None,
    };
    let stats = Rc::new(RefCell::new(Stats::new(commands)));
    let local = tokio::task::LocalSet::new();
    let handles: Vec<_> = prepared
        .into_iter()
        .map(|(stream, generator, quota)| {
            let connection = Connection {
                addr: config.target.addr(),
                depth: config.pipeline,
                quota,
                deadline,
                stats: stats.clone(),
                shared: shared.clone(),
            };
            local.spawn_local(connection.drive(stream, generator))
        })
        .collect();
    runtime.block_on(local.run_until(async {
        for handle in handles {
            match handle.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => shared.fail(e),
                Err(_) => shared.fail(Error::Usage("a connection task panicked".into())),
            }
        }
    }));
    let finished = Instant::now();
    let stats = stats.borrow().clone();
    Some((stats, started, finished))
}

fn runtime(target: &Target) -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            addr: target.addr(),
            source,
        })
}

/// Requests connection `index` of `connections` may send: an even share of a count,
/// or no limit for a timed run.
fn quota(stop: Stop, index: u64, connections: u64) -> u64 {
    match stop {
        Stop::Requests(n) => n / connections + u64::from(index < n % connections),
        Stop::Duration(_) => u64::MAX,
    }
}

async fn connect(target: &Target) -> Result<TcpStream, Error> {
    let addr = target.addr();
    let stream = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|source| Error::Connect {
            addr: addr.clone(),
            source,
        })?;
    stream
        .set_nodelay(true)
        .map_err(|source| Error::Io { addr, source })?;
    Ok(stream)
}

/// AUTH and SELECT, as the target asks.
async fn setup(stream: &mut TcpStream, target: &Target) -> Result<(), Error> {
    if let Some(password) = &target.password {
        match &target.user {
            Some(user) => {
                let args = [&b"AUTH"[..], user.as_bytes(), password.as_bytes()];
                command(stream, target, &args).await?;
            }
            None => command(stream, target, &[b"AUTH", password.as_bytes()]).await?,
        }
    }
    if let Some(db) = target.db {
        command(stream, target, &[b"SELECT", db.to_string().as_bytes()]).await?;
    }
    Ok(())
}

/// Sends one command and reads its reply; an error reply is a [`Error::Handshake`].
async fn command(stream: &mut TcpStream, target: &Target, args: &[&[u8]]) -> Result<(), Error> {
    let addr = target.addr();
    let io = |source| Error::Io {
        addr: addr.clone(),
        source,
    };
    let mut request = Vec::new();
    strata_resp::encode_request(args.iter().copied(), &mut request);
    stream.write_all(&request).await.map_err(io)?;
    let mut reply = Vec::new();
    loop {
        if let Some(frame) = strata_resp::scan(&reply)? {
            if frame.is_error() {
                let text = reply
                    .get(1..frame.len.saturating_sub(2))
                    .unwrap_or_default();
                // AUTH's password is not repeated in the error.
                let name = args.first().copied().unwrap_or_default();
                return Err(Error::Handshake {
                    addr: addr.clone(),
                    command: String::from_utf8_lossy(name).into_owned(),
                    reply: String::from_utf8_lossy(text).into_owned(),
                });
            }
            return Ok(());
        }
        let mut chunk = [0u8; 512];
        let n = stream.read(&mut chunk).await.map_err(io)?;
        if n == 0 {
            return Err(Error::Closed { addr, pending: 1 });
        }
        reply.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

/// One connection's part of the run.
struct Connection {
    addr: String,
    depth: usize,
    /// Requests this connection may still send.
    quota: u64,
    deadline: Option<Instant>,
    stats: Rc<RefCell<Stats>>,
    shared: Arc<Shared>,
}

/// The read buffer's first size; it doubles when one reply does not fit.
const READ_BUFFER: usize = 16 * 1024;

impl Connection {
    async fn drive(
        mut self,
        mut stream: TcpStream,
        mut generator: RequestGen,
    ) -> Result<(), Error> {
        let (mut reader, mut writer) = stream.split();
        let mut pipeline = Pipeline::new(self.depth);
        let mut out = Vec::with_capacity(4096);
        let mut written = 0;
        let mut input = vec![0u8; READ_BUFFER];
        let (mut start, mut end) = (0, 0);
        loop {
            if written == out.len() {
                out.clear();
                written = 0;
                let now = Instant::now();
                let open = self.deadline.is_none_or(|d| now < d)
                    && !self.shared.failed.load(Ordering::Relaxed);
                while open && self.quota > 0 && pipeline.in_flight() < self.depth {
                    let command = generator.next(&mut out);
                    pipeline.sent(command, now);
                    self.quota -= 1;
                }
                if pipeline.in_flight() == 0 {
                    return Ok(());
                }
            }
            let io = |source| Error::Io {
                addr: self.addr.clone(),
                source,
            };
            tokio::select! {
                biased;
                read = reader.read(input.get_mut(end..).unwrap_or_default()) => {
                    let n = read.map_err(io)?;
                    if n == 0 {
                        return Err(Error::Closed {
                            addr: self.addr.clone(),
                            pending: pipeline.in_flight(),
                        });
                    }
                    end += n;
                    let at = Instant::now();
                    let bytes = input.get(start..end).unwrap_or_default();
                    let (used, replies) =
                        pipeline.receive(bytes, at, &mut self.stats.borrow_mut())?;
                    start += used;
                    self.shared
                        .replies
                        .fetch_add(replies as u64, Ordering::Relaxed);
                    if start == end {
                        (start, end) = (0, 0);
                    } else if end == input.len() {
                        if start > 0 {
                            input.copy_within(start..end, 0);
                            end -= start;
                            start = 0;
                        } else {
                            input.resize(input.len() * 2, 0);
                        }
                    }
                }
                sent = writer.write(out.get(written..).unwrap_or_default()), if written < out.len() => {
                    written += sent.map_err(io)?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_split_a_count_evenly() {
        let shares: Vec<u64> = (0..4).map(|i| quota(Stop::Requests(10), i, 4)).collect();
        assert_eq!(shares, [3, 3, 2, 2]);
        assert_eq!(quota(Stop::Requests(2), 3, 4), 0);
        assert_eq!(
            quota(Stop::Duration(Duration::from_secs(1)), 0, 4),
            u64::MAX
        );
    }

    #[test]
    fn addresses_bracket_ipv6() {
        let mut t = Target {
            host: "127.0.0.1".into(),
            port: 7,
            user: None,
            password: None,
            db: None,
        };
        assert_eq!(t.addr(), "127.0.0.1:7");
        t.host = "::1".into();
        assert_eq!(t.addr(), "[::1]:7");
    }
}
