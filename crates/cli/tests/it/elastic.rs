//! Elasticity end to end through the CLI's supervisor. The rate and latency experiments
//! (`spate bench autoscale|shedding`) are in the `measured` test binary, which runs alone.

use crate::{ok, rows_of_dir, sorted_lines, spate};

/// The CLI's supervised path: a checkpointed `spate nexmark run --autoscale ds2` started on
/// one worker below its bounds (2..2) is rescaled by its supervisor, which stops the process
/// with a final checkpoint and starts it again on two workers; the output over both runs is
/// exactly one uninterrupted run's.
#[test]
fn the_supervisor_rescales_a_cli_job_exactly() {
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
        .args(["--events", events, "--rate", "25000", "--workers", "1"])
        .args(["--checkpoint-interval", "500ms", "--no-progress"])
        .args([
            "--autoscale",
            "ds2",
            "--min-workers",
            "2",
            "--max-workers",
            "2",
        ])
        .args(["--policy-window", "1s", "--warm-up-windows", "0"])
        .arg("--checkpoint-dir")
        .arg(tmp.path().join("ckpt"))
        .arg("--output")
        .arg(&out)
        .env(
            "RUST_LOG",
            "warn,spate_dataflow::autoscale=info,spate_dataflow::cluster=info",
        ));
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(log.contains("autoscaler: rescaling"), "{log}");
    assert!(
        log.contains("restarting the processes on the new worker count"),
        "{log}"
    );
    assert_eq!(rows_of_dir(&out), expected, "nothing lost, nothing twice");
}
