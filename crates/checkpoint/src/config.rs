//! Settings of checkpoint storage.

/// How thoroughly a checkpoint is checked before it is offered for restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verification {
    /// The manifest parses and its own checksum holds, and every file it lists exists with the
    /// size it records. Cheap: one listing per checkpoint directory. A flipped byte inside a
    /// state file is then only caught by [`Checkpoint::read`](crate::Checkpoint::read).
    Sizes,
    /// As `Sizes`, and every file is read back and its CRC-32C compared with the manifest, so a
    /// checkpoint with a damaged file is skipped before any state is restored from it. Costs one
    /// extra read of the checkpoint at restore time, which is rare.
    #[default]
    Checksums,
}

/// Settings of [`CheckpointStorage`](crate::CheckpointStorage).
#[derive(Debug, Clone)]
pub struct CheckpointConfig {
    /// How many complete checkpoints to keep (at least 1). Default 3.
    ///
    /// Flink keeps 1 by default; Spate keeps 3 so that a checkpoint found corrupt at restore time
    /// has a complete predecessor to fall back to.
    pub retained: usize,
    /// Threads of the storage's own tokio runtime that run uploads, downloads and deletes.
    /// Default 2: uploads wait on the disk or the network, not on the CPU.
    pub io_threads: usize,
    /// Uploads in flight at once per storage (a bound on open connections and file handles).
    /// Further puts queue in order. Default 16.
    pub max_concurrent_uploads: usize,
    /// How [`CheckpointStorage::latest_complete`](crate::CheckpointStorage::latest_complete) and
    /// savepoint restore check a checkpoint. Default [`Verification::Checksums`].
    pub verification: Verification,
    /// For a local directory: fsync each file and its directory before a write counts as done,
    /// so that a checkpoint survives a power loss, not only a crash of the process. Default true.
    pub fsync: bool,
    /// Options for cloud stores, passed to `object_store`'s builders after the environment
    /// (`AWS_*`, `GOOGLE_*`, `AZURE_*` variables) is read: for example
    /// `("aws_endpoint", "http://127.0.0.1:9000")` and `("aws_allow_http", "true")` for an
    /// S3-compatible server. Keys are the builders' configuration keys; an unknown key is an error.
    pub storage_options: Vec<(String, String)>,
}

impl Default for CheckpointConfig {
    fn default() -> Self {
        CheckpointConfig {
            retained: 3,
            io_threads: 2,
            max_concurrent_uploads: 16,
            verification: Verification::default(),
            fsync: true,
            storage_options: Vec::new(),
        }
    }
}
