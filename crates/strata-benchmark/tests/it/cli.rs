//! The binary's output and exit status: tables, JSON, charts, and clear errors.

use std::net::TcpListener;
use std::process::{Command, Output};

use crate::fake::Fake;

fn benchmark(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_strata-benchmark"));
    command.args(args);
    if !matches!(args.first(), Some(&"shards" | &"plot")) {
        command.arg("--no-progress");
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Answers GETs with a null, SETs with OK, anything else with an error.
fn script(request: &[u8]) -> &'static [u8] {
    if request.windows(5).any(|w| w == b"\r\nGET") {
        b"$-1\r\n"
    } else if request.windows(5).any(|w| w == b"\r\nSET") {
        b"+OK\r\n"
    } else if request.windows(6).any(|w| w == b"\r\nPING") {
        b"+PONG\r\n"
    } else {
        b"-ERR unknown command\r\n"
    }
}

#[test]
fn counts_every_reply_and_prints_a_table() {
    let fake = Fake::start(script);
    let port = fake.port.to_string();
    let out = benchmark(&[
        "-p",
        &port,
        "-c",
        "3",
        "-t",
        "2",
        "-P",
        "7",
        "-n",
        "2000",
        "--ratio",
        "set:get=1:3",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    let row = |name: &str| -> Vec<String> {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in {table}"))
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let (set, get, total) = (row("SET"), row("GET"), row("total"));
    assert_eq!(total[1], "2000");
    let sets: u64 = set[1].parse().unwrap();
    let gets: u64 = get[1].parse().unwrap();
    assert_eq!(sets + gets, 2000);
    // GETs are three quarters of the mix, and every GET answer was a null.
    assert!((1350..1650).contains(&gets), "{table}");
    assert_eq!(get[3], gets.to_string());
    assert_eq!(total[2], "0");
    // The check's PING, then exactly the requested count.
    assert_eq!(
        fake.requests.load(std::sync::atomic::Ordering::Relaxed),
        2001
    );
}

#[test]
fn json_reports_settings_and_figures() {
    let fake = Fake::start(script);
    let port = fake.port.to_string();
    let out = benchmark(&[
        "-p",
        &port,
        "-c",
        "2",
        "-n",
        "300",
        "--ratio",
        "set",
        "--json",
        "--label",
        "tiny",
        "--series",
        "fake",
        "-d",
        "10-20",
        "--distribution",
        "zipf:1.1",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["label"], "tiny");
    assert_eq!(json["series"], "fake");
    assert_eq!(json["settings"]["distribution"], "zipf:1.1");
    assert_eq!(json["settings"]["data size"], "10-20");
    assert_eq!(json["total"]["replies"], 300);
    assert_eq!(json["commands"][0]["command"], "SET");
    assert!(json["total"]["ops_per_sec"].as_f64().unwrap() > 0.0);
    assert!(json["total"]["latency_us"]["p99.9"].as_f64().unwrap() > 0.0);
}

#[test]
fn error_replies_are_reported_and_fail_the_run() {
    let fake = Fake::start(script);
    let port = fake.port.to_string();
    let args = [
        "-p",
        &port,
        "-c",
        "2",
        "-n",
        "100",
        "--command",
        "NOSUCH __key__",
    ];
    let out = benchmark(&args);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("NOSUCH error (100x): ERR unknown command"));
    assert!(text(&out.stderr).contains("answered 100 of 100 requests with errors"));
    let mut allowed = args.to_vec();
    allowed.push("--allow-errors");
    assert!(benchmark(&allowed).status.success());
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    // A port that was free a moment ago, and that nobody listens on.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = benchmark(&["-p", &port.to_string(), "-n", "10"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_refused_handshake_is_a_clear_error() {
    let fake = Fake::start(|_| b"-WRONGPASS invalid username-password pair\r\n");
    let out = benchmark(&["-p", &fake.port.to_string(), "-a", "secret", "-n", "10"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("answered AUTH with an error: WRONGPASS"),
        "{err}"
    );
    assert!(!err.contains("secret"), "{err}");
}

#[test]
fn bad_options_are_usage_errors() {
    let out = benchmark(&["--ratio", "set:nosuch=1:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown command 'nosuch'"));
    let out = benchmark(&["--command", "SET \"open"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("unbalanced quotes"));
}

#[test]
fn shards_and_plot_write_charts() {
    let dir = tempfile::tempdir().unwrap();
    let shards_svg = dir.path().join("shards.svg");
    let out = benchmark(&[
        "shards",
        "--shards",
        "1,8",
        "-t",
        "4",
        "-n",
        "4000",
        "-r",
        "500",
        "--repeat",
        "2",
        "--svg",
        shards_svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.lines().any(|l| l.trim_start().starts_with("8 ")),
        "{table}"
    );
    assert!(
        std::fs::read_to_string(&shards_svg)
            .unwrap()
            .contains("<svg")
    );

    let fake = Fake::start(script);
    let report = dir.path().join("run.json");
    let out = benchmark(&[
        "-p",
        &fake.port.to_string(),
        "-n",
        "100",
        "--json",
        "--ratio",
        "set",
    ]);
    assert!(out.status.success());
    std::fs::write(&report, &out.stdout).unwrap();
    let chart = dir.path().join("chart.svg");
    let out = benchmark(&[
        "plot",
        "-o",
        chart.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read_to_string(&chart)
            .unwrap()
            .contains("run  server")
    );
    let missing = dir.path().join("missing.json");
    let out = benchmark(&[
        "plot",
        "-o",
        chart.to_str().unwrap(),
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("missing.json"));
}
