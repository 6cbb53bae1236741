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

mod common;

use common::{Counting, Generated, RECORDS};

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
