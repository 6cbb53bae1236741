//! Retention keeps the newest complete checkpoints and every file they refer to.

use spate_checkpoint::{CheckpointConfig, CheckpointStorage};

use crate::common::{checkpoint, exists, memory, objects, payload, retaining, INFO};

fn ids(storage: &CheckpointStorage) -> Vec<u64> {
    storage.list().unwrap().iter().map(|c| c.id).collect()
}

#[test]
fn keeps_the_newest_n_complete_checkpoints() {
    let storage = memory(retaining(2));
    for id in 1..=5 {
        checkpoint(&storage, id, &["worker-0/a.bin", "worker-1/b.bin"]);
    }
    assert_eq!(ids(&storage), vec![5, 4]);
    assert_eq!(
        objects(storage.location()),
        [
            "chk-4/_manifest.json",
            "chk-4/worker-0/a.bin",
            "chk-4/worker-1/b.bin",
            "chk-5/_manifest.json",
            "chk-5/worker-0/a.bin",
            "chk-5/worker-1/b.bin",
        ]
    );
}

#[test]
fn the_default_keeps_three() {
    assert_eq!(CheckpointConfig::default().retained, 3);
    let storage = memory(CheckpointConfig::default());
    let mut last = None;
    for id in 1..=6 {
        last = Some(checkpoint(&storage, id, &["a.bin"]));
    }
    let report = last.unwrap().retention.unwrap();
    assert_eq!(report.retained, vec![6, 5, 4]);
    assert_eq!(report.deleted, vec![3]);
    assert_eq!(ids(&storage), vec![6, 5, 4]);
}

#[test]
fn shared_files_live_as_long_as_a_retained_checkpoint_refers_to_them() {
    let storage = memory(retaining(1));
    let c1 = checkpoint(&storage, 1, &["worker-0/base.sst", "worker-0/old.sst"]);
    let base = c1.manifest.file("worker-0/base.sst").unwrap().clone();

    // Checkpoint 2 shares base.sst of checkpoint 1.
    let w = storage.begin(2, INFO).unwrap();
    w.add_existing(base.clone()).unwrap();
    w.put("worker-0/d2.sst", payload(2, "worker-0/d2.sst"))
        .unwrap();
    let c2 = w.complete(serde_json::Value::Null).wait().unwrap();
    let report = c2.retention.unwrap();
    assert_eq!(report.retained, vec![2]);
    assert_eq!(report.deleted, vec![1]);
    assert_eq!((report.files_deleted, report.shared_files_kept), (1, 1));
    assert!(exists(storage.location(), "chk-1/worker-0/base.sst"));
    assert!(!exists(storage.location(), "chk-1/worker-0/old.sst"));
    assert!(!exists(storage.location(), "chk-1/_manifest.json"));

    // Checkpoint 3 shares it on (the entry still names checkpoint 1).
    let shared = c2.manifest.file("worker-0/base.sst").unwrap().clone();
    assert_eq!(shared.checkpoint_id, 1);
    let w = storage.begin(3, INFO).unwrap();
    w.add_existing(shared).unwrap();
    let c3 = w.complete(serde_json::Value::Null).wait().unwrap();
    assert_eq!(c3.retention.unwrap().deleted, vec![2]);
    let restored = storage.latest_complete().unwrap().unwrap();
    assert_eq!(restored.id(), 3);
    assert_eq!(
        restored.read("worker-0/base.sst").unwrap(),
        payload(1, "worker-0/base.sst")
    );

    // Checkpoint 4 no longer refers to it: now it goes.
    checkpoint(&storage, 4, &["worker-0/full.sst"]);
    assert!(!exists(storage.location(), "chk-1/worker-0/base.sst"));
    assert_eq!(
        objects(storage.location()),
        ["chk-4/_manifest.json", "chk-4/worker-0/full.sst"]
    );
}

#[test]
fn a_file_that_a_checkpoint_in_progress_refers_to_is_not_deleted() {
    let storage = memory(retaining(1));
    let c1 = checkpoint(&storage, 1, &["worker-0/base.sst"]);
    // Checkpoint 3 starts and refers to base.sst of checkpoint 1...
    let w2 = storage.begin(2, INFO).unwrap();
    let w3 = storage.begin(3, INFO).unwrap();
    w3.add_existing(c1.manifest.file("worker-0/base.sst").unwrap().clone())
        .unwrap();
    // ...while checkpoint 2, which does not, completes and retires checkpoint 1.
    w2.put("worker-0/other.sst", payload(2, "other")).unwrap();
    let report = w2
        .complete(serde_json::Value::Null)
        .wait()
        .unwrap()
        .retention
        .unwrap();
    assert_eq!(report.deleted, vec![1]);
    assert_eq!(report.shared_files_kept, 1);
    assert!(exists(storage.location(), "chk-1/worker-0/base.sst"));
    // So checkpoint 3 can complete, and restores.
    w3.complete(serde_json::Value::Null).wait().unwrap();
    let c = storage.latest_complete().unwrap().unwrap();
    assert_eq!(c.id(), 3);
    assert_eq!(
        c.read("worker-0/base.sst").unwrap(),
        payload(1, "worker-0/base.sst")
    );
}

#[test]
fn incomplete_checkpoints_older_than_the_newest_complete_one_are_garbage() {
    let storage = memory(retaining(3));
    checkpoint(&storage, 1, &["a.bin"]);
    // Checkpoint 2 never completes; its writer is still alive at first.
    let w2 = storage.begin(2, INFO).unwrap();
    w2.put("a.bin", payload(2, "a.bin")).unwrap();
    w2.wait().unwrap();
    checkpoint(&storage, 3, &["a.bin"]);
    assert!(
        exists(storage.location(), "chk-2/a.bin"),
        "a live writer's checkpoint is left alone"
    );
    drop(w2);
    let report = storage.apply_retention().unwrap();
    assert_eq!(report.retained, vec![3, 1]);
    assert_eq!(report.deleted, vec![2]);
    assert!(!exists(storage.location(), "chk-2/a.bin"));

    // A checkpoint newer than the newest complete one may be in progress elsewhere (another
    // process): it is left alone.
    let other = CheckpointStorage::new(storage.location().clone(), retaining(3)).unwrap();
    let w5 = other.begin(5, INFO).unwrap();
    w5.put("a.bin", payload(5, "a.bin")).unwrap();
    w5.wait().unwrap();
    checkpoint(&storage, 4, &["a.bin"]);
    assert!(exists(storage.location(), "chk-5/a.bin"));
    w5.complete(serde_json::Value::Null).wait().unwrap();
    assert_eq!(ids(&storage), vec![5, 4, 3]);
}

#[test]
fn retention_in_a_directory_leaves_no_empty_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = CheckpointStorage::open(tmp.path().to_str().unwrap(), retaining(1)).unwrap();
    checkpoint(
        &storage,
        1,
        &["worker-0/op-1/kg-0.bin", "worker-1/op-1/kg-64.bin"],
    );
    checkpoint(&storage, 2, &["worker-0/op-1/kg-0.bin"]);
    let mut entries: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    entries.sort();
    assert_eq!(entries, ["chk-2"]);
}
