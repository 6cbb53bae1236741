//! The source trait: how connectors feed records into a job.
//!
//! A [`Source`] is a description shared by every worker. On each worker the engine calls
//! [`Source::create_reader`] once, with a [`SourceContext`] that says which worker this is;
//! the source decides which of its partitions (files, byte ranges, generator partitions,
//! later Kafka partitions) that worker reads. The engine then polls the reader from the
//! worker's loop, never from another thread, and never blocks on it: a reader with nothing
//! to give right now returns [`SourceStatus::Idle`].
//!
//! Flow control lives in the engine: it stops polling while too many epochs are in flight,
//! so a reader never needs its own buffering beyond one poll.

use std::sync::Arc;

use crate::{DeadLetter, Sink, SpateResult};

/// What a reader knows about where it runs.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// This worker's index among all workers of the job (`0..workers`).
    pub worker_index: usize,
    /// The number of workers in the job, over all processes.
    pub workers: usize,
}

impl SourceContext {
    /// The partitions of `count` that this worker reads: `p` with `p % workers == worker_index`.
    pub fn my_partitions(&self, count: usize) -> impl Iterator<Item = usize> + '_ {
        (self.worker_index..count).step_by(self.workers.max(1))
    }
}

/// Where a reader puts what it read in one poll.
pub struct SourceOutput<'a, T> {
    records: &'a mut Vec<T>,
    dead_letters: &'a mut Vec<DeadLetter>,
    dropped: &'a mut u64,
    splits: Option<&'a mut Vec<SplitMark>>,
}

/// Where the records of one poll came from, for per-split watermarks.
///
/// A reader that reads several splits (files, byte ranges, generator or Kafka partitions)
/// says when it switches with [`SourceOutput::split`] and when one ends with
/// [`SourceOutput::split_finished`]; the engine then keeps one watermark generator per split
/// and emits their minimum, as Flink's split-aware sources do. A reader that never calls them
/// has one split, `0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitMark {
    /// The records from index `at` of this poll's output on come from `split`.
    Start {
        /// The split's id, unique within the reader.
        split: u32,
        /// The index of its first record in this poll's output.
        at: usize,
    },
    /// `split` will give records later, from event times nobody knows yet: until it starts,
    /// it holds the watermark minimum where it is (and never counts as idle).
    Pending {
        /// The split's id.
        split: u32,
        /// The number of records in this poll's output when it was announced.
        at: usize,
    },
    /// `split` will give no more records.
    Finished {
        /// The split's id.
        split: u32,
        /// The number of records in this poll's output when it ended.
        at: usize,
    },
}

impl<'a, T> SourceOutput<'a, T> {
    /// Wraps the engine's buffers.
    pub fn new(
        records: &'a mut Vec<T>,
        dead_letters: &'a mut Vec<DeadLetter>,
        dropped: &'a mut u64,
    ) -> Self {
        SourceOutput {
            records,
            dead_letters,
            dropped,
            splits: None,
        }
    }

    /// Records split switches in `marks` (the engine does this when it needs them).
    pub fn with_splits(mut self, marks: &'a mut Vec<SplitMark>) -> Self {
        self.splits = Some(marks);
        self
    }

    /// The records pushed from now on come from `split`.
    #[inline]
    pub fn split(&mut self, split: u32) {
        if let Some(marks) = self.splits.as_mut() {
            let at = self.records.len();
            marks.push(SplitMark::Start { split, at });
        }
    }

    /// `split` is this reader's and will be read later, after the splits it reads now.
    ///
    /// A reader that reads its splits one after another announces the later ones that may
    /// hold earlier event times (for a file source: the first split of each further file) when
    /// it starts, so the watermark waits for them: otherwise it would pass their records
    /// before they are read, and they would all be late. Announcing a split that has started,
    /// or announcing one twice, changes nothing.
    pub fn split_pending(&mut self, split: u32) {
        if let Some(marks) = self.splits.as_mut() {
            let at = self.records.len();
            marks.push(SplitMark::Pending { split, at });
        }
    }

    /// `split` has ended: it leaves the watermark minimum for good.
    pub fn split_finished(&mut self, split: u32) {
        if let Some(marks) = self.splits.as_mut() {
            let at = self.records.len();
            marks.push(SplitMark::Finished { split, at });
        }
    }

    /// Emits one good record.
    #[inline]
    pub fn push(&mut self, record: T) {
        self.records.push(record);
    }

    /// Routes one malformed record to the dead-letter output.
    pub fn dead_letter(&mut self, letter: DeadLetter) {
        self.dead_letters.push(letter);
    }

    /// Counts one malformed record dropped under the `drop` policy.
    pub fn dropped(&mut self) {
        *self.dropped += 1;
    }

    /// The number of good records emitted in this poll so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no good record was emitted in this poll so far.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// The state of a reader after a poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceStatus {
    /// It may have more records right away: poll again soon.
    More,
    /// It has nothing right now (a socket or stdin waiting for data): poll again later.
    Idle,
    /// It will never produce again. The engine stops polling and closes its input.
    Finished,
}

/// One worker's reader of a source.
///
/// Readers live on their worker thread and need not be `Send`.
pub trait SourceReader<T> {
    /// Emits up to about `max_records` records into `out`.
    ///
    /// A malformed record under the `fail` policy is an `Err` ([`crate::SpateError::BadRecord`]),
    /// which fails the job. Under `drop` and `dead-letter` the reader counts or routes it and goes on.
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, T>,
        max_records: usize,
    ) -> SpateResult<SourceStatus>;

    /// Progress of a bounded reader, as `(done, total)` in a unit of its choice (bytes, events).
    /// `None` for unbounded readers.
    fn progress(&self) -> Option<(u64, u64)> {
        None
    }

    /// The records waiting for this reader now: available to read but not yet read (a
    /// broker's lag; a rate-limited generator's records already due). The engine reports it
    /// as `pendingRecords`, which the autoscaler's catch-up term and load shedding's queues
    /// read. `None` (the default): `total − done` of [`progress`](Self::progress), which is
    /// right for a reader whose whole rest is there to read (a file).
    fn backlog(&self) -> Option<u64> {
        None
    }

    /// Where each of this reader's splits stands, for a checkpoint: after every record it has
    /// emitted so far. `None` when the source cannot replay (a socket, stdin): after a
    /// restore it goes on from wherever it is, so it is at most once, not exactly once.
    ///
    /// Positions are per split, not per worker, so a job can be restored on a different
    /// number of workers: every new reader gets the positions of all splits and keeps its own.
    fn snapshot(&self) -> Option<Vec<SplitPosition>> {
        None
    }

    /// A checkpoint that holds `positions` (what [`snapshot`](Self::snapshot) gave for it) has
    /// completed everywhere. A source that reports progress to the system it reads does it
    /// here (the Kafka source commits the offsets to its consumer group, as Flink's does on
    /// checkpoint completion); the default does nothing. Called on the reader's thread, and
    /// only with the latest of several checkpoints that completed together.
    fn checkpoint_complete(&mut self, positions: &[SplitPosition]) -> crate::SpateResult<()> {
        let _ = positions;
        Ok(())
    }

    /// Moves this reader's splits to `positions` (those of a checkpoint; splits it does not
    /// own are ignored, splits not listed start from the beginning).
    fn restore(&mut self, positions: &[SplitPosition]) -> crate::SpateResult<()> {
        let _ = positions;
        Ok(())
    }
}

/// The position of one split in a checkpoint: an id the source chooses (stable across
/// worker counts) and an opaque position.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SplitPosition {
    /// The split's stable id (file index, byte-range index, partition number).
    pub split: u64,
    /// Where the split stands (an offset, an event number, ...).
    pub position: serde_json::Value,
}

/// A parallel source: a description that every worker turns into its own reader.
pub trait Source<T>: Send + Sync + 'static {
    /// A short name for logs and metrics, such as `jsonl:/data/bids.jsonl`.
    fn name(&self) -> String;

    /// Whether the source ends by itself (a file, a collection, a generator with a count).
    fn is_bounded(&self) -> bool;

    /// Creates the reader for the worker described by `ctx`.
    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<T>>>;

    /// Where this source's dead letters go, when its bad-record policy is `dead-letter=PATH`.
    ///
    /// The engine routes every worker's dead letters to this sink on global worker 0, so one
    /// file holds them all. A source that emits dead letters must return a sink here.
    fn dead_letter_sink(&self) -> Option<Arc<dyn Sink<DeadLetter>>> {
        None
    }
}
