//! The keyed hot path through the real engine, on one worker:
//!
//! * `keyed_reduce/{10k,1m}_keys`: a rolling sum per key (`KeyedStream::reduce`) over 4 M
//!   generated `(key, 1)` records, keys `i % keys`; criterion's throughput is records per
//!   second of the whole job (start-up included, a few ms).
//! * `window_fire/{100k,1m}_keys`: one record per key, all in one tumbling event-time window,
//!   then the end of the input brings the watermark past it. Only the firing is measured:
//!   from the moment the source ends (after the records have been processed) until the sink
//!   has received every window result, so the time covers the watermark's way to the window
//!   operator, popping one timer per key, each key's `on_timer`, and emitting the results.
//!
//! Run with `cargo bench -p spate-dataflow --bench keyed`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spate_dataflow::{JobConfig, StreamEnv, TumblingEventTimeWindows, WatermarkStrategy};
use spate_types::{
    Sink, SinkContext, SinkWriter, Source, SourceContext, SourceOutput, SourceReader, SourceStatus,
    SpateResult,
};

/// Records of the reduce benchmarks.
const REDUCE_RECORDS: u64 = 4_000_000;

/// The window's size; record `i` is at event time `i % WINDOW_MS`, all in the first window.
const WINDOW_MS: u64 = 60_000;

/// `(key, 1)` for `i` in `0..records`, key `i % keys`; when it has emitted them all it waits
/// `drain` (so that the records are processed) and notes the instant it finishes.
struct Generated {
    records: u64,
    keys: u64,
    drain: Duration,
    finished_at: Arc<Mutex<Option<Instant>>>,
}

impl Source<(u64, u64)> for Generated {
    fn name(&self) -> String {
        "generated".into()
    }

    fn is_bounded(&self) -> bool {
        true
    }

    fn create_reader(
        &self,
        _ctx: &SourceContext,
    ) -> SpateResult<Box<dyn SourceReader<(u64, u64)>>> {
        Ok(Box::new(GeneratedReader {
            next: 0,
            records: self.records,
            keys: self.keys,
            drain: self.drain,
            emitted_at: None,
            finished_at: Arc::clone(&self.finished_at),
        }))
    }
}

struct GeneratedReader {
    next: u64,
    records: u64,
    keys: u64,
    drain: Duration,
    emitted_at: Option<Instant>,
    finished_at: Arc<Mutex<Option<Instant>>>,
}

impl SourceReader<(u64, u64)> for GeneratedReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, (u64, u64)>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let end = self.records.min(self.next + max_records as u64);
        for i in self.next..end {
            out.push((i % self.keys, 1));
        }
        self.next = end;
        if self.next < self.records {
            return Ok(SourceStatus::More);
        }
        let emitted_at = *self.emitted_at.get_or_insert_with(Instant::now);
        if emitted_at.elapsed() < self.drain {
            return Ok(SourceStatus::Idle);
        }
        *self.finished_at.lock().expect("not poisoned") = Some(Instant::now());
        Ok(SourceStatus::Finished)
    }
}

/// Counts what it receives and notes the instant the `expected`-th record arrives.
struct Counting {
    expected: u64,
    seen: Arc<AtomicU64>,
    done_at: Arc<Mutex<Option<Instant>>>,
}

impl Sink<(u64, u64)> for Counting {
    fn name(&self) -> String {
        "counting".into()
    }

    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<(u64, u64)>>> {
        Ok(Box::new(CountingWriter {
            expected: self.expected,
            seen: Arc::clone(&self.seen),
            done_at: Arc::clone(&self.done_at),
        }))
    }
}

struct CountingWriter {
    expected: u64,
    seen: Arc<AtomicU64>,
    done_at: Arc<Mutex<Option<Instant>>>,
}

impl SinkWriter<(u64, u64)> for CountingWriter {
    fn write_batch(&mut self, records: &mut Vec<(u64, u64)>) -> SpateResult<()> {
        let n = records.len() as u64;
        records.clear();
        let seen = self.seen.fetch_add(n, Ordering::Relaxed) + n;
        if seen >= self.expected && self.expected > 0 {
            let mut done = self.done_at.lock().expect("not poisoned");
            done.get_or_insert_with(Instant::now);
        }
        Ok(())
    }

    fn close(&mut self) -> SpateResult<()> {
        Ok(())
    }
}

/// A rolling sum per key over `REDUCE_RECORDS` records and `keys` keys.
fn reduce_job(keys: u64) {
    let env = StreamEnv::new(JobConfig::local(1));
    let seen = Arc::new(AtomicU64::new(0));
    env.from_source(Generated {
        records: REDUCE_RECORDS,
        keys,
        drain: Duration::ZERO,
        finished_at: Arc::default(),
    })
    .key_by(|r: &(u64, u64)| r.0)
    .reduce(|a, b| (a.0, a.1 + b.1))
    .sink_to(Counting {
        expected: 0,
        seen: Arc::clone(&seen),
        done_at: Arc::default(),
    });
    env.execute("keyed-reduce").expect("the job runs");
    assert_eq!(seen.load(Ordering::Relaxed), REDUCE_RECORDS);
}

/// One record per key in one tumbling window; returns the time from the end of the input to
/// the last window result at the sink.
fn window_fire_job(keys: u64) -> Duration {
    let env = StreamEnv::new(JobConfig::local(1));
    let finished_at = Arc::new(Mutex::new(None));
    let done_at = Arc::new(Mutex::new(None));
    let seen = Arc::new(AtomicU64::new(0));
    env.from_source(Generated {
        records: keys,
        keys,
        // Long enough for the records to be processed (and far below the window's end, so
        // no watermark fires it before the input ends).
        drain: Duration::from_millis(300 + keys / 2_000),
        finished_at: Arc::clone(&finished_at),
    })
    .assign_timestamps_and_watermarks(
        WatermarkStrategy::for_monotonous_timestamps()
            .with_timestamp_assigner(|r: &(u64, u64), _| (r.0 % WINDOW_MS) as i64),
    )
    .key_by(|r: &(u64, u64)| r.0)
    .window(TumblingEventTimeWindows::of(Duration::from_millis(
        WINDOW_MS,
    )))
    .reduce(|a, b| (a.0, a.1 + b.1))
    .sink_to(Counting {
        expected: keys,
        seen: Arc::clone(&seen),
        done_at: Arc::clone(&done_at),
    });
    env.execute("window-fire").expect("the job runs");
    assert_eq!(seen.load(Ordering::Relaxed), keys);
    let from = finished_at.lock().unwrap().expect("the source finished");
    let to = done_at.lock().unwrap().expect("every window fired");
    to.duration_since(from)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("keyed_reduce");
    group.sample_size(10);
    group.throughput(Throughput::Elements(REDUCE_RECORDS));
    for (name, keys) in [("10k_keys", 10_000u64), ("1m_keys", 1_000_000)] {
        group.bench_function(name, |b| b.iter(|| reduce_job(keys)));
    }
    group.finish();

    let mut group = c.benchmark_group("window_fire");
    group.sample_size(10);
    for (name, keys) in [("100k_keys", 100_000u64), ("1m_keys", 1_000_000)] {
        group.throughput(Throughput::Elements(keys));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| window_fire_job(keys)).sum())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
