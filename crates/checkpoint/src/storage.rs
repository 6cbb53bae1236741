//! [`CheckpointStorage`]: the entry point, with its runtime and its registry of live writers.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::ObjectStoreExt;
use spate_types::{SpateError, SpateResult};

use crate::config::CheckpointConfig;
use crate::error::Failure;
use crate::location::{join, StorageLocation};
use crate::manifest::{
    checkpoint_dir_name, parse_checkpoint_dir_name, CheckpointKind, Manifest, MANIFEST_FILE,
};
use crate::restore::{self, Checkpoint};
use crate::retention::{self, RetentionReport};
use crate::writer::{CheckpointWriter, CompletedCheckpoint};

/// What a checkpoint records about the job that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// The job's max parallelism (number of key groups).
    pub max_parallelism: u32,
    /// The number of workers of the job.
    pub workers: u32,
}

/// One checkpoint directory as listed by [`CheckpointStorage::list`].
#[derive(Debug, Clone)]
pub struct ListedCheckpoint {
    /// The id in the directory name `chk-<id>`.
    pub id: u64,
    /// The manifest, if it is present, parses and passes its checksum.
    pub manifest: Option<Manifest>,
    /// Why there is no usable manifest, when there is none.
    pub problem: Option<String>,
}

/// Checkpoint storage: writes checkpoints without blocking the caller, finds the newest usable
/// one, applies retention, and writes and reads savepoints.
///
/// Layout under the root location:
///
/// ```text
/// <root>/chk-<id>/<name>            state files, e.g. chk-7/worker-3/op-window-7/kg-0012.bin
/// <root>/chk-<id>/_manifest.json    written last, once every file above is durable
/// <savepoint>/<name>                a savepoint: the same layout in a location of its own
/// <savepoint>/_manifest.json
/// ```
///
/// The manifest is written with one `put`, which `object_store` makes atomic on every backend:
/// a local directory writes a temporary file and renames it into place (with fsync of the file
/// and the directory when [`CheckpointConfig::fsync`] is set), S3, GCS and Azure make an object
/// visible only once it is whole. A reader therefore sees either no manifest or all of it.
///
/// Uploads, downloads and deletes run on a small tokio runtime owned by the storage
/// ([`CheckpointConfig::io_threads`] threads); the methods documented as blocking must be called
/// from ordinary threads (worker threads, `main`), not from async code, and return an error if
/// they are. Cloning is cheap and shares the runtime.
#[derive(Clone)]
pub struct CheckpointStorage {
    pub(crate) shared: Arc<Shared>,
    pub(crate) rt: Arc<Runtime>,
}

/// The part of the storage that upload tasks may hold: everything but the runtime, so that a
/// task never drops the runtime it runs on.
pub(crate) struct Shared {
    pub(crate) location: StorageLocation,
    pub(crate) config: CheckpointConfig,
    /// Bounds the uploads in flight.
    pub(crate) uploads: Arc<tokio::sync::Semaphore>,
    pub(crate) registry: Mutex<Registry>,
    /// One retention pass at a time.
    pub(crate) retention: tokio::sync::Mutex<()>,
}

/// What this process knows about checkpoints in flight.
#[derive(Default)]
pub(crate) struct Registry {
    /// The highest checkpoint id begun through this storage.
    pub(crate) highest_begun: Option<u64>,
    /// The highest checkpoint id completed through this storage.
    pub(crate) newest_completed: Option<u64>,
    /// Checkpoints with a live writer or a completion in progress; retention leaves them alone.
    pub(crate) active: BTreeSet<u64>,
    /// Files of earlier checkpoints that live writers refer to (incremental checkpoints), with a
    /// count of writers; retention never deletes them.
    pub(crate) pins: BTreeMap<(u64, String), usize>,
}

impl Shared {
    pub(crate) fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl CheckpointStorage {
    /// Opens checkpoint storage at `location` (see [`StorageLocation::parse`]): a local directory
    /// (created if missing), `memory://`, `s3://…`, `gs://…`, `az://…`.
    pub fn open(location: &str, config: CheckpointConfig) -> SpateResult<Self> {
        let location = StorageLocation::parse(location, &config)?;
        Self::new(location, config)
    }

    /// Checkpoint storage at an existing location, for example one made with
    /// [`StorageLocation::from_store`] around a custom [`ObjectStore`](object_store::ObjectStore).
    pub fn new(location: StorageLocation, config: CheckpointConfig) -> SpateResult<Self> {
        if config.retained == 0 {
            return Err(SpateError::Config(
                "checkpoints to retain must be at least 1".to_owned(),
            ));
        }
        if config.io_threads == 0 || config.max_concurrent_uploads == 0 {
            return Err(SpateError::Config(
                "checkpoint I/O threads and concurrent uploads must be at least 1".to_owned(),
            ));
        }
        let rt = Runtime::new(config.io_threads)?;
        Ok(CheckpointStorage {
            shared: Arc::new(Shared {
                uploads: Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_uploads)),
                location,
                config,
                registry: Mutex::new(Registry::default()),
                retention: tokio::sync::Mutex::new(()),
            }),
            rt: Arc::new(rt),
        })
    }

    /// The root location of the checkpoints.
    pub fn location(&self) -> &StorageLocation {
        &self.shared.location
    }

    /// The settings.
    pub fn config(&self) -> &CheckpointConfig {
        &self.shared.config
    }

    /// Parses a location (for a savepoint) with this storage's settings.
    pub fn parse_location(&self, location: &str) -> SpateResult<StorageLocation> {
        StorageLocation::parse(location, &self.shared.config)
    }

    /// Begins checkpoint `id`. Does no I/O and never blocks. Ids must increase over the life of
    /// the storage; after a restart, take them from [`next_id`](Self::next_id) so that files left
    /// by an interrupted checkpoint are never mixed into a new one.
    pub fn begin(&self, id: u64, info: CheckpointInfo) -> SpateResult<CheckpointWriter> {
        {
            let mut reg = self.shared.registry();
            let floor = reg.highest_begun.max(reg.newest_completed);
            if let Some(floor) = floor.filter(|&f| id <= f) {
                return Err(SpateError::Internal(format!(
                    "checkpoint ids must increase: {id} begun after {floor}"
                )));
            }
            reg.highest_begun = Some(id);
            reg.active.insert(id);
        }
        let dir = self.shared.location.path(&checkpoint_dir_name(id));
        Ok(CheckpointWriter::new(
            self,
            id,
            CheckpointKind::Checkpoint,
            info,
            self.shared.location.clone(),
            dir,
        ))
    }

    /// Begins savepoint `id` in `target`, a location of its own (another directory, bucket or
    /// prefix, or [`StorageLocation::child`] of the checkpoint root). Retention never touches
    /// it. Blocking: checks that `target` holds no savepoint yet.
    pub fn begin_savepoint(
        &self,
        target: &StorageLocation,
        id: u64,
        info: CheckpointInfo,
    ) -> SpateResult<CheckpointWriter> {
        if parse_checkpoint_dir_name(target.prefix().filename().unwrap_or("")).is_some() {
            return Err(SpateError::Config(format!(
                "savepoint location {target} looks like a checkpoint directory (chk-<id>), which retention would delete; choose another name"
            )));
        }
        let manifest = target.path(MANIFEST_FILE);
        let exists = self.block_on(async {
            match target.store().head(&manifest).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(Failure::store(
                    "cannot check the savepoint location",
                    target.describe(&manifest),
                    &e,
                )
                .into()),
            }
        })?;
        if exists {
            return Err(SpateError::Config(format!(
                "savepoint location {target} already holds a savepoint; choose an empty location"
            )));
        }
        Ok(CheckpointWriter::new(
            self,
            id,
            CheckpointKind::Savepoint,
            info,
            target.clone(),
            target.prefix().clone(),
        ))
    }

    /// Copies a checkpoint into `target` as a self-contained savepoint: every file, shared ones
    /// included, is read (and its checksum verified) and written below `target`, then the
    /// manifest. Blocking.
    pub fn export_savepoint(
        &self,
        checkpoint: &Checkpoint,
        target: &StorageLocation,
    ) -> SpateResult<CompletedCheckpoint> {
        // Bounds the bytes read but not yet uploaded.
        const MAX_BYTES_IN_FLIGHT: u64 = 64 << 20;
        let m = checkpoint.manifest();
        let info = CheckpointInfo {
            max_parallelism: m.max_parallelism,
            workers: m.workers,
        };
        let writer = self.begin_savepoint(target, m.checkpoint_id, info)?;
        for f in &m.files {
            let data = checkpoint.read(&f.name)?;
            writer.put(f.name.clone(), data)?;
            if writer.progress().bytes_in_flight > MAX_BYTES_IN_FLIGHT {
                writer.wait()?;
            }
        }
        writer.complete(m.metadata.clone()).wait()
    }

    /// The newest complete checkpoint, checked as [`CheckpointConfig::verification`] says.
    /// Blocking.
    ///
    /// Checkpoints are tried newest first. One that is corrupt or partial (no manifest, a
    /// manifest that does not parse or fails its checksum, a missing file, a wrong size or
    /// checksum) is skipped with a warning in favour of the one before it. A storage error that
    /// is not corruption (permission denied, network) is returned as an error rather than
    /// falling back to older state.
    ///
    /// `Ok(None)` means there is nothing to restore: no checkpoint directory at all, or only
    /// directories that never got a manifest (the job stopped before its first checkpoint
    /// completed), which is logged. If any checkpoint got as far as a manifest and none is
    /// usable, the result is an error: empty state is never restored silently.
    pub fn latest_complete(&self) -> SpateResult<Option<Checkpoint>> {
        let shared = Arc::clone(&self.shared);
        let found = self.block_on(async move { restore::latest_complete(&shared).await })?;
        Ok(found.map(|(manifest, dir)| Checkpoint {
            manifest,
            location: self.shared.location.clone(),
            dir,
            rt: Arc::clone(&self.rt),
        }))
    }

    /// Opens a savepoint, or one checkpoint directory `…/chk-<id>`, for restore, checked as
    /// [`CheckpointConfig::verification`] says. Blocking. An unusable snapshot is an error.
    pub fn restore_from(&self, location: &StorageLocation) -> SpateResult<Checkpoint> {
        let verification = self.shared.config.verification;
        let loc = location.clone();
        let manifest = self.block_on(async move {
            restore::validate(&loc, loc.prefix(), None, verification)
                .await
                .map_err(|p| p.into_error(&loc, loc.prefix()))
        })?;
        Ok(Checkpoint {
            manifest,
            location: location.clone(),
            dir: location.prefix().clone(),
            rt: Arc::clone(&self.rt),
        })
    }

    /// Every checkpoint directory, newest first, with its manifest when it is usable. Only
    /// manifests are read; files are not checked. Blocking.
    pub fn list(&self) -> SpateResult<Vec<ListedCheckpoint>> {
        let shared = Arc::clone(&self.shared);
        self.block_on(async move {
            let loc = &shared.location;
            let mut out = Vec::new();
            for id in list_checkpoint_ids(loc).await? {
                let dir = loc.path(&checkpoint_dir_name(id));
                let (manifest, problem) = match read_manifest(loc, &dir).await? {
                    ManifestRead::Missing => (None, Some("no manifest".to_owned())),
                    ManifestRead::Corrupt(why) => (None, Some(why)),
                    ManifestRead::Ok(m) if m.checkpoint_id != id => (
                        None,
                        Some(format!("manifest is for checkpoint {}", m.checkpoint_id)),
                    ),
                    ManifestRead::Ok(m) => (Some(m), None),
                };
                out.push(ListedCheckpoint {
                    id,
                    manifest,
                    problem,
                });
            }
            Ok(out)
        })
    }

    /// The id for the next checkpoint: above every checkpoint directory in storage (complete or
    /// not) and every id begun here. Starts at 1. Blocking.
    pub fn next_id(&self) -> SpateResult<u64> {
        let shared = Arc::clone(&self.shared);
        let stored = self.block_on(async move {
            Ok(list_checkpoint_ids(&shared.location)
                .await?
                .first()
                .copied())
        })?;
        let reg = self.shared.registry();
        let highest = stored.max(reg.highest_begun).max(reg.newest_completed);
        Ok(highest.map_or(1, |h| h + 1))
    }

    /// Applies retention now: keeps the newest [`CheckpointConfig::retained`] complete
    /// checkpoints and deletes older ones and incomplete ones older than the newest complete
    /// one, except files that a retained checkpoint or a live writer refers to. Completing a
    /// checkpoint does this by itself. Blocking.
    pub fn apply_retention(&self) -> SpateResult<RetentionReport> {
        let shared = Arc::clone(&self.shared);
        self.block_on(async move { retention::apply(&shared).await })
    }

    /// Runs `future` on the storage's runtime and waits for it.
    pub(crate) fn block_on<T>(
        &self,
        future: impl Future<Output = SpateResult<T>>,
    ) -> SpateResult<T> {
        self.rt.block_on(future)
    }
}

/// The tokio runtime that runs the storage's I/O.
pub(crate) struct Runtime {
    rt: Option<tokio::runtime::Runtime>,
}

impl Runtime {
    fn new(threads: usize) -> SpateResult<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            // Local-directory I/O runs on blocking threads; bound them too.
            .max_blocking_threads(threads.saturating_mul(4).max(4))
            .thread_name("spate-checkpoint-io")
            .enable_all()
            .build()
            .map_err(|e| SpateError::io_context("cannot start the checkpoint I/O runtime", e))?;
        Ok(Runtime { rt: Some(rt) })
    }

    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        self.rt
            .as_ref()
            .expect("the runtime is only taken when it is dropped")
            .handle()
    }

    /// Blocks the calling thread on `future`. Refused inside async code, where blocking would
    /// stall (or, with tokio, panic) the caller's own runtime.
    pub(crate) fn block_on<T>(
        &self,
        future: impl Future<Output = SpateResult<T>>,
    ) -> SpateResult<T> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(SpateError::Internal(
                "a blocking checkpoint storage method was called from async code".to_owned(),
            ));
        }
        self.rt
            .as_ref()
            .expect("the runtime is only taken when it is dropped")
            .block_on(future)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Never block in drop: the last handle may go away on any thread. Uploads still in
        // flight are abandoned; their checkpoint has no manifest and counts as incomplete.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// The ids of all checkpoint directories (`chk-<id>`) under the root, newest first.
pub(crate) async fn list_checkpoint_ids(loc: &StorageLocation) -> SpateResult<Vec<u64>> {
    let root = loc.prefix();
    let listing = loc
        .store()
        .list_with_delimiter(Some(root))
        .await
        .map_err(|e| Failure::store("cannot list checkpoints", loc.describe(root), &e))?;
    let mut ids: Vec<u64> = listing
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename().and_then(parse_checkpoint_dir_name))
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.dedup();
    Ok(ids)
}

/// Every object below `dir`, as (name relative to `dir`, size).
pub(crate) async fn list_files(
    loc: &StorageLocation,
    dir: &Path,
) -> SpateResult<BTreeMap<String, u64>> {
    loc.store()
        .list(Some(dir))
        .map_ok(|meta| {
            let name = meta
                .location
                .prefix_match(dir)
                .map(|parts| {
                    parts
                        .map(|p| p.as_ref().to_owned())
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .unwrap_or_default();
            (name, meta.size)
        })
        .try_collect()
        .await
        .map_err(|e| Failure::store("cannot list checkpoint files", loc.describe(dir), &e).into())
}

/// What reading a manifest found.
pub(crate) enum ManifestRead {
    Ok(Manifest),
    Missing,
    Corrupt(String),
}

/// Reads and decodes the manifest in `dir`. Only storage errors other than "not found" are
/// errors; a missing or damaged manifest is a finding.
pub(crate) async fn read_manifest(loc: &StorageLocation, dir: &Path) -> SpateResult<ManifestRead> {
    let path = join(dir, MANIFEST_FILE);
    let bytes = match loc.store().get(&path).await {
        Ok(got) => got.bytes().await,
        Err(e) => Err(e),
    };
    match bytes {
        Ok(bytes) => Ok(match Manifest::decode(&bytes) {
            Ok(m) => ManifestRead::Ok(m),
            Err(why) => ManifestRead::Corrupt(why),
        }),
        Err(object_store::Error::NotFound { .. }) => Ok(ManifestRead::Missing),
        Err(e) => {
            Err(Failure::store("cannot read checkpoint manifest", loc.describe(&path), &e).into())
        }
    }
}

/// The directory of checkpoint `owner` beside the checkpoint directory `dir`.
pub(crate) fn sibling_dir(dir: &Path, owner: u64) -> Path {
    let mut parts: Vec<_> = dir.parts().collect();
    parts.pop();
    let parent: Path = parts.into_iter().collect();
    parent.join(checkpoint_dir_name(owner).as_str())
}
