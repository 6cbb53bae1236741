//! The plain q5 gives the same rows as the hand-tuned version it replaced, and q7 those of a
//! naive evaluation of its SQL, on one and several workers (the Flink comparisons are in the
//! CLI's tests; these use a larger input, at 1,000 events per second of event time, so that
//! windows hold many bids and ties occur).

use std::collections::BTreeMap;

use spate_connectors::CollectSink;
use spate_dataflow::{DataStream, JobConfig, StreamEnv};
use spate_nexmark::generator::GeneratorConfig;
use spate_nexmark::model::Event;
use spate_nexmark::queries::{self, Row};
use spate_nexmark::source::NexmarkSource;

use crate::util::generate_all;

/// 100,000 events (100 s of event time) in 3 partitions, so the same events on any number of
/// workers.
fn config() -> GeneratorConfig {
    GeneratorConfig {
        events: Some(100_000),
        rate: 1_000.0,
        partitions: 3,
        ..GeneratorConfig::default()
    }
}

/// Runs `query` over the events of [`config`] on `workers` workers: its rows as sorted lines.
fn rows<R: Row>(
    workers: usize,
    query: impl Fn(&DataStream<Event>) -> DataStream<R>,
) -> Vec<String> {
    let env = StreamEnv::new(JobConfig::local(workers));
    let events = env.from_source(NexmarkSource::new(config(), None).expect("generator"));
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

/// q7 over all bids at once: each 10 s window's highest price over `[start, end)`, and the
/// bids at that price in `[end - 10 s, end]` (the query's SQL, evaluated naively).
fn naive_q7() -> Vec<String> {
    let cfg = config();
    let bids: Vec<_> = generate_all(&cfg)
        .into_iter()
        .filter_map(|e| e.as_bid().cloned())
        .collect();
    let size = 10_000;
    let mut max: BTreeMap<i64, i64> = BTreeMap::new();
    for b in &bids {
        let end = b.date_time - b.date_time.rem_euclid(size) + size;
        let m = max.entry(end).or_insert(b.price);
        *m = (*m).max(b.price);
    }
    let mut lines = Vec::new();
    for (&end, &price) in &max {
        for b in &bids {
            if b.price == price && (end - size..=end).contains(&b.date_time) {
                let row = queries::PriceBidRow {
                    auction: b.auction,
                    price: b.price,
                    bidder: b.bidder,
                    date_time: b.date_time,
                    extra: b.extra.clone(),
                };
                let mut out = Vec::new();
                row.write_line(&mut out);
                lines.push(String::from_utf8(out).expect("rows are UTF-8"));
            }
        }
    }
    lines.sort_unstable();
    lines
}

#[test]
fn q7_equals_a_naive_evaluation() {
    let want = naive_q7();
    assert!(want.len() >= 5, "{} rows", want.len());
    for workers in [1, 3] {
        assert_eq!(rows(workers, queries::q7), want, "{workers} workers");
    }
}
