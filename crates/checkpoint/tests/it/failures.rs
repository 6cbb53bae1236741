//! Storage that fails: clear errors, no manifest, and the tolerable-failure policy.

use std::io::ErrorKind;

use bytes::Bytes;
use spate_checkpoint::{CheckpointConfig, CheckpointStorage, TolerableFailures};
use spate_types::ErrorDomain;

use spate_checkpoint::faults::{FailingStore, Op};

use crate::common::{checkpoint, exists, objects, payload, INFO};

fn failing() -> (std::sync::Arc<FailingStore>, CheckpointStorage) {
    let store = FailingStore::new();
    let storage = CheckpointStorage::new(store.location(), CheckpointConfig::default()).unwrap();
    (store, storage)
}

#[test]
fn a_full_disk_is_a_clear_error_and_no_checkpoint() {
    let (store, storage) = failing();
    checkpoint(&storage, 1, &["worker-0/a.bin"]);
    store.fail(
        Op::Put,
        "worker-1/",
        ErrorKind::StorageFull,
        "No space left on device",
    );

    let w = storage.begin(2, INFO).unwrap();
    w.put("worker-0/a.bin", payload(2, "a")).unwrap();
    // The put itself succeeds: the failure is the upload's.
    w.put("worker-1/b.bin", payload(2, "b")).unwrap();
    let expected =
        "failing:///chk-2/worker-1/b.bin: cannot write checkpoint file: No space left on device";
    let err = w.wait().unwrap_err();
    assert_eq!(err.to_string(), expected);
    assert_eq!(err.domain(), ErrorDomain::External);
    match &err {
        spate_types::SpateError::Io { source, .. } => {
            assert_eq!(source.kind(), ErrorKind::StorageFull)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(w.poll().unwrap_err().to_string(), expected);
    let err = w.complete(serde_json::Value::Null).wait().unwrap_err();
    assert_eq!(err.to_string(), expected);

    // No manifest, and what was uploaded is given back.
    assert!(!exists(storage.location(), "chk-2/_manifest.json"));
    assert!(!exists(storage.location(), "chk-2/worker-0/a.bin"));
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 1);
}

#[test]
fn a_refused_manifest_is_a_clear_error() {
    let (store, storage) = failing();
    store.fail(
        Op::Put,
        "_manifest.json",
        ErrorKind::PermissionDenied,
        "permission denied",
    );
    let w = storage.begin(1, INFO).unwrap();
    w.put("worker-0/a.bin", Bytes::from_static(b"abc")).unwrap();
    w.wait().unwrap();
    let err = w.complete(serde_json::Value::Null).wait().unwrap_err();
    assert_eq!(
        err.to_string(),
        "failing:///chk-1/_manifest.json: cannot write checkpoint manifest: permission denied"
    );
    assert!(objects(storage.location()).is_empty());
    assert!(storage.latest_complete().unwrap().is_none());
}

#[test]
fn the_job_fails_only_past_the_tolerable_failures() {
    let (store, storage) = failing();
    let mut policy = TolerableFailures::new(2);
    let mut attempt = |storage: &CheckpointStorage, id: u64| {
        let w = storage.begin(id, INFO).unwrap();
        w.put("worker-0/a.bin", payload(id, "a")).unwrap();
        match w.complete(serde_json::json!({"id": id})).wait() {
            Ok(_) => {
                policy.record_success();
                Ok(())
            }
            Err(e) => policy.record_failure(&e),
        }
    };
    attempt(&storage, 1).unwrap();
    store.fail(Op::Put, "", ErrorKind::StorageFull, "disk full");
    attempt(&storage, 2).unwrap();
    attempt(&storage, 3).unwrap();
    store.heal();
    attempt(&storage, 4).unwrap(); // a success resets the count
    store.fail(Op::Put, "", ErrorKind::StorageFull, "disk full");
    attempt(&storage, 5).unwrap();
    attempt(&storage, 6).unwrap();
    let err = attempt(&storage, 7).unwrap_err();
    assert_eq!(
        err.to_string(),
        "job failed: 3 checkpoint(s) failed in a row, more than the 2 tolerated; \
         last failure: failing:///chk-7/worker-0/a.bin: cannot write checkpoint file: disk full"
    );
    store.heal();
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 4);
}

#[test]
fn a_subsumed_checkpoint_fails() {
    let (_store, storage) = failing();
    let w1 = storage.begin(1, INFO).unwrap();
    let w2 = storage.begin(2, INFO).unwrap();
    w1.put("a.bin", payload(1, "a")).unwrap();
    w2.put("a.bin", payload(2, "a")).unwrap();
    let mut p2 = w2.complete(serde_json::Value::Null);
    let done = loop {
        match p2.poll() {
            Some(r) => break r,
            None => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    };
    done.unwrap();
    assert!(!p2.was_subsumed());
    let mut p1 = w1.complete(serde_json::Value::Null);
    let err = loop {
        match p1.poll() {
            Some(r) => break r.unwrap_err(),
            None => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    };
    assert!(
        p1.was_subsumed(),
        "the engine does not count it as a failure"
    );
    assert_eq!(
        err.to_string(),
        "job failed: checkpoint 1 was subsumed: checkpoint 2 completed first"
    );
    assert!(!exists(storage.location(), "chk-1/a.bin"));
}

#[test]
fn abort_gives_the_space_back() {
    let (_store, storage) = failing();
    let w = storage.begin(1, INFO).unwrap();
    w.put("worker-0/a.bin", payload(1, "a")).unwrap();
    w.wait().unwrap();
    assert!(exists(storage.location(), "chk-1/worker-0/a.bin"));
    w.abort();
    assert!(w.put("worker-0/b.bin", Bytes::new()).is_err());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while exists(storage.location(), "chk-1/worker-0/a.bin") {
        assert!(std::time::Instant::now() < deadline, "abort did not delete");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn bad_locations_and_settings_are_config_errors() {
    let err = CheckpointStorage::open("ftp://example/x", CheckpointConfig::default())
        .err()
        .unwrap();
    assert_eq!(err.domain(), ErrorDomain::User);
    let err = CheckpointStorage::open(
        "memory://",
        CheckpointConfig {
            retained: 0,
            ..CheckpointConfig::default()
        },
    )
    .err()
    .unwrap();
    assert_eq!(err.domain(), ErrorDomain::User);
}

#[test]
fn a_directory_that_cannot_be_created_names_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let target = file.join("ckpt");
    let err = CheckpointStorage::open(target.to_str().unwrap(), CheckpointConfig::default())
        .err()
        .unwrap();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{}: cannot create checkpoint directory:",
            target.display()
        )),
        "{text}"
    );
}
