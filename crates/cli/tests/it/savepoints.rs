//! Stop with a savepoint, resume elsewhere: a paced job stopped by SIGTERM with
//! `--savepoint-dir` and resumed from the savepoint on another number of workers and processes
//! writes, over both runs, exactly the output of one uninterrupted run.

use std::process::Stdio;
use std::time::Duration;

use crate::{ok, rows_of_dir, sorted_lines, spate};

const EVENTS: &str = "100000";

#[test]
fn a_job_stopped_with_a_savepoint_resumes_on_other_workers_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let query = ["nexmark", "run", "--query", "q11", "--partitions", "3"];
    let reference = tmp.path().join("reference.jsonl");
    ok(spate()
        .args(query)
        .args(["--events", EVENTS, "--no-progress", "--output"])
        .arg(&reference));
    let expected = sorted_lines(&reference);

    // Paced to take about 5 s; stopped after 2 s with a savepoint.
    let (out, savepoint) = (tmp.path().join("out"), tmp.path().join("savepoint"));
    let mut first = spate()
        .args(query)
        .args(["--events", EVENTS, "--rate", "20000", "--workers", "2"])
        .args(["--checkpoint-interval", "500ms", "--no-progress"])
        .arg("--checkpoint-dir")
        .arg(tmp.path().join("ckpt-1"))
        .arg("--savepoint-dir")
        .arg(&savepoint)
        .arg("--output")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on the pid of this test's own child.
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status();
    let status = first.wait().unwrap();
    assert!(status.success(), "a stop with a savepoint exits 0");
    assert!(
        savepoint.join("_manifest.json").exists(),
        "the savepoint is written"
    );
    let partial = rows_of_dir(&out);
    assert!(partial.len() < expected.len(), "stopped before the end");

    // Resumed on 2 processes × 2 workers, into the same output directory.
    ok(spate()
        .args(query)
        .args(["--events", EVENTS, "--workers", "2", "--processes", "2"])
        .args(["--no-progress"])
        .arg("--checkpoint-dir")
        .arg(tmp.path().join("ckpt-2"))
        .arg("--restore")
        .arg(&savepoint)
        .arg("--output")
        .arg(&out));
    assert_eq!(rows_of_dir(&out), expected, "nothing lost, nothing twice");
}

#[test]
fn a_restore_from_a_location_that_does_not_exist_fails_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    ok(spate()
        .args(["nexmark", "gen", "--events", "1000", "--out"])
        .arg(&input));
    let missing = tmp.path().join("no-such-dir");
    let started = std::time::Instant::now();
    let out = spate()
        .args([
            "nexmark",
            "run",
            "--query",
            "q11",
            "--no-progress",
            "--input",
        ])
        .arg(&input)
        .arg("--restore")
        .arg(&missing)
        .arg("--checkpoint-dir")
        .arg(tmp.path().join("ckpt"))
        .arg("--output")
        .arg(tmp.path().join("out.jsonl"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a failed restore exits non-zero");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("no-such-dir"))
        .collect();
    assert_eq!(errors.len(), 1, "one line names the location: {stderr}");
    assert!(!stderr.contains("restarting"), "never retried: {stderr}");
    assert!(
        !tmp.path().join("out.jsonl").exists(),
        "nothing ran from empty state"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}
