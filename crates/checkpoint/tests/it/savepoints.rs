//! Savepoints: user-owned, self-contained, never deleted by retention.

use spate_checkpoint::{CheckpointConfig, CheckpointKind, CheckpointStorage};

use crate::common::{checkpoint, exists, memory, payload, retaining, INFO};

#[test]
fn a_savepoint_survives_retention_and_restores() {
    let storage = memory(retaining(1));
    checkpoint(&storage, 1, &["a.bin"]);
    let target = storage.location().child("savepoints/sp-2").unwrap();
    let w = storage.begin_savepoint(&target, 2, INFO).unwrap();
    w.put("worker-0/a.bin", payload(2, "worker-0/a.bin"))
        .unwrap();
    let done = w
        .complete(serde_json::json!({"sources": {"gen": 2000}}))
        .wait()
        .unwrap();
    assert_eq!(done.manifest.kind, CheckpointKind::Savepoint);
    assert!(done.retention.is_none());
    assert_eq!(done.location, "memory:///savepoints/sp-2/_manifest.json");

    for id in 3..=6 {
        checkpoint(&storage, id, &["a.bin"]);
    }
    assert!(exists(storage.location(), "savepoints/sp-2/_manifest.json"));
    assert!(exists(storage.location(), "savepoints/sp-2/worker-0/a.bin"));

    let sp = storage.restore_from(&target).unwrap();
    assert_eq!(sp.id(), 2);
    assert_eq!(sp.metadata()["sources"]["gen"], 2000);
    assert_eq!(
        sp.read("worker-0/a.bin").unwrap(),
        payload(2, "worker-0/a.bin")
    );
    // The latest checkpoint is still the newest periodic one.
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 6);
}

#[test]
fn export_makes_a_self_contained_savepoint_elsewhere() {
    let storage = memory(CheckpointConfig::default());
    let c1 = checkpoint(&storage, 1, &["worker-0/base.sst"]);
    let w = storage.begin(2, INFO).unwrap();
    w.add_existing(c1.manifest.file("worker-0/base.sst").unwrap().clone())
        .unwrap();
    w.put("worker-0/delta.sst", payload(2, "worker-0/delta.sst"))
        .unwrap();
    w.complete(serde_json::json!({"offset": 42}))
        .wait()
        .unwrap();
    let latest = storage.latest_complete().unwrap().unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("savepoint-1");
    let target = storage.parse_location(dir.to_str().unwrap()).unwrap();
    let done = storage.export_savepoint(&latest, &target).unwrap();
    assert_eq!(done.manifest.kind, CheckpointKind::Savepoint);
    assert!(done.manifest.files.iter().all(|f| f.checkpoint_id == 2));
    assert!(dir.join("worker-0/base.sst").is_file());
    assert!(dir.join("_manifest.json").is_file());

    // Restorable by path, from a storage that has never seen the checkpoints.
    let elsewhere = CheckpointStorage::open("memory://", CheckpointConfig::default()).unwrap();
    let location = elsewhere.parse_location(dir.to_str().unwrap()).unwrap();
    let sp = elsewhere.restore_from(&location).unwrap();
    assert_eq!(sp.metadata()["offset"], 42);
    assert_eq!(
        sp.read("worker-0/base.sst").unwrap(),
        payload(1, "worker-0/base.sst")
    );
    assert_eq!(
        sp.read("worker-0/delta.sst").unwrap(),
        payload(2, "worker-0/delta.sst")
    );

    // A second savepoint into the same place is refused.
    let err = storage.export_savepoint(&latest, &target).unwrap_err();
    assert!(
        err.to_string().contains("already holds a savepoint"),
        "{err}"
    );
}

#[test]
fn a_checkpoint_directory_can_be_restored_by_path() {
    let storage = memory(CheckpointConfig::default());
    let c1 = checkpoint(&storage, 1, &["worker-0/base.sst"]);
    let w = storage.begin(2, INFO).unwrap();
    w.add_existing(c1.manifest.file("worker-0/base.sst").unwrap().clone())
        .unwrap();
    w.complete(serde_json::Value::Null).wait().unwrap();
    checkpoint(&storage, 3, &["x.bin"]);

    let chk2 = storage.location().child("chk-2").unwrap();
    let c = storage.restore_from(&chk2).unwrap();
    assert_eq!(c.id(), 2);
    assert_eq!(c.manifest().kind, CheckpointKind::Checkpoint);
    assert_eq!(
        c.read("worker-0/base.sst").unwrap(),
        payload(1, "worker-0/base.sst")
    );
}

#[test]
fn a_missing_or_misplaced_savepoint_is_an_error() {
    let storage = memory(CheckpointConfig::default());
    let nowhere = storage.location().child("savepoints/none").unwrap();
    let err = storage.restore_from(&nowhere).unwrap_err();
    assert_eq!(
        err.to_string(),
        "memory:///savepoints/none: not a usable checkpoint or savepoint: no manifest (it never completed)"
    );
    let inside = storage.location().child("chk-9").unwrap();
    assert!(storage.begin_savepoint(&inside, 9, INFO).is_err());
}
