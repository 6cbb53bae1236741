//! Writing one checkpoint: asynchronous puts, then the manifest once everything is durable.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use spate_types::{SpateError, SpateResult};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::error::Failure;
use crate::location::{join, StorageLocation};
use crate::manifest::{validate_name, CheckpointKind, FileEntry, Manifest, MANIFEST_FILE};
use crate::retention::{self, RetentionReport};
use crate::storage::{list_files, sibling_dir, CheckpointInfo, CheckpointStorage, Runtime, Shared};

/// Writes the files of one checkpoint (or savepoint) and then its manifest.
///
/// Cheap to clone and safe to share: every worker of a job can hold a clone and
/// [`put`](Self::put) its own files concurrently. `put` never waits for storage; the upload runs
/// on the storage's runtime. Whether uploads have finished or failed is known without blocking
/// from [`poll`](Self::poll), or by blocking in [`wait`](Self::wait). [`complete`](Self::complete)
/// writes the manifest once every file is durable and fails if any upload failed.
#[derive(Clone)]
pub struct CheckpointWriter {
    inner: Arc<WriterInner>,
    rt: Arc<Runtime>,
}

struct WriterInner {
    id: u64,
    kind: CheckpointKind,
    info: CheckpointInfo,
    /// The location messages name paths against, and whose store holds the files.
    target: StorageLocation,
    /// The checkpoint directory (`<root>/chk-<id>`) or the savepoint's root.
    dir: Path,
    storage: Arc<Shared>,
    started: Instant,
    created_unix_ms: u64,
    state: Mutex<WriterState>,
    /// Signalled whenever an upload settles.
    settled: Condvar,
    /// Set when the checkpoint failed because a later one completed first.
    subsumed: Arc<AtomicBool>,
}

#[derive(Default)]
struct WriterState {
    files: BTreeMap<String, Slot>,
    in_flight_files: usize,
    in_flight_bytes: u64,
    durable_files: usize,
    durable_bytes: u64,
    /// The first upload failure; later ones are logged.
    failure: Option<Failure>,
    uploads: Vec<JoinHandle<()>>,
    /// Set by `complete` or `abort`: no more files.
    sealed: bool,
    /// Files of earlier checkpoints this writer pinned against retention.
    pinned: Vec<(u64, String)>,
    /// The writer has left the storage's registry (its pins are released).
    released: bool,
}

enum Slot {
    Uploading,
    /// Uploaded by this writer.
    Written(FileEntry),
    /// Already in storage: written by another process of the job, or owned by an earlier
    /// checkpoint (incremental). Checked to exist before the manifest is written.
    Existing(FileEntry),
    Failed,
}

/// Upload progress of a [`CheckpointWriter`], as seen at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteProgress {
    /// Files whose upload has not finished.
    pub files_in_flight: usize,
    /// Bytes of those files.
    pub bytes_in_flight: u64,
    /// Files this writer has made durable.
    pub files_durable: usize,
    /// Bytes of those files.
    pub bytes_durable: u64,
}

impl WriteProgress {
    /// No upload is in flight.
    pub fn is_settled(&self) -> bool {
        self.files_in_flight == 0
    }
}

/// A completed checkpoint or savepoint, with what metrics want to know about it.
#[derive(Debug, Clone)]
pub struct CompletedCheckpoint {
    /// The manifest as written.
    pub manifest: Manifest,
    /// Where the manifest is.
    pub location: String,
    /// From [`CheckpointStorage::begin`] until the manifest was durable.
    pub duration: Duration,
    /// Size of the checkpoint: all its files, shared ones included.
    pub total_size_bytes: u64,
    /// Bytes uploaded for this checkpoint (less than the total for an incremental one).
    pub uploaded_bytes: u64,
    /// What retention did after the checkpoint completed: `None` for a savepoint, or when
    /// retention failed (that is logged, and does not fail the checkpoint).
    pub retention: Option<RetentionReport>,
}

/// A completion in progress, from [`CheckpointWriter::complete`].
pub struct PendingCompletion {
    id: u64,
    rx: Option<Receiver<SpateResult<CompletedCheckpoint>>>,
    subsumed: Arc<AtomicBool>,
}

impl PendingCompletion {
    fn ready(id: u64, result: SpateResult<CompletedCheckpoint>) -> Self {
        let (tx, rx) = mpsc::sync_channel(1);
        // The receiver is alive: this send cannot fail.
        let _ = tx.send(result);
        PendingCompletion {
            id,
            rx: Some(rx),
            subsumed: Arc::default(),
        }
    }

    /// Whether the checkpoint failed only because a later checkpoint completed first. Flink
    /// aborts such a checkpoint as subsumed and does not count it against the tolerable
    /// failures: the later checkpoint covers everything it would have.
    pub fn was_subsumed(&self) -> bool {
        self.subsumed.load(Ordering::Acquire)
    }

    /// The checkpoint id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The result if the completion has finished, without blocking. Returns `Some` once; after
    /// that, `Some` of an error saying the result was taken.
    pub fn poll(&mut self) -> Option<SpateResult<CompletedCheckpoint>> {
        let Some(rx) = &self.rx else {
            return Some(Err(SpateError::Internal(format!(
                "the completion result of checkpoint {} was already taken",
                self.id
            ))));
        };
        match rx.try_recv() {
            Ok(result) => {
                self.rx = None;
                Some(result)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.rx = None;
                Some(Err(lost_completion(self.id)))
            }
        }
    }

    /// Blocks until the completion has finished and returns its result.
    pub fn wait(mut self) -> SpateResult<CompletedCheckpoint> {
        match self.rx.take() {
            Some(rx) => rx.recv().unwrap_or_else(|_| Err(lost_completion(self.id))),
            None => Err(SpateError::Internal(format!(
                "the completion result of checkpoint {} was already taken",
                self.id
            ))),
        }
    }
}

fn lost_completion(id: u64) -> SpateError {
    SpateError::Internal(format!(
        "the completion of checkpoint {id} ended without a result (storage shut down?)"
    ))
}

impl CheckpointWriter {
    pub(crate) fn new(
        storage: &CheckpointStorage,
        id: u64,
        kind: CheckpointKind,
        info: CheckpointInfo,
        target: StorageLocation,
        dir: Path,
    ) -> Self {
        let created_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        CheckpointWriter {
            inner: Arc::new(WriterInner {
                id,
                kind,
                info,
                target,
                dir,
                storage: Arc::clone(&storage.shared),
                started: Instant::now(),
                created_unix_ms,
                state: Mutex::new(WriterState::default()),
                settled: Condvar::new(),
                subsumed: Arc::default(),
            }),
            rt: Arc::clone(&storage.rt),
        }
    }

    /// The checkpoint id.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Checkpoint or savepoint.
    pub fn kind(&self) -> CheckpointKind {
        self.inner.kind
    }

    /// Starts uploading the state file `name` (for example `worker-3/op-window-7/kg-0012.bin`)
    /// and returns at once. The CRC-32C is computed on the upload thread, not the caller's.
    ///
    /// Names are relative, `/`-separated segments of `A-Z a-z 0-9 . _ = + -`, not starting with
    /// `_`. A bad name, a name written twice, or a put after `complete` is an error here; upload
    /// failures are reported by [`poll`](Self::poll), [`wait`](Self::wait) and
    /// [`complete`](Self::complete).
    pub fn put(&self, name: impl Into<String>, data: Bytes) -> SpateResult<()> {
        let name = name.into();
        let inner = &self.inner;
        validate_name(&name).map_err(|e| {
            SpateError::Internal(format!("checkpoint {}: bad state file name: {e}", inner.id))
        })?;
        let mut st = inner.lock();
        inner.check_open(&st, &name)?;
        st.files.insert(name.clone(), Slot::Uploading);
        st.in_flight_files += 1;
        st.in_flight_bytes += data.len() as u64;
        let task = Arc::clone(inner).upload(name, data);
        st.uploads.push(self.rt.handle().spawn(task));
        Ok(())
    }

    /// Adds a file that is already in storage, without uploading it:
    ///
    /// - a file of this checkpoint written by another process of the job (`checkpoint_id` equal
    ///   to this writer's id), whose entry that process got from
    ///   [`durable_files`](Self::durable_files);
    /// - for an incremental checkpoint, a file owned by an earlier checkpoint (an entry of its
    ///   manifest), which is then protected from retention as long as this writer lives and,
    ///   once complete, as long as this checkpoint is retained.
    ///
    /// [`complete`](Self::complete) checks that each such file exists with its size.
    pub fn add_existing(&self, entry: FileEntry) -> SpateResult<()> {
        let inner = &self.inner;
        validate_name(&entry.name).map_err(|e| {
            SpateError::Internal(format!("checkpoint {}: bad state file name: {e}", inner.id))
        })?;
        if entry.checkpoint_id > inner.id {
            return Err(SpateError::Internal(format!(
                "checkpoint {} cannot refer to {} of the later checkpoint {}",
                inner.id, entry.name, entry.checkpoint_id
            )));
        }
        if inner.kind == CheckpointKind::Savepoint && entry.checkpoint_id != inner.id {
            return Err(SpateError::Internal(format!(
                "savepoint {} must be self-contained: it cannot refer to {} of checkpoint {}",
                inner.id, entry.name, entry.checkpoint_id
            )));
        }
        let mut st = inner.lock();
        inner.check_open(&st, &entry.name)?;
        if entry.checkpoint_id != inner.id {
            let key = (entry.checkpoint_id, entry.name.clone());
            *inner
                .storage
                .registry()
                .pins
                .entry(key.clone())
                .or_insert(0) += 1;
            st.pinned.push(key);
        }
        st.files.insert(entry.name.clone(), Slot::Existing(entry));
        Ok(())
    }

    /// Upload progress now, without blocking. An error if any upload has failed (the
    /// checkpoint cannot complete then; [`abort`](Self::abort) it).
    pub fn poll(&self) -> SpateResult<WriteProgress> {
        let st = self.inner.lock();
        match &st.failure {
            Some(f) => Err(f.to_error()),
            None => Ok(progress(&st)),
        }
    }

    /// Upload progress now, whether or not an upload failed.
    pub fn progress(&self) -> WriteProgress {
        progress(&self.inner.lock())
    }

    /// Blocks until no upload is in flight; an error if any failed. For tests and for callers
    /// that may block; the engine's workers use [`poll`](Self::poll).
    pub fn wait(&self) -> SpateResult<WriteProgress> {
        let st = self.inner.lock();
        let st = self
            .inner
            .settled
            .wait_while(st, |st| st.in_flight_files > 0)
            .unwrap_or_else(PoisonError::into_inner);
        match &st.failure {
            Some(f) => Err(f.to_error()),
            None => Ok(progress(&st)),
        }
    }

    /// The entries of the files this writer has made durable so far, sorted by name. A process
    /// that does not complete the checkpoint itself hands these to the one that does
    /// ([`add_existing`](Self::add_existing)).
    pub fn durable_files(&self) -> Vec<FileEntry> {
        self.inner
            .lock()
            .files
            .values()
            .filter_map(|slot| match slot {
                Slot::Written(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    /// The entries added with [`add_existing`](Self::add_existing), sorted by name: files of
    /// earlier checkpoints (incremental) or of other processes. A process that does not complete
    /// the checkpoint itself reports these too.
    pub fn existing_files(&self) -> Vec<FileEntry> {
        self.inner
            .lock()
            .files
            .values()
            .filter_map(|slot| match slot {
                Slot::Existing(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    /// Whether the checkpoint has the file `name` (uploaded, uploading or added).
    pub fn contains(&self, name: &str) -> bool {
        self.inner.lock().files.contains_key(name)
    }

    /// Completes the checkpoint in the background and returns at once: waits for every upload,
    /// fails if any failed (deleting what this writer uploaded), checks the files added with
    /// [`add_existing`](Self::add_existing), writes the manifest with `metadata` (source
    /// positions and whatever else the engine needs back at restore), and then applies
    /// retention. The result comes from [`PendingCompletion::poll`] or
    /// [`PendingCompletion::wait`].
    ///
    /// A checkpoint fails too if a later checkpoint of the same storage completed first (it is
    /// subsumed, as in Flink).
    pub fn complete(&self, metadata: serde_json::Value) -> PendingCompletion {
        let id = self.inner.id;
        let uploads = {
            let mut st = self.inner.lock();
            if st.sealed {
                return PendingCompletion::ready(
                    id,
                    Err(SpateError::Internal(format!(
                        "checkpoint {id} was already completed or aborted"
                    ))),
                );
            }
            st.sealed = true;
            std::mem::take(&mut st.uploads)
        };
        let (tx, rx) = mpsc::sync_channel(1);
        let inner = Arc::clone(&self.inner);
        let subsumed = Arc::clone(&inner.subsumed);
        self.rt.handle().spawn(async move {
            let result = inner.finish(uploads, metadata).await;
            inner.release();
            // The caller may have dropped the handle: nobody wants the result then.
            let _ = tx.send(result);
        });
        PendingCompletion {
            id,
            rx: Some(rx),
            subsumed,
        }
    }

    /// Gives the checkpoint up: no more files, and what this writer uploaded is deleted in the
    /// background once in-flight uploads settle. Returns at once.
    pub fn abort(&self) {
        let uploads = {
            let mut st = self.inner.lock();
            if st.sealed {
                return;
            }
            st.sealed = true;
            std::mem::take(&mut st.uploads)
        };
        let inner = Arc::clone(&self.inner);
        self.rt.handle().spawn(async move {
            for upload in uploads {
                let _ = upload.await;
            }
            inner.delete_written().await;
            inner.release();
            debug!(checkpoint = inner.id, "checkpoint aborted");
        });
    }
}

fn progress(st: &WriterState) -> WriteProgress {
    WriteProgress {
        files_in_flight: st.in_flight_files,
        bytes_in_flight: st.in_flight_bytes,
        files_durable: st.durable_files,
        bytes_durable: st.durable_bytes,
    }
}

impl WriterInner {
    fn lock(&self) -> MutexGuard<'_, WriterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_open(&self, st: &WriterState, name: &str) -> SpateResult<()> {
        if st.sealed {
            return Err(SpateError::Internal(format!(
                "checkpoint {}: file {name} added after complete or abort",
                self.id
            )));
        }
        if st.files.contains_key(name) {
            return Err(SpateError::Internal(format!(
                "checkpoint {}: file {name} added twice",
                self.id
            )));
        }
        Ok(())
    }

    async fn upload(self: Arc<Self>, name: String, data: Bytes) {
        let size = data.len() as u64;
        let path = join(&self.dir, &name);
        let result = match Arc::clone(&self.storage.uploads).acquire_owned().await {
            Ok(_permit) => {
                let crc = crc32c::crc32c(&data);
                self.target
                    .store()
                    .put(&path, PutPayload::from_bytes(data))
                    .await
                    .map(|_| crc)
                    .map_err(|e| {
                        Failure::store(
                            "cannot write checkpoint file",
                            self.target.describe(&path),
                            &e,
                        )
                    })
            }
            Err(_) => Err(Failure::new(
                self.target.describe(&path),
                io::ErrorKind::Other,
                "checkpoint storage shut down before the upload",
            )),
        };
        let mut st = self.lock();
        st.in_flight_files -= 1;
        st.in_flight_bytes -= size;
        let slot = match result {
            Ok(crc32c) => {
                st.durable_files += 1;
                st.durable_bytes += size;
                Slot::Written(FileEntry {
                    name: name.clone(),
                    size_bytes: size,
                    crc32c,
                    checkpoint_id: self.id,
                })
            }
            Err(failure) => {
                warn!(
                    checkpoint = self.id,
                    location = %failure.location,
                    error = %failure.message,
                    "checkpoint upload failed"
                );
                st.failure.get_or_insert(failure);
                Slot::Failed
            }
        };
        st.files.insert(name, slot);
        drop(st);
        self.settled.notify_all();
    }

    async fn finish(
        &self,
        uploads: Vec<JoinHandle<()>>,
        metadata: serde_json::Value,
    ) -> SpateResult<CompletedCheckpoint> {
        for upload in uploads {
            if let Err(e) = upload.await {
                // An upload task panicked or was cancelled: its slot is still `Uploading`.
                let mut st = self.lock();
                st.failure.get_or_insert(Failure::new(
                    self.target.describe(&self.dir),
                    io::ErrorKind::Other,
                    format!("a checkpoint upload task ended abnormally: {e}"),
                ));
            }
        }
        let (files, uploaded_bytes, failure) = {
            let st = self.lock();
            let files: Vec<FileEntry> = st
                .files
                .values()
                .filter_map(|slot| match slot {
                    Slot::Written(e) | Slot::Existing(e) => Some(e.clone()),
                    Slot::Uploading | Slot::Failed => None,
                })
                .collect();
            let failure = st.failure.clone().or_else(|| {
                (files.len() != st.files.len()).then(|| {
                    Failure::new(
                        self.target.describe(&self.dir),
                        io::ErrorKind::Other,
                        "a checkpoint file never finished uploading",
                    )
                })
            });
            (files, st.durable_bytes, failure)
        };
        if let Some(failure) = failure {
            self.delete_written().await;
            return Err(failure.to_error());
        }
        if self.kind == CheckpointKind::Checkpoint {
            let newest = self.storage.registry().newest_completed;
            if let Some(newest) = newest.filter(|&n| n > self.id) {
                self.subsumed.store(true, Ordering::Release);
                self.delete_written().await;
                return Err(SpateError::Execution(format!(
                    "checkpoint {} was subsumed: checkpoint {newest} completed first",
                    self.id
                )));
            }
        }
        if let Err((e, gone_owner)) = self.check_existing(&files).await {
            // A file of an earlier checkpoint is gone once a later checkpoint completed and
            // retention no longer needed it: an incremental checkpoint that built on it is
            // superseded (as a subsumed one is), not failed; the engine builds on newer ones.
            let newest = self.storage.registry().newest_completed;
            if gone_owner.is_some_and(|owner| newest.is_some_and(|n| n > owner)) {
                self.subsumed.store(true, Ordering::Release);
            }
            self.delete_written().await;
            return Err(e);
        }

        let total_size_bytes = files.iter().map(|f| f.size_bytes).sum();
        let manifest = Manifest {
            checkpoint_id: self.id,
            kind: self.kind,
            max_parallelism: self.info.max_parallelism,
            workers: self.info.workers,
            created_unix_ms: self.created_unix_ms,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            total_size_bytes,
            files,
            metadata,
        };
        let path = join(&self.dir, MANIFEST_FILE);
        // No retention pass runs between the manifest's put and the release of this writer's
        // pins: a pass that listed the manifests before the put must still see the pins of the
        // files the new manifest shares with earlier checkpoints.
        let retention_guard = if self.kind == CheckpointKind::Checkpoint {
            Some(self.storage.retention.lock().await)
        } else {
            None
        };
        // One put: atomic on every object_store backend (see `CheckpointStorage`).
        if let Err(e) = self
            .target
            .store()
            .put(&path, PutPayload::from(manifest.encode()))
            .await
        {
            let failure = Failure::store(
                "cannot write checkpoint manifest",
                self.target.describe(&path),
                &e,
            );
            self.delete_written().await;
            return Err(failure.to_error());
        }
        let duration = self.started.elapsed();
        info!(
            checkpoint = self.id,
            kind = ?self.kind,
            location = %self.target.describe(&path),
            duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            size_bytes = total_size_bytes,
            uploaded_bytes,
            files = manifest.files.len(),
            "checkpoint complete"
        );

        let retention = if self.kind == CheckpointKind::Checkpoint {
            {
                let mut reg = self.storage.registry();
                reg.newest_completed = reg.newest_completed.max(Some(self.id));
            }
            // This checkpoint is complete: it no longer needs to be kept out of retention.
            self.release();
            drop(retention_guard);
            match retention::apply(&self.storage).await {
                Ok(report) => Some(report),
                Err(e) => {
                    warn!(checkpoint = self.id, error = %e, "checkpoint retention failed");
                    None
                }
            }
        } else {
            None
        };
        Ok(CompletedCheckpoint {
            location: self.target.describe(&path),
            duration,
            total_size_bytes,
            uploaded_bytes,
            manifest,
            retention,
        })
    }

    /// Checks that every file added with `add_existing` is in storage with its size.
    /// On error, also the owning checkpoint of a missing file of an earlier checkpoint.
    async fn check_existing(&self, files: &[FileEntry]) -> Result<(), (SpateError, Option<u64>)> {
        let mut by_owner: BTreeMap<u64, Vec<&FileEntry>> = BTreeMap::new();
        {
            let st = self.lock();
            for f in files {
                if matches!(st.files.get(&f.name), Some(Slot::Existing(_))) {
                    by_owner.entry(f.checkpoint_id).or_default().push(f);
                }
            }
        }
        for (owner, entries) in by_owner {
            let dir = if owner == self.id {
                self.dir.clone()
            } else {
                sibling_dir(&self.dir, owner)
            };
            let present = list_files(&self.target, &dir)
                .await
                .map_err(|e| (e, None))?;
            for f in entries {
                let path = join(&dir, &f.name);
                match present.get(&f.name) {
                    None => {
                        return Err((
                            Failure::new(
                                self.target.describe(&path),
                                io::ErrorKind::NotFound,
                                format!(
                                    "checkpoint {} refers to this file, but it is not in storage",
                                    self.id
                                ),
                            )
                            .to_error(),
                            (owner != self.id).then_some(owner),
                        ))
                    }
                    Some(&size) if size != f.size_bytes => {
                        return Err((
                            Failure::new(
                                self.target.describe(&path),
                                io::ErrorKind::InvalidData,
                                format!(
                                    "checkpoint {} expects {} bytes, storage has {size}",
                                    self.id, f.size_bytes
                                ),
                            )
                            .to_error(),
                            None,
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Best-effort deletion of the files this writer uploaded, after a failure or an abort: on a
    /// full disk this gives the space back.
    async fn delete_written(&self) {
        let names: Vec<String> = self
            .lock()
            .files
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Written(_)))
            .map(|(name, _)| name.clone())
            .collect();
        for name in names {
            let path = join(&self.dir, &name);
            match self.target.store().delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => debug!(
                    checkpoint = self.id,
                    location = %self.target.describe(&path),
                    error = %e,
                    "cannot delete a file of a failed checkpoint; retention will retry"
                ),
            }
        }
    }

    /// Leaves the storage's registry: the checkpoint is no longer active and its pins go.
    fn release(&self) {
        let pinned = {
            let mut st = self.lock();
            if st.released {
                return;
            }
            st.released = true;
            std::mem::take(&mut st.pinned)
        };
        let mut reg = self.storage.registry();
        if self.kind == CheckpointKind::Checkpoint {
            reg.active.remove(&self.id);
        }
        for key in pinned {
            if let Some(count) = reg.pins.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    reg.pins.remove(&key);
                }
            }
        }
    }
}

impl Drop for WriterInner {
    fn drop(&mut self) {
        // A writer dropped without complete or abort leaves the registry too.
        self.release();
    }
}
