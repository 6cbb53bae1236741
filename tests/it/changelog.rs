//! The changelog operator (`Updating`) in a job: replaying its changes gives a naive
//! group-by's result, on one and three workers, with the watermark close behind the data.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use spate::dataflow::changelog::{Change, RowKind, UpdatingAggregate};
use spate::prelude::*;

/// `(key, timestamp, value)`.
type Rec = (u8, i64, i64);

/// The two largest values of a key, largest first, with their rank: a result of several rows
/// that a new record can change in part.
struct TopTwo;

impl UpdatingAggregate<u8, Rec> for TopTwo {
    type Acc = Vec<i64>;
    type Out = (u8, i64, i64);

    fn create(&self) -> Vec<i64> {
        Vec::new()
    }

    fn add(&self, acc: &mut Vec<i64>, (_, _, v): Rec) {
        acc.push(v);
        acc.sort_unstable_by(|a, b| b.cmp(a));
        acc.truncate(2);
    }

    fn results(&self, key: &u8, acc: &Vec<i64>, out: &mut Vec<(u8, i64, i64)>) {
        out.extend(
            acc.iter()
                .enumerate()
                .map(|(rank, &v)| (*key, rank as i64 + 1, v)),
        );
    }
}

fn top_two(workers: usize, input: Vec<Rec>) -> Vec<Change<(u8, i64, i64)>> {
    let env = StreamEnv::new(JobConfig {
        epoch_max_records: 4,
        poll_batch: 4,
        max_epochs_in_flight: 2,
        auto_watermark_interval: Duration::ZERO,
        ..JobConfig::local(workers)
    });
    let out = env
        .from_collection(input)
        .assign_timestamps_and_watermarks(
            WatermarkStrategy::for_bounded_out_of_orderness(Duration::from_millis(10))
                .with_timestamp_assigner(|r: &Rec, _| r.1),
        )
        .key_by(|r: &Rec| r.0)
        .updating(TopTwo)
        .collect();
    env.execute("top two").expect("job runs");
    out.take()
}

/// The naive result: each key's two largest values with their rank.
fn naive(input: &[Rec]) -> Vec<(u8, i64, i64)> {
    let mut per_key: BTreeMap<u8, Vec<i64>> = BTreeMap::new();
    for &(k, _, v) in input {
        per_key.entry(k).or_default().push(v);
    }
    let mut rows = Vec::new();
    for (k, mut vs) in per_key {
        vs.sort_unstable_by(|a, b| b.cmp(a));
        rows.extend(
            vs.iter()
                .take(2)
                .enumerate()
                .map(|(r, &v)| (k, r as i64 + 1, v)),
        );
    }
    rows.sort_unstable();
    rows
}

/// Applies a changelog to a table, checking that every retraction removes a row that is there
/// and that each key's first change is an insertion.
fn replay(changes: &[Change<(u8, i64, i64)>]) -> Vec<(u8, i64, i64)> {
    let mut table: Vec<(u8, i64, i64)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for c in changes {
        if seen.insert(c.row.0) {
            assert_eq!(c.kind, RowKind::Insert, "first change of key {}", c.row.0);
        }
        if c.kind.is_addition() {
            table.push(c.row);
        } else {
            let at = table.iter().position(|r| *r == c.row);
            table.swap_remove(at.unwrap_or_else(|| panic!("retracted a missing row: {c:?}")));
        }
    }
    table.sort_unstable();
    table
}

fn stream() -> impl Strategy<Value = Vec<Rec>> {
    prop::collection::vec((0u8..5, 0i64..4, 0i64..10, 0i64..50), 0..150).prop_map(|steps| {
        let mut base = 1_000;
        steps
            .into_iter()
            .map(|(key, step, jitter, v)| {
                base += step;
                (key, base - jitter, v)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 10,
        rng_seed: RngSeed::Fixed(0xc4a9_6e10),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn replayed_changes_equal_a_naive_group_by_on_one_and_three_workers(input in stream()) {
        let want = naive(&input);
        for workers in [1, 3] {
            let changes = top_two(workers, input.clone());
            prop_assert_eq!(replay(&changes), want.clone(), "{} workers", workers);
        }
    }
}

#[test]
fn one_change_per_key_and_watermark_step() {
    // Every record of key 1 is at one time, so the three arrive before one watermark step:
    // one insertion per row, no intermediate updates.
    let input = vec![(1, 5, 10), (1, 5, 30), (1, 5, 20), (2, 100, 7)];
    let mut changes = top_two(1, input);
    changes.sort_by_key(|c| c.row);
    let kinds: Vec<_> = changes.iter().map(|c| (c.kind, c.row)).collect();
    assert_eq!(
        kinds,
        [
            (RowKind::Insert, (1, 1, 30)),
            (RowKind::Insert, (1, 2, 20)),
            (RowKind::Insert, (2, 1, 7)),
        ]
    );
}
