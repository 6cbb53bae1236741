//! Helpers: drive readers and writers like the engine does.

use std::time::{Duration, Instant};

use spate_types::{
    DeadLetter, Source, SourceContext, SourceOutput, SourceReader, SourceStatus, SpateError,
};

/// Everything one reader produced until it finished or failed.
pub struct Drained<T> {
    pub records: Vec<T>,
    pub dead: Vec<DeadLetter>,
    pub dropped: u64,
    pub error: Option<SpateError>,
}

/// Polls `reader` until it is finished or fails, sleeping while it is idle.
pub fn drain<T>(reader: &mut dyn SourceReader<T>, max_records: usize) -> Drained<T> {
    let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let error = loop {
        let before = records.len();
        let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
        match reader.poll(&mut out, max_records) {
            Ok(SourceStatus::Finished) => {
                assert_eq!(
                    records.len(),
                    before,
                    "a poll that returns Finished emits nothing"
                );
                break None;
            }
            Ok(SourceStatus::More) => {}
            Ok(SourceStatus::Idle) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => break Some(e),
        }
        assert!(
            Instant::now() < deadline,
            "the reader did not finish in time"
        );
    };
    Drained {
        records,
        dead,
        dropped,
        error,
    }
}

/// Creates the reader of every worker of `workers` and drains each.
pub fn read_all<T: 'static>(
    source: &dyn Source<T>,
    workers: usize,
    max_records: usize,
) -> Vec<Drained<T>> {
    (0..workers)
        .map(|worker_index| {
            let mut reader = source
                .create_reader(&SourceContext {
                    worker_index,
                    workers,
                })
                .expect("create the reader");
            drain(reader.as_mut(), max_records)
        })
        .collect()
}

/// Reads with one worker and expects no error.
pub fn read_ok<T: 'static>(source: &dyn Source<T>) -> Drained<T> {
    let mut all = read_all(source, 1, 1000);
    let drained = all.remove(0);
    if let Some(e) = &drained.error {
        panic!("unexpected error: {e}");
    }
    drained
}

/// Whether `part` is a subsequence of `whole`.
pub fn is_subsequence<T: PartialEq>(part: &[T], whole: &[T]) -> bool {
    let mut it = whole.iter();
    part.iter().all(|x| it.any(|y| y == x))
}
