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
}

/// A parallel sink: a description that every worker turns into its own writer.
pub trait Sink<T>: Send + Sync + 'static {
    /// A short name for logs and metrics.
    fn name(&self) -> String;

    /// Creates the writer for the worker described by `ctx`.
    fn create_writer(&self, ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<T>>>;
}
