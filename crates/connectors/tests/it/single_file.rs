//! The single-file sink: worker 0 writes, the file appears whole at close.

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
