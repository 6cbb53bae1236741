//! The plain q5 and q7 give the same rows as the hand-tuned versions they replaced, on one and
//! several workers (the Flink comparisons are in the CLI's tests; these use a larger input,
//! at 1,000 events per second of event time, so that windows hold many bids and ties occur).

use spate_connectors::CollectSink;
use spate_dataflow::{DataStream, JobConfig, StreamEnv};
use spate_nexmark::generator::GeneratorConfig;
use spate_nexmark::model::Event;
use spate_nexmark::queries::{self, Row};
use spate_nexmark::source::NexmarkSource;

/// Runs `query` over 100,000 generated events (100 s of event time, in 3 partitions, so the
/// same events on any number of workers) on `workers` workers:
/// its rows as sorted lines.
fn rows<R: Row>(
    workers: usize,
    query: impl Fn(&DataStream<Event>) -> DataStream<R>,
) -> Vec<String> {
    let env = StreamEnv::new(JobConfig::local(workers));
    let cfg = GeneratorConfig {
        events: Some(100_000),
        rate: 1_000.0,
        partitions: 3,
        ..GeneratorConfig::default()
    };
    let events = env.from_source(NexmarkSource::new(cfg, None).expect("generator"));
    let (sink, handle) = CollectSink::new();
    query(&events).sink_to(sink);
    env.execute("hand vs plain").expect("job runs");
    let mut lines: Vec<String> = handle
        .take()
        .iter()
        .map(|r| {
            let mut out = Vec::new();
            r.write_line(&mut out);
            String::from_utf8(out).expect("rows are UTF-8")
        })
        .collect();
    lines.sort_unstable();
    lines
}

#[test]
fn q5_equals_the_hand_tuned_q5() {
    let hand = rows(1, queries::q5_hand);
    assert!(hand.len() > 20, "{} rows", hand.len());
    for workers in [1, 3] {
        assert_eq!(rows(workers, queries::q5), hand, "{workers} workers");
    }
}

#[test]
fn q7_equals_the_hand_tuned_q7() {
    let hand = rows(1, queries::q7_hand);
    assert!(hand.len() >= 5, "{} rows", hand.len());
    for workers in [1, 3] {
        assert_eq!(rows(workers, queries::q7), hand, "{workers} workers");
    }
}
