//! A running job as readers and operators of it see it: snapshots and control.
//!
//! Each `execute` makes one [`Observer`]: it lives for the job's whole life (its restarts
//! included) and implements [`spate_metrics::JobView`]:
//!
//! - **Snapshots.** The live cells of the current run ([`crate::metrics`]) are read on
//!   demand; a sampler thread keeps a raw reading every second so that rates
//!   (`numRecordsInPerSecond`, `busyTimeMsPerSecond`, …) cover the last second or more, not
//!   the time since the previous reader asked. Job-scope counts (restarts, checkpoints,
//!   exceptions, state transitions) live in the observer and survive restarts; operator
//!   counters restart from zero with each run, as Flink's do.
//! - **Control.** `cancel` aborts the workers (sources stop, sinks are dropped without a final
//!   commit, no savepoint) and the job ends `CANCELED`; `execute` then returns `Ok` with
//!   [`crate::JobResult::canceled`] set. A savepoint waits for the next checkpoint to complete
//!   and copies it into the target; stop with a savepoint stops the sources (with `drain`,
//!   after emitting the final watermark so that every window and event-time timer fires),
//!   takes the final checkpoint and copies it; the job ends `FINISHED`. Targets are checked
//!   with [`spate_metrics::savepoint_target`] against the job's savepoint root
//!   ([`JobConfig::savepoint_root`](crate::JobConfig::savepoint_root)).
//!
//! Where Spate's execution model changes a Flink metric's meaning:
//!
//! - All operators of a worker share its thread: `busyTimeMsPerSecond` of an operator
//!   instance is its share of that thread (time inside its closures, per activation, never per
//!   record), and the busy times of a worker's instances add up to at most 1000.
//!   `idleTimeMsPerSecond` is the worker's: time in timely's `step_or_park` not spent in an
//!   operator (parked, spinning for work, timely's own bookkeeping).
//! - Timely never blocks a producer: the only backpressure is flow control at the sources.
//!   `backPressuredTimeMsPerSecond` and `isBackPressured` are the sources' (time during which
//!   the source had more to give but its worker's epochs in flight were at the limit); 0
//!   elsewhere.
//! - `latency` is *epoch latency*: for each epoch a worker closes at its sources, the time
//!   until the node's input frontier passes it (every record of the epoch, from all workers,
//!   has reached the node). One sample per epoch per instance, from timely's progress
//!   tracking: no marker records.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use spate_metrics::snapshot::{job_id_from, operator_id_from};
use spate_metrics::{
    CheckpointRecord, CheckpointStatus, CheckpointsSnapshot, ControlError, EdgeInfo,
    ExceptionRecord, HistogramSnapshot, JobSnapshot, JobState, JobView, Operation, OperationId,
    OperationStatus, OperatorInfo, ProcessSnapshot, RestoredRecord, ShipStrategy, SubtaskSnapshot,
    WorkerSnapshot,
};

use crate::checkpoint::coordinator::CheckpointRuntime;
use crate::config::JobConfig;
use crate::metrics::{LiveMetrics, UserMetric, NO_WATERMARK};
use crate::plan::{NodeKind, Plan};

/// Wall clock, ms since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// How many checkpoints and exceptions the history keeps.
const HISTORY: usize = 50;

/// One reading of an instance's cumulative counters.
#[derive(Debug, Clone, Copy, Default)]
struct Raw {
    records_in: u64,
    records_out: u64,
    busy_ns: u64,
    backpressured_ns: u64,
}

/// One reading of every cell of a run.
#[derive(Debug, Clone)]
struct Reading {
    at: Instant,
    run: u64,
    instances: BTreeMap<(usize, usize), Raw>,
    /// Per worker: (busy ns, idle ns).
    workers: BTreeMap<usize, (u64, u64)>,
    /// Process CPU time, ms.
    cpu_ms: f64,
}

/// What a stop with savepoint asked for.
#[derive(Debug, Clone)]
pub(crate) struct StopRequest {
    pub(crate) target: String,
    pub(crate) drain: bool,
    pub(crate) operation: OperationId,
}

#[derive(Debug)]
struct StateLog {
    state: JobState,
    timestamps: BTreeMap<JobState, i64>,
    end_time: i64,
    exceptions: VecDeque<ExceptionRecord>,
    restarts: u64,
    /// When the current run started running (ms), for `runningTime`.
    running_since: Option<i64>,
    /// Time spent restarting, ms.
    restarting_ms: i64,
}

#[derive(Debug, Default)]
struct CheckpointLog {
    completed: u64,
    failed: u64,
    history: VecDeque<CheckpointRecord>,
    restored: u64,
    latest_restored: Option<RestoredRecord>,
    last_restore_ms: Option<u64>,
}

/// The current run of the job in this process.
struct Run {
    index: u64,
    started: Instant,
    live: Arc<LiveMetrics>,
    checkpoints: Option<Arc<CheckpointRuntime>>,
}

/// A job for its whole life, as the REST API and the dashboard see it (see the module doc).
pub struct Observer {
    job_id: String,
    name: String,
    config: JobConfig,
    operators: Vec<OperatorInfo>,
    /// Per node: its kind, inputs and op, for derived metrics.
    nodes: Vec<(NodeKind, Vec<usize>, String)>,
    /// Per side node: its tag's id.
    side_tags: Vec<Option<String>>,
    start_time: i64,
    process: usize,
    state: Mutex<StateLog>,
    checkpoints: Mutex<CheckpointLog>,
    run: Mutex<Option<Run>>,
    readings: Mutex<VecDeque<Reading>>,
    operations: Mutex<BTreeMap<OperationId, OperationStatus>>,
    next_operation: AtomicU64,
    cancel: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    stop_request: Mutex<Option<StopRequest>>,
    done: AtomicBool,
    me: Weak<Observer>,
    /// The instance part of the latest snapshot a server asked for, and when it was taken.
    cache: Mutex<Option<(Instant, InstancesPart)>>,
    /// The job's total worker count now (an autoscaler changes it between runs).
    parallelism: AtomicUsize,
    /// The autoscaler's and load shedding's reports, and a rescale not yet applied.
    elastic: Mutex<Elastic>,
}

/// What the autoscaler and load shedding report through the observer.
#[derive(Debug, Default)]
pub(crate) struct Elastic {
    /// The autoscaler's state and decisions.
    pub(crate) autoscaler: Option<spate_metrics::AutoscalerSnapshot>,
    /// Load shedding's latest model and fractions.
    pub(crate) shedding: Option<spate_metrics::SheddingSnapshot>,
    /// A decision not yet applied: the layout to run on next.
    pub(crate) rescale_to: Option<Rescale>,
}

/// Where an autoscaler's decision runs the job next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rescale {
    /// The processes (the same as now unless the autoscaler scales processes).
    pub(crate) processes: usize,
    /// The worker threads of each process.
    pub(crate) workers: usize,
}

/// The subtasks, workers, checkpoints in progress and process of a snapshot.
type InstancesPart = (
    Vec<SubtaskSnapshot>,
    Vec<WorkerSnapshot>,
    u64,
    ProcessSnapshot,
);

/// How long a server's snapshot reuses the instance part of the previous one: requests cost
/// at most a few readings of the cells a second, however many arrive.
const CACHED_FOR: Duration = Duration::from_millis(250);

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("job_id", &self.job_id)
            .field("name", &self.name)
            .finish()
    }
}

/// The operators of `plan` as a snapshot shows them.
pub(crate) fn operators_of(plan: &Plan, parallelism: usize) -> Vec<OperatorInfo> {
    let uids = plan
        .state_ids()
        .unwrap_or_else(|_| (0..plan.nodes.len()).map(|i| format!("node-{i}")).collect());
    let heads = plan.chain_heads();
    plan.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| OperatorInfo {
            index: i,
            uid: uids[i].clone(),
            id: operator_id_from(&uids[i]),
            name: n.name.clone(),
            kind: match n.kind {
                NodeKind::Source => "source",
                NodeKind::Operator => "operator",
                NodeKind::Sink => "sink",
                NodeKind::Side => "side",
            }
            .to_owned(),
            chain: heads[i],
            inputs: n
                .inputs
                .iter()
                .map(|&from| EdgeInfo {
                    from,
                    ship_strategy: ship_strategy(n.edge),
                })
                .collect(),
            parallelism,
        })
        .collect()
}

fn ship_strategy(edge: &str) -> ShipStrategy {
    match edge {
        "hash" => ShipStrategy::Hash,
        "rebalance" => ShipStrategy::Rebalance,
        "broadcast" => ShipStrategy::Broadcast,
        "single" | "global" => ShipStrategy::Global,
        _ => ShipStrategy::Forward,
    }
}

impl Observer {
    /// A job that starts now; its sampler thread runs until [`Observer::finish`].
    pub(crate) fn start(
        name: &str,
        config: &JobConfig,
        plan: &Plan,
        stop: Arc<AtomicBool>,
    ) -> Arc<Self> {
        let start_time = now_ms();
        // The processes of a multi-process job share the supervisor's id.
        let job_id = std::env::var(crate::report::ENV_JOB_ID)
            .ok()
            .filter(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
            .unwrap_or_else(|| job_id_from(&format!("{name}-{start_time}-{}", std::process::id())));
        let observer = Arc::new_cyclic(|me| Observer {
            me: me.clone(),
            job_id,
            name: name.to_owned(),
            config: config.clone(),
            operators: operators_of(plan, config.total_workers()),
            nodes: plan
                .nodes
                .iter()
                .map(|n| (n.kind, n.inputs.clone(), n.op.clone()))
                .collect(),
            side_tags: plan
                .nodes
                .iter()
                .map(|n| n.side.as_ref().map(|p| p.id().to_string()))
                .collect(),
            start_time,
            process: config.process_index.unwrap_or(0),
            state: Mutex::new(StateLog {
                state: JobState::Initializing,
                timestamps: BTreeMap::from([(JobState::Initializing, start_time)]),
                end_time: -1,
                exceptions: VecDeque::new(),
                restarts: 0,
                running_since: None,
                restarting_ms: 0,
            }),
            checkpoints: Mutex::new(CheckpointLog::default()),
            run: Mutex::new(None),
            readings: Mutex::new(VecDeque::new()),
            operations: Mutex::new(BTreeMap::new()),
            next_operation: AtomicU64::new(0),
            cancel: Arc::new(AtomicBool::new(false)),
            stop,
            stop_request: Mutex::new(None),
            done: AtomicBool::new(false),
            cache: Mutex::new(None),
            parallelism: AtomicUsize::new(config.total_workers()),
            elastic: Mutex::new(Elastic::default()),
        });
        let weak: Weak<Observer> = Arc::downgrade(&observer);
        let _ = std::thread::Builder::new()
            .name("spate-sampler".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_secs(1));
                let Some(o) = weak.upgrade() else { return };
                if o.done.load(Ordering::Relaxed) {
                    return;
                }
                o.sample();
            });
        observer
    }

    /// The job's id.
    pub fn job_id(&self) -> &str {
        &self.job_id
    }

    /// The flag that cancels the job (its workers abort).
    pub(crate) fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Whether the job was canceled.
    pub(crate) fn canceled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// The autoscaler's and load shedding's reports.
    pub(crate) fn elastic(&self) -> std::sync::MutexGuard<'_, Elastic> {
        self.elastic.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An autoscaler decided to run on `to`: the current run stops with a final checkpoint
    /// (as a stop does, without draining), and the job restores it on the new count.
    /// Ignored while the job is stopping or canceled.
    pub(crate) fn request_rescale(&self, to: Rescale) -> bool {
        if self.canceled() || self.lock_stop().is_some() || self.stop.load(Ordering::Relaxed) {
            return false;
        }
        self.elastic().rescale_to = Some(to);
        self.stop.store(true, Ordering::SeqCst);
        true
    }

    /// Whether a rescale waits to be applied.
    pub(crate) fn rescale_pending(&self) -> bool {
        self.elastic().rescale_to.is_some()
    }

    /// The rescale asked for, if any (taken: the caller applies it). Clears the stop that
    /// ended the run for it.
    pub(crate) fn take_rescale(&self) -> Option<Rescale> {
        let to = self.elastic().rescale_to.take();
        if to.is_some() {
            self.stop.store(false, Ordering::SeqCst);
        }
        to
    }

    /// The job restarts on `total` workers to apply a rescale.
    pub(crate) fn rescaling(&self, to: Rescale) {
        let total = to.processes * to.workers;
        self.parallelism.store(total, Ordering::Relaxed);
        if let Some(a) = self.elastic().autoscaler.as_mut() {
            a.workers = total;
            a.processes = to.processes;
        }
        self.set_state(JobState::Restarting);
    }

    /// Whether a stop with savepoint asked to drain (emit the final watermark first).
    pub(crate) fn drain_requested(&self) -> bool {
        self.lock_stop().as_ref().is_some_and(|r| r.drain)
    }

    fn lock_stop(&self) -> std::sync::MutexGuard<'_, Option<StopRequest>> {
        self.stop_request.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The stop with savepoint asked for, if any (taken: it is answered once).
    pub(crate) fn take_stop_request(&self) -> Option<StopRequest> {
        self.lock_stop().take()
    }

    fn set_state(&self, state: JobState) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = now_ms();
        if s.state == JobState::Restarting && state != JobState::Restarting {
            if let Some(&t) = s.timestamps.get(&JobState::Restarting) {
                s.restarting_ms += now - t;
            }
        }
        s.state = state;
        s.timestamps.insert(state, now);
        match state {
            JobState::Running => s.running_since = Some(now),
            _ if state.is_terminal() => s.end_time = now,
            _ => {}
        }
    }

    /// A run of the job begins with these cells and this checkpoint runtime.
    pub(crate) fn begin_run(
        &self,
        live: Arc<LiveMetrics>,
        checkpoints: Option<Arc<CheckpointRuntime>>,
        restore_started: Instant,
    ) {
        if let Some((id, location, savepoint)) =
            checkpoints.as_ref().and_then(|rt| rt.restored_info())
        {
            let mut c = self.lock_checkpoints();
            c.restored += 1;
            c.last_restore_ms = Some(restore_started.elapsed().as_millis() as u64);
            c.latest_restored = Some(RestoredRecord {
                id,
                restore_timestamp: now_ms(),
                is_savepoint: savepoint,
                external_path: location,
            });
        }
        let mut run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        let index = run.as_ref().map_or(0, |r| r.index + 1);
        *run = Some(Run {
            index,
            started: Instant::now(),
            live,
            checkpoints,
        });
        drop(run);
        self.readings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.set_state(JobState::Running);
    }

    /// The run failed with `error`; `restarting` when the job runs again.
    pub(crate) fn run_failed(&self, error: &spate_types::SpateError, restarting: bool) {
        let operator = match error {
            spate_types::SpateError::Function { operator, .. } => Some(operator.clone()),
            _ => None,
        };
        {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.exceptions.push_back(ExceptionRecord {
                timestamp: now_ms(),
                message: error.to_string(),
                operator,
                restarted: restarting,
            });
            while s.exceptions.len() > HISTORY {
                s.exceptions.pop_front();
            }
            if restarting {
                s.restarts += 1;
            }
        }
        self.set_state(if restarting {
            JobState::Restarting
        } else {
            JobState::Failed
        });
    }

    /// The job has ended well (finished, or canceled).
    pub(crate) fn finish(&self) {
        self.set_state(if self.canceled() {
            JobState::Canceled
        } else {
            JobState::Finished
        });
        self.end();
    }

    /// No more sampling, and no operation left in progress.
    pub(crate) fn end(&self) {
        self.done.store(true, Ordering::Relaxed);
        let mut ops = self.operations.lock().unwrap_or_else(|p| p.into_inner());
        for status in ops.values_mut() {
            if *status == OperationStatus::InProgress {
                *status = OperationStatus::Failed {
                    cause: "the job ended before the operation completed".into(),
                };
            }
        }
    }

    fn lock_checkpoints(&self) -> std::sync::MutexGuard<'_, CheckpointLog> {
        self.checkpoints.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A checkpoint completed (called by the coordinator).
    pub(crate) fn checkpoint_completed(
        &self,
        id: u64,
        done: &spate_checkpoint::CompletedCheckpoint,
        subtasks: u64,
    ) {
        let now = now_ms();
        let mut c = self.lock_checkpoints();
        c.completed += 1;
        c.history.push_back(CheckpointRecord {
            id,
            status: CheckpointStatus::Completed,
            is_savepoint: false,
            trigger_timestamp: now - done.duration.as_millis() as i64,
            latest_ack_timestamp: now,
            end_to_end_duration: done.duration.as_millis() as u64,
            state_size: done.total_size_bytes,
            checkpointed_size: done.uploaded_bytes,
            num_subtasks: subtasks,
            num_acknowledged_subtasks: subtasks,
            external_path: Some(done.location.clone()),
            failure_timestamp: None,
            failure_message: None,
        });
        while c.history.len() > HISTORY {
            c.history.pop_front();
        }
    }

    /// A checkpoint failed (called by the coordinator).
    pub(crate) fn checkpoint_failed(&self, id: u64, message: &str) {
        let now = now_ms();
        let mut c = self.lock_checkpoints();
        c.failed += 1;
        c.history.push_back(CheckpointRecord {
            id,
            status: CheckpointStatus::Failed,
            is_savepoint: false,
            trigger_timestamp: now,
            latest_ack_timestamp: 0,
            end_to_end_duration: 0,
            state_size: 0,
            checkpointed_size: 0,
            num_subtasks: 0,
            num_acknowledged_subtasks: 0,
            external_path: None,
            failure_timestamp: Some(now),
            failure_message: Some(message.to_owned()),
        });
        while c.history.len() > HISTORY {
            c.history.pop_front();
        }
    }

    /// A savepoint was written (recorded in the history).
    fn savepoint_written(&self, id: u64, location: &str, started: i64) {
        let now = now_ms();
        let mut c = self.lock_checkpoints();
        c.history.push_back(CheckpointRecord {
            id,
            status: CheckpointStatus::Completed,
            is_savepoint: true,
            trigger_timestamp: started,
            latest_ack_timestamp: now,
            end_to_end_duration: (now - started).max(0) as u64,
            state_size: 0,
            checkpointed_size: 0,
            num_subtasks: 0,
            num_acknowledged_subtasks: 0,
            external_path: Some(location.to_owned()),
            failure_timestamp: None,
            failure_message: None,
        });
        while c.history.len() > HISTORY {
            c.history.pop_front();
        }
    }

    /// Writes the final checkpoint of a stop with savepoint to its target (the process of
    /// worker 0, after every worker has finished) and answers the operation.
    pub(crate) fn complete_stop(&self, request: &StopRequest, rt: &CheckpointRuntime) {
        let started = now_ms();
        let status = match rt.export_savepoint(&request.target) {
            Ok(id) => {
                self.savepoint_written(id, &request.target, started);
                OperationStatus::Completed {
                    location: request.target.clone(),
                }
            }
            Err(e) => OperationStatus::Failed {
                cause: e.to_string(),
            },
        };
        self.set_operation(&request.operation, status);
    }

    fn set_operation(&self, id: &str, status: OperationStatus) {
        self.operations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_owned(), status);
    }

    pub(crate) fn new_operation(&self) -> OperationId {
        let n = self.next_operation.fetch_add(1, Ordering::Relaxed);
        let id = job_id_from(&format!("{}-op-{n}-{}", self.job_id, now_ms()));
        self.set_operation(&id, OperationStatus::InProgress);
        id
    }

    /// The directory savepoints go under, if the job can take them.
    fn savepoint_root(&self) -> Result<String, ControlError> {
        self.config.savepoint_root().ok_or_else(|| {
            ControlError::Conflict(
                "the job has no checkpoint directory, so it cannot take savepoints: run it with \
                 a checkpoint directory and interval"
                    .into(),
            )
        })
    }

    fn running_checkpoints(&self) -> Result<Arc<CheckpointRuntime>, ControlError> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner()).state;
        if state.is_terminal() || self.canceled() {
            return Err(ControlError::Conflict(format!(
                "the job is {}",
                state.as_str()
            )));
        }
        let run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        run.as_ref()
            .and_then(|r| r.checkpoints.clone())
            .ok_or_else(|| {
                ControlError::Conflict(
                    "the job is not running with checkpoints in this process yet".into(),
                )
            })
    }

    fn unique(&self) -> String {
        format!(
            "{}-{}",
            &self.job_id[..8],
            self.next_operation.load(Ordering::Relaxed)
        )
    }

    /// Takes a raw reading of every cell (the sampler, once a second).
    fn sample(&self) {
        if let Some(r) = self.reading() {
            let mut readings = self.readings.lock().unwrap_or_else(|p| p.into_inner());
            readings.push_back(r);
            while readings.len() > 8 {
                readings.pop_front();
            }
        }
    }

    fn reading(&self) -> Option<Reading> {
        let run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        let run = run.as_ref()?;
        let instances = run
            .live
            .instances()
            .iter()
            .map(|c| {
                (
                    (c.node, c.worker.index),
                    Raw {
                        records_in: c.records_in.load(Ordering::Relaxed),
                        records_out: c.records_out.load(Ordering::Relaxed),
                        busy_ns: c.busy_ns.load(Ordering::Relaxed),
                        backpressured_ns: c.backpressured_ns.load(Ordering::Relaxed),
                    },
                )
            })
            .collect();
        let workers = run
            .live
            .workers()
            .iter()
            .map(|w| {
                (
                    w.index,
                    (
                        w.busy_ns.load(Ordering::Relaxed),
                        w.idle_ns.load(Ordering::Relaxed),
                    ),
                )
            })
            .collect();
        Some(Reading {
            at: Instant::now(),
            run: run.index,
            instances,
            workers,
            cpu_ms: process_cpu_ms().unwrap_or(0.0),
        })
    }

    /// The snapshot of this process: the job-scope fields, and this process's subtasks,
    /// workers and itself, read now.
    pub fn job_snapshot(&self) -> JobSnapshot {
        self.snapshot_with(None)
    }

    /// [`Observer::job_snapshot`], reusing the instance part of a snapshot younger than
    /// `max_age` (job-scope fields are always current).
    fn snapshot_with(&self, max_age: Option<Duration>) -> JobSnapshot {
        let now = now_ms();
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut metrics: BTreeMap<String, f64> = BTreeMap::new();
        metrics.insert("numRestarts".into(), state.restarts as f64);
        metrics.insert("fullRestarts".into(), state.restarts as f64);
        let end = if state.end_time >= 0 {
            state.end_time
        } else {
            now
        };
        metrics.insert("uptime".into(), (end - self.start_time) as f64);
        let running = match (state.state, state.running_since) {
            (JobState::Running, Some(t)) => now - t,
            _ => 0,
        };
        metrics.insert("runningTime".into(), running as f64);
        metrics.insert("restartingTime".into(), state.restarting_ms as f64);
        let snapshot_state = state.state;
        let timestamps = state.timestamps.clone();
        let exceptions: Vec<ExceptionRecord> = state.exceptions.iter().cloned().collect();
        let end_time = state.end_time;
        drop(state);

        let (subtasks, workers, in_progress, process) = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            match (max_age, cache.as_ref()) {
                (Some(age), Some((at, part))) if at.elapsed() < age => part.clone(),
                _ => {
                    let part = self.instances_snapshot(now);
                    *cache = Some((Instant::now(), part.clone()));
                    part
                }
            }
        };
        let c = self.lock_checkpoints();
        metrics.insert("numberOfCompletedCheckpoints".into(), c.completed as f64);
        metrics.insert("numberOfFailedCheckpoints".into(), c.failed as f64);
        metrics.insert("numberOfInProgressCheckpoints".into(), in_progress as f64);
        metrics.insert(
            "totalNumberOfCheckpoints".into(),
            (c.completed + c.failed + in_progress) as f64,
        );
        if let Some(last) = c
            .history
            .iter()
            .rev()
            .find(|r| r.status == CheckpointStatus::Completed && !r.is_savepoint)
        {
            metrics.insert(
                "lastCheckpointDuration".into(),
                last.end_to_end_duration as f64,
            );
            metrics.insert("lastCheckpointSize".into(), last.checkpointed_size as f64);
            metrics.insert("lastCheckpointFullSize".into(), last.state_size as f64);
            metrics.insert("lastCompletedCheckpointId".into(), last.id as f64);
            metrics.insert(
                "lastCheckpointCompletedTimestamp".into(),
                last.latest_ack_timestamp as f64,
            );
        }
        if let Some(r) = &c.latest_restored {
            metrics.insert(
                "lastCheckpointRestoreTimestamp".into(),
                r.restore_timestamp as f64,
            );
        }
        if let Some(ms) = c.last_restore_ms {
            metrics.insert("lastRestoreDuration".into(), ms as f64);
        }
        let checkpoints = CheckpointsSnapshot {
            interval_ms: if self.config.checkpoint_dir.is_some() {
                self.config
                    .checkpoint_interval
                    .map_or(0, |d| d.as_millis() as u64)
            } else {
                0
            },
            completed: c.completed,
            failed: c.failed,
            in_progress,
            restored: c.restored,
            history: c.history.iter().cloned().collect(),
            latest_restored: c.latest_restored.clone(),
        };
        drop(c);
        let (autoscaler, shedding) = {
            let e = self.elastic();
            (e.autoscaler.clone(), e.shedding.clone())
        };
        if let Some(a) = &autoscaler {
            metrics.insert("numScalingDecisions".into(), a.num_decisions as f64);
            metrics.insert("autoscalerWorkers".into(), a.workers as f64);
            metrics.insert(
                "autoscalerEstimatedWorkers".into(),
                a.estimate_workers as f64,
            );
        }
        if let Some(s) = &shedding {
            metrics.insert("numRecordsShed".into(), s.shed as f64);
            metrics.insert(
                "shedFraction".into(),
                s.fractions.values().copied().fold(0.0, f64::max),
            );
            metrics.insert("sheddingTotalLoad".into(), s.total_load);
            metrics.insert("sheddingCapacity".into(), s.capacity);
        }
        JobSnapshot {
            job_id: self.job_id.clone(),
            name: self.name.clone(),
            state: snapshot_state,
            timestamps,
            start_time: self.start_time,
            end_time,
            now,
            max_parallelism: self.config.max_parallelism,
            parallelism: self.parallelism.load(Ordering::Relaxed),
            operators: {
                let p = self.parallelism.load(Ordering::Relaxed);
                let mut ops = self.operators.clone();
                for op in &mut ops {
                    op.parallelism = p;
                }
                ops
            },
            subtasks,
            workers,
            processes: vec![process],
            metrics,
            checkpoints,
            exceptions,
            savepoints_enabled: self.config.savepoint_root().is_some(),
            autoscaler,
            shedding,
        }
    }

    /// The subtasks and workers of the current run, checkpoints in progress and this
    /// process.
    fn instances_snapshot(
        &self,
        now: i64,
    ) -> (
        Vec<SubtaskSnapshot>,
        Vec<WorkerSnapshot>,
        u64,
        ProcessSnapshot,
    ) {
        let current = self.reading();
        let (live, started, in_progress) = {
            let run = self.run.lock().unwrap_or_else(|p| p.into_inner());
            match run.as_ref() {
                Some(r) => (
                    Some(Arc::clone(&r.live)),
                    r.started,
                    r.checkpoints.as_ref().map_or(0, |rt| rt.in_progress()),
                ),
                None => (None, Instant::now(), 0),
            }
        };
        // The base of the rates: the newest reading at least a second old, else the oldest,
        // else the start of the run (all zeros).
        let base: Option<Reading> = current.as_ref().and_then(|cur| {
            let readings = self.readings.lock().unwrap_or_else(|p| p.into_inner());
            let of_run = readings.iter().filter(|r| r.run == cur.run);
            of_run
                .clone()
                .rfind(|r| cur.at.duration_since(r.at) >= Duration::from_millis(900))
                .or_else(|| of_run.clone().next())
                .cloned()
        });
        let base_at = base.as_ref().map_or(started, |b| b.at);
        let secs = current
            .as_ref()
            .map_or(0.0, |c| c.at.duration_since(base_at).as_secs_f64());
        let rate = |now: u64, then: u64| {
            if secs > 0.0 {
                now.saturating_sub(then) as f64 / secs
            } else {
                0.0
            }
        };
        let mut subtasks = Vec::new();
        let mut workers = Vec::new();
        if let (Some(live), Some(cur)) = (live, current.as_ref()) {
            let cells = live.instances();
            let by_key: BTreeMap<(usize, usize), &Arc<crate::metrics::Cells>> = cells
                .iter()
                .map(|c| ((c.node, c.worker.index), c))
                .collect();
            let worker_ids: Vec<usize> = cur.workers.keys().copied().collect();
            let zero = Raw::default();
            let wall = now;
            // Per (node, worker): records out, and the output watermark, for derived values.
            let mut outs: BTreeMap<(usize, usize), (u64, i64)> = BTreeMap::new();
            for (node, (kind, inputs, op)) in self.nodes.iter().enumerate() {
                for &w in &worker_ids {
                    let mut m: BTreeMap<String, f64> = BTreeMap::new();
                    let mut histograms = BTreeMap::new();
                    let (worker_busy, worker_idle) = cur.workers[&w];
                    let (base_wbusy, base_widle) = base
                        .as_ref()
                        .and_then(|b| b.workers.get(&w).copied())
                        .unwrap_or((0, 0));
                    let _ = worker_busy;
                    let _ = base_wbusy;
                    let idle_rate = rate(worker_idle, base_widle) / 1e6;
                    let input_wms: Vec<i64> = inputs
                        .iter()
                        .filter_map(|i| outs.get(&(*i, w)).map(|o| o.1))
                        .collect();
                    let derived_in_wm = input_wms.iter().copied().min();
                    let (records_in, records_out, out_wm);
                    match by_key.get(&(node, w)) {
                        Some(c) => {
                            let raw = cur.instances.get(&(node, w)).copied().unwrap_or(zero);
                            let then = base
                                .as_ref()
                                .and_then(|b| b.instances.get(&(node, w)).copied())
                                .unwrap_or(zero);
                            let derived_in: u64 = inputs
                                .iter()
                                .filter_map(|i| outs.get(&(*i, w)).map(|o| o.0))
                                .sum();
                            records_in = if *kind == NodeKind::Source {
                                0
                            } else if raw.records_in == 0 && op == "timestamps" {
                                derived_in
                            } else {
                                raw.records_in
                            };
                            records_out = if *kind == NodeKind::Sink {
                                0
                            } else {
                                raw.records_out
                            };
                            let busy_ms_s = rate(raw.busy_ns, then.busy_ns) / 1e6;
                            let bp_ms_s = rate(raw.backpressured_ns, then.backpressured_ns) / 1e6;
                            m.insert(
                                "numRecordsInPerSecond".into(),
                                rate(raw.records_in, then.records_in),
                            );
                            m.insert(
                                "numRecordsOutPerSecond".into(),
                                rate(raw.records_out, then.records_out),
                            );
                            m.insert("busyTimeMsPerSecond".into(), busy_ms_s.min(1000.0));
                            m.insert("backPressuredTimeMsPerSecond".into(), bp_ms_s.min(1000.0));
                            m.insert("accumulatedBusyTimeMs".into(), raw.busy_ns as f64 / 1e6);
                            m.insert(
                                "accumulatedBackPressuredTimeMs".into(),
                                raw.backpressured_ns as f64 / 1e6,
                            );
                            m.insert(
                                "isBackPressured".into(),
                                if c.backpressured.load(Ordering::Relaxed) {
                                    1.0
                                } else {
                                    0.0
                                },
                            );
                            let busy_s = raw.busy_ns.saturating_sub(then.busy_ns) as f64 / 1e9;
                            if busy_s > 0.0 {
                                m.insert(
                                    "trueProcessingRate".into(),
                                    raw.records_in.saturating_sub(then.records_in) as f64 / busy_s,
                                );
                                m.insert(
                                    "trueOutputRate".into(),
                                    raw.records_out.saturating_sub(then.records_out) as f64
                                        / busy_s,
                                );
                            }
                            m.insert(
                                "numLateRecordsDropped".into(),
                                c.late_dropped.load(Ordering::Relaxed) as f64,
                            );
                            let shed = c.shed.load(Ordering::Relaxed);
                            if shed > 0
                                || self.config.overload
                                    != crate::config::OverloadPolicy::Backpressure
                            {
                                m.insert("numRecordsShed".into(), shed as f64);
                            }
                            if *kind == NodeKind::Source {
                                let dead = c.dead_lettered.load(Ordering::Relaxed) as f64;
                                m.insert(
                                    "numRecordsDropped".into(),
                                    c.dropped.load(Ordering::Relaxed) as f64,
                                );
                                m.insert("numRecordsDeadLettered".into(), dead);
                                m.insert("numRecordsInErrors".into(), dead);
                                let pending = c.pending.load(Ordering::Relaxed);
                                if pending != u64::MAX {
                                    // Readers report progress in their own unit: file
                                    // readers in bytes, generators and collections in records.
                                    let files = ["jsonl", "csv", "file", "text"]
                                        .iter()
                                        .any(|f| op.contains(f));
                                    let name = if files {
                                        "pendingBytes"
                                    } else {
                                        "pendingRecords"
                                    };
                                    m.insert(name.into(), pending as f64);
                                }
                            }
                            let own_in = c.input_wm.load(Ordering::Relaxed);
                            let own_out = c.output_wm.load(Ordering::Relaxed);
                            let in_wm = if own_in != NO_WATERMARK {
                                Some(own_in)
                            } else {
                                derived_in_wm
                            };
                            out_wm = if own_out != NO_WATERMARK {
                                own_out
                            } else {
                                // Operators that do not read watermarks pass them on.
                                derived_in_wm.unwrap_or(NO_WATERMARK)
                            };
                            if let Some(wm) = in_wm.filter(|_| *kind != NodeKind::Source) {
                                m.insert("currentInputWatermark".into(), wm as f64);
                            }
                            let h = c.latency.lock().unwrap_or_else(|p| p.into_inner());
                            if h.count() > 0 {
                                histograms.insert("latency".to_owned(), to_ms(h.snapshot()));
                            }
                            drop(h);
                            user_metrics(c, &mut m, &mut histograms);
                        }
                        None => {
                            // No operator of its own (a union, a broadcast, a side output):
                            // what its inputs sent on this worker passes through, or what
                            // the operator it reads sent on its side output.
                            let derived: u64 = match (kind, &self.side_tags[node]) {
                                (NodeKind::Side, Some(tag)) => inputs
                                    .first()
                                    .and_then(|i| by_key.get(&(*i, w)))
                                    .and_then(|c| {
                                        c.side_out
                                            .lock()
                                            .unwrap_or_else(|p| p.into_inner())
                                            .get(tag)
                                            .map(|n| n.load(Ordering::Relaxed))
                                    })
                                    .unwrap_or(0),
                                // Every worker gets what every worker of this process sent.
                                _ if op == "broadcast" => inputs
                                    .iter()
                                    .flat_map(|i| {
                                        worker_ids
                                            .iter()
                                            .filter_map(|v| outs.get(&(*i, *v)).map(|o| o.0))
                                            .collect::<Vec<_>>()
                                    })
                                    .sum(),
                                _ => inputs
                                    .iter()
                                    .filter_map(|i| outs.get(&(*i, w)).map(|o| o.0))
                                    .sum(),
                            };
                            records_in = derived;
                            records_out = derived;
                            out_wm = derived_in_wm.unwrap_or(NO_WATERMARK);
                            if let Some(wm) = derived_in_wm {
                                m.insert("currentInputWatermark".into(), wm as f64);
                            }
                        }
                    }
                    m.insert("numRecordsIn".into(), records_in as f64);
                    m.insert("numRecordsOut".into(), records_out as f64);
                    m.insert("idleTimeMsPerSecond".into(), idle_rate.min(1000.0));
                    if *kind != NodeKind::Sink {
                        m.insert("currentOutputWatermark".into(), out_wm as f64);
                        if out_wm != NO_WATERMARK && out_wm != i64::MAX {
                            m.insert("watermarkLag".into(), (wall - out_wm) as f64);
                        }
                    }
                    outs.insert((node, w), (records_out, out_wm));
                    subtasks.push(SubtaskSnapshot {
                        operator: node,
                        subtask: w,
                        process: self.process,
                        metrics: m,
                        histograms,
                    });
                }
            }
            for w in worker_ids {
                let (busy, idle) = cur.workers[&w];
                let (b0, i0) = base
                    .as_ref()
                    .and_then(|b| b.workers.get(&w).copied())
                    .unwrap_or((0, 0));
                let busy_rate = (rate(busy, b0) / 1e6).min(1000.0);
                let idle_rate = (rate(idle, i0) / 1e6).min(1000.0);
                let mut m = BTreeMap::new();
                m.insert("busyTimeMsPerSecond".to_owned(), busy_rate);
                m.insert("idleTimeMsPerSecond".to_owned(), idle_rate);
                m.insert("utilization".to_owned(), busy_rate / 1000.0);
                m.insert("accumulatedBusyTimeMs".to_owned(), busy as f64 / 1e6);
                m.insert("accumulatedIdleTimeMs".to_owned(), idle as f64 / 1e6);
                if let Some(wc) = live.workers().iter().find(|x| x.index == w) {
                    m.insert(
                        "epochsInFlight".to_owned(),
                        wc.epochs_in_flight.load(Ordering::Relaxed) as f64,
                    );
                }
                workers.push(WorkerSnapshot {
                    index: w,
                    process: self.process,
                    metrics: m,
                });
            }
        }
        let mut pm = process_metrics();
        if let (Some(cur), Some(b)) = (current.as_ref(), base.as_ref()) {
            let wall_ms = cur.at.duration_since(b.at).as_secs_f64() * 1000.0;
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            if wall_ms > 0.0 {
                pm.insert(
                    "Status.CPU.Load".into(),
                    ((cur.cpu_ms - b.cpu_ms) / wall_ms / cores).clamp(0.0, 1.0),
                );
            }
        }
        let process = ProcessSnapshot {
            index: self.process,
            pid: std::process::id(),
            host: host_name(),
            metrics: pm,
        };
        (subtasks, workers, in_progress, process)
    }
}

fn user_metrics(
    c: &crate::metrics::Cells,
    m: &mut BTreeMap<String, f64>,
    histograms: &mut BTreeMap<String, HistogramSnapshot>,
) {
    let user = c.user.lock().unwrap_or_else(|p| p.into_inner());
    for (name, metric) in user.iter() {
        match metric {
            UserMetric::Counter(v) => {
                m.insert(name.clone(), v.load(Ordering::Relaxed) as f64);
            }
            UserMetric::Gauge(v) => {
                m.insert(name.clone(), f64::from_bits(v.load(Ordering::Relaxed)));
            }
            UserMetric::GaugeFn(f) => {
                let f = Arc::clone(f);
                if let Ok(v) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f())) {
                    m.insert(name.clone(), v);
                }
            }
            UserMetric::Histogram(h) => {
                let h = h.lock().unwrap_or_else(|p| p.into_inner());
                histograms.insert(name.clone(), h.snapshot());
            }
        }
    }
}

/// A latency histogram recorded in µs, reported in ms.
fn to_ms(h: HistogramSnapshot) -> HistogramSnapshot {
    let ms = |v: f64| v / 1000.0;
    HistogramSnapshot {
        count: h.count,
        min: ms(h.min),
        max: ms(h.max),
        mean: ms(h.mean),
        p50: ms(h.p50),
        p75: ms(h.p75),
        p95: ms(h.p95),
        p98: ms(h.p98),
        p99: ms(h.p99),
        p999: ms(h.p999),
    }
}

/// The process's CPU time (user + system), ms, from `/proc/self/stat`.
fn process_cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // Clock ticks: 100 per second on Linux's every common configuration.
    Some((utime + stime) * 10.0)
}

/// RSS, peak RSS, threads and CPU time of this process.
fn process_metrics() -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status.lines() {
            let mut parts = line.split_whitespace();
            let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Ok(v) = value.parse::<f64>() else {
                continue;
            };
            match key {
                "VmRSS:" => {
                    m.insert("Status.Memory.RSS".into(), v * 1024.0);
                }
                "VmHWM:" => {
                    m.insert("Status.Memory.PeakRSS".into(), v * 1024.0);
                }
                "Threads:" => {
                    m.insert("Status.Threads.Count".into(), v);
                }
                _ => {}
            }
        }
    }
    if let Some(cpu) = process_cpu_ms() {
        m.insert("Status.CPU.Time".into(), cpu);
    }
    m
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

impl JobView for Observer {
    fn snapshot(&self) -> JobSnapshot {
        self.snapshot_with(Some(CACHED_FOR))
    }

    fn cancel(&self) -> Result<(), ControlError> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner()).state;
        if state.is_terminal() {
            return Err(ControlError::Conflict(format!(
                "the job is {} already",
                state.as_str()
            )));
        }
        self.cancel.store(true, Ordering::SeqCst);
        self.set_state(JobState::Cancelling);
        Ok(())
    }

    fn trigger(&self, operation: Operation) -> Result<OperationId, ControlError> {
        match operation {
            Operation::Savepoint { target, cancel_job } => {
                let location = self.check_target(target.as_deref())?;
                self.running_checkpoints()?;
                let id = self.new_operation();
                self.savepoint_as(&id, location, cancel_job);
                Ok(id)
            }
            Operation::Stop { target, drain } => {
                let root = self.savepoint_root()?;
                let location =
                    spate_metrics::savepoint_target(&root, target.as_deref(), &self.unique())?;
                self.running_checkpoints()?;
                let mut request = self.lock_stop();
                if request.is_some() || self.stop.load(Ordering::Relaxed) {
                    return Err(ControlError::Conflict("the job is stopping already".into()));
                }
                let id = self.new_operation();
                *request = Some(StopRequest {
                    target: location,
                    drain,
                    operation: id.clone(),
                });
                drop(request);
                self.stop.store(true, Ordering::SeqCst);
                Ok(id)
            }
        }
    }

    fn operation(&self, id: &str) -> Option<OperationStatus> {
        self.operations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }
}

impl Observer {
    /// The savepoint location for a requested target, checked against the root.
    pub(crate) fn check_target(&self, target: Option<&str>) -> Result<String, ControlError> {
        let root = self.savepoint_root()?;
        spate_metrics::savepoint_target(&root, target, &self.unique())
    }

    /// An error unless the job is running (or starting).
    pub(crate) fn check_running(&self) -> Result<(), ControlError> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner()).state;
        if state.is_terminal() || self.canceled() || state == JobState::Cancelling {
            return Err(ControlError::Conflict(format!(
                "the job is {}",
                state.as_str()
            )));
        }
        Ok(())
    }

    /// The flag that stops the job's sources cleanly.
    pub(crate) fn stop_flag(&self) -> &Arc<AtomicBool> {
        &self.stop
    }

    /// Every operation and where it stands.
    pub(crate) fn operations(&self) -> BTreeMap<OperationId, OperationStatus> {
        self.operations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The supervisor runs the job's processes.
    pub(crate) fn supervising(&self) {
        self.set_state(JobState::Running);
    }

    /// Stops with a savepoint that the supervisor asked for (and checked); `leader`: this
    /// process writes it and answers the operation.
    pub(crate) fn stop_as(&self, request: StopRequest, leader: bool) {
        if leader {
            self.set_operation(&request.operation, OperationStatus::InProgress);
        }
        *self.lock_stop() = Some(request);
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Takes a savepoint into `location` (checked) as operation `id`: the next checkpoint to
    /// complete, copied there.
    pub(crate) fn savepoint_as(&self, id: &str, location: String, cancel_job: bool) {
        let Ok(rt) = self.running_checkpoints() else {
            self.set_operation(
                id,
                OperationStatus::Failed {
                    cause: "the job is not running with checkpoints".into(),
                },
            );
            return;
        };
        self.set_operation(id, OperationStatus::InProgress);
        let me = self.self_arc();
        let op = id.to_owned();
        let before = rt.completed_count();
        let started = now_ms();
        let spawned = std::thread::Builder::new()
            .name("spate-savepoint".into())
            .spawn(move || {
                let Some(me) = me.upgrade() else { return };
                // The next checkpoint to complete after the request is the savepoint.
                while rt.completed_count() <= before {
                    if me.done.load(Ordering::Relaxed) || me.canceled() {
                        me.set_operation(
                            &op,
                            OperationStatus::Failed {
                                cause: "the job ended before a checkpoint completed".into(),
                            },
                        );
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let status = match rt.export_savepoint(&location) {
                    Ok(cid) => {
                        me.savepoint_written(cid, &location, started);
                        OperationStatus::Completed {
                            location: location.clone(),
                        }
                    }
                    Err(e) => OperationStatus::Failed {
                        cause: e.to_string(),
                    },
                };
                let ok = matches!(status, OperationStatus::Completed { .. });
                me.set_operation(&op, status);
                if ok && cancel_job {
                    let _ = me.cancel();
                }
            });
        if let Err(e) = spawned {
            self.set_operation(
                id,
                OperationStatus::Failed {
                    cause: format!("cannot start the savepoint: {e}"),
                },
            );
        }
    }
}

impl Observer {
    /// A weak handle on this observer, for threads that must not keep it alive.
    fn self_arc(&self) -> Weak<Observer> {
        self.me.clone()
    }
}
