//! Source positions: a reader restored from a snapshot goes on exactly where the snapshot was
//! taken, on the same number of workers or on another.

use spate_nexmark::generator::GeneratorConfig;
use spate_nexmark::model::Event;
use spate_nexmark::source::NexmarkSource;
use spate_types::{Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SplitPosition};

use crate::util::to_jsonl;

fn reader(
    source: &NexmarkSource,
    worker_index: usize,
    workers: usize,
) -> Box<dyn SourceReader<Event>> {
    source
        .create_reader(&SourceContext {
            worker_index,
            workers,
        })
        .expect("reader")
}

/// Polls `reader` for up to `polls` polls of `batch` (all of it with `usize::MAX`).
fn read(reader: &mut dyn SourceReader<Event>, polls: usize, batch: usize) -> Vec<Event> {
    let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
    for _ in 0..polls {
        let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
        if reader.poll(&mut out, batch).expect("poll") == SourceStatus::Finished {
            break;
        }
    }
    records
}

fn lines(events: Vec<Event>) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = events.into_iter().map(|e| to_jsonl(&[e])).collect();
    v.sort_unstable();
    v
}

fn config() -> GeneratorConfig {
    GeneratorConfig {
        events: Some(5_000),
        partitions: 6,
        ..GeneratorConfig::default()
    }
}

/// Reads part of the stream on `before` workers, snapshots, and reads the rest on `after`
/// workers restored from the snapshot: together they are exactly the whole stream.
fn split_run(before: usize, after: usize, polls: &[usize]) {
    let source = NexmarkSource::new(config(), None).unwrap();
    let mut first = Vec::new();
    let mut positions: Vec<SplitPosition> = Vec::new();
    for w in 0..before {
        let mut r = reader(&source, w, before);
        first.extend(read(r.as_mut(), polls[w % polls.len()], 97));
        positions.extend(r.snapshot().expect("the generator can replay"));
    }
    let mut rest = Vec::new();
    for w in 0..after {
        let mut r = reader(&source, w, after);
        r.restore(&positions).unwrap();
        rest.extend(read(r.as_mut(), usize::MAX, 97));
    }
    let mut whole = Vec::new();
    for w in 0..1 {
        whole.extend(read(reader(&source, w, 1).as_mut(), usize::MAX, 97));
    }
    let mut both = first;
    both.extend(rest);
    assert_eq!(both.len(), 5_000, "nothing lost, nothing twice");
    assert_eq!(lines(both), lines(whole));
}

#[test]
fn a_restored_reader_goes_on_where_the_snapshot_was() {
    split_run(1, 1, &[7]);
    split_run(2, 2, &[3, 11]);
}

#[test]
fn positions_are_per_partition_so_workers_can_change() {
    split_run(2, 3, &[5, 9]);
    split_run(3, 2, &[1, 4, 20]);
    // A reader that had finished its partitions before the snapshot.
    split_run(2, 4, &[1000, 2]);
}
