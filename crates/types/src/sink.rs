//! The sink trait: how connectors take records out of a job.
//!
//! Like sources, a [`Sink`] is a shared description; each worker creates its own
//! [`SinkWriter`] and the engine calls it from that worker's thread only.

use std::time::Instant;

use crate::SpateResult;

/// What a writer knows about where it runs.
#[derive(Debug, Clone)]
pub struct SinkContext {
    /// This worker's index among all workers of the job (`0..workers`).
    pub worker_index: usize,
    /// The number of workers in the job, over all processes.
    pub workers: usize,
}

/// One worker's writer of a sink.
pub trait SinkWriter<T> {
    /// Writes (and drains) a batch of records.
    fn write_batch(&mut self, records: &mut Vec<T>) -> SpateResult<()>;

    /// Called when an epoch is complete at this sink (all its records have been written), and
    /// periodically with the current time, so that time-based policies (rollover, inactivity)
    /// run even when no data arrives.
    fn tick(&mut self, _now: Instant) -> SpateResult<()> {
        Ok(())
    }

    /// Flushes and finishes everything. Called once, when the input ends or the job stops.
    fn close(&mut self) -> SpateResult<()>;

    /// Checkpoint `checkpoint` cuts the stream here: makes everything written so far durable
    /// but not yet visible (two-phase commit's first phase), and returns what a restore needs
    /// to finish it (for example the hidden files to publish). Sinks that cannot hold output
    /// back return nothing: they are at least once.
    fn pre_commit(&mut self, checkpoint: u64) -> SpateResult<Vec<u8>> {
        let _ = checkpoint;
        Ok(Vec::new())
    }

    /// Checkpoint `checkpoint` is complete everywhere: publishes what was prepared up to it.
    fn commit(&mut self, checkpoint: u64) -> SpateResult<()> {
        let _ = checkpoint;
        Ok(())
    }

    /// The job restarts from a checkpoint whose writers (of this sink, on the old workers)
    /// returned `states` from `pre_commit`: publishes what they prepared (idempotently; every
    /// new writer sees every state and picks its share) and drops what they had not.
    fn restore(&mut self, states: &[Vec<u8>]) -> SpateResult<()> {
        let _ = states;
        Ok(())
    }

    /// Whether this writer's output is exactly once with checkpoints (two-phase commit).
    fn exactly_once(&self) -> bool {
        false
    }
}

/// A parallel sink: a description that every worker turns into its own writer.
pub trait Sink<T>: Send + Sync + 'static {
    /// A short name for logs and metrics.
    fn name(&self) -> String;

    /// Creates the writer for the worker described by `ctx`.
    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>>;
}
