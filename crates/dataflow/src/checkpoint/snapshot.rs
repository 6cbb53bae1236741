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

use crate::state::backend::PartFiles;

/// A worker's checkpoint bookkeeping, shared by its operators and its loop (one thread).
#[derive(Default)]
pub(crate) struct WorkerSnapshots {
    /// The stateful operators registered on this worker, by state id (uid).
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

    /// Whether checkpoint `c` may be taken: this worker's sources have crossed its boundary,
    /// and the job has not finished (no checkpoint is taken after the final one).
    pub(crate) fn may_snapshot(&self, c: u64) -> bool {
        let s = self.shared.borrow();
        c <= s.crossed && !s.job_finished
    }

    /// Whether the job's final checkpoint has completed everywhere: no cut comes any more, so
    /// nothing is held back for one. (Workers leave their loops at slightly different epochs,
    /// one maybe a boundary further than another: what it sends past that boundary must not
    /// wait, on the other, for a cut that worker will never cross.)
    pub(crate) fn job_finished(&self) -> bool {
        self.shared.borrow().job_finished
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

/// The file of the snapshot of the operator with state id `name` on `worker`, within a
/// checkpoint.
pub(crate) fn operator_file(name: &str, worker: usize) -> String {
    format!("op/{}/w{worker}.bin", sanitize(name))
}

/// The file of a worker's source positions, within a checkpoint.
pub(crate) fn sources_file(worker: usize) -> String {
    format!("sources/w{worker}.json")
}

/// Keeps the characters storage accepts in a file name (user-set uids are free-form).
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

/// Something held back past a cut, that knows its epoch (a capability, or a bare epoch).
pub(crate) trait AtEpoch {
    fn epoch(&self) -> crate::plan::Epoch;
}

impl AtEpoch for crate::plan::Epoch {
    fn epoch(&self) -> crate::plan::Epoch {
        *self
    }
}

impl AtEpoch for timely::dataflow::operators::Capability<crate::plan::Epoch> {
    fn epoch(&self) -> crate::plan::Epoch {
        *self.time()
    }
}

/// The checkpoint cuts of a one-input stateful operator: what arrives at or after the next cut
/// waits until the input's frontier has passed the cut and the operator has snapshotted.
///
/// ```text
/// batch at epoch e ──holds(e)?──no──▶ process now
///                        └─yes─▶ hold(at, batch)
/// after each activation: while due(frontier) { snapshot; for (at, batch) in taken(bytes) { process } }
/// ```
pub(crate) struct Cuts<H, X> {
    handle: Option<SnapshotHandle>,
    next_c: u64,
    held: Vec<(H, X)>,
}

impl<H: AtEpoch, X> Cuts<H, X> {
    /// The cuts of an operator registered with `handle` (`None`: the job does not checkpoint).
    pub(crate) fn new(handle: Option<SnapshotHandle>) -> Self {
        Cuts {
            handle,
            next_c: 1,
            held: Vec::new(),
        }
    }

    /// Whether a batch at `epoch` must wait for the next cut.
    pub(crate) fn holds(&self, epoch: crate::plan::Epoch) -> bool {
        self.handle.as_ref().is_some_and(|h| !h.job_finished())
            && epoch >= crate::checkpoint::boundary(self.next_c)
    }

    /// Holds a batch until the next cut is taken.
    pub(crate) fn hold(&mut self, at: H, batch: X) {
        self.held.push((at, batch));
    }

    /// Whether the next cut can be taken now: nothing before it can arrive any more, and this
    /// worker's sources have crossed it.
    pub(crate) fn due(
        &self,
        frontier: &timely::progress::frontier::MutableAntichain<crate::plan::Epoch>,
    ) -> bool {
        self.handle.as_ref().is_some_and(|h| {
            !frontier.less_equal(&(crate::checkpoint::boundary(self.next_c) - 1))
                && h.may_snapshot(self.next_c)
        })
    }

    /// Hands in the snapshot of the cut that was due (`None` when it could not be made; the
    /// job is failing) and returns the held batches that now come before the next cut, in
    /// epoch order.
    pub(crate) fn taken(&mut self, bytes: Option<Vec<u8>>) -> Vec<(H, X)> {
        if let (Some(h), Some(bytes)) = (self.handle.as_ref(), bytes) {
            h.submit(self.next_c, bytes);
        }
        self.next_c += 1;
        let next = crate::checkpoint::boundary(self.next_c);
        let (mut now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|(at, _)| at.epoch() < next);
        self.held = later;
        now.sort_by_key(|(at, _)| at.epoch());
        now
    }

    /// Once the job has finished (see [`SnapshotHandle::job_finished`]), every held batch, in
    /// epoch order: no cut will release them.
    pub(crate) fn released(&mut self) -> Vec<(H, X)> {
        if !self.handle.as_ref().is_some_and(|h| h.job_finished()) {
            return Vec::new();
        }
        let mut all = std::mem::take(&mut self.held);
        all.sort_by_key(|(at, _)| at.epoch());
        all
    }

    /// The checkpoint the next cut is (local index, from 1).
    pub(crate) fn next(&self) -> u64 {
        self.next_c
    }

    /// The link to the worker's snapshots, if the job checkpoints.
    pub(crate) fn handle(&self) -> Option<&SnapshotHandle> {
        self.handle.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::boundary;

    #[test]
    fn once_the_job_has_finished_cuts_hold_nothing_and_release_what_they_held() {
        let shared: SharedSnapshots = Rc::default();
        let mut cuts: Cuts<crate::plan::Epoch, &str> =
            Cuts::new(Some(SnapshotHandle::register(&shared, "op")));
        // This worker crossed checkpoint 1 only; records of a worker a boundary further on
        // arrive past checkpoint 2's boundary, and wait for that cut.
        shared.borrow_mut().crossed = 1;
        let past = boundary(2) + 3;
        assert!(cuts.holds(past));
        cuts.hold(past, "later");
        cuts.hold(boundary(1), "first");
        assert!(
            cuts.released().is_empty(),
            "the job still runs: cuts release"
        );
        assert!(cuts.handle().unwrap().may_snapshot(1));
        // The final checkpoint has completed everywhere: no cut comes any more (this worker
        // never crosses checkpoint 2), so nothing may wait for one.
        shared.borrow_mut().job_finished = true;
        assert!(!cuts.holds(past));
        assert!(!cuts.handle().unwrap().may_snapshot(1));
        assert_eq!(
            cuts.released(),
            vec![(boundary(1), "first"), (past, "later")]
        );
        assert!(cuts.released().is_empty());
    }
}
