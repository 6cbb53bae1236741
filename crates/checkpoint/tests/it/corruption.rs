//! Corrupt and partial checkpoints are skipped with a warning; all corrupt is an error.

use std::time::Duration;

use bytes::Bytes;
use spate_checkpoint::{CheckpointConfig, CheckpointStorage, Verification};

use crate::common::{capture_warnings, checkpoint, exists, memory, payload, tamper, INFO};

const FILES: [&str; 2] = ["worker-0/a.bin", "worker-1/b.bin"];

/// Two complete checkpoints, 1 and 2.
fn two(config: CheckpointConfig) -> CheckpointStorage {
    let storage = memory(config);
    checkpoint(&storage, 1, &FILES);
    checkpoint(&storage, 2, &FILES);
    storage
}

/// Damages checkpoint 2 with `damage` and checks that restore falls back to 1 with a warning
/// that names checkpoint 2 and contains `reason`.
fn falls_back(
    config: CheckpointConfig,
    relative: &str,
    damage: fn(Vec<u8>) -> Option<Vec<u8>>,
    reason: &str,
) {
    let storage = two(config);
    tamper(storage.location(), relative, damage);
    let (found, log) = capture_warnings(|| storage.latest_complete().unwrap().unwrap());
    assert_eq!(found.id(), 1, "fell back to checkpoint 1");
    assert_eq!(found.read(FILES[0]).unwrap(), payload(1, FILES[0]));
    assert!(log.contains("WARN"), "{log}");
    assert!(log.contains("checkpoint=2"), "{log}");
    assert!(log.contains(reason), "expected {reason:?} in {log}");
}

fn truncate(mut b: Vec<u8>) -> Option<Vec<u8>> {
    b.truncate(b.len() / 2);
    Some(b)
}

fn flip_middle_byte(mut b: Vec<u8>) -> Option<Vec<u8>> {
    let i = b.len() / 2;
    b[i] ^= 0x10;
    Some(b)
}

fn append_byte(mut b: Vec<u8>) -> Option<Vec<u8>> {
    b.push(0);
    Some(b)
}

fn delete(_: Vec<u8>) -> Option<Vec<u8>> {
    None
}

#[test]
fn truncated_manifest() {
    falls_back(
        CheckpointConfig::default(),
        "chk-2/_manifest.json",
        truncate,
        "does not parse",
    );
}

#[test]
fn flipped_byte_in_manifest() {
    falls_back(
        CheckpointConfig::default(),
        "chk-2/_manifest.json",
        flip_middle_byte,
        "manifest",
    );
}

#[test]
fn missing_manifest() {
    falls_back(
        CheckpointConfig::default(),
        "chk-2/_manifest.json",
        delete,
        "no manifest",
    );
}

#[test]
fn missing_file() {
    falls_back(
        CheckpointConfig::default(),
        "chk-2/worker-1/b.bin",
        delete,
        "worker-1/b.bin is missing",
    );
}

#[test]
fn file_with_the_wrong_size() {
    falls_back(
        CheckpointConfig::default(),
        "chk-2/worker-0/a.bin",
        append_byte,
        "bytes, the manifest says",
    );
}

#[test]
fn flipped_byte_in_a_file() {
    falls_back(
        CheckpointConfig::default(),
        "chk-2/worker-0/a.bin",
        flip_middle_byte,
        "fails its checksum",
    );
}

#[test]
fn flipped_byte_in_a_file_is_caught_at_read_when_only_sizes_are_verified() {
    let storage = two(CheckpointConfig {
        verification: Verification::Sizes,
        ..CheckpointConfig::default()
    });
    tamper(storage.location(), "chk-2/worker-0/a.bin", flip_middle_byte);
    let c = storage.latest_complete().unwrap().unwrap();
    assert_eq!(c.id(), 2);
    let err = c.read("worker-0/a.bin").unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("memory:///chk-2/worker-0/a.bin: checkpoint file is corrupt: crc32c"),
        "{text}"
    );
    // The untouched file still reads.
    assert_eq!(c.read(FILES[1]).unwrap(), payload(2, FILES[1]));
}

#[test]
fn a_checkpoint_is_not_complete_before_its_manifest() {
    let store = spate_checkpoint::faults::FailingStore::new();
    let storage = CheckpointStorage::new(store.location(), CheckpointConfig::default()).unwrap();
    checkpoint(&storage, 1, &FILES);

    // Checkpoint 2: every file durable, no manifest yet.
    let w = storage.begin(2, INFO).unwrap();
    for f in FILES {
        w.put(f, payload(2, f)).unwrap();
    }
    w.wait().unwrap();
    assert!(exists(storage.location(), "chk-2/worker-0/a.bin"));
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 1);

    // Its completion is held at the manifest's put: still not complete.
    store.hold_puts();
    let pending = w.complete(serde_json::Value::Null);
    std::thread::sleep(Duration::from_millis(30));
    assert!(!exists(storage.location(), "chk-2/_manifest.json"));
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 1);
    let listed = storage.list().unwrap();
    assert_eq!(listed[0].id, 2);
    assert!(listed[0].manifest.is_none());
    assert!(listed[1].manifest.is_some());

    store.release_puts();
    pending.wait().unwrap();
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 2);
}

#[test]
fn all_corrupt_is_an_error_not_empty_state() {
    let storage = two(CheckpointConfig::default());
    tamper(storage.location(), "chk-2/_manifest.json", truncate);
    tamper(storage.location(), "chk-1/worker-0/a.bin", flip_middle_byte);
    let (result, log) = capture_warnings(|| storage.latest_complete());
    let err = result.unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("memory://: no usable checkpoint: 2 checkpoint(s) found, all corrupt or partial (chk-2: manifest does not parse"),
        "{text}"
    );
    assert!(
        text.contains("chk-1: file worker-0/a.bin fails its checksum"),
        "{text}"
    );
    assert!(!text.contains('\n'));
    assert!(
        log.contains("checkpoint=2") && log.contains("checkpoint=1"),
        "{log}"
    );
}

#[test]
fn only_never_completed_checkpoints_mean_no_state() {
    let storage = memory(CheckpointConfig::default());
    let w = storage.begin(1, INFO).unwrap();
    w.put("worker-0/a.bin", Bytes::from_static(b"abc")).unwrap();
    w.wait().unwrap();
    drop(w);
    let (found, log) = capture_warnings(|| storage.latest_complete().unwrap());
    assert!(found.is_none());
    assert!(log.contains("no checkpoint ever completed"), "{log}");
    // And the next id skips the leftover directory.
    assert_eq!(storage.next_id().unwrap(), 2);
}

#[test]
fn a_storage_error_while_restoring_is_not_a_reason_to_fall_back() {
    let store = spate_checkpoint::faults::FailingStore::new();
    let storage = CheckpointStorage::new(store.location(), CheckpointConfig::default()).unwrap();
    checkpoint(&storage, 1, &FILES);
    checkpoint(&storage, 2, &FILES);
    store.fail(
        spate_checkpoint::faults::Op::Get,
        "chk-2/_manifest.json",
        std::io::ErrorKind::PermissionDenied,
        "access denied",
    );
    let err = storage.latest_complete().unwrap_err();
    assert_eq!(
        err.to_string(),
        "failing:///chk-2/_manifest.json: cannot read checkpoint manifest: access denied"
    );
    store.heal();
    assert_eq!(storage.latest_complete().unwrap().unwrap().id(), 2);
}

#[test]
fn corruption_in_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let storage =
        CheckpointStorage::open(tmp.path().to_str().unwrap(), CheckpointConfig::default()).unwrap();
    checkpoint(&storage, 1, &FILES);
    checkpoint(&storage, 2, &FILES);
    checkpoint(&storage, 3, &FILES);
    // A crash mid-write cannot truncate a manifest (it is renamed into place), but a disk can.
    let m3 = tmp.path().join("chk-3/_manifest.json");
    let len = std::fs::metadata(&m3).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&m3)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    std::fs::remove_file(tmp.path().join("chk-2/worker-1/b.bin")).unwrap();
    let (found, log) = capture_warnings(|| storage.latest_complete().unwrap().unwrap());
    assert_eq!(found.id(), 1);
    assert!(
        log.contains("checkpoint=3") && log.contains("checkpoint=2"),
        "{log}"
    );
}
