//! The rolling file sink: rolling by size and time, hidden in-progress parts, formats.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spate_connectors::files::{FileSink, JsonLinesSource, RollingPolicy};
use spate_types::{Sink, SinkContext, SinkWriter};

use crate::util::read_ok;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Event {
    id: u64,
    name: String,
}

fn events(range: std::ops::Range<u64>) -> Vec<Event> {
    range
        .map(|id| Event {
            id,
            name: format!("event number {id}"),
        })
        .collect()
}

fn writer<T: Send + 'static>(
    sink: &FileSink<T>,
    worker: usize,
    workers: usize,
) -> Box<dyn SinkWriter<T>> {
    sink.create_writer(&SinkContext {
        worker_index: worker,
        workers,
    })
    .unwrap()
}

/// The files of `dir`: (name, content), sorted by name.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// The finished parts of `worker`, in counter order.
fn parts_of(dir: &Path, worker: usize, ext: &str) -> Vec<(u64, Vec<u8>)> {
    let prefix = format!("part-{worker}-");
    let mut parts: Vec<(u64, Vec<u8>)> = files(dir)
        .into_iter()
        .filter_map(|(name, content)| {
            let n = name
                .strip_prefix(&prefix)?
                .strip_suffix(ext)?
                .parse()
                .ok()?;
            Some((n, content))
        })
        .collect();
    parts.sort();
    parts
}

fn json_lines(records: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        serde_json::to_writer(&mut out, r).unwrap();
        out.push(b'\n');
    }
    out
}

#[test]
fn rolls_by_size_without_empty_parts() {
    let dir = tempfile::tempdir().unwrap();
    let max = 200u64;
    let sink = FileSink::<Event>::json_lines(dir.path())
        .rolling_policy(RollingPolicy::default().with_max_part_size(max));
    let mut w = writer(&sink, 0, 1);
    let input = events(0..1000);
    for chunk in input.chunks(37) {
        let mut batch = chunk.to_vec();
        w.write_batch(&mut batch).unwrap();
        assert!(batch.is_empty(), "write_batch drains");
    }
    w.close().unwrap();

    let all = files(dir.path());
    assert!(
        all.keys().all(|name| !name.starts_with('.')),
        "no in-progress file after close: {all:?}"
    );
    let parts = parts_of(dir.path(), 0, ".jsonl");
    assert_eq!(parts.len(), all.len());
    let numbers: Vec<u64> = parts.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        numbers,
        (0..parts.len() as u64).collect::<Vec<_>>(),
        "counters have no gaps"
    );
    assert!(parts.len() > 50);
    let mut concat = Vec::new();
    for (i, (_, content)) in parts.iter().enumerate() {
        assert!(!content.is_empty());
        // A part rolls as soon as it reaches the size: only its last record crosses it.
        let last_line = content[..content.len() - 1]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        assert!((last_line as u64) < max, "part {i} rolled too late");
        if i + 1 < parts.len() {
            assert!(content.len() as u64 >= max, "part {i} rolled too early");
        }
        concat.extend_from_slice(content);
    }
    assert_eq!(concat, json_lines(&input));
}

#[test]
fn in_progress_parts_are_hidden_until_finished() {
    let dir = tempfile::tempdir().unwrap();
    let sink = FileSink::<Event>::json_lines(dir.path())
        .rolling_policy(RollingPolicy::default().with_max_part_size(1));
    let mut w = writer(&sink, 2, 4);
    w.write_batch(&mut events(0..3)).unwrap();
    // Parts 0 and 1 rolled (each holds one record); part 2 is still open.
    let names: Vec<String> = files(dir.path()).into_keys().collect();
    assert_eq!(
        names,
        [
            ".part-2-2.jsonl.inprogress",
            "part-2-0.jsonl",
            "part-2-1.jsonl"
        ]
    );
    // A reader of the directory sees only the finished parts.
    let seen = read_ok(&JsonLinesSource::<Event>::new(dir.path())).records;
    assert_eq!(seen, events(0..2));
    w.close().unwrap();
    let names: Vec<String> = files(dir.path()).into_keys().collect();
    assert_eq!(
        names,
        ["part-2-0.jsonl", "part-2-1.jsonl", "part-2-2.jsonl"]
    );
    assert_eq!(
        read_ok(&JsonLinesSource::<Event>::new(dir.path())).records,
        events(0..3)
    );
}

#[test]
fn rolls_on_inactivity_at_tick() {
    let dir = tempfile::tempdir().unwrap();
    let policy = RollingPolicy::default()
        .with_rollover_interval(Duration::from_secs(1000))
        .with_inactivity_interval(Duration::from_secs(10));
    let sink = FileSink::<Event>::json_lines(dir.path()).rolling_policy(policy);
    let mut w = writer(&sink, 0, 1);
    let t0 = Instant::now();
    w.write_batch(&mut events(0..2)).unwrap();
    w.tick(t0 + Duration::from_secs(5)).unwrap();
    assert!(parts_of(dir.path(), 0, ".jsonl").is_empty(), "still active");
    w.tick(t0 + Duration::from_secs(11)).unwrap();
    let parts = parts_of(dir.path(), 0, ".jsonl");
    assert_eq!(parts, [(0, json_lines(&events(0..2)))]);
    // No part is open now: more ticks create nothing, and the next record opens part 1.
    w.tick(t0 + Duration::from_secs(100)).unwrap();
    assert_eq!(files(dir.path()).len(), 1);
    w.write_batch(&mut events(2..3)).unwrap();
    assert!(files(dir.path()).contains_key(".part-0-1.jsonl.inprogress"));
    w.close().unwrap();
    assert_eq!(parts_of(dir.path(), 0, ".jsonl").len(), 2);
    assert_eq!(files(dir.path()).len(), 2);
}

#[test]
fn rolls_on_rollover_interval_at_tick() {
    let dir = tempfile::tempdir().unwrap();
    let policy = RollingPolicy::default()
        .with_rollover_interval(Duration::from_secs(60))
        .with_inactivity_interval(Duration::from_secs(1000));
    let sink = FileSink::<Event>::json_lines(dir.path()).rolling_policy(policy);
    let mut w = writer(&sink, 1, 2);
    let t0 = Instant::now();
    w.write_batch(&mut events(0..1)).unwrap();
    w.tick(t0 + Duration::from_secs(59)).unwrap();
    w.write_batch(&mut events(1..2)).unwrap();
    assert!(parts_of(dir.path(), 1, ".jsonl").is_empty());
    w.tick(t0 + Duration::from_secs(61)).unwrap();
    assert_eq!(
        parts_of(dir.path(), 1, ".jsonl"),
        [(0, json_lines(&events(0..2)))]
    );
    w.close().unwrap();
    assert_eq!(
        files(dir.path()).len(),
        1,
        "close after a roll makes no empty part"
    );
}

#[test]
fn no_records_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nested/out");
    let sink = FileSink::<Event>::json_lines(&out);
    let mut w = writer(&sink, 0, 1);
    w.write_batch(&mut Vec::new()).unwrap();
    w.tick(Instant::now() + Duration::from_secs(3600)).unwrap();
    w.close().unwrap();
    assert!(
        files(&out).is_empty(),
        "the directory is created, but holds no part"
    );
}

#[test]
fn workers_write_their_own_parts_and_reruns_add_parts() {
    let dir = tempfile::tempdir().unwrap();
    let sink = FileSink::<Event>::json_lines(dir.path());
    let mut writers: Vec<_> = (0..3).map(|w| writer(&sink, w, 3)).collect();
    for (w, writer) in writers.iter_mut().enumerate() {
        writer
            .write_batch(&mut events(w as u64 * 10..w as u64 * 10 + 3))
            .unwrap();
    }
    for writer in &mut writers {
        writer.close().unwrap();
    }
    let names: Vec<String> = files(dir.path()).into_keys().collect();
    assert_eq!(
        names,
        ["part-0-0.jsonl", "part-1-0.jsonl", "part-2-0.jsonl"]
    );
    let mut again = writer(&sink, 1, 3);
    again.write_batch(&mut events(100..101)).unwrap();
    again.close().unwrap();
    assert_eq!(
        parts_of(dir.path(), 1, ".jsonl")
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>(),
        [0, 1]
    );
}

#[test]
fn csv_parts_each_have_a_header() {
    let dir = tempfile::tempdir().unwrap();
    let sink = FileSink::<Event>::csv(dir.path())
        .rolling_policy(RollingPolicy::default().with_max_part_size(20));
    let mut w = writer(&sink, 0, 1);
    w.write_batch(&mut events(0..4)).unwrap();
    w.close().unwrap();
    let parts = parts_of(dir.path(), 0, ".csv");
    let texts: Vec<String> = parts
        .into_iter()
        .map(|(_, c)| String::from_utf8(c).unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "id,name\n0,event number 0\n",
            "id,name\n1,event number 1\n",
            "id,name\n2,event number 2\n",
            "id,name\n3,event number 3\n"
        ]
    );

    let dir = tempfile::tempdir().unwrap();
    let sink = FileSink::<Event>::csv(dir.path())
        .csv_header(false)
        .csv_delimiter(b'|');
    let mut w = writer(&sink, 0, 1);
    w.write_batch(&mut events(0..2)).unwrap();
    w.close().unwrap();
    let parts = parts_of(dir.path(), 0, ".csv");
    assert_eq!(
        parts,
        [(0, b"0|event number 0\n1|event number 1\n".to_vec())]
    );
}

#[test]
fn custom_encoder_and_extension() {
    let dir = tempfile::tempdir().unwrap();
    let sink = FileSink::<u64>::with_encoder(
        dir.path(),
        "txt",
        Arc::new(|n: &u64, out: &mut Vec<u8>| out.extend_from_slice(format!("n={n}").as_bytes())),
    );
    let mut w = writer(&sink, 0, 1);
    w.write_batch(&mut vec![1, 2, 3]).unwrap();
    w.close().unwrap();
    assert_eq!(
        parts_of(dir.path(), 0, ".txt"),
        [(0, b"n=1\nn=2\nn=3\n".to_vec())]
    );

    let dir = tempfile::tempdir().unwrap();
    let sink = FileSink::<u64>::json_lines(dir.path()).extension("");
    let mut w = writer(&sink, 0, 1);
    w.write_batch(&mut vec![7]).unwrap();
    w.close().unwrap();
    assert_eq!(
        files(dir.path()).into_iter().collect::<Vec<_>>(),
        [("part-0-0".to_string(), b"7\n".to_vec())]
    );
}

#[test]
fn unencodable_records_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let sink = FileSink::<BTreeMap<(u8, u8), u8>>::json_lines(dir.path());
    let mut w = writer(&sink, 0, 1);
    let mut map = BTreeMap::new();
    map.insert((1, 2), 3);
    let msg = w.write_batch(&mut vec![map]).unwrap_err().to_string();
    assert!(
        msg.contains(&dir.path().display().to_string())
            && msg.contains("cannot encode a record as JSON lines"),
        "{msg}"
    );
    w.close().unwrap();
    assert!(
        files(dir.path()).is_empty(),
        "no part for a record that was not written"
    );
}
