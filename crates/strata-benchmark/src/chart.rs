//! SVG charts for docs/BENCHMARKS.md, drawn with plotters' SVG backend.
//!
//! - [`configurations`]: one horizontal bar per (configuration, series) — throughput,
//!   p50 and p99 side by side, latency on a log scale, a colour per series — so that
//!   strata and Redis read off next to each other for each configuration.
//! - [`shard_scaling`]: the in-process experiment, throughput and latency
//!   percentiles against the shard count.
//!
//! Charts are written as SVG text (no fonts are needed to draw them; the viewer lays
//! out the labels).

use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use serde_json::Value;

use crate::Error;
use crate::shards::ShardRow;

/// One bar group's figures: a configuration measured on one series (server).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub group: String,
    pub series: String,
    pub ops_per_sec: f64,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

impl Bar {
    /// Reads bars from JSON: a report printed by `--json` (its total), an object with
    /// `group`, `series`, `ops_per_sec` and `latency_us`, or an array of either.
    pub fn from_json(json: &Value) -> Result<Vec<Bar>, String> {
        match json {
            Value::Array(items) => {
                let mut bars = Vec::new();
                for item in items {
                    bars.extend(Bar::from_json(item)?);
                }
                Ok(bars)
            }
            Value::Object(object) => {
                let figures = object.get("total").unwrap_or(json);
                let text = |key: &str| object.get(key).and_then(Value::as_str);
                let group = text("group")
                    .or_else(|| text("label"))
                    .ok_or("an entry without a group or label")?;
                let ops_per_sec = figures
                    .get("ops_per_sec")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| format!("'{group}' has no ops_per_sec"))?;
                let latency = |p: &str| {
                    figures
                        .get("latency_us")
                        .and_then(|l| l.get(p))
                        .and_then(Value::as_f64)
                };
                Ok(vec![Bar {
                    group: group.to_string(),
                    series: text("series").unwrap_or("strata-benchmark").to_string(),
                    ops_per_sec,
                    p50_us: latency("p50"),
                    p99_us: latency("p99"),
                }])
            }
            _ => Err("expected a JSON object or array".into()),
        }
    }
}

const SERIES_COLOURS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// A little below the power of ten at or below `v` (for positive finite `v`;
/// otherwise `v`). A log axis labels powers of ten and the steps after them, from the
/// first power of ten inside its range, so a range that starts just below one has
/// labels all along it (starting exactly at it can lose that decade to rounding).
fn decade_below(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 {
        10f64.powf(v.log10().floor()) * 0.99
    } else {
        v
    }
}

/// A log axis's label: at most three decimals, without trailing zeros (key points
/// such as 0.7 come out of the axis as 0.7000000000000001).
fn log_label(v: f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

/// The last value of an integer range cut into `n` segments: a discrete integer range
/// is inclusive, so `0..n - 1` makes `n` segments. A range of one value draws no key
/// points, so one item gets a second, empty, segment.
fn last_segment(n: usize) -> usize {
    n.saturating_sub(1).max(1)
}

fn colour(i: usize) -> RGBColor {
    SERIES_COLOURS[i % SERIES_COLOURS.len()]
}

fn failed(path: &Path) -> impl Fn(String) -> Error + '_ {
    move |reason| Error::File {
        path: path.display().to_string(),
        reason,
    }
}

/// Draws throughput, p50 and p99 per configuration and series.
pub fn configurations(path: &Path, title: &str, bars: &[Bar]) -> Result<(), Error> {
    draw_configurations(path, title, bars).map_err(failed(path))
}

fn draw_configurations(path: &Path, title: &str, bars: &[Bar]) -> Result<(), String> {
    if bars.is_empty() {
        return Err("nothing to plot".into());
    }
    let mut series: Vec<&str> = Vec::new();
    for bar in bars {
        if !series.contains(&bar.series.as_str()) {
            series.push(&bar.series);
        }
    }
    let series_index = |s: &str| series.iter().position(|x| *x == s).unwrap_or(0);
    // The first bar at the top: segment i (from the bottom) is bar n - 1 - i.
    let n = bars.len();
    let bar_at = |i: usize| bars.get(n.saturating_sub(1 + i));
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => bar_at(*i)
            .map(|b| format!("{}  {}", b.group, b.series))
            .unwrap_or_default(),
        _ => String::new(),
    };
    let height = 110 + 20 * n as u32;
    let root = SVGBackend::new(path, (1500, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| e.to_string())?;
    let (left, rest) = root.split_horizontally(700);
    let (middle, right) = rest.split_horizontally(400);

    let max_ops = bars.iter().map(|b| b.ops_per_sec).fold(0f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&left)
        .margin(8)
        .caption("throughput (requests/s)", ("sans-serif", 15))
        .x_label_area_size(30)
        .y_label_area_size(300)
        .build_cartesian_2d(
            0f64..max_ops.max(1.0),
            (0..last_segment(n)).into_segmented(),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&label)
        .x_labels(6)
        .x_label_formatter(&|v| format!("{:.0}k", v / 1000.0))
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series((0..n).filter_map(|i| {
            let b = bar_at(i)?;
            let mut r = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(i)),
                    (b.ops_per_sec, SegmentValue::Exact(i + 1)),
                ],
                colour(series_index(&b.series)).filled(),
            );
            r.set_margin(2, 2, 0, 0);
            Some(r)
        }))
        .map_err(|e| e.to_string())?;

    for (area, caption, pick) in [
        (&middle, "p50 latency (ms, log)", 0),
        (&right, "p99 latency (ms, log)", 1),
    ] {
        let value = |b: &Bar| if pick == 0 { b.p50_us } else { b.p99_us };
        let values: Vec<f64> = bars
            .iter()
            .filter_map(value)
            .map(|us| us / 1000.0)
            .collect();
        let lo = values
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .max(1e-4);
        let hi = values.iter().copied().fold(0f64, f64::max).max(lo * 10.0);
        let (lo, hi) = (decade_below(lo / 2.0), hi * 2.0);
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .caption(caption, ("sans-serif", 15))
            .x_label_area_size(30)
            .y_label_area_size(10)
            .build_cartesian_2d((lo..hi).log_scale(), (0..last_segment(n)).into_segmented())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&|_| String::new())
            .x_labels(5)
            .x_label_formatter(&|v| log_label(*v))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series((0..n).filter_map(|i| {
                let b = bar_at(i)?;
                let ms = value(b)? / 1000.0;
                let mut r = Rectangle::new(
                    [
                        (lo, SegmentValue::Exact(i)),
                        (ms.max(lo), SegmentValue::Exact(i + 1)),
                    ],
                    colour(series_index(&b.series)).filled(),
                );
                r.set_margin(2, 2, 0, 0);
                Some(r)
            }))
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Draws the shard-scaling experiment: median throughput, and median p50/p90/p99
/// latency, against the shard count.
pub fn shard_scaling(path: &Path, title: &str, rows: &[ShardRow]) -> Result<(), Error> {
    draw_shard_scaling(path, title, rows).map_err(failed(path))
}

fn draw_shard_scaling(path: &Path, title: &str, rows: &[ShardRow]) -> Result<(), String> {
    let medians: Vec<(usize, _)> = rows
        .iter()
        .filter_map(|r| Some((r.shards, *r.median()?)))
        .collect();
    if medians.is_empty() {
        return Err("nothing to plot".into());
    }
    let n = medians.len();
    let shard_label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => medians
            .get(*i)
            .map(|(s, _)| s.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    let root = SVGBackend::new(path, (1100, 460)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root
        .titled(title, ("sans-serif", 20))
        .map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(550);

    let max_ops = medians
        .iter()
        .map(|(_, m)| m.ops_per_sec)
        .fold(0f64, f64::max)
        * 1.15;
    let mut chart = ChartBuilder::on(&left)
        .margin(10)
        .caption("throughput (operations/s)", ("sans-serif", 15))
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0..last_segment(n)).into_segmented(),
            0f64..max_ops.max(1.0),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&shard_label)
        .x_desc("shards")
        .y_label_formatter(&|v| format!("{:.1}M", v / 1e6))
        .draw()
        .map_err(|e| e.to_string())?;
    let points: Vec<_> = medians
        .iter()
        .enumerate()
        .map(|(i, (_, m))| (SegmentValue::CenterOf(i), m.ops_per_sec))
        .collect();
    chart
        .draw_series(LineSeries::new(points.clone(), colour(1).stroke_width(2)))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 4, colour(1).filled())),
        )
        .map_err(|e| e.to_string())?;

    let all: Vec<f64> = medians
        .iter()
        .flat_map(|(_, m)| {
            [m.latency.percentiles[0], m.latency.percentiles[2]].map(|ns| ns.max(1) as f64 / 1000.0)
        })
        .collect();
    let lo = decade_below(all.iter().copied().fold(f64::INFINITY, f64::min) / 2.0);
    let hi = all.iter().copied().fold(0f64, f64::max) * 2.0;
    let mut chart = ChartBuilder::on(&right)
        .margin(10)
        .caption("latency (µs, log)", ("sans-serif", 15))
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0..last_segment(n)).into_segmented(),
            (lo..hi.max(lo * 10.0)).log_scale(),
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&shard_label)
        .x_desc("shards")
        .y_max_light_lines(0)
        .y_label_formatter(&|v| log_label(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (k, name) in [(0usize, "p50"), (1, "p90"), (2, "p99")] {
        let points: Vec<_> = medians
            .iter()
            .enumerate()
            .map(|(i, (_, m))| {
                let ns = m.latency.percentiles[k].max(1) as f64;
                (SegmentValue::CenterOf(i), ns / 1000.0)
            })
            .collect();
        let c = colour(k + 1);
        chart
            .draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, c.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shards::ShardRun;
    use crate::stats::Latency;
    use serde_json::json;

    #[test]
    fn reads_bars_from_reports_and_entries() {
        let report = json!({
            "label": "50 clients",
            "series": "strata",
            "total": {"ops_per_sec": 1000.0, "latency_us": {"p50": 10.0, "p99": 90.0}},
        });
        let entries = json!([
            {"group": "SET", "series": "redis", "ops_per_sec": 5.0, "latency_us": {"p99": 1.0}},
            report,
        ]);
        let bars = Bar::from_json(&entries).unwrap();
        assert_eq!(bars.len(), 2);
        assert_eq!(
            bars[0],
            Bar {
                group: "SET".into(),
                series: "redis".into(),
                ops_per_sec: 5.0,
                p50_us: None,
                p99_us: Some(1.0)
            }
        );
        assert_eq!(bars[1].group, "50 clients");
        assert_eq!(bars[1].p50_us, Some(10.0));
        assert!(Bar::from_json(&json!({"series": "x"})).is_err());
        assert!(Bar::from_json(&json!({"label": "x"})).is_err());
        assert!(Bar::from_json(&json!(3)).is_err());
    }

    #[test]
    fn log_axes_start_at_a_power_of_ten() {
        for (v, decade) in [(0.17, 0.1), (1.0, 1.0), (3.3, 1.0), (450.0, 100.0)] {
            let lo = decade_below(v);
            assert!(lo < decade && lo > decade * 0.9, "{v}: {lo}");
        }
        assert_eq!(decade_below(0.0), 0.0);
        assert_eq!(log_label(0.7000000000000001), "0.7");
        assert_eq!(log_label(1000.0), "1000");
        assert_eq!(log_label(0.05), "0.05");
    }

    #[test]
    fn draws_svg_files() {
        let dir = tempfile::tempdir().unwrap();
        let bars: Vec<Bar> = ["redis", "strata"]
            .iter()
            .enumerate()
            .map(|(i, s)| Bar {
                group: "50 clients SET".into(),
                series: s.to_string(),
                ops_per_sec: 1000.0 * (i + 1) as f64,
                p50_us: Some(100.0),
                p99_us: Some(900.0),
            })
            .collect();
        let path = dir.path().join("bars.svg");
        configurations(&path, "test", &bars).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("50 clients SET  strata"));

        let latency = Latency {
            mean: 1.0,
            percentiles: [300, 500, 2_000, 9_000],
            max: 20_000,
        };
        let rows: Vec<ShardRow> = [1, 2, 4]
            .map(|shards| ShardRow {
                shards,
                runs: vec![ShardRun {
                    ops_per_sec: 1e6 * shards as f64,
                    latency,
                }],
            })
            .to_vec();
        let path = dir.path().join("shards.svg");
        shard_scaling(&path, "shards", &rows).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("p99") && svg.contains("shards"));
        assert!(configurations(&path, "empty", &[]).is_err());
    }
}
