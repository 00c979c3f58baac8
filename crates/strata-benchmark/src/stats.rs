//! Latency histograms and reply counts, per command, and their summaries.
//!
//! Latencies are recorded in nanoseconds in HDR histograms (three significant digits,
//! from 1 ns to 60 s; longer waits count as 60 s). A thread keeps one [`Stats`] for all
//! its connections; the threads' statistics are merged at the end of a run.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The longest latency a histogram tells apart.
const HIGHEST_NS: u64 = 60_000_000_000;

/// The percentiles every report shows.
pub const PERCENTILES: [(&str, f64); 4] =
    [("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9)];

/// How many distinct error texts are kept per command.
const ERROR_SAMPLES: usize = 4;

/// A latency histogram in nanoseconds.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIGHEST_NS, 3)
        .expect("1 ns to 60 s at three significant digits are valid histogram bounds")
}

/// What one command saw.
#[derive(Debug, Clone)]
pub struct CommandStats {
    pub latency: Histogram<u64>,
    /// Replies received.
    pub replies: u64,
    /// Replies that were errors.
    pub errors: u64,
    /// Replies that were nulls (a GET of a missing key).
    pub nulls: u64,
    /// The first few distinct error texts, with how often each came.
    pub error_samples: Vec<(String, u64)>,
}

impl CommandStats {
    fn new() -> CommandStats {
        CommandStats {
            latency: histogram(),
            replies: 0,
            errors: 0,
            nulls: 0,
            error_samples: Vec::new(),
        }
    }

    /// Counts an error reply with this text.
    pub fn error(&mut self, text: &[u8]) {
        self.errors += 1;
        if let Some(sample) = self
            .error_samples
            .iter_mut()
            .find(|(t, _)| t.as_bytes() == text)
        {
            sample.1 += 1;
        } else if self.error_samples.len() < ERROR_SAMPLES {
            self.error_samples
                .push((String::from_utf8_lossy(text).into_owned(), 1));
        }
    }

    fn merge(&mut self, other: &CommandStats) {
        // Histograms with the same bounds always add.
        let _ = self.latency.add(&other.latency);
        self.replies += other.replies;
        self.errors += other.errors;
        self.nulls += other.nulls;
        for (text, count) in &other.error_samples {
            if let Some(sample) = self.error_samples.iter_mut().find(|(t, _)| t == text) {
                sample.1 += count;
            } else if self.error_samples.len() < ERROR_SAMPLES {
                self.error_samples.push((text.clone(), *count));
            }
        }
    }
}

/// Statistics of every command of a mix, in the mix's order.
#[derive(Debug, Clone)]
pub struct Stats {
    pub commands: Vec<CommandStats>,
}

impl Stats {
    pub fn new(commands: usize) -> Stats {
        Stats {
            commands: (0..commands).map(|_| CommandStats::new()).collect(),
        }
    }

    /// Records one reply to command `command` after `latency`.
    #[inline]
    pub fn record(&mut self, command: usize, latency: Duration) {
        if let Some(c) = self.commands.get_mut(command) {
            let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
            c.latency.saturating_record(ns.clamp(1, HIGHEST_NS));
            c.replies += 1;
        }
    }

    pub fn merge(&mut self, other: &Stats) {
        for (mine, theirs) in self.commands.iter_mut().zip(&other.commands) {
            mine.merge(theirs);
        }
    }

    /// All commands together.
    pub fn total(&self) -> CommandStats {
        let mut total = CommandStats::new();
        for c in &self.commands {
            total.merge(c);
        }
        total
    }

    pub fn replies(&self) -> u64 {
        self.commands.iter().map(|c| c.replies).sum()
    }

    pub fn errors(&self) -> u64 {
        self.commands.iter().map(|c| c.errors).sum()
    }
}

/// A histogram's figures, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    pub mean: f64,
    /// [`PERCENTILES`], in order.
    pub percentiles: [u64; 4],
    pub max: u64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        Latency {
            mean: h.mean(),
            percentiles: PERCENTILES.map(|(_, p)| h.value_at_percentile(p)),
            max: h.max(),
        }
    }

    pub fn p99(&self) -> u64 {
        self.percentiles[2]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_merges() {
        let mut a = Stats::new(2);
        let mut b = Stats::new(2);
        for i in 1..=100u64 {
            a.record(0, Duration::from_micros(i));
        }
        b.record(1, Duration::from_secs(3600));
        b.record(1, Duration::ZERO);
        b.commands[1].error(b"ERR x");
        b.commands[1].error(b"ERR x");
        b.commands[1].error(b"ERR y");
        a.merge(&b);
        assert_eq!(a.replies(), 102);
        assert_eq!(a.errors(), 3);
        assert_eq!(
            a.commands[1].error_samples,
            [("ERR x".to_string(), 2), ("ERR y".to_string(), 1)]
        );
        let l = Latency::of(&a.commands[0].latency);
        assert!((49_900..=50_100).contains(&l.percentiles[0]), "{l:?}");
        assert!((98_900..=99_100).contains(&l.p99()), "{l:?}");
        // Beyond the range counts as the longest latency told apart.
        let l = Latency::of(&a.commands[1].latency);
        assert!(l.max >= HIGHEST_NS * 999 / 1000, "{l:?}");
        assert_eq!(a.total().replies, 102);
        // Out-of-range command indices are ignored rather than panicking.
        a.record(9, Duration::from_micros(1));
        assert_eq!(a.replies(), 102);
    }

    #[test]
    fn keeps_a_few_error_samples() {
        let mut c = CommandStats::new();
        for i in 0..10 {
            c.error(format!("ERR {i}").as_bytes());
        }
        assert_eq!(c.errors, 10);
        assert_eq!(c.error_samples.len(), ERROR_SAMPLES);
    }
}
