//! The view of a multi-process job: the supervisor serves the merged snapshot of its
//! processes and forwards control (savepoint, stop with savepoint, cancel) to them.
//!
//! A test binary of its own: the supervisor starts this same binary as the job's processes,
//! which run the test function again; the variable `PROCESS_VIEW_JOB` (inherited) tells
//! them which job to build, and `SPATE_PROCESS_INDEX` that they are a process of it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use spate::metrics::{JobSnapshot, JobState, JobView, Operation, OperationStatus};
use spate::prelude::*;

/// Where a test keeps the view of the job it runs, once it starts.
type ViewSlot = Arc<Mutex<Option<Arc<dyn JobView>>>>;

const JOB: &str = "PROCESS_VIEW_JOB";
const EVENTS: u64 = 100_000;

/// Job 1: a bounded sequence, filtered, into a sink; job 2: the same, unbounded and paced,
/// with checkpoints under `dir`.
fn build(job: &str, dir: &str) -> (StreamEnv, ViewSlot) {
    let mut config = JobConfig::local(1).with_processes(2);
    let source = if job == "1" {
        SequenceSource::new(0, Some(EVENTS)).rate(100_000.0)
    } else if job == "3" {
        SequenceSource::new(0, None).rate(20_000.0)
    } else {
        config.checkpoint_interval = Some(Duration::from_millis(100));
        config.checkpoint_dir = Some(dir.to_owned());
        SequenceSource::new(0, None).rate(20_000.0)
    };
    let mut env = StreamEnv::new(config);
    let slot: ViewSlot = Arc::new(Mutex::new(None));
    let s = Arc::clone(&slot);
    env.on_start(move |view| *s.lock().unwrap() = Some(view));
    env.from_source(source)
        .uid("numbers")
        .filter(|v: &u64| v % 2 == 0)
        .name("even")
        .key_by(|v: &u64| v % 5)
        .count()
        .uid("counts")
        .name("counts")
        .sink_to(DiscardSink::new());
    (env, slot)
}

fn op(s: &JobSnapshot, name: &str) -> usize {
    s.operators.iter().find(|o| o.name == name).unwrap().index
}

fn wait_for(
    slot: &ViewSlot,
    limit: Duration,
    f: impl Fn(&JobSnapshot) -> bool,
) -> Arc<dyn JobView> {
    let start = Instant::now();
    loop {
        if let Some(view) = slot.lock().unwrap().clone() {
            if f(&view.snapshot()) {
                return view;
            }
        }
        assert!(start.elapsed() < limit, "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_supervisor_serves_the_merged_view_and_forwards_control() {
    if std::env::var_os("SPATE_PROCESS_INDEX").is_some() {
        // A process of the job: run it; the supervisor checks.
        let job = std::env::var(JOB).unwrap_or_default();
        let dir = std::env::var("PROCESS_VIEW_DIR").unwrap_or_default();
        let (env, _) = build(&job, &dir);
        env.execute("process view").unwrap();
        return;
    }
    // Job 1: exact counts over both processes.
    std::env::set_var(JOB, "1");
    let (env, _) = build("1", "");
    let result = env.execute("process view").unwrap();
    let s = result.snapshot.expect("the supervisor's snapshot");
    assert_eq!(s.state, JobState::Finished);
    assert_eq!(s.processes.len(), 2, "{:?}", s.processes);
    let source = s
        .operators
        .iter()
        .find(|o| o.kind == "source")
        .unwrap()
        .index;
    assert_eq!(s.subtasks_of(source).count(), 2);
    assert_eq!(s.sum_of(source, "numRecordsOut"), EVENTS as f64);
    assert_eq!(s.sum_of(op(&s, "even"), "numRecordsIn"), EVENTS as f64);
    assert_eq!(
        s.sum_of(op(&s, "even"), "numRecordsOut"),
        EVENTS as f64 / 2.0
    );
    assert_eq!(
        s.sum_of(op(&s, "counts"), "numRecordsIn"),
        EVENTS as f64 / 2.0
    );

    // Job 2: a savepoint, then a stop with savepoint, through the supervisor.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c").display().to_string();
    std::env::set_var(JOB, "2");
    std::env::set_var("PROCESS_VIEW_DIR", &dir);
    let (env, slot) = build("2", &dir);
    let control = std::thread::spawn(move || {
        let view = wait_for(&slot, Duration::from_secs(60), |s| {
            s.processes.len() == 2
                && s.checkpoints.completed >= 1
                && s.sum_of(0, "numRecordsOut") > 2000.0
        });
        let poll = |id: &str| {
            let start = Instant::now();
            loop {
                match view.operation(id) {
                    Some(OperationStatus::InProgress) | None => {}
                    Some(done) => return done,
                }
                assert!(start.elapsed() < Duration::from_secs(60), "operation {id}");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let id = view
            .trigger(Operation::Savepoint {
                target: Some("sp1".into()),
                cancel_job: false,
            })
            .unwrap();
        let saved = poll(&id);
        let id = view
            .trigger(Operation::Stop {
                target: Some("final".into()),
                drain: true,
            })
            .unwrap();
        (saved, id, view)
    });
    let result = env.execute("process view").unwrap();
    let (saved, stop_id, view) = control.join().unwrap();
    assert_eq!(
        saved,
        OperationStatus::Completed {
            location: format!("{dir}/savepoints/sp1")
        }
    );
    assert!(std::path::Path::new(&format!("{dir}/savepoints/sp1")).is_dir());
    assert_eq!(
        view.operation(&stop_id),
        Some(OperationStatus::Completed {
            location: format!("{dir}/savepoints/final")
        })
    );
    let s = result.snapshot.unwrap();
    assert_eq!(s.state, JobState::Finished);
    assert!(s.checkpoints.completed >= 1);

    // Job 3: job 2 without checkpoints, canceled through the supervisor.
    std::env::set_var(JOB, "3");
    std::env::set_var("PROCESS_VIEW_DIR", "");
    let (env, slot) = build("3", "");
    let canceler = std::thread::spawn(move || {
        let view = wait_for(&slot, Duration::from_secs(60), |s| {
            s.processes.len() == 2 && s.sum_of(0, "numRecordsOut") > 2000.0
        });
        view.cancel().unwrap();
        Instant::now()
    });
    let result = env.execute("process view").unwrap();
    let canceled_at = canceler.join().unwrap();
    assert!(canceled_at.elapsed() < Duration::from_secs(10));
    assert!(result.canceled);
    assert_eq!(result.snapshot.unwrap().state, JobState::Canceled);
}
