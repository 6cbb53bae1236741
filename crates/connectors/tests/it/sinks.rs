//! The collect and discard sinks, and sources and sinks together.

use spate_connectors::{CollectSink, CollectionSource, DiscardSink};
use spate_types::{Sink, SinkContext};

use crate::util::read_all;

#[test]
fn collection_to_collect_sink() {
    let source = CollectionSource::new((0..100u32).collect());
    let (sink, handle) = CollectSink::new();
    let workers = 4;
    for (w, drained) in read_all(&source, workers, 7).into_iter().enumerate() {
        let expected: Vec<u32> = (0..100).filter(|i| *i as usize % workers == w).collect();
        assert_eq!(drained.records, expected);
        let mut writer = sink
            .create_writer(&SinkContext {
                worker_index: w,
                workers,
            })
            .unwrap();
        let mut batch = drained.records;
        writer.write_batch(&mut batch).unwrap();
        writer.close().unwrap();
    }
    let mut all = handle.take();
    all.sort();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
    assert!(handle.snapshot().is_empty());
}

#[test]
fn discard_counts_over_writers() {
    let sink = DiscardSink::new();
    for w in 0..3 {
        let mut writer = Sink::<String>::create_writer(
            &sink,
            &SinkContext {
                worker_index: w,
                workers: 3,
            },
        )
        .unwrap();
        writer.write_batch(&mut vec!["a".to_string(); 10]).unwrap();
        writer.close().unwrap();
    }
    assert_eq!(sink.count(), 30);
}
