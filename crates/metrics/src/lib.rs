//! Spate's metrics: what a running job measures, and the snapshots that readers see.
//!
//! The engine (`spate-dataflow`) writes live metric cells on its worker threads; a sampler
//! turns them once a second into a [`JobSnapshot`](snapshot::JobSnapshot) with Flink's metric
//! names and rates. The REST API, the dashboard and the Prometheus endpoint (`spate-web`) read
//! only snapshots, through the [`JobView`](view::JobView) trait, so this crate names neither
//! timely nor an HTTP stack.
//!
//! - [`snapshot`]: the serializable picture of a job: plan, per-operator-instance metrics,
//!   workers, processes, checkpoints, exceptions.
//! - [`histogram`]: a fixed log-bucket histogram for latencies.
//! - [`registry`]: the running jobs of this machine, for the CLI to find.
//! - [`view`]: what a server may ask of a running job: a snapshot and the control actions
//!   (cancel, stop with a savepoint, trigger a savepoint).

pub mod histogram;
pub mod registry;
pub mod snapshot;
pub mod view;

pub use histogram::{Histogram, HistogramSnapshot};
pub use snapshot::{
    AutoscalerSnapshot, CheckpointRecord, CheckpointStatus, CheckpointsSnapshot, EdgeInfo,
    ExceptionRecord, JobSnapshot, JobState, OperatorInfo, OperatorParallelism, ProcessSnapshot,
    RestoredRecord, ScalingDecisionRecord, SheddingSnapshot, ShipStrategy, SubtaskSnapshot,
    WorkerSnapshot,
};
pub use view::{savepoint_target, ControlError, JobView, Operation, OperationId, OperationStatus};
