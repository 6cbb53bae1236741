//! Write, complete, find and read back, in memory and in a directory.

use std::time::Duration;

use bytes::Bytes;
use spate_checkpoint::{
    CheckpointConfig, CheckpointKind, CheckpointStorage, FileEntry, Manifest, MANIFEST_FILE,
};

use spate_checkpoint::faults::FailingStore;

use crate::common::{checkpoint, exists, memory, payload, INFO};

const NAMES: [&str; 3] = [
    "worker-0/op-window-7/kg-0000.bin",
    "worker-1/op-window-7/kg-0064.bin",
    "worker-1/source-0/split-3.bin",
];

fn assert_round_trip(storage: &CheckpointStorage) {
    let done = checkpoint(storage, 1, &NAMES);
    let expected_size: u64 = NAMES.iter().map(|n| payload(1, n).len() as u64).sum();
    assert_eq!(done.total_size_bytes, expected_size);
    assert_eq!(done.uploaded_bytes, expected_size);
    assert!(done.duration > Duration::ZERO);
    assert!(
        done.location.ends_with("chk-1/_manifest.json"),
        "{}",
        done.location
    );

    let restored = storage.latest_complete().unwrap().expect("a checkpoint");
    assert_eq!(restored.id(), 1);
    let m: &Manifest = restored.manifest();
    assert_eq!(m, &done.manifest);
    assert_eq!(m.kind, CheckpointKind::Checkpoint);
    assert_eq!((m.max_parallelism, m.workers), (128, 2));
    assert!(m.created_unix_ms > 1_600_000_000_000);
    assert_eq!(m.total_size_bytes, expected_size);
    assert_eq!(restored.metadata()["sources"]["gen"], 1000);
    let names: Vec<&str> = m.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, NAMES);
    for name in NAMES {
        assert_eq!(restored.read(name).unwrap(), payload(1, name));
        let entry = m.file(name).unwrap();
        assert_eq!(entry.checkpoint_id, 1);
        assert_eq!(entry.crc32c, crc32c::crc32c(&payload(1, name)));
    }
    assert!(restored.read("worker-9/none.bin").is_err());
    assert_eq!(storage.next_id().unwrap(), 2);
}

#[test]
fn round_trip_in_memory() {
    assert_round_trip(&memory(CheckpointConfig::default()));
}

#[test]
fn round_trip_in_a_directory_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    {
        let storage =
            CheckpointStorage::open(dir.to_str().unwrap(), CheckpointConfig::default()).unwrap();
        assert_round_trip(&storage);
    }
    // The layout on disk.
    assert!(dir.join("chk-1/worker-0/op-window-7/kg-0000.bin").is_file());
    let manifest = std::fs::read(dir.join("chk-1").join(MANIFEST_FILE)).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(json["manifest"]["files"].as_array().unwrap().len(), 3);

    // A new process opening the same directory finds the checkpoint.
    let url = format!("file://{}", dir.display());
    let again = CheckpointStorage::open(&url, CheckpointConfig::default()).unwrap();
    let restored = again.latest_complete().unwrap().unwrap();
    assert_eq!(restored.read(NAMES[2]).unwrap(), payload(1, NAMES[2]));
    assert_eq!(again.next_id().unwrap(), 2);
}

#[test]
fn an_empty_location_has_nothing_to_restore() {
    let storage = memory(CheckpointConfig::default());
    assert!(storage.latest_complete().unwrap().is_none());
    assert!(storage.list().unwrap().is_empty());
    assert_eq!(storage.next_id().unwrap(), 1);
}

#[test]
fn put_returns_while_the_upload_is_held() {
    let store = FailingStore::new();
    let storage = CheckpointStorage::new(store.location(), CheckpointConfig::default()).unwrap();
    store.hold_puts();
    let w = storage.begin(1, INFO).unwrap();
    for i in 0..20 {
        w.put(format!("worker-0/f-{i}.bin"), Bytes::from(vec![7u8; 100]))
            .unwrap();
    }
    let p = w.poll().unwrap();
    assert_eq!((p.files_in_flight, p.bytes_in_flight), (20, 2000));
    assert!(!p.is_settled());
    let mut pending = w.complete(serde_json::Value::Null);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        pending.poll().is_none(),
        "cannot complete while uploads are held"
    );
    assert!(!exists(storage.location(), "chk-1/_manifest.json"));

    store.release_puts();
    let done = w.wait().unwrap();
    assert_eq!((done.files_durable, done.bytes_durable), (20, 2000));
    let completed = loop {
        if let Some(result) = pending.poll() {
            break result.unwrap();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(completed.manifest.files.len(), 20);
    assert!(
        pending.poll().unwrap().is_err(),
        "the result is handed out once"
    );
}

#[test]
fn bad_names_double_puts_and_late_puts_are_refused() {
    let storage = memory(CheckpointConfig::default());
    let w = storage.begin(1, INFO).unwrap();
    for bad in ["", "/abs", "a/../b", "_manifest.json", "sp ace", "a//b"] {
        assert!(w.put(bad, Bytes::new()).is_err(), "{bad:?}");
    }
    w.put("a.bin", Bytes::from_static(b"x")).unwrap();
    let err = w.put("a.bin", Bytes::from_static(b"y")).unwrap_err();
    assert!(err.to_string().contains("added twice"), "{err}");
    w.complete(serde_json::Value::Null).wait().unwrap();
    assert!(w.put("b.bin", Bytes::new()).is_err());
    assert!(w.complete(serde_json::Value::Null).wait().is_err());
    // Ids increase.
    assert!(storage.begin(1, INFO).is_err());
    assert!(storage.begin(2, INFO).is_ok());
}

#[test]
fn an_empty_file_and_an_empty_checkpoint_round_trip() {
    let storage = memory(CheckpointConfig::default());
    let w = storage.begin(1, INFO).unwrap();
    w.complete(serde_json::json!({"empty": true}))
        .wait()
        .unwrap();
    let w = storage.begin(2, INFO).unwrap();
    w.put("worker-0/empty.bin", Bytes::new()).unwrap();
    w.complete(serde_json::Value::Null).wait().unwrap();
    let c = storage.latest_complete().unwrap().unwrap();
    assert_eq!(c.id(), 2);
    assert_eq!(c.read("worker-0/empty.bin").unwrap().len(), 0);
}

#[test]
fn incremental_checkpoint_reads_files_of_an_earlier_one() {
    let storage = memory(CheckpointConfig::default());
    let first = checkpoint(&storage, 1, &["worker-0/base.sst", "worker-0/old.sst"]);
    let w = storage.begin(2, INFO).unwrap();
    w.add_existing(first.manifest.file("worker-0/base.sst").unwrap().clone())
        .unwrap();
    w.put("worker-0/delta.sst", payload(2, "worker-0/delta.sst"))
        .unwrap();
    let done = w.complete(serde_json::Value::Null).wait().unwrap();
    let base_len = payload(1, "worker-0/base.sst").len() as u64;
    let delta_len = payload(2, "worker-0/delta.sst").len() as u64;
    assert_eq!(done.total_size_bytes, base_len + delta_len);
    assert_eq!(done.uploaded_bytes, delta_len);
    assert_eq!(
        done.manifest
            .file("worker-0/base.sst")
            .unwrap()
            .checkpoint_id,
        1
    );

    let c = storage.latest_complete().unwrap().unwrap();
    assert_eq!(c.id(), 2);
    assert_eq!(
        c.read("worker-0/base.sst").unwrap(),
        payload(1, "worker-0/base.sst")
    );
    assert_eq!(
        c.read("worker-0/delta.sst").unwrap(),
        payload(2, "worker-0/delta.sst")
    );
}

#[test]
fn referring_to_a_missing_file_fails_the_checkpoint() {
    let storage = memory(CheckpointConfig::default());
    checkpoint(&storage, 1, &["worker-0/a.bin"]);
    let w = storage.begin(2, INFO).unwrap();
    w.add_existing(FileEntry {
        name: "worker-0/gone.bin".into(),
        size_bytes: 10,
        crc32c: 0,
        checkpoint_id: 1,
    })
    .unwrap();
    let err = w.complete(serde_json::Value::Null).wait().unwrap_err();
    assert_eq!(
        err.to_string(),
        "memory:///chk-1/worker-0/gone.bin: checkpoint 2 refers to this file, but it is not in storage"
    );
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 1);
    // A later checkpoint cannot be referred to.
    let w = storage.begin(3, INFO).unwrap();
    assert!(w
        .add_existing(FileEntry {
            name: "x.bin".into(),
            size_bytes: 1,
            crc32c: 0,
            checkpoint_id: 4,
        })
        .is_err());
}

#[test]
fn files_from_two_processes_make_one_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    let leader = CheckpointStorage::open(dir, CheckpointConfig::default()).unwrap();
    let follower = CheckpointStorage::open(dir, CheckpointConfig::default()).unwrap();

    let remote = follower.begin(1, INFO).unwrap();
    remote
        .put("worker-1/state.bin", payload(1, "worker-1/state.bin"))
        .unwrap();
    remote.wait().unwrap();
    let entries = remote.durable_files();
    assert_eq!(entries.len(), 1);

    let local = leader.begin(1, INFO).unwrap();
    local
        .put("worker-0/state.bin", payload(1, "worker-0/state.bin"))
        .unwrap();
    for e in entries {
        local.add_existing(e).unwrap();
    }
    let done = local.complete(serde_json::Value::Null).wait().unwrap();
    assert_eq!(done.manifest.files.len(), 2);
    let c = follower.latest_complete().unwrap().unwrap();
    assert_eq!(
        c.read("worker-1/state.bin").unwrap(),
        payload(1, "worker-1/state.bin")
    );
}
