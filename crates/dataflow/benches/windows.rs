//! Sliding-window aggregation through the real engine: a count and sum per key over
//! `RECORDS` generated records `(key, value)`, keys `i % KEYS`, event time `i * SPAN / RECORDS`
//! (in order: 20 K records per second of event time, 2 per key and second), in windows of
//! 10 s every 2 s and of 60 s every 1 s. Each runs three ways:
//!
//! * `per_window`: one accumulator per key and window (`slicing(false)`, Flink's DataStream
//!   operator): a record is added to each of its `size / slide` windows;
//! * `sliced`: one accumulator per key and slice (the default): a record is added once, and a
//!   window that fires merges its slices;
//! * `two_phase`: sliced, with the local-global pre-aggregation before the shuffle.
//!
//! on 1 worker, and `sliced` / `two_phase` on 2 workers too (where records cross the
//! exchange). Criterion's throughput is records per second of the whole job (start-up and the
//! last windows' firing included).
//!
//! Run with `cargo bench -p spate-dataflow --bench windows`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spate_dataflow::{
    AggregateFunction, JobConfig, SlidingEventTimeWindows, StreamEnv, TimeWindow,
    WatermarkStrategy, WindowContext,
};
use spate_types::{
    Sink, SinkContext, SinkWriter, Source, SourceContext, SourceOutput, SourceReader, SourceStatus,
    SpateResult,
};

/// Records per run.
const RECORDS: u64 = 2_000_000;
/// Distinct keys.
const KEYS: u64 = 10_000;
/// The event time the records span, in ms.
const SPAN: u64 = 100_000;

/// `(key, 1)` for `i` in `0..RECORDS`, split over the workers.
struct Generated;

impl Source<(u64, u64)> for Generated {
    fn name(&self) -> String {
        "generated".into()
    }

    fn is_bounded(&self) -> bool {
        true
    }

    fn create_reader(&self, ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<(u64, u64)>>> {
        Ok(Box::new(GeneratedReader {
            next: ctx.worker_index as u64,
            step: ctx.workers as u64,
        }))
    }
}

struct GeneratedReader {
    next: u64,
    step: u64,
}

impl SourceReader<(u64, u64)> for GeneratedReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, (u64, u64)>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        for _ in 0..max_records {
            if self.next >= RECORDS {
                return Ok(SourceStatus::Finished);
            }
            out.push((self.next % KEYS, self.next));
            self.next += self.step;
        }
        Ok(SourceStatus::More)
    }
}

/// Counts the window results.
struct Counting(Arc<AtomicU64>);

impl Sink<(u64, u64, u64)> for Counting {
    fn name(&self) -> String {
        "counting".into()
    }

    fn create_writer(
        &self,
        _ctx: &SinkContext,
    ) -> SpateResult<Box<dyn SinkWriter<(u64, u64, u64)>>> {
        Ok(Box::new(CountingWriter(Arc::clone(&self.0))))
    }
}

struct CountingWriter(Arc<AtomicU64>);

impl SinkWriter<(u64, u64, u64)> for CountingWriter {
    fn write_batch(&mut self, records: &mut Vec<(u64, u64, u64)>) -> SpateResult<()> {
        self.0.fetch_add(records.len() as u64, Ordering::Relaxed);
        records.clear();
        Ok(())
    }

    fn close(&mut self) -> SpateResult<()> {
        Ok(())
    }
}

/// Count and sum of the values.
struct CountSum;

impl AggregateFunction<(u64, u64)> for CountSum {
    type Acc = (u64, u64);
    type Out = (u64, u64);
    fn create_accumulator(&self) -> (u64, u64) {
        (0, 0)
    }
    fn add(&self, v: &(u64, u64), acc: &mut (u64, u64)) {
        acc.0 += 1;
        acc.1 += v.1;
    }
    fn get_result(&self, acc: &(u64, u64)) -> (u64, u64) {
        *acc
    }
    fn merge(&self, a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
        (a.0 + b.0, a.1 + b.1)
    }
}

#[derive(Clone, Copy)]
enum Path {
    PerWindow,
    Sliced,
    TwoPhase,
}

/// One run; returns the number of window results.
fn job(size_s: u64, slide_s: u64, path: Path, workers: usize) -> u64 {
    let env = StreamEnv::new(JobConfig::local(workers));
    let results = Arc::new(AtomicU64::new(0));
    env.from_source(Generated)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_monotonous_timestamps()
                .with_timestamp_assigner(|r: &(u64, u64), _| (r.1 * SPAN / RECORDS) as i64),
        )
        .key_by(|r: &(u64, u64)| r.0)
        .window(SlidingEventTimeWindows::of(
            Duration::from_secs(size_s),
            Duration::from_secs(slide_s),
        ))
        .slicing(!matches!(path, Path::PerWindow))
        .local_global(matches!(path, Path::TwoPhase))
        .aggregate_with(
            CountSum,
            |k: &u64,
             w: &WindowContext<'_, TimeWindow>,
             (n, sum): (u64, u64),
             out: &mut Vec<(u64, u64, u64)>| {
                out.push((*k, w.window.start as u64, n + sum))
            },
        )
        .sink_to(Counting(Arc::clone(&results)));
    env.execute("sliding windows").expect("the job runs");
    results.load(Ordering::Relaxed)
}

fn bench(c: &mut Criterion) {
    for (size, slide) in [(10u64, 2u64), (60, 1)] {
        // Every key has records in every window from the first to the last.
        let windows = (SPAN / 1_000 + size) / slide - 1;
        let mut group = c.benchmark_group(format!("sliding_{size}s_{slide}s"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(RECORDS));
        let cases = [
            ("per_window/1_worker", Path::PerWindow, 1),
            ("sliced/1_worker", Path::Sliced, 1),
            ("two_phase/1_worker", Path::TwoPhase, 1),
            ("sliced/2_workers", Path::Sliced, 2),
            ("two_phase/2_workers", Path::TwoPhase, 2),
        ];
        for (name, path, workers) in cases {
            group.bench_function(name, |b| {
                b.iter(|| {
                    let n = job(size, slide, path, workers);
                    assert_eq!(n, KEYS * windows, "{name}: every window of every key");
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
