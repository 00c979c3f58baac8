//! Server statistics: counters striped across threads so that the hot path never
//! contends on a shared cache line; INFO sums the stripes.
//!
//! Each command also keeps a latency histogram (INFO latencystats) with one bucket
//! per power of two of nanoseconds, so its percentiles are exact to within a factor
//! of two.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

const STRIPES: usize = 16;

/// Latency buckets: bucket `i` counts calls that took fewer than `2^i` nanoseconds
/// (and at least `2^(i-1)`).
const LATENCY_BUCKETS: usize = 64;

/// Counters of one command.
pub struct CommandCounters {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
    latency: [AtomicU64; LATENCY_BUCKETS],
}

impl Default for CommandCounters {
    fn default() -> Self {
        CommandCounters {
            calls: AtomicU64::new(0),
            usec: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// Totals of one command, summed over stripes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommandTotals {
    pub calls: u64,
    pub usec: u64,
    pub rejected: u64,
    pub failed: u64,
}

#[derive(Default)]
struct Global {
    commands: AtomicU64,
    net_input: AtomicU64,
    net_output: AtomicU64,
    error_replies: AtomicU64,
    /// Changes since the server started (Redis's `dirty`); CONFIG RESETSTAT leaves
    /// them.
    dirty: AtomicU64,
}

#[repr(align(128))]
struct Stripe {
    global: Global,
    per_command: Box<[CommandCounters]>,
}

pub struct Stats {
    stripes: Box<[Stripe]>,
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Ops/sec samples for `instantaneous_ops_per_sec`.
    samples: parking_lot::Mutex<OpsSampler>,
}

#[derive(Default)]
struct OpsSampler {
    last_ms: u64,
    last_commands: u64,
    samples: [u64; 16],
    next: usize,
}

thread_local! {
    static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

fn stripe_index() -> usize {
    STRIPE.with(|s| {
        let mut i = s.get();
        if i == usize::MAX {
            i = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
            s.set(i);
        }
        i
    })
}

impl Stats {
    pub fn new(commands: usize) -> Stats {
        Stats {
            stripes: (0..STRIPES)
                .map(|_| Stripe {
                    global: Global::default(),
                    per_command: (0..commands).map(|_| CommandCounters::default()).collect(),
                })
                .collect(),
            connections_received: AtomicU64::new(0),
            rejected_connections: AtomicU64::new(0),
            samples: parking_lot::Mutex::new(OpsSampler::default()),
        }
    }

    fn stripe(&self) -> &Stripe {
        &self.stripes[stripe_index()]
    }

    /// Records one command run.
    #[inline]
    pub fn record(&self, cmd_id: Option<usize>, took: Duration, rejected: bool, failed: bool) {
        let usec = took.as_micros() as u64;
        let nanos = took.as_nanos().min(u64::MAX as u128) as u64;
        let s = self.stripe();
        s.global.commands.fetch_add(1, Ordering::Relaxed);
        if failed {
            s.global.error_replies.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(c) = cmd_id.and_then(|id| s.per_command.get(id)) {
            if rejected {
                c.rejected.fetch_add(1, Ordering::Relaxed);
            } else {
                c.calls.fetch_add(1, Ordering::Relaxed);
                c.usec.fetch_add(usec, Ordering::Relaxed);
                let bucket = (u64::BITS - nanos.leading_zeros()) as usize;
                c.latency[bucket.min(LATENCY_BUCKETS - 1)].fetch_add(1, Ordering::Relaxed);
                if failed {
                    c.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    #[inline]
    pub fn net(&self, input: u64, output: u64) {
        let s = self.stripe();
        if input > 0 {
            s.global.net_input.fetch_add(input, Ordering::Relaxed);
        }
        if output > 0 {
            s.global.net_output.fetch_add(output, Ordering::Relaxed);
        }
    }

    fn sum(&self, f: impl Fn(&Global) -> &AtomicU64) -> u64 {
        self.stripes
            .iter()
            .map(|s| f(&s.global).load(Ordering::Relaxed))
            .sum()
    }

    pub fn commands_processed(&self) -> u64 {
        self.sum(|g| &g.commands)
    }

    pub fn net_input(&self) -> u64 {
        self.sum(|g| &g.net_input)
    }

    pub fn net_output(&self) -> u64 {
        self.sum(|g| &g.net_output)
    }

    pub fn error_replies(&self) -> u64 {
        self.sum(|g| &g.error_replies)
    }

    /// Counts `n` changes to the dataset.
    #[inline]
    pub fn add_dirty(&self, n: u64) {
        self.stripe().global.dirty.fetch_add(n, Ordering::Relaxed);
    }

    /// Changes to the dataset since the server started (Redis's `dirty`, for INFO
    /// persistence and the save points).
    pub fn dirty(&self) -> u64 {
        self.sum(|g| &g.dirty)
    }

    pub fn command(&self, id: usize) -> CommandTotals {
        let mut t = CommandTotals::default();
        for s in self.stripes.iter() {
            if let Some(c) = s.per_command.get(id) {
                t.calls += c.calls.load(Ordering::Relaxed);
                t.usec += c.usec.load(Ordering::Relaxed);
                t.rejected += c.rejected.load(Ordering::Relaxed);
                t.failed += c.failed.load(Ordering::Relaxed);
            }
        }
        t
    }

    /// The latency of a command at each of the given percentiles, in microseconds:
    /// the upper bound of the bucket that holds that share of its calls. `None` if the
    /// command never ran.
    pub fn latency_percentiles(&self, id: usize, percentiles: &[f64]) -> Option<Vec<f64>> {
        let mut buckets = [0u64; LATENCY_BUCKETS];
        for s in self.stripes.iter() {
            if let Some(c) = s.per_command.get(id) {
                for (total, b) in buckets.iter_mut().zip(&c.latency) {
                    *total += b.load(Ordering::Relaxed);
                }
            }
        }
        let calls: u64 = buckets.iter().sum();
        if calls == 0 {
            return None;
        }
        let at = |p: f64| {
            let wanted = ((p / 100.0) * calls as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            let bucket = buckets
                .iter()
                .position(|&n| {
                    seen += n;
                    seen >= wanted
                })
                .unwrap_or(LATENCY_BUCKETS - 1);
            ((1u128 << bucket) - 1) as f64 / 1000.0
        };
        Some(percentiles.iter().map(|&p| at(p)).collect())
    }

    /// Takes an ops/sec sample (called by the cron about every 100 ms).
    pub fn sample_ops(&self, now_ms: u64) {
        let commands = self.commands_processed();
        let mut s = self.samples.lock();
        if s.last_ms != 0 && now_ms > s.last_ms {
            // Saturating: CONFIG RESETSTAT may zero the counters between two samples.
            let rate = commands.saturating_sub(s.last_commands) * 1000 / (now_ms - s.last_ms);
            let i = s.next;
            s.samples[i] = rate;
            s.next = (i + 1) % s.samples.len();
        }
        s.last_ms = now_ms;
        s.last_commands = commands;
    }

    pub fn instantaneous_ops(&self) -> u64 {
        let s = self.samples.lock();
        s.samples.iter().sum::<u64>() / s.samples.len() as u64
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for s in self.stripes.iter() {
            s.global.commands.store(0, Ordering::Relaxed);
            s.global.net_input.store(0, Ordering::Relaxed);
            s.global.net_output.store(0, Ordering::Relaxed);
            s.global.error_replies.store(0, Ordering::Relaxed);
            for c in s.per_command.iter() {
                c.calls.store(0, Ordering::Relaxed);
                c.usec.store(0, Ordering::Relaxed);
                c.rejected.store(0, Ordering::Relaxed);
                c.failed.store(0, Ordering::Relaxed);
                for b in &c.latency {
                    b.store(0, Ordering::Relaxed);
                }
            }
        }
        self.connections_received.store(0, Ordering::Relaxed);
        self.rejected_connections.store(0, Ordering::Relaxed);
        *self.samples.lock() = OpsSampler::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_across_threads() {
        let stats = std::sync::Arc::new(Stats::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = stats.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        s.record(Some(2), Duration::from_micros(3), false, false);
                    }
                    s.record(Some(1), Duration::ZERO, true, true);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(stats.commands_processed(), 4004);
        assert_eq!(
            stats.command(2),
            CommandTotals {
                calls: 4000,
                usec: 12000,
                rejected: 0,
                failed: 0
            }
        );
        assert_eq!(stats.command(1).rejected, 4);
        // 3 µs is 3,000 ns, in the bucket below 4,096 ns.
        assert_eq!(
            stats.latency_percentiles(2, &[50.0, 99.9]),
            Some(vec![4.095, 4.095])
        );
        assert_eq!(stats.latency_percentiles(1, &[50.0]), None);
        stats.reset();
        assert_eq!(stats.latency_percentiles(2, &[50.0]), None);
        assert_eq!(stats.commands_processed(), 0);
    }
}
