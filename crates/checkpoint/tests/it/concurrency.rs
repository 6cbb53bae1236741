//! Many workers writing one checkpoint at once.

use std::sync::{Arc, Barrier};

use spate_checkpoint::{CheckpointConfig, CheckpointStorage, CheckpointWriter};

use crate::common::{memory, payload, INFO};

const THREADS: usize = 6;
const FILES_PER_THREAD: usize = 40;

fn name(worker: usize, i: usize) -> String {
    format!("worker-{worker}/op-window-7/kg-{i:04}.bin")
}

fn write_from_threads(storage: &CheckpointStorage, id: u64) {
    let writer = storage.begin(id, INFO).unwrap();
    let barrier = Arc::new(Barrier::new(THREADS));
    std::thread::scope(|s| {
        for worker in 0..THREADS {
            let w: CheckpointWriter = writer.clone();
            let barrier = Arc::clone(&barrier);
            s.spawn(move || {
                barrier.wait();
                for i in 0..FILES_PER_THREAD {
                    let n = name(worker, i);
                    w.put(n.clone(), payload(id, &n)).unwrap();
                }
                // A worker checks on its uploads without blocking.
                w.poll().unwrap();
            });
        }
    });
    let done = writer
        .complete(serde_json::json!({"id": id}))
        .wait()
        .unwrap();
    assert_eq!(done.manifest.files.len(), THREADS * FILES_PER_THREAD);
    let progress = writer.progress();
    assert_eq!(progress.files_durable, THREADS * FILES_PER_THREAD);
    assert_eq!(progress.files_in_flight, 0);

    let c = storage.latest_complete().unwrap().unwrap();
    assert_eq!(c.id(), id);
    for worker in 0..THREADS {
        for i in 0..FILES_PER_THREAD {
            let n = name(worker, i);
            assert_eq!(c.read(&n).unwrap(), payload(id, &n), "{n}");
        }
    }
}

#[test]
fn concurrent_puts_in_memory() {
    let storage = memory(CheckpointConfig::default());
    write_from_threads(&storage, 1);
    write_from_threads(&storage, 2);
}

#[test]
fn concurrent_puts_in_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let config = CheckpointConfig {
        max_concurrent_uploads: 4,
        ..CheckpointConfig::default()
    };
    let storage = CheckpointStorage::open(tmp.path().to_str().unwrap(), config).unwrap();
    write_from_threads(&storage, 1);
}

#[test]
fn two_checkpoints_in_flight_at_once() {
    let storage = memory(CheckpointConfig::default());
    let a = storage.begin(1, INFO).unwrap();
    let b = storage.begin(2, INFO).unwrap();
    a.put("worker-0/a.bin", payload(1, "a")).unwrap();
    b.put("worker-0/a.bin", payload(2, "a")).unwrap();
    let pa = a.complete(serde_json::Value::Null);
    assert_eq!(pa.wait().unwrap().manifest.checkpoint_id, 1);
    b.complete(serde_json::Value::Null).wait().unwrap();
    let c = storage.latest_complete().unwrap().unwrap();
    assert_eq!(c.read("worker-0/a.bin").unwrap(), payload(2, "a"));
}
