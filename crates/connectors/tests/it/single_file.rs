//! The single-file sink: worker 0 writes, the file appears whole at close; under checkpoints
//! it commits in two phases.

use std::sync::Arc;

use spate_connectors::files::SingleFileSink;
use spate_types::{DeadLetter, Sink, SinkContext, SpateError};

fn ctx(worker_index: usize, workers: usize) -> SinkContext {
    SinkContext {
        worker_index,
        workers,
    }
}

#[test]
fn worker_zero_writes_the_file_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out/dead.jsonl");
    let sink = SingleFileSink::<DeadLetter>::new(&path);
    let mut w0 = sink.create_writer(&ctx(0, 3)).unwrap();
    let mut w1 = sink.create_writer(&ctx(1, 3)).unwrap();
    let letter = DeadLetter {
        reason: "r".into(),
        source: "f".into(),
        line: 3,
        raw: "x".into(),
    };
    w0.write_batch(&mut vec![letter.clone(), letter.clone()])
        .unwrap();
    w1.write_batch(&mut Vec::new()).unwrap();
    assert!(!path.exists(), "not visible before close");
    assert!(dir.path().join("out/.dead.jsonl.inprogress").exists());
    w1.close().unwrap();
    w0.close().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let back: Vec<DeadLetter> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(back, [letter.clone(), letter]);
    let names: Vec<_> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["dead.jsonl"]);
}

#[test]
fn other_workers_fail_if_they_get_records() {
    let dir = tempfile::tempdir().unwrap();
    let sink = SingleFileSink::<u32>::new(dir.path().join("x.jsonl"));
    let mut w2 = sink.create_writer(&ctx(2, 3)).unwrap();
    let err = w2.write_batch(&mut vec![1]).unwrap_err();
    assert!(matches!(err, SpateError::Internal(_)));
    assert!(err.to_string().contains("worker 2"), "{err}");
}

#[test]
fn empty_stream_gives_an_empty_file_and_encoders_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.txt");
    let sink = SingleFileSink::<u32>::with_encoder(
        &path,
        Arc::new(|n: &u32, out: &mut Vec<u8>| out.extend_from_slice(format!("<{n}>").as_bytes())),
    );
    let mut w = sink.create_writer(&ctx(0, 1)).unwrap();
    w.close().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"");
    let mut w = sink.create_writer(&ctx(0, 1)).unwrap();
    w.write_batch(&mut vec![1, 2]).unwrap();
    w.close().unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"<1>\n<2>\n",
        "a second run replaces the file"
    );
}

#[test]
fn unwritable_path_fails_at_create_writer() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "").unwrap();
    let sink = SingleFileSink::<u32>::new(blocker.join("sub/out.jsonl"));
    let err = sink
        .create_writer(&ctx(0, 1))
        .err()
        .expect("cannot create under a file");
    assert!(
        err.to_string().contains(&blocker.display().to_string()),
        "{err}"
    );
    // Other workers create nothing, so they do not fail.
    assert!(sink.create_writer(&ctx(1, 2)).is_ok());
}

#[test]
fn two_phase_commit_publishes_checkpoints_and_a_restore_cuts_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dead.jsonl");
    std::fs::write(&path, "an older run's file\n").unwrap();
    let sink = SingleFileSink::<u32>::new(&path);
    let read = || std::fs::read_to_string(&path).unwrap();
    let mut w = sink.create_writer(&ctx(0, 2)).unwrap();
    let mut other = sink.create_writer(&ctx(1, 2)).unwrap();
    w.write_batch(&mut vec![1, 2]).unwrap();
    let _ = w.pre_commit(1).unwrap();
    assert!(
        other.pre_commit(1).unwrap().is_empty(),
        "only worker 0 has state"
    );
    assert_eq!(
        read(),
        "an older run's file\n",
        "nothing published before completion"
    );
    w.write_batch(&mut vec![3]).unwrap();
    let state2 = w.pre_commit(2).unwrap();
    w.commit(1).unwrap();
    assert_eq!(read(), "1\n2\n");
    w.write_batch(&mut vec![4]).unwrap();
    let _ = w.pre_commit(3).unwrap();
    w.commit(3).unwrap();
    assert_eq!(
        read(),
        "1\n2\n3\n4\n",
        "a later completion covers the earlier ones"
    );
    w.write_batch(&mut vec![5]).unwrap();
    // A crash; the job restores checkpoint 2 on three workers (3 was published, but the
    // restore's checkpoint is the rule: 4 and 5 are replayed by the sources).
    drop(w);
    drop(other);
    let states = vec![Vec::new(), state2];
    let mut again: Vec<_> = (0..3)
        .map(|i| {
            let mut w = sink.create_writer(&ctx(i, 3)).unwrap();
            w.restore(&states).unwrap();
            w
        })
        .collect();
    assert_eq!(read(), "1\n2\n3\n");
    again[0].write_batch(&mut vec![4, 5]).unwrap();
    for w in &mut again {
        w.close().unwrap();
    }
    assert_eq!(read(), "1\n2\n3\n4\n5\n");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["dead.jsonl"], "no staging file is left");
    // Restoring the finished job's checkpoint again finds the bytes in the output.
    let mut late = sink.create_writer(&ctx(0, 1)).unwrap();
    late.restore(&[sink_state(3)]).unwrap();
    late.close().unwrap();
    assert_eq!(read(), "1\n2\n3\n");
}

fn sink_state(len: u64) -> Vec<u8> {
    format!("{{\"len\":{}}}", len * 2).into_bytes()
}
