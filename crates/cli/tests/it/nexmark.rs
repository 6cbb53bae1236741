//! Nexmark through the CLI: Flink's expected outputs, and the same rows on any number of
//! workers and processes.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::{ok, shared, spate};

/// The seed7-20k input of `shared/nexmark/expected`, written by `spate nexmark gen`.
fn seed7_input(dir: &Path) -> std::path::PathBuf {
    let input = dir.join("in.jsonl");
    ok(spate()
        .args([
            "nexmark",
            "gen",
            "--events",
            "20000",
            "--seed",
            "7",
            "--event-rate",
            "200",
            "--out",
        ])
        .arg(&input));
    input
}

/// `nexmark_canon.py --compare` exit status and report.
fn compare(out: &Path, expected: &Path) -> (bool, String) {
    let result = Command::new("python3")
        .arg(shared().join("anchors/nexmark_canon.py"))
        .arg("--compare")
        .arg(out)
        .arg(expected)
        .output()
        .expect("python3 runs the canonical comparison");
    (
        result.status.success(),
        String::from_utf8_lossy(&result.stdout).into_owned(),
    )
}

fn run_query(query: &str, input: &Path, output: &Path, workers: &str, processes: &str) {
    ok(spate()
        .args([
            "nexmark",
            "run",
            "--no-progress",
            "--query",
            query,
            "--workers",
            workers,
            "--processes",
            processes,
        ])
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output));
}

#[test]
fn generator_is_byte_identical_to_the_reference_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    let sha = Command::new("sha256sum")
        .arg(&input)
        .output()
        .expect("sha256sum runs");
    let expected =
        std::fs::read_to_string(shared().join("nexmark/expected/seed7-20k/input.sha256")).unwrap();
    let got = String::from_utf8_lossy(&sha.stdout);
    assert_eq!(
        got.split_whitespace().next(),
        expected.split_whitespace().next()
    );
}

/// Every query Spate runs with a fixed result, each with Flink 2.3's results in
/// `shared/nexmark/expected/seed7-20k` (q12 has processing-time windows: see
/// `processing_time_windows_count_every_bid_once`).
const WITH_FLINK_RESULTS: [&str; 21] = [
    "q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q10", "q11", "q13", "q14", "q15", "q16",
    "q17", "q18", "q19", "q20", "q21", "q22",
];

#[test]
fn queries_match_flink_on_one_and_several_workers() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    for query in WITH_FLINK_RESULTS {
        let expected = shared().join(format!("nexmark/expected/seed7-20k/{query}.canon"));
        for workers in ["1", "3"] {
            let out = dir.path().join(format!("{query}-{workers}.out"));
            run_query(query, &input, &out, workers, "1");
            let (same, report) = compare(&out, &expected);
            assert!(
                same,
                "{query} on {workers} workers differs from Flink: {report}"
            );
        }
    }
}

#[test]
fn multi_process_runs_equal_single_worker_runs() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    for query in ["q1", "q3", "q5", "q7"] {
        let single = dir.path().join(format!("{query}-single.out"));
        let multi = dir.path().join(format!("{query}-multi.out"));
        run_query(query, &input, &single, "1", "1");
        run_query(query, &input, &multi, "2", "2");
        let (same, report) = compare(&multi, &single);
        assert!(
            same,
            "{query} on 2 processes differs from 1 worker: {report}"
        );
    }
}

#[test]
fn generated_runs_do_not_depend_on_workers_or_processes() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, workers: &str, processes: &str| {
        let out = dir.path().join(name);
        ok(spate()
            .args([
                "nexmark",
                "run",
                "--no-progress",
                "--query",
                "q3",
                "--events",
                "200000",
            ])
            .args([
                "--partitions",
                "4",
                "--workers",
                workers,
                "--processes",
                processes,
                "--output",
            ])
            .arg(&out));
        out
    };
    let one = run("one.out", "1", "1");
    let four = run("four.out", "4", "1");
    let two_by_two = run("two-by-two.out", "2", "2");
    assert!(std::fs::metadata(&one).unwrap().len() > 0);
    let (same, report) = compare(&four, &one);
    assert!(same, "4 workers differ from 1: {report}");
    let (same, report) = compare(&two_by_two, &one);
    assert!(
        same,
        "2 processes × 2 workers differ from 1 worker: {report}"
    );
}

#[test]
fn processing_time_windows_count_every_bid_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    let mut bids_per_bidder: HashMap<i64, i64> = HashMap::new();
    for (kind, body) in read_events(&input) {
        if kind == 2 {
            *bids_per_bidder.entry(int(&body, "bidder")).or_default() += 1;
        }
    }
    for workers in ["1", "3"] {
        let out = dir.path().join(format!("q12-{workers}.out"));
        run_query("q12", &input, &out, workers, "1");
        let mut counted: HashMap<i64, i64> = HashMap::new();
        let mut windows = BTreeSet::new();
        for line in std::fs::read_to_string(&out).unwrap().lines() {
            let row: Vec<Value> = serde_json::from_str(line).unwrap();
            let (start, end) = (row[2].as_str().unwrap(), row[3].as_str().unwrap());
            // 10 s tumbling windows: `..:.0:00.000` to `..:.0:10.000` and so on.
            assert!(start.ends_with("0.000") && end.ends_with("0.000"), "{line}");
            assert!(
                windows.insert((row[0].as_i64().unwrap(), start.to_owned())),
                "{line}"
            );
            *counted.entry(row[0].as_i64().unwrap()).or_default() += row[1].as_i64().unwrap();
        }
        assert_eq!(counted, bids_per_bidder, "q12 on {workers} workers");
    }
}

/// The events of a JSON-lines file as (event_type, body).
fn read_events(path: &Path) -> Vec<(u64, Value)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut v: Value = serde_json::from_str(line).unwrap();
            let kind = v["event_type"].as_u64().unwrap();
            let field = ["person", "auction", "bid"][kind as usize];
            (kind, v[field].take())
        })
        .collect()
}

fn int(v: &Value, field: &str) -> i64 {
    v[field].as_i64().unwrap()
}

/// A bid event of the Nexmark JSON form at `time` (`HH:MM:SS.mmm` on 2024-01-01).
fn bid_event(auction: i64, bidder: i64, price: i64, time: &str) -> String {
    let bid = json!({
        "auction": auction, "bidder": bidder, "price": price, "channel": "Google",
        "url": "https://www.nexmark.com/a/b/c/item.htm?query=1",
        "dateTime": format!("2024-01-01 {time}"), "extra": format!("bid-{auction}-{price}"),
    });
    json!({"event_type": 2, "person": null, "auction": null, "bid": bid}).to_string()
}

#[test]
fn q7_takes_a_bid_at_a_window_end_into_both_windows() {
    // q7 joins each window's maximum with the bids in [end - 10 s, end], both ends included:
    // a bid at exactly 00:00:10.000 belongs to the second window and may also be the first
    // window's maximum, even when its key had no bid in the first window.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edges.jsonl");
    let events = [
        bid_event(1000, 2000, 500, "00:00:01.000"),
        bid_event(1001, 2001, 500, "00:00:10.000"),
        bid_event(1002, 2002, 700, "00:00:12.000"),
        bid_event(1003, 2003, 300, "00:00:20.000"),
        bid_event(1004, 2004, 300, "00:00:30.000"),
        bid_event(1005, 2005, 100, "00:00:39.999"),
    ];
    std::fs::write(&input, events.join("\n") + "\n").unwrap();
    let expected = dir.path().join("q7.expected");
    ok(Command::new("python3")
        .arg(shared().join("anchors/nexmark_ref.py"))
        .args(["--query", "q7", "--input"])
        .arg(&input)
        .arg("-o")
        .arg(&expected));
    let rows = std::fs::read_to_string(&expected).unwrap();
    assert_eq!(rows.lines().count(), 6, "the reference's rows: {rows}");
    for workers in ["1", "3"] {
        let out = dir.path().join(format!("q7-{workers}.out"));
        run_query("q7", &input, &out, workers, "1");
        let (same, report) = compare(&out, &expected);
        assert!(
            same,
            "q7 on {workers} workers differs from the reference: {report}"
        );
    }
}
