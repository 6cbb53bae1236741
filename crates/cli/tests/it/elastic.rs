//! Elasticity end to end through the CLI's supervisor. The rate and latency experiments
//! (`spate bench autoscale|shedding`) are in the `measured` test binary, which runs alone.

use crate::{ok, rows_of_dir, sorted_lines, spate};

/// Runs q11 over 150 000 events at 25 000/s, checkpointed, with `--autoscale ds2` and the
/// flags `layout` (where it starts, its bounds); returns the log and checks that the output
/// over every run is exactly one uninterrupted run's.
fn autoscaled_q11(layout: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let query = ["nexmark", "run", "--query", "q11", "--partitions", "3"];
    let events = "150000";
    let reference = tmp.path().join("reference.jsonl");
    ok(spate()
        .args(query)
        .args(["--events", events, "--no-progress", "--output"])
        .arg(&reference));
    let expected = sorted_lines(&reference);
    let out = tmp.path().join("out");
    let run = ok(spate()
        .args(query)
        .args(["--events", events, "--rate", "25000"])
        .args(["--checkpoint-interval", "500ms", "--no-progress"])
        .args(["--autoscale", "ds2"])
        .args(layout)
        .args(["--policy-window", "1s", "--warm-up-windows", "0"])
        .arg("--checkpoint-dir")
        .arg(tmp.path().join("ckpt"))
        .arg("--output")
        .arg(&out)
        .env(
            "RUST_LOG",
            "warn,spate_dataflow::autoscale=info,spate_dataflow::cluster=info",
        ));
    let log = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(log.contains("autoscaler: rescaling"), "{log}");
    assert_eq!(rows_of_dir(&out), expected, "nothing lost, nothing twice");
    log
}

/// Asserts that `log` announces a restart on `processes` processes of `workers` threads.
fn assert_restarted_on(log: &str, workers: usize, processes: usize) {
    let (w, p) = (
        format!("workers={workers}"),
        format!("processes={processes}"),
    );
    assert!(
        log.lines().any(|l| {
            l.contains("restarting the processes on the new worker count")
                && l.contains(&w)
                && l.contains(&p)
        }),
        "{processes} process(es) of {workers} thread(s): {log}"
    );
}

/// The CLI's supervised path: a job started on one worker below its bounds (2..2) is
/// rescaled by its supervisor, which stops the process with a final checkpoint and starts
/// it again on two workers.
#[test]
fn the_supervisor_rescales_a_cli_job_exactly() {
    let log = autoscaled_q11(&["--workers", "1", "--min-workers", "2", "--max-workers", "2"]);
    assert_restarted_on(&log, 2, 1);
}

/// With `--workers-per-process 1` a decision of two workers runs as two processes: the
/// supervisor starts a second process (a timely cluster of two) from the final checkpoint,
/// where key groups and splits spread over both.
#[test]
fn the_supervisor_scales_the_process_count_up_exactly() {
    let log = autoscaled_q11(&[
        "--workers",
        "1",
        "--min-workers",
        "2",
        "--max-workers",
        "2",
        "--workers-per-process",
        "1",
    ]);
    assert_restarted_on(&log, 1, 2);
    assert!(log.contains("to_processes=2"), "{log}");
}

/// And down: a job of three processes bounded to one worker goes on in one process (DS2
/// scales down only by two or more).
#[test]
fn the_supervisor_scales_the_process_count_down_exactly() {
    let log = autoscaled_q11(&[
        "--processes",
        "3",
        "--workers",
        "1",
        "--min-workers",
        "1",
        "--max-workers",
        "1",
        "--workers-per-process",
        "1",
    ]);
    assert_restarted_on(&log, 1, 1);
}

/// `--shed-output`: the events that load shedding drops at the source go to part files
/// instead of nowhere. With a headroom of 5 %, q0 sheds; every shed event is one of the
/// generated events, none twice, as many as `numRecordsShed` says, and the bids shed and the
/// bids that got through are every bid generated. Under checkpoints, so the shed sink's parts
/// commit with them.
#[test]
fn shed_events_go_to_the_shed_output_and_none_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let events = "400000";
    let generated = tmp.path().join("events.jsonl");
    ok(spate()
        .args(["nexmark", "gen", "--events", events, "--out"])
        .arg(&generated));
    let generated = sorted_lines(&generated);
    let shed_dir = tmp.path().join("shed");
    let run = ok(spate()
        .args(["nexmark", "run", "--query", "q0", "--events", events])
        .args(["--rate", "100000", "--no-progress", "--json"])
        .args(["--overload", "shed", "--headroom", "0.05", "--shed-output"])
        .arg(&shed_dir)
        .args(["--checkpoint-interval", "500ms", "--checkpoint-dir"])
        .arg(tmp.path().join("ckpt"))
        .arg("--output")
        .arg(tmp.path().join("out")));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let report: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON report: {stdout}"));
    let shed = rows_of_dir(&shed_dir);
    assert!(!shed.is_empty(), "nothing was shed: {report}");
    assert_eq!(report["shed"], shed.len(), "{report}");
    let mut unique = shed.clone();
    unique.dedup();
    assert_eq!(unique.len(), shed.len(), "an event shed twice");
    let strangers = shed
        .iter()
        .filter(|l| generated.binary_search(l).is_err())
        .count();
    assert_eq!(strangers, 0, "shed lines that are no generated event");
    let is_bid = |l: &&String| l.contains("\"bid\":{");
    let bids = generated.iter().filter(is_bid).count();
    let rows = rows_of_dir(&tmp.path().join("out")).len();
    assert_eq!(rows + shed.iter().filter(is_bid).count(), bids, "{report}");
}
