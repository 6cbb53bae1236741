//! Finding a usable checkpoint and reading its files back.

use std::collections::btree_map::{BTreeMap, Entry};
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::ObjectStoreExt;
use spate_types::{SpateError, SpateResult};
use tracing::warn;

use crate::config::Verification;
use crate::error::Failure;
use crate::location::{join, StorageLocation};
use crate::manifest::{checkpoint_dir_name, CheckpointKind, FileEntry, Manifest};
use crate::storage::{
    list_checkpoint_ids, list_files, read_manifest, sibling_dir, ManifestRead, Runtime, Shared,
};

/// Files checksummed at once when a checkpoint is verified.
const VERIFY_CONCURRENCY: usize = 8;

/// A complete checkpoint or savepoint, checked and ready to restore from.
pub struct Checkpoint {
    pub(crate) manifest: Manifest,
    /// The location the checkpoint directory is in (the checkpoint root, or the savepoint).
    pub(crate) location: StorageLocation,
    /// The checkpoint directory, or the savepoint's root.
    pub(crate) dir: Path,
    pub(crate) rt: Arc<Runtime>,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("location", &self.location())
            .field("id", &self.manifest.checkpoint_id)
            .field("kind", &self.manifest.kind)
            .field("files", &self.manifest.files.len())
            .finish()
    }
}

impl Checkpoint {
    /// The checkpoint id.
    pub fn id(&self) -> u64 {
        self.manifest.checkpoint_id
    }

    /// The manifest: files, max parallelism, workers, metadata.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The metadata the engine stored with the checkpoint (source positions and so on).
    pub fn metadata(&self) -> &serde_json::Value {
        &self.manifest.metadata
    }

    /// Where the checkpoint is, for messages.
    pub fn location(&self) -> String {
        self.location.describe(&self.dir)
    }

    /// Reads the state file `name` and checks its size and CRC-32C against the manifest; a
    /// mismatch is an error naming the file. Blocking.
    pub fn read(&self, name: &str) -> SpateResult<Bytes> {
        let entry = self.manifest.file(name).ok_or_else(|| {
            SpateError::from(Failure::new(
                self.location(),
                io::ErrorKind::NotFound,
                format!(
                    "checkpoint {} has no file {name}",
                    self.manifest.checkpoint_id
                ),
            ))
        })?;
        let path = file_path(&self.dir, &self.manifest, entry);
        let loc = self.location.clone();
        let entry = entry.clone();
        self.rt.block_on(async move {
            let bytes = match loc.store().get(&path).await {
                Ok(got) => got.bytes().await,
                Err(e) => Err(e),
            }
            .map_err(|e| Failure::store("cannot read checkpoint file", loc.describe(&path), &e))?;
            if bytes.len() as u64 != entry.size_bytes {
                return Err(Failure::new(
                    loc.describe(&path),
                    io::ErrorKind::InvalidData,
                    format!(
                        "checkpoint file is corrupt: {} bytes, the manifest says {}",
                        bytes.len(),
                        entry.size_bytes
                    ),
                )
                .into());
            }
            let crc = crc32c::crc32c(&bytes);
            if crc != entry.crc32c {
                return Err(Failure::new(
                    loc.describe(&path),
                    io::ErrorKind::InvalidData,
                    format!(
                        "checkpoint file is corrupt: crc32c {crc:#010x}, the manifest says {:#010x}",
                        entry.crc32c
                    ),
                )
                .into());
            }
            Ok(bytes)
        })
    }
}

/// Where a file of a manifest in `dir` is: in `dir` itself, or for a file shared with an
/// earlier checkpoint, in that checkpoint's directory beside `dir`.
pub(crate) fn file_path(dir: &Path, manifest: &Manifest, entry: &FileEntry) -> Path {
    if entry.checkpoint_id == manifest.checkpoint_id {
        join(dir, &entry.name)
    } else {
        join(&sibling_dir(dir, entry.checkpoint_id), &entry.name)
    }
}

/// Why a checkpoint cannot be used.
pub(crate) enum Problem {
    /// It is corrupt or partial: try the one before.
    Unusable {
        reason: String,
        /// Whether it got as far as a manifest (a checkpoint without one never completed).
        had_manifest: bool,
    },
    /// Storage failed: do not fall back to older state because of it.
    Storage(SpateError),
}

impl From<SpateError> for Problem {
    fn from(e: SpateError) -> Self {
        Problem::Storage(e)
    }
}

impl Problem {
    fn unusable(reason: impl Into<String>) -> Self {
        Problem::Unusable {
            reason: reason.into(),
            had_manifest: true,
        }
    }

    pub(crate) fn into_error(self, loc: &StorageLocation, dir: &Path) -> SpateError {
        match self {
            Problem::Storage(e) => e,
            Problem::Unusable { reason, .. } => Failure::new(
                loc.describe(dir),
                io::ErrorKind::InvalidData,
                format!("not a usable checkpoint or savepoint: {reason}"),
            )
            .to_error(),
        }
    }
}

/// Checks the checkpoint or savepoint in `dir`: its manifest, and each file's existence and
/// size, and with [`Verification::Checksums`] each file's CRC-32C.
pub(crate) async fn validate(
    loc: &StorageLocation,
    dir: &Path,
    expected_id: Option<u64>,
    verification: Verification,
) -> Result<Manifest, Problem> {
    let manifest = match read_manifest(loc, dir).await? {
        ManifestRead::Ok(m) => m,
        ManifestRead::Missing => {
            return Err(Problem::Unusable {
                reason: "no manifest (it never completed)".to_owned(),
                had_manifest: false,
            })
        }
        ManifestRead::Corrupt(why) => return Err(Problem::unusable(why)),
    };
    if let Some(id) = expected_id.filter(|&id| id != manifest.checkpoint_id) {
        return Err(Problem::unusable(format!(
            "manifest is for checkpoint {}, not {id}",
            manifest.checkpoint_id
        )));
    }
    if expected_id.is_some() && manifest.kind != CheckpointKind::Checkpoint {
        return Err(Problem::unusable("a savepoint manifest among checkpoints"));
    }

    // Existence and sizes: one listing per directory involved.
    let mut listings: BTreeMap<u64, BTreeMap<String, u64>> = BTreeMap::new();
    for f in &manifest.files {
        let listing = match listings.entry(f.checkpoint_id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let owner_dir = if f.checkpoint_id == manifest.checkpoint_id {
                    dir.clone()
                } else {
                    sibling_dir(dir, f.checkpoint_id)
                };
                e.insert(list_files(loc, &owner_dir).await?)
            }
        };
        let owner = if f.checkpoint_id == manifest.checkpoint_id {
            String::new()
        } else {
            format!(" (shared from {})", checkpoint_dir_name(f.checkpoint_id))
        };
        match listing.get(&f.name) {
            None => {
                return Err(Problem::unusable(format!(
                    "file {}{owner} is missing",
                    f.name
                )))
            }
            Some(&size) if size != f.size_bytes => {
                return Err(Problem::unusable(format!(
                    "file {}{owner} has {size} bytes, the manifest says {}",
                    f.name, f.size_bytes
                )))
            }
            Some(_) => {}
        }
    }

    if verification == Verification::Checksums {
        let checks = manifest.files.iter().map(|f| {
            let path = file_path(dir, &manifest, f);
            async move {
                let crc = checksum(loc, &path).await?;
                Ok::<_, Problem>((f, crc))
            }
        });
        let mut results = futures::stream::iter(checks).buffer_unordered(VERIFY_CONCURRENCY);
        while let Some((f, crc)) = results.try_next().await? {
            match crc {
                None => return Err(Problem::unusable(format!("file {} is missing", f.name))),
                Some(crc) if crc != f.crc32c => {
                    return Err(Problem::unusable(format!(
                    "file {} fails its checksum (crc32c {crc:#010x}, the manifest says {:#010x})",
                    f.name, f.crc32c
                )))
                }
                Some(_) => {}
            }
        }
    }
    Ok(manifest)
}

/// The CRC-32C of the object at `path`, read as a stream so that memory stays bounded; `None`
/// if it does not exist.
async fn checksum(loc: &StorageLocation, path: &Path) -> Result<Option<u32>, Problem> {
    let fail = |e: object_store::Error| {
        Problem::Storage(
            Failure::store("cannot read checkpoint file", loc.describe(path), &e).to_error(),
        )
    };
    let mut stream = match loc.store().get(path).await {
        Ok(got) => got.into_stream(),
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(fail(e)),
    };
    let mut crc = 0u32;
    while let Some(chunk) = stream.try_next().await.map_err(fail)? {
        crc = crc32c::crc32c_append(crc, &chunk);
    }
    Ok(Some(crc))
}

/// The newest usable checkpoint under the storage's root, with its directory.
pub(crate) async fn latest_complete(shared: &Shared) -> SpateResult<Option<(Manifest, Path)>> {
    let loc = &shared.location;
    let verification = shared.config.verification;
    let ids = list_checkpoint_ids(loc).await?;
    let mut skipped: Vec<(u64, String, bool)> = Vec::new();
    for &id in &ids {
        let dir = loc.path(&checkpoint_dir_name(id));
        match validate(loc, &dir, Some(id), verification).await {
            Ok(manifest) => return Ok(Some((manifest, dir))),
            Err(Problem::Storage(e)) => return Err(e),
            Err(Problem::Unusable {
                reason,
                had_manifest,
            }) => {
                warn!(
                    checkpoint = id,
                    location = %loc.describe(&dir),
                    reason = %reason,
                    "skipping a corrupt or partial checkpoint"
                );
                skipped.push((id, reason, had_manifest));
            }
        }
    }
    if skipped.is_empty() {
        return Ok(None);
    }
    let summary = skipped
        .iter()
        .map(|(id, reason, _)| format!("{}: {reason}", checkpoint_dir_name(*id)))
        .collect::<Vec<_>>()
        .join("; ");
    if skipped.iter().any(|(_, _, had_manifest)| *had_manifest) {
        return Err(Failure::new(
            loc.describe(loc.prefix()),
            io::ErrorKind::InvalidData,
            format!(
                "no usable checkpoint: {} checkpoint(s) found, all corrupt or partial ({summary}); \
                 refusing to start from empty state (restore a savepoint, or point the job at an empty checkpoint location)",
                skipped.len()
            ),
        )
        .to_error());
    }
    warn!(
        location = %loc.describe(loc.prefix()),
        checkpoints = %summary,
        "no checkpoint ever completed here; starting without state"
    );
    Ok(None)
}
