//! Operator chaining through the real engine, on one worker:
//! `source → map → filter → map → flat_map → sink` over 4 M generated records, with the four
//! forward operators chained into one timely operator (`chained`) and with
//! `StreamEnv::disable_operator_chaining` (`unchained`: four timely operators). Criterion's
//! throughput is records per second of the whole job (start-up included, a few ms).
//!
//! Run with `cargo bench -p spate-dataflow --bench chaining`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spate_dataflow::{JobConfig, StreamEnv};
use spate_types::{
    Sink, SinkContext, SinkWriter, Source, SourceContext, SourceOutput, SourceReader, SourceStatus,
    SpateResult,
};

/// Records per job.
const RECORDS: u64 = 4_000_000;

/// `0..RECORDS`.
struct Generated;

impl Source<u64> for Generated {
    fn name(&self) -> String {
        "generated".into()
    }

    fn is_bounded(&self) -> bool {
        true
    }

    fn create_reader(&self, _ctx: &SourceContext) -> SpateResult<Box<dyn SourceReader<u64>>> {
        Ok(Box::new(GeneratedReader { next: 0 }))
    }
}

struct GeneratedReader {
    next: u64,
}

impl SourceReader<u64> for GeneratedReader {
    fn poll(
        &mut self,
        out: &mut SourceOutput<'_, u64>,
        max_records: usize,
    ) -> SpateResult<SourceStatus> {
        let end = RECORDS.min(self.next + max_records as u64);
        for i in self.next..end {
            out.push(i);
        }
        self.next = end;
        Ok(if self.next < RECORDS {
            SourceStatus::More
        } else {
            SourceStatus::Finished
        })
    }
}

/// Counts what it receives.
struct Counting(Arc<AtomicU64>);

impl Sink<u64> for Counting {
    fn name(&self) -> String {
        "counting".into()
    }

    fn create_writer(&self, _ctx: &SinkContext) -> SpateResult<Box<dyn SinkWriter<u64>>> {
        Ok(Box::new(CountingWriter(Arc::clone(&self.0))))
    }
}

struct CountingWriter(Arc<AtomicU64>);

impl SinkWriter<u64> for CountingWriter {
    fn write_batch(&mut self, records: &mut Vec<u64>) -> SpateResult<()> {
        self.0.fetch_add(records.len() as u64, Ordering::Relaxed);
        records.clear();
        Ok(())
    }

    fn close(&mut self) -> SpateResult<()> {
        Ok(())
    }
}

/// The job; two thirds of the records pass the filter and `flat_map` doubles them.
fn job(chaining: bool) {
    let env = StreamEnv::new(JobConfig::local(1));
    if !chaining {
        env.disable_operator_chaining();
    }
    let seen = Arc::new(AtomicU64::new(0));
    env.from_source(Generated)
        .map(|x| x.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .filter(|x| x % 3 != 0)
        .map(|x| x >> 7)
        .flat_map(|x| [x, x + 1])
        .sink_to(Counting(Arc::clone(&seen)));
    let result = env.execute("chaining").expect("the job runs");
    assert!(seen.load(Ordering::Relaxed) > RECORDS);
    assert!(result.operators > 0);
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("chaining");
    group.sample_size(10);
    group.throughput(Throughput::Elements(RECORDS));
    group.bench_function("chained", |b| b.iter(|| job(true)));
    group.bench_function("unchained", |b| b.iter(|| job(false)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
