//! Split positions of the file sources: a reader snapshotted after any number of polls and
//! restored on any number of workers reads exactly the rest, against the oracle of one
//! uninterrupted read (records and dead letters with their line numbers).

use spate_connectors::files::{CsvSource, JsonLinesSource};
use spate_types::{
    BadRecordPolicy, DeadLetter, Source, SourceContext, SourceOutput, SourceReader, SourceStatus,
    SplitPosition,
};

fn readers<T: 'static>(source: &dyn Source<T>, workers: usize) -> Vec<Box<dyn SourceReader<T>>> {
    (0..workers)
        .map(|worker_index| {
            source
                .create_reader(&SourceContext {
                    worker_index,
                    workers,
                })
                .unwrap()
        })
        .collect()
}

/// What a set of readers emitted, sorted: records as text, dead letters as (source, line, raw).
#[derive(Debug, Default, PartialEq)]
struct Emitted {
    records: Vec<String>,
    dead: Vec<(String, u64, String)>,
}

impl Emitted {
    fn sorted(mut self) -> Self {
        self.records.sort();
        self.dead.sort();
        self
    }
}

/// Polls every reader (round robin) `polls` times at most, or to its end with `None`.
fn poll_readers<T: std::fmt::Debug>(
    readers: &mut [Box<dyn SourceReader<T>>],
    polls: Option<usize>,
    max: usize,
    into: &mut Emitted,
) {
    let mut done = vec![false; readers.len()];
    let mut round = 0;
    while done.iter().any(|d| !d) && polls.is_none_or(|p| round < p) {
        for (reader, done) in readers.iter_mut().zip(done.iter_mut()) {
            if *done {
                continue;
            }
            let (mut records, mut dead, mut dropped): (Vec<T>, Vec<DeadLetter>, u64) =
                (Vec::new(), Vec::new(), 0);
            let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
            let status = reader.poll(&mut out, max).unwrap();
            *done = status == SourceStatus::Finished;
            into.records
                .extend(records.iter().map(|r| format!("{r:?}")));
            into.dead
                .extend(dead.into_iter().map(|d| (d.source, d.line, d.raw)));
        }
        round += 1;
    }
}

/// For every cut point: read with `before` workers up to the cut, snapshot, restore on `after`
/// workers, read to the end. The union equals one uninterrupted read.
fn check_resume<T: std::fmt::Debug + 'static>(source: &dyn Source<T>, max: usize) {
    let mut oracle = Emitted::default();
    poll_readers(&mut readers(source, 1), None, max, &mut oracle);
    let oracle = oracle.sorted();
    assert!(!oracle.records.is_empty());
    for (before, after) in [(1, 1), (2, 3), (3, 2), (4, 1)] {
        for cut in 0..12 {
            let mut got = Emitted::default();
            let mut first = readers(source, before);
            poll_readers(&mut first, Some(cut), max, &mut got);
            let positions: Vec<SplitPosition> =
                first.iter().flat_map(|r| r.snapshot().unwrap()).collect();
            // A second restore layer: restore, snapshot at once, restore again.
            let mut middle = readers(source, 2);
            for r in &mut middle {
                r.restore(&positions).unwrap();
            }
            let positions: Vec<SplitPosition> =
                middle.iter().flat_map(|r| r.snapshot().unwrap()).collect();
            let mut second = readers(source, after);
            for r in &mut second {
                r.restore(&positions).unwrap();
            }
            poll_readers(&mut second, None, max, &mut got);
            assert_eq!(
                got.sorted(),
                oracle,
                "{before} -> {after} workers, cut after {cut} polls"
            );
        }
    }
}

#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct Rec {
    id: u64,
    name: String,
}

#[test]
fn jsonl_directory_resumes_every_split_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    let mut id = 0;
    for f in 0..3 {
        let mut text = String::new();
        for i in 0..40 {
            id += 1;
            match i % 9 {
                3 => text.push_str("{\"id\": \"bad\"}\n"),
                5 => text.push_str("\r\n"),
                _ => text.push_str(&format!("{{\"id\": {id}, \"name\": \"n{i}\"}}\r\n")),
            }
        }
        if f == 1 {
            text.push_str("{\"id\": 999, \"name\": \"no newline\"}");
        }
        std::fs::write(input.join(format!("f{f}.jsonl")), text).unwrap();
    }
    let source = JsonLinesSource::<Rec>::new(&input)
        .split_size(300)
        .block_size(64)
        .policy(BadRecordPolicy::DeadLetter(dir.path().join("dead.jsonl")));
    check_resume(&source, 7);
    let one_split = JsonLinesSource::<Rec>::new(&input)
        .policy(BadRecordPolicy::DeadLetter(dir.path().join("dead.jsonl")));
    check_resume(&one_split, 5);
}

#[derive(Debug, serde::Deserialize)]
#[allow(dead_code)]
struct Row {
    id: u64,
    price: f64,
}

#[test]
fn csv_files_resume_exactly_with_and_without_headers() {
    let dir = tempfile::tempdir().unwrap();
    for headers in [true, false] {
        let input = dir.path().join(format!("in-{headers}"));
        std::fs::create_dir(&input).unwrap();
        for f in 0..3 {
            let mut text = String::new();
            if headers {
                text.push_str("id,price\r\n");
            }
            for i in 0..30 {
                match i % 7 {
                    2 => text.push_str("x,1.5\r\n"),
                    4 => text.push_str("\r\n"),
                    5 => text.push_str("7,\"2.\n5\"\n"),
                    _ => text.push_str(&format!("{},{}.25\r\n", f * 100 + i, i)),
                }
            }
            std::fs::write(input.join(format!("f{f}.csv")), text).unwrap();
        }
        let source = CsvSource::<Row>::new(&input)
            .has_headers(headers)
            .policy(BadRecordPolicy::DeadLetter(dir.path().join("dead.jsonl")));
        check_resume(&source, 4);
    }
}

#[test]
fn a_restore_onto_changed_input_is_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    for (ext, head, row) in [
        ("jsonl", "", "{\"id\": 1, \"name\": \"a\"}\n"),
        ("csv", "id,price\n", "1,2.5\n"),
    ] {
        let input = dir.path().join(ext);
        std::fs::create_dir(&input).unwrap();
        let text = format!("{head}{}", row.repeat(50));
        std::fs::write(input.join(format!("b.{ext}")), &text).unwrap();
        let json: Box<dyn Source<Rec>> = Box::new(JsonLinesSource::<Rec>::new(&input));
        let csv: Box<dyn Source<Row>> = Box::new(CsvSource::<Row>::new(&input));
        let snapshot: Vec<SplitPosition> = if ext == "jsonl" {
            let mut r = readers(json.as_ref(), 1);
            poll_readers(&mut r, Some(1), 3, &mut Emitted::default());
            r[0].snapshot().unwrap()
        } else {
            let mut r = readers(csv.as_ref(), 1);
            poll_readers(&mut r, Some(1), 3, &mut Emitted::default());
            r[0].snapshot().unwrap()
        };
        assert_eq!(snapshot.len(), 1);
        // A file that sorts first shifts every split id.
        std::fs::write(input.join(format!("a.{ext}")), &text).unwrap();
        let err = if ext == "jsonl" {
            readers(json.as_ref(), 1)[0].restore(&snapshot).unwrap_err()
        } else {
            readers(csv.as_ref(), 1)[0].restore(&snapshot).unwrap_err()
        };
        let msg = err.to_string();
        assert!(
            msg.contains("must not change") && msg.contains(&format!("a.{ext}")),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
    }
}
