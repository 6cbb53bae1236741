//! Helpers: storages, deterministic payloads, a store that fails or holds on demand, a warning
//! catcher.

use std::io;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
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
