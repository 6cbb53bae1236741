//! Speed of the Nexmark generator, the JSON writer and the JSON parser, in events per second.
//!
//! `cargo bench -p spate-nexmark --bench generator`. Every benchmark handles `EVENTS` events
//! per iteration in batches of `BATCH` (as an engine would), so criterion's throughput line
//! reads directly as events per second on one core.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spate_nexmark::generator::{GeneratorConfig, GeneratorShared, NexmarkGenerator};
use spate_nexmark::json::{parse_event, write_event};
use spate_nexmark::model::Event;

/// Events per iteration.
const EVENTS: usize = 100 * BATCH;
/// Events per batch.
const BATCH: usize = 1024;

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

fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect()
}

fn generate(c: &mut Criterion) {
    let mut group = c.benchmark_group("generator");
    group.throughput(Throughput::Elements(EVENTS as u64));
    let cfg = config();
    let shared = GeneratorShared::cached(&cfg);
    // Unbounded generators keep going across iterations, as in a long job; each batch is
    // dropped, as a pass-through query would.
    let mut generator = NexmarkGenerator::with_shared(&cfg, 0, shared).expect("generator");
    let mut batch = Vec::with_capacity(BATCH);
    group.bench_function("fill", |b| {
        b.iter(|| {
            for _ in 0..EVENTS / BATCH {
                batch.clear();
                generator.fill(&mut batch, BATCH);
                black_box(&batch);
            }
        })
    });
    let mut generator = NexmarkGenerator::with_shared(&cfg, 0, shared).expect("generator");
    group.bench_function("next_event", |b| {
        b.iter(|| {
            for _ in 0..EVENTS {
                black_box(generator.next_event());
            }
        })
    });
    let mut generator = NexmarkGenerator::with_shared(&cfg, 0, shared).expect("generator");
    let mut out = Vec::with_capacity(BATCH * 400);
    group.bench_function("fill+write_event", |b| {
        b.iter(|| {
            for _ in 0..EVENTS / BATCH {
                batch.clear();
                out.clear();
                generator.fill(&mut batch, BATCH);
                for e in &batch {
                    write_event(e, &mut out);
                }
                black_box(&out);
            }
        })
    });
    group.finish();
}

fn json(c: &mut Criterion) {
    let events = events(EVENTS);
    let mut group = c.benchmark_group("json");
    group.throughput(Throughput::Elements(EVENTS as u64));
    let mut out = Vec::with_capacity(BATCH * 400);
    group.bench_function("write_event", |b| {
        b.iter(|| {
            for chunk in events.chunks(BATCH) {
                out.clear();
                for e in chunk {
                    write_event(e, &mut out);
                }
                black_box(&out);
            }
        })
    });

    let mut text = Vec::new();
    for e in &events {
        write_event(e, &mut text);
    }
    let generated = lines(&text);
    // The same events with sorted keys.
    let mut sorted_text = Vec::new();
    for line in &generated {
        let v: serde_json::Value = serde_json::from_slice(line).expect("valid JSON");
        serde_json::to_writer(&mut sorted_text, &v).expect("write JSON");
        sorted_text.push(b'\n');
    }
    let sorted = lines(&sorted_text);
    let mut parsed = Vec::with_capacity(BATCH);
    for (name, input) in [
        ("parse_event", &generated),
        ("parse_event_sorted_keys", &sorted),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                for chunk in input.chunks(BATCH) {
                    parsed.clear();
                    for line in chunk {
                        parsed.push(parse_event(line).expect("generated lines parse"));
                    }
                    black_box(&parsed);
                }
            })
        });
    }
    group.bench_function("serde_json_value", |b| {
        b.iter(|| {
            for line in &generated {
                let v: serde_json::Value = serde_json::from_slice(line).expect("valid JSON");
                black_box(v);
            }
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
