//! Checkpoint coordination: from the parts every worker gathers to a manifest, and back.
//!
//! See [`crate::checkpoint::snapshot`] for what a worker gathers. Here:
//!
//! * [`CheckpointRuntime`] is shared by the workers of one process: the storage, the writer of
//!   each checkpoint in flight (one per process; every local worker puts its files through it),
//!   what was restored, and the failure policy.
//! * [`WorkerCheckpointer`] runs in each worker's loop: it uploads the worker's parts once they
//!   are all in, and when every local worker has, one of them reports the process's durable
//!   files to global worker 0 over a dataflow channel. Worker 0 writes the manifest (listing the
//!   other processes' files) once every process has reported, then announces the completion to
//!   every worker over a broadcast channel; sinks then publish.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use spate_checkpoint::{
    Checkpoint, CheckpointConfig, CheckpointInfo, CheckpointStorage, CheckpointWriter, FileEntry,
    PendingCompletion, TolerableFailures,
};
use spate_types::{SpateError, SpateResult, SplitPosition};
use timely::dataflow::InputHandleVec;

use crate::checkpoint::snapshot::{operator_file, sanitize, sources_file, SharedSnapshots};
use crate::config::JobConfig;
use crate::metrics::Metrics;
use crate::plan::Epoch;

/// What a process reports to worker 0 about checkpoint `c`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) enum Report {
    /// The process's files of checkpoint `c` are durable.
    Durable { c: u64, files: Vec<FileEntry> },
    /// The process could not write checkpoint `c`.
    Failed { c: u64, reason: String },
    /// A worker's sources have all finished; `c` is the first checkpoint after that.
    SourcesDone { c: u64 },
    /// A worker has finished and closed its inputs.
    Finished,
}

/// Announced (instead of a checkpoint number) once every worker's sources have finished and a
/// checkpoint taken after the last of them has completed: workers may close their inputs.
pub(crate) const JOB_FINISHED: u64 = u64::MAX;

/// The checkpoint or savepoint that `config.restore` names, if any. A location that does not
/// exist or holds no usable snapshot is an error of the configuration (never retried into a
/// fresh start); `latest` with no complete checkpoint starts empty, and says so.
pub(crate) fn resolve_restore(
    storage: &CheckpointStorage,
    config: &JobConfig,
) -> SpateResult<Option<Checkpoint>> {
    let restored = match config.restore.as_deref() {
        None => return Ok(None),
        Some("latest") => {
            let latest = storage.latest_complete()?;
            if latest.is_none() {
                tracing::warn!(
                    dir = config.checkpoint_dir.as_deref().unwrap_or_default(),
                    "no complete checkpoint to restore: the job starts empty"
                );
            }
            latest
        }
        Some(path) => {
            let cannot = |e: SpateError| {
                SpateError::Config(format!("cannot restore from {path}: {}", one_line(&e)))
            };
            let location = storage.parse_location(path).map_err(cannot)?;
            Some(storage.restore_from(&location).map_err(cannot)?)
        }
    };
    if let Some(r) = &restored {
        let m = r.manifest();
        if m.max_parallelism != config.max_parallelism {
            return Err(SpateError::Config(format!(
                "checkpoint {} was taken with max parallelism {}, this job has {}: keys \
                 would land in other key groups; keep the max parallelism to restore it",
                r.location(),
                m.max_parallelism,
                config.max_parallelism
            )));
        }
    }
    Ok(restored)
}

fn one_line(e: &SpateError) -> String {
    e.to_string().replace('\n', " ")
}

/// Every old worker's map of source positions, by source state id.
fn source_positions(r: &Checkpoint) -> SpateResult<Vec<BTreeMap<String, Vec<SplitPosition>>>> {
    let mut maps = Vec::new();
    for w in 0..r.manifest().workers as usize {
        let file = sources_file(w);
        if r.manifest().file(&file).is_none() {
            continue;
        }
        let bytes = r.read(&file)?;
        let map = serde_json::from_slice(&bytes).map_err(|e| {
            SpateError::Job(format!("checkpoint {}: bad {file}: {e}", r.location()))
        })?;
        maps.push(map);
    }
    Ok(maps)
}

/// The state ids that checkpoint `r` holds state of (operators, sinks, sources), as storage
/// keeps them ([`sanitize`]d).
pub(crate) fn snapshot_ids(r: &Checkpoint) -> SpateResult<BTreeSet<String>> {
    let mut ids: BTreeSet<String> = r
        .manifest()
        .files
        .iter()
        .filter_map(|f| f.name.strip_prefix("op/")?.split_once('/'))
        .map(|(id, _)| id.to_owned())
        .collect();
    for map in source_positions(r)? {
        ids.extend(map.keys().map(|id| sanitize(id)));
    }
    Ok(ids)
}

/// Refuses to restore state that no operator of this job claims (Flink's rule), unless the
/// job allows non-restored state; `claims` are the job's state ids ([`Plan::state_ids`]).
///
/// [`Plan::state_ids`]: crate::plan::Plan::state_ids
pub(crate) fn check_claims(
    r: &Checkpoint,
    config: &JobConfig,
    claims: &[String],
) -> SpateResult<()> {
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    for id in claims {
        claimed.insert(sanitize(id));
        claimed.insert(sanitize(&format!("{id}.dead-letters")));
        claimed.insert(sanitize(&format!("{id}.shed")));
    }
    let unclaimed: Vec<String> = snapshot_ids(r)?
        .into_iter()
        .filter(|id| !claimed.contains(id))
        .collect();
    if unclaimed.is_empty() {
        return Ok(());
    }
    let list = unclaimed
        .iter()
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if config.allow_non_restored_state {
        tracing::warn!(
            checkpoint = %r.location(),
            uids = %list,
            "dropping state that no operator of this job claims (non-restored state allowed)"
        );
        return Ok(());
    }
    Err(SpateError::Config(format!(
        "checkpoint {} holds state that no operator of this job claims (uids {list}); give \
         those operators their uids back, or allow non-restored state \
         (--allow-non-restored-state) to drop it",
        r.location()
    )))
}

/// The checkpoint state one process's workers share.
pub(crate) struct CheckpointRuntime {
    storage: CheckpointStorage,
    /// Storage id of local checkpoint 0: local checkpoint `c` is stored as `base + c`.
    base: u64,
    restored: Option<Checkpoint>,
    info: CheckpointInfo,
    local_workers: usize,
    /// Whether global worker 0, which writes manifests, lives in this process.
    hosts_coordinator: bool,
    writers: Mutex<HashMap<u64, CheckpointWriter>>,
    submitted: Mutex<HashMap<u64, usize>>,
    policy: Mutex<TolerableFailures>,
    completed: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    last_duration_ms: Arc<AtomicU64>,
    last_size: Arc<AtomicU64>,
    /// The highest local checkpoint begun.
    begun: AtomicU64,
    /// Bytes uploaded by the last checkpoint (less than its size when incremental).
    last_uploaded: Arc<AtomicU64>,
    /// Bytes uploaded by all checkpoints of this run.
    uploaded_total: Arc<AtomicU64>,
    /// The job's observer, told of each checkpoint's end.
    observer: Option<Arc<crate::view::Observer>>,
}

impl CheckpointRuntime {
    /// Opens checkpoint storage if the job checkpoints, and finds what to restore. `opened` is
    /// set once the storage is open: a later failure (reading what to restore) is one a
    /// restart may cure, while one before it is a setting to fix.
    pub(crate) fn open(
        config: &JobConfig,
        claims: &[String],
        metrics: &Metrics,
        opened: &mut bool,
        id_floor: u64,
        observer: Option<Arc<crate::view::Observer>>,
    ) -> SpateResult<Option<Arc<Self>>> {
        let Some(dir) = config.checkpoint_dir.as_deref() else {
            return Ok(None);
        };
        if config.checkpoint_interval.is_none() {
            return Err(SpateError::Config(
                "a checkpoint directory needs a checkpoint interval".into(),
            ));
        }
        let storage_config = CheckpointConfig {
            retained: config.checkpoints_retained.max(1),
            ..CheckpointConfig::default()
        };
        let storage = CheckpointStorage::open(dir, storage_config)?;
        *opened = true;
        let restored = resolve_restore(&storage, config)?;
        if let Some(r) = &restored {
            check_claims(r, config, claims)?;
            let m = r.manifest();
            tracing::info!(
                checkpoint = r.id(),
                workers = m.workers,
                location = %r.location(),
                "restoring"
            );
        }
        // Ids only grow, also over restarts in this process: a failed checkpoint's id is never
        // used again while its files may still be being deleted.
        let base = storage.next_id()?.saturating_sub(1).max(id_floor);
        let info = CheckpointInfo {
            max_parallelism: config.max_parallelism,
            workers: config.total_workers() as u32,
        };
        Ok(Some(Arc::new(CheckpointRuntime {
            storage,
            base,
            restored,
            info,
            local_workers: config.workers,
            hosts_coordinator: config.process_index.unwrap_or(0) == 0,
            writers: Mutex::new(HashMap::new()),
            submitted: Mutex::new(HashMap::new()),
            policy: Mutex::new(TolerableFailures::new(config.tolerable_checkpoint_failures)),
            completed: metrics.counter("checkpoints.numberOfCompletedCheckpoints"),
            failed: metrics.counter("checkpoints.numberOfFailedCheckpoints"),
            last_duration_ms: metrics.counter("checkpoints.lastCheckpointDuration"),
            last_size: metrics.counter("checkpoints.lastCheckpointSize"),
            begun: AtomicU64::new(0),
            last_uploaded: metrics.counter("checkpoints.lastCheckpointUploadedBytes"),
            uploaded_total: metrics.counter("checkpoints.totalUploadedBytes"),
            observer,
        })))
    }

    /// The highest storage id begun so far: a restart's checkpoints take ids above it.
    pub(crate) fn highest_id(&self) -> u64 {
        self.base + self.begun.load(Ordering::Relaxed)
    }

    /// Checkpoints completed by this run.
    pub(crate) fn completed_count(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    /// Checkpoints begun and neither complete nor failed yet.
    pub(crate) fn in_progress(&self) -> u64 {
        self.writers.lock().unwrap_or_else(|p| p.into_inner()).len() as u64
    }

    /// The checkpoint this run restored: its id, location and whether it is a savepoint.
    pub(crate) fn restored_info(&self) -> Option<(u64, String, bool)> {
        self.restored.as_ref().map(|r| {
            let savepoint = r.manifest().kind != spate_checkpoint::CheckpointKind::Checkpoint;
            (r.id(), r.location(), savepoint)
        })
    }

    /// Copies the latest complete checkpoint into `target` as a savepoint; returns its id.
    pub(crate) fn export_savepoint(&self, target: &str) -> SpateResult<u64> {
        let latest = self.storage.latest_complete()?.ok_or_else(|| {
            SpateError::Job(
                "no checkpoint completed, so there is no state to write as a savepoint".into(),
            )
        })?;
        let location = self.storage.parse_location(target)?;
        let done = self.storage.export_savepoint(&latest, &location)?;
        tracing::info!(savepoint = %done.location, checkpoint = latest.id(), "wrote a savepoint");
        Ok(latest.id())
    }

    fn writer(&self, c: u64) -> SpateResult<CheckpointWriter> {
        let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = writers.get(&c) {
            return Ok(w.clone());
        }
        let w = self.storage.begin(self.base + c, self.info)?;
        self.begun.fetch_max(c, Ordering::Relaxed);
        writers.insert(c, w.clone());
        Ok(w)
    }

    fn forget(&self, c: u64) {
        let mut writers = self.writers.lock().unwrap_or_else(|p| p.into_inner());
        writers.remove(&c);
    }

    /// The snapshots of the operator with state id `id` in the restored checkpoint, one per
    /// old worker; none (logged when `log`) when the checkpoint has no state of that id.
    pub(crate) fn restored_parts(&self, id: &str, log: bool) -> SpateResult<Vec<Bytes>> {
        let Some(r) = &self.restored else {
            return Ok(Vec::new());
        };
        let mut parts = Vec::new();
        for w in 0..r.manifest().workers as usize {
            let file = operator_file(id, w);
            if r.manifest().file(&file).is_some() {
                parts.push(r.read(&file)?);
            }
        }
        if parts.is_empty() && log {
            tracing::info!(
                uid = id,
                checkpoint = %r.location(),
                "the checkpoint has no state of this operator: it starts empty"
            );
        }
        Ok(parts)
    }

    /// The state file `name` of the restored checkpoint (a file of an incremental chain).
    pub(crate) fn restored_file(&self, name: &str) -> SpateResult<Bytes> {
        match &self.restored {
            Some(r) => r.read(name),
            None => Err(SpateError::Internal(format!(
                "no checkpoint is restored, so there is no file {name}"
            ))),
        }
    }

    /// The positions of the source with state id `id` in the restored checkpoint, over all
    /// old workers; `None` (logged when `log`) when the checkpoint has none of that id, and the
    /// source starts from the beginning.
    pub(crate) fn restored_positions(
        &self,
        id: &str,
        log: bool,
    ) -> SpateResult<Option<Vec<SplitPosition>>> {
        let Some(r) = &self.restored else {
            return Ok(None);
        };
        let mut all = Vec::new();
        let mut found = false;
        for map in source_positions(r)? {
            if let Some(p) = map.get(id) {
                found = true;
                all.extend(p.iter().cloned());
            }
        }
        if !found {
            if log {
                tracing::info!(
                    uid = id,
                    checkpoint = %r.location(),
                    "the checkpoint has no positions of this source: it starts from the beginning"
                );
            }
            return Ok(None);
        }
        Ok(Some(all))
    }

    /// Records a failed checkpoint; an error once failures exceed the tolerance.
    fn failure(&self, c: u64, error: SpateError) -> SpateResult<()> {
        self.failed.fetch_add(1, Ordering::Relaxed);
        if let Some(o) = &self.observer {
            o.checkpoint_failed(self.base + c, &error.to_string());
        }
        tracing::warn!(checkpoint = self.base + c, %error, "checkpoint failed");
        if let Some(w) = self
            .writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&c)
        {
            w.abort();
        }
        self.policy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record_failure(&error)
    }
}

/// One worker's side of checkpointing, driven from its loop.
pub(crate) struct WorkerCheckpointer {
    rt: Arc<CheckpointRuntime>,
    snapshots: SharedSnapshots,
    worker: usize,
    peers: usize,
    processes: usize,
    reports: Option<InputHandleVec<Epoch, Report>>,
    /// Checkpoints whose process report this worker sends once the uploads are durable.
    to_report: Vec<u64>,
    /// Worker 0: what reached it.
    inbox: Rc<RefCell<Vec<Report>>>,
    /// Worker 0: announces completions to every worker.
    announce: Option<InputHandleVec<Epoch, u64>>,
    durable: BTreeMap<u64, Vec<Vec<FileEntry>>>,
    completing: Vec<(u64, PendingCompletion)>,
    finished_workers: usize,
    /// Worker 0: how many workers' sources have finished, and the latest first checkpoint after.
    sources_done: usize,
    final_checkpoint: u64,
    /// Worker 0: the latest completion announced, and whether the job's end has been.
    announced: u64,
    end_announced: bool,
}

impl WorkerCheckpointer {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        rt: Arc<CheckpointRuntime>,
        snapshots: SharedSnapshots,
        worker: usize,
        peers: usize,
        processes: usize,
        reports: InputHandleVec<Epoch, Report>,
        inbox: Rc<RefCell<Vec<Report>>>,
        announce: InputHandleVec<Epoch, u64>,
    ) -> Self {
        WorkerCheckpointer {
            rt,
            snapshots,
            worker,
            peers,
            processes,
            reports: Some(reports),
            to_report: Vec::new(),
            inbox,
            announce: Some(announce),
            durable: BTreeMap::new(),
            completing: Vec::new(),
            finished_workers: 0,
            sources_done: 0,
            final_checkpoint: 0,
            announced: 0,
            end_announced: false,
        }
    }

    /// Moves the control inputs along with the worker's epoch.
    pub(crate) fn advance_to(&mut self, epoch: Epoch) {
        if let Some(r) = self.reports.as_mut() {
            r.advance_to(epoch);
        }
        if let Some(a) = self.announce.as_mut() {
            a.advance_to(epoch);
        }
    }

    /// This worker's sources have all finished; checkpoint `c` is the first taken after.
    ///
    /// The worker keeps crossing checkpoint boundaries until [`Self::job_finished`]: a worker
    /// whose sources end early still takes part in the checkpoints the others need to finish.
    pub(crate) fn sources_finished(&mut self, c: u64) {
        self.send(Report::SourcesDone { c });
    }

    /// Whether every worker's sources have finished and a checkpoint after the last of them
    /// has completed everywhere.
    pub(crate) fn job_finished(&self) -> bool {
        self.snapshots.borrow().job_finished
    }

    /// Does whatever is due: uploads, reports, manifests, announcements.
    pub(crate) fn step(&mut self) -> SpateResult<()> {
        self.upload_ready()?;
        self.report_durable()?;
        if self.worker == 0 {
            self.coordinate()?;
        }
        Ok(())
    }

    /// Uploads every checkpoint whose parts are all in.
    fn upload_ready(&mut self) -> SpateResult<()> {
        loop {
            let ready = {
                let s = self.snapshots.borrow();
                let expected = s.operators.len();
                s.sources
                    .keys()
                    .copied()
                    .find(|c| s.parts.get(c).map_or(0, |p| p.len()) == expected)
            };
            let Some(c) = ready else { return Ok(()) };
            let (parts, sources) = {
                let mut s = self.snapshots.borrow_mut();
                (
                    s.parts.remove(&c).unwrap_or_default(),
                    s.sources.remove(&c).unwrap_or_default(),
                )
            };
            let result = (|| -> SpateResult<()> {
                let writer = self.rt.writer(c)?;
                for (name, bytes, files) in parts {
                    writer.put(operator_file(&name, self.worker), Bytes::from(bytes))?;
                    for (file, bytes) in files.new {
                        writer.put(file, Bytes::from(bytes))?;
                    }
                    // Files of earlier checkpoints of this run that an incremental snapshot
                    // builds on: referred to, not uploaded again.
                    for f in files.shared {
                        writer.add_existing(FileEntry {
                            name: f.name,
                            size_bytes: f.size,
                            crc32c: f.crc32c,
                            checkpoint_id: self.rt.base + f.c,
                        })?;
                    }
                }
                let positions: BTreeMap<String, Vec<SplitPosition>> = sources.into_iter().collect();
                let json = serde_json::to_vec(&positions)
                    .map_err(|e| SpateError::Internal(format!("source positions: {e}")))?;
                writer.put(sources_file(self.worker), Bytes::from(json))?;
                Ok(())
            })();
            if let Err(e) = result {
                self.send(Report::Failed {
                    c,
                    reason: e.to_string(),
                });
                self.rt.failure(c, e)?;
                continue;
            }
            let mut submitted = self.rt.submitted.lock().unwrap_or_else(|p| p.into_inner());
            let n = submitted.entry(c).or_insert(0);
            *n += 1;
            if *n == self.rt.local_workers {
                submitted.remove(&c);
                self.to_report.push(c);
            }
        }
    }

    /// Reports a process's checkpoint once its uploads are durable.
    fn report_durable(&mut self) -> SpateResult<()> {
        let mut i = 0;
        while i < self.to_report.len() {
            let c = self.to_report[i];
            let writer = self.rt.writer(c)?;
            match writer.poll() {
                Ok(progress) if progress.is_settled() => {
                    let mut files = writer.durable_files();
                    files.extend(writer.existing_files());
                    self.to_report.swap_remove(i);
                    self.send(Report::Durable { c, files });
                    if !self.rt.hosts_coordinator {
                        // Worker 0's process keeps its writer to write the manifest.
                        self.rt.forget(c);
                    }
                }
                Ok(_) => i += 1,
                Err(e) => {
                    self.to_report.swap_remove(i);
                    self.send(Report::Failed {
                        c,
                        reason: e.to_string(),
                    });
                    self.rt.failure(c, e)?;
                }
            }
        }
        Ok(())
    }

    fn send(&mut self, report: Report) {
        if let Some(r) = self.reports.as_mut() {
            r.send(report);
        }
    }

    /// Worker 0: writes manifests when every process has reported, and announces them.
    fn coordinate(&mut self) -> SpateResult<()> {
        let inbox: Vec<Report> = self.inbox.borrow_mut().drain(..).collect();
        for report in inbox {
            match report {
                Report::Durable { c, files } => {
                    self.durable.entry(c).or_default().push(files);
                }
                Report::Failed { c, reason } => {
                    self.durable.remove(&c);
                    tracing::warn!(checkpoint = self.rt.base + c, %reason, "a process failed its checkpoint");
                }
                Report::SourcesDone { c } => {
                    self.sources_done += 1;
                    self.final_checkpoint = self.final_checkpoint.max(c);
                }
                Report::Finished => self.finished_workers += 1,
            }
        }
        let full: Vec<u64> = self
            .durable
            .iter()
            .filter(|(_, v)| v.len() == self.processes)
            .map(|(c, _)| *c)
            .collect();
        for c in full {
            let reports = self.durable.remove(&c).unwrap_or_default();
            let writer = self.rt.writer(c)?;
            let mut result = Ok(());
            for entry in reports.into_iter().flatten() {
                if !writer.contains(&entry.name) {
                    if let Err(e) = writer.add_existing(entry) {
                        result = Err(e);
                        break;
                    }
                }
            }
            match result {
                Ok(()) => {
                    let metadata = serde_json::json!({
                        "local_checkpoint": c,
                        "workers": self.peers,
                    });
                    self.completing.push((c, writer.complete(metadata)));
                }
                Err(e) => self.rt.failure(c, e)?,
            }
        }
        let mut i = 0;
        while i < self.completing.len() {
            let Some(result) = self.completing[i].1.poll() else {
                i += 1;
                continue;
            };
            let (c, pending) = self.completing.swap_remove(i);
            self.rt.forget(c);
            match result {
                // A later checkpoint completed first and covers this one: not a failure.
                Err(e) if pending.was_subsumed() => {
                    tracing::info!(checkpoint = self.rt.base + c, %e, "checkpoint subsumed");
                }
                Ok(done) => {
                    self.rt.completed.fetch_add(1, Ordering::Relaxed);
                    self.rt
                        .last_duration_ms
                        .store(done.duration.as_millis() as u64, Ordering::Relaxed);
                    self.rt
                        .last_size
                        .store(done.total_size_bytes, Ordering::Relaxed);
                    self.rt
                        .last_uploaded
                        .store(done.uploaded_bytes, Ordering::Relaxed);
                    self.rt
                        .uploaded_total
                        .fetch_add(done.uploaded_bytes, Ordering::Relaxed);
                    if let Some(o) = &self.rt.observer {
                        o.checkpoint_completed(self.rt.base + c, &done, self.peers as u64);
                    }
                    self.rt
                        .policy
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .record_success();
                    tracing::debug!(checkpoint = self.rt.base + c, "checkpoint complete");
                    if let Some(a) = self.announce.as_mut() {
                        a.send(c);
                    }
                    self.announced = self.announced.max(c);
                }
                Err(e) => self.rt.failure(c, e)?,
            }
        }
        if !self.end_announced
            && self.sources_done == self.peers
            && self.announced >= self.final_checkpoint
        {
            self.end_announced = true;
            if let Some(a) = self.announce.as_mut() {
                a.send(JOB_FINISHED);
            }
        }
        Ok(())
    }

    /// This worker has finished: tells worker 0 and closes its report channel.
    pub(crate) fn finish(&mut self) {
        self.send(Report::Finished);
        self.reports = None;
    }

    /// Whether this worker's part is over: every report sent, and on worker 0, every worker
    /// finished and every completion announced. Then the announcement channel closes.
    pub(crate) fn done(&mut self) -> bool {
        if self.reports.is_some() || !self.to_report.is_empty() {
            return false;
        }
        if self.worker == 0 {
            if self.finished_workers < self.peers || !self.completing.is_empty() {
                return false;
            }
            self.announce = None;
        } else {
            self.announce = None;
        }
        true
    }
}

/// Stores `completed` announcements into a worker's snapshots.
pub(crate) fn note_completed(snapshots: &SharedSnapshots, c: u64) {
    let mut s = snapshots.borrow_mut();
    if c == JOB_FINISHED {
        s.job_finished = true;
    } else {
        s.completed = s.completed.max(c);
    }
}
