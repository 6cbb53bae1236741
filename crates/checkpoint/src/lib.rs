//! Checkpoint storage for Spate: where epoch-aligned snapshots go, and where recovery finds
//! them.
//!
//! The engine snapshots state at an epoch on every worker; this crate stores those snapshots
//! and gives them back. It knows nothing of timely, operators or key groups beyond two
//! numbers it records; the engine decides what the files contain.
//!
//! ```text
//!  workers (many threads)           CheckpointStorage (own tokio runtime, io_threads)        object_store
//!  ──────────────────────           ─────────────────────────────────────────────────        ────────────
//!  writer.put(name, bytes) ──spawn──▶ crc32c, put <root>/chk-<id>/<name> ────────────────▶ local dir
//!    (returns at once)                                                                      memory://
//!  writer.poll() / wait()  ◀──────── in flight, durable, first failure                      s3:// gs:// az://
//!  writer.complete(meta)   ──spawn──▶ all durable? shared files there? put _manifest.json (atomic)
//!  pending.poll() / wait() ◀──────── CompletedCheckpoint { duration, size }, then retention
//!
//!  recovery: storage.latest_complete() ─▶ newest chk-<id> whose manifest and files check out
//!            checkpoint.read(name)     ─▶ bytes, checksum verified
//! ```
//!
//! # Layout
//!
//! ```text
//! <root>/chk-<id>/<name>            state files, e.g. chk-7/worker-3/op-window-7/kg-0012.bin
//! <root>/chk-<id>/_manifest.json    written last, once every file is durable
//! <savepoint>/<name>                a savepoint: the same layout in a location of its own,
//! <savepoint>/_manifest.json        self-contained, never deleted by retention
//! ```
//!
//! The manifest ([`Manifest`]) lists every file with its size, CRC-32C and owning checkpoint
//! (an incremental checkpoint refers to files of earlier ones), the max parallelism, the number
//! of workers, the creation time and the engine's metadata (source positions), and carries a
//! checksum of itself. It is written with a single `put`, which `object_store` makes atomic on
//! every backend (a local directory writes a temporary file and renames it; cloud stores
//! publish an object only whole), so a checkpoint is complete exactly when its manifest is
//! there and valid.
//!
//! # Guarantees
//!
//! - A worker never blocks on storage: [`CheckpointWriter::put`] spawns the upload.
//! - A manifest is written only after every file it lists is durable, and never if an upload
//!   failed. Storage errors are one-line [`SpateError`](spate_types::SpateError)s naming the
//!   location and the operation, such as
//!   `/ckpt/chk-7/worker-3/a.bin: cannot write checkpoint file: No space left on device (os error 28)`.
//! - Restore ([`CheckpointStorage::latest_complete`]) skips corrupt or partial checkpoints with
//!   a warning and falls back to the previous one; when checkpoints exist but none is usable,
//!   it is an error, never a silent start from empty state.
//! - Retention keeps the newest [`CheckpointConfig::retained`] complete checkpoints and never
//!   deletes a file that a retained checkpoint or a checkpoint being written refers to.
//! - [`TolerableFailures`] decides when failed checkpoints fail the job.

mod config;
mod error;
pub mod faults;
mod location;
mod manifest;
mod policy;
mod restore;
mod retention;
mod storage;
mod writer;

pub use config::{CheckpointConfig, Verification};
pub use location::{register_store, StorageLocation};
pub use manifest::{CheckpointKind, FileEntry, Manifest, MANIFEST_FILE, MANIFEST_VERSION};
pub use policy::TolerableFailures;
pub use restore::Checkpoint;
pub use retention::RetentionReport;
pub use storage::{CheckpointInfo, CheckpointStorage, ListedCheckpoint};
pub use writer::{CheckpointWriter, CompletedCheckpoint, PendingCompletion, WriteProgress};

/// Re-exported so that callers can build a [`StorageLocation`] around their own store.
pub use object_store;

#[cfg(test)]
mod tests {
    /// The engine shares these across worker threads.
    #[test]
    fn handles_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<super::CheckpointStorage>();
        send_sync::<super::CheckpointWriter>();
        send_sync::<super::Checkpoint>();
        send_sync::<super::StorageLocation>();
        send::<super::PendingCompletion>();
        send::<super::CompletedCheckpoint>();
    }
}
