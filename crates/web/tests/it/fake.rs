//! A fake running job: a Nexmark-like plan with chains, a hash join and an XSS-named sink,
//! on 2 workers, with checkpoints and an exception. Control calls are recorded; a savepoint
//! is "written" as a marker file at the location `savepoint_target` resolves, so tests can
//! check that nothing lands outside the savepoint root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use spate_metrics::snapshot::operator_id_from;
use spate_metrics::{
    savepoint_target, CheckpointRecord, CheckpointStatus, CheckpointsSnapshot, ControlError,
    EdgeInfo, ExceptionRecord, HistogramSnapshot, JobSnapshot, JobState, JobView, Operation,
    OperationId, OperationStatus, OperatorInfo, ProcessSnapshot, RestoredRecord, ShipStrategy,
    SubtaskSnapshot, WorkerSnapshot,
};

pub const JOB_ID: &str = "5f3c1b2a9d8e7f6a5b4c3d2e1f0a9b8c";
pub const NOW: i64 = 1_780_000_000_000;
pub const WORKERS: usize = 2;
pub const XSS_NAME: &str = "Sink: <img src=x onerror=alert(1)>";

/// An operator of the plan: name, kind, chain head, inputs.
type PlanOp = (
    &'static str,
    &'static str,
    usize,
    &'static [(usize, ShipStrategy)],
);

const PLAN: &[PlanOp] = &[
    ("Source: bids", "source", 0, &[]),
    (
        "Filter: price > 10",
        "operator",
        0,
        &[(0, ShipStrategy::Forward)],
    ),
    ("Source: auctions", "source", 2, &[]),
    (
        "Join: auction = bid",
        "operator",
        3,
        &[(1, ShipStrategy::Hash), (2, ShipStrategy::Hash)],
    ),
    (
        "Window: max price",
        "operator",
        3,
        &[(3, ShipStrategy::Forward)],
    ),
    (XSS_NAME, "sink", 5, &[(4, ShipStrategy::Rebalance)]),
];

/// The vertices (chains) of the plan as (head, members).
pub const VERTICES: &[(usize, &[usize])] = &[(0, &[0, 1]), (2, &[2]), (3, &[3, 4]), (5, &[5])];

pub fn op_id(i: usize) -> String {
    operator_id_from(&format!("op-{i}"))
}

/// The deterministic metrics of operator `op` on worker `w`.
pub fn metric(op: usize, w: usize, name: &str) -> f64 {
    let base = (op as f64 + 1.0) * 1000.0 + w as f64 * 10.0;
    match name {
        "numRecordsIn" => base,
        "numRecordsOut" => base / 2.0,
        "numRecordsInPerSecond" => base / 10.0,
        "numRecordsOutPerSecond" => base / 20.0,
        // The sink is the bottleneck, the bid source backpressured.
        "busyTimeMsPerSecond" => {
            if op == 5 {
                850.0 + w as f64 * 50.0
            } else {
                40.0 + op as f64 * 10.0 + w as f64
            }
        }
        "backPressuredTimeMsPerSecond" => {
            if op == 0 {
                600.0 + w as f64 * 10.0
            } else if op == 2 {
                200.0
            } else {
                0.0
            }
        }
        "idleTimeMsPerSecond" => 100.0,
        "currentInputWatermark" => (NOW - 3000 - op as i64 * 100 - w as i64) as f64,
        "currentOutputWatermark" => (NOW - 3000 - op as i64 * 100 - w as i64 - 50) as f64,
        _ => f64::NAN,
    }
}

pub const METRICS: &[&str] = &[
    "numRecordsIn",
    "numRecordsOut",
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "idleTimeMsPerSecond",
    "currentInputWatermark",
    "currentOutputWatermark",
];

pub fn latency(w: usize) -> HistogramSnapshot {
    HistogramSnapshot {
        count: 1000 + w as u64,
        min: 1.0,
        max: 40.0 + w as f64,
        mean: 5.0,
        p50: 4.0 + w as f64,
        p75: 6.0,
        p95: 11.0 + w as f64,
        p98: 15.0,
        p99: 21.0 + w as f64,
        p999: 35.0,
    }
}

pub fn snapshot() -> JobSnapshot {
    let operators: Vec<OperatorInfo> = PLAN
        .iter()
        .enumerate()
        .map(|(i, (name, kind, chain, inputs))| OperatorInfo {
            index: i,
            uid: format!("op-{i}"),
            id: op_id(i),
            name: name.to_string(),
            kind: kind.to_string(),
            chain: *chain,
            inputs: inputs
                .iter()
                .map(|(from, s)| EdgeInfo {
                    from: *from,
                    ship_strategy: *s,
                })
                .collect(),
            parallelism: WORKERS,
        })
        .collect();
    let mut subtasks = Vec::new();
    for op in 0..PLAN.len() {
        for w in 0..WORKERS {
            let mut metrics: BTreeMap<String, f64> = METRICS
                .iter()
                .map(|m| (m.to_string(), metric(op, w, m)))
                .collect();
            if op == 3 {
                metrics.insert("numLateRecordsDropped".into(), 7.0);
                metrics.insert("user.joins \"matched\"".into(), 42.0);
            }
            let mut histograms = BTreeMap::new();
            if op == 5 {
                histograms.insert("latency".to_string(), latency(w));
            }
            subtasks.push(SubtaskSnapshot {
                operator: op,
                subtask: w,
                process: 0,
                metrics,
                histograms,
            });
        }
    }
    let cp = |id: u64, status, savepoint: bool| CheckpointRecord {
        id,
        status,
        is_savepoint: savepoint,
        trigger_timestamp: NOW - 60_000 + id as i64 * 10_000,
        latest_ack_timestamp: NOW - 60_000 + id as i64 * 10_000 + 200 + id as i64,
        end_to_end_duration: 200 + id,
        state_size: 1_000_000 * id,
        checkpointed_size: 100_000 * id,
        num_subtasks: 12,
        num_acknowledged_subtasks: if status == CheckpointStatus::Completed {
            12
        } else {
            5
        },
        external_path: (status == CheckpointStatus::Completed)
            .then(|| format!("file:///ckpt/chk-{id}")),
        failure_timestamp: (status == CheckpointStatus::Failed).then_some(NOW - 25_000),
        failure_message: (status == CheckpointStatus::Failed)
            .then(|| "upload timed out after 10 s".to_string()),
    };
    let history = vec![
        cp(1, CheckpointStatus::Completed, false),
        cp(2, CheckpointStatus::Completed, false),
        cp(3, CheckpointStatus::Failed, false),
        cp(4, CheckpointStatus::Completed, true),
        cp(5, CheckpointStatus::Completed, false),
        cp(6, CheckpointStatus::InProgress, false),
    ];
    let mut metrics = BTreeMap::new();
    for (k, v) in [
        ("numRestarts", 1.0),
        ("uptime", 120_000.0),
        ("numberOfCompletedCheckpoints", 4.0),
        ("numberOfFailedCheckpoints", 1.0),
        ("numberOfInProgressCheckpoints", 1.0),
        ("totalNumberOfCheckpoints", 6.0),
        ("lastCheckpointDuration", 205.0),
        ("lastCheckpointSize", 500_000.0),
        ("lastCheckpointFullSize", 5_000_000.0),
        ("lastCompletedCheckpointId", 5.0),
    ] {
        metrics.insert(k.to_string(), v);
    }
    let mut timestamps = BTreeMap::new();
    timestamps.insert(JobState::Created, NOW - 120_500);
    timestamps.insert(JobState::Running, NOW - 120_000);
    let mut pm = BTreeMap::new();
    pm.insert("Status.CPU.Load".to_string(), 0.73);
    pm.insert("Status.CPU.Time".to_string(), 88_000.0);
    pm.insert("Status.Memory.RSS".to_string(), 123_456_789.0);
    pm.insert("Status.Threads.Count".to_string(), 9.0);
    JobSnapshot {
        job_id: JOB_ID.to_string(),
        name: "nexmark-q5 \"hot items\"".to_string(),
        state: JobState::Running,
        timestamps,
        start_time: NOW - 120_500,
        end_time: -1,
        now: NOW,
        max_parallelism: 128,
        parallelism: WORKERS,
        operators,
        subtasks,
        workers: (0..WORKERS)
            .map(|w| WorkerSnapshot {
                index: w,
                process: 0,
                metrics: [("busyTimeMsPerSecond".to_string(), 500.0 + w as f64)].into(),
            })
            .collect(),
        processes: vec![ProcessSnapshot {
            index: 0,
            pid: 4242,
            host: "worker-host-1".to_string(),
            metrics: pm,
        }],
        metrics,
        checkpoints: CheckpointsSnapshot {
            interval_ms: 10_000,
            completed: 4,
            failed: 1,
            in_progress: 1,
            restored: 1,
            history,
            latest_restored: Some(RestoredRecord {
                id: 0,
                restore_timestamp: NOW - 120_000,
                is_savepoint: false,
                external_path: "file:///ckpt/chk-0".to_string(),
            }),
        },
        exceptions: vec![ExceptionRecord {
            timestamp: NOW - 90_000,
            message: "worker 1 panicked: <script>alert(2)</script> division by zero".to_string(),
            operator: Some("Window: max price".to_string()),
            restarted: true,
        }],
        savepoints_enabled: true,
        autoscaler: Some(spate_metrics::AutoscalerSnapshot {
            policy: "ds2".into(),
            workers: 2,
            processes: 1,
            min_workers: 1,
            max_workers: 8,
            window_ms: 10_000,
            windows: 7,
            estimate: vec![spate_metrics::OperatorParallelism {
                operator: 1,
                name: "cost".into(),
                target_input_rate: 8400.0,
                true_processing_rate: 8000.0,
                true_output_rate: 8000.0,
                optimal: 2.1,
                parallelism: 3,
            }],
            estimate_workers: 3,
            decisions: vec![spate_metrics::ScalingDecisionRecord {
                timestamp: 1_700_000_000_000,
                window: 5,
                from_workers: 1,
                to_workers: 2,
                from_processes: 1,
                to_processes: 1,
                reason: "operators need 1.6 workers of busy time".into(),
                operators: Vec::new(),
            }],
            num_decisions: 1,
        }),
        shedding: Some(spate_metrics::SheddingSnapshot {
            headroom: 0.95,
            capacity: 2.0,
            stream_load: 3.0,
            queue_load: 0.1,
            total_load: 3.1,
            overloaded: true,
            fractions: std::collections::BTreeMap::from([(0, 0.39)]),
            shed: 1234,
        }),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Cancel,
    Trigger(Operation),
}

pub struct FakeJob {
    pub snap: Mutex<JobSnapshot>,
    pub calls: Mutex<Vec<Call>>,
    ops: Mutex<Vec<(OperationId, OperationStatus)>>,
    pub savepoint_root: PathBuf,
}

impl FakeJob {
    pub fn new(savepoint_root: &Path) -> FakeJob {
        FakeJob {
            snap: Mutex::new(snapshot()),
            calls: Mutex::new(Vec::new()),
            ops: Mutex::new(Vec::new()),
            savepoint_root: savepoint_root.to_path_buf(),
        }
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
}

impl JobView for FakeJob {
    fn snapshot(&self) -> JobSnapshot {
        self.snap.lock().unwrap().clone()
    }

    fn cancel(&self) -> Result<(), ControlError> {
        let mut snap = self.snap.lock().unwrap();
        if snap.state.is_terminal() {
            return Err(ControlError::Conflict("the job has ended".into()));
        }
        self.calls.lock().unwrap().push(Call::Cancel);
        snap.state = JobState::Cancelling;
        Ok(())
    }

    fn trigger(&self, operation: Operation) -> Result<OperationId, ControlError> {
        if self.snap.lock().unwrap().state.is_terminal() {
            return Err(ControlError::Conflict("the job has ended".into()));
        }
        let target = match &operation {
            Operation::Savepoint { target, .. } | Operation::Stop { target, .. } => target.clone(),
        };
        let mut ops = self.ops.lock().unwrap();
        let n = ops.len() + 1;
        // What the engine does: resolve inside the root, refuse anything else.
        let root = self.savepoint_root.to_str().unwrap();
        let location = savepoint_target(root, target.as_deref(), &format!("{n:04}"))?;
        self.calls.lock().unwrap().push(Call::Trigger(operation));
        std::fs::create_dir_all(&location).unwrap();
        std::fs::write(Path::new(&location).join("_metadata"), b"savepoint").unwrap();
        let id = format!("{n:032x}");
        // The first operation stays in progress until polled once, the others complete.
        ops.push((id.clone(), OperationStatus::InProgress));
        ops.push((
            format!("done-{id}"),
            OperationStatus::Completed { location },
        ));
        Ok(id)
    }

    fn operation(&self, id: &str) -> Option<OperationStatus> {
        let mut ops = self.ops.lock().unwrap();
        let i = ops.iter().position(|(k, _)| k == id)?;
        let status = ops[i].1.clone();
        // Polling an in-progress operation completes it (for the next poll).
        if status == OperationStatus::InProgress {
            let done = ops
                .iter()
                .find(|(k, _)| *k == format!("done-{id}"))
                .map(|(_, s)| s.clone())?;
            ops[i].1 = done;
        }
        Some(status)
    }
}
