//! Speed of the Nexmark generator, the JSON writer and the JSON parser, in events per second.
//!
//! `cargo bench -p spate-nexmark --bench generator`. Each benchmark handles one batch of
//! events, so criterion's throughput line reads directly as events/s (per core).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use spate_nexmark::generator::{GeneratorConfig, GeneratorShared, NexmarkGenerator};
use spate_nexmark::json::{parse_event, write_event};
use spate_nexmark::model::Event;

const BATCH: usize = 100_000;

fn config() -> GeneratorConfig {
    GeneratorConfig {
        seed: 1,
        rate: 10_000_000.0,
        ..Default::default()
    }
}

fn events(n: usize) -> Vec<Event> {
    let mut generator = NexmarkGenerator::new(&config(), 0).expect("generator");
    let mut out = Vec::with_capacity(n);
    generator.fill(&mut out, n);
    out
}

fn generate(c: &mut Criterion) {
    let mut group = c.benchmark_group("generator");
    group.throughput(Throughput::Elements(BATCH as u64));
    let cfg = config();
    let shared = GeneratorShared::cached(&cfg);
    // An unbounded generator keeps going across iterations, as in a long job; the batch is
    // dropped each time, as a pass-through query would.
    let mut generator = NexmarkGenerator::with_shared(&cfg, 0, shared.clone()).expect("generator");
    let mut buf = Vec::with_capacity(BATCH);
    group.bench_function("fill", |b| {
        b.iter(|| {
            buf.clear();
            generator.fill(&mut buf, BATCH);
            black_box(buf.len())
        })
    });
    let mut generator = NexmarkGenerator::with_shared(&cfg, 0, shared).expect("generator");
    group.bench_function("next_event", |b| {
        b.iter(|| {
            let mut sum = 0i64;
            for _ in 0..BATCH {
                let e = generator.next_event().expect("unbounded");
                sum = sum.wrapping_add(e.date_time());
            }
            black_box(sum)
        })
    });
    let mut generator = NexmarkGenerator::new(&config(), 0).expect("generator");
    let mut line = Vec::with_capacity(BATCH * 300);
    group.bench_function("fill+write_event", |b| {
        b.iter(|| {
            buf.clear();
            line.clear();
            generator.fill(&mut buf, BATCH);
            for e in &buf {
                write_event(e, &mut line);
            }
            black_box(line.len())
        })
    });
    group.finish();
}

fn json(c: &mut Criterion) {
    let events = events(BATCH);
    let mut group = c.benchmark_group("json");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut out = Vec::with_capacity(BATCH * 300);
    group.bench_function("write_event", |b| {
        b.iter(|| {
            out.clear();
            for e in &events {
                write_event(e, &mut out);
            }
            black_box(out.len())
        })
    });
    let text = out.clone();
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), BATCH);
    eprintln!(
        "json: {:.1} bytes per line",
        text.len() as f64 / BATCH as f64
    );
    group.bench_function("parse_event", |b| {
        b.iter_batched_ref(
            || Vec::with_capacity(BATCH),
            |parsed: &mut Vec<Event>| {
                for line in &lines {
                    parsed.push(parse_event(line).expect("generated lines parse"));
                }
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for line in &lines {
                let v: serde_json::Value = serde_json::from_slice(line).expect("valid JSON");
                n += v.as_object().map_or(0, |o| o.len());
            }
            black_box(n)
        })
    });
    group.finish();
}

fn shared(c: &mut Criterion) {
    let mut group = c.benchmark_group("shared");
    group.sample_size(10);
    group.bench_function("build", |b| {
        b.iter(|| black_box(GeneratorShared::new(&config())))
    });
    group.finish();
}

criterion_group!(benches, generate, json, shared);
criterion_main!(benches);
