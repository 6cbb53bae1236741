//! What one worker gathers for each checkpoint, and what a restore hands back.
//!
//! Checkpoint `c` (a local index; its storage id is `base + c`) is the cut before epoch
//! `checkpoint::boundary(c)`. On every worker:
//!
//! * each source's positions are taken when the worker's epoch crosses the boundary;
//! * each stateful operator (keyed process functions, windows, joins, sinks) holds back the
//!   records at or after the boundary until its inputs' frontiers pass it, snapshots its state
//!   (which then reflects exactly the records before the cut), and submits the bytes here;
//! * once every registered operator has submitted and the sources' positions are in, the worker
//!   loop uploads the parts (asynchronously) and reports them to global worker 0, which writes
//!   the manifest when every process has reported, then announces the completion to all.
//!
//! Sinks publish what they prepared for `c` only after that announcement (two-phase commit).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use spate_types::SplitPosition;

use crate::state::PartFiles;

/// A worker's checkpoint bookkeeping, shared by its operators and its loop (one thread).
#[derive(Default)]
pub(crate) struct WorkerSnapshots {
    /// The stateful operators registered on this worker, by name.
    pub(crate) operators: Vec<String>,
    /// Operator snapshots per checkpoint: `(operator, bytes, files written or referred to)`.
    pub(crate) parts: BTreeMap<u64, Vec<(String, Vec<u8>, PartFiles)>>,
    /// Source positions per checkpoint: `(source, positions)`.
    pub(crate) sources: BTreeMap<u64, Vec<(String, Vec<SplitPosition>)>>,
    /// The last boundary this worker's sources crossed: operators snapshot no checkpoint
    /// beyond it (so that a closed input, whose frontier passes everything, stops there).
    pub(crate) crossed: u64,
    /// The latest checkpoint complete everywhere: sinks publish up to it.
    pub(crate) completed: u64,
    /// Every worker's sources have finished and a checkpoint after the last has completed.
    pub(crate) job_finished: bool,
}

pub(crate) type SharedSnapshots = Rc<RefCell<WorkerSnapshots>>;

/// A stateful operator's link to its worker's snapshots.
#[derive(Clone)]
pub(crate) struct SnapshotHandle {
    shared: SharedSnapshots,
    name: String,
}

impl SnapshotHandle {
    pub(crate) fn register(shared: &SharedSnapshots, name: &str) -> Self {
        shared.borrow_mut().operators.push(name.to_owned());
        SnapshotHandle {
            shared: Rc::clone(shared),
            name: name.to_owned(),
        }
    }

    /// Whether checkpoint `c` may be taken: this worker's sources have crossed its boundary.
    pub(crate) fn may_snapshot(&self, c: u64) -> bool {
        c <= self.shared.borrow().crossed
    }

    /// Hands in this operator's snapshot for checkpoint `c`.
    pub(crate) fn submit(&self, c: u64, bytes: Vec<u8>) {
        self.submit_with(c, bytes, PartFiles::default());
    }

    /// Hands in this operator's snapshot for checkpoint `c`, with the files of an incremental
    /// snapshot: new ones to upload, and those of earlier checkpoints it refers to.
    pub(crate) fn submit_with(&self, c: u64, bytes: Vec<u8>, files: PartFiles) {
        self.shared.borrow_mut().parts.entry(c).or_default().push((
            self.name.clone(),
            bytes,
            files,
        ));
    }

    /// The latest checkpoint complete everywhere.
    pub(crate) fn completed(&self) -> u64 {
        self.shared.borrow().completed
    }
}

/// The file of operator `name`'s snapshot on `worker`, within a checkpoint.
pub(crate) fn operator_file(name: &str, worker: usize) -> String {
    format!("op/{}/w{worker}.bin", sanitize(name))
}

/// The file of a worker's source positions, within a checkpoint.
pub(crate) fn sources_file(worker: usize) -> String {
    format!("sources/w{worker}.json")
}

/// Keeps the characters storage accepts in a file name (operator names are free-form).
pub(crate) fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._=+-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}
