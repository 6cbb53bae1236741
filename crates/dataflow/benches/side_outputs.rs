//! Side outputs through the real engine, on one worker: `source → process → sinks` over 4 M
//! generated records, where the process function sends 90 % of its records to its main
//! output and 10 % to a side output (of another type), and both are read. `plain` is a
//! non-keyed `ProcessFunction`, `keyed` a `KeyedProcessFunction` (per-key state, 64 keys).
//! Criterion's throughput is records per second of the whole job (start-up included).
//!
//! The same file builds on a tree whose side outputs are split off a tagged stream, for a
//! before/after ratio.
//!
//! Run with `cargo bench -p spate-dataflow --bench side_outputs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spate_dataflow::{
    FunctionResult, JobConfig, KeyedProcessFunction, OutputTag, ProcessContext, ProcessFunction,
    ProcessFunctionContext, StreamEnv,
};

mod common;

use common::{Counting, Generated, RECORDS};

/// Every tenth record (by value) to the side output, as text; the others to the main output.
#[derive(Clone)]
struct Plain(OutputTag<String>);

impl ProcessFunction<u64, u64> for Plain {
    fn process_element(
        &mut self,
        value: u64,
        ctx: &mut ProcessFunctionContext<'_, u64>,
    ) -> FunctionResult {
        if value % 10 == 0 {
            ctx.output(&self.0, format!("{value}"));
        } else {
            ctx.collect(value >> 1);
        }
        Ok(())
    }
}

/// [`Plain`] per key, counting the key's records in its state.
struct Keyed(OutputTag<String>);

impl KeyedProcessFunction<u64, u64, u64> for Keyed {
    type State = u64;

    fn process_element(&self, value: u64, ctx: &mut ProcessContext<'_, u64, u64, u64>) {
        *ctx.state().get_or_insert(0) += 1;
        if value % 10 == 0 {
            ctx.output(&self.0, format!("{value}"));
        } else {
            ctx.collect(value >> 1);
        }
    }
}

/// The job: 90 % of the records to the main sink, 10 % to the side sink.
fn job(keyed: bool) {
    let env = StreamEnv::new(JobConfig::local(1));
    let (main, side) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tag = OutputTag::<String>::new("tenth");
    let source = env.from_source(Generated);
    let out = if keyed {
        source.key_by(|v: &u64| v % 64).process(Keyed(tag.clone()))
    } else {
        source.process(Plain(tag.clone()))
    };
    out.sink_to(Counting(Arc::clone(&main)));
    out.side_output(&tag).sink_to(Counting(Arc::clone(&side)));
    env.execute("side outputs").expect("the job runs");
    assert_eq!(side.load(Ordering::Relaxed), RECORDS / 10);
    assert_eq!(main.load(Ordering::Relaxed), RECORDS - RECORDS / 10);
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("side_outputs");
    group.sample_size(10);
    group.throughput(Throughput::Elements(RECORDS));
    group.bench_function("plain", |b| b.iter(|| job(false)));
    group.bench_function("keyed", |b| b.iter(|| job(true)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
