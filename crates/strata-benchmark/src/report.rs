//! A run's report: a table for people, JSON for scripts and charts.
//!
//! One row per command of the mix and a total row: replies, errors, nulls,
//! throughput, and latency (mean, p50, p90, p99, p99.9, max) in milliseconds, as
//! redis-benchmark prints them. The JSON holds the same figures in microseconds with
//! the run's settings, a `label` (the configuration's name) and a `series` (the server
//! or build measured), which `strata-benchmark plot` reads back.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Value, json};

use crate::stats::{CommandStats, Latency, PERCENTILES, Stats};

/// One row of a report.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub replies: u64,
    pub errors: u64,
    pub nulls: u64,
    pub ops_per_sec: f64,
    pub latency: Latency,
    pub error_samples: Vec<(String, u64)>,
}

impl Row {
    fn of(name: &str, c: &CommandStats, elapsed: Duration) -> Row {
        Row {
            name: name.to_string(),
            replies: c.replies,
            errors: c.errors,
            nulls: c.nulls,
            ops_per_sec: c.replies as f64 / elapsed.as_secs_f64().max(1e-9),
            latency: Latency::of(&c.latency),
            error_samples: c.error_samples.clone(),
        }
    }

    fn to_json(&self) -> Value {
        let us = |ns: u64| ns as f64 / 1_000.0;
        let mut latency = serde_json::Map::new();
        latency.insert("mean".into(), json!(self.latency.mean / 1_000.0));
        for ((name, _), value) in PERCENTILES.iter().zip(self.latency.percentiles) {
            latency.insert((*name).into(), json!(us(value)));
        }
        latency.insert("max".into(), json!(us(self.latency.max)));
        json!({
            "command": self.name,
            "replies": self.replies,
            "errors": self.errors,
            "nulls": self.nulls,
            "ops_per_sec": self.ops_per_sec,
            "latency_us": latency,
            "error_samples": self
                .error_samples
                .iter()
                .map(|(text, count)| json!({"error": text, "count": count}))
                .collect::<Vec<_>>(),
        })
    }
}

/// A run's report.
#[derive(Debug, Clone)]
pub struct Report {
    /// The configuration's name (for charts: the group).
    pub label: String,
    /// What was measured (for charts: the series), such as `strata` or `redis`.
    pub series: String,
    /// The run's settings, in order, for the header and the JSON.
    pub settings: Vec<(String, String)>,
    pub elapsed: Duration,
    /// One row per command, then the total.
    pub rows: Vec<Row>,
}

impl Report {
    /// The report of a run of the commands named `names`, in the mix's order.
    pub fn new(
        label: &str,
        series: &str,
        settings: Vec<(String, String)>,
        names: &[String],
        stats: &Stats,
        elapsed: Duration,
    ) -> Report {
        let mut rows: Vec<Row> = names
            .iter()
            .zip(&stats.commands)
            .map(|(name, c)| Row::of(name, c, elapsed))
            .collect();
        rows.push(Row::of("total", &stats.total(), elapsed));
        Report {
            label: label.to_string(),
            series: series.to_string(),
            settings,
            elapsed,
            rows,
        }
    }

    /// The total row.
    pub fn total(&self) -> Option<&Row> {
        self.rows.last()
    }

    /// The report as a table, its settings above it.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let settings: Vec<String> = self
            .settings
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        let _ = writeln!(out, "{}", settings.join(", "));
        let _ = writeln!(out, "elapsed {:.3} s", self.elapsed.as_secs_f64());
        let _ = writeln!(
            out,
            "{:<12} {:>10} {:>8} {:>8} {:>12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
            "command",
            "replies",
            "errors",
            "nulls",
            "ops/s",
            "mean ms",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max"
        );
        let ms = |ns: u64| ns as f64 / 1e6;
        for row in &self.rows {
            let l = &row.latency;
            let _ = writeln!(
                out,
                "{:<12} {:>10} {:>8} {:>8} {:>12.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
                row.name,
                row.replies,
                row.errors,
                row.nulls,
                row.ops_per_sec,
                l.mean / 1e6,
                ms(l.percentiles[0]),
                ms(l.percentiles[1]),
                ms(l.percentiles[2]),
                ms(l.percentiles[3]),
                ms(l.max)
            );
        }
        for row in &self.rows[..self.rows.len().saturating_sub(1)] {
            for (text, count) in &row.error_samples {
                let _ = writeln!(out, "{} error ({count}x): {text}", row.name);
            }
        }
        out
    }

    pub fn to_json(&self) -> Value {
        let settings: serde_json::Map<String, Value> = self
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let (total, commands) = match self.rows.split_last() {
            Some((total, commands)) => (total.to_json(), commands),
            None => (Value::Null, &[][..]),
        };
        json!({
            "label": self.label,
            "series": self.series,
            "settings": settings,
            "elapsed_s": self.elapsed.as_secs_f64(),
            "total": total,
            "commands": commands.iter().map(Row::to_json).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut stats = Stats::new(2);
        for i in 1..=1_000u64 {
            stats.record((i % 2) as usize, Duration::from_micros(i));
        }
        stats.commands[1].error(b"ERR boom");
        stats.commands[0].nulls = 3;
        Report::new(
            "50 clients",
            "strata",
            vec![("connections".into(), "50".into())],
            &["SET".into(), "GET".into()],
            &stats,
            Duration::from_millis(500),
        )
    }

    #[test]
    fn tables_show_rows_and_errors() {
        let table = report().table();
        assert!(
            table.starts_with("connections 50\nelapsed 0.500 s\n"),
            "{table}"
        );
        let total = table.lines().find(|l| l.starts_with("total")).unwrap();
        let cells: Vec<&str> = total.split_whitespace().collect();
        assert_eq!(&cells[..5], ["total", "1000", "1", "3", "2000"]);
        assert!(table.contains("GET error (1x): ERR boom"), "{table}");
    }

    #[test]
    fn json_holds_the_figures_in_microseconds() {
        let json = report().to_json();
        assert_eq!(json["label"], "50 clients");
        assert_eq!(json["series"], "strata");
        assert_eq!(json["settings"]["connections"], "50");
        assert_eq!(json["total"]["replies"], 1000);
        assert_eq!(json["total"]["ops_per_sec"], 2000.0);
        let p50 = json["total"]["latency_us"]["p50"].as_f64().unwrap();
        assert!((499.0..=501.0).contains(&p50), "{p50}");
        assert_eq!(json["commands"][1]["command"], "GET");
        assert_eq!(json["commands"][1]["error_samples"][0]["error"], "ERR boom");
    }
}
