//! The CLI's contract with users: one-line errors, bad input policies, machine-readable bench.

use std::io::Write;

use crate::{ok, spate};

fn first_event_lines(n: usize) -> Vec<String> {
    let out = ok(spate().args(["nexmark", "gen", "--events", &n.to_string(), "--out", "-"]));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Each line of `text` as JSON.
fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn bad_flags_get_one_line_errors() {
    for args in [
        vec!["nexmark", "run", "--query", "q99"],
        vec!["nexmark", "run", "--query", "q0", "--workers", "zero"],
        vec!["nexmark", "run", "--query", "q0", "--bad-records", "skip"],
        vec!["nexmark", "frobnicate"],
        // Nexmark events carry no unique id to deduplicate on (refused before connecting).
        vec![
            "nexmark",
            "run",
            "--query",
            "q0",
            "--input",
            "mqtt://127.0.0.1:1/t?dedup=id",
        ],
    ] {
        let out = spate().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
    let out = spate()
        .args(["nexmark", "run", "--query", "q0", "--workers", "0"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("workers"), "{err}");
}

#[test]
fn malformed_input_follows_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut lines = first_event_lines(3000);
    let bad = [10usize, 500, 2999];
    lines[10] = r#"{"event_type":2,"person":null,"auction":null,"bid":{"auction":"x"}}"#.into();
    lines[500] = "{ truncated".into();
    lines[2999] = String::new() + "\u{1}garbage";
    let mut f = std::fs::File::create(&input).unwrap();
    for l in &lines {
        writeln!(f, "{l}").unwrap();
    }
    drop(f);
    let run = |policy: &str| {
        spate()
            .args([
                "nexmark",
                "run",
                "--no-progress",
                "--json",
                "--query",
                "q0",
                "--workers",
                "2",
            ])
            .arg("--input")
            .arg(&input)
            .args(["--bad-records", policy])
            .output()
            .unwrap()
    };

    let fail = run("fail");
    assert!(!fail.status.success());
    let err = String::from_utf8_lossy(&fail.stderr);
    // The job announces its dashboard first; the failure itself is one line.
    let errors: Vec<&str> = err
        .lines()
        .filter(|l| !(l.starts_with("Job \"") && l.contains("dashboard and REST API")))
        .collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].starts_with("error: "), "{err}");
    assert!(err.contains("in.jsonl") && err.contains("line"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let dropped = run("drop");
    assert!(dropped.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&dropped.stdout).unwrap();
    assert_eq!(summary["dropped"], 3);
    assert_eq!(summary["events"], 2997);

    let dl = dir.path().join("dead.jsonl");
    let dead = run(&format!("dead-letter={}", dl.display()));
    assert!(
        dead.status.success(),
        "{}",
        String::from_utf8_lossy(&dead.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&dead.stdout).unwrap();
    assert_eq!(summary["dead_lettered"], 3);
    let text = std::fs::read_to_string(&dl).unwrap();
    let mut got: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["line"]
                .as_u64()
                .unwrap()
        })
        .collect();
    got.sort();
    assert_eq!(got, bad.iter().map(|i| *i as u64 + 1).collect::<Vec<_>>());
}

#[test]
fn bench_prints_one_json_line_per_query() {
    let out = ok(spate().args([
        "bench",
        "nexmark",
        "--queries",
        "q0,q2",
        "--events",
        "50000",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 2);
    for (line, q) in lines.iter().zip(["q0", "q2"]) {
        assert_eq!(line["query"], q);
        assert_eq!(line["events"], 50000);
        assert!(line["events_per_s"].as_f64().unwrap() > 0.0);
        assert!(line["peak_rss_mb"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn bench_latency_paces_its_source_and_reports_ordered_percentiles() {
    // 20 000 events/s for 2 s after a 1 s warm-up, with and without checkpoints.
    let out = ok(spate().args([
        "bench",
        "latency",
        "--rate",
        "20000",
        "--seconds",
        "2",
        "--workers",
        "2",
        "--checkpoint-interval",
        "500ms",
        "--no-rest",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = json_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    for (line, checkpoints) in lines.iter().zip([None, Some(500)]) {
        assert_eq!(line["bench"], "latency");
        assert_eq!(line["checkpoint_interval_ms"].as_u64(), checkpoints);
        // Every event created in the measured window arrives once (the keyed reduce emits
        // one output per input): the paced rate, within the slack of the stop.
        let outputs = line["outputs"].as_f64().unwrap();
        assert!(
            (30_000.0..=46_000.0).contains(&outputs),
            "about 2 s × 20 000/s outputs: {line}"
        );
        let p = |k: &str| line[k].as_f64().unwrap();
        assert!(
            0.0 <= p("p50_ms")
                && p("p50_ms") <= p("p95_ms")
                && p("p95_ms") <= p("p99_ms")
                && p("p99_ms") <= p("max_ms"),
            "{line}"
        );
    }
}
