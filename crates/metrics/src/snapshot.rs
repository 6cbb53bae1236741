//! The picture of a running job that readers see: plan, metrics, checkpoints, exceptions.
//!
//! A [`JobSnapshot`] is plain data (serde), taken about once a second. A multi-process job's
//! processes each take their own and the supervisor merges them ([`JobSnapshot::merge`]): a
//! process contributes its workers' subtasks, its workers and itself.
//!
//! Metric names are Flink's where Flink has the metric (`numRecordsIn`,
//! `busyTimeMsPerSecond`, `currentOutputWatermark`, `lastCheckpointDuration`, …); values are
//! `f64` (watermarks are milliseconds since the Unix epoch, exact in an `f64`; `i64::MIN`,
//! Flink's "no watermark yet", is a power of two and exact too).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::histogram::HistogramSnapshot;

/// A job's state, with Flink's names (`JobStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum JobState {
    Initializing,
    Created,
    Running,
    Failing,
    Failed,
    Cancelling,
    Canceled,
    Finished,
    Restarting,
    Suspended,
    Reconciling,
}

impl JobState {
    /// Flink's name: `RUNNING`, `FINISHED`, …
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Initializing => "INITIALIZING",
            JobState::Created => "CREATED",
            JobState::Running => "RUNNING",
            JobState::Failing => "FAILING",
            JobState::Failed => "FAILED",
            JobState::Cancelling => "CANCELLING",
            JobState::Canceled => "CANCELED",
            JobState::Finished => "FINISHED",
            JobState::Restarting => "RESTARTING",
            JobState::Suspended => "SUSPENDED",
            JobState::Reconciling => "RECONCILING",
        }
    }

    /// Whether the job has ended (finished, failed or canceled).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Finished | JobState::Failed | JobState::Canceled | JobState::Suspended
        )
    }
}

/// How records travel along an edge, with Flink's `ship_strategy` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum ShipStrategy {
    Forward,
    Hash,
    Rebalance,
    Broadcast,
    /// All records to one worker (a single-worker sink, `window_all`).
    Global,
}

/// One input of an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeInfo {
    /// The index of the operator it reads, in [`JobSnapshot::operators`].
    pub from: usize,
    /// How records reach this operator.
    pub ship_strategy: ShipStrategy,
}

/// One operator of the job graph (a node of Spate's plan).
///
/// A *vertex* in Flink's sense (a task: a chain of operators) is the set of operators that
/// share a `chain` value; the REST API and the dashboard group them so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorInfo {
    /// Its index in the plan, and in [`JobSnapshot::operators`].
    pub index: usize,
    /// Its stable state identity (the user's `.uid` or the derived one).
    pub uid: String,
    /// 32 lowercase hex digits derived from the uid: Flink's operator and vertex ids.
    pub id: String,
    /// Its display name.
    pub name: String,
    /// `source`, `operator`, `sink` or `side`.
    pub kind: String,
    /// The index of the first operator of its chain (itself when it heads one).
    pub chain: usize,
    /// Its inputs.
    pub inputs: Vec<EdgeInfo>,
    /// Its number of instances (the job's total worker count today).
    pub parallelism: usize,
}

/// The metrics of one operator instance (operator × worker).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubtaskSnapshot {
    /// The operator's index.
    pub operator: usize,
    /// The worker's global index (Flink's `subtask_index`).
    pub subtask: usize,
    /// The process the worker runs in.
    pub process: usize,
    /// Counters and gauges by Flink name; user metrics by their (dotted) name.
    pub metrics: BTreeMap<String, f64>,
    /// Histograms by name (`latency`, in milliseconds; user histograms).
    pub histograms: BTreeMap<String, HistogramSnapshot>,
}

/// The metrics of one worker thread (all of whose operators share it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerSnapshot {
    /// The worker's global index.
    pub index: usize,
    /// The process it runs in.
    pub process: usize,
    /// `idleTimeMsPerSecond`, `busyTimeMsPerSecond`, `utilization`, `epochsInFlight`, …
    pub metrics: BTreeMap<String, f64>,
}

/// The metrics of one process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSnapshot {
    /// The process index (0 for an embedded job).
    pub index: usize,
    /// The operating system's process id.
    pub pid: u32,
    /// Its host name.
    pub host: String,
    /// `Status.CPU.Load`, `Status.CPU.Time`, `Status.Memory.RSS`, `Status.Memory.PeakRSS`,
    /// `Status.Threads.Count`.
    pub metrics: BTreeMap<String, f64>,
}

/// The state of a checkpoint in the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[allow(missing_docs)]
pub enum CheckpointStatus {
    InProgress,
    Completed,
    Failed,
}

/// One checkpoint or savepoint, with the fields of Flink's checkpoint statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// The checkpoint id.
    pub id: u64,
    /// Where it stands.
    pub status: CheckpointStatus,
    /// A savepoint (triggered by a user), not a periodic checkpoint.
    pub is_savepoint: bool,
    /// When it began, ms since the Unix epoch.
    pub trigger_timestamp: i64,
    /// When the last part was acknowledged (0 while none).
    pub latest_ack_timestamp: i64,
    /// Milliseconds from trigger to completion (or failure).
    pub end_to_end_duration: u64,
    /// The full state size in bytes (Flink's `state_size` / `lastCheckpointFullSize`).
    pub state_size: u64,
    /// The bytes this checkpoint uploaded (Flink's `checkpointed_size`; smaller than
    /// `state_size` when incremental).
    pub checkpointed_size: u64,
    /// Operator instances that take part.
    pub num_subtasks: u64,
    /// Operator instances that have acknowledged.
    pub num_acknowledged_subtasks: u64,
    /// Where it is stored, once complete.
    pub external_path: Option<String>,
    /// When it failed, ms since the Unix epoch.
    pub failure_timestamp: Option<i64>,
    /// Why it failed.
    pub failure_message: Option<String>,
}

/// The checkpoint or savepoint a run started from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestoredRecord {
    /// Its id.
    pub id: u64,
    /// When the restore happened, ms since the Unix epoch.
    pub restore_timestamp: i64,
    /// Whether it was a savepoint.
    pub is_savepoint: bool,
    /// Where it was read from.
    pub external_path: String,
}

/// Checkpoint statistics: the counts and a bounded history (newest last).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointsSnapshot {
    /// Checkpointing is on (with this interval in ms), or off (0).
    pub interval_ms: u64,
    /// Checkpoints completed since the job started (all runs).
    pub completed: u64,
    /// Checkpoints that failed.
    pub failed: u64,
    /// Checkpoints in progress now.
    pub in_progress: u64,
    /// Restores performed (the first start's included).
    pub restored: u64,
    /// The most recent checkpoints, oldest first (at most a few dozen).
    pub history: Vec<CheckpointRecord>,
    /// The latest restore.
    pub latest_restored: Option<RestoredRecord>,
}

/// A failure the job met: one per restart, and the one that ended it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExceptionRecord {
    /// When, ms since the Unix epoch.
    pub timestamp: i64,
    /// The error's one-line message.
    pub message: String,
    /// The operator it came from, when known.
    pub operator: Option<String>,
    /// Whether the job restarted after it.
    pub restarted: bool,
}

/// Everything a reader may know of a job at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSnapshot {
    /// 32 lowercase hex digits, fixed for the job's life (restarts included).
    pub job_id: String,
    /// The name given to `execute`.
    pub name: String,
    /// Where the job stands.
    pub state: JobState,
    /// When each state was first entered, ms since the Unix epoch.
    pub timestamps: BTreeMap<JobState, i64>,
    /// When the job started, ms since the Unix epoch.
    pub start_time: i64,
    /// When it ended, or -1.
    pub end_time: i64,
    /// When this snapshot was taken, ms since the Unix epoch.
    pub now: i64,
    /// The number of key groups.
    pub max_parallelism: u32,
    /// The total number of workers.
    pub parallelism: usize,
    /// The job graph, in plan order.
    pub operators: Vec<OperatorInfo>,
    /// One entry per operator instance that reported.
    pub subtasks: Vec<SubtaskSnapshot>,
    /// One entry per worker that reported.
    pub workers: Vec<WorkerSnapshot>,
    /// One entry per process that reported.
    pub processes: Vec<ProcessSnapshot>,
    /// Job-scope metrics: `numRestarts`, `uptime`, `runningTime`,
    /// `numberOfCompletedCheckpoints`, `numberOfFailedCheckpoints`,
    /// `numberOfInProgressCheckpoints`, `totalNumberOfCheckpoints`, `lastCheckpointDuration`,
    /// `lastCheckpointSize`, `lastCheckpointFullSize`, `lastCompletedCheckpointId`,
    /// `lastCheckpointRestoreTimestamp`, `lastRestoreDuration`, …
    pub metrics: BTreeMap<String, f64>,
    /// Checkpoint counts and history.
    pub checkpoints: CheckpointsSnapshot,
    /// Failures, oldest first (at most a few dozen).
    pub exceptions: Vec<ExceptionRecord>,
    /// Whether savepoints can be taken (the job has a checkpoint directory).
    pub savepoints_enabled: bool,
    /// The autoscaler's state and decisions, when the job runs with one.
    #[serde(default)]
    pub autoscaler: Option<AutoscalerSnapshot>,
    /// Load shedding's load model and drop fraction, when the job sheds under overload.
    #[serde(default)]
    pub shedding: Option<SheddingSnapshot>,
}

/// One operator in an autoscaler's estimate: DS2's rates and optimal parallelism.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorParallelism {
    /// The operator's index in [`JobSnapshot::operators`].
    pub operator: usize,
    /// Its display name.
    pub name: String,
    /// The rate it must keep up with (records/s), from its upstream operators' estimates.
    pub target_input_rate: f64,
    /// Its true processing rate summed over instances (records per second of busy time).
    pub true_processing_rate: f64,
    /// Its true output rate summed over instances.
    pub true_output_rate: f64,
    /// DS2's optimal parallelism before rounding up.
    pub optimal: f64,
    /// DS2's optimal parallelism π.
    pub parallelism: usize,
}

/// A scaling decision of the autoscaler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingDecisionRecord {
    /// When it was taken, ms since the Unix epoch.
    pub timestamp: i64,
    /// The policy window it was taken in (counted from the job's start).
    pub window: u64,
    /// The worker count before.
    pub from_workers: usize,
    /// The worker count it asked for.
    pub to_workers: usize,
    /// The process count before.
    #[serde(default)]
    pub from_processes: usize,
    /// The process count it asked for (the same unless the autoscaler scales processes).
    #[serde(default)]
    pub to_processes: usize,
    /// Why, in one line.
    pub reason: String,
    /// The per-operator estimate it was derived from.
    pub operators: Vec<OperatorParallelism>,
}

/// The autoscaler of a job: its policy, where it stands and what it decided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoscalerSnapshot {
    /// `ds2` or `threshold`.
    pub policy: String,
    /// The workers the job runs on now.
    pub workers: usize,
    /// The processes the job runs on now.
    #[serde(default)]
    pub processes: usize,
    /// The bounds it scales within.
    pub min_workers: usize,
    /// See `min_workers`.
    pub max_workers: usize,
    /// The policy window, ms.
    pub window_ms: u64,
    /// Policy windows measured so far.
    pub windows: u64,
    /// The latest window's estimate, per operator.
    pub estimate: Vec<OperatorParallelism>,
    /// The worker count that estimate calls for.
    pub estimate_workers: usize,
    /// Every decision, oldest first (the newest few dozen).
    pub decisions: Vec<ScalingDecisionRecord>,
    /// Decisions taken since the job started (all of them, unlike `decisions`).
    pub num_decisions: u64,
}

/// Load shedding of a job (Aurora's load model), as its controller last computed it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SheddingSnapshot {
    /// The headroom factor H: the job sheds when its load exceeds H × capacity.
    pub headroom: f64,
    /// The capacity C: seconds of processing the job's workers give per second.
    pub capacity: f64,
    /// Stream load S: Σ L·r over the places where records are shed.
    pub stream_load: f64,
    /// Queue load Q: MELT_RATE · L · q over the records queued before those places.
    pub queue_load: f64,
    /// Total load T = S + Q.
    pub total_load: f64,
    /// Whether T > H · C in the latest control period.
    pub overloaded: bool,
    /// Per place (operator index): the fraction of its records it drops now.
    pub fractions: BTreeMap<usize, f64>,
    /// Records shed since the job started, over all places (per place: the operators'
    /// `numRecordsShed`).
    pub shed: u64,
}

impl JobSnapshot {
    /// Adds what another process of the same job reported: its subtasks, workers and
    /// process. Job-scope fields stay this snapshot's (the supervisor's or process 0's).
    pub fn merge(&mut self, other: JobSnapshot) {
        self.subtasks.extend(other.subtasks);
        self.workers.extend(other.workers);
        self.processes.extend(other.processes);
        self.subtasks.sort_by_key(|s| (s.operator, s.subtask));
        self.workers.sort_by_key(|w| w.index);
        self.processes.sort_by_key(|p| p.index);
    }

    /// The subtasks of operator `index`.
    pub fn subtasks_of(&self, index: usize) -> impl Iterator<Item = &SubtaskSnapshot> {
        self.subtasks.iter().filter(move |s| s.operator == index)
    }

    /// The sum over an operator's instances of metric `name` (0 when none reports it).
    pub fn sum_of(&self, index: usize, name: &str) -> f64 {
        self.subtasks_of(index)
            .filter_map(|s| s.metrics.get(name))
            .sum()
    }
}

/// A job id: 32 lowercase hex digits from a seed (the job's name, the start time, the pid).
pub fn job_id_from(seed: &str) -> String {
    hex128(seed.as_bytes())
}

/// Flink-style 32-hex id of an operator, derived from its uid.
pub fn operator_id_from(uid: &str) -> String {
    hex128(uid.as_bytes())
}

/// 128 bits of two independent FNV-1a-64 passes over `bytes`, as 32 lowercase hex digits.
fn hex128(bytes: &[u8]) -> String {
    fn fnv(bytes: &[u8], basis: u64) -> u64 {
        let mut h = basis;
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }
    let a = fnv(bytes, 0xcbf2_9ce4_8422_2325);
    let b = fnv(bytes, 0x84222325_cbf29ce4 ^ 0x9e37_79b9_7f4a_7c15);
    format!("{a:016x}{b:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_32_hex_and_differ() {
        let a = operator_id_from("map-1");
        let b = operator_id_from("map-2");
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
        assert_eq!(a, operator_id_from("map-1"));
    }

    #[test]
    fn states_serialize_as_flink_names() {
        assert_eq!(
            serde_json::to_string(&JobState::Running).unwrap(),
            "\"RUNNING\""
        );
        assert_eq!(JobState::Canceled.as_str(), "CANCELED");
        assert_eq!(
            serde_json::to_string(&ShipStrategy::Rebalance).unwrap(),
            "\"REBALANCE\""
        );
    }
}
