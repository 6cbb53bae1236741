//! Helpers: storages, deterministic payloads, a store that fails or holds on demand, a warning
//! catcher.

use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};
use spate_checkpoint::{
    CheckpointConfig, CheckpointInfo, CheckpointStorage, CompletedCheckpoint, StorageLocation,
};

pub const INFO: CheckpointInfo = CheckpointInfo {
    max_parallelism: 128,
    workers: 2,
};

/// Storage in a fresh `memory://` store.
pub fn memory(config: CheckpointConfig) -> CheckpointStorage {
    CheckpointStorage::open("memory://", config).unwrap()
}

/// Retaining `n` checkpoints, other settings default.
pub fn retaining(n: usize) -> CheckpointConfig {
    CheckpointConfig {
        retained: n,
        ..CheckpointConfig::default()
    }
}

/// Deterministic bytes for file `name` of checkpoint `id`, of a length that depends on both.
pub fn payload(id: u64, name: &str) -> Bytes {
    let seed = name
        .bytes()
        .fold(id.wrapping_mul(0x9E37_79B9_7F4A_7C15), |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
        });
    let len = 16 + (seed % 200) as usize;
    (0..len)
        .map(|i| (seed >> (i % 8 * 8)) as u8 ^ i as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Writes checkpoint `id` with `names` (contents from [`payload`]) and completes it.
pub fn checkpoint(storage: &CheckpointStorage, id: u64, names: &[&str]) -> CompletedCheckpoint {
    let w = storage.begin(id, INFO).unwrap();
    for name in names {
        w.put(*name, payload(id, name)).unwrap();
    }
    w.complete(serde_json::json!({ "sources": { "gen": id * 1000 } }))
        .wait()
        .unwrap()
}

/// Runs `f` on the store of `storage` on a small runtime of its own.
pub fn with_store<T>(
    loc: &StorageLocation,
    f: impl AsyncFnOnce(&dyn ObjectStore, &Path) -> T,
) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f(loc.store().as_ref(), loc.prefix()))
}

/// `root/relative` in the store.
pub fn path(root: &Path, relative: &str) -> Path {
    relative
        .split('/')
        .fold(root.clone(), |p, segment| p.join(segment))
}

/// Replaces the object `relative` with `change(its bytes)`, or deletes it when `change` gives
/// `None`.
pub fn tamper(
    loc: &StorageLocation,
    relative: &str,
    change: impl FnOnce(Vec<u8>) -> Option<Vec<u8>>,
) {
    with_store(loc, async |store, root| {
        let p = path(root, relative);
        let old = store.get(&p).await.unwrap().bytes().await.unwrap().to_vec();
        match change(old) {
            Some(new) => {
                store.put(&p, PutPayload::from(new)).await.unwrap();
            }
            None => store.delete(&p).await.unwrap(),
        }
    })
}

/// Whether the object `relative` exists.
pub fn exists(loc: &StorageLocation, relative: &str) -> bool {
    with_store(loc, async |store, root| {
        store.head(&path(root, relative)).await.is_ok()
    })
}

/// Every object below the location, relative names, sorted.
pub fn objects(loc: &StorageLocation) -> Vec<String> {
    with_store(loc, async |store, root| {
        let mut names: Vec<String> = store
            .list(Some(root))
            .map(|m| {
                let m = m.unwrap();
                m.location
                    .prefix_match(root)
                    .unwrap()
                    .map(|p| p.as_ref().to_owned())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect()
            .await;
        names.sort();
        names
    })
}

/// Which operations a [`FailingStore`] rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Put,
    Get,
}

struct Rule {
    op: Op,
    path_contains: String,
    kind: io::ErrorKind,
    message: String,
}

/// An in-memory store that injects I/O errors on chosen operations, and can hold puts until
/// released (to watch a writer with uploads in flight).
pub struct FailingStore {
    inner: InMemory,
    rules: Mutex<Vec<Rule>>,
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
    pub fn new() -> Arc<Self> {
        Arc::new(FailingStore {
            inner: InMemory::new(),
            rules: Mutex::new(Vec::new()),
            gate: tokio::sync::watch::Sender::new(true),
        })
    }

    /// From now on, `op` on any path containing `path_contains` fails with `kind` / `message`.
    pub fn fail(&self, op: Op, path_contains: &str, kind: io::ErrorKind, message: &str) {
        self.rules.lock().unwrap().push(Rule {
            op,
            path_contains: path_contains.to_owned(),
            kind,
            message: message.to_owned(),
        });
    }

    /// No more injected failures.
    pub fn heal(&self) {
        self.rules.lock().unwrap().clear();
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
        let rules = self.rules.lock().unwrap();
        match rules
            .iter()
            .find(|r| r.op == op && location.as_ref().contains(&r.path_contains))
        {
            Some(r) => Err(object_store::Error::Generic {
                store: "FailingStore",
                source: Box::new(io::Error::new(r.kind, r.message.clone())),
            }),
            None => Ok(()),
        }
    }

    /// A storage location over this store, named `failing://` in messages.
    pub fn location(self: &Arc<Self>) -> StorageLocation {
        StorageLocation::from_store(Arc::clone(self) as Arc<dyn ObjectStore>, "", "failing://")
            .unwrap()
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
        gate.wait_for(|open| *open).await.unwrap();
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

/// Runs `f` with a subscriber that records WARN and above on this thread; returns what `f`
/// returned and the log text.
pub fn capture_warnings<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl io::Write for Buf {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    (out, text)
}
