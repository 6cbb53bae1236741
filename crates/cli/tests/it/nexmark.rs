//! Nexmark through the CLI: Flink's expected outputs, and the same rows on any number of
//! workers and processes.

use std::path::Path;
use std::process::Command;

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

#[test]
fn queries_match_flink_on_one_and_several_workers() {
    let dir = tempfile::tempdir().unwrap();
    let input = seed7_input(dir.path());
    for query in ["q0", "q1", "q2", "q3"] {
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
    for query in ["q1", "q3"] {
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
