//! Retention: keep the newest complete checkpoints, delete the rest, never a shared file still
//! referred to.

use std::collections::BTreeSet;

use futures::StreamExt;
use object_store::ObjectStoreExt;
use spate_types::{SpateError, SpateResult};
use tracing::{debug, info};

use crate::error::Failure;
use crate::location::join;
use crate::manifest::{checkpoint_dir_name, CheckpointKind, MANIFEST_FILE};
use crate::storage::{list_checkpoint_ids, list_files, read_manifest, ManifestRead, Shared};

/// Deletes at once during retention.
const DELETE_CONCURRENCY: usize = 8;

/// What one retention pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// The complete checkpoints kept, newest first.
    pub retained: Vec<u64>,
    /// Checkpoints whose manifest and files were deleted (the files a retained checkpoint
    /// shares excepted), oldest first.
    pub deleted: Vec<u64>,
    /// Files deleted.
    pub files_deleted: usize,
    /// Files of deleted checkpoints kept because a retained checkpoint, or one being written,
    /// refers to them.
    pub shared_files_kept: usize,
}

/// One retention pass over the storage's root.
///
/// Going from the newest checkpoint down: directories newer than the newest complete checkpoint
/// are left alone (they may be in progress); the first `retained` complete checkpoints are kept;
/// every other directory older than the newest complete checkpoint (complete beyond the count,
/// incomplete, corrupt) is garbage. A garbage checkpoint loses its manifest first, so that a
/// half-deleted checkpoint is never taken for a complete one, then every file that no retained
/// manifest and no live writer refers to.
pub(crate) async fn apply(shared: &Shared) -> SpateResult<RetentionReport> {
    let _one_at_a_time = shared.retention.lock().await;
    let loc = &shared.location;
    let keep = shared.config.retained;
    let ids = list_checkpoint_ids(loc).await?;

    let mut report = RetentionReport::default();
    let mut protected: BTreeSet<(u64, String)> = BTreeSet::new();
    let mut garbage = Vec::new();
    for id in ids {
        if report.retained.len() >= keep {
            // Older than the last retained checkpoint: garbage whatever its state.
            garbage.push(id);
            continue;
        }
        let dir = loc.path(&checkpoint_dir_name(id));
        match read_manifest(loc, &dir).await? {
            ManifestRead::Ok(m)
                if m.checkpoint_id == id && m.kind == CheckpointKind::Checkpoint =>
            {
                protected.extend(
                    m.files
                        .iter()
                        .filter(|f| f.checkpoint_id != id)
                        .map(|f| (f.checkpoint_id, f.name.clone())),
                );
                report.retained.push(id);
            }
            // Not complete: in progress if newer than every complete one, garbage otherwise.
            _ if report.retained.is_empty() => {}
            _ => garbage.push(id),
        }
    }
    if report.retained.is_empty() {
        return Ok(report);
    }
    {
        let reg = shared.registry();
        garbage.retain(|id| !reg.active.contains(id));
        protected.extend(reg.pins.keys().cloned());
    }

    let mut first_error: Option<SpateError> = None;
    garbage.reverse();
    for id in garbage {
        let dir = loc.path(&checkpoint_dir_name(id));
        let mut files = match list_files(loc, &dir).await {
            Ok(files) => files,
            Err(e) => {
                debug!(checkpoint = id, error = %e, "cannot list an old checkpoint");
                first_error.get_or_insert(e);
                continue;
            }
        };
        let had_manifest = files.remove(MANIFEST_FILE).is_some();
        if had_manifest {
            let manifest = join(&dir, MANIFEST_FILE);
            match loc.store().delete(&manifest).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => {
                    // With its manifest still there, its files must stay: it could be restored.
                    first_error.get_or_insert(
                        Failure::store(
                            "cannot delete an old checkpoint manifest",
                            loc.describe(&manifest),
                            &e,
                        )
                        .to_error(),
                    );
                    continue;
                }
            }
        }
        let (kept, doomed): (Vec<String>, Vec<String>) = files
            .into_keys()
            .partition(|name| protected.contains(&(id, name.clone())));
        report.shared_files_kept += kept.len();
        if had_manifest || !doomed.is_empty() {
            report.deleted.push(id);
        }
        let results: Vec<_> = futures::stream::iter(doomed)
            .map(|name| {
                let path = join(&dir, &name);
                async move {
                    match loc.store().delete(&path).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(Failure::store(
                            "cannot delete an old checkpoint file",
                            loc.describe(&path),
                            &e,
                        )),
                    }
                }
            })
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect()
            .await;
        for r in results {
            match r {
                Ok(()) => report.files_deleted += 1,
                Err(f) => {
                    first_error.get_or_insert(f.to_error());
                }
            }
        }
    }
    if !report.deleted.is_empty() {
        info!(
            location = %loc,
            retained = ?report.retained,
            deleted = ?report.deleted,
            files_deleted = report.files_deleted,
            shared_files_kept = report.shared_files_kept,
            "old checkpoints deleted"
        );
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(report),
    }
}
