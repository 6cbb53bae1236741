//! Benchmarks of the connectors' hot paths: raw JSON-lines splitting (before any decoding) and
//! the unthrottled sequence generator.
//!
//! Run with `cargo bench -p spate-connectors`.

use std::hint::black_box;
use std::io::Write;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spate_connectors::files::JsonLinesSource;
use spate_connectors::SequenceSource;
use spate_types::{Source, SourceContext, SourceOutput, SourceStatus};

/// Writes a JSON-lines file of about `bytes` bytes with Nexmark-bid-like lines (~120 bytes).
fn write_file(path: &std::path::Path, bytes: usize) -> u64 {
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(path).expect("create the bench file"));
    let mut written = 0;
    let mut i = 0u64;
    while written < bytes {
        let line = format!(
            "{{\"auction\":{},\"bidder\":{},\"price\":{},\"channel\":\"Google\",\"url\":\"https://www.nexmark.com/a/b/c\",\"date_time\":{}}}\n",
            1000 + i % 997,
            2000 + i % 7919,
            i * 31 % 100_000,
            1_704_067_200_000u64 + i
        );
        out.write_all(line.as_bytes())
            .expect("write the bench file");
        written += line.len();
        i += 1;
    }
    out.flush().expect("flush the bench file");
    written as u64
}

/// Reads every record of one reader; returns the number of records.
fn drain<T: 'static>(source: &dyn Source<T>, records: &mut Vec<T>) -> usize {
    let mut reader = source
        .create_reader(&SourceContext {
            worker_index: 0,
            workers: 1,
        })
        .expect("reader");
    let (mut dead, mut dropped, mut total) = (Vec::new(), 0, 0);
    loop {
        records.clear();
        let status = reader
            .poll(
                &mut SourceOutput::new(records, &mut dead, &mut dropped),
                8192,
            )
            .expect("poll");
        total += records.len();
        if status == SourceStatus::Finished {
            return total;
        }
    }
}

fn jsonl_split(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bids.jsonl");
    let bytes = write_file(&path, 256 << 20);
    let mut group = c.benchmark_group("jsonl");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    // The decoder does (almost) nothing: this measures finding and handing out lines.
    let source = JsonLinesSource::with_decoder(&path, Arc::new(|line: &[u8]| Ok(line.len())));
    let mut records = Vec::with_capacity(8192);
    group.bench_function("raw_line_splitting", |b| {
        b.iter(|| black_box(drain(&source, &mut records)))
    });
    group.finish();
}

fn sequence(c: &mut Criterion) {
    let n = 100_000_000u64;
    let mut group = c.benchmark_group("sequence");
    group.throughput(Throughput::Elements(n));
    group.sample_size(10);
    let source = SequenceSource::new(0, Some(n));
    let mut records = Vec::with_capacity(8192);
    group.bench_function("unthrottled", |b| {
        b.iter(|| black_box(drain(&source, &mut records)))
    });
    group.finish();
}

criterion_group!(benches, jsonl_split, sequence);
criterion_main!(benches);
