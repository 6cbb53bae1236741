//! An object store that fails on demand, for testing jobs against storage failures.
//!
//! [`FailingStore`] keeps objects in memory and injects I/O errors on the operations and paths
//! a test chooses (a full disk on one checkpoint's files, a read error during restore), for
//! ever or a given number of times; it can also hold uploads until released, to watch a
//! checkpoint with uploads in flight. Register it under a scheme with
//! [`register_store`](crate::register_store) to point a job's checkpoint directory at it:
//!
//! ```
//! use spate_checkpoint::faults::{FailingStore, Op};
//!
//! let store = FailingStore::new();
//! spate_checkpoint::register_store("flaky-doc", store.location());
//! // A job with `checkpoint_dir = "flaky-doc://job"` now checkpoints into `store`, whose
//! // third checkpoint cannot be written:
//! store.fail(Op::Put, "chk-3/", std::io::ErrorKind::StorageFull, "No space left on device");
//! ```

use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

use crate::location::StorageLocation;

/// Which operations a [`FailingStore`] rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Writes (uploads, manifests).
    Put,
    /// Reads (restore, verification).
    Get,
}

struct Rule {
    op: Op,
    path_contains: String,
    kind: io::ErrorKind,
    message: String,
    /// How many more times the rule fires; `None`: always.
    remaining: Option<usize>,
}

/// An in-memory store that injects I/O errors on chosen operations, and can hold puts until
/// released (to watch a writer with uploads in flight).
pub struct FailingStore {
    inner: InMemory,
    rules: Mutex<Vec<Rule>>,
    fired: Mutex<usize>,
    gate: tokio::sync::watch::Sender<bool>,
}

impl fmt::Debug for FailingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FailingStore")
    }
}

impl fmt::Display for FailingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FailingStore")
    }
}

impl FailingStore {
    /// An empty store with no failures.
    pub fn new() -> Arc<Self> {
        Arc::new(FailingStore {
            inner: InMemory::new(),
            rules: Mutex::new(Vec::new()),
            fired: Mutex::new(0),
            gate: tokio::sync::watch::Sender::new(true),
        })
    }

    /// From now on, `op` on any path containing `path_contains` fails with `kind` / `message`.
    pub fn fail(&self, op: Op, path_contains: &str, kind: io::ErrorKind, message: &str) {
        self.add_rule(op, path_contains, kind, message, None);
    }

    /// The next `times` of `op` on paths containing `path_contains` fail; later ones succeed.
    pub fn fail_times(
        &self,
        op: Op,
        path_contains: &str,
        times: usize,
        kind: io::ErrorKind,
        message: &str,
    ) {
        self.add_rule(op, path_contains, kind, message, Some(times));
    }

    fn add_rule(
        &self,
        op: Op,
        path_contains: &str,
        kind: io::ErrorKind,
        message: &str,
        remaining: Option<usize>,
    ) {
        self.rules().push(Rule {
            op,
            path_contains: path_contains.to_owned(),
            kind,
            message: message.to_owned(),
            remaining,
        });
    }

    fn rules(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        self.rules.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// No more injected failures.
    pub fn heal(&self) {
        self.rules().clear();
    }

    /// How many injected failures have fired so far.
    pub fn failures(&self) -> usize {
        *self.fired.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts wait until [`release_puts`](Self::release_puts).
    pub fn hold_puts(&self) {
        self.gate.send_replace(false);
    }

    /// Lets held and later puts through.
    pub fn release_puts(&self) {
        self.gate.send_replace(true);
    }

    fn check(&self, op: Op, location: &Path) -> object_store::Result<()> {
        let mut rules = self.rules();
        let Some(rule) = rules.iter_mut().find(|r| {
            r.op == op && r.remaining != Some(0) && location.as_ref().contains(&r.path_contains)
        }) else {
            return Ok(());
        };
        if let Some(n) = rule.remaining.as_mut() {
            *n -= 1;
        }
        *self.fired.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Err(object_store::Error::Generic {
            store: "FailingStore",
            source: Box::new(io::Error::new(rule.kind, rule.message.clone())),
        })
    }

    /// A storage location over this store, named `failing://` in messages.
    pub fn location(self: &Arc<Self>) -> StorageLocation {
        StorageLocation::from_store(Arc::clone(self) as Arc<dyn ObjectStore>, "", "failing://")
            .expect("the empty prefix is valid")
    }
}

#[async_trait]
impl ObjectStore for FailingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let mut gate = self.gate.subscribe();
        // The sender lives in `self`: waiting cannot fail while the store exists.
        let _ = gate.wait_for(|open| *open).await;
        self.check(Op::Put, location)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.check(Op::Put, location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.check(Op::Get, location)?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.check(Op::Get, location)?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
