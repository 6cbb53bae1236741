//! Failures around checkpoints: storage that fails while checkpoints are written (within and
//! past the tolerable-failure count), state that cannot be snapshotted, storage that fails while
//! a job restores, and a truncated manifest. Every job that ends well ends with exactly the
//! failure-free output; every job that fails says why in one line.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use spate::checkpoint::faults::{FailingStore, Op};
use spate::dataflow::{KeyedProcessFunction, ProcessContext, RestartStrategy};
use spate::prelude::*;

use crate::checkpoints::{rows, run_windows, run_windows_paced, EVENTS};

/// Checkpoints every 100 ms into `dir` (a path or a registered `scheme://`).
fn checkpointed(workers: usize, dir: &str) -> JobConfig {
    let mut config = JobConfig::local(workers);
    config.checkpoint_interval = Some(Duration::from_millis(100));
    config.checkpoint_dir = Some(dir.to_owned());
    config.restart_strategy = RestartStrategy::None;
    config
}

/// The failure-free output of the windowed job, written under `tmp`.
fn expected(tmp: &Path) -> Vec<String> {
    let dir = tmp.join("expected");
    run_windows(&dir, JobConfig::local(1), u64::MAX).unwrap();
    rows(&dir)
}

fn metric(result: &JobResult, name: &str) -> u64 {
    result.metrics.get(name).copied().unwrap_or(0)
}

/// A fresh failing store under a scheme of its own.
fn store(scheme: &str) -> std::sync::Arc<FailingStore> {
    let store = FailingStore::new();
    spate::checkpoint::register_store(scheme, store.location());
    store
}

#[test]
fn storage_failures_within_the_tolerance_leave_the_output_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store("faults-within");
    for c in ["chk-2/", "chk-3/"] {
        store.fail(
            Op::Put,
            c,
            ErrorKind::StorageFull,
            "No space left on device",
        );
    }
    let mut config = checkpointed(2, "faults-within://job");
    config.tolerable_checkpoint_failures = 2;
    let out = tmp.path().join("out");
    let result = run_windows(&out, config, u64::MAX).unwrap();
    assert_eq!(rows(&out), expected(tmp.path()));
    assert_eq!(
        metric(&result, "checkpoints.numberOfFailedCheckpoints"),
        2,
        "{:?}",
        result.metrics
    );
    assert!(metric(&result, "checkpoints.numberOfCompletedCheckpoints") >= 2);
}

#[test]
fn storage_failures_past_the_tolerance_fail_the_job_with_their_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store("faults-past");
    for c in ["chk-2/", "chk-3/"] {
        store.fail(
            Op::Put,
            c,
            ErrorKind::StorageFull,
            "No space left on device",
        );
    }
    let mut config = checkpointed(2, "faults-past://job");
    config.tolerable_checkpoint_failures = 1;
    let err = run_windows(&tmp.path().join("out"), config, u64::MAX).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("2 checkpoint(s) failed in a row, more than the 1 tolerated")
            && message.contains("No space left on device")
            && !message.contains('\n'),
        "{message}"
    );
}

#[test]
fn storage_failures_past_the_tolerance_restart_the_job_which_ends_exact() {
    let tmp = tempfile::tempdir().unwrap();
    // Checkpoint 2 cannot be written. Past the tolerance (0), the job restarts from
    // checkpoint 1; its next checkpoints take new ids (3, 4, ...), as Flink's do.
    let store = store("faults-restart");
    store.fail(
        Op::Put,
        "chk-2/",
        ErrorKind::Other,
        "connection reset by peer",
    );
    let mut config = checkpointed(2, "faults-restart://job");
    config.restart_strategy = RestartStrategy::FixedDelay {
        attempts: 2,
        delay: Duration::from_millis(10),
    };
    let out = tmp.path().join("out");
    let result = run_windows(&out, config, u64::MAX).unwrap();
    assert_eq!(metric(&result, "fullRestarts"), 1);
    assert_eq!(rows(&out), expected(tmp.path()));
}

#[test]
fn storage_that_fails_while_restoring_is_retried_by_the_restart_strategy() {
    let tmp = tempfile::tempdir().unwrap();
    let store = store("faults-restore");
    let out = tmp.path().join("out");
    // Slow (2 s before the failure, checkpoints every 100 ms), so that a checkpoint completes
    // before the failure even on a loaded machine: the store cannot be listed from here.
    let failed = run_windows_paced(
        &out,
        checkpointed(2, "faults-restore://job"),
        EVENTS / 2,
        15_000.0,
        None,
    );
    assert!(failed.is_err(), "the first run fails");

    // The restore reads the operators' state: the first reads fail, as a flaky network would.
    store.fail_times(
        Op::Get,
        "/op/",
        2,
        ErrorKind::Other,
        "connection reset by peer",
    );
    let mut config = checkpointed(3, "faults-restore://job");
    config.restore = Some("latest".to_owned());
    config.restart_strategy = RestartStrategy::FixedDelay {
        attempts: 3,
        delay: Duration::from_millis(10),
    };
    let result = run_windows(&out, config, u64::MAX).unwrap();
    assert!(
        store.failures() >= 1,
        "the restore met the injected failure"
    );
    assert!(metric(&result, "fullRestarts") >= 1);
    assert_eq!(rows(&out), expected(tmp.path()));
}

#[test]
fn a_truncated_manifest_falls_back_to_the_previous_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, ckpt) = (tmp.path().join("out"), tmp.path().join("ckpt"));
    // Slower than the other tests (2 s before the failure, checkpoints every 100 ms), and
    // failing only once two checkpoints are complete, even on a loaded machine.
    let failed = run_windows_paced(
        &out,
        checkpointed(2, &ckpt.display().to_string()),
        EVENTS / 2,
        15_000.0,
        Some((ckpt.clone(), 2)),
    );
    assert!(failed.is_err(), "the first run fails");
    let published = rows(&out);
    let mut complete: Vec<u64> = std::fs::read_dir(&ckpt)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("_manifest.json").exists())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("chk-")?.parse().ok())
        .collect();
    complete.sort_unstable();
    assert!(complete.len() >= 2, "retained checkpoints: {complete:?}");
    let newest = ckpt.join(format!("chk-{}/_manifest.json", complete.last().unwrap()));
    let text = std::fs::read(&newest).unwrap();
    std::fs::write(&newest, &text[..text.len() / 2]).unwrap();

    // Restored from the checkpoint before. What the lost checkpoint had published stays
    // published (as in Flink, a committed part cannot be taken back), so the rows it added
    // after the checkpoint before may come again; nothing else repeats and nothing is lost.
    let mut config = checkpointed(2, &ckpt.display().to_string());
    config.restore = Some("latest".to_owned());
    run_windows(&out, config, u64::MAX).unwrap();
    let got = rows(&out);
    let mut distinct = got.clone();
    distinct.dedup();
    assert_eq!(distinct, expected(tmp.path()), "every row, none invented");
    for pair in got.windows(2).filter(|w| w[0] == w[1]) {
        assert!(
            published.binary_search(&pair[0]).is_ok(),
            "{} repeats but the lost checkpoint had not published it",
            pair[0]
        );
    }
}

#[test]
fn with_every_checkpoint_corrupt_a_restore_is_an_error_not_empty_state() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, ckpt) = (tmp.path().join("out"), tmp.path().join("ckpt"));
    let failed = run_windows(
        &out,
        checkpointed(1, &ckpt.display().to_string()),
        EVENTS / 2,
    );
    assert!(failed.is_err(), "the first run fails");
    for entry in std::fs::read_dir(&ckpt).unwrap().flatten() {
        let manifest = entry.path().join("_manifest.json");
        if manifest.exists() {
            std::fs::write(&manifest, b"{\"truncated").unwrap();
        }
    }
    let mut config = checkpointed(1, &ckpt.display().to_string());
    config.restore = Some("latest".to_owned());
    let err = run_windows(&tmp.path().join("again"), config, u64::MAX).unwrap_err();
    assert!(!err.to_string().contains('\n'), "{err}");
    assert!(
        err.to_string().contains("chk-"),
        "names the checkpoints: {err}"
    );
}

/// Raised to make the next snapshot of [`Tally`] fail.
static BREAK_SNAPSHOT: AtomicBool = AtomicBool::new(false);
/// Whether the failure was armed already (it is armed once, not again after the restart).
static ARMED: AtomicBool = AtomicBool::new(false);

/// A per-key count whose serialization fails once when [`BREAK_SNAPSHOT`] is raised.
#[derive(serde::Deserialize)]
struct Tally(u64);

impl serde::Serialize for Tally {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if BREAK_SNAPSHOT.swap(false, Ordering::SeqCst) {
            return Err(serde::ser::Error::custom("injected snapshot failure"));
        }
        s.serialize_newtype_struct("Tally", &self.0)
    }
}

struct RunningCount;

impl KeyedProcessFunction<u64, u64, (u64, u64)> for RunningCount {
    type State = Tally;
    fn process_element(&self, v: u64, ctx: &mut ProcessContext<'_, u64, Tally, (u64, u64)>) {
        if v == EVENTS / 2 && !ARMED.swap(true, Ordering::SeqCst) {
            BREAK_SNAPSHOT.store(true, Ordering::SeqCst);
        }
        let n = ctx.state().get_or_insert(Tally(0));
        n.0 += 1;
        let n = n.0;
        ctx.collect((v % 5, n));
    }
}

fn counting(out: &Path, config: JobConfig) -> SpateResult<JobResult> {
    let env = StreamEnv::new(config);
    env.from_source(SequenceSource::new(0, Some(EVENTS)).rate(60_000.0))
        .key_by(|v: &u64| v % 5)
        .process(RunningCount)
        .write_jsonl(out);
    env.execute("running counts")
}

#[test]
fn a_failure_while_snapshotting_restarts_from_the_previous_checkpoint_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let expected_dir = tmp.path().join("expected");
    counting(&expected_dir, JobConfig::local(1)).unwrap();
    // The failure-free run armed the failure without a snapshot to meet it: arm it anew.
    BREAK_SNAPSHOT.store(false, Ordering::SeqCst);
    ARMED.store(false, Ordering::SeqCst);

    let out = tmp.path().join("out");
    let mut config = checkpointed(2, &tmp.path().join("ckpt").display().to_string());
    config.restart_strategy = RestartStrategy::FixedDelay {
        attempts: 2,
        delay: Duration::from_millis(10),
    };
    let result = counting(&out, config).unwrap();
    assert_eq!(metric(&result, "fullRestarts"), 1, "{:?}", result.metrics);
    assert_eq!(rows(&out), rows(&expected_dir));
}
