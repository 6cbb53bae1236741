//! What is generated depends on the partitions, never on the workers that read them.

use spate_nexmark::generator::{GeneratorConfig, NexmarkGenerator};
use spate_nexmark::model::Event;
use spate_nexmark::source::NexmarkSource;
use spate_types::{Source, SourceContext, SourceOutput, SourceStatus};

use crate::util::{generate_all, to_jsonl};

/// Everything the readers of `workers` workers emit, with each reader's output.
fn read_all(source: &NexmarkSource, workers: usize, batch: usize) -> Vec<Vec<Event>> {
    (0..workers)
        .map(|worker_index| {
            let mut reader = source
                .create_reader(&SourceContext {
                    worker_index,
                    workers,
                })
                .expect("reader");
            let (mut records, mut dead, mut dropped) = (Vec::new(), Vec::new(), 0);
            loop {
                let mut out = SourceOutput::new(&mut records, &mut dead, &mut dropped);
                let status = reader.poll(&mut out, batch).expect("poll");
                if status == SourceStatus::Finished {
                    break;
                }
            }
            assert!(dead.is_empty() && dropped == 0);
            let (done, total) = reader.progress().expect("bounded progress");
            assert_eq!((done, total), (records.len() as u64, records.len() as u64));
            records
        })
        .collect()
}

/// The events as sorted JSON lines: a multiset that can be compared.
fn multiset(events: impl IntoIterator<Item = Event>) -> Vec<Vec<u8>> {
    let mut lines: Vec<Vec<u8>> = events.into_iter().map(|e| to_jsonl(&[e])).collect();
    lines.sort_unstable();
    lines
}

#[test]
fn worker_count_does_not_change_the_data() {
    for partitions in [1, 2, 5, 8] {
        let cfg = GeneratorConfig {
            seed: 99,
            rate: 5_000.0,
            events: Some(10_007),
            partitions,
            ..Default::default()
        };
        let source = NexmarkSource::new(cfg.clone(), None).expect("source");
        let one = read_all(&source, 1, 1000);
        assert_eq!(one.len(), 1);
        // One worker emits in event-time order, over all partitions.
        let times: Vec<i64> = one[0].iter().map(Event::date_time).collect();
        assert!(
            times.windows(2).all(|w| w[0] <= w[1]),
            "partitions={partitions}"
        );
        let three = read_all(&source, 3, 333);
        let want = multiset(generate_all(&cfg));
        assert_eq!(want.len(), 10_007);
        assert_eq!(
            multiset(one.into_iter().flatten()),
            want,
            "partitions={partitions}, 1 worker"
        );
        assert_eq!(
            multiset(three.into_iter().flatten()),
            want,
            "partitions={partitions}, 3 workers"
        );
    }
}

#[test]
fn one_partition_through_the_source_is_the_reference_stream() {
    let cfg = GeneratorConfig {
        seed: 7,
        rate: 200.0,
        events: Some(3_000),
        ..Default::default()
    };
    let source = NexmarkSource::new(cfg.clone(), None).expect("source");
    let read = read_all(&source, 2, 100);
    assert!(read[1].is_empty(), "the second worker has no partition");
    let mut generator = NexmarkGenerator::new(&cfg, 0).expect("generator");
    let direct: Vec<Event> = std::iter::from_fn(|| generator.next_event()).collect();
    assert_eq!(read[0], direct);
}

#[test]
fn partitions_share_ids_and_times_but_not_randomness() {
    let base = GeneratorConfig {
        seed: 5,
        events: Some(5_000),
        ..Default::default()
    };
    let k4 = GeneratorConfig {
        partitions: 4,
        ..base.clone()
    };
    let key = |e: &Event| match e {
        Event::Person(p) => (0, p.id, p.date_time),
        Event::Auction(a) => (1, a.id, a.date_time),
        Event::Bid(b) => (2, 0, b.date_time),
    };
    let mut a: Vec<_> = generate_all(&base).iter().map(key).collect();
    let mut b: Vec<_> = generate_all(&k4).iter().map(key).collect();
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "ids, kinds and times depend on the event number only");
    assert_ne!(multiset(generate_all(&base)), multiset(generate_all(&k4)));
}
