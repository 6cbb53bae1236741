//! The dedup operator's table (one key group's event-time buckets, Bloom filters over exact id
//! stores): throughput with and without duplicates, and, printed before the timings, the
//! measured false-positive rate of the Bloom fast path against the configured one and the
//! memory per id.
//!
//! Run with `cargo bench -p spate-dataflow --bench dedup`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spate_dataflow::dedup::{BloomFilter, DedupCounts, DedupTable, TableParams};
use spate_dataflow::DedupConfig;
use spate_types::keygroup::stable_hash;

/// Ids per run: one bucket's worth of one key group.
const IDS: u64 = 200_000;

fn config(fpr: f64) -> DedupConfig {
    DedupConfig {
        retention: Duration::from_secs(60),
        buckets: 6,
        expected_ids_per_bucket: IDS,
        false_positive_rate: fpr,
    }
}

/// Observes `ids` at event time `ts`; returns the number kept.
fn observe_all(table: &mut DedupTable<u64>, params: &TableParams, ids: &[u64], ts: i64) -> u64 {
    let mut counts = DedupCounts::default();
    let mut kept = 0;
    for id in ids {
        kept += u64::from(table.observe(params, id, stable_hash(id), ts, &mut counts));
    }
    kept
}

/// The measured false-positive rates and memory, printed once.
///
/// * at the configured load: the filter of a bucket holding exactly the expected ids, asked
///   about 1 M other ids;
/// * while filling: the table's own count of refuted Bloom positives while the bucket fills
///   from empty to the expected ids (each new id is looked up, then added), which is what a
///   job sees on average;
/// * memory per id once the bucket holds the expected ids.
fn report() {
    println!("dedup: one key group's bucket sized for {IDS} ids");
    println!(
        "| configured FPR | measured FPR at the configured load | measured FPR while filling | bits/id | probes | memory/id (filter + exact store) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for fpr in [0.1, 0.01, 0.001] {
        let params = TableParams::new(&config(fpr), 1);
        let mut table = DedupTable::<u64>::default();
        let mut counts = DedupCounts::default();
        for id in 0..IDS {
            table.observe(&params, &id, stable_hash(&id), 1_000, &mut counts);
        }
        let filling = counts.false_positives as f64 / counts.probes as f64;
        let memory = table.memory_bytes() as f64 / IDS as f64;
        let mut bloom = BloomFilter::new(IDS, fpr);
        for id in 0..IDS {
            bloom.insert(stable_hash(&id));
        }
        let queries = 1_000_000u64;
        let positives = (IDS..IDS + queries)
            .filter(|id| bloom.contains(stable_hash(id)))
            .count();
        println!(
            "| {fpr} | {:.4} | {filling:.4} | {:.1} | {} | {memory:.1} B |",
            positives as f64 / queries as f64,
            bloom.bits() as f64 / IDS as f64,
            bloom.probes(),
        );
    }
}

fn bench(c: &mut Criterion) {
    report();
    let params = TableParams::new(&config(0.01), 1);
    let unique: Vec<u64> = (0..IDS).collect();
    // Every id three times in a row: two thirds are duplicates.
    let with_dups: Vec<u64> = (0..IDS).map(|i| i / 3 * 3 + 7_000_000).collect();
    let mut group = c.benchmark_group("dedup");
    group.throughput(Throughput::Elements(IDS));
    group.bench_function("unique ids", |b| {
        b.iter(|| {
            let mut table = DedupTable::<u64>::default();
            black_box(observe_all(&mut table, &params, &unique, 1_000))
        })
    });
    group.bench_function("two thirds duplicates", |b| {
        b.iter(|| {
            let mut table = DedupTable::<u64>::default();
            black_box(observe_all(&mut table, &params, &with_dups, 1_000))
        })
    });
    group.bench_function("unique ids, 6 live buckets", |b| {
        // Five older buckets are probed (and answer no) before the new id is stored.
        let older: Vec<Vec<u64>> = (0..5u64)
            .map(|bucket| {
                (0..IDS / 5)
                    .map(|i| 1_000_000_000 + bucket * IDS + i)
                    .collect()
            })
            .collect();
        b.iter_batched(
            || {
                let mut table = DedupTable::<u64>::default();
                for (bucket, ids) in older.iter().enumerate() {
                    observe_all(&mut table, &params, ids, bucket as i64 * 10_000);
                }
                table
            },
            |mut table| black_box(observe_all(&mut table, &params, &unique, 55_000)),
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
